"""Instrumentation: one request's telemetry, a method per event kind.

The router and the attempt runner report what happens to a request by calling methods of
its `Instrument` — `request_started`, `attempt_started`, `watch` (which reports
`FirstToken` and `UsageReported` as the attempt's events pass), `attempt_ended`, and
`request_ended` or `request_failed` (the latter also for a request its caller closed,
cancelled or interrupted: every request that started ends with one `RequestEnded`). When
the client has no observer at the start of a request, the request gets `SILENT`, whose
methods do nothing and whose `watch` hands the events back untouched: the request flow
carries no telemetry branches, and an unobserved request builds no telemetry event and
no request id.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping
from contextlib import aclosing
from typing import TYPE_CHECKING

from .._observers import Emitter, report_nothing
from .._request import GenerationRequest
from .._stream.events import StreamEvent, TimingMark, UsageUpdate
from .._types import AttemptRecord, ErrorInfo, Generation, ResolvedTarget, Timing, Usage

if TYPE_CHECKING:
    from .._observers import Telemetry

__all__ = ["SILENT", "Instrument", "instrument"]


class Instrument(Emitter):
    """Emits one request's telemetry events to the client's observers.

    Args:
        telemetry: The client's observer hub.
        metadata: The caller's metadata, carried by every event.
    """

    __slots__ = ("_phase",)

    def request_started(
        self, targets: tuple[ResolvedTarget, ...], request: GenerationRequest
    ) -> None:
        """`RequestStarted`: the request was accepted and is about to be routed."""
        from .._telemetry import RequestStarted

        self._phase = "stream" if request.stream else "generate"  # an interruption's

        self._emit(
            RequestStarted(
                request_id=self._request_id,
                metadata=self._metadata,
                targets=tuple(map(str, targets)),
                stream=request.stream,
                messages=request.messages,
            )
        )

    def attempt_started(self, target: ResolvedTarget, number: int) -> None:
        """`AttemptStarted`: attempt `number` (1-based, within the request) is being sent."""
        from .._telemetry import AttemptStarted

        self._emit(
            AttemptStarted(
                request_id=self._request_id, metadata=self._metadata, target=target, attempt=number
            )
        )

    async def watch(
        self, events: AsyncGenerator[list[StreamEvent], None], target: ResolvedTarget
    ) -> AsyncGenerator[list[StreamEvent], None]:
        """Pass an attempt's event batches through, reporting `FirstToken` and
        `UsageReported`.

        Args:
            events: The attempt's events, in batches (closed when this generator is).
            target: The attempt's target.
        """
        from .._telemetry import FirstToken, UsageReported

        rid, meta = self._request_id, self._metadata
        async with aclosing(events) as inner:
            async for batch in inner:
                for event in batch:
                    if type(event) is UsageUpdate:
                        self._emit(
                            UsageReported(
                                request_id=rid, metadata=meta, target=target, usage=event.usage
                            )
                        )
                    elif type(event) is TimingMark and event.name == "first_token":
                        self._emit(
                            FirstToken(
                                request_id=rid, metadata=meta, target=target, at_ms=event.at_ms
                            )
                        )
                yield batch

    def attempt_ended(self, record: AttemptRecord, usage: Usage) -> None:
        """`AttemptEnded`: one attempt finished (`usage` includes what a failure flushed)."""
        from .._telemetry import AttemptEnded, attempt_end

        self._emit(AttemptEnded(**attempt_end(self._request_id, self._metadata, record, usage)))

    def attempt_interrupted(
        self, exc: BaseException, target: ResolvedTarget, timing: Timing | None, usage: Usage
    ) -> None:
        """`AttemptEnded` for an attempt its caller closed, cancelled or interrupted
        (`exc`): `failed`, with `interrupted`'s error and the usage it had reported."""
        from .._telemetry import interrupted

        info = interrupted(exc, provider=target.provider, phase=self._phase)
        self.attempt_ended(AttemptRecord(target, "failed", info, timing), usage)

    def request_interrupted(
        self, exc: BaseException, target: ResolvedTarget | None, usage: Usage
    ) -> None:
        """`RequestEnded` for a request its caller closed, cancelled or interrupted
        (`exc`) while `target` was being tried (`usage`: what that attempt reported)."""
        from .._telemetry import interrupted

        provider = target.provider if target is not None else None
        self.request_failed(interrupted(exc, provider=provider, phase=self._phase), usage)

    def request_ended(self, result: Generation) -> None:
        """`RequestEnded` for a request that produced `result`."""
        from .._telemetry import RequestEnded, answered

        self._emit(
            RequestEnded(
                request_id=self._request_id,
                metadata=self._metadata,
                **answered(result),
                finish_reason=result.finish_reason,
                text=result.text,
                tool_calls=result.tool_calls,
            )
        )

    def request_failed(self, error: ErrorInfo, usage: Usage) -> None:
        """`RequestEnded` for a request that raised, or was interrupted (`error`: the
        error's `to_info()`, or `interrupted`'s; `usage`: the last failure's)."""
        from .._telemetry import RequestEnded

        self._emit(
            RequestEnded(
                request_id=self._request_id,
                metadata=self._metadata,
                ok=False,
                usage=usage,
                error=error,
            )
        )


class _Silent(Instrument):
    """The instrument of a request nobody observes: every method does nothing."""

    __slots__ = ()

    def __init__(self) -> None:
        pass

    request_started = attempt_started = attempt_ended = report_nothing
    request_ended = request_failed = report_nothing
    attempt_interrupted = request_interrupted = report_nothing

    def watch(
        self, events: AsyncGenerator[list[StreamEvent], None], target: ResolvedTarget
    ) -> AsyncGenerator[list[StreamEvent], None]:
        """The events themselves: no wrapper, no per-event cost."""
        return events


SILENT: Instrument = _Silent()
"""The shared no-op instrument."""


def instrument(telemetry: Telemetry, metadata: Mapping[str, str]) -> Instrument:
    """The instrument for a request starting now: `SILENT` when nobody observes.

    Observers subscribed after a request started see that request's events from the
    next request on; observers that leave mid-request stop receiving at once.

    Args:
        telemetry: The client's observer hub.
        metadata: The caller's metadata for the request.
    """
    return Instrument(telemetry, metadata) if telemetry.active else SILENT
