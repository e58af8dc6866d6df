"""Hugging Face Text Embeddings Inference (TEI): embeddings and reranking, no generation.

TEI serves one model per server, local or self-hosted (default `http://127.0.0.1:8080`,
the address TEI's own examples use). Facts from its OpenAPI description
(`docs/openapi.json`) and router source (`router/src/http/server.rs`, `types.rs`,
`lib.rs`) in github.com/huggingface/text-embeddings-inference:

- **Embeddings**: `POST /embed` takes `{"inputs": [...], "normalize"?, "truncate"?,
  "truncation_direction"?, "prompt_name"?, "dimensions"?}` and answers a bare JSON array
  of float arrays, one per input, in input order. `normalize` is sent as true (TEI's
  default, written out); `truncate` is left to the server (`--auto-truncate`) unless
  `provider_options` set it. Token usage is the `x-compute-tokens` response header.
- **input_type** becomes `prompt_name`: the name of a prompt in the model's
  sentence-transformers configuration (`query`, `document`, ... as the model defines
  them). A name the model lacks is TEI's 422, typed.
- **dimensions** are sent as `dimensions` (Matryoshka truncation).
- **Rerank**: `POST /rerank` takes `{"query", "texts", "raw_scores"?, "return_text"?,
  "truncate"?}` and answers `[{"index", "score", "text"?}]`, best first, every text
  ranked: `top_n` is applied here, after the answer. Only a reranker model
  (`model_type.reranker` in `/info`) ranks; another answers 424.
- **Batches**: at most `max_client_batch_size` texts per request (32 unless the server
  was started with `--max-client-batch-size`): batches of 32 by default, and
  `batch_size=` follows a server that takes more; `/info` reports the server's value.
- **Discovery**: `GET /info` gives `model_id`, `model_type`, `max_input_length`,
  `max_client_batch_size` and `max_batch_tokens`: `models()` lists the one served model.
- **Errors**: `{"error", "error_type"}` with the status of its type: `Empty` 400,
  `Validation` and `Tokenizer` 422, `Backend` 424 (a failed inference, or a rerank sent to
  a model that is not a reranker: not retried), `Overloaded` 429, `Unhealthy` 503. A
  body over the payload limit is 413 (plain text), a wrong key 401 (no body).
- **Auth**: none unless the server was started with `--api-key`; then
  `Authorization: Bearer <key>` (from `ANYINFER_TEI_API_KEY`, or `api_key=`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from .._adapters.base import DiscoveredModel, HTTPAdapter
from .._adapters.errormap import ErrorKind
from .._adapters.framing import loads_or_none
from .._adapters.profile import AdapterProfile
from .._embed._rankwire import ranked_documents
from .._embed._types import EmbedReply, EmbedRequest, RerankReply, RerankRequest
from .._embed._wire import _count, _post_json_headers, decode_vector
from .._errors import ProtocolError
from .._types import Usage
from ._wire import as_dict, as_list, opt_int, opt_str

__all__ = ["DEFAULT_MAX_CLIENT_BATCH_SIZE", "ERROR_KINDS", "TEIAdapter"]

DEFAULT_MAX_CLIENT_BATCH_SIZE = 32
"""TEI's `--max-client-batch-size` default: the most texts one request may carry."""

ERROR_KINDS: Mapping[str, ErrorKind] = {
    "Empty": "invalid",
    "Validation": "invalid",
    "Tokenizer": "invalid",
    "Overloaded": "rate_limit",
    "Unhealthy": "server",
}
"""What TEI's `error_type` values mean. `Backend` (424) is left to its status: TEI
answers it both for a failed inference and for a rerank sent to a model that is not a
reranker, so it is a `ProviderError` that is not retried."""


class TEIAdapter(HTTPAdapter):
    """Hugging Face Text Embeddings Inference (`tei`); it does not generate.

    See the module documentation for how requests and answers are mapped.
    """

    provider_id: ClassVar[str] = "tei"
    profile: ClassVar[AdapterProfile] = AdapterProfile(
        aliases=("text-embeddings-inference",), conformance_dialect="tei"
    )
    default_base_url: ClassVar[str | None] = "http://127.0.0.1:8080"
    embed_max_batch: ClassVar[int] = DEFAULT_MAX_CLIENT_BATCH_SIZE
    rerank_max_documents: ClassVar[int] = DEFAULT_MAX_CLIENT_BATCH_SIZE
    error_code_keys: ClassVar[tuple[str, ...]] = ("error_type",)

    def default_headers(self) -> dict[str, str]:
        """Bearer auth when a key is set, plus the configured headers."""
        return self.with_bearer(super().default_headers())

    def error_message(self, body: bytes) -> tuple[str, str | None]:
        """`(error, error_type)` of TEI's `{"error", "error_type"}`; other bodies (the
        413's plain text) as the base reads them."""
        payload = loads_or_none(body)
        if isinstance(payload, dict) and isinstance(payload.get("error"), str):
            kind = payload.get("error_type")
            return payload["error"], kind if isinstance(kind, str) else None
        return super().error_message(body)

    def error_hint(self, code: str | None, message: str) -> ErrorKind | None:
        """TEI's `error_type` (`ERROR_KINDS`), else the OpenAI-family codes."""
        return ERROR_KINDS.get(code or "") or super().error_hint(code, message)

    async def _post(
        self, path: str, body: Mapping[str, Any], request: EmbedRequest | RerankRequest
    ) -> tuple[Any, Usage]:
        """POST `body` for `request` and read the JSON answer and the `x-compute-tokens`
        header."""
        pid = self.instance_id
        payload, headers = await _post_json_headers(self, path, body, request=request)
        header = headers.get("x-compute-tokens")
        tokens = None
        if header is not None:
            if not (header.isascii() and header.isdigit()):
                raise ProtocolError(
                    f"{pid}: the x-compute-tokens header is {header[:40]!r}, not a count",
                    provider=pid,
                )
            tokens = int(header)
        return payload, Usage(input_tokens=tokens, total_tokens=tokens)

    async def embed(self, request: EmbedRequest) -> EmbedReply:
        """`POST /embed`: one batch of texts."""
        pid = self.instance_id
        body: dict[str, Any] = {"inputs": list(request.inputs), "normalize": True}
        if request.input_type is not None:
            body["prompt_name"] = request.input_type
        if request.dimensions is not None:
            body["dimensions"] = request.dimensions
        body.update(request.provider_options)
        payload, usage = await self._post("/embed", body, request)
        rows = as_list(payload, pid, "body")
        if len(rows) != len(request.inputs):
            raise _count(pid, len(rows), len(request.inputs))
        vectors = tuple(decode_vector(row, pid, f"[{i}]") for i, row in enumerate(rows))
        return EmbedReply(vectors=vectors, usage=usage)

    async def rerank(self, request: RerankRequest) -> RerankReply:
        """`POST /rerank`: one request's documents, best first, cut to `top_n`."""
        body: dict[str, Any] = {
            "query": request.query,
            "texts": list(request.documents),
            "raw_scores": False,
            "return_text": False,
        }
        body.update(request.provider_options)
        payload, usage = await self._post("/rerank", body, request)
        ranked = ranked_documents(self, request, payload, "body", score_key="score")
        ranked = tuple(sorted(ranked, key=lambda r: -r.score))
        if request.top_n is not None:
            ranked = ranked[: request.top_n]
        return RerankReply(ranked=ranked, usage=usage)

    async def models(self) -> Sequence[DiscoveredModel]:
        """The served model, from `GET /info` (its `max_input_length` as the context
        window; `model_type`, `max_client_batch_size` and `max_batch_tokens` as facts)."""
        pid = self.instance_id
        info = as_dict(await self.fetch_json("/info"), pid, "info")
        model_id = opt_str(info.get("model_id"), pid, "info.model_id")
        if not model_id:
            raise ProtocolError(f"{pid}: /info names no model_id", provider=pid)
        kinds = info.get("model_type")
        facts: dict[str, Any] = {
            "model_type": next(iter(kinds), None) if isinstance(kinds, dict) else None,
            "max_client_batch_size": opt_int(
                info.get("max_client_batch_size"), pid, "info.max_client_batch_size"
            ),
            "max_batch_tokens": opt_int(info.get("max_batch_tokens"), pid, "info.max_batch_tokens"),
        }
        return [
            DiscoveredModel(
                provider=pid,
                id=model_id,
                context_window=opt_int(info.get("max_input_length"), pid, "info.max_input_length"),
                facts={k: v for k, v in facts.items() if v is not None},
                raw=info,
            )
        ]
