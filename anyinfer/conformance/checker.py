"""The guarantee checker: what a consumer must have seen, given what the provider sent.

`expect` reads a rendered script — which frames reach the adapter before the script's
fault, and what each frame carries — and decides what the consumer must observe: success
or failure, with which text, tool calls, usage and finish reason, or which typed error.
`check` compares one observed run (events, result or exception) against that, and
`check_grammar` checks the event-stream grammar alone, so it also works on hand-made
event sequences.

Every `Violation` names one guarantee from `GUARANTEES`; the ids match the design notes
("The event stream grammar", "The trailing-usage rule", "Failure-path flushing").
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, fields
from enum import Enum
from typing import Any, Literal

from anyinfer import (
    AllTargetsFailedError,
    AnyInferError,
    AttemptFailed,
    Generation,
    ReasoningDelta,
    StreamEnded,
    StreamEvent,
    TextDelta,
    TimingMark,
    ToolCallDelta,
    Usage,
    UsageUpdate,
)
from anyinfer._stream.core import USAGE_MAY_BE_INCOMPLETE
from anyinfer.fakeservers import Reasoning, Rendered, Script, ScriptUsage, Text, ToolFragment

__all__ = [
    "EARLY_EXIT",
    "ERROR_TYPE",
    "FAILURE_FLUSH",
    "G1",
    "G2",
    "G3",
    "G4",
    "GUARANTEES",
    "ONE_REQUEST",
    "RESOURCES",
    "RESULT_AGREEMENT",
    "ROBUST",
    "SHORT_NAMES",
    "STATUS_ERRORS",
    "TRAILING_USAGE",
    "FROM_SCRIPT",
    "Expectation",
    "ExpectedCall",
    "FromScript",
    "Observation",
    "Violation",
    "check",
    "check_concatenation",
    "check_grammar",
    "expect",
    "format_event",
    "format_events",
    "normalize_finish",
]

G1 = "G1 failures-before-content"
"""`AttemptFailed` only appears before the stream has shown any content."""
G2 = "G2 timing-marks"
"""`attempt_start` opens each segment; one `first_token` right before its first delta."""
G3 = "G3 stream-ended-last"
"""Exactly one `StreamEnded`, last, on success only."""
G4 = "G4 text-concatenation"
"""The last segment's deltas reassemble to the result's text, reasoning and tool calls."""
TRAILING_USAGE = "trailing-usage"
"""Usage is read wherever the wire puts it; a cut after the finish reason still succeeds
(with a warning), a cut before it fails."""
FAILURE_FLUSH = "failure-flush"
"""On failure, everything the provider already sent (usage, content) was emitted, and
nothing asserting a completion was."""
RESULT_AGREEMENT = "result-agreement"
"""The result says what the script said: text, reasoning, tool calls, usage, finish."""
ERROR_TYPE = "error-type"
"""Each fault surfaces as its documented typed error, by the documented route."""
EARLY_EXIT = "early-exit-cancels"
"""Leaving a stream early closes the provider connection."""
ONE_REQUEST = "one-request"
"""One generation sends exactly the one scripted request, to an endpoint the dialect serves."""
RESOURCES = "resources"
"""Over one long-lived client, early exits, cancellations and faults leave no pool slot,
connection, fd, thread or task behind; sequential requests reuse one connection; a
decompression bomb stays bounded by `max_response_bytes` (`anyinfer.conformance.resources`)."""

SHORT_NAMES: dict[str, str] = {
    G1: "G1",
    G2: "G2",
    G3: "G3",
    G4: "G4",
    TRAILING_USAGE: "trail",
    FAILURE_FLUSH: "flush",
    RESULT_AGREEMENT: "agree",
    ERROR_TYPE: "errors",
    EARLY_EXIT: "exit",
    ONE_REQUEST: "1-req",
    RESOURCES: "res",
}
"""Column labels for the terminal matrix."""

GUARANTEES: tuple[str, ...] = (
    G1,
    G2,
    G3,
    G4,
    TRAILING_USAGE,
    FAILURE_FLUSH,
    RESULT_AGREEMENT,
    ERROR_TYPE,
    EARLY_EXIT,
    ONE_REQUEST,
    RESOURCES,
)
"""Every guarantee id, in report order."""

ROBUST: frozenset[str] = frozenset({G1, G2, G3, G4, FAILURE_FLUSH, ERROR_TYPE, ONE_REQUEST})
"""The guarantees judged on hostile-world scripts: the grammar, nothing lost before a
failure, and a typed error (any `AnyInferError`) rather than an escaped exception or a
hang. Agreement with the script is for wire-realistic scripts only."""

STATUS_ERRORS: dict[int, str] = {
    400: "ProviderError",
    401: "AuthenticationError",
    403: "AuthenticationError",
    404: "ModelNotFoundError",
    408: "ProviderTimeoutError",
    409: "ProviderError",
    413: "ProviderError",
    422: "ProviderError",
    429: "RateLimitError",
    500: "ProviderError",
    502: "ProviderError",
    503: "OverloadedError",
    504: "ProviderError",
    529: "OverloadedError",
}
"""The typed error each HTTP error status maps to; a code refines only a generic 4xx
(`context_length_exceeded` on a 400 is a `ContextWindowError`, on a 500 a `ProviderError`)."""

_CODE_ERRORS: dict[str, str] = {
    "context_length_exceeded": "ContextWindowError",
    "content_filter": "ContentFilterError",
}

_SPECIFIC_STATUSES = frozenset(s for s, name in STATUS_ERRORS.items() if name != "ProviderError")

_KNOWN_FINISH = frozenset({"stop", "length", "tool_calls", "content_filter", "other"})
_USAGE_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(ScriptUsage))
_CONTENT = (TextDelta, ReasoningDelta, ToolCallDelta)

Ending = Literal["eof", "disconnect", "malformed", "stall", "status", "provider_error", "bomb"]


class FromScript(Enum):
    """Marker: expect the script's own finish reason."""

    FROM_SCRIPT = "from-script"


FROM_SCRIPT = FromScript.FROM_SCRIPT
"""Expect the finish reason the script states (the default)."""


@dataclass(frozen=True, slots=True)
class Violation:
    """One broken promise.

    Attributes:
        guarantee: The guarantee id (one of `GUARANTEES`).
        message: What was expected and what happened.
    """

    guarantee: str
    message: str

    def __str__(self) -> str:
        return f"[{self.guarantee}] {self.message}"


@dataclass(frozen=True, slots=True)
class ExpectedCall:
    """A tool call as the result must carry it."""

    index: int
    id: str
    name: str
    arguments: Any


@dataclass(frozen=True, slots=True)
class Expectation:
    """What a consumer must observe for one script.

    Attributes:
        streamed: Whether the wire response is streamed.
        succeeds: Whether the generation must succeed.
        delivered: Indices of the frames whose bytes reach the adapter whole, up to
            and including the sentinel (frames after it are never read).
        pieces: Indices of the script pieces those frames carry.
        usage: Usage fields those frames carry, with the script's values.
        trailing_usage: The usage fields carried only at or after the finish frame.
        finish_delivered: Whether the finish reason reached the adapter.
        sentinel_delivered: Whether the protocol's sentinel did.
        ending: How the response ends: `eof` (as scripted), or the fault's kind.
        error_types: Acceptable error class names when the generation fails.
        http_status: The status a `status` fault answers with.
        retry_after: The `Retry-After` seconds the error must carry, when sent.
        cut: A short description of where and how the response was cut.
    """

    streamed: bool
    succeeds: bool
    delivered: tuple[int, ...]
    pieces: tuple[int, ...]
    usage: dict[str, int]
    trailing_usage: frozenset[str]
    finish_delivered: bool
    sentinel_delivered: bool
    ending: Ending
    error_types: frozenset[str] = frozenset()
    http_status: int | None = None
    retry_after: float | None = None
    cut: str = ""
    text: str = ""
    reasoning: str = ""
    tool_calls: tuple[ExpectedCall, ...] = ()
    finish_reason: str = "stop"
    content_before_failure: bool = False

    @property
    def incomplete_warning(self) -> bool:
        """Whether success must carry the "usage may be incomplete" warning."""
        return self.succeeds and self.streamed and not self.sentinel_delivered


@dataclass(frozen=True, slots=True)
class Observation:
    """What one run produced.

    Attributes:
        events: The events seen, in order, or `None` when the mode exposes none
            (`generate()`).
        result: The result on success.
        error: The exception on failure.
    """

    events: tuple[StreamEvent, ...] | None
    result: Generation | None = None
    error: BaseException | None = None


def normalize_finish(reason: str | None, *, sentinel: bool = True) -> str | None:
    """The normalized finish reason for a script's finish reason.

    Known values map to themselves, anything else to `"other"`, and a missing one to
    `"stop"` when the sentinel arrived (`None` otherwise: the generation fails).
    """
    if reason is None:
        return "stop" if sentinel else None
    return reason if reason in _KNOWN_FINISH else "other"


def _status_error(status: int, code: str | None, *, in_stream: bool = False) -> str:
    # An HTTP status's class decides; a code refines only a generic client error (a
    # 5xx saying "content_filter" is still a retryable server error). An in-stream
    # error has no status of its own: its code decides.
    generic = 400 <= status < 500 and status not in _SPECIFIC_STATUSES
    if code is not None and (in_stream or generic):
        for marker, name in _CODE_ERRORS.items():
            if marker in code:
                return name
    if status in STATUS_ERRORS:
        return STATUS_ERRORS[status]
    return "ProviderError"


def expected_tool_calls(script: Script, pieces: Iterable[int]) -> tuple[ExpectedCall, ...]:
    """The tool calls the given pieces assemble into, by slot index."""
    slots: dict[int, list[ToolFragment]] = {}
    for i in pieces:
        piece = script.pieces[i]
        if isinstance(piece, ToolFragment):
            slots.setdefault(piece.index, []).append(piece)
    calls = []
    for index in sorted(slots):
        frags = slots[index]
        call_id = next((f.id for f in frags if f.id), None) or f"call_{index}"
        name = next((f.name for f in frags if f.name), None) or ""
        calls.append(ExpectedCall(index, call_id, name, _parse_arguments(frags)))
    return tuple(calls)


def _parse_arguments(frags: Sequence[ToolFragment] | Sequence[str]) -> Any:
    text = "".join(f if isinstance(f, str) else f.arguments for f in frags).strip()
    if not text:
        return {}
    try:
        parsed = json.loads(text)
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _complete_after(rendered: Rendered, index: int, streamed: bool) -> int:
    """How many leading bytes of frame `index` deliver it, as a faithful framer reads it.

    A streamed frame can end in bytes no framer waits for. A bare CR ends a line in a
    server-sent event stream and in NDJSON, so an event or a line closed by CRLF is
    complete at its CR, and the LF adds nothing. A JSON array's element is complete at
    its closing brace, so the whitespace after it belongs to nobody. A cut after those
    bytes has delivered the frame. A whole (non-streamed) body, and any other framing
    (AWS event-stream messages carry their own length), needs every byte.
    """
    data = rendered.frames[index].data
    if not streamed:
        return len(data)
    kind = next((v for k, v in rendered.headers if k.lower() == "content-type"), "")
    kind = kind.split(";")[0].strip().lower()
    if kind in ("text/event-stream", "application/x-ndjson"):
        return len(data) - 1 if data.endswith(b"\r\n") else len(data)
    if kind == "application/json":
        return len(data.rstrip(b" \t\r\n"))
    return len(data)


def expect(
    script: Script,
    rendered: Rendered,
    *,
    streamed: bool,
    finish_reason: str | FromScript | None = FROM_SCRIPT,
    in_stream_error_types: frozenset[str] | None = None,
) -> Expectation:
    """Decide what a consumer must observe when `rendered` is served with `script`'s fault.

    Args:
        script: The script (its `fault` and `usage` are read here).
        rendered: The dialect's rendering of it (`Dialect.render(script, stream=...)`),
            or the error response for a `status` fault.
        streamed: Whether the wire response is streamed.
        finish_reason: The finish reason a faithful adapter reports, before
            normalizing, when the protocol cannot say the script's own (a dialect's
            `expected_finish_reason(script)`); `FROM_SCRIPT` means the script's own.
        in_stream_error_types: For a streamed `provider_error`, the error classes a
            faithful adapter raises for the dialect's error frame (a dialect's
            `in_stream_error_types(fault)`); `None` expects what the same status and
            code raise as an HTTP error.

    Returns:
        The expectation.
    """
    fault = script.fault
    if fault is not None and (
        fault.kind == "status" or (fault.kind == "provider_error" and not streamed)
    ):
        return Expectation(
            streamed=streamed,
            succeeds=False,
            delivered=(),
            pieces=(),
            usage={},
            trailing_usage=frozenset(),
            finish_delivered=False,
            sentinel_delivered=False,
            ending="status",
            error_types=frozenset({_status_error(fault.status, fault.code)}),
            http_status=fault.status,
            retry_after=fault.retry_after if fault.kind == "status" else None,
            cut=f"HTTP {fault.status} instead of a response",
        )
    frames = rendered.frames
    n = len(frames)
    ending: Ending = "eof" if fault is None else fault.kind
    upto = n
    cut = "the scripted end of the body"
    if fault is not None:
        at = max(0, min(fault.at, n))
        upto = at
        if fault.kind == "disconnect":
            whole = at < n and fault.partial_bytes >= _complete_after(rendered, at, streamed)
            upto = at + 1 if whole else at
            part = f" after {fault.partial_bytes} byte(s) of it" if at < n and not whole else ""
            cut = f"a disconnect before frame {upto}{part}"
        elif fault.kind == "malformed":
            cut = f"a malformed frame inserted before frame {at}"
        elif fault.kind == "provider_error":
            # Providers fail before finishing, and never after their sentinel.
            finish_at = next((i for i, f in enumerate(frames) if f.finish or f.sentinel), None)
            at = upto = at if finish_at is None else min(at, finish_at)
            cut = f"an in-stream provider error ({fault.code or fault.status}) before frame {at}"
        elif fault.kind == "bomb":
            upto = 0
            cut = "a compression bomb instead of the body"
        else:
            cut = f"a stall before frame {at}"
    delivered: list[int] = []
    sentinel = False
    for i in range(upto):
        if frames[i].sentinel and not frames[i].data and fault is not None:
            # An empty sentinel is the clean end of the body itself; any fault means
            # the body did not end cleanly (a disconnect, a stall, garbage before it).
            break
        delivered.append(i)
        if frames[i].sentinel:
            sentinel = True
            break
    got = [frames[i] for i in delivered]
    finish = any(f.finish for f in got)
    piece_ids = tuple(sorted({p for f in got for p in f.pieces}))
    usage_fields = {u for f in got for u in f.usage}
    first_finish = next((i for i in delivered if frames[i].finish), None)
    early = {
        u
        for i in delivered
        for u in frames[i].usage
        if not streamed or first_finish is None or i < first_finish
    }
    usage: dict[str, int] = {}
    if script.usage is not None:
        for name in sorted(usage_fields):
            value = getattr(script.usage, name, None)
            # A running count reports less than the final figure until its last frame.
            for f in got:
                if name in f.usage:
                    value = dict(f.usage_values).get(name, getattr(script.usage, name, None))
            if isinstance(value, int):
                usage[name] = value
    trailing = frozenset(usage_fields - early)

    # One whole body: anything but a clean, complete body fails before content shows.
    succeeds = (sentinel or finish) if streamed else fault is None
    if ending in ("provider_error", "bomb"):
        succeeds = False
    if succeeds and not streamed:
        sentinel = True
    error_types: frozenset[str] = frozenset()
    if not succeeds:
        if ending == "provider_error" and fault is not None:
            error_types = in_stream_error_types or frozenset(
                {_status_error(fault.status, fault.code, in_stream=True)}
            )
        elif ending == "bomb":
            error_types = frozenset({"ProtocolError", "ResponseTooLargeError"})
        elif ending == "malformed":
            error_types = frozenset({"ProtocolError"})
        elif ending == "stall":
            error_types = frozenset({"ProviderTimeoutError"})
        elif streamed:
            error_types = frozenset({"StreamError"})
        else:
            # A truncated body is a broken connection; parsing it first is also fair.
            error_types = frozenset({"StreamError", "ProtocolError"})
    text = "".join(p.text for i in piece_ids if isinstance(p := script.pieces[i], Text))
    reasoning = "".join(p.text for i in piece_ids if isinstance(p := script.pieces[i], Reasoning))
    reported = script.finish_reason if isinstance(finish_reason, FromScript) else finish_reason
    finish_reason_ = normalize_finish(reported, sentinel=sentinel) or "stop"
    content = streamed and any(
        not isinstance(p := script.pieces[i], Text | Reasoning) or p.text for i in piece_ids
    )
    return Expectation(
        streamed=streamed,
        succeeds=succeeds,
        delivered=tuple(delivered),
        pieces=piece_ids,
        usage=usage,
        trailing_usage=trailing,
        finish_delivered=finish,
        sentinel_delivered=sentinel,
        ending=ending,
        error_types=error_types,
        cut=cut,
        text=text,
        reasoning=reasoning,
        tool_calls=expected_tool_calls(script, piece_ids),
        finish_reason=finish_reason_,
        content_before_failure=content,
    )


# --- the grammar ---------------------------------------------------------------------


def check_grammar(events: Sequence[StreamEvent], *, succeeded: bool) -> list[Violation]:
    """Check the event-stream grammar (guarantees G1-G3) on one stream's events.

    Args:
        events: Every event the stream yielded, in order.
        succeeded: Whether the stream ended normally (`False`: it raised).

    Returns:
        The violations found; empty when the sequence is well formed.
    """
    out: list[Violation] = []
    seen_content = False
    for pos, ev in enumerate(events):
        if isinstance(ev, _CONTENT):
            seen_content = True
        elif isinstance(ev, AttemptFailed) and seen_content:
            out.append(Violation(G1, f"AttemptFailed at event {pos} follows content already shown"))
            break

    state = "none"  # no segment yet / "open" / "closed" by AttemptFailed
    marks = 0
    content = False
    for pos, ev in enumerate(events):
        if isinstance(ev, TimingMark) and ev.name == "attempt_start":
            state, marks, content = "open", 0, False
            continue
        if isinstance(ev, AttemptFailed):
            state = "closed" if state == "open" else state
            continue
        if isinstance(ev, StreamEnded):
            continue  # placement is G3's business
        if state != "open":
            where = "before any" if state == "none" else "after AttemptFailed and before the next"
            out.append(
                Violation(G2, f"{format_event(ev)} at event {pos} comes {where} attempt_start")
            )
            continue
        if isinstance(ev, TimingMark):  # first_token
            marks += 1
            if marks > 1:
                out.append(Violation(G2, f"a second first_token mark at event {pos}"))
            elif content:
                out.append(
                    Violation(G2, f"first_token at event {pos} comes after content was shown")
                )
            nxt = events[pos + 1] if pos + 1 < len(events) else None
            if marks == 1 and not content and not isinstance(nxt, _CONTENT):
                follow = "nothing" if nxt is None else format_event(nxt)
                out.append(
                    Violation(
                        G2,
                        f"first_token at event {pos} is followed by {follow}, "
                        "not by a content delta",
                    )
                )
        elif isinstance(ev, _CONTENT):
            if not content and marks == 0:
                out.append(
                    Violation(
                        G2, f"content delta {format_event(ev)} at event {pos} has no first_token"
                    )
                )
            content = True

    ended = [i for i, ev in enumerate(events) if isinstance(ev, StreamEnded)]
    if succeeded:
        if len(ended) != 1:
            out.append(Violation(G3, f"a successful stream has {len(ended)} StreamEnded events"))
        elif ended[0] != len(events) - 1:
            after = format_event(events[ended[0] + 1])
            out.append(Violation(G3, f"StreamEnded at event {ended[0]} is followed by {after}"))
    elif ended:
        out.append(
            Violation(G3, f"a failed stream yielded StreamEnded (at event {ended[0]}) and raised")
        )
    return out


def _last_segment(events: Sequence[StreamEvent]) -> Sequence[StreamEvent]:
    start = 0
    for i, ev in enumerate(events):
        if isinstance(ev, TimingMark) and ev.name == "attempt_start":
            start = i
    return events[start:]


@dataclass(slots=True)
class _Assembled:
    text: str = ""
    reasoning: str = ""
    calls: dict[int, tuple[str | None, str | None, list[str]]] = field(default_factory=dict)

    def tool_calls(self) -> tuple[ExpectedCall, ...]:
        out = []
        for index in sorted(self.calls):
            call_id, name, frags = self.calls[index]
            out.append(
                ExpectedCall(index, call_id or f"call_{index}", name or "", _parse_arguments(frags))
            )
        return tuple(out)


def _assemble(events: Iterable[StreamEvent]) -> _Assembled:
    text: list[str] = []
    reasoning: list[str] = []
    out = _Assembled()
    for ev in events:
        if isinstance(ev, TextDelta):
            text.append(ev.text)
        elif isinstance(ev, ReasoningDelta):
            reasoning.append(ev.text)
        elif isinstance(ev, ToolCallDelta):
            call_id, name, frags = out.calls.get(ev.index, (None, None, []))
            frags.append(ev.arguments_fragment)
            out.calls[ev.index] = (call_id or ev.call_id, name or ev.name, frags)
    out.text = "".join(text)
    out.reasoning = "".join(reasoning)
    return out


def _result_calls(result: Generation) -> tuple[ExpectedCall, ...]:
    return tuple(
        ExpectedCall(i, c.id, c.name, dict(c.arguments)) for i, c in enumerate(result.tool_calls)
    )


def _calls_text(calls: Sequence[ExpectedCall]) -> str:
    if not calls:
        return "none"
    return ", ".join(f"#{c.index} {c.id} {c.name}({json.dumps(c.arguments)})" for c in calls)


def _same_calls(a: Sequence[ExpectedCall], b: Sequence[ExpectedCall]) -> bool:
    """Equal ids, names and arguments in slot order (result calls carry no slot index)."""
    if len(a) != len(b):
        return False
    return all((x.id, x.name, x.arguments) == (y.id, y.name, y.arguments) for x, y in zip(a, b))


def check_concatenation(events: Sequence[StreamEvent], result: Generation) -> list[Violation]:
    """Guarantee G4: the last segment's deltas reassemble to `result`."""
    got = _assemble(_last_segment(events))
    out: list[Violation] = []
    if got.text != result.text:
        out.append(
            Violation(G4, f"TextDeltas join to {got.text!r} but result.text is {result.text!r}")
        )
    if got.reasoning != result.reasoning:
        out.append(
            Violation(
                G4,
                f"ReasoningDeltas join to {got.reasoning!r} but result.reasoning is "
                f"{result.reasoning!r}",
            )
        )
    deltas = got.tool_calls()
    if not _same_calls(deltas, _result_calls(result)):
        out.append(
            Violation(
                G4,
                f"ToolCallDeltas assemble to [{_calls_text(deltas)}] but result.tool_calls is "
                f"[{_calls_text(_result_calls(result))}]",
            )
        )
    return out


# --- the whole check -----------------------------------------------------------------


def _merged_usage(events: Iterable[StreamEvent]) -> Usage:
    usage = Usage()
    for ev in events:
        if isinstance(ev, UsageUpdate):
            usage = usage.merge(ev.usage)
    return usage


def _usage_text(usage: dict[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(usage.items())) or "none"


def check(
    script: Script,
    rendered: Rendered,
    observation: Observation,
    *,
    streamed: bool,
    finish_reason: str | FromScript | None = FROM_SCRIPT,
    in_stream_error_types: frozenset[str] | None = None,
) -> list[Violation]:
    """Check one run against everything the script implies.

    Args:
        script: The script served.
        rendered: Its rendering in the adapter's dialect (streamed or whole, matching
            `streamed`).
        observation: What the run produced.
        streamed: Whether the wire response was streamed (`stream()`), as opposed to
            a whole body (`generate()`).
        finish_reason: As for `expect`.
        in_stream_error_types: As for `expect`.

    Returns:
        Every violation found, grouped by guarantee in `GUARANTEES` order.
    """
    exp = expect(
        script,
        rendered,
        streamed=streamed,
        finish_reason=finish_reason,
        in_stream_error_types=in_stream_error_types,
    )
    events = observation.events
    error = observation.error
    result = observation.result
    out: list[Violation] = []
    if events is not None:
        out += check_grammar(events, succeeded=error is None)
        if error is None and result is not None:
            out += check_concatenation(events, result)
    if error is not None and not isinstance(error, AnyInferError):
        out.append(
            Violation(
                ERROR_TYPE,
                f"an untyped {type(error).__name__}: {error!r} escaped; adapters must raise "
                "AnyInferError subclasses",
            )
        )
    if exp.succeeds:
        out += _check_success(exp, observation)
    else:
        out += _check_failure(exp, observation)
    order = {g: i for i, g in enumerate(GUARANTEES)}
    return sorted(out, key=lambda v: order.get(v.guarantee, len(order)))


def _check_success(exp: Expectation, obs: Observation) -> list[Violation]:
    out: list[Violation] = []
    result = obs.result
    if obs.error is not None or result is None:
        why = f"{type(obs.error).__name__}: {obs.error}" if obs.error is not None else "no result"
        if exp.sentinel_delivered:
            out.append(
                Violation(
                    RESULT_AGREEMENT,
                    f"the whole response arrived (up to {exp.cut}), so the generation must "
                    f"succeed; it failed with {why}",
                )
            )
        else:
            out.append(
                Violation(
                    TRAILING_USAGE,
                    f"the response was cut by {exp.cut}, after the finish reason but before "
                    f"the sentinel: it must succeed with a warning; it failed with {why}",
                )
            )
        return out
    if result.text != exp.text:
        out.append(
            Violation(RESULT_AGREEMENT, f"result.text is {result.text!r}, expected {exp.text!r}")
        )
    if result.reasoning != exp.reasoning:
        out.append(
            Violation(
                RESULT_AGREEMENT,
                f"result.reasoning is {result.reasoning!r}, expected {exp.reasoning!r}",
            )
        )
    calls = _result_calls(result)
    if not _same_calls(calls, exp.tool_calls):
        out.append(
            Violation(
                RESULT_AGREEMENT,
                f"result.tool_calls is [{_calls_text(calls)}], expected "
                f"[{_calls_text(exp.tool_calls)}]",
            )
        )
    if result.finish_reason != exp.finish_reason:
        out.append(
            Violation(
                RESULT_AGREEMENT,
                f"result.finish_reason is {result.finish_reason!r}, expected {exp.finish_reason!r}",
            )
        )
    out += _check_usage(exp, result.usage, final=True)
    warned = any(w.startswith(USAGE_MAY_BE_INCOMPLETE) for w in result.warnings)
    if exp.incomplete_warning and not warned:
        out.append(
            Violation(
                TRAILING_USAGE,
                f"the response was cut by {exp.cut} before the sentinel, but the result has "
                "no 'usage may be incomplete' warning",
            )
        )
    elif exp.streamed and exp.sentinel_delivered and warned:
        out.append(
            Violation(
                TRAILING_USAGE,
                "the protocol's sentinel arrived, yet the result warns that usage may be "
                "incomplete: the adapter did not report the sentinel (EndPart)",
            )
        )
    return out


def _check_usage(exp: Expectation, usage: Usage, *, final: bool) -> list[Violation]:
    out: list[Violation] = []
    where = "result.usage" if final else "the UsageUpdate events before the failure"
    for name in _USAGE_FIELDS:
        want = exp.usage.get(name)
        got = getattr(usage, name)
        if got == want:
            continue
        if want is not None and got is None:
            if final and name in exp.trailing_usage:
                guarantee = TRAILING_USAGE
                how = "at or after the finish reason"
            elif final:
                guarantee = RESULT_AGREEMENT
                how = "before the finish reason"
            else:
                guarantee = FAILURE_FLUSH
                how = f"before {exp.cut}"
            out.append(
                Violation(guarantee, f"{where} lacks {name}={want}, which the provider sent {how}")
            )
        elif final or want is not None:
            out.append(
                Violation(
                    RESULT_AGREEMENT if final else FAILURE_FLUSH,
                    f"{where} has {name}={got!r}; the provider sent "
                    f"{'no ' + name if want is None else f'{name}={want}'}",
                )
            )
    if final:
        i, o = exp.usage.get("input_tokens"), exp.usage.get("output_tokens")
        parts_right = (usage.input_tokens, usage.output_tokens) == (i, o)
        if i is not None and o is not None and parts_right and usage.total_tokens != i + o:
            out.append(
                Violation(
                    RESULT_AGREEMENT,
                    f"result.usage.total_tokens is {usage.total_tokens!r}, expected {i + o}",
                )
            )
    return out


def _check_failure(exp: Expectation, obs: Observation) -> list[Violation]:
    out: list[Violation] = []
    error = obs.error
    events = obs.events
    if error is None:
        got = "it succeeded"
        if obs.result is not None:
            got += f" with text {obs.result.text!r}, finish_reason {obs.result.finish_reason!r}"
        if exp.ending in ("status", "malformed", "stall", "provider_error", "bomb"):
            wanted = "/".join(sorted(exp.error_types))
            out.append(Violation(ERROR_TYPE, f"{exp.cut} must raise {wanted}; {got}"))
        else:
            out.append(
                Violation(
                    TRAILING_USAGE,
                    f"the response was cut by {exp.cut}, before any finish reason: the "
                    f"generation must fail with StreamError; {got}",
                )
            )
        return out
    if not isinstance(error, AnyInferError):
        return out  # reported once already as an untyped exception
    content_shown = events is not None and any(isinstance(ev, _CONTENT) for ev in events)
    if exp.content_before_failure and events is not None:
        if isinstance(error, AllTargetsFailedError):
            out.append(
                Violation(
                    ERROR_TYPE,
                    f"content was delivered before {exp.cut}, so the failure must raise the "
                    f"typed error itself, not {_describe(error)} (did the adapter hold back "
                    "content?)",
                )
            )
        elif type(error).__name__ not in exp.error_types:
            out.append(
                Violation(
                    ERROR_TYPE,
                    f"{exp.cut} after content must raise {'/'.join(sorted(exp.error_types))}; "
                    f"got {_describe(error)}",
                )
            )
    else:
        if not isinstance(error, AllTargetsFailedError):
            if not content_shown:
                out.append(
                    Violation(
                        ERROR_TYPE,
                        f"{exp.cut} before any content must end the attempt with AttemptFailed "
                        f"and raise AllTargetsFailedError; got {_describe(error)}",
                    )
                )
        else:
            last = error.attempts[-1].error if error.attempts else None
            if last is None:
                out.append(Violation(ERROR_TYPE, "AllTargetsFailedError carries no attempt error"))
            else:
                if last.type_name not in exp.error_types:
                    out.append(
                        Violation(
                            ERROR_TYPE,
                            f"{exp.cut} must fail the attempt with "
                            f"{'/'.join(sorted(exp.error_types))}; the attempt failed with "
                            f"{last.type_name}: {last.detail}",
                        )
                    )
                if exp.http_status is not None and last.http_status != exp.http_status:
                    out.append(
                        Violation(
                            ERROR_TYPE,
                            f"the attempt error has http_status={last.http_status!r}, "
                            f"expected {exp.http_status}",
                        )
                    )
                if exp.retry_after is not None and last.retry_after != exp.retry_after:
                    out.append(
                        Violation(
                            ERROR_TYPE,
                            f"the server sent Retry-After: {exp.retry_after:g}; the attempt's "
                            f"ErrorInfo.retry_after is {last.retry_after!r}",
                        )
                    )
            if events is not None and not (events and isinstance(events[-1], AttemptFailed)):
                tail = format_event(events[-1]) if events else "no events"
                out.append(
                    Violation(
                        ERROR_TYPE,
                        f"a failure before content must end the stream with AttemptFailed "
                        f"before AllTargetsFailedError; the last event was {tail}",
                    )
                )
    if events is not None:
        segment = _last_segment(events)
        out += _check_usage(exp, _merged_usage(segment), final=False)
        shown = _assemble(segment)
        if shown.text != exp.text or shown.reasoning != exp.reasoning:
            out.append(
                Violation(
                    FAILURE_FLUSH,
                    f"before {exp.cut} the provider sent text {exp.text!r} and reasoning "
                    f"{exp.reasoning!r}; the stream showed {shown.text!r} and {shown.reasoning!r}",
                )
            )
        deltas = shown.tool_calls()
        if tuple((c.index, c.id, c.name) for c in deltas) != tuple(
            (c.index, c.id, c.name) for c in exp.tool_calls
        ):
            out.append(
                Violation(
                    FAILURE_FLUSH,
                    f"before {exp.cut} the provider sent tool calls "
                    f"[{_calls_text(exp.tool_calls)}]; the stream showed [{_calls_text(deltas)}]",
                )
            )
    return out


def _describe(error: BaseException) -> str:
    if isinstance(error, AllTargetsFailedError) and error.attempts:
        last = error.attempts[-1].error
        if last is not None:
            return f"AllTargetsFailedError (last attempt: {last.type_name}: {last.detail})"
    return f"{type(error).__name__}: {error}"


# --- formatting ----------------------------------------------------------------------


def _short(text: str, limit: int = 60) -> str:
    r = repr(text)
    return r if len(r) <= limit else r[: limit - 4] + "...'"


def format_event(event: StreamEvent) -> str:
    """One event as a short, readable line."""
    if isinstance(event, TimingMark):
        return f"TimingMark({event.name})"
    if isinstance(event, TextDelta):
        return f"TextDelta({_short(event.text)})"
    if isinstance(event, ReasoningDelta):
        return f"ReasoningDelta({_short(event.text)})"
    if isinstance(event, ToolCallDelta):
        bits = [str(event.index)]
        if event.call_id is not None:
            bits.append(f"id={event.call_id!r}")
        if event.name is not None:
            bits.append(f"name={event.name!r}")
        bits.append(_short(event.arguments_fragment))
        return f"ToolCallDelta({', '.join(bits)})"
    if isinstance(event, UsageUpdate):
        known = {
            f.name: getattr(event.usage, f.name)
            for f in fields(Usage)
            if getattr(event.usage, f.name) is not None
        }
        return f"UsageUpdate({', '.join(f'{k}={v}' for k, v in known.items()) or 'empty'})"
    if isinstance(event, AttemptFailed):
        err = event.record.error
        what = f"{err.type_name}, http_status={err.http_status}" if err else "no error"
        return f"AttemptFailed({what})"
    if isinstance(event, StreamEnded):
        r = event.result
        return f"StreamEnded(text={_short(r.text, 40)}, finish_reason={r.finish_reason!r})"
    return repr(event)  # pragma: no cover - StreamEvent is closed


def format_events(events: Sequence[StreamEvent], *, limit: int = 80) -> list[str]:
    """Events as numbered lines (the middle elided past `limit`)."""
    lines = [f"{i:>3}  {format_event(ev)}" for i, ev in enumerate(events)]
    if len(lines) > limit:
        keep = limit // 2
        lines = [*lines[:keep], f"     ... {len(lines) - 2 * keep} more ...", *lines[-keep:]]
    return lines


def usage_of(script: Script) -> dict[str, Any]:
    """The script's usage figures that are set (for reports)."""
    if script.usage is None:
        return {}
    return {
        name: value for name in _USAGE_FIELDS if (value := getattr(script.usage, name)) is not None
    }
