"""Google Gemini (`POST …/models/{model}:generateContent` / `:streamGenerateContent`).

The wire shapes follow the recorded Gemini traffic in `shared/wire` (the repository's
sibling folder: pydantic-ai's and simonw/llm-gemini's cassettes, Gemini 2.0 to 3.6),
the `google-genai` SDK's types and its stream reader, and the Gemini API reference.
Every streamed chunk is a whole `GenerateContentResponse` — `candidates[0].content.parts`,
`candidates[0].finishReason`, `usageMetadata`, `modelVersion`, `responseId` — sent as a
server-sent event (`data: {...}\\r\\n\\r\\n`, what `alt=sse` asks for) by the `gemini`
dialect, or as one element of a JSON array whose elements arrive one by one
(`[{...}\\n,\\r\\n{...}\\n]`, the body without `alt=sse`) by the `gemini-json-array`
dialect. The protocol chooses streaming by endpoint, not by a body field.

Facts the `WireProfile`s record, and where they come from:

- Usage rides on every chunk (every streamed recording): running counts — the
  prompt-side figures from the first chunk, `thoughtsTokenCount` and
  `candidatesTokenCount` growing as the response goes on (`cumulative`, Gemini 2.5 and
  3), or the prompt-side figures alone until the finish chunk (`split`, Gemini 2.0).
  Gemini never omits usage and never sends it after the finish chunk.
- Zero counts are left out (proto3 JSON omits default values; the recordings' early
  chunks have no `candidatesTokenCount`).
- No keep-alive or comment lines: Gemini sends none, and `google-genai` fails on them.
- Reasoning streams as `"thought": true` text parts; thought signatures
  (`thoughtSignature`, base64) ride on the first function-call part, or, in a response
  without calls that thought, on the finish chunk's empty text part (Gemini 3 style).
- An error inside a 200 stream is a bare, pretty-printed JSON error object
  (`{"error": {"code": 503, "message": ..., "status": "UNAVAILABLE"}}`, no `data:`
  prefix), then the end of the body — reported in vercel/ai#5217 and OmniRoute#4177,
  and the reason `google-genai`'s SSE reader buffers bare JSON lines and raises
  `APIError` for an `{"error": ...}` chunk.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .._script import (
    EmbedShape,
    Fault,
    Frame,
    Piece,
    Reasoning,
    Rendered,
    Script,
    ScriptUsage,
    Text,
    ToolFragment,
)
from ._base import Dialect, EmbeddingProfile, InStreamError, WireProfile, json_bytes
from ._embeddings import float32_json
from ._ids import ScriptIds

__all__ = ["GEMINI_MAX_BATCH", "GEMINI_TASK_TYPES", "GeminiDialect", "GeminiJSONArrayDialect"]

_FINISH: dict[str, str] = {
    "stop": "STOP",
    "tool_calls": "STOP",
    "length": "MAX_TOKENS",
    "content_filter": "SAFETY",
    "other": "OTHER",
}
"""Neutral finish reasons as Gemini spells them; any other value is sent upper-cased,
the way Gemini's enum names are spelt (`FinishReason` is a proto enum)."""

_STATUS_NAMES: dict[int, str] = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    408: "DEADLINE_EXCEEDED",
    409: "ABORTED",
    429: "RESOURCE_EXHAUSTED",
    499: "CANCELLED",
    500: "INTERNAL",
    501: "UNIMPLEMENTED",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
    529: "UNAVAILABLE",
}
"""The `google.rpc` status names Gemini pairs with HTTP statuses."""

_ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"
_RETRY_INFO = "type.googleapis.com/google.rpc.RetryInfo"

_OVERLOADED = "The model is overloaded. Please try again later."
"""Gemini's 503 text (vercel/ai#5217, google-gemini/gemini-cli#5191)."""
_INTERNAL = (
    "An internal error has occurred. Please retry or report in "
    "https://developers.generativeai.google/guide/troubleshooting"
)
"""Gemini's 500 text."""

_GOOGLE_HEADERS = (
    ("vary", "Origin"),
    ("vary", "X-Origin"),
    ("vary", "Referer"),
    ("server", "scaffolding on HTTPServer2"),
)
"""Headers of every recorded Gemini response (`server` where the recorder kept it)."""

_GEMINI_PROFILE = WireProfile(
    usage_placements=("cumulative", "split"),
    usage_fields=("input_tokens", "output_tokens"),
    optional_usage_fields=("reasoning_tokens", "cache_read_tokens"),
    reasoning=True,
    keepalives=False,
    in_stream_errors=(
        InStreamError(503, "UNAVAILABLE", _OVERLOADED),
        InStreamError(500, "INTERNAL", _INTERNAL),
    ),
    line_endings=("crlf",),
    text_with_tools=True,
    max_tool_calls=3,
)
"""What the Gemini API sends over `alt=sse` (see the module documentation)."""


@dataclass(frozen=True, slots=True)
class _Chunk:
    """One chunk to send: its JSON payload and what its frame carries."""

    payload: dict[str, Any]
    pieces: tuple[int, ...] = ()
    usage: frozenset[str] = frozenset()
    usage_values: tuple[tuple[str, int], ...] = ()
    finish: bool = False


class GeminiDialect(Dialect):
    """The Gemini API, streamed as server-sent events.

    Text pieces become `{"text"}` parts, reasoning pieces `{"text", "thought": true}`
    parts, one chunk per piece. Gemini sends function calls whole, so a slot's fragments
    are joined into one `functionCall` part (`args` the parsed arguments, `{}` when they
    do not parse to an object; `id` when the script gives one, as newer models send),
    sent in its own chunk once the slot and every lower slot are complete — calls go
    out in slot order, which is the order the adapter numbers them in; the chunk
    carries all the slot's fragments. The finish reason rides on a last chunk with an
    empty text part, as Gemini 3 sends it. Every chunk has `candidates[0].index`,
    `content.role: "model"`, `modelVersion` (the script's model) and a `responseId`
    unique to the script.

    A response that thought (reasoning pieces, a reasoning figure, or function calls,
    which Gemini 3 always signs) carries one `thoughtSignature`: on its first
    `functionCall` part, else on the finish chunk's empty text part.

    Finish reasons: `stop` and `tool_calls` are both `STOP` (Gemini has no reason of its
    own for tool calls; an adapter reads `STOP` after function calls as `tool_calls`),
    so `expected_finish_reason` says what a faithful adapter reports; `length` is
    `MAX_TOKENS`, `content_filter` `SAFETY`, `other` `OTHER`; anything else is sent
    upper-cased, like Gemini's own enum names.

    Usage is `usageMetadata`: `promptTokenCount` (with `promptTokensDetails`),
    `cachedContentTokenCount` (with `cacheTokensDetails`), `candidatesTokenCount`
    (output minus reasoning), `thoughtsTokenCount` (reasoning), `totalTokenCount` and
    `serviceTier`; zero counts are left out, as Gemini's proto3 JSON does. Gemini counts
    thoughts inside the output, so a reasoning figure is sent only with an output
    figure at least as large, and left out otherwise. There is no cache-write figure.
    Placements: `cumulative` sends running counts on every chunk — prompt-side figures
    throughout, `thoughtsTokenCount` growing over the thought chunks and
    `candidatesTokenCount` over the answer chunks, the finish chunk carrying the final
    figures (each frame's `usage_values` records the running ones); `split` sends the
    prompt-side figures on every chunk and all of them with the finish reason (Gemini
    2.0); `finish` sends them all with the finish reason only; `trailing` sends them in
    a usage-only chunk after the finish chunk (every field of a response chunk is
    optional), which an adapter sees only if it drains the body to its end. The last
    two are not what Gemini sends: the hostile world uses them.

    The end of the body is this protocol's sentinel: the SSE form has no `[DONE]`, so
    the sentinel frame is empty, rendered whenever a finish reason is sent, and cannot be
    withheld (`script.sentinel` is ignored): a clean end is the sentinel, a disconnect,
    stall or garbage before it means it never came. Events are framed with `\\n` and
    sent with the script's line ending (Gemini's own is `\\r\\n`). HTTP errors are
    `{"error": {"code", "message", "status", "details"}}`, pretty-printed, the fault's
    `code` as an `ErrorInfo` reason and `retry_after` as a `RetryInfo` delay (and a
    `Retry-After` header); an error inside the stream is the same object sent bare,
    without `data:` (see `error_frame`).
    """

    name = "gemini"
    base_path = "/v1beta"
    content_type = "text/event-stream"
    profile = _GEMINI_PROFILE
    embedding: EmbeddingProfile | None = EmbeddingProfile(
        # `embeddings[]` come in request order without an index, as JSON numbers;
        # `usageMetadata` is on the 2026 recordings' answers and absent from earlier
        # ones (so: sometimes); `outputDimensionality` shortens the vectors.
        indexed=False,
        encodings=("float",),
        usage="sometimes",
        dimensions=True,
        breaks=("wrong_dimensions", "missing_entry"),
    )

    # --- rendering -----------------------------------------------------------------

    def render(self, script: Script, *, stream: bool) -> Rendered:
        """Render a script as a Gemini stream or one whole `GenerateContentResponse`.

        Args:
            script: What the provider sends.
            stream: Whether to render the streamed form.

        Returns:
            The rendered response.
        """
        if stream:
            return self._render_stream(script)
        return self._render_whole(script)

    def expected_finish_reason(self, script: Script) -> str | None:
        """The finish reason a faithful adapter reports for `script`, before normalizing.

        Gemini says `STOP` for both `stop` and `tool_calls`, and a response that called
        functions reads back as `tool_calls`; so `stop` and `tool_calls` read back as
        `tool_calls` when the script calls tools and as `stop` when it does not. Every
        other script reads back as it says.

        Args:
            script: The script.

        Returns:
            The finish reason, or `None` when the script sends none.
        """
        if script.finish_reason in ("stop", "tool_calls"):
            return "tool_calls" if _has_calls(script.pieces) else "stop"
        return script.finish_reason

    def _envelope(
        self,
        ids: ScriptIds,
        script: Script,
        parts: list[dict[str, Any]] | None,
        finish: str | None = None,
        usage: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """One `GenerateContentResponse`, keys in Gemini's order."""
        chunk: dict[str, Any] = {}
        if parts is not None or finish is not None:
            candidate: dict[str, Any] = {"content": {"parts": parts or [], "role": "model"}}
            if finish is not None:
                candidate["finishReason"] = finish
            candidate["index"] = 0
            chunk["candidates"] = [candidate]
        if usage is not None:
            chunk["usageMetadata"] = usage
        chunk["modelVersion"] = script.model
        chunk["responseId"] = ids.token("responseId", 23, _B64URL)
        return chunk

    def _encode(self, payload: dict[str, Any], position: int) -> bytes:
        """One chunk's bytes; `position` is its index among the body's chunks.

        `alt=sse` events are compact JSON with `": "` after each key, as recorded.
        """
        return b"data: " + _sse_json(payload) + b"\n\n"

    def _opening(self) -> bytes:
        """Bytes before the first chunk (the JSON array's `[`)."""
        return b""

    def _closing(self, script: Script) -> Frame | None:
        """The sentinel frame: the clean end of the body, once a finish reason was sent."""
        if script.finish_reason is None:
            return None
        return Frame(b"", sentinel=True)

    def _chunks(self, script: Script) -> list[_Chunk]:
        """The streamed chunks of `script`, in order."""
        ids = ScriptIds(script, self.name)
        usage = script.usage
        placement = script.usage_placement if usage is not None else "none"
        report = _Figures.of(usage)
        content = _stream_parts(script.pieces)
        signature = _signature(ids) if _thinks(script) else None
        if signature is not None:
            _sign_first_call(content, signature)
        running = report.running(content) if placement == "cumulative" else None
        chunks: list[_Chunk] = []
        for n, (parts, pieces) in enumerate(content):
            meta: dict[str, Any] | None = None
            fields: frozenset[str] = frozenset()
            values: tuple[tuple[str, int], ...] = ()
            if running is not None:
                meta, fields, values = report.metadata(*running[n])
            elif placement == "split":
                meta, fields, values = report.metadata(0, 0, input_only=True)
            payload = self._envelope(ids, script, parts, usage=meta)
            chunks.append(_Chunk(payload, pieces, fields, values))
        finish = script.finish_reason
        in_finish = placement in ("finish", "split", "cumulative")
        if finish is not None or (in_finish and report.any):
            wire = _wire_finish(finish)
            parts_: list[dict[str, Any]] | None = None
            if wire is not None:
                last: dict[str, Any] = {"text": ""}
                if signature is not None and not _has_calls(script.pieces):
                    last["thoughtSignature"] = signature
                parts_ = [last]
            meta, fields = None, frozenset()
            if in_finish and usage is not None:
                meta, fields, _ = report.metadata(report.candidates, report.thoughts)
            payload = self._envelope(ids, script, parts_, wire, usage=meta)
            chunks.append(_Chunk(payload, usage=fields, finish=finish is not None))
        if placement == "trailing" and report.any:
            meta, fields, _ = report.metadata(report.candidates, report.thoughts)
            chunks.append(_Chunk(self._envelope(ids, script, None, usage=meta), usage=fields))
        return chunks

    def _render_stream(self, script: Script) -> Rendered:
        frames: list[Frame] = []
        opening = self._opening()
        for position, chunk in enumerate(self._chunks(script)):
            data = self._encode(chunk.payload, position)
            if position == 0:
                data = opening + data
            frames.append(
                Frame(
                    data,
                    pieces=chunk.pieces,
                    usage=chunk.usage,
                    finish=chunk.finish,
                    usage_values=chunk.usage_values,
                )
            )
        if not frames and opening:
            frames.append(Frame(opening))
        closing = self._closing(script)
        if closing is not None:
            frames.append(closing)
        return Rendered(
            200,
            self._stream_headers(),
            self.finish_frames(frames, script),
            malformed=self.malformed_frame(),
        )

    def _stream_headers(self) -> tuple[tuple[str, str], ...]:
        """The `alt=sse` response headers the recordings show."""
        return (
            ("content-type", self.content_type),
            ("content-disposition", "attachment"),
            *_GOOGLE_HEADERS,
        )

    def _whole_headers(self) -> tuple[tuple[str, str], ...]:
        """The headers of a whole JSON response (and of the JSON-array stream)."""
        return (("content-type", "application/json; charset=UTF-8"), *_GOOGLE_HEADERS)

    def _render_whole(self, script: Script) -> Rendered:
        ids = ScriptIds(script, self.name)
        parts: list[dict[str, Any]] = []
        if script.reasoning:
            parts.append({"text": script.reasoning, "thought": True})
        if script.text:
            parts.append({"text": script.text})
        calls = [part for part, _ in _whole_calls(script.pieces)]
        parts.extend(calls)
        if _thinks(script):
            # The first call carries the signature, else the answer's text part.
            signed = calls[0] if calls else (parts[-1] if script.text else None)
            if signed is None:
                signed = {"text": ""}
                parts.append(signed)
            signed["thoughtSignature"] = _signature(ids)
        finish = script.finish_reason
        wire = _wire_finish(finish)
        meta: dict[str, Any] | None = None
        fields: frozenset[str] = frozenset()
        if script.usage is not None and script.usage_placement != "none":
            report = _Figures.of(script.usage)
            meta, fields, _ = report.metadata(report.candidates, report.thoughts)
        payload = self._envelope(ids, script, parts, wire, usage=meta)
        frame = Frame(
            _pretty_json(payload) + b"\n",
            pieces=tuple(range(len(script.pieces))),
            usage=fields,
            finish=finish is not None,
            sentinel=True,
        )
        return Rendered(200, self._whole_headers(), (frame,), malformed=self.malformed_body())

    def render_error(self, fault: Fault) -> Rendered:
        """Render `{"error": {"code", "message", "status", "details"}}` with `fault.status`.

        Args:
            fault: The `status` fault.

        Returns:
            The error response; `fault.code` becomes an `ErrorInfo` reason (unless it
            is the status name itself), and `fault.retry_after` a `RetryInfo` delay
            plus a `Retry-After` header.
        """
        error = _error_object(fault)
        if fault.retry_after is not None:
            details = error.setdefault("details", [])
            details.append({"@type": _RETRY_INFO, "retryDelay": f"{fault.retry_after:g}s"})
        headers: list[tuple[str, str]] = list(self._whole_headers())
        if fault.retry_after is not None:
            headers.append(("retry-after", f"{fault.retry_after:g}"))
        return Rendered(fault.status, tuple(headers), (Frame(self._error_body(error)),))

    def _error_body(self, error: dict[str, Any]) -> bytes:
        return _pretty_json({"error": error}) + b"\n"

    def error_frame(self, fault: Fault) -> bytes | None:
        """Gemini's error inside a 200 stream: the error object, bare and pretty-printed.

        No `data:` prefix: the object's lines arrive as they are, after the last event's
        blank line, and then the body ends (vercel/ai#5217, OmniRoute#4177). `status`
        is the `google.rpc` name of `fault.status` (or `fault.code` when it is one).

        Args:
            fault: The `provider_error` fault.

        Returns:
            The frame's bytes.
        """
        return _pretty_json({"error": _error_object(fault)}) + b"\n"

    def models_response(self, models: Sequence[str]) -> Rendered:
        """The answer to `GET …/models`: `{"models": [{"name": "models/<id>", ...}]}`.

        Args:
            models: Model ids to list.

        Returns:
            A 200 response listing them as text-generation models.
        """
        payload = {
            "models": [
                {
                    "name": f"models/{m}",
                    "version": "001",
                    "displayName": m,
                    "supportedGenerationMethods": [
                        "generateContent",
                        "countTokens",
                        "streamGenerateContent",
                    ],
                }
                for m in models
            ]
        }
        return Rendered(
            200,
            (("content-type", "application/json; charset=UTF-8"),),
            (Frame(json_bytes(payload), sentinel=True),),
        )

    # --- routing -------------------------------------------------------------------

    def is_generation(self, method: str, path: str) -> bool:
        """`POST …:generateContent` or `POST …:streamGenerateContent`."""
        return method == "POST" and path.endswith((":generateContent", ":streamGenerateContent"))

    def request_wants_stream(self, method: str, path: str, request_json: Any) -> bool:
        """Streaming is chosen by endpoint: `:streamGenerateContent` streams."""
        return path.endswith(":streamGenerateContent")

    # --- embeddings ----------------------------------------------------------------

    def is_embedding(self, method: str, path: str) -> bool:
        """`POST …:batchEmbedContents` or `POST …:embedContent` (see `embedding_fault_at`)."""
        return method == "POST" and path.endswith((":batchEmbedContents", ":embedContent"))

    def embedding_fault_at(self, path: str, request_json: Any) -> Fault | None:
        """Gemini's 400 (`INVALID_ARGUMENT`) for an embedding body it refuses for certain.

        Refused: a body that is not an object; a field the request message does not
        have (Google's JSON parser refuses unknown names); a batch without `requests`
        or with more than `GEMINI_MAX_BATCH` of them (Gemini's own message); a request
        whose `model` is not the URL's; a request without text `content.parts`; a
        `taskType` outside the `TaskType` enum; an `outputDimensionality` that is not a
        non-negative integer (0 is proto3's unset, the model's full size).
        """
        model = _url_model(path)
        if not isinstance(request_json, dict):
            return _invalid("Invalid JSON payload received. Expected an object.")
        if path.endswith(":embedContent"):
            return _embed_request_fault(request_json, model, "")
        unknown = sorted(set(request_json) - {"requests", "model"})
        if unknown:
            return _invalid(_unknown_name(unknown[0], ""))
        requests = request_json.get("requests")
        if not isinstance(requests, list) or not requests:
            return _invalid("* BatchEmbedContentsRequest.requests: fake: must be a non-empty list")
        if len(requests) > GEMINI_MAX_BATCH:
            return _invalid(
                "* BatchEmbedContentsRequest.requests: at most 100 requests can be in one batch"
            )
        for i, entry in enumerate(requests):
            where = f"requests[{i}]"
            if not isinstance(entry, dict):
                return _invalid(f"Invalid value at '{where}': fake: expected an object")
            fault = _embed_request_fault(entry, model, where)
            if fault is not None:
                return fault
            if entry.get("model") is None:
                return _invalid(f"* BatchEmbedContentsRequest.{where}.model: fake: required")
        return None

    def embedding_inputs(self, request_json: Any) -> list[str] | None:
        """The texts of a `batchEmbedContents` body's `requests` (or of one
        `embedContent` body), in order."""
        if not isinstance(request_json, dict):
            return None
        if "requests" not in request_json:
            return [_text(request_json)] if "content" in request_json else None
        entries = request_json.get("requests")
        if not isinstance(entries, list):
            return None
        return [_text(e) if isinstance(e, dict) else "" for e in entries]

    def read_embedding_answer(self, payload: Any) -> tuple[list[list[float]], int | None] | None:
        """`embeddings[].values` (or `embedding.values`) and
        `usageMetadata.promptTokenCount`."""
        if not isinstance(payload, dict):
            return None
        rows = payload.get("embeddings")
        if rows is None and isinstance(payload.get("embedding"), dict):
            rows = [payload["embedding"]]
        if not isinstance(rows, list):
            return None
        values = [r.get("values") if isinstance(r, dict) else None for r in rows]
        if not all(isinstance(v, list) for v in values):
            return None
        meta = payload.get("usageMetadata")
        tokens = meta.get("promptTokenCount") if isinstance(meta, dict) else None
        return [[float(x) for x in v] for v in values if isinstance(v, list)], (
            tokens if isinstance(tokens, int) else None
        )

    def render_embedding_answer(
        self, path: str, request_json: Any, shape: EmbedShape | None
    ) -> Rendered:
        """The answer of `render_embeddings_at`, shaped by `shape` (in request order:
        Gemini's entries carry no index; `usageMetadata` left out when the shape
        reports none)."""
        if shape is None:
            return self.render_embeddings_at(path, request_json)
        from ._embeddings import embedding_rows, rendered_json

        body = request_json if isinstance(request_json, dict) else {}
        first = body.get("requests", [body])
        first = first[0] if isinstance(first, list) and first else {}
        dims = first.get("outputDimensionality") if isinstance(first, dict) else None
        rows = embedding_rows(
            self.embedding_inputs(body) or [],
            dims if isinstance(dims, int) and dims > 0 else None,
            shape,
            indexed=False,
        )
        values = [{"values": [float32_json(v) for v in vec]} for _, vec in rows.entries]
        payload: dict[str, Any]
        if path.endswith(":embedContent"):
            payload = {"embedding": values[0]} if values else {}
        else:
            payload = {"embeddings": values}
            if rows.tokens is not None:
                payload["usageMetadata"] = {
                    "promptTokenCount": rows.tokens,
                    "promptTokenDetails": [{"modality": "TEXT", "tokenCount": rows.tokens}],
                }
        content_type = self._whole_headers()[0][1]
        return rendered_json(_pretty_json(payload) + b"\n", content_type, self.malformed_body())

    def render_embeddings_at(self, path: str, request_json: Any) -> Rendered:
        """`{"embedding": {"values"}}` for `:embedContent` (the documented response),
        `{"embeddings": [{"values"}], "usageMetadata"}` for `:batchEmbedContents` (the
        shape of the 2026 recordings: `promptTokenCount` and `promptTokenDetails`),
        pretty-printed as Gemini sends JSON. The values are the fake's
        (`dialects._embeddings.fake_vector`), as shortest float32 decimals."""
        from ._embeddings import rendered_json, token_count

        body = request_json if isinstance(request_json, dict) else {}
        if path.endswith(":embedContent"):
            payload: dict[str, Any] = {"embedding": _values(body)}
        else:
            entries = [e for e in body.get("requests") or () if isinstance(e, dict)]
            tokens = sum(token_count(_text(e)) for e in entries)
            payload = {
                "embeddings": [_values(e) for e in entries],
                "usageMetadata": {
                    "promptTokenCount": tokens,
                    "promptTokenDetails": [{"modality": "TEXT", "tokenCount": tokens}],
                },
            }
        headers = self._whole_headers()
        return rendered_json(_pretty_json(payload) + b"\n", headers[0][1], self.malformed_body())


class GeminiJSONArrayDialect(GeminiDialect):
    """The Gemini API streamed without `alt=sse`: one JSON array, element by element.

    Each chunk is a pretty-printed `GenerateContentResponse` (two-space indent, as
    simonw/llm-gemini's recordings show), the first preceded by `[` and the others by
    `,\\r\\n`, each followed by a newline; the closing `]` is the sentinel, left out
    when `script.sentinel` is false. Keep-alive frames are blank lines (whitespace
    between elements; Gemini sends none), the malformed frame is an element that is not
    JSON, and HTTP errors are wrapped in a list (`[{"error": {...}}]`), as Gemini sends
    them on this endpoint. An error inside the stream is sent as one more element, the
    array then closed (the recordings have no such body: this follows the endpoint's
    own framing). The body's bytes are sent as framed (`line_endings` is `lf`: the
    framing's own mix of `\\n` and `\\r\\n`). Everything else is as in `GeminiDialect`.
    """

    name = "gemini-json-array"
    content_type = "application/json; charset=UTF-8"
    profile = WireProfile(
        usage_placements=_GEMINI_PROFILE.usage_placements,
        usage_fields=_GEMINI_PROFILE.usage_fields,
        optional_usage_fields=_GEMINI_PROFILE.optional_usage_fields,
        reasoning=True,
        keepalives=False,
        in_stream_errors=_GEMINI_PROFILE.in_stream_errors,
        line_endings=("lf",),
        text_with_tools=True,
        max_tool_calls=_GEMINI_PROFILE.max_tool_calls,
    )

    def _encode(self, payload: dict[str, Any], position: int) -> bytes:
        return (b"" if position == 0 else b",\r\n") + _pretty_json(payload) + b"\n"

    def _opening(self) -> bytes:
        return b"["

    def _closing(self, script: Script) -> Frame | None:
        return Frame(b"]", sentinel=True) if script.sentinel else None

    def _stream_headers(self) -> tuple[tuple[str, str], ...]:
        """The headers simonw/llm-gemini's JSON-array recordings show."""
        return (
            *self._whole_headers(),
            ("x-content-type-options", "nosniff"),
            ("x-frame-options", "SAMEORIGIN"),
            ("x-xss-protection", "0"),
        )

    def _error_body(self, error: dict[str, Any]) -> bytes:
        return b"[" + _pretty_json({"error": error}) + b"\n]"

    def error_frame(self, fault: Fault) -> bytes | None:
        """The error as the array's next element, then the closing `]`."""
        return b",\r\n" + _pretty_json({"error": _error_object(fault)}) + b"\n]"

    def stream_error_frame(self, fault: Fault, script: Script, sent: Sequence[Frame]) -> bytes:
        """As `error_frame`, opening the array first when nothing was sent yet."""
        element = _pretty_json({"error": _error_object(fault)}) + b"\n]"
        opened = any(frame.data.lstrip().startswith(b"[") for frame in sent)
        return (b",\r\n" + element) if opened else (b"[" + element)

    def malformed_frame(self) -> bytes:
        """An array element that is not JSON."""
        return b",\r\n{not json}\n"

    def keepalive_frame(self) -> bytes:
        """Whitespace between array elements."""
        return b"\r\n"


# --- encoding --------------------------------------------------------------------------

_B64URL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
"""The alphabet of Gemini's `responseId`s (`QUVVadTSNJ6_qtsPvN7J8Q0`)."""


def _sse_json(payload: Any) -> bytes:
    """Compact JSON with `": "` after keys and raw UTF-8, as `alt=sse` events are."""
    return json.dumps(payload, separators=(",", ": "), ensure_ascii=False).encode("utf-8")


def _pretty_json(payload: Any) -> bytes:
    """Two-space indented JSON with raw UTF-8, as Google's APIs pretty-print."""
    return json.dumps(payload, indent=2, ensure_ascii=False).encode("utf-8")


def _wire_finish(finish: str | None) -> str | None:
    if finish is None:
        return None
    return _FINISH.get(finish) or finish.upper()


def _error_object(fault: Fault) -> dict[str, Any]:
    """`{"code", "message", "status"[, "details"]}` for a fault."""
    code = fault.code
    status = code if code in _STATUS_NAMES.values() else None
    error: dict[str, Any] = {
        "code": fault.status,
        "message": fault.message,
        "status": status or _STATUS_NAMES.get(fault.status, "UNKNOWN"),
    }
    if code is not None and status is None:
        error["details"] = [
            {
                "@type": _ERROR_INFO,
                "reason": code,
                "domain": "googleapis.com",
                "metadata": {"service": "generativelanguage.googleapis.com"},
            }
        ]
    return error


def _signature(ids: ScriptIds) -> str:
    """A `thoughtSignature`: base64 of opaque bytes, unique to the script."""
    size = ids.number("thoughtSignature.size", 48, 160)
    raw = bytes(ids.number(f"thoughtSignature.{i}", 0, 255) for i in range(size))
    return base64.b64encode(b"\x12" + raw).decode("ascii")


# --- pieces to parts -------------------------------------------------------------------


def _has_calls(pieces: Sequence[Piece]) -> bool:
    return any(isinstance(p, ToolFragment) for p in pieces)


def _thinks(script: Script) -> bool:
    """Whether the response carries a thought signature (see `GeminiDialect`)."""
    if _has_calls(script.pieces) or any(isinstance(p, Reasoning) for p in script.pieces):
        return True
    usage = script.usage
    return bool(usage is not None and usage.reasoning_tokens)


def _sign_first_call(
    content: list[tuple[list[dict[str, Any]], tuple[int, ...]]], signature: str
) -> None:
    for parts, _ in content:
        for part in parts:
            if "functionCall" in part:
                part["thoughtSignature"] = signature
                return


def _call_part(fragments: Sequence[ToolFragment]) -> dict[str, Any]:
    """One whole `functionCall` part from a slot's fragments."""
    text = "".join(f.arguments for f in fragments).strip()
    try:
        args = json.loads(text) if text else {}
    except ValueError:
        args = {}
    call: dict[str, Any] = {}
    name = next((f.name for f in fragments if f.name is not None), None)
    if name is not None:
        call["name"] = name
    call["args"] = args if isinstance(args, dict) else {}
    call_id = next((f.id for f in fragments if f.id is not None), None)
    if call_id is not None:
        call["id"] = call_id
    return {"functionCall": call}


def _stream_parts(pieces: Sequence[Piece]) -> list[tuple[list[dict[str, Any]], tuple[int, ...]]]:
    """Each chunk's parts and the piece indices it carries, in wire order."""
    last: dict[int, int] = {}
    for i, piece in enumerate(pieces):
        if isinstance(piece, ToolFragment):
            last[piece.index] = i
    order = sorted(last)
    members: dict[int, list[int]] = {slot: [] for slot in order}
    out: list[tuple[list[dict[str, Any]], tuple[int, ...]]] = []
    ready = 0
    for i, piece in enumerate(pieces):
        if isinstance(piece, Text):
            out.append(([{"text": piece.text}], (i,)))
        elif isinstance(piece, Reasoning):
            out.append(([{"text": piece.text, "thought": True}], (i,)))
        else:
            members[piece.index].append(i)
            while ready < len(order) and last[order[ready]] <= i:
                slot = order[ready]
                frags = [
                    p for p in (pieces[j] for j in members[slot]) if isinstance(p, ToolFragment)
                ]
                out.append(([_call_part(frags)], tuple(members[slot])))
                ready += 1
    return out


def _whole_calls(pieces: Sequence[Piece]) -> list[tuple[dict[str, Any], tuple[int, ...]]]:
    """Every call's `functionCall` part, in slot order."""
    slots: dict[int, list[tuple[int, ToolFragment]]] = {}
    for i, piece in enumerate(pieces):
        if isinstance(piece, ToolFragment):
            slots.setdefault(piece.index, []).append((i, piece))
    return [
        (_call_part([f for _, f in slots[s]]), tuple(i for i, _ in slots[s])) for s in sorted(slots)
    ]


# --- usage -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Figures:
    """A script's usage as Gemini counts it (`None`: not reported)."""

    prompt: int | None
    cached: int | None
    candidates: int | None
    thoughts: int | None

    @classmethod
    def of(cls, usage: ScriptUsage | None) -> _Figures:
        if usage is None:
            return cls(None, None, None, None)
        output, reasoning = usage.output_tokens, usage.reasoning_tokens
        thoughts: int | None = None
        candidates = output
        if output is not None and reasoning is not None and reasoning <= output:
            candidates, thoughts = output - reasoning, reasoning
        return cls(usage.input_tokens, usage.cache_read_tokens, candidates, thoughts)

    @property
    def any(self) -> bool:
        """Whether any figure is reported."""
        return any(v is not None for v in (self.prompt, self.cached, self.candidates))

    def running(
        self, content: Sequence[tuple[list[dict[str, Any]], tuple[int, ...]]]
    ) -> list[tuple[int | None, int | None]]:
        """`(candidates, thoughts)` so far after each content chunk.

        Thoughts grow over the thought chunks and reach their final figure with the
        last one (from the first chunk when no thought text is sent); candidates grow
        over the answer chunks, reaching theirs with the last one. Never decreasing.
        """
        kinds = [any(p.get("thought") for p in parts) for parts, _ in content]
        n_thought = sum(kinds)
        n_answer = len(kinds) - n_thought
        seen_thought = seen_answer = 0
        out: list[tuple[int | None, int | None]] = []
        for thought in kinds:
            if thought:
                seen_thought += 1
            else:
                seen_answer += 1
            thoughts = self.thoughts
            if thoughts is not None and n_thought:
                thoughts = thoughts * seen_thought // n_thought
            candidates = self.candidates
            if candidates is not None:
                candidates = candidates * seen_answer // n_answer if n_answer else 0
            out.append((candidates, thoughts))
        return out

    def metadata(
        self, candidates: int | None, thoughts: int | None, *, input_only: bool = False
    ) -> tuple[dict[str, Any], frozenset[str], tuple[tuple[str, int], ...]]:
        """`usageMetadata` reporting these running counts, the neutral fields it
        reports and the values among them that differ from the final figures."""
        if input_only:
            candidates = thoughts = None
        out: dict[str, Any] = {}
        fields: set[str] = set()
        values: list[tuple[str, int]] = []
        if self.prompt:
            out["promptTokenCount"] = self.prompt
            fields.add("input_tokens")
        if self.cached:
            out["cachedContentTokenCount"] = self.cached
            fields.add("cache_read_tokens")
        if candidates:
            out["candidatesTokenCount"] = candidates
        total = (self.prompt or 0) + (candidates or 0) + (thoughts or 0)
        if total:
            out["totalTokenCount"] = total
        if self.prompt:
            out["promptTokensDetails"] = [{"modality": "TEXT", "tokenCount": self.prompt}]
        if self.cached:
            out["cacheTokensDetails"] = [{"modality": "TEXT", "tokenCount": self.cached}]
        if thoughts:
            out["thoughtsTokenCount"] = thoughts
            fields.add("reasoning_tokens")
            if thoughts != self.thoughts:
                values.append(("reasoning_tokens", thoughts))
        output = (candidates or 0) + (thoughts or 0)
        if candidates or thoughts:
            fields.add("output_tokens")
            final = (self.candidates or 0) + (self.thoughts or 0)
            if output != final:
                values.append(("output_tokens", output))
        out["serviceTier"] = "standard"
        return out, frozenset(fields), tuple(values)


# --- embeddings ----------------------------------------------------------------------

GEMINI_MAX_BATCH = 100
"""The most requests one `batchEmbedContents` call may carry (Gemini's 400 says so)."""

GEMINI_TASK_TYPES = frozenset(
    {
        "TASK_TYPE_UNSPECIFIED",
        "RETRIEVAL_QUERY",
        "RETRIEVAL_DOCUMENT",
        "SEMANTIC_SIMILARITY",
        "CLASSIFICATION",
        "CLUSTERING",
        "QUESTION_ANSWERING",
        "FACT_VERIFICATION",
        "CODE_RETRIEVAL_QUERY",
    }
)
"""The `TaskType` enum of the Gemini API reference."""

_EMBED_FIELDS = frozenset(
    {
        "model",
        "content",
        "taskType",
        "task_type",
        "title",
        "outputDimensionality",
        "output_dimensionality",
    }
)
"""`EmbedContentRequest`'s fields, in both spellings Google's JSON parser accepts."""

_URL_MODEL = re.compile(r"((?:tunedModels|models)/[^/:]+):\w+$")


def _invalid(message: str) -> Fault:
    return Fault("status", status=400, message=message)


def _unknown_name(name: str, where: str) -> str:
    at = f" at '{where}'" if where else ""
    return f'Invalid JSON payload received. Unknown name "{name}"{at}: Cannot find field.'


def _url_model(path: str) -> str | None:
    match = _URL_MODEL.search(path)
    return match.group(1) if match else None


def _embed_request_fault(entry: dict[str, Any], model: str | None, where: str) -> Fault | None:
    """The refusal of one `EmbedContentRequest` (at `where` in the body), or `None`."""
    unknown = sorted(set(entry) - _EMBED_FIELDS)
    if unknown:
        return _invalid(_unknown_name(unknown[0], where))
    prefix = f"{where}." if where else ""
    named = entry.get("model")
    if (
        named is not None
        and model is not None
        and str(named).removeprefix("models/") != (model.removeprefix("models/"))
    ):
        return _invalid(f"* {prefix}model: fake: {named!r} is not the model of the URL, {model!r}")
    content = entry.get("content")
    parts = content.get("parts") if isinstance(content, dict) else None
    if not isinstance(parts, list) or not parts:
        return _invalid(f"* {prefix}content.parts: fake: at least one part is required")
    if not all(isinstance(p, dict) and isinstance(p.get("text"), str) for p in parts):
        return _invalid(f"* {prefix}content.parts: fake: only text parts are served")
    task = entry.get("taskType", entry.get("task_type"))
    if task is not None and task not in GEMINI_TASK_TYPES:
        return _invalid(
            f"Invalid value at '{prefix}task_type' (type.googleapis.com/"
            f"google.ai.generativelanguage.v1beta.TaskType), {json.dumps(task)}"
        )
    dims = entry.get("outputDimensionality", entry.get("output_dimensionality"))
    if dims is not None and (isinstance(dims, bool) or not isinstance(dims, int) or dims < 0):
        return _invalid(
            f"Invalid value at '{prefix}output_dimensionality' (TYPE_INT32), {json.dumps(dims)}"
        )
    return None


def _text(entry: dict[str, Any]) -> str:
    content = entry.get("content")
    parts = content.get("parts") if isinstance(content, dict) else None
    return "".join(p.get("text", "") for p in parts or () if isinstance(p, dict))


def _values(entry: dict[str, Any]) -> dict[str, Any]:
    from ._embeddings import DEFAULT_DIMENSIONS, fake_vector, float32_json

    dims = entry.get("outputDimensionality", entry.get("output_dimensionality")) or (
        DEFAULT_DIMENSIONS
    )
    return {"values": [float32_json(v) for v in fake_vector(_text(entry), dims)]}
