"""The attempt runner: a request's attempts on one target.

`AttemptRunner.run` sends a request to one target until something settles it, yielding
every event of every attempt as it goes:

- Before dispatch, the target's adapter is built and the context gate checked (a prompt
  that provably cannot fit the model's known window fails here, without a request).
- The attempt itself is an `AttemptRun` (`anyinfer._stream.core`), which turns the
  adapter's parts into ordered events and an outcome.
- A failure before content is decided by the route: `retry` waits (exponential backoff
  with jitter, or exactly what `Retry-After` asks) and tries the same target again;
  otherwise the target is given up. A failure after content raises.
- A content-policy refusal — finish reason `content_filter`, or a `ContentFilterError`
  before content — is recorded `redirected` (no `AttemptFailed`) when the route still
  has `content_policy_targets` to redirect to.
- A success feeds the probe layer, goes through structured-output validation (and its
  repair re-runs, see `Structured`), is priced, and becomes the request's `Generation`.

Every attempt's record goes into the request's `Trail`, which the router reads to decide
what comes next, and which becomes `AllTargetsFailedError.attempts` when nothing works.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Mapping
from contextlib import aclosing
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from .._adapters.profile import UsageConvention
from .._errors import (
    AllTargetsFailedError,
    AnyInferError,
    ConfigError,
    ContentFilterError,
    ContextWindowError,
    PoolExhaustedError,
    ResponseTooLargeError,
    SchemaViolationError,
)
from .._request import GenerationRequest
from .._stream.core import AttemptOutcome, AttemptRun
from .._stream.events import AttemptFailed, StreamEvent, TimingMark
from .._types import AttemptRecord, Generation, ResolvedTarget, Usage
from .health import Breakers
from .instrument import Instrument
from .route import Decision, Route
from .targets import Targets

if TYPE_CHECKING:
    from .._knowledge.budget import TokenEstimator
    from .._knowledge.capabilities import ModelCapabilities
    from .._structured.output import NormalizedSchema, Repair, StructuredPlan

__all__ = ["AttemptRunner", "Structured", "Trail"]


class Trail:
    """One request's routing record, kept by the attempt runner and read by the router.

    Attributes:
        instrument: The request's telemetry.
        attempts: Every attempt's record so far, in order.
        started: Attempts started so far (the 1-based telemetry attempt number).
        last_usage: The usage of the last attempt that failed with an error: what a
            failed request reports.
        may_redirect: Whether a content-policy refusal can still be redirected (the
            route has redirect targets and has not used them yet).
        redirected: Set by the runner when a refusal sends the route to its redirect
            targets.
        result: The request's result, once an attempt succeeded.
    """

    __slots__ = (
        "attempts",
        "instrument",
        "last_usage",
        "may_redirect",
        "redirected",
        "result",
        "started",
    )

    def __init__(self, instrument: Instrument, *, may_redirect: bool) -> None:
        self.instrument = instrument
        self.attempts: list[AttemptRecord] = []
        self.started = 0
        self.last_usage = Usage()
        self.may_redirect = may_redirect
        self.redirected = False
        self.result: Generation | None = None

    def record(self, record: AttemptRecord, usage: Usage) -> AttemptRecord:
        """Add an attempt's record (reported as `AttemptEnded` with `usage`)."""
        self.attempts.append(record)
        self.instrument.attempt_ended(record, usage)
        return record

    def seal(self, error: AnyInferError) -> None:
        """Attach the trail so far to an error about to be raised."""
        error.attempts = tuple(self.attempts)

    def exhausted(self, targets: int) -> AllTargetsFailedError:
        """The error for a route whose targets all failed or were skipped."""
        tried = [a for a in self.attempts if a.error is not None]
        last = tried[-1].error if tried else None
        if last is not None:
            detail = f": last error {last.type_name}: {last.detail}"
        elif self.attempts:
            detail = ": every target was skipped as unhealthy"
        else:
            detail = ""
        return AllTargetsFailedError(
            f"all {targets} target(s) failed{detail}", attempts=self.attempts
        )


@dataclass(frozen=True, slots=True)
class Structured:
    """A request's structured output: its schema and repair budget, and the repair loop's
    steps.

    Per target, `plan` picks the mechanism (grammar, JSON schema, JSON mode or prompt) and
    shapes the request. After a completed attempt, `check` validates the reply; an
    invalid one is re-run on the same target with `repaired`'s conversation (the invalid
    reply and its errors fed back) while the budget lasts, then raises the violation.
    """

    schema: NormalizedSchema
    repair: Repair

    def plan(
        self,
        request: GenerationRequest,
        capabilities: ModelCapabilities,
        target: ResolvedTarget,
        defaults: ModelCapabilities | None,
    ) -> tuple[StructuredPlan, GenerationRequest]:
        """How `target` is asked for the schema, and the request that asks it."""
        from .._knowledge.capabilities import ModelCapabilities
        from .._structured.output import plan_structured

        plan = plan_structured(
            self.schema,
            capabilities,
            target.provider_id,
            defaults=defaults or ModelCapabilities(),
        )
        request = replace(
            request,
            messages=plan.messages(request.messages),
            response_format=plan.response_format,
        )
        return plan, request

    def check(
        self, outcome: AttemptOutcome, target: ResolvedTarget
    ) -> tuple[Any, SchemaViolationError | None]:
        """The validated value of a reply, or the violation it commits."""
        value, errors = self.schema.validate(outcome.text)
        if not errors:
            return value, None
        return None, SchemaViolationError(
            f"{target}: the response does not satisfy the schema: " + "; ".join(errors[:5]),
            provider=target.provider,
            text=outcome.text,
            errors=errors,
        )

    @staticmethod
    def repaired(request: GenerationRequest, violation: SchemaViolationError) -> GenerationRequest:
        """The request re-run after `violation`: the reply and its errors fed back."""
        from .._structured.output import repair_messages

        return replace(
            request,
            messages=request.messages + tuple(repair_messages(violation.text, violation.errors)),
        )


class AttemptRunner:
    """Runs a request's attempts on one target (see the module docstring).

    Args:
        targets: Adapters, capabilities and pricing.
        breakers: The client's circuit breakers (a verdict per attempt).
        estimator: Token counting for the context gate.
        context_gate: Whether the context gate is on.
    """

    __slots__ = ("_breakers", "_context_gate", "_estimator", "_targets")

    def __init__(
        self,
        targets: Targets,
        breakers: Breakers,
        *,
        estimator: TokenEstimator | None,
        context_gate: bool,
    ) -> None:
        self._targets = targets
        self._breakers = breakers
        self._estimator = estimator
        self._context_gate = context_gate

    async def run(
        self,
        target: ResolvedTarget,
        request: GenerationRequest,
        route: Route,
        structured: Structured | None,
        trail: Trail,
    ) -> AsyncGenerator[StreamEvent, None]:
        """Attempt `request` on `target`, yielding every attempt's events.

        Ends when an attempt succeeded (`trail.result` is set), a refusal was redirected
        (`trail.redirected` is set), or the target was given up (neither is set).

        Raises:
            AnyInferError: A failure after content was shown, one the route decides to
                raise, or a schema violation once the repair budget is spent; the error
                carries the trail so far.
        """
        key = str(target)
        threshold, cooldown = route.breaker_threshold, route.breaker_cooldown_s
        breakers = self._breakers
        instrument = trail.instrument
        plan: StructuredPlan | None = None
        if structured is not None:
            plan, request = structured.plan(
                request,
                self._targets.capabilities(target),
                target,
                self._targets.profile(target.provider_id).structured,
            )
        retries = repairs = 0
        while True:
            trail.started += 1
            instrument.attempt_started(target, trail.started)
            run: AttemptRun | None = None
            try:
                try:
                    adapter = self._targets.adapter(target.provider)
                    self._gate(request, target)
                except AnyInferError:
                    yield TimingMark("attempt_start", 0.0)
                    raise
                run = AttemptRun(adapter.generate(request), target, streamed=request.stream)
                async with aclosing(instrument.watch(run.events(), target)) as events:
                    async for event in events:
                        yield event
            except AnyInferError as exc:
                timing = run.timing() if run is not None else None
                usage = run.usage if run is not None else Usage()
                trail.last_usage = usage
                decision = route.decide(exc)
                if _counts_against_health(exc, decision):
                    breakers.failure(key, threshold)
                else:
                    breakers.release(key)
                if run is not None and run.had_content:
                    # Content was shown: no retry, no fallback. Usage already went out as
                    # events before this exception (failure-path flush).
                    trail.record(AttemptRecord(target, "failed", exc.to_info(), timing), usage)
                    trail.seal(exc)
                    raise
                delay = self._backoff(route, decision, retries, exc)
                if delay is not None:
                    record = AttemptRecord(target, "retried", exc.to_info(), timing)
                    yield AttemptFailed(trail.record(record, usage))
                    retries += 1
                    await asyncio.sleep(delay)
                    if not breakers.allow(key, threshold, cooldown):
                        return
                    continue
                if (
                    decision != "raise"
                    and trail.may_redirect
                    and isinstance(exc, ContentFilterError)
                ):
                    # Refused on content policy before any content: redirected, like a
                    # `content_filter` finish, so no AttemptFailed.
                    trail.record(AttemptRecord(target, "redirected", exc.to_info(), timing), usage)
                    trail.redirected = True
                    return
                record = AttemptRecord(target, "failed", exc.to_info(), timing)
                yield AttemptFailed(trail.record(record, usage))
                if decision == "raise":
                    trail.seal(exc)
                    raise
                return
            except BaseException:
                breakers.release(key)  # cancelled: no verdict on the target's health
                raise
            breakers.success(key)
            outcome = run.outcome
            assert outcome is not None
            self._probe(target, request, outcome.usage)
            if outcome.finish_reason == "content_filter" and trail.may_redirect:
                trail.record(
                    AttemptRecord(target, "redirected", None, outcome.timing), outcome.usage
                )
                trail.redirected = True
                return
            value: Any = None
            warnings = outcome.warnings
            if structured is not None and plan is not None:
                value, violation = structured.check(outcome, target)
                if violation is not None:
                    if repairs < structured.repair.max_attempts:
                        # Re-run inside the same stream: the next segment opens with a
                        # fresh attempt_start and no AttemptFailed.
                        record = AttemptRecord(
                            target, "retried", violation.to_info(), outcome.timing
                        )
                        trail.record(record, outcome.usage)
                        repairs += 1
                        request = structured.repaired(request, violation)
                        continue
                    record = AttemptRecord(target, "failed", violation.to_info(), outcome.timing)
                    trail.record(record, outcome.usage)
                    trail.seal(violation)
                    raise violation
                warnings = (*plan.warnings, *warnings)
            usage = self._priced(target, outcome.usage)
            trail.record(AttemptRecord(target, "ok", None, outcome.timing), usage)
            trail.result = Generation(
                text=outcome.text,
                structured=value,
                tool_calls=outcome.tool_calls,
                target=target,
                finish_reason=outcome.finish_reason,
                usage=usage,
                timing=outcome.timing,
                structured_mechanism=plan.mechanism if plan is not None else None,
                repair_attempts=repairs,
                attempts=tuple(trail.attempts),
                warnings=warnings,
                raw=outcome.raw,
                reasoning=outcome.reasoning,
            )
            return

    @staticmethod
    def _backoff(
        route: Route, decision: Decision, retries: int, error: AnyInferError
    ) -> float | None:
        """Seconds to wait before retrying the target, or `None` to give it up."""
        if decision == "retry" and retries < route.retry.max_retries:
            return route.retry.delay(retries + 1, error)
        return None

    def _gate(self, request: GenerationRequest, target: ResolvedTarget) -> None:
        """The context gate: refuse before dispatch when the prompt provably cannot fit.

        Raises:
            ContextWindowError: When a trusted window is exceeded by the estimate's floor.
        """
        if not self._context_gate:
            return
        from .._knowledge.budget import compute_budget, context_gate_error, gate_refuses

        caps = self._targets.capabilities(target)
        if caps.context_window is None:
            return
        budget = compute_budget(
            request.messages,
            capabilities=caps,
            estimator=self._estimator,
            tools=request.tools,
            schema=_schema_mapping(request.response_format),
            model=target.model,
            sampling_max_output=request.sampling.max_output_tokens,
        )
        if gate_refuses(budget):
            raise context_gate_error(budget, provider=target.provider, model=target.model)

    def _probe(self, target: ResolvedTarget, request: GenerationRequest, usage: Usage) -> None:
        """Record what a successful response showed about the model (probe layer)."""
        if not request.stream:
            return
        from .._knowledge.capabilities import ModelCapabilities

        self._targets.store.record(
            f"{target.provider}:{target.model}",
            ModelCapabilities(streaming_usage=not usage.is_empty()),
            "probe",
        )

    def _priced(self, target: ResolvedTarget, usage: Usage) -> Usage:
        """`usage` with `cost_usd` filled in, where the target's pricing is known."""
        cost = self._targets.pricing.cost(
            usage,
            target.provider_id,
            target.model,
            convention=self._targets.profile(target.provider_id).usage or UsageConvention(),
        )
        return usage if cost is None else replace(usage, cost_usd=cost)


def _counts_against_health(error: AnyInferError, decision: str) -> bool:
    """Whether a failure says something about the target rather than the request.

    The caller's own limits do not: a full connection pool (`PoolExhaustedError`) or a
    response cut at the caller's `max_response_bytes` (`ResponseTooLargeError`) must not
    open the breaker that every other caller of the target shares.
    """
    if decision == "raise" or isinstance(
        error, ContextWindowError | ContentFilterError | PoolExhaustedError | ResponseTooLargeError
    ):
        return False
    return not isinstance(error, ConfigError)


def _schema_mapping(schema: Any) -> Mapping[str, Any] | None:
    """A JSON Schema mapping from a mapping, a response format, or a pydantic model."""
    if schema is None:
        return None
    if isinstance(schema, Mapping):
        inner = schema.get("schema") if schema.get("type") == "json_schema" else None
        return inner if isinstance(inner, Mapping) else schema
    to_schema = getattr(schema, "model_json_schema", None)
    if callable(to_schema):
        result = to_schema()
        if isinstance(result, Mapping):
            return result
    raise ConfigError(f"cannot read a JSON Schema from {type(schema).__name__}")
