"""Per-target circuit breakers, kept inside each client."""

from __future__ import annotations

import time
from collections.abc import Callable

__all__ = ["Breakers"]


class _State:
    # A plain class, not a dataclass: the client imports this module, and creating a
    # dataclass costs about a millisecond at import.
    __slots__ = ("failures", "opened_at", "probing")

    def __init__(self) -> None:
        self.failures = 0
        self.opened_at: float | None = None
        self.probing = False


class Breakers:
    """Circuit breakers keyed by target (`"provider:model"`).

    Closed: requests flow and consecutive failures are counted. At the threshold the
    breaker opens and the target is skipped. After the cooldown one half-open probe
    request is let through: success closes the breaker, failure opens it again.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._states: dict[str, _State] = {}
        self._clock = clock

    def allow(self, key: str, threshold: int, cooldown_s: float) -> bool:
        """Whether a request may go to `key` now (reserving the probe when half-open)."""
        if threshold <= 0:
            return True
        state = self._states.get(key)
        if state is None or state.opened_at is None:
            return True
        if self._clock() - state.opened_at < cooldown_s or state.probing:
            return False
        state.probing = True
        return True

    def success(self, key: str) -> None:
        """Record a success: the breaker closes."""
        self._states.pop(key, None)

    def failure(self, key: str, threshold: int) -> None:
        """Record a failure; open the breaker at the threshold or on a failed probe."""
        if threshold <= 0:
            return
        state = self._states.setdefault(key, _State())
        state.failures += 1
        if state.probing or state.failures >= threshold:
            state.opened_at = self._clock()
            state.probing = False

    def release(self, key: str) -> None:
        """Give back a half-open probe that ended without a verdict (cancelled)."""
        state = self._states.get(key)
        if state is not None:
            state.probing = False

    def is_open(self, key: str) -> bool:
        """Whether the breaker for `key` is open or half-open."""
        state = self._states.get(key)
        return state is not None and state.opened_at is not None
