"""OpenAI Chat Completions (`POST …/chat/completions`), streamed and whole.

The wire shapes follow recorded OpenAI traffic (`/work/shared/wire`): each streamed
chunk is a `chat.completion.chunk` object whose `choices[0].delta` carries the content;
the first delta carries `"role": "assistant"`; the finish chunk has an empty delta and a
`finish_reason`; with `stream_options.include_usage` every chunk carries `"usage": null`
and a usage-only chunk with `"choices": []` follows the finish chunk; `data: [DONE]`
ends the stream.
"""

from __future__ import annotations

from typing import Any

from .._script import Fault, Frame, Rendered, Script, ScriptUsage, Text, ToolFragment
from ._base import Dialect, json_bytes

__all__ = ["OpenAIChatDialect"]

_CREATED = 1_700_000_000
_ID = "chatcmpl-fakeservers"

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    403: "permission_error",
    404: "invalid_request_error",
    409: "invalid_request_error",
    413: "invalid_request_error",
    422: "invalid_request_error",
    429: "rate_limit_error",
}


def _retry_after_value(seconds: float) -> str:
    return f"{seconds:g}"


class OpenAIChatDialect(Dialect):
    """The OpenAI Chat Completions protocol.

    Text pieces become `delta.content`, reasoning pieces `delta.reasoning_content` (the
    field DeepSeek and vLLM use), tool-call fragments `delta.tool_calls` entries (`id`,
    `type` and `function.name` only on fragments that carry them). Usage reports
    `prompt_tokens`, `completion_tokens`, `total_tokens` (when both are known),
    `prompt_tokens_details.cached_tokens` and
    `completion_tokens_details.reasoning_tokens`; this protocol has no cache-write
    figure, so `cache_write_tokens` is never sent.
    """

    name = "openai-chat"
    base_path = "/v1"
    content_type = "text/event-stream"

    # --- rendering -----------------------------------------------------------------

    def render(self, script: Script, *, stream: bool) -> Rendered:
        """Render a script as a chat-completion stream or a whole `chat.completion`.

        Args:
            script: What the provider sends.
            stream: Whether to render the streamed (SSE) form.

        Returns:
            The rendered response.
        """
        if stream:
            return self._render_stream(script)
        return self._render_whole(script)

    def _chunk(self, script: Script, choices: list[dict[str, Any]]) -> dict[str, Any]:
        chunk: dict[str, Any] = {
            "id": _ID,
            "object": "chat.completion.chunk",
            "created": _CREATED,
            "model": script.model,
            "choices": choices,
        }
        if script.usage is not None and script.usage_placement == "trailing":
            chunk["usage"] = None  # OpenAI marks every chunk when include_usage is on
        return chunk

    @staticmethod
    def _choice(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        return {"index": 0, "delta": delta, "finish_reason": finish_reason}

    @staticmethod
    def _sse(payload: Any) -> bytes:
        return b"data: " + json_bytes(payload) + b"\n\n"

    def _render_stream(self, script: Script) -> Rendered:
        frames: list[Frame] = []
        pieces = script.pieces
        merge_role = bool(pieces) and isinstance(pieces[0], ToolFragment)
        if not merge_role:
            # OpenAI opens a text stream with a role-only chunk.
            role = self._choice({"role": "assistant", "content": ""})
            frames.append(Frame(self._sse(self._chunk(script, [role]))))
        for i, piece in enumerate(pieces):
            delta: dict[str, Any] = {}
            if i == 0 and merge_role:
                delta = {"role": "assistant", "content": None}
            if isinstance(piece, Text):
                delta["content"] = piece.text
            elif isinstance(piece, ToolFragment):
                delta["tool_calls"] = [_tool_call_delta(piece)]
            else:
                delta["reasoning_content"] = piece.text
            chunk = self._chunk(script, [self._choice(delta)])
            frames.append(Frame(self._sse(chunk), pieces=(i,)))

        usage_json, usage_fields = _usage_json(script.usage)
        placement = script.usage_placement if script.usage is not None else "none"
        in_finish = placement in ("finish", "split")
        if script.finish_reason is not None or in_finish:
            chunk = self._chunk(script, [self._choice({}, script.finish_reason)])
            if in_finish:
                chunk["usage"] = usage_json
            frames.append(
                Frame(
                    self._sse(chunk),
                    usage=usage_fields if in_finish else frozenset(),
                    finish=script.finish_reason is not None,
                )
            )
        if placement == "trailing":
            chunk = self._chunk(script, [])
            chunk["usage"] = usage_json
            frames.append(Frame(self._sse(chunk), usage=usage_fields))
        if script.sentinel:
            frames.append(Frame(b"data: [DONE]\n\n", sentinel=True))
        return Rendered(
            200,
            (
                ("content-type", f"{self.content_type}; charset=utf-8"),
                ("cache-control", "no-cache"),
            ),
            self.finish_frames(frames, script),
            malformed=self.malformed_frame(),
        )

    def _render_whole(self, script: Script) -> Rendered:
        message: dict[str, Any] = {
            "role": "assistant",
            "content": script.text or None,
            "refusal": None,
        }
        if script.reasoning:
            message["reasoning_content"] = script.reasoning
        calls = _joined_tool_calls(script)
        if calls:
            message["tool_calls"] = calls
        payload: dict[str, Any] = {
            "id": _ID,
            "object": "chat.completion",
            "created": _CREATED,
            "model": script.model,
            "choices": [{"index": 0, "message": message, "finish_reason": script.finish_reason}],
        }
        usage_fields: frozenset[str] = frozenset()
        if script.usage is not None and script.usage_placement != "none":
            payload["usage"], usage_fields = _usage_json(script.usage)
        return self.whole_response(
            script, payload, usage=usage_fields, finish=script.finish_reason is not None
        )

    def render_error(self, fault: Fault) -> Rendered:
        """Render `{"error": {"message", "type", "param", "code"}}` with `fault.status`.

        Args:
            fault: The `status` fault.

        Returns:
            The error response, with `Retry-After` when `fault.retry_after` is set.
        """
        error_type = _ERROR_TYPES.get(fault.status, "server_error")
        payload = {
            "error": {
                "message": fault.message,
                "type": error_type,
                "param": None,
                "code": fault.code,
            }
        }
        headers: list[tuple[str, str]] = [("content-type", "application/json")]
        if fault.retry_after is not None:
            headers.append(("retry-after", _retry_after_value(fault.retry_after)))
        return Rendered(fault.status, tuple(headers), (Frame(json_bytes(payload)),))

    # --- routing -------------------------------------------------------------------

    def is_generation(self, method: str, path: str) -> bool:
        """`POST …/chat/completions` (any base path, so proxies' prefixes work too)."""
        return method == "POST" and path.rstrip("/").endswith("/chat/completions")


def _tool_call_delta(piece: ToolFragment) -> dict[str, Any]:
    call: dict[str, Any] = {"index": piece.index}
    if piece.id is not None:
        call["id"] = piece.id
        call["type"] = "function"
    function: dict[str, Any] = {}
    if piece.name is not None:
        function["name"] = piece.name
    function["arguments"] = piece.arguments
    call["function"] = function
    return call


def _joined_tool_calls(script: Script) -> list[dict[str, Any]]:
    """A script's tool-call fragments joined per slot, in slot order."""
    slots: dict[int, dict[str, Any]] = {}
    for piece in script.pieces:
        if not isinstance(piece, ToolFragment):
            continue
        slot = slots.setdefault(piece.index, {"id": None, "name": None, "arguments": ""})
        if piece.id is not None and slot["id"] is None:
            slot["id"] = piece.id
        if piece.name is not None and slot["name"] is None:
            slot["name"] = piece.name
        slot["arguments"] += piece.arguments
    calls: list[dict[str, Any]] = []
    for index in sorted(slots):
        slot = slots[index]
        call: dict[str, Any] = {}
        if slot["id"] is not None:
            call["id"] = slot["id"]
        call["type"] = "function"
        function: dict[str, Any] = {}
        if slot["name"] is not None:
            function["name"] = slot["name"]
        function["arguments"] = slot["arguments"]
        call["function"] = function
        calls.append(call)
    return calls


def _usage_json(usage: ScriptUsage | None) -> tuple[dict[str, Any], frozenset[str]]:
    """OpenAI's `usage` object for `usage`, and the neutral fields it reports."""
    if usage is None:
        return {}, frozenset()
    out: dict[str, Any] = {}
    fields: set[str] = set()
    if usage.input_tokens is not None:
        out["prompt_tokens"] = usage.input_tokens
        fields.add("input_tokens")
    if usage.output_tokens is not None:
        out["completion_tokens"] = usage.output_tokens
        fields.add("output_tokens")
    if usage.input_tokens is not None and usage.output_tokens is not None:
        out["total_tokens"] = usage.input_tokens + usage.output_tokens
    if usage.cache_read_tokens is not None:
        out["prompt_tokens_details"] = {"cached_tokens": usage.cache_read_tokens}
        fields.add("cache_read_tokens")
    if usage.reasoning_tokens is not None:
        out["completion_tokens_details"] = {"reasoning_tokens": usage.reasoning_tokens}
        fields.add("reasoning_tokens")
    return out, frozenset(fields)
