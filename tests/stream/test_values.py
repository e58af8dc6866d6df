"""`slot_init`: the frozen value classes keep their dataclass contract with a faster init."""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

import pytest

import anyinfer as ai
from anyinfer._stream import events, parts
from anyinfer._values import slot_init

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
    init: Any = cls.__init__
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
