"""Anthropic Messages (`POST …/messages`), streamed and whole.

The wire shapes follow recorded Anthropic traffic (the recordings in `shared/wire`, the
repository's sibling folder), the streaming and error pages of Anthropic's API
documentation, and the official `anthropic` SDK's types. Every event is sent as
`event: <type>` plus `data: <json>` whose `type` repeats the name; a stream opens with
`message_start` (the `Message` shell), builds content blocks one at a time with
`content_block_start` / `content_block_delta` / `content_block_stop`, reports the stop
reason and the final usage in exactly one `message_delta`, and ends with `message_stop`.
Keep-alives are `ping` events rather than comment lines; an error inside a 200 stream is
an `error` event.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
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
from ._base import Dialect, InStreamError, WireProfile, json_bytes
from ._parts import anthropic_part_problem

__all__ = ["STOP_REASONS", "AnthropicDialect"]

_CREATED_AT = "2025-01-01T00:00:00Z"

STOP_REASONS: dict[str, str] = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "content_filter": "refusal",
}
"""Anthropic's `stop_reason` for each neutral finish reason; others are sent verbatim."""

# Anthropic's error type per HTTP status, from its API documentation ("HTTP errors"):
# other 4xx statuses use `invalid_request_error`, other 5xx ones `api_error`.
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}

# The `anyinfer` error a faithful adapter raises for each error type when it arrives in
# an `error` event (no HTTP status to go by: the type says what the status would be).
_IN_STREAM_ERRORS = {
    "invalid_request_error": "ProviderError",
    "authentication_error": "AuthenticationError",
    "billing_error": "ProviderError",
    "permission_error": "AuthenticationError",
    "not_found_error": "ModelNotFoundError",
    "request_too_large": "ProviderError",
    "rate_limit_error": "RateLimitError",
    "api_error": "ProviderError",
    "timeout_error": "ProviderError",
    "overloaded_error": "OverloadedError",
}

# Neutral usage fields on the input side of the split (reported in `message_start`).
_INPUT_SIDE = ("input_tokens", "cache_read_tokens", "cache_write_tokens")
_OUTPUT_SIDE = ("output_tokens", "reasoning_tokens")

_WIRE_ORDER = (
    "input_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
    "cache_creation",
    "output_tokens",
    "output_tokens_details",
)

_BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def _seed(script: Script) -> str:
    """What a script's ids derive from: the script without its fault, so that a cut
    measured on the fault-free rendering lands on the same bytes the server sends."""
    return repr(replace(script, fault=None))


def _digest(seed: str) -> bytes:
    return hashlib.sha256(seed.encode("utf-8", "surrogatepass")).digest()


def _base62(seed: str, length: int) -> str:
    number = int.from_bytes(_digest(seed), "big")
    out = []
    for _ in range(length):
        number, rest = divmod(number, 62)
        out.append(_BASE62[rest])
    return "".join(out)


def _message_id(seed: str) -> str:
    """`msg_01` and 22 base-62 characters, like `msg_01ALwQ87pTS7hH1PjSdC9wJD`."""
    return "msg_01" + _base62("msg" + seed, 22)


def _request_id(seed: str) -> str:
    """`req_011C` and 20 base-62 characters, like `req_011CdufXo8Y2LVfY2veyuQWG`."""
    return "req_011C" + _base62("req" + seed, 20)


def _signature(seed: str) -> str:
    """An opaque thinking signature: base64 of a protobuf-like blob, starting `E…`."""
    blob = b"\x12" + b"".join(_digest(f"sig{n}{seed}") for n in range(8))
    return base64.b64encode(blob).decode("ascii")


@dataclass(slots=True)
class _Block:
    """One content block: its kind, the script pieces it carries, and its tool slot."""

    kind: str
    pieces: list[int] = field(default_factory=list)
    slot: int | None = None


class AnthropicDialect(Dialect):
    """The Anthropic Messages protocol.

    Content blocks are built from the script's pieces: a run of reasoning pieces is one
    `thinking` block (`thinking` and `signature` empty at the start, a `thinking_delta`
    per piece, then an empty `thinking_delta` and the whole `signature_delta`, as the
    recordings show), a run of text pieces one `text` block (a `text_delta` per piece),
    and each tool call one `tool_use` block (`id`, `name`, `input: {}` and
    `caller: {"type": "direct"}` at the start, then an empty `input_json_delta` and one
    per fragment; a call whose arguments are `{}` sends only the empty one, as Anthropic
    does). Anthropic never interleaves blocks, and a tool call's slot is its position
    among the `tool_use` blocks, so a call is sent whole, at the position of its first
    fragment, once every lower slot has been sent; a script's tool slots must therefore
    be numbered `0..n-1`. An `id` or `name` the script omits is left out of the block.
    One `ping` follows the first `content_block_start`, as in every recorded stream;
    `Script.keepalives` add more (never before `message_start`: index 0 sends one right
    after it).

    Finish reasons map `stop` → `end_turn`, `length` → `max_tokens`, `tool_calls` →
    `tool_use`, `content_filter` → `refusal` (with `stop_details` of type `refusal`);
    other values are sent verbatim. Usage uses Anthropic's names (`input_tokens`,
    `output_tokens`, `cache_read_input_tokens`, `cache_creation_input_tokens` with its
    `cache_creation` breakdown, `output_tokens_details.thinking_tokens`), each field only
    when the script sets it. Placements:

    - `cumulative` (what every recorded stream does): `message_start` reports the
      input-side figures and a provisional `output_tokens` (at most the final count:
      the recordings show 0 to 8 and some higher), and `message_delta` repeats every
      figure with the final `output_tokens` (Anthropic: "the token counts in the usage
      field of the message_delta event are cumulative").
    - `split` (the shape of Anthropic's documented 2024 example): the same
      `message_start`, and a `message_delta` reporting only the output side.
    - Outside the profile (the hostile world): `finish` puts every figure in
      `message_delta` and none in `message_start`; `trailing` sends a second, usage-only
      `message_delta` after the one with the stop reason; `none` sends no usage.

    Ids are unique per script and stable across renders (`msg_01…`, `request-id:
    req_011C…`), derived from a hash of the script. The whole (non-streamed) `Message`
    carries the same blocks, stop reason and usage.

    `profile` states what real Anthropic traffic has (see `WireProfile`): usage
    `cumulative` or `split`, input, output and cache figures always (every recording
    reports the cache counts, 0 when unused), `thinking_tokens` sometimes; thinking
    blocks; `ping` keep-alives; in-stream `overloaded_error` (the documented example,
    which stands for HTTP 529) and `api_error` (500); `\\n` line ends; text before tool
    calls and parallel calls.
    """

    name = "anthropic-messages"
    base_path = "/v1"
    content_type = "text/event-stream"
    profile = WireProfile(
        usage_placements=("cumulative", "split"),
        usage_fields=("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens"),
        optional_usage_fields=("reasoning_tokens",),
        reasoning=True,
        keepalives=True,
        in_stream_errors=(
            InStreamError(529, "overloaded_error", "Overloaded"),
            InStreamError(500, "api_error", "Internal server error"),
        ),
        line_endings=("lf",),
        text_with_tools=True,
        max_tool_calls=3,
        tool_call_id_prefix="toolu_01",
    )

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

    def error_frame(self, fault: Fault) -> bytes:
        """The `error` event Anthropic sends when a started stream fails.

        `{"type": "error", "error": {"details": null, "type": ..., "message": ...},
        "request_id": "req_011C…"}`, as captured from live streams (an `api_error`
        after text deltas in BerriAI/litellm#4562, an `overloaded_error` with its
        `request_id` in karthink/gptel#1512; Anthropic's streaming documentation shows
        the same event without `details`). The type is `fault.code` when set, else
        Anthropic's type for `fault.status` (`overloaded_error` for 529, `api_error` for
        500, `rate_limit_error` for 429, ...). Nothing follows it: the body ends.

        Args:
            fault: The `provider_error` fault.

        Returns:
            The event's bytes.
        """
        error = {"details": None, "type": fault.code or _error_type(fault.status)}
        error["message"] = fault.message
        payload = {"type": "error", "error": error, "request_id": _request_id(repr(fault))}
        return self.sse_event(payload)

    def in_stream_error_types(self, fault: Fault) -> frozenset[str] | None:
        """What an `error` event's type stands for, without an HTTP status to go by.

        An uncoded fault's frame carries Anthropic's type for its status, and that type
        is all an adapter sees: a 408 becomes `invalid_request_error` (a plain
        `ProviderError`), a 503 `api_error`. Coded faults are judged by their status and
        code as usual.

        Args:
            fault: The `provider_error` fault.

        Returns:
            The acceptable error class names, or `None` for the default.
        """
        if fault.code is not None:
            return None
        return frozenset({_IN_STREAM_ERRORS[_error_type(fault.status)]})

    def _render_stream(self, script: Script, blocks: list[_Block]) -> Rendered:
        seed = _seed(script)
        usage = script.usage if script.usage_placement != "none" else None
        placement = script.usage_placement
        running = placement in ("cumulative", "split")
        frames: list[Frame] = []

        start_usage: dict[str, Any] = {}
        start_set: frozenset[str] = frozenset()
        provisional: tuple[tuple[str, int], ...] = ()
        if running and usage is not None:
            start_usage, start_set = _usage_json(usage, _INPUT_SIDE, breakdown=True)
            if usage.output_tokens is not None:
                early = _provisional(usage.output_tokens, seed)
                start_usage["output_tokens"] = early
                start_set |= {"output_tokens"}
                if early != usage.output_tokens:
                    provisional = (("output_tokens", early),)
            start_usage["service_tier"] = "standard"
            start_usage["inference_geo"] = "not_available"
        shell: dict[str, Any] = {
            "model": script.model,
            "id": _message_id(seed),
            "type": "message",
            "role": "assistant",
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "stop_details": None,
            "usage": start_usage,
        }
        frames.append(
            Frame(
                self.sse_event({"type": "message_start", "message": shell}),
                usage=start_set,
                usage_values=provisional,
            )
        )

        for number, block in enumerate(blocks):
            block_frames = self._block_frames(script, number, block, seed)
            if number == 0:
                # Every recorded stream pings right after its first block opens.
                block_frames.insert(1, Frame(self.keepalive_frame(), keepalive=True))
            frames.extend(block_frames)

        if placement == "split":
            delta_fields: tuple[str, ...] = _OUTPUT_SIDE
        elif placement in ("cumulative", "finish"):
            delta_fields = _INPUT_SIDE + _OUTPUT_SIDE
        else:
            delta_fields = ()
        delta_usage, delta_set = _usage_json(usage, delta_fields)
        reason = script.finish_reason
        stop_reason = None if reason is None else STOP_REASONS.get(reason, reason)
        message_delta: dict[str, Any] = {
            "type": "message_delta",
            "delta": {
                "stop_reason": stop_reason,
                "stop_sequence": None,
                "stop_details": _stop_details(stop_reason),
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
                ("request-id", _request_id(seed)),
            ),
            self.finish_frames(frames, script),
            malformed=self.malformed_frame(),
        )

    def with_keepalives(self, frames: Sequence[Frame], before: Iterable[int]) -> tuple[Frame, ...]:
        """Insert `ping` events before the given frame indices, never before the first.

        Anthropic pings only once a stream has opened, so index 0 sends its ping right
        after `message_start` (see `Dialect.with_keepalives` for the rest).
        """
        return super().with_keepalives(frames, [max(1, index) for index in before])

    def _block_frames(self, script: Script, number: int, block: _Block, seed: str) -> list[Frame]:
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
            # The recordings close a thinking block with an empty thinking_delta, then
            # the whole signature in one signature_delta.
            empty = {"type": "thinking_delta", "thinking": ""}
            frames.append(Frame(self._delta_event(number, empty)))
            signature = {"type": "signature_delta", "signature": _signature(f"{number}{seed}")}
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
            start["caller"] = {"type": "direct"}
            # The start already delivers the call's id and name.
            frames.append(Frame(self._start_event(number, start), pieces=(block.pieces[0],)))
            fragments = [script.pieces[i] for i in block.pieces]
            arguments = "".join(f.arguments for f in fragments if isinstance(f, ToolFragment))
            empty = {"type": "input_json_delta", "partial_json": ""}
            if _is_empty_object(arguments):
                # An argument-less call: Anthropic sends one empty fragment and no `{}`.
                rest = tuple(block.pieces[1:])
                frames.append(Frame(self._delta_event(number, empty), pieces=rest))
            else:
                # Every recorded tool block opens its input with an empty fragment.
                frames.append(Frame(self._delta_event(number, empty)))
                for i in block.pieces:
                    piece = script.pieces[i]
                    assert isinstance(piece, ToolFragment)
                    if i == block.pieces[0] and not piece.arguments:
                        continue  # an empty first fragment: the start delivered it
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
        seed = _seed(script)
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
                        "signature": _signature(f"{number}{seed}"),
                    }
                )
            else:
                content.append(_whole_tool_use(texts))
        reason = script.finish_reason
        stop_reason = None if reason is None else STOP_REASONS.get(reason, reason)
        payload: dict[str, Any] = {
            "model": script.model,
            "id": _message_id(seed),
            "type": "message",
            "role": "assistant",
            "content": content,
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "stop_details": _stop_details(stop_reason),
        }
        usage_set: frozenset[str] = frozenset()
        if script.usage is not None and script.usage_placement != "none":
            whole_usage, usage_set = _usage_json(
                script.usage, _INPUT_SIDE + _OUTPUT_SIDE, breakdown=True
            )
            whole_usage["service_tier"] = "standard"
            whole_usage["inference_geo"] = "not_available"
            payload["usage"] = whole_usage
        rendered = self.whole_response(script, payload, usage=usage_set, finish=reason is not None)
        return replace(rendered, headers=(*rendered.headers, ("request-id", _request_id(seed))))

    def render_error(self, fault: Fault) -> Rendered:
        """Render `{"type": "error", "error": {"type", "message"}, "request_id"}`.

        The error type is `fault.code` when set, else Anthropic's documented type for
        the status (`invalid_request_error` for 400 and other 4xx statuses,
        `authentication_error` 401, `permission_error` 403, `not_found_error` 404,
        `request_too_large` 413, `rate_limit_error` 429, `api_error` 500 and other 5xx
        statuses, `timeout_error` 504, `overloaded_error` 529). The request id (body
        and `request-id` header) is derived from the fault.

        Args:
            fault: The `status` fault.

        Returns:
            The error response, with `retry-after` when `fault.retry_after` is set.
        """
        request_id = _request_id(repr(fault))
        payload = {
            "type": "error",
            "error": {"type": fault.code or _error_type(fault.status), "message": fault.message},
            "request_id": request_id,
        }
        headers: list[tuple[str, str]] = [
            ("content-type", "application/json"),
            ("request-id", request_id),
        ]
        if fault.retry_after is not None:
            headers.append(("retry-after", f"{fault.retry_after:g}"))
        return Rendered(fault.status, tuple(headers), (Frame(json_bytes(payload)),))

    def malformed_frame(self) -> bytes:
        """A `content_block_delta` event whose data is not JSON."""
        return b"event: content_block_delta\ndata: {not json\n\n"

    def keepalive_frame(self) -> bytes:
        """Anthropic's keep-alive, byte for byte as recorded: a `ping` event."""
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

    def request_fault(self, method: str, path: str, request_json: Any) -> Fault | None:
        """A 400 `invalid_request_error` for a user content block the Messages API
        refuses: a block type outside its schema (there is no audio block), a document
        source it does not know or a base64 document that is not a PDF, a base64 image
        that is not JPEG, PNG, GIF or WebP. The status and envelope are Anthropic's; the
        wording is the fake's own."""
        problem = anthropic_part_problem(request_json)
        if problem is None:
            return None
        return Fault("status", status=400, message=problem, code="invalid_request_error")

    def is_generation(self, method: str, path: str) -> bool:
        """`POST …/messages` (any base path, so proxies' prefixes work too)."""
        return method == "POST" and path.rstrip("/").endswith("/messages")


def _error_type(status: int) -> str:
    """Anthropic's documented error type for an HTTP status."""
    return _ERROR_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")


def _provisional(final: int, seed: str) -> int:
    """The `output_tokens` a `message_start` reports: a small count, never above the
    final one (the recordings show 0 to 8, and higher when a tool call opens)."""
    return min(final, 1 + _digest("out" + seed)[0] % 8)


def _stop_details(stop_reason: str | None) -> dict[str, Any] | None:
    """`stop_details`: a `refusal` object for refusals (as recorded), else `null`."""
    if stop_reason != "refusal":
        return None
    return {
        "type": "refusal",
        "category": "general_harms",
        "explanation": "This request was blocked by a content policy classifier.",
    }


def _is_empty_object(arguments: str) -> bool:
    try:
        parsed = json.loads(arguments)
    except ValueError:
        return False
    return isinstance(parsed, dict) and not parsed


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
    block["caller"] = {"type": "direct"}
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
    usage: ScriptUsage | None, names: Sequence[str], *, breakdown: bool = False
) -> tuple[dict[str, Any], frozenset[str]]:
    """Anthropic's `usage` object for the named neutral fields the script sets.

    With `breakdown`, a cache write also gets the `cache_creation` object that
    `message_start` and whole messages carry (all of it in the 5-minute bucket).
    """
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
    if breakdown and usage.cache_write_tokens is not None and "cache_write_tokens" in names:
        out["cache_creation"] = {
            "ephemeral_5m_input_tokens": usage.cache_write_tokens,
            "ephemeral_1h_input_tokens": 0,
        }
    # The recorded order: input, cache writes, cache reads, breakdown, output.
    order = {key: n for n, key in enumerate(_WIRE_ORDER)}
    return dict(sorted(out.items(), key=lambda item: order[item[0]])), frozenset(sent)
