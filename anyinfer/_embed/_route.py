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

The rest of a unary call's flow, shared by both runners, lives here too:

- `refuse_mixed_models`: a fallback to another model is refused before dispatch, since
  vectors and relevance scores of different models are not comparable.
- `UnaryRunner`, the base of both runners: the client's targets, breakers and hub, and
  `run_requests`, which sends a call's requests (a runner cuts them with its own batch
  limits), each walked over the route by `route_one` (options for the target's
  provider, the operation's adapter call under the timeout, its reply checks, `walk`),
  at most `concurrency` at once with the first failure stopping the call
  (`all_or_nothing`: no partial result), each attempt reported to the call's
  instrument. It hands back `Served`: the replies in request order, their usage summed
  (`summed`) and priced at the target that served each request (`priced`), the timing,
  the trail and the warnings (`notes`), from which a runner builds its result.
- `UnaryCall`, the keywords both calls take, checked once, and `strings`, the check of
  a call's texts.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from .._client.attempt import exhausted
from .._client.route import options_for
from .._errors import AllTargetsFailedError, AnyInferError, ConfigError, ProviderTimeoutError
from .._types import AttemptRecord, ResolvedTarget, Timing, Usage
from .._values import value_class

if TYPE_CHECKING:
    from decimal import Decimal

    from .._adapters.base import Adapter
    from .._client.health import Breakers
    from .._client.route import Route
    from .._client.targets import Targets
    from .._observers import Telemetry
    from .._telemetry import UnaryOperation
    from ._observe import UnaryInstrument
    from ._types import EmbedRequest, RerankRequest

__all__ = [
    "DEFAULT_CONCURRENCY",
    "Reply",
    "Served",
    "UnaryCall",
    "UnaryRunner",
    "UnarySpec",
    "adapter_class",
    "all_or_nothing",
    "exhausted",
    "ms_since",
    "notes",
    "priced",
    "refuse_mixed_models",
    "request_cost",
    "route_one",
    "sealed",
    "strings",
    "summed",
    "timed",
    "walk",
]

A = TypeVar("A", bound="Reply")
T = TypeVar("T")
Q = TypeVar("Q", "EmbedRequest", "RerankRequest")


DEFAULT_CONCURRENCY = 4
"""Requests of one unary call in flight at once, unless the call says otherwise."""


@value_class(kw_only=True)
class UnaryCall:
    """The keywords every unary call takes besides its inputs, checked once when built.

    `AsyncClient.embed` and `AsyncClient.rerank` state their keywords explicitly (they
    are API) and hand them, as given, to `EmbedCall` or `RerankCall`, which build on
    this: building one checks every argument, so a bad one raises `ConfigError` naming
    it before anything is sent, and the runners read the checked values instead of
    restating the keyword lists.

    Attributes:
        batch_size: Most inputs per request, when the caller limits it.
        concurrency: Requests in flight at once, when the caller says.
        timeout_s: Per-request timeout.
        provider_options: Extra body fields per provider id.
        metadata: Caller metadata for telemetry (a checked copy once built).

    Raises:
        ConfigError: A batch size or concurrency that is not an integer >= 1, a
            timeout that is not a positive number, metadata that is not strings to
            strings.
    """

    batch_size: int | None = None
    concurrency: int | None = None
    timeout_s: float | None = None
    provider_options: Mapping[str, Mapping[str, Any]] | None = None
    metadata: Mapping[str, str] | None = None

    def _check_common(self) -> None:
        """The checks of the keywords every unary call takes (its `__post_init__` calls
        this after checking its inputs)."""
        from .._client.validate import check_metadata, need_int, need_number

        object.__setattr__(self, "metadata", check_metadata(self.metadata))
        for name, value in (("batch_size", self.batch_size), ("concurrency", self.concurrency)):
            if value is not None:
                need_int(value, name, minimum=1)
        if self.timeout_s is not None:
            need_number(self.timeout_s, "timeout_s", positive=True)

    @property
    def in_flight(self) -> int:
        """Requests in flight at once: `concurrency`, else `DEFAULT_CONCURRENCY`."""
        return self.concurrency or DEFAULT_CONCURRENCY


def strings(value: object, *, call: str, name: str, noun: str, single: bool) -> tuple[str, ...]:
    """A unary call's texts (embed's inputs, rerank's documents) as a non-empty tuple of
    strings.

    Args:
        value: What the caller passed.
        call: The call, for messages (`"rerank()"`).
        name: The parameter (`"documents"`).
        noun: One item, for the empty-call message (`"document"`).
        single: Whether one string stands for one item (embed's inputs); otherwise one
            string is refused, since it is not a list.

    Raises:
        ConfigError: For a value that is not a sequence of strings (nor, with
            `single`, one string), an empty one, or an item that is not a string.
    """
    items = (value,) if single and isinstance(value, str) else value
    if isinstance(items, str | bytes | bytearray) or not isinstance(items, Sequence):
        accepts = "a string or a sequence of strings" if single else "a sequence of strings"
        hint = " (one string is not a list)" if isinstance(value, str) else ""
        raise ConfigError(f"{call}: {name} must be {accepts}, got {type(value).__name__}{hint}")
    texts = tuple(items)
    if not texts:
        raise ConfigError(f"{call} needs at least one {noun}")
    for i, item in enumerate(texts):
        if not isinstance(item, str):
            raise ConfigError(f"{call}: {name}[{i}] must be a string, got {type(item).__name__}")
    return texts


class Reply(Protocol):
    """A unary reply (`EmbedReply`, `RerankReply`): notices, sub-timings and usage."""

    @property
    def warnings(self) -> tuple[str, ...]: ...

    @property
    def phases(self) -> Mapping[str, float]: ...

    @property
    def usage(self) -> Usage: ...


async def walk(
    route: Route,
    targets: Sequence[ResolvedTarget],
    breakers: Breakers,
    attempt: Callable[[ResolvedTarget], Awaitable[A]],
    trail: list[AttemptRecord],
    *,
    what: str,
    on_record: Callable[[AttemptRecord, A | None], None] | None = None,
) -> tuple[A, ResolvedTarget]:
    """Try `attempt` on each target of `route` in order, until one answers.

    Args:
        route: The route's retry policy, decisions and breaker settings.
        targets: The resolved targets, in fallback order.
        breakers: The client's circuit breakers.
        attempt: Sends the request to one target and returns its checked reply;
            raises an `AnyInferError` for a failure the route decides on.
        trail: Receives every attempt, in the order they end.
        what: The operation's name for the error message (`"embed()"`).
        on_record: Called with each record as it joins `trail`, and the reply for the
            `"ok"` one (`None` for the others): the call's telemetry. Runners pass it
            only when the call is observed.

    Returns:
        The first reply and the target that gave it.

    Raises:
        AllTargetsFailedError: No target answered.
        AnyInferError: A failure `route.decide` says to raise.
    """
    from .._client.attempt import _counts_against_health

    def note(record: AttemptRecord, reply: A | None = None) -> None:
        trail.append(record)
        if on_record is not None:
            on_record(record, reply)

    threshold, cooldown = route.breaker_threshold, route.breaker_cooldown_s
    for target in targets:
        key = str(target)
        if not breakers.allow(key, threshold, cooldown):
            note(AttemptRecord(target, "skipped_unhealthy"))
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
                        note(AttemptRecord(target, "retried", exc.to_info(), timing))
                        await asyncio.sleep(delay)
                        if breakers.allow(key, threshold, cooldown):
                            continue
                        break
                note(AttemptRecord(target, "failed", exc.to_info(), timing))
                if decision == "raise":
                    raise
                break
            except BaseException:
                breakers.release(key)  # cancelled: no verdict on the target
                raise
            breakers.success(key)
            phases = reply.phases
            timing = Timing(start, total_ms=ms_since(start), phases=dict(phases))
            note(AttemptRecord(target, "ok", None, timing), reply)
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


def ms_since(start: float) -> float:
    """Milliseconds since `start` (a `time.monotonic()` reading)."""
    return (time.monotonic() - start) * 1000.0


def refuse_mixed_models(
    targets: Sequence[ResolvedTarget], *, what: str, override: str, why: str
) -> None:
    """Refuse, before dispatch, a route whose targets are not all the first's model.

    Embedding vectors and relevance scores are only comparable within one model, so a
    request served by a fallback of another model would silently mix them (in an index,
    or in one merged ranking).

    Args:
        targets: The route's resolved targets, in fallback order.
        what: The operation, for the message (`"rerank()"`).
        override: The keyword that declares the models interchangeable
            (`"same_model=True"`), named in the message.
        why: What would go wrong, completing "… uses model X, not Y like T; ".

    Raises:
        ConfigError: Naming the first target that differs and why it is refused.
    """
    for other in targets[1:]:
        first = targets[0]
        if other.model != first.model:
            raise ConfigError(
                f"{what}: fallback target {other} uses model {other.model!r}, not "
                f"{first.model!r} like {first}; {why}. Use targets of one model, or pass "
                f"{override} if you know they are interchangeable",
                provider=other.provider,
            )


async def all_or_nothing(
    calls: Sequence[Callable[[], Awaitable[T]]],
    concurrency: int,
    trail: list[AttemptRecord],
) -> list[T]:
    """Run `calls` at most `concurrency` at a time; their results, in call order.

    The first call to fail stops the others (a call not yet started never sends) and
    its error is raised carrying the whole `trail` (`sealed`): a partial result is
    never returned.
    """
    gate = asyncio.Semaphore(concurrency)
    failed = asyncio.Event()

    async def one(call: Callable[[], Awaitable[T]]) -> T:
        async with gate:
            if failed.is_set():  # another call failed: the whole call is over
                raise asyncio.CancelledError
            try:
                return await call()
            except BaseException:
                failed.set()
                raise

    tasks = [asyncio.ensure_future(one(call)) for call in calls]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        for task in tasks:
            if task.done() and not task.cancelled() and task.exception() is not None:
                raise sealed(task.exception(), trail)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return [task.result() for task in tasks]


def request_cost(targets: Targets, target: ResolvedTarget, reply: Reply) -> Decimal | None:
    """One request's cost at the target that served it (`PricingTable.unary_cost`: the
    reply's input tokens, or the search units it bills, a rerank reply's
    `search_units`, for a model billed by them), or `None` when its usage or the
    model's price is unknown. Both the call's total (`priced`) and each attempt's
    telemetry (`_observe`) price a reply here."""
    return targets.pricing.unary_cost(
        reply.usage,
        target.provider_id,
        target.model,
        search_units=getattr(reply, "search_units", None),
        convention=targets.convention(target.provider_id),
    )


def priced(
    targets: Targets, usage: Usage, served: Sequence[ResolvedTarget], replies: Sequence[Reply]
) -> Usage:
    """`usage` with `cost_usd`: each request priced at the target that served it
    (`request_cost`); unchanged when any request's cost is unknown.

    Args:
        targets: The client's targets (pricing and adapter profiles).
        usage: The call's summed usage.
        served: The target that served each request, in request order.
        replies: Each request's reply, in the same order.
    """
    from decimal import Decimal

    total = Decimal(0)
    for target, reply in zip(served, replies, strict=True):
        cost = request_cost(targets, target, reply)
        if cost is None:
            return usage
        total += cost
    return usage.with_cost(total)


def adapter_class(targets: Targets, target: ResolvedTarget) -> type[Adapter]:
    """The adapter class serving `target` (nothing is built or resolved)."""
    settings = targets.settings_for(target.provider)
    return targets.registry.adapter_class(settings.provider_id)


@value_class
class UnarySpec(Generic[Q, A]):
    """What one unary operation plugs into the shared request flow (`run_requests`).

    Attributes:
        what: The call, for messages (`"rerank()"`).
        kind: The request, for a timeout's message (`"rerank"`).
        send: Calls the adapter (`Adapter.embed`, `Adapter.rerank`).
        check: The reply's guarantees: raises a typed error for a reply that breaks
            them.
    """

    what: str
    kind: str
    send: Callable[[Adapter, Q], Awaitable[A]]
    check: Callable[[A, Q, ResolvedTarget], None]


@value_class
class Served(Generic[A]):
    """Every request of a unary call, answered: what a runner builds its result from.

    Attributes:
        replies: Each request's reply, in request order.
        batch_targets: The target that served each request, in the same order.
        usage: Usage summed over the requests (`summed`), priced (`priced`).
        timing: From the first request sent to the last reply; `phases` sums the
            replies' sub-timings.
        attempts: Every attempt of every request, in the order they ended.
        warnings: The replies' warnings, each once (`notes`).
    """

    replies: tuple[A, ...]
    batch_targets: tuple[ResolvedTarget, ...]
    usage: Usage
    timing: Timing
    attempts: tuple[AttemptRecord, ...]
    warnings: tuple[str, ...]


class UnaryRunner:
    """What both unary runners (`EmbedRunner`, `RerankRunner`) hold and how they send a
    call: the client's targets, breakers and observer hub, the call's instrument
    (`_instrument`) and its requests sent (`run_requests`).

    Args:
        targets: Adapters, profiles, pricing and capabilities.
        breakers: The client's circuit breakers (shared with generation).
        telemetry: The client's observer hub (`None`: no telemetry).
    """

    __slots__ = ("_breakers", "_targets", "_telemetry")

    def __init__(
        self, targets: Targets, breakers: Breakers, telemetry: Telemetry | None = None
    ) -> None:
        self._targets = targets
        self._breakers = breakers
        self._telemetry = telemetry

    def _instrument(self, call: UnaryCall, operation: UnaryOperation) -> UnaryInstrument:
        """The call's instrument (`SILENT` when nobody observes the client now)."""
        from ._observe import unary_instrument

        return unary_instrument(self._telemetry, call.metadata or {}, operation)

    async def run_requests(
        self,
        route: Route,
        resolved: Sequence[ResolvedTarget],
        spec: UnarySpec[Q, A],
        requests: Sequence[tuple[range, Q]],
        call: UnaryCall,
        tel: UnaryInstrument,
    ) -> Served[A]:
        """Send a unary call's requests, each walked over the route, and gather the
        replies.

        The requests run at most `call.in_flight` at once and the first failure stops
        the call (`all_or_nothing`). Each attempt is reported to `tel`
        (`UnaryInstrument.reporter`, the batch numbered by its position in `requests`).

        Args:
            route: The route's decisions.
            resolved: Its targets, in fallback order.
            spec: The operation's adapter call and reply checks.
            requests: Each request with the positions of its inputs in the caller's.
            call: The call's checked keywords (concurrency, provider options).
            tel: The call's instrument.

        Raises:
            AllTargetsFailedError: A request found no target that answered.
            AnyInferError: An error the route's `decide` raises, or a reply `spec.check`
                refuses; either carrying the whole call's trail.
        """
        targets, breakers = self._targets, self._breakers
        started = time.monotonic()
        trail: list[AttemptRecord] = []
        provider_options = call.provider_options or {}

        def one(
            index: int, span: range, request: Q
        ) -> Callable[[], Awaitable[tuple[A, ResolvedTarget]]]:
            report = tel.reporter(targets, batch=index, input_count=len(span))
            return lambda: route_one(
                targets, breakers, route, resolved, spec, request, provider_options, trail, report
            )

        results = await all_or_nothing(
            [one(i, span, request) for i, (span, request) in enumerate(requests)],
            call.in_flight,
            trail,
        )
        replies = tuple(reply for reply, _ in results)
        served = tuple(target for _, target in results)
        warnings, phases = notes(replies)
        return Served(
            replies=replies,
            batch_targets=served,
            usage=priced(targets, summed([reply.usage for reply in replies]), served, replies),
            timing=Timing(started, total_ms=ms_since(started), phases=phases),
            attempts=tuple(trail),
            warnings=warnings,
        )


async def route_one(
    targets: Targets,
    breakers: Breakers,
    route: Route,
    resolved: Sequence[ResolvedTarget],
    spec: UnarySpec[Q, A],
    base: Q,
    provider_options: Mapping[str, Mapping[str, Any]],
    trail: list[AttemptRecord],
    on_record: Callable[[AttemptRecord, A | None], None] | None = None,
) -> tuple[A, ResolvedTarget]:
    """One request's walk over the route (`walk`).

    Each attempt sends `base` for the target's model, with the call's `provider_options`
    for the target's instance (else its provider id), through `spec.send` under the
    request's timeout, and checks the reply with `spec.check`.

    Args:
        targets: Adapters of the client.
        breakers: The client's circuit breakers.
        route: The route's decisions.
        resolved: Its targets, in fallback order.
        spec: The operation's adapter call and reply checks.
        base: The request, before the target's model and options.
        provider_options: Extra body fields per provider id.
        trail: Receives every attempt.
        on_record: Telemetry for each attempt (see `walk`).
    """

    async def attempt(target: ResolvedTarget) -> A:
        options = options_for(target, provider_options)
        request = replace(base, model=target.model, provider_options=dict(options))
        adapter = targets.adapter(target.provider)
        # An adapter that bounds its own I/O (`HTTPAdapter.send`) gets no deadline on top:
        # one would end a wait for a pooled connection as a provider timeout, before
        # the pool's own `PoolExhaustedError`, and retry it.
        deadline = None if adapter.bounds_calls else request.timeout_s
        reply = await timed(spec.send(adapter, request), deadline, target, spec.kind)
        spec.check(reply, request, target)
        return reply

    return await walk(
        route, resolved, breakers, attempt, trail, what=spec.what, on_record=on_record
    )


def summed(usages: Sequence[Usage]) -> Usage:
    """Usage summed over requests: a field is known only when every request reported it."""

    def total(name: str) -> int | None:
        values: list[int | None] = [getattr(u, name) for u in usages]
        known = [v for v in values if v is not None]
        if not values or len(known) != len(values):
            return None
        return sum(known)

    inp = total("input_tokens")
    tot = total("total_tokens")
    return Usage(input_tokens=inp, total_tokens=tot if tot is not None else inp)


def notes(replies: Iterable[Reply]) -> tuple[tuple[str, ...], dict[str, float]]:
    """The replies' warnings (each once, in the order first seen) and their phases
    summed by name."""
    warnings: dict[str, None] = {}
    phases: dict[str, float] = {}
    for reply in replies:
        warnings.update(dict.fromkeys(reply.warnings))
        for name, ms in reply.phases.items():
            phases[name] = phases.get(name, 0.0) + ms
    return tuple(warnings), phases
