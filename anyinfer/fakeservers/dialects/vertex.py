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

from .._script import Fault, Frame, Rendered, Script
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

    embedding = None
    """No embedding answers are scripted for Vertex AI (see `is_embedding`)."""

    def is_embedding(self, method: str, path: str) -> bool:
        """No embedding endpoint is faked for Vertex AI: its embedding requests
        (`:predict` with `instances`, `embedContentConfig` nesting) are not the Gemini
        API's, so the Gemini dialect's are not inherited."""
        return False


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
