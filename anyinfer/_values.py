"""`slot_init`: a faster `__init__` for the frozen, slotted dataclasses made per chunk."""

from __future__ import annotations

from dataclasses import MISSING, fields
from typing import Any, TypeVar

__all__ = ["slot_init"]

_C = TypeVar("_C", bound=type)


def slot_init(cls: _C) -> _C:
    """Give a frozen, slotted dataclass an `__init__` that sets its slots directly.

    A frozen dataclass's own `__init__` sets each field through `object.__setattr__`,
    which costs about twice as much as the slot's own setter; the stream events, parts
    and `Usage` are built once or more per chunk of every stream. The new `__init__` has
    the same parameters, defaults and annotations (so `inspect.signature` is unchanged),
    and the class stays frozen: only `__init__` writes the slots.

    Apply it above the `@dataclass(frozen=True, slots=True)` decorator.

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
        if not f.init or f.default_factory is not MISSING:
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
    init.__doc__ = vars(cls)["__init__"].__doc__
    setattr(cls, "__init__", init)  # noqa: B010 - mypy refuses the plain assignment
    return cls
