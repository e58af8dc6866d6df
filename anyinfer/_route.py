"""Routes: which targets a request may use, in order."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ._errors import ConfigError
from ._types import Target

__all__ = ["Route"]


@dataclass(frozen=True, slots=True)
class Route:
    """An ordered list of targets to try.

    A target that fails before any content has been shown is recorded as an
    `AttemptFailed` event and the next target is tried; once content has been shown, a
    failure raises.

    Attributes:
        targets: Targets in preference order (`"provider:model"` or catalog aliases).
    """

    targets: tuple[Target, ...]

    def __init__(self, targets: Sequence[Target] | Target) -> None:
        items = (targets,) if isinstance(targets, str) else tuple(targets)
        if not items:
            raise ConfigError("a Route needs at least one target")
        for t in items:
            if not isinstance(t, str) or not t.strip():
                raise ConfigError(f"route targets must be non-empty strings, got {t!r}")
        object.__setattr__(self, "targets", items)

    @classmethod
    def coerce(cls, value: Route | Target | Sequence[Target]) -> Route:
        """A `Route` from a route, one target, or a sequence of targets."""
        return value if isinstance(value, Route) else cls(value)
