"""Tests for `fakeservers`: rendering, planning, and both servers driven by the real client."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import psutil
import pytest

import anyinfer as ai
from anyinfer.fakeservers import (
    Dialect,
    Disconnect,
    FakeServer,
    FakeTransport,
    Fault,
    Frame,
    OpenAIChatDialect,
    Reasoning,
    Rendered,
    Script,
    ScriptUsage,
    Stall,
    Text,
    ToolFragment,
    UnexpectedRequestError,
    Write,
    dialect_names,
    get_dialect,
    plan,
    register_dialect,
)

OPENAI = OpenAIChatDialect()
TARGET = "openai:fake-model"
# One attempt per call: these tests script each response, so the client's retries (which
# would consume further scripts and wait out backoff) are switched off.
ONCE = ai.Route(TARGET, retry=ai.RetryPolicy(max_retries=0))
KINDS = ("transport", "server")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# --- helpers -----------------------------------------------------------------------


def sse_payloads(body: bytes) -> list[Any]:
    """Parse an SSE body by hand: JSON payloads, `"[DONE]"`, and `":"` for comments."""
    assert body.endswith(b"\n\n")
    out: list[Any] = []
    for event in body.decode("utf-8").split("\n\n")[:-1]:
        if event.startswith(":"):
            out.append(":")
            continue
        assert event.startswith("data: "), event
        data = event[len("data: ") :]
        out.append(data if data == "[DONE]" else json.loads(data))
    return out


def frame_payload(frame: Frame) -> Any:
    (payload,) = sse_payloads(frame.data)
    return payload


@contextlib.contextmanager
def serving(kind: str, scripts: Any, **kwargs: Any) -> Iterator[tuple[Any, Any]]:
    """Provider settings pointing at a fake of `kind`, and the fake itself."""
    if kind == "transport":
        transport = FakeTransport("openai-chat", scripts, **kwargs)
        yield (
            ai.ProviderSettings(
                "openai", api_key="sk-test", base_url="http://fake.test/v1", transport=transport
            ),
            transport,
        )
    else:
        with FakeServer("openai-chat", scripts, **kwargs) as srv:
            yield ai.ProviderSettings("openai", api_key="sk-test", base_url=srv.base_url), srv


async def stream_events(settings: Any, **kwargs: Any) -> tuple[list[Any], Any]:
    """Stream one call; return its events and the result, or the exception raised."""
    events: list[Any] = []
    async with ai.AsyncClient([settings]) as client:
        try:
            async with client.stream("hi", route=ONCE, **kwargs) as st:
                async for event in st:
                    events.append(event)
        except ai.AnyInferError as exc:
            return events, exc
    return events, st.result


TOOL_SCRIPT = Script(
    pieces=(
        Reasoning("Let me think"),
        Text("Checking the "),
        Text("weather in Zürich"),
        ToolFragment(0, '{"city": ', id="call_a", name="weather"),
        ToolFragment(0, '"Zürich"}'),
        ToolFragment(1, "{}", id="call_b", name="clock"),
    ),
    finish_reason="tool_calls",
    usage=ScriptUsage(
        input_tokens=11,
        output_tokens=7,
        cache_read_tokens=3,
        reasoning_tokens=2,
        cache_write_tokens=5,
    ),
)


# --- rendering ---------------------------------------------------------------------


def test_stream_render_round_trip() -> None:
    rendered = OPENAI.render(TOOL_SCRIPT, stream=True)
    assert rendered.status == 200
    assert dict(rendered.headers)["content-type"].startswith("text/event-stream")
    payloads = sse_payloads(rendered.body)
    assert payloads[-1] == "[DONE]"
    chunks = payloads[:-1]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert all(c["model"] == "fake-model" for c in chunks)
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"

    text, reasoning = "", ""
    calls: dict[int, dict[str, Any]] = {}
    finishes: list[str] = []
    for c in chunks:
        for choice in c["choices"]:
            delta = choice["delta"]
            text += delta.get("content") or ""
            reasoning += delta.get("reasoning_content") or ""
            for call in delta.get("tool_calls", ()):
                slot = calls.setdefault(call["index"], {"id": None, "name": None, "args": ""})
                slot["id"] = slot["id"] or call.get("id")
                slot["name"] = slot["name"] or call["function"].get("name")
                slot["args"] += call["function"]["arguments"]
            if choice["finish_reason"] is not None:
                finishes.append(choice["finish_reason"])
    assert text == TOOL_SCRIPT.text
    assert reasoning == TOOL_SCRIPT.reasoning
    assert finishes == ["tool_calls"]
    assert {i: (s["id"], s["name"], json.loads(s["args"])) for i, s in calls.items()} == {
        0: ("call_a", "weather", {"city": "Zürich"}),
        1: ("call_b", "clock", {}),
    }
    # A call opens with its id, type and name and no argument text (as OpenAI sends it);
    # a fragment without id/name carries neither, nor a type.
    header = frame_payload(rendered.frames[4])["choices"][0]["delta"]["tool_calls"][0]
    assert header == {
        "index": 0,
        "id": "call_a",
        "type": "function",
        "function": {"name": "weather", "arguments": ""},
    }
    second = frame_payload(rendered.frames[6])["choices"][0]["delta"]["tool_calls"][0]
    assert second == {"index": 0, "function": {"arguments": '"Zürich"}'}}

    # Trailing usage: a usage-only chunk after the finish chunk, `usage: null` elsewhere.
    usage_chunk = chunks[-1]
    assert usage_chunk["choices"] == []
    assert usage_chunk["usage"] == {
        "prompt_tokens": 11,
        "completion_tokens": 7,
        "total_tokens": 18,
        "prompt_tokens_details": {"cached_tokens": 3, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": 2,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }
    assert all(c["usage"] is None for c in chunks[:-1])
    assert "Zürich".encode() in rendered.body  # raw UTF-8, not \\u escapes

    # Frame bookkeeping matches the wire.
    frames = rendered.frames
    assert [f.pieces for f in frames] == [
        (),
        (0,),
        (1,),
        (2,),
        (3,),  # the call's header ...
        (3,),  # ... and its first fragment's text
        (4,),
        (5,),
        (5,),
        (),
        (),
        (),
    ]
    assert [f.finish for f in frames].index(True) == 9
    assert frames[10].usage == {
        "input_tokens",
        "output_tokens",
        "cache_read_tokens",
        "reasoning_tokens",
    }
    assert frames[11].sentinel and frames[11].data == b"data: [DONE]\n\n"
    assert sum(bool(f.usage) for f in frames) == 1


def test_first_tool_fragment_carries_the_role() -> None:
    script = Script(pieces=(ToolFragment(0, "{}", id="c", name="f"),), finish_reason="tool_calls")
    frames = OPENAI.render(script, stream=True).frames
    delta = frame_payload(frames[0])["choices"][0]["delta"]
    assert delta["role"] == "assistant"
    assert delta["content"] is None
    assert delta["tool_calls"][0]["id"] == "c"
    assert frames[0].pieces == (0,)


@pytest.mark.parametrize("placement", ["trailing", "finish", "split", "none"])
def test_usage_placement(placement: str) -> None:
    script = Script(
        pieces=(Text("a"),),
        usage=ScriptUsage(4, 2),
        usage_placement=placement,  # type: ignore[arg-type]
    )
    frames = OPENAI.render(script, stream=True).frames
    with_usage = [i for i, f in enumerate(frames) if f.usage]
    finish = [i for i, f in enumerate(frames) if f.finish]
    assert len(finish) == 1
    payloads = [frame_payload(f) for f in frames]
    usages = [i for i, p in enumerate(payloads) if isinstance(p, dict) and p.get("usage")]
    assert usages == with_usage  # the bookkeeping says exactly where usage is
    if placement == "trailing":
        assert with_usage == [finish[0] + 1]
        assert payloads[with_usage[0]]["choices"] == []
    elif placement in ("finish", "split"):
        assert with_usage == finish
        assert "usage" not in payloads[0]  # no `usage: null` markers without include_usage
    else:
        assert with_usage == []
    for i in with_usage:
        assert frames[i].usage == {"input_tokens", "output_tokens"}
        assert payloads[i]["usage"] == {
            "prompt_tokens": 4,
            "completion_tokens": 2,
            "total_tokens": 6,
        }


def test_keepalives_sentinel_and_missing_finish() -> None:
    script = Script(
        pieces=(Text("a"), Text("b")),
        finish_reason=None,
        usage=ScriptUsage(1, 1),
        usage_placement="finish",
        keepalives=(0, 2, 2, 99),
        sentinel=False,
    )
    frames = OPENAI.render(script, stream=True).frames
    kinds = ["k" if f.keepalive else "f" for f in frames]
    # content frames: role, a, b, usage chunk; keep-alives before 0, twice before 2, at the end
    assert kinds == ["k", "f", "f", "k", "k", "f", "f", "k"]
    assert all(f.data == b": keep-alive\n\n" for f in frames if f.keepalive)
    assert not any(f.sentinel for f in frames)
    assert not any(f.finish for f in frames)
    last = frame_payload(frames[-2])
    assert last["choices"][0]["finish_reason"] is None  # no finish reason is sent
    assert last["usage"]["prompt_tokens"] == 1
    assert frames[-2].usage == {"input_tokens", "output_tokens"}


def test_unknown_finish_reason_is_sent_verbatim() -> None:
    rendered = OPENAI.render(Script(pieces=(Text("x"),), finish_reason="tea_break"), stream=True)
    finishes = [f for f in rendered.frames if f.finish]
    assert frame_payload(finishes[0])["choices"][0]["finish_reason"] == "tea_break"


def test_whole_render() -> None:
    rendered = OPENAI.render(TOOL_SCRIPT, stream=False)
    (frame,) = rendered.frames
    assert frame.sentinel and frame.finish
    assert frame.pieces == tuple(range(len(TOOL_SCRIPT.pieces)))
    assert frame.usage == {"input_tokens", "output_tokens", "cache_read_tokens", "reasoning_tokens"}
    body = json.loads(rendered.body)
    assert body["object"] == "chat.completion"
    choice = body["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    message = choice["message"]
    assert message["role"] == "assistant"
    assert message["content"] == "Checking the weather in Zürich"
    assert message["reasoning_content"] == "Let me think"
    assert message["tool_calls"] == [
        {
            "id": "call_a",
            "type": "function",
            "function": {"name": "weather", "arguments": '{"city": "Zürich"}'},
        },
        {"id": "call_b", "type": "function", "function": {"name": "clock", "arguments": "{}"}},
    ]
    assert body["usage"]["total_tokens"] == 18

    bare = json.loads(OPENAI.render(Script(finish_reason=None), stream=False).body)
    assert bare["choices"][0]["message"]["content"] is None
    assert bare["choices"][0]["finish_reason"] is None
    assert "usage" not in bare


def test_render_error() -> None:
    err = OPENAI.render_error(
        Fault("status", status=429, retry_after=2, message="slow down", code="rate_limit_exceeded")
    )
    assert err.status == 429
    assert dict(err.headers)["retry-after"] == "2"
    assert json.loads(err.body) == {
        "error": {
            "message": "slow down",
            "type": "rate_limit_error",
            "param": None,
            "code": "rate_limit_exceeded",
        }
    }
    plain = OPENAI.render_error(Fault("status", status=500))
    assert "retry-after" not in dict(plain.headers)
    assert json.loads(plain.body)["error"]["type"] == "server_error"
    assert OPENAI.render_error(Fault("status", retry_after=1.5)).headers[-1] == (
        "retry-after",
        "1.5",
    )


def test_routing_and_models() -> None:
    assert OPENAI.is_generation("POST", "/v1/chat/completions")
    assert OPENAI.is_generation("POST", "/openai/v1/chat/completions")
    assert not OPENAI.is_generation("GET", "/v1/chat/completions")
    assert OPENAI.is_models("GET", "/v1/models")
    assert OPENAI.wants_stream({"stream": True})
    assert not OPENAI.wants_stream({"stream": False})
    assert not OPENAI.wants_stream(None)
    listing = json.loads(OPENAI.models_response(["a", "b"]).body)
    assert [m["id"] for m in listing["data"]] == ["a", "b"]


def test_registry() -> None:
    assert "openai-chat" in dialect_names()
    assert isinstance(get_dialect("openai-chat"), OpenAIChatDialect)
    with pytest.raises(KeyError, match="openai-chat"):
        get_dialect("no-such-dialect")
    register_dialect(OpenAIChatDialect())  # the same class again is harmless

    class Impostor(OpenAIChatDialect):
        pass

    with pytest.raises(ValueError, match="already registered"):
        register_dialect(Impostor())

    class Echo(OpenAIChatDialect):
        name = "test-echo"

    try:
        register_dialect(Echo())
        assert isinstance(get_dialect("test-echo"), Echo)
        assert "test-echo" in dialect_names()
    finally:
        register_dialect(OpenAIChatDialect(), replace=True)
    with pytest.raises(TypeError):
        register_dialect(OpenAIChatDialect)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        Dialect()  # type: ignore[abstract]


# --- plan --------------------------------------------------------------------------


def test_plan_byte_by_byte_splits_utf8() -> None:
    script = Script(pieces=(Text("é€😀"),), read_sizes=(1,))
    rendered = OPENAI.render(script, stream=True)
    actions = plan(rendered, script)
    assert all(isinstance(a, Write) and len(a.data) == 1 for a in actions)
    assert b"".join(a.data for a in actions if isinstance(a, Write)) == rendered.body
    undecodable = 0
    for a in actions:
        assert isinstance(a, Write)
        try:
            a.data.decode("utf-8")
        except UnicodeDecodeError:
            undecodable += 1
    assert undecodable == len("é€😀".encode())  # every byte of every multi-byte character


def test_plan_read_sizes_repeat_the_last() -> None:
    script = Script(pieces=(Text("hello"),), read_sizes=(3, 10))
    rendered = OPENAI.render(script, stream=True)
    sizes = [len(a.data) for a in plan(rendered, script) if isinstance(a, Write)]
    assert sizes[0] == 3
    assert set(sizes[1:-1]) == {10}
    assert 0 < sizes[-1] <= 10
    assert sum(sizes) == len(rendered.body)
    with pytest.raises(ValueError, match="positive"):
        plan(rendered, Script(read_sizes=(0,)))


def test_plan_without_read_sizes_writes_frames() -> None:
    script = Script(pieces=(Text("a"), Text("b")))
    rendered = OPENAI.render(script, stream=True)
    assert plan(rendered, script) == [Write(f.data) for f in rendered.frames]
    status = Script(pieces=(Text("a"),), fault=Fault("status", status=503))
    assert plan(rendered, status) == [Write(f.data) for f in rendered.frames]


def test_plan_disconnect() -> None:
    script = Script(pieces=(Text("a"), Text("b")), fault=Fault("disconnect", at=2, partial_bytes=7))
    rendered = OPENAI.render(script, stream=True)
    frames = rendered.frames
    assert plan(rendered, script) == [
        Write(frames[0].data),
        Write(frames[1].data),
        Write(frames[2].data[:7]),
        Disconnect(),
    ]
    clamped = Script(fault=Fault("disconnect", at=1000, partial_bytes=5))
    rendered = OPENAI.render(clamped, stream=True)
    assert plan(rendered, clamped) == [*(Write(f.data) for f in rendered.frames), Disconnect()]
    cut = Script(fault=Fault("disconnect", at=0), read_sizes=(1,))
    assert plan(OPENAI.render(cut, stream=True), cut) == [Disconnect()]


def test_plan_malformed_and_stall() -> None:
    script = Script(pieces=(Text("a"),), fault=Fault("malformed", at=1))
    rendered = OPENAI.render(script, stream=True)
    data = [a.data for a in plan(rendered, script) if isinstance(a, Write)]
    assert data == [rendered.frames[0].data, OPENAI.malformed_frame()] + [
        f.data for f in rendered.frames[1:]
    ]
    assert OPENAI.malformed_frame() == b"data: {not json\n\n"
    # A Rendered built without a malformed frame of its own gets a generic SSE one.
    bare = Rendered(200, (), rendered.frames)
    assert plan(bare, script)[1] == Write(b"data: {not json\n\n")

    stall = Script(pieces=(Text("a"),), fault=Fault("stall", at=2))
    rendered = OPENAI.render(stall, stream=True)
    assert plan(rendered, stall) == [
        Write(rendered.frames[0].data),
        Write(rendered.frames[1].data),
        Stall(),
    ]


# --- through the real client, over both servers --------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("kind", KINDS)
async def test_trailing_usage_is_counted_byte_by_byte(kind: str) -> None:
    script = Script(
        pieces=(Reasoning("hmm… "), Text("Grüße, "), Text("wörld 😀")),
        usage=ScriptUsage(input_tokens=12, output_tokens=5, cache_read_tokens=4),
        read_sizes=(1,),
    )
    with serving(kind, [script]) as (settings, fake):
        events, result = await stream_events(settings)
        fake.assert_all_used()
    if kind == "transport":
        assert fake.closed_early == 0  # drained to [DONE]: nothing left unsent
    assert isinstance(result, ai.Generation), result
    assert result.text == "Grüße, wörld 😀"
    assert result.reasoning == "hmm… "
    assert result.finish_reason == "stop"
    assert (result.usage.input_tokens, result.usage.output_tokens) == (12, 5)
    assert result.usage.cache_read_tokens == 4
    assert not result.warnings
    kinds = [type(e) for e in events]
    assert kinds.index(ai.UsageUpdate) < kinds.index(ai.StreamEnded)
    (method, path, body) = fake.requests[0]
    assert (method, path) == ("POST", "/v1/chat/completions")
    assert body["stream"] is True


@pytest.mark.anyio
@pytest.mark.parametrize("kind", KINDS)
async def test_disconnect_after_usage_raises_with_usage_seen_first(kind: str) -> None:
    # No finish reason yet when the connection drops: the attempt fails, but the usage
    # that already arrived is observable before the exception.
    script = Script(
        pieces=(Text("partial answer"),),
        finish_reason=None,
        usage=ScriptUsage(input_tokens=9, output_tokens=3),
        usage_placement="finish",
        fault=Fault("disconnect", at=3, partial_bytes=4),  # role, text, usage | [DONE]
    )
    with serving(kind, [script]) as (settings, _fake):
        events, error = await stream_events(settings)
    assert isinstance(error, ai.StreamError), error
    assert not isinstance(error, ai.ProtocolError)
    usage_events = [e for e in events if isinstance(e, ai.UsageUpdate)]
    assert usage_events and usage_events[-1].usage.input_tokens == 9
    assert not any(isinstance(e, ai.StreamEnded) for e in events)


@pytest.mark.anyio
@pytest.mark.parametrize("kind", KINDS)
async def test_disconnect_after_finish_keeps_trailing_usage(kind: str) -> None:
    # After the finish reason, a lost sentinel still completes (the trailing-usage rule).
    script = Script(
        pieces=(Text("done"),),
        usage=ScriptUsage(input_tokens=2, output_tokens=1),
        fault=Fault("disconnect", at=4, partial_bytes=6),  # role, text, finish, usage | [DONE]
    )
    with serving(kind, [script]) as (settings, _fake):
        _events, result = await stream_events(settings)
    assert isinstance(result, ai.Generation), result
    assert result.text == "done"
    assert result.usage.input_tokens == 2
    assert any("usage may be incomplete" in w for w in result.warnings)


@pytest.mark.anyio
@pytest.mark.parametrize("kind", KINDS)
async def test_malformed_frame_is_a_protocol_error(kind: str) -> None:
    after_content = Script(pieces=(Text("ok"), Text("more")), fault=Fault("malformed", at=2))
    before_content = Script(pieces=(Text("ok"),), fault=Fault("malformed", at=1))
    with serving(kind, [after_content, before_content]) as (settings, fake):
        events, error = await stream_events(settings)
        assert isinstance(error, ai.ProtocolError), error
        assert [e.text for e in events if isinstance(e, ai.TextDelta)] == ["ok"]
        # Before any content the client may fall back: it reports the failed attempt.
        events, error = await stream_events(settings)
        assert isinstance(error, ai.AllTargetsFailedError), error
        assert error.attempts[0].error is not None
        assert error.attempts[0].error.type_name == "ProtocolError"
        assert any(isinstance(e, ai.AttemptFailed) for e in events)
        fake.assert_all_used()


@pytest.mark.anyio
@pytest.mark.parametrize("kind", KINDS)
async def test_stall_times_out(kind: str) -> None:
    script = Script(pieces=(Text("thinking"), Text("never")), fault=Fault("stall", at=2))
    with serving(kind, [script]) as (settings, _fake):
        events, error = await stream_events(settings, timeout_s=0.3)
    assert isinstance(error, ai.ProviderTimeoutError), error
    assert error.timeout_kind == "idle"
    assert [e.text for e in events if isinstance(e, ai.TextDelta)] == ["thinking"]


@pytest.mark.anyio
@pytest.mark.parametrize("kind", KINDS)
async def test_status_429_with_retry_after(kind: str) -> None:
    fault = Fault(
        "status", status=429, retry_after=2, message="slow down", code="rate_limit_exceeded"
    )
    with serving(kind, [Script(fault=fault), Script(fault=fault)]) as (settings, fake):
        events, error = await stream_events(settings)
        assert isinstance(error, ai.AllTargetsFailedError), error
        info = error.attempts[0].error
        assert info is not None
        assert info.http_status == 429
        assert info.type_name == "RateLimitError"
        assert "slow down" in info.detail
        assert isinstance(events[-1], ai.AttemptFailed)
        # The header itself, seen by a plain httpx client.
        if kind == "transport":
            client = httpx.AsyncClient(transport=fake, base_url="http://fake.test")
        else:
            client = httpx.AsyncClient(base_url=fake.url)
        async with client:
            response = await client.post("/v1/chat/completions", json={"model": "m"})
        assert response.status_code == 429
        assert response.headers["retry-after"] == "2"
        assert response.json()["error"]["code"] == "rate_limit_exceeded"
        fake.assert_all_used()


@pytest.mark.anyio
@pytest.mark.parametrize("kind", KINDS)
async def test_early_exit_closes_the_response(kind: str) -> None:
    script = Script(pieces=tuple(Text(f"word{i} ") for i in range(200)))
    with serving(kind, [script]) as (settings, fake):
        async with ai.AsyncClient([settings]) as client:
            async with client.stream("hi", route=ONCE) as st:
                async for event in st:
                    if isinstance(event, ai.TextDelta):
                        break
            # Checked before the client closes its pool: the stream's exit closed it.
            if kind == "transport":
                assert fake.closed_early == 1
            else:
                assert fake.wait_client_closed(1, timeout=2.0)
                assert fake.client_closes == 1


@pytest.mark.anyio
@pytest.mark.parametrize("kind", KINDS)
async def test_non_streaming_generate_and_models(kind: str) -> None:
    script = Script(
        pieces=TOOL_SCRIPT.pieces,
        finish_reason="tool_calls",
        usage=TOOL_SCRIPT.usage,
        read_sizes=(1,),
    )
    with serving(kind, [script], models=("m-one", "m-two")) as (settings, fake):
        async with ai.AsyncClient([settings]) as client:
            result = await client.generate("hi", route=ONCE)
            models = await client.models("openai")
        fake.assert_all_used()
    assert result.text == "Checking the weather in Zürich"
    assert [(c.id, c.name, c.arguments) for c in result.tool_calls] == [
        ("call_a", "weather", {"city": "Zürich"}),
        ("call_b", "clock", {}),
    ]
    assert result.finish_reason == "tool_calls"
    assert result.usage.input_tokens == 11
    assert [m.id for m in models] == ["m-one", "m-two"]
    assert fake.requests[0].json.get("stream") is None
    assert [r.method for r in fake.requests] == ["POST", "GET"]


@pytest.mark.anyio
@pytest.mark.parametrize("kind", KINDS)
async def test_strict_scripts(kind: str) -> None:
    with serving(kind, [Script(pieces=(Text("one"),))]) as (settings, fake):
        async with ai.AsyncClient([settings]) as client:
            assert (await client.generate("hi", route=ONCE)).text == "one"
            if kind == "transport":
                # Running out fails the call itself, loudly.
                with pytest.raises(UnexpectedRequestError, match="no script left"):
                    await client.generate("hi", route=ONCE)
            else:
                # Over a socket it is an error response, and the server remembers.
                with pytest.raises(ai.AllTargetsFailedError, match="no script left"):
                    await client.generate("hi", route=ONCE)
        with pytest.raises(AssertionError, match="no script left"):
            fake.assert_all_used()

    with serving(kind, [Script(), Script()]) as (settings, fake):
        async with ai.AsyncClient([settings]) as client:
            await client.generate("hi", route=ONCE)
        with pytest.raises(AssertionError, match="1 scripted response"):
            fake.assert_all_used()


@pytest.mark.anyio
@pytest.mark.parametrize("kind", KINDS)
async def test_callable_scripts(kind: str) -> None:
    def choose(request: httpx.Request) -> Script:
        model = json.loads(request.content)["model"]
        return Script(pieces=(Text(f"you asked {model}"),), model=model)

    with serving(kind, choose) as (settings, fake):
        async with ai.AsyncClient([settings]) as client:
            a = await client.generate("hi", target="openai:alpha")
            b = await client.generate("hi", target="openai:beta")
        fake.assert_all_used()
    assert (a.text, b.text) == ("you asked alpha", "you asked beta")
    assert fake.served == 2


@pytest.mark.anyio
async def test_server_keeps_connections_alive_and_reports_unknown_paths() -> None:
    with FakeServer(
        "openai-chat", [Script(pieces=(Text("a"),)), Script(pieces=(Text("b"),))]
    ) as srv:
        settings = ai.ProviderSettings("openai", api_key="sk-test", base_url=srv.base_url)
        async with ai.AsyncClient([settings]) as client:
            assert (await client.generate("hi", route=ONCE)).text == "a"
            assert (await client.generate("hi", route=ONCE)).text == "b"
            assert srv.connections_opened == 1
        assert srv.wait_client_closed(1, timeout=2.0)
        srv.assert_all_used()
        async with httpx.AsyncClient(base_url=srv.url) as plain:
            response = await plain.post("/v1/audio/speech", json={})
        assert response.status_code == 404
        with pytest.raises(AssertionError, match="unexpected request POST /v1/audio/speech"):
            srv.assert_all_used()


def test_server_leaks_nothing() -> None:
    scripts = [
        Script(pieces=(Text("fine"),), usage=ScriptUsage(1, 1), read_sizes=(5,)),
        Script(pieces=(Text("cut"),), fault=Fault("disconnect", at=2, partial_bytes=3)),
        Script(pieces=(Text("slow"),), fault=Fault("stall", at=2)),
        Script(pieces=(Text("held"),), fault=Fault("stall", at=1)),  # still stalled at stop()
    ]

    def cycle() -> tuple[int, set[int | None], float]:
        srv = FakeServer("openai-chat", list(scripts)).start()
        settings = ai.ProviderSettings("openai", api_key="sk-test", base_url=srv.base_url)
        with ai.Client([settings]) as client:
            assert client.generate("hi", route=ONCE).text == "fine"
            with pytest.raises(ai.StreamError), client.stream("hi", route=ONCE) as st:
                for _ in st:
                    pass
            with pytest.raises(ai.AllTargetsFailedError, match="ProviderTimeoutError"):
                client.generate("hi", route=ONCE, timeout_s=0.2)
        # A plain client left hanging in a stall when the server stops.
        raw = httpx.Client(base_url=srv.url, timeout=5.0)
        stalled = threading.Thread(
            target=_swallow, args=(lambda: raw.post("/v1/chat/completions", json={}),)
        )
        stalled.start()
        while srv.served < 4:
            time.sleep(0.005)
        port = srv.port
        began = time.monotonic()
        srv.stop()
        stop_s = time.monotonic() - began
        threads = {t.ident for t in threading.enumerate() if t is not stalled}
        stalled.join(timeout=5.0)
        assert not stalled.is_alive()
        raw.close()
        srv.assert_all_used()
        return port, threads, stop_s

    process = psutil.Process()
    cycle()  # warm up imports and lazily created resources
    threads_before = {t.ident for t in threading.enumerate()}
    fds_before = process.num_fds()
    port, threads_after_stop, stop_s = cycle()
    assert stop_s < 0.5  # stop() ends a stalled response instead of waiting for the client
    assert threads_after_stop == threads_before
    assert process.num_fds() == fds_before
    assert not [
        c
        for c in process.net_connections("tcp")
        if c.laddr.port == port or (c.raddr and c.raddr.port == port)
    ]


def _swallow(fn: Any) -> None:
    with contextlib.suppress(httpx.HTTPError):
        fn()


def test_server_start_stop_is_idempotent() -> None:
    srv = FakeServer("openai-chat", [])
    with pytest.raises(RuntimeError, match="not running"):
        _ = srv.base_url
    srv.start()
    try:
        with pytest.raises(RuntimeError, match="already running"):
            srv.start()
        assert srv.base_url == f"http://127.0.0.1:{srv.port}/v1"
    finally:
        srv.stop()
    srv.stop()
    srv.assert_all_used()
