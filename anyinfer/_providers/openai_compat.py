"""OpenAI-compatible servers: local engines and gateways that speak Chat Completions.

Many servers speak "the OpenAI protocol" and each differs from it a little: where usage
goes, which field carries reasoning, how constrained output is asked for, whether
`stream_options` is accepted at all. Those differences are data here, not branches: a
frozen `Quirks` record per engine (`ENGINE_QUIRKS`), consulted by one adapter,
`OpenAICompatAdapter`. The presets `llama.cpp`, `vllm` and `lmstudio` are the same
adapter with their engine's quirks, default port and profile: each is one entry of
`PRESETS`, from which its class, registry id, aliases, engine quirks, conformance
dialect, structured-output defaults and local engines all come.

Choosing quirks, in `ProviderSettings.options`:

- `"engine"`: a key of `ENGINE_QUIRKS` (`"llama.cpp"`, `"llama-cpp-python"`, `"vllm"`,
  `"lmstudio"`, `"openrouter"`, `"groq"`, `"deepseek"`, `"mistral"`, ...). Defaults to
  the preset's own engine (`"openai-compat"` for the generic id).
- `"quirks"`: a mapping of `Quirks` field names to values, applied over the engine's
  record, e.g. `{"stream_usage": False, "max_tokens_field": "max_completion_tokens"}`.
  Unknown fields and ill-typed values are a `ConfigError`.

What every engine gets, whatever its quirks (the shared OpenAI Chat reading): SSE comment
lines (`: OPENROUTER PROCESSING`, `: ping`) are skipped; usage is read from whichever
chunk carries it (a trailing usage-only chunk, the finish chunk, an error chunk); error
objects inside chunks become typed errors after any usage they carry is reported; a
stream without a finish reason ends `"stop"` when `[DONE]` arrives and fails when it does
not; a stream that ends without sending anything (llama-cpp-python's failed stream: an
empty 200) fails.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from dataclasses import dataclass, fields
from types import MappingProxyType
from typing import Any, ClassVar, Literal, get_args

import httpx

from .._adapters.base import POOL_OPTIONS, DiscoveredModel, PartAssembler
from .._adapters.limits import LIMIT_OPTIONS
from .._adapters.profile import AdapterProfile
from .._client.instance import base_url_env, resolve_base_url
from .._errors import ConfigError, ProviderError
from .._knowledge.capabilities import ModelCapabilities
from .._request import GenerationRequest
from .._settings import ProviderSettings
from .._stream.parts import Part, PhasesPart, WarningPart
from ._wire import as_dict, as_list, opt_dict, opt_int
from .openai_chat import OpenAIChatAdapter

__all__ = [
    "ENGINE_QUIRKS",
    "LMStudioAdapter",
    "LlamaCppAdapter",
    "OpenAICompatAdapter",
    "PRESETS",
    "Preset",
    "Quirks",
    "StructuredOutput",
    "VLLMAdapter",
    "configured_base_url",
    "preset_adapter",
    "preset_adapters",
    "quirks_for",
]

StructuredOutput = Literal[
    "response_format", "json_schema", "json_object_schema", "guided_json", "structured_outputs"
]
"""How an engine is asked for JSON / JSON-Schema-constrained output.

- `response_format`: OpenAI's `response_format` (`json_object` or `json_schema`).
- `json_schema`: llama.cpp server's top-level `json_schema` field (the schema itself),
  which the server compiles to a grammar; plain JSON mode sends `{"type": "object"}`.
- `json_object_schema`: llama-cpp-python's `response_format: {"type": "json_object",
  "schema": ...}`.
- `guided_json`: vLLM's older `guided_json` field (the schema itself).
- `structured_outputs`: vLLM's newer `structured_outputs: {"json": schema}` (or
  `{"json_object": true}`).
"""

_STRUCTURED: tuple[str, ...] = get_args(StructuredOutput)
_STREAM_OPTIONS_REJECTED = (400, 422)
_FALLBACK_WARNING = (
    "the server rejected stream_options; retried without it (usage arrives only if the "
    "server reports it unasked), and later requests on this instance skip it"
)


@dataclass(frozen=True, slots=True)
class Quirks:
    """How one engine's wire differs from OpenAI Chat Completions, as data.

    Attributes:
        engine: The engine these quirks describe (for messages and docs).
        max_tokens_field: Request field for the output-token cap (`max_tokens` for most
            compatible servers, `max_completion_tokens` for OpenAI's newer API).
        stream_usage: Ask for a usage chunk with `stream_options.include_usage`.
        retry_without_stream_options: When the server answers 400/422 naming
            `stream_options`, retry the attempt once without it, and leave it out of
            every later request on this adapter instance.
        usage_paths: Where chunks carry the usage object, first match wins; dotted paths
            walk nested objects (`x_groq.usage` is Groq's).
        timings: Read llama.cpp server's `timings` object: `prompt_ms`/`predicted_ms`
            become `timing.phases` `prefill_ms`/`decode_ms`; `cache_n` becomes
            `cache_read_tokens`; and when a chunk has no usage object, usage is taken
            from `prompt_n + cache_n` and `predicted_n`.
        reasoning_fields: Delta fields carrying reasoning text, first non-empty wins.
        structured_output: How constrained JSON output is asked for (see
            `StructuredOutput`).
        json_object: Whether the engine has a plain JSON mode; when not, JSON mode is
            sent as a JSON Schema of `{"type": "object"}`.
        send_reasoning_effort: Send `reasoning_effort` when reasoning is requested
            (engines that reject unknown fields need this off).
        dedupe_tool_call_headers: Drop a tool call's `id` and `name` from fragments that
            repeat them (llama-cpp-python repeats both on every fragment), so each slot
            announces them once, as OpenAI does.
        tool_calls_by_id: Correlate tool-call fragments that carry no `index` by their
            `id` (a new id opens a new slot; a fragment with neither follows the last).
        legacy_function_call: Read a delta's legacy `function_call` as tool slot 0 when
            it has no `tool_calls`.
        content_filter_warnings: Turn Azure's `content_filter_results` /
            `prompt_filter_results` entries marked `filtered` into result warnings.
    """

    engine: str = "openai-compat"
    max_tokens_field: str = "max_tokens"
    stream_usage: bool = True
    retry_without_stream_options: bool = True
    usage_paths: tuple[str, ...] = ("usage", "x_groq.usage")
    timings: bool = False
    reasoning_fields: tuple[str, ...] = ("reasoning_content", "reasoning")
    structured_output: StructuredOutput = "response_format"
    json_object: bool = True
    send_reasoning_effort: bool = True
    dedupe_tool_call_headers: bool = True
    tool_calls_by_id: bool = True
    legacy_function_call: bool = True
    content_filter_warnings: bool = False

    def with_overrides(self, overrides: Mapping[str, Any], *, provider: str = "") -> Quirks:
        """A copy with `overrides` applied, each checked against the field's type.

        Args:
            overrides: Field names to values.
            provider: The provider instance, for error messages.

        Returns:
            The new quirks.

        Raises:
            ConfigError: For an unknown field or a value of the wrong type.
        """
        known = {f.name: f for f in fields(self)}
        checked: dict[str, Any] = {}
        for name, value in overrides.items():
            if name not in known:
                raise ConfigError(
                    f"unknown quirk {name!r}; known quirks: {', '.join(sorted(known))}",
                    provider=provider or None,
                )
            checked[name] = _check_quirk(name, value, getattr(self, name), provider)
        return dataclasses.replace(self, **checked)


def _check_quirk(name: str, value: Any, default: Any, provider: str) -> Any:
    def bad(expected: str) -> ConfigError:
        return ConfigError(
            f"quirk {name!r} must be {expected}, got {value!r}", provider=provider or None
        )

    if name == "structured_output":
        if value not in _STRUCTURED:
            raise bad("one of " + ", ".join(_STRUCTURED))
        return value
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise bad("true or false")
        return value
    if isinstance(default, str):
        if not isinstance(value, str) or not value:
            raise bad("a non-empty string")
        return value
    if isinstance(default, tuple):
        if isinstance(value, str) or not all(isinstance(v, str) and v for v in value):
            raise bad("a list of non-empty strings")
        return tuple(value)
    raise bad(type(default).__name__)  # pragma: no cover - every field is covered above


_GENERIC = Quirks()

_ENGINES: Mapping[str, Quirks] = MappingProxyType(
    {
        "openai-compat": _GENERIC,
        # llama-cpp-python[server]: ignores include_usage (no usage in streams), repeats
        # id and name on every tool-call fragment, JSON Schema inside a json_object
        # response_format.
        "llama-cpp-python": dataclasses.replace(
            _GENERIC, engine="llama-cpp-python", structured_output="json_object_schema"
        ),
        # Ollama's /v1: include_usage honoured; otherwise OpenAI-shaped.
        "ollama": dataclasses.replace(_GENERIC, engine="ollama"),
        # OpenRouter: comment lines and error objects in chunks (shared reading).
        "openrouter": dataclasses.replace(_GENERIC, engine="openrouter"),
        # Groq: usage in x_groq.usage on the finish chunk, unasked.
        "groq": dataclasses.replace(
            _GENERIC, engine="groq", stream_usage=False, max_tokens_field="max_completion_tokens"
        ),
        # DeepSeek: usage (with prompt_cache_hit_tokens) in the finish chunk.
        "deepseek": dataclasses.replace(_GENERIC, engine="deepseek"),
        # Mistral: usage in the finish chunk unasked; list-shaped content with thinking.
        "mistral": dataclasses.replace(_GENERIC, engine="mistral", stream_usage=False),
        # Azure OpenAI deployments: content filter annotations; max_completion_tokens.
        "azure-openai": dataclasses.replace(
            _GENERIC,
            engine="azure-openai",
            max_tokens_field="max_completion_tokens",
            content_filter_warnings=True,
        ),
        # Azure AI model inference: unknown body fields are a 422 unless the
        # `extra-parameters` header allows them, so nothing outside its spec is sent.
        "azure-inference": dataclasses.replace(
            _GENERIC,
            engine="azure-inference",
            stream_usage=False,
            send_reasoning_effort=False,
            content_filter_warnings=True,
        ),
    }
)
"""Engines that are not presets (selectable with `options["engine"]`); the presets'
engines are their `PRESETS` entries."""


def _engines() -> dict[str, Quirks]:
    """Every known engine's quirks: `_ENGINES`, then each preset's."""
    return {**_ENGINES, **{pid: preset.engine_quirks(pid) for pid, preset in PRESETS.items()}}


def quirks_for(engine: str, options: Mapping[str, Any], provider: str = "") -> Quirks:
    """The quirks an adapter uses: an engine's record with option overrides.

    Args:
        engine: The adapter's default engine id.
        options: `ProviderSettings.options`; `"engine"` picks another record,
            `"quirks"` overrides fields.
        provider: The provider instance, for error messages.

    Returns:
        The quirks.

    Raises:
        ConfigError: For an unknown engine, or bad overrides.
    """
    chosen = options.get("engine", engine)
    engines = _engines()
    if not isinstance(chosen, str) or chosen.strip().lower() not in engines:
        raise ConfigError(
            f"unknown engine {chosen!r}; known engines: {', '.join(sorted(engines))}",
            provider=provider or None,
        )
    quirks = engines[chosen.strip().lower()]
    overrides = options.get("quirks")
    if overrides is None:
        return quirks
    if not isinstance(overrides, Mapping):
        raise ConfigError(
            f"options['quirks'] must be a mapping of quirk names to values, got {overrides!r}",
            provider=provider or None,
        )
    return quirks.with_overrides(overrides, provider=provider)


def configured_base_url(settings: ProviderSettings, default: str | None = None) -> str | None:
    """The base URL an HTTP adapter will use: settings, then the environment, then default.

    The rule itself is `anyinfer._client.instance.resolve_base_url`; this name stays for adapters
    that import it."""
    return resolve_base_url(settings, default)


class OpenAICompatAdapter(OpenAIChatAdapter):
    """The OpenAI Chat protocol against any base URL, with per-engine quirks.

    `base_url` is required (the server's OpenAI-compatible root, usually ending in
    `/v1`), in the settings or `ANYINFER_<INSTANCE>_BASE_URL`. There is no provider-wide
    API-key variable: a server gets a key only from `ProviderSettings.api_key` or
    `ANYINFER_<INSTANCE>_API_KEY` (sent as `Authorization: Bearer`), so `OPENAI_API_KEY`
    never goes to whatever listens on a local port.

    `ProviderSettings.options` keys: `engine` (a key of `ENGINE_QUIRKS`) and `quirks`
    (field overrides; see `Quirks`).

    Attributes:
        quirks: The quirks in force for this instance.
    """

    provider_id: ClassVar[str] = "openai-compat"
    profile: ClassVar[AdapterProfile] = AdapterProfile(
        conformance_dialect="openai-chat", local_engines=("llama.cpp", "vllm")
    )
    default_base_url: ClassVar[str | None] = None
    api_key_env: ClassVar[str | None] = None
    #: The engine whose quirks apply unless `options["engine"]` says otherwise.
    default_engine: ClassVar[str] = "openai-compat"
    #: `ProviderSettings.options` keys this adapter understands.
    option_keys: ClassVar[frozenset[str]] = frozenset({"engine", "quirks"})

    def __init__(self, settings: ProviderSettings) -> None:
        pid = settings.instance_id
        if not configured_base_url(settings, self.default_base_url):
            raise ConfigError(
                f"provider {pid!r} ({self.provider_id}) needs base_url (or "
                f"{base_url_env(pid)}): the server's OpenAI-compatible root, e.g. "
                "'http://127.0.0.1:8080/v1'",
                provider=pid,
            )
        accepted = self.option_keys | POOL_OPTIONS | LIMIT_OPTIONS
        unknown = sorted(set(settings.options) - accepted)
        if unknown:
            raise ConfigError(
                f"provider {pid!r} ({self.provider_id}) does not understand options "
                f"{', '.join(map(repr, unknown))}; it accepts "
                f"{', '.join(sorted(accepted))}",
                provider=pid,
            )
        self.quirks = quirks_for(self.engine_for(settings), settings.options, pid)
        super().__init__(settings)
        self.max_tokens_field = self.quirks.max_tokens_field
        self.stream_usage = self.quirks.stream_usage
        self.reasoning_fields = self.quirks.reasoning_fields

    def engine_for(self, settings: ProviderSettings) -> str:
        """The default engine for these settings (before `options["engine"]`)."""
        return self.default_engine

    # --- request -------------------------------------------------------------------

    def chat_path(self, request: GenerationRequest) -> str:
        """The path (under `base_url`) generation requests go to."""
        return "/chat/completions"

    def chat_params(self) -> Mapping[str, str] | None:
        """Query parameters for generation requests."""
        return None

    def chat_headers(self, request: GenerationRequest) -> Mapping[str, str] | None:
        """Extra headers for one generation request."""
        return None

    def build_body(self, request: GenerationRequest) -> dict[str, Any]:
        """The OpenAI body, adjusted by the quirks; `provider_options` still win."""
        q = self.quirks
        plain = dataclasses.replace(
            request,
            response_format=None,
            provider_options={},
            reasoning=request.reasoning if q.send_reasoning_effort else None,
        )
        body = super().build_body(plain)
        if request.response_format is not None:
            self.apply_structured_output(body, request.response_format)
        body.update(request.provider_options)
        return body

    def apply_structured_output(self, body: dict[str, Any], fmt: Mapping[str, Any]) -> None:
        """Put a neutral structured-output instruction into `body` the engine's way.

        Args:
            body: The request body, updated in place.
            fmt: `{"type": "json_object"}` or `{"type": "json_schema", "name", "schema",
                "strict"}`.
        """
        q = self.quirks
        is_schema = fmt.get("type") == "json_schema"
        schema: dict[str, Any] = dict(fmt.get("schema") or {}) if is_schema else {"type": "object"}
        how = q.structured_output
        if how == "response_format":
            if not is_schema and not q.json_object:
                fmt = {"type": "json_schema", "name": "output", "schema": schema}
            body["response_format"] = self.response_format_json(fmt)
        elif how == "json_schema":
            body["json_schema"] = schema
        elif how == "json_object_schema":
            body["response_format"] = (
                {"type": "json_object", "schema": schema} if is_schema else {"type": "json_object"}
            )
        elif how == "guided_json":
            body["guided_json"] = schema
        else:  # structured_outputs
            body["structured_outputs"] = {"json": schema} if is_schema else {"json_object": True}

    async def open_response(self, request: GenerationRequest) -> tuple[httpx.Response, bool]:
        """Send a generation request, falling back once when `stream_options` is refused.

        Returns:
            The open response, and whether the `stream_options` fallback was taken.
        """
        body = self.build_body(request)
        path, params = self.chat_path(request), self.chat_params()
        headers = self.chat_headers(request)
        try:
            response = await self.send(
                "POST", path, json_body=body, params=params, headers=headers, request=request
            )
        except ProviderError as exc:
            if not (
                request.stream
                and "stream_options" in body
                and self.quirks.retry_without_stream_options
                and _rejects_stream_options(exc)
            ):
                raise
        else:
            return response, False
        self.stream_usage = False  # remembered for the life of this adapter instance
        del body["stream_options"]
        response = await self.send(
            "POST", path, json_body=body, params=params, headers=headers, request=request
        )
        return response, True

    # --- response ------------------------------------------------------------------

    def generate(self, request: GenerationRequest) -> AsyncIterator[Part]:
        """Send the request and yield its parts (see `Adapter.generate`).

        An empty 200 (whole or streamed) is a `StreamError`: a server that failed
        without saying so. Repeated warnings are given once.
        """

        async def send(warnings: list[str]) -> httpx.Response:
            response, fell_back = await self.open_response(request)
            if fell_back:
                warnings.append(f"{self.instance_id}: {_FALLBACK_WARNING}")
            return response

        return self.chat_parts(
            request,
            send,
            prepare=_ChunkState(self.quirks).prepare,
            assembler=PartAssembler(dedupe_warnings=True),
            empty_ok=False,
        )

    def chunk_usage(self, chunk: dict[str, Any]) -> dict[str, Any] | None:
        """Usage from the quirks' `usage_paths`, completed from llama.cpp `timings`."""
        pid = self.instance_id
        usage: dict[str, Any] | None = None
        for path in self.quirks.usage_paths:
            found = _walk(chunk, path)
            if found is not None:
                usage = as_dict(found, pid, path)
                break
        if not self.quirks.timings:
            return usage
        timings = opt_dict(chunk.get("timings"), pid, "timings")
        if timings is None:
            return usage
        cache_n = opt_int(timings.get("cache_n"), pid, "timings.cache_n")
        if usage is not None:
            details = opt_dict(usage.get("prompt_tokens_details"), pid, "usage.details") or {}
            if cache_n is None or details.get("cached_tokens") is not None:
                return usage
            return {**usage, "prompt_tokens_details": {**details, "cached_tokens": cache_n}}
        return _usage_from_timings(timings, cache_n, pid)

    def parts_from_chunk(self, chunk: Any, key: str) -> Iterator[Part]:
        """The OpenAI parts of a chunk, then what the quirks read beside them."""
        yield from super().parts_from_chunk(chunk, key)
        pid = self.instance_id
        chunk = as_dict(chunk, pid, "chunk")
        if self.quirks.timings:
            timings = opt_dict(chunk.get("timings"), pid, "timings")
            if timings:
                phases = _phases_from_timings(timings)
                if phases:
                    yield PhasesPart(phases)
        if self.quirks.content_filter_warnings:
            for text in _filter_notes(chunk, key, pid):
                yield WarningPart(f"{pid}: {text}")


class _LlamaCppServer(OpenAICompatAdapter):
    """llama.cpp's `llama-server`: discovery reads its `meta` object."""

    async def models(self) -> Sequence[DiscoveredModel]:
        """`GET /models`, reading llama.cpp's `meta` object.

        The context window is the one the server loaded (`meta.n_ctx`, what a request
        must fit), falling back to the model's training context (`n_ctx_train`) on
        builds that do not report it; the training context, parameter count, file size
        and quantization (`ftype`) go in `facts`.
        """
        found: list[DiscoveredModel] = []
        for model in await super().models():
            meta = model.raw.get("meta")
            if not isinstance(meta, dict):
                found.append(model)
                continue
            facts = dict(model.facts)
            for key in ("n_ctx_train", "n_params", "size", "n_vocab", "ftype"):
                value = meta.get(key)
                if isinstance(value, int | str) and not isinstance(value, bool):
                    facts[key] = value
            n_ctx = meta.get("n_ctx")
            window = n_ctx if isinstance(n_ctx, int) and n_ctx > 0 else model.context_window
            found.append(dataclasses.replace(model, context_window=window, facts=facts))
        return found


@dataclass(frozen=True, slots=True)
class Preset:
    """One OpenAI-compatible preset: a provider id that is `OpenAICompatAdapter` with
    its engine's quirks, default URL and profile. Each preset is one entry of `PRESETS`;
    its adapter class (`preset_adapter`), registry id and aliases, engine quirks,
    conformance dialect, structured-output defaults and local engines all come from it.

    Attributes:
        default_base_url: The server's OpenAI-compatible root when settings give none.
        profile: The adapter class's `AdapterProfile` (aliases, dialect, structured
            defaults, local engines; the OpenAI usage convention unless it says).
        quirks: The engine's quirks (`engine` is set to the preset id).
        doc: The adapter class's docstring.
        base: The class the preset's adapter class extends (for presets that add
            behaviour, such as llama.cpp's discovery).
        name: The adapter class's name (by default made from the id).
    """

    default_base_url: str
    profile: AdapterProfile
    quirks: Quirks = _GENERIC
    doc: str = ""
    base: type[OpenAICompatAdapter] = OpenAICompatAdapter
    name: str = ""

    def engine_quirks(self, provider_id: str) -> Quirks:
        """The quirks for this preset's engine, named after the preset (made once)."""
        found = _PRESET_QUIRKS.get((provider_id, self))
        if found is None:
            found = dataclasses.replace(self.quirks, engine=provider_id)
            _PRESET_QUIRKS[(provider_id, self)] = found
        return found


_PRESET_QUIRKS: dict[tuple[str, Preset], Quirks] = {}


_LOCAL_STRUCTURED = ModelCapabilities(json_mode=True, json_schema=True, grammar=True)

PRESETS: Mapping[str, Preset] = MappingProxyType(
    {
        "llama.cpp": Preset(
            "http://127.0.0.1:8080/v1",
            AdapterProfile(
                aliases=("llamacpp", "llama-cpp"),
                conformance_dialect="llama.cpp",
                structured=_LOCAL_STRUCTURED,
                local_engines=("llama.cpp",),
            ),
            # `timings` on the last chunk; usage only with include_usage (older builds
            # put it in the finish chunk unasked); JSON Schema via the top-level
            # `json_schema` field, enforced as a grammar.
            dataclasses.replace(_GENERIC, timings=True, structured_output="json_schema"),
            doc="""llama.cpp's `llama-server` (OpenAI-compatible, default port 8080).

    `timings` become `timing.phases` (`prefill_ms`, `decode_ms`) and, when the stream
    carries no usage object, the usage; JSON Schema output goes in the top-level
    `json_schema` field (the server enforces it with a grammar). A raw GBNF grammar can
    be sent with `provider_options={"llama.cpp": {"grammar": "..."}}`. Discovery reads
    the server's `meta` object (loaded context window, training context, size).
    """,
            base=_LlamaCppServer,
            name="LlamaCppAdapter",
        ),
        "vllm": Preset(
            "http://127.0.0.1:8000/v1",
            AdapterProfile(
                conformance_dialect="openai-chat",
                structured=_LOCAL_STRUCTURED,
                local_engines=("vllm",),
            ),
            # reasoning in `reasoning_content` (older) or `reasoning` (newer);
            # response_format works on every version (guided_json / structured_outputs
            # are selectable with the structured_output quirk).
            doc="vLLM's OpenAI-compatible server (default port 8000).",
            name="VLLMAdapter",
        ),
        "lmstudio": Preset(
            "http://127.0.0.1:1234/v1",
            AdapterProfile(
                aliases=("lm-studio",),
                conformance_dialect="openai-chat",
                structured=ModelCapabilities(json_schema=True),
                local_engines=("llama.cpp",),
            ),
            # structured output only as json_schema (no plain JSON mode).
            dataclasses.replace(_GENERIC, json_object=False),
            doc="LM Studio's local server (default port 1234).",
            name="LMStudioAdapter",
        ),
    }
)
"""The OpenAI-compatible presets, by provider id. Adding a preset is adding an entry."""

ENGINE_QUIRKS: Mapping[str, Quirks] = MappingProxyType(_engines())
"""Known engines' quirks, by engine id (`ProviderSettings.options["engine"]`): the
presets' engines and the other engines this adapter knows."""

_PRESET_CLASSES: dict[tuple[str, Preset], type[OpenAICompatAdapter]] = {}


def preset_adapter(provider_id: str) -> type[OpenAICompatAdapter]:
    """The adapter class of one `PRESETS` entry (made once per entry).

    Raises:
        KeyError: If `provider_id` is not a preset.
    """
    preset = PRESETS[provider_id]
    cls = _PRESET_CLASSES.get((provider_id, preset))
    if cls is None:
        name = preset.name or "".join(c for c in provider_id.title() if c.isalnum()) + "Adapter"
        attrs: dict[str, Any] = {
            "__module__": __name__,
            "__doc__": preset.doc or f"The {provider_id} OpenAI-compatible preset.",
            "provider_id": provider_id,
            "default_base_url": preset.default_base_url,
            "default_engine": provider_id,
            "profile": preset.profile,
        }
        cls = type(name, (preset.base,), attrs)
        _PRESET_CLASSES[(provider_id, preset)] = cls
    return cls


def preset_adapters() -> tuple[type[OpenAICompatAdapter], ...]:
    """Every preset's adapter class, in `PRESETS` order (the registry's built-ins)."""
    return tuple(preset_adapter(pid) for pid in PRESETS)


LlamaCppAdapter = preset_adapter("llama.cpp")
"""llama.cpp's `llama-server` preset (see `PRESETS`)."""
VLLMAdapter = preset_adapter("vllm")
"""vLLM's preset (see `PRESETS`)."""
LMStudioAdapter = preset_adapter("lmstudio")
"""LM Studio's preset (see `PRESETS`)."""


# --- helpers -------------------------------------------------------------------------


def _rejects_stream_options(exc: ProviderError) -> bool:
    if exc.http_status not in _STREAM_OPTIONS_REJECTED:
        return False
    said = exc.message.lower()
    return "stream_options" in said or "include_usage" in said


def _walk(chunk: dict[str, Any], path: str) -> Any:
    node: Any = chunk
    for name in path.split("."):
        if not isinstance(node, dict):
            return None
        node = node.get(name)
    return node


def _usage_from_timings(
    timings: dict[str, Any], cache_n: int | None, pid: str
) -> dict[str, Any] | None:
    prompt_n = opt_int(timings.get("prompt_n"), pid, "timings.prompt_n")
    predicted_n = opt_int(timings.get("predicted_n"), pid, "timings.predicted_n")
    if prompt_n is None and predicted_n is None and cache_n is None:
        return None
    usage: dict[str, Any] = {}
    if prompt_n is not None:
        # prompt_n counts the prompt tokens evaluated; cache_n those reused from the
        # KV cache. Together they are the prompt.
        usage["prompt_tokens"] = prompt_n + (cache_n or 0)
    if predicted_n is not None:
        usage["completion_tokens"] = predicted_n
    if cache_n is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": cache_n}
    return usage


_PHASES = (("prompt_ms", "prefill_ms"), ("predicted_ms", "decode_ms"))


def _phases_from_timings(timings: dict[str, Any]) -> dict[str, float]:
    phases: dict[str, float] = {}
    for wire, phase in _PHASES:
        value = timings.get(wire)
        if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
            phases[phase] = float(value)
    return phases


def _filter_notes(chunk: dict[str, Any], key: str, pid: str) -> Iterator[str]:
    """Azure content-filter annotations marked `filtered`, as readable notes."""
    for entry in as_list(chunk.get("prompt_filter_results"), pid, "prompt_filter_results"):
        entry = as_dict(entry, pid, "prompt_filter_results[]")
        results = opt_dict(entry.get("content_filter_results"), pid, "content_filter_results")
        yield from _filtered(results or {}, "prompt")
    for choice in as_list(chunk.get("choices"), pid, "choices"):
        choice = as_dict(choice, pid, "choices[]")
        if choice.get("index", 0) != 0:
            continue
        results = opt_dict(choice.get("content_filter_results"), pid, "content_filter_results")
        yield from _filtered(results or {}, "completion")


def _filtered(results: dict[str, Any], where: str) -> Iterator[str]:
    for category in sorted(results):
        verdict = results[category]
        if isinstance(verdict, dict) and verdict.get("filtered") is True:
            severity = verdict.get("severity")
            extra = f" (severity {severity})" if isinstance(severity, str) else ""
            yield f"content filter flagged the {where} for {category}{extra}"


class _ChunkState:
    """Per-response state: tool-call slot correlation (by id when a server sends no
    `index`) and header dedupe, applied to each chunk before the shared reader."""

    def __init__(self, quirks: Quirks) -> None:
        self.quirks = quirks
        self.slot_by_id: dict[str, int] = {}
        self.headers: dict[int, tuple[str | None, str | None]] = {}
        self.last_slot: int | None = None

    def prepare(self, chunk: Any, key: str) -> Any:
        """`chunk` with its tool-call fragments normalized (a copy; never mutated)."""
        q = self.quirks
        if not isinstance(chunk, dict) or not (
            q.dedupe_tool_call_headers or q.tool_calls_by_id or q.legacy_function_call
        ):
            return chunk
        choices = chunk.get("choices")
        if not isinstance(choices, list):
            return chunk
        changed = False
        out_choices: list[Any] = []
        for choice in choices:
            new = self._choice(choice, key)
            changed = changed or new is not choice
            out_choices.append(new)
        return {**chunk, "choices": out_choices} if changed else chunk

    def _choice(self, choice: Any, key: str) -> Any:
        if not isinstance(choice, dict) or choice.get("index", 0) != 0:
            return choice
        delta = choice.get(key)
        if not isinstance(delta, dict):
            return choice
        calls = delta.get("tool_calls")
        legacy = delta.get("function_call")
        if not calls and self.quirks.legacy_function_call and isinstance(legacy, dict):
            calls = [{"index": 0, "function": legacy}]
        if not isinstance(calls, list) or not calls:
            return choice
        # A whole message lists complete calls, one per entry, in slot order; a delta's
        # entries may continue calls begun in earlier chunks.
        whole = key != "delta"
        lone = not whole and len(calls) == 1
        fixed = [self._call(call, position, lone, whole) for position, call in enumerate(calls)]
        return {**choice, key: {**delta, "tool_calls": fixed}}

    def _call(self, call: Any, position: int, lone: bool, whole: bool) -> Any:
        if not isinstance(call, dict):
            return call  # the shared reader reports the malformed entry
        q = self.quirks
        call_id = call.get("id") if isinstance(call.get("id"), str) and call.get("id") else None
        fn = call.get("function")
        name = fn.get("name") if isinstance(fn, dict) and isinstance(fn.get("name"), str) else None
        index = call.get("index")
        if index is None:  # other non-integers are the shared reader's to reject
            by_id = q.tool_calls_by_id and not whole
            index = self._slot_for(call_id, position, lone) if by_id else position
        if call_id is not None:
            self.slot_by_id.setdefault(call_id, index)
        self.last_slot = index
        out: dict[str, Any] = {**call, "index": index}
        if q.dedupe_tool_call_headers:
            seen_id, seen_name = self.headers.get(index, (None, None))
            if call_id is not None and call_id == seen_id:
                out.pop("id", None)
            if name is not None and name == seen_name and isinstance(fn, dict):
                out["function"] = {k: v for k, v in fn.items() if k != "name"}
            self.headers[index] = (seen_id or call_id, seen_name or name)
        return out

    def _slot_for(self, call_id: str | None, position: int, lone: bool) -> int:
        """The slot of a fragment that carries no `index`.

        A known id keeps its slot; a new id opens the next free one; a fragment without
        an id continues the last slot when it is alone in its delta (argument text
        streaming on), and otherwise goes by its position in the list.
        """
        if call_id is not None:
            known = self.slot_by_id.get(call_id)
            if known is not None:
                return known
            used = set(self.slot_by_id.values()) | set(self.headers)
            return max(used) + 1 if used else position
        if lone and self.last_slot is not None:
            return self.last_slot
        return position
