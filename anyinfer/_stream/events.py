"""Stream events: the typed, ordered output of one generation."""

from __future__ import annotations

from typing import Literal

from .._types import AttemptRecord, Generation, Usage
from .._values import value_class

__all__ = [
    "AttemptFailed",
    "ReasoningDelta",
    "StreamEnded",
    "StreamEvent",
    "TextDelta",
    "TimingMark",
    "TimingMarkName",
    "ToolCallDelta",
    "UsageUpdate",
]

TimingMarkName = Literal["attempt_start", "first_token"]
"""Named points on the attempt clock."""


@value_class
class TextDelta:
    """A fragment of visible answer text."""

    text: str


@value_class
class ReasoningDelta:
    """A fragment of reasoning/thinking text, excluded from the answer text."""

    text: str


@value_class
class ToolCallDelta:
    """A fragment of a tool call.

    Fragments are correlated by `index` — the tool-call slot within the response.
    Concatenate `arguments_fragment` per index, then JSON-parse the result.

    Attributes:
        index: The tool-call slot within the response this fragment belongs to.
        call_id: Provider-assigned call id, on fragments that carry it.
        name: Name of the tool being called, on fragments that carry it.
        arguments_fragment: The next piece of this slot's JSON argument text; may be
            empty.
    """

    index: int
    call_id: str | None
    name: str | None
    arguments_fragment: str


@value_class
class UsageUpdate:
    """A usage report; may arrive mid-stream and more than once."""

    usage: Usage


@value_class
class TimingMark:
    """A centrally-measured timing point, in milliseconds since attempt start.

    Attributes:
        name: Which point on the attempt clock this marks.
        at_ms: Milliseconds elapsed since the attempt started.
    """

    name: TimingMarkName
    at_ms: float


@value_class
class AttemptFailed:
    """A target attempt failed; a retry or fallback may follow.

    Attributes:
        record: The failed attempt's routing-trail entry: target, outcome, error
            snapshot, and any timing.
    """

    record: AttemptRecord


@value_class
class StreamEnded:
    """Terminal event carrying the assembled result."""

    result: Generation


StreamEvent = (
    TextDelta
    | ReasoningDelta
    | ToolCallDelta
    | UsageUpdate
    | TimingMark
    | AttemptFailed
    | StreamEnded
)
"""Any event a consumer may observe."""
