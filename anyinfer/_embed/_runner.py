"""The client side of `embed()`: the vector-space rule, batching, and each batch's route.

Generation's `Router` walks an event stream (content shown or not, redirects, repairs);
an embedding batch is one request and one JSON answer, so this runner walks the route
itself, with the same decisions: `Route.decide` says retry, fall back or raise;
`RetryPolicy.delay` says how long to wait (exponential backoff with jitter, or the
provider's `Retry-After`); the client's `Breakers` skip an open target, count failures
that say something about the target (`attempt._counts_against_health`) and close on
success. Every attempt is an `AttemptRecord` in the result's trail, and a route that
runs out raises `AllTargetsFailedError` carrying them.

Before anything is sent, `check_vector_space` refuses a route whose targets cannot be
proven to produce vectors of one space: vectors of different models are not comparable,
so a fallback to another model would silently corrupt an index.

Inputs are cut into batches of at most the adapter's `embed_max_batch` (or the call's
`batch_size`), sent concurrently up to `concurrency` at once, and put back in input
order; usage is summed over the batches. A failed batch cancels the others and raises:
a partial result is never returned.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from .._adapters.profile import UsageConvention
from .._client.validate import need_int, need_number
from .._errors import ConfigError, ProtocolError
from .._types import AttemptRecord, ResolvedTarget, Timing, Usage
from ._route import ms_since, sealed, timed, walk
from ._types import Embeddings, EmbedEncoding, EmbedReply, EmbedRequest

if TYPE_CHECKING:
    from array import array

    from .._adapters.base import Adapter
    from .._client.health import Breakers
    from .._client.route import Route
    from .._client.targets import Targets

__all__ = ["DEFAULT_CONCURRENCY", "EmbedRunner", "check_vector_space", "split_batches"]

DEFAULT_CONCURRENCY = 4
"""Batches of one `embed()` call in flight at once, unless the call says otherwise."""


def check_vector_space(
    targets: Sequence[ResolvedTarget], dimensions: int | None, *, same_space: bool
) -> None:
    """Refuse, before dispatch, a route whose targets may embed into different spaces.

    Every target must name the same model as the first (the dimensions are the call's,
    so they agree by construction). `same_space=True` is the caller's declaration that
    differently named models (an Azure deployment of `text-embedding-3-small`, say)
    produce the same vectors.

    Raises:
        ConfigError: Naming the first target that differs and why it is refused.
    """
    if same_space or len(targets) < 2:
        return
    first = targets[0]
    for other in targets[1:]:
        if other.model != first.model:
            dims = "" if dimensions is None else f" at {dimensions} dimensions"
            raise ConfigError(
                f"embed(): fallback target {other} uses model {other.model!r}, not "
                f"{first.model!r} like {first}; vectors of different models are not "
                f"comparable{dims}, so serving a batch from it would silently mix vector "
                "spaces. Use targets of one model, or pass same_vector_space=True if you "
                "know they produce identical vectors",
                provider=other.provider,
            )


def _texts(inputs: str | Sequence[str]) -> tuple[str, ...]:
    """The call's inputs as a tuple of strings (one string is one input)."""
    items = (inputs,) if isinstance(inputs, str) else inputs
    if isinstance(items, bytes | bytearray) or not isinstance(items, Sequence):
        raise ConfigError(f"inputs must be a string or a sequence of strings, got {inputs!r:.80}")
    texts = tuple(items)
    if not texts:
        raise ConfigError("embed() needs at least one input")
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise ConfigError(f"inputs[{i}] must be a string, got {type(t).__name__}")
    return texts


def split_batches(count: int, size: int) -> list[range]:
    """`range(count)` cut into consecutive ranges of at most `size` indices."""
    return [range(start, min(start + size, count)) for start in range(0, count, size)]


class EmbedRunner:
    """Runs `embed()` calls over the client's adapters and breakers.

    Args:
        targets: Adapters, profiles and pricing.
        breakers: The client's circuit breakers (shared with generation).
    """

    __slots__ = ("_breakers", "_targets")

    def __init__(self, targets: Targets, breakers: Breakers) -> None:
        self._targets = targets
        self._breakers = breakers

    async def embed(
        self,
        route: Route,
        targets: tuple[ResolvedTarget, ...],
        *,
        inputs: str | Sequence[str],
        dimensions: int | None = None,
        input_type: str | None = None,
        encoding: EmbedEncoding = "base64",
        batch_size: int | None = None,
        concurrency: int | None = None,
        same_vector_space: bool = False,
        timeout_s: float | None = None,
        provider_options: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> Embeddings:
        """Check an `embed()` call (see `AsyncClient.embed`), then `run` it.

        Raises:
            ConfigError: Before anything is sent, for an invalid argument, a target
                whose adapter does not embed, or a route mixing vector spaces.
        """
        texts = _texts(inputs)
        if dimensions is not None:
            need_int(dimensions, "dimensions")
            if dimensions <= 0:
                raise ConfigError(f"dimensions must be positive, got {dimensions!r}")
        for name, value in (("batch_size", batch_size), ("concurrency", concurrency)):
            if value is not None:
                need_int(value, name)
                if value <= 0:
                    raise ConfigError(f"{name} must be positive, got {value!r}")
        if encoding not in ("base64", "float"):
            raise ConfigError(f"encoding must be 'base64' or 'float', got {encoding!r}")
        if input_type is not None and (not isinstance(input_type, str) or not input_type):
            raise ConfigError(f"input_type must be a non-empty string, got {input_type!r}")
        if timeout_s is not None:
            need_number(timeout_s, "timeout_s")
            if timeout_s <= 0:
                raise ConfigError(f"timeout_s must be positive, got {timeout_s!r}")
        if type(same_vector_space) is not bool:
            raise ConfigError(f"same_vector_space must be a bool, got {same_vector_space!r}")
        check_vector_space(targets, dimensions, same_space=same_vector_space)
        for t in targets:
            if not self._class_of(t).serves_embeddings():
                raise ConfigError(
                    f"embed(): {t} cannot embed: its provider ({t.provider_id}) has no "
                    "embeddings support in AnyInfer",
                    provider=t.provider,
                )
        base = EmbedRequest(
            model=targets[0].model,
            inputs=texts,
            dimensions=dimensions,
            input_type=input_type,
            encoding=encoding,
            timeout_s=timeout_s,
        )
        return await self.run(
            route,
            targets,
            base,
            batch_size=batch_size,
            concurrency=concurrency or DEFAULT_CONCURRENCY,
            provider_options=provider_options or {},
        )

    async def run(
        self,
        route: Route,
        targets: tuple[ResolvedTarget, ...],
        base: EmbedRequest,
        *,
        batch_size: int | None,
        concurrency: int,
        provider_options: Mapping[str, Mapping[str, Any]],
    ) -> Embeddings:
        """Embed `base.inputs` over `route`: batches, each routed, reassembled in order.

        Raises:
            AllTargetsFailedError: A batch found no target that answered.
            AnyInferError: An error the route's `decide` raises, or a reply that breaks
                the embedding guarantees (`ProtocolError`).
        """
        inputs = base.inputs
        size = batch_size or min(self._max_batch(t) for t in targets)
        batches = split_batches(len(inputs), size)
        trail: list[AttemptRecord] = []
        gate = asyncio.Semaphore(concurrency)
        started = time.monotonic()

        failed = asyncio.Event()

        async def one(span: range) -> tuple[EmbedReply, ResolvedTarget]:
            async with gate:
                if failed.is_set():  # another batch failed: the call is over, send nothing
                    raise asyncio.CancelledError
                request = replace(base, inputs=inputs[span.start : span.stop])
                try:
                    return await self._route_batch(route, targets, request, provider_options, trail)
                except BaseException:
                    failed.set()
                    raise

        tasks = [asyncio.ensure_future(one(span)) for span in batches]
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
            for task in tasks:
                if task.done() and not task.cancelled() and task.exception() is not None:
                    raise sealed(task.exception(), trail)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        results = [task.result() for task in tasks]
        return self._assemble(results, base, started, trail)

    def _class_of(self, target: ResolvedTarget) -> type[Adapter]:
        """The adapter class serving `target` (nothing is built or resolved)."""
        settings = self._targets.settings_for(target.provider)
        return self._targets.registry.adapter_class(settings.provider_id)

    def _max_batch(self, target: ResolvedTarget) -> int:
        return max(1, int(self._class_of(target).embed_max_batch))

    async def _route_batch(
        self,
        route: Route,
        targets: tuple[ResolvedTarget, ...],
        base: EmbedRequest,
        provider_options: Mapping[str, Mapping[str, Any]],
        trail: list[AttemptRecord],
    ) -> tuple[EmbedReply, ResolvedTarget]:
        """One batch's walk over the route (`_route.walk`)."""

        async def attempt(target: ResolvedTarget) -> EmbedReply:
            options = provider_options.get(target.provider) or provider_options.get(
                target.provider_id, {}
            )
            request = replace(base, model=target.model, provider_options=dict(options))
            adapter = self._targets.adapter(target.provider)
            reply = await timed(adapter.embed(request), request.timeout_s, target, "embedding")
            _check_reply(reply, request, target)
            return reply

        return await walk(route, targets, self._breakers, attempt, trail, what="embed()")

    def _assemble(
        self,
        results: list[tuple[EmbedReply, ResolvedTarget]],
        base: EmbedRequest,
        started: float,
        trail: list[AttemptRecord],
    ) -> Embeddings:
        vectors: list[array[float]] = []
        usages: list[Usage] = []
        warnings: list[str] = []
        phases: dict[str, float] = {}
        for reply, _target in results:
            vectors.extend(reply.vectors)
            usages.append(reply.usage)
            for w in reply.warnings:
                if w not in warnings:
                    warnings.append(w)
            for name, ms in reply.phases.items():
                phases[name] = phases.get(name, 0.0) + ms
        dims = len(vectors[0]) if vectors else (base.dimensions or 0)
        for i, vec in enumerate(vectors):
            if len(vec) != dims:
                first = results[0][1]
                error = ProtocolError(
                    f"embed(): input {i} came back with {len(vec)} dimensions, input 0 with "
                    f"{dims}: the batches were not embedded into one vector space",
                    provider=first.provider,
                )
                error.attempts = tuple(trail)
                raise error
        first_target = results[0][1] if results else None
        usage = _summed(usages)
        if first_target is not None:
            usage = self._priced(first_target, usage, [t for _, t in results], usages)
        timing = Timing(started, total_ms=ms_since(started), phases=phases)
        return Embeddings(
            vectors=tuple(vectors),
            dimensions=dims,
            target=first_target if first_target is not None else ResolvedTarget("", base.model),
            usage=usage,
            timing=timing,
            attempts=tuple(trail),
            batch_targets=tuple(t for _, t in results),
            warnings=tuple(warnings),
        )

    def _priced(
        self,
        first: ResolvedTarget,
        usage: Usage,
        served: list[ResolvedTarget],
        usages: list[Usage],
    ) -> Usage:
        """`usage` with `cost_usd`: each batch priced at its target (embedding models
        generate no tokens, so output counts as 0); unknown if any batch's is."""
        from decimal import Decimal

        total = Decimal(0)
        for target, batch in zip(served, usages, strict=True):
            if batch.input_tokens is None:
                return usage
            cost = self._targets.pricing.cost(
                replace(batch, output_tokens=0),
                target.provider_id,
                target.model,
                convention=self._targets.profile(target.provider_id).usage or UsageConvention(),
            )
            if cost is None:
                return usage
            total += cost
        return replace(usage, cost_usd=total)


def _check_reply(reply: EmbedReply, request: EmbedRequest, target: ResolvedTarget) -> None:
    """The guarantees every adapter's reply must keep (count, and the dimensions asked)."""
    if len(reply.vectors) != len(request.inputs):
        raise ProtocolError(
            f"{target.provider}: {len(reply.vectors)} embedding(s) for "
            f"{len(request.inputs)} input(s)",
            provider=target.provider,
        )
    want = request.dimensions
    if want is None and reply.vectors:
        want = len(reply.vectors[0])
    for i, vec in enumerate(reply.vectors):
        if len(vec) != want:
            asked = "asked for" if request.dimensions is not None else "in embedding 0"
            raise ProtocolError(
                f"{target.provider}: embedding {i} has {len(vec)} dimensions, {want} "
                f"{'were' if request.dimensions is not None else 'are'} {asked}",
                provider=target.provider,
            )


def _summed(usages: list[Usage]) -> Usage:
    """Usage summed over batches: a field is known only when every batch reported it."""

    def total(name: str) -> int | None:
        values: list[int | None] = [getattr(u, name) for u in usages]
        known = [v for v in values if v is not None]
        if not values or len(known) != len(values):
            return None
        return sum(known)

    inp = total("input_tokens")
    tot = total("total_tokens")
    return Usage(input_tokens=inp, total_tokens=tot if tot is not None else inp)
