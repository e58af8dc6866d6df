"""Telemetry: typed events about what happened around each request, for observers.

Telemetry is a channel separate from the request's own event stream. The client emits one
`RequestStarted`, then per routing attempt an `AttemptStarted`, a `FirstToken` when
content begins, `UsageReported` as usage arrives and an `AttemptEnded`, and finally one
`RequestEnded` carrying usage, cost and outcome. Every event carries the caller's
`metadata`.

The unary operations, `embed()` and `rerank()`, have their own three events, shared by
both: one `OperationStarted`, a `BatchAttemptEnded` per attempt of each batch (its
target, batch index, input count, outcome, error, timing, usage and cost), and one
`OperationEnded`. Their `operation` field says which (`"embeddings"` or `"rerank"`).

Privacy is the default: prompt text, response text, tool-call arguments, the texts to
embed and a rerank's query and documents travel only to observers subscribed with
`payloads=True`. Everyone else receives the same events with those fields set to `None`.
Vectors and ranked documents' text are never in an event. Whatever an observer receives
has been through redaction, so a registered secret never reaches one.

An observer that raises is contained: the error is logged once per observer and error
type on the `anyinfer` logger, and the request carries on.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field, replace
from decimal import Decimal
from typing import Literal, Protocol, TypeAlias, TypedDict, runtime_checkable

from ._messages import AudioContent, ContentPart, DocumentContent, Message, TextContent
from ._observers import Telemetry  # the hub, kept apart: see its module
from ._redact import redact, redact_value
from ._types import (
    DETAIL_MAX_CHARS,
    AttemptRecord,
    ErrorInfo,
    FinishReason,
    Outcome,
    ResolvedTarget,
    Timing,
    ToolCall,
    Usage,
)
from ._values import value_class

__all__ = [
    "AttemptEnded",
    "AttemptStarted",
    "BatchAttemptEnded",
    "FirstToken",
    "Observer",
    "OperationEnded",
    "OperationStarted",
    "RequestEnded",
    "RequestStarted",
    "UnaryOperation",
    "Telemetry",
    "TelemetryEvent",
    "UsageReported",
    "new_request_id",
]


def new_request_id() -> str:
    """A fresh, unique request id."""
    import uuid  # here: it imports `platform`, a few ms no unobserved request needs

    return uuid.uuid4().hex


def _no_metadata() -> Mapping[str, str]:
    return {}


@value_class(kw_only=True)
class _Event:
    """What every telemetry event carries.

    Attributes:
        request_id: Correlates every event of one request.
        metadata: The caller's `metadata` for the request.
    """

    request_id: str
    metadata: Mapping[str, str] = field(default_factory=_no_metadata)


@value_class(kw_only=True)
class _AttemptEvent(_Event):
    """What every event about one attempt carries (besides `request_id` and `metadata`).

    Attributes:
        target: The attempt's target.
    """

    target: ResolvedTarget


@value_class(kw_only=True)
class RequestStarted(_Event):
    """A request was accepted and is about to be routed.

    Carries `request_id` and `metadata`, as every event does, and:

    Attributes:
        targets: The route's targets as given, in order (aliases unresolved).
        stream: Whether the caller asked for a stream.
        messages: The conversation; payload observers only.
    """

    targets: tuple[str, ...] = ()
    stream: bool = False
    messages: tuple[Message, ...] | None = None


@value_class(kw_only=True)
class AttemptStarted(_AttemptEvent):
    """One routing attempt is being sent to its `target`.

    Carries `request_id`, `metadata` and `target`, as every attempt event does, and:

    Attributes:
        attempt: 1-based attempt number within the request.
    """

    attempt: int


@value_class(kw_only=True)
class FirstToken(_AttemptEvent):
    """The first content (text, reasoning or tool-call) of an attempt arrived.

    Carries `request_id`, `metadata` and `target`, as every attempt event does, and:

    Attributes:
        at_ms: Milliseconds since the attempt started.
    """

    at_ms: float


@value_class(kw_only=True)
class UsageReported(_AttemptEvent):
    """The provider reported usage (possibly partial; may repeat within an attempt).

    Carries `request_id`, `metadata` and `target`, as every attempt event does, and:

    Attributes:
        usage: The report as received.
    """

    usage: Usage


@value_class(kw_only=True)
class AttemptEnded(_AttemptEvent):
    """One routing attempt finished, well or badly.

    Carries `request_id`, `metadata` and `target`, as every attempt event does, and:

    Attributes:
        outcome: How it ended.
        error: The redacted failure, for attempts that did not succeed.
        timing: Its measured timing, when it got far enough to have any.
        usage: Everything the provider reported for this attempt, merged — including
            usage flushed from a failed attempt.
    """

    outcome: Outcome
    error: ErrorInfo | None = None
    timing: Timing | None = None
    usage: Usage = field(default_factory=Usage)


@value_class(kw_only=True)
class RequestEnded(_Event):
    """The request finished: the last event of every request.

    Carries `request_id` and `metadata`, as every event does, and:

    Attributes:
        ok: Whether it produced a result.
        target: The target that produced the result; `None` on failure.
        usage: The result's usage (on failure, the last attempt's).
        cost_usd: The call's cost, when pricing is known.
        timing: The winning attempt's timing.
        error: The redacted failure, when `ok` is false.
        finish_reason: Why generation stopped, on success.
        text: The response text; payload observers only.
        tool_calls: The tool calls, arguments included; payload observers only.
    """

    ok: bool
    target: ResolvedTarget | None = None
    usage: Usage = field(default_factory=Usage)
    cost_usd: Decimal | None = None
    timing: Timing | None = None
    error: ErrorInfo | None = None
    finish_reason: FinishReason | None = None
    text: str | None = None
    tool_calls: tuple[ToolCall, ...] | None = None


UnaryOperation = Literal["embeddings", "rerank"]
"""Which unary operation an event is about, named as the OpenTelemetry GenAI conventions
name the operation (`gen_ai.operation.name`; they have no name for reranking)."""


@value_class(kw_only=True)
class OperationStarted(_Event):
    """An `embed()` or `rerank()` call passed its checks and is about to be sent.

    Carries `request_id` and `metadata`, as every event does, and:

    Attributes:
        operation: `"embeddings"` or `"rerank"`.
        targets: The route's resolved targets, in fallback order.
        input_count: Texts to embed, or documents to rank.
        batch_count: Requests the inputs were split into.
        dimensions: The dimensions asked for (embeddings), when asked.
        encoding: How vectors travel on the wire (embeddings).
        input_type: What the texts are for (embeddings), when given.
        top_n: How many documents to return (rerank), when limited.
        texts: The texts to embed, or the documents to rank; payload observers only.
        query: The rerank query; payload observers only.
    """

    operation: UnaryOperation
    targets: tuple[ResolvedTarget, ...] = ()
    input_count: int = 0
    batch_count: int = 0
    dimensions: int | None = None
    encoding: str | None = None
    input_type: str | None = None
    top_n: int | None = None
    texts: tuple[str, ...] | None = None
    query: str | None = None


@value_class(kw_only=True)
class BatchAttemptEnded(_AttemptEvent):
    """One attempt of one batch of an `embed()` or `rerank()` call finished.

    Batches run concurrently, so attempts of different batches interleave; `batch` and
    `attempt` say which this is. Carries `request_id`, `metadata` and `target`, as every
    attempt event does, and:

    Attributes:
        operation: `"embeddings"` or `"rerank"`.
        batch: 0-based index of the batch, in input order.
        attempt: 1-based attempt number within the batch.
        input_count: Inputs (or documents) in the batch.
        outcome: How it ended (`"skipped_unhealthy"`: nothing was sent).
        error: The redacted failure, for attempts that did not succeed.
        timing: Its measured timing (`total_ms`), when it was sent.
        usage: What the provider reported, for a successful attempt (with its
            `cost_usd`, when pricing is known).
        cost_usd: The attempt's cost, when it succeeded and pricing is known.
        search_units: Billed search units (rerank, where the provider bills by them).
    """

    operation: UnaryOperation
    batch: int
    attempt: int
    input_count: int
    outcome: Outcome
    error: ErrorInfo | None = None
    timing: Timing | None = None
    usage: Usage = field(default_factory=Usage)
    cost_usd: Decimal | None = None
    search_units: int | None = None


@value_class(kw_only=True)
class OperationEnded(_Event):
    """An `embed()` or `rerank()` call finished: its last event.

    Carries `request_id` and `metadata`, as every event does, and:

    Attributes:
        operation: `"embeddings"` or `"rerank"`.
        ok: Whether it produced a result.
        target: The target that served the first batch; `None` on failure.
        input_count: Texts embedded, or documents ranked.
        batch_count: Requests the inputs were split into.
        usage: The result's usage, summed over batches (`Usage()` on failure).
        cost_usd: The call's cost, when pricing is known.
        timing: The whole call's timing, on success.
        error: The redacted failure, when `ok` is false.
        dimensions: The vectors' length (embeddings), on success.
        result_count: Documents returned (rerank), on success.
        search_units: Billed search units (rerank), where the provider bills by them.
    """

    operation: UnaryOperation
    ok: bool
    target: ResolvedTarget | None = None
    input_count: int = 0
    batch_count: int = 0
    usage: Usage = field(default_factory=Usage)
    cost_usd: Decimal | None = None
    timing: Timing | None = None
    error: ErrorInfo | None = None
    dimensions: int | None = None
    result_count: int | None = None
    search_units: int | None = None


TelemetryEvent: TypeAlias = (
    RequestStarted
    | AttemptStarted
    | FirstToken
    | UsageReported
    | AttemptEnded
    | RequestEnded
    | OperationStarted
    | BatchAttemptEnded
    | OperationEnded
)
"""Any telemetry event."""


# --- what the instruments fill in the same way for every operation -------------------


class AttemptEnd(TypedDict):
    """The fields an attempt's end (`AttemptEnded`, `BatchAttemptEnded`) takes from the
    request and the attempt's record (`attempt_end`)."""

    request_id: str
    metadata: Mapping[str, str]
    target: ResolvedTarget
    outcome: Outcome
    error: ErrorInfo | None
    timing: Timing | None
    usage: Usage


def attempt_end(
    request_id: str, metadata: Mapping[str, str], record: AttemptRecord, usage: Usage
) -> AttemptEnd:
    """What every attempt-ended event says about its attempt: the request's id and
    metadata, the record's target, outcome, error and timing, and `usage`.

    Args:
        request_id: The request's id.
        metadata: The caller's metadata.
        record: The attempt's record, as it joins the trail.
        usage: What the attempt reported (priced, when it succeeded and pricing is known).
    """
    return {
        "request_id": request_id,
        "metadata": metadata,
        "target": record.target,
        "outcome": record.outcome,
        "error": record.error,
        "timing": record.timing,
        "usage": usage,
    }


class Answer(Protocol):
    """A request's result (`Generation`, `Embeddings`, `Reranking`), as its last event
    (`RequestEnded`, `OperationEnded`) reports it."""

    @property
    def target(self) -> ResolvedTarget: ...

    @property
    def usage(self) -> Usage: ...

    @property
    def timing(self) -> Timing: ...


class Answered(TypedDict):
    """The fields a successful request's last event takes from its result (`answered`)."""

    ok: bool
    target: ResolvedTarget
    usage: Usage
    cost_usd: Decimal | None
    timing: Timing


def answered(result: Answer) -> Answered:
    """What the last event of a request that produced `result` says about it: `ok`, the
    target that answered, the usage, its cost (`usage.cost_usd`) and the timing."""
    usage = result.usage
    return {
        "ok": True,
        "target": result.target,
        "usage": usage,
        "cost_usd": usage.cost_usd,
        "timing": result.timing,
    }


def interrupted(exc: BaseException, *, provider: str | None, phase: str) -> ErrorInfo:
    """The error of a request, or an attempt, that ended without a result or an
    `AnyInferError`: its caller closed its stream early (`GeneratorExit`), cancelled it
    (`asyncio.CancelledError`: a cancelled task, `asyncio.timeout`, a sync stream
    closed), interrupted it (`KeyboardInterrupt`), or an exception that is not
    AnyInfer's ended it (its message redacted). Its last event carries it, named by
    `exc`'s type, not retryable and with no HTTP status.

    Args:
        exc: What ended it.
        provider: The provider of the attempt it ended, if one was running.
        phase: The request's phase (`"stream"` or `"generate"`).
    """
    from ._stream.generation import _is_cancellation

    name = type(exc).__name__
    if isinstance(exc, GeneratorExit):
        detail = "the caller closed the stream before it ended"
    elif _is_cancellation(exc):
        detail = "the caller cancelled the request before it ended"
    elif isinstance(exc, KeyboardInterrupt):
        detail = "interrupted by KeyboardInterrupt before it ended"
    else:
        detail = f"{name} ended the request early: {redact(str(exc))}"[:DETAIL_MAX_CHARS]
    return ErrorInfo(name, provider, phase, False, None, detail)


@runtime_checkable
class Observer(Protocol):
    """A telemetry sink. Called synchronously, in event order, on the client's loop.

    Keep `on_event` quick: hand slow work (network export) to a queue or thread.
    """

    def on_event(self, event: TelemetryEvent) -> None:
        """Receive one event."""
        ...


# --- privacy -------------------------------------------------------------------------


def _redact_message(message: Message) -> Message:
    content: str | tuple[ContentPart, ...]
    if isinstance(message.content, str):
        content = redact(message.content)
    else:
        content = tuple(_redact_part(p) for p in message.content)
    return replace(
        message,
        content=content,
        tool_calls=tuple(_redact_call(c) for c in message.tool_calls),
        provider_data={},
    )


def _redact_part(part: ContentPart) -> ContentPart:
    """A content part as a payload observer sees it.

    Text is redacted. A document or audio part becomes a text placeholder naming its kind,
    media type and size (or its URL without the query, where signed URLs keep their
    signature): its bytes never reach an observer.
    """
    if isinstance(part, TextContent):
        return TextContent(redact(part.text))
    if isinstance(part, DocumentContent | AudioContent):
        return TextContent(media_placeholder(part))
    return part


def media_placeholder(part: DocumentContent | AudioContent) -> str:
    """`[DocumentContent application/pdf, 1234 bytes]`-style text standing in for a part."""
    kind = type(part).__name__
    if part.data is not None:
        where = f"{len(part.data)} bytes"
    elif part.url is not None and part.url.startswith("data:"):
        where = f"data: URL, {len(part.url)} characters"
    else:
        where = "url " + redact(str(part.url).split("?", 1)[0].split("#", 1)[0])
    name = getattr(part, "filename", None)
    named = f", filename {redact(name)!r}" if name else ""
    return f"[{kind} {part.media_type}, {where}{named}]"


def _redact_call(call: ToolCall) -> ToolCall:
    return ToolCall(call.id, call.name, redact_value(dict(call.arguments)))


def _redact_metadata(metadata: Mapping[str, str]) -> Mapping[str, str]:
    return {k: redact(v) for k, v in metadata.items()}


def with_payloads(event: TelemetryEvent) -> TelemetryEvent:
    """The event as a payload observer sees it: payload kept, secrets redacted."""
    if isinstance(event, RequestStarted):
        messages = event.messages
        return replace(
            event,
            metadata=_redact_metadata(event.metadata),
            messages=None if messages is None else tuple(_redact_message(m) for m in messages),
        )
    if isinstance(event, RequestEnded):
        return replace(
            event,
            metadata=_redact_metadata(event.metadata),
            text=None if event.text is None else redact(event.text),
            tool_calls=None
            if event.tool_calls is None
            else tuple(_redact_call(c) for c in event.tool_calls),
        )
    if isinstance(event, OperationStarted):
        return replace(
            event,
            metadata=_redact_metadata(event.metadata),
            texts=None if event.texts is None else tuple(map(redact, event.texts)),
            query=None if event.query is None else redact(event.query),
        )
    return replace(event, metadata=_redact_metadata(event.metadata))


def without_payloads(event: TelemetryEvent) -> TelemetryEvent:
    """The event as a payload-free observer sees it: no prompt, response or arguments."""
    if isinstance(event, RequestStarted):
        return replace(event, metadata=_redact_metadata(event.metadata), messages=None)
    if isinstance(event, RequestEnded):
        return replace(event, metadata=_redact_metadata(event.metadata), text=None, tool_calls=None)
    if isinstance(event, OperationStarted):
        return replace(event, metadata=_redact_metadata(event.metadata), texts=None, query=None)
    return replace(event, metadata=_redact_metadata(event.metadata))
