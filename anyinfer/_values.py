"""`value_class`: frozen, slotted dataclasses that cost less to create and, per chunk, to build.

AnyInfer's public result, event, message and settings types are frozen dataclasses, and
about forty of them are created on the way to a program's first request. Python 3.11's
`dataclass` compiles six generated functions for each frozen one (`__init__`,
`__repr__`, `__eq__`, `__hash__`, `__setattr__`, `__delattr__`), and compiling is
nearly all of what creating one costs (about a millisecond a class on a slow machine).
`value_class` has `dataclass` make the class as before (fields, `__init__` with its defaults,
factories and `__post_init__`, the frozen `__setattr__`/`__delattr__`, `__match_args__`,
the slots), but gives it a `__repr__`, `__eq__` and `__hash__` made from the field
names without compiling anything; they behave as the dataclass's own would. With
`fast_init=True` it also replaces the compiled `__init__` with one that sets each slot
through its own setter (`slot_init`), for the classes built once or more per chunk.
"""

from __future__ import annotations

import reprlib
from collections.abc import Callable
from dataclasses import MISSING, dataclass, field, fields
from operator import attrgetter
from typing import Any, TypeVar, cast, dataclass_transform, overload

__all__ = ["slot_init", "value_class"]

_C = TypeVar("_C", bound=type)


@overload
def value_class(cls: _C, /) -> _C: ...


@overload
def value_class(*, kw_only: bool = False, fast_init: bool = False) -> Callable[[_C], _C]: ...


@dataclass_transform(frozen_default=True, field_specifiers=(field,))
def value_class(
    cls: _C | None = None, /, *, kw_only: bool = False, fast_init: bool = False
) -> _C | Callable[[_C], _C]:
    """Make `cls` a frozen, slotted dataclass, with compared and shown fields as usual.

    The same as `@dataclass(frozen=True, slots=True)` to anyone using the class
    (`dataclasses.fields`, `replace`, `asdict`, the signature, equality, hashing and the
    repr), but cheaper to create (see the module).

    Args:
        cls: The class body to make a dataclass.
        kw_only: Make every field keyword-only (`dataclass`'s `kw_only`).
        fast_init: Also give it `slot_init`'s `__init__` (plain fields only).

    Returns:
        The dataclass (a new class object, as `slots=True` makes).
    """

    def make(body: _C) -> _C:
        made: type = dataclass(
            frozen=True, slots=True, kw_only=kw_only, init=not fast_init, repr=False, eq=False
        )(body)
        _compare_and_show(made, own=vars(body))
        return cast(_C, slot_init(made) if fast_init else made)

    return make if cls is None else make(cls)


def _compare_and_show(cls: type, own: Any) -> None:
    """Install `__repr__`, `__eq__` and `__hash__` as a frozen dataclass has them, except
    where the class body defines its own (`own`: the body's namespace)."""
    all_fields = fields(cls)
    shown = tuple(f.name for f in all_fields if f.repr)
    compared = _key([f.name for f in all_fields if f.compare])
    hashed = _key([f.name for f in all_fields if (f.compare if f.hash is None else f.hash)])

    if "__repr__" not in own:

        @reprlib.recursive_repr()
        def __repr__(self: Any) -> str:
            inner = ", ".join(f"{name}={getattr(self, name)!r}" for name in shown)
            return f"{type(self).__qualname__}({inner})"

        __repr__.__qualname__ = f"{cls.__qualname__}.__repr__"
        setattr(cls, "__repr__", __repr__)  # noqa: B010 - mypy refuses the plain assignment

    if "__eq__" not in own:

        def __eq__(self: Any, other: object) -> bool:
            if other.__class__ is self.__class__:
                return compared(self) == compared(other)
            return NotImplemented

        __eq__.__qualname__ = f"{cls.__qualname__}.__eq__"
        setattr(cls, "__eq__", __eq__)  # noqa: B010

    if "__hash__" not in own or (own["__hash__"] is None and "__eq__" in own):
        # No explicit hash (a body that defines `__eq__` alone gets `__hash__ = None`).

        def __hash__(self: Any) -> int:
            return hash(hashed(self))

        __hash__.__qualname__ = f"{cls.__qualname__}.__hash__"
        setattr(cls, "__hash__", __hash__)  # noqa: B010


def _key(names: list[str]) -> Callable[[Any], tuple[Any, ...]]:
    """The tuple of these attributes of an object, as the dataclass compares and hashes."""
    if not names:
        return lambda _obj: ()
    if len(names) == 1:
        one = attrgetter(names[0])
        return lambda obj: (one(obj),)
    return cast(Callable[[Any], tuple[Any, ...]], attrgetter(*names))


def slot_init(cls: _C) -> _C:
    """Give a frozen, slotted dataclass an `__init__` that sets its slots directly.

    A frozen dataclass's own `__init__` sets each field through `object.__setattr__`,
    which costs about twice as much as the slot's own setter; the content events (which
    are also the adapters' content parts) and `Usage` are built once or more per chunk
    of every stream. The new `__init__` has the same parameters, defaults and
    annotations (so `inspect.signature` is unchanged), and the class stays frozen: only
    `__init__` writes the slots.

    Args:
        cls: The dataclass.

    Returns:
        The same class, its `__init__` replaced.

    Raises:
        TypeError: The class has a `__post_init__`, a `default_factory` or an
            init-only field, which this `__init__` would not honour.
    """
    if hasattr(cls, "__post_init__"):
        raise TypeError(f"slot_init: {cls.__name__} has a __post_init__")
    params: list[str] = []
    body: list[str] = []
    scope: dict[str, Any] = {}
    annotations: dict[str, Any] = {}
    for f in fields(cls):
        if not f.init or f.default_factory is not MISSING or f.kw_only:
            raise TypeError(f"slot_init: {cls.__name__}.{f.name} is not a plain field")
        scope[f"_set_{f.name}"] = vars(cls)[f.name].__set__
        if f.default is MISSING:
            params.append(f.name)
        else:
            scope[f"_default_{f.name}"] = f.default
            params.append(f"{f.name}=_default_{f.name}")
        body.append(f"    _set_{f.name}(self, {f.name})")
        annotations[f.name] = f.type
    source = f"def __init__(self, {', '.join(params)}):\n" + ("\n".join(body) or "    pass")
    exec(source, scope)  # built from the class's own field names, as dataclasses does
    init = scope["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    init.__annotations__ = {**annotations, "return": None}
    setattr(cls, "__init__", init)  # noqa: B010 - mypy refuses the plain assignment
    return cls
