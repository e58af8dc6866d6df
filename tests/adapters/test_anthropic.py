"""The Anthropic Messages adapter and its `anthropic-messages` dialect.

Everything goes through the real client (`AsyncClient` / `Client`), the core and the
adapter, against `fakeservers.FakeTransport`, a loopback `FakeServer`, or an
`httpx.MockTransport` serving hand-written event streams where a test needs wire shapes
the dialect does not produce (interleaved blocks, server tools, error events).
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import httpx
import pytest
from helpers import NO_RETRY, Caller, settings_for

import anyinfer as ai
import anyinfer.fakeservers as fs
from anyinfer._providers.anthropic import (
    DEFAULT_MAX_TOKENS,
    AnthropicAdapter,
    assistant_message,
    content_blocks,
)
from anyinfer._request import GenerationRequest
from anyinfer.fakeservers import (
    Fault,
    Reasoning,
    Script,
    ScriptUsage,
    Text,
    ToolFragment,
    UsagePlacement,
)

DIALECT = fs.AnthropicDialect()
MODEL = "claude-test"


def route(**kw: Any) -> ai.Route:
    return ai.Route(f"anthropic:{MODEL}", retry=NO_RETRY, **kw)


provider = settings_for("anthropic", api_key="sk-ant-test")
# stream(transport, messages="hi", *, retain_raw=False, settings=None, **kw) -> Outcome
# (events, result, error); generate(...) alike -> Generation. `settings` goes to provider().
_CALLS = Caller(provider, route=route())
stream, generate = _CALLS.stream, _CALLS.generate


def sent_body(messages: Any = "hi", *, settings: dict[str, Any] | None = None, **kw: Any) -> Any:
    """The JSON body the adapter sends for one call (answered with a short reply)."""
    transport = fs.FakeTransport(DIALECT, [Script(pieces=(Text("ok"),))])
    result = generate(transport, messages, settings=settings, **kw)
    assert result.text == "ok"
    transport.assert_all_used()
    (request,) = transport.requests
    assert (request.method, request.path) == ("POST", "/v1/messages")
    return request.json


def events_body(*events: dict[str, Any]) -> bytes:
    return b"".join(DIALECT.sse_event(e) for e in events)


def serve(body: bytes, status: int = 200, headers: dict[str, str] | None = None) -> Any:
    """A MockTransport answering every request with `body`; requests land in `.seen`."""
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        hdrs = {"content-type": "text/event-stream" if status == 200 else "application/json"}
        hdrs.update(headers or {})
        return httpx.Response(status, content=body, headers=hdrs)

    transport = httpx.MockTransport(handler)
    transport.seen = seen  # type: ignore[attr-defined]
    return transport


def start(usage: dict[str, Any] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": usage or {"input_tokens": 3, "output_tokens": 1},
    }
    return {"type": "message_start", "message": message}


def block_start(index: int, block: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_start", "index": index, "content_block": block}


def delta(index: int, **d: Any) -> dict[str, Any]:
    return {"type": "content_block_delta", "index": index, "delta": d}


def block_stop(index: int) -> dict[str, Any]:
    return {"type": "content_block_stop", "index": index}


def message_delta(reason: str | None, usage: dict[str, Any] | None = None) -> dict[str, Any]:
    event: dict[str, Any] = {
        "type": "message_delta",
        "delta": {"stop_reason": reason, "stop_sequence": None},
    }
    if usage is not None:
        event["usage"] = usage
    return event


STOP = {"type": "message_stop"}
PING = {"type": "ping"}


def text_stream(reason: str = "end_turn", text: str = "Hi") -> bytes:
    return events_body(
        start(),
        block_start(0, {"type": "text", "text": ""}),
        delta(0, type="text_delta", text=text),
        block_stop(0),
        message_delta(reason, {"output_tokens": 2}),
        STOP,
    )


# --- request mapping ------------------------------------------------------------------------


def test_headers_carry_key_and_version() -> None:
    transport = serve(text_stream())
    stream(transport)
    (request,) = transport.seen
    assert request.url == "https://api.anthropic.com/v1/messages"
    assert request.headers["x-api-key"] == "sk-ant-test"
    assert request.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in request.headers

    pinned = serve(text_stream())
    stream(pinned, settings={"api_version": "2024-01-01", "headers": {"anthropic-beta": "x"}})
    assert pinned.seen[0].headers["anthropic-version"] == "2024-01-01"
    assert pinned.seen[0].headers["anthropic-beta"] == "x"


def test_system_prompt_is_top_level_and_max_tokens_defaults() -> None:
    body = sent_body(
        [ai.Message.system("Be brief."), ai.Message.system("Be kind."), ai.Message.user("hi")]
    )
    assert body["system"] == "Be brief.\n\nBe kind."
    assert body["messages"] == [{"role": "user", "content": "hi"}]
    assert body["max_tokens"] == DEFAULT_MAX_TOKENS == 4096
    assert body["model"] == MODEL
    assert "stream" not in body  # generate() asks for a whole Message


def test_default_max_tokens_option() -> None:
    body = sent_body(settings={"options": {"default_max_tokens": 1000}})
    assert body["max_tokens"] == 1000
    with pytest.raises(ai.ConfigError, match="default_max_tokens"):
        AnthropicAdapter(ai.ProviderSettings("anthropic", options={"default_max_tokens": 0}))


def test_images_map_to_base64_and_url_sources() -> None:
    png = b"\x89PNG\r\n"
    body = sent_body(
        ai.Message.user(
            [
                ai.TextContent("What is this?"),
                ai.ImageContent(data=png, media_type="image/png"),
                ai.ImageContent(url="data:image/jpeg;base64,AAAA"),
                ai.ImageContent(url="https://example.com/cat.webp"),
            ]
        )
    )
    (message,) = body["messages"]
    assert message == {
        "role": "user",
        "content": [
            {"type": "text", "text": "What is this?"},
            {
                "type": "image",
                "source": {
                    "type": "base64",
                    "media_type": "image/png",
                    "data": base64.b64encode(png).decode(),
                },
            },
            {
                "type": "image",
                "source": {"type": "base64", "media_type": "image/jpeg", "data": "AAAA"},
            },
            {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.webp"}},
        ],
    }


WEATHER = ai.ToolSpec(
    "weather",
    "Current weather for a city",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
CLOCK = ai.ToolSpec("clock")


@pytest.mark.parametrize(
    ("choice", "wire"),
    [
        ("auto", {"type": "auto"}),
        ("required", {"type": "any"}),
        ("none", {"type": "none"}),
        ("weather", {"type": "tool", "name": "weather"}),
    ],
)
def test_tools_and_tool_choice(choice: str, wire: dict[str, Any]) -> None:
    body = sent_body(tools=[WEATHER, CLOCK], tool_choice=choice)
    assert body["tools"] == [
        {
            "name": "weather",
            "description": "Current weather for a city",
            "input_schema": dict(WEATHER.parameters),
        },
        {"name": "clock", "input_schema": {"type": "object", "properties": {}}},
    ]
    assert body["tool_choice"] == wire


def test_no_tools_sends_no_tool_fields() -> None:
    body = sent_body()
    assert "tools" not in body and "tool_choice" not in body


def test_sampling_controls() -> None:
    sampling = ai.Sampling(temperature=0.3, top_p=0.9, max_output_tokens=77, stop=("END", "##"))
    body = sent_body(sampling=sampling)
    assert body["temperature"] == 0.3
    assert body["top_p"] == 0.9
    assert body["max_tokens"] == 77
    assert body["stop_sequences"] == ["END", "##"]


def test_unsupported_sampling_controls_are_dropped_with_a_warning() -> None:
    transport = fs.FakeTransport(DIALECT, [Script(pieces=(Text("ok"),))])
    sampling = ai.Sampling(seed=7, frequency_penalty=0.5)
    result = generate(transport, sampling=sampling)
    body = transport.requests[0].json
    assert "seed" not in body and "frequency_penalty" not in body
    assert any("seed, frequency_penalty" in w for w in result.warnings)


@pytest.mark.parametrize(
    ("effort", "budget"), [("minimal", 1024), ("low", 1024), ("medium", 4096), ("high", 16384)]
)
def test_reasoning_effort_becomes_a_thinking_budget(effort: str, budget: int) -> None:
    body = sent_body(reasoning=effort)
    assert body["thinking"] == {"type": "enabled", "budget_tokens": budget}
    # Thinking counts against max_tokens: the answer keeps the default room on top.
    assert body["max_tokens"] == budget + DEFAULT_MAX_TOKENS


def test_reasoning_none_sends_no_thinking() -> None:
    body = sent_body(reasoning="none")
    assert "thinking" not in body
    assert body["max_tokens"] == DEFAULT_MAX_TOKENS


def test_explicit_cap_bounds_the_thinking_budget() -> None:
    roomy = sent_body(reasoning="medium", sampling=ai.Sampling(max_output_tokens=10_000))
    assert roomy["max_tokens"] == 10_000
    assert roomy["thinking"]["budget_tokens"] == 4096
    tight = sent_body(reasoning="high", sampling=ai.Sampling(max_output_tokens=3000))
    assert tight["max_tokens"] == 3000
    assert tight["thinking"]["budget_tokens"] == 2999  # must stay below max_tokens


def test_cap_below_the_minimum_budget_drops_thinking_with_a_warning() -> None:
    transport = fs.FakeTransport(DIALECT, [Script(pieces=(Text("ok"),))])
    result = generate(transport, reasoning="low", sampling=ai.Sampling(max_output_tokens=1024))
    body = transport.requests[0].json
    assert "thinking" not in body
    assert body["max_tokens"] == 1024
    assert any("minimum thinking budget" in w for w in result.warnings)


def test_multi_turn_with_tool_calls_and_results() -> None:
    conversation = [
        ai.Message.system("sys"),
        ai.Message.user("Weather in Paris and Oslo?"),
        ai.Message.assistant(
            "Checking.",
            [
                ai.ToolCall("toolu_1", "weather", {"city": "Paris"}),
                ai.ToolCall("toolu_2", "weather", {"city": "Oslo"}),
            ],
        ),
        ai.Message.tool_result("toolu_1", "18C"),
        ai.Message.tool_result("toolu_2", "no data", is_error=True),
        ai.Message.user("Thanks, and tomorrow?"),
        ai.Message.assistant("I cannot tell."),
        ai.Message.user("ok"),
    ]
    body = sent_body(conversation, tools=[WEATHER])
    assert body["system"] == "sys"
    assert body["messages"] == [
        {"role": "user", "content": "Weather in Paris and Oslo?"},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Checking."},
                {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "weather",
                    "input": {"city": "Paris"},
                },
                {"type": "tool_use", "id": "toolu_2", "name": "weather", "input": {"city": "Oslo"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "18C"},
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_2",
                    "content": "no data",
                    "is_error": True,
                },
            ],
        },
        {"role": "user", "content": "Thanks, and tomorrow?"},
        {"role": "assistant", "content": "I cannot tell."},
        {"role": "user", "content": "ok"},
    ]


def test_assistant_tool_call_without_text_sends_only_tool_use() -> None:
    body = sent_body(
        [
            ai.Message.user("go"),
            ai.Message.assistant("", [ai.ToolCall("toolu_9", "clock", {})]),
            ai.Message.tool_result("toolu_9", "noon"),
        ],
        tools=[CLOCK],
    )
    assert body["messages"][1]["content"] == [
        {"type": "tool_use", "id": "toolu_9", "name": "clock", "input": {}}
    ]


def test_native_assistant_blocks_are_sent_verbatim() -> None:
    blocks = [
        {"type": "thinking", "thinking": "hmm", "signature": "sig=="},
        {"type": "redacted_thinking", "data": "opaque"},
        {"type": "tool_use", "id": "toolu_3", "name": "clock", "input": {}},
    ]
    turn = ai.Message(
        "assistant",
        "",
        tool_calls=(ai.ToolCall("toolu_3", "clock", {}),),
        provider_data={"anthropic": {"content": blocks}},
    )
    body = sent_body(
        [ai.Message.user("t?"), turn, ai.Message.tool_result("toolu_3", "noon")], tools=[CLOCK]
    )
    assert body["messages"][1] == {"role": "assistant", "content": blocks}


def test_provider_options_are_merged_last() -> None:
    body = sent_body(
        reasoning="low",
        provider_options={"anthropic": {"top_k": 5, "thinking": {"type": "adaptive"}}},
    )
    assert body["top_k"] == 5
    assert body["thinking"] == {"type": "adaptive"}


def test_response_format_mapping() -> None:
    adapter = AnthropicAdapter(ai.ProviderSettings("anthropic", api_key="k"))
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    base = GenerationRequest(model=MODEL, messages=(ai.Message.user("x"),))
    body, warnings = adapter.build_body(
        GenerationRequest(
            model=MODEL,
            messages=base.messages,
            response_format={"type": "json_schema", "name": "out", "schema": schema},
        )
    )
    assert body["output_config"] == {"format": {"type": "json_schema", "schema": schema}}
    assert warnings == []
    body, warnings = adapter.build_body(
        GenerationRequest(
            model=MODEL, messages=base.messages, response_format={"type": "json_object"}
        )
    )
    assert "output_config" not in body
    assert warnings and "no JSON mode" in warnings[0]
    asyncio.run(adapter.aclose())


def test_claude_alias_selects_the_adapter() -> None:
    settings = ai.ProviderSettings.of("claude", api_key="k")
    assert settings.provider_id == "anthropic"
    assert ai.default_registry().adapter_class("claude") is AnthropicAdapter


# --- streams --------------------------------------------------------------------------------


def test_stream_text_thinking_tools_and_split_usage() -> None:
    script = Script(
        pieces=(
            Reasoning("Let me "),
            Reasoning("think 🤔"),
            Text("Héllo, "),
            ToolFragment(0, '{"city": ', id="toolu_a", name="weather"),
            ToolFragment(0, '"Paris"}'),
            ToolFragment(1, "", id="toolu_b", name="clock"),
        ),
        finish_reason="tool_calls",
        usage=ScriptUsage(
            input_tokens=12,
            output_tokens=34,
            cache_read_tokens=100,
            cache_write_tokens=7,
            reasoning_tokens=9,
        ),
        usage_placement="split",
        keepalives=(1, 4),
        read_sizes=(1,),  # byte by byte: every multi-byte character is split
    )
    transport = fs.FakeTransport(DIALECT, [script])
    events, result, error = stream(transport, tools=[WEATHER, CLOCK])
    assert error is None and result is not None
    assert result.text == "Héllo, "
    assert result.reasoning == "Let me think 🤔"
    assert result.tool_calls == (
        ai.ToolCall("toolu_a", "weather", {"city": "Paris"}),
        ai.ToolCall("toolu_b", "clock", {}),
    )
    assert result.finish_reason == "tool_calls"
    assert result.usage == ai.Usage(
        input_tokens=12,
        output_tokens=34,
        total_tokens=46,
        cache_read_tokens=100,
        cache_write_tokens=7,
        reasoning_tokens=9,
    )
    assert not result.warnings
    updates = [e.usage for e in events if isinstance(e, ai.UsageUpdate)]
    # message_start reports the input side (and a provisional output count) before any
    # content, message_delta the final output side.
    start = DIALECT.render(script, stream=True).frames[0]
    provisional = dict(start.usage_values).get("output_tokens", 34)
    assert 0 <= provisional <= 34
    assert updates[0] == ai.Usage(
        input_tokens=12, output_tokens=provisional, cache_read_tokens=100, cache_write_tokens=7
    )
    first_content = next(i for i, e in enumerate(events) if isinstance(e, ai.ReasoningDelta))
    assert events.index(next(e for e in events if isinstance(e, ai.UsageUpdate))) < first_content
    assert updates[1] == ai.Usage(output_tokens=34, reasoning_tokens=9)
    assert isinstance(events[-1], ai.StreamEnded)


def test_later_usage_wins_over_message_start() -> None:
    body = events_body(
        start({"input_tokens": 20, "output_tokens": 1, "cache_read_input_tokens": 0}),
        PING,
        block_start(0, {"type": "text", "text": ""}),
        delta(0, type="text_delta", text="2"),
        block_stop(0),
        message_delta(
            "end_turn",
            {
                "input_tokens": 20,
                "output_tokens": 5,
                "output_tokens_details": {"thinking_tokens": 0},
            },
        ),
        STOP,
    )
    _, result, _ = stream(serve(body))
    assert result is not None
    assert result.usage == ai.Usage(
        input_tokens=20, output_tokens=5, total_tokens=25, cache_read_tokens=0, reasoning_tokens=0
    )


def test_cache_write_from_the_ttl_breakdown_alone() -> None:
    body = events_body(
        start(
            {
                "input_tokens": 4,
                "cache_creation": {"ephemeral_5m_input_tokens": 10, "ephemeral_1h_input_tokens": 5},
            }
        ),
        message_delta("end_turn", {"output_tokens": 1}),
        STOP,
    )
    _, result, _ = stream(serve(body))
    assert result is not None and result.usage.cache_write_tokens == 15


def test_interleaved_blocks_server_tools_and_citations() -> None:
    """Tool slots follow tool_use order; server-tool input and citations are not calls."""
    body = events_body(
        start(),
        block_start(0, {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search"}),
        delta(0, type="input_json_delta", partial_json='{"query": "x"}'),
        block_stop(0),
        block_start(1, {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1"}),
        block_stop(1),
        block_start(2, {"type": "tool_use", "id": "toolu_a", "name": "weather", "input": {}}),
        block_start(3, {"type": "tool_use", "id": "toolu_b", "name": "clock", "input": {}}),
        delta(3, type="input_json_delta", partial_json='{"tz":'),
        delta(2, type="input_json_delta", partial_json='{"city": "Oslo"}'),
        delta(3, type="input_json_delta", partial_json=' "UTC"}'),
        block_start(4, {"type": "text", "text": "See "}),
        delta(4, type="citations_delta", citation={"type": "web_search_result_location"}),
        delta(4, type="text_delta", text="this."),
        block_stop(2),
        block_stop(3),
        block_stop(4),
        message_delta("tool_use", {"output_tokens": 9}),
        STOP,
    )
    events, result, error = stream(serve(body), retain_raw=True)
    assert error is None and result is not None
    assert result.text == "See this."
    assert result.tool_calls == (
        ai.ToolCall("toolu_a", "weather", {"city": "Oslo"}),
        ai.ToolCall("toolu_b", "clock", {"tz": "UTC"}),
    )
    indices = {e.index for e in events if isinstance(e, ai.ToolCallDelta)}
    assert indices == {0, 1}
    blocks = content_blocks(result.raw)
    assert [b["type"] for b in blocks] == [
        "server_tool_use",
        "web_search_tool_result",
        "tool_use",
        "tool_use",
        "text",
    ]
    assert blocks[0]["input"] == {"query": "x"}
    assert blocks[4] == {
        "type": "text",
        "text": "See this.",
        "citations": [{"type": "web_search_result_location"}],
    }


def test_tool_input_sent_whole_in_the_start_event() -> None:
    body = events_body(
        start(),
        block_start(
            0, {"type": "tool_use", "id": "toolu_w", "name": "weather", "input": {"city": "Rome"}}
        ),
        block_stop(0),
        message_delta("tool_use", {"output_tokens": 3}),
        STOP,
    )
    _, result, _ = stream(serve(body))
    assert result is not None
    assert result.tool_calls == (ai.ToolCall("toolu_w", "weather", {"city": "Rome"}),)


@pytest.mark.parametrize(
    ("stop_reason", "finish"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("max_tokens", "length"),
        ("model_context_window_exceeded", "length"),
        ("tool_use", "tool_calls"),
        ("refusal", "content_filter"),
        ("pause_turn", "other"),
        ("brand_new_reason", "other"),
    ],
)
def test_stop_reason_mapping(stop_reason: str, finish: str) -> None:
    _, result, _ = stream(serve(text_stream(stop_reason)))
    assert result is not None and result.finish_reason == finish
    whole = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": [{"type": "text", "text": "Hi"}],
        "stop_reason": stop_reason,
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }
    result = generate(serve(json.dumps(whole).encode()))
    assert result.finish_reason == finish


def test_refusal_is_redirected_to_content_policy_targets() -> None:
    refusal = events_body(start(), message_delta("refusal", {"output_tokens": 0}), STOP)
    safe = serve(text_stream(text="handled elsewhere"))

    async def go() -> ai.Generation:
        providers = [
            provider(serve(refusal)),
            ai.ProviderSettings("anthropic", alias="safe", api_key="k", transport=safe),
        ]
        async with ai.AsyncClient(providers) as client:
            st = client.stream("hi", route=route(content_policy_targets=[f"safe:{MODEL}"]))
            return await st.collect()

    result = asyncio.run(go())
    assert result.text == "handled elsewhere"
    assert [a.outcome for a in result.attempts] == ["redirected", "ok"]


def test_error_event_after_content_raises_typed_error_after_flushing_usage() -> None:
    body = events_body(
        start({"input_tokens": 11, "output_tokens": 1}),
        block_start(0, {"type": "text", "text": ""}),
        delta(0, type="text_delta", text="partial"),
        {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
    )
    events, result, error = stream(serve(body))
    assert result is None
    assert type(error) is ai.OverloadedError
    assert error.phase == "stream" and error.provider == "anthropic"
    assert "Overloaded" in str(error)
    assert [e.usage.input_tokens for e in events if isinstance(e, ai.UsageUpdate)] == [11]
    assert not any(isinstance(e, ai.StreamEnded) for e in events)


@pytest.mark.parametrize(
    ("error_type", "message", "expected"),
    [
        ("overloaded_error", "Overloaded", "OverloadedError"),
        ("rate_limit_error", "Too many requests", "RateLimitError"),
        (
            "invalid_request_error",
            "prompt is too long: 210000 tokens > 200000",
            "ContextWindowError",
        ),
        ("api_error", "Internal server error", "ProviderError"),
        # No HTTP status in a stream: the type says which one it stands for.
        ("permission_error", "not allowed to use this model", "AuthenticationError"),
        ("not_found_error", "model: claude-nope", "ModelNotFoundError"),
        ("invalid_request_error", "bad request", "ProviderError"),
    ],
)
def test_error_event_before_content_fails_the_attempt(
    error_type: str, message: str, expected: str
) -> None:
    body = events_body(
        start(), PING, {"type": "error", "error": {"type": error_type, "message": message}}
    )
    events, _, error = stream(serve(body))
    assert isinstance(error, ai.AllTargetsFailedError)
    info = error.attempts[0].error
    assert info is not None and info.type_name == expected
    assert info.phase == "stream" and info.http_status is None
    # A request error is not worth a retry; an overloaded or failing server may be.
    assert info.retryable == (error_type in ("overloaded_error", "rate_limit_error", "api_error"))
    assert isinstance(events[-1], ai.AttemptFailed)


def test_end_before_message_stop_succeeds_with_a_warning() -> None:
    script = Script(pieces=(Text("done"),), usage=ScriptUsage(3, 4), sentinel=False)
    _, result, error = stream(fs.FakeTransport(DIALECT, [script]))
    assert error is None and result is not None
    assert result.usage.output_tokens == 4
    assert any(w.startswith("usage may be incomplete") for w in result.warnings)


def test_disconnect_before_message_delta_is_a_stream_error() -> None:
    script = Script(pieces=(Text("cut"),), usage=ScriptUsage(3, 4), usage_placement="split")
    rendered = DIALECT.render(script, stream=True)
    finish_at = next(i for i, f in enumerate(rendered.frames) if f.finish)
    broken = Script(
        pieces=script.pieces,
        usage=script.usage,
        usage_placement="split",
        fault=Fault("disconnect", at=finish_at),
    )
    events, result, error = stream(fs.FakeTransport(DIALECT, [broken]))
    assert result is None and type(error) is ai.StreamError
    # message_start's figures were flushed: the input count and the provisional output.
    provisional = dict(rendered.frames[0].usage_values).get("output_tokens", 4)
    assert [e.usage for e in events if isinstance(e, ai.UsageUpdate)] == [
        ai.Usage(input_tokens=3, output_tokens=provisional)
    ]


@pytest.mark.parametrize("ending", ["cr", "crlf"])
def test_an_event_ending_a_read_is_reported_before_a_disconnect(ending: str) -> None:
    # `…\r\r` at the end of a read ends the event: it must not wait for the next read
    # (which never comes) to learn whether an LF follows.
    base = Script(pieces=(Text("a"),), usage=ScriptUsage(3, 4), usage_placement="split")
    clean = replace(base, line_ending=ending)  # type: ignore[arg-type]
    script = replace(clean, fault=Fault("disconnect", at=1))
    # The provisional count derives from the script without its fault (line ending
    # included), so it is read off that script's own rendering.
    provisional = dict(DIALECT.render(clean, stream=True).frames[0].usage_values)
    events, result, error = stream(fs.FakeTransport(DIALECT, [script]))
    assert result is None and isinstance(error, ai.AllTargetsFailedError)
    info = error.attempts[0].error
    assert info is not None and info.type_name == "StreamError"
    assert [e.usage for e in events if isinstance(e, ai.UsageUpdate)] == [
        ai.Usage(input_tokens=3, output_tokens=provisional.get("output_tokens", 4))
    ]
    assert isinstance(events[-1], ai.AttemptFailed)


@pytest.mark.parametrize("ending", ["lf", "cr", "crlf"])
def test_multiline_data_and_line_endings_read_back(ending: str) -> None:
    script = Script(
        pieces=(
            Reasoning("hm"),
            Text("Hé"),
            ToolFragment(0, '{"a": [1]}', id="toolu_01z", name="f"),
        ),
        finish_reason="tool_calls",
        usage=ScriptUsage(3, 4, cache_read_tokens=0, cache_write_tokens=1),
        usage_placement="cumulative",
        line_ending=ending,  # type: ignore[arg-type]
        multiline_data=True,
        read_sizes=(1,),
    )
    _, result, error = stream(fs.FakeTransport(DIALECT, [script]), tools=[WEATHER])
    assert error is None and result is not None
    assert (result.text, result.reasoning) == ("Hé", "hm")
    assert result.tool_calls == (ai.ToolCall("toolu_01z", "f", {"a": [1]}),)
    assert result.usage == ai.Usage(3, 4, 7, cache_read_tokens=0, cache_write_tokens=1)


def test_malformed_event_is_a_protocol_error() -> None:
    script = Script(pieces=(Text("a"),), fault=Fault("malformed", at=0))
    _, _, error = stream(fs.FakeTransport(DIALECT, [script]))
    assert isinstance(error, ai.AllTargetsFailedError)
    info = error.attempts[0].error
    assert info is not None and info.type_name == "ProtocolError"


# --- HTTP errors ----------------------------------------------------------------------------


def _error_body(error_type: str, message: str) -> bytes:
    return json.dumps(
        {"type": "error", "error": {"type": error_type, "message": message}, "request_id": "r"}
    ).encode()


def _raise_typed(transport: httpx.AsyncBaseTransport) -> ai.AnyInferError:
    _, _, error = stream(transport, route=route(decide=lambda e: "raise"))
    assert isinstance(error, ai.AnyInferError)
    return error


@pytest.mark.parametrize(
    ("status", "error_type", "message", "expected"),
    [
        (401, "authentication_error", "invalid x-api-key", ai.AuthenticationError),
        (403, "permission_error", "no access", ai.AuthenticationError),
        (404, "not_found_error", "model: claude-nope", ai.ModelNotFoundError),
        (529, "overloaded_error", "Overloaded", ai.OverloadedError),
        (500, "api_error", "Internal server error", ai.ProviderError),
        (
            400,
            "invalid_request_error",
            "prompt is too long: 215000 tokens > 200000 maximum",
            ai.ContextWindowError,
        ),
        (
            400,
            "invalid_request_error",
            "input length and `max_tokens` exceed context limit: 198000 + 8192 > 200000",
            ai.ContextWindowError,
        ),
        (400, "invalid_request_error", "messages: roles must alternate", ai.ProviderError),
    ],
)
def test_error_statuses_map_to_typed_errors(
    status: int, error_type: str, message: str, expected: type[ai.AnyInferError]
) -> None:
    error = _raise_typed(serve(_error_body(error_type, message), status))
    assert type(error) is expected
    assert error.http_status == status
    assert message[:30] in str(error)


def test_rate_limit_carries_retry_after() -> None:
    transport = serve(_error_body("rate_limit_error", "slow down"), 429, {"retry-after": "17"})
    error = _raise_typed(transport)
    assert isinstance(error, ai.RateLimitError)
    assert error.retry_after == 17.0
    assert error.retryable


def test_dialect_error_statuses_through_the_client() -> None:
    fault = Fault("status", status=429, retry_after=3, message="rate limited")
    transport = fs.FakeTransport(DIALECT, [Script(fault=fault)])
    error = _raise_typed(transport)
    assert isinstance(error, ai.RateLimitError) and error.retry_after == 3.0
    transport = fs.FakeTransport(DIALECT, [Script(fault=Fault("status", status=529))])
    assert type(_raise_typed(transport)) is ai.OverloadedError


# --- non-streaming --------------------------------------------------------------------------


def test_generate_reads_a_whole_message() -> None:
    script = Script(
        pieces=(
            Reasoning("weigh options"),
            Text("Calling."),
            ToolFragment(0, '{"city": "Lima"}', id="toolu_x", name="weather"),
        ),
        finish_reason="tool_calls",
        usage=ScriptUsage(5, 6, cache_read_tokens=2, cache_write_tokens=1, reasoning_tokens=3),
    )
    transport = fs.FakeTransport(DIALECT, [script])
    result = generate(transport, tools=[WEATHER], retain_raw=True)
    assert result.text == "Calling."
    assert result.reasoning == "weigh options"
    assert result.tool_calls == (ai.ToolCall("toolu_x", "weather", {"city": "Lima"}),)
    assert result.finish_reason == "tool_calls"
    assert result.usage == ai.Usage(
        input_tokens=5,
        output_tokens=6,
        total_tokens=11,
        cache_read_tokens=2,
        cache_write_tokens=1,
        reasoning_tokens=3,
    )
    assert isinstance(result.raw, dict) and result.raw["type"] == "message"
    blocks = content_blocks(result.raw)
    signature = json.loads(DIALECT.render(script, stream=False).body)["content"][0]["signature"]
    assert signature.startswith("E") and len(signature) > 100  # opaque, like a real one
    assert blocks[0] == {"type": "thinking", "thinking": "weigh options", "signature": signature}


# --- thinking signatures across turns -------------------------------------------------------


def test_signed_thinking_round_trips_into_the_next_turn() -> None:
    first = Script(
        pieces=(
            Reasoning("I should call "),
            Reasoning("the clock."),
            ToolFragment(0, "{}", id="toolu_c", name="clock"),
        ),
        finish_reason="tool_calls",
    )
    second = Script(pieces=(Text("It is noon."),))
    transport = fs.FakeTransport(DIALECT, [first, second])

    async def go() -> tuple[ai.Generation, ai.Generation]:
        async with ai.AsyncClient([provider(transport)], retain_raw=True) as client:
            async with client.stream("time?", route=route(), tools=[CLOCK], reasoning="low") as st:
                async for _ in st:
                    pass
            turn = assistant_message(st.result)
            (call,) = st.result.tool_calls
            conversation = [
                ai.Message.user("time?"),
                turn,
                ai.Message.tool_result(call.id, "12:00"),
            ]
            final = await client.generate(
                conversation, route=route(), tools=[CLOCK], reasoning="low"
            )
            return st.result, final

    first_result, final = asyncio.run(go())
    assert final.text == "It is noon."
    (signed,) = [
        e["delta"]["signature"]
        for e in _events(DIALECT.render(first, stream=True))
        if e["type"] == "content_block_delta" and e["delta"]["type"] == "signature_delta"
    ]
    sent = transport.requests[1].json["messages"]
    assert sent[1] == {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "I should call the clock.", "signature": signed},
            {"type": "tool_use", "id": "toolu_c", "name": "clock", "input": {}},
        ],
    }
    assert sent[2]["content"][0]["tool_use_id"] == "toolu_c"
    assert assistant_message(final).provider_data["anthropic"]["content"] == [
        {"type": "text", "text": "It is noon."}
    ]
    assert first_result.raw is not None


def test_assistant_message_without_raw_keeps_text_and_calls() -> None:
    transport = fs.FakeTransport(DIALECT, [Script(pieces=(Text("plain"),))])
    result = generate(transport)
    turn = assistant_message(result)
    assert turn == ai.Message.assistant("plain")
    assert not turn.provider_data


def test_content_blocks_rejects_other_payloads() -> None:
    with pytest.raises(ValueError, match="Anthropic"):
        content_blocks("nope")


# --- discovery and health -------------------------------------------------------------------


def test_models_lists_the_provider_models() -> None:
    transport = fs.FakeTransport(DIALECT, [], models=("claude-a", "claude-b"))

    async def go() -> Sequence[Any]:
        async with ai.AsyncClient([provider(transport)]) as client:
            return await client.models("anthropic")

    found = asyncio.run(go())
    assert [m.id for m in found] == ["claude-a", "claude-b"]
    assert all(m.context_window is None and m.max_output_tokens is None for m in found)
    assert found[0].facts == {"display_name": "claude-a", "created_at": "2025-01-01T00:00:00Z"}
    assert found[0].provider == "anthropic"


def _paged(pages: Callable[[httpx.Request], dict[str, Any]]) -> Any:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json=pages(request))

    transport = httpx.MockTransport(handler)
    transport.seen = seen  # type: ignore[attr-defined]
    return transport


def _models(transport: httpx.AsyncBaseTransport) -> list[str]:
    async def go() -> list[str]:
        async with ai.AsyncClient([provider(transport)]) as client:
            return [m.id for m in await client.models("anthropic")]

    return asyncio.run(go())


def test_models_follow_pagination() -> None:
    def pages(request: httpx.Request) -> dict[str, Any]:
        after = request.url.params.get("after_id")
        if after is None:
            return {"data": [{"id": "m1"}, {"id": "m2"}], "has_more": True, "last_id": "m2"}
        assert after == "m2"
        return {"data": [{"id": "m3"}], "has_more": False, "last_id": "m3"}

    transport = _paged(pages)
    assert _models(transport) == ["m1", "m2", "m3"]
    assert [r.url.params.get("limit") for r in transport.seen] == ["1000", "1000"]
    assert transport.seen[0].headers["anthropic-version"] == "2023-06-01"


def test_models_pagination_is_bounded() -> None:
    counter = iter(range(1000))

    def endless(request: httpx.Request) -> dict[str, Any]:
        n = next(counter)
        return {"data": [{"id": f"m{n}"}], "has_more": True, "last_id": f"m{n}"}

    transport = _paged(endless)
    assert len(_models(transport)) == 20
    stuck = _paged(lambda r: {"data": [{"id": "x"}], "has_more": True, "last_id": "x"})
    assert _models(stuck) == ["x", "x"]  # the same cursor twice ends the walk


def test_health() -> None:
    async def go(transport: httpx.AsyncBaseTransport) -> ai.Health:
        async with ai.AsyncClient([provider(transport)]) as client:
            return await client.health("anthropic")

    ok = asyncio.run(go(fs.FakeTransport(DIALECT, [], models=("a", "b", "c"))))
    assert ok.ok and ok.models == 3
    bad = asyncio.run(go(serve(_error_body("authentication_error", "invalid x-api-key"), 401)))
    assert not bad.ok and "invalid x-api-key" in bad.detail


# --- over a real socket ---------------------------------------------------------------------


@pytest.mark.loopback
def test_sync_client_over_a_loopback_server() -> None:
    scripts = [
        Script(
            pieces=(Text("streamed "), Text("reply")),
            usage=ScriptUsage(2, 2),
            usage_placement="split",
        ),
        Script(pieces=(Text("whole reply"),), usage=ScriptUsage(1, 2), usage_placement="finish"),
    ]
    with fs.FakeServer(DIALECT, scripts) as server:
        settings = ai.ProviderSettings("claude", api_key="k", base_url=server.base_url)
        with ai.Client([settings]) as client:
            with client.stream("hi", target=f"claude:{MODEL}") as st:
                texts = [e.text for e in st if isinstance(e, ai.TextDelta)]
            assert texts == ["streamed ", "reply"]
            assert st.result.usage.total_tokens == 4
            assert client.generate("hi", target=f"claude:{MODEL}").text == "whole reply"
        server.assert_all_used()
        paths = [(r.method, r.path) for r in server.requests]
        assert paths == [("POST", "/v1/messages"), ("POST", "/v1/messages")]
        assert server.requests[0].json["stream"] is True


# --- the dialect itself ---------------------------------------------------------------------


def _events(rendered: fs.Rendered) -> list[dict[str, Any]]:
    out = []
    for frame in rendered.frames:
        text = frame.data.decode()
        name, data = text.split("\n")[0], text.split("\n")[1]
        payload = json.loads(data.removeprefix("data: "))
        assert name == f"event: {payload['type']}"
        out.append(payload)
    return out


def test_dialect_renders_anthropic_event_order() -> None:
    script = Script(
        pieces=(Text("a"), Reasoning("r"), Text("b")),
        usage=ScriptUsage(1, 2, cache_read_tokens=3),
        usage_placement="trailing",
        keepalives=(1,),
    )
    events = _events(DIALECT.render(script, stream=True))
    assert [e["type"] for e in events] == [
        "message_start",
        "ping",  # keepalives=(1,)
        "content_block_start",
        "ping",  # every real stream pings once its first block opens
        "content_block_delta",
        "content_block_stop",
        "content_block_start",
        "content_block_delta",
        "content_block_delta",  # the empty thinking_delta real streams end with
        "content_block_delta",  # the signature
        "content_block_stop",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_delta",  # trailing (not Anthropic's shape): usage after the stop reason
        "message_stop",
    ]
    assert events[8]["delta"] == {"type": "thinking_delta", "thinking": ""}
    assert events[9]["delta"]["type"] == "signature_delta"
    assert "usage" not in events[14] and events[14]["delta"]["stop_reason"] == "end_turn"
    assert events[15]["usage"] == {
        "input_tokens": 1,
        "cache_read_input_tokens": 3,
        "output_tokens": 2,
    }


@pytest.mark.parametrize("placement", ["cumulative", "split"])
def test_dialect_renders_anthropic_usage_as_real_streams_do(placement: UsagePlacement) -> None:
    usage = ScriptUsage(12, 30, cache_read_tokens=5, cache_write_tokens=7, reasoning_tokens=9)
    script = Script(pieces=(Text("hi"),), usage=usage, usage_placement=placement)
    rendered = DIALECT.render(script, stream=True)
    events = _events(rendered)
    start = events[0]["message"]
    assert start["id"].startswith("msg_01") and len(start["id"]) == 28
    assert start["id"] == _events(DIALECT.render(script, stream=True))[0]["message"]["id"]
    other = replace(script, pieces=(Text("ho"),))
    assert start["id"] != _events(DIALECT.render(other, stream=True))[0]["message"]["id"]
    provisional = start["usage"]["output_tokens"]
    assert 0 < provisional <= 30
    assert start["usage"] == {
        "input_tokens": 12,
        "cache_creation_input_tokens": 7,
        "cache_read_input_tokens": 5,
        "cache_creation": {"ephemeral_5m_input_tokens": 7, "ephemeral_1h_input_tokens": 0},
        "output_tokens": provisional,
        "service_tier": "standard",
        "inference_geo": "not_available",
    }
    assert rendered.frames[0].usage == {
        "input_tokens",
        "output_tokens",
        "cache_read_tokens",
        "cache_write_tokens",
    }
    if provisional != 30:
        assert rendered.frames[0].usage_values == (("output_tokens", provisional),)
    (delta,) = [e for e in events if e["type"] == "message_delta"]
    final = {"output_tokens": 30, "output_tokens_details": {"thinking_tokens": 9}}
    if placement == "cumulative":
        final = {
            "input_tokens": 12,
            "cache_creation_input_tokens": 7,
            "cache_read_input_tokens": 5,
            **final,
        }
    assert delta["usage"] == final
    assert delta["delta"] == {
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "stop_details": None,
    }
    assert dict(rendered.headers)["request-id"].startswith("req_011C")


def test_dialect_sends_tool_calls_whole_in_slot_order() -> None:
    script = Script(
        pieces=(
            ToolFragment(1, '{"b":', id="id1", name="g"),
            Text("x"),
            ToolFragment(0, "{}", name="f"),
            ToolFragment(1, " 1}"),
        ),
        finish_reason="tool_calls",
    )
    events = _events(DIALECT.render(script, stream=True))
    starts = [e["content_block"] for e in events if e["type"] == "content_block_start"]
    direct = {"type": "direct"}
    assert starts == [
        {"type": "text", "text": ""},
        {"type": "tool_use", "name": "f", "input": {}, "caller": direct},  # no id: none sent
        {"type": "tool_use", "id": "id1", "name": "g", "input": {}, "caller": direct},
    ]
    # Every tool block opens its input with an empty fragment; `{}` sends nothing else.
    fragments = [
        (e["index"], e["delta"]["partial_json"])
        for e in events
        if e["type"] == "content_block_delta" and e["delta"]["type"] == "input_json_delta"
    ]
    assert fragments == [(1, ""), (2, ""), (2, '{"b":'), (2, " 1}")]
    with pytest.raises(ValueError, match=r"0\.\.n-1"):
        DIALECT.render(Script(pieces=(ToolFragment(2, "{}"),)), stream=True)


def test_dialect_error_and_models_shapes() -> None:
    error = DIALECT.render_error(Fault("status", status=529, message="busy"))
    assert error.status == 529
    body = json.loads(error.body)
    assert body == {
        "type": "error",
        "error": {"type": "overloaded_error", "message": "busy"},
        "request_id": body["request_id"],
    }
    assert body["request_id"].startswith("req_011C") and len(body["request_id"]) == 28
    assert dict(error.headers)["request-id"] == body["request_id"]
    coded = DIALECT.render_error(Fault("status", status=400, code="context_length_exceeded"))
    assert json.loads(coded.body)["error"]["type"] == "context_length_exceeded"
    listing = json.loads(DIALECT.models_response(["m"]).body)
    assert listing["has_more"] is False and listing["data"][0]["type"] == "model"
    assert DIALECT.is_generation("POST", "/v1/messages")
    assert not DIALECT.is_generation("POST", "/v1/messages/count_tokens")
    assert fs.get_dialect("anthropic-messages").name == "anthropic-messages"
    assert AnthropicAdapter.profile.conformance_dialect == "anthropic-messages"


def test_content_blocks_joins_split_signatures_and_keeps_redacted_thinking() -> None:
    raw = [
        start(),
        block_start(0, {"type": "thinking", "thinking": "", "signature": ""}),
        delta(0, type="thinking_delta", thinking="a"),
        delta(0, type="signature_delta", signature="Eq1"),
        delta(0, type="signature_delta", signature="Eq2"),
        block_stop(0),
        block_start(1, {"type": "redacted_thinking", "data": "opaque"}),
        block_stop(1),
        block_start(
            2,
            {"type": "tool_use", "id": "t", "name": "f", "input": {}, "caller": {"type": "direct"}},
        ),
        delta(2, type="input_json_delta", partial_json='{"k": '),
        block_stop(2),
        STOP,
    ]
    assert content_blocks(raw) == [
        {"type": "thinking", "thinking": "a", "signature": "Eq1Eq2"},
        {"type": "redacted_thinking", "data": "opaque"},
        # A cut-off input keeps what the start event had.
        {"type": "tool_use", "id": "t", "name": "f", "input": {}},
    ]
