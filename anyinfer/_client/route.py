"""Routes: which targets a request may use, in order, and how failures are handled."""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import field
from typing import Any, Literal

from .._errors import AnyInferError, ConfigError
from .._types import ResolvedTarget, Target
from .._values import value_class
from .validate import need_int, need_number

__all__ = ["Decision", "RetryPolicy", "Route", "default_decision", "options_for"]

Decision = Literal["retry", "fallback", "raise"]
"""What a route does with a failed attempt: retry the same target, move to the next
target, or stop and raise the error."""


def default_decision(error: AnyInferError) -> Decision:
    """The default failure policy.

    Retryable errors (rate limits, overload, 5xx, timeouts, broken connections) are
    retried on the same target, then fall back; everything else (auth, missing model,
    context window, content policy, a request the model rejects, protocol errors, a
    misconfigured target) falls back to the next target at once, since another model
    may accept what this one refused. No error raises past the route by default: pass
    `decide=` to make some raise immediately.

    Args:
        error: The attempt's error.

    Returns:
        The decision.
    """
    return "retry" if error.retryable else "fallback"


@value_class
class RetryPolicy:
    """Retries of one target before falling back.

    Attributes:
        max_retries: Retries per target after the first attempt (0 disables retries).
        backoff_base_s: First backoff delay; it doubles with each retry.
        backoff_max_s: Cap on one backoff delay.
        jitter: Fraction of each delay that is randomized (0 = none, 1 = full jitter).
        respect_retry_after: Wait what a rate-limit response's `Retry-After` asks.
        max_retry_after_s: A `Retry-After` longer than this falls back instead of
            waiting.
    """

    max_retries: int = 2
    backoff_base_s: float = 0.5
    backoff_max_s: float = 8.0
    jitter: float = 0.5
    respect_retry_after: bool = True
    max_retry_after_s: float = 30.0

    def __post_init__(self) -> None:
        need_int(self.max_retries, "RetryPolicy.max_retries")
        for name in ("backoff_base_s", "backoff_max_s", "jitter", "max_retry_after_s"):
            need_number(getattr(self, name), f"RetryPolicy.{name}")
        if self.max_retries < 0:
            raise ConfigError("max_retries must not be negative")
        if self.backoff_base_s < 0 or self.backoff_max_s < 0:
            raise ConfigError("backoff delays must not be negative")
        if not 0.0 <= self.jitter <= 1.0:
            raise ConfigError("jitter must be between 0 and 1")

    def delay(
        self, retry: int, error: AnyInferError, rng: random.Random | None = None
    ) -> float | None:
        """Seconds to wait before retry number `retry` (1-based); `None` means fall back.

        Args:
            retry: Which retry this is, starting at 1.
            error: The error being retried.
            rng: Random source for jitter.
        """
        retry_after: float | None = getattr(error, "retry_after", None)
        if self.respect_retry_after and retry_after is not None:
            return None if retry_after > self.max_retry_after_s else retry_after
        base = min(self.backoff_max_s, self.backoff_base_s * (2.0 ** (retry - 1)))
        r = rng.random() if rng is not None else random.random()
        return base * (1.0 - self.jitter * r)


@value_class
class Route:
    """An ordered list of targets, with the policy for failures.

    A target that fails before any content has been shown is retried (for retryable
    errors, with exponential backoff and jitter, honouring `Retry-After`) and then
    falls back to the next target; each failed attempt appears as an `AttemptFailed`
    event. Once content has been shown a failure raises. A completed attempt the
    provider refused on content policy (finish reason `content_filter`), or a
    `ContentFilterError` raised before any content, is redirected (once per request)
    to `content_policy_targets` when any are given.

    Attributes:
        targets: Targets in preference order (`"provider:model"`).
        retry: Retry policy per target.
        content_policy_targets: Where a content-filter refusal or error is redirected.
        decide: Maps an error to `retry`, `fallback` or `raise`; override to change
            which errors fall back.
        breaker_threshold: Consecutive failures that open a target's circuit breaker
            (0 disables the breaker).
        breaker_cooldown_s: How long an open breaker skips its target before one
            half-open probe request is let through.
    """

    targets: tuple[Target, ...]
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    content_policy_targets: tuple[Target, ...] = ()
    decide: Callable[[AnyInferError], Decision] = default_decision
    breaker_threshold: int = 5
    breaker_cooldown_s: float = 30.0

    def __init__(
        self,
        targets: Sequence[Target] | Target,
        *,
        retry: RetryPolicy | None = None,
        content_policy_targets: Sequence[Target] = (),
        decide: Callable[[AnyInferError], Decision] | None = None,
        breaker_threshold: int = 5,
        breaker_cooldown_s: float = 30.0,
    ) -> None:
        items = _targets(targets)
        if not items:
            raise ConfigError("a Route needs at least one target")
        need_int(breaker_threshold, "Route.breaker_threshold")
        need_number(breaker_cooldown_s, "Route.breaker_cooldown_s")
        if breaker_threshold < 0 or breaker_cooldown_s < 0:
            raise ConfigError("breaker settings must not be negative")
        object.__setattr__(self, "targets", items)
        object.__setattr__(self, "retry", retry if retry is not None else RetryPolicy())
        object.__setattr__(self, "content_policy_targets", _targets(content_policy_targets))
        object.__setattr__(self, "decide", decide or default_decision)
        object.__setattr__(self, "breaker_threshold", breaker_threshold)
        object.__setattr__(self, "breaker_cooldown_s", breaker_cooldown_s)

    @classmethod
    def coerce(
        cls, value: Route | Target | Sequence[Target], *, like: Route | None = None
    ) -> Route:
        """A `Route` from a route, one target, or a sequence of targets.

        Args:
            value: What the caller passed.
            like: A route whose policies a bare target list inherits (the client's
                default route).
        """
        if isinstance(value, Route):
            return value
        if like is None:
            return cls(value)
        return cls(
            value,
            retry=like.retry,
            content_policy_targets=like.content_policy_targets,
            decide=like.decide,
            breaker_threshold=like.breaker_threshold,
            breaker_cooldown_s=like.breaker_cooldown_s,
        )


def _targets(value: Sequence[Target] | Target) -> tuple[Target, ...]:
    items = (value,) if isinstance(value, str) else tuple(value)
    for t in items:
        if not isinstance(t, str) or not t.strip():
            raise ConfigError(f"route targets must be non-empty strings, got {t!r}")
    return items


def options_for(
    target: ResolvedTarget, provider_options: Mapping[str, Mapping[str, Any]]
) -> Mapping[str, Any]:
    """The call's extra body fields for `target`: those given for its instance id, else
    for its engine id (generation, embed and rerank alike)."""
    return provider_options.get(target.provider) or provider_options.get(target.provider_id, {})
