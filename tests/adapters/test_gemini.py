"""The Gemini adapter and its fake-server dialects, through the real client.

Request bodies are read back from the transport; responses come from the `gemini` /
`gemini-json-array` dialects (`FakeTransport`, `FakeServer`) or, for shapes a script
cannot express (blocked prompts, error frames, pagination), from hand-written bodies
served by an `httpx.MockTransport`.
"""

from __future__ import annotations

import base64
import functools
import json
from collections.abc import AsyncIterator, Sequence
from dataclasses import replace
from typing import Any

import httpx
import pytest
from helpers import NO_RETRY, run, sse

import anyinfer as ai
from anyinfer._adapters.framing import DEFAULT_MAX_FRAME_BYTES, JSONArrayFramer
from anyinfer._providers.gemini import (
    THINKING_BUDGETS,
    GeminiAdapter,
    assistant_message,
    content_parts,
)
from anyinfer._stream.core import USAGE_MAY_BE_INCOMPLETE
from anyinfer.adapters import GenerationRequest
from anyinfer.fakeservers import (
    FakeServer,
    FakeTransport,
    Fault,
    GeminiDialect,
    Reasoning,
    Script,
    ScriptUsage,
    Text,
    ToolFragment,
    get_dialect,
)

BASE = "https://generativelanguage.googleapis.com/v1beta"


def route(model: str = "gemini-2.5-flash") -> ai.Route:
    return ai.Route(f"gemini:{model}", retry=NO_RETRY)


async def stream_all(
    transport: httpx.AsyncBaseTransport,
    messages: ai.MessagesInput = "hi",
    *,
    model: str = "gemini-2.5-flash",
    retain_raw: bool = False,
    settings: dict[str, Any] | None = None,
    **kwargs: Any,
) -> tuple[list[ai.StreamEvent], ai.Generation]:
    s = ai.ProviderSettings("gemini", api_key="k", transport=transport, **(settings or {}))
    async with ai.AsyncClient([s], retain_raw=retain_raw) as client:
        async with client.stream(messages, route=route(model), **kwargs) as st:
            events = [ev async for ev in st]
        return events, st.result


async def generate(
    transport: httpx.AsyncBaseTransport,
    messages: ai.MessagesInput = "hi",
    *,
    model: str = "gemini-2.5-flash",
    retain_raw: bool = False,
    **kwargs: Any,
) -> ai.Generation:
    s = ai.ProviderSettings("gemini", api_key="k", transport=transport)
    async with ai.AsyncClient([s], retain_raw=retain_raw) as client:
        return await client.generate(messages, route=route(model), **kwargs)


def sent_body(transport: FakeTransport, index: int = 0) -> Any:
    return transport.requests[index].json


class Recorder:
    """An `httpx.MockTransport` handler answering with fixed bodies, keeping requests."""

    def __init__(self, *responses: tuple[int, bytes, str]) -> None:
        self.responses = list(responses)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        status, body, kind = self.responses.pop(0)
        return httpx.Response(status, content=body, headers={"content-type": kind})

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self)

    def json(self, index: int = 0) -> Any:
        return json.loads(self.requests[index].content)


sse_body = functools.partial(sse, done=False, eol="\r\n")  # CRLF framing, no sentinel


def candidate(*parts: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
    cand: dict[str, Any] = {"content": {"parts": list(parts), "role": "model"}, "index": 0}
    if finish is not None:
        cand["finishReason"] = finish
    cand.update(extra)
    return {"candidates": [cand]}


def tokens(usage: ai.Usage) -> ai.Usage:
    """The token figures alone (the client adds `cost_usd` from its pricing table)."""
    return replace(usage, cost_usd=None)


def kinds(events: Sequence[ai.StreamEvent]) -> list[str]:
    return [type(ev).__name__ for ev in events]


# --- request bodies ------------------------------------------------------------------


def test_plain_prompt_goes_to_stream_endpoint_with_sse_and_key_header() -> None:
    rec = Recorder((200, sse_body(candidate({"text": "ok"}, finish="STOP")), "text/event-stream"))
    _, result = run(stream_all(rec.transport()))
    req = rec.requests[0]
    assert str(req.url) == f"{BASE}/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    assert req.headers["x-goog-api-key"] == "k"
    assert "authorization" not in req.headers
    assert rec.json() == {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
    assert result.text == "ok"


def test_generate_uses_generate_content_endpoint() -> None:
    body = json.dumps(candidate({"text": "whole"}, finish="STOP")).encode()
    rec = Recorder((200, body, "application/json"))
    result = run(generate(rec.transport(), model="models/gemini-2.0-flash"))
    assert str(rec.requests[0].url) == f"{BASE}/models/gemini-2.0-flash:generateContent"
    assert result.text == "whole"
    assert result.finish_reason == "stop"


def test_tuned_model_names_and_api_version() -> None:
    body = json.dumps(candidate({"text": "x"}, finish="STOP")).encode()
    rec = Recorder((200, body, "application/json"))
    s = ai.ProviderSettings("google", api_key="k", api_version="v1alpha", transport=rec.transport())

    async def go() -> None:
        async with ai.AsyncClient([s]) as client:
            await client.generate("hi", route=ai.Route("google:tunedModels/mine", retry=NO_RETRY))

    run(go())
    assert str(rec.requests[0].url) == (
        "https://generativelanguage.googleapis.com/v1alpha/tunedModels/mine:generateContent"
    )


def test_google_api_key_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.setenv("GOOGLE_API_KEY", "google-secret-key")
    rec = Recorder(
        (200, json.dumps(candidate({"text": "ok"}, finish="STOP")).encode(), "application/json")
    )
    s = ai.ProviderSettings("gemini", transport=rec.transport())

    async def go() -> None:
        async with ai.AsyncClient([s]) as client:
            await client.generate("hi", route=route())

    run(go())
    assert rec.requests[0].headers["x-goog-api-key"] == "google-secret-key"
    assert "google-secret-key" not in repr(GeminiAdapter(s))


def test_gemini_api_key_wins_over_google_api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEMINI_API_KEY", "gemini-env-key")
    monkeypatch.setenv("GOOGLE_API_KEY", "google-env-key")
    rec = Recorder((200, json.dumps(candidate(finish="STOP")).encode(), "application/json"))
    s = ai.ProviderSettings("gemini", transport=rec.transport())

    async def go() -> None:
        async with ai.AsyncClient([s]) as client:
            await client.generate("hi", route=route())

    run(go())
    assert rec.requests[0].headers["x-goog-api-key"] == "gemini-env-key"


def test_system_images_sampling_and_response_format() -> None:
    t = FakeTransport("gemini", [Script(pieces=(Text("ok"),))])
    png = b"\x89PNG\r\n\x1a\n"
    messages = [
        ai.Message.system("Be brief."),
        ai.Message.system("Be kind."),
        ai.Message.user(
            [
                ai.TextContent("What is in these?"),
                ai.ImageContent(data=png, media_type="image/png"),
                ai.ImageContent(url="data:image/jpeg;base64,AAAA"),
                ai.ImageContent(url="https://example.com/cat.webp?x=1"),
            ]
        ),
    ]
    sampling = ai.Sampling(
        temperature=0.2,
        top_p=0.9,
        max_output_tokens=100,
        stop=("END",),
        seed=7,
        presence_penalty=0.1,
        frequency_penalty=0.3,
    )
    run(stream_all(t, messages, sampling=sampling))
    body = sent_body(t)
    assert body["systemInstruction"] == {"parts": [{"text": "Be brief.\n\nBe kind."}]}
    assert body["contents"] == [
        {
            "role": "user",
            "parts": [
                {"text": "What is in these?"},
                {"inlineData": {"mimeType": "image/png", "data": base64.b64encode(png).decode()}},
                {"inlineData": {"mimeType": "image/jpeg", "data": "AAAA"}},
                {
                    "fileData": {
                        "fileUri": "https://example.com/cat.webp?x=1",
                        "mimeType": "image/webp",
                    }
                },
            ],
        }
    ]
    assert body["generationConfig"] == {
        "temperature": 0.2,
        "topP": 0.9,
        "maxOutputTokens": 100,
        "stopSequences": ["END"],
        "seed": 7,
        "presencePenalty": 0.1,
        "frequencyPenalty": 0.3,
    }
    assert "tools" not in body and "toolConfig" not in body


def _request(**kw: Any) -> GenerationRequest:
    return GenerationRequest(
        model=kw.pop("model", "gemini-2.5-flash"), messages=(ai.Message.user("hi"),), **kw
    )


def _adapter() -> GeminiAdapter:
    return GeminiAdapter(ai.ProviderSettings("gemini", api_key="k"))


def test_response_formats() -> None:
    adapter = _adapter()
    body = adapter.build_body(_request(response_format={"type": "json_object"}))
    assert body["generationConfig"] == {"responseMimeType": "application/json"}
    schema = {"type": "object", "properties": {"city": {"type": "string"}}}
    body = adapter.build_body(
        _request(response_format={"type": "json_schema", "name": "x", "schema": schema})
    )
    assert body["generationConfig"] == {
        "responseMimeType": "application/json",
        "responseJsonSchema": schema,
    }


@pytest.mark.parametrize(
    ("effort", "config"),
    [
        ("none", {"thinkingBudget": 0}),
        ("minimal", {"thinkingBudget": 512, "includeThoughts": True}),
        ("low", {"thinkingBudget": 1024, "includeThoughts": True}),
        ("medium", {"thinkingBudget": 8192, "includeThoughts": True}),
        ("high", {"thinkingBudget": 24576, "includeThoughts": True}),
    ],
)
def test_reasoning_effort_becomes_a_thinking_budget_before_gemini_3(
    effort: str, config: dict[str, Any]
) -> None:
    assert THINKING_BUDGETS[effort] == config["thinkingBudget"]
    body, warnings = _adapter().prepare(_request(reasoning=effort))
    assert body["generationConfig"]["thinkingConfig"] == config
    assert warnings == []


@pytest.mark.parametrize("effort", ["minimal", "low", "medium", "high"])
def test_reasoning_effort_becomes_a_thinking_level_on_gemini_3(effort: str) -> None:
    body, warnings = _adapter().prepare(_request(model="gemini-3-pro-preview", reasoning=effort))
    assert body["generationConfig"]["thinkingConfig"] == {
        "thinkingLevel": effort,
        "includeThoughts": True,
    }
    assert warnings == []


def test_reasoning_none_on_gemini_3_sends_minimal_with_a_warning() -> None:
    t = FakeTransport("gemini", [Script(pieces=(Text("ok"),))])
    _, result = run(stream_all(t, model="gemini-3-flash-preview", reasoning="none"))
    assert sent_body(t)["generationConfig"]["thinkingConfig"] == {"thinkingLevel": "minimal"}
    assert any("thinkingLevel 'minimal'" in w for w in result.warnings)


WEATHER = ai.ToolSpec(
    "get_weather",
    "Weather for a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
TIME = ai.ToolSpec("get_time", "The time.")


@pytest.mark.parametrize(
    ("choice", "config"),
    [
        ("auto", None),
        ("none", {"mode": "NONE"}),
        ("required", {"mode": "ANY"}),
        ("get_time", {"mode": "ANY", "allowedFunctionNames": ["get_time"]}),
    ],
)
def test_tools_and_tool_choice(choice: str, config: dict[str, Any] | None) -> None:
    t = FakeTransport("gemini", [Script(pieces=(Text("ok"),))])
    run(stream_all(t, tools=[WEATHER, TIME], tool_choice=choice))
    body = sent_body(t)
    assert body["tools"] == [
        {
            "functionDeclarations": [
                {
                    "name": "get_weather",
                    "description": "Weather for a city.",
                    "parametersJsonSchema": dict(WEATHER.parameters),
                },
                {
                    "name": "get_time",
                    "description": "The time.",
                    "parametersJsonSchema": {"type": "object", "properties": {}},
                },
            ]
        }
    ]
    if config is None:
        assert "toolConfig" not in body
    else:
        assert body["toolConfig"] == {"functionCallingConfig": config}


def test_provider_options_merge_into_the_body() -> None:
    t = FakeTransport("gemini", [Script(pieces=(Text("ok"),))])
    options = {
        "gemini": {
            "generationConfig": {"topK": 40},
            "safetySettings": [
                {"category": "HARM_CATEGORY_HATE_SPEECH", "threshold": "BLOCK_NONE"}
            ],
        }
    }
    run(stream_all(t, sampling=ai.Sampling(temperature=0.5), provider_options=options))
    body = sent_body(t)
    assert body["generationConfig"] == {"temperature": 0.5, "topK": 40}
    assert body["safetySettings"][0]["threshold"] == "BLOCK_NONE"


def test_multi_turn_with_tool_results() -> None:
    t = FakeTransport("gemini", [Script(pieces=(Text("Sunny."),))])
    calls = (
        ai.ToolCall("call_0", "get_weather", {"city": "Paris"}),
        ai.ToolCall("call_1", "get_time", {}),
    )
    messages = [
        ai.Message.system("sys"),
        ai.Message.user("Weather and time?"),
        ai.Message.assistant("Checking.", calls),
        ai.Message.tool_result("call_0", '{"temp": 21}'),
        ai.Message.tool_result("call_1", "noon", name="get_time"),
        ai.Message.user("And tomorrow?"),
        ai.Message.assistant("", (ai.ToolCall("call_0", "get_weather", {"city": "Paris"}),)),
        ai.Message.tool_result("call_0", "service down", is_error=True),
    ]
    run(stream_all(t, messages))
    assert sent_body(t)["contents"] == [
        {"role": "user", "parts": [{"text": "Weather and time?"}]},
        {
            "role": "model",
            "parts": [
                {"text": "Checking."},
                {
                    "functionCall": {
                        "name": "get_weather",
                        "args": {"city": "Paris"},
                        "id": "call_0",
                    }
                },
                {"functionCall": {"name": "get_time", "args": {}, "id": "call_1"}},
            ],
        },
        {
            "role": "user",
            "parts": [
                {
                    "functionResponse": {
                        "name": "get_weather",
                        "response": {"temp": 21},
                        "id": "call_0",
                    }
                },
                {
                    "functionResponse": {
                        "name": "get_time",
                        "response": {"output": "noon"},
                        "id": "call_1",
                    }
                },
            ],
        },
        {"role": "user", "parts": [{"text": "And tomorrow?"}]},
        {
            "role": "model",
            "parts": [
                {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}, "id": "call_0"}}
            ],
        },
        {
            "role": "user",
            "parts": [
                {
                    "functionResponse": {
                        "name": "get_weather",
                        "response": {"error": "service down"},
                        "id": "call_0",
                    }
                }
            ],
        },
    ]


def test_tool_result_without_a_name_is_a_config_error() -> None:
    t = FakeTransport("gemini", [])
    messages = [ai.Message.user("x"), ai.Message.tool_result("call_9", "42")]
    with pytest.raises(ai.AllTargetsFailedError) as info:
        run(stream_all(t, messages))
    last = info.value.attempts[-1].error
    assert last is not None and last.type_name == "ConfigError"
    assert "tool name" in last.detail
    assert t.requests == []  # nothing was sent


# --- thought signatures round trip -----------------------------------------------------

SIGNED_STREAM = [
    candidate({"text": "Thinking about it", "thought": True}),
    candidate(
        {
            "functionCall": {"name": "get_weather", "args": {"city": "Paris"}},
            "thoughtSignature": "c2ln",
        }
    ),
    candidate({"text": ""}, finish="STOP"),
]


def test_assistant_message_sends_thought_signatures_back_verbatim() -> None:
    rec = Recorder(
        (200, sse_body(*SIGNED_STREAM), "text/event-stream"),
        (200, sse_body(candidate({"text": "Sunny"}, finish="STOP")), "text/event-stream"),
    )
    s = ai.ProviderSettings("gemini", api_key="k", transport=rec.transport())

    async def go_stream() -> ai.Generation:
        async with ai.AsyncClient([s], retain_raw=True) as client:
            async with client.stream("Weather?", route=route(), tools=[WEATHER]) as st:
                async for _ in st:
                    pass
            first = st.result
            assert first.tool_calls == (ai.ToolCall("call_0", "get_weather", {"city": "Paris"}),)
            assert first.finish_reason == "tool_calls"
            turn = assistant_message(first)
            messages = [
                ai.Message.user("Weather?"),
                turn,
                ai.Message.tool_result("call_0", "sunny"),
            ]
            async with client.stream(messages, route=route(), tools=[WEATHER]) as st2:
                async for _ in st2:
                    pass
            return st2.result

    second = run(go_stream())
    assert second.text == "Sunny"
    contents = rec.json(1)["contents"]
    assert contents[1] == {
        "role": "model",
        "parts": [
            {"text": "Thinking about it", "thought": True},
            {
                "functionCall": {"name": "get_weather", "args": {"city": "Paris"}},
                "thoughtSignature": "c2ln",
            },
        ],
    }
    # The native call had no id, so the response goes back by name only.
    assert contents[2] == {
        "role": "user",
        "parts": [{"functionResponse": {"name": "get_weather", "response": {"output": "sunny"}}}],
    }


def test_content_parts_from_a_whole_response_and_without_raw() -> None:
    whole = candidate({"text": "Hi", "thoughtSignature": "abc"}, finish="STOP")
    assert content_parts(whole) == [{"text": "Hi", "thoughtSignature": "abc"}]
    assert content_parts([candidate({"text": ""}), {"usageMetadata": {}}]) == []
    gen = ai.Generation(
        text="Hi",
        structured=None,
        tool_calls=(),
        target=ai.ResolvedTarget("gemini", "m", "gemini"),
        finish_reason="stop",
        usage=ai.Usage(),
        timing=ai.Timing(started_at=0.0),
    )
    message = assistant_message(gen)
    assert message.text == "Hi" and not message.provider_data


# --- stream parsing ---------------------------------------------------------------------


def test_stream_text_reasoning_and_whole_calls_with_live_usage() -> None:
    script = Script(
        pieces=(
            Reasoning("Let me think. "),
            Text("Héllo"),
            Text(" wörld"),
            ToolFragment(0, '{"city": "Pa', id=None, name="get_weather"),
            ToolFragment(0, 'ris"}'),
            ToolFragment(1, "{}", id="fc-7", name="get_time"),
        ),
        usage=ScriptUsage(
            input_tokens=11, output_tokens=9, cache_read_tokens=4, reasoning_tokens=3
        ),
        usage_placement="split",
        read_sizes=(1,),
    )
    t = FakeTransport("gemini", [script])
    events, result = run(stream_all(t))
    assert result.text == "Héllo wörld"
    assert result.reasoning == "Let me think. "
    assert result.tool_calls == (
        ai.ToolCall("call_0", "get_weather", {"city": "Paris"}),
        ai.ToolCall("fc-7", "get_time", {}),
    )
    assert result.finish_reason == "tool_calls"
    assert tokens(result.usage) == ai.Usage(
        input_tokens=11, output_tokens=9, total_tokens=20, cache_read_tokens=4, reasoning_tokens=3
    )
    assert result.warnings == ()
    updates = [ev.usage for ev in events if isinstance(ev, ai.UsageUpdate)]
    assert len(updates) == 6  # live in all five content chunks, then with the finish reason
    assert updates[0].input_tokens == 11 and updates[0].output_tokens is None
    deltas = [ev for ev in events if isinstance(ev, ai.ToolCallDelta)]
    assert [(d.index, d.call_id, d.name) for d in deltas] == [
        (0, None, "get_weather"),
        (1, "fc-7", "get_time"),
    ]
    assert json.loads(deltas[0].arguments_fragment) == {"city": "Paris"}


def test_usage_arrives_live_and_later_reports_win() -> None:
    meta = [
        {"promptTokenCount": 18, "totalTokenCount": 18},
        {
            "promptTokenCount": 18,
            "candidatesTokenCount": 31,
            "thoughtsTokenCount": 35,
            "totalTokenCount": 84,
        },
        {
            "promptTokenCount": 18,
            "candidatesTokenCount": 80,
            "thoughtsTokenCount": 35,
            "cachedContentTokenCount": 6,
            "toolUsePromptTokenCount": 2,
            "totalTokenCount": 135,
        },
    ]
    body = sse_body(
        {**candidate({"text": "1"}), "usageMetadata": meta[0]},
        {**candidate({"text": "2"}), "usageMetadata": meta[1]},
        {**candidate({"text": "3"}, finish="STOP"), "usageMetadata": meta[2]},
    )
    rec = Recorder((200, body, "text/event-stream"))
    events, result = run(stream_all(rec.transport()))
    updates = [tokens(ev.usage) for ev in events if isinstance(ev, ai.UsageUpdate)]
    assert updates == [
        ai.Usage(input_tokens=18, total_tokens=18),
        ai.Usage(input_tokens=18, output_tokens=66, total_tokens=84, reasoning_tokens=35),
        ai.Usage(
            input_tokens=20,
            output_tokens=115,
            total_tokens=135,
            cache_read_tokens=6,
            reasoning_tokens=35,
        ),
    ]
    # Each update arrives with its chunk: text, usage, text, usage, ...
    names = [n for n in kinds(events) if n in ("TextDelta", "UsageUpdate")]
    assert names == ["TextDelta", "UsageUpdate"] * 3
    assert tokens(result.usage) == updates[-1]


def test_thoughts_only_usage_counts_as_output() -> None:
    body = sse_body(
        {
            **candidate({"text": "hmm", "thought": True}),
            "usageMetadata": {
                "promptTokenCount": 32,
                "thoughtsTokenCount": 42,
                "totalTokenCount": 74,
            },
        },
        candidate({"text": ""}, finish="MAX_TOKENS"),
    )
    rec = Recorder((200, body, "text/event-stream"))
    _, result = run(stream_all(rec.transport()))
    assert result.usage.output_tokens == 42 and result.usage.reasoning_tokens == 42
    assert result.usage.total_tokens == 74
    assert result.finish_reason == "length"
    assert result.reasoning == "hmm" and result.text == ""


@pytest.mark.parametrize(
    ("wire", "neutral"),
    [
        ("STOP", "stop"),
        ("MAX_TOKENS", "length"),
        ("SAFETY", "content_filter"),
        ("RECITATION", "content_filter"),
        ("BLOCKLIST", "content_filter"),
        ("PROHIBITED_CONTENT", "content_filter"),
        ("SPII", "content_filter"),
        ("IMAGE_SAFETY", "content_filter"),
        ("MALFORMED_FUNCTION_CALL", "other"),
        ("OTHER", "other"),
        ("FINISH_REASON_UNSPECIFIED", "other"),
        ("LANGUAGE", "other"),
        ("SOMETHING_NEW", "other"),
    ],
)
def test_finish_reason_mapping(wire: str, neutral: str) -> None:
    rec = Recorder((200, sse_body(candidate({"text": "x"}, finish=wire)), "text/event-stream"))
    _, result = run(stream_all(rec.transport()))
    assert result.finish_reason == neutral


def test_stop_after_function_calls_is_tool_calls_but_max_tokens_stays_length() -> None:
    call = {"functionCall": {"name": "f", "args": {}}}
    rec = Recorder(
        (200, sse_body(candidate(call, finish="STOP")), "text/event-stream"),
        (200, sse_body(candidate(call, finish="MAX_TOKENS")), "text/event-stream"),
    )
    _, first = run(stream_all(rec.transport()))
    _, second = run(stream_all(rec.transport()))
    assert first.finish_reason == "tool_calls"
    assert second.finish_reason == "length"


def test_finish_message_and_unmapped_parts_become_warnings() -> None:
    body = sse_body(
        candidate({"executableCode": {"language": "PYTHON", "code": "1+1"}}),
        candidate(
            {"text": ""},
            finish="MALFORMED_FUNCTION_CALL",
            finishMessage="Malformed function call: foo(",
        ),
    )
    rec = Recorder((200, body, "text/event-stream"))
    _, result = run(stream_all(rec.transport()))
    assert result.finish_reason == "other"
    assert any("executableCode" in w for w in result.warnings)
    assert any("Malformed function call" in w for w in result.warnings)


def test_stream_without_finish_reason_fails_as_truncated() -> None:
    t = FakeTransport("gemini", [Script(pieces=(Text("partial"),), finish_reason=None)])
    with pytest.raises(ai.StreamError, match="ended before a finish reason"):
        run(stream_all(t))


def test_clean_end_after_finish_reason_is_the_sentinel() -> None:
    script = Script(pieces=(Text("done"),), usage=ScriptUsage(3, 1), usage_placement="trailing")
    t = FakeTransport("gemini", [script])
    _, result = run(stream_all(t))
    assert result.text == "done"
    assert result.usage.input_tokens == 3  # the usage-only chunk after the finish chunk
    assert result.warnings == ()


def test_disconnect_after_finish_reason_completes_with_a_warning() -> None:
    script = Script(
        pieces=(Text("done"),),
        usage=ScriptUsage(3, 1),
        usage_placement="finish",
        fault=Fault("disconnect", at=2),
    )
    t = FakeTransport("gemini", [script])
    _, result = run(stream_all(t))
    assert result.text == "done"
    assert result.usage.output_tokens == 1
    assert any(w.startswith(USAGE_MAY_BE_INCOMPLETE) for w in result.warnings)


def test_disconnect_before_finish_fails_after_flushing_usage() -> None:
    script = Script(
        pieces=(Text("a"), Text("b")),
        usage=ScriptUsage(5, 2),
        usage_placement="split",
        fault=Fault("disconnect", at=2, partial_bytes=10),
    )
    t = FakeTransport("gemini", [script])
    seen: list[ai.StreamEvent] = []

    async def go() -> None:
        s = ai.ProviderSettings("gemini", api_key="k", transport=t)
        async with ai.AsyncClient([s]) as client:
            async with client.stream("hi", route=route()) as st:
                async for ev in st:
                    seen.append(ev)

    with pytest.raises(ai.StreamError):
        run(go())
    assert [ev.usage.input_tokens for ev in seen if isinstance(ev, ai.UsageUpdate)] == [5, 5]


# --- the JSON-array stream body ----------------------------------------------------------


@pytest.mark.parametrize("read_size", [1, 2, 3, 7, 64])
def test_json_array_body_in_any_read_split(read_size: int) -> None:
    script = Script(
        pieces=(
            Reasoning("思考"),
            Text('a "quoted" {brace} \\ ü'),
            ToolFragment(0, '{"k": "}"}', name="f"),
        ),
        usage=ScriptUsage(4, 6, reasoning_tokens=2),
        usage_placement="finish",
        read_sizes=(read_size,),
    )
    t = FakeTransport("gemini-json-array", [script])
    _, result = run(stream_all(t, settings={"options": {"stream_format": "json-array"}}))
    assert result.text == 'a "quoted" {brace} \\ ü'
    assert result.reasoning == "思考"
    assert result.tool_calls == (ai.ToolCall("call_0", "f", {"k": "}"}),)
    assert tokens(result.usage) == ai.Usage(4, 6, 10, reasoning_tokens=2)
    assert result.warnings == ()


def test_json_array_format_option_drops_alt_sse() -> None:
    rec = Recorder(
        (
            200,
            b"[" + json.dumps(candidate({"text": "x"}, finish="STOP")).encode() + b"]",
            "application/json",
        )
    )
    run(stream_all(rec.transport(), settings={"options": {"stream_format": "json-array"}}))
    assert rec.requests[0].url.params.get("alt") is None


def test_framing_follows_the_response_content_type() -> None:
    # Asked for SSE, answered with the array form (a proxy that dropped alt=sse).
    body = b"[" + json.dumps(candidate({"text": "x"}, finish="STOP")).encode() + b"\n]"
    rec = Recorder((200, body, "application/json; charset=UTF-8"))
    _, result = run(stream_all(rec.transport()))
    assert result.text == "x" and result.warnings == ()


def test_json_array_closing_bracket_is_the_sentinel() -> None:
    no_finish = b"[" + json.dumps(candidate({"text": "x"})).encode() + b"]"
    unclosed = b"[" + json.dumps(candidate({"text": "y"}, finish="STOP")).encode() + b"\n"
    rec = Recorder((200, no_finish, "application/json"), (200, unclosed, "application/json"))
    _, closed = run(stream_all(rec.transport()))
    assert closed.text == "x" and closed.finish_reason == "stop" and closed.warnings == ()
    _, open_ = run(stream_all(rec.transport()))
    assert open_.text == "y"
    assert any(w.startswith(USAGE_MAY_BE_INCOMPLETE) for w in open_.warnings)


def test_json_array_garbage_is_a_protocol_error() -> None:
    script = Script(pieces=(Text("a"),), fault=Fault("malformed", at=1))
    t = FakeTransport("gemini-json-array", [script])
    with pytest.raises(ai.ProtocolError):
        run(stream_all(t))
    rec = Recorder((200, b'[{"candidates": []} x', "application/json"))
    with pytest.raises(ai.AllTargetsFailedError) as info:
        run(stream_all(rec.transport()))
    assert info.value.attempts[-1].error is not None
    assert info.value.attempts[-1].error.type_name == "ProtocolError"


def _split_everywhere(body: bytes) -> list[list[bytes]]:
    return [[body[:i], body[i:]] for i in range(len(body) + 1)]


def test_json_stream_reader_objects_across_every_split() -> None:
    objects = [{"a": 'x]}{"y'}, {"b": ["[", {"c": "\\"}]}, {"d": "é💡"}]
    body = (
        "[" + "\n,\r\n".join(json.dumps(o, ensure_ascii=False) for o in objects) + "\n]"
    ).encode()
    for pieces in _split_everywhere(body):
        reader = _array_reader()
        got = [json.loads(chunk) for piece in pieces for chunk in reader.feed(piece)]
        assert got == objects
        assert reader.closed


def _array_reader() -> JSONArrayFramer:
    return JSONArrayFramer("gemini", DEFAULT_MAX_FRAME_BYTES)


def test_json_stream_reader_bare_objects_and_errors() -> None:
    reader = _array_reader()
    assert reader.feed(b'{"a": 1}\n{"b"') == [b'{"a": 1}']
    assert reader.partial and not reader.array
    assert reader.feed(b": 2}") == [b'{"b": 2}']
    with pytest.raises(ai.ProtocolError):
        _array_reader().feed(b"data: {}")
    with pytest.raises(ai.ProtocolError):
        _array_reader().feed(b'{"a": 1}]')
    done = _array_reader()
    assert done.feed(b"[]") == [] and done.closed
    assert done.feed(b"garbage after the end is never read") == []


# --- blocked prompts and errors -------------------------------------------------------------


def test_blocked_prompt_is_a_content_filter_error_in_a_stream() -> None:
    body = sse_body(
        {
            "promptFeedback": {"blockReason": "PROHIBITED_CONTENT"},
            "usageMetadata": {"promptTokenCount": 9, "totalTokenCount": 9},
        }
    )
    rec = Recorder((200, body, "text/event-stream"))
    seen: list[ai.StreamEvent] = []

    async def go() -> None:
        s = ai.ProviderSettings("gemini", api_key="k", transport=rec.transport())
        async with ai.AsyncClient([s]) as client:
            async with client.stream("bad", route=route()) as st:
                async for ev in st:
                    seen.append(ev)

    with pytest.raises(ai.AllTargetsFailedError) as info:
        run(go())
    last = info.value.attempts[-1].error
    assert last is not None and last.type_name == "ContentFilterError"
    assert "PROHIBITED_CONTENT" in last.detail
    assert [ev.usage.input_tokens for ev in seen if isinstance(ev, ai.UsageUpdate)] == [9]


def test_blocked_prompt_is_a_content_filter_error_when_whole() -> None:
    body = {
        "promptFeedback": {
            "blockReason": "OTHER",
            "blockReasonMessage": "The prompt violated a policy.",
        },
        "usageMetadata": {"promptTokenCount": 5},
    }
    rec = Recorder((200, json.dumps(body).encode(), "application/json"))
    with pytest.raises(ai.AllTargetsFailedError) as info:
        run(generate(rec.transport()))
    last = info.value.attempts[-1].error
    assert last is not None and last.type_name == "ContentFilterError"
    assert "violated a policy" in last.detail


def _error(code: int, status: str, message: str, *details: dict[str, Any]) -> bytes:
    error: dict[str, Any] = {"code": code, "message": message, "status": status}
    if details:
        error["details"] = list(details)
    return json.dumps({"error": error}).encode()


def _failure(body: bytes, status: int) -> ai.AnyInferError:
    rec = Recorder((status, body, "application/json"))
    with pytest.raises(ai.AnyInferError) as info:
        run(generate(rec.transport()))
    err = info.value
    if isinstance(err, ai.AllTargetsFailedError):
        assert err.attempts[-1].error is not None
    return err


def _adapter_error(
    status: int, body: bytes, headers: dict[str, str] | None = None
) -> ai.ProviderError:
    return _adapter().error_from_response(status, httpx.Headers(headers or {}), body)


def test_invalid_api_key_is_an_authentication_error() -> None:
    body = _error(
        400,
        "INVALID_ARGUMENT",
        "API key not valid. Please pass a valid API key.",
        {
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": "API_KEY_INVALID",
            "domain": "googleapis.com",
        },
    )
    err = _adapter_error(400, body)
    assert isinstance(err, ai.AuthenticationError) and err.http_status == 400
    assert not err.retryable
    # And through the client: the attempt fails with it.
    failed = _failure(body, 400)
    assert isinstance(failed, ai.AllTargetsFailedError)
    assert failed.attempts[-1].error is not None
    assert failed.attempts[-1].error.type_name == "AuthenticationError"


@pytest.mark.parametrize(
    ("status", "name", "message", "kind"),
    [
        (
            401,
            "UNAUTHENTICATED",
            "Request had invalid authentication credentials.",
            ai.AuthenticationError,
        ),
        (
            403,
            "PERMISSION_DENIED",
            "Method doesn't allow unregistered callers.",
            ai.AuthenticationError,
        ),
        (
            404,
            "NOT_FOUND",
            "models/nope is not found for API version v1beta",
            ai.ModelNotFoundError,
        ),
        (
            503,
            "UNAVAILABLE",
            "The model is overloaded. Please try again later.",
            ai.OverloadedError,
        ),
        (
            400,
            "INVALID_ARGUMENT",
            "The input token count (1200000) exceeds the maximum number of tokens allowed "
            "(1048576).",
            ai.ContextWindowError,
        ),
        (
            400,
            "INVALID_ARGUMENT",
            "Invalid value at 'safety_settings[0].threshold'",
            ai.ProviderError,
        ),
        (500, "INTERNAL", "An internal error has occurred.", ai.ProviderError),
    ],
)
def test_error_statuses(status: int, name: str, message: str, kind: type[ai.ProviderError]) -> None:
    err = _adapter_error(status, _error(status, name, message))
    assert type(err) is kind
    assert err.http_status == status
    assert message in err.message
    assert err.retryable == (status >= 500)


def test_rate_limit_takes_retry_after_from_retry_info() -> None:
    body = _error(
        429,
        "RESOURCE_EXHAUSTED",
        "You exceeded your current quota, please check your plan and billing details.",
        {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": []},
        {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "35s"},
    )
    err = _adapter_error(429, body)
    assert isinstance(err, ai.RateLimitError)
    assert err.retry_after == 35.0 and err.retryable
    header_wins = _adapter_error(429, body, {"retry-after": "3"})
    assert isinstance(header_wins, ai.RateLimitError) and header_wins.retry_after == 3.0


def test_error_wrapped_in_a_list_and_non_json_bodies() -> None:
    body = b"[" + _error(404, "NOT_FOUND", "models/x is not found") + b"]"
    assert isinstance(_adapter_error(404, body), ai.ModelNotFoundError)
    assert _adapter().error_message(body) == ("models/x is not found", "NOT_FOUND")
    html = _adapter_error(502, b"<html>Bad Gateway</html>")
    assert type(html) is ai.ProviderError and html.retryable


def test_error_object_inside_a_stream_is_typed() -> None:
    body = sse_body(
        {**candidate({"text": "par"}), "usageMetadata": {"promptTokenCount": 4}},
        {"error": {"code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"}},
    )
    rec = Recorder((200, body, "text/event-stream"))
    with pytest.raises(ai.OverloadedError) as info:
        run(stream_all(rec.transport()))
    assert info.value.phase == "stream"
    assert info.value.http_status == 503


@pytest.mark.parametrize("read_size", [None, 1, 7])
def test_bare_error_object_between_events_is_typed(read_size: int | None) -> None:
    # How Gemini really fails mid-stream over alt=sse: the error object pretty-printed,
    # with no `data:` prefix (vercel/ai#5217). It used to be skipped as unknown SSE
    # lines, so the stream looked truncated (StreamError) and the 503 was lost.
    error = {"code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"}
    body = (
        sse_body({**candidate({"text": "par"}), "usageMetadata": {"promptTokenCount": 4}})
        + json.dumps({"error": error}, indent=2).encode()
        + b"\n"
    )
    step = read_size or len(body)
    reads = [body[i : i + step] for i in range(0, len(body), step)]

    async def chunks() -> AsyncIterator[bytes]:
        for read in reads:
            yield read

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=chunks(), headers={"content-type": "text/event-stream"})

    seen: list[ai.StreamEvent] = []

    async def go() -> None:
        s = ai.ProviderSettings("gemini", api_key="k", transport=httpx.MockTransport(handler))
        async with ai.AsyncClient([s]) as client, client.stream("hi", route=route()) as st:
            async for ev in st:
                seen.append(ev)

    with pytest.raises(ai.OverloadedError) as info:
        run(go())
    assert info.value.http_status == 503 and "overloaded" in info.value.message
    assert "TextDelta" in kinds(seen) and "UsageUpdate" in kinds(seen)


def test_status_faults_from_the_dialect() -> None:
    faults = [
        Fault("status", status=429, retry_after=7.0),
        Fault("status", status=400, code="context_length_exceeded"),
        Fault("status", status=403),
    ]
    for dialect in ("gemini", "gemini-json-array"):
        t = FakeTransport(dialect, [Script(fault=f) for f in faults])
        got = []
        for _ in faults:
            with pytest.raises(ai.AllTargetsFailedError) as info:
                run(stream_all(t))
            err = info.value.attempts[-1].error
            assert err is not None
            got.append(err.type_name)
        assert got == ["RateLimitError", "ContextWindowError", "AuthenticationError"]


# --- discovery and health ------------------------------------------------------------


def _models_page(names: Sequence[str], token: str | None = None) -> bytes:
    page: dict[str, Any] = {
        "models": [
            {
                "name": f"models/{n}",
                "displayName": n.title(),
                "inputTokenLimit": 1048576,
                "outputTokenLimit": 65536,
                "supportedGenerationMethods": ["generateContent", "countTokens"],
                "thinking": True,
            }
            for n in names
        ]
    }
    if token:
        page["nextPageToken"] = token
    return json.dumps(page).encode()


def test_models_follow_page_tokens() -> None:
    rec = Recorder(
        (200, _models_page(["gemini-2.5-flash", "gemini-2.5-pro"], "p2"), "application/json"),
        (200, _models_page(["text-embedding-004"]), "application/json"),
    )
    s = ai.ProviderSettings("gemini", api_key="k", transport=rec.transport())

    async def go() -> Sequence[ai.DiscoveredModel]:
        async with ai.AsyncClient([s]) as client:
            return await client.models("gemini")

    found = run(go())
    assert [m.id for m in found] == ["gemini-2.5-flash", "gemini-2.5-pro", "text-embedding-004"]
    first = found[0]
    assert first.context_window == 1048576 and first.max_output_tokens == 65536
    assert first.facts == {
        "supported_generation_methods": ("generateContent", "countTokens"),
        "reasoning": True,
        "display_name": "Gemini-2.5-Flash",
    }
    assert rec.requests[0].url.params["pageSize"] == "1000"
    assert rec.requests[1].url.params["pageToken"] == "p2"
    assert rec.requests[0].headers["x-goog-api-key"] == "k"


def test_models_stop_on_a_repeated_page_token() -> None:
    page = (200, _models_page(["m"], "same"), "application/json")
    rec = Recorder(page, page, page)
    s = ai.ProviderSettings("gemini", api_key="k", transport=rec.transport())

    async def go() -> Sequence[ai.DiscoveredModel]:
        async with ai.AsyncClient([s]) as client:
            return await client.models("gemini")

    assert len(run(go())) == 2
    assert len(rec.requests) == 2


def test_health_over_the_dialect_and_on_failure() -> None:
    t = FakeTransport("gemini", [], models=["gemini-2.5-flash", "gemini-2.5-pro"])
    bad = Recorder((403, _error(403, "PERMISSION_DENIED", "no"), "application/json"))

    async def go() -> tuple[ai.Health, ai.Health, Sequence[ai.DiscoveredModel]]:
        ok_s = ai.ProviderSettings("gemini", api_key="k", transport=t)
        bad_s = ai.ProviderSettings("gemini", alias="bad", api_key="k", transport=bad.transport())
        async with ai.AsyncClient([ok_s, bad_s]) as client:
            return (
                await client.health("gemini"),
                await client.health("bad"),
                await client.models("gemini"),
            )

    ok, failed, models = run(go())
    assert ok.ok and ok.models == 2
    assert [m.id for m in models] == ["gemini-2.5-flash", "gemini-2.5-pro"]
    assert not failed.ok and "no" in failed.detail


# --- the dialect ---------------------------------------------------------------------------


def test_dialect_routes_by_endpoint() -> None:
    d = get_dialect("gemini")
    assert d.base_path == "/v1beta"
    assert d.is_generation("POST", "/v1beta/models/m:generateContent")
    assert d.is_generation("POST", "/v1beta/models/m:streamGenerateContent")
    assert not d.is_generation("GET", "/v1beta/models/m:generateContent")
    assert not d.is_generation("POST", "/v1beta/models/m:countTokens")
    assert d.request_wants_stream("POST", "/v1beta/models/m:streamGenerateContent", {})
    assert not d.request_wants_stream("POST", "/v1beta/models/m:generateContent", {"stream": True})


def test_dialect_finish_reasons_read_back() -> None:
    d = GeminiDialect()
    call = (ToolFragment(0, "{}", name="f"),)
    expected = d.expected_finish_reason
    assert expected(Script(pieces=call, finish_reason="stop")) == "tool_calls"
    assert expected(Script(finish_reason="tool_calls")) == "stop"
    assert expected(Script(finish_reason="length")) == "length"
    assert expected(Script(finish_reason=None)) is None
    body = d.render(Script(finish_reason="content_filter"), stream=False).body
    assert json.loads(body)["candidates"][0]["finishReason"] == "SAFETY"


def test_dialect_leaves_out_a_reasoning_count_gemini_cannot_say() -> None:
    d = get_dialect("gemini")
    rendered = d.render(
        Script(usage=ScriptUsage(1, 2, reasoning_tokens=5), usage_placement="finish"), stream=True
    )
    finish = next(f for f in rendered.frames if f.finish)
    assert finish.usage == frozenset({"input_tokens", "output_tokens"})
    assert b"thoughtsTokenCount" not in finish.data


# --- loopback ------------------------------------------------------------------------------


@pytest.mark.loopback
@pytest.mark.parametrize("dialect", ["gemini", "gemini-json-array"])
def test_loopback_stream_and_generate(dialect: str) -> None:
    script = Script(
        pieces=(Reasoning("r"), Text("Hello"), Text(" there")),
        usage=ScriptUsage(7, 5, reasoning_tokens=1),
        usage_placement="split",
        read_sizes=(5,),
    )
    with FakeServer(dialect, [script, script]) as srv:
        s = ai.ProviderSettings("gemini", api_key="k", base_url=srv.base_url)
        with ai.Client([s]) as client:
            with client.stream("hi", route=route()) as st:
                events = list(st)
            streamed = st.result
            whole = client.generate("hi", route=route())
        srv.assert_all_used()
    assert streamed.text == whole.text == "Hello there"
    assert streamed.reasoning == whole.reasoning == "r"
    assert tokens(streamed.usage) == tokens(whole.usage) == ai.Usage(7, 5, 12, reasoning_tokens=1)
    assert kinds(events)[0] == "TimingMark" and kinds(events)[-1] == "StreamEnded"
    assert [r.path for r in srv.requests] == [
        "/v1beta/models/gemini-2.5-flash:streamGenerateContent",
        "/v1beta/models/gemini-2.5-flash:generateContent",
    ]
