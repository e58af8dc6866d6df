"""OpenAI Responses API (`POST …/responses`), streamed and whole.

The wire shapes follow recorded OpenAI traffic (the `shared/wire` recordings beside the
repository: simonw/llm's `test_responses_basic_streaming` and
`test_responses_tool_use_streaming`, pydantic-ai's `test_openai_responses_stream` and
`test_openai_responses_thinking_part_iter`) and the official `openai` SDK's event types
(`ResponseStreamEvent`):

- every event is an `event: <type>` line plus a `data:` object carrying the same `type`
  and a `sequence_number` counting from 0;
- a stream opens with `response.created` and `response.in_progress`, each carrying the
  `Response` (per-response `id`, `resp_` and 50 hex digits; `status: "in_progress"`,
  `output: []`, `usage: null`);
- output items open **one at a time**: `response.output_item.added` (a `reasoning`,
  `message` or `function_call` item; a function call's `arguments` is `""`), the item's
  part-added event, its deltas (`response.reasoning_summary_text.delta`,
  `response.output_text.delta` with `logprobs: []`,
  `response.function_call_arguments.delta`; each delta has an `obfuscation` padding
  string), then its `.done` events and `response.output_item.done`, before the next item
  opens;
- the terminal event — `response.completed` or `response.incomplete`, carrying the whole
  `Response` with every item and its `usage` (`input_tokens_details.cached_tokens` and
  `output_tokens_details.reasoning_tokens` always present) — is the protocol's
  sentinel. There is no `data: [DONE]`.

An error after streaming began is `response.failed`: the same `Response` with
`status: "failed"` and `error: {"code", "message"}` (`ResponseFailedEvent`; codes from
`ResponseError`, e.g. `server_error`, `rate_limit_exceeded`). The SDK does not raise on
it: `get_final_response()` fails for want of `response.completed`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .._script import Fault, Frame, Reasoning, Rendered, Script, ScriptUsage, Text, ToolFragment
from ._base import Dialect, InStreamError, WireProfile, json_bytes
from ._ids import HEX, ScriptIds
from ._parts import responses_part_problem
from .openai_chat import OpenAIChatDialect, statusless_error_types

__all__ = ["OpenAIResponsesDialect"]

_ItemKey = tuple[str, int]  # ("reasoning" | "message" | "call", slot)

_SERVER_ERROR = (
    "An error occurred while processing your request. You can retry your request, or "
    "contact us through our help center if the error persists."
)


@dataclass
class _Item:
    """One output item while a stream is being rendered."""

    kind: str  # "message", "reasoning" or "function_call"
    index: int  # output_index
    id: str
    text: str = ""  # message text, reasoning summary, or function-call arguments
    call_id: str | None = None
    name: str | None = None


@dataclass
class _Stream:
    """Rendering state: frames so far and the next sequence number."""

    ids: ScriptIds
    frames: list[Frame] = field(default_factory=list)
    sequence: int = 0

    def event(self, kind: str, pieces: tuple[int, ...] = (), **fields: Any) -> None:
        """Append one event frame carrying `pieces`."""
        if kind.endswith(".delta"):
            pad = 1 + self.ids.number(f"pad{self.sequence}", 0, 14)
            fields["obfuscation"] = self.ids.token(f"obfuscation{self.sequence}", pad)
        payload = {"type": kind, "sequence_number": self.sequence, **fields}
        self.sequence += 1
        self.frames.append(Frame(_event_bytes(kind, payload), pieces=pieces))


def _event_bytes(kind: str, payload: dict[str, Any]) -> bytes:
    return b"event: " + kind.encode() + b"\ndata: " + json_bytes(payload) + b"\n\n"


def _key(piece: Text | Reasoning | ToolFragment) -> _ItemKey:
    if isinstance(piece, Text):
        return ("message", 0)
    if isinstance(piece, Reasoning):
        return ("reasoning", 0)
    return ("call", piece.index)


class OpenAIResponsesDialect(Dialect):
    """The OpenAI Responses API protocol.

    Text pieces stream into one `message` item as `response.output_text.delta`;
    reasoning pieces into one `reasoning` item as `response.reasoning_summary_text.delta`
    (summary part 0); tool-call slot `i` is the `i`-th `function_call` item, its `call_id`
    and `name` in `response.output_item.added` and every fragment's text a
    `response.function_call_arguments.delta`. Items appear in the order their first piece
    does and each closes right after its last piece, so a script whose pieces come kind by
    kind and call by call (every realistic one) opens one item at a time. A hostile
    script that interleaves kinds keeps several items open at once; when a slot's first
    fragment comes before a lower slot's, the lower slot's item is opened first, so the
    item order always matches the slot order — that order is how a Responses client
    numbers tool calls.

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
    `input_tokens_details.cached_tokens` and `.cache_write_tokens`,
    `output_tokens_details.reasoning_tokens`) is only ever in the terminal `Response`,
    so every placement but `none` puts it there; the protocol has no running counts. A
    script without its sentinel loses the terminal event, and with it the finish reason
    and the usage.

    Limits: tool-call slots must be numbered from 0 without gaps, and a slot's `id` and
    `name` must ride on its first fragment (as `anyinfer.conformance.strategies` builds them).
    """

    name = "openai-responses"
    base_path = "/v1"
    content_type = "text/event-stream"
    profile = WireProfile(
        # Usage is only ever in the terminal Response, always with both detail objects;
        # the SDK's `ResponseUsage` requires `input_tokens_details.cache_write_tokens`
        # (newer than the recordings, which show `cached_tokens` alone).
        usage_placements=("finish",),
        usage_fields=(
            "input_tokens",
            "output_tokens",
            "cache_read_tokens",
            "cache_write_tokens",
            "reasoning_tokens",
        ),
        reasoning=True,  # reasoning summaries (`reasoning.summary`, which AnyInfer asks for)
        keepalives=False,
        # `ResponseError.code` values of a response that fails after it started.
        in_stream_errors=(
            InStreamError(500, "server_error", _SERVER_ERROR),
            InStreamError(429, "rate_limit_exceeded", "Rate limit reached. Please try again."),
        ),
        line_endings=("lf",),
        text_with_tools=True,
        max_tool_calls=3,
    )

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

    def _ids(self, script: Script) -> ScriptIds:
        return ScriptIds(script, self.name)

    def _item_id(self, ids: ScriptIds, prefix: str, key: _ItemKey) -> str:
        return f"{prefix}_" + ids.token(f"{key[0]}{key[1]}", 50, HEX)

    def _response(
        self, script: Script, ids: ScriptIds, status: str, output: list[dict[str, Any]]
    ) -> dict[str, Any]:
        created = ids.number("created", 1_730_000_000, 1_790_000_000)
        done = status in ("completed", "incomplete", "failed")
        return {
            "id": "resp_" + ids.token("id", 50, HEX),
            "object": "response",
            "created_at": created,
            "status": status,
            "background": False,
            "completed_at": created + 1 if status == "completed" else None,
            "error": None,
            "frequency_penalty": 0.0,
            "incomplete_details": None,
            "instructions": None,
            "max_output_tokens": None,
            "max_tool_calls": None,
            "model": script.model,
            "output": output,
            "parallel_tool_calls": True,
            "presence_penalty": 0.0,
            "previous_response_id": None,
            "prompt_cache_key": None,
            "reasoning": {"effort": None, "summary": None},
            "safety_identifier": None,
            "service_tier": "default" if done else "auto",
            "store": False,
            "temperature": 1.0,
            "text": {"format": {"type": "text"}, "verbosity": "medium"},
            "tool_choice": "auto",
            "tools": [],
            "top_logprobs": 0,
            "top_p": 1.0,
            "truncation": "disabled",
            "usage": None,
            "user": None,
            "metadata": {},
        }

    def _finish(self, script: Script, response: dict[str, Any]) -> tuple[str, frozenset[str]]:
        """Set the final status, incomplete details and usage; return the event kind."""
        has_calls = any(isinstance(p, ToolFragment) for p in script.pieces)
        status, reason = _terminal(script.finish_reason, has_calls)
        response["status"] = status
        if status != "completed":
            response["completed_at"] = None
        if reason is not None:
            response["incomplete_details"] = {"reason": reason}
        fields: frozenset[str] = frozenset()
        if script.usage is not None and script.usage_placement != "none":
            response["usage"], fields = _usage_json(script.usage)
        return f"response.{status}", fields

    def _render_stream(self, script: Script) -> Rendered:
        ids = self._ids(script)
        out = _Stream(ids)
        opening = self._response(script, ids, "in_progress", [])
        out.event("response.created", response=opening)
        out.event("response.in_progress", response=opening)
        last: dict[_ItemKey, int] = {}
        firsts: dict[int, int] = {}
        for i, piece in enumerate(script.pieces):
            last[_key(piece)] = i
            if isinstance(piece, ToolFragment):
                firsts.setdefault(piece.index, i)
        items: list[_Item] = []
        open_: dict[_ItemKey, _Item] = {}
        for i, piece in enumerate(script.pieces):
            key = _key(piece)
            if key not in open_:
                if key[0] == "call":
                    for slot in sorted(s for s in firsts if s < key[1]):
                        if ("call", slot) not in open_:
                            self._open_call(out, script, ids, items, open_, slot, firsts[slot])
                    self._open_call(out, script, ids, items, open_, key[1], i)
                else:
                    self._open(out, ids, items, open_, key)
            item = open_[key]
            if isinstance(piece, Text):
                item.text += piece.text
                out.event(
                    "response.output_text.delta",
                    (i,),
                    item_id=item.id,
                    output_index=item.index,
                    content_index=0,
                    delta=piece.text,
                    logprobs=[],
                )
            elif isinstance(piece, Reasoning):
                item.text += piece.text
                out.event(
                    "response.reasoning_summary_text.delta",
                    (i,),
                    item_id=item.id,
                    output_index=item.index,
                    summary_index=0,
                    delta=piece.text,
                )
            elif piece.arguments:
                item.text += piece.arguments
                out.event(
                    "response.function_call_arguments.delta",
                    (i,),
                    item_id=item.id,
                    output_index=item.index,
                    delta=piece.arguments,
                )
            if last[key] == i:
                self._close(out, item)
        frames = out.frames
        if script.sentinel:
            response = self._response(script, ids, "completed", [_item_json(i) for i in items])
            kind, usage_fields = self._finish(script, response)
            payload = {"type": kind, "sequence_number": out.sequence, "response": response}
            frames.append(
                Frame(
                    _event_bytes(kind, payload),
                    usage=usage_fields,
                    finish=script.finish_reason is not None,
                    sentinel=True,
                )
            )
        return Rendered(
            200,
            self._headers(script, stream=True),
            self.finish_frames(frames, script),
            malformed=self.malformed_frame(),
        )

    def _headers(self, script: Script, *, stream: bool) -> tuple[tuple[str, str], ...]:
        kind = f"{self.content_type}; charset=utf-8" if stream else "application/json"
        ms = self._ids(script).number("processing-ms", 80, 900)
        return (
            ("content-type", kind),
            ("openai-version", "2020-10-01"),
            ("openai-processing-ms", str(ms)),
        )

    def _open(
        self,
        out: _Stream,
        ids: ScriptIds,
        items: list[_Item],
        open_: dict[_ItemKey, _Item],
        key: _ItemKey,
    ) -> None:
        kind = key[0]
        prefix = "msg" if kind == "message" else "rs"
        item = _Item(kind, len(items), self._item_id(ids, prefix, key))
        items.append(item)
        open_[key] = item
        if kind == "message":
            added: dict[str, Any] = {
                "id": item.id,
                "type": "message",
                "status": "in_progress",
                "content": [],
                "role": "assistant",
            }
            out.event("response.output_item.added", output_index=item.index, item=added)
            out.event(
                "response.content_part.added",
                item_id=item.id,
                output_index=item.index,
                content_index=0,
                part={"type": "output_text", "annotations": [], "logprobs": [], "text": ""},
            )
        else:
            added = {"id": item.id, "type": "reasoning", "summary": []}
            out.event("response.output_item.added", output_index=item.index, item=added)
            out.event(
                "response.reasoning_summary_part.added",
                item_id=item.id,
                output_index=item.index,
                summary_index=0,
                part={"type": "summary_text", "text": ""},
            )

    def _open_call(
        self,
        out: _Stream,
        script: Script,
        ids: ScriptIds,
        items: list[_Item],
        open_: dict[_ItemKey, _Item],
        slot: int,
        first: int,
    ) -> None:
        piece = script.pieces[first]
        assert isinstance(piece, ToolFragment)
        item = _Item(
            "function_call",
            len(items),
            self._item_id(ids, "fc", ("call", slot)),
            call_id=piece.id,
            name=piece.name,
        )
        items.append(item)
        open_["call", slot] = item
        added = _item_json(item, status="in_progress")
        # The added event announces the call (id and name): it delivers the slot's first
        # fragment as far as a reader can tell; the fragment's text follows as a delta.
        out.event("response.output_item.added", (first,), output_index=item.index, item=added)

    def _close(self, out: _Stream, item: _Item) -> None:
        where: dict[str, Any] = {"item_id": item.id, "output_index": item.index}
        if item.kind == "message":
            part = {"type": "output_text", "annotations": [], "logprobs": [], "text": item.text}
            out.event(
                "response.output_text.done", **where, content_index=0, text=item.text, logprobs=[]
            )
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
        ids = self._ids(script)
        items: dict[_ItemKey, _Item] = {}
        for piece in script.pieces:
            key = _key(piece)
            item = items.get(key)
            if item is None:
                if isinstance(piece, ToolFragment):
                    prefix, kind = "fc", "function_call"
                else:
                    prefix = "msg" if key[0] == "message" else "rs"
                    kind = key[0]
                item = items[key] = _Item(kind, 0, self._item_id(ids, prefix, key))
                if isinstance(piece, ToolFragment):
                    item.call_id, item.name = piece.id, piece.name
            item.text += piece.arguments if isinstance(piece, ToolFragment) else piece.text
        # Reasoning and message in the order they came, then the calls in slot order.
        order = [k for k in items if k[0] != "call"] + sorted(k for k in items if k[0] == "call")
        output = []
        for n, key in enumerate(order):
            items[key].index = n
            output.append(_item_json(items[key]))
        payload = self._response(script, ids, "completed", output)
        _, usage_fields = self._finish(script, payload)
        rendered = self.whole_response(
            script, payload, usage=usage_fields, finish=script.finish_reason is not None
        )
        return Rendered(
            rendered.status,
            self._headers(script, stream=False),
            rendered.frames,
            malformed=rendered.malformed,
        )

    def render_error(self, fault: Fault) -> Rendered:
        """Render OpenAI's `{"error": {"message", "type", "param", "code"}}` body.

        Args:
            fault: The `status` fault.

        Returns:
            The error response, with `Retry-After` when `fault.retry_after` is set.
        """
        return self._errors.render_error(fault)

    def error_frame(self, fault: Fault) -> bytes | None:
        """`response.failed` for an unnamed response (see `stream_error_frame`).

        Args:
            fault: The `provider_error` fault.

        Returns:
            The frame's bytes.
        """
        return self.stream_error_frame(fault, Script(), ())

    def stream_error_frame(
        self, fault: Fault, script: Script, sent: Sequence[Frame]
    ) -> bytes | None:
        """`response.failed` for the response being streamed: its id, the next
        `sequence_number`, and `error: {"code", "message"}`; preceded by the
        `response.created` / `response.in_progress` events when none were sent yet.

        The code is the fault's, or `rate_limit_exceeded` for a 429 and `server_error`
        for anything else.

        Args:
            fault: The `provider_error` fault.
            script: The script being served.
            sent: The frames written before this one.

        Returns:
            The frame's bytes.
        """
        ids = self._ids(script)
        sequence = sum(1 for f in sent if not f.keepalive)
        # A response fails after it was created: a failure before that is an HTTP error,
        # so the opening events come first when the fault falls before them.
        opening = self._response(script, ids, "in_progress", [])
        head = b""
        for n, kind in enumerate(("response.created", "response.in_progress")):
            if sequence == n:
                event = {"type": kind, "sequence_number": n, "response": opening}
                head += _event_bytes(kind, event)
                sequence += 1
        response = self._response(script, ids, "failed", [])
        code = fault.code or ("rate_limit_exceeded" if fault.status == 429 else "server_error")
        response["error"] = {"code": code, "message": fault.message}
        payload = {"type": "response.failed", "sequence_number": sequence, "response": response}
        return head + _event_bytes("response.failed", payload)

    def in_stream_error_types(self, fault: Fault) -> frozenset[str] | None:
        """What an adapter can tell from `response.failed`, which has no HTTP status."""
        return statusless_error_types(fault)

    # --- routing -------------------------------------------------------------------

    def request_fault(self, method: str, path: str, request_json: Any) -> Fault | None:
        """A 400 `invalid_request_error` (code `invalid_value`) for user input content the
        Responses API refuses: a type outside `input_text`, `input_image` and
        `input_file` (there is no audio input), an `input_file` with neither `file_data`,
        `file_id` nor `file_url`. The status and envelope are OpenAI's; the wording is
        the fake's own."""
        problem = responses_part_problem(request_json)
        if problem is None:
            return None
        return Fault("status", status=400, message=problem, code="invalid_value")

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


def _item_json(item: _Item, *, status: str = "completed") -> dict[str, Any]:
    """An output item as the `Response` lists it."""
    if item.kind == "message":
        return {
            "id": item.id,
            "type": "message",
            "status": status,
            "content": [
                {"type": "output_text", "annotations": [], "logprobs": [], "text": item.text}
            ],
            "role": "assistant",
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
    details: dict[str, Any] = {}
    if usage.cache_write_tokens is not None:
        details["cache_write_tokens"] = usage.cache_write_tokens
        fields.add("cache_write_tokens")
    if usage.cache_read_tokens is not None:
        details["cached_tokens"] = usage.cache_read_tokens
        fields.add("cache_read_tokens")
    if details:
        out["input_tokens_details"] = details
    if usage.output_tokens is not None:
        out["output_tokens"] = usage.output_tokens
        fields.add("output_tokens")
    if usage.reasoning_tokens is not None:
        out["output_tokens_details"] = {"reasoning_tokens": usage.reasoning_tokens}
        fields.add("reasoning_tokens")
    if usage.input_tokens is not None and usage.output_tokens is not None:
        out["total_tokens"] = usage.input_tokens + usage.output_tokens
    return out, frozenset(fields)
