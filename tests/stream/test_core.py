"""The event core's rules, driven by scripted parts (no HTTP)."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Sequence
from decimal import Decimal

import pytest

import anyinfer as ai
from anyinfer._stream.core import USAGE_MAY_BE_INCOMPLETE, AttemptRun, _merge_usage
from anyinfer.adapters import (
    END,
    FinishPart,
    Part,
    PhasesPart,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    UsagePart,
)

TARGET = ai.ResolvedTarget("p", "m", "p")


async def _parts(items: Sequence[Part | BaseException]) -> AsyncIterator[Part]:
    for item in items:
        if isinstance(item, BaseException):
            raise item
        yield item


async def run(items: Sequence[Part | BaseException]) -> tuple[list[ai.StreamEvent], AttemptRun]:
    attempt = AttemptRun(_parts(items), TARGET)
    events: list[ai.StreamEvent] = []
    async for ev in attempt.events():
        events.append(ev)
    return events, attempt


def names(events: Sequence[ai.StreamEvent]) -> list[str]:
    return [
        f"{type(e).__name__}:{e.name}" if isinstance(e, ai.TimingMark) else type(e).__name__
        for e in events
    ]


def test_marks_and_text_order() -> None:
    events, attempt = asyncio.run(
        run(
            [
                UsagePart(ai.Usage(input_tokens=3)),
                TextPart("a"),
                TextPart("b"),
                FinishPart("stop"),
                END,
            ]
        )
    )
    assert names(events) == [
        "TimingMark:attempt_start",
        "UsageUpdate",
        "TimingMark:first_token",
        "TextDelta",
        "TextDelta",
    ]
    assert attempt.outcome is not None
    assert attempt.outcome.text == "ab"
    assert attempt.outcome.finish_reason == "stop"
    assert attempt.outcome.warnings == ()


def test_first_token_counts_reasoning_and_tools() -> None:
    for first in (ReasoningPart("r"), ToolCallPart(0, "id", "f", "{}")):
        events, _ = asyncio.run(run([first, TextPart("x"), FinishPart("stop"), END]))
        assert names(events)[:3] == [
            "TimingMark:attempt_start",
            "TimingMark:first_token",
            type(first).__name__.replace("Part", "Delta").replace("ToolCallDelta", "ToolCallDelta"),
        ]
        assert names(events).count("TimingMark:first_token") == 1


def test_empty_text_is_not_content() -> None:
    events, attempt = asyncio.run(run([TextPart(""), FinishPart("stop"), END]))
    assert names(events) == ["TimingMark:attempt_start"]
    assert attempt.outcome is not None and attempt.outcome.timing.first_token_ms is None


@pytest.mark.parametrize(
    ("wire", "expected"),
    [
        ("stop", "stop"),
        ("length", "length"),
        ("tool_calls", "tool_calls"),
        ("content_filter", "content_filter"),
        ("sparkles", "other"),
        ("", "other"),
    ],
)
def test_finish_reason_normalization(wire: str, expected: str) -> None:
    _, attempt = asyncio.run(run([TextPart("x"), FinishPart(wire), END]))
    assert attempt.outcome is not None and attempt.outcome.finish_reason == expected


def test_missing_finish_with_sentinel_is_stop() -> None:
    _, attempt = asyncio.run(run([TextPart("x"), END]))
    assert attempt.outcome is not None and attempt.outcome.finish_reason == "stop"


def test_trailing_usage_is_merged_and_normalized() -> None:
    _, attempt = asyncio.run(
        run(
            [
                UsagePart(ai.Usage(input_tokens=10, cache_read_tokens=4)),
                TextPart("x"),
                FinishPart("stop"),
                UsagePart(ai.Usage(output_tokens=5, cache_read_tokens=None)),
                END,
            ]
        )
    )
    assert attempt.outcome is not None
    assert attempt.outcome.usage == ai.Usage(10, 5, 15, 4)


def _usage_with(names: Sequence[str], base: int) -> ai.Usage:
    values: dict[str, object] = {}
    for n, name in enumerate(names):
        values[name] = Decimal(base + n) if name == "cost_usd" else base + n
    return ai.Usage(**values)  # type: ignore[arg-type]


def test_core_usage_merge_agrees_with_usage_merge_on_every_field_pattern() -> None:
    # The core folds usage reports with its own fast merge; it must give exactly what
    # Usage.merge gives for every pattern of known fields, and know every Usage field.
    fields = [f.name for f in dataclasses.fields(ai.Usage)]
    assert len(fields) == 7, "a new Usage field: teach anyinfer._stream.core._merge_usage"
    patterns = [[name for bit, name in enumerate(fields) if mask >> bit & 1] for mask in range(128)]
    for old_names in patterns:
        old = _usage_with(old_names, 10)
        for new_names in patterns:
            new = _usage_with(new_names, 100)
            assert _merge_usage(old, new) == old.merge(new), (old_names, new_names)


def test_running_usage_reports_fold_to_the_last_known_values() -> None:
    reports = [UsagePart(ai.Usage(input_tokens=7, output_tokens=n)) for n in range(1, 6)]
    events, attempt = asyncio.run(
        run(
            [
                UsagePart(ai.Usage(cache_read_tokens=3)),
                *[p for r in reports for p in (TextPart("x"), r)],
                FinishPart("stop"),
                END,
            ]
        )
    )
    assert [e.usage for e in events if isinstance(e, ai.UsageUpdate)][1:] == [
        r.usage for r in reports
    ]
    assert attempt.outcome is not None
    assert attempt.outcome.usage == ai.Usage(7, 5, 12, 3)


def test_end_after_finish_without_sentinel_succeeds_with_warning() -> None:
    _, attempt = asyncio.run(run([TextPart("x"), FinishPart("stop")]))
    assert attempt.outcome is not None
    assert attempt.outcome.warnings == (USAGE_MAY_BE_INCOMPLETE,)


def test_break_after_finish_succeeds_with_warning() -> None:
    err = ai.StreamError("gone", provider="p")
    _, attempt = asyncio.run(run([TextPart("x"), FinishPart("length"), err]))
    assert attempt.outcome is not None
    assert attempt.outcome.finish_reason == "length"
    assert attempt.outcome.warnings[0].startswith(USAGE_MAY_BE_INCOMPLETE)


def test_end_before_finish_fails() -> None:
    with pytest.raises(ai.StreamError, match="before a finish reason"):
        asyncio.run(run([TextPart("x")]))


def test_failure_flushes_usage_first() -> None:
    async def go() -> tuple[list[ai.StreamEvent], BaseException | None]:
        attempt = AttemptRun(
            _parts([UsagePart(ai.Usage(input_tokens=7)), TextPart("x"), ai.StreamError("cut")]),
            TARGET,
        )
        seen: list[ai.StreamEvent] = []
        try:
            async for ev in attempt.events():
                seen.append(ev)
        except ai.StreamError as exc:
            return seen, exc
        return seen, None

    seen, exc = asyncio.run(go())
    assert exc is not None
    assert any(isinstance(e, ai.UsageUpdate) and e.usage.input_tokens == 7 for e in seen)
    assert not any(isinstance(e, ai.StreamEnded) for e in seen)


def test_tool_calls_assembled_by_index_with_synthesized_ids() -> None:
    _, attempt = asyncio.run(
        run(
            [
                ToolCallPart(1, None, "b", '{"y"'),
                ToolCallPart(0, "real", "a", '{"x": 1}'),
                ToolCallPart(1, None, None, ": 2}"),
                ToolCallPart(2, None, "c", "{oops"),
                FinishPart("tool_calls"),
                END,
            ]
        )
    )
    assert attempt.outcome is not None
    calls = attempt.outcome.tool_calls
    assert [(c.id, c.name, dict(c.arguments)) for c in calls] == [
        ("real", "a", {"x": 1}),
        ("call_1", "b", {"y": 2}),
        ("call_2", "c", {}),
    ]
    assert any("unparseable" in w for w in attempt.outcome.warnings)


def test_timing_is_measured_by_the_core() -> None:
    # 99.0 is when the attempt yields its `attempt_start`; its clock starts again at 100.0,
    # when the consumer asks for more (its own time with the mark is not the provider's).
    ticks = iter([99.0, 100.0, 100.5, 102.5])

    async def go() -> AttemptRun:
        attempt = AttemptRun(
            _parts([TextPart("x"), UsagePart(ai.Usage(output_tokens=40)), FinishPart("stop"), END]),
            TARGET,
            clock=lambda: next(ticks),
        )
        async for _ in attempt.events():
            pass
        return attempt

    attempt = asyncio.run(go())
    assert attempt.outcome is not None
    timing = attempt.outcome.timing
    assert timing.first_token_ms == pytest.approx(500.0)
    assert timing.total_ms == pytest.approx(2500.0)
    assert timing.output_tokens_per_s == pytest.approx(20.0)  # 40 tokens over 2 s decode


def test_phases_are_kept() -> None:
    _, attempt = asyncio.run(
        run([PhasesPart({"prefill_ms": 2.0}), TextPart("x"), FinishPart("stop"), END])
    )
    assert attempt.outcome is not None and attempt.outcome.timing.phases == {"prefill_ms": 2.0}


def test_non_part_is_a_protocol_error() -> None:
    with pytest.raises(ai.ProtocolError):
        asyncio.run(run(["not a part"]))  # type: ignore[list-item]
