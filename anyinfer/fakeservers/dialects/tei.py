"""The Hugging Face Text Embeddings Inference protocol (TEI): embeddings and reranking.

What the fake answers, in TEI's shapes (its OpenAPI description and router source):

- `POST /embed`: a bare JSON array of float arrays, one per input in input order
  (`dimensions` shortens the fake's vectors), with the `x-compute-tokens` header.
- `POST /rerank`: `[{"index", "score", "text"?}]`, every text ranked, best first, each
  text only for `return_text: true`, with `x-compute-tokens`.
- `GET /info`: the served model (`model_id` is the server's first model name, else
  `fake-model`), `model_type` `{"embedding": {"pooling": "cls"}}`, and the router limits
  (`max_client_batch_size` 32, as TEI's default, `max_input_length` 512).
- Errors: `{"error", "error_type"}`, the type from the status as TEI's router sets it
  (400 `Empty`, 422 `Validation`, 424 `Backend`, 429 `Overloaded`, 503 `Unhealthy`);
  a 413 is plain text (the payload limit answers before TEI's handlers) and a 401 has
  no body (the `--api-key` check). A body TEI refuses for certain, in its words where
  the router's are known: `inputs` or `texts` empty (400 `Empty`: "`inputs` cannot be
  empty"), more than 32 of them (422 `Validation`: "batch size N > maximum allowed batch
  size 32"); a body that does not deserialize (inputs that are not strings) is axum's
  422 in plain text.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._script import EmbedShape, Fault, Frame, Rendered
from ._base import EmbeddingProfile, json_bytes
from ._embeddings import float32_json
from ._retrieval import RetrievalDialect, fake_ranking, positive_int, rerank_tokens, string_list

__all__ = ["MAX_CLIENT_BATCH_SIZE", "TEIDialect"]

MAX_CLIENT_BATCH_SIZE = 32
"""The fake server's `max_client_batch_size` (TEI's default)."""

_ERROR_TYPES = {
    400: "Empty",
    422: "Validation",
    424: "Backend",
    429: "Overloaded",
    503: "Unhealthy",
}


def _fault(status: int, message: str) -> Fault:
    return Fault("status", status=status, message=message)


_REJECTED = "json_rejection"
"""The code of a body that does not deserialize: axum answers it in plain text."""


def _batch(texts: list[str] | None, field: str) -> Fault | None:
    if texts is None:
        return Fault(
            "status",
            status=422,
            message=f"Failed to deserialize the JSON body into the target type: {field}",
            code=_REJECTED,
        )
    if not texts:
        return _fault(400, f"`{field}` cannot be empty")
    if len(texts) > MAX_CLIENT_BATCH_SIZE:
        return _fault(
            422,
            f"batch size {len(texts)} > maximum allowed batch size {MAX_CLIENT_BATCH_SIZE}",
        )
    return None


class TEIDialect(RetrievalDialect):
    """TEI's `/embed`, `/rerank` and `/info` (see the module documentation)."""

    name = "tei"
    base_path = ""
    embedding = EmbeddingProfile(
        # A bare array in input order (no index), floats only, the count in the
        # `x-compute-tokens` header TEI's router sets on every answer.
        indexed=False,
        encodings=("float",),
        usage="always",
        dimensions=True,
        breaks=("wrong_dimensions", "missing_entry"),
    )

    def render_error(self, fault: Fault) -> Rendered:
        """TEI's error for the fault's status (see the module documentation)."""
        if fault.status == 401:
            return Rendered(401, (), (Frame(b""),))
        plain = "text/plain; charset=utf-8"
        if fault.status == 413:
            text = b"Failed to buffer the request body: length limit exceeded"
            return Rendered(413, (("content-type", plain),), (Frame(text),))
        if fault.code == _REJECTED:
            return Rendered(
                fault.status, (("content-type", plain),), (Frame(fault.message.encode()),)
            )
        kind = _ERROR_TYPES.get(fault.status, "Backend")
        return self.json_answer(
            {"error": fault.message, "error_type": kind},
            status=fault.status,
            retry_after=fault.retry_after,
        )

    def _tokens(self, count: int) -> tuple[tuple[str, str], ...]:
        return (("x-compute-tokens", str(count)),)

    # --- discovery -------------------------------------------------------------------

    def is_models(self, method: str, path: str) -> bool:
        """`GET /info`."""
        return method == "GET" and path.rstrip("/").endswith("/info")

    def models_response(self, models: Sequence[str]) -> Rendered:
        """TEI's `/info` for the first of `models`."""
        model = models[0] if models else "fake-model"
        return Rendered(
            200,
            (("content-type", "application/json"),),
            (
                Frame(
                    json_bytes(
                        {
                            "model_id": model,
                            "model_sha": None,
                            "model_dtype": "float32",
                            "model_type": {"embedding": {"pooling": "cls"}},
                            "max_concurrent_requests": 512,
                            "max_input_length": 512,
                            "max_batch_tokens": 16384,
                            "max_batch_requests": None,
                            "max_client_batch_size": MAX_CLIENT_BATCH_SIZE,
                            "auto_truncate": True,
                            "tokenization_workers": 2,
                            "version": "1.8.0",
                            "sha": None,
                            "docker_label": None,
                        }
                    ),
                    sentinel=True,
                ),
            ),
        )

    # --- embeddings ------------------------------------------------------------------

    def is_embedding(self, method: str, path: str) -> bool:
        """`POST /embed`."""
        return method == "POST" and path.rstrip("/").endswith("/embed")

    def embedding_inputs(self, request_json: Any) -> list[str] | None:
        """The request's `inputs` texts."""
        return string_list(request_json.get("inputs")) if isinstance(request_json, dict) else None

    def embedding_fault(self, request_json: Any) -> Fault | None:
        """TEI's error for an `/embed` body it refuses."""
        refused = _batch(self.embedding_inputs(request_json), "inputs")
        if refused is not None:
            return refused
        dims = request_json.get("dimensions")
        if dims is not None and not positive_int(dims):
            return _fault(422, "fake: dimensions must be a positive integer")
        return None

    def render_embedding_answer(
        self, path: str, request_json: Any, shape: EmbedShape | None
    ) -> Rendered:
        """TEI's array of float arrays in input order (no index to shuffle by), shaped by
        `shape`, with `x-compute-tokens` unless the shape reports no usage."""
        rows = self.answer_rows(request_json, shape, indexed=False)
        body = [[float32_json(v) for v in vec] for _index, vec in rows.entries]
        headers = () if rows.tokens is None else self._tokens(rows.tokens)
        return self.json_answer(body, headers=headers)

    def read_embedding_answer(self, payload: Any) -> tuple[list[list[float]], int | None] | None:
        """The bare array of vectors (the token count travels in a header, not here)."""
        if not isinstance(payload, list) or not all(isinstance(r, list) for r in payload):
            return None
        return [[float(v) for v in r] for r in payload], None

    # --- rerank ----------------------------------------------------------------------

    def rerank_fault(self, request_json: Any) -> Fault | None:
        """TEI's error for a `/rerank` body it refuses."""
        if not isinstance(request_json, dict) or not isinstance(request_json.get("query"), str):
            return _batch(None, "query")
        texts = request_json.get("texts")
        return _batch(
            texts if isinstance(texts, list) and all(isinstance(t, str) for t in texts) else None,
            "texts",
        )

    def render_rerank(self, request_json: Any) -> Rendered:
        """TEI's ranks, every text, best first, with `x-compute-tokens`."""
        query: str = request_json["query"]
        texts: list[str] = request_json["texts"]
        back = request_json.get("return_text") is True
        ranks: list[dict[str, Any]] = []
        for index, score in fake_ranking(query, texts):
            entry: dict[str, Any] = {"index": index}
            if back:
                entry["text"] = texts[index]
            entry["score"] = score
            ranks.append(entry)
        tokens = rerank_tokens(query, texts)
        return self.json_answer(ranks, headers=self._tokens(tokens))
