"""Google Vertex AI: Gemini (`vertex-gemini`) and Claude (`vertex-anthropic`) at Vertex URLs.

Vertex AI answers in its publishers' shapes, so these dialects are the `gemini` and
`anthropic-messages` dialects with Vertex's routes and the few things Vertex adds:

- Gemini: `POST /v1/projects/{project}/locations/{location}/publishers/google/models/{model}`
  `:generateContent` or `:streamGenerateContent` (also without the project and location:
  express mode). Streaming is chosen by the endpoint. Each response chunk carries
  `createTime` beside `modelVersion` and `responseId`, as pydantic-ai's Vertex recordings
  (`test_google_vertex_*`, `test_google_model_vertex_*`) show; error details name the
  `aiplatform.googleapis.com` service.
- Claude: `POST .../publishers/anthropic/models/{model}:rawPredict` (a whole `Message`) or
  `:streamRawPredict` (Anthropic's event stream); the endpoint chooses streaming. The
  request body is Anthropic's with `anthropic_version` (`"vertex-2023-10-16"` in
  Anthropic's Vertex documentation) and without `model`; a body naming `model` or
  lacking `anthropic_version` is refused with a 400 (`request_fault`). Errors Vertex
  itself raises (401, 403, 404 and 429: credentials, permission, an unknown publisher
  model, quota) are Google's `{"error": {"code", "message", "status"}}`; the others are
  Anthropic's error bodies, which the model server sends.

`base_path` names a project and a location (`/v1/projects/anyinfer-conformance/locations/
us-central1`), the location root an adapter appends `/publishers/...` to.
"""

from __future__ import annotations

import re
from typing import Any

from .._script import EmbedShape, Fault, Frame, Rendered, Script
from ._base import EmbeddingProfile
from ._ids import ScriptIds
from .anthropic import AnthropicDialect
from .gemini import GeminiDialect, _error_object, _pretty_json

__all__ = ["VERTEX_CREATE_TIME", "VertexAnthropicDialect", "VertexGeminiDialect"]

VERTEX_CREATE_TIME = "2026-01-01T00:00:00.000000Z"
"""The `createTime` the fake Vertex stamps on every Gemini chunk."""

_ROOT = r"(?:/projects/[^/]+/locations/[^/]+)?"
_GEMINI_PATH = re.compile(
    _ROOT + r"/publishers/google/models/[^/:]+:(?:stream)?[gG]enerateContent$"
)
_CLAUDE_PATH = re.compile(
    _ROOT + r"/publishers/anthropic/models/[^/:]+:(?:streamRawPredict|rawPredict)$"
)
_EMBED_PATH = re.compile(_ROOT + r"/publishers/google/models/([^/:]+):(?:predict|embedContent)$")
_VERTEX_ERRORS = frozenset({401, 403, 404, 429})
"""Statuses Vertex's own front end answers for a Claude model, in Google's error shape."""


class VertexGeminiDialect(GeminiDialect):
    """Gemini on Vertex AI, streamed as server-sent events (`alt=sse`)."""

    name = "vertex-gemini"
    base_path = "/v1/projects/anyinfer-conformance/locations/us-central1"

    def _envelope(
        self,
        ids: ScriptIds,
        script: Script,
        parts: list[dict[str, Any]] | None,
        finish: str | None = None,
        usage: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Gemini's chunk with Vertex's `createTime` after `modelVersion`."""
        chunk = super()._envelope(ids, script, parts, finish, usage)
        response_id = chunk.pop("responseId")
        chunk["createTime"] = VERTEX_CREATE_TIME
        chunk["responseId"] = response_id
        return chunk

    def _error_body(self, error: dict[str, Any]) -> bytes:
        for detail in error.get("details") or ():
            metadata = detail.get("metadata") if isinstance(detail, dict) else None
            if isinstance(metadata, dict) and "service" in metadata:
                metadata["service"] = "aiplatform.googleapis.com"
        return super()._error_body(error)

    def is_generation(self, method: str, path: str) -> bool:
        """`POST .../publishers/google/models/{model}:generateContent` (or
        `:streamGenerateContent`), under a project and location or without (express)."""
        return method == "POST" and _GEMINI_PATH.search(path) is not None

    embedding: EmbeddingProfile | None = EmbeddingProfile(
        # `predictions[]` (or the one `embedding`) come in input order without an index,
        # as JSON numbers; every recorded answer counts tokens (`statistics.token_count`,
        # `usageMetadata`); `outputDimensionality` shortens the vectors.
        indexed=False,
        encodings=("float",),
        usage="always",
        dimensions=True,
        breaks=("wrong_dimensions", "missing_entry"),
    )

    def is_embedding(self, method: str, path: str) -> bool:
        """`POST .../publishers/google/models/{model}:predict` or `:embedContent`:
        Vertex's own embedding endpoints, not the Gemini API's `:batchEmbedContents`."""
        return method == "POST" and _EMBED_PATH.search(path) is not None

    def embedding_fault_at(self, path: str, request_json: Any) -> Fault | None:
        """Vertex's 400 for an embedding body it refuses for certain: `:predict` without
        `instances` (objects with a string `content`), more than 250 of them, more than
        one for `gemini-embedding-001` (Vertex's own words: `Unable to submit request
        because batchSize must be 1 but the entered value was N.`), a `task_type`
        outside the TaskType enum; `:embedContent` without text `content.parts` or with
        an unknown `embedContentConfig.taskType`."""
        from .gemini import GEMINI_TASK_TYPES

        match = _EMBED_PATH.search(path)
        model = match.group(1) if match else ""
        body = request_json if isinstance(request_json, dict) else None
        if body is None:
            return _invalid("Invalid JSON payload received.")
        if path.endswith(":embedContent"):
            content = body.get("content")
            parts = content.get("parts") if isinstance(content, dict) else None
            if (
                not isinstance(parts, list)
                or not parts
                or not all(isinstance(p, dict) and isinstance(p.get("text"), str) for p in parts)
            ):
                return _invalid("fake: content.parts must hold text parts")
            config = body.get("embedContentConfig") or {}
            task = config.get("taskType") if isinstance(config, dict) else None
            if task is not None and task not in GEMINI_TASK_TYPES:
                return _invalid(f"Invalid value at 'embed_content_config.task_type', {task!r}")
            return None
        instances = body.get("instances")
        if not isinstance(instances, list) or not instances:
            return _invalid("fake: instances must be a non-empty list")
        if model.startswith("gemini-embedding-001") and len(instances) > 1:
            return _invalid(
                "Unable to submit request because batchSize must be 1 but the entered value "
                f"was {len(instances)}."
            )
        if len(instances) > 250:
            return _invalid(f"fake: {len(instances)} instances; at most 250 are taken")
        for i, item in enumerate(instances):
            if not isinstance(item, dict) or not isinstance(item.get("content"), str):
                return _invalid(f"fake: instances[{i}].content must be a string")
            task = item.get("task_type")
            if task is not None and task not in GEMINI_TASK_TYPES:
                return _invalid(f"fake: instances[{i}].task_type {task!r} is not a task type")
        return None

    def embedding_inputs(self, request_json: Any) -> list[str] | None:
        """The texts of a `:predict` body's `instances` (or of one `:embedContent` body)."""
        if not isinstance(request_json, dict):
            return None
        if "instances" in request_json:
            instances = request_json["instances"]
            if not isinstance(instances, list):
                return None
            return [str(i.get("content", "")) if isinstance(i, dict) else "" for i in instances]
        content = request_json.get("content")
        parts = content.get("parts") if isinstance(content, dict) else None
        if not isinstance(parts, list):
            return None
        return ["".join(str(p.get("text", "")) for p in parts if isinstance(p, dict))]

    def read_embedding_answer(self, payload: Any) -> tuple[list[list[float]], int | None] | None:
        """`predictions[].embeddings.values` with `statistics.token_count` summed, or
        `embedding.values` with `usageMetadata.promptTokenCount`."""
        if not isinstance(payload, dict):
            return None
        if isinstance(payload.get("embedding"), dict):
            values = payload["embedding"].get("values")
            meta = payload.get("usageMetadata")
            tokens = meta.get("promptTokenCount") if isinstance(meta, dict) else None
            if not isinstance(values, list):
                return None
            return [[float(v) for v in values]], tokens if isinstance(tokens, int) else None
        predictions = payload.get("predictions")
        if not isinstance(predictions, list):
            return None
        rows: list[list[float]] = []
        counts: list[Any] = []
        for item in predictions:
            emb = item.get("embeddings") if isinstance(item, dict) else None
            values = emb.get("values") if isinstance(emb, dict) else None
            if not isinstance(values, list):
                return None
            rows.append([float(v) for v in values])
            stats = emb.get("statistics") if isinstance(emb, dict) else None
            counts.append(stats.get("token_count") if isinstance(stats, dict) else None)
        known = all(isinstance(c, int | float) for c in counts)
        return rows, int(sum(counts)) if known and counts else None

    def render_embedding_answer(
        self, path: str, request_json: Any, shape: EmbedShape | None
    ) -> Rendered:
        """The answer of `render_embeddings_at`, shaped by `shape` (input order: the
        entries carry no index; no token counts when the shape reports none)."""
        if shape is None:
            return self.render_embeddings_at(path, request_json)
        from ._embeddings import embedding_rows, float32_json, rendered_json, token_count

        body = request_json if isinstance(request_json, dict) else {}
        holder = body.get("embedContentConfig" if path.endswith(":embedContent") else "parameters")
        dims = holder.get("outputDimensionality") if isinstance(holder, dict) else None
        texts = self.embedding_inputs(body) or []
        rows = embedding_rows(
            texts, dims if isinstance(dims, int) and dims > 0 else None, shape, indexed=False
        )
        payload: dict[str, Any]
        if path.endswith(":embedContent"):
            payload = {}
            if rows.entries:
                payload["embedding"] = {"values": [float32_json(v) for v in rows.entries[0][1]]}
            if rows.tokens is not None:
                payload["usageMetadata"] = {
                    "promptTokenCount": rows.tokens,
                    "totalTokenCount": rows.tokens,
                }
        else:
            predictions = []
            for index, vec in rows.entries:
                emb: dict[str, Any] = {"values": [float32_json(v) for v in vec]}
                if rows.tokens is not None:
                    emb["statistics"] = {
                        "token_count": token_count(texts[index]),
                        "truncated": False,
                    }
                predictions.append({"embeddings": emb})
            payload = {"predictions": predictions}
        content_type = self._whole_headers()[0][1]
        return rendered_json(_pretty_json(payload) + b"\n", content_type, self.malformed_body())

    def render_embeddings_at(self, path: str, request_json: Any) -> Rendered:
        """`:predict`: `{"predictions": [{"embeddings": {"statistics": {"token_count",
        "truncated"}, "values"}}], "metadata": {"billableCharacterCount"}}`;
        `:embedContent`: `{"embedding": {"values"}, "usageMetadata": {"promptTokenCount",
        "promptTokensDetails", "totalTokenCount"}}` (pydantic-ai's Vertex recordings).
        Values and counts are the fake's (`dialects._embeddings`)."""
        from ._embeddings import (
            DEFAULT_DIMENSIONS,
            fake_vector,
            float32_json,
            rendered_json,
            token_count,
        )

        body = request_json if isinstance(request_json, dict) else {}
        payload: dict[str, Any]
        if path.endswith(":embedContent"):
            config = body.get("embedContentConfig") or {}
            dims = config.get("outputDimensionality") or DEFAULT_DIMENSIONS
            parts = (body.get("content") or {}).get("parts") or []
            text = "".join(str(p.get("text", "")) for p in parts)
            tokens = token_count(text)
            payload = {
                "embedding": {"values": [float32_json(v) for v in fake_vector(text, dims)]},
                "usageMetadata": {
                    "promptTokenCount": tokens,
                    "promptTokensDetails": [{"modality": "TEXT", "tokenCount": tokens}],
                    "totalTokenCount": tokens,
                },
            }
        else:
            parameters = body.get("parameters") or {}
            dims = parameters.get("outputDimensionality") or DEFAULT_DIMENSIONS
            texts = [str(item.get("content", "")) for item in body.get("instances") or ()]
            payload = {
                "predictions": [
                    {
                        "embeddings": {
                            "statistics": {"token_count": token_count(t), "truncated": False},
                            "values": [float32_json(v) for v in fake_vector(t, dims)],
                        }
                    }
                    for t in texts
                ],
                "metadata": {"billableCharacterCount": sum(len(t) for t in texts)},
            }
        content_type = self._whole_headers()[0][1]
        return rendered_json(_pretty_json(payload) + b"\n", content_type, self.malformed_body())


class VertexAnthropicDialect(AnthropicDialect):
    """Claude on Vertex AI: Anthropic's Messages bodies at `:rawPredict` / `:streamRawPredict`."""

    name = "vertex-anthropic"
    base_path = "/v1/projects/anyinfer-conformance/locations/global"

    def render_error(self, fault: Fault) -> Rendered:
        """Google's error body for the statuses Vertex answers itself, else Anthropic's."""
        if fault.status not in _VERTEX_ERRORS:
            return super().render_error(fault)
        headers: list[tuple[str, str]] = [("content-type", "application/json; charset=UTF-8")]
        if fault.retry_after is not None:
            headers.append(("retry-after", f"{fault.retry_after:g}"))
        body = _pretty_json({"error": _error_object(fault)}) + b"\n"
        return Rendered(fault.status, tuple(headers), (Frame(body),))

    def is_generation(self, method: str, path: str) -> bool:
        """`POST .../publishers/anthropic/models/{model}:rawPredict` or `:streamRawPredict`."""
        return method == "POST" and _CLAUDE_PATH.search(path) is not None

    def request_wants_stream(self, method: str, path: str, request_json: Any) -> bool:
        """The endpoint chooses: `:streamRawPredict` streams."""
        return path.endswith(":streamRawPredict")

    def request_fault(self, method: str, path: str, request_json: Any) -> Fault | None:
        """A 400 `invalid_request_error` for a body outside what Vertex documents: one
        that names `model` (Vertex takes it from the URL) or has no `anthropic_version`
        (required in the body). Any version value is accepted: Anthropic's Vertex page
        documents `vertex-2023-10-16`, and the `anthropic` SDK 2.x sends its API version
        (`2026-10-21`) there. The status and error type follow Anthropic's error
        model; the wording is the fake's own. Otherwise the Messages API's content-block
        checks apply, as on Anthropic's own endpoint."""
        if not isinstance(request_json, dict):
            problem = "the request body must be a JSON object"
        elif "model" in request_json:
            problem = "model: the model is named by the URL, not the body"
        elif not isinstance(request_json.get("anthropic_version"), str):
            problem = "anthropic_version: Field required"
        else:
            # The Messages API's own content-block refusals (audio, non-PDF documents).
            return super().request_fault(method, path, request_json)
        return Fault("status", status=400, message=problem, code="invalid_request_error")


def _invalid(message: str) -> Fault:
    return Fault("status", status=400, message=message)
