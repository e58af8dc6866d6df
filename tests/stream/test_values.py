"""`value_class`: the frozen value classes keep their dataclass contract, made cheaper."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import pickle
import sys
from typing import Any

import pytest

import anyinfer as ai
from anyinfer._stream import events, parts
from anyinfer._values import _frozen_setattr, value_class


def _value_classes() -> list[type]:
    """Every value class in the library's loaded modules (the public types among them)."""
    # Load the request path's modules.
    import anyinfer._client.aclient
    import anyinfer._telemetry  # noqa: F401

    found = {
        obj
        for name, module in list(sys.modules.items())
        if name.startswith("anyinfer")
        and not name.startswith(("anyinfer.fakeservers", "anyinfer.conformance"))
        for obj in vars(module).values()
        if isinstance(obj, type) and vars(obj).get("__setattr__") is _frozen_setattr
    }
    return sorted(found, key=lambda c: (c.__module__, c.__qualname__))


VALUE_CLASSES = _value_classes()


def _twin(cls: type) -> Any:
    """The same fields as a frozen, slotted dataclass made by `dataclasses` itself."""
    specs = []
    for f in dataclasses.fields(cls):
        options: dict[str, Any] = {
            "init": f.init,
            "repr": f.repr,
            "compare": f.compare,
            "hash": f.hash,
            "kw_only": f.kw_only,
        }
        if f.default is not dataclasses.MISSING:
            options["default"] = f.default
        if f.default_factory is not dataclasses.MISSING:
            options["default_factory"] = f.default_factory
        specs.append((f.name, f.type, dataclasses.field(**options)))
    return dataclasses.make_dataclass(cls.__name__, specs, frozen=True, slots=True)


def test_the_value_classes_are_found() -> None:
    names = {c.__name__ for c in VALUE_CLASSES}
    assert {"Usage", "TextDelta", "Generation", "Message", "Route", "RequestEnded"} <= names
    assert len(VALUE_CLASSES) >= 40


@pytest.mark.parametrize("cls", VALUE_CLASSES, ids=lambda c: f"{c.__module__}.{c.__qualname__}")
def test_each_has_the_dataclass_s_signature_and_sets_its_slots(cls: type) -> None:
    params: Any = cls.__dataclass_params__  # type: ignore[attr-defined]
    assert params.frozen and params.init and params.eq
    init: Any = vars(cls)["__init__"]
    if init.__code__.co_filename != "<string>":
        return  # the class body's own __init__ (`Route`'s coercing one), kept
    assert inspect.signature(cls) == inspect.signature(_twin(cls))
    # The slots' own setters, not the frozen dataclass's `object.__setattr__`:
    assert "__setattr__" not in init.__code__.co_names
    assert all(
        f"_set_{f.name}" in init.__code__.co_names
        for f in dataclasses.fields(cls)
        if f.init or f.default is not dataclasses.MISSING
    )
    assert init.__qualname__ == f"{cls.__qualname__}.__init__"
    assert not hasattr(cls, "__dict__") or "__slots__" in vars(cls)


def test_values_stay_frozen_compared_and_hashed_by_field() -> None:
    usage = ai.Usage(1, output_tokens=2)
    assert usage == ai.Usage(input_tokens=1, output_tokens=2)
    assert hash(usage) == hash(ai.Usage(1, 2))
    assert usage.total_tokens is None and usage.cost_usd is None
    assert repr(ai.TextDelta("a")) == "TextDelta(text='a')"
    with pytest.raises(
        dataclasses.FrozenInstanceError, match="cannot assign to field 'input_tokens'"
    ):
        usage.input_tokens = 5  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError, match="cannot delete field 'reason'"):
        del parts.FinishPart("stop").reason  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        usage.anything = 1  # type: ignore[attr-defined]
    with pytest.raises(TypeError):
        ai.TextDelta()  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        ai.TimingMark("first_token", 1.0, 2.0)  # type: ignore[call-arg]


def test_values_pickle_copy_and_replace() -> None:
    for value in (ai.Usage(1, 2, 3), ai.TextDelta("a"), ai.Message.user("hi")):
        assert pickle.loads(pickle.dumps(value)) == value
        assert copy.copy(value) == value and copy.deepcopy(value) == value
    assert dataclasses.replace(ai.Usage(1, 2), output_tokens=5) == ai.Usage(1, 5)
    assert dataclasses.asdict(ai.Usage(1))["input_tokens"] == 1


def test_content_parts_are_the_public_events() -> None:
    assert parts.TextPart is events.TextDelta
    assert parts.ReasoningPart is events.ReasoningDelta
    assert parts.ToolCallPart is events.ToolCallDelta
    assert parts.UsagePart is events.UsageUpdate


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


def test_value_class_init_follows_the_dataclass_s() -> None:
    hidden = dataclasses.field(default=7, init=False)
    made = dataclasses.field(default_factory=list, init=False)
    ours, theirs = _pair(
        {"b": hidden, "c": made, "d": dataclasses.field(default_factory=dict, kw_only=True)},
        {"a": int, "b": int, "c": list, "d": dict},
    )
    assert inspect.signature(ours) == inspect.signature(theirs)
    assert str(inspect.signature(ours)) == "(a: int, *, d: dict = <factory>) -> None"
    a, b = ours(1), theirs(1)
    assert repr(a) == repr(b) == "V(a=1, b=7, c=[], d={})"
    assert ours(1).c is not a.c and ours(1).d is not a.d  # a new value per instance
    assert ours(1, d={"x": 1}).d == {"x": 1}
    assert ours.__doc__ == theirs.__doc__ == "V(a: int, *, d: dict = <factory>)"
    assert ours.__match_args__ == theirs.__match_args__ == ("a",)
    with pytest.raises(TypeError):
        ours(1, 2)  # b is not a parameter
    with pytest.raises(TypeError, match="non-default argument 'b' follows default argument"):
        value_class(type("W", (), {"__annotations__": {"a": int, "b": int}, "a": 0}))


def test_value_class_post_init_runs_after_every_field_is_set() -> None:
    seen: list[Any] = []
    ours, theirs = _pair(
        {
            "b": dataclasses.field(default=2),
            "__post_init__": lambda self: seen.append((self.a, self.b)),
        },
        {"a": int, "b": int},
    )
    ours(1)
    theirs(1)
    assert seen == [(1, 2), (1, 2)]


def test_value_class_subclasses_are_treated_as_a_frozen_dataclass_s() -> None:
    @value_class
    class Base:
        a: int

    @dataclasses.dataclass(frozen=True)
    class Frozen(Base):
        b: int = 0

    assert Frozen(1, 2) == Frozen(1, 2) and Frozen(1).a == 1
    with pytest.raises(TypeError, match="cannot inherit non-frozen dataclass from a frozen one"):
        dataclasses.dataclass(type("Thawed", (Base,), {"__annotations__": {"c": int}}))

    class Plain(Base):  # not a dataclass, and with a __dict__: its own attributes may be set
        pass

    p = Plain(1)
    p.note = "x"  # type: ignore[attr-defined]
    assert p.note == "x"  # type: ignore[attr-defined]
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.a = 2  # type: ignore[misc]

    @value_class
    class Child(Base):  # a value class on a value class
        b: int = 0

    assert Child(1, 2) == Child(1, 2) and repr(Child(1)).endswith(".Child(a=1, b=0)")
    assert str(inspect.signature(Child)) == "(a: 'int', b: 'int' = 0) -> None"
    with pytest.raises(dataclasses.FrozenInstanceError):
        Child(1).b = 2  # type: ignore[misc]
    assert Base.__dataclass_params__.frozen  # type: ignore[attr-defined]

    @dataclasses.dataclass
    class Thawed:
        a: int

    with pytest.raises(TypeError, match="cannot inherit frozen dataclass from a non-frozen one"):
        value_class(type("Frozen", (Thawed,), {"__annotations__": {"b": int}}))


def test_value_class_refuses_an_initvar() -> None:
    annotations = {"a": int, "b": dataclasses.InitVar[int]}
    with pytest.raises(TypeError, match="InitVar"):
        value_class(type("V", (), {"__annotations__": annotations}))


def test_value_class_keeps_a_body_s_own_init_and_refuses_its_setattr() -> None:
    @value_class
    class Parsed:
        a: int

        def __init__(self, text: str) -> None:
            object.__setattr__(self, "a", int(text))

    assert Parsed("4").a == 4 and str(inspect.signature(Parsed)) == "(text: 'str') -> 'None'"
    with pytest.raises(TypeError, match="Cannot overwrite attribute __setattr__"):
        value_class(
            type("V", (), {"__annotations__": {"a": int}, "__setattr__": object.__setattr__})
        )
