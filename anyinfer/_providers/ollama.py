"""Ollama's native chat API (`POST /api/chat`), streamed as NDJSON and whole.

Wire facts this module relies on (Ollama's `api/types.go` and `server/routes.go`):

- A stream is `application/x-ndjson`: one JSON object per line, each
  `{"model", "created_at", "message": {"role", "content", "thinking"?, "tool_calls"?},
  "done": false}`. The last object has `"done": true`, the `done_reason` and the only
  usage and timing figures (`prompt_eval_count`, `eval_count`, `*_duration` in
  nanoseconds). `done: true` is the protocol's terminal sentinel.
- Tool calls arrive whole, never in fragments: `message.tool_calls` is a list of
  `{"id"?, "function": {"index"?, "name", "arguments": {...}}}` with the arguments as a
  JSON object.
- Errors are `{"error": "text"}` bodies with an HTTP status, or the same object as a
  line of an already-started stream (no status then).
- The non-streaming response is one object with `"done": true` carrying everything.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from .._adapters.base import DiscoveredModel, Health, HTTPAdapter, PartAssembler, inherits
from .._adapters.errormap import ErrorKind
from .._adapters.profile import AdapterProfile, InputSupport
from .._errors import AnyInferError, ConfigError, ProtocolError, ProviderError
from .._knowledge.capabilities import ModelCapabilities
from .._messages import AudioContent, DocumentContent, ImageContent, Message
from .._request import GenerationRequest, ReasoningEffort
from .._stream.parts import END, Part, PhasesPart, ReasoningPart, TextPart, UsagePart
from .._types import Usage
from ._wire import as_dict, as_list, as_str, opt_dict, opt_int, opt_str

if TYPE_CHECKING:
    from .._embed._types import EmbedReply, EmbedRequest

__all__ = ["OLLAMA_INPUTS", "OllamaAdapter", "SHOW_DETAILS_OPTION"]

_TEXT_AND_IMAGES = (
    "carries text and base64 images only (a chat message has `content` and `images`, no "
    "document or audio field); route it to a target that takes it"
)

OLLAMA_INPUTS = InputSupport(
    protocol="Ollama /api/chat",
    kinds=frozenset({"image"}),
    notes=(
        ("image_url", "takes inline images only (bytes or a base64 data: URL), not URLs"),
        ("document", _TEXT_AND_IMAGES),
        ("document_url", _TEXT_AND_IMAGES),
        ("audio", _TEXT_AND_IMAGES),
        ("audio_url", _TEXT_AND_IMAGES),
    ),
)
"""What `/api/chat` carries: text and inline (base64) images."""

SHOW_DETAILS_OPTION = "show_details"
"""`ProviderSettings.options` key: how many listed models `models()` enriches with
`POST /api/show` (an int; `True` for all). Unset or 0: none."""

FINISH_MAP: Mapping[str, str] = {"stop": "stop", "length": "length"}
"""Ollama `done_reason` values with a neutral name; others (`load`, `unload`, …) pass
through verbatim."""

THINK_FOR_EFFORT: Mapping[str, bool | str] = {
    "none": False,
    "minimal": "low",
    "low": "low",
    "medium": "medium",
    "high": "high",
}
"""The `think` value sent for each reasoning effort. Ollama has no `minimal` level; its
own OpenAI-compatible layer also clamps it to `low`."""

# Metric name on the final object -> phase name in `Timing.phases`.
_PHASES: tuple[tuple[str, str], ...] = (
    ("load_duration", "model_load_ms"),
    ("prompt_eval_duration", "prefill_ms"),
    ("eval_duration", "decode_ms"),
    ("total_duration", "server_total_ms"),
)

_NS_PER_MS = 1_000_000.0

# Ollama says "model 'x' not found" (and, in older versions, `model "x" not found, try
# pulling it first`).
_MODEL_NOT_FOUND = re.compile(r"\bmodel\b.*\bnot found\b", re.IGNORECASE | re.DOTALL)


class OllamaAdapter(HTTPAdapter):
    """Adapter for Ollama's native `/api/chat` protocol.

    Streams NDJSON and drains to the `done: true` object, which alone carries the
    finish reason, the token counts and the server's timings; they become one
    `UsageUpdate` and `Timing.phases` (`model_load_ms`, `prefill_ms`, `decode_ms`,
    `server_total_ms`, converted from nanoseconds).

    Mapping notes:

    - **Finish reason.** `stop` and `length` map to themselves; other values (`load`,
      `unload`, …) pass through and normalize to `other`. Ollama reports `stop` even
      when the model called tools, so a `stop` response that carried tool calls
      finishes as `tool_calls`.
    - **Tool calls** arrive whole; each becomes one fragment holding the JSON-encoded
      arguments, in slot `0, 1, …` by order of arrival across the response.
    - **tool_choice.** Ollama has none. `"none"` leaves the tools out of the request;
      `"required"` sends them and a warning says the choice is not enforced; a named
      tool sends only that tool, with the same warning.
    - **Reasoning effort** becomes `think`: `"none"` sends `false`, `"minimal"` and
      `"low"` send `"low"`, `"medium"` and `"high"` send themselves. Models without
      effort levels treat any level as `true`.
    - **Images** must be inline (bytes or `data:` URLs); Ollama takes base64 only.
    - **Auth.** None by default; with an `api_key` (Ollama's cloud, or a proxy) a
      `Bearer` header is sent. `OLLAMA_API_KEY` is read when no key is configured.

    `ProviderSettings.options` understood here: `show_details` (see
    `SHOW_DETAILS_OPTION`), `keep_alive` (sent with every chat request) and `num_ctx`
    (added to every request's `options`; Ollama's own default context is small and
    overflow is truncated silently). `GenerationRequest.provider_options` are merged
    into the body last, with its `options` merged into the sampling options.
    """

    provider_id: ClassVar[str] = "ollama"
    finish_reasons: ClassVar[Mapping[str, str]] = FINISH_MAP
    default_base_url: ClassVar[str | None] = "http://127.0.0.1:11434"
    api_key_env: ClassVar[str | None] = "OLLAMA_API_KEY"
    profile: ClassVar[AdapterProfile] = AdapterProfile(
        conformance_dialect="ollama-chat",
        # `format` takes a schema for every model
        structured=ModelCapabilities(json_mode=True, json_schema=True),
        local_engines=("llama.cpp",),
        inputs=OLLAMA_INPUTS,
    )
    #: The chat endpoint, relative to the base URL.
    chat_path: ClassVar[str] = "/api/chat"

    def default_headers(self) -> dict[str, str]:
        """Bearer auth when a key is set, plus the configured headers."""
        return self.with_bearer(super().default_headers())

    # --- request -------------------------------------------------------------------

    def build_body(self, request: GenerationRequest) -> tuple[dict[str, Any], list[str]]:
        """The JSON body for one request, and the warnings its mapping raised.

        Raises:
            ConfigError: If a message holds an image given by a non-`data:` URL.
        """
        warnings: list[str] = []
        body: dict[str, Any] = {
            "model": request.model,
            "messages": self.messages_json(request.messages),
            "stream": request.stream,
        }
        options = self.options_json(request)
        if options:
            body["options"] = options
        if request.reasoning is not None:
            body["think"] = think_value(request.reasoning)
        tools = self.tools_json(request, warnings)
        if tools:
            body["tools"] = tools
        if request.response_format is not None:
            body["format"] = format_value(request.response_format)
        keep_alive = self.settings.options.get("keep_alive")
        if keep_alive is not None:
            body["keep_alive"] = keep_alive
        for key, value in request.provider_options.items():
            if key == "options" and isinstance(value, Mapping):
                body["options"] = {**body.get("options", {}), **value}
            else:
                body[key] = value
        return body, warnings

    def options_json(self, request: GenerationRequest) -> dict[str, Any]:
        """Ollama's `options` object: sampling controls under Ollama's names."""
        out: dict[str, Any] = {}
        num_ctx = self.settings.options.get("num_ctx")
        if num_ctx is not None:
            out["num_ctx"] = num_ctx
        fields, _ = request.sampling.wire_fields(
            {
                "temperature": "temperature",
                "top_p": "top_p",
                "max_output_tokens": "num_predict",
                "stop": "stop",
                "seed": "seed",
                "presence_penalty": "presence_penalty",
                "frequency_penalty": "frequency_penalty",
            }
        )
        out.update(fields)
        return out

    def tools_json(self, request: GenerationRequest, warnings: list[str]) -> list[dict[str, Any]]:
        """The `tools` list after applying `tool_choice` (see the class notes)."""
        if not request.tools or request.tool_choice == "none":
            return []
        specs = list(request.tools)
        forced = request.tool_choice_name()
        if forced is not None:
            named = [t for t in specs if t.name == forced]
            if named:
                specs = named
            warnings.append(
                f"{self.instance_id}: Ollama has no tool_choice; sent "
                f"{'only ' + repr(forced) if named else 'all tools'} without forcing a call "
                f"to {forced!r}"
            )
        elif request.tool_choice == "required":
            warnings.append(
                f"{self.instance_id}: Ollama has no tool_choice; tool_choice='required' is "
                "not enforced (the model may answer without calling a tool)"
            )
        return [
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description,
                    "parameters": dict(t.parameters),
                },
            }
            for t in specs
        ]

    def messages_json(self, messages: Sequence[Message]) -> list[dict[str, Any]]:
        """The conversation in Ollama's message form.

        Tool results carry `tool_name` (Ollama's templates need it) and
        `tool_call_id`; a result without `name` takes the name of the assistant call it
        answers.
        """
        names: dict[str, str] = {}
        out: list[dict[str, Any]] = []
        for m in messages:
            for call in m.tool_calls:
                names[call.id] = call.name
            out.append(self.message_json(m, names))
        return out

    def message_json(self, m: Message, call_names: Mapping[str, str]) -> dict[str, Any]:
        """One message: text content, base64 `images`, tool calls or a tool result."""
        out: dict[str, Any] = {"role": m.role, "content": m.text}
        if not isinstance(m.content, str):
            other = next(
                (p for p in m.content if isinstance(p, DocumentContent | AudioContent)), None
            )
            if other is not None:
                raise ConfigError(
                    f"{self.instance_id}: Ollama's /api/chat {_TEXT_AND_IMAGES}; "
                    f"got {type(other).__name__}",
                    provider=self.instance_id,
                )
            images = [self.image_base64(p) for p in m.content if isinstance(p, ImageContent)]
            if images:
                out["images"] = images
        if m.role == "assistant":
            thinking = m.provider_data.get("thinking")
            if isinstance(thinking, str) and thinking:
                out["thinking"] = thinking
            if m.tool_calls:
                out["tool_calls"] = [
                    {"id": c.id, "function": {"name": c.name, "arguments": dict(c.arguments)}}
                    for c in m.tool_calls
                ]
        elif m.role == "tool":
            name = m.name or call_names.get(m.tool_call_id or "")
            if name:
                out["tool_name"] = name
            out["tool_call_id"] = m.tool_call_id
        return out

    def image_base64(self, image: ImageContent) -> str:
        """An image as the bare base64 Ollama expects.

        Raises:
            ConfigError: If the image is given by an `http(s)` URL.
        """
        inline = image.base64_data()
        if inline is None:
            raise ConfigError(
                f"{self.instance_id}: Ollama takes inline images only (bytes or a base64 "
                f"data: URL), not {str(image.url)[:80]!r}",
                provider=self.instance_id,
            )
        return inline[1]

    # --- response ------------------------------------------------------------------

    def generate(self, request: GenerationRequest) -> AsyncIterator[Part]:
        """Send the request and yield its parts (see `Adapter.generate`).

        A whole body is complete even if a lenient server left out `done`.
        """
        send = self.body_sender(request, self.chat_path, self.build_body)
        calls = PartAssembler(tool_finish=True)

        def frame(obj: Any, _event: str | None) -> Iterable[Part]:
            return self.parts_from_object(obj, calls)

        if inherits(type(self), OllamaAdapter, "parts_from_object", "parts_from_message"):

            def frame(obj: Any, _event: str | None) -> Iterable[Part]:
                # Nearly every line is a piece of text: read it without the general
                # walk's generators, which give the same part (`plain_text`).
                text = plain_text(obj)
                if text is None:
                    return self.parts_from_object(obj, calls)
                return (TextPart(text),) if text else ()

        return self.stream_parts(request, send, frame, framing="ndjson", assembler=calls)

    def parts_from_object(self, obj: Any, calls: PartAssembler | None = None) -> Iterator[Part]:
        """Parts of one stream object, or of the whole non-streaming response.

        The message's thinking, text and tool calls come first; on the `done: true`
        object then usage, phases, the finish reason and `END`.

        Args:
            obj: The parsed object.
            calls: The response's assembler (tool-call slots; a `stop` finish after
                calls becomes `tool_calls` when it filters the parts); a fresh one
                when omitted.

        Raises:
            ProviderError: A typed subclass for an `{"error": ...}` object.
            ProtocolError: For objects of the wrong shape.
        """
        calls = calls if calls is not None else PartAssembler(tool_finish=True)
        if type(obj) is not dict:
            obj = as_dict(obj, self.instance_id, "chunk")
        error = obj.get("error")
        if error is not None:
            message = error if isinstance(error, str) else json.dumps(error)
            status = obj.get("status")
            raise self.error_from_parts(
                status if isinstance(status, int) and not isinstance(status, bool) else None,
                message,
                error_code(message),
                phase="stream",
            )
        message_obj = obj.get("message")
        if message_obj is not None and type(message_obj) is not dict:
            message_obj = opt_dict(message_obj, self.instance_id, "message")
        if message_obj:
            yield from self.parts_from_message(message_obj, calls)
        if obj.get("done") is not True:
            return
        usage = self.usage_from(obj)
        if not usage.is_empty():
            yield UsagePart(usage)
        phases = self.phases_from(obj)
        if phases:
            yield PhasesPart(phases)
        yield from self.finish_parts(obj.get("done_reason"), "done_reason")
        yield END

    def parts_from_message(self, message: dict[str, Any], calls: PartAssembler) -> Iterator[Part]:
        """Parts of one `message` object: thinking, content, then whole tool calls."""
        thinking = message.get("thinking")
        if thinking is not None and type(thinking) is not str:
            thinking = as_str(thinking, self.instance_id, "message.thinking")
        if thinking:
            yield ReasoningPart(thinking)
        content = message.get("content")
        if content is not None and type(content) is not str:
            content = as_str(content, self.instance_id, "message.content")
        if content:
            yield TextPart(content)
        calls_json = message.get("tool_calls")
        if calls_json is None:
            return
        pid = self.instance_id
        for call in as_list(calls_json, pid, "message.tool_calls"):
            call = as_dict(call, pid, "message.tool_calls[]")
            fn = opt_dict(call.get("function"), pid, "message.tool_calls[].function") or {}
            arguments = fn.get("arguments")
            if arguments is None:
                fragment = ""
            elif isinstance(arguments, str):
                fragment = arguments  # a proxy that sends OpenAI-style string arguments
            else:
                fragment = json.dumps(arguments, ensure_ascii=False)
            yield from calls.call(
                None,
                opt_str(call.get("id"), pid, "message.tool_calls[].id") or None,
                opt_str(fn.get("name"), pid, "message.tool_calls[].function.name") or None,
                fragment,
            )

    def usage_from(self, obj: Mapping[str, Any]) -> Usage:
        """Usage from the final object's counters (absent counters stay unknown)."""
        pid = self.instance_id
        return Usage(
            input_tokens=opt_int(obj.get("prompt_eval_count"), pid, "prompt_eval_count"),
            output_tokens=opt_int(obj.get("eval_count"), pid, "eval_count"),
            cache_read_tokens=opt_int(
                obj.get("prompt_eval_cached_count"), pid, "prompt_eval_cached_count"
            ),
        )

    def phases_from(self, obj: Mapping[str, Any]) -> dict[str, float]:
        """Server timings from the final object, nanoseconds to milliseconds."""
        pid = self.instance_id
        phases: dict[str, float] = {}
        for field, phase in _PHASES:
            ns = obj.get(field)
            if ns is None:
                continue
            if isinstance(ns, bool) or not isinstance(ns, int | float) or ns < 0:
                raise self.bad_field(pid, field, ns)
            phases[phase] = ns / _NS_PER_MS
        return phases

    @staticmethod
    def bad_field(pid: str, field: str, value: Any) -> ProtocolError:
        """The error for a metric that is not a non-negative number."""
        return ProtocolError(
            f"{pid}: expected a non-negative number at {field}, got {value!r}", provider=pid
        )

    # --- errors --------------------------------------------------------------------

    cross_class_hints: ClassVar[frozenset[ErrorKind]] = frozenset({"not_found", "context_window"})
    """Ollama answers 500 for a model that is not pulled and for an input that does not
    fit; its own wording for them (`error_code`) is trusted over that status."""

    def error_message(self, body: bytes) -> tuple[str, str | None]:
        """`(message, code)` of `{"error": "..."}`, with a code read from the text."""
        message, code = super().error_message(body)
        return message, code or error_code(message)

    # --- embeddings ----------------------------------------------------------------

    async def embed(self, request: EmbedRequest) -> EmbedReply:
        """Embed one batch with `POST /api/embed` (`anyinfer._embed._wire`)."""
        from .._embed._wire import ollama_embed

        return await ollama_embed(self, request)

    # --- discovery -----------------------------------------------------------------

    async def models(self) -> Sequence[DiscoveredModel]:
        """List installed models from `GET /api/tags`.

        Each entry's `details` (family, parameter size, quantization, format) become
        facts. Ollama reports context length and capabilities only through
        `POST /api/show`, one request per model, so `models()` calls it only when
        asked: for the first `ProviderSettings.options["show_details"]` models listed
        (`True`: all). A model whose `/api/show` fails keeps its listing facts. Use
        `show()` for one model.
        """
        pid = self.instance_id
        payload = as_dict(await self.fetch_json("/api/tags"), pid, "tags")
        limit = self._show_limit()
        found: list[DiscoveredModel] = []
        for entry in as_list(payload.get("models"), pid, "tags.models"):
            entry = as_dict(entry, pid, "tags.models[]")
            name = opt_str(entry.get("name"), pid, "tags.models[].name") or opt_str(
                entry.get("model"), pid, "tags.models[].model"
            )
            if not name:
                continue
            model = _from_listing(pid, name, entry)
            if len(found) < limit:
                try:
                    detailed = await self.show(name)
                except ProviderError:
                    detailed = None
                if detailed is not None:
                    model = _merge(model, detailed)
            found.append(model)
        return found

    def _show_limit(self) -> int:
        value = self.settings.options.get(SHOW_DETAILS_OPTION)
        if value is True:
            return 1 << 30
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
        return 0

    async def show(self, model: str) -> DiscoveredModel:
        """One model's details from `POST /api/show`.

        Facts: `capabilities` (Ollama's list, e.g. `completion`, `tools`, `vision`,
        `thinking`) plus a boolean per capability, `family`, `parameter_size`,
        `quantization_level`, `architecture`, and `num_ctx` when the model's
        parameters set one. `context_window` is the model's trained context length
        (`model_info["<architecture>.context_length"]`), which can exceed the
        `num_ctx` the server runs it with.

        Raises:
            ModelNotFoundError: If the model is not installed.
        """
        pid = self.instance_id
        payload = as_dict(
            await self.fetch_json("/api/show", json_body={"model": model}), pid, "show"
        )
        details = opt_dict(payload.get("details"), pid, "show.details") or {}
        info = opt_dict(payload.get("model_info"), pid, "show.model_info") or {}
        facts = _detail_facts(details)
        arch = info.get("general.architecture")
        if isinstance(arch, str) and arch:
            facts["architecture"] = arch
        window = _context_length(info, arch if isinstance(arch, str) else None)
        if window is None:
            window = _positive_int(details.get("context_length"))
        capabilities = [
            c
            for c in as_list(payload.get("capabilities"), pid, "show.capabilities")
            if isinstance(c, str)
        ]
        if capabilities or "capabilities" in payload:
            facts.update(_capability_facts(capabilities))
        num_ctx = _num_ctx(payload.get("parameters"))
        if num_ctx is not None:
            facts["num_ctx"] = num_ctx
        raw = {k: v for k, v in payload.items() if k not in ("tensors", "modelfile", "license")}
        return DiscoveredModel(pid, model, context_window=window, facts=facts, raw=raw)

    async def health(self) -> Health:
        """Probe with `GET /api/tags` (no `/api/show` calls); never raises."""
        start = time.monotonic()
        pid = self.instance_id
        try:
            payload = as_dict(await self.fetch_json("/api/tags"), pid, "tags")
            count = len(as_list(payload.get("models"), pid, "tags.models"))
        except AnyInferError as exc:
            return Health(pid, False, (time.monotonic() - start) * 1000.0, exc.message)
        return Health(pid, True, (time.monotonic() - start) * 1000.0, "", count)


# --- mapping helpers -------------------------------------------------------------------


def think_value(effort: ReasoningEffort) -> bool | str:
    """Ollama's `think` value for a reasoning effort (see `THINK_FOR_EFFORT`)."""
    return THINK_FOR_EFFORT.get(effort, True)


def format_value(fmt: Mapping[str, Any]) -> Any:
    """Ollama's `format`: `"json"` for JSON mode, the schema itself for a JSON Schema."""
    if fmt.get("type") == "json_schema":
        return dict(fmt.get("schema") or {})
    return "json"


def finish_reason(done_reason: str, had_tool_calls: bool) -> str:
    """The neutral finish reason for a `done_reason`.

    Args:
        done_reason: Ollama's value.
        had_tool_calls: Whether the response carried tool calls (Ollama still says
            `stop` then).
    """
    if done_reason == "stop" and had_tool_calls:
        return "tool_calls"
    return FINISH_MAP.get(done_reason, done_reason)


def error_code(message: str) -> str | None:
    """A code for Ollama's code-less error text, for the shared error mapping."""
    lowered = message.lower()
    if _MODEL_NOT_FOUND.search(message):
        return "model_not_found"
    if "exceeds maximum context length" in lowered:
        return "context_length_exceeded"
    if "server busy" in lowered:
        return "overloaded"
    if lowered.strip() == "unauthorized":
        return "authentication"
    return None


def _positive_int(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        return None
    return value


def _context_length(info: Mapping[str, Any], arch: str | None) -> int | None:
    if arch:
        found = _positive_int(info.get(f"{arch}.context_length"))
        if found is not None:
            return found
    for key, value in info.items():
        if key.endswith(".context_length"):
            found = _positive_int(value)
            if found is not None:
                return found
    return None


def _num_ctx(parameters: Any) -> int | None:
    """`num_ctx` from `/api/show`'s Modelfile-style `parameters` text."""
    if not isinstance(parameters, str):
        return None
    for line in parameters.splitlines():
        bits = line.split()
        if len(bits) == 2 and bits[0] == "num_ctx" and bits[1].isdigit():
            return int(bits[1])
    return None


def _detail_facts(details: Mapping[str, Any]) -> dict[str, Any]:
    facts: dict[str, Any] = {}
    for key in ("family", "parameter_size", "quantization_level", "format", "parent_model"):
        value = details.get(key)
        if isinstance(value, str) and value:
            facts[key] = value
    families = details.get("families")
    if isinstance(families, list) and families:
        facts["families"] = [f for f in families if isinstance(f, str)]
    return facts


def _capability_facts(capabilities: Sequence[str]) -> dict[str, Any]:
    facts: dict[str, Any] = {"capabilities": list(capabilities)}
    for name in ("completion", "tools", "vision", "thinking", "embedding", "insert"):
        facts[name] = name in capabilities
    return facts


def _from_listing(pid: str, name: str, entry: Mapping[str, Any]) -> DiscoveredModel:
    details = entry.get("details")
    details = details if isinstance(details, dict) else {}
    facts = _detail_facts(details)
    size = _positive_int(entry.get("size"))
    if size is not None:
        facts["size_bytes"] = size
    digest = entry.get("digest")
    if isinstance(digest, str) and digest:
        facts["digest"] = digest
    capabilities = entry.get("capabilities")
    if isinstance(capabilities, list):  # newer servers list them here too
        facts.update(_capability_facts([c for c in capabilities if isinstance(c, str)]))
    window = _positive_int(details.get("context_length"))
    return DiscoveredModel(pid, name, context_window=window, facts=facts, raw=entry)


def _merge(listed: DiscoveredModel, shown: DiscoveredModel) -> DiscoveredModel:
    return DiscoveredModel(
        listed.provider,
        listed.id,
        context_window=shown.context_window or listed.context_window,
        max_output_tokens=shown.max_output_tokens or listed.max_output_tokens,
        facts={**listed.facts, **shown.facts},
        raw={**listed.raw, "show": dict(shown.raw)},
    )


_PLAIN_MESSAGE_KEYS = frozenset({"role", "content"})


def plain_text(obj: Any) -> str | None:
    """The text of a stream line that is only a piece of text, else `None`.

    Such a line has no `error`, is not the `done: true` one, and has a `message` holding
    only `content` (a string) and perhaps `role`: for it,
    `OllamaAdapter.parts_from_object` gives one `TextPart` of this text (none for an
    empty one).
    """
    if type(obj) is not dict or obj.get("done") is True or obj.get("error") is not None:
        return None
    message = obj.get("message")
    if type(message) is not dict or not message.keys() <= _PLAIN_MESSAGE_KEYS:
        return None
    content = message.get("content", "")
    return content if type(content) is str else None
