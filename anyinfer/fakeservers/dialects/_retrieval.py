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

import base64
import math
import struct
from typing import Any

from .._script import EmbedShape, Frame, Rendered, Script
from ._base import Dialect, json_bytes
from ._embeddings import EmbeddingRows, fake_vector, float32_json

__all__ = [
    "RetrievalDialect",
    "indexed_entries",
    "read_indexed_entries",
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


def read_indexed_entries(payload: Any) -> tuple[list[list[float]], int | None] | None:
    """An OpenAI-shaped answer read back without an adapter: `data[].embedding` put in
    order by `index`, and `usage.total_tokens` (Voyage AI's and Jina AI's only count)."""
    data = payload.get("data") if isinstance(payload, dict) else None
    if not isinstance(data, list):
        return None
    placed: dict[int, list[float]] = {}
    for position, item in enumerate(data):
        if not isinstance(item, dict):
            return None
        value, index = item.get("embedding"), item.get("index", position)
        if isinstance(value, str):
            raw = base64.b64decode(value)
            placed[index] = list(struct.unpack(f"<{len(raw) // 4}f", raw))
        elif isinstance(value, list):
            placed[index] = [float(v) for v in value]
        else:
            return None
    usage = payload.get("usage")
    tokens = usage.get("total_tokens") if isinstance(usage, dict) else None
    return [placed[i] for i in sorted(placed)], tokens if isinstance(tokens, int) else None


def positive_int(value: Any) -> bool:
    """Whether `value` is an integer (not a bool) of at least 1."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


class RetrievalDialect(Dialect):
    """A protocol that embeds and reranks but does not generate.

    Subclasses implement `render_error`, the embedding hooks (`is_embedding`,
    `embedding_fault`, `embedding_inputs`, `render_embedding_answer`,
    `read_embedding_answer`) and the rerank ones (`is_rerank`, `rerank_fault`,
    `render_rerank`); an embedding answer is the fake's `embedding_rows`, shaped by the
    script's `EmbedShape`, in the protocol's fields.
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

    def render_embeddings(self, request_json: Any) -> Rendered:
        """The plain answer (`render_embedding_answer` without a shape)."""
        return self.render_embedding_answer("", request_json, None)

    def render_embedding_answer(
        self, path: str, request_json: Any, shape: EmbedShape | None
    ) -> Rendered:
        """The answer to an embedding request, shaped by `shape` (see `embedding_rows`).

        Raises:
            NotImplementedError: In a subclass that renders no embeddings.
        """
        raise NotImplementedError(f"the {self.name} dialect serves no embeddings")

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
