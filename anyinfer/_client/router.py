"""The router: one request's walk over its route's targets.

`Router.run` is the event stream behind `stream()`, `generate()` and each `run_tools`
round. It takes the route's targets in order: a target whose circuit breaker is open is
skipped (recorded `skipped_unhealthy`, nothing sent); any other is handed to the attempt
runner (`anyinfer._client.attempt`): the router iterates each attempt's events and asks
the target's `TargetAttempts` what the attempt's end means — retry the target (after its
backoff), re-run it for a schema repair, give it up, redirect its content-policy refusal,
raise, or the result. A redirect replaces the rest of the
route with `Route.content_policy_targets`, once per request. The first result ends the
stream with `StreamEnded`; a route that runs out raises `AllTargetsFailedError` carrying
every attempt's record. Telemetry brackets the request (`RequestStarted`, then one
`RequestEnded` whichever way it ends: a result, an error, or its caller closing,
cancelling or interrupting it) through the request's `Instrument`.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import aclosing
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from .._errors import AnyInferError
from .._request import GenerationRequest
from .._stream.events import StreamEnded, TimingMark
from .._stream.generation import Relay, RouterBatches, routed
from .._types import AttemptRecord, ResolvedTarget, Usage
from .attempt import AttemptRunner, Structured, Trail
from .health import Breakers
from .instrument import instrument
from .route import Route, options_for

if TYPE_CHECKING:
    from .._observers import Telemetry

__all__ = ["Router"]


class Router:
    """Routes requests over their targets (see the module docstring).

    Args:
        attempts: Runs a request's attempts on one target.
        breakers: The client's circuit breakers.
        telemetry: The client's observer hub.
    """

    __slots__ = ("_attempts", "_breakers", "_telemetry")

    def __init__(self, attempts: AttemptRunner, breakers: Breakers, telemetry: Telemetry) -> None:
        self._attempts = attempts
        self._breakers = breakers
        self._telemetry = telemetry

    @routed
    async def run(
        self,
        route: Route,
        targets: tuple[ResolvedTarget, ...],
        redirects: tuple[ResolvedTarget, ...],
        base: GenerationRequest,
        provider_options: Mapping[str, Mapping[str, Any]],
        structured: Structured | None,
    ) -> RouterBatches:
        """One request's event stream (`AsyncStream`), in batches: its own (the failure
        records, the end), and each attempt's, relayed (`Relay`: the stream reads them
        without a hop through this generator; what they raise comes back at the `yield`).

        Args:
            route: The route's policies (retry, decide, breaker).
            targets: The route's targets, resolved, in order.
            redirects: Its content-policy targets, resolved.
            base: The request; a target it was not built for (model and provider
                options) gets a copy with its own.
            provider_options: Extra body fields per provider (instance id first, then
                engine id).
            structured: The structured output asked for, if any.

        Raises:
            AllTargetsFailedError: Every target failed or was skipped.
            AnyInferError: An attempt's error that ends the route (see `AttemptRunner`).
        """
        tel = instrument(self._telemetry, base.metadata)
        tel.request_started(targets, base)
        trail = Trail(tel, may_redirect=bool(redirects))
        queue = list(targets)
        threshold, cooldown = route.breaker_threshold, route.breaker_cooldown_s
        target: ResolvedTarget | None = None
        try:
            while queue:
                target = queue.pop(0)
                if not self._breakers.allow(str(target), threshold, cooldown):
                    trail.record(AttemptRecord(target, "skipped_unhealthy"), Usage())
                    continue
                options = options_for(target, provider_options)
                if target.model == base.model and options == base.provider_options:
                    request = base  # built for this target already (the usual first one)
                else:
                    request = replace(base, model=target.model, provider_options=dict(options))
                attempts = self._attempts.on(target, request, route, structured, trail)
                while True:
                    try:
                        try:
                            events = attempts.start()
                        except AnyInferError:
                            yield [TimingMark("attempt_start", 0.0)]  # refused before dispatch
                            raise
                        async with aclosing(events):
                            yield Relay(events)
                    except AnyInferError as exc:
                        step, failed = attempts.failed(exc)
                        if failed is not None:
                            yield [failed]
                        if step == "raise":
                            raise
                    except BaseException as exc:  # closed, cancelled or interrupted
                        attempts.cancelled(exc)
                        raise
                    else:
                        step = attempts.succeeded()
                    if step == "retry":
                        if await attempts.backoff():
                            continue
                    elif step == "again":
                        continue
                    elif step == "done":
                        result = trail.result
                        assert result is not None
                        tel.request_ended(result)
                        yield [StreamEnded(result)]
                        return
                    elif step == "redirect":
                        queue = list(redirects)
                        trail.may_redirect = False
                    break
            raise trail.exhausted(len(targets))
        except AnyInferError as exc:
            tel.request_failed(exc.to_info(), trail.last_usage)
            raise
        except BaseException as exc:
            # Closed early, cancelled or interrupted: during an attempt (reported ended by
            # `cancelled` above), a retry's backoff or showing an event. It still ends
            # with one `RequestEnded`, unless its result was already reported (a result
            # is the trail's only once `request_ended` has it, with no await between).
            if trail.result is None:
                tel.request_interrupted(exc, target, trail.last_usage)
            raise
