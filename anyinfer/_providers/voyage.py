"""Voyage AI (`https://api.voyageai.com/v1`): embeddings and reranking, no generation.

Facts from Voyage's OpenAPI description (github.com/voyage-ai/openapi), its API
reference (docs.voyageai.com/reference/embeddings-api, the reranker API, the error codes
page), the official `voyageai` SDK (0.5.0) and real recordings (pydantic-ai's
`TestVoyageAI` cassettes):

- **Embeddings**: `POST /embeddings` takes `{"input": [...], "model", "input_type"?:
  "query"|"document", "output_dimension"?, "output_dtype"?, "encoding_format"?:
  "base64", "truncation"?}` and answers `{"object": "list", "data": [{"object":
  "embedding", "embedding", "index"}], "model", "usage": {"total_tokens"}}`, an OpenAI
  shape read by `anyinfer._embed._wire.openai_shaped_reply`. The SDK always asks for
  `encoding_format: "base64"` (little-endian float32, as here); `encoding: "float"`
  leaves it out (a JSON array of numbers). A list holds at most 1,000 texts, and at most
  1M tokens in all for `voyage-4-lite` and `voyage-3.5-lite`, 320K for `voyage-4`,
  `voyage-3.5` and `voyage-2`, 120K for `voyage-4-large`, `voyage-3-large`,
  `voyage-code-3`, `voyage-finance-2` and `voyage-law-2`: batches are cut at 1,000
  texts; a batch over its model's token cap is Voyage's 400, typed, and `batch_size=`
  makes batches smaller.
- **input_type** is sent as it is: Voyage knows `query` and `document` (and prepends
  its retrieval prompt); anything else is refused before dispatch.
- **dimensions** become `output_dimension` (`voyage-3-large`, `voyage-code-3` and the
  `voyage-4` family take 256, 512, 1024 or 2048). `output_dtype` other than `float`
  (`int8`, `uint8`, `binary`, `ubinary`, quantized integers) is refused: AnyInfer's
  vectors are float32.
- **Rerank**: `POST /rerank` takes `{"query", "documents", "model", "top_k"?,
  "return_documents"?, "truncation"?}` (at most 1,000 documents) and answers `{"object":
  "list", "data": [{"index", "relevance_score", "document"?}], "model", "usage":
  {"total_tokens"}}`, best first. `top_n` is sent as `top_k`; the documents are not asked
  back (`return_documents` defaults to false), since the caller has them.
- **Errors**: 4xx bodies are `{"detail": "..."}` (400 invalid request, 401 bad key, 403
  forbidden address, 429 rate limit); 500 and 502/503/504 are server errors.
- **Auth**: `Authorization: Bearer <key>`, the key from `VOYAGE_API_KEY`.
"""

from __future__ import annotations

from typing import ClassVar

from .._adapters.base import HTTPAdapter
from .._adapters.profile import AdapterProfile
from .._embed._rankwire import ranking_reply, rerank_body
from .._embed._types import EmbedReply, EmbedRequest, RerankReply, RerankRequest
from .._embed._wire import embed_body, openai_embed
from .._errors import ConfigError

__all__ = [
    "EMBED_MAX_INPUTS",
    "INPUT_TYPES",
    "RERANK_MAX_DOCUMENTS",
    "VoyageAdapter",
]

EMBED_MAX_INPUTS = 1000
"""The most texts one `/embeddings` request may carry (Voyage's API reference)."""

RERANK_MAX_DOCUMENTS = 1000
"""The most documents one `/rerank` request may carry (Voyage's API reference)."""

INPUT_TYPES = frozenset({"query", "document"})
"""The `input_type` values Voyage takes."""


class VoyageAdapter(HTTPAdapter):
    """Voyage AI's embeddings and reranking (`voyage`); it does not generate.

    See the module documentation for how requests and answers are mapped.
    """

    provider_id: ClassVar[str] = "voyage"
    profile: ClassVar[AdapterProfile] = AdapterProfile(
        aliases=("voyageai", "voyage-ai"), conformance_dialect="voyage"
    )
    default_base_url: ClassVar[str | None] = "https://api.voyageai.com/v1"
    api_key_env: ClassVar[str | None] = "VOYAGE_API_KEY"
    embed_max_batch: ClassVar[int] = EMBED_MAX_INPUTS
    rerank_max_documents: ClassVar[int] = RERANK_MAX_DOCUMENTS

    def default_headers(self) -> dict[str, str]:
        """Bearer auth plus the configured headers."""
        return self.with_bearer(super().default_headers())

    async def embed(self, request: EmbedRequest) -> EmbedReply:
        """`POST /embeddings`: one batch of texts.

        Raises:
            ConfigError: Before dispatch, for an `input_type` Voyage does not take or an
                `output_dtype` that is not float.
        """
        pid = self.instance_id
        if request.input_type is not None and request.input_type not in INPUT_TYPES:
            raise ConfigError(
                f"{pid}: Voyage AI takes input_type 'query' or 'document', not "
                f"{request.input_type!r}",
                provider=pid,
            )
        body = embed_body(
            request,
            "input",
            request.encoding == "base64",  # a float answer is the default: nothing to ask
            dimensions_key="output_dimension",
            input_type_key="input_type",
        )
        dtype = body.get("output_dtype")
        if dtype not in (None, "float"):
            raise ConfigError(
                f"{pid}: output_dtype {dtype!r} gives quantized integers; AnyInfer's vectors "
                "are float32, so only output_dtype 'float' is taken",
                provider=pid,
            )
        return await openai_embed(self, request, "/embeddings", body=body, api=None)

    async def rerank(self, request: RerankRequest) -> RerankReply:
        """`POST /rerank`: one request's documents, best first."""
        body = rerank_body(request, "top_k")
        return await ranking_reply(self, request, "/rerank", body, "data")
