"""An OpenTelemetry observer following the GenAI semantic conventions.

Install the extra (`pip install 'anyinfer-kit[otel]'`), then::

    from anyinfer.otel import OpenTelemetryObserver

    client.subscribe(OpenTelemetryObserver())

Each request becomes one client span named `chat {model}` (the model that answered, else
the first one tried), carrying `gen_ai.operation.name`, `gen_ai.provider.name` (and the
older `gen_ai.system`), `gen_ai.request.model`, `gen_ai.response.model`,
`gen_ai.usage.input_tokens` / `output_tokens`, `gen_ai.response.finish_reasons` and, on
failure, `error.type` with an error status. Failed attempts before the winning one are
span events. Metrics: `gen_ai.client.token.usage` (per token type),
`gen_ai.client.operation.duration` and, for streams,
`gen_ai.client.operation.time_to_first_chunk`.

`embed()` calls follow the conventions' client embeddings page: one client span named
`embeddings {model}` (the model asked for) with `gen_ai.operation.name = "embeddings"`,
`gen_ai.provider.name`, `gen_ai.request.model`, `gen_ai.response.model`,
`gen_ai.embeddings.dimension.count` (when `dimensions` was asked),
`gen_ai.request.encoding_formats`, `gen_ai.usage.input_tokens` and, on failure,
`error.type`; the metrics are the embeddings' own, `gen_ai.client.embeddings.duration`
and `gen_ai.client.embeddings.operation.input_tokens` (the conventions moved embeddings
off `gen_ai.client.operation.duration` and `gen_ai.client.token.usage`). The
conventions name no rerank operation, so a `rerank()` call is a client span named
`rerank {model}` with `gen_ai.operation.name = "rerank"` (a custom value, as they allow)
and the same request, response and usage attributes, plus `anyinfer.search_units`;
it records no metric. For both, failed attempts are `anyinfer.attempt_failed` span
events carrying the batch index, and the cost is `anyinfer.cost_usd`.

The observer never records prompt or response text, the texts embedded or a rerank's
query and documents, whether or not it is subscribed with payloads.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ._errors import ConfigError
from ._telemetry import (
    AttemptEnded,
    AttemptStarted,
    BatchAttemptEnded,
    FirstToken,
    OperationEnded,
    OperationStarted,
    RequestEnded,
    RequestStarted,
    TelemetryEvent,
)
from ._types import ResolvedTarget

__all__ = ["PROVIDER_NAMES", "OpenTelemetryObserver"]

PROVIDER_NAMES = {
    "openai": "openai",
    "openai-responses": "openai",
    "anthropic": "anthropic",
    "gemini": "gcp.gemini",
}
"""AnyInfer engine id → the semantic conventions' well-known `gen_ai.provider.name`.
Other engines report their own id."""

_OPERATION = "chat"
_USAGE_ATTRIBUTES = (
    ("input_tokens", "gen_ai.usage.input_tokens"),
    ("output_tokens", "gen_ai.usage.output_tokens"),
    ("cache_read_tokens", "gen_ai.usage.cache_read.input_tokens"),
    ("cache_write_tokens", "gen_ai.usage.cache_creation.input_tokens"),
    ("reasoning_tokens", "gen_ai.usage.reasoning.output_tokens"),
)
"""`Usage` field → the conventions' span attribute for that count (embeddings and rerank
report only input tokens)."""
_TOKEN_BUCKETS: list[float] = [
    1,
    4,
    16,
    64,
    256,
    1024,
    4096,
    16384,
    65536,
    262144,
    1048576,
    4194304,
    16777216,
    67108864,
]
_DURATION_BUCKETS: list[float] = [
    0.01,
    0.02,
    0.04,
    0.08,
    0.16,
    0.32,
    0.64,
    1.28,
    2.56,
    5.12,
    10.24,
    20.48,
    40.96,
    81.92,
]


@dataclass
class _Flight:
    span: Any
    started: float
    stream: bool
    request_model: str | None
    provider: str | None
    first_chunk: bool = False  # reported: a request has one first chunk, however many attempts


def _histogram(meter: Any, name: str, unit: str, description: str, buckets: list[float]) -> Any:
    # The bucket advisory (the conventions' recommended boundaries) arrived in
    # opentelemetry-api 1.30; older APIs get the SDK's default boundaries.
    try:
        return meter.create_histogram(
            name, unit=unit, description=description, explicit_bucket_boundaries_advisory=buckets
        )
    except TypeError:
        return meter.create_histogram(name, unit=unit, description=description)


def _split_target(target: str) -> tuple[str | None, str | None]:
    provider, sep, model = target.partition(":")
    if not sep:
        return None, target or None
    return provider, model


def _provider_name(target: ResolvedTarget) -> str:
    engine = target.provider_id or target.provider
    return PROVIDER_NAMES.get(engine, engine)


class OpenTelemetryObserver:
    """Report requests as OpenTelemetry spans and GenAI metrics.

    Args:
        tracer_provider: Tracer provider; the global one by default.
        meter_provider: Meter provider; the global one by default.

    Raises:
        ConfigError: If `opentelemetry-api` is not installed.
    """

    def __init__(
        self, tracer_provider: Any | None = None, meter_provider: Any | None = None
    ) -> None:
        try:
            from opentelemetry import metrics, trace
        except ImportError:
            from anyinfer._extras import missing_hint

            raise ConfigError(missing_hint("OpenTelemetryObserver", ["opentelemetry"])) from None
        from anyinfer import __version__

        self._trace = trace
        self._tracer = trace.get_tracer("anyinfer", __version__, tracer_provider=tracer_provider)
        meter = metrics.get_meter("anyinfer", __version__, meter_provider=meter_provider)
        self._tokens = _histogram(
            meter,
            "gen_ai.client.token.usage",
            "{token}",
            "Number of input and output tokens used.",
            _TOKEN_BUCKETS,
        )
        self._duration = _histogram(
            meter,
            "gen_ai.client.operation.duration",
            "s",
            "GenAI operation duration.",
            _DURATION_BUCKETS,
        )
        self._first_chunk = _histogram(
            meter,
            "gen_ai.client.operation.time_to_first_chunk",
            "s",
            "Time to receive the first chunk of a streamed response.",
            _DURATION_BUCKETS,
        )
        self._embed_duration = _histogram(
            meter,
            "gen_ai.client.embeddings.duration",
            "s",
            "GenAI client embeddings operation duration.",
            _DURATION_BUCKETS,
        )
        self._embed_tokens = _histogram(
            meter,
            "gen_ai.client.embeddings.operation.input_tokens",
            "{token}",
            "The number of input tokens used per embeddings operation.",
            _TOKEN_BUCKETS,
        )
        self._lock = threading.Lock()
        self._flights: dict[str, _Flight] = {}
        self._handlers: dict[type, Callable[[Any], None]] = {
            RequestStarted: self._start,
            AttemptStarted: self._attempt_started,
            FirstToken: self._first_token,
            AttemptEnded: self._attempt_failed,
            RequestEnded: self._end,
            OperationStarted: self._unary_start,
            BatchAttemptEnded: self._batch_attempt_failed,
            OperationEnded: self._unary_end,
        }
        """The handler of each event type this observer reports (`on_event`); any other
        event (`UsageReported`) reports nothing."""

    def on_event(self, event: TelemetryEvent) -> None:
        """Translate one telemetry event into spans and measurements."""
        handlers = self._handlers
        for cls in type(event).__mro__:  # its own class first, then a subclass's bases
            handler = handlers.get(cls)
            if handler is not None:
                handler(event)
                return

    # --- shared by generation, embed() and rerank() ---------------------------------

    def _open(
        self,
        request_id: str,
        name: str,
        attributes: dict[str, Any],
        *,
        stream: bool,
        request_model: str | None,
        provider: str | None,
    ) -> None:
        """Start the request's client span and remember it until its last event."""
        span = self._tracer.start_span(
            name, kind=self._trace.SpanKind.CLIENT, attributes=attributes
        )
        flight = _Flight(span, time.monotonic(), stream, request_model, provider)
        with self._lock:
            self._flights[request_id] = flight

    def _flight(self, request_id: str) -> _Flight | None:
        with self._lock:
            return self._flights.get(request_id)

    def _close(self, request_id: str) -> _Flight | None:
        with self._lock:
            return self._flights.pop(request_id, None)

    def _attempt_failed(
        self, event: AttemptEnded | BatchAttemptEnded, extra: dict[str, Any] | None = None
    ) -> None:
        """An `anyinfer.attempt_failed` span event for an attempt that did not succeed
        (`extra`: attributes of its own)."""
        flight = self._flight(event.request_id)
        if flight is None or event.outcome == "ok":
            return
        attributes: dict[str, Any] = {
            "anyinfer.target": str(event.target),
            "anyinfer.outcome": event.outcome,
            **(extra or {}),
        }
        if event.error is not None:
            attributes["error.type"] = event.error.type_name
            if event.error.http_status is not None:
                attributes["http.response.status_code"] = event.error.http_status
        flight.span.add_event("anyinfer.attempt_failed", attributes)

    def _batch_attempt_failed(self, event: BatchAttemptEnded) -> None:
        """`_attempt_failed` for one batch's attempt, naming the batch."""
        self._attempt_failed(event, {"anyinfer.batch": event.batch})

    @staticmethod
    def _set_answer(flight: _Flight, event: RequestEnded | OperationEnded) -> None:
        """The span attributes of a finished request's answer: the provider (the one that
        answered, else the one the span was opened for), the response model, every
        token count the usage reports, and the cost."""
        span = flight.span
        target = event.target
        if target is not None:
            span.set_attribute("gen_ai.provider.name", _provider_name(target))
            span.set_attribute("gen_ai.response.model", target.model)
        elif flight.provider:
            span.set_attribute("gen_ai.provider.name", flight.provider)
        usage = event.usage
        for field_name, attribute in _USAGE_ATTRIBUTES:
            count = getattr(usage, field_name)
            if count is not None:
                span.set_attribute(attribute, count)
        if event.cost_usd is not None:
            span.set_attribute("anyinfer.cost_usd", float(event.cost_usd))

    def _mark_failure(self, span: Any, event: RequestEnded | OperationEnded) -> str | None:
        """The span's `error.type` and error status for a request that failed; that
        type (`None` when it succeeded)."""
        if event.ok:
            return None
        error_type = event.error.type_name if event.error is not None else "_OTHER"
        span.set_attribute("error.type", error_type)
        span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, error_type))
        return error_type

    # --- embed() and rerank() ------------------------------------------------------

    def _unary_start(self, event: OperationStarted) -> None:
        # The conventions want operation, provider and model at span creation (they
        # matter to sampling): the first target is the one every batch asks first.
        first = event.targets[0] if event.targets else None
        operation = event.operation
        attributes: dict[str, Any] = {"gen_ai.operation.name": operation}
        if first is not None:
            attributes["gen_ai.provider.name"] = _provider_name(first)
            attributes["gen_ai.request.model"] = first.model
        if event.dimensions is not None:
            attributes["gen_ai.embeddings.dimension.count"] = event.dimensions
        if event.encoding is not None:
            attributes["gen_ai.request.encoding_formats"] = [event.encoding]
        self._open(
            event.request_id,
            f"{operation} {first.model}" if first is not None else operation,
            attributes,
            stream=False,
            request_model=first.model if first is not None else None,
            provider=_provider_name(first) if first is not None else None,
        )

    def _unary_end(self, event: OperationEnded) -> None:
        flight = self._close(event.request_id)
        if flight is None:
            return
        span = flight.span
        target = event.target
        self._set_answer(flight, event)
        usage = event.usage
        if event.search_units is not None:
            span.set_attribute("anyinfer.search_units", event.search_units)
        error_type = self._mark_failure(span, event)
        if event.operation == "embeddings":
            attributes = self._metric_attributes(flight, target, error_type, event.operation)
            self._embed_duration.record(time.monotonic() - flight.started, attributes)
            if usage.input_tokens is not None:
                self._embed_tokens.record(usage.input_tokens, attributes)
        span.end()

    # --- generation ------------------------------------------------------------------

    def _start(self, event: RequestStarted) -> None:
        # The first target names the span until an attempt says which model it asked;
        # it may be an alias, so the request model waits for that attempt.
        provider, model = _split_target(event.targets[0]) if event.targets else (None, None)
        self._open(
            event.request_id,
            f"{_OPERATION} {model}" if model else _OPERATION,
            {"gen_ai.operation.name": _OPERATION},
            stream=event.stream,
            request_model=None,
            provider=provider,
        )

    def _attempt_started(self, event: AttemptStarted) -> None:
        flight = self._flight(event.request_id)
        if flight is None or flight.request_model is not None:
            return
        flight.request_model = event.target.model
        flight.provider = _provider_name(event.target)
        flight.span.update_name(f"{_OPERATION} {event.target.model}")
        flight.span.set_attribute("gen_ai.request.model", event.target.model)

    def _first_token(self, event: FirstToken) -> None:
        flight = self._flight(event.request_id)
        if flight is None or not flight.stream or flight.first_chunk:
            return  # a repair's re-run has a first token too: the request's came first
        flight.first_chunk = True
        seconds = event.at_ms / 1000.0
        flight.span.set_attribute("gen_ai.response.time_to_first_chunk", seconds)
        self._first_chunk.record(seconds, self._metric_attributes(flight, event.target, None))

    def _end(self, event: RequestEnded) -> None:
        flight = self._close(event.request_id)
        if flight is None:
            return
        span = flight.span
        target = event.target
        if target is not None:
            span.update_name(f"{_OPERATION} {target.model}")
            span.set_attribute("gen_ai.system", _provider_name(target))
        self._set_answer(flight, event)
        usage = event.usage
        if event.finish_reason is not None:
            span.set_attribute("gen_ai.response.finish_reasons", [event.finish_reason])
        error_type = self._mark_failure(span, event)
        attributes = self._metric_attributes(flight, target, error_type)
        self._duration.record(time.monotonic() - flight.started, attributes)
        for kind, count in (("input", usage.input_tokens), ("output", usage.output_tokens)):
            if count is not None:
                self._tokens.record(count, {**attributes, "gen_ai.token.type": kind})
        span.end()

    @staticmethod
    def _metric_attributes(
        flight: _Flight,
        target: ResolvedTarget | None,
        error_type: str | None,
        operation: str = _OPERATION,
    ) -> dict[str, Any]:
        """A measurement's attributes: operation, provider, request and response model
        (the request model falls back to the response's), and the error type."""
        attributes: dict[str, Any] = {"gen_ai.operation.name": operation}
        if target is not None:
            attributes["gen_ai.provider.name"] = _provider_name(target)
            attributes["gen_ai.response.model"] = target.model
        elif flight.provider:
            attributes["gen_ai.provider.name"] = flight.provider
        request_model = flight.request_model or (target.model if target else None)
        if request_model:
            attributes["gen_ai.request.model"] = request_model
        if error_type is not None:
            attributes["error.type"] = error_type
        return attributes
