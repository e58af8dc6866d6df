"""`Usage`'s hand-built copies keep every field (they are built field by field, for speed)."""

from __future__ import annotations

from dataclasses import fields, replace
from decimal import Decimal

import anyinfer as ai

# Every field set (a field added to Usage later is set too), except the total.
FULL = ai.Usage(
    **{
        f.name: Decimal("0.25") if f.name == "cost_usd" else 2 + i
        for i, f in enumerate(fields(ai.Usage))
        if f.name != "total_tokens"
    }
)


def test_with_cost_changes_only_the_cost() -> None:
    copy = FULL.with_cost(Decimal("1.5"))
    assert copy == replace(FULL, cost_usd=Decimal("1.5"))


def test_normalized_fills_only_the_total() -> None:
    total = (FULL.input_tokens or 0) + (FULL.output_tokens or 0)
    assert FULL.normalized() == replace(FULL, total_tokens=total)
    assert FULL.normalized().normalized() == FULL.normalized()


def test_is_empty_sees_every_field() -> None:
    assert ai.Usage().is_empty()
    for f in fields(ai.Usage):
        value = Decimal(1) if f.name == "cost_usd" else 1
        assert not ai.Usage(**{f.name: value}).is_empty(), f.name


def test_the_constructor_sets_each_field_by_its_name() -> None:
    # `Usage.__init__` is hand-written (the slots' setters, for speed): each keyword
    # must land in its own field, positionally and by name, and nothing else may move.
    names = [f.name for f in fields(ai.Usage)]
    for i, name in enumerate(names):
        value = Decimal(7) if name == "cost_usd" else 7
        by_name = ai.Usage(**{name: value})
        positional = ai.Usage(*([None] * i), value)  # type: ignore[arg-type]
        for other in names:
            expected = value if other == name else None
            assert getattr(by_name, other) == expected, (name, other)
            assert getattr(positional, other) == expected, (name, other)
