"""The Jina AI protocol (`https://api.jina.ai/v1`): embeddings and reranking.

What the fake answers, in Jina's shapes (its API documentation for LLMs, the
meta-prompt, and what working clients read):

- `POST …/embeddings`: `{"model", "object": "list", "usage": {"total_tokens"}, "data":
  [{"object": "embedding", "index", "embedding"}]}` (usage as Jina's documentation shows
  it), each
  embedding a JSON array of numbers or, for `embedding_type: "base64"`, the base64 of
  little-endian float32 values; `dimensions` shortens the fake's vectors.
- `POST …/rerank`: `{"model", "usage": {"total_tokens"}, "results": [{"index",
  "relevance_score", "document"?}]}`, best first, at most `top_n`; `return_documents`
  defaults to true, and each document comes back as `{"text": ...}`.
- Errors: FastAPI's `{"detail": "..."}` with the status. A body Jina's validation refuses
  for certain is its 422, in the fake's own words: an input that is not a string or a
  list of strings, an `embedding_type` it does not know, a non-positive `dimensions`;
  for rerank a query that is not a string, documents that are not a non-empty list of
  strings, a non-positive `top_n`.
"""

from __future__ import annotations

from typing import Any

from .._script import EmbedShape, Fault, Rendered
from ._retrieval import (
    IndexedRetrievalDialect,
    fake_ranking,
    indexed_entries,
    positive_int,
    rerank_tokens,
)

__all__ = ["JinaDialect"]

_EMBEDDING_TYPES = ("float", "base64", "binary", "ubinary")


def _invalid(message: str) -> Fault:
    return Fault("status", status=422, message=message)


class JinaDialect(IndexedRetrievalDialect):
    """Jina AI's `/embeddings` and `/rerank` (see the module documentation); the paths,
    the `input` texts, the `{"detail"}` errors, the embedding profile and the answer
    reader are `IndexedRetrievalDialect`'s."""

    name = "jina"
    base_path = "/v1"
    # --- embeddings ------------------------------------------------------------------

    def embedding_fault(self, request_json: Any) -> Fault | None:
        """Jina's 422 for an embeddings body its validation refuses."""
        texts = self.embedding_inputs(request_json)
        if not texts:
            return _invalid("fake: input must be a string or a non-empty list of strings")
        body: dict[str, Any] = request_json
        if body.get("embedding_type", "float") not in _EMBEDDING_TYPES:
            return _invalid("fake: embedding_type must be float, base64, binary or ubinary")
        dims = body.get("dimensions")
        if dims is not None and not positive_int(dims):
            return _invalid("fake: dimensions must be a positive integer")
        return None

    def render_embedding_answer(
        self, path: str, request_json: Any, shape: EmbedShape | None
    ) -> Rendered:
        """Jina's embeddings list, shaped by `shape` (entries in any order, each with its
        `index`; `usage` left out when the shape reports none)."""
        rows = self.answer_rows(request_json, shape, indexed=True)
        payload: dict[str, Any] = {"model": str(request_json.get("model", "")), "object": "list"}
        if rows.tokens is not None:
            payload["usage"] = {"total_tokens": rows.tokens}
        payload["data"] = indexed_entries(rows, request_json.get("embedding_type") == "base64")
        return self.json_answer(payload)

    # --- rerank ----------------------------------------------------------------------

    def rerank_fault(self, request_json: Any) -> Fault | None:
        """Jina's 422 for a rerank body its validation refuses."""
        if not isinstance(request_json, dict) or not isinstance(request_json.get("query"), str):
            return _invalid("fake: query must be a string")
        docs = request_json.get("documents")
        if not isinstance(docs, list) or not docs or not all(isinstance(d, str) for d in docs):
            return _invalid("fake: documents must be a non-empty list of strings")
        top = request_json.get("top_n")
        if top is not None and not positive_int(top):
            return _invalid("fake: top_n must be a positive integer")
        return None

    def render_rerank(self, request_json: Any) -> Rendered:
        """Jina's ranking, best first (documents echoed unless `return_documents` is
        false)."""
        query: str = request_json["query"]
        docs: list[str] = request_json["documents"]
        back = request_json.get("return_documents", True) is not False
        results: list[dict[str, Any]] = []
        for index, score in fake_ranking(query, docs, request_json.get("top_n")):
            entry: dict[str, Any] = {"index": index}
            if back:
                entry["document"] = {"text": docs[index]}
            entry["relevance_score"] = score
            results.append(entry)
        tokens = rerank_tokens(query, docs)
        return self.json_answer(
            {
                "model": str(request_json.get("model", "")),
                "usage": {"total_tokens": tokens},
                "results": results,
            }
        )
