"""Google Gemini (`POST …/models/{model}:generateContent` / `:streamGenerateContent`).

The wire shapes follow recorded Gemini traffic (`/work/shared/wire`). Every streamed
chunk is a whole `GenerateContentResponse` — `candidates[0].content.parts`,
`candidates[0].finishReason`, `usageMetadata`, `modelVersion`, `responseId` — sent as a
server-sent event (`data: {...}\\r\\n\\r\\n`, what `alt=sse` asks for) by the `gemini`
dialect, or as one element of a JSON array whose elements arrive one by one
(`[{...}\\n,\\r\\n{...}\\n]`, the body without `alt=sse`) by the `gemini-json-array`
dialect. The protocol chooses streaming by endpoint, not by a body field.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from .._script import (
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
from ._base import Dialect, json_bytes

__all__ = ["GeminiDialect", "GeminiJSONArrayDialect"]

_RESPONSE_ID = "fakeservers-gemini"

_FINISH: dict[str, str] = {
    "stop": "STOP",
    "tool_calls": "STOP",
    "length": "MAX_TOKENS",
    "content_filter": "SAFETY",
    "other": "OTHER",
}
"""Neutral finish reasons as Gemini spells them; other values are sent verbatim."""

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


class GeminiDialect(Dialect):
    """The Gemini API, streamed as server-sent events.

    Text pieces become `{"text"}` parts, reasoning pieces `{"text", "thought": true}`
    parts, one chunk per piece. Gemini sends function calls whole, so a slot's fragments
    are joined into one `functionCall` part (`args` the parsed arguments, `{}` when they
    do not parse to an object; `id` when the script gives one), sent in its own chunk
    once the slot and every lower slot are complete — calls go out in slot order, which
    is the order the adapter numbers them in; the chunk carries all the slot's
    fragments. The finish reason rides on a last chunk with an empty text part, as
    Gemini 3 sends it.

    Finish reasons: `stop` and `tool_calls` are both `STOP` (Gemini has no reason of its
    own for tool calls; an adapter reads `STOP` after function calls as `tool_calls`),
    so `expected_finish_reason` says what a faithful adapter reports; `length` is
    `MAX_TOKENS`, `content_filter` `SAFETY`, `other` `OTHER`; anything else is sent
    verbatim.

    Usage is `usageMetadata`: `promptTokenCount`, `cachedContentTokenCount`,
    `candidatesTokenCount` (output minus reasoning), `thoughtsTokenCount` (reasoning) and
    `totalTokenCount`, zeros included (the real service omits zero counts; adapters read
    either). Gemini counts thoughts inside the output, so a reasoning figure is sent
    only with an output figure at least as large, and left out otherwise. There is no
    cache-write figure. Placements: `split` sends the prompt-side figures live in every
    chunk, as Gemini does, and all of them with the finish reason; `finish` sends them
    all with the finish reason only; `trailing` sends them in a usage-only chunk after
    the finish chunk (every field of a response chunk is optional), which an adapter
    sees only if it drains the body to its end.

    The end of the body is this protocol's sentinel: the SSE form has no `[DONE]`, so
    the sentinel frame is empty, rendered whenever a finish reason is sent, and cannot be
    withheld (`script.sentinel` is ignored): a clean end is the sentinel, a disconnect,
    stall or garbage before it means it never came. Errors are
    `{"error": {"code", "message", "status", "details"}}`, the fault's `code` as an
    `ErrorInfo` reason and `retry_after` as a `RetryInfo` delay (and a `Retry-After`
    header).
    """

    name = "gemini"
    base_path = "/v1beta"
    content_type = "text/event-stream"

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

    def _chunk(
        self, script: Script, parts: list[dict[str, Any]] | None, finish: str | None = None
    ) -> dict[str, Any]:
        chunk: dict[str, Any] = {}
        if parts is not None or finish is not None:
            candidate: dict[str, Any] = {"content": {"parts": parts or [], "role": "model"}}
            if finish is not None:
                candidate["finishReason"] = finish
            candidate["index"] = 0
            chunk["candidates"] = [candidate]
        chunk["modelVersion"] = script.model
        chunk["responseId"] = _RESPONSE_ID
        return chunk

    def _encode(self, payload: dict[str, Any], position: int) -> bytes:
        """One chunk's bytes; `position` is its index among the body's chunks."""
        return b"data: " + json_bytes(payload) + b"\r\n\r\n"

    def _opening(self) -> bytes:
        """Bytes before the first chunk (the JSON array's `[`)."""
        return b""

    def _closing(self, script: Script) -> Frame | None:
        """The sentinel frame: the clean end of the body, once a finish reason was sent."""
        if script.finish_reason is None:
            return None
        return Frame(b"", sentinel=True)

    def _render_stream(self, script: Script) -> Rendered:
        usage = script.usage
        placement = script.usage_placement if usage is not None else "none"
        live, live_fields = _usage_metadata(usage, input_only=True)
        full, full_fields = _usage_metadata(usage, input_only=False)
        specs: list[tuple[dict[str, Any], Frame]] = []
        for parts, pieces in _stream_parts(script.pieces):
            chunk = self._chunk(script, parts)
            fields: frozenset[str] = frozenset()
            if placement == "split" and live:
                chunk["usageMetadata"] = dict(live)
                fields = live_fields
            specs.append((chunk, Frame(b"", pieces=pieces, usage=fields)))
        finish = script.finish_reason
        in_finish = placement in ("finish", "split") and bool(full)
        if finish is not None or in_finish:
            wire = _FINISH.get(finish, finish) if finish is not None else None
            chunk = self._chunk(script, [{"text": ""}] if wire else None, wire)
            fields = frozenset()
            if in_finish:
                chunk["usageMetadata"] = dict(full)
                fields = full_fields
            specs.append((chunk, Frame(b"", usage=fields, finish=finish is not None)))
        if placement == "trailing" and full:
            chunk = self._chunk(script, None)
            chunk["usageMetadata"] = dict(full)
            specs.append((chunk, Frame(b"", usage=full_fields)))
        frames: list[Frame] = []
        opening = self._opening()
        for position, (chunk, meta) in enumerate(specs):
            data = self._encode(chunk, position)
            if position == 0:
                data = opening + data
            frames.append(Frame(data, pieces=meta.pieces, usage=meta.usage, finish=meta.finish))
        if not specs and opening:
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
        return (("content-type", self.content_type),)

    def _render_whole(self, script: Script) -> Rendered:
        parts: list[dict[str, Any]] = []
        if script.reasoning:
            parts.append({"text": script.reasoning, "thought": True})
        if script.text:
            parts.append({"text": script.text})
        parts.extend(part for part, _ in _whole_calls(script.pieces))
        finish = script.finish_reason
        wire = _FINISH.get(finish, finish) if finish is not None else None
        payload = self._chunk(script, parts, wire)
        fields: frozenset[str] = frozenset()
        if script.usage is not None and script.usage_placement != "none":
            meta, fields = _usage_metadata(script.usage, input_only=False)
            if meta:
                payload["usageMetadata"] = meta
        return self.whole_response(
            script,
            payload,
            usage=fields,
            finish=finish is not None,
            content_type="application/json; charset=UTF-8",
        )

    def render_error(self, fault: Fault) -> Rendered:
        """Render `{"error": {"code", "message", "status", "details"}}` with `fault.status`.

        Args:
            fault: The `status` fault.

        Returns:
            The error response; `fault.code` becomes an `ErrorInfo` reason, and
            `fault.retry_after` a `RetryInfo` delay plus a `Retry-After` header.
        """
        details: list[dict[str, Any]] = []
        if fault.code is not None:
            details.append(
                {
                    "@type": _ERROR_INFO,
                    "reason": fault.code,
                    "domain": "googleapis.com",
                    "metadata": {"service": "generativelanguage.googleapis.com"},
                }
            )
        if fault.retry_after is not None:
            details.append({"@type": _RETRY_INFO, "retryDelay": f"{fault.retry_after:g}s"})
        error: dict[str, Any] = {
            "code": fault.status,
            "message": fault.message,
            "status": _STATUS_NAMES.get(fault.status, "UNKNOWN"),
        }
        if details:
            error["details"] = details
        headers: list[tuple[str, str]] = [("content-type", "application/json; charset=UTF-8")]
        if fault.retry_after is not None:
            headers.append(("retry-after", f"{fault.retry_after:g}"))
        return Rendered(fault.status, tuple(headers), (Frame(self._error_body(error)),))

    def _error_body(self, error: dict[str, Any]) -> bytes:
        return json_bytes({"error": error})

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


class GeminiJSONArrayDialect(GeminiDialect):
    """The Gemini API streamed without `alt=sse`: one JSON array, element by element.

    Each chunk is a pretty-printed `GenerateContentResponse`, the first preceded by `[`
    and the others by `,\\r\\n`, each followed by a newline; the closing `]` is the
    sentinel, left out when `script.sentinel` is false. Keep-alive frames are blank
    lines (whitespace between elements), the malformed frame is an element that is not
    JSON, and errors are wrapped in a list (`[{"error": {...}}]`), as Gemini sends them
    on this endpoint. Everything else is as in `GeminiDialect`.
    """

    name = "gemini-json-array"
    content_type = "application/json; charset=UTF-8"

    def _encode(self, payload: dict[str, Any], position: int) -> bytes:
        text = json.dumps(payload, indent=2, ensure_ascii=False).encode("utf-8")
        return (b"" if position == 0 else b",\r\n") + text + b"\n"

    def _opening(self) -> bytes:
        return b"["

    def _closing(self, script: Script) -> Frame | None:
        return Frame(b"]", sentinel=True) if script.sentinel else None

    def _error_body(self, error: dict[str, Any]) -> bytes:
        return json_bytes([{"error": error}])

    def malformed_frame(self) -> bytes:
        """An array element that is not JSON."""
        return b",\r\n{not json}\n"

    def keepalive_frame(self) -> bytes:
        """Whitespace between array elements."""
        return b"\r\n"


# --- pieces to parts -------------------------------------------------------------------


def _has_calls(pieces: Sequence[Piece]) -> bool:
    return any(isinstance(p, ToolFragment) for p in pieces)


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


def _usage_metadata(
    usage: ScriptUsage | None, *, input_only: bool
) -> tuple[dict[str, Any], frozenset[str]]:
    """`usageMetadata` for `usage` (prompt-side figures only, or all), and the neutral
    fields it reports."""
    if usage is None:
        return {}, frozenset()
    out: dict[str, Any] = {}
    fields: set[str] = set()
    total = 0
    counted = False
    if usage.input_tokens is not None:
        out["promptTokenCount"] = usage.input_tokens
        fields.add("input_tokens")
        total += usage.input_tokens
        counted = True
    if not input_only and usage.output_tokens is not None:
        output, reasoning = usage.output_tokens, usage.reasoning_tokens
        if reasoning is not None and reasoning <= output:
            out["candidatesTokenCount"] = output - reasoning
            out["thoughtsTokenCount"] = reasoning
            fields.add("reasoning_tokens")
        else:
            out["candidatesTokenCount"] = output
        fields.add("output_tokens")
        total += output
        counted = True
    if counted:
        out["totalTokenCount"] = total
    if usage.cache_read_tokens is not None:
        out["cachedContentTokenCount"] = usage.cache_read_tokens
        fields.add("cache_read_tokens")
    return out, frozenset(fields)
