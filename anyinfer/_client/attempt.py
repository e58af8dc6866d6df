"""The attempt runner: a request's attempts on one target.

`AttemptRunner.on(target, ...)` returns a `TargetAttempts`: the state of a request's
attempts on that target, and the decision after each one. The router iterates each
attempt's events itself (one generator between the adapter's parts and the caller, so
no per-event hop here) and asks `TargetAttempts` what the outcome means (a `Step`):

- Before dispatch, the target's adapter is built, the input rule checked (a document,
  audio or image part the target's protocol or model cannot take fails here, see
  `anyinfer._client.inputs`) and the context gate checked (a prompt that provably cannot
  fit the model's known window fails here, without a request).
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
from collections.abc import AsyncGenerator, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

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
from .._stream.events import AttemptFailed, StreamEvent
from .._types import AttemptRecord, Generation, ResolvedTarget, Timing, Usage
from .health import Breakers
from .instrument import Instrument
from .route import Route
from .targets import Targets

if TYPE_CHECKING:
    from .._knowledge.budget import TokenEstimator
    from .._knowledge.capabilities import ModelCapabilities
    from .._structured.output import NormalizedSchema, Repair, StructuredPlan

__all__ = ["AttemptRunner", "Step", "Structured", "TargetAttempts", "Trail"]


class Trail:
    """One request's routing record, kept by the attempt runner and read by the router.

    Attributes:
        instrument: The request's telemetry.
        attempts: Every attempt's record so far, in order.
        started: Attempts started so far (the 1-based telemetry attempt number).
        last_usage: The usage of the last attempt that failed with an error, or was
            interrupted: what a failed or interrupted request reports.
        may_redirect: Whether a content-policy refusal can still be redirected (the
            route has redirect targets and has not used them yet).
        result: The request's result, once an attempt succeeded.
    """

    __slots__ = (
        "attempts",
        "instrument",
        "last_usage",
        "may_redirect",
        "result",
        "started",
    )

    def __init__(self, instrument: Instrument, *, may_redirect: bool) -> None:
        self.instrument = instrument
        self.attempts: list[AttemptRecord] = []
        self.started = 0
        self.last_usage = Usage()
        self.may_redirect = may_redirect
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
        return exhausted(self.attempts, targets)


def exhausted(
    attempts: Sequence[AttemptRecord], targets: int, what: str | None = None
) -> AllTargetsFailedError:
    """The error for a route on which no target answered: every one failed or was
    skipped (generation's, and `what`'s, an embedding or rerank call's, prefixed)."""
    tried = [a for a in attempts if a.error is not None]
    last = tried[-1].error if tried else None
    if last is not None:
        detail = f": last error {last.type_name}: {last.detail}"
    elif attempts:
        detail = ": every target was skipped as unhealthy"
    else:
        detail = ""
    prefix = "" if what is None else f"{what}: "
    return AllTargetsFailedError(
        f"{prefix}all {targets} target(s) failed{detail}", attempts=tuple(attempts)
    )


class Structured(NamedTuple):
    """A request's structured output: its schema and repair budget, and the repair loop's
    steps.

    Per target, `plan` picks the mechanism (grammar, JSON schema, JSON mode or prompt) and
    shapes the request. After a completed attempt, `check` validates the reply; an
    invalid one is re-run on the same target with `repaired`'s conversation (the invalid
    reply and its errors fed back) while the budget lasts, then raises the violation.

    A named tuple, not a dataclass: it is private and only read by attribute, and its
    module is imported by every program's first request.

    Attributes:
        schema: The normalized schema.
        repair: The repair budget.
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
    """What every attempt needs from the client: adapters, the context gate, breakers,
    probes and pricing. `on()` begins one target's attempts.

    Args:
        targets: Adapters, capabilities and pricing.
        breakers: The client's circuit breakers (a verdict per attempt).
        estimator: Token counting for the context gate.
        context_gate: Whether the context gate is on.
    """

    __slots__ = ("_context_gate", "_estimator", "breakers", "targets")

    def __init__(
        self,
        targets: Targets,
        breakers: Breakers,
        *,
        estimator: TokenEstimator | None,
        context_gate: bool,
    ) -> None:
        self.targets = targets
        self.breakers = breakers
        self._estimator = estimator
        self._context_gate = context_gate

    def on(
        self,
        target: ResolvedTarget,
        request: GenerationRequest,
        route: Route,
        structured: Structured | None,
        trail: Trail,
    ) -> TargetAttempts:
        """Begin a request's attempts on `target` (the structured-output plan is made here)."""
        plan: StructuredPlan | None = None
        if structured is not None:
            plan, request = structured.plan(
                request,
                self.targets.capabilities(target),
                target,
                self.targets.profile(target.provider_id).structured,
            )
        return TargetAttempts(self, target, request, route, structured, plan, trail)

    def admit(
        self, request: GenerationRequest, target: ResolvedTarget, adapter_class: type
    ) -> None:
        """The input rule: refuse before dispatch the parts `target` cannot take
        (`anyinfer._client.inputs`: its protocol first, then its model's capabilities).

        Raises:
            ConfigError: Naming the part, why, and where the refusal's fact came from.
        """
        for m in request.messages:
            if type(m.content) is not str:
                break
        else:
            return  # plain text, the usual case: nothing to look up
        from .._adapters.profile import input_support
        from .inputs import check_inputs

        check_inputs(
            request.messages,
            target,
            input_support(adapter_class),
            self.targets.capabilities(target),
        )

    def gate(self, request: GenerationRequest, target: ResolvedTarget) -> None:
        """The context gate: refuse before dispatch when the prompt provably cannot fit.

        Raises:
            ContextWindowError: When a trusted window is exceeded by the estimate's floor.
        """
        if not self._context_gate:
            return
        caps = self.targets.capabilities(target)
        if caps.context_window is None:
            return
        from .._knowledge.budget import compute_budget, context_gate_error, gate_refuses

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

    def probe(self, target: ResolvedTarget, request: GenerationRequest, usage: Usage) -> None:
        """Record what a successful response showed about the model (probe layer)."""
        if not request.stream:
            return
        key = f"{target.provider}:{target.model}"
        seen = not usage.is_empty()
        known = self.targets.store.layer(key, "probe")
        if known is not None and known.streaming_usage is seen:
            return  # the probe layer already says so: recording it again changes nothing
        from .._knowledge.capabilities import ModelCapabilities

        self.targets.record(key, ModelCapabilities(streaming_usage=seen), "probe")

    def priced(self, target: ResolvedTarget, usage: Usage) -> Usage:
        """`usage` with `cost_usd` filled in, where the target's pricing is known."""
        cost = self.targets.pricing.cost(
            usage,
            target.provider_id,
            target.model,
            convention=self.targets.convention(target.provider_id),
        )
        return usage if cost is None else usage.with_cost(cost)


Step = Literal["retry", "again", "next", "redirect", "raise", "done"]
"""What the router does after an attempt: `retry` the target after `backoff()`, run it
`again` at once (a schema repair), go to the `next` target, `redirect` to the
content-policy targets, `raise` the attempt's error, or finish (`done`: `trail.result`)."""


class TargetAttempts:
    """A request's attempts on one target: the state between them, and what each means.

    The router drives it: `start()` opens an attempt and returns its events; when they
    raise, `failed()` records the attempt and says what comes next (and which
    `AttemptFailed` to emit first); when they complete, `succeeded()` does.
    """

    __slots__ = (
        "_key",
        "_plan",
        "_repairs",
        "_retries",
        "_run",
        "_runner",
        "_structured",
        "delay",
        "request",
        "route",
        "target",
        "trail",
    )

    def __init__(
        self,
        runner: AttemptRunner,
        target: ResolvedTarget,
        request: GenerationRequest,
        route: Route,
        structured: Structured | None,
        plan: StructuredPlan | None,
        trail: Trail,
    ) -> None:
        self._runner = runner
        self.target = target
        self._key = str(target)
        self.request = request
        self.route = route
        self._structured = structured
        self._plan = plan
        self.trail = trail
        self._retries = 0
        self._repairs = 0
        self._run: AttemptRun | None = None
        self.delay = 0.0

    def start(self) -> AsyncGenerator[list[StreamEvent], None]:
        """Open the next attempt and return its events, in batches (`AttemptRun.batches`).

        Raises:
            AnyInferError: Before dispatch: the adapter cannot be built, or the input
                rule or the context gate refuses. The router shows that attempt's
                `attempt_start` itself.
        """
        trail, target, runner = self.trail, self.target, self._runner
        trail.started += 1
        trail.instrument.attempt_started(target, trail.started)
        self._run = None
        adapter = runner.targets.adapter(target.provider)
        runner.admit(self.request, target, type(adapter))
        runner.gate(self.request, target)
        self._run = run = AttemptRun(
            adapter.generate(self.request), target, streamed=self.request.stream
        )
        return trail.instrument.watch(run.batches(), target)

    def failed(self, exc: AnyInferError) -> tuple[Step, AttemptFailed | None]:
        """Record a failed attempt; what the route does next, and the event to show first."""
        run, target, trail, route = self._run, self.target, self.trail, self.route
        breakers = self._runner.breakers
        timing, usage = self._got_so_far()
        decision = route.decide(exc)
        if _counts_against_health(exc, decision):
            breakers.failure(self._key, route.breaker_threshold)
        else:
            breakers.release(self._key)
        if run is not None and run.had_content:
            # Content was shown: no retry, no fallback. Usage already went out as events
            # before this exception (failure-path flush).
            trail.record(AttemptRecord(target, "failed", exc.to_info(), timing), usage)
            trail.seal(exc)
            return "raise", None
        if decision == "retry" and self._retries < route.retry.max_retries:
            delay = route.retry.delay(self._retries + 1, exc)
            if delay is not None:
                self._retries += 1
                self.delay = delay
                record = AttemptRecord(target, "retried", exc.to_info(), timing)
                return "retry", AttemptFailed(trail.record(record, usage))
        if decision != "raise" and trail.may_redirect and isinstance(exc, ContentFilterError):
            # Refused on content policy before any content: redirected, like a
            # `content_filter` finish, so no AttemptFailed.
            trail.record(AttemptRecord(target, "redirected", exc.to_info(), timing), usage)
            return "redirect", None
        failed = AttemptFailed(
            trail.record(AttemptRecord(target, "failed", exc.to_info(), timing), usage)
        )
        if decision == "raise":
            trail.seal(exc)
            return "raise", failed
        return "next", failed

    async def backoff(self) -> bool:
        """Wait before the retry; whether the target's breaker still lets it through."""
        await asyncio.sleep(self.delay)
        route = self.route
        return self._runner.breakers.allow(
            self._key, route.breaker_threshold, route.breaker_cooldown_s
        )

    def cancelled(self, exc: BaseException) -> None:
        """The attempt was closed, cancelled or interrupted (`exc`): no verdict on the
        target's health. It is reported ended (`Instrument.attempt_interrupted`) with
        the usage it had reported, which becomes the trail's `last_usage`: what the
        request's own last event reports."""
        self._runner.breakers.release(self._key)
        timing, usage = self._got_so_far()
        self.trail.instrument.attempt_interrupted(exc, self.target, timing, usage)

    def _got_so_far(self) -> tuple[Timing | None, Usage]:
        """How far an attempt that ended without a result got: its timing and the usage
        it reported, which becomes the trail's `last_usage`."""
        run = self._run
        usage = run.usage if run is not None else Usage()
        self.trail.last_usage = usage
        return (run.timing() if run is not None else None), usage

    def succeeded(self) -> Step:
        """Judge a completed attempt: redirect, repair, or the result (`trail.result`).

        Raises:
            SchemaViolationError: The reply does not validate and the repair budget is
                spent; it carries the trail.
        """
        run, target, trail, runner = self._run, self.target, self.trail, self._runner
        assert run is not None and run.outcome is not None
        outcome = run.outcome
        runner.breakers.success(self._key)
        runner.probe(target, self.request, outcome.usage)
        if outcome.finish_reason == "content_filter" and trail.may_redirect:
            trail.record(AttemptRecord(target, "redirected", None, outcome.timing), outcome.usage)
            return "redirect"
        value: Any = None
        warnings = outcome.warnings
        structured, plan = self._structured, self._plan
        if structured is not None and plan is not None:
            value, violation = structured.check(outcome, target)
            if violation is not None:
                info = violation.to_info()
                if self._repairs < structured.repair.max_attempts:
                    # Re-run inside the same stream: the next segment opens with a fresh
                    # attempt_start and no AttemptFailed.
                    trail.record(
                        AttemptRecord(target, "retried", info, outcome.timing), outcome.usage
                    )
                    self._repairs += 1
                    self.request = structured.repaired(self.request, violation)
                    return "again"
                trail.record(AttemptRecord(target, "failed", info, outcome.timing), outcome.usage)
                trail.seal(violation)
                raise violation
            warnings = (*plan.warnings, *warnings)
        usage = runner.priced(target, outcome.usage)
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
            repair_attempts=self._repairs,
            attempts=tuple(trail.attempts),
            warnings=warnings,
            raw=outcome.raw,
            reasoning=outcome.reasoning,
        )
        return "done"


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
