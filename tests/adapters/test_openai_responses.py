"""The OpenAI Responses adapter (`openai-responses`) and its fake-server dialect.

Requests are checked as the fake server received them; responses are driven through the
real client and core, from hand-written event streams (shaped like recorded OpenAI
traffic) served by `httpx.MockTransport`, and from scripts served by the
`openai-responses` dialect through `FakeTransport` and a loopback `FakeServer`.
"""

from __future__ import annotations

import asyncio
import functools
import json
from typing import Any

import httpx
import pytest
from helpers import Caller, settings_for
from helpers import sse as _sse
from wire import usage_seen

import anyinfer as ai
from anyinfer._providers.openai_responses import OpenAIResponsesAdapter
from anyinfer.adapters import GenerationRequest
from anyinfer.fakeservers import (
    FakeServer,
    FakeTransport,
    Fault,
    Reasoning,
    Script,
    ScriptUsage,
    Text,
    ToolFragment,
    get_dialect,
)

PID = "openai-responses"
ROUTE = ai.Route(f"{PID}:gpt-test", retry=ai.RetryPolicy(max_retries=0))
DIALECT = get_dialect("openai-responses")


# --- helpers -------------------------------------------------------------------------------


# A Responses stream: `event:` + `data:` per event, numbered like OpenAI's.
sse = functools.partial(_sse, done=False, event_lines=True, numbered="sequence_number")


def response(status: str = "completed", **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": "resp_1",
        "object": "response",
        "status": status,
        "model": "gpt-test",
        "output": [],
        "usage": None,
        "error": None,
        "incomplete_details": None,
    }
    body.update(extra)
    return body


USAGE = {
    "input_tokens": 120,
    "input_tokens_details": {"cached_tokens": 100},
    "output_tokens": 40,
    "output_tokens_details": {"reasoning_tokens": 25},
    "total_tokens": 160,
}
EXPECTED_USAGE = ai.Usage(
    input_tokens=120,
    output_tokens=40,
    total_tokens=160,
    cache_read_tokens=100,
    reasoning_tokens=25,
)

CREATED = {"type": "response.created", "response": response("in_progress")}


def terminal(kind: str = "completed", **extra: Any) -> dict[str, Any]:
    return {"type": f"response.{kind}", "response": response(kind, **extra)}


def message_added(index: int) -> dict[str, Any]:
    item = {"id": f"msg_{index}", "type": "message", "role": "assistant", "content": []}
    return {"type": "response.output_item.added", "output_index": index, "item": item}


def text_delta(index: int, delta: str, content_index: int = 0) -> dict[str, Any]:
    return {
        "type": "response.output_text.delta",
        "item_id": f"msg_{index}",
        "output_index": index,
        "content_index": content_index,
        "delta": delta,
    }


def call_added(index: int, call_id: str, name: str, arguments: str = "") -> dict[str, Any]:
    item = {
        "id": f"fc_{index}",
        "type": "function_call",
        "status": "in_progress",
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
    }
    return {"type": "response.output_item.added", "output_index": index, "item": item}


def args_delta(index: int, delta: str, *, by_id_only: bool = False) -> dict[str, Any]:
    ev: dict[str, Any] = {
        "type": "response.function_call_arguments.delta",
        "item_id": f"fc_{index}",
        "delta": delta,
    }
    if not by_id_only:
        ev["output_index"] = index
    return ev


def mock(
    body: bytes | dict[str, Any],
    *,
    status: int = 200,
    headers: dict[str, str] | None = None,
    seen: list[httpx.Request] | None = None,
) -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        if seen is not None:
            seen.append(request)
        if isinstance(body, dict):
            return httpx.Response(status, json=body, headers=headers)
        hdrs = {"content-type": "text/event-stream", **(headers or {})}
        return httpx.Response(status, content=body, headers=hdrs)

    return httpx.MockTransport(handler)


settings = settings_for(PID, api_key="sk-resp-test")
# stream(transport, prompt="hi", **kw) -> Outcome(events, result, error); generate(...)
_CALLS = Caller(settings, route=ROUTE)
stream, generate = _CALLS.stream, _CALLS.generate


def sent_body(fake: FakeTransport, position: int = -1) -> dict[str, Any]:
    body = fake.requests[position].json
    assert isinstance(body, dict)
    return body


def adapter_parts(transport: httpx.AsyncBaseTransport, request: GenerationRequest) -> list[Any]:
    """Drive the adapter alone (for errors' typed attributes and raw parts)."""

    async def go() -> list[Any]:
        adapter = OpenAIResponsesAdapter(settings(transport))
        try:
            return [p async for p in adapter.generate(request)]
        finally:
            await adapter.aclose()

    return asyncio.run(go())


# --- the request -----------------------------------------------------------------------------


def test_request_maps_system_images_sampling_and_store() -> None:
    fake = FakeTransport(DIALECT, [Script(pieces=(Text("ok"),))])
    image = ai.ImageContent(data=b"\x89PNG", media_type="image/png")
    messages = [
        ai.Message.system("Be brief."),
        ai.Message.system("Answer in French."),
        ai.Message.user([ai.TextContent("What is this?"), image]),
        ai.Message.user([ai.ImageContent(url="https://example.com/cat.jpg")]),
    ]
    sampling = ai.Sampling(temperature=0.3, top_p=0.9, max_output_tokens=256)
    result = generate(fake, messages, sampling=sampling)
    assert result.text == "ok"
    request = fake.requests[0]
    assert (request.method, request.path) == ("POST", "/v1/responses")
    assert sent_body(fake) == {
        "model": "gpt-test",
        "instructions": "Be brief.\n\nAnswer in French.",
        "input": [
            {
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "What is this?"},
                    {"type": "input_image", "image_url": "data:image/png;base64,iVBORw=="},
                ],
            },
            {
                "role": "user",
                "content": [{"type": "input_image", "image_url": "https://example.com/cat.jpg"}],
            },
        ],
        "store": False,
        "max_output_tokens": 256,
        "temperature": 0.3,
        "top_p": 0.9,
    }


def test_streaming_request_sets_stream_and_bearer_auth() -> None:
    seen: list[httpx.Request] = []
    body = sse(CREATED, terminal())
    run = stream(mock(body, seen=seen), "hi")
    assert run.error is None
    (request,) = seen
    assert request.url == "https://api.openai.com/v1/responses"
    assert request.headers["authorization"] == "Bearer sk-resp-test"
    sent = json.loads(request.content)
    assert sent["stream"] is True
    assert sent["input"] == [{"role": "user", "content": "hi"}]
    assert "instructions" not in sent and "reasoning" not in sent and "tools" not in sent


@pytest.mark.parametrize(
    ("choice", "wire"),
    [
        ("auto", "auto"),
        ("none", "none"),
        ("required", "required"),
        ("lookup", {"type": "function", "name": "lookup"}),
    ],
)
def test_tools_are_flat_and_not_strict(choice: str, wire: Any) -> None:
    fake = FakeTransport(DIALECT, [Script(pieces=(Text("ok"),))])
    schema = {"type": "object", "properties": {"key": {"type": "string"}}}
    tools = [ai.ToolSpec("lookup", "Look a key up.", schema), ai.ToolSpec("noop")]
    generate(fake, tools=tools, tool_choice=choice)
    body = sent_body(fake)
    assert body["tools"] == [
        {
            "type": "function",
            "name": "lookup",
            "description": "Look a key up.",
            "parameters": schema,
            "strict": False,
        },
        {
            "type": "function",
            "name": "noop",
            "description": "",
            "parameters": {"type": "object", "properties": {}},
            "strict": False,
        },
    ]
    assert body["tool_choice"] == wire


@pytest.mark.parametrize(
    ("effort", "options", "wire"),
    [
        ("high", {}, {"effort": "high", "summary": "auto"}),
        ("minimal", {}, {"effort": "minimal", "summary": "auto"}),
        ("none", {}, {"effort": "none"}),
        ("low", {"reasoning_summary": None}, {"effort": "low"}),
        ("medium", {"reasoning_summary": "detailed"}, {"effort": "medium", "summary": "detailed"}),
    ],
)
def test_reasoning_effort_asks_for_a_summary(
    effort: str, options: dict[str, Any], wire: dict[str, Any]
) -> None:
    fake = FakeTransport(DIALECT, [Script(pieces=(Text("ok"),))])

    async def go() -> None:
        s = ai.ProviderSettings(PID, api_key="k", transport=fake, options=options)
        async with ai.AsyncClient([s]) as client:
            await client.generate("hi", route=ROUTE, reasoning=effort)  # type: ignore[arg-type]

    asyncio.run(go())
    assert sent_body(fake)["reasoning"] == wire


def test_store_option_and_bad_options() -> None:
    fake = FakeTransport(DIALECT, [Script(pieces=(Text("ok"),))])

    async def go() -> None:
        s = ai.ProviderSettings(PID, api_key="k", transport=fake, options={"store": True})
        async with ai.AsyncClient([s]) as client:
            await client.generate("hi", route=ROUTE)

    asyncio.run(go())
    assert sent_body(fake)["store"] is True
    with pytest.raises(ai.ConfigError, match="store"):
        OpenAIResponsesAdapter(ai.ProviderSettings(PID, api_key="k", options={"store": "yes"}))
    with pytest.raises(ai.ConfigError, match="reasoning_summary"):
        OpenAIResponsesAdapter(
            ai.ProviderSettings(PID, api_key="k", options={"reasoning_summary": 1})
        )


def test_multi_turn_with_tool_calls_and_results() -> None:
    fake = FakeTransport(DIALECT, [Script(pieces=(Text("It is 6."),))])
    call_a = ai.ToolCall("call_a", "add", {"a": 1, "b": 2})
    call_b = ai.ToolCall("call_b", "mul", {"a": 2, "b": 3})
    messages = [
        ai.Message.system("Use tools."),
        ai.Message.user("Compute."),
        ai.Message.assistant("Let me compute.", [call_a, call_b]),
        ai.Message.tool_result("call_a", "3"),
        ai.Message.tool_result("call_b", "6", is_error=False),
        ai.Message.assistant(tool_calls=[ai.ToolCall("call_c", "noop", {})]),
        ai.Message.tool_result("call_c", "done"),
    ]
    generate(fake, messages)
    body = sent_body(fake)
    assert body["instructions"] == "Use tools."
    assert body["input"] == [
        {"role": "user", "content": "Compute."},
        {"role": "assistant", "content": "Let me compute."},
        {
            "type": "function_call",
            "call_id": "call_a",
            "name": "add",
            "arguments": '{"a": 1, "b": 2}',
        },
        {
            "type": "function_call",
            "call_id": "call_b",
            "name": "mul",
            "arguments": '{"a": 2, "b": 3}',
        },
        {"type": "function_call_output", "call_id": "call_a", "output": "3"},
        {"type": "function_call_output", "call_id": "call_b", "output": "6"},
        {"type": "function_call", "call_id": "call_c", "name": "noop", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_c", "output": "done"},
    ]


def test_response_format_maps_to_text_format() -> None:
    adapter = OpenAIResponsesAdapter(ai.ProviderSettings(PID, api_key="k"))
    messages = (ai.Message.user("hi"),)
    schema = {"type": "object", "properties": {"x": {"type": "integer"}}}
    as_schema = GenerationRequest(
        "m",
        messages,
        response_format={"type": "json_schema", "name": "point", "schema": schema, "strict": True},
    )
    assert adapter.build_body(as_schema)["text"] == {
        "format": {"type": "json_schema", "name": "point", "schema": schema, "strict": True}
    }
    as_object = GenerationRequest("m", messages, response_format={"type": "json_object"})
    assert adapter.build_body(as_object)["text"] == {"format": {"type": "json_object"}}
    assert "text" not in adapter.build_body(GenerationRequest("m", messages))
    asyncio.run(adapter.aclose())


def test_unsupported_sampling_is_dropped_with_a_warning_and_provider_options_win() -> None:
    fake = FakeTransport(DIALECT, [Script(pieces=(Text("a"),)), Script(pieces=(Text("b"),))])
    sampling = ai.Sampling(stop=("END",), seed=7)
    first = generate(fake, sampling=sampling)
    body = sent_body(fake)
    assert "stop" not in body and "seed" not in body
    assert len(first.warnings) == 2
    assert any("'stop'" in w for w in first.warnings)
    assert any("'seed'" in w for w in first.warnings)
    options = {PID: {"seed": 7, "store": True, "truncation": "auto"}}
    second = generate(fake, sampling=sampling, provider_options=options)
    body = sent_body(fake)
    assert (body["seed"], body["store"], body["truncation"]) == (7, True, "auto")
    assert [w for w in second.warnings if "'seed'" in w] == []


# --- stream parsing --------------------------------------------------------------------------


def test_text_stream_with_usage_and_no_done_sentinel() -> None:
    body = sse(
        CREATED,
        {"type": "response.in_progress", "response": response("in_progress")},
        message_added(0),
        text_delta(0, "Hel"),
        text_delta(0, "lo 🙂"),
        {
            "type": "response.output_text.done",
            "output_index": 0,
            "content_index": 0,
            "item_id": "msg_0",
            "text": "Hello 🙂",
        },
        terminal(usage=USAGE),
    )
    run = stream(mock(body))
    assert run.error is None
    result = run.result
    assert result is not None
    assert result.text == "Hello 🙂"
    assert result.finish_reason == "stop"
    assert result.usage == EXPECTED_USAGE
    assert result.warnings == ()  # the terminal event is the sentinel
    assert [e.text for e in run.events if isinstance(e, ai.TextDelta)] == ["Hel", "lo 🙂"]
    assert isinstance(run.events[-1], ai.StreamEnded)


def test_terminal_event_ends_the_stream_whatever_follows() -> None:
    """Nothing after `response.completed` is read: garbage there cannot fail the call."""
    body = sse(CREATED, message_added(0), text_delta(0, "ok"), terminal()) + b"data: {garbage\n\n"
    run = stream(mock(body))
    assert run.error is None
    assert run.result is not None and run.result.text == "ok"


def test_openrouter_style_stream_without_event_lines_and_with_done() -> None:
    body = sse(CREATED, message_added(0), text_delta(0, "4"), terminal(), event_lines=False)
    run = stream(mock(b": OPENROUTER PROCESSING\n\n" + body + b"data: [DONE]\n\n"))
    assert run.error is None
    assert run.result is not None and run.result.text == "4"


def test_stream_cut_before_the_terminal_event_fails() -> None:
    body = sse(CREATED, message_added(0), text_delta(0, "partial"))
    run = stream(mock(body))
    assert isinstance(run.error, ai.StreamError)
    assert [e.text for e in run.events if isinstance(e, ai.TextDelta)] == ["partial"]
    assert not any(isinstance(e, ai.StreamEnded) for e in run.events)


def test_parallel_function_calls_are_slotted_by_item_order() -> None:
    body = sse(
        CREATED,
        call_added(0, "call_x", "first"),
        call_added(1, "call_y", "second"),
        args_delta(1, '{"b":'),
        args_delta(0, '{"a":'),
        args_delta(0, "1}"),
        args_delta(1, "2}", by_id_only=True),  # matched by item_id alone
        {
            "type": "response.function_call_arguments.done",
            "output_index": 0,
            "item_id": "fc_0",
            "arguments": '{"a":1}',
        },
        terminal(usage=USAGE),
    )
    run = stream(mock(body))
    assert run.error is None
    result = run.result
    assert result is not None
    assert result.tool_calls == (
        ai.ToolCall("call_x", "first", {"a": 1}),
        ai.ToolCall("call_y", "second", {"b": 2}),
    )
    assert result.finish_reason == "tool_calls"
    deltas = [e for e in run.events if isinstance(e, ai.ToolCallDelta)]
    assert [(d.index, d.call_id, d.name) for d in deltas[:2]] == [
        (0, "call_x", "first"),
        (1, "call_y", "second"),
    ]
    assert all(d.call_id is None and d.name is None for d in deltas[2:])


def test_done_events_fill_in_what_deltas_did_not_deliver() -> None:
    """A server that skips deltas still yields the whole answer, exactly once."""
    item = {
        "id": "fc_1",
        "type": "function_call",
        "call_id": "c1",
        "name": "f",
        "arguments": '{"k":"v"}',
    }
    body = sse(
        CREATED,
        message_added(0),
        text_delta(0, "Hel"),
        {
            "type": "response.output_text.done",
            "output_index": 0,
            "content_index": 0,
            "text": "Hello",
        },
        {
            "type": "response.output_item.done",
            "output_index": 0,
            "item": {
                "id": "msg_0",
                "type": "message",
                "content": [{"type": "output_text", "text": "Hello"}],
            },
        },
        {"type": "response.output_item.done", "output_index": 1, "item": item},
        terminal(),
    )
    run = stream(mock(body))
    assert run.error is None
    assert run.result is not None
    assert [e.text for e in run.events if isinstance(e, ai.TextDelta)] == ["Hel", "lo"]
    assert run.result.text == "Hello"
    assert run.result.tool_calls == (ai.ToolCall("c1", "f", {"k": "v"}),)


def test_reasoning_summary_parts_and_reasoning_text_stream_as_reasoning() -> None:
    def summary(index: int, delta: str) -> dict[str, Any]:
        return {
            "type": "response.reasoning_summary_text.delta",
            "item_id": "rs_0",
            "output_index": 0,
            "summary_index": index,
            "delta": delta,
        }

    body = sse(
        CREATED,
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {"id": "rs_0", "type": "reasoning", "summary": []},
        },
        summary(0, "**Plan**"),
        summary(0, " think"),
        summary(1, "**Check**"),
        {
            "type": "response.reasoning_text.delta",
            "item_id": "rs_0",
            "output_index": 0,
            "content_index": 0,
            "delta": "raw",
        },
        message_added(1),
        text_delta(1, "Answer"),
        terminal(usage=USAGE),
    )
    run = stream(mock(body), reasoning="high")
    assert run.error is None
    assert run.result is not None
    assert run.result.reasoning == "**Plan** think\n\n**Check**\n\nraw"
    assert run.result.text == "Answer"
    assert run.result.usage.reasoning_tokens == 25
    first = next(i for i, e in enumerate(run.events) if isinstance(e, ai.ReasoningDelta))
    mark = run.events[first - 1]
    assert isinstance(mark, ai.TimingMark) and mark.name == "first_token"


def test_refusal_is_text_with_a_content_filter_finish() -> None:
    body = sse(
        CREATED,
        message_added(0),
        {
            "type": "response.refusal.delta",
            "item_id": "msg_0",
            "output_index": 0,
            "content_index": 0,
            "delta": "I can't help",
        },
        {
            "type": "response.refusal.delta",
            "item_id": "msg_0",
            "output_index": 0,
            "content_index": 0,
            "delta": " with that.",
        },
        {
            "type": "response.refusal.done",
            "item_id": "msg_0",
            "output_index": 0,
            "content_index": 0,
            "refusal": "I can't help with that.",
        },
        terminal(),
    )
    run = stream(mock(body))
    assert run.result is not None
    assert run.result.text == "I can't help with that."
    assert run.result.finish_reason == "content_filter"


@pytest.mark.parametrize(
    ("reason", "finish"),
    [
        ("max_output_tokens", "length"),
        ("content_filter", "content_filter"),
        ("budget_exhausted", "other"),
        (None, "other"),
    ],
)
def test_incomplete_responses_map_their_reason(reason: str | None, finish: str) -> None:
    details = {"reason": reason} if reason else None
    body = sse(
        CREATED,
        call_added(0, "c", "f", '{"a":'),
        terminal("incomplete", incomplete_details=details, usage=USAGE),
    )
    run = stream(mock(body))
    assert run.error is None
    assert run.result is not None
    assert run.result.finish_reason == finish
    assert run.result.usage == EXPECTED_USAGE
    assert run.result.warnings == ("tool call c (f) had unparseable arguments; using {}",)


def test_failed_response_raises_typed_error_after_flushing_usage() -> None:
    error = {"code": "rate_limit_exceeded", "message": "Slow down."}
    body = sse(
        CREATED,
        message_added(0),
        text_delta(0, "Par"),
        terminal("failed", error=error, usage=USAGE),
    )
    run = stream(mock(body))
    assert isinstance(run.error, ai.RateLimitError), repr(run.error)
    assert run.error.phase == "stream"
    assert "Slow down." in run.error.message
    assert usage_seen(run.events) == EXPECTED_USAGE
    assert not any(isinstance(e, ai.StreamEnded) for e in run.events)


def test_failed_response_before_content_is_an_attempt_failure() -> None:
    error = {"code": "server_error", "message": "The server had an error."}
    run = stream(mock(sse(CREATED, terminal("failed", error=error))))
    assert isinstance(run.error, ai.AllTargetsFailedError)
    info = run.error.attempts[0].error
    assert info is not None
    assert (info.type_name, info.retryable, info.phase) == ("ProviderError", True, "stream")
    assert [type(e) for e in run.events] == [ai.TimingMark, ai.AttemptFailed]


@pytest.mark.parametrize(
    ("event", "error_type"),
    [
        (
            {
                "type": "error",
                "code": "context_length_exceeded",
                "message": "Your input exceeds the context window of this model.",
                "param": None,
            },
            ai.ContextWindowError,
        ),
        (
            {
                "type": "error",
                "error": {
                    "type": "rate_limit_error",
                    "code": "rate_limit_exceeded",
                    "message": "Too many requests.",
                },
            },
            ai.RateLimitError,
        ),
        ({"type": "error", "code": "server_error", "message": "boom"}, ai.ProviderError),
    ],
)
def test_error_events_are_typed_errors(event: dict[str, Any], error_type: type) -> None:
    run = stream(mock(sse(CREATED, message_added(0), text_delta(0, "x"), event)))
    assert type(run.error) is error_type, repr(run.error)
    assert isinstance(run.error, ai.ProviderError)
    assert run.error.provider == PID and run.error.phase == "stream"


def test_malformed_event_is_a_protocol_error() -> None:
    body = sse(CREATED, message_added(0), text_delta(0, "x")) + b"data: {nope\n\n"
    run = stream(mock(body))
    assert isinstance(run.error, ai.ProtocolError)


def test_retain_raw_yields_every_event() -> None:
    body = sse(CREATED, message_added(0), text_delta(0, "x"), terminal())
    request = GenerationRequest("m", (ai.Message.user("hi"),), retain_raw=True)
    parts = adapter_parts(mock(body), request)
    from anyinfer.adapters import RawPart

    raws = [p.payload["type"] for p in parts if isinstance(p, RawPart)]
    assert raws == [
        "response.created",
        "response.output_item.added",
        "response.output_text.delta",
        "response.completed",
    ]


# --- non-streaming ---------------------------------------------------------------------------


WHOLE = response(
    output=[
        {
            "id": "rs_1",
            "type": "reasoning",
            "summary": [
                {"type": "summary_text", "text": "Step one."},
                {"type": "summary_text", "text": "Step two."},
            ],
        },
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "content": [
                {"type": "output_text", "text": "Calling ", "annotations": []},
                {"type": "output_text", "text": "tools.", "annotations": []},
            ],
        },
        {"id": "ws_1", "type": "web_search_call", "status": "completed"},
        {
            "id": "fc_1",
            "type": "function_call",
            "call_id": "call_1",
            "name": "f",
            "arguments": '{"x": 1}',
        },
        {
            "id": "fc_2",
            "type": "function_call",
            "call_id": "call_2",
            "name": "g",
            "arguments": {"y": 2},
        },
    ],
    usage=USAGE,
)


def test_whole_response_goes_through_the_same_parts() -> None:
    seen: list[httpx.Request] = []
    result = generate(mock(WHOLE, seen=seen))
    assert "stream" not in json.loads(seen[0].content)
    assert result.text == "Calling tools."
    assert result.reasoning == "Step one.\n\nStep two."
    assert result.tool_calls == (
        ai.ToolCall("call_1", "f", {"x": 1}),
        ai.ToolCall("call_2", "g", {"y": 2}),
    )
    assert result.finish_reason == "tool_calls"
    assert result.usage == EXPECTED_USAGE


def test_whole_refusal_and_incomplete_and_failed_responses() -> None:
    refusal = response(
        output=[{"id": "m", "type": "message", "content": [{"type": "refusal", "refusal": "No."}]}]
    )
    result = generate(mock(refusal))
    assert (result.text, result.finish_reason) == ("No.", "content_filter")

    cut = response(
        "incomplete",
        incomplete_details={"reason": "max_output_tokens"},
        output=[
            {
                "id": "m",
                "type": "message",
                "content": [{"type": "output_text", "text": "Once upon"}],
            }
        ],
    )
    result = generate(mock(cut))
    assert (result.text, result.finish_reason) == ("Once upon", "length")

    failed = response("failed", error={"code": "server_error", "message": "broke"}, usage=USAGE)
    with pytest.raises(ai.AllTargetsFailedError) as caught:
        generate(mock(failed))
    info = caught.value.attempts[0].error
    assert info is not None and info.type_name == "ProviderError" and "broke" in info.detail


# --- HTTP errors -----------------------------------------------------------------------------


def _error_request() -> GenerationRequest:
    return GenerationRequest("gpt-test", (ai.Message.user("hi"),))


@pytest.mark.parametrize(
    ("status", "error", "headers", "expected"),
    [
        (
            401,
            {
                "message": "Incorrect API key provided.",
                "type": "invalid_request_error",
                "code": "invalid_api_key",
            },
            {},
            ai.AuthenticationError,
        ),
        (
            429,
            {"message": "Rate limit reached.", "type": "requests", "code": "rate_limit_exceeded"},
            {"retry-after": "7"},
            ai.RateLimitError,
        ),
        (
            503,
            {
                "message": "The engine is currently overloaded.",
                "type": "server_error",
                "code": None,
            },
            {},
            ai.OverloadedError,
        ),
        (
            400,
            {
                "message": "Your input exceeds the context window of this model.",
                "type": "invalid_request_error",
                "code": "context_length_exceeded",
            },
            {},
            ai.ContextWindowError,
        ),
        (
            400,
            {
                "message": "Your request was flagged by our content policy.",
                "type": "invalid_request_error",
                "code": "content_policy_violation",
            },
            {},
            ai.ContentFilterError,
        ),
        (
            404,
            {
                "message": "The model 'x' does not exist.",
                "type": "invalid_request_error",
                "code": "model_not_found",
            },
            {},
            ai.ModelNotFoundError,
        ),
    ],
)
def test_error_bodies_become_typed_errors(
    status: int, error: dict[str, Any], headers: dict[str, str], expected: type
) -> None:
    transport = mock({"error": {**error, "param": None}}, status=status, headers=headers)
    with pytest.raises(ai.ProviderError) as caught:
        adapter_parts(transport, _error_request())
    exc = caught.value
    assert type(exc) is expected
    assert exc.http_status == status
    assert error["message"] in exc.message
    if expected is ai.RateLimitError:
        assert isinstance(exc, ai.RateLimitError)
        assert exc.retry_after == 7.0
        assert exc.retryable


def test_status_faults_through_the_client() -> None:
    scripts = [
        Script(fault=Fault("status", status=429, retry_after=3, message="slow down")),
        Script(fault=Fault("status", status=400, code="context_length_exceeded")),
    ]
    fake = FakeTransport(DIALECT, scripts)
    kinds = []
    for _ in scripts:
        with pytest.raises(ai.AllTargetsFailedError) as caught:
            generate(fake)
        info = caught.value.attempts[0].error
        assert info is not None
        kinds.append((info.type_name, info.http_status))
    assert kinds == [("RateLimitError", 429), ("ContextWindowError", 400)]
    fake.assert_all_used()


# --- discovery and health --------------------------------------------------------------------


def test_models_and_health() -> None:
    fake = FakeTransport(DIALECT, [], models=["gpt-5", "gpt-4o-mini"])

    async def go() -> tuple[Any, Any]:
        async with ai.AsyncClient([settings(fake)]) as client:
            return await client.models(PID), await client.health(PID)

    models, health = asyncio.run(go())
    assert [(m.provider, m.id) for m in models] == [(PID, "gpt-5"), (PID, "gpt-4o-mini")]
    assert health.ok and health.models == 2
    assert [r.path for r in fake.requests] == ["/v1/models", "/v1/models"]


def test_health_reports_a_failing_provider() -> None:
    body = {"error": {"message": "Incorrect API key provided.", "code": "invalid_api_key"}}

    async def go() -> Any:
        async with ai.AsyncClient([settings(mock(body, status=401))]) as client:
            return await client.health(PID)

    health = asyncio.run(go())
    assert not health.ok
    assert "Incorrect API key" in health.detail


# --- the dialect -----------------------------------------------------------------------------


def test_dialect_opens_function_calls_in_slot_order() -> None:
    script = Script(
        pieces=(
            ToolFragment(1, '{"b"', id="call_b", name="g"),
            ToolFragment(0, '{"a":1}', id="call_a", name="f"),
            ToolFragment(1, ":2}"),
        ),
        finish_reason="tool_calls",
    )
    rendered = DIALECT.render(script, stream=True)
    events = [json.loads(f.data.split(b"data: ", 1)[1]) for f in rendered.frames]
    added = [
        (e["output_index"], e["item"]["call_id"])
        for e in events
        if e["type"] == "response.output_item.added"
    ]
    assert added == [(0, "call_a"), (1, "call_b")]
    # The lower slot's item opens first (its added event announces its first fragment);
    # every fragment's text is a delta, and `arguments` starts empty.
    assert all(
        e["item"]["arguments"] == "" for e in events if e["type"] == "response.output_item.added"
    )
    carriers = [f.pieces for f in rendered.frames if f.pieces]
    assert carriers == [(1,), (0,), (0,), (1,), (2,)]
    assert events[-1]["type"] == "response.completed"
    assert b"[DONE]" not in rendered.body
    last = rendered.frames[-1]
    assert last.sentinel and last.finish


@pytest.mark.parametrize(
    ("finish", "calls", "kind", "reason"),
    [
        ("stop", False, "response.completed", None),
        ("tool_calls", True, "response.completed", None),
        (None, False, "response.completed", None),
        ("length", False, "response.incomplete", "max_output_tokens"),
        ("content_filter", True, "response.incomplete", "content_filter"),
        ("sparkles_42", False, "response.incomplete", "sparkles_42"),
        ("stop", True, "response.incomplete", "stop"),
        ("tool_calls", False, "response.incomplete", "tool_calls"),
        (None, True, "response.incomplete", "stop"),
    ],
)
def test_dialect_terminal_event_for_each_finish_reason(
    finish: str | None, calls: bool, kind: str, reason: str | None
) -> None:
    pieces: tuple[Any, ...] = (Text("t"),)
    if calls:
        pieces += (ToolFragment(0, "{}", id="c", name="f"),)
    script = Script(pieces=pieces, finish_reason=finish, usage=ScriptUsage(3, 4, 1, 9, 2))
    frame = DIALECT.render(script, stream=True).frames[-1]
    event = json.loads(frame.data.split(b"data: ", 1)[1])
    assert event["type"] == kind
    details = event["response"]["incomplete_details"]
    assert (details or {}).get("reason") == reason
    assert event["response"]["usage"] == {
        "input_tokens": 3,
        "input_tokens_details": {"cache_write_tokens": 9, "cached_tokens": 1},
        "output_tokens": 4,
        "output_tokens_details": {"reasoning_tokens": 2},
        "total_tokens": 7,
    }
    assert frame.usage == {
        "input_tokens",
        "output_tokens",
        "cache_read_tokens",
        "cache_write_tokens",
        "reasoning_tokens",
    }
    assert frame.finish is (finish is not None)
    whole = json.loads(DIALECT.render(script, stream=False).body)
    assert whole["status"] == kind.removeprefix("response.")
    assert (whole["incomplete_details"] or {}).get("reason") == reason


def test_dialect_without_sentinel_drops_the_terminal_event() -> None:
    script = Script(pieces=(Text("t"),), usage=ScriptUsage(1, 1), sentinel=False)
    rendered = DIALECT.render(script, stream=True)
    assert not any(f.sentinel or f.finish or f.usage for f in rendered.frames)
    assert b"response.completed" not in rendered.body


def test_dialect_routes_responses_endpoints_only() -> None:
    assert DIALECT.is_generation("POST", "/v1/responses")
    assert DIALECT.is_generation("POST", "/openai/v1/responses/")
    assert not DIALECT.is_generation("POST", "/v1/chat/completions")
    assert not DIALECT.is_generation("GET", "/v1/responses")
    assert DIALECT.request_wants_stream("POST", "/v1/responses", {"stream": True})
    assert not DIALECT.request_wants_stream("POST", "/v1/responses", {"model": "m"})


# --- scripts through the dialect -------------------------------------------------------------

FULL = Script(
    pieces=(
        Reasoning("Let me "),
        Reasoning("think."),
        Text("Calling "),
        ToolFragment(0, '{"city": "Pa', id="call_w", name="weather"),
        Text("tools: 天気"),
        ToolFragment(1, '{"q": 1}', id=None, name="search"),
        ToolFragment(0, 'ris"}'),
    ),
    finish_reason="tool_calls",
    usage=ScriptUsage(50, 20, cache_read_tokens=10, reasoning_tokens=8),
    read_sizes=(1,),
    keepalives=(0, 3),
)
FULL_CALLS = (
    ai.ToolCall("call_w", "weather", {"city": "Paris"}),
    ai.ToolCall("call_1", "search", {"q": 1}),
)
FULL_USAGE = ai.Usage(50, 20, 70, cache_read_tokens=10, reasoning_tokens=8)


def _check_full(result: ai.Generation) -> None:
    assert result.text == "Calling tools: 天気"
    assert result.reasoning == "Let me think."
    assert result.tool_calls == FULL_CALLS
    assert result.finish_reason == "tool_calls"
    assert result.usage == FULL_USAGE
    assert result.warnings == ()


def test_scripts_round_trip_through_fake_transport() -> None:
    fake = FakeTransport(DIALECT, [FULL, FULL])
    run = stream(fake)
    assert run.error is None and run.result is not None
    _check_full(run.result)
    _check_full(generate(fake))
    fake.assert_all_used()


def test_disconnect_mid_stream_keeps_what_arrived() -> None:
    script = Script(pieces=(Text("one "), Text("two")), fault=Fault("disconnect", at=5))
    run = stream(FakeTransport(DIALECT, [script]))
    assert isinstance(run.error, ai.StreamError)
    assert "".join(e.text for e in run.events if isinstance(e, ai.TextDelta)) == "one "


@pytest.mark.parametrize("streamed", [True, False])
def test_loopback_server(streamed: bool) -> None:
    with FakeServer(DIALECT, [FULL]) as srv:
        s = ai.ProviderSettings(PID, api_key="k", base_url=srv.base_url)
        with ai.Client([s]) as client:
            if streamed:
                with client.stream("hi", route=ROUTE) as st:
                    kinds = {type(e) for e in st}
                result = st.result
                assert ai.ToolCallDelta in kinds and ai.ReasoningDelta in kinds
            else:
                result = client.generate("hi", route=ROUTE)
        srv.assert_all_used()
    _check_full(result)


def test_registry_builds_this_adapter() -> None:
    cls = ai.default_registry().adapter_class(PID)
    assert cls is OpenAIResponsesAdapter
    assert cls.profile.conformance_dialect == "openai-responses"


def test_an_incomplete_response_with_calls_keeps_its_own_finish_reason() -> None:
    # Only a completed response with calls finishes as tool_calls (found by the CI
    # conformance profile when the reconciliation was applied to every `stop`).
    from anyinfer.conformance.registry import ConformanceRegistry, load_builtins
    from anyinfer.conformance.runner import Harness

    registry = ConformanceRegistry()
    load_builtins(registry)
    script = Script(
        pieces=(Text("000"), ToolFragment(0, "{}", id="call_0", name="a")),
        finish_reason=None,
    )
    run = Harness(registry, registry.get("openai-responses")).verify(script, "async-stream")
    assert run is not None
