"""Telemetry: typed events, payload privacy, redaction, contained observer failures, OTel."""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterator
from dataclasses import fields, is_dataclass
from decimal import Decimal
from typing import Any

import pytest

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


@pytest.fixture
def otel() -> Iterator[tuple[object, object, object]]:
    pytest.importorskip("opentelemetry.sdk")
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from anyinfer.otel import OpenTelemetryObserver

    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    observer = OpenTelemetryObserver(tracer_provider=tracer_provider, meter_provider=meter_provider)
    yield observer, exporter, reader
    meter_provider.shutdown()
    tracer_provider.shutdown()


def _points(reader: Any) -> dict[str, list[Any]]:
    data = reader.get_metrics_data()
    found: dict[str, list[Any]] = {}
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                found.setdefault(metric.name, []).extend(metric.data.data_points)
    return found


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

    points = _points(reader)
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
    (duration,) = _points(reader)["gen_ai.client.operation.duration"]
    assert duration.attributes["error.type"] == "RateLimitError"
    # events for an unknown request are ignored, not errors
    observer.on_event(RequestEnded(request_id="never-started", ok=True))  # type: ignore[attr-defined]


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
