"""OpenAI Responses API (`POST …/responses`), streamed and whole.

The wire shapes follow recorded OpenAI traffic (`/work/shared/wire`): every streamed
event is sent as an `event: <type>` line plus a `data:` object carrying the same `type`
and a `sequence_number`. A stream opens with `response.created` and
`response.in_progress`; each output item (`reasoning`, `message`, `function_call`) is
opened by `response.output_item.added`, receives its deltas, and is closed by its
`.done` events and `response.output_item.done`; the terminal event —
`response.completed` or `response.incomplete`, carrying the whole `Response` with its
`usage` — is the protocol's sentinel. There is no `data: [DONE]`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .._script import Fault, Frame, Reasoning, Rendered, Script, ScriptUsage, Text, ToolFragment
from ._base import Dialect, json_bytes
from .openai_chat import OpenAIChatDialect

__all__ = ["OpenAIResponsesDialect"]

_CREATED = 1_700_000_000
_ID = "resp_fakeservers"
_MESSAGE_ID = "msg_fakeservers"
_REASONING_ID = "rs_fakeservers"


@dataclass
class _Item:
    """One output item while a stream is being rendered."""

    kind: str  # "message", "reasoning" or "function_call"
    index: int  # output_index
    id: str
    text: str = ""  # message text, reasoning summary, or function-call arguments
    call_id: str | None = None
    name: str | None = None
    first_piece: int | None = None  # function calls: the piece the added event carries


@dataclass
class _Stream:
    """Rendering state: frames so far, open items, the next sequence number."""

    frames: list[Frame] = field(default_factory=list)
    items: list[_Item] = field(default_factory=list)
    sequence: int = 0

    def event(self, kind: str, pieces: tuple[int, ...] = (), **fields: Any) -> None:
        """Append one event frame carrying `pieces`."""
        payload = {"type": kind, "sequence_number": self.sequence, **fields}
        self.sequence += 1
        data = b"event: " + kind.encode() + b"\ndata: " + json_bytes(payload) + b"\n\n"
        self.frames.append(Frame(data, pieces=pieces))


class OpenAIResponsesDialect(Dialect):
    """The OpenAI Responses API protocol.

    Text pieces stream into one `message` item as `response.output_text.delta`; reasoning
    pieces into one `reasoning` item as `response.reasoning_summary_text.delta` (summary
    part 0); tool-call slot `i` is the `i`-th `function_call` item. The first fragment of
    a slot travels in its `response.output_item.added` event (`call_id`, `name`, and the
    fragment as `arguments`); later fragments are `response.function_call_arguments.delta`
    events. Function-call items are opened in slot order: when a slot's first fragment
    comes before a lower slot's, the lower slot's item (with its own first fragment) is
    opened just before it, so the item order always matches the slot order — that order
    is how a Responses client numbers tool calls.

    Finish reasons: the protocol has none, so a script's is rendered as the terminal
    event a provider would send for it. `stop` without tool calls and `tool_calls` with
    them are `response.completed` (no finish reason at all, too, when there are no tool
    calls); `length` is `response.incomplete` with `incomplete_details.reason`
    `max_output_tokens`, `content_filter` the same with reason `content_filter`. Anything
    else — an invented reason, and the combinations `response.completed` cannot express
    (`stop` with tool calls, `tool_calls` without, no reason with tool calls, read back as
    `stop`) — is `response.incomplete` carrying the reason verbatim in
    `incomplete_details.reason`, the protocol's only free-form finish slot.

    Usage (`input_tokens`, `output_tokens`, `total_tokens` when both are known,
    `input_tokens_details.cached_tokens`, `output_tokens_details.reasoning_tokens`) is
    only ever in the terminal `Response`, so every placement but `none` puts it there; the
    protocol has no cache-write figure. A script without its sentinel loses the terminal
    event, and with it the finish reason and the usage.

    Limits: tool-call slots must be numbered from 0 without gaps, and a slot's `id` and
    `name` must ride on its first fragment (as `conformance.strategies` builds them).
    """

    name = "openai-responses"
    base_path = "/v1"
    content_type = "text/event-stream"

    def __init__(self) -> None:
        self._errors = OpenAIChatDialect()  # OpenAI's error bodies are the same

    # --- rendering -----------------------------------------------------------------

    def render(self, script: Script, *, stream: bool) -> Rendered:
        """Render a script as a Responses event stream or a whole `Response` object.

        Args:
            script: What the provider sends.
            stream: Whether to render the streamed (SSE) form.

        Returns:
            The rendered response.
        """
        if stream:
            return self._render_stream(script)
        return self._render_whole(script)

    def _response(
        self, script: Script, status: str, output: list[dict[str, Any]]
    ) -> dict[str, Any]:
        return {
            "id": _ID,
            "object": "response",
            "created_at": _CREATED,
            "status": status,
            "error": None,
            "incomplete_details": None,
            "model": script.model,
            "output": output,
            "usage": None,
            "store": False,
        }

    def _finish(self, script: Script, response: dict[str, Any]) -> tuple[str, frozenset[str]]:
        """Set the final status, incomplete details and usage; return the event kind."""
        has_calls = any(isinstance(p, ToolFragment) for p in script.pieces)
        status, reason = _terminal(script.finish_reason, has_calls)
        response["status"] = status
        if reason is not None:
            response["incomplete_details"] = {"reason": reason}
        fields: frozenset[str] = frozenset()
        if script.usage is not None and script.usage_placement != "none":
            response["usage"], fields = _usage_json(script.usage)
        return f"response.{status}", fields

    def _render_stream(self, script: Script) -> Rendered:
        out = _Stream()
        opening = self._response(script, "in_progress", [])
        out.event("response.created", response=opening)
        out.event("response.in_progress", response=opening)
        message: _Item | None = None
        reasoning: _Item | None = None
        calls: dict[int, _Item] = {}
        firsts = _first_fragments(script)
        for i, piece in enumerate(script.pieces):
            if isinstance(piece, Text):
                if message is None:
                    message = self._open(out, "message", _MESSAGE_ID)
                message.text += piece.text
                out.event(
                    "response.output_text.delta",
                    (i,),
                    item_id=message.id,
                    output_index=message.index,
                    content_index=0,
                    delta=piece.text,
                    logprobs=[],
                )
            elif isinstance(piece, Reasoning):
                if reasoning is None:
                    reasoning = self._open(out, "reasoning", _REASONING_ID)
                reasoning.text += piece.text
                out.event(
                    "response.reasoning_summary_text.delta",
                    (i,),
                    item_id=reasoning.id,
                    output_index=reasoning.index,
                    summary_index=0,
                    delta=piece.text,
                )
            elif piece.index in calls:
                call = calls[piece.index]
                if call.first_piece == i:
                    continue  # carried by the item's added event
                call.text += piece.arguments
                out.event(
                    "response.function_call_arguments.delta",
                    (i,),
                    item_id=call.id,
                    output_index=call.index,
                    delta=piece.arguments,
                )
            else:
                for slot in sorted(s for s in firsts if s <= piece.index and s not in calls):
                    calls[slot] = self._open_call(out, script, slot, firsts[slot])
        for item in out.items:
            self._close(out, item)
        frames = out.frames
        if script.sentinel:
            response = self._response(script, "completed", [_item_json(i) for i in out.items])
            kind, usage_fields = self._finish(script, response)
            payload = {"type": kind, "sequence_number": out.sequence, "response": response}
            frames.append(
                Frame(
                    b"event: " + kind.encode() + b"\ndata: " + json_bytes(payload) + b"\n\n",
                    usage=usage_fields,
                    finish=script.finish_reason is not None,
                    sentinel=True,
                )
            )
        return Rendered(
            200,
            (
                ("content-type", f"{self.content_type}; charset=utf-8"),
                ("cache-control", "no-cache"),
            ),
            self.finish_frames(frames, script),
            malformed=self.malformed_frame(),
        )

    def _open(self, out: _Stream, kind: str, item_id: str) -> _Item:
        item = _Item(kind, len(out.items), item_id)
        out.items.append(item)
        if kind == "message":
            added: dict[str, Any] = {
                "id": item_id,
                "type": "message",
                "status": "in_progress",
                "content": [],
                "role": "assistant",
            }
            out.event("response.output_item.added", output_index=item.index, item=added)
            out.event(
                "response.content_part.added",
                item_id=item_id,
                output_index=item.index,
                content_index=0,
                part={"type": "output_text", "annotations": [], "logprobs": [], "text": ""},
            )
        else:
            added = {"id": item_id, "type": "reasoning", "summary": []}
            out.event("response.output_item.added", output_index=item.index, item=added)
            out.event(
                "response.reasoning_summary_part.added",
                item_id=item_id,
                output_index=item.index,
                summary_index=0,
                part={"type": "summary_text", "text": ""},
            )
        return item

    def _open_call(self, out: _Stream, script: Script, slot: int, first: int) -> _Item:
        piece = script.pieces[first]
        assert isinstance(piece, ToolFragment)
        item = _Item(
            "function_call",
            len(out.items),
            f"fc_fakeservers_{slot}",
            text=piece.arguments,
            call_id=piece.id,
            name=piece.name,
            first_piece=first,
        )
        out.items.append(item)
        added = _item_json(item, status="in_progress")
        out.event("response.output_item.added", (first,), output_index=item.index, item=added)
        return item

    def _close(self, out: _Stream, item: _Item) -> None:
        where: dict[str, Any] = {"item_id": item.id, "output_index": item.index}
        if item.kind == "message":
            part = {"type": "output_text", "annotations": [], "logprobs": [], "text": item.text}
            out.event("response.output_text.done", **where, content_index=0, text=item.text)
            out.event("response.content_part.done", **where, content_index=0, part=part)
        elif item.kind == "reasoning":
            part = {"type": "summary_text", "text": item.text}
            out.event(
                "response.reasoning_summary_text.done", **where, summary_index=0, text=item.text
            )
            out.event("response.reasoning_summary_part.done", **where, summary_index=0, part=part)
        else:
            out.event("response.function_call_arguments.done", **where, arguments=item.text)
        out.event("response.output_item.done", output_index=item.index, item=_item_json(item))

    def _render_whole(self, script: Script) -> Rendered:
        output: list[dict[str, Any]] = []
        if script.reasoning:
            item = _Item("reasoning", len(output), _REASONING_ID, text=script.reasoning)
            output.append(_item_json(item))
        if script.text:
            output.append(_item_json(_Item("message", len(output), _MESSAGE_ID, script.text)))
        for slot, call in sorted(_joined_calls(script).items()):
            call.index = len(output)
            call.id = f"fc_fakeservers_{slot}"
            output.append(_item_json(call))
        payload = self._response(script, "completed", output)
        _, usage_fields = self._finish(script, payload)
        return self.whole_response(
            script, payload, usage=usage_fields, finish=script.finish_reason is not None
        )

    def render_error(self, fault: Fault) -> Rendered:
        """Render OpenAI's `{"error": {"message", "type", "param", "code"}}` body.

        Args:
            fault: The `status` fault.

        Returns:
            The error response, with `Retry-After` when `fault.retry_after` is set.
        """
        return self._errors.render_error(fault)

    # --- routing -------------------------------------------------------------------

    def is_generation(self, method: str, path: str) -> bool:
        """`POST …/responses` (any base path, so proxies' prefixes work too)."""
        return method == "POST" and path.rstrip("/").endswith("/responses")


def _terminal(reason: str | None, has_calls: bool) -> tuple[str, str | None]:
    """`(status, incomplete reason)` of the terminal event for a script's finish reason."""
    if reason is None:
        return ("incomplete", "stop") if has_calls else ("completed", None)
    if (reason == "stop" and not has_calls) or (reason == "tool_calls" and has_calls):
        return "completed", None
    if reason == "length":
        return "incomplete", "max_output_tokens"
    return "incomplete", reason


def _first_fragments(script: Script) -> dict[int, int]:
    """Each tool-call slot's first fragment, as a piece index."""
    firsts: dict[int, int] = {}
    for i, piece in enumerate(script.pieces):
        if isinstance(piece, ToolFragment):
            firsts.setdefault(piece.index, i)
    return firsts


def _joined_calls(script: Script) -> dict[int, _Item]:
    """Each slot's call, arguments joined; `call_id` and `name` from its first fragment."""
    calls: dict[int, _Item] = {}
    for piece in script.pieces:
        if not isinstance(piece, ToolFragment):
            continue
        call = calls.get(piece.index)
        if call is None:
            calls[piece.index] = _Item("function_call", 0, "", "", piece.id, piece.name)
            call = calls[piece.index]
        call.text += piece.arguments
    return calls


def _item_json(item: _Item, *, status: str = "completed") -> dict[str, Any]:
    """An output item as the `Response` lists it."""
    if item.kind == "message":
        return {
            "id": item.id,
            "type": "message",
            "status": status,
            "role": "assistant",
            "content": [
                {"type": "output_text", "annotations": [], "logprobs": [], "text": item.text}
            ],
        }
    if item.kind == "reasoning":
        return {
            "id": item.id,
            "type": "reasoning",
            "summary": [{"type": "summary_text", "text": item.text}],
        }
    out: dict[str, Any] = {
        "id": item.id,
        "type": "function_call",
        "status": status,
        "arguments": item.text,
    }
    if item.call_id is not None:
        out["call_id"] = item.call_id
    if item.name is not None:
        out["name"] = item.name
    return out


def _usage_json(usage: ScriptUsage) -> tuple[dict[str, Any], frozenset[str]]:
    """The Responses `usage` object for `usage`, and the neutral fields it reports."""
    out: dict[str, Any] = {}
    fields: set[str] = set()
    if usage.input_tokens is not None:
        out["input_tokens"] = usage.input_tokens
        fields.add("input_tokens")
    if usage.cache_read_tokens is not None:
        out["input_tokens_details"] = {"cached_tokens": usage.cache_read_tokens}
        fields.add("cache_read_tokens")
    if usage.output_tokens is not None:
        out["output_tokens"] = usage.output_tokens
        fields.add("output_tokens")
    if usage.reasoning_tokens is not None:
        out["output_tokens_details"] = {"reasoning_tokens": usage.reasoning_tokens}
        fields.add("reasoning_tokens")
    if usage.input_tokens is not None and usage.output_tokens is not None:
        out["total_tokens"] = usage.input_tokens + usage.output_tokens
    return out, frozenset(fields)
