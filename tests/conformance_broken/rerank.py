"""Deliberately broken Cohere rerank adapters: each reproduces one real class of bug.

The rerank checks of the conformance suite must catch every one of them and name the
guarantee it breaks (`BROKEN_RERANK` maps provider id -> (class, guarantee)). Everything
else is Cohere's own adapter, which is correct.
"""

from __future__ import annotations

from anyinfer import ProviderError
from anyinfer._embed._types import RankedDocument, RerankReply, RerankRequest
from anyinfer._providers.cohere import CohereAdapter

__all__ = ["BROKEN_RERANK"]


class InvertsScores(CohereAdapter):
    """Reports `1 - relevance_score`, as if the provider sent a distance.

    Indices stay right, so the set of results can look plausible; the core then orders
    by the inverted scores, and the best document comes last.
    """

    async def rerank(self, request: RerankRequest) -> RerankReply:
        reply = await super().rerank(request)
        flipped = tuple(RankedDocument(r.index, 1.0 - r.score, r.document) for r in reply.ranked)
        return RerankReply(ranked=flipped, usage=reply.usage, search_units=reply.search_units)


class EmptyRankingOnError(CohereAdapter):
    """Answers a refused request with every document at score 0 instead of raising.

    "Best effort" reranking: the call returns a ranking, and the failed request's
    documents are silently ranked last. A failed request must fail the call.
    """

    async def rerank(self, request: RerankRequest) -> RerankReply:
        try:
            return await super().rerank(request)
        except ProviderError:
            docs = request.documents
            keep = len(docs) if request.top_n is None else min(request.top_n, len(docs))
            zeros = tuple(RankedDocument(i, 0.0, docs[i]) for i in range(keep))
            return RerankReply(ranked=zeros)


BROKEN_RERANK: dict[str, tuple[type[CohereAdapter], str]] = {
    "broken-rerank-inverts-scores": (InvertsScores, "rerank-sorted"),
    "broken-rerank-empty-on-error": (EmptyRankingOnError, "rerank-errors"),
}
"""Provider id -> (adapter class, the rerank guarantee the suite must report broken)."""
