"""The client side of `rerank()`: checks, the same-model rule, splitting and merging.

Before anything is sent, the call is checked (a non-empty query, a non-empty sequence of
string documents, a positive `top_n`), every target's adapter must rerank, and every
fallback target must name the first target's model (`_route.refuse_mixed_models`):
relevance scores of different models are not on one scale, so a ranking merged from
them, or compared with another call's, would be silently wrong.

A document list longer than the adapters' `rerank_max_documents` (or the call's
`batch_size`) is cut into consecutive requests, sent concurrently up to `concurrency`
at once, each walked over the route (`_route.walk`: retries, breakers, fallbacks). The
replies are merged by score, best first (ties keep the caller's order), and `top_n` is
applied after the merge; each request asks for at most `top_n` itself, since the best
`top_n` overall are each among the best `top_n` of their request. Every `index` in the
result points into the caller's documents. Usage and search units are summed over the
requests. A failed request stops the call (`_route.all_or_nothing`): a partial ranking
is never returned.

Telemetry and pricing are the embed runner's (`_observe`, `_route.priced`): an observed
call reports `OperationStarted` (operation `"rerank"`; the query and documents reach
payload observers only), a `BatchAttemptEnded` per attempt of each request and
`OperationEnded`; each request is priced at the target that served it, by search units
where the model is billed by them (Cohere), else by input tokens.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import field, replace
from typing import TYPE_CHECKING

from .._adapters.base import refuse_unserved
from .._client.validate import need_int
from .._errors import ConfigError, ProtocolError
from .._types import ResolvedTarget
from .._values import value_class
from ._rankwire import is_finite_score, is_index
from ._route import UnaryCall, UnaryRunner, UnarySpec, adapter_class, refuse_mixed_models, strings
from ._runner import split_batches
from ._types import RankedDocument, Reranking, RerankReply, RerankRequest

if TYPE_CHECKING:
    from collections.abc import Awaitable

    from .._adapters.base import Adapter
    from .._client.route import Route
    from ._route import Served

__all__ = ["RerankCall", "RerankRunner", "check_reply", "merge"]


@value_class(kw_only=True)
class RerankCall(UnaryCall):
    """One `rerank()` call's arguments (see `AsyncClient.rerank`), checked when built.

    Attributes:
        query: The text the documents are ranked against.
        documents: The documents, as the caller passed them.
        docs: The documents as a tuple of strings.
        top_n: Return only the best `top_n`, when limited.
        same_model: The caller's declaration that every target of the route is the
            same model.

    Raises:
        ConfigError: For an empty or non-string query, documents that are not a
            non-empty sequence of strings, a `top_n` that is not an integer >= 1, a
            `same_model` that is not a bool, or a keyword `UnaryCall` refuses.
    """

    query: str
    documents: Sequence[str]
    docs: tuple[str, ...] = field(init=False)
    top_n: int | None = None
    same_model: bool = False

    def __post_init__(self) -> None:
        query = self.query
        if not isinstance(query, str):
            raise ConfigError(f"rerank(): query must be a string, got {type(query).__name__}")
        if not query.strip():
            raise ConfigError("rerank(): query must not be empty")
        docs = strings(
            self.documents, call="rerank()", name="documents", noun="document", single=False
        )
        object.__setattr__(self, "docs", docs)
        self._check_common()
        if self.top_n is not None:
            need_int(self.top_n, "top_n", minimum=1)
        if type(self.same_model) is not bool:
            raise ConfigError(f"same_model must be a bool, got {self.same_model!r}")


def _wanted(request: RerankRequest) -> int:
    """How many ranked documents a reply to `request` must hold."""
    count = len(request.documents)
    return count if request.top_n is None else min(request.top_n, count)


def check_reply(reply: RerankReply, request: RerankRequest, target: ResolvedTarget) -> None:
    """The guarantees every adapter's reply must keep: as many documents as asked for
    (all, or `top_n`), each index a distinct position in the request's documents, each
    score a finite number.

    Raises:
        ProtocolError: Naming what the reply broke.
    """
    provider = target.provider
    want = _wanted(request)
    if len(reply.ranked) != want:
        raise ProtocolError(
            f"{provider}: {len(reply.ranked)} ranked document(s) for {len(request.documents)} "
            f"document(s) sent, {want} expected",
            provider=provider,
        )
    seen: set[int] = set()
    for position, item in enumerate(reply.ranked):
        index, score = item.index, item.score
        if not is_index(index):
            raise ProtocolError(
                f"{provider}: result {position} has no integer index", provider=provider
            )
        if not 0 <= index < len(request.documents) or index in seen:
            raise ProtocolError(
                f"{provider}: result {position} has index {index}, not a distinct position "
                f"among the {len(request.documents)} document(s) sent",
                provider=provider,
            )
        seen.add(index)
        if not is_finite_score(score):
            raise ProtocolError(
                f"{provider}: result {position} has score {score!r}, not a finite number",
                provider=provider,
            )


def merge(
    replies: Sequence[tuple[int, RerankReply]], documents: Sequence[str], top_n: int | None
) -> tuple[RankedDocument, ...]:
    """One ranking from the replies of consecutive requests.

    Args:
        replies: Each reply with the position of its request's first document in the
            caller's documents.
        documents: The caller's documents.
        top_n: Keep only the best `top_n`.

    Returns:
        The documents best first (equal scores in the caller's order), each `index`
        pointing into `documents` and `document` its text.
    """
    scored = [
        (float(item.score), offset + item.index)
        for offset, reply in replies
        for item in reply.ranked
    ]
    scored.sort(key=lambda pair: (-pair[0], pair[1]))
    if top_n is not None:
        scored = scored[:top_n]
    return tuple(RankedDocument(index, score, documents[index]) for score, index in scored)


class RerankRunner(UnaryRunner):
    """Runs `rerank()` calls over the client's adapters and breakers.

    Args:
        targets: Adapters, profiles and pricing.
        breakers: The client's circuit breakers (shared with generation).
        telemetry: The client's observer hub (`None`: no telemetry).
    """

    __slots__ = ()

    async def rerank(
        self, route: Route, targets: tuple[ResolvedTarget, ...], call: RerankCall
    ) -> Reranking:
        """Run a `rerank()` call (see `AsyncClient.rerank`; `call` is already checked):
        check it against its route, then rank the documents in requests, each routed,
        and merge the rankings by score.

        Raises:
            ConfigError: Before anything is sent, for a target whose adapter does not
                rerank, or a route mixing models.
            AllTargetsFailedError: A request found no target that answered.
            AnyInferError: An error the route's `decide` raises, or a reply that breaks
                the ranking guarantees (`ProtocolError`).
        """
        if not call.same_model:
            refuse_mixed_models(
                targets,
                what="rerank()",
                override="same_model=True",
                why="relevance scores of different models are not on one scale, so a "
                "ranking served or merged from it would silently mix them",
            )
        refuse_unserved(
            "rerank", ((t, adapter_class(self._targets, t)) for t in targets), "rerank()"
        )
        base = RerankRequest(
            model=targets[0].model,
            query=call.query,
            documents=call.docs,
            top_n=call.top_n,
            timeout_s=call.timeout_s,
        )
        docs = base.documents
        size = call.batch_size or min(self._max_documents(t) for t in targets)
        spans = split_batches(len(docs), size)
        tel = self._instrument(call, "rerank")
        tel.started(targets, texts=docs, batch_count=len(spans), top_n=base.top_n, query=base.query)

        def request_for(span: range) -> RerankRequest:
            top_n = None if base.top_n is None else min(base.top_n, len(span))
            return replace(base, documents=docs[span.start : span.stop], top_n=top_n)

        requests = [(span, request_for(span)) for span in spans]
        with tel:
            served = await self.run_requests(route, targets, _RERANK, requests, call, tel)
            result = _assemble(served, spans, base)
        tel.ended(result, result_count=len(result.results), search_units=result.search_units)
        return result

    def _max_documents(self, target: ResolvedTarget) -> int:
        return max(1, int(adapter_class(self._targets, target).rerank_max_documents))


def _assemble(served: Served[RerankReply], spans: list[range], base: RerankRequest) -> Reranking:
    """The call's `Reranking`: the requests' rankings merged (`merge`), search units
    summed where every request reported them."""
    ranked = merge(
        [(span.start, reply) for span, reply in zip(spans, served.replies, strict=True)],
        base.documents,
        base.top_n,
    )
    units = [reply.search_units for reply in served.replies]
    return Reranking(
        results=ranked,
        target=served.batch_targets[0],
        usage=served.usage,
        timing=served.timing,
        search_units=None if None in units else sum(u for u in units if u is not None),
        attempts=served.attempts,
        batch_targets=served.batch_targets,
        warnings=served.warnings,
    )


def _send(adapter: Adapter, request: RerankRequest) -> Awaitable[RerankReply]:
    return adapter.rerank(request)


_RERANK: UnarySpec[RerankRequest, RerankReply] = UnarySpec("rerank()", "rerank", _send, check_reply)
"""What `rerank()` plugs into the shared request flow (`_route.UnaryRunner.run_requests`)."""
