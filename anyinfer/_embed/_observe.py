"""Telemetry for the unary operations (`embed`, `rerank`): one instrument both runners use.

A call gets a `UnaryInstrument` when it starts: `started` reports `OperationStarted`,
each batch's `reporter` one `BatchAttemptEnded` per attempt, and `ended`, `failed` or
`interrupted` (`with tel:` around the requests) the closing `OperationEnded`. When
nobody observes the client at the start of a call, it gets `SILENT`, whose methods do
nothing: no event is built, no request id is drawn, and `anyinfer._telemetry` (the
event classes) is never imported, exactly as for an unobserved generation
(`anyinfer._client.instrument`; both start from `anyinfer._observers.Emitter`).

`SILENT.reporter` is `None`, so `walk` gets no recorder and an unobserved batch pays
nothing per attempt either.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from .._observers import Emitter, report_nothing
from .._types import AttemptRecord, ResolvedTarget, Usage

if TYPE_CHECKING:
    from .._client.targets import Targets
    from .._errors import AnyInferError
    from .._observers import Telemetry
    from .._telemetry import Answer, OperationEnded, UnaryOperation
    from ._route import Reply

__all__ = ["SILENT", "UnaryInstrument", "unary_instrument"]


class UnaryInstrument(Emitter):
    """Emits one `embed()` or `rerank()` call's telemetry to the client's observers.

    Args:
        telemetry: The client's observer hub.
        metadata: The caller's metadata, carried by every event.
        operation: `"embeddings"` or `"rerank"`.
    """

    __slots__ = ("_closing", "_operation")

    def __init__(
        self, telemetry: Telemetry, metadata: Mapping[str, str], operation: UnaryOperation
    ) -> None:
        super().__init__(telemetry, metadata)
        self._operation: UnaryOperation = operation
        self._closing: OperationEnded

    @property
    def active(self) -> bool:
        """Whether this call is observed (`SILENT` is not)."""
        return True

    def started(
        self,
        targets: Sequence[ResolvedTarget],
        *,
        texts: tuple[str, ...],
        batch_count: int,
        dimensions: int | None = None,
        encoding: str | None = None,
        input_type: str | None = None,
        top_n: int | None = None,
        query: str | None = None,
    ) -> None:
        """`OperationStarted` (the texts and query reach payload observers only). The
        call's closing `OperationEnded` (`ended`, `failed`) carries the same ids and
        counts."""
        from .._telemetry import OperationEnded, OperationStarted

        start = OperationStarted(
            request_id=self._request_id,
            metadata=self._metadata,
            operation=self._operation,
            targets=tuple(targets),
            input_count=len(texts),
            batch_count=batch_count,
            dimensions=dimensions,
            encoding=encoding,
            input_type=input_type,
            top_n=top_n,
            texts=texts,
            query=query,
        )
        self._closing = OperationEnded(
            request_id=start.request_id,
            metadata=start.metadata,
            operation=start.operation,
            ok=False,
            input_count=start.input_count,
            batch_count=start.batch_count,
        )
        self._emit(start)

    def reporter(
        self, targets: Targets, *, batch: int, input_count: int
    ) -> Callable[[AttemptRecord, Reply | None], None] | None:
        """What a runner hands `walk` as `on_record` for one batch: each record becomes a
        `BatchAttemptEnded`, numbered within the batch, carrying the successful
        attempt's search units, cost (`_route.request_cost`) and usage, priced with
        that cost as a generation attempt's is. `None` from `SILENT`, so an unobserved
        batch pays nothing per attempt.

        Args:
            targets: The client's targets (pricing).
            batch: The batch's 0-based index.
            input_count: Inputs (or documents) in the batch.
        """
        from .._telemetry import BatchAttemptEnded, attempt_end
        from ._route import request_cost

        number = 0

        def report(record: AttemptRecord, reply: Reply | None) -> None:
            nonlocal number
            number += 1
            usage, cost, units = Usage(), None, None
            if reply is not None:
                units = getattr(reply, "search_units", None)
                cost = request_cost(targets, record.target, reply)
                usage = reply.usage if cost is None else reply.usage.with_cost(cost)
            self._emit(
                BatchAttemptEnded(
                    **attempt_end(self._request_id, self._metadata, record, usage),
                    operation=self._operation,
                    batch=batch,
                    attempt=number,
                    input_count=input_count,
                    cost_usd=cost,
                    search_units=units,
                )
            )

        return report

    def ended(
        self,
        result: Answer,
        *,
        dimensions: int | None = None,
        result_count: int | None = None,
        search_units: int | None = None,
    ) -> None:
        """`OperationEnded` for a call that produced `result`."""
        from .._telemetry import answered

        self._emit(
            replace(
                self._closing,
                **answered(result),
                dimensions=dimensions,
                result_count=result_count,
                search_units=search_units,
            )
        )

    def failed(self, error: AnyInferError) -> None:
        """`OperationEnded` for a call that raised `error`."""
        self._emit(replace(self._closing, error=error.to_info()))

    def interrupted(self, exc: BaseException) -> None:
        """`OperationEnded` for a call its caller cancelled or interrupted (`exc`), with
        `interrupted`'s error, as a generation's `RequestEnded` has."""
        from .._telemetry import interrupted

        self._emit(replace(self._closing, error=interrupted(exc, provider=None, phase="generate")))

    def __enter__(self) -> None:
        """`with tel:` around a call's requests and assembly: whatever ends it early is
        reported, an `AnyInferError` (`failed`) or a cancellation or interruption
        (`interrupted`), and goes on."""

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: object
    ) -> None:
        if error is not None:
            from .._errors import AnyInferError

            if isinstance(error, AnyInferError):
                self.failed(error)
            else:
                self.interrupted(error)


class _Silent(UnaryInstrument):
    """The instrument of a call nobody observes: every method does nothing."""

    __slots__ = ()

    def __init__(self) -> None:
        pass

    @property
    def active(self) -> bool:
        """Never: nobody observes this call."""
        return False

    started = reporter = ended = failed = interrupted = report_nothing


SILENT: UnaryInstrument = _Silent()
"""The shared no-op instrument."""


def unary_instrument(
    telemetry: Telemetry | None, metadata: Mapping[str, str], operation: UnaryOperation
) -> UnaryInstrument:
    """The instrument for a call starting now: `SILENT` when nobody observes.

    Args:
        telemetry: The client's observer hub (`None`: a runner built without one).
        metadata: The caller's metadata for the call.
        operation: `"embeddings"` or `"rerank"`.
    """
    if telemetry is None or not telemetry.active:
        return SILENT
    return UnaryInstrument(telemetry, metadata, operation)
