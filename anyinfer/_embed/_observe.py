"""Telemetry for the unary operations (`embed`, `rerank`): one instrument both runners use.

A call gets a `UnaryInstrument` when it starts: `started` reports `OperationStarted`,
`attempt_ended` one `BatchAttemptEnded` per attempt of each batch, and `ended` or
`failed` the closing `OperationEnded`. When nobody observes the client at the start of
a call, it gets `SILENT`, whose methods do nothing: no event is built, no request id is
drawn, and `anyinfer._telemetry` (the event classes) is never imported, exactly as for
an unobserved generation (`anyinfer._client.instrument`).

The runners hand `walk` a recorder only when the instrument is `active`, so an
unobserved batch pays nothing per attempt either.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Protocol

from .._types import AttemptRecord, ResolvedTarget, Timing, Usage

if TYPE_CHECKING:
    from .._client.targets import Targets
    from .._errors import AnyInferError
    from .._observers import Telemetry
    from .._telemetry import TelemetryEvent, UnaryOperation

__all__ = [
    "SILENT",
    "Billed",
    "Outcome",
    "UnaryInstrument",
    "check_metadata",
    "reporter",
    "unary_instrument",
]


class Billed(Protocol):
    """A reply that reports usage (an `EmbedReply`, a `RerankReply`)."""

    @property
    def usage(self) -> Usage: ...


class Outcome(Protocol):
    """A call's result (`Embeddings`, `Reranking`), as `OperationEnded` reports it."""

    @property
    def target(self) -> ResolvedTarget: ...

    @property
    def usage(self) -> Usage: ...

    @property
    def timing(self) -> Timing: ...


class UnaryInstrument:
    """Emits one `embed()` or `rerank()` call's telemetry to the client's observers.

    Args:
        telemetry: The client's observer hub.
        metadata: The caller's metadata, carried by every event.
        operation: `"embeddings"` or `"rerank"`.
    """

    __slots__ = ("_batches", "_inputs", "_metadata", "_operation", "_request_id", "_telemetry")

    def __init__(
        self, telemetry: Telemetry, metadata: Mapping[str, str], operation: UnaryOperation
    ) -> None:
        from .._telemetry import new_request_id

        self._telemetry = telemetry
        self._metadata = metadata
        self._operation: UnaryOperation = operation
        self._request_id = new_request_id()
        self._inputs = self._batches = 0

    @property
    def active(self) -> bool:
        """Whether this call is observed (`SILENT` is not)."""
        return True

    def _emit(self, event: TelemetryEvent) -> None:
        self._telemetry.deliver(event)

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
        """`OperationStarted` (the texts and query reach payload observers only); the
        counts are the ones `ended` and `failed` report."""
        from .._telemetry import OperationStarted

        self._inputs, self._batches = len(texts), batch_count
        self._emit(
            OperationStarted(
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
        )

    def attempt_ended(
        self,
        record: AttemptRecord,
        *,
        batch: int,
        attempt: int,
        input_count: int,
        usage: Usage | None = None,
        cost_usd: Decimal | None = None,
        search_units: int | None = None,
    ) -> None:
        """`BatchAttemptEnded` for one entry of the call's trail."""
        from .._telemetry import BatchAttemptEnded

        self._emit(
            BatchAttemptEnded(
                request_id=self._request_id,
                metadata=self._metadata,
                target=record.target,
                operation=self._operation,
                batch=batch,
                attempt=attempt,
                input_count=input_count,
                outcome=record.outcome,
                error=record.error,
                timing=record.timing,
                usage=usage if usage is not None else Usage(),
                cost_usd=cost_usd,
                search_units=search_units,
            )
        )

    def ended(
        self,
        result: Outcome,
        *,
        dimensions: int | None = None,
        result_count: int | None = None,
        search_units: int | None = None,
    ) -> None:
        """`OperationEnded` for a call that produced `result`."""
        from .._telemetry import OperationEnded

        usage = result.usage
        self._emit(
            OperationEnded(
                request_id=self._request_id,
                metadata=self._metadata,
                operation=self._operation,
                ok=True,
                target=result.target,
                input_count=self._inputs,
                batch_count=self._batches,
                usage=usage,
                cost_usd=usage.cost_usd,
                timing=result.timing,
                dimensions=dimensions,
                result_count=result_count,
                search_units=search_units,
            )
        )

    def failed(self, error: AnyInferError) -> None:
        """`OperationEnded` for a call that raised `error` (as for generation, a
        cancelled call reports nothing more)."""
        from .._telemetry import OperationEnded

        self._emit(
            OperationEnded(
                request_id=self._request_id,
                metadata=self._metadata,
                operation=self._operation,
                ok=False,
                input_count=self._inputs,
                batch_count=self._batches,
                error=error.to_info(),
            )
        )

    def __enter__(self) -> None:
        """`with tel:` around a call's requests and assembly: an `AnyInferError` raised
        inside is reported (`failed`) and goes on."""

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: object
    ) -> None:
        if error is not None:
            from .._errors import AnyInferError

            if isinstance(error, AnyInferError):
                self.failed(error)


class _Silent(UnaryInstrument):
    """The instrument of a call nobody observes: every method does nothing."""

    __slots__ = ()

    def __init__(self) -> None:
        pass

    @property
    def active(self) -> bool:
        """Never: nobody observes this call."""
        return False

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
        """Nothing to report."""

    def attempt_ended(
        self,
        record: AttemptRecord,
        *,
        batch: int,
        attempt: int,
        input_count: int,
        usage: Usage | None = None,
        cost_usd: Decimal | None = None,
        search_units: int | None = None,
    ) -> None:
        """Nothing to report."""

    def ended(
        self,
        result: Outcome,
        *,
        dimensions: int | None = None,
        result_count: int | None = None,
        search_units: int | None = None,
    ) -> None:
        """Nothing to report."""

    def failed(self, error: AnyInferError) -> None:
        """Nothing to report."""


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


def check_metadata(metadata: object) -> Mapping[str, str]:
    """The call's `metadata`, checked as generation checks it (strings to strings).

    Raises:
        ConfigError: If it is not a mapping of strings to strings.
    """
    from .._errors import ConfigError

    if metadata is None:
        return {}
    if not isinstance(metadata, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()
    ):
        raise ConfigError(f"metadata must be a mapping of strings to strings, got {metadata!r:.80}")
    return dict(metadata)


def reporter(
    tel: UnaryInstrument, targets: Targets, *, batch: int, input_count: int
) -> Callable[[AttemptRecord, Billed | None], None] | None:
    """What a runner hands `walk` as `on_record` for one batch: each record becomes a
    `BatchAttemptEnded`, numbered within the batch, carrying the successful attempt's
    usage, search units and cost (`_route.request_cost`). `None` for an unobserved
    call, so an unobserved batch pays nothing per attempt.

    Args:
        tel: The call's instrument.
        targets: The client's targets (pricing).
        batch: The batch's 0-based index.
        input_count: Inputs (or documents) in the batch.
    """
    if not tel.active:
        return None
    from ._route import request_cost

    number = 0

    def report(record: AttemptRecord, reply: Billed | None) -> None:
        nonlocal number
        number += 1
        usage = cost = units = None
        if reply is not None:
            usage = reply.usage
            units = getattr(reply, "search_units", None)
            cost = request_cost(targets, record.target, usage, units)
        tel.attempt_ended(
            record,
            batch=batch,
            attempt=number,
            input_count=input_count,
            usage=usage,
            cost_usd=cost,
            search_units=units,
        )

    return report
