"""Anthropic Messages (`POST /messages`), streaming and not.

The wire shapes follow recorded Anthropic traffic (`shared/wire`, the repository's
sibling folder). A stream is a sequence of typed server-sent events:

- `message_start` carries the `Message` shell and the first usage report (input tokens,
  cache writes `cache_creation_input_tokens`, cache reads `cache_read_input_tokens`, and
  a provisional `output_tokens`);
- `content_block_start` / `content_block_delta` / `content_block_stop` build the content
  blocks one at a time: `text` (`text_delta`), `thinking` (`thinking_delta`, then a
  `signature_delta`), `redacted_thinking` (opaque `data`, no deltas), `tool_use` (id and
  name at the start, arguments as `input_json_delta` fragments), and server-side tool
  blocks such as `server_tool_use` and `web_search_tool_result`;
- `message_delta` carries `stop_reason` and the final, cumulative usage (later figures
  win when the core merges them, so the provisional `output_tokens` of `message_start`
  is replaced);
- `message_stop` is the terminal sentinel; `ping` events are keep-alives; an `error`
  event inside the stream (`overloaded_error`, ...) fails the attempt with a typed error
  chosen by the status its type stands for (`ERROR_TYPE_STATUS`), after the usage
  already received has been reported.

Mapping decisions this adapter documents:

- **Tool calls.** Only client-side `tool_use` blocks become tool calls; their slot index
  is their order among `tool_use` blocks (0, 1, ...). Server-side tool blocks
  (`server_tool_use`, `web_search_tool_result`, ...) run at Anthropic and are not calls
  for the application to execute, so they are kept only in the raw payload.
- **Finish reasons.** `end_turn` and `stop_sequence` map to `stop`, `max_tokens` and
  `model_context_window_exceeded` to `length` (the output was cut short by a token
  limit), `tool_use` to `tool_calls`, `refusal` to `content_filter`. `pause_turn` (a
  long server-tool turn paused; send the assistant content back to resume) and any value
  unknown here pass through verbatim, so the core normalizes them to `other`.
- **Usage.** Figures are taken as Anthropic counts them: `input_tokens` excludes tokens
  read from or written to the prompt cache (those are `cache_read_tokens` and
  `cache_write_tokens`), unlike OpenAI's `prompt_tokens`. `reasoning_tokens` comes from
  `output_tokens_details.thinking_tokens` when Anthropic reports it.
- **max_tokens** is required by the protocol: `Sampling.max_output_tokens` when set,
  otherwise `DEFAULT_MAX_TOKENS` (4096, or `ProviderSettings.options["default_max_tokens"]`).
- **Reasoning effort** becomes extended thinking, `{"type": "enabled", "budget_tokens":
  ...}` with the budgets in `THINKING_BUDGETS` (`minimal` and `low` 1024, `medium` 4096,
  `high` 16384); `none` sends no `thinking`. Thinking tokens count against
  `max_tokens`, which must exceed the budget: without an explicit cap the adapter asks
  for `budget + default` tokens; with a cap the budget shrinks to `cap - 1`, and when that
  is under Anthropic's minimum budget (1024) thinking is left off with a warning.
- **Thinking signatures.** Anthropic needs the thinking blocks of an assistant turn,
  signatures intact, sent back when a tool-use turn continues (and all content of a
  `pause_turn` turn). With `retain_raw`, `Generation.raw` keeps every event (streaming)
  or the `Message` (non-streaming), signatures included; `content_blocks(raw)` rebuilds
  the turn's content blocks from either, and `assistant_message(generation)` makes the
  assistant `Message` to append to the conversation: it carries those blocks in
  `Message.provider_data["anthropic"]["content"]`, which this adapter sends verbatim in
  place of the message's text and tool calls.
- Sampling controls Anthropic lacks (`seed`, `presence_penalty`, `frequency_penalty`)
  are left out with a warning on the result, as is a `json_object` response format (the
  protocol has no JSON mode); a `json_schema` one becomes `output_config.format`.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from .._adapters.base import DiscoveredModel, HTTPAdapter, PartAssembler
from .._adapters.errormap import ErrorKind, error_fields, kind_for_status
from .._adapters.profile import AdapterProfile, InputSupport, UsageConvention
from .._errors import ConfigError
from .._messages import ContentPart, DocumentContent, ImageContent, Message, TextContent
from .._request import GenerationRequest
from .._settings import ProviderSettings
from .._stream.parts import END, Part, ReasoningPart, TextPart, ToolCallPart, UsagePart
from .._types import Generation, Usage
from ._wire import as_dict, as_list, as_str, native_turn, opt_dict, opt_int, opt_str

__all__ = [
    "ANTHROPIC_INPUTS",
    "DEFAULT_API_VERSION",
    "DEFAULT_MAX_TOKENS",
    "ERROR_TYPE_STATUS",
    "FINISH_MAP",
    "MIN_THINKING_BUDGET",
    "PROVIDER_DATA_KEY",
    "THINKING_BUDGETS",
    "AnthropicAdapter",
    "assistant_message",
    "content_blocks",
    "thinking_budget",
    "thinking_object",
]

DEFAULT_API_VERSION = "2023-06-01"
"""The `anthropic-version` header sent when `ProviderSettings.api_version` is unset."""

DEFAULT_MAX_TOKENS = 4096
"""`max_tokens` sent when the request sets no `max_output_tokens` (the field is required)."""

MIN_THINKING_BUDGET = 1024
"""Anthropic's smallest accepted `thinking.budget_tokens`."""

THINKING_BUDGETS: Mapping[str, int] = {
    "minimal": 1024,
    "low": 1024,
    "medium": 4096,
    "high": 16384,
}
"""Thinking budget (tokens) per reasoning effort; `none` sends no thinking."""

FINISH_MAP: Mapping[str, str] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
}
"""Anthropic `stop_reason` values with a neutral meaning; others pass through verbatim."""

ERROR_TYPE_STATUS: Mapping[str, int] = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}
"""The HTTP status each documented Anthropic error type stands for (Anthropic's "HTTP
errors" table): how an in-stream `error` event, which has none, is classified."""

PROVIDER_DATA_KEY = "anthropic"
"""`Message.provider_data` key under which an assistant turn keeps its native blocks."""

_MAX_MODEL_PAGES = 20
_END: tuple[Part, ...] = (END,)

_TEXT_FIELDS: Mapping[str, tuple[str, type[TextPart] | type[ReasoningPart]]] = {
    "text": ("text", TextPart),
    "thinking": ("thinking", ReasoningPart),
    "text_delta": ("text", TextPart),
    "thinking_delta": ("thinking", ReasoningPart),
}
"""Block and delta types that carry text: the field holding it, and the part it makes."""
_MODELS_PAGE_SIZE = "1000"


_NO_AUDIO = (
    "has no audio content block (text, image and document blocks only); route audio to "
    "a target that takes it (Gemini, or OpenAI Chat with an audio model)"
)

ANTHROPIC_INPUTS = InputSupport(
    protocol="Anthropic Messages",
    kinds=frozenset({"image", "image_url", "document", "document_url"}),
    notes=(("audio", _NO_AUDIO), ("audio_url", _NO_AUDIO)),
)
"""What the Messages API carries: images and PDF `document` blocks, base64 or by URL;
no audio."""


class AnthropicAdapter(HTTPAdapter):
    """Adapter for the Anthropic Messages protocol (`anthropic`, alias `claude`).

    Authenticates with `x-api-key` and pins the protocol with `anthropic-version`
    (`ProviderSettings.api_version`, default `DEFAULT_API_VERSION`). Streams drain to
    `message_stop`, so the output usage in `message_delta` is always counted. See the
    module documentation for how requests and responses are mapped.
    """

    provider_id: ClassVar[str] = "anthropic"
    profile: ClassVar[AdapterProfile] = AdapterProfile(
        aliases=("claude",),
        conformance_dialect="anthropic-messages",
        # input_tokens leaves cache reads and writes out
        usage=UsageConvention(input_includes_cache=False),
        inputs=ANTHROPIC_INPUTS,
    )
    default_base_url: ClassVar[str | None] = "https://api.anthropic.com/v1"
    api_key_env: ClassVar[str | None] = "ANTHROPIC_API_KEY"
    finish_reasons: ClassVar[Mapping[str, str]] = FINISH_MAP

    def __init__(self, settings: ProviderSettings) -> None:
        default = settings.options.get("default_max_tokens", DEFAULT_MAX_TOKENS)
        if isinstance(default, bool) or not isinstance(default, int) or default <= 0:
            raise ConfigError(
                f"options['default_max_tokens'] must be a positive int, got {default!r}",
                provider=settings.instance_id,
            )
        self.default_max_tokens = default
        super().__init__(settings)

    def default_headers(self) -> dict[str, str]:
        """`x-api-key`, `anthropic-version` and the configured headers."""
        headers = super().default_headers()
        lowered = {name.lower() for name in headers}
        if self.settings.api_key and "x-api-key" not in lowered:
            headers["x-api-key"] = self.settings.api_key
        if "anthropic-version" not in lowered:
            headers["anthropic-version"] = self.settings.api_version or DEFAULT_API_VERSION
        return headers

    # --- request -------------------------------------------------------------------

    def build_body(self, request: GenerationRequest) -> tuple[dict[str, Any], list[str]]:
        """The JSON body for one request, and warnings about what could not be sent."""
        warnings: list[str] = []
        body: dict[str, Any] = {"model": request.model}
        system = request.system_text()
        if system:
            body["system"] = system
        body["messages"] = self.messages_json(request.messages)
        s = request.sampling
        cap = s.max_output_tokens
        thinking = self.thinking_json(request, cap, warnings)
        if cap is not None:
            body["max_tokens"] = cap
        elif thinking is not None:
            body["max_tokens"] = thinking["budget_tokens"] + self.default_max_tokens
        else:
            body["max_tokens"] = self.default_max_tokens
        if thinking is not None:
            body["thinking"] = thinking
        if request.stream:
            body["stream"] = True
        fields, dropped = s.wire_fields(
            {
                "temperature": "temperature",
                "top_p": "top_p",
                "stop": "stop_sequences",
                "max_output_tokens": None,  # max_tokens is required: set above
            }
        )
        body.update(fields)
        if dropped:
            warnings.append(
                f"{self.instance_id}: the Anthropic Messages API has no "
                f"{', '.join(dropped)}; not sent"
            )
        if request.tools:
            body["tools"] = [
                self.tool_json(t.name, t.description, t.parameters) for t in request.tools
            ]
            body["tool_choice"] = self.tool_choice_json(request)
        if request.response_format is not None:
            fmt = request.response_format
            if fmt.get("type") == "json_schema":
                body["output_config"] = {
                    "format": {"type": "json_schema", "schema": dict(fmt.get("schema", {}))}
                }
            else:
                warnings.append(
                    f"{self.instance_id}: the Anthropic Messages API has no JSON mode; "
                    "the json_object response format was not sent"
                )
        body.update(request.provider_options)
        return body, warnings

    def thinking_json(
        self, request: GenerationRequest, cap: int | None, warnings: list[str]
    ) -> dict[str, Any] | None:
        """The `thinking` object for the request's reasoning effort, or `None`."""
        return thinking_object(request.reasoning, cap, self.instance_id, warnings)

    @staticmethod
    def tool_json(name: str, description: str, parameters: Mapping[str, Any]) -> dict[str, Any]:
        """One tool declaration."""
        out: dict[str, Any] = {"name": name}
        if description:
            out["description"] = description
        out["input_schema"] = dict(parameters)
        return out

    @staticmethod
    def tool_choice_json(request: GenerationRequest) -> dict[str, Any]:
        """`tool_choice`: `auto`, `any` (for `required`), `none`, or one named tool."""
        forced = request.tool_choice_name()
        if forced:
            return {"type": "tool", "name": forced}
        if request.tool_choice == "required":
            return {"type": "any"}
        return {"type": request.tool_choice}

    def messages_json(self, messages: Sequence[Message]) -> list[dict[str, Any]]:
        """The conversation as Anthropic messages.

        System messages are left out (they go to the top-level `system`); tool results
        become `tool_result` blocks of a user message, consecutive results sharing one.
        """
        out: list[dict[str, Any]] = []
        results: list[dict[str, Any]] | None = None
        for m in messages:
            if m.role == "system":
                continue
            if m.role == "tool":
                block = self.tool_result_json(m)
                if results is None:
                    results = [block]
                    out.append({"role": "user", "content": results})
                else:
                    results.append(block)
                continue
            results = None
            if m.role == "assistant":
                out.append({"role": "assistant", "content": self.assistant_content(m)})
            else:
                out.append({"role": "user", "content": self.content_json(m.content)})
        return out

    def content_json(self, content: str | tuple[ContentPart, ...]) -> str | list[dict[str, Any]]:
        """Message content: the string itself, or text and image blocks."""
        if isinstance(content, str):
            return content
        return [self.part_json(p) for p in content]

    @staticmethod
    def part_json(part: ContentPart) -> dict[str, Any]:
        """A text block, an image block, or a PDF `document` block, each with a base64
        or URL source.

        Raises:
            ConfigError: For audio: the Messages API has no audio block (the core
                refuses it before dispatch; this guards direct use).
        """
        if isinstance(part, TextContent):
            return {"type": "text", "text": part.text}
        if isinstance(part, DocumentContent):
            data = part.base64_data()
            doc_source: dict[str, Any] = (
                {"type": "url", "url": part.url}
                if data is None
                else {"type": "base64", "media_type": part.media_type, "data": data}
            )
            block: dict[str, Any] = {"type": "document", "source": doc_source}
            if part.title:
                block["title"] = part.title
            return block
        if not isinstance(part, ImageContent):
            raise ConfigError(f"the Anthropic Messages protocol {ANTHROPIC_INPUTS.note('audio')}")
        inline = part.base64_data()
        if inline is not None:
            media_type, data = inline
            source = {"type": "base64", "media_type": media_type, "data": data}
        else:
            source = {"type": "url", "url": part.as_data_url()}
        return {"type": "image", "source": source}

    def tool_result_json(self, m: Message) -> dict[str, Any]:
        """A `tool_result` block answering `m.tool_call_id`."""
        block: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": m.tool_call_id,
            "content": self.content_json(m.content),
        }
        if m.is_error:
            block["is_error"] = True
        return block

    def assistant_content(self, m: Message) -> str | list[Any]:
        """An assistant turn: its native blocks when kept, else text and `tool_use` blocks."""
        native = m.provider_data.get(PROVIDER_DATA_KEY)
        if isinstance(native, Mapping) and isinstance(native.get("content"), list):
            return list(native["content"])
        if not m.tool_calls:
            return self.content_json(m.content)
        blocks: list[Any] = []
        if isinstance(m.content, str):
            if m.content:
                blocks.append({"type": "text", "text": m.content})
        else:
            blocks.extend(self.part_json(p) for p in m.content)
        for call in m.tool_calls:
            blocks.append(
                {
                    "type": "tool_use",
                    "id": call.id,
                    "name": call.name,
                    "input": dict(call.arguments),
                }
            )
        return blocks

    # --- response ------------------------------------------------------------------

    def assistant_message(self, generation: Generation) -> Message:
        """The assistant turn with this protocol's native content (see `assistant_message`)."""
        return assistant_message(generation)

    def messages_path(self, request: GenerationRequest) -> str:
        """The path a generation is sent to: `/messages` (Vertex AI puts the model and the
        streaming choice in the path instead)."""
        return "/messages"

    def generate(self, request: GenerationRequest) -> AsyncIterator[Part]:
        """Send the request and yield its parts (see `Adapter.generate`)."""
        send = self.body_sender(request, self.messages_path(request), self.build_body)

        state = _StreamState()

        def decode(payload: Any, name: str | None) -> Iterable[Part]:
            event = (
                payload if type(payload) is dict else as_dict(payload, self.instance_id, "event")
            )
            kind = event.get("type")
            if type(kind) is not str:
                kind = opt_str(kind, self.instance_id, "event.type")
            kind = kind or name
            if kind == "content_block_delta":
                return self._delta_parts(event, state)  # the common event, without a generator
            if kind == "message_stop":
                return _END
            return self.parts_from_event(kind, event, state)

        return self.stream_parts(request, send, decode, whole=self.parts_from_message)

    def parts_from_event(
        self, kind: str | None, event: dict[str, Any], state: _StreamState
    ) -> Iterator[Part]:
        """Parts of one stream event (`message_stop` is handled by the caller)."""
        pid = self.instance_id
        if kind == "content_block_delta":
            yield from self._delta_parts(event, state)
        elif kind == "content_block_start":
            yield from self._block_start_parts(event, state)
        elif kind == "content_block_stop":
            index = opt_int(event.get("index"), pid, "content_block_stop.index")
            yield from state.flush_whole_input(index)
        elif kind == "message_start":
            message = as_dict(event.get("message"), pid, "message_start.message")
            usage = opt_dict(message.get("usage"), pid, "message_start.message.usage")
            if usage:
                yield from self._usage_part(usage)
        elif kind == "message_delta":
            usage = opt_dict(event.get("usage"), pid, "message_delta.usage")
            if usage:
                yield from self._usage_part(usage)
            delta = opt_dict(event.get("delta"), pid, "message_delta.delta") or {}
            yield from self.finish_parts(
                delta.get("stop_reason"), "message_delta.delta.stop_reason"
            )
        elif kind == "error":
            text, code, _ = error_fields(event.get("error"), self.error_code_keys)
            raise self.error_from_parts(None, text, code, phase="stream")
        # `ping` and event types this adapter does not know carry nothing to report.

    def _block_start_parts(self, event: dict[str, Any], state: _StreamState) -> Iterator[Part]:
        pid = self.instance_id
        index = opt_int(event.get("index"), pid, "content_block_start.index")
        block = as_dict(event.get("content_block"), pid, "content_block_start.content_block")
        kind = opt_str(block.get("type"), pid, "content_block.type")
        if kind in _TEXT_FIELDS:
            yield from _text_part(block, kind, pid, "content_block")
        elif kind == "tool_use":
            # A block without an index still gets a slot of its own.
            slot = state.calls.slot(index)
            whole = opt_dict(block.get("input"), pid, "content_block.input")
            if whole:
                # Deltas normally carry the arguments; a server that sends them whole
                # here and no deltas still gets them counted (see flush_whole_input).
                state.whole_input[slot] = json.dumps(whole)
            yield self.tool_call_part(slot, block, "content_block")

    def _delta_parts(self, event: dict[str, Any], state: _StreamState) -> tuple[Part, ...]:
        pid = self.instance_id
        delta = event.get("delta")
        if type(delta) is not dict:
            delta = as_dict(delta, pid, "content_block_delta.delta")
        kind = delta.get("type")
        if kind in _TEXT_FIELDS:
            return _text_part(delta, kind, pid, kind)
        if kind == "input_json_delta":
            index = opt_int(event.get("index"), pid, "content_block_delta.index")
            slot = state.calls.known(index) if index is not None else None
            if slot is None:
                return ()  # a server-side tool's input: not a call for the application
            fragment = as_str(delta.get("partial_json"), pid, "input_json_delta.partial_json")
            if fragment:  # Anthropic opens argument-less calls with an empty fragment
                state.whole_input.pop(slot, None)
                return (ToolCallPart(slot, None, None, fragment),)
        # signature_delta and citations_delta only matter to the raw payload.
        return ()

    def _usage_part(self, usage: dict[str, Any]) -> Iterator[Part]:
        parsed = self.usage_from(usage)
        if not parsed.is_empty():
            yield UsagePart(parsed)

    def parts_from_message(self, payload: Any) -> Iterator[Part]:
        """Parts of a whole (non-streamed) `Message`."""
        pid = self.instance_id
        message = as_dict(payload, pid, "message")
        if message.get("type") == "error":
            text, code, _ = error_fields(message.get("error"), self.error_code_keys)
            raise self.error_from_parts(None, text, code)
        slot = 0
        for block in as_list(message.get("content"), pid, "message.content"):
            block = as_dict(block, pid, "message.content[]")
            kind = block.get("type")
            if kind in _TEXT_FIELDS:
                yield from _text_part(block, kind, pid, "content[]")
            elif kind == "tool_use":
                arguments = opt_dict(block.get("input"), pid, "content[].input")
                yield self.tool_call_part(slot, block, "content[]", arguments)
                slot += 1
        usage = opt_dict(message.get("usage"), pid, "message.usage")
        if usage:
            yield from self._usage_part(usage)
        yield from self.finish_parts(message.get("stop_reason"), "message.stop_reason")

    def usage_from(self, u: dict[str, Any]) -> Usage:
        """Usage from an Anthropic `usage` object (as Anthropic counts; see the module)."""
        pid = self.instance_id
        cache_write = opt_int(u.get("cache_creation_input_tokens"), pid, "usage.cache_creation")
        if cache_write is None:
            # Only the per-TTL breakdown was sent: its parts add up to the total.
            by_ttl = opt_dict(u.get("cache_creation"), pid, "usage.cache_creation") or {}
            counts = [opt_int(v, pid, "usage.cache_creation.*") for v in by_ttl.values()]
            known = [c for c in counts if c is not None]
            cache_write = sum(known) if known else None
        details = opt_dict(u.get("output_tokens_details"), pid, "usage.output_details") or {}
        return Usage(
            input_tokens=opt_int(u.get("input_tokens"), pid, "usage.input_tokens"),
            output_tokens=opt_int(u.get("output_tokens"), pid, "usage.output_tokens"),
            cache_read_tokens=opt_int(
                u.get("cache_read_input_tokens"), pid, "usage.cache_read_input_tokens"
            ),
            cache_write_tokens=cache_write,
            reasoning_tokens=opt_int(
                details.get("thinking_tokens"), pid, "usage.output_tokens_details.thinking"
            ),
        )

    # --- errors --------------------------------------------------------------------

    error_code_keys: ClassVar[tuple[str, ...]] = ("type", "code")

    def error_hint(self, code: str | None, message: str) -> ErrorKind | None:
        """The kind an Anthropic error type stands for (`ERROR_TYPE_STATUS`).

        An `error` event inside a stream has no HTTP status of its own: its documented
        error type (e.g. `overloaded_error` → 529, `permission_error` → 403) picks the
        error class and whether a retry could help; the error's `http_status` stays
        `None`. Context-limit wording (`prompt is too long`, `input length and
        max_tokens exceed context limit`) is in the shared phrase list.
        """
        stands_for = ERROR_TYPE_STATUS.get(code or "")
        if stands_for is not None:
            return kind_for_status(stands_for)
        return super().error_hint(code, message)

    # --- discovery -----------------------------------------------------------------

    async def models(self) -> Sequence[DiscoveredModel]:
        """List models from `GET /models`, following `has_more`/`last_id` pages.

        Anthropic's listing reports ids, display names and creation dates but no context
        window or output cap, so those stay `None`. At most 20 pages of 1000 are read.
        """
        pid = self.instance_id
        found: list[DiscoveredModel] = []
        params = {"limit": _MODELS_PAGE_SIZE}
        for _ in range(_MAX_MODEL_PAGES):
            body = as_dict(await self.fetch_json("/models", params=params), pid, "models")
            for entry in as_list(body.get("data"), pid, "models.data"):
                entry = as_dict(entry, pid, "models.data[]")
                model_id = opt_str(entry.get("id"), pid, "models.data[].id")
                if not model_id:
                    continue
                facts = {
                    key: entry[key]
                    for key in ("display_name", "created_at")
                    if isinstance(entry.get(key), str)
                }
                found.append(DiscoveredModel(pid, model_id, facts=facts, raw=entry))
            last = opt_str(body.get("last_id"), pid, "models.last_id")
            if body.get("has_more") is not True or not last or last == params.get("after_id"):
                break
            params = {"limit": _MODELS_PAGE_SIZE, "after_id": last}
        return found


@dataclass(slots=True)
class _StreamState:
    """What a stream has opened so far: `tool_use` blocks (slots keyed by their block
    index) and arguments sent whole in a block's start."""

    calls: PartAssembler = field(default_factory=PartAssembler)
    whole_input: dict[int, str] = field(default_factory=dict)

    def flush_whole_input(self, block_index: int | None) -> Iterator[Part]:
        """The arguments of a `tool_use` block that came whole, at the block's end."""
        slot = self.calls.known(block_index) if block_index is not None else None
        if slot is None:
            return
        whole = self.whole_input.pop(slot, None)
        if whole:
            yield ToolCallPart(slot, None, None, whole)


# --- multi-turn helpers ------------------------------------------------------------------


def _text_part(obj: dict[str, Any], kind: Any, pid: str, where: object) -> tuple[Part, ...]:
    """The text or thinking part of a block or delta of type `kind` (`_TEXT_FIELDS`),
    none when its text is empty; `where` names it in the error for a non-string."""
    name, make = _TEXT_FIELDS[kind]
    text = obj.get(name)
    if type(text) is not str:
        text = as_str(text, pid, f"{where}.{name}")
    return (make(text),) if text else ()


def content_blocks(raw: Any) -> list[dict[str, Any]]:
    """Rebuild an assistant turn's content blocks from `Generation.raw`.

    Works on both forms `retain_raw` keeps: the list of stream events (blocks are
    reassembled from their start event and deltas: text, thinking with its signature,
    tool inputs parsed from their JSON fragments, citations) and a whole `Message`.

    Args:
        raw: `Generation.raw` of an Anthropic generation made with `retain_raw=True`.

    Returns:
        The content blocks in order, as Anthropic accepts them back in an assistant
        message: thinking signatures intact, and without what only responses carry
        (`null` fields, the default `"caller": {"type": "direct"}` of tool blocks).

    Raises:
        ValueError: If `raw` is neither form.
    """
    if isinstance(raw, Mapping) and isinstance(raw.get("content"), list):
        return [_request_block(b) for b in raw["content"] if isinstance(b, Mapping)]
    if not isinstance(raw, list):
        raise ValueError("raw is not an Anthropic Message or a list of stream events")
    blocks: dict[int, dict[str, Any]] = {}
    inputs: dict[int, str] = {}
    for event in raw:
        if not isinstance(event, Mapping):
            continue
        kind = event.get("type")
        index = event.get("index")
        if kind == "content_block_start" and isinstance(index, int):
            start = event.get("content_block")
            if isinstance(start, Mapping):
                blocks[index] = dict(start)
        elif kind == "content_block_delta" and isinstance(index, int) and index in blocks:
            _apply_delta(blocks[index], inputs, index, event.get("delta"))
    for index, text in inputs.items():
        if text.strip():
            # A cut-off stream's fragments may not parse: keep the start event's input.
            with contextlib.suppress(ValueError):
                blocks[index]["input"] = json.loads(text)
    return [_request_block(blocks[i]) for i in sorted(blocks)]


def _request_block(block: Mapping[str, Any]) -> dict[str, Any]:
    out = {key: value for key, value in block.items() if value is not None}
    if out.get("caller") == {"type": "direct"}:
        del out["caller"]
    return out


def _apply_delta(block: dict[str, Any], inputs: dict[int, str], index: int, delta: Any) -> None:
    if not isinstance(delta, Mapping):
        return
    kind = delta.get("type")
    if kind == "text_delta":
        block["text"] = str(block.get("text") or "") + str(delta.get("text") or "")
    elif kind == "thinking_delta":
        block["thinking"] = str(block.get("thinking") or "") + str(delta.get("thinking") or "")
    elif kind == "signature_delta":
        block["signature"] = str(block.get("signature") or "") + str(delta.get("signature") or "")
    elif kind == "input_json_delta":
        inputs[index] = inputs.get(index, "") + str(delta.get("partial_json") or "")
    elif kind == "citations_delta" and delta.get("citation") is not None:
        citations = block.get("citations")
        block["citations"] = [
            *(citations if isinstance(citations, list) else []),
            delta["citation"],
        ]


def assistant_message(generation: Generation) -> Message:
    """The assistant turn of `generation`, ready to append to the conversation.

    With the raw payload kept (`retain_raw=True`), the message carries the turn's native
    content blocks — thinking blocks with their signatures, server-tool blocks — in
    `provider_data`, and the Anthropic adapter sends them back verbatim, as Anthropic
    requires when a tool-use turn with thinking continues. Without it, the message holds
    only the text and the tool calls.

    Args:
        generation: A result from an Anthropic target.

    Returns:
        The assistant message.
    """
    return native_turn(generation, PROVIDER_DATA_KEY, "content", content_blocks)


def thinking_budget(effort: str, provider: str) -> int:
    """The thinking budget, in tokens, of a reasoning effort other than `none`.

    Raises:
        ConfigError: For an effort the budgets do not know.
    """
    budget = THINKING_BUDGETS.get(effort)
    if budget is None:
        raise ConfigError(
            f"unknown reasoning effort {effort!r}; expected one of "
            f"none, {', '.join(THINKING_BUDGETS)}",
            provider=provider,
        )
    return budget


def thinking_object(
    effort: str | None, cap: int | None, provider: str, warnings: list[str]
) -> dict[str, Any] | None:
    """Anthropic's `thinking` object for a reasoning effort (the Messages API's, and
    Bedrock's for Anthropic models), or `None` when there is none to send.

    The budget must stay below `cap` (`max_output_tokens`); when that leaves less than
    Anthropic's minimum, thinking is not sent and a warning says why.
    """
    if effort is None or effort == "none":
        return None
    budget = thinking_budget(effort, provider)
    if cap is not None and budget >= cap:
        budget = cap - 1
        if budget < MIN_THINKING_BUDGET:
            warnings.append(
                f"{provider}: reasoning={effort!r} was not sent: "
                f"max_output_tokens={cap} leaves no room for Anthropic's minimum "
                f"thinking budget of {MIN_THINKING_BUDGET} tokens"
            )
            return None
    return {"type": "enabled", "budget_tokens": budget}
