"""What the dialects of providers that only embed and rerank share.

Voyage AI, Jina AI and Hugging Face TEI have no generation endpoint: their dialects
answer embedding requests (`is_embedding`) and rerank requests (`is_rerank`), each
request answered whole as one JSON body, and nothing else. `RetrievalDialect` is their
base: `is_generation` is false for every request and `render` refuses. Voyage AI and
Jina AI also share OpenAI's embeddings shapes, `POST …/rerank` and FastAPI's
`{"detail"}` errors: `IndexedRetrievalDialect`.

The fake's relevance scores are deterministic in the texts, like its vectors
(`dialects._embeddings.fake_vector`): a document's score is the cosine of its vector
and the query's, moved to `[0, 1]` and rounded to float32. Documents that share words
with the query rank first, so a rerank over them behaves like a (very small) real one.
`fake_ranking` orders documents best first (ties keep their order) and keeps `top`;
`rerank_tokens` is the fake's token count of a rerank.
"""

from __future__ import annotations

import base64
import math
import struct
from typing import Any, ClassVar

from .._script import EmbedShape, Fault, Frame, Rendered, Script
from ._base import Dialect, EmbeddingProfile, json_bytes
from ._embeddings import (
    EmbeddingRows,
    embedding_rows,
    embedding_texts,
    fake_vector,
    float32_json,
    read_openai_embeddings,
    string_list,
    token_count,
)

__all__ = [
    "IndexedRetrievalDialect",
    "RetrievalDialect",
    "indexed_entries",
    "fake_ranking",
    "fake_relevance",
    "positive_int",
    "rerank_tokens",
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


def rerank_tokens(query: str, documents: list[str]) -> int:
    """The fake's token count of a rerank: the query's tokens once per document plus
    every document's (as Voyage's FAQ counts them)."""
    return sum(token_count(query) + token_count(d) for d in documents)


def indexed_entries(rows: EmbeddingRows, as_base64: bool) -> list[dict[str, Any]]:
    """`rows` as OpenAI-shaped entries (`{"object": "embedding", "embedding", "index"}`,
    in the order the rows list them), each embedding numbers or base64 float32."""
    entries = []
    for index, vec in rows.entries:
        embedding: Any
        if as_base64 and not rows.floats:
            embedding = base64.b64encode(struct.pack(f"<{len(vec)}f", *vec)).decode("ascii")
        else:
            embedding = [float32_json(v) for v in vec]
        entries.append({"object": "embedding", "embedding": embedding, "index": index})
    return entries


def positive_int(value: Any) -> bool:
    """Whether `value` is an integer (not a bool) of at least 1."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


class RetrievalDialect(Dialect):
    """A protocol that embeds and reranks but does not generate.

    Subclasses implement `render_error`, the embedding hooks (`is_embedding`,
    `embedding_fault`, `embedding_inputs`, `render_embedding_answer`,
    `read_embedding_answer`) and the rerank ones (`rerank_fault`, `render_rerank`;
    `is_rerank` is `POST …/rerank` unless overridden); an embedding answer is the fake's
    `embedding_rows` (`answer_rows`), shaped by the script's `EmbedShape`, in the
    protocol's fields.
    """

    content_type = "application/json"
    dimensions_key: ClassVar[str] = "dimensions"
    """The embedding request's field that asks for shorter vectors."""

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

    def is_rerank(self, method: str, path: str) -> bool:
        """`POST …/rerank`."""
        return method == "POST" and path.rstrip("/").endswith("/rerank")

    def answer_rows(
        self, request_json: Any, shape: EmbedShape | None, *, indexed: bool
    ) -> EmbeddingRows:
        """The fake's rows for an embedding request: its texts (`embedding_inputs`), as
        long as a positive `dimensions_key` asks, shaped by `shape` (`embedding_rows`)."""
        dims = request_json.get(self.dimensions_key)
        return embedding_rows(
            self.embedding_inputs(request_json) or [],
            dims if positive_int(dims) else None,
            shape,
            indexed=indexed,
        )

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


class IndexedRetrievalDialect(RetrievalDialect):
    """Voyage AI's and Jina AI's common ground: `POST …/embeddings` with OpenAI's `input`
    texts, answered by indexed `data[]` entries and `usage.total_tokens`;
    `POST …/rerank`; errors as FastAPI's `{"detail": message}` with the status."""

    embedding = EmbeddingProfile(
        # OpenAI's shape: every `data[]` entry carries its `index` (Voyage's recordings,
        # Jina's documentation); floats or base64 float32 (Voyage's `encoding_format:
        # "base64"`, its SDK's default; Jina's `embedding_type: "base64"`);
        # `usage.total_tokens` is on every recorded Voyage answer and in Jina's
        # documentation; `dimensions_key` shortens the vectors.
        indexed=True,
        encodings=("float", "base64"),
        usage="always",
        dimensions=True,
        breaks=("wrong_dimensions", "missing_entry", "duplicate_index"),
    )

    def render_error(self, fault: Fault) -> Rendered:
        """`{"detail": message}` with the fault's status (and `Retry-After`)."""
        return self.json_answer(
            {"detail": fault.message}, status=fault.status, retry_after=fault.retry_after
        )

    def is_embedding(self, method: str, path: str) -> bool:
        """`POST …/embeddings`."""
        return method == "POST" and path.rstrip("/").endswith("/embeddings")

    def embedding_inputs(self, request_json: Any) -> list[str] | None:
        """The request's `input` texts (OpenAI's: `embedding_texts`)."""
        return embedding_texts(request_json)

    def read_embedding_answer(self, payload: Any) -> tuple[list[list[float]], int | None] | None:
        """`data[].embedding` in `index` order and `usage.total_tokens` (their only
        count)."""
        return read_openai_embeddings(payload, tokens_key="total_tokens")
