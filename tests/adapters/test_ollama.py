"""The Ollama native adapter (`/api/chat`) and its `ollama-chat` fake-server dialect.

Requests go through the real client and core to a `FakeTransport`, a real loopback
`FakeServer`, or an `httpx.MockTransport` answering with Ollama's own wire shapes
(error texts as Ollama's server writes them).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Sequence
from typing import Any

import httpx
import pytest
from helpers import NO_RETRY, run, settings_for

import anyinfer as ai
from anyinfer._providers.ollama import OllamaAdapter, error_code, finish_reason, think_value
from anyinfer._request import GenerationRequest, Sampling, ToolSpec
from anyinfer._stream.parts import RawPart, WarningPart
from anyinfer.fakeservers import (
    FakeServer,
    FakeTransport,
    Fault,
    OllamaDialect,
    Reasoning,
    Script,
    ScriptUsage,
    Text,
    ToolFragment,
    get_dialect,
)

DIALECT = get_dialect("ollama-chat")
settings = settings_for("ollama")


async def stream_all(
    s: ai.ProviderSettings, prompt: Any = "hi", model: str = "qwen3:8b", **kw: Any
) -> tuple[ai.Generation, list[ai.StreamEvent]]:
    async with ai.AsyncClient([s]) as client:
        route = ai.Route(f"{s.instance_id}:{model}", retry=NO_RETRY)
        async with client.stream(prompt, route=route, **kw) as st:
            events = [ev async for ev in st]
        return st.result, events


async def generate(
    s: ai.ProviderSettings, prompt: Any = "hi", model: str = "qwen3:8b", **kw: Any
) -> ai.Generation:
    async with ai.AsyncClient([s]) as client:
        route = ai.Route(f"{s.instance_id}:{model}", retry=NO_RETRY)
        return await client.generate(prompt, route=route, **kw)


def ndjson(*objects: dict[str, Any]) -> bytes:
    return b"".join(json.dumps(o).encode() + b"\n" for o in objects)


def chunk(content: str = "", **message: Any) -> dict[str, Any]:
    return {
        "model": "m",
        "created_at": "2024-05-01T12:00:00Z",
        "message": {"role": "assistant", "content": content, **message},
        "done": False,
    }


def final(**fields: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "model": "m",
        "created_at": "2024-05-01T12:00:00Z",
        "message": {"role": "assistant", "content": ""},
        "done": True,
    }
    out.update(fields)
    return out


def mock(
    body: bytes | Callable[[httpx.Request], httpx.Response],
    status: int = 200,
    seen: list[httpx.Request] | None = None,
    headers: dict[str, str] | None = None,
) -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        if seen is not None:
            seen.append(request)
        if callable(body):
            return body(request)
        return httpx.Response(
            status,
            content=body,
            headers=headers or {"content-type": "application/x-ndjson"},
        )

    return httpx.MockTransport(handler)


def sent_body(transport: FakeTransport) -> dict[str, Any]:
    (req,) = [r for r in transport.requests if r.path == "/api/chat"]
    assert isinstance(req.json, dict)
    return req.json


# --- request body ----------------------------------------------------------------------


def test_request_body_maps_messages_sampling_tools_and_format() -> None:
    transport = FakeTransport(DIALECT, [Script(pieces=(Text("ok"),))])
    png = b"\x89PNG fake bytes"
    messages = [
        ai.Message.system("Be terse."),
        ai.Message.user(
            [
                ai.TextContent("What is "),
                ai.TextContent("this?"),
                ai.ImageContent(data=png, media_type="image/png"),
                ai.ImageContent(url="data:image/jpeg;base64,QUJD"),
            ]
        ),
    ]
    tools = [ToolSpec("get_weather", "Weather now", {"type": "object", "properties": {}})]
    run(
        stream_all(
            settings(transport),
            messages,
            model="gemma3:4b",  # images go to a model the catalog says sees them (vision)
            tools=tools,
            sampling=Sampling(
                temperature=0.2, top_p=0.9, max_output_tokens=64, stop=("END",), seed=7
            ),
        )
    )
    body = sent_body(transport)
    assert body["model"] == "gemma3:4b" and body["stream"] is True
    assert body["messages"][0] == {"role": "system", "content": "Be terse."}
    user = body["messages"][1]
    assert user["role"] == "user" and user["content"] == "What is this?"
    assert user["images"] == [base64.b64encode(png).decode(), "QUJD"]
    assert body["options"] == {
        "temperature": 0.2,
        "top_p": 0.9,
        "num_predict": 64,
        "stop": ["END"],
        "seed": 7,
    }
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Weather now",
                "parameters": {"type": "object", "properties": {}},
            },
        }
    ]
    assert "tool_choice" not in body
    assert "format" not in body and "think" not in body


def test_penalties_json_schema_format_and_provider_options_merge() -> None:
    schema = {"type": "object", "properties": {"city": {"type": "string"}}}
    adapter = OllamaAdapter(
        ai.ProviderSettings("ollama", options={"keep_alive": "10m", "num_ctx": 8192})
    )
    request = GenerationRequest(
        model="llama3.2",
        messages=(ai.Message.user("hi"),),
        stream=False,
        sampling=Sampling(presence_penalty=0.5, frequency_penalty=0.25),
        response_format={"type": "json_schema", "name": "City", "schema": schema},
        provider_options={"options": {"num_ctx": 4096, "top_k": 20}, "truncate": False},
    )
    body, warnings = adapter.build_body(request)
    assert warnings == []
    assert body["stream"] is False
    assert body["format"] == schema
    json_mode = GenerationRequest(
        model="m", messages=(ai.Message.user("hi"),), response_format={"type": "json_object"}
    )
    assert adapter.build_body(json_mode)[0]["format"] == "json"
    assert body["keep_alive"] == "10m"
    assert body["truncate"] is False
    assert body["options"] == {
        "num_ctx": 4096,  # the request's provider option wins over the settings default
        "top_k": 20,
        "presence_penalty": 0.5,
        "frequency_penalty": 0.25,
    }
    run(adapter.aclose())


@pytest.mark.parametrize(
    ("effort", "think"),
    [("none", False), ("minimal", "low"), ("low", "low"), ("medium", "medium"), ("high", "high")],
)
def test_reasoning_effort_maps_to_think(effort: Any, think: bool | str) -> None:
    transport = FakeTransport(DIALECT, [Script(pieces=(Text("ok"),))])
    run(stream_all(settings(transport), reasoning=effort))
    assert sent_body(transport)["think"] == think
    assert think_value(effort) == think


def test_tool_choice_none_omits_tools() -> None:
    transport = FakeTransport(DIALECT, [Script(pieces=(Text("ok"),))])
    result, _ = run(stream_all(settings(transport), tools=[ToolSpec("a")], tool_choice="none"))
    assert "tools" not in sent_body(transport)
    assert result.warnings == ()


def test_tool_choice_required_sends_tools_with_a_warning() -> None:
    transport = FakeTransport(DIALECT, [Script(pieces=(Text("ok"),))])
    tools = [ToolSpec("a"), ToolSpec("b")]
    result, _ = run(stream_all(settings(transport), tools=tools, tool_choice="required"))
    assert [t["function"]["name"] for t in sent_body(transport)["tools"]] == ["a", "b"]
    assert len(result.warnings) == 1 and "not enforced" in result.warnings[0]


def test_named_tool_choice_sends_only_that_tool_with_a_warning() -> None:
    transport = FakeTransport(DIALECT, [Script(pieces=(Text("ok"),))])
    tools = [ToolSpec("a"), ToolSpec("b")]
    result, _ = run(stream_all(settings(transport), tools=tools, tool_choice="b"))
    assert [t["function"]["name"] for t in sent_body(transport)["tools"]] == ["b"]
    assert len(result.warnings) == 1
    assert "only 'b'" in result.warnings[0] and "without forcing" in result.warnings[0]


def test_multi_turn_with_tool_calls_and_results() -> None:
    transport = FakeTransport(DIALECT, [Script(pieces=(Text("It is sunny."),))])
    call = ai.ToolCall("call_1", "get_weather", {"city": "Paris"})
    assistant = ai.Message("assistant", "", tool_calls=(call,), provider_data={"thinking": "hm"})
    messages = [
        ai.Message.user("Weather in Paris?"),
        assistant,
        ai.Message.tool_result("call_1", '{"sky": "clear"}'),
        ai.Message.tool_result("call_x", "named", name="other_tool"),
    ]
    result, _ = run(stream_all(settings(transport), messages))
    assert result.text == "It is sunny."
    sent = sent_body(transport)["messages"]
    assert sent[1] == {
        "role": "assistant",
        "content": "",
        "thinking": "hm",
        "tool_calls": [
            {"id": "call_1", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}
        ],
    }
    assert sent[2] == {
        "role": "tool",
        "content": '{"sky": "clear"}',
        "tool_name": "get_weather",  # looked up from the call it answers
        "tool_call_id": "call_1",
    }
    assert sent[3]["tool_name"] == "other_tool"


def test_http_image_url_is_a_config_error() -> None:
    adapter = OllamaAdapter(ai.ProviderSettings("ollama"))
    request = GenerationRequest(
        model="llava",
        messages=(ai.Message.user([ai.ImageContent(url="https://example.com/cat.png")]),),
    )
    with pytest.raises(ai.ConfigError, match="inline images only"):
        adapter.build_body(request)
    run(adapter.aclose())


def test_no_auth_by_default_and_bearer_with_a_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OLLAMA_API_KEY", raising=False)
    seen: list[httpx.Request] = []
    body = ndjson(chunk("hi"), final(done_reason="stop"))
    run(stream_all(settings(mock(body, seen=seen))))
    run(stream_all(settings(mock(body, seen=seen), api_key="ollama-cloud-key")))
    assert "authorization" not in seen[0].headers
    assert seen[1].headers["authorization"] == "Bearer ollama-cloud-key"
    assert str(seen[0].url) == "http://127.0.0.1:11434/api/chat"


# --- streaming -------------------------------------------------------------------------


def test_stream_text_thinking_usage_and_phases() -> None:
    body = ndjson(
        chunk("", thinking="Let me "),
        chunk("", thinking="think."),
        chunk("Hello"),
        chunk(" wörld"),
        final(
            done_reason="stop",
            total_duration=4_883_583_458,
            load_duration=1_334_875,
            prompt_eval_count=26,
            prompt_eval_duration=342_546_000,
            eval_count=282,
            eval_duration=4_535_599_000,
        ),
    )
    result, events = run(stream_all(settings(mock(body))))
    assert result.text == "Hello wörld"
    assert result.reasoning == "Let me think."
    assert result.finish_reason == "stop"
    assert result.usage == ai.Usage(input_tokens=26, output_tokens=282, total_tokens=308)
    assert result.timing.phases == {
        "model_load_ms": pytest.approx(1.334875),
        "prefill_ms": pytest.approx(342.546),
        "decode_ms": pytest.approx(4535.599),
        "server_total_ms": pytest.approx(4883.583458),
    }
    usage_events = [e for e in events if isinstance(e, ai.UsageUpdate)]
    assert [e.usage for e in usage_events] == [ai.Usage(input_tokens=26, output_tokens=282)]
    # The synthesized UsageUpdate comes after every content delta and before StreamEnded.
    kinds = [type(e).__name__ for e in events]
    assert kinds.index("UsageUpdate") > max(
        i for i, k in enumerate(kinds) if k in ("TextDelta", "ReasoningDelta")
    )
    assert isinstance(events[-1], ai.StreamEnded)
    assert result.warnings == ()


def test_tool_calls_arrive_whole_and_finish_as_tool_calls() -> None:
    body = ndjson(
        chunk(
            "",
            tool_calls=[
                {
                    "id": "call_a",
                    "function": {"index": 0, "name": "get_weather", "arguments": {"city": "Oslo"}},
                }
            ],
        ),
        chunk("", tool_calls=[{"function": {"name": "get_time", "arguments": {"tz": "UTC"}}}]),
        final(done_reason="stop", prompt_eval_count=10, eval_count=5),
    )
    result, events = run(stream_all(settings(mock(body))))
    assert result.finish_reason == "tool_calls"
    assert result.tool_calls == (
        ai.ToolCall("call_a", "get_weather", {"city": "Oslo"}),
        ai.ToolCall("call_1", "get_time", {"tz": "UTC"}),  # no id on the wire: call_<slot>
    )
    deltas = [e for e in events if isinstance(e, ai.ToolCallDelta)]
    assert [(d.index, d.name) for d in deltas] == [(0, "get_weather"), (1, "get_time")]
    assert json.loads(deltas[0].arguments_fragment) == {"city": "Oslo"}


def test_tool_calls_on_the_final_object_count_too() -> None:
    body = ndjson(
        final(
            message={
                "role": "assistant",
                "content": "",
                "tool_calls": [{"function": {"name": "f", "arguments": {}}}],
            },
            done_reason="stop",
        )
    )
    result, _ = run(stream_all(settings(mock(body))))
    assert result.tool_calls == (ai.ToolCall("call_0", "f", {}),)
    assert result.finish_reason == "tool_calls"


@pytest.mark.parametrize(
    ("done_reason", "expected"),
    [
        ("stop", "stop"),
        ("length", "length"),
        ("load", "other"),
        ("unload", "other"),
        (None, "stop"),
    ],
)
def test_done_reason_mapping(done_reason: str | None, expected: str) -> None:
    fields = {} if done_reason is None else {"done_reason": done_reason}
    result, _ = run(stream_all(settings(mock(ndjson(chunk("x"), final(**fields))))))
    assert result.finish_reason == expected
    if done_reason is not None:
        assert finish_reason(done_reason, False) == {"stop": "stop", "length": "length"}.get(
            done_reason, done_reason
        )


def test_counts_absent_on_the_final_object_give_no_usage_update() -> None:
    result, events = run(stream_all(settings(mock(ndjson(chunk("x"), final(done_reason="stop"))))))
    assert not any(isinstance(e, ai.UsageUpdate) for e in events)
    assert result.usage == ai.Usage()


def test_cached_prompt_count_is_read_when_reported() -> None:
    body = ndjson(
        chunk("x"),
        final(done_reason="stop", prompt_eval_count=100, prompt_eval_cached_count=64, eval_count=3),
    )
    result, _ = run(stream_all(settings(mock(body))))
    assert result.usage.cache_read_tokens == 64 and result.usage.input_tokens == 100


def test_byte_by_byte_reads_split_multibyte_text() -> None:
    script = Script(
        pieces=(Reasoning("思考"), Text("🇺🇳 "), Text("日本語")),
        usage=ScriptUsage(input_tokens=9, output_tokens=4),
        read_sizes=(1,),
        keepalives=(1, 2),
    )
    transport = FakeTransport(DIALECT, [script])
    result, _ = run(stream_all(settings(transport)))
    assert result.text == "🇺🇳 日本語" and result.reasoning == "思考"
    assert result.usage.total_tokens == 13
    transport.assert_all_used()


def test_raw_objects_are_kept_when_asked() -> None:
    body = ndjson(chunk("a"), final(done_reason="stop", eval_count=1))
    adapter = OllamaAdapter(ai.ProviderSettings("ollama", transport=mock(body)))
    request = GenerationRequest(model="m", messages=(ai.Message.user("hi"),), retain_raw=True)

    async def go() -> list[Any]:
        try:
            return [p async for p in adapter.generate(request)]
        finally:
            await adapter.aclose()

    raw = [p.payload for p in run(go()) if isinstance(p, RawPart)]
    assert len(raw) == 2 and raw[0]["message"]["content"] == "a" and raw[1]["done"] is True


def test_stream_without_the_done_object_fails() -> None:
    transport = FakeTransport(DIALECT, [Script(pieces=(Text("cut"),), sentinel=False)])
    with pytest.raises(ai.AnyInferError) as info:
        run(stream_all(settings(transport)))
    # Content was shown, so the typed error itself is raised.
    assert isinstance(info.value, ai.StreamError)


def test_malformed_line_is_a_protocol_error() -> None:
    script = Script(pieces=(Text("a"),), fault=Fault("malformed", at=0))
    transport = FakeTransport(DIALECT, [script])
    with pytest.raises(ai.AllTargetsFailedError) as info:
        run(stream_all(settings(transport)))
    error = info.value.attempts[-1].error
    assert error is not None and error.type_name == "ProtocolError"


# --- non-streaming ---------------------------------------------------------------------


def test_generate_sends_stream_false_and_reads_the_whole_object() -> None:
    script = Script(
        pieces=(
            Reasoning("hmm"),
            Text("Calling."),
            ToolFragment(0, '{"q": ', id="call_x", name="search"),
            ToolFragment(0, '"ollama"}'),
        ),
        finish_reason="tool_calls",
        usage=ScriptUsage(input_tokens=12, output_tokens=8),
    )
    transport = FakeTransport(DIALECT, [script])
    result = run(generate(settings(transport)))
    assert sent_body(transport)["stream"] is False
    assert result.text == "Calling." and result.reasoning == "hmm"
    assert result.tool_calls == (ai.ToolCall("call_x", "search", {"q": "ollama"}),)
    assert result.finish_reason == "tool_calls"
    assert result.usage == ai.Usage(input_tokens=12, output_tokens=8, total_tokens=20)
    assert set(result.timing.phases) == {
        "model_load_ms",
        "prefill_ms",
        "decode_ms",
        "server_total_ms",
    }


def test_generate_tolerates_a_body_without_done() -> None:
    body = json.dumps({"model": "m", "message": {"role": "assistant", "content": "hi"}}).encode()
    result = run(generate(settings(mock(body, headers={"content-type": "application/json"}))))
    assert result.text == "hi" and result.finish_reason == "stop"


# --- errors ----------------------------------------------------------------------------


def _error_transport(status: int, text: str, headers: dict[str, str] | None = None) -> Any:
    return mock(
        json.dumps({"error": text}).encode(),
        status=status,
        headers={"content-type": "application/json", **(headers or {})},
    )


@pytest.mark.parametrize(
    ("status", "text", "expected"),
    [
        (404, "model 'qwen9:1b' not found", "ModelNotFoundError"),
        (404, 'model "llama2" not found, try pulling it first', "ModelNotFoundError"),
        (500, 'model "llama2" not found, try pulling it first', "ModelNotFoundError"),
        (401, "unauthorized", "AuthenticationError"),
        (403, "forbidden", "AuthenticationError"),
        (429, "too many requests", "RateLimitError"),
        (
            503,
            "server busy, please try again.  maximum pending requests exceeded",
            "OverloadedError",
        ),
        (400, "the input length exceeds the context length", "ContextWindowError"),
        (
            500,
            "input exceeds maximum context length and cannot be truncated further",
            "ContextWindowError",
        ),
        (400, '"gemma:2b" does not support tools', "ProviderError"),
    ],
)
def test_error_bodies_map_to_typed_errors(status: int, text: str, expected: str) -> None:
    with pytest.raises(ai.AllTargetsFailedError) as info:
        run(stream_all(settings(_error_transport(status, text))))
    error = info.value.attempts[-1].error
    assert error is not None
    assert (error.type_name, error.http_status) == (expected, status)
    assert text.split()[0].strip('"') in error.detail


def test_rate_limit_carries_retry_after() -> None:
    adapter = OllamaAdapter(
        ai.ProviderSettings(
            "ollama", transport=_error_transport(429, "rate limited", {"retry-after": "7"})
        )
    )
    request = GenerationRequest(model="m", messages=(ai.Message.user("hi"),))

    async def go() -> None:
        try:
            async for _ in adapter.generate(request):
                pass
        finally:
            await adapter.aclose()

    with pytest.raises(ai.RateLimitError) as info:
        run(go())
    assert info.value.retry_after == 7.0 and info.value.http_status == 429


def test_dialect_error_faults_round_trip() -> None:
    cases = [
        (Fault("status", status=429, retry_after=3.0), "RateLimitError"),
        (Fault("status", status=503), "OverloadedError"),
        (Fault("status", status=400, code="context_length_exceeded"), "ContextWindowError"),
        (Fault("status", status=400, code="content_filter"), "ContentFilterError"),
        (Fault("status", status=404), "ModelNotFoundError"),
    ]
    for fault, expected in cases:
        transport = FakeTransport(DIALECT, [Script(fault=fault)])
        with pytest.raises(ai.AllTargetsFailedError) as info:
            run(stream_all(settings(transport)))
        error = info.value.attempts[-1].error
        assert error is not None and error.type_name == expected, fault


def test_error_object_inside_the_stream_after_content_raises_typed_error() -> None:
    body = ndjson(chunk("partial"), {"error": "the input length exceeds the context length"})
    events: list[ai.StreamEvent] = []

    async def go() -> None:
        async with ai.AsyncClient([settings(mock(body))]) as client:
            route = ai.Route("ollama:m", retry=NO_RETRY)
            async with client.stream("hi", route=route) as st:
                async for ev in st:
                    events.append(ev)

    with pytest.raises(ai.ContextWindowError) as info:
        run(go())
    assert info.value.phase == "stream" and info.value.http_status is None
    assert [e.text for e in events if isinstance(e, ai.TextDelta)] == ["partial"]
    assert not any(isinstance(e, ai.StreamEnded) for e in events)


def test_error_object_as_the_first_line_fails_the_attempt() -> None:
    body = ndjson({"error": "model 'x' not found"})
    with pytest.raises(ai.AllTargetsFailedError) as info:
        run(stream_all(settings(mock(body))))
    error = info.value.attempts[-1].error
    assert error is not None and error.type_name == "ModelNotFoundError"


def test_error_code_helper() -> None:
    assert error_code("model 'a' not found") == "model_not_found"
    assert error_code("server busy, please try again.") == "overloaded"
    assert error_code("unauthorized") == "authentication"
    assert error_code("something else") is None


# --- discovery and health --------------------------------------------------------------


class ShowTransport(httpx.AsyncBaseTransport):
    """Answers `POST /api/show` from the dialect; everything else goes to `inner`."""

    def __init__(self, inner: FakeTransport, shows: dict[str, dict[str, Any]]) -> None:
        self.inner = inner
        self.shows = shows
        self.shown: list[str] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        dialect = self.inner.dialect
        assert isinstance(dialect, OllamaDialect)
        if dialect.is_show(request.method, request.url.path):
            name = json.loads(await request.aread())["model"]
            self.shown.append(name)
            if name not in self.shows:
                err = dialect.render_error(
                    Fault("status", status=404, message=f"model '{name}' not found")
                )
                return httpx.Response(err.status, headers=err.headers, content=err.body)
            rendered = dialect.show_response(name, **self.shows[name])
            return httpx.Response(rendered.status, headers=rendered.headers, content=rendered.body)
        return await self.inner.handle_async_request(request)


def _models(s: ai.ProviderSettings) -> Sequence[Any]:
    async def go() -> Sequence[Any]:
        async with ai.AsyncClient([s]) as client:
            return await client.models("ollama")

    return run(go())  # type: ignore[no-any-return]


def test_models_lists_tags_without_show_by_default() -> None:
    transport = ShowTransport(FakeTransport(DIALECT, [], models=("qwen3:8b", "llava:7b")), {})
    found = _models(settings(transport))
    assert [m.id for m in found] == ["qwen3:8b", "llava:7b"]
    assert found[0].context_window is None
    assert found[0].facts["parameter_size"] == "1B"
    assert found[0].facts["quantization_level"] == "Q4_K_M"
    assert found[0].facts["family"] == "fakearch"
    assert transport.shown == []


def test_models_enriches_the_first_n_with_show() -> None:
    shows = {
        "qwen3:8b": {
            "context_length": 40960,
            "capabilities": ("completion", "tools", "thinking"),
            "architecture": "qwen3",
            "parameters": "temperature 0.6\nnum_ctx 8192",
        },
        "llava:7b": {"context_length": 4096, "capabilities": ("completion", "vision")},
    }
    inner = FakeTransport(DIALECT, [], models=("qwen3:8b", "gone:1b", "llava:7b"))
    transport = ShowTransport(inner, shows)
    found = _models(settings(transport, options={"show_details": 2}))
    assert transport.shown == ["qwen3:8b", "gone:1b"]  # bounded to the first two
    qwen, gone, llava = found
    assert qwen.context_window == 40960
    assert qwen.facts["capabilities"] == ["completion", "tools", "thinking"]
    assert qwen.facts["tools"] is True and qwen.facts["vision"] is False
    assert qwen.facts["thinking"] is True and qwen.facts["architecture"] == "qwen3"
    assert qwen.facts["num_ctx"] == 8192
    assert gone.context_window is None and "capabilities" not in gone.facts  # show failed
    assert llava.context_window is None  # past the limit

    transport_all = ShowTransport(FakeTransport(DIALECT, [], models=("llava:7b",)), shows)
    (only,) = _models(settings(transport_all, options={"show_details": True}))
    assert only.context_window == 4096 and only.facts["vision"] is True


def test_show_for_one_model() -> None:
    transport = ShowTransport(FakeTransport(DIALECT, []), {"m": {"context_length": 131072}})
    adapter = OllamaAdapter(ai.ProviderSettings("ollama", transport=transport))

    async def go() -> Any:
        try:
            return await adapter.show("m"), await _missing(adapter)
        finally:
            await adapter.aclose()

    async def _missing(a: OllamaAdapter) -> BaseException | None:
        try:
            await a.show("absent")
        except ai.ModelNotFoundError as exc:
            return exc
        return None

    shown, missing = run(go())
    assert shown.context_window == 131072 and shown.facts["completion"] is True
    assert isinstance(missing, ai.ModelNotFoundError)


def test_health_ok_and_failing() -> None:
    async def probe(s: ai.ProviderSettings) -> ai.Health:
        async with ai.AsyncClient([s]) as client:
            return await client.health("ollama")

    ok = run(probe(settings(FakeTransport(DIALECT, [], models=("a", "b", "c")))))
    assert ok.ok and ok.models == 3 and ok.latency_ms >= 0.0
    bad = run(probe(settings(_error_transport(500, "boom"))))
    assert not bad.ok and "boom" in bad.detail and bad.latency_ms >= 0.0


# --- over a real socket ----------------------------------------------------------------


def test_loopback_stream_and_generate_with_the_sync_client() -> None:
    scripts = [
        Script(
            pieces=(Text("Hel"), Text("lo")),
            usage=ScriptUsage(input_tokens=5, output_tokens=2),
            read_sizes=(3,),
        ),
        Script(pieces=(Text("whole"),), finish_reason="length", usage=ScriptUsage(1, 1)),
    ]
    with FakeServer("ollama-chat", scripts) as srv:
        s = ai.ProviderSettings("ollama", base_url=srv.base_url)
        with ai.Client([s]) as client:
            with client.stream("hi", target="ollama:qwen3:8b") as st:
                texts = [e.text for e in st if isinstance(e, ai.TextDelta)]
            whole = client.generate("hi", target="ollama:qwen3:8b")
        srv.assert_all_used()
    assert texts == ["Hel", "lo"] and st.result.usage.total_tokens == 7
    final = json.loads(DIALECT.render(scripts[0], stream=True).frames[-1].data)
    assert st.result.timing.phases["decode_ms"] == pytest.approx(final["eval_duration"] / 1e6)
    assert whole.text == "whole" and whole.finish_reason == "length"
    assert [r.json["model"] for r in srv.requests if r.path == "/api/chat"] == ["qwen3:8b"] * 2


def test_loopback_disconnect_after_content_raises_stream_error() -> None:
    script = Script(pieces=(Text("a"), Text("b")), fault=Fault("disconnect", at=1))
    with FakeServer("ollama-chat", [script]) as srv:
        s = ai.ProviderSettings("ollama", base_url=srv.base_url)
        with ai.Client([s]) as client:

            def consume() -> list[ai.StreamEvent]:
                with client.stream("hi", route=ai.Route("ollama:m", retry=NO_RETRY)) as st:
                    return list(st)

            with pytest.raises(ai.StreamError):
                consume()


# --- the dialect -----------------------------------------------------------------------


def test_dialect_sends_calls_whole_in_slot_order() -> None:
    script = Script(
        pieces=(
            ToolFragment(1, '{"b":', id="c1", name="second"),
            ToolFragment(0, "{}", name="first"),
            ToolFragment(1, " 2}"),
        ),
        finish_reason="tool_calls",
    )
    frames = DIALECT.render(script, stream=True).frames
    lines = [json.loads(f.data) for f in frames]
    calls = [line["message"]["tool_calls"][0] for line in lines if "tool_calls" in line["message"]]
    assert [c["function"]["name"] for c in calls] == ["first", "second"]
    assert calls[1] == {
        "id": "c1",
        "function": {"index": 1, "name": "second", "arguments": {"b": 2}},
    }
    assert [f.pieces for f in frames[:2]] == [(1,), (0, 2)]
    assert lines[-1]["done"] is True and lines[-1]["done_reason"] == "stop"
    assert isinstance(DIALECT, OllamaDialect)
    assert DIALECT.expected_finish_reason(script) == "tool_calls"
    assert DIALECT.expected_finish_reason(Script(pieces=script.pieces)) == "tool_calls"
    assert DIALECT.expected_finish_reason(Script(pieces=(Text("x"),))) == "stop"


def test_dialect_puts_usage_only_on_the_done_line_and_skips_zeros() -> None:
    script = Script(
        pieces=(Text("x"),),
        usage=ScriptUsage(input_tokens=0, output_tokens=3, cache_read_tokens=5, reasoning_tokens=1),
        usage_placement="split",
    )
    frames = DIALECT.render(script, stream=True).frames
    assert [f.usage for f in frames] == [frozenset(), frozenset({"output_tokens"})]
    last = json.loads(frames[-1].data)
    assert last["eval_count"] == 3 and "prompt_eval_count" not in last
    assert frames[-1].sentinel and frames[-1].finish
    no_sentinel = DIALECT.render(Script(pieces=(Text("x"),), sentinel=False), stream=True)
    assert not any(f.sentinel or f.finish for f in no_sentinel.frames)


@pytest.mark.parametrize("ending", [b"\r\n", b"\r"])
def test_lines_may_end_with_crlf_or_a_bare_cr(ending: bytes) -> None:
    body = ndjson(chunk("a"), chunk("b"), final(done_reason="stop", eval_count=2))
    result, _ = run(stream_all(settings(mock(body.replace(b"\n", ending)))))
    assert result.text == "ab" and result.usage.output_tokens == 2


def test_dialect_encodes_lines_as_go_does() -> None:
    # json.Marshal escapes HTML characters and U+2028/U+2029; other text stays raw.
    script = Script(pieces=(Text("<a> & \u2028\u2029 é"),), usage=ScriptUsage(1, 1))
    line = DIALECT.render(script, stream=True).frames[0].data
    assert b"\\u003ca\\u003e \\u0026 \\u2028\\u2029 \xc3\xa9" in line
    assert json.loads(line)["message"]["content"] == "<a> & \u2028\u2029 é"
    stamps = [json.loads(f.data)["created_at"] for f in DIALECT.render(script, stream=True).frames]
    assert stamps == sorted(stamps) and all(s.endswith("Z") for s in stamps)


def test_dialect_in_stream_error_is_a_code_less_line() -> None:
    fault = Fault("provider_error", status=500, message="an error was encountered")
    assert DIALECT.error_frame(fault) == b'{"error":"an error was encountered"}\n'
    assert DIALECT.in_stream_error_types(fault) == frozenset({"ProviderError"})
    overflow = Fault("provider_error", status=500, code="context_length_exceeded")
    assert DIALECT.in_stream_error_types(overflow) == frozenset({"ContextWindowError"})


def test_dialect_streams_by_default_and_routes_ollama_paths() -> None:
    assert DIALECT.wants_stream({"model": "m"}) and not DIALECT.wants_stream({"stream": False})
    assert DIALECT.is_generation("POST", "/api/chat")
    assert DIALECT.is_models("GET", "/api/tags")
    assert not DIALECT.is_generation("POST", "/v1/chat/completions")


def test_warning_part_is_yielded_before_the_request() -> None:
    seen: list[httpx.Request] = []
    adapter = OllamaAdapter(
        ai.ProviderSettings("ollama", transport=mock(ndjson(final(done_reason="stop")), seen=seen))
    )
    request = GenerationRequest(
        model="m", messages=(ai.Message.user("hi"),), tools=(ToolSpec("t"),), tool_choice="required"
    )

    async def go() -> Any:
        gen = adapter.generate(request)
        first = await gen.__anext__()
        before = len(seen)
        rest = [p async for p in gen]
        await adapter.aclose()
        return first, before, rest

    first, before, rest = run(go())
    assert isinstance(first, WarningPart) and before == 0 and rest
