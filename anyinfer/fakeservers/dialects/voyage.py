"""The Voyage AI protocol (`https://api.voyageai.com/v1`): embeddings and reranking.

What the fake answers, in Voyage's shapes (its OpenAPI description and the
`TestVoyageAI` recordings of pydantic-ai):

- `POST …/embeddings`: `{"object": "list", "data": [{"object": "embedding",
  "embedding", "index"}], "model", "usage": {"total_tokens"}}`, each embedding a JSON
  array of numbers or, for `encoding_format: "base64"`, the base64 of little-endian
  float32 values; `output_dimension` shortens the fake's vectors.
- `POST …/rerank`: `{"object": "list", "data": [{"index", "relevance_score",
  "document"?}], "model", "usage": {"total_tokens"}}`, best first, at most `top_k`,
  with each document only for `return_documents: true`.
- Errors: `{"detail": "..."}` with the status. A body Voyage refuses for certain is its
  400, in the fake's own words: an input that is not a string or a list of non-empty
  strings, more than 1,000 of them, an `input_type` other than `query`, `document` or
  null, a non-positive `output_dimension`, an `output_dtype` or `encoding_format` it
  does not know; for rerank a query that is not a string, documents that are not a list
  of 1 to 1,000 strings, a non-positive `top_k`.

Token counts are the fake's (`dialects._embeddings.token_count`): for rerank, the query's
tokens once per document plus every document's, as Voyage's FAQ counts them.
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

__all__ = ["VoyageDialect"]

MAX_INPUTS = 1000
"""The most texts (and rerank documents) one Voyage request may carry."""

_DTYPES = (None, "float", "int8", "uint8", "binary", "ubinary")


def _bad(message: str) -> Fault:
    return Fault("status", status=400, message=message)


class VoyageDialect(IndexedRetrievalDialect):
    """Voyage AI's `/embeddings` and `/rerank` (see the module documentation); the paths,
    the `input` texts, the `{"detail"}` errors, the embedding profile and the answer
    reader are `IndexedRetrievalDialect`'s."""

    name = "voyage"
    base_path = "/v1"
    dimensions_key = "output_dimension"
    # --- embeddings ------------------------------------------------------------------

    def embedding_fault(self, request_json: Any) -> Fault | None:
        """Voyage's 400 for an embeddings body it refuses (see the module docs)."""
        texts = self.embedding_inputs(request_json)
        if texts is None or not texts or any(t == "" for t in texts):
            return _bad("fake: input must be a non-empty string or a list of non-empty strings")
        if len(texts) > MAX_INPUTS:
            return _bad(f"fake: the input list holds {len(texts)} texts; at most 1000 are taken")
        body: dict[str, Any] = request_json
        if body.get("input_type") not in (None, "query", "document"):
            return _bad("fake: input_type must be query, document or null")
        dims = body.get("output_dimension")
        if dims is not None and not positive_int(dims):
            return _bad("fake: output_dimension must be a positive integer or null")
        if body.get("output_dtype") not in _DTYPES:
            return _bad("fake: output_dtype must be float, int8, uint8, binary or ubinary")
        if body.get("encoding_format") not in (None, "base64"):
            return _bad("fake: encoding_format must be base64 or null")
        return None

    def render_embedding_answer(
        self, path: str, request_json: Any, shape: EmbedShape | None
    ) -> Rendered:
        """Voyage's embeddings list, shaped by `shape` (entries in any order, each with
        its `index`; `usage` left out when the shape reports none)."""
        rows = self.answer_rows(request_json, shape, indexed=True)
        payload: dict[str, Any] = {
            "object": "list",
            "data": indexed_entries(rows, request_json.get("encoding_format") == "base64"),
            "model": str(request_json.get("model", "")),
        }
        if rows.tokens is not None:
            payload["usage"] = {"total_tokens": rows.tokens}
        return self.json_answer(payload)

    # --- rerank ----------------------------------------------------------------------

    def rerank_fault(self, request_json: Any) -> Fault | None:
        """Voyage's 400 for a rerank body it refuses (see the module docs)."""
        if not isinstance(request_json, dict) or not isinstance(request_json.get("query"), str):
            return _bad("fake: query must be a string")
        docs = request_json.get("documents")
        if not isinstance(docs, list) or not all(isinstance(d, str) for d in docs) or not docs:
            return _bad("fake: documents must be a non-empty list of strings")
        if len(docs) > MAX_INPUTS:
            return _bad(f"fake: {len(docs)} documents; at most 1000 are taken")
        top = request_json.get("top_k")
        if top is not None and not positive_int(top):
            return _bad("fake: top_k must be a positive integer or null")
        return None

    def render_rerank(self, request_json: Any) -> Rendered:
        """Voyage's ranking, best first."""
        query: str = request_json["query"]
        docs: list[str] = request_json["documents"]
        back = request_json.get("return_documents") is True
        data: list[dict[str, Any]] = []
        for index, score in fake_ranking(query, docs, request_json.get("top_k")):
            entry: dict[str, Any] = {"index": index, "relevance_score": score}
            if back:
                entry["document"] = docs[index]
            data.append(entry)
        tokens = rerank_tokens(query, docs)
        return self.json_answer(
            {
                "object": "list",
                "data": data,
                "model": str(request_json.get("model", "")),
                "usage": {"total_tokens": tokens},
            }
        )
