"""Ollama's native chat API (`POST /api/chat`), streamed as NDJSON and whole.

The shapes follow Ollama's own server (`api/types.go`, `server/routes.go`): every
streamed line is `{"model", "created_at", "message": {...}, "done": false}`; the last
line is `"done": true` with `done_reason`, the token counts and the timings, and is the
protocol's sentinel; tool calls are sent whole, with their arguments as a JSON object;
errors are `{"error": "text"}`. Zero counts and durations are left out, as Ollama's
`omitempty` fields are.
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

__all__ = ["OllamaDialect"]

_CREATED_AT = "2024-05-01T12:00:00.000000Z"

# The fake server's reported timings, in nanoseconds (Ollama's unit).
_DURATIONS = {
    "total_duration": 1_500_000_000,
    "load_duration": 300_000_000,
    "prompt_eval_duration": 200_000_000,
    "eval_duration": 1_000_000_000,
}

_CONTEXT_ERROR = "the input length exceeds the context length"
"""What Ollama says when a prompt does not fit and may not be truncated."""


class OllamaDialect(Dialect):
    """The Ollama native chat protocol.

    Text pieces become `message.content`, reasoning pieces `message.thinking`. Ollama
    sends tool calls whole, so a slot's fragments are joined into one call, sent in one
    line once the slot and every lower slot are complete (calls go out in slot order,
    as Ollama numbers them); the line carries all of the slot's fragments. The joined
    arguments are sent as a JSON object, or verbatim as a string when they do not
    parse to one (a value Ollama itself could not send).

    The finish reason, usage (`prompt_eval_count`, `eval_count`) and timings all ride on
    the final `done: true` line, whatever the script's usage placement; Ollama has no
    cache or reasoning counters, so those figures are never sent. A script without the
    sentinel ends before that line, so its finish reason and usage are never sent
    either. Ollama says `done_reason: "stop"` even when the model called tools: a
    `tool_calls` script with tool calls renders `stop` (the adapter maps it back), and
    one without any renders `tool_calls` verbatim. Every other reason is sent verbatim.
    Keep-alive frames are blank lines.
    """

    name = "ollama-chat"
    base_path = ""
    content_type = "application/x-ndjson"

    # --- rendering -----------------------------------------------------------------

    def render(self, script: Script, *, stream: bool) -> Rendered:
        """Render a script as an NDJSON stream or one whole `done: true` object.

        Args:
            script: What the provider sends.
            stream: Whether to render the streamed (NDJSON) form.

        Returns:
            The rendered response.
        """
        if stream:
            return self._render_stream(script)
        return self._render_whole(script)

    def expected_finish_reason(self, script: Script) -> str | None:
        """The finish reason a faithful adapter reports for `script`, before normalizing.

        Ollama cannot say "stop" for a response that called tools (its `stop` then
        means `tool_calls`), so a script finishing `stop` with tool calls reads back as
        `tool_calls`; every other script reads back as it says.

        Args:
            script: The script.

        Returns:
            The finish reason, or `None` when the script sends none.
        """
        if script.finish_reason == "stop" and _has_tool_calls(script.pieces):
            return "tool_calls"
        return script.finish_reason

    def _object(self, script: Script, message: dict[str, Any], *, done: bool) -> dict[str, Any]:
        return {
            "model": script.model,
            "created_at": _CREATED_AT,
            "message": {"role": "assistant", **message},
            "done": done,
        }

    @staticmethod
    def _line(payload: Any) -> bytes:
        return json_bytes(payload) + b"\n"

    def _final(self, script: Script, message: dict[str, Any]) -> tuple[dict[str, Any], Frame]:
        """The `done: true` object and the frame metadata it carries (data left empty)."""
        payload = self._object(script, message, done=True)
        reason = _wire_finish(script)
        if reason is not None:
            payload["done_reason"] = reason
        fields: frozenset[str] = frozenset()
        if script.usage is not None and script.usage_placement != "none":
            counts, fields = _usage_json(script.usage)
            payload.update(counts)
        payload.update(_DURATIONS)
        return payload, Frame(
            b"", usage=fields, finish=script.finish_reason is not None, sentinel=True
        )

    def _render_stream(self, script: Script) -> Rendered:
        frames: list[Frame] = []
        for message, pieces in _stream_messages(script.pieces):
            payload = self._object(script, message, done=False)
            frames.append(Frame(self._line(payload), pieces=pieces))
        if script.sentinel:
            payload, meta = self._final(script, {"content": ""})
            frames.append(
                Frame(self._line(payload), usage=meta.usage, finish=meta.finish, sentinel=True)
            )
        return Rendered(
            200,
            (("content-type", self.content_type),),
            self.finish_frames(frames, script),
            malformed=self.malformed_frame(),
        )

    def _render_whole(self, script: Script) -> Rendered:
        message: dict[str, Any] = {"content": script.text}
        if script.reasoning:
            message["thinking"] = script.reasoning
        calls = [call for call, _ in _whole_calls(script.pieces)]
        if calls:
            message["tool_calls"] = calls
        payload, meta = self._final(script, message)
        return self.whole_response(
            script,
            payload,
            usage=meta.usage,
            finish=meta.finish,
            content_type="application/json; charset=utf-8",
        )

    def render_error(self, fault: Fault) -> Rendered:
        """Render `{"error": "text"}` with `fault.status`.

        Ollama's errors have no code field: a `context_length_exceeded` code becomes
        Ollama's own context-overflow text, any other code prefixes the message
        (`"code: message"`).

        Args:
            fault: The `status` fault.

        Returns:
            The error response, with `Retry-After` when `fault.retry_after` is set.
        """
        if fault.code and "context_length_exceeded" in fault.code:
            text = _CONTEXT_ERROR
        elif fault.code:
            text = f"{fault.code}: {fault.message}"
        else:
            text = fault.message
        headers: list[tuple[str, str]] = [("content-type", "application/json; charset=utf-8")]
        if fault.retry_after is not None:
            headers.append(("retry-after", f"{fault.retry_after:g}"))
        return Rendered(fault.status, tuple(headers), (Frame(json_bytes({"error": text})),))

    def malformed_frame(self) -> bytes:
        """An NDJSON line that is not JSON."""
        return b"{not json\n"

    def keepalive_frame(self) -> bytes:
        """A blank line (NDJSON readers skip it)."""
        return b"\n"

    # --- routing -------------------------------------------------------------------

    def is_generation(self, method: str, path: str) -> bool:
        """`POST …/api/chat`."""
        return method == "POST" and path.rstrip("/").endswith("/api/chat")

    def is_models(self, method: str, path: str) -> bool:
        """`GET …/api/tags`."""
        return method == "GET" and path.rstrip("/").endswith("/api/tags")

    def wants_stream(self, request_json: Any) -> bool:
        """Ollama streams unless the body says `"stream": false`."""
        return not (isinstance(request_json, dict) and request_json.get("stream") is False)

    def models_response(self, models: Sequence[str]) -> Rendered:
        """`GET /api/tags`: `{"models": [{"name", "model", "details", ...}]}`.

        Args:
            models: Model names to list.

        Returns:
            A 200 response.
        """
        payload = {"models": [_tag_entry(m) for m in models]}
        return Rendered(
            200,
            (("content-type", "application/json; charset=utf-8"),),
            (Frame(json_bytes(payload), sentinel=True),),
        )

    def is_show(self, method: str, path: str) -> bool:
        """`POST …/api/show` (the fake servers do not route it; a test transport may)."""
        return method == "POST" and path.rstrip("/").endswith("/api/show")

    def show_response(
        self,
        model: str,
        *,
        context_length: int = 32768,
        capabilities: Sequence[str] = ("completion", "tools"),
        architecture: str = "fakearch",
        parameters: str = "",
    ) -> Rendered:
        """The answer to `POST /api/show {"model": model}`.

        Args:
            model: The model name.
            context_length: Reported as `model_info["<architecture>.context_length"]`.
            capabilities: Ollama capability names (`completion`, `tools`, `vision`,
                `thinking`, ...).
            architecture: `model_info["general.architecture"]`.
            parameters: Modelfile-style parameter lines (e.g. `"num_ctx 8192"`).

        Returns:
            A 200 response.
        """
        payload: dict[str, Any] = {
            "parameters": parameters,
            "details": _tag_entry(model)["details"],
            "model_info": {
                "general.architecture": architecture,
                f"{architecture}.context_length": context_length,
            },
            "capabilities": list(capabilities),
            "modified_at": _CREATED_AT,
        }
        return Rendered(
            200,
            (("content-type", "application/json; charset=utf-8"),),
            (Frame(json_bytes(payload), sentinel=True),),
        )


# --- helpers -------------------------------------------------------------------------


def _has_tool_calls(pieces: Sequence[Piece]) -> bool:
    return any(isinstance(p, ToolFragment) for p in pieces)


def _wire_finish(script: Script) -> str | None:
    reason = script.finish_reason
    if reason == "tool_calls" and _has_tool_calls(script.pieces):
        return "stop"
    return reason


def _tool_call_json(fragments: Sequence[ToolFragment], number: int) -> dict[str, Any]:
    """One whole Ollama tool call from a slot's fragments; `number` is its wire index."""
    call_id = next((f.id for f in fragments if f.id is not None), None)
    name = next((f.name for f in fragments if f.name is not None), None)
    text = "".join(f.arguments for f in fragments)
    arguments: Any
    if not text.strip():
        arguments = {}
    else:
        try:
            parsed = json.loads(text)
        except ValueError:
            parsed = None
        arguments = parsed if isinstance(parsed, dict) else text
    call: dict[str, Any] = {}
    if call_id is not None:
        call["id"] = call_id
    call["function"] = {"index": number, "name": name or "", "arguments": arguments}
    return call


def _slots(pieces: Sequence[Piece]) -> dict[int, list[int]]:
    """Piece indices of each tool-call slot's fragments, in wire order."""
    slots: dict[int, list[int]] = {}
    for i, piece in enumerate(pieces):
        if isinstance(piece, ToolFragment):
            slots.setdefault(piece.index, []).append(i)
    return slots


def _whole_calls(pieces: Sequence[Piece]) -> list[tuple[dict[str, Any], tuple[int, ...]]]:
    """Every slot's whole call, in slot order, with the piece indices it carries."""
    slots = _slots(pieces)
    out = []
    for number, index in enumerate(sorted(slots)):
        members = slots[index]
        frags = [p for i in members if isinstance(p := pieces[i], ToolFragment)]
        out.append((_tool_call_json(frags, number), tuple(members)))
    return out


def _stream_messages(
    pieces: Sequence[Piece],
) -> list[tuple[dict[str, Any], tuple[int, ...]]]:
    """The streamed lines' `message` objects and the piece indices each carries.

    Text and reasoning go out where they stand; a tool call goes out right after the
    last fragment of its slot, held back until every lower slot has gone out.
    """
    slots = _slots(pieces)
    order = sorted(slots)
    last = {index: members[-1] for index, members in slots.items()}
    calls = dict(zip(order, _whole_calls(pieces), strict=True))
    done: set[int] = set()
    next_slot = 0
    out: list[tuple[dict[str, Any], tuple[int, ...]]] = []
    for i, piece in enumerate(pieces):
        if isinstance(piece, Text):
            out.append(({"content": piece.text}, (i,)))
        elif isinstance(piece, Reasoning):
            out.append(({"content": "", "thinking": piece.text}, (i,)))
        elif last[piece.index] == i:
            done.add(piece.index)
            while next_slot < len(order) and order[next_slot] in done:
                call, members = calls[order[next_slot]]
                out.append(({"content": "", "tool_calls": [call]}, members))
                next_slot += 1
    return out


def _usage_json(usage: ScriptUsage) -> tuple[dict[str, int], frozenset[str]]:
    """Ollama's counters for `usage` (zeros left out), and the neutral fields sent."""
    out: dict[str, int] = {}
    fields: set[str] = set()
    if usage.input_tokens:
        out["prompt_eval_count"] = usage.input_tokens
        fields.add("input_tokens")
    if usage.output_tokens:
        out["eval_count"] = usage.output_tokens
        fields.add("output_tokens")
    return out, frozenset(fields)


def _tag_entry(model: str) -> dict[str, Any]:
    return {
        "name": model,
        "model": model,
        "modified_at": _CREATED_AT,
        "size": 1_000_000_000,
        "digest": "0" * 64,
        "details": {
            "parent_model": "",
            "format": "gguf",
            "family": "fakearch",
            "families": ["fakearch"],
            "parameter_size": "1B",
            "quantization_level": "Q4_K_M",
        },
    }
