"""OpenAI Responses API (`POST /responses`), streaming and not.

Streams are typed server-sent events: each `data:` payload is an object whose `type`
names the event (OpenAI also sends it as the `event:` line; OpenRouter sends only the
`data:` line, so the adapter reads `type`). Content arrives per *output item* — a
`message`, a `function_call` or a `reasoning` item, each opened by
`response.output_item.added` and closed by `response.output_item.done` — as
`response.output_text.delta`, `response.refusal.delta`,
`response.function_call_arguments.delta`, `response.reasoning_summary_text.delta` and
`response.reasoning_text.delta` events that name their item by `output_index` (and
`item_id`).

There is no `data: [DONE]` sentinel in this protocol: the terminal event is the
sentinel. `response.completed`, `response.incomplete` and `response.failed` each carry
the whole `Response` object, with its `usage` and `status`; the adapter yields the usage
and the finish reason from it and then `END`. A `data: [DONE]` line (OpenRouter appends
one after `response.completed`) is accepted as a sentinel too, but never needed.

How the neutral result is read:

- Finish reason: `completed` is `tool_calls` when the response produced function calls,
  `content_filter` when the model refused (`refusal` content), `stop` otherwise;
  `incomplete` maps `incomplete_details.reason` (`max_output_tokens` -> `length`,
  `content_filter` -> `content_filter`, anything else verbatim, so the core reads it as
  `other`); `failed` raises the typed error for `response.error`, after yielding the
  usage it reports.
- Tool calls: slot `i` is the `i`-th `function_call` output item to appear; fragments are
  matched to slots by `output_index` (or `item_id`). `call_id`, not the item `id`, is the
  call's id: it is what a `function_call_output` must answer.
- Reasoning: summary and raw reasoning text stream as `ReasoningPart`s; separate summary
  parts (and separate reasoning items) are joined by a blank line.
- Refusal text is answer text (`TextPart`), as in the Chat Completions adapter.
- `.done` events and `response.output_item.done` repeat the full text of what was
  streamed; the adapter yields only what the deltas had not already delivered, so a
  server that skips deltas still produces the whole answer, and one that sends them
  produces it once.

Non-streaming responses (`request.stream` false) are the same `Response` object, read
by the same functions as the stream's `output_item.done` and terminal events.

Request mapping: system messages become `instructions`; user, assistant and tool
messages become `input` items (`input_text`/`input_image` content, `function_call` and
`function_call_output` items); tools are flat function tools sent with `strict: false`
(the Responses API otherwise normalizes schemas into strict mode, which Chat Completions
does not do, and which makes the model fill every optional argument); a `reasoning`
effort is sent as `reasoning: {"effort": ..., "summary": "auto"}` because without a
summary request reasoning models stream no reasoning text at all; `store` is `false`
because AnyInfer keeps no server-side conversation state (every request carries its full
input), so there is nothing to gain from OpenAI retaining responses. Both can be changed
with `ProviderSettings.options`: `{"store": True}`, and `{"reasoning_summary": None}` (or
`"concise"`/`"detailed"`) — OpenAI answers HTTP 400 (`param: "reasoning.summary"`) for
organizations not verified for reasoning summaries, so those must turn them off. The
protocol has no `stop`, `seed` or penalty fields: those sampling controls are not sent,
and the result carries a warning saying so (unless `provider_options` sets them).
Reasoning items (`encrypted_content`) are not carried into later turns: each request
replays the conversation as messages, tool calls and tool results only.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable, Iterable, Iterator, Mapping, Sequence
from typing import Any, ClassVar

import httpx

from .._adapters.base import DiscoveredModel, HTTPAdapter, PartAssembler
from .._adapters.errormap import error_fields
from .._adapters.profile import AdapterProfile, InputSupport
from .._errors import ConfigError, ProviderError
from .._knowledge.capabilities import ModelCapabilities
from .._messages import ContentPart, DocumentContent, ImageContent, Message, TextContent
from .._request import GenerationRequest
from .._settings import ProviderSettings
from .._stream.parts import END, FinishPart, Part, ReasoningPart, TextPart, UsagePart
from .._types import Usage
from ._wire import as_dict, as_list, as_str, opt_dict, opt_int, opt_str
from .openai_chat import OpenAIChatAdapter, json_schema_fields

RESPONSES_INPUTS = InputSupport(
    protocol="OpenAI Responses",
    kinds=frozenset({"image", "image_url", "document", "document_url"}),
    notes=(
        (
            "audio",
            "has no audio input in message content (input_text, input_image and "
            "input_file only); use Chat Completions (`openai`) with an audio model",
        ),
        (
            "audio_url",
            "has no audio input in message content (input_text, input_image and "
            "input_file only); use Chat Completions (`openai`) with an audio model",
        ),
    ),
)
"""What the Responses API carries in message content: images, PDFs as `input_file`
(`file_data` or `file_url`); no audio."""

_SAMPLING_FIELDS: Mapping[str, str | None] = {
    "temperature": "temperature",
    "top_p": "top_p",
    "max_output_tokens": "max_output_tokens",
}

__all__ = ["OpenAIResponsesAdapter"]

INCOMPLETE_REASONS: Mapping[str, str] = {
    "max_output_tokens": "length",
    "max_tokens": "length",
    "content_filter": "content_filter",
}
"""`incomplete_details.reason` values with a neutral finish reason; others pass through."""

REASONING_SEPARATOR = "\n\n"
"""Joins separate reasoning summary parts and reasoning items in the result."""

# Delta events: (index field, text kind); done events add the field with the full text.
_TEXT_DELTAS: Mapping[str, tuple[str, str]] = {
    "response.output_text.delta": ("content_index", "text"),
    "response.refusal.delta": ("content_index", "refusal"),
    "response.reasoning_summary_text.delta": ("summary_index", "summary"),
    "response.reasoning_text.delta": ("content_index", "reasoning"),
}
_TEXT_DONES: Mapping[str, tuple[str, str, str]] = {
    "response.output_text.done": ("content_index", "text", "text"),
    "response.refusal.done": ("content_index", "refusal", "refusal"),
    "response.reasoning_summary_text.done": ("summary_index", "summary", "text"),
    "response.reasoning_text.done": ("content_index", "reasoning", "text"),
}

TERMINAL_EVENTS = frozenset({"response.completed", "response.incomplete", "response.failed"})
"""The events that end a Responses stream (the protocol's sentinel)."""

_DEFAULT_SUMMARY = "auto"

# Item key: the item's output_index, or its id when an event names no index.
_ItemKey = int | str
# Text key: (item, content/summary index, kind).
_TextKey = tuple[_ItemKey, int, str]


class OpenAIResponsesAdapter(HTTPAdapter):
    """Adapter for the OpenAI Responses API (`/responses`).

    See the module documentation for the event mapping. Discovery (`models()`) is the
    same `GET /models` listing as the Chat Completions adapter's, delegated to one.

    Settings options:
        store (bool): Let OpenAI store responses server-side. Default `False`.
        reasoning_summary (str | None): The `reasoning.summary` sent with a reasoning
            effort. Default `"auto"`; `None` sends none.
    """

    provider_id: ClassVar[str] = "openai-responses"
    profile: ClassVar[AdapterProfile] = AdapterProfile(
        conformance_dialect="openai-responses",
        structured=ModelCapabilities(json_mode=True, json_schema=True),
        inputs=RESPONSES_INPUTS,
    )
    default_base_url: ClassVar[str | None] = "https://api.openai.com/v1"
    api_key_env: ClassVar[str | None] = "OPENAI_API_KEY"

    def __init__(self, settings: ProviderSettings) -> None:
        options = settings.options
        store = options.get("store", False)
        if not isinstance(store, bool):
            raise ConfigError(
                f"{settings.instance_id}: options['store'] must be a bool, got {store!r}",
                provider=settings.instance_id,
            )
        summary = options.get("reasoning_summary", _DEFAULT_SUMMARY)
        if summary is not None and not isinstance(summary, str):
            raise ConfigError(
                f"{settings.instance_id}: options['reasoning_summary'] must be a string or "
                f"None, got {summary!r}",
                provider=settings.instance_id,
            )
        super().__init__(settings)
        self.store: bool = store
        self.reasoning_summary: str | None = summary
        self._lister: OpenAIChatAdapter | None = None

    def default_headers(self) -> dict[str, str]:
        """Bearer auth plus the configured headers."""
        return self.with_bearer(super().default_headers())

    async def aclose(self) -> None:
        """Close the HTTP client (and the discovery delegate's, if one was made)."""
        try:
            if self._lister is not None:
                await self._lister.aclose()
        finally:
            await super().aclose()

    # --- request -------------------------------------------------------------------

    def build_body(self, request: GenerationRequest) -> dict[str, Any]:
        """The JSON body for one request."""
        body: dict[str, Any] = {"model": request.model, "input": self.input_items(request)}
        instructions = request.system_text()
        if instructions:
            body["instructions"] = instructions
        if request.stream:
            body["stream"] = True
        body["store"] = self.store
        body.update(request.sampling.wire_fields(_SAMPLING_FIELDS)[0])
        if request.reasoning is not None:
            reasoning: dict[str, Any] = {"effort": request.reasoning}
            if self.reasoning_summary is not None and request.reasoning != "none":
                reasoning["summary"] = self.reasoning_summary
            body["reasoning"] = reasoning
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "name": t.name,
                    "description": t.description,
                    "parameters": dict(t.parameters),
                    "strict": False,
                }
                for t in request.tools
            ]
            forced = request.tool_choice_name()
            body["tool_choice"] = (
                {"type": "function", "name": forced} if forced else request.tool_choice
            )
        if request.response_format is not None:
            body["text"] = {"format": self.text_format(request.response_format)}
        body.update(request.provider_options)
        return body

    def text_format(self, fmt: Mapping[str, Any]) -> dict[str, Any]:
        """Map the neutral response format to `text.format`."""
        if fmt.get("type") == "json_schema":
            return {"type": "json_schema", **json_schema_fields(fmt)}
        return {"type": "json_object"}

    def input_items(self, request: GenerationRequest) -> list[dict[str, Any]]:
        """The conversation as `input` items (system messages go to `instructions`)."""
        items: list[dict[str, Any]] = []
        for m in request.messages:
            if m.role != "system":
                items.extend(self.message_items(m))
        return items

    def message_items(self, m: Message) -> list[dict[str, Any]]:
        """One message as input items: a role message and/or function-call items."""
        if m.role == "tool":
            return [{"type": "function_call_output", "call_id": m.tool_call_id, "output": m.text}]
        if m.role == "assistant":
            items: list[dict[str, Any]] = []
            if m.text:
                items.append({"role": "assistant", "content": m.text})
            items.extend(
                {
                    "type": "function_call",
                    "call_id": c.id,
                    "name": c.name,
                    "arguments": json.dumps(dict(c.arguments)),
                }
                for c in m.tool_calls
            )
            return items
        if isinstance(m.content, str):
            return [{"role": m.role, "content": m.content}]
        return [{"role": m.role, "content": [self.input_part(p) for p in m.content]}]

    def input_part(self, part: ContentPart) -> dict[str, Any]:
        """One content part as a Responses input item: `input_text`, `input_image`, or
        `input_file` (a PDF's `file_data` with its file name, or its `file_url`).

        Raises:
            ConfigError: For audio: Responses message content has no audio item (the
                core refuses it before dispatch; this guards direct use).
        """
        if isinstance(part, TextContent):
            return {"type": "input_text", "text": part.text}
        if isinstance(part, ImageContent):
            return {"type": "input_image", "image_url": part.as_data_url()}
        if isinstance(part, DocumentContent):
            item: dict[str, Any] = {"type": "input_file"}
            data_url = part.as_data_url()
            if data_url is None:
                item["file_url"] = part.url
                if part.filename:
                    item["filename"] = part.filename
            else:
                item["filename"] = part.filename or "document.pdf"
                item["file_data"] = data_url
            return item
        raise ConfigError(
            f"{self.instance_id}: the OpenAI Responses protocol {RESPONSES_INPUTS.note('audio')}",
            provider=self.instance_id,
        )

    def ignored_sampling(self, request: GenerationRequest) -> list[str]:
        """Warnings for sampling controls this protocol has no field for."""
        _, unsupported = request.sampling.wire_fields(_SAMPLING_FIELDS)
        names = [n for n in unsupported if n not in request.provider_options]
        return [
            f"{self.instance_id}: the Responses API has no '{name}' parameter; it was not sent "
            "(pass it in provider_options if your endpoint accepts it)"
            for name in names
        ]

    # --- response ------------------------------------------------------------------

    def generate(self, request: GenerationRequest) -> AsyncIterator[Part]:
        """Send the request and yield its parts (see `Adapter.generate`)."""

        def send(warnings: list[str]) -> Awaitable[httpx.Response]:
            body = self.build_body(request)
            warnings.extend(self.ignored_sampling(request))
            return self.send("POST", "/responses", json_body=body, request=request)

        reader = ResponsesReader(self, phase="stream" if request.stream else "generate")

        return self.stream_parts(
            request,
            send,
            reader.event,
            whole=reader.whole,
            sentinel=b"[DONE]",
            assembler=reader.calls,
        )

    def usage_from(self, u: dict[str, Any]) -> Usage:
        """Usage from a Responses `usage` object, with cache and reasoning details."""
        pid = self.instance_id
        in_details = opt_dict(u.get("input_tokens_details"), pid, "usage.input_details") or {}
        out_details = opt_dict(u.get("output_tokens_details"), pid, "usage.output_details") or {}
        return Usage(
            input_tokens=opt_int(u.get("input_tokens"), pid, "usage.input_tokens"),
            output_tokens=opt_int(u.get("output_tokens"), pid, "usage.output_tokens"),
            total_tokens=opt_int(u.get("total_tokens"), pid, "usage.total_tokens"),
            cache_read_tokens=opt_int(
                in_details.get("cached_tokens"), pid, "usage.input_tokens_details.cached_tokens"
            ),
            cache_write_tokens=opt_int(
                in_details.get("cache_write_tokens"),
                pid,
                "usage.input_tokens_details.cache_write_tokens",
            ),
            reasoning_tokens=opt_int(
                out_details.get("reasoning_tokens"),
                pid,
                "usage.output_tokens_details.reasoning_tokens",
            ),
        )

    def error_from_object(self, error: Any, *, phase: str) -> ProviderError:
        """The typed error for an `error` event or a failed response's `error` object."""
        message, code, status = error_fields(error, self.error_code_keys)
        return self.error_from_parts(status, message, code, phase=phase)

    # --- discovery -----------------------------------------------------------------

    async def models(self) -> Sequence[DiscoveredModel]:
        """List models from `GET /models` (the same listing as Chat Completions)."""
        if self._lister is None:
            self._lister = OpenAIChatAdapter(self.settings)
        return await self._lister.models()


class ResponsesReader:
    """Turns Responses events (or a whole `Response`) into parts, keeping stream state.

    One reader serves one response. `event()` takes each stream event in order;
    `whole()` takes a non-streamed `Response` object. After a terminal event
    `finished` is true and `event()` yields `END`.

    Args:
        adapter: The adapter (for the provider id, usage and error mapping).
        phase: `"stream"` or `"generate"`, for errors raised from the body.
    """

    def __init__(self, adapter: OpenAIResponsesAdapter, *, phase: str) -> None:
        self.adapter = adapter
        self.pid = adapter.instance_id
        self.phase = phase
        self.finished = False
        self._ids: dict[str, int] = {}  # item id -> output_index
        # function_call item -> tool slot, each slot's id and name yielded once.
        self.calls = PartAssembler(dedupe_headers=True)
        # What each text key has yielded so far, in pieces (joined only to compare with
        # a `.done` summary: joining per delta would copy the text once per delta);
        # `self._emitted[key].append(piece)` records one.
        self._emitted: defaultdict[_TextKey, list[str]] = defaultdict(list)
        self._reasoning_keys: set[_TextKey] = set()
        self._refused = False

    # --- dispatch ------------------------------------------------------------------

    def event(self, payload: Any, sse_name: str | None = None) -> Iterable[Part]:
        """Parts of one stream event; `END` after a terminal one.

        Args:
            payload: The parsed `data:` object.
            sse_name: The `event:` line, used when the payload has no `type`.

        Raises:
            ProviderError: A typed error for an `error` event or `response.failed`.
        """
        pid = self.pid
        ev = payload if type(payload) is dict else as_dict(payload, pid, "event")
        kind = ev.get("type")
        if type(kind) is not str or not kind:
            kind = opt_str(kind, pid, "event.type") or sse_name or ""
        if kind == "response.output_text.delta":
            # The common event, answered without a generator (`_piece`, inlined), its
            # key read inline when both indices are integers and the item id a string
            # (`_content_key`, `_item_key`).
            delta = ev.get("delta")
            if type(delta) is not str:
                delta = as_str(delta, pid, f"{kind}.delta")
            index = ev.get("output_index")
            content = ev.get("content_index")
            item_id = ev.get("item_id")
            if type(index) is int and type(content) is int and type(item_id) is str:
                self._ids.setdefault(item_id, index)
                key: _TextKey = (index, content, "text")
            else:
                key = self._content_key(ev, "content_index", "text")
            if not delta:
                return ()
            self._emitted[key].append(delta)
            return (TextPart(delta),)
        return self._other(ev, kind)

    def _other(self, ev: dict[str, Any], kind: str) -> Iterator[Part]:
        """`event`'s parts for every event but an output text delta."""
        pid = self.pid
        delta_of = _TEXT_DELTAS.get(kind)
        if delta_of is not None:
            index_field, text_kind = delta_of
            delta = ev.get("delta")
            if type(delta) is not str:
                delta = as_str(delta, pid, f"{kind}.delta")
            yield from self._piece(self._content_key(ev, index_field, text_kind), delta)
        elif kind in _TEXT_DONES:
            index_field, text_kind, text_field = _TEXT_DONES[kind]
            key = self._content_key(ev, index_field, text_kind)
            yield from self._fill(key, as_str(ev.get(text_field), pid, f"{kind}.{text_field}"))
        elif kind == "response.function_call_arguments.delta":
            item_key = self._item_key(ev)
            delta = as_str(ev.get("delta"), pid, f"{kind}.delta")
            self._emitted[item_key, 0, "args"].append(delta)
            yield from self.calls.call(item_key, None, None, delta)
        elif kind == "response.function_call_arguments.done":
            item_key = self._item_key(ev)
            final = _arguments_text(ev.get("arguments"), pid, f"{kind}.arguments")
            rest = self._remainder((item_key, 0, "args"), final)
            yield from self.calls.call(item_key, None, None, rest)
        elif kind == "response.output_item.added":
            item = as_dict(ev.get("item"), pid, f"{kind}.item")
            item_key = self._item_key(ev, item)
            if item.get("type") == "function_call":
                yield from self._function_call(item_key, item, kind)
        elif kind == "response.output_item.done":
            item = as_dict(ev.get("item"), pid, f"{kind}.item")
            yield from self.item(self._item_key(ev, item), item)
        elif kind in TERMINAL_EVENTS:
            response = as_dict(ev.get("response"), pid, f"{kind}.response")
            yield from self.terminal(response, kind.removeprefix("response."))
            yield END
        elif kind == "error":
            nested = ev.get("error")
            raise self.adapter.error_from_object(
                nested if isinstance(nested, dict) else ev, phase=self.phase
            )
        # Anything else (created, in_progress, part added/done, annotations, hosted
        # tools' progress events) carries nothing the neutral result holds.

    def whole(self, payload: Any) -> Iterator[Part]:
        """Parts of a non-streamed `Response` object, ending with its finish reason."""
        body = as_dict(payload, self.pid, "response")
        for index, item in enumerate(as_list(body.get("output"), self.pid, "output")):
            item = as_dict(item, self.pid, "output[]")
            item_id = item.get("id")
            if isinstance(item_id, str):
                self._ids[item_id] = index
            yield from self.item(index, item)
        yield from self.terminal(body, "completed")

    # --- output items --------------------------------------------------------------

    def item(self, key: _ItemKey, item: dict[str, Any]) -> Iterator[Part]:
        """Parts of a finished output item not already delivered by its deltas."""
        pid = self.pid
        kind = item.get("type")
        if kind == "message":
            for index, part in enumerate(as_list(item.get("content"), pid, "message.content")):
                part = as_dict(part, pid, "message.content[]")
                if part.get("type") == "output_text":
                    text = as_str(part.get("text"), pid, "output_text.text")
                    yield from self._fill((key, index, "text"), text)
                elif part.get("type") == "refusal":
                    self._refused = True
                    text = as_str(part.get("refusal"), pid, "refusal.refusal")
                    yield from self._fill((key, index, "refusal"), text)
        elif kind == "function_call":
            yield from self._function_call(key, item, "function_call")
        elif kind == "reasoning":
            for index, part in enumerate(as_list(item.get("summary"), pid, "reasoning.summary")):
                part = as_dict(part, pid, "reasoning.summary[]")
                text = as_str(part.get("text"), pid, "reasoning.summary[].text")
                yield from self._fill((key, index, "summary"), text)
            for index, part in enumerate(as_list(item.get("content"), pid, "reasoning.content")):
                part = as_dict(part, pid, "reasoning.content[]")
                if part.get("type") == "reasoning_text":
                    text = as_str(part.get("text"), pid, "reasoning.content[].text")
                    yield from self._fill((key, index, "reasoning"), text)

    def _function_call(self, key: _ItemKey, item: dict[str, Any], where: str) -> Iterator[Part]:
        pid = self.pid
        call_id = opt_str(item.get("call_id"), pid, f"{where}.call_id") or None
        name = opt_str(item.get("name"), pid, f"{where}.name") or None
        final = _arguments_text(item.get("arguments"), pid, f"{where}.arguments")
        rest = self._remainder((key, 0, "args"), final)
        yield from self.calls.call(key, call_id, name, rest)

    # --- the end -------------------------------------------------------------------

    def terminal(self, response: dict[str, Any], default_status: str) -> Iterator[Part]:
        """Usage and finish reason of a final `Response`; raises for a failed one."""
        pid = self.pid
        status = opt_str(response.get("status"), pid, "response.status") or default_status
        raw_usage = opt_dict(response.get("usage"), pid, "response.usage")
        usage = self.adapter.usage_from(raw_usage) if raw_usage else None
        if usage is not None:
            yield UsagePart(usage)
        if status == "failed" or default_status == "failed":
            error = response.get("error")
            raise self.adapter.error_from_object(
                error if error is not None else "the response failed", phase=self.phase
            )
        self.finished = True
        if status == "completed":
            # A completed response that made calls finishes as tool_calls; only a
            # completed one: an incomplete response keeps its own reason.
            if self.calls.calls:
                yield FinishPart("tool_calls")
            else:
                yield FinishPart("content_filter" if self._refused else "stop")
        elif status == "incomplete":
            details = opt_dict(response.get("incomplete_details"), pid, "incomplete_details")
            reason = opt_str((details or {}).get("reason"), pid, "incomplete_details.reason")
            yield FinishPart(INCOMPLETE_REASONS.get(reason, reason) if reason else "incomplete")
        else:
            yield FinishPart(status)  # cancelled, or a status added later: the core says other

    # --- helpers -------------------------------------------------------------------

    def _item_key(self, ev: dict[str, Any], item: dict[str, Any] | None = None) -> _ItemKey:
        index = ev.get("output_index")
        item_id = item.get("id") if item is not None else ev.get("item_id")
        if type(index) is int or (isinstance(index, int) and not isinstance(index, bool)):
            if isinstance(item_id, str):
                self._ids.setdefault(item_id, index)
            return index
        if isinstance(item_id, str):
            return self._ids.get(item_id, item_id)
        return ""

    def _content_key(self, ev: dict[str, Any], field: str, kind: str) -> _TextKey:
        index = ev.get(field)
        if type(index) is not int:
            index = opt_int(index, self.pid, f"event.{field}") or 0
        return (self._item_key(ev), index, kind)

    def _sent(self, key: _TextKey) -> str:
        """Everything yielded under `key` so far."""
        pieces = self._emitted.get(key)
        if not pieces:
            return ""
        if len(pieces) > 1:
            pieces[:] = ["".join(pieces)]
        return pieces[0]

    def _remainder(self, key: _TextKey, final: str) -> str:
        """What `final` adds to what was already yielded under `key` (and record it)."""
        sent = self._sent(key)
        if not final.startswith(sent):
            return ""  # the deltas disagree with the summary; the deltas were shown
        self._emitted[key] = [final]
        return final[len(sent) :]

    def _piece(self, key: _TextKey, delta: str) -> Iterator[Part]:
        """Yield a text, refusal or reasoning delta for `key` and record it."""
        if not delta:
            return
        if key[2] in ("text", "refusal"):
            if key[2] == "refusal":
                self._refused = True
            yield TextPart(delta)
        else:
            if key not in self._reasoning_keys:
                if self._reasoning_keys:
                    yield ReasoningPart(REASONING_SEPARATOR)
                self._reasoning_keys.add(key)
            yield ReasoningPart(delta)
        self._emitted[key].append(delta)

    def _fill(self, key: _TextKey, final: str) -> Iterator[Part]:
        """Yield what a `.done` text adds to the deltas already yielded for `key`."""
        sent = self._sent(key)
        if final.startswith(sent):
            yield from self._piece(key, final[len(sent) :])


def _arguments_text(value: Any, pid: str, where: str) -> str:
    """Function-call arguments as JSON text (some servers send an object)."""
    if isinstance(value, dict | list):
        return json.dumps(value)
    return as_str(value, pid, where)
