"""The event core: one attempt, from adapter parts to ordered public events.

This is the only place that emits `TimingMark`s, measures time, merges usage, assembles
tool calls and decides whether an attempt succeeded. Every adapter feeds it the same
provider-neutral parts, so the ordering guarantees hold by construction here and the
conformance suite only has to prove that adapters feed it faithfully.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing
from typing import Any, NamedTuple, cast

from .._errors import AnyInferError, ProtocolError, ProviderTimeoutError, StreamError
from .._redact import redact_value
from .._types import FINISH_REASONS, FinishReason, ResolvedTarget, Timing, ToolCall, Usage
from .events import StreamEvent, TimingMark
from .parts import (
    Batches,
    EndPart,
    FinishPart,
    Part,
    PhasesPart,
    RawPart,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    UsagePart,
    WarningPart,
)

__all__ = ["AttemptOutcome", "AttemptRun", "USAGE_MAY_BE_INCOMPLETE"]

USAGE_MAY_BE_INCOMPLETE = (
    "usage may be incomplete: the stream ended after the finish reason but before the "
    "protocol's end marker"
)


# The two records below are private and only read by attribute, so they are not
# dataclasses: a dataclass costs about a millisecond of import time to create here, on
# the path of every program's first request (a named tuple about a seventh of that).


class _Slot:
    """One tool call's fragments so far, by the provider's index."""

    __slots__ = ("arguments", "call_id", "name")

    def __init__(self) -> None:
        self.call_id: str | None = None
        self.name: str | None = None
        self.arguments = ""


class AttemptOutcome(NamedTuple):
    """What a successful attempt produced, before routing adds its trail."""

    text: str
    reasoning: str
    tool_calls: tuple[ToolCall, ...]
    finish_reason: FinishReason
    usage: Usage
    timing: Timing
    warnings: tuple[str, ...]
    raw: Any | None


class AttemptRun:
    """Runs one attempt: turns an adapter's parts into events and an outcome.

    Iterate `events()`; when it finishes without raising, `outcome` holds the result.
    When it raises, `had_content`, `usage` and `timing()` describe how far it got.
    """

    def __init__(
        self,
        parts: AsyncIterator[Part],
        target: ResolvedTarget,
        *,
        streamed: bool = True,
        clock: Any = time.monotonic,
    ) -> None:
        self._parts = parts
        self.target = target
        self._streamed = streamed
        self._clock = clock
        self.started_at = 0.0
        self._first_at: float | None = None
        self._end_at: float | None = None
        self.usage = Usage()
        self.outcome: AttemptOutcome | None = None
        self._phases: dict[str, float] = {}

    @property
    def had_content(self) -> bool:
        """Whether any content delta was emitted."""
        return self._first_at is not None

    def timing(self) -> Timing:
        """Timings measured so far (complete once the attempt has ended)."""
        end = self._end_at if self._end_at is not None else self._clock()
        first = self._first_at
        first_ms = None if first is None else (first - self.started_at) * 1000.0
        rate = None
        out = self.usage.output_tokens
        if first is not None and out is not None and end > first:
            rate = out / (end - first)
        return Timing(
            started_at=self.started_at,
            first_token_ms=first_ms,
            total_ms=(end - self.started_at) * 1000.0,
            output_tokens_per_s=rate,
            phases=dict(self._phases),
        )

    async def events(self) -> AsyncGenerator[StreamEvent, None]:
        """Yield the attempt's events; raise a typed error if the attempt fails."""
        async with aclosing(self.batches()) as batches:
            async for batch in batches:
                for event in batch:
                    yield event

    async def batches(self) -> AsyncGenerator[list[StreamEvent], None]:
        """`events()` in batches: the events of each batch of parts the adapter gives
        (`Batches`: one network read), or of each part from any other iterator."""
        clock = self._clock
        self.started_at = start = clock()
        yield [TimingMark("attempt_start", 0.0)]
        # The attempt goes ahead when its consumer asks for more: the time the consumer
        # took over the mark (a sync stream's wait for its reader to catch up before a
        # later attempt) is not the provider's, so the clock starts again here.
        self.started_at = start = clock()
        text: list[str] = []
        reasoning: list[str] = []
        slots: dict[int, _Slot] = {}
        warnings: list[str] = []
        raw: list[Any] = []
        finish: str | None = None
        ended = False
        first = False
        source: Any = self._parts
        batched = type(source) is Batches
        bad: Any = None
        try:
            reads = source.source if batched else _singles(source)
            try:
                async for batch in reads:
                    out: list[StreamEvent] = []
                    for part in batch:
                        # `type(part) is X` each time (no `cast()` call): mypy narrows it.
                        # A content part makes its delta, then falls through to the
                        # first-token rule; every other part is done with its branch.
                        delta: StreamEvent
                        if type(part) is TextPart:
                            t = part.text
                            if not t:
                                continue
                            text.append(t)
                            delta = part
                        elif type(part) is UsagePart:
                            self.usage = _merge_usage(self.usage, part.usage)
                            out.append(part)
                            continue
                        elif type(part) is ToolCallPart:
                            p = part
                            slot = slots.get(p.index)
                            if slot is None:
                                slot = slots[p.index] = _Slot()
                            if p.call_id and not slot.call_id:
                                slot.call_id = p.call_id
                            if p.name and not slot.name:
                                slot.name = p.name
                            slot.arguments += p.arguments_fragment
                            delta = part
                        elif type(part) is ReasoningPart:
                            r = part.text
                            if not r:
                                continue
                            reasoning.append(r)
                            delta = part
                        elif type(part) is FinishPart:
                            finish = part.reason
                            continue
                        elif type(part) is EndPart:
                            ended = True
                            break
                        elif type(part) is PhasesPart:
                            self._phases.update(part.phases)
                            continue
                        elif type(part) is RawPart:
                            raw.append(part.payload)
                            continue
                        elif type(part) is WarningPart:
                            warnings.append(part.text)
                            continue
                        else:
                            bad = part
                            break
                        if not first:
                            first = True
                            self._first_at = now = clock()
                            out.append(TimingMark("first_token", (now - start) * 1000.0))
                        out.append(delta)
                    if out:
                        yield out
                    if bad is not None:
                        raise ProtocolError(
                            f"adapter yielded {bad!r}, which is not a part",
                            provider=self.target.provider,
                        )
                    if ended:
                        break
            finally:
                await reads.aclose()
                if not batched:
                    await source.aclose()
        except (StreamError, ProviderTimeoutError) as exc:
            # The trailing-usage rule: a break after the finish reason still completed.
            if finish is None:
                self._end_at = clock()
                raise
            warnings.append(f"{USAGE_MAY_BE_INCOMPLETE} ({type(exc).__name__})")
        except AnyInferError:
            self._end_at = clock()
            raise
        if not ended:
            if finish is None:
                self._end_at = clock()
                raise StreamError(
                    f"{self.target.provider}: the response ended before a finish reason",
                    provider=self.target.provider,
                )
            if not any(w.startswith(USAGE_MAY_BE_INCOMPLETE) for w in warnings):
                warnings.append(USAGE_MAY_BE_INCOMPLETE)
        self._end_at = clock()
        reason: FinishReason
        if finish is None:
            reason = "stop"
        elif finish in FINISH_REASONS:
            reason = cast(FinishReason, finish)
        else:
            reason = "other"
        calls = _assemble_tool_calls(slots, warnings)
        if raw:
            kept: Any = redact_value(raw[0] if not self._streamed and len(raw) == 1 else raw)
        else:
            kept = None
        self.outcome = AttemptOutcome(
            text="".join(text),
            reasoning="".join(reasoning),
            tool_calls=calls,
            finish_reason=reason,
            usage=self.usage.normalized(),
            timing=self.timing(),
            warnings=tuple(warnings),
            raw=kept,
        )


async def _singles(parts: AsyncIterator[Part]) -> AsyncGenerator[tuple[Part], None]:
    """Each part of an adapter that does not batch, as a batch of its own."""
    async for part in parts:
        yield (part,)


def _merge_usage(old: Usage, new: Usage) -> Usage:
    """`old.merge(new)`, without the generic dataclass walk: it runs once per usage report.

    Providers with running counts (Gemini's `usageMetadata` on every chunk) report usage
    once per chunk, and each later report usually carries every field the earlier ones
    did, so the common answer is `new` itself and nothing is built.
    """
    i, o, t = new.input_tokens, new.output_tokens, new.total_tokens
    cr, cw, r, c = (
        new.cache_read_tokens,
        new.cache_write_tokens,
        new.reasoning_tokens,
        new.cost_usd,
    )
    if (
        (i is not None or old.input_tokens is None)
        and (o is not None or old.output_tokens is None)
        and (t is not None or old.total_tokens is None)
        and (cr is not None or old.cache_read_tokens is None)
        and (cw is not None or old.cache_write_tokens is None)
        and (r is not None or old.reasoning_tokens is None)
        and (c is not None or old.cost_usd is None)
    ):
        return new  # every field old knows, new knows too: new wins them all
    return Usage(
        old.input_tokens if i is None else i,
        old.output_tokens if o is None else o,
        old.total_tokens if t is None else t,
        old.cache_read_tokens if cr is None else cr,
        old.cache_write_tokens if cw is None else cw,
        old.reasoning_tokens if r is None else r,
        old.cost_usd if c is None else c,
    )


def _assemble_tool_calls(slots: dict[int, _Slot], warnings: list[str]) -> tuple[ToolCall, ...]:
    calls: list[ToolCall] = []
    for index in sorted(slots):
        slot = slots[index]
        call_id = slot.call_id or f"call_{index}"
        name = slot.name or ""
        text = slot.arguments.strip()
        arguments: dict[str, Any]
        if not text:
            arguments = {}
        else:
            try:
                parsed = json.loads(text)
            except ValueError:
                parsed = None
            if isinstance(parsed, dict):
                arguments = parsed
            else:
                arguments = {}
                warnings.append(
                    f"tool call {call_id} ({name or 'unnamed'}) had unparseable arguments; "
                    "using {}"
                )
        if not name:
            warnings.append(f"tool call {call_id} arrived without a tool name")
        calls.append(ToolCall(call_id, name, arguments))
    return tuple(calls)
