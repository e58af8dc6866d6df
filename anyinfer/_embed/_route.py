"""One request's walk over a route, for the unary operations (`embed`, `rerank`).

Generation's `Router` walks an event stream (content shown or not, redirects, repairs).
An embedding batch or a rerank call is one request and one JSON answer, so `walk` takes
the route's decisions directly:

- `Route.decide` says whether to retry, fall back or raise.
- `RetryPolicy.delay` says how long to wait: exponential backoff with jitter, or the
  provider's `Retry-After`.
- The client's `Breakers` skip an open target. They count only failures that say
  something about the target (`attempt._counts_against_health`), and close on success.

Every attempt becomes an `AttemptRecord` in the caller's trail. A route that runs out
raises `AllTargetsFailedError` carrying the trail.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol, TypeVar

from .._errors import AllTargetsFailedError, AnyInferError, ProviderTimeoutError
from .._types import AttemptRecord, ResolvedTarget, Timing

if TYPE_CHECKING:
    from .._client.health import Breakers
    from .._client.route import Route

__all__ = ["Phased", "exhausted", "ms_since", "sealed", "timed", "walk"]

R = TypeVar("R", bound="Phased")
T = TypeVar("T")


class Phased(Protocol):
    """A reply that may carry provider-reported sub-timings (milliseconds)."""

    @property
    def phases(self) -> Mapping[str, float]: ...


async def walk(
    route: Route,
    targets: Sequence[ResolvedTarget],
    breakers: Breakers,
    attempt: Callable[[ResolvedTarget], Awaitable[R]],
    trail: list[AttemptRecord],
    *,
    what: str,
) -> tuple[R, ResolvedTarget]:
    """Try `attempt` on each target of `route` in order, until one answers.

    Args:
        route: The route's retry policy, decisions and breaker settings.
        targets: The resolved targets, in fallback order.
        breakers: The client's circuit breakers.
        attempt: Sends the request to one target and returns its checked reply;
            raises an `AnyInferError` for a failure the route decides on.
        trail: Receives every attempt, in the order they end.
        what: The operation's name for the error message (`"embed()"`).

    Returns:
        The first reply and the target that gave it.

    Raises:
        AllTargetsFailedError: No target answered.
        AnyInferError: A failure `route.decide` says to raise.
    """
    from .._client.attempt import _counts_against_health

    threshold, cooldown = route.breaker_threshold, route.breaker_cooldown_s
    for target in targets:
        key = str(target)
        if not breakers.allow(key, threshold, cooldown):
            trail.append(AttemptRecord(target, "skipped_unhealthy"))
            continue
        retries = 0
        while True:
            start = time.monotonic()
            try:
                reply = await attempt(target)
            except AnyInferError as exc:
                timing = Timing(start, total_ms=ms_since(start))
                decision = route.decide(exc)
                if _counts_against_health(exc, decision):
                    breakers.failure(key, threshold)
                else:
                    breakers.release(key)
                if decision == "retry" and retries < route.retry.max_retries:
                    delay = route.retry.delay(retries + 1, exc)
                    if delay is not None:
                        retries += 1
                        trail.append(AttemptRecord(target, "retried", exc.to_info(), timing))
                        await asyncio.sleep(delay)
                        if breakers.allow(key, threshold, cooldown):
                            continue
                        break
                trail.append(AttemptRecord(target, "failed", exc.to_info(), timing))
                if decision == "raise":
                    raise
                break
            except BaseException:
                breakers.release(key)  # cancelled: no verdict on the target
                raise
            breakers.success(key)
            phases = reply.phases
            timing = Timing(start, total_ms=ms_since(start), phases=dict(phases))
            trail.append(AttemptRecord(target, "ok", None, timing))
            return reply, target
    raise exhausted(trail, len(targets), what)


async def timed(
    call: Awaitable[T], timeout_s: float | None, target: ResolvedTarget, what: str
) -> T:
    """Await `call`, raising `ProviderTimeoutError` once `timeout_s` has passed."""
    if timeout_s is None:
        return await call
    try:
        async with asyncio.timeout(timeout_s):
            return await call
    except TimeoutError:
        raise ProviderTimeoutError(
            f"{target.provider}: the {what} request took longer than timeout_s={timeout_s}",
            timeout_kind="total",
            provider=target.provider,
        ) from None


def sealed(exc: BaseException | None, trail: list[AttemptRecord]) -> BaseException:
    """`exc` carrying the call's whole trail (an `AllTargetsFailedError` has its own)."""
    assert exc is not None
    if isinstance(exc, AnyInferError) and not isinstance(exc, AllTargetsFailedError):
        exc.attempts = tuple(trail)
    return exc


def exhausted(trail: list[AttemptRecord], targets: int, what: str) -> AllTargetsFailedError:
    """The error for a route on which no target answered."""
    tried = [a for a in trail if a.error is not None]
    last = tried[-1].error if tried else None
    if last is not None:
        detail = f": last error {last.type_name}: {last.detail}"
    elif trail:
        detail = ": every target was skipped as unhealthy"
    else:
        detail = ""
    return AllTargetsFailedError(
        f"{what}: all {targets} target(s) failed{detail}", attempts=tuple(trail)
    )


def ms_since(start: float) -> float:
    """Milliseconds since `start` (a `time.monotonic()` reading)."""
    return (time.monotonic() - start) * 1000.0
