"""Jina AI (`https://api.jina.ai/v1`): embeddings and reranking, no generation.

Facts from Jina's API documentation for LLMs (github.com/jina-ai/meta-prompt, the
Embeddings and Reranker API sections), its OpenAPI description (api.jina.ai), and what
working clients read back (LiteLLM's `jina_ai` provider, DataStax's Jina provider):

- **Embeddings**: `POST /embeddings` takes OpenAI's `{"model", "input": [...]}` plus
  `embedding_type` (`float`, the default, `base64`, `binary`, `ubinary`), `task`,
  `dimensions`, `normalized`, `late_chunking` and `truncate`, and answers in OpenAI's
  shape, `{"model", "object": "list", "usage": {"total_tokens"}, "data": [{"object":
  "embedding", "index", "embedding"}]}`, read by
  `anyinfer._embed._wire.openai_shaped_reply`. `encoding: "base64"` asks for
  `embedding_type: "base64"` (little-endian float32), `"float"` for JSON numbers;
  `binary`/`ubinary` (packed bits) are refused before dispatch. Jina documents no cap
  on the texts of one request that we could check, so batches keep the core's default
  (`batch_size=` changes it).
- **input_type** becomes `task`: `query` is `retrieval.query`, `document`
  `retrieval.passage`; any other value is sent as it is, for Jina's other tasks
  (`text-matching`, `classification`, `separation`, `code.query`, `nl2code.passage`,
  ...). **dimensions** are sent as `dimensions` (Matryoshka truncation).
- **Rerank**: `POST /rerank` takes `{"model", "query", "documents", "top_n"?,
  "return_documents"?}` and answers `{"model", "usage": {"total_tokens"}, "results":
  [{"index", "relevance_score", "document"?}]}`, best first. `return_documents`
  defaults to true at Jina; it is sent as false, since the caller has the documents.
- **Errors**: FastAPI's `{"detail": "..."}` with the status (401 for a bad key, 422 for
  a body that fails validation, 429 past the rate limit).
- **Auth**: `Authorization: Bearer <key>`, the key from `JINA_API_KEY`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from .._adapters.base import HTTPAdapter
from .._adapters.profile import AdapterProfile
from .._embed._rankwire import ranking_reply, rerank_body
from .._embed._types import EmbedReply, EmbedRequest, RerankReply, RerankRequest
from .._embed._wire import embed_body, openai_embed
from .._errors import ConfigError

__all__ = ["TASKS", "JinaAdapter"]

TASKS: Mapping[str, str] = {"query": "retrieval.query", "document": "retrieval.passage"}
"""Neutral `input_type` values and Jina's task names for them; others pass through."""

_FLOAT_TYPES = ("float", "base64")
"""The `embedding_type` values that carry float vectors."""


class JinaAdapter(HTTPAdapter):
    """Jina AI's embeddings and reranking (`jina`); it does not generate.

    See the module documentation for how requests and answers are mapped.
    """

    provider_id: ClassVar[str] = "jina"
    profile: ClassVar[AdapterProfile] = AdapterProfile(
        aliases=("jinaai", "jina-ai"), conformance_dialect="jina"
    )
    default_base_url: ClassVar[str | None] = "https://api.jina.ai/v1"
    api_key_env: ClassVar[str | None] = "JINA_API_KEY"

    def default_headers(self) -> dict[str, str]:
        """Bearer auth, JSON answers (Jina asks clients to send `Accept`), and the
        configured headers."""
        return self.with_bearer({"accept": "application/json", **super().default_headers()})

    async def embed(self, request: EmbedRequest) -> EmbedReply:
        """`POST /embeddings`: one batch of texts.

        Raises:
            ConfigError: Before dispatch, for an `embedding_type` that is not a float
                encoding.
        """
        pid = self.instance_id
        body = embed_body(request, "input", False)
        # Jina's own fields, unless the provider options set them.
        kind = body.setdefault("embedding_type", request.encoding)
        if request.input_type is not None:
            body.setdefault("task", TASKS.get(request.input_type, request.input_type))
        if kind not in _FLOAT_TYPES:
            raise ConfigError(
                f"{pid}: embedding_type {kind!r} is not a float encoding; AnyInfer's vectors "
                "are float32, so only 'float' and 'base64' are taken",
                provider=pid,
            )
        return await openai_embed(self, request, "/embeddings", body=body, api=None)

    async def rerank(self, request: RerankRequest) -> RerankReply:
        """`POST /rerank`: one request's documents, best first."""
        body = rerank_body(request, return_documents=False)
        return await ranking_reply(self, request, "/rerank", body, "results")
