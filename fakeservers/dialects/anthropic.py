"""Anthropic Messages (`POST …/messages`), streamed and whole.

The wire shapes follow recorded Anthropic traffic (`/work/shared/wire`): every event is
sent as `event: <type>` plus `data: <json>` whose `type` repeats the name; a stream opens
with `message_start` (the `Message` shell), builds content blocks one at a time with
`content_block_start` / `content_block_delta` / `content_block_stop`, reports the stop
reason and output usage in `message_delta`, and ends with `message_stop`. Keep-alives
are `ping` events rather than comment lines.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .._script import (
    Fault,
    Frame,
    Reasoning,
    Rendered,
    Script,
    ScriptUsage,
    Text,
    ToolFragment,
)
from ._base import Dialect, json_bytes

__all__ = ["AnthropicDialect"]

_ID = "msg_fakeservers"
_CREATED_AT = "2025-01-01T00:00:00Z"

_STOP_REASONS = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "content_filter": "refusal",
}

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    408: "timeout_error",
    413: "request_too_large",
    429: "rate_limit_error",
    503: "overloaded_error",
    529: "overloaded_error",
}

# Neutral usage fields, the Anthropic name of each, and which side of the split it is on.
_INPUT_SIDE = ("input_tokens", "cache_read_tokens", "cache_write_tokens")
_OUTPUT_SIDE = ("output_tokens", "reasoning_tokens")


@dataclass(slots=True)
class _Block:
    """One content block: its kind, the script pieces it carries, and its tool slot."""

    kind: str
    pieces: list[int] = field(default_factory=list)
    slot: int | None = None


class AnthropicDialect(Dialect):
    """The Anthropic Messages protocol.

    Content blocks are built from the script's pieces: a run of text pieces is one
    `text` block (a `text_delta` per piece), a run of reasoning pieces one `thinking`
    block (a `thinking_delta` per piece, then a `signature_delta`), and each tool call one
    `tool_use` block (`id` and `name` in `content_block_start`, one `input_json_delta` per
    fragment). Anthropic never interleaves blocks, and a tool call's slot is its position
    among the `tool_use` blocks, so a call is sent whole, at the position of its first
    fragment, once every lower slot has been sent; a script's tool slots must therefore be
    numbered `0..n-1`. An `id` or `name` the script omits is left out of the block.

    Finish reasons map `stop` → `end_turn`, `length` → `max_tokens`, `tool_calls` →
    `tool_use`, `content_filter` → `refusal`; other values are sent verbatim. Usage uses
    Anthropic's names (`input_tokens`, `output_tokens`, `cache_read_input_tokens`,
    `cache_creation_input_tokens`, `output_tokens_details.thinking_tokens`), each field
    only when the script sets it. Placement: `split` puts the input-side figures in
    `message_start` and the output-side ones in `message_delta` (Anthropic's own split);
    `finish` puts all of them in `message_delta`; `trailing` sends them in a second,
    usage-only `message_delta` after the one with the stop reason.
    """

    name = "anthropic-messages"
    base_path = "/v1"
    content_type = "text/event-stream"

    # --- rendering -----------------------------------------------------------------

    def render(self, script: Script, *, stream: bool) -> Rendered:
        """Render a script as a Messages event stream or a whole `Message`.

        Args:
            script: What the provider sends.
            stream: Whether to render the streamed (SSE) form.

        Returns:
            The rendered response.

        Raises:
            ValueError: If the script's tool slots are not numbered `0..n-1`.
        """
        blocks = _blocks(script)
        if stream:
            return self._render_stream(script, blocks)
        return self._render_whole(script, blocks)

    @staticmethod
    def sse_event(payload: dict[str, Any]) -> bytes:
        """One event as Anthropic frames it: `event: <type>` and `data: <json>`.

        Args:
            payload: The event object; its `type` names the event.

        Returns:
            The event's bytes, blank line included.
        """
        name = str(payload.get("type", "message"))
        return b"event: " + name.encode() + b"\ndata: " + json_bytes(payload) + b"\n\n"

    def error_event(self, error_type: str, message: str) -> bytes:
        """An `error` event as Anthropic sends it inside a stream.

        Args:
            error_type: The error's type, e.g. `overloaded_error`.
            message: The error message.

        Returns:
            The event's bytes.
        """
        return self.sse_event({"type": "error", "error": {"type": error_type, "message": message}})

    def _render_stream(self, script: Script, blocks: list[_Block]) -> Rendered:
        usage = script.usage if script.usage_placement != "none" else None
        placement = script.usage_placement
        frames: list[Frame] = []

        start_fields = _INPUT_SIDE if placement == "split" else ()
        start_usage, start_set = _usage_json(usage, start_fields)
        shell: dict[str, Any] = {
            "id": _ID,
            "type": "message",
            "role": "assistant",
            "model": script.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": start_usage,
        }
        frames.append(
            Frame(self.sse_event({"type": "message_start", "message": shell}), usage=start_set)
        )

        for number, block in enumerate(blocks):
            frames.extend(self._block_frames(script, number, block))

        if placement == "split":
            delta_fields: tuple[str, ...] = _OUTPUT_SIDE
        elif placement == "finish":
            delta_fields = _INPUT_SIDE + _OUTPUT_SIDE
        else:
            delta_fields = ()
        delta_usage, delta_set = _usage_json(usage, delta_fields)
        reason = script.finish_reason
        message_delta: dict[str, Any] = {
            "type": "message_delta",
            "delta": {
                "stop_reason": None if reason is None else _STOP_REASONS.get(reason, reason),
                "stop_sequence": None,
            },
        }
        if delta_set:
            message_delta["usage"] = delta_usage
        frames.append(
            Frame(self.sse_event(message_delta), usage=delta_set, finish=reason is not None)
        )
        if placement == "trailing" and usage is not None:
            trailing_usage, trailing_set = _usage_json(usage, _INPUT_SIDE + _OUTPUT_SIDE)
            frames.append(
                Frame(
                    self.sse_event({"type": "message_delta", "delta": {}, "usage": trailing_usage}),
                    usage=trailing_set,
                )
            )
        if script.sentinel:
            frames.append(Frame(self.sse_event({"type": "message_stop"}), sentinel=True))
        return Rendered(
            200,
            (
                ("content-type", f"{self.content_type}; charset=utf-8"),
                ("cache-control", "no-cache"),
            ),
            self.finish_frames(frames, script),
            malformed=self.malformed_frame(),
        )

    def _block_frames(self, script: Script, number: int, block: _Block) -> list[Frame]:
        frames: list[Frame] = []
        start: dict[str, Any]
        if block.kind == "text":
            start = {"type": "text", "text": ""}
            frames.append(Frame(self._start_event(number, start)))
            for i in block.pieces:
                piece = script.pieces[i]
                assert isinstance(piece, Text)
                delta = {"type": "text_delta", "text": piece.text}
                frames.append(Frame(self._delta_event(number, delta), pieces=(i,)))
        elif block.kind == "thinking":
            start = {"type": "thinking", "thinking": "", "signature": ""}
            frames.append(Frame(self._start_event(number, start)))
            for i in block.pieces:
                piece = script.pieces[i]
                assert isinstance(piece, Reasoning)
                delta = {"type": "thinking_delta", "thinking": piece.text}
                frames.append(Frame(self._delta_event(number, delta), pieces=(i,)))
            signature = {"type": "signature_delta", "signature": f"fakesig-{number}"}
            frames.append(Frame(self._delta_event(number, signature)))
        else:
            first = script.pieces[block.pieces[0]]
            assert isinstance(first, ToolFragment)
            start = {"type": "tool_use"}
            if first.id is not None:
                start["id"] = first.id
            if first.name is not None:
                start["name"] = first.name
            start["input"] = {}
            # The start already delivers the call's id and name.
            frames.append(Frame(self._start_event(number, start), pieces=(block.pieces[0],)))
            for i in block.pieces:
                piece = script.pieces[i]
                assert isinstance(piece, ToolFragment)
                delta = {"type": "input_json_delta", "partial_json": piece.arguments}
                frames.append(Frame(self._delta_event(number, delta), pieces=(i,)))
        stop = {"type": "content_block_stop", "index": number}
        frames.append(Frame(self.sse_event(stop)))
        return frames

    def _start_event(self, number: int, block: dict[str, Any]) -> bytes:
        return self.sse_event(
            {"type": "content_block_start", "index": number, "content_block": block}
        )

    def _delta_event(self, number: int, delta: dict[str, Any]) -> bytes:
        return self.sse_event({"type": "content_block_delta", "index": number, "delta": delta})

    def _render_whole(self, script: Script, blocks: list[_Block]) -> Rendered:
        content: list[dict[str, Any]] = []
        for number, block in enumerate(blocks):
            texts = [script.pieces[i] for i in block.pieces]
            if block.kind == "text":
                content.append({"type": "text", "text": "".join(_texts(texts))})
            elif block.kind == "thinking":
                content.append(
                    {
                        "type": "thinking",
                        "thinking": "".join(_texts(texts)),
                        "signature": f"fakesig-{number}",
                    }
                )
            else:
                content.append(_whole_tool_use(texts))
        reason = script.finish_reason
        payload: dict[str, Any] = {
            "id": _ID,
            "type": "message",
            "role": "assistant",
            "model": script.model,
            "content": content,
            "stop_reason": None if reason is None else _STOP_REASONS.get(reason, reason),
            "stop_sequence": None,
        }
        usage_set: frozenset[str] = frozenset()
        if script.usage is not None and script.usage_placement != "none":
            payload["usage"], usage_set = _usage_json(script.usage, _INPUT_SIDE + _OUTPUT_SIDE)
        return self.whole_response(script, payload, usage=usage_set, finish=reason is not None)

    def render_error(self, fault: Fault) -> Rendered:
        """Render `{"type": "error", "error": {"type", "message"}}` with `fault.status`.

        The error type is `fault.code` when set, else Anthropic's type for the status
        (`rate_limit_error` for 429, `overloaded_error` for 529, `api_error` for other
        server errors, ...).

        Args:
            fault: The `status` fault.

        Returns:
            The error response, with `retry-after` when `fault.retry_after` is set.
        """
        default = _ERROR_TYPES.get(
            fault.status, "api_error" if fault.status >= 500 else "invalid_request_error"
        )
        payload = {
            "type": "error",
            "error": {"type": fault.code or default, "message": fault.message},
            "request_id": "req_fakeservers",
        }
        headers: list[tuple[str, str]] = [("content-type", "application/json")]
        if fault.retry_after is not None:
            headers.append(("retry-after", f"{fault.retry_after:g}"))
        return Rendered(fault.status, tuple(headers), (Frame(json_bytes(payload)),))

    def malformed_frame(self) -> bytes:
        """A `content_block_delta` event whose data is not JSON."""
        return b"event: content_block_delta\ndata: {not json\n\n"

    def keepalive_frame(self) -> bytes:
        """Anthropic's keep-alive: a `ping` event."""
        return b'event: ping\ndata: {"type": "ping"}\n\n'

    def models_response(self, models: Sequence[str]) -> Rendered:
        """Anthropic's model list: one page, `has_more` false.

        Args:
            models: Model names to list.

        Returns:
            A 200 response with `data[]` entries of `type`, `id`, `display_name` and
            `created_at`, plus `has_more`, `first_id` and `last_id`.
        """
        payload = {
            "data": [
                {"type": "model", "id": m, "display_name": m, "created_at": _CREATED_AT}
                for m in models
            ],
            "has_more": False,
            "first_id": models[0] if models else None,
            "last_id": models[-1] if models else None,
        }
        return Rendered(
            200,
            (("content-type", "application/json"),),
            (Frame(json_bytes(payload), sentinel=True),),
        )

    # --- routing -------------------------------------------------------------------

    def is_generation(self, method: str, path: str) -> bool:
        """`POST …/messages` (any base path, so proxies' prefixes work too)."""
        return method == "POST" and path.rstrip("/").endswith("/messages")


def _texts(pieces: Sequence[Any]) -> list[str]:
    return [p.text for p in pieces if isinstance(p, Text | Reasoning)]


def _whole_tool_use(fragments: Sequence[Any]) -> dict[str, Any]:
    first = fragments[0]
    assert isinstance(first, ToolFragment)
    block: dict[str, Any] = {"type": "tool_use"}
    if first.id is not None:
        block["id"] = first.id
    if first.name is not None:
        block["name"] = first.name
    text = "".join(f.arguments for f in fragments if isinstance(f, ToolFragment)).strip()
    try:
        arguments = json.loads(text) if text else {}
    except ValueError:
        arguments = {}
    block["input"] = arguments if isinstance(arguments, dict) else {}
    return block


def _blocks(script: Script) -> list[_Block]:
    """The script's pieces grouped into Anthropic content blocks, in wire order."""
    pieces = script.pieces
    by_slot: dict[int, list[int]] = {}
    for i, piece in enumerate(pieces):
        if isinstance(piece, ToolFragment):
            by_slot.setdefault(piece.index, []).append(i)
    if sorted(by_slot) != list(range(len(by_slot))):
        raise ValueError(
            f"the anthropic-messages dialect needs tool slots numbered 0..n-1 "
            f"(a slot is a tool_use block's position); got {sorted(by_slot)}"
        )
    order: list[int] = []
    started: set[int] = set()
    next_slot = 0
    for i, piece in enumerate(pieces):
        if not isinstance(piece, ToolFragment):
            order.append(i)
            continue
        if by_slot[piece.index][0] != i:
            continue  # a later fragment: sent with its call
        started.add(piece.index)
        while next_slot in started:
            order.extend(by_slot[next_slot])
            next_slot += 1
    blocks: list[_Block] = []
    for i in order:
        piece = pieces[i]
        if isinstance(piece, ToolFragment):
            kind, slot = "tool_use", piece.index
        else:
            kind, slot = ("text" if isinstance(piece, Text) else "thinking"), None
        last = blocks[-1] if blocks else None
        if last is not None and last.kind == kind and last.slot == slot:
            last.pieces.append(i)
        else:
            blocks.append(_Block(kind, [i], slot))
    return blocks


def _usage_json(
    usage: ScriptUsage | None, names: Sequence[str]
) -> tuple[dict[str, Any], frozenset[str]]:
    """Anthropic's `usage` object for the named neutral fields the script sets."""
    out: dict[str, Any] = {}
    sent: set[str] = set()
    if usage is None:
        return out, frozenset()
    wire = {
        "input_tokens": "input_tokens",
        "output_tokens": "output_tokens",
        "cache_read_tokens": "cache_read_input_tokens",
        "cache_write_tokens": "cache_creation_input_tokens",
    }
    for name in names:
        value = getattr(usage, name)
        if value is None:
            continue
        sent.add(name)
        if name == "reasoning_tokens":
            out["output_tokens_details"] = {"thinking_tokens": value}
        else:
            out[wire[name]] = value
    return out, frozenset(sent)
