"""Result types: the final `Generation` and the values it carries."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field, fields, replace
from decimal import Decimal
from typing import Any, Literal

from ._redact import redact, redact_chunks, redact_value
from ._values import value_class

__all__ = [
    "DETAIL_MAX_CHARS",
    "AttemptRecord",
    "ErrorInfo",
    "FinishReason",
    "FINISH_REASONS",
    "Generation",
    "Mechanism",
    "Outcome",
    "ResolvedTarget",
    "Target",
    "Timing",
    "ToolCall",
    "Usage",
]

FinishReason = Literal["stop", "length", "tool_calls", "content_filter", "other"]
"""Normalized reason a generation stopped."""

FINISH_REASONS: frozenset[str] = frozenset(
    {"stop", "length", "tool_calls", "content_filter", "other"}
)

Outcome = Literal["ok", "retried", "failed", "skipped_unhealthy", "redirected"]
"""How a single routing attempt ended.

`redirected` marks a completed attempt whose content-filter refusal sent the route to
`Route.content_policy_targets` instead of surfacing the refusal. A content-policy
*error* (`ContentFilterError` before any content) is redirected the same way when
redirect targets remain: its record keeps the error, and no `AttemptFailed` is emitted.
"""

Mechanism = Literal["grammar", "json_schema", "json_mode", "prompt"]
"""How structured output was enforced."""

Target = str
"""A target string: `"provider:model"`, or a catalog alias."""

DETAIL_MAX_CHARS = 2000
"""The longest `ErrorInfo.detail` kept, in characters."""


@value_class
class Usage:
    """Token accounting for one generation.

    Every field is optional: a provider that does not report a number leaves it `None`
    rather than reporting a guess.

    Attributes:
        input_tokens: Tokens in the prompt, as counted by the provider.
        output_tokens: Tokens the model generated, including tool-call payloads.
        total_tokens: Prompt plus completion tokens; `normalized` fills it from the other
            two when the provider does not report it.
        cache_read_tokens: Prompt tokens served from the provider's prompt cache.
        cache_write_tokens: Prompt tokens written into the provider's prompt cache.
        reasoning_tokens: Tokens spent on hidden reasoning/thinking, where reported.
        cost_usd: Cost of the call in US dollars, computed from per-token pricing when
            pricing is known.
    """

    input_tokens: int | None = None
    output_tokens: int | None = None
    total_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    reasoning_tokens: int | None = None
    cost_usd: Decimal | None = None

    def normalized(self) -> Usage:
        """Fill `total_tokens` from input + output when both are known.

        Returns:
            This usage, or a copy with `total_tokens` filled in.
        """
        inp, out = self.input_tokens, self.output_tokens
        if self.total_tokens is None and inp is not None and out is not None:
            # Built directly, not with `replace()`: this runs once per attempt.
            return Usage(
                inp,
                out,
                inp + out,
                self.cache_read_tokens,
                self.cache_write_tokens,
                self.reasoning_tokens,
                self.cost_usd,
            )
        return self

    def with_cost(self, cost_usd: Decimal | None) -> Usage:
        """This usage with `cost_usd` set (the pricing step's copy, built directly).

        Args:
            cost_usd: The cost to set.

        Returns:
            The copy.
        """
        return Usage(
            self.input_tokens,
            self.output_tokens,
            self.total_tokens,
            self.cache_read_tokens,
            self.cache_write_tokens,
            self.reasoning_tokens,
            cost_usd,
        )

    def merge(self, other: Usage) -> Usage:
        """Overlay `other`'s known fields onto this one.

        Later usage reports win; `None` never overwrites a known value. Streaming
        providers report usage incrementally, so the router merges rather than replaces.

        Args:
            other: The later report.

        Returns:
            The merged usage.
        """
        changes = {
            f.name: value for f in fields(other) if (value := getattr(other, f.name)) is not None
        }
        return replace(self, **changes) if changes else self

    def is_empty(self) -> bool:
        """Whether no field is known."""
        return (
            self.input_tokens is None
            and self.output_tokens is None
            and self.total_tokens is None
            and self.cache_read_tokens is None
            and self.cache_write_tokens is None
            and self.reasoning_tokens is None
            and self.cost_usd is None
        )


@value_class
class Timing:
    """Centrally-measured timings for one attempt.

    All values are measured by the core against `time.monotonic()` so that definitions
    are identical across providers. `phases` carries provider-reported sub-timings (e.g.
    Ollama's model load) in milliseconds.

    Attributes:
        started_at: Monotonic-clock reading when the attempt began; meaningful only for
            computing intervals, not as wall-clock time.
        first_token_ms: Time to the first content event (text, reasoning, or tool-call
            delta) after attempt start; `None` when no content ever arrived.
        total_ms: Full duration of the attempt, start to completion.
        output_tokens_per_s: Decode throughput, measured from first token to completion;
            `None` when output tokens or first-token time are unknown.
        phases: Provider-reported sub-timings, keyed by phase name, in milliseconds.
    """

    started_at: float
    first_token_ms: float | None = None
    total_ms: float = 0.0
    output_tokens_per_s: float | None = None
    phases: Mapping[str, float] = field(default_factory=dict)


@value_class
class ResolvedTarget:
    """A concrete provider instance and model.

    Attributes:
        provider: The provider instance id (the alias when one is set, else the
            provider id), as used in `"provider:model"` target strings.
        model: The provider's model name.
        provider_id: The registered engine id that serves this instance (e.g.
            `"openai"` for an instance aliased `"work-openai"`).
        alias: The catalog alias the caller asked for, when the target came from one.
    """

    provider: str
    model: str
    provider_id: str = ""
    alias: str | None = None

    def __str__(self) -> str:
        return f"{self.provider}:{self.model}"


@value_class
class ToolCall:
    """A model's request to invoke a tool.

    Attributes:
        id: Provider-assigned call id. Adapters synthesize `"call_0"`, `"call_1"`… when
            the provider omits one, so downstream correlation always has a key.
        name: The tool being called.
        arguments: Parsed JSON arguments. An unparseable argument payload yields `{}`
            and a warning on the `Generation`.
    """

    id: str
    name: str
    arguments: Mapping[str, Any]

    def __repr__(self) -> str:
        return redact(_fields_repr(self))


@value_class
class ErrorInfo:
    """A serializable, already-redacted snapshot of any AnyInfer error.

    Captured from the exception at failure time, so attempt records and telemetry can
    carry the failure long after the exception itself has been handled.

    Attributes:
        type_name: Class name of the exception this snapshot was captured from.
        provider: Id of the provider involved, or `None` for provider-independent
            failures.
        phase: Request-lifecycle stage that failed (`configure`, `discover`,
            `generate`, `stream`, `validate`, or `cleanup`).
        retryable: Whether retrying the identical request could plausibly succeed.
        http_status: Status code, for failures that came from an HTTP response.
        detail: Human-readable description, already redacted and capped at
            `DETAIL_MAX_CHARS` characters.
        retry_after: Seconds the provider asked to wait (`Retry-After`), when it said;
            an addition to the spec's fields, defaulted so the spec's constructor works.
    """

    type_name: str
    provider: str | None
    phase: str
    retryable: bool
    http_status: int | None
    detail: str
    retry_after: float | None = None


@value_class
class AttemptRecord:
    """One entry in a request's routing trail.

    Attributes:
        target: The provider and model this attempt was sent to.
        outcome: How the attempt ended.
        error: Snapshot of the failure, for attempts that did not succeed.
        timing: Measured timings, when the attempt progressed far enough to have any.
    """

    target: ResolvedTarget
    outcome: Outcome
    error: ErrorInfo | None = None
    timing: Timing | None = None


@value_class
class Generation:
    """The final result of a generation request.

    Attributes:
        text: The assistant's full text output. Empty when the model answered only with
            tool calls or structured output.
        structured: The parsed, schema-validated object when structured output was
            requested; `None` otherwise.
        tool_calls: Tool invocations the model requested, in order. Empty when none.
        target: The provider and model that actually produced this result — after
            routing, so it may differ from the first target asked for.
        finish_reason: Normalized reason the generation stopped.
        usage: Token accounting, normalized across providers.
        timing: Centrally-measured latency for the winning attempt.
        structured_mechanism: How structured output was enforced for this result
            (`grammar`, `json_schema`, `json_mode`, or `prompt`); `None` when no schema
            was requested.
        repair_attempts: How many schema-repair round-trips were needed before
            `structured` validated. 0 means the first response validated.
        attempts: The full routing trail, including failed and retried attempts.
        warnings: Non-fatal notices accumulated along the way (capability downgrades,
            estimated values, and the like).
        raw: The provider-native response payload, as an escape hatch for fields the
            normalized types do not carry. `None` unless the request asked to keep it.
        reasoning: The reasoning/thinking text the provider streamed, concatenated;
            empty when none arrived.
    """

    text: str
    structured: Any | None
    tool_calls: tuple[ToolCall, ...]
    target: ResolvedTarget
    finish_reason: FinishReason
    usage: Usage
    timing: Timing
    structured_mechanism: Mechanism | None = None
    repair_attempts: int = 0
    attempts: tuple[AttemptRecord, ...] = ()
    warnings: tuple[str, ...] = ()
    raw: Any | None = None
    reasoning: str = ""

    def __post_init__(self) -> None:
        # The one place every result passes through: registered secrets are masked in the
        # retained raw payload here, including one split across streamed chunks.
        if self.raw is not None:
            raw = self.raw
            kept = redact_chunks(raw) if isinstance(raw, list | tuple) else redact_value(raw)
            object.__setattr__(self, "raw", kept)

    def __repr__(self) -> str:
        # Text the model wrote may echo a secret: the repr masks it (the fields keep it).
        return redact(_fields_repr(self))


def _fields_repr(obj: Any) -> str:
    body = ", ".join(f"{f.name}={getattr(obj, f.name)!r}" for f in fields(obj) if f.repr)
    return f"{type(obj).__name__}({body})"
