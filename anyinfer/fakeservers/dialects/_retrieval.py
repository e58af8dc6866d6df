"""What the dialects of providers that only embed and rerank share.

Voyage AI, Jina AI and Hugging Face TEI have no generation endpoint: their dialects
answer embedding requests (`is_embedding`) and rerank requests (`is_rerank`), each
request answered whole as one JSON body, and nothing else. `RetrievalDialect` is their
base: `is_generation` is false for every request and `render` refuses.

The fake's relevance scores are deterministic in the texts, like its vectors
(`dialects._embeddings.fake_vector`): a document's score is the cosine of its vector
and the query's, moved to `[0, 1]` and rounded to float32. Documents that share words
with the query rank first, so a rerank over them behaves like a (very small) real one.
`fake_ranking` orders documents best first (ties keep their order) and keeps `top`.
"""

from __future__ import annotations

import math
from abc import abstractmethod
from typing import Any

from .._script import Fault, Frame, Rendered, Script
from ._base import Dialect, json_bytes
from ._embeddings import fake_vector, float32_json

__all__ = [
    "RetrievalDialect",
    "fake_ranking",
    "fake_relevance",
    "positive_int",
    "string_list",
]


def fake_relevance(query: str, document: str) -> float:
    """The fake's relevance of `document` to `query`, in `[0, 1]`, a float32 value."""
    q = fake_vector(query)
    d = fake_vector(document)
    cosine = sum(a * b for a, b in zip(q, d, strict=True))
    return float32_json(min(1.0, max(0.0, (1.0 + cosine) / 2.0)))


def fake_ranking(
    query: str, documents: list[str], top: int | None = None
) -> list[tuple[int, float]]:
    """`(index, score)` of each document, best first (ties in document order), at most
    `top` of them."""
    scored = [(i, fake_relevance(query, d)) for i, d in enumerate(documents)]
    scored.sort(key=lambda pair: (-pair[1], pair[0]))
    return scored if top is None else scored[:top]


def string_list(value: Any) -> list[str] | None:
    """`value` as a list of strings (one string is a list of one), else `None`."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    return None


def positive_int(value: Any) -> bool:
    """Whether `value` is an integer (not a bool) of at least 1."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


class RetrievalDialect(Dialect):
    """A protocol that embeds and reranks but does not generate.

    Subclasses implement `render_error`, the embedding trio (`is_embedding`,
    `embedding_fault`, `render_embeddings`) and the rerank trio (`is_rerank`,
    `rerank_fault`, `render_rerank`).
    """

    content_type = "application/json"

    def render(self, script: Script, *, stream: bool) -> Rendered:
        """Never called: the protocol has no generation endpoint (`is_generation`).

        Raises:
            NotImplementedError: Always.
        """
        raise NotImplementedError(f"the {self.name} dialect serves no generation")

    def is_generation(self, method: str, path: str) -> bool:
        """No request is a generation."""
        return False

    def malformed_body(self) -> bytes:
        """Garbage that makes a JSON answer invalid."""
        return b"{not json"

    @abstractmethod
    def is_rerank(self, method: str, path: str) -> bool:
        """Whether a request asks for a ranking."""

    @abstractmethod
    def rerank_fault(self, request_json: Any) -> Fault | None:
        """The error the real server answers for a rerank body it refuses, or `None`."""

    @abstractmethod
    def render_rerank(self, request_json: Any) -> Rendered:
        """The successful answer to a rerank request."""

    def json_answer(
        self,
        payload: Any,
        *,
        status: int = 200,
        headers: tuple[tuple[str, str], ...] = (),
        retry_after: float | None = None,
    ) -> Rendered:
        """One JSON body as one frame (a script's faults apply to it)."""
        extra = headers
        if retry_after is not None:
            extra += (("retry-after", f"{math.ceil(retry_after):d}"),)
        return Rendered(
            status,
            (("content-type", "application/json"), *extra),
            (Frame(json_bytes(payload), sentinel=True),),
            malformed=self.malformed_body(),
        )
