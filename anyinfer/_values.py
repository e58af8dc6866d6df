"""`value_class`: frozen, slotted dataclasses that cost less to create and to build.

AnyInfer's public result, event, message and settings types are frozen dataclasses, and
about forty of them are created on the way to a program's first request. Python 3.11's
`dataclass` compiles six generated functions for each frozen one (`__init__`,
`__repr__`, `__eq__`, `__hash__`, `__setattr__`, `__delattr__`), and compiling is
nearly all of what creating one costs (about a millisecond a class on a slow machine).
`value_class` has `dataclass` collect the fields and make the slotted class (fields,
defaults, `__match_args__`, `__slots__`), compiling nothing, then gives it:

- an `__init__` compiled from the field names, the one function it compiles, which sets
  each slot through the slot's own setter (about twice as fast as the frozen
  dataclass's `object.__setattr__`; some of these classes are built once or more per
  chunk of every stream), with the dataclass's parameters, defaults, factories
  (`<factory>` in the signature), init-only fields and `__post_init__` call;
- `__repr__`, `__eq__` and `__hash__` made from the field names without compiling;
- the frozen `__setattr__`/`__delattr__` and the pickling pair shared by every value
  class instead of compiled per class.

They behave as the frozen dataclass's own would, and `__dataclass_params__` says what the
class is (frozen, with init, repr and eq), so `dataclasses` and subclasses treat it as a
frozen dataclass (a value class may be a base of another, or of a frozen dataclass).
"""

from __future__ import annotations

import dataclasses
import inspect
import reprlib
from collections.abc import Callable
from dataclasses import MISSING, FrozenInstanceError, dataclass, field, fields, is_dataclass
from operator import attrgetter
from typing import Any, TypeVar, cast, dataclass_transform, overload

__all__ = ["value_class"]

_C = TypeVar("_C", bound=type)


@overload
def value_class(cls: _C, /) -> _C: ...


@overload
def value_class(*, kw_only: bool = False) -> Callable[[_C], _C]: ...


@dataclass_transform(frozen_default=True, field_specifiers=(field,))
def value_class(cls: _C | None = None, /, *, kw_only: bool = False) -> _C | Callable[[_C], _C]:
    """Make `cls` a frozen, slotted dataclass, with compared and shown fields as usual.

    The same as `@dataclass(frozen=True, slots=True)` to anyone using the class
    (`dataclasses.fields`, `replace`, `asdict`, the signature, equality, hashing, the
    repr, pickling and copying), but cheaper to create and to build (see the module).

    Args:
        cls: The class body to make a dataclass.
        kw_only: Make every field keyword-only (`dataclass`'s `kw_only`).

    Returns:
        The dataclass (a new class object, as `slots=True` makes).

    Raises:
        TypeError: The class declares an `InitVar` (no value class needs one), or what
            `dataclass` itself refuses.
    """

    def make(body: _C) -> _C:
        own = dict(vars(body))  # before `dataclass` writes into the body (its __doc__)
        bases: list[Any] = [b for b in body.__mro__[1:] if is_dataclass(b)]
        if any(not b.__dataclass_params__.frozen for b in bases):
            raise TypeError("cannot inherit frozen dataclass from a non-frozen one")
        # `dataclass` refuses an unfrozen class on a frozen base; this one is frozen
        # below, so its bases say they are not while it is made.
        for b in bases:
            b.__dataclass_params__.frozen = False
        try:
            made: type = dataclass(
                frozen=False, slots=True, kw_only=kw_only, init=False, repr=False, eq=False
            )(body)
        finally:
            for b in bases:
                b.__dataclass_params__.frozen = True
        _freeze(made, own)
        _compare_and_show(made, own=own)
        return cast(_C, made)

    return make if cls is None else make(cls)


def _freeze(cls: type, own: dict[str, Any]) -> None:
    """Give a slotted dataclass made without `__init__` and unfrozen what the frozen one
    has: `__init__` (`_init`), the frozen `__setattr__`/`__delattr__`, the pickling
    pair (a frozen slotted object cannot be restored by setting attributes), and
    parameters that say so."""
    names = {f.name for f in fields(cls)}
    for name, pseudo in cast(Any, cls).__dataclass_fields__.items():
        # A pseudo-field (`ClassVar`, `InitVar`): only an InitVar would reach __init__.
        if name not in names and "InitVar" in str(pseudo.type):
            raise TypeError(f"value_class: {cls.__name__}.{name} is an InitVar")
    for name in ("__setattr__", "__delattr__"):
        if name in own:  # as the frozen dataclass refuses it
            raise TypeError(f"Cannot overwrite attribute {name} in class {cls.__name__}")
    if "__init__" not in own:  # a body's own __init__ is kept, as `dataclass` keeps it
        _init(cls)
    setattr(cls, "__setattr__", _frozen_setattr)  # noqa: B010 - mypy refuses the assignment
    setattr(cls, "__delattr__", _frozen_delattr)  # noqa: B010
    setattr(cls, "__getstate__", _getstate)  # noqa: B010
    setattr(cls, "__setstate__", _setstate)  # noqa: B010
    params = cast(Any, cls).__dataclass_params__
    params.init = params.repr = params.eq = params.frozen = True
    if own.get("__doc__") is None:  # the dataclass's own doc, made before the __init__
        cls.__doc__ = cls.__name__ + str(inspect.signature(cls)).replace(" -> None", "")


class _Factory:
    """A parameter default for a field with a `default_factory`, shown as `<factory>`
    (only where `dataclasses` has no such marker of its own)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<factory>"


_FACTORY: Any = getattr(dataclasses, "_HAS_DEFAULT_FACTORY", None) or _Factory()
"""The dataclass's own marker where it has one, so that signatures compare equal."""


def _init(cls: type) -> None:
    """Compile `cls.__init__` from its fields: the dataclass's parameters, each slot set
    through its own setter, then `__post_init__` if the class has one."""
    positional: list[str] = []
    keyword: list[str] = []
    body: list[str] = []
    scope: dict[str, Any] = {"_FACTORY": _FACTORY}
    annotations: dict[str, Any] = {}
    defaulted: str | None = None
    for f in fields(cls):
        name = f.name
        scope[f"_set_{name}"] = getattr(cls, name).__set__  # the slot (perhaps a base's)
        if f.default is not MISSING:
            scope[f"_default_{name}"] = f.default
        elif f.default_factory is not MISSING:
            scope[f"_factory_{name}"] = f.default_factory
        if not f.init:
            if f.default is not MISSING:
                body.append(f"    _set_{name}(__value_self__, _default_{name})")
            elif f.default_factory is not MISSING:
                body.append(f"    _set_{name}(__value_self__, _factory_{name}())")
            continue  # no default: left unset, as the dataclass leaves it
        annotations[name] = f.type
        if f.default is not MISSING:
            param, value = f"{name}=_default_{name}", name
        elif f.default_factory is not MISSING:
            param = f"{name}=_FACTORY"
            value = f"_factory_{name}() if {name} is _FACTORY else {name}"
        else:
            param, value = name, name
            if defaulted is not None and not f.kw_only:
                raise TypeError(f"non-default argument {name!r} follows default argument")
        if f.kw_only:
            keyword.append(param)
        else:
            positional.append(param)
            if param != name:
                defaulted = name
        body.append(f"    _set_{name}(__value_self__, {value})")
    if hasattr(cls, "__post_init__"):
        body.append("    __value_self__.__post_init__()")
    params = ["__value_self__", *positional, *(["*", *keyword] if keyword else [])]
    source = f"def __init__({', '.join(params)}):\n" + ("\n".join(body) or "    pass")
    exec(source, scope)  # built from the class's own field names, as dataclasses does
    init = scope["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    init.__annotations__ = {**annotations, "return": None}
    setattr(cls, "__init__", init)  # noqa: B010 - mypy refuses the plain assignment


def _refuses(obj: object, name: str) -> bool:
    """Whether the frozen value class refuses setting or deleting `name` on `obj`: any
    name on its own instance, a field on a subclass's (as the frozen dataclass)."""
    cls: Any = type(obj)
    return vars(cls).get("__setattr__") is _frozen_setattr or name in cls.__dataclass_fields__


def _frozen_setattr(self: Any, name: str, value: Any) -> None:
    if _refuses(self, name):
        raise FrozenInstanceError(f"cannot assign to field {name!r}")
    _after_value_class(self).__setattr__(self, name, value)


def _frozen_delattr(self: Any, name: str) -> None:
    if _refuses(self, name):
        raise FrozenInstanceError(f"cannot delete field {name!r}")
    _after_value_class(self).__delattr__(self, name)


def _after_value_class(obj: object) -> Any:
    """What a subclass's own attribute is set through: the class after the value class
    in its MRO (as the frozen dataclass's `super(cls, self)`)."""
    mro = type(obj).__mro__
    for i, klass in enumerate(mro):
        if vars(klass).get("__setattr__") is _frozen_setattr:
            return mro[i + 1]
    return object  # pragma: no cover - only a value class's subclasses get here


def _getstate(self: Any) -> list[Any]:
    return [getattr(self, f.name) for f in fields(self)]


def _setstate(self: Any, state: list[Any]) -> None:
    for f, value in zip(fields(self), state, strict=False):
        object.__setattr__(self, f.name, value)


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
