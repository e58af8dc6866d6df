"""The Cohere Chat v2 adapter and its `cohere-v2` dialect.

Everything goes through the real client, the core and the adapter, against
`fakeservers.FakeTransport` or an `httpx.MockTransport` serving hand-written event
streams where a test needs shapes the dialect does not produce (citations, tool plans,
an `ERROR` finish, errors of Cohere's own statuses).
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from helpers import NO_RETRY, Caller, settings_for, sse

import anyinfer as ai
import anyinfer.fakeservers as fs
from anyinfer._providers.cohere import THINKING_BUDGETS, CohereAdapter
from anyinfer.fakeservers import Reasoning, Script, ScriptUsage, Text, ToolFragment

DIALECT = fs.get_dialect("cohere-v2")
MODEL = "command-a-03-2025"

provider = settings_for("cohere", api_key="co-test")
_CALLS = Caller(provider, route=ai.Route(f"cohere:{MODEL}", retry=NO_RETRY))
stream, generate = _CALLS.stream, _CALLS.generate


def sent_body(messages: Any = "hi", **kw: Any) -> dict[str, Any]:
    """The JSON body the adapter sends for one call (answered with a short reply)."""
    transport = fs.FakeTransport(DIALECT, [Script(pieces=(Text("ok"),))])
    assert generate(transport, messages, **kw).text == "ok"
    (request,) = transport.requests
    assert request.path == "/v2/chat"
    body: dict[str, Any] = request.json
    return body


def served(body: bytes, status: int = 200, **headers: str) -> httpx.MockTransport:
    """A transport answering every request with `body` (SSE unless it is an error)."""
    kind = "text/event-stream" if status == 200 else "application/json"

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, content=body, headers={"content-type": kind, **headers})

    return httpx.MockTransport(handler)


def ev(kind: str, **fields: Any) -> dict[str, Any]:
    return {"type": kind, **fields}


def msg(**fields: Any) -> dict[str, Any]:
    return {"message": fields}


# --- requests ------------------------------------------------------------------------


def test_request_maps_messages_tools_and_sampling() -> None:
    tools = [ai.ToolSpec("get_weather", "Weather.", {"type": "object", "properties": {}})]
    convo = [
        ai.Message.system("Be brief."),
        ai.Message.user("Weather in Paris?"),
        ai.Message.assistant("", [ai.ToolCall("get_weather_1", "get_weather", {"city": "Paris"})]),
        ai.Message.tool_result("get_weather_1", "Sunny"),
    ]
    sampling = ai.Sampling(
        temperature=0.3,
        top_p=0.9,
        max_output_tokens=50,
        stop=("END",),
        seed=7,
        presence_penalty=0.1,
        frequency_penalty=0.2,
    )
    body = sent_body(convo, tools=tools, sampling=sampling)
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "tool_calls": [
                {
                    "id": "get_weather_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "get_weather_1", "content": "Sunny"},
    ]
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Weather.",
                "parameters": {"type": "object", "properties": {}},
            },
        }
    ]
    assert "tool_choice" not in body  # auto is Cohere's default: nothing to send
    for key, value in {
        "temperature": 0.3,
        "p": 0.9,
        "max_tokens": 50,
        "stop_sequences": ["END"],
        "seed": 7,
        "presence_penalty": 0.1,
        "frequency_penalty": 0.2,
    }.items():
        assert body[key] == value, key
    assert body["stream"] is False
    assert "top_p" not in body and "stop" not in body


def test_images_become_image_url_parts() -> None:
    image = ai.ImageContent(data=b"\x89PNG", media_type="image/png")
    body = sent_body([ai.Message.user([ai.TextContent("what is it?"), image])])
    assert body["messages"][0]["content"] == [
        {"type": "text", "text": "what is it?"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw=="}},
    ]


@pytest.mark.parametrize(
    ("choice", "wire", "offered"),
    [("required", "REQUIRED", ["a", "b"]), ("none", "NONE", ["a", "b"]), ("b", "REQUIRED", ["b"])],
)
def test_tool_choice_uses_cohere_values(choice: str, wire: str, offered: list[str]) -> None:
    tools = [ai.ToolSpec("a"), ai.ToolSpec("b")]
    body = sent_body(tools=tools, tool_choice=choice)
    assert body["tool_choice"] == wire
    assert [t["function"]["name"] for t in body["tools"]] == offered


def test_response_formats() -> None:
    schema = {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}
    adapter = CohereAdapter(ai.ProviderSettings("cohere", api_key="k"))
    from anyinfer._request import GenerationRequest

    def body_for(fmt: dict[str, Any]) -> dict[str, Any]:
        request = GenerationRequest(MODEL, (ai.Message.user("x"),), response_format=fmt)
        return adapter.build_body(request)[0]

    assert body_for({"type": "json_object"})["response_format"] == {"type": "json_object"}
    named = {"type": "json_schema", "name": "o", "schema": schema, "strict": True}
    assert body_for(named)["response_format"] == {"type": "json_object", "json_schema": schema}


@pytest.mark.parametrize("effort", ["none", "minimal", "low", "medium", "high"])
def test_reasoning_effort_becomes_thinking(effort: str) -> None:
    body = sent_body(reasoning=effort)
    if effort == "none":
        assert body["thinking"] == {"type": "disabled"}
    else:
        expected: dict[str, Any] = {"type": "enabled"}
        if THINKING_BUDGETS[effort] is not None:
            expected["token_budget"] = THINKING_BUDGETS[effort]
        assert body["thinking"] == expected
    assert "thinking" not in sent_body()


def test_provider_options_pass_through_last() -> None:
    body = sent_body(provider_options={"cohere": {"k": 40, "safety_mode": "OFF"}})
    assert body["k"] == 40 and body["safety_mode"] == "OFF"


def test_key_from_co_api_key_then_cohere_api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.get("authorization", ""))
        return httpx.Response(401, json={"id": "x", "message": "invalid api token"})

    for name in ("CO_API_KEY", "COHERE_API_KEY", "ANYINFER_COHERE_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("COHERE_API_KEY", "from-cohere-api-key")
    out = stream(ai.ProviderSettings("cohere", transport=httpx.MockTransport(handler)))
    assert isinstance(out.error, ai.AllTargetsFailedError)
    monkeypatch.setenv("CO_API_KEY", "from-co-api-key")
    stream(ai.ProviderSettings("cohere", transport=httpx.MockTransport(handler)))
    assert seen == ["Bearer from-cohere-api-key", "Bearer from-co-api-key"]


# --- responses through the dialect ---------------------------------------------------


def test_dialect_round_trip_streamed_and_whole() -> None:
    script = Script(
        pieces=(
            Reasoning("think "),
            Reasoning("more"),
            ToolFragment(0, '{"city":', id="get_weather_abc", name="get_weather"),
            ToolFragment(0, '"Paris"}'),
            ToolFragment(1, "{}", id="get_time_def", name="get_time"),
        ),
        finish_reason="tool_calls",
        usage=ScriptUsage(input_tokens=906, output_tokens=77, cache_read_tokens=500),
        usage_placement="finish",
    )
    for call in (generate, lambda t: stream(t).result):
        result = call(fs.FakeTransport(DIALECT, [script]))
        assert result is not None
        assert result.reasoning == "think more"
        assert result.text == ""
        assert [(c.id, c.name, dict(c.arguments)) for c in result.tool_calls] == [
            ("get_weather_abc", "get_weather", {"city": "Paris"}),
            ("get_time_def", "get_time", {}),
        ]
        assert result.finish_reason == "tool_calls"
        assert result.usage.input_tokens == 906
        assert result.usage.output_tokens == 77
        assert result.usage.cache_read_tokens == 500


# --- hand-written wire shapes --------------------------------------------------------

_START = ev("message-start", id="r1", delta=msg(role="assistant", content=[]))
_USAGE = {
    "billed_units": {"input_tokens": 4, "output_tokens": 9},
    "tokens": {"input_tokens": 70, "output_tokens": 11},
}


def test_usage_reports_tokens_not_billed_units() -> None:
    body = sse(
        _START,
        ev("content-start", index=0, delta=msg(content={"type": "text", "text": ""})),
        ev("content-delta", index=0, delta=msg(content={"text": "Hi"})),
        ev("content-end", index=0),
        ev("message-end", delta={"finish_reason": "COMPLETE", "usage": _USAGE}),
        event_lines=True,
    )
    out = stream(served(body))
    assert out.result is not None, out.error
    assert out.result.text == "Hi"
    assert (out.result.usage.input_tokens, out.result.usage.output_tokens) == (70, 11)
    assert out.result.usage.cache_read_tokens is None


def test_tool_plan_is_reasoning_and_citations_stay_raw() -> None:
    citation = {
        "start": 0,
        "end": 5,
        "text": "Sunny",
        "sources": [{"type": "tool", "id": "get_weather_1:0", "tool_output": {"w": "Sunny"}}],
        "type": "TEXT_CONTENT",
    }
    body = sse(
        _START,
        ev("tool-plan-delta", delta=msg(tool_plan="I will look.")),
        ev("content-start", index=0, delta=msg(content={"type": "text", "text": ""})),
        ev("content-delta", index=0, delta=msg(content={"text": "Sunny today."})),
        ev("citation-start", index=0, delta=msg(citations=citation)),
        ev("citation-end", index=0),
        ev("content-end", index=0),
        ev("message-end", delta={"finish_reason": "COMPLETE", "usage": _USAGE}),
        event_lines=True,
    )
    out = stream(served(body), retain_raw=True)
    assert out.result is not None, out.error
    assert out.result.text == "Sunny today."
    assert out.result.reasoning == "I will look."
    raw = out.result.raw
    assert isinstance(raw, list)
    assert [e["delta"]["message"]["citations"] for e in raw if e["type"] == "citation-start"] == [
        citation
    ]


def test_interleaved_tool_calls_correlate_by_index() -> None:
    def start(i: int, cid: str, name: str) -> dict[str, Any]:
        call = {"id": cid, "type": "function", "function": {"name": name, "arguments": ""}}
        return ev("tool-call-start", index=i, delta=msg(tool_calls=call))

    def delta(i: int, text: str) -> dict[str, Any]:
        return ev(
            "tool-call-delta", index=i, delta=msg(tool_calls={"function": {"arguments": text}})
        )

    body = sse(
        _START,
        start(0, "a_1", "a"),
        start(1, "b_1", "b"),
        delta(1, '{"y":'),
        delta(0, '{"x":1}'),
        delta(1, "2}"),
        ev("tool-call-end", index=0),
        ev("tool-call-end", index=1),
        ev("message-end", delta={"finish_reason": "TOOL_CALL", "usage": _USAGE}),
        event_lines=True,
    )
    result = stream(served(body)).result
    assert result is not None
    assert [(c.id, dict(c.arguments)) for c in result.tool_calls] == [
        ("a_1", {"x": 1}),
        ("b_1", {"y": 2}),
    ]
    assert result.finish_reason == "tool_calls"


@pytest.mark.parametrize(
    ("wire", "neutral"),
    [
        ("COMPLETE", "stop"),
        ("STOP_SEQUENCE", "stop"),
        ("MAX_TOKENS", "length"),
        ("TOOL_CALL", "tool_calls"),
        ("TIMEOUT", "other"),
    ],
)
def test_finish_reasons(wire: str, neutral: str) -> None:
    body = sse(
        _START,
        ev("content-delta", index=0, delta=msg(content={"text": "x"})),
        ev("message-end", delta={"finish_reason": wire}),
        event_lines=True,
    )
    result = stream(served(body)).result
    assert result is not None
    assert result.finish_reason == neutral


def test_error_finish_fails_typed_after_flushing_usage() -> None:
    body = sse(
        _START,
        ev(
            "message-end",
            delta={"error": "internal failure", "finish_reason": "ERROR", "usage": _USAGE},
        ),
        event_lines=True,
    )
    out = stream(served(body))
    assert out.result is None
    assert isinstance(out.error, ai.AllTargetsFailedError)
    (attempt,) = out.error.attempts
    assert attempt.error is not None
    assert attempt.error.type_name == "ProviderError"
    assert "internal failure" in attempt.error.detail
    usage = [e.usage for e in out.events if isinstance(e, ai.UsageUpdate)]
    assert usage and usage[-1].input_tokens == 70


def test_error_finish_after_text_raises_the_error_itself() -> None:
    body = sse(
        _START,
        ev("content-delta", index=0, delta=msg(content={"text": "partial"})),
        ev("message-end", delta={"error": "boom", "finish_reason": "ERROR"}),
        event_lines=True,
    )
    out = stream(served(body))
    assert isinstance(out.error, ai.ProviderError) and "boom" in str(out.error)
    assert out.error.retryable


@pytest.mark.parametrize(
    ("status", "message", "kind", "retryable"),
    [
        (400, "invalid request: message must not be empty in a turn", "ProviderError", False),
        (
            400,
            "too many tokens: total number of tokens in the prompt cannot exceed 4081 - "
            "received 4292.",
            "ContextWindowError",
            False,
        ),
        (401, "invalid api token", "AuthenticationError", False),
        (404, "model 'nonexistent' not found", "ModelNotFoundError", False),
        (429, "You are past the per minute request limit", "RateLimitError", True),
        (498, "invalid token", "AuthenticationError", False),
        (499, "request cancelled", "ProviderError", False),
        (500, "internal server error", "ProviderError", True),
    ],
)
def test_error_statuses(status: int, message: str, kind: str, retryable: bool) -> None:
    body = json.dumps({"id": "8bd5b608-887c-49f7-a6b3-d3bd5830c3de", "message": message})
    out = stream(served(body.encode(), status, **({"retry-after": "3"} if status == 429 else {})))
    assert isinstance(out.error, ai.AllTargetsFailedError)
    (attempt,) = out.error.attempts
    info = attempt.error
    assert info is not None
    assert info.type_name == kind
    assert info.http_status == status
    assert message[:40] in info.detail
    assert info.retryable is retryable


def test_body_without_done_warns_usage_may_be_incomplete() -> None:
    body = sse(
        _START,
        ev("content-delta", index=0, delta=msg(content={"text": "Hi"})),
        ev("message-end", delta={"finish_reason": "COMPLETE", "usage": _USAGE}),
        event_lines=True,
        done=False,
    )
    result = stream(served(body)).result
    assert result is not None
    assert result.text == "Hi"
    assert any("usage may be incomplete" in w for w in result.warnings)


def test_documents_are_refused_before_dispatch() -> None:
    doc = ai.DocumentContent(data=b"%PDF-1.4", filename="a.pdf")
    transport = fs.FakeTransport(DIALECT, [])
    out = stream(transport, [ai.Message.user([ai.TextContent("read"), doc])])
    assert isinstance(out.error, ai.AllTargetsFailedError)
    assert "documents" in str(out.error)
    assert transport.requests == []


def test_whole_response_lists_calls_by_slot() -> None:
    """A script whose second slot streams first: the whole response still lists slot 0
    first (its position is its slot), and both paths agree."""
    script = Script(
        pieces=(
            ToolFragment(1, "{}", id="b_1", name="b"),
            ToolFragment(0, '{"x": 1}', id="a_1", name="a"),
        ),
        finish_reason="tool_calls",
    )
    for call in (generate, lambda t: stream(t).result):
        result = call(fs.FakeTransport(DIALECT, [script]))
        assert result is not None
        assert [c.id for c in result.tool_calls] == ["a_1", "b_1"]
