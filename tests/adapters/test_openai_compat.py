"""The `openai-compat` adapter and its presets (`llama.cpp`, `vllm`, `lmstudio`).

Everything goes through the real client over a fake provider (`FakeTransport`, a
`FakeServer` on 127.0.0.1, or an `httpx.MockTransport` serving hand-written bodies that
reproduce one engine's habit byte for byte). Engine behaviours covered: llama.cpp
`timings` (phases, usage with and without a usage object), llama-cpp-python's repeated
tool-call ids, `: ping` comments and silent empty 200s, servers that reject
`stream_options`, servers that never send a finish reason, Groq's `x_groq` usage,
OpenRouter's comment lines and error chunks, DeepSeek/Mistral usage in the finish chunk.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from typing import Any

import httpx
import pytest
from helpers import NO_RETRY, Caller, settings_for, sse

import anyinfer as ai
from anyinfer._providers.openai_compat import (
    ENGINE_QUIRKS,
    LlamaCppAdapter,
    LMStudioAdapter,
    OpenAICompatAdapter,
    Quirks,
    VLLMAdapter,
    quirks_for,
)
from anyinfer._request import GenerationRequest
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
from anyinfer.fakeservers.dialects import OpenAIChatDialect
from anyinfer.fakeservers.dialects.llama_cpp import PREDICTED_MS, PROMPT_MS

BASE = "http://127.0.0.1:9/v1"  # never dialled: every test brings a transport or a server


class Capture(FakeTransport):
    """A `FakeTransport` that also keeps the raw `httpx.Request`s (headers, query)."""

    def __init__(self, dialect: str, scripts: Any, **kw: Any) -> None:
        super().__init__(dialect, scripts, **kw)
        self.raw: list[httpx.Request] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.raw.append(request)
        return await super().handle_async_request(request)

    def bodies(self) -> list[Any]:
        return [json.loads(r.content) if r.content else None for r in self.raw]


settings = settings_for("openai-compat", base_url=BASE)  # (transport, provider=None, **kw)


def no_retry(target: str) -> ai.Route:
    return ai.Route(target, retry=NO_RETRY)


# stream(s, target="openai-compat:m", **kw) -> Outcome(events, result, error);
# generate(s, target, **kw) -> Generation: one attempt at the target.
_CALLS = Caller(by_target=True, target="openai-compat:m")
stream, generate = _CALLS.stream, _CALLS.generate


def failure(s: ai.ProviderSettings, target: str = "openai-compat:m", **kw: Any) -> Any:
    """The single failed attempt's `ErrorInfo` of a generate() that must fail."""
    with pytest.raises(ai.AllTargetsFailedError) as info:
        generate(s, target, **kw)
    (attempt,) = info.value.attempts
    assert attempt.error is not None
    return attempt.error


sse_body = sse  # (*chunks, done=True, comments=())


def mock(
    body: bytes | Callable[[httpx.Request], httpx.Response],
    status: int = 200,
    headers: dict[str, str] | None = None,
    seen: list[httpx.Request] | None = None,
) -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        if seen is not None:
            seen.append(request)
        if callable(body):
            return body(request)
        hdrs = {"content-type": "text/event-stream", **(headers or {})}
        return httpx.Response(status, content=body, headers=hdrs)

    return httpx.MockTransport(handler)


def delta_chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "id": "c1",
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        **extra,
    }


def text_of(events: list[ai.StreamEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, ai.TextDelta))


def usages(events: list[ai.StreamEvent]) -> list[ai.Usage]:
    return [e.usage for e in events if isinstance(e, ai.UsageUpdate)]


# --- presets, settings and quirks --------------------------------------------------------


@pytest.mark.parametrize(
    ("pid", "cls", "url"),
    [
        ("openai-compat", OpenAICompatAdapter, None),
        ("llama.cpp", LlamaCppAdapter, "http://127.0.0.1:8080/v1"),
        ("llamacpp", LlamaCppAdapter, "http://127.0.0.1:8080/v1"),
        ("llama-cpp", LlamaCppAdapter, "http://127.0.0.1:8080/v1"),
        ("vllm", VLLMAdapter, "http://127.0.0.1:8000/v1"),
        ("lmstudio", LMStudioAdapter, "http://127.0.0.1:1234/v1"),
        ("lm-studio", LMStudioAdapter, "http://127.0.0.1:1234/v1"),
    ],
)
def test_presets_resolve_to_the_compat_adapter_with_their_ports(
    pid: str, cls: type[OpenAICompatAdapter], url: str | None
) -> None:
    found = ai.default_registry().adapter_class(pid)
    assert found is cls
    assert issubclass(found, OpenAICompatAdapter)
    assert found.default_base_url == url
    assert found.api_key_env is None  # a local server never gets OPENAI_API_KEY
    if url is not None:
        adapter = found(ai.ProviderSettings(pid))
        assert adapter.base_url == url
        assert adapter.quirks is ENGINE_QUIRKS[found.default_engine]


def test_openai_compat_without_base_url_is_a_config_error_naming_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("ANYINFER_OPENAI_COMPAT_BASE_URL", raising=False)
    with pytest.raises(ai.ConfigError, match="base_url"):
        OpenAICompatAdapter(ai.ProviderSettings("openai-compat"))

    async def go() -> None:
        async with ai.AsyncClient([ai.ProviderSettings("openai-compat")]) as client:
            await client.models("openai-compat")

    with pytest.raises(ai.ConfigError, match="base_url"):
        asyncio.run(go())


def test_the_base_url_may_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANYINFER_MY_ENGINE_BASE_URL", "http://127.0.0.1:5000/v1/")
    adapter = OpenAICompatAdapter(ai.ProviderSettings("openai-compat", alias="my-engine"))
    assert adapter.base_url == "http://127.0.0.1:5000/v1"


def test_options_pick_an_engine_and_override_quirks() -> None:
    adapter = OpenAICompatAdapter(
        ai.ProviderSettings(
            "openai-compat",
            base_url=BASE,
            options={"engine": "llama.cpp", "quirks": {"max_tokens_field": "n_predict"}},
        )
    )
    assert adapter.quirks.engine == "llama.cpp"
    assert adapter.quirks.timings is True
    assert adapter.quirks.max_tokens_field == "n_predict"
    assert adapter.max_tokens_field == "n_predict"
    assert ENGINE_QUIRKS["llama.cpp"].max_tokens_field == "max_tokens"  # the table is untouched
    vllm = VLLMAdapter(ai.ProviderSettings("vllm", options={"quirks": {"reasoning_fields": ["x"]}}))
    assert vllm.quirks.reasoning_fields == ("x",)
    assert vllm.reasoning_fields == ("x",)


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"engine": "nope"}, "unknown engine 'nope'"),
        ({"quirks": {"timing": True}}, "unknown quirk 'timing'"),
        ({"quirks": {"timings": "yes"}}, "quirk 'timings' must be true or false"),
        ({"quirks": {"max_tokens_field": ""}}, "non-empty string"),
        ({"quirks": {"usage_paths": "usage"}}, "list of non-empty strings"),
        ({"quirks": {"structured_output": "grammar"}}, "structured_output"),
        ({"quirks": ["timings"]}, "must be a mapping"),
        ({"quirk": {}}, "does not understand options 'quirk'"),
    ],
)
def test_bad_options_are_config_errors(options: dict[str, Any], match: str) -> None:
    with pytest.raises(ai.ConfigError, match=match):
        OpenAICompatAdapter(ai.ProviderSettings("openai-compat", base_url=BASE, options=options))


def test_every_engine_record_is_a_valid_quirks_value() -> None:
    for name, quirks in ENGINE_QUIRKS.items():
        assert isinstance(quirks, Quirks)
        assert quirks.engine == name
        # Round-tripping every field through the override checker accepts the record.
        fields = {f: getattr(quirks, f) for f in Quirks.__dataclass_fields__}
        assert quirks_for(name, {"quirks": fields}) == quirks


# --- requests ---------------------------------------------------------------------------


TOOL = ai.ToolSpec(
    "get_weather",
    "Weather for a city",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


def test_request_body_is_openai_chat_with_the_engines_token_field() -> None:
    t = Capture("openai-chat", [Script(pieces=(Text("ok"),))])
    messages = [ai.Message.system("Be brief."), ai.Message.user("Weather in Oslo?")]

    async def go() -> None:
        async with ai.AsyncClient([settings(t, api_key="sk-local")]) as client:
            await client.generate(
                messages,
                route=no_retry("openai-compat:m"),
                tools=[TOOL],
                tool_choice="get_weather",
                sampling=ai.Sampling(temperature=0.2, max_output_tokens=64, stop=("\n",), seed=7),
                reasoning="low",
            )

    asyncio.run(go())
    (body,) = t.bodies()
    assert body["model"] == "m"
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Oslo?"},
    ]
    assert body["max_tokens"] == 64 and "max_completion_tokens" not in body
    assert body["temperature"] == 0.2 and body["stop"] == ["\n"] and body["seed"] == 7
    assert body["tools"][0]["function"]["name"] == "get_weather"
    assert body["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
    assert body["reasoning_effort"] == "low"
    assert "stream" not in body and "stream_options" not in body
    assert t.raw[0].headers["authorization"] == "Bearer sk-local"
    assert t.raw[0].url.path == "/v1/chat/completions"


def test_no_key_no_auth_header_and_no_openai_key_leak(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-must-not-leak")
    t = Capture("llama.cpp", [Script(pieces=(Text("ok"),))])
    _, result, error = stream(settings(t, "llama.cpp"), "llama.cpp:m")
    assert error is None and result is not None
    assert "authorization" not in t.raw[0].headers
    assert t.bodies()[0]["stream_options"] == {"include_usage": True}


def test_engine_quirks_shape_the_stream_request() -> None:
    t = Capture("openai-chat", [Script(pieces=(Text("ok"),))])
    s = settings(t, options={"engine": "groq"}, api_key="k")
    _, result, error = stream(s, sampling=ai.Sampling(max_output_tokens=5))
    assert error is None and result is not None
    body = t.bodies()[0]
    assert "stream_options" not in body  # Groq reports usage in x_groq unasked
    assert body["max_completion_tokens"] == 5


def _request(fmt: dict[str, Any] | None, **kw: Any) -> GenerationRequest:
    return GenerationRequest(
        model="m", messages=(ai.Message.user("x"),), response_format=fmt, stream=False, **kw
    )


SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
AS_SCHEMA = {"type": "json_schema", "name": "thing", "schema": SCHEMA, "strict": True}
AS_JSON = {"type": "json_object"}


@pytest.mark.parametrize(
    ("engine", "fmt", "expected"),
    [
        (
            "openai-compat",
            AS_SCHEMA,
            {
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"name": "thing", "schema": SCHEMA, "strict": True},
                }
            },
        ),
        ("openai-compat", AS_JSON, {"response_format": {"type": "json_object"}}),
        ("llama.cpp", AS_SCHEMA, {"json_schema": SCHEMA}),
        ("llama.cpp", AS_JSON, {"json_schema": {"type": "object"}}),
        (
            "llama-cpp-python",
            AS_SCHEMA,
            {"response_format": {"type": "json_object", "schema": SCHEMA}},
        ),
        ("llama-cpp-python", AS_JSON, {"response_format": {"type": "json_object"}}),
        (
            "lmstudio",
            AS_JSON,
            {
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {
                        "name": "output",
                        "schema": {"type": "object"},
                        "strict": False,
                    },
                }
            },
        ),
    ],
)
def test_structured_output_goes_where_the_engine_reads_it(
    engine: str, fmt: dict[str, Any], expected: dict[str, Any]
) -> None:
    adapter = OpenAICompatAdapter(
        ai.ProviderSettings("openai-compat", base_url=BASE, options={"engine": engine})
    )
    body = adapter.build_body(_request(fmt))
    structured = {k: body[k] for k in ("response_format", "json_schema") if k in body}
    assert structured == expected


@pytest.mark.parametrize(
    ("mechanism", "fmt", "field", "value"),
    [
        ("guided_json", AS_SCHEMA, "guided_json", SCHEMA),
        ("guided_json", AS_JSON, "guided_json", {"type": "object"}),
        ("structured_outputs", AS_SCHEMA, "structured_outputs", {"json": SCHEMA}),
        ("structured_outputs", AS_JSON, "structured_outputs", {"json_object": True}),
    ],
)
def test_vllm_guided_mechanisms_are_selectable(
    mechanism: str, fmt: dict[str, Any], field: str, value: Any
) -> None:
    adapter = VLLMAdapter(
        ai.ProviderSettings("vllm", options={"quirks": {"structured_output": mechanism}})
    )
    body = adapter.build_body(_request(fmt))
    assert body[field] == value
    assert "response_format" not in body


def test_provider_options_still_win_and_reasoning_effort_can_be_withheld() -> None:
    adapter = LlamaCppAdapter(
        ai.ProviderSettings("llama.cpp", options={"quirks": {"send_reasoning_effort": False}})
    )
    body = adapter.build_body(
        _request(
            AS_SCHEMA,
            provider_options={"grammar": 'root ::= "x"', "json_schema": None},
            reasoning="high",
        )
    )
    assert body["grammar"] == 'root ::= "x"'
    assert body["json_schema"] is None
    assert "reasoning_effort" not in body


# --- the stream_options fallback ------------------------------------------------------------

REJECTION = Fault(
    "status",
    status=400,
    message="Unrecognized request argument supplied: stream_options",
    code="invalid_request_error",
)


def test_a_server_rejecting_stream_options_is_retried_once_without_it_and_remembered() -> None:
    ok = Script(pieces=(Text("Hi"),), usage=ScriptUsage(3, 1), usage_placement="finish")
    t = Capture("openai-chat", [Script(fault=REJECTION), ok, ok, ok])

    async def go() -> list[ai.Generation]:
        out = []
        async with ai.AsyncClient([settings(t)]) as client:
            for _ in range(2):
                async with client.stream("hi", route=no_retry("openai-compat:m")) as st:
                    async for _ev in st:
                        pass
                out.append(st.result)
            out.append(await client.generate("hi", route=no_retry("openai-compat:m")))
        return out

    first, second, whole = asyncio.run(go())
    bodies = t.bodies()
    assert [("stream_options" in b) for b in bodies] == [True, False, False, False]
    assert first.text == second.text == whole.text == "Hi"
    assert first.usage == ai.Usage(3, 1, 4)  # usage in the finish chunk still counts
    assert [a.outcome for a in first.attempts] == ["ok"]  # transparent: one attempt
    assert any("rejected stream_options" in w for w in first.warnings)
    assert not second.warnings
    t.assert_all_used()


@pytest.mark.parametrize(
    ("fault", "quirks"),
    [
        (Fault("status", status=400, message="messages: field required"), {}),
        (Fault("status", status=500, message="stream_options exploded"), {}),
        (REJECTION, {"retry_without_stream_options": False}),
    ],
)
def test_other_errors_are_not_mistaken_for_a_stream_options_rejection(
    fault: Fault, quirks: dict[str, Any]
) -> None:
    t = Capture("openai-chat", [Script(fault=fault)])
    _, result, error = stream(settings(t, options={"quirks": quirks}))
    assert result is None
    assert isinstance(error, ai.AllTargetsFailedError)
    assert len(t.raw) == 1
    assert error.attempts[0].error is not None
    assert error.attempts[0].error.http_status == fault.status


def test_a_422_naming_stream_options_in_a_validation_error_also_falls_back() -> None:
    rejection = {
        "detail": [
            {
                "type": "extra_forbidden",
                "loc": ["body", "stream_options"],
                "msg": "Extra inputs are not permitted",
            }
        ]
    }
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        if "stream_options" in json.loads(request.content):
            return httpx.Response(422, json=rejection)
        return httpx.Response(
            200,
            content=sse_body(delta_chunk({"content": "ok"}), delta_chunk({}, "stop")),
            headers={"content-type": "text/event-stream"},
        )

    _, result, error = stream(settings(mock(answer, seen=seen)))
    assert error is None and result is not None and result.text == "ok"
    assert len(seen) == 2


# --- llama.cpp ------------------------------------------------------------------------------


@pytest.mark.parametrize("placement", ["trailing", "finish", "split"])
@pytest.mark.parametrize("streamed", [True, False])
def test_llama_cpp_timings_become_phases_and_usage(placement: str, streamed: bool) -> None:
    script = Script(
        pieces=(Reasoning("think"), Text("Hel"), Text("lo")),
        usage=ScriptUsage(input_tokens=10, output_tokens=3, cache_read_tokens=4),
        usage_placement=placement,  # type: ignore[arg-type]
    )
    t = Capture("llama.cpp", [script])
    s = settings(t, "llama.cpp")
    if streamed:
        events, result, error = stream(s, "llama.cpp:m")
        assert error is None
    else:
        result = generate(s, "llama.cpp:m")
    assert result is not None
    assert result.text == "Hello" and result.reasoning == "think"
    # split: no usage object at all - the counts come from timings alone.
    assert result.usage == ai.Usage(
        input_tokens=10, output_tokens=3, total_tokens=13, cache_read_tokens=4
    )
    assert result.timing.phases == {"prefill_ms": PROMPT_MS, "decode_ms": PREDICTED_MS}
    if streamed:
        assert usages(events), "usage arrives as an event, not only on the result"


def test_llama_cpp_without_usage_or_timings_reports_nothing() -> None:
    script = Script(pieces=(Text("x"),), usage=ScriptUsage(1, 1), usage_placement="none")
    _, result, _ = stream(
        settings(FakeTransport("llama.cpp", [script]), "llama.cpp"), "llama.cpp:m"
    )
    assert result is not None
    assert result.usage == ai.Usage()
    assert result.timing.phases == {}


def test_llama_cpp_per_token_timings_track_the_latest_counts() -> None:
    """`timings_per_token: true` puts timings on every chunk; the last one wins."""
    chunks = [
        delta_chunk(
            {"content": "a"},
            timings={"prompt_n": 5, "prompt_ms": 3.0, "predicted_n": 1, "predicted_ms": 1.0},
        ),
        delta_chunk(
            {"content": "b"},
            timings={"prompt_n": 5, "prompt_ms": 3.0, "predicted_n": 2, "predicted_ms": 2.5},
        ),
        delta_chunk(
            {},
            "stop",
            timings={
                "prompt_n": 5,
                "prompt_ms": 3.0,
                "predicted_n": 2,
                "predicted_ms": 2.5,
                "cache_n": 0,
            },
        ),
    ]
    events, result, error = stream(settings(mock(sse_body(*chunks)), "llama.cpp"), "llama.cpp:m")
    assert error is None and result is not None
    assert result.usage == ai.Usage(5, 2, 7, cache_read_tokens=0)
    assert result.timing.phases == {"prefill_ms": 3.0, "decode_ms": 2.5}
    assert len(usages(events)) == 3


def test_llama_cpp_over_a_real_socket() -> None:
    script = Script(
        pieces=(
            Text("Hello "),
            ToolFragment(0, '{"city": "Oslo"}', id="call_a", name="get_weather"),
        ),
        finish_reason="tool_calls",
        usage=ScriptUsage(7, 5),
        usage_placement="split",
        read_sizes=(3,),
    )
    with FakeServer("llama.cpp", [script, script], models=["smollm2"]) as srv:
        s = ai.ProviderSettings("llama.cpp", base_url=srv.base_url)
        with ai.Client([s]) as client:
            with client.stream("hi", route=no_retry("llama.cpp:smollm2")) as st:
                events = list(st)
            whole = client.generate("hi", route=no_retry("llama.cpp:smollm2"))
            models = client.models("llama.cpp")
            health = client.health("llama.cpp")
        srv.assert_all_used()
    for result in (st.result, whole):
        assert result.text == "Hello "
        assert result.tool_calls == (ai.ToolCall("call_a", "get_weather", {"city": "Oslo"}),)
        assert result.finish_reason == "tool_calls"
        assert result.usage == ai.Usage(7, 5, 12)
        assert result.timing.phases["decode_ms"] == PREDICTED_MS
    assert isinstance(events[-1], ai.StreamEnded)
    assert [(m.id, m.context_window) for m in models] == [("smollm2", 4096)]
    assert models[0].facts["n_ctx_train"] == 8192
    assert models[0].facts["ftype"] == "Q4_1"
    assert health.ok and health.models == 1


@pytest.mark.parametrize(
    ("status", "body", "error_type"),
    [
        (
            400,
            {
                "error": {
                    "code": 400,
                    "message": "the request exceeds the available context size, try increasing it",
                    "type": "exceed_context_size_error",
                    "n_prompt_tokens": 9000,
                    "n_ctx": 8192,
                }
            },
            "ContextWindowError",
        ),
        (
            400,  # vLLM's error shape: no "error" wrapper, status in "code"
            {
                "object": "error",
                "message": "This model's maximum context length is 4096 tokens. "
                "However, you requested 5000 tokens.",
                "type": "BadRequestError",
                "param": None,
                "code": 400,
            },
            "ContextWindowError",
        ),
        (
            401,
            {"error": {"code": 401, "message": "Invalid API Key", "type": "authentication_error"}},
            "AuthenticationError",
        ),
        (
            503,
            {"error": {"code": 503, "message": "Loading model", "type": "unavailable_error"}},
            "OverloadedError",
        ),
        (
            404,
            {"error": {"code": 404, "message": "model 'x' not found", "type": "not_found_error"}},
            "ModelNotFoundError",
        ),
        (
            400,
            {"error": {"code": 400, "message": "scripted", "type": "content_filter"}},
            "ContentFilterError",
        ),
    ],
)
def test_engine_error_bodies_map_to_typed_errors(
    status: int, body: dict[str, Any], error_type: str
) -> None:
    t = mock(json.dumps(body).encode(), status, {"content-type": "application/json"})
    info = failure(settings(t, "llama.cpp"), "llama.cpp:m")
    assert info.type_name == error_type
    assert info.http_status == status


def test_rate_limits_carry_retry_after() -> None:
    t = FakeTransport(
        "llama.cpp", [Script(fault=Fault("status", status=429, retry_after=7, message="slow"))]
    )
    info = failure(settings(t, "llama.cpp"), "llama.cpp:m")
    assert info.type_name == "RateLimitError"
    assert info.retryable

    async def raw() -> ai.RateLimitError:
        t2 = FakeTransport(
            "llama.cpp", [Script(fault=Fault("status", status=429, retry_after=7, message="slow"))]
        )
        adapter = LlamaCppAdapter(ai.ProviderSettings("llama.cpp", transport=t2))
        try:
            async for _ in adapter.generate(_request(None)):
                pass
        except ai.RateLimitError as exc:
            return exc
        finally:
            await adapter.aclose()
        raise AssertionError("no RateLimitError")

    assert asyncio.run(raw()).retry_after == 7.0


def test_health_reports_an_unreachable_server_without_raising() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    async def go() -> ai.Health:
        async with ai.AsyncClient([settings(mock(refuse), "vllm")]) as client:
            return await client.health("vllm")

    health = asyncio.run(go())
    assert health.ok is False
    assert "cannot connect" in health.detail


# --- llama-cpp-python -----------------------------------------------------------------------


def _lcp_tool_chunk(arguments: str) -> dict[str, Any]:
    """llama-cpp-python repeats the id and name (and a legacy function_call) every time."""
    call = {"name": "get_weather", "arguments": arguments}
    return delta_chunk(
        {
            "role": None,
            "content": None,
            "function_call": call,
            "tool_calls": [
                {
                    "index": 0,
                    "id": "call__0_get_weather_cmpl-1",
                    "type": "function",
                    "function": call,
                }
            ],
        }
    )


def test_llama_cpp_python_repeated_tool_call_headers_keep_one_slot() -> None:
    body = sse_body(
        delta_chunk(
            {"role": "assistant", "content": None, "function_call": None, "tool_calls": None}
        ),
        _lcp_tool_chunk('{"city": '),
        _lcp_tool_chunk('"Oslo"}'),
        delta_chunk(
            {"role": None, "content": None, "function_call": None, "tool_calls": None}, "tool_calls"
        ),
        comments=[b": ping - 2025-01-01 00:00:00.000000+00:00\r\n\r\n"],
    )
    s = settings(mock(body), options={"engine": "llama-cpp-python"})
    events, result, error = stream(s)
    assert error is None and result is not None
    assert result.tool_calls == (
        ai.ToolCall("call__0_get_weather_cmpl-1", "get_weather", {"city": "Oslo"}),
    )
    deltas = [e for e in events if isinstance(e, ai.ToolCallDelta)]
    assert [(d.index, d.call_id, d.name) for d in deltas] == [
        (0, "call__0_get_weather_cmpl-1", "get_weather"),
        (0, None, None),  # announced once, as OpenAI does
    ]
    assert "".join(d.arguments_fragment for d in deltas) == '{"city": "Oslo"}'
    assert result.finish_reason == "tool_calls"


def test_fragments_without_index_are_correlated_by_id() -> None:
    def frag(call_id: str | None, name: str | None, args: str) -> dict[str, Any]:
        call: dict[str, Any] = {"function": {"arguments": args}}
        if call_id:
            call["id"] = call_id
        if name:
            call["function"]["name"] = name
        return delta_chunk({"tool_calls": [call]})

    body = sse_body(
        frag("call_a", "one", '{"x": '),
        frag("call_b", "two", '{"y": 2}'),
        frag("call_a", None, "1}"),
        frag(None, None, ""),
        delta_chunk({}, "tool_calls"),
    )
    _, result, error = stream(settings(mock(body)))
    assert error is None and result is not None
    assert result.tool_calls == (
        ai.ToolCall("call_a", "one", {"x": 1}),
        ai.ToolCall("call_b", "two", {"y": 2}),
    )


def test_legacy_function_call_deltas_are_read_as_one_tool_call() -> None:
    body = sse_body(
        delta_chunk({"function_call": {"name": "lookup", "arguments": '{"q":'}}),
        delta_chunk({"function_call": {"arguments": ' "a"}'}}),
        delta_chunk({}, "function_call"),
    )
    _, result, error = stream(settings(mock(body)))
    assert error is None and result is not None
    assert result.tool_calls == (ai.ToolCall("call_0", "lookup", {"q": "a"}),)
    assert result.finish_reason == "tool_calls"


@pytest.mark.parametrize("body", [b"", b": ping - 2025-01-01 00:00:00\r\n\r\n"])
def test_an_empty_200_stream_is_a_failure(body: bytes) -> None:
    """llama-cpp-python ends a failed stream silently: 200, nothing (or only pings)."""
    events, result, error = stream(settings(mock(body), options={"engine": "llama-cpp-python"}))
    assert result is None
    assert isinstance(error, ai.AllTargetsFailedError)
    info = error.attempts[0].error
    assert info is not None and info.type_name == "StreamError"
    assert "empty 200" in info.detail
    assert [type(e) for e in events] == [ai.TimingMark, ai.AttemptFailed]


def test_an_empty_200_whole_response_is_a_failure() -> None:
    t = mock(b"", headers={"content-type": "application/json"})
    info = failure(settings(t))
    assert info.type_name == "StreamError"
    assert "empty body" in info.detail


# --- finish reasons, usage placements and error chunks of hosted gateways --------------------


def test_no_finish_reason_is_stop_with_done_and_a_failure_without() -> None:
    chunks = [delta_chunk({"content": "a"}), delta_chunk({"content": "b"})]
    _, result, error = stream(settings(mock(sse_body(*chunks))))
    assert error is None and result is not None
    assert (result.text, result.finish_reason, result.warnings) == ("ab", "stop", ())

    events, result, error = stream(settings(mock(sse_body(*chunks, done=False))))
    assert result is None
    assert isinstance(error, ai.StreamError)  # content was shown, so the error itself
    assert text_of(events) == "ab"


def test_groq_usage_in_x_groq_is_counted() -> None:
    body = sse_body(
        delta_chunk({"role": "assistant", "content": ""}, x_groq={"id": "req_1"}),
        delta_chunk({"content": "Hi"}),
        delta_chunk(
            {},
            "stop",
            x_groq={
                "id": "req_1",
                "usage": {
                    "queue_time": 0.05,
                    "prompt_tokens": 21,
                    "completion_tokens": 4,
                    "total_tokens": 25,
                },
            },
        ),
    )
    events, result, error = stream(settings(mock(body), options={"engine": "groq"}))
    assert error is None and result is not None
    assert result.usage == ai.Usage(21, 4, 25)
    assert usages(events) == [ai.Usage(21, 4, 25)]


def test_deepseek_usage_in_the_finish_chunk_with_cache_hits() -> None:
    body = sse_body(
        delta_chunk({"content": None, "reasoning_content": "Hmm"}, usage=None),
        delta_chunk({"content": "Hi", "reasoning_content": None}, usage=None),
        delta_chunk(
            {"content": ""},
            "stop",
            usage={
                "prompt_tokens": 6,
                "completion_tokens": 12,
                "total_tokens": 18,
                "completion_tokens_details": {"reasoning_tokens": 9},
                "prompt_cache_hit_tokens": 2,
                "prompt_cache_miss_tokens": 4,
            },
        ),
    )
    _, result, error = stream(settings(mock(body), options={"engine": "deepseek"}))
    assert error is None and result is not None
    assert (result.text, result.reasoning) == ("Hi", "Hmm")
    assert result.usage == ai.Usage(6, 12, 18, cache_read_tokens=2, reasoning_tokens=9)


def test_openrouter_comments_and_an_error_chunk_flush_usage_then_fail() -> None:
    processing = [b": OPENROUTER PROCESSING\n\n"] * 3
    body = sse_body(
        delta_chunk({"role": "assistant", "content": "", "reasoning": "We need"}),
        {
            "id": "gen-1",
            "error": {"code": 400, "message": "Token limit reached"},
            "choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": None}],
            "usage": {"prompt_tokens": 43, "completion_tokens": 10, "total_tokens": 53},
        },
        comments=processing,
    )
    events, result, error = stream(settings(mock(body), options={"engine": "openrouter"}))
    assert result is None
    assert type(error) is ai.ProviderError
    assert error.http_status == 400 and error.phase == "stream"
    assert "Token limit reached" in error.message
    # Failure-path flushing: the error chunk's usage reached the consumer first.
    assert usages(events) == [ai.Usage(43, 10, 53)]
    assert [e.text for e in events if isinstance(e, ai.ReasoningDelta)] == ["We need"]


def test_mistral_list_content_and_finish_chunk_usage() -> None:
    body = sse_body(
        delta_chunk(
            {"content": [{"type": "thinking", "thinking": [{"type": "text", "text": "Okay"}]}]}
        ),
        delta_chunk({"content": "Sure."}),
        delta_chunk(
            {"content": ""},
            "stop",
            usage={"prompt_tokens": 10, "total_tokens": 14, "completion_tokens": 4},
        ),
    )
    t_seen: list[httpx.Request] = []
    _, result, error = stream(settings(mock(body, seen=t_seen), options={"engine": "mistral"}))
    assert error is None and result is not None
    assert (result.text, result.reasoning, result.usage) == ("Sure.", "Okay", ai.Usage(10, 4, 14))
    assert "stream_options" not in json.loads(t_seen[0].content)


def test_retain_raw_keeps_the_chunks_unnormalized() -> None:
    body = sse_body(_lcp_tool_chunk("{}"), _lcp_tool_chunk(""), delta_chunk({}, "tool_calls"))
    s = settings(mock(body))

    async def go() -> ai.Generation:
        async with ai.AsyncClient([s], retain_raw=True) as client:
            async with client.stream("hi", route=no_retry("openai-compat:m")) as st:
                async for _ in st:
                    pass
            return st.result

    result = asyncio.run(go())
    assert isinstance(result.raw, list) and len(result.raw) == 3
    # The second chunk still carries the id the normalizer dropped from its delta.
    assert (
        result.raw[1]["choices"][0]["delta"]["tool_calls"][0]["id"] == "call__0_get_weather_cmpl-1"
    )


# --- the generic id over the shared dialect --------------------------------------------------


@pytest.mark.parametrize("placement", ["trailing", "finish", "split", "none"])
def test_generic_compat_reads_every_usage_placement(placement: str) -> None:
    script = Script(
        pieces=(Text("a"), ToolFragment(0, "{}", id="c1", name="f")),
        finish_reason="tool_calls",
        usage=ScriptUsage(4, 2, cache_read_tokens=1, reasoning_tokens=1),
        usage_placement=placement,  # type: ignore[arg-type]
        keepalives=(0, 2),
    )
    _, result, error = stream(settings(FakeTransport("openai-chat", [script])))
    assert error is None and result is not None
    want = ai.Usage() if placement == "none" else ai.Usage(4, 2, 6, 1, None, 1)
    assert result.usage == want
    assert result.tool_calls == (ai.ToolCall("c1", "f", {}),)


def test_lmstudio_and_vllm_presets_stream_over_the_shared_dialect() -> None:
    for pid in ("lmstudio", "vllm"):
        script = Script(pieces=(Reasoning("r"), Text("t")), usage=ScriptUsage(2, 2))
        t = Capture("openai-chat", [script])
        _, result, error = stream(settings(t, pid), f"{pid}:m")
        assert error is None and result is not None
        assert (result.text, result.reasoning, result.usage.total_tokens) == ("t", "r", 4)
        assert t.raw[0].url.host == "127.0.0.1"


def test_llama_cpp_discovery_prefers_the_loaded_context() -> None:
    """The shape a current llama-server returns (Ollama-style `models` beside `data`)."""
    path = "/models/SmolLM2-135M-Instruct.Q4_1.gguf"
    listing = {
        "models": [{"name": path, "model": path, "type": "model", "capabilities": ["completion"]}],
        "object": "list",
        "data": [
            {
                "id": path,
                "aliases": [path],
                "object": "model",
                "owned_by": "llamacpp",
                "meta": {
                    "vocab_type": 2,
                    "n_vocab": 49152,
                    "n_ctx": 1024,
                    "n_ctx_train": 8192,
                    "n_params": 134515008,
                    "size": 96576768,
                    "ftype": "Q4_1",
                },
            },
            {"id": "older-build", "object": "model", "meta": {"n_ctx_train": 2048}},
            {"id": "no-meta", "object": "model"},
        ],
    }
    t = mock(json.dumps(listing).encode(), headers={"content-type": "application/json"})

    async def go() -> Sequence[Any]:
        async with ai.AsyncClient([settings(t, "llama.cpp")]) as client:
            return await client.models("llama.cpp")

    current, older, bare = asyncio.run(go())
    assert (current.id, current.context_window) == (path, 1024)
    assert current.facts == {
        "n_ctx_train": 8192,
        "n_params": 134515008,
        "size": 96576768,
        "n_vocab": 49152,
        "ftype": "Q4_1",
    }
    assert (older.id, older.context_window, older.facts) == (
        "older-build",
        2048,
        {"n_ctx_train": 2048},
    )
    assert (bare.id, bare.context_window) == ("no-meta", None)


# --- refusals -------------------------------------------------------------------------------


def _refusing_script() -> Script:
    """A script the `openai-chat` dialect renders as a model refusal."""
    dialect = get_dialect("openai-chat")
    assert isinstance(dialect, OpenAIChatDialect)
    for n in range(64):
        script = Script(
            pieces=(Text("I can't "), Text(f"help with that ({n}).")),
            finish_reason="content_filter",
            usage=ScriptUsage(5, 4),
        )
        if dialect.refuses(script):
            return script
    raise AssertionError("no refusing script among 64")


@pytest.mark.parametrize("provider", ["openai", "openai-compat"])
@pytest.mark.parametrize("streamed", [True, False])
def test_a_refusal_is_text_with_a_content_filter_finish(provider: str, streamed: bool) -> None:
    script = _refusing_script()
    rendered = get_dialect("openai-chat").render(script, stream=streamed)
    assert b'"refusal":"I can' in rendered.body and b'"finish_reason":"stop"' in rendered.body
    s = settings(FakeTransport("openai-chat", [script]), provider, api_key="sk-test")
    target = f"{provider}:m"
    if streamed:
        events, result, error = stream(s, target)
        assert error is None and result is not None
        assert text_of(events) == script.text
    else:
        result = generate(s, target)
    assert result.text == script.text
    assert result.finish_reason == "content_filter"


def test_stop_without_a_refusal_stays_stop() -> None:
    body = sse_body(
        delta_chunk({"role": "assistant", "content": "", "refusal": None}),
        delta_chunk({"content": "fine"}),
        delta_chunk({}, "stop"),
    )
    _, result, error = stream(settings(mock(body)))
    assert error is None and result is not None
    assert (result.text, result.finish_reason) == ("fine", "stop")
