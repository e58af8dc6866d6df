"""Telemetry: typed events, payload privacy, redaction, contained observer failures, OTel."""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterator
from dataclasses import fields, is_dataclass
from decimal import Decimal
from typing import Any

import pytest
from helpers import metric_points, sse

from anyinfer._errors import RateLimitError
from anyinfer._messages import Message, TextContent
from anyinfer._redact import register_secret
from anyinfer._telemetry import (
    AttemptEnded,
    AttemptStarted,
    FirstToken,
    Observer,
    RequestEnded,
    RequestStarted,
    Telemetry,
    TelemetryEvent,
    UsageReported,
    new_request_id,
)
from anyinfer._types import ResolvedTarget, Timing, ToolCall, Usage

SECRET = "sk-telemetry-secret-0123456789"
register_secret(SECRET)

TARGET = ResolvedTarget("openai", "gpt-4o-mini", "openai")
FALLBACK = ResolvedTarget("claude", "claude-sonnet-4-5", "anthropic")
PROMPT = "summarize the quarterly numbers"
ANSWER = "revenue rose twelve percent"
ARGS = {"query": "quarterly numbers"}


class Recorder:
    def __init__(self) -> None:
        self.events: list[TelemetryEvent] = []

    def on_event(self, event: TelemetryEvent) -> None:
        self.events.append(event)


def scenario(rid: str = "r1", *, ok: bool = True) -> list[TelemetryEvent]:
    """The events of one request that fails over from one target to another."""
    meta = {"user": "u-42"}
    failure = RateLimitError("slow down", provider="openai", http_status=429).to_info()
    events: list[TelemetryEvent] = [
        RequestStarted(
            request_id=rid,
            metadata=meta,
            targets=("openai:gpt-4o-mini", "claude:claude-sonnet-4-5"),
            stream=True,
            messages=(
                Message.system("you are terse"),
                Message.user([TextContent(PROMPT)]),
                Message.assistant("", tool_calls=[ToolCall("c0", "search", ARGS)]),
                Message.tool_result("c0", "tool output text"),
            ),
        ),
        AttemptStarted(request_id=rid, metadata=meta, target=TARGET, attempt=1),
        AttemptEnded(request_id=rid, metadata=meta, target=TARGET, outcome="failed", error=failure),
        AttemptStarted(request_id=rid, metadata=meta, target=FALLBACK, attempt=2),
        FirstToken(request_id=rid, metadata=meta, target=FALLBACK, at_ms=120.0),
        UsageReported(request_id=rid, metadata=meta, target=FALLBACK, usage=Usage(12, 5)),
        AttemptEnded(
            request_id=rid,
            metadata=meta,
            target=FALLBACK,
            outcome="ok",
            timing=Timing(0.0, 120.0, 900.0),
            usage=Usage(12, 5),
        ),
    ]
    if ok:
        events.append(
            RequestEnded(
                request_id=rid,
                metadata=meta,
                ok=True,
                target=FALLBACK,
                usage=Usage(12, 5, 17),
                cost_usd=Decimal("0.000111"),
                timing=Timing(0.0, 120.0, 900.0),
                finish_reason="tool_calls",
                text=ANSWER,
                tool_calls=(ToolCall("c1", "search", ARGS),),
            )
        )
    else:
        events.append(
            RequestEnded(request_id=rid, metadata=meta, ok=False, error=failure, usage=Usage(3))
        )
    return events


def emit_all(telemetry: Telemetry, events: list[TelemetryEvent]) -> None:
    for event in events:
        telemetry.emit(functools.partial(lambda e: e, event))


def texts_in(value: Any) -> Iterator[str]:
    """Every string reachable inside an event (dataclasses, mappings, sequences)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from texts_in(k)
            yield from texts_in(v)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from texts_in(v)
    elif is_dataclass(value):
        for f in fields(value):
            yield from texts_in(getattr(value, f.name))
    elif hasattr(value, "items"):
        yield from texts_in(dict(value.items()))


PAYLOAD_TEXTS = (PROMPT, ANSWER, "quarterly numbers", "tool output text", "you are terse")


def test_payload_free_observer_sees_no_payload_text() -> None:
    bare, full = Recorder(), Recorder()
    telemetry = Telemetry()
    telemetry.subscribe(bare)
    telemetry.subscribe(full, payloads=True)
    emit_all(telemetry, scenario())

    assert [type(e) for e in bare.events] == [type(e) for e in full.events]
    seen = " ".join(s for e in bare.events for s in texts_in(e))
    for payload in PAYLOAD_TEXTS:
        assert payload not in seen
    started, ended = bare.events[0], bare.events[-1]
    assert isinstance(started, RequestStarted) and started.messages is None
    assert isinstance(ended, RequestEnded) and ended.text is None and ended.tool_calls is None
    # everything that is not payload still arrives
    assert ended.usage == Usage(12, 5, 17) and ended.cost_usd == Decimal("0.000111")
    assert ended.finish_reason == "tool_calls" and ended.target == FALLBACK
    assert all(e.metadata == {"user": "u-42"} for e in bare.events)

    seen_full = " ".join(s for e in full.events for s in texts_in(e))
    for payload in PAYLOAD_TEXTS:
        assert payload in seen_full
    full_end = full.events[-1]
    assert isinstance(full_end, RequestEnded) and full_end.text == ANSWER
    assert full_end.tool_calls is not None and full_end.tool_calls[0].arguments == ARGS


def test_payload_free_on_a_failed_request_too() -> None:
    bare = Recorder()
    telemetry = Telemetry([bare])
    emit_all(telemetry, scenario(ok=False))
    ended = bare.events[-1]
    assert isinstance(ended, RequestEnded) and not ended.ok
    assert ended.error is not None and ended.error.type_name == "RateLimitError"
    seen = " ".join(s for e in bare.events for s in texts_in(e))
    assert PROMPT not in seen


def test_payloads_and_metadata_are_redacted() -> None:
    full, bare = Recorder(), Recorder()
    telemetry = Telemetry([bare])
    telemetry.subscribe(full, payloads=True)
    leaky = f"my key is {SECRET}"
    telemetry.emit(
        lambda: RequestStarted(
            request_id="r",
            metadata={"note": leaky},
            messages=(
                Message.user(leaky),
                Message.assistant("", tool_calls=[ToolCall("c", "f", {"k": leaky})]),
            ),
        )
    )
    telemetry.emit(
        lambda: RequestEnded(
            request_id="r",
            ok=True,
            text=leaky,
            tool_calls=(ToolCall("c", "f", {"nested": [leaky]}),),
        )
    )
    for recorder in (full, bare):
        seen = " ".join(s for e in recorder.events for s in texts_in(e))
        assert SECRET not in seen
    assert "[secure]" in " ".join(s for e in full.events for s in texts_in(e))


def test_emit_builds_nothing_without_observers_and_once_with_many() -> None:
    telemetry = Telemetry()
    calls = []

    def factory() -> TelemetryEvent:
        calls.append(1)
        return RequestStarted(request_id="r")

    assert not telemetry.active
    telemetry.emit(factory)
    assert calls == []
    telemetry.subscribe(Recorder())
    telemetry.subscribe(Recorder(), payloads=True)
    telemetry.subscribe(Recorder())
    assert telemetry.active and telemetry.wants_payloads
    telemetry.emit(factory)
    assert calls == [1]


def test_subscribe_again_updates_and_unsubscribe_removes() -> None:
    rec = Recorder()
    telemetry = Telemetry()
    telemetry.subscribe(rec, payloads=True)
    telemetry.subscribe(rec)  # now payload-free, and not subscribed twice
    assert not telemetry.wants_payloads
    telemetry.emit(lambda: RequestEnded(request_id="r", ok=True, text=ANSWER))
    assert len(rec.events) == 1
    ended = rec.events[0]
    assert isinstance(ended, RequestEnded) and ended.text is None
    telemetry.unsubscribe(rec)
    telemetry.unsubscribe(rec)  # not subscribed: nothing happens
    assert not telemetry.active
    telemetry.emit(lambda: RequestEnded(request_id="r", ok=True))
    assert len(rec.events) == 1


def test_observer_that_raises_never_breaks_and_is_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Broken:
        def __init__(self) -> None:
            self.calls = 0

        def on_event(self, event: TelemetryEvent) -> None:
            self.calls += 1
            if isinstance(event, AttemptStarted):
                raise KeyError(f"boom {SECRET}")
            raise ValueError("bad")

    broken, after = Broken(), Recorder()
    telemetry = Telemetry([broken, after])
    with caplog.at_level(logging.WARNING, logger="anyinfer"):
        emit_all(telemetry, scenario())
        emit_all(telemetry, scenario("r2"))
    assert broken.calls == 16 and len(after.events) == 16  # the next observer still ran
    records = [r for r in caplog.records if r.name == "anyinfer"]
    assert len(records) == 2  # one per error type
    assert {"KeyError", "ValueError"} <= {w for r in records for w in r.getMessage().split()}
    assert all(SECRET not in r.getMessage() for r in records)


def test_base_exceptions_propagate() -> None:
    class Interrupting:
        def on_event(self, event: TelemetryEvent) -> None:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        Telemetry([Interrupting()]).emit(lambda: RequestStarted(request_id="r"))


def test_observer_protocol() -> None:
    assert isinstance(Recorder(), Observer)
    with pytest.raises(TypeError):
        Telemetry().subscribe(object())  # type: ignore[arg-type]
    assert new_request_id() != new_request_id()


def test_events_are_frozen_and_keyword_only() -> None:
    event = FirstToken(request_id="r", target=TARGET, at_ms=1.0)
    with pytest.raises(AttributeError):
        event.at_ms = 2.0  # type: ignore[misc]
    with pytest.raises(TypeError):
        FirstToken("r", {}, TARGET, 1.0)  # type: ignore[call-arg]


# --- OpenTelemetry -------------------------------------------------------------------------


def test_otel_observer_follows_genai_conventions(otel: tuple[object, object, object]) -> None:
    observer, exporter, reader = otel
    telemetry = Telemetry()
    telemetry.subscribe(observer, payloads=True)  # type: ignore[arg-type]
    emit_all(telemetry, scenario())

    (span,) = exporter.get_finished_spans()  # type: ignore[attr-defined]
    attrs = dict(span.attributes)
    assert span.name == "chat claude-sonnet-4-5"
    assert attrs["gen_ai.operation.name"] == "chat"
    assert attrs["gen_ai.provider.name"] == "anthropic" == attrs["gen_ai.system"]
    assert attrs["gen_ai.request.model"] == "gpt-4o-mini"  # the first model asked
    assert attrs["gen_ai.response.model"] == "claude-sonnet-4-5"
    assert attrs["gen_ai.usage.input_tokens"] == 12
    assert attrs["gen_ai.usage.output_tokens"] == 5
    assert tuple(attrs["gen_ai.response.finish_reasons"]) == ("tool_calls",)
    assert attrs["gen_ai.response.time_to_first_chunk"] == pytest.approx(0.12)
    assert "error.type" not in attrs
    assert [e.name for e in span.events] == ["anyinfer.attempt_failed"]
    assert span.events[0].attributes["error.type"] == "RateLimitError"
    # never payload text, even subscribed with payloads
    dumped = span.to_json()
    assert PROMPT not in dumped and ANSWER not in dumped

    points = metric_points(reader)
    usage = {p.attributes["gen_ai.token.type"]: p.sum for p in points["gen_ai.client.token.usage"]}
    assert usage == {"input": 12, "output": 5}
    assert len(points["gen_ai.client.operation.duration"]) == 1
    (ttfc,) = points["gen_ai.client.operation.time_to_first_chunk"]
    assert ttfc.sum == pytest.approx(0.12)


def test_otel_observer_marks_failures(otel: tuple[object, object, object]) -> None:
    observer, exporter, reader = otel
    telemetry = Telemetry([observer])  # type: ignore[list-item]
    emit_all(telemetry, scenario(ok=False))
    (span,) = exporter.get_finished_spans()  # type: ignore[attr-defined]
    assert span.attributes["error.type"] == "RateLimitError"
    assert span.status.status_code.name == "ERROR"
    (duration,) = metric_points(reader)["gen_ai.client.operation.duration"]
    assert duration.attributes["error.type"] == "RateLimitError"
    # events for an unknown request are ignored, not errors
    observer.on_event(RequestEnded(request_id="never-started", ok=True))  # type: ignore[attr-defined]


def _span_of(observer: Any, exporter: Any, events: list[TelemetryEvent]) -> tuple[Any, ...]:
    exporter.clear()
    for event in events:
        observer.on_event(event)
    (span,) = exporter.get_finished_spans()
    return span.name, dict(span.attributes), [(e.name, dict(e.attributes)) for e in span.events]


def test_otel_observer_reports_a_subclass_of_an_event_as_the_event(
    otel: tuple[object, object, object],
) -> None:
    observer, exporter, _reader = otel
    events = scenario()
    subclassed = [
        type(f"My{type(e).__name__}", (type(e),), {})(
            **{f.name: getattr(e, f.name) for f in fields(e)}  # type: ignore[arg-type]
        )
        for e in events
    ]
    assert all(type(a) is not type(b) for a, b in zip(events, subclassed, strict=True))
    expected = _span_of(observer, exporter, events)
    assert expected[2]  # the failed attempt's span event is there to compare
    assert _span_of(observer, exporter, subclassed) == expected


def test_otel_observer_works_with_apis_before_bucket_advice() -> None:
    pytest.importorskip("opentelemetry")
    from anyinfer.otel import OpenTelemetryObserver

    recorded: list[tuple[str, float]] = []

    class OldHistogram:
        def __init__(self, name: str) -> None:
            self.name = name

        def record(self, value: float, attributes: object = None) -> None:
            recorded.append((self.name, value))

    class OldMeter:
        def create_histogram(self, name: str, unit: str = "", description: str = "") -> Any:
            return OldHistogram(name)

    class OldMeterProvider:
        def get_meter(self, *args: object, **kwargs: object) -> OldMeter:
            return OldMeter()

    observer = OpenTelemetryObserver(meter_provider=OldMeterProvider())
    emit_all(Telemetry([observer]), scenario())
    assert ("gen_ai.client.token.usage", 12) in recorded
    assert any(name == "gen_ai.client.operation.duration" for name, _ in recorded)


# --- what the client reports, request by request ---------------------------------------


def _delta(text: str | None = None, finish: str | None = None) -> dict[str, Any]:
    delta = {} if text is None else {"content": text}
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


USAGE_CHUNK = {"choices": [], "usage": {"prompt_tokens": 4, "completion_tokens": 2}}


def _observed_client(
    pricing: Any = None, **bodies: list[tuple[int, bytes]]
) -> tuple[Any, Recorder]:
    import httpx

    import anyinfer as ai

    def serving(answers: list[tuple[int, bytes]]) -> Any:
        def handler(request: httpx.Request) -> httpx.Response:
            status, body = answers.pop(0) if len(answers) > 1 else answers[0]
            kind = "text/event-stream" if status == 200 else "application/json"
            return httpx.Response(status, content=body, headers={"content-type": kind})

        return handler

    rec = Recorder()
    client = ai.AsyncClient(
        [
            ai.ProviderSettings(
                "openai", alias=name, api_key="sk-x", transport=httpx.MockTransport(serving(b))
            )
            for name, b in bodies.items()
        ],
        observers=[rec],
        pricing_table=pricing,
    )
    return client, rec


def _summary(events: list[TelemetryEvent]) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    for e in events:
        if isinstance(e, AttemptStarted):
            out.append(("AttemptStarted", e.target.provider, e.attempt))
        elif isinstance(e, AttemptEnded):
            error = e.error.type_name if e.error is not None else None
            out.append(("AttemptEnded", e.target.provider, e.outcome, error, e.usage))
        elif isinstance(e, FirstToken | UsageReported):
            out.append((type(e).__name__, e.target.provider))
        elif isinstance(e, RequestEnded):
            target = e.target.provider if e.target is not None else None
            error = e.error.type_name if e.error is not None else None
            out.append(("RequestEnded", e.ok, target, error, e.usage))
        else:
            out.append((type(e).__name__,))
    return out


def test_client_reports_retries_fallbacks_and_the_answer_in_order() -> None:
    import asyncio

    import anyinfer as ai

    overloaded = (503, b'{"error": {"message": "busy", "type": "x"}}')
    answer = (200, sse(_delta("hel"), _delta("lo"), _delta(finish="stop"), USAGE_CHUNK))
    client, rec = _observed_client(a=[overloaded], b=[answer])
    route = ai.Route(
        ["a:m", "b:m"], retry=ai.RetryPolicy(max_retries=1, backoff_base_s=0.001, jitter=0.0)
    )

    async def go() -> ai.Generation:
        async with client, client.stream("hi", route=route, metadata={"k": "v"}) as stream:
            return await stream.collect()

    result = asyncio.run(go())
    assert result.text == "hello"
    usage = Usage(4, 2)
    assert _summary(rec.events) == [
        ("RequestStarted",),
        ("AttemptStarted", "a", 1),
        ("AttemptEnded", "a", "retried", "OverloadedError", Usage()),
        ("AttemptStarted", "a", 2),
        ("AttemptEnded", "a", "failed", "OverloadedError", Usage()),
        ("AttemptStarted", "b", 3),
        ("FirstToken", "b"),
        ("UsageReported", "b"),
        ("AttemptEnded", "b", "ok", None, result.usage),
        ("RequestEnded", True, "b", None, result.usage),
    ]
    assert result.usage.input_tokens == usage.input_tokens
    assert len({e.request_id for e in rec.events}) == 1
    assert all(e.metadata == {"k": "v"} for e in rec.events)
    started = rec.events[0]
    assert isinstance(started, RequestStarted)
    assert started.targets == ("a:m", "b:m") and started.stream


def test_client_reports_a_failed_request_with_the_usage_it_flushed() -> None:
    import asyncio

    import anyinfer as ai

    cut = (200, sse(USAGE_CHUNK, done=False))  # usage, then the connection ends
    client, rec = _observed_client(a=[cut])
    route = ai.Route("a:m", retry=ai.RetryPolicy(max_retries=0))

    async def go() -> None:
        async with client, client.stream("hi", route=route) as stream:
            await stream.collect()

    with pytest.raises(ai.AllTargetsFailedError):
        asyncio.run(go())
    flushed = Usage(4, 2)
    assert _summary(rec.events) == [
        ("RequestStarted",),
        ("AttemptStarted", "a", 1),
        ("UsageReported", "a"),
        ("AttemptEnded", "a", "failed", "StreamError", flushed),
        ("RequestEnded", False, None, "AllTargetsFailedError", flushed),
    ]


def test_attempt_and_request_ends_carry_every_field_of_the_trail_and_result() -> None:
    """Whole events compared: a field the instrument stops filling in (the record's
    error or timing, an attempt's priced usage, the cost) fails here."""
    import asyncio

    import anyinfer as ai

    overloaded = (503, b'{"error": {"message": "busy", "type": "x"}}')
    answer = (200, sse(_delta("hel"), _delta("lo"), _delta(finish="stop"), USAGE_CHUNK))
    price = ai.ModelPrice(input=Decimal("0.001"), output=Decimal("0.002"))
    table = ai.PricingTable({"openai:m": price})
    client, rec = _observed_client(table, a=[overloaded], b=[answer])
    route = ai.Route(
        ["a:m", "b:m"], retry=ai.RetryPolicy(max_retries=1, backoff_base_s=0.001, jitter=0.0)
    )
    meta = {"k": "v"}

    async def go() -> ai.Generation:
        async with client, client.stream("hi", route=route, metadata=meta) as stream:
            return await stream.collect()

    result = asyncio.run(go())
    usage = result.usage
    assert usage.cost_usd == Decimal("0.008")  # 4 in, 2 out: priced
    records = result.attempts
    assert [r.outcome for r in records] == ["retried", "failed", "ok"]
    assert all(r.timing is not None for r in records)
    assert all(r.error is not None for r in records[:2])
    rid = rec.events[0].request_id
    assert [e for e in rec.events if isinstance(e, AttemptEnded)] == [
        AttemptEnded(
            request_id=rid,
            metadata=meta,
            target=r.target,
            outcome=r.outcome,
            error=r.error,
            timing=r.timing,
            usage=u,
        )
        for r, u in zip(records, [Usage(), Usage(), usage], strict=True)
    ]
    assert rec.events[-1] == RequestEnded(
        request_id=rid,
        metadata=meta,
        ok=True,
        target=result.target,
        usage=usage,
        cost_usd=usage.cost_usd,
        timing=result.timing,
        finish_reason="stop",
    )  # text and tool calls: payload observers only


def test_a_failed_request_ends_with_every_field_of_its_error_and_flushed_usage() -> None:
    import asyncio

    import anyinfer as ai

    cut = (200, sse(USAGE_CHUNK, done=False))
    client, rec = _observed_client(a=[cut])
    route = ai.Route("a:m", retry=ai.RetryPolicy(max_retries=0))

    async def go() -> None:
        async with client, client.stream("hi", route=route) as stream:
            await stream.collect()

    with pytest.raises(ai.AllTargetsFailedError) as caught:
        asyncio.run(go())
    (record,) = caught.value.attempts
    assert record.error is not None and record.timing is not None
    rid, flushed = rec.events[0].request_id, Usage(4, 2)
    ended = [e for e in rec.events if isinstance(e, AttemptEnded | RequestEnded)]
    assert ended == [
        AttemptEnded(
            request_id=rid,
            target=record.target,
            outcome="failed",
            error=record.error,
            timing=record.timing,
            usage=flushed,
        ),
        RequestEnded(request_id=rid, ok=False, usage=flushed, error=caught.value.to_info()),
    ]


# --- requests that end without a result or an error of their own ----------------------


def _stalling_settings(head: bytes, stall_s: float = 30.0) -> Any:
    """Provider `a` (OpenAI Chat), whose every answer sends `head`, then stalls."""
    import asyncio

    import httpx

    import anyinfer as ai

    class Stalling(httpx.AsyncByteStream):
        async def __aiter__(self) -> Any:
            yield head
            await asyncio.sleep(stall_s)

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, stream=Stalling(), headers={"content-type": "text/event-stream"})

    return ai.ProviderSettings(
        "openai", alias="a", api_key="sk-x", transport=httpx.MockTransport(handler)
    )


def _stalling_client(head: bytes) -> tuple[Any, Recorder]:
    import anyinfer as ai

    rec = Recorder()
    return ai.AsyncClient([_stalling_settings(head)], observers=[rec]), rec


def _ends(rec: Recorder) -> list[tuple[Any, ...]]:
    """The summary of every attempt and request end, with the request's error phase."""
    out = []
    for e in rec.events:
        if isinstance(e, AttemptEnded | RequestEnded) and e.error is not None:
            if e.error.type_name in ("GeneratorExit", "CancelledError"):
                assert not e.error.retryable and e.error.http_status is None
            out.append((*_summary([e])[0], e.error.provider, e.error.phase))
        elif isinstance(e, AttemptEnded | RequestEnded):
            out.append(_summary([e])[0])
    return out


@pytest.mark.parametrize("managed", [True, False])
def test_a_stream_left_early_still_ends_its_attempt_and_request(managed: bool) -> None:
    """`break` out of a stream (closed by its context manager, or by `aclose()`) ends the
    request with one `RequestEnded` naming `GeneratorExit` and carrying the usage the
    stream had shown, and its attempt with an `AttemptEnded`: an observer that pairs
    starts with ends (OpenTelemetry's spans) keeps nothing of it."""
    import asyncio

    import anyinfer as ai

    head = sse(USAGE_CHUNK, _delta("hel"), done=False)
    client, rec = _stalling_client(head)

    async def go() -> None:
        async with client:
            stream = client.stream("hi", target="a:m")
            if managed:
                async with stream:
                    async for event in stream:
                        if isinstance(event, ai.TextDelta):
                            break
            else:
                async for event in stream:
                    if isinstance(event, ai.TextDelta):
                        break
                await stream.aclose()

    asyncio.run(go())
    shown = Usage(4, 2)
    assert _ends(rec) == [
        ("AttemptEnded", "a", "failed", "GeneratorExit", shown, "a", "stream"),
        ("RequestEnded", False, None, "GeneratorExit", shown, "a", "stream"),
    ]
    (error,) = {e.error for e in rec.events if isinstance(e, RequestEnded)}
    assert error is not None and error.detail == "the caller closed the stream before it ended"


def test_a_cancelled_request_ends_with_the_cancellation() -> None:
    """`asyncio.timeout` around a `generate()` whose answer stalls: `CancelledError`
    (the body is read whole, so no usage was shown)."""
    import asyncio

    client, rec = _stalling_client(sse(USAGE_CHUNK, done=False))

    async def go() -> None:
        async with client:
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.2):
                    await client.generate("hi", target="a:m")

    asyncio.run(go())
    assert _ends(rec) == [
        ("AttemptEnded", "a", "failed", "CancelledError", Usage(), "a", "generate"),
        ("RequestEnded", False, None, "CancelledError", Usage(), "a", "generate"),
    ]


def test_a_request_cancelled_in_a_retry_backoff_ends_once() -> None:
    """Cancelled while waiting to retry: the retried attempt already ended, so only the
    request's end is left to report, with that attempt's target."""
    import asyncio

    import anyinfer as ai

    overloaded = (503, b'{"error": {"message": "busy", "type": "x"}}')
    client, rec = _observed_client(a=[overloaded])
    retry = ai.RetryPolicy(max_retries=1, backoff_base_s=30.0, jitter=0.0)

    async def go() -> None:
        async with client:
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.2):
                    await client.generate("hi", route=ai.Route("a:m", retry=retry))

    asyncio.run(go())
    assert _ends(rec) == [
        ("AttemptEnded", "a", "retried", "OverloadedError", Usage(), "a", "generate"),
        ("RequestEnded", False, None, "CancelledError", Usage(), "a", "generate"),
    ]


def test_a_stream_left_after_its_end_event_ends_once_with_its_result() -> None:
    """Breaking out at `StreamEnded` (before the iterator says it is done) closes a
    stream whose request already reported its result: nothing more is reported."""
    import asyncio

    import anyinfer as ai

    answer = (200, sse(_delta("hi"), _delta(finish="stop"), USAGE_CHUNK))
    client, rec = _observed_client(a=[answer])

    async def go() -> None:
        async with client, client.stream("hi", target="a:m") as stream:
            async for event in stream:
                if isinstance(event, ai.StreamEnded):
                    break

    asyncio.run(go())
    ends = [e for e in rec.events if isinstance(e, RequestEnded)]
    assert [(e.ok, e.error) for e in ends] == [(True, None)]


def test_a_sync_stream_closed_early_ends_its_request() -> None:
    """The sync facade's early exit cancels the loop side's request: one `RequestEnded`
    for it, which the closing call waits for."""
    import anyinfer as ai

    rec = Recorder()
    settings = _stalling_settings(sse(USAGE_CHUNK, _delta("hel"), done=False))
    with ai.Client([settings], observers=[rec]) as client:
        with client.stream("hi", target="a:m") as stream:
            for event in stream:
                if isinstance(event, ai.TextDelta):
                    break
        ends = [e for e in rec.events if isinstance(e, RequestEnded)]
    assert [(e.ok, e.error.type_name if e.error else None) for e in ends] == [
        (False, "CancelledError")
    ]


def test_a_cancelled_embed_call_ends_with_the_cancellation() -> None:
    import asyncio

    import httpx

    import anyinfer as ai
    from anyinfer._telemetry import OperationEnded

    async def handler(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(30)
        raise AssertionError("not reached")

    rec = Recorder()
    settings = ai.ProviderSettings(
        "openai", alias="a", api_key="sk-x", transport=httpx.MockTransport(handler)
    )

    async def go() -> None:
        async with ai.AsyncClient([settings], observers=[rec]) as client:
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.2):
                    await client.embed(["x"], target="a:text-embedding-3-small")

    asyncio.run(go())
    (end,) = [e for e in rec.events if isinstance(e, OperationEnded)]
    assert not end.ok and end.error is not None
    assert (end.error.type_name, end.error.detail) == (
        "CancelledError",
        "the caller cancelled the request before it ended",
    )


def test_otel_ends_the_span_of_a_stream_left_early(otel: tuple[Any, Any, Any]) -> None:
    """Its span ends, with the error type, and the observer keeps no flight of it."""
    import asyncio

    import anyinfer as ai

    observer, exporter, _ = otel
    client, _rec = _stalling_client(sse(_delta("hel"), done=False))
    client.subscribe(observer)

    async def go() -> None:
        async with client:
            for _ in range(3):
                async with client.stream("hi", target="a:m") as stream:
                    async for event in stream:
                        if isinstance(event, ai.TextDelta):
                            break

    asyncio.run(go())
    spans = exporter.get_finished_spans()
    assert [s.attributes["error.type"] for s in spans] == ["GeneratorExit"] * 3
    assert observer._flights == {}


def test_otel_counts_one_first_chunk_for_a_repaired_stream(otel: tuple[Any, Any, Any]) -> None:
    """A schema repair re-runs the target in the same stream: a second first token, but
    the request's time to first chunk is recorded once, from the first."""
    import anyinfer as ai
    from anyinfer.testing import Reply, ScriptedProviders

    observer, exporter, reader = otel
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    rec = Recorder()
    with ScriptedProviders() as providers:
        providers.add("p", [Reply('{"a": "no"}'), Reply('{"a": 1}')])
        with providers.client(observers=[rec, observer]) as client:
            with client.stream("hi", target="p:m", schema=schema, repair=ai.Repair(1)) as s:
                for _ in s:
                    pass
    first = [e.at_ms for e in rec.events if isinstance(e, FirstToken)]
    assert len(first) == 2
    (span,) = exporter.get_finished_spans()
    assert span.attributes["gen_ai.response.time_to_first_chunk"] == pytest.approx(first[0] / 1e3)
    (ttfc,) = metric_points(reader)["gen_ai.client.operation.time_to_first_chunk"]
    assert ttfc.count == 1


def test_the_attempt_and_request_end_fields_stay_as_documented() -> None:
    """The events' fields are the public contract: their names and order."""
    common = ["request_id", "metadata"]
    assert [f.name for f in fields(AttemptEnded)] == [
        *common,
        *["target", "outcome", "error", "timing", "usage"],
    ]
    assert [f.name for f in fields(RequestEnded)] == [
        *common,
        *["ok", "target", "usage", "cost_usd", "timing", "error", "finish_reason"],
        *["text", "tool_calls"],
    ]


def test_an_unobserved_request_gets_the_silent_instrument() -> None:
    from anyinfer._client.instrument import SILENT, Instrument, instrument

    telemetry = Telemetry()
    assert instrument(telemetry, {}) is SILENT

    async def events() -> Any:
        yield RequestStarted(request_id="r")

    gen = events()
    assert SILENT.watch(gen, TARGET) is gen  # no wrapper, no per-event cost
    telemetry.subscribe(Recorder())
    observed = instrument(telemetry, {"k": "v"})
    assert type(observed) is Instrument and observed is not instrument(telemetry, {})


def test_an_unobserved_client_never_loads_the_event_classes() -> None:
    """Every client has a hub; the events' module loads with the first observer."""
    import subprocess
    import sys

    code = """
import asyncio, json, sys
import httpx
import anyinfer as ai

body = {"id": "c", "object": "chat.completion", "model": "m", "choices": [
    {"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}
transport = httpx.MockTransport(lambda request: httpx.Response(200, json=body))

class Seen:
    def __init__(self): self.kinds = []
    def on_event(self, event): self.kinds.append(type(event).__name__)

async def main():
    settings = ai.ProviderSettings("openai", api_key="k", transport=transport)
    async with ai.AsyncClient([settings]) as client:
        assert (await client.generate("hi", target="openai:m")).text == "hi"
        assert "anyinfer._telemetry" not in sys.modules, "loaded with no observer"
        seen = Seen()
        client.subscribe(seen)
        await client.generate("hi", target="openai:m")
        assert seen.kinds[0] == "RequestStarted" and seen.kinds[-1] == "RequestEnded", seen.kinds
asyncio.run(main())
print("ok")
"""
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert out.stdout.strip() == "ok", out.stderr
