"""`slot_init`: the frozen value classes keep their dataclass contract with a faster init."""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

import pytest

import anyinfer as ai
from anyinfer._stream import events, parts
from anyinfer._values import slot_init, value_class

# Every class built once or more per chunk, which therefore carries `slot_init` (the
# others keep the dataclass's own: `slot_init` costs import time, about 70 us a class).
PER_CHUNK = [ai.TextDelta, ai.ReasoningDelta, ai.ToolCallDelta, ai.UsageUpdate, ai.Usage]


def _twin(cls: type) -> Any:
    """The same fields as a plain frozen dataclass, with the dataclass's own `__init__`."""
    specs = [
        (f.name, f.type, dataclasses.field(default=f.default))
        if f.default is not dataclasses.MISSING
        else (f.name, f.type)
        for f in dataclasses.fields(cls)
    ]
    return dataclasses.make_dataclass(cls.__name__, specs, frozen=True, slots=True)


@pytest.mark.parametrize("cls", PER_CHUNK, ids=lambda c: c.__name__)
def test_the_signature_is_the_dataclass_s_own(cls: type) -> None:
    assert inspect.signature(cls) == inspect.signature(_twin(cls))
    init: Any = vars(cls)["__init__"]
    # slot_init's setters, not the dataclass's `object.__setattr__`:
    assert "__setattr__" not in init.__code__.co_names
    assert all(f"_set_{f.name}" in init.__code__.co_names for f in dataclasses.fields(cls))
    assert init.__qualname__ == f"{cls.__qualname__}.__init__"


def test_values_stay_frozen_compared_and_hashed_by_field() -> None:
    usage = ai.Usage(1, output_tokens=2)
    assert usage == ai.Usage(input_tokens=1, output_tokens=2)
    assert hash(usage) == hash(ai.Usage(1, 2))
    assert usage.total_tokens is None and usage.cost_usd is None
    assert repr(ai.TextDelta("a")) == "TextDelta(text='a')"
    with pytest.raises(dataclasses.FrozenInstanceError):
        usage.input_tokens = 5  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        parts.FinishPart("stop").reason = "length"  # type: ignore[misc]
    with pytest.raises(TypeError):
        ai.TextDelta()  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        ai.TimingMark("first_token", 1.0, 2.0)  # type: ignore[call-arg]


def test_content_parts_are_the_public_events() -> None:
    assert parts.TextPart is events.TextDelta
    assert parts.ReasoningPart is events.ReasoningDelta
    assert parts.ToolCallPart is events.ToolCallDelta
    assert parts.UsagePart is events.UsageUpdate


def test_what_it_cannot_honour_is_refused() -> None:
    @dataclasses.dataclass(frozen=True, slots=True)
    class Later:
        x: int

        def __post_init__(self) -> None:
            pass

    @dataclasses.dataclass(frozen=True, slots=True)
    class Factory:
        x: list[int] = dataclasses.field(default_factory=list)

    @dataclasses.dataclass(frozen=True, slots=True)
    class Hidden:
        x: int = dataclasses.field(default=0, init=False)

    for cls in (Later, Factory, Hidden):
        with pytest.raises(TypeError, match="slot_init"):
            slot_init(cls)


# --- value_class: the dataclass's behaviour, fewer compiled functions -------------------


def _pair(body: dict[str, Any], annotations: dict[str, Any], **options: Any) -> tuple[Any, Any]:
    """The same class body made by `value_class` and by the frozen, slotted dataclass."""
    ns = {"__annotations__": dict(annotations), **body}
    ours = value_class(**options)(type("V", (), dict(ns)))
    theirs: Any = dataclasses.dataclass(frozen=True, slots=True, **options)(type("V", (), dict(ns)))
    return ours, theirs


def test_value_class_behaves_as_the_frozen_dataclass() -> None:
    ours, theirs = _pair(
        {
            "b": dataclasses.field(default="x", repr=False),
            "c": dataclasses.field(default=0, compare=False),
            "d": dataclasses.field(default_factory=list, hash=False),
        },
        {"a": int, "b": str, "c": int, "d": list},
    )
    assert inspect.signature(ours) == inspect.signature(theirs)
    assert dataclasses.fields(ours) and [f.name for f in dataclasses.fields(ours)] == list("abcd")
    for args in [(1,), (1, "y"), (1, "y", 5), (1, "y", 5, [2])]:
        a, b = ours(*args), theirs(*args)
        assert repr(a) == repr(b)
        assert (a == ours(*args)) is (b == theirs(*args)) is True
        assert a != ours(2, *args[1:]) and b != theirs(2, *args[1:])
        assert a.__eq__(b) is NotImplemented  # another class, as the dataclass answers
    # compare=False is ignored by ==, hash=False by hash(); the factory gives a new list.
    assert ours(1, "y", 5) == ours(1, "y", 6)
    assert ours(1, d=[1]) != ours(1, d=[2])
    # Neither the list (hash=False) nor c (compare=False) is hashed, on either side.
    assert hash(ours(1, "y", 5, [1])) == hash(ours(1, "y", 6, [2]))
    assert hash(theirs(1, "y", 5, [1])) == hash(theirs(1, "y", 6, [2]))


def test_value_class_hash_repr_and_frozen_rules() -> None:
    ours, _ = _pair({"c": dataclasses.field(default=0, hash=False)}, {"a": int, "c": int})
    assert hash(ours(1, 2)) == hash(ours(1, 3))  # c is not hashed
    assert {ours(1): "x"}[ours(1)] == "x"
    with pytest.raises(dataclasses.FrozenInstanceError):
        ours(1).a = 2
    assert ours.__dataclass_params__.frozen
    assert not hasattr(ours(1), "__dict__")
    ours_kw, theirs_kw = _pair({}, {"a": int, "b": int}, kw_only=True)
    assert inspect.signature(ours_kw) == inspect.signature(theirs_kw)
    assert repr(ours_kw(a=1, b=2)) == repr(theirs_kw(a=1, b=2))


def test_value_class_keeps_what_the_body_defines() -> None:
    @value_class
    class Own:
        a: int

        def __repr__(self) -> str:
            return "own"

        def __eq__(self, other: object) -> bool:
            return True

    assert repr(Own(1)) == "own" and Own(1) == 5
    assert hash(Own(1)) == hash(Own(1))  # __eq__ alone: the dataclass hash, as dataclass does

    @value_class
    class Later:
        a: int
        b: int = 0

        def __post_init__(self) -> None:
            object.__setattr__(self, "b", self.a * 2)

    assert Later(3).b == 6


def test_value_class_repr_of_a_cycle_is_elided() -> None:
    ours, theirs = _pair({}, {"items": list})
    a, b = ours([]), theirs([])
    a.items.append(a)
    b.items.append(b)
    assert repr(a) == repr(b) == "V(items=[...])"
