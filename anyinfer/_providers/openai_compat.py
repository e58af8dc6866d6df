"""OpenAI-compatible servers: local engines and gateways that speak Chat Completions.

Many servers speak "the OpenAI protocol" and each differs from it a little: where usage
goes, which field carries reasoning, how constrained output is asked for, whether
`stream_options` is accepted at all. Those differences are data here, not branches: a
frozen `Quirks` record per engine (`ENGINE_QUIRKS`), consulted by one adapter,
`OpenAICompatAdapter`. The presets (`llama.cpp`, `vllm`, `lmstudio`, `groq`, `mistral`,
`openrouter`, ... 78 of them) are the same adapter with their engine's quirks, default
URL, key variable and profile: each is one entry of `PRESETS`, from which its class,
registry id, aliases, key rule, engine quirks, conformance dialect, structured-output
defaults and local engines all come. `docs/providers/quirks.md` has the table, with how
well each entry is sourced.

Embeddings: each entry records whether its service serves OpenAI's `POST /embeddings`
at the preset's base URL (`Preset.embeddings`: documented, documented absent, or
unknown) and where that comes from. Only a documented preset's class embeds; the others
are refused before anything is sent (`embeddings_refusal`, which the embed runner
applies), unless an instance opts in with `options={"embeddings": True}`.

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
from dataclasses import fields
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar, Literal, get_args

import httpx

from .._adapters.base import POOL_OPTIONS, DiscoveredModel, PartAssembler
from .._adapters.limits import LIMIT_OPTIONS
from .._adapters.profile import AdapterProfile
from .._client.instance import api_key_env as instance_key_env
from .._client.instance import base_url_env, resolve_base_url
from .._errors import ConfigError, ProviderError
from .._knowledge.capabilities import ModelCapabilities
from .._request import GenerationRequest
from .._settings import ProviderSettings
from .._stream.parts import Part, PhasesPart, WarningPart
from .._values import value_class
from ._wire import as_dict, as_list, opt_dict, opt_int
from .openai_chat import OpenAIChatAdapter

if TYPE_CHECKING:
    from .._embed._types import EmbedReply, EmbedRequest

__all__ = [
    "ENGINE_QUIRKS",
    "LMStudioAdapter",
    "LlamaCppAdapter",
    "OpenAICompatAdapter",
    "PRESETS",
    "Preset",
    "PresetSummary",
    "Quirks",
    "StructuredOutput",
    "VLLMAdapter",
    "configured_base_url",
    "preset_adapter",
    "preset_adapters",
    "preset_summaries",
    "quirks_for",
    "reading_behaviour",
]

StructuredOutput = Literal[
    "response_format",
    "json_schema",
    "json_object_schema",
    "guided_json",
    "structured_outputs",
    "tgi_grammar",
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
- `tgi_grammar`: Text Generation Inference's tagged `response_format: {"type": "json",
  "value": schema}` (the schema under `value`, not OpenAI's `json_schema` key).
"""

_STRUCTURED: tuple[str, ...] = get_args(StructuredOutput)

ReasoningSwitch = Literal[
    "reasoning_effort", "thinking_type", "enable_thinking", "reasoning_object"
]
"""How an engine is told to reason or not (the request's `reasoning` effort).

- `reasoning_effort`: OpenAI's `reasoning_effort` field carries the effort, `none`
  included.
- `thinking_type`: `thinking: {"type": "enabled" | "disabled"}` switches reasoning on or
  off (`none` is `disabled`), as DeepSeek, Moonshot (Kimi) and Zhipu / Z.ai document;
  efforts other than `none` also go in `reasoning_effort`.
- `enable_thinking`: `enable_thinking: true | false` (`none` is `false`), DashScope's
  switch for its hybrid-thinking models; efforts other than `none` also go in
  `reasoning_effort`.
- `reasoning_object`: OpenRouter's unified `reasoning: {"effort": ...}` (its documented
  values include `none`) instead of `reasoning_effort`.

The `reasoning_effort` field (and the `reasoning` object) follow `send_reasoning_effort`;
the on/off switches are sent whenever a reasoning effort is asked for.
"""

_REASONING_SWITCHES: tuple[str, ...] = get_args(ReasoningSwitch)
_STREAM_OPTIONS_REJECTED = (400, 422)
_FALLBACK_WARNING = (
    "the server rejected stream_options; retried without it (usage arrives only if the "
    "server reports it unasked), and later requests on this instance skip it"
)
_EFFORT_WARNING = (
    "the model rejected reasoning_effort; retried without it, and later requests for "
    "this model on this instance skip it"
)


@value_class
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
        reasoning_switch: How reasoning is switched on and off (see `ReasoningSwitch`):
            OpenAI's `reasoning_effort`, a `thinking.type`, `enable_thinking`, or
            OpenRouter's `reasoning` object.
        dedupe_tool_call_headers: Drop a tool call's `id` and `name` from fragments that
            repeat them (llama-cpp-python repeats both on every fragment), so each slot
            announces them once, as OpenAI does.
        tool_calls_by_id: Correlate tool-call fragments that carry no `index` by their
            `id` (a new id opens a new slot; a fragment with neither follows the last).
        legacy_function_call: Read a delta's legacy `function_call` as tool slot 0 when
            it has no `tool_calls`.
        content_filter_warnings: Turn Azure's `content_filter_results` /
            `prompt_filter_results` entries marked `filtered` into result warnings.
        seed_field: Request field for `Sampling.seed` (Mistral's is `random_seed`).
        tool_choice_required: What `tool_choice="required"` is sent as (Mistral's is
            `"any"`).
        drop_fields: Top-level request fields never sent (the server answers 400 to
            them); a sampling control dropped this way becomes a result warning.
            `provider_options` are merged after, so a field set there is still sent.
        retry_without_reasoning_effort: When the server answers 400/422 naming
            `reasoning_effort`, retry the attempt once without it, and leave it out of
            later requests for the same model on this adapter instance (xAI models
            that take no effort setting).
        key_header: The header the API key goes in: `authorization` sends
            `Bearer <key>`; any other name sends the key itself.
        embed_encodings: The `encoding_format` values the server's `/embeddings`
            takes, in preference order. The call's `encoding` is sent when listed, else
            the first (the vectors are the same either way); empty sends no
            `encoding_format`, and the server answers floats (OpenAI's default).
        embed_dimensions_field: The request field for `embed(dimensions=...)`
            (`output_dimension` for Mistral); empty when the server takes none, so a
            call asking for dimensions is refused before anything is sent.
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
    reasoning_switch: ReasoningSwitch = "reasoning_effort"
    dedupe_tool_call_headers: bool = True
    tool_calls_by_id: bool = True
    legacy_function_call: bool = True
    content_filter_warnings: bool = False
    seed_field: str = "seed"
    tool_choice_required: str = "required"
    drop_fields: tuple[str, ...] = ()
    retry_without_reasoning_effort: bool = False
    key_header: str = "authorization"
    embed_encodings: tuple[str, ...] = ("base64", "float")
    embed_dimensions_field: str = "dimensions"

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
    if name == "reasoning_switch":
        if value not in _REASONING_SWITCHES:
            raise bad("one of " + ", ".join(_REASONING_SWITCHES))
        return value
    if name == "embed_encodings":
        if isinstance(value, str) or not all(v in ("base64", "float") for v in value):
            raise bad("a list of 'base64' and 'float' (empty: send no encoding_format)")
        return tuple(value)
    if name == "embed_dimensions_field":
        if not isinstance(value, str):
            raise bad("a string (empty: the server takes no dimensions)")
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

    `ProviderSettings.options` keys: `engine` (a key of `ENGINE_QUIRKS`), `quirks`
    (field overrides; see `Quirks`) and `embeddings` (`True` or `False`: whether this
    instance embeds, over the preset's documented fact; see `embeddings_refusal`).

    Attributes:
        quirks: The quirks in force for this instance.
    """

    provider_id: ClassVar[str] = "openai-compat"
    profile: ClassVar[AdapterProfile] = AdapterProfile(
        conformance_dialect="openai-chat", local_engines=("llama.cpp", "vllm")
    )
    default_base_url: ClassVar[str | None] = None
    api_key_env: ClassVar[str | None] = None
    #: Whether the adapter refuses to build without a key (hosted services, and local
    #: servers that insist on one).
    api_key_required: ClassVar[bool] = False
    #: Shown when no base URL is configured: the endpoint's shape, for services whose
    #: URL holds an account or workspace (`{account_id}`).
    base_url_template: ClassVar[str] = "http://127.0.0.1:8080/v1"
    #: The engine whose quirks apply unless `options["engine"]` says otherwise.
    default_engine: ClassVar[str] = "openai-compat"
    #: The `PRESETS` entry a preset's class was made from (`None` here).
    preset: ClassVar[Preset | None] = None
    #: `ProviderSettings.options` keys this adapter understands.
    option_keys: ClassVar[frozenset[str]] = frozenset({"engine", "quirks", "embeddings"})

    def __init__(self, settings: ProviderSettings) -> None:
        pid = settings.instance_id
        if not configured_base_url(settings, self.default_base_url):
            raise ConfigError(
                f"provider {pid!r} ({self.provider_id}) needs base_url (or "
                f"{base_url_env(pid)}): the server's OpenAI-compatible root, e.g. "
                f"{self.base_url_template!r}",
                provider=pid,
            )
        if self.api_key_required and not settings.api_key:
            names = [instance_key_env(pid)] + ([self.api_key_env] if self.api_key_env else [])
            raise ConfigError(
                f"provider {pid!r} ({self.provider_id}) needs an API key: set api_key, or "
                f"the environment variable {' or '.join(names)}",
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
        self.embeddings_refusal(settings)  # an ill-typed option is refused here
        super().__init__(settings)
        self.max_tokens_field = self.quirks.max_tokens_field
        self.stream_usage = self.quirks.stream_usage
        self.reasoning_fields = self.quirks.reasoning_fields
        #: Models that rejected `reasoning_effort` (`retry_without_reasoning_effort`).
        self.no_reasoning_effort: set[str] = set()

    def default_headers(self) -> dict[str, str]:
        """The configured headers, with the key in the quirks' `key_header`."""
        headers = super().default_headers()
        header = self.quirks.key_header.lower()
        if header != "authorization" and self.settings.api_key:
            if headers.get("authorization") == f"Bearer {self.settings.api_key}":
                del headers["authorization"]
            headers.setdefault(header, self.settings.api_key)
        return headers

    def engine_for(self, settings: ProviderSettings) -> str:
        """The default engine for these settings (before `options["engine"]`)."""
        return self.default_engine

    # --- embeddings ----------------------------------------------------------------

    @classmethod
    def serves_embeddings(cls) -> bool:
        """Whether this class embeds: a preset's documented fact (`Preset.embeddings`
        is `True`); the generic `openai-compat` adapter (no preset) does.

        One instance may say otherwise with `options["embeddings"]`; the embed runner
        asks `embeddings_refusal`, which applies both."""
        if cls.preset is not None and cls.preset.embeddings is not True:
            return False
        return super().serves_embeddings()

    @classmethod
    def embeddings_refusal(cls, settings: ProviderSettings) -> str | None:
        """Why an instance configured by `settings` does not embed, or `None` when it
        does (the embed runner asks every target before anything is sent).

        The class's answer is its documented fact (`serves_embeddings`; for a preset,
        `Preset.embeddings is True`). An instance may override it with
        `ProviderSettings.options["embeddings"]`: `True` opts in (a preset whose route
        is unknown, or documented absent, when your deployment does serve OpenAI's
        `/embeddings`), `False` opts out. A preset whose fact is unknown (`None`) is
        refused rather than sent to a route that may not exist: the refusal says so and
        names the option.

        Raises:
            ConfigError: If `options["embeddings"]` is set to anything but `True` or
                `False` (`None` means "the class's answer").
        """
        name = settings.instance_id
        if _EMBEDDINGS_OPTION in cls.option_keys:
            chosen = settings.options.get(_EMBEDDINGS_OPTION)
            if chosen is not None and type(chosen) is not bool:
                raise ConfigError(
                    f"provider {name!r} ({cls.provider_id}): options['embeddings'] must be "
                    f"True or False, got {chosen!r}",
                    provider=name,
                )
            if chosen is True:
                return None
            if chosen is False:
                return (
                    "embeddings are turned off for this instance (options['embeddings'] is False)"
                )
            preset = cls.preset
            if preset is not None and preset.embeddings is not True:
                return _preset_refusal(cls, preset, settings)
        return super().embeddings_refusal(settings)

    async def embed(self, request: EmbedRequest) -> EmbedReply:
        """`POST /embeddings`, once `embeddings_refusal` allows this instance (a
        refused instance raises before anything is sent).

        Raises:
            ConfigError: If this instance does not embed (see `embeddings_refusal`).
        """
        reason = self.embeddings_refusal(self.settings)
        if reason is not None:
            raise ConfigError(f"{self.instance_id}: {reason}", provider=self.instance_id)
        from .._embed._types import EmbedEncoding
        from .._embed._wire import embed_body, openai_embed

        quirks, path = self.quirks, self.embeddings_path or "/embeddings"
        field = quirks.embed_dimensions_field
        if request.dimensions is not None and not field:
            raise ConfigError(
                f"{self.instance_id}: its /embeddings takes no dimensions (quirk "
                "embed_dimensions_field is empty); leave dimensions out",
                provider=self.instance_id,
            )
        accepted = quirks.embed_encodings
        if accepted and request.encoding not in accepted:
            sent: EmbedEncoding = "float" if accepted[0] == "float" else "base64"
            request = dataclasses.replace(request, encoding=sent)
        body = embed_body(request, "input", bool(accepted), dimensions_key=field or "dimensions")
        return await openai_embed(self, request, path, body=body)

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
        wanted = request.reasoning
        switch = q.reasoning_switch
        effort_field = (
            q.send_reasoning_effort
            and request.model not in self.no_reasoning_effort
            and switch != "reasoning_object"
            and (switch == "reasoning_effort" or wanted != "none")
        )
        plain = dataclasses.replace(
            request,
            response_format=None,
            provider_options={},
            reasoning=wanted if effort_field else None,
        )
        body = super().build_body(plain)
        if wanted is not None:
            if switch == "thinking_type":
                body["thinking"] = {"type": "disabled" if wanted == "none" else "enabled"}
            elif switch == "enable_thinking":
                body["enable_thinking"] = wanted != "none"
            elif switch == "reasoning_object" and q.send_reasoning_effort:
                body["reasoning"] = {"effort": wanted}
        if request.response_format is not None:
            self.apply_structured_output(body, request.response_format)
        if q.seed_field != "seed" and "seed" in body:
            body[q.seed_field] = body.pop("seed")
        if q.tool_choice_required != "required" and body.get("tool_choice") == "required":
            body["tool_choice"] = q.tool_choice_required
        for name in q.drop_fields:
            body.pop(name, None)
        body.update(request.provider_options)
        return body

    def dropped_controls(self, request: GenerationRequest) -> list[str]:
        """The sampling controls set on `request` that `drop_fields` keeps off the wire."""
        q = self.quirks
        if not q.drop_fields:
            return []
        controls = ("temperature", "top_p", "stop", "presence_penalty", "frequency_penalty")
        names = {c: c for c in controls}
        names.update(max_output_tokens=q.max_tokens_field, seed=q.seed_field)
        sent, _ = request.sampling.wire_fields(names)
        return [
            name for name in sent if name in q.drop_fields and name not in request.provider_options
        ]

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
        elif how == "tgi_grammar":
            body["response_format"] = {"type": "json", "value": schema}
        else:  # structured_outputs
            body["structured_outputs"] = {"json": schema} if is_schema else {"json_object": True}

    async def open_response(self, request: GenerationRequest) -> tuple[httpx.Response, bool]:
        """Send a generation request, falling back once when `stream_options` is refused.

        Returns:
            The open response, and whether the `stream_options` fallback was taken.
        """
        response, fallbacks = await self.open_with_fallbacks(request)
        return response, _FALLBACK_WARNING in fallbacks

    async def open_with_fallbacks(
        self, request: GenerationRequest
    ) -> tuple[httpx.Response, list[str]]:
        """Send a generation request, retrying once without a field the server refused.

        A 400/422 naming `stream_options` (`retry_without_stream_options`) or
        `reasoning_effort` (`retry_without_reasoning_effort`) is retried without that
        field, inside the attempt; the field stays off later requests on this instance.

        Returns:
            The open response, and a warning per fallback taken.
        """
        body = self.build_body(request)
        path, params = self.chat_path(request), self.chat_params()
        headers = self.chat_headers(request)
        q = self.quirks
        try:
            response = await self.send(
                "POST", path, json_body=body, params=params, headers=headers, request=request
            )
        except ProviderError as exc:
            if (
                request.stream
                and "stream_options" in body
                and q.retry_without_stream_options
                and _rejects_stream_options(exc)
            ):
                self.stream_usage = False  # remembered for the life of this adapter instance
                del body["stream_options"]
                taken = _FALLBACK_WARNING
            elif (
                "reasoning_effort" in body
                and q.retry_without_reasoning_effort
                and "reasoning_effort" not in request.provider_options
                and _rejects_reasoning_effort(exc)
            ):
                self.no_reasoning_effort.add(request.model)
                del body["reasoning_effort"]
                taken = _EFFORT_WARNING
            else:
                raise
        else:
            return response, []
        response = await self.send(
            "POST", path, json_body=body, params=params, headers=headers, request=request
        )
        return response, [taken]

    # --- response ------------------------------------------------------------------

    def generate(self, request: GenerationRequest) -> AsyncIterator[Part]:
        """Send the request and yield its parts (see `Adapter.generate`).

        An empty 200 (whole or streamed) is a `StreamError`: a server that failed
        without saying so. Repeated warnings are given once.
        """

        async def send(warnings: list[str]) -> httpx.Response:
            response, fallbacks = await self.open_with_fallbacks(request)
            warnings.extend(f"{self.instance_id}: {text}" for text in fallbacks)
            dropped = self.dropped_controls(request)
            if dropped:
                warnings.append(
                    f"{self.instance_id}: {', '.join(dropped)} not sent: "
                    f"{self.quirks.engine} rejects {'it' if len(dropped) == 1 else 'them'}"
                )
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


@value_class
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
        title: The service or engine, for people (`"Groq"`).
        api_key_env: The provider's own key variable (`GROQ_API_KEY`), consulted after
            `ANYINFER_<INSTANCE>_API_KEY`; `None` for none (local engines: a local
            port never gets a hosted service's key).
        key_required: Whether the adapter refuses to build without a key.
        base_url_template: The endpoint's shape when it holds an account or workspace
            (`default_base_url` is then `None` and `base_url` must be given).
        evidence: How well the entry is sourced, `base/key/quirks`, each `D`
            (the provider's own docs or source), `C` (two or more independent third
            parties agree), `S` (one third party), `R` (AnyInfer's own recordings of
            real traffic) or `U` (not found: generic defaults, unverified).
        source: Where the facts come from, briefly.
        notes: What else is known (one line), including single-source caveats.
        embeddings: Whether the provider's OpenAI-compatible API serves
            `POST {base_url}/embeddings` in OpenAI's shape: `True` (documented),
            `False` (documented absent, or served in another shape or under another
            base) or `None` (not found either way). Only `True` makes the class embed
            (`serves_embeddings`); an instance may opt in or out with
            `ProviderSettings.options["embeddings"]` (see `embeddings_refusal`).
        embeddings_source: Where the `embeddings` fact comes from, graded as
            `evidence` is (`D`, `C`, `S`, or `U` for not found), with any caveat.
        embed_max_batch: The most inputs one embeddings request may carry, when the
            provider documents a limit (the class's `embed_max_batch`); `None` keeps
            OpenAI's 2048.
    """

    default_base_url: str | None
    profile: AdapterProfile
    quirks: Quirks = _GENERIC
    doc: str = ""
    base: type[OpenAICompatAdapter] = OpenAICompatAdapter
    name: str = ""
    title: str = ""
    api_key_env: str | None = None
    key_required: bool = False
    base_url_template: str = ""
    evidence: str = ""
    source: str = ""
    notes: str = ""
    embeddings: bool | None = None
    embeddings_source: str = ""
    embed_max_batch: int | None = None

    def engine_quirks(self, provider_id: str) -> Quirks:
        """The quirks for this preset's engine, named after the preset (made once)."""
        found = _PRESET_QUIRKS.get((provider_id, self))
        if found is None:
            found = dataclasses.replace(self.quirks, engine=provider_id)
            _PRESET_QUIRKS[(provider_id, self)] = found
        return found


_PRESET_QUIRKS: dict[tuple[str, Preset], Quirks] = {}


_LOCAL_STRUCTURED = ModelCapabilities(json_mode=True, json_schema=True, grammar=True)


def _hosted(
    title: str,
    url: str | None,
    key_env: str | None,
    evidence: str,
    source: str,
    notes: str = "",
    *,
    aliases: tuple[str, ...] = (),
    template: str = "",
    key_required: bool = True,
    structured: ModelCapabilities | None = None,
    dialect: str = "openai-chat",
    local_engines: tuple[str, ...] = (),
    base: type[OpenAICompatAdapter] = OpenAICompatAdapter,
    doc: str = "",
    name: str = "",
    embeddings: bool | None,
    embeddings_source: str,
    embed_max_batch: int | None = None,
    **quirks: Any,
) -> Preset:
    """One hosted service's entry: OpenAI Chat at `url`, a key in `key_env`.

    `embeddings` and `embeddings_source` have no default: every entry records whether
    the service serves `/embeddings` (see `Preset.embeddings`)."""
    profile = AdapterProfile(
        aliases=aliases,
        conformance_dialect=dialect,
        structured=structured,
        local_engines=local_engines,
    )
    return Preset(
        url,
        profile,
        dataclasses.replace(_GENERIC, **quirks) if quirks else _GENERIC,
        doc=doc,
        base=base,
        name=name,
        title=title,
        api_key_env=key_env,
        key_required=key_required,
        base_url_template=template,
        evidence=evidence,
        source=source,
        notes=notes,
        embeddings=embeddings,
        embeddings_source=embeddings_source,
        embed_max_batch=embed_max_batch,
    )


def _local(
    title: str,
    url: str,
    evidence: str,
    source: str,
    notes: str = "",
    *,
    key_required: bool = False,
    **entry: Any,
) -> Preset:
    """One local engine's entry: a `_hosted` one with no provider key variable (a key
    only from settings or `ANYINFER_<INSTANCE>_API_KEY`), no URL template and no key
    required unless `key_required`; `entry` (`aliases`, `structured`, `dialect`,
    `local_engines`, `base`, `doc`, `name`, `embeddings`, the quirks) as `_hosted`'s."""
    return _hosted(title, url, None, evidence, source, notes, key_required=key_required, **entry)


# Mistral's differences from OpenAI Chat: usage in the finish chunk unasked (recorded);
# `random_seed` for the seed (corroborated); `"any"` for a required tool call (one
# source: vercel/ai's Mistral provider).
_MISTRAL: dict[str, Any] = {
    "stream_usage": False,
    "seed_field": "random_seed",
    "tool_choice_required": "any",
    "embed_dimensions_field": "output_dimension",
}
_LLAMA_CPP: dict[str, Any] = {"timings": True, "structured_output": "json_schema"}

PRESETS: Mapping[str, Preset] = MappingProxyType(
    {
        "llama.cpp": _local(
            "llama.cpp llama-server",
            "http://127.0.0.1:8080/v1",
            "D/-/D",
            "ggml-org/llama.cpp tools/server",
            "quirks as established before the preset research (not re-checked by it)",
            aliases=("llamacpp", "llama-cpp"),
            dialect="llama.cpp",
            structured=_LOCAL_STRUCTURED,
            local_engines=("llama.cpp",),
            # `timings` on the last chunk; usage only with include_usage (older builds
            # put it in the finish chunk unasked); JSON Schema via the top-level
            # `json_schema` field, enforced as a grammar.
            **_LLAMA_CPP,
            doc="""llama.cpp's `llama-server` (OpenAI-compatible, default port 8080).

    `timings` become `timing.phases` (`prefill_ms`, `decode_ms`) and, when the stream
    carries no usage object, the usage; JSON Schema output goes in the top-level
    `json_schema` field (the server enforces it with a grammar). A raw GBNF grammar can
    be sent with `provider_options={"llama.cpp": {"grammar": "..."}}`. Discovery reads
    the server's `meta` object (loaded context window, training context, size).
    """,
            base=_LlamaCppServer,
            name="LlamaCppAdapter",
            embeddings=True,
            embeddings_source=(
                "D: llama.cpp tools/server README: POST /v1/embeddings (start with --embeddings)"
            ),
        ),
        "vllm": _local(
            "vLLM",
            "http://127.0.0.1:8000/v1",
            "D/-/D",
            "docs.vllm.ai (OpenAI-compatible server)",
            "quirks as established before the preset research (not re-checked by it)",
            structured=_LOCAL_STRUCTURED,
            local_engines=("vllm",),
            # reasoning in `reasoning_content` (older) or `reasoning` (newer);
            # response_format works on every version (guided_json / structured_outputs
            # are selectable with the structured_output quirk).
            doc="vLLM's OpenAI-compatible server (default port 8000).",
            name="VLLMAdapter",
            embeddings=True,
            embeddings_source=(
                "D: docs.vllm.ai pooling models (--runner pooling): OpenAI /v1/embeddings"
            ),
        ),
        "lmstudio": _local(
            "LM Studio",
            "http://127.0.0.1:1234/v1",
            "D/-/D",
            "lmstudio.ai/docs (OpenAI compatibility)",
            "quirks as established before the preset research (not re-checked by it)",
            aliases=("lm-studio",),
            structured=ModelCapabilities(json_schema=True),
            local_engines=("llama.cpp",),
            json_object=False,  # structured output only as json_schema (no plain JSON mode)
            doc="LM Studio's local server (default port 1234).",
            name="LMStudioAdapter",
            embeddings=True,
            embeddings_source="D: lmstudio.ai/docs/api/openai-api lists POST /v1/embeddings",
        ),
        # --- hosted services (each fact graded in `evidence`; see Preset) ----------
        "groq": _hosted(
            "Groq",
            "https://api.groq.com/openai/v1",
            "GROQ_API_KEY",
            "D/D/R",
            "console.groq.com/docs/openai",
            "usage in x_groq.usage on the finish chunk, unasked (read by default); 400 for "
            "logprobs, logit_bias, top_logprobs, messages[].name and n>1 (AnyInfer sends "
            "none); reasoning_format via provider_options, parsed reasoning in `reasoning`",
            stream_usage=False,
            max_tokens_field="max_completion_tokens",
            embeddings=False,
            embeddings_source=(
                "C: getbifrost.ai Groq page (embeddings not supported upstream); no embedding model"
                " in Groq's docs"
            ),
        ),
        "together": _hosted(
            "Together AI",
            "https://api.together.ai/v1",
            "TOGETHER_API_KEY",
            "D/D/U",
            "docs.together.ai/docs/inference/openai-compatibility",
            "SDKs still use api.together.xyz (both hosts in use); model ids are org/model",
            aliases=("together-ai", "togetherai"),
            embeddings=True,
            embeddings_source="D: docs.together.ai/reference/embeddings (POST /embeddings)",
        ),
        "fireworks": _hosted(
            "Fireworks AI",
            "https://api.fireworks.ai/inference/v1",
            "FIREWORKS_API_KEY",
            "D/C/U",
            "docs.fireworks.ai/tools-sdks/openai-compatibility",
            "the docs' samples use OPENAI_API_KEY, SDKs FIREWORKS_API_KEY; reasoning_effort "
            "takes three of OpenAI's levels (single source)",
            aliases=("fireworks-ai",),
            embeddings=True,
            embeddings_source="D: docs.fireworks.ai/api-reference: POST /inference/v1/embeddings",
        ),
        "deepinfra": _hosted(
            "DeepInfra",
            "https://api.deepinfra.com/v1/openai",
            "DEEPINFRA_API_KEY",
            "D/C/U",
            "deepinfra.com/docs/advanced/openai_api",
            "the docs name no variable (a 'DeepInfra token'); DEEPINFRA_API_KEY is the SDKs'",
            embeddings=True,
            embeddings_source=(
                "D: deepinfra.com/docs/advanced/openai_api (embeddings for all embedding models)"
            ),
        ),
        "cerebras": _hosted(
            "Cerebras Inference",
            "https://api.cerebras.ai/v1",
            "CEREBRAS_API_KEY",
            "C/C/C",
            "inference-docs.cerebras.ai/resources/openai, as quoted by pydantic-ai and others",
            "the dropped fields are a 400 (corroborated); tool_choice only auto/none (single "
            "source)",
            drop_fields=(
                "frequency_penalty",
                "presence_penalty",
                "logit_bias",
                "parallel_tool_calls",
                "service_tier",
            ),
            embeddings=False,
            embeddings_source=(
                "C: getbifrost.ai and deepintshield Cerebras pages: embeddings not supported "
                "upstream"
            ),
        ),
        "sambanova": _hosted(
            "SambaNova Cloud",
            "https://api.sambanova.ai/v1",
            "SAMBANOVA_API_KEY",
            "C/C/U",
            "docs.sambanova.ai/docs/en/features/openai-compatibility; pydantic-ai, any-llm",
            "the docs give the URL on the account's 'API keys and URLs' page; reasoning may "
            "come as <think> text in content (single source)",
            embeddings=True,
            embeddings_source=(
                "D: docs.sambanova.ai embeddings-api: POST https://api.sambanova.ai/v1/embeddings"
            ),
        ),
        "perplexity": _hosted(
            "Perplexity Sonar",
            "https://api.perplexity.ai",
            "PERPLEXITY_API_KEY",
            "D/D/U",
            "docs.perplexity.ai/docs/sonar/openai-compatibility",
            "no /v1: /chat/completions is an alias of /v1/sonar; citations and search_results "
            "in responses; search options (search_domain_filter, web_search_options, ...) via "
            "provider_options",
            embeddings=False,
            embeddings_source=(
                "D: docs.perplexity.ai embeddings-post: POST /v1/embeddings (not under this base) "
                "with base64_int8/base64_binary encodings only"
            ),
        ),
        "nebius": _hosted(
            "Nebius Token Factory",
            "https://api.tokenfactory.nebius.com/v1",
            "NEBIUS_API_KEY",
            "D/D/U",
            "docs.tokenfactory.nebius.com/api-reference/introduction",
            "formerly Nebius AI Studio (api.studio.nebius.com)",
            embeddings=True,
            embeddings_source=(
                "D: docs.tokenfactory.nebius.com create-embeddings: POST /v1/embeddings"
            ),
        ),
        "nvidia-nim": _hosted(
            "NVIDIA NIM (API catalog)",
            "https://integrate.api.nvidia.com/v1",
            "NVIDIA_API_KEY",
            "D/D/U",
            "build.nvidia.com docs",
            "self-hosted NIM containers speak the same API: set base_url",
            aliases=("nvidia",),
            embeddings=True,
            embeddings_source=(
                "D: docs.nvidia.com NeMo Retriever embedding NIM: POST /v1/embeddings (NV-EmbedQA "
                "models want input_type query|passage via provider_options)"
            ),
        ),
        "hyperbolic": _hosted(
            "Hyperbolic",
            "https://api.hyperbolic.xyz/v1",
            "HYPERBOLIC_API_KEY",
            "C/C/U",
            "rig-core, Helicone docs (no provider page found)",
            embeddings=None,
            embeddings_source=(
                "U: docs.hyperbolic.ai text APIs document chat and completions; no embeddings route"
                " found"
            ),
        ),
        "novita": _hosted(
            "Novita AI",
            "https://api.novita.ai/openai",
            "NOVITA_API_KEY",
            "C/C/U",
            "pipecat, models.dev, crewAI",
            "path conflict not checked live: /openai (corroborated), /openai/v1 (promptfoo), "
            "legacy /v3/openai",
            embeddings=None,
            embeddings_source=(
                "U: novita.ai docs document POST /v3/openai/embeddings (the legacy base); under "
                "/openai unverified"
            ),
        ),
        "moonshot": _hosted(
            "Moonshot AI (Kimi), international",
            "https://api.moonshot.ai/v1",
            "MOONSHOT_API_KEY",
            "C/D/S",
            "platform.moonshot.cn/docs/guide/migrating-from-openai-to-kimi; pydantic-ai, vercel/ai",
            "max_completion_tokens rests on one source; temperature range [0, 1] and no "
            "tool_choice 'required' (documented); reasoning in reasoning_content; "
            "reasoning='none' sends thinking: {type: disabled} (kimi-k2.5/k2.6 think by "
            "default)",
            aliases=("kimi",),
            max_tokens_field="max_completion_tokens",
            reasoning_switch="thinking_type",
            embeddings=None,
            embeddings_source="U: platform.moonshot.ai API docs: no embeddings endpoint found",
        ),
        "moonshot-cn": _hosted(
            "Moonshot AI (Kimi), China",
            "https://api.moonshot.cn/v1",
            "MOONSHOT_API_KEY",
            "D/D/S",
            "platform.moonshot.cn/docs/guide/migrating-from-openai-to-kimi",
            "as moonshot",
            max_tokens_field="max_completion_tokens",
            reasoning_switch="thinking_type",
            embeddings=None,
            embeddings_source="U: as moonshot (platform.moonshot.cn): no embeddings endpoint found",
        ),
        "zai": _hosted(
            "Z.ai (GLM), international",
            "https://api.z.ai/api/paas/v4",
            "ZAI_API_KEY",
            "C/C/U",
            "@ai-sdk/zai docs, pydantic-ai, any-llm",
            "reasoning in reasoning_content; only tool_choice auto and json_object, no "
            "json_schema (single source); reasoning on/off as thinking: {type} (GLM-4.5 "
            "and later, documented)",
            reasoning_switch="thinking_type",
            embeddings=None,
            embeddings_source=(
                "U: only a third-party reference lists /embeddings on api.z.ai; not found in Z.ai's"
                " own docs"
            ),
        ),
        "zhipu": _hosted(
            "Zhipu AI BigModel (GLM), China",
            "https://open.bigmodel.cn/api/paas/v4",
            "ZHIPUAI_API_KEY",
            "C/S/U",
            "agentscope, vercel/ai community page, models.dev",
            "models.dev names the key ZHIPU_API_KEY; wire as zai",
            aliases=("bigmodel",),
            reasoning_switch="thinking_type",
            embeddings=True,
            embeddings_source=(
                "D: docs.bigmodel.cn 文本嵌入: POST https://open.bigmodel.cn/api/paas/v4/embeddings"
            ),
        ),
        "dashscope": _hosted(
            "Alibaba Cloud Model Studio (DashScope)",
            "https://dashscope-intl.aliyuncs.com/compatible-mode/v1",
            "DASHSCOPE_API_KEY",
            "D/C/D",
            "alibabacloud.com/help/en/model-studio/base-url",
            "regional hosts (dashscope., dashscope-us., cn-hongkong.dashscope.) and regional "
            "keys (a mismatch is a 401); stream usage needs include_usage (the default); "
            "json_object needs the word JSON in the prompt; reasoning on/off as "
            "enable_thinking (hybrid-thinking models)",
            aliases=("alibaba",),
            reasoning_switch="enable_thinking",
            embeddings=True,
            embeddings_source=(
                "D: alibabacloud.com Model Studio 'OpenAI compatible - Embedding': POST "
                "{base}/embeddings, batch size 10 (text-embedding-v3/v4), encoding_format float "
                "only"
            ),
            embed_max_batch=10,
            embed_encodings=("float",),
        ),
        "baseten": _hosted(
            "Baseten Model APIs",
            "https://inference.baseten.co/v1",
            "BASETEN_API_KEY",
            "D/D/U",
            "docs.baseten.co/quickstart",
            "dedicated deployments have their own host: set base_url",
            embeddings=None,
            embeddings_source=(
                "U: Model APIs list chat LLMs only; embeddings are served by BEI deployments at "
                "their own URLs (docs.baseten.co)"
            ),
        ),
        "huggingface": _hosted(
            "Hugging Face Inference Providers (router)",
            "https://router.huggingface.co/v1",
            "HF_TOKEN",
            "D/D/R",
            "huggingface.co/docs/inference-providers",
            "a model may name its provider: org/model:provider",
            aliases=("hf",),
            embeddings=None,
            embeddings_source=(
                "U: router.huggingface.co/v1 documented for chat completions; /v1/embeddings on the"
                " router unverified"
            ),
        ),
        "scaleway": _hosted(
            "Scaleway Generative APIs",
            "https://api.scaleway.ai/v1",
            "SCW_SECRET_KEY",
            "D/D/U",
            "scaleway.com/en/docs/generative-apis",
            "project-scoped URL: https://api.scaleway.ai/{project_id}/v1",
            embeddings=True,
            embeddings_source=(
                "D: scaleway.com Generative APIs: /v1/chat/completions, /v1/embeddings, /v1/models "
                "(encoding_format and dimensions unsupported)"
            ),
            embed_encodings=(),
            embed_dimensions_field="",
        ),
        "ovhcloud": _hosted(
            "OVHcloud AI Endpoints",
            "https://oai.endpoints.kepler.ai.cloud.ovh.net/v1",
            "OVHCLOUD_API_KEY",
            "D/C/U",
            "ovh.github.io/apache-airflow-provider-ovhcloud-ai; pydantic-ai, any-llm",
            "a key is optional: without one it is a rate-limited free tier (corroborated); "
            "Docker's docs name OVH_AI_ENDPOINTS_ACCESS_TOKEN",
            key_required=False,
            embeddings=True,
            embeddings_source=(
                "D: ovhcloud.com AI Endpoints catalog: POST "
                "https://oai.endpoints.kepler.ai.cloud.ovh.net/v1/embeddings"
            ),
        ),
        "cloudflare-workers-ai": _hosted(
            "Cloudflare Workers AI",
            None,
            "CLOUDFLARE_API_KEY",
            "D/D/U",
            "developers.cloudflare.com/workers-ai/configuration/open-ai-compatibility",
            "base_url holds the account id; model ids are @cf/...; tool calling reported not "
            "to work on this route (single source)",
            aliases=("workers-ai",),
            template="https://api.cloudflare.com/client/v4/accounts/{account_id}/ai/v1",
            embeddings=True,
            embeddings_source=(
                "D: developers.cloudflare.com workers-ai open-ai-compatibility: "
                "/v1/chat/completions and /v1/embeddings"
            ),
        ),
        "mistral": _hosted(
            "Mistral AI (La Plateforme)",
            "https://api.mistral.ai/v1",
            "MISTRAL_API_KEY",
            "R/C/C",
            "vercel/ai mistral provider, langchain.js, AnyInfer recordings",
            "tool_choice 'any' rests on one source; safe_prompt and prompt_mode via "
            "provider_options; list-shaped content with thinking parts is read",
            **_MISTRAL,
            embeddings=True,
            embeddings_source=(
                "D: docs.mistral.ai/api/endpoint/embeddings: POST /v1/embeddings (output_dimension,"
                " not dimensions)"
            ),
        ),
        "codestral": _hosted(
            "Mistral Codestral endpoint",
            "https://codestral.mistral.ai/v1",
            "CODESTRAL_API_KEY",
            "S/S/S",
            "litellm",
            "Mistral's wire assumed (Mistral's own endpoint; single source)",
            **_MISTRAL,
            embeddings=None,
            embeddings_source=(
                "U: codestral.mistral.ai is documented for FIM and chat; embeddings there not found"
                " (codestral-embed is on api.mistral.ai)"
            ),
        ),
        "deepseek": _hosted(
            "DeepSeek",
            "https://api.deepseek.com",
            "DEEPSEEK_API_KEY",
            "C/C/R",
            "api-docs.deepseek.com/guides/thinking_mode; pydantic-ai, vercel/ai",
            "thinking is on by default; reasoning='none' sends thinking: {type: disabled}, "
            "other efforts thinking enabled plus reasoning_effort (documented); "
            "reasoning in reasoning_content; prompt_cache_hit_tokens read as cache reads; "
            "/v1 also accepted",
            reasoning_switch="thinking_type",
            embeddings=False,
            embeddings_source=(
                "S: the API reference lists chat completions, FIM completions, models and balance "
                "only (100321.com, CSDN notes on api-docs.deepseek.com)"
            ),
        ),
        "xai": _hosted(
            "xAI (Grok)",
            "https://api.x.ai/v1",
            "XAI_API_KEY",
            "C/C/C",
            "vercel/ai xai provider, pydantic-ai, promptfoo",
            "some grok models answer 400 to reasoning_effort (corroborated): retried without "
            "it; reasoning in reasoning_content (single source); citations in responses",
            aliases=("grok",),
            retry_without_reasoning_effort=True,
            embeddings=None,
            embeddings_source=(
                "S: a scrape of xAI's OpenAPI (withone.ai) lists POST /v1/embeddings; no current "
                "xAI doc page found"
            ),
        ),
        "openrouter": _hosted(
            "OpenRouter",
            "https://openrouter.ai/api/v1",
            "OPENROUTER_API_KEY",
            "D/C/D",
            "openrouter.ai/docs/api-reference/streaming, /docs/errors, /docs/features/"
            "provider-routing",
            "': OPENROUTER PROCESSING' comments skipped; an error event after the 200 is a "
            "typed error; reasoning in `reasoning`; the effort goes in its unified "
            "reasoning: {effort} (docs/use-cases/reasoning-tokens); routing (provider, "
            "models) via provider_options",
            reasoning_switch="reasoning_object",
            embeddings=True,
            embeddings_source=(
                "D: openrouter.ai/docs/api/api-reference/embeddings: POST "
                "https://openrouter.ai/api/v1/embeddings"
            ),
        ),
        "gemini-openai": _hosted(
            "Google Gemini API (OpenAI compatibility)",
            "https://generativelanguage.googleapis.com/v1beta/openai",
            "GEMINI_API_KEY",
            "D/D/U",
            "ai.google.dev/gemini-api/docs/openai",
            "the native gemini adapter is the first choice",
            embeddings=True,
            embeddings_source=(
                "D: ai.google.dev OpenAI compatibility, Embeddings: POST "
                ".../v1beta/openai/embeddings"
            ),
        ),
        "vercel-ai-gateway": _hosted(
            "Vercel AI Gateway",
            "https://ai-gateway.vercel.sh/v1",
            "AI_GATEWAY_API_KEY",
            "D/D/D",
            "vercel.com/docs/ai-gateway/openai-compat/advanced",
            "reasoning request {max_tokens, enabled} via provider_options; reasoning in "
            "`reasoning`; VERCEL_OIDC_TOKEN also accepted",
            embeddings=True,
            embeddings_source="D: vercel.com/docs/ai-gateway/openai-compat: POST /v1/embeddings",
        ),
        "heroku": _hosted(
            "Heroku Managed Inference",
            "https://us.inference.heroku.com/v1",
            "HEROKU_INFERENCE_KEY",
            "S/S/U",
            "pydantic-ai",
            "HEROKU_INFERENCE_URL names the host",
            embeddings=True,
            embeddings_source=(
                "D: devcenter.heroku.com heroku-inference-api-v1-embeddings: POST /v1/embeddings, "
                "at most 96 strings, encoding_format raw|base64"
            ),
            embed_max_batch=96,
            embed_encodings=("base64",),
        ),
        "minimax": _hosted(
            "MiniMax",
            "https://api.minimax.io/v1",
            "MINIMAX_API_KEY",
            "S/C/U",
            "any-llm, models.dev",
            "reasoning may come as <think> text in content (single source)",
            embeddings=False,
            embeddings_source=(
                "C: helix-db, langchain MinimaxEmbeddings: its /v1/embeddings takes texts and type "
                "and answers vectors, not OpenAI's shape"
            ),
        ),
        "inception": _hosted(
            "Inception Labs (Mercury)",
            "https://api.inceptionlabs.ai/v1",
            "INCEPTION_API_KEY",
            "C/C/U",
            "models.dev, any-llm",
            embeddings=None,
            embeddings_source=(
                "U: litellm's Inception page lists /chat/completions and /fim/completions; no "
                "embeddings route found"
            ),
        ),
        "meta-llama": _hosted(
            "Meta Llama API (compatibility endpoint)",
            "https://api.llama.com/compat/v1",
            "LLAMA_API_KEY",
            "C/C/U",
            "any-llm, models.dev",
            aliases=("llama-api",),
            embeddings=None,
            embeddings_source=(
                "U: no public reference for api.llama.com/compat/v1 beyond chat found"
            ),
        ),
        "requesty": _hosted(
            "Requesty router",
            "https://router.requesty.ai/v1",
            "REQUESTY_API_KEY",
            "C/C/U",
            "models.dev, vercel/ai community page",
            embeddings=True,
            embeddings_source=(
                "D: docs.requesty.ai embeddings-create: POST "
                "https://router.requesty.ai/v1/embeddings"
            ),
        ),
        "portkey": _hosted(
            "Portkey gateway",
            "https://api.portkey.ai/v1",
            "PORTKEY_API_KEY",
            "S/S/U",
            "any-llm",
            "the key header is unverified (sent as Authorization: Bearer)",
            embeddings=True,
            embeddings_source=(
                "D: portkey.ai/docs/api-reference/embeddings: POST "
                "https://api.portkey.ai/v1/embeddings"
            ),
        ),
        "helicone": _hosted(
            "Helicone AI Gateway",
            "https://ai-gateway.helicone.ai/v1",
            "HELICONE_API_KEY",
            "C/C/U",
            "models.dev, any-llm",
            "litellm's base has no /v1 (conflict)",
            embeddings=None,
            embeddings_source=(
                "U: docs.helicone.ai gateway pages describe proxying; embeddings on ai-"
                "gateway.helicone.ai/v1 not found"
            ),
        ),
        "gmicloud": _hosted(
            "GMI Cloud",
            "https://api.gmi-serving.com/v1",
            "GMI_API_KEY",
            "C/U/U",
            "any-llm, litellm, vercel/ai, models.dev",
            "three key names in four SDKs: GMI_API_KEY, GMI_CLOUD_APIKEY, GMICLOUD_API_KEY",
            embeddings=None,
            embeddings_source=(
                "U: docs.gmicloud.ai LLM API reference: /v1/models and /v1/chat/completions; no "
                "embeddings found"
            ),
        ),
        "siliconflow": _hosted(
            "SiliconFlow (international)",
            "https://api.siliconflow.com/v1",
            "SILICONFLOW_API_KEY",
            "S/S/U",
            "models.dev",
            embeddings=True,
            embeddings_source="D: docs.siliconflow.com create-embeddings: POST /v1/embeddings",
        ),
        "siliconflow-cn": _hosted(
            "SiliconFlow (China)",
            "https://api.siliconflow.cn/v1",
            "SILICONFLOW_CN_API_KEY",
            "S/S/U",
            "models.dev",
            embeddings=True,
            embeddings_source=(
                "D: docs.siliconflow.cn create-embeddings: POST "
                "https://api.siliconflow.cn/v1/embeddings"
            ),
        ),
        "chutes": _hosted(
            "Chutes",
            "https://llm.chutes.ai/v1",
            "CHUTES_API_KEY",
            "C/C/U",
            "models.dev, litellm",
            embeddings=None,
            embeddings_source=(
                "U: llm.chutes.ai is documented for /v1/chat/completions; embedding chutes have "
                "their own hosts"
            ),
        ),
        "friendli": _hosted(
            "FriendliAI (serverless)",
            "https://api.friendli.ai/serverless/v1",
            "FRIENDLI_TOKEN",
            "C/C/U",
            "vercel/ai community page, litellm",
            "dedicated endpoints: https://api.friendli.ai/dedicated/v1",
            embeddings=False,
            embeddings_source=(
                "D: friendli.ai/docs OpenAPI: embeddings only on dedicated endpoints "
                "(/dedicated/v1/embeddings), none serverless"
            ),
        ),
        "nearai": _hosted(
            "NEAR AI Cloud",
            "https://cloud-api.near.ai/v1",
            "NEARAI_API_KEY",
            "C/S/U",
            "models.dev, any-llm",
            embeddings=None,
            embeddings_source=(
                "U: NEAR AI Cloud references document chat completions only; no embeddings route "
                "found"
            ),
        ),
        "clarifai": _hosted(
            "Clarifai (OpenAI endpoint)",
            "https://api.clarifai.com/v2/ext/openai/v1",
            "CLARIFAI_PAT",
            "C/S/U",
            "models.dev, litellm",
            embeddings=None,
            embeddings_source=(
                "U: Clarifai's OpenAI-compatible endpoint is documented for chat; embeddings not "
                "found"
            ),
        ),
        "upstage": _hosted(
            "Upstage (Solar)",
            "https://api.upstage.ai/v1/solar",
            "UPSTAGE_API_KEY",
            "S/S/U",
            "litellm",
            embeddings=True,
            embeddings_source=(
                "D: developers.upstage.ai/docs/apis/embeddings: POST "
                "https://api.upstage.ai/v1/solar/embeddings"
            ),
        ),
        "stepfun": _hosted(
            "StepFun",
            "https://api.stepfun.com/v1",
            "STEPFUN_API_KEY",
            "S/S/U",
            "models.dev",
            embeddings=None,
            embeddings_source=(
                "U: platform.stepfun docs: chat completions and models; embeddings not found"
            ),
        ),
        "volcengine-ark": _hosted(
            "Volcengine Ark (ByteDance)",
            "https://ark.cn-beijing.volces.com/api/v3",
            "VOLCENGINE_API_KEY",
            "S/S/U",
            "litellm",
            embeddings=True,
            embeddings_source=(
                "C: an OpenAI-shaped /api/v3/embeddings mirror (anyfast.ai) and litellm's doubao-"
                "embedding models; volcengine.com doubao-embedding guide"
            ),
        ),
        "modelscope": _hosted(
            "ModelScope API-Inference",
            "https://api-inference.modelscope.cn/v1",
            "MODELSCOPE_API_KEY",
            "S/S/U",
            "models.dev",
            embeddings=None,
            embeddings_source=(
                "U: ModelScope API-Inference documents OpenAI-compatible LLM chat; embeddings not "
                "found"
            ),
        ),
        "digitalocean": _hosted(
            "DigitalOcean Gradient inference",
            "https://inference.do-ai.run/v1",
            "DIGITALOCEAN_ACCESS_TOKEN",
            "S/S/U",
            "models.dev",
            embeddings=True,
            embeddings_source=(
                "D: digitalocean/openapi spec: POST /v1/embeddings on https://inference.do-ai.run"
            ),
        ),
        "wandb": _hosted(
            "W&B Inference",
            "https://api.inference.wandb.ai/v1",
            "WANDB_API_KEY",
            "S/S/U",
            "models.dev",
            embeddings=False,
            embeddings_source=(
                "D: docs.wandb.ai inference API reference: available methods are chat completions "
                "and list models"
            ),
        ),
        "vultr": _hosted(
            "Vultr Serverless Inference",
            "https://api.vultrinference.com/v1",
            "VULTR_API_KEY",
            "S/S/U",
            "models.dev",
            embeddings=None,
            embeddings_source=(
                "U: api.vultrinference.com reference shows chat completions; /v1/embeddings not "
                "found"
            ),
        ),
        "sarvam": _hosted(
            "Sarvam AI",
            "https://api.sarvam.ai/v1",
            "SARVAM_API_KEY",
            "C/C/S",
            "litellm providers.json, models.dev",
            "the key goes in api-subscription-key, not Bearer (single source)",
            key_header="api-subscription-key",
            embeddings=None,
            embeddings_source=(
                "U: docs.sarvam.ai documents chat completions (and speech and translation APIs); "
                "embeddings not found"
            ),
        ),
        "poe": _hosted(
            "Poe",
            "https://api.poe.com/v1",
            "POE_API_KEY",
            "C/C/U",
            "models.dev, litellm",
            embeddings=False,
            embeddings_source=(
                "D: creator.poe.com OpenAI compatible API: /v1/chat/completions and /v1/responses"
            ),
        ),
        "databricks": _hosted(
            "Databricks (Mosaic AI gateway)",
            None,
            "DATABRICKS_TOKEN",
            "S/C/U",
            "models.dev, any-llm",
            "base_url holds the workspace host (DATABRICKS_HOST)",
            template="https://{workspace_host}/ai-gateway/mlflow/v1",
            embeddings=True,
            embeddings_source=(
                "D: docs.databricks.com AI Gateway 'MLflow Embeddings API' at <ai-gateway-"
                "url>/mlflow/v1"
            ),
        ),
        "snowflake-cortex": _hosted(
            "Snowflake Cortex REST",
            None,
            "SNOWFLAKE_CORTEX_PAT",
            "S/S/U",
            "models.dev",
            "base_url holds the account",
            template="https://{account}.snowflakecomputing.com/api/v2/cortex/v1",
            embeddings=False,
            embeddings_source=(
                "D: docs.snowflake.com Cortex REST API: /api/v2/cortex/v1 serves chat; embeddings "
                "are /api/v2/cortex/inference:embed with their own body"
            ),
        ),
        "ai21": _hosted(
            "AI21 Studio",
            "https://api.ai21.com/studio/v1",
            "AI21_API_KEY",
            "S/S/U",
            "litellm",
            embeddings=False,
            embeddings_source=(
                "D: docs.ai21.com embeddings-api: POST /studio/v1/embed with texts, not OpenAI's "
                "/embeddings"
            ),
        ),
        "ollama-cloud": _hosted(
            "Ollama Cloud",
            "https://ollama.com/v1",
            "OLLAMA_API_KEY",
            "S/S/U",
            "models.dev",
            "the local Ollama has its own adapter, `ollama`",
            embeddings=None,
            embeddings_source=(
                "U: whether ollama.com/v1 serves embedding models is not documented where we looked"
                " (the local Ollama's /v1 does)"
            ),
        ),
        "venice": _hosted(
            "Venice.ai",
            "https://api.venice.ai/api/v1",
            "VENICE_API_KEY",
            "S/U/U",
            "models.dev, litellm",
            "litellm names the key VENICE_AI_API_KEY",
            embeddings=True,
            embeddings_source=(
                "D: docs.venice.ai embeddings/generate: POST "
                "https://api.venice.ai/api/v1/embeddings"
            ),
        ),
        "xiaomi-mimo": _hosted(
            "Xiaomi MiMo",
            "https://api.xiaomimimo.com/v1",
            "XIAOMI_API_KEY",
            "C/U/U",
            "models.dev, litellm",
            "litellm names the key XIAOMI_MIMO_API_KEY",
            embeddings=None,
            embeddings_source=(
                "U: platform.xiaomimimo.com OpenAI API page: chat completions; embeddings not found"
            ),
        ),
        "synthetic": _hosted(
            "Synthetic",
            "https://api.synthetic.new/openai/v1",
            "SYNTHETIC_API_KEY",
            "C/C/U",
            "models.dev, litellm",
            embeddings=True,
            embeddings_source=(
                "D: dev.synthetic.new/docs/openai/embeddings: POST "
                "https://api.synthetic.new/openai/v1/embeddings"
            ),
        ),
        "nano-gpt": _hosted(
            "NanoGPT",
            "https://nano-gpt.com/api/v1",
            "NANOGPT_API_KEY",
            "C/U/U",
            "litellm, models.dev",
            "models.dev names the key NANO_GPT_API_KEY",
            embeddings=True,
            embeddings_source=(
                "D: docs.nano-gpt.com/api-reference/embeddings: POST https://nano-"
                "gpt.com/api/v1/embeddings"
            ),
        ),
        "qiniu": _hosted(
            "Qiniu AI",
            "https://api.qnaigc.com/v1",
            "QINIU_API_KEY",
            "C/C/U",
            "models.dev, litellm",
            embeddings=False,
            embeddings_source=(
                "D: developer.qiniu.com AI inference API list: /v1/models, /v1/chat/completions, "
                "/v1/voice/asr, /v1/voice/tts"
            ),
        ),
        "edenai": _hosted(
            "Eden AI",
            "https://api.edenai.run/v3",
            "EDENAI_API_KEY",
            "S/S/U",
            "any-llm",
            embeddings=True,
            embeddings_source=(
                "D: edenai.co docs create-embeddings: POST https://api.edenai.run/v3/embeddings"
            ),
        ),
        # --- local engines (no provider key variable: a local port never gets one) --
        "localai": _local(
            "LocalAI",
            "http://127.0.0.1:8080/v1",
            "C/-/U",
            "localai.io/docs (port 8080); promptfoo, llamaindex (the /v1 path)",
            "a key is optional",
            embeddings=True,
            embeddings_source=(
                "D: localai.io/features/embeddings (OpenAI embeddings API; models with embeddings: "
                "true)"
            ),
        ),
        "jan": _local(
            "Jan local API server",
            "http://127.0.0.1:1337/v1",
            "D/-/U",
            "jan.ai/docs/local-api",
            "a key is required: the string set in Jan's Local API Server settings; built on "
            "llama.cpp (its quirks unverified here)",
            key_required=True,
            embeddings=None,
            embeddings_source=(
                "U: Jan's published openapi.json has no embeddings path; a generated mirror of its "
                "docs lists one"
            ),
        ),
        "llamafile": _local(
            "llamafile",
            "http://127.0.0.1:8080/v1",
            "D/-/D",
            "mozilla-ai/llamafile README",
            "llama.cpp's server inside (documented); whether every build has the newer "
            "llama.cpp fields is unverified",
            dialect="llama.cpp",
            base=_LlamaCppServer,
            **_LLAMA_CPP,
            embeddings=None,
            embeddings_source=(
                "U: llamafile is used with --embedding through llama.cpp's native /embedding "
                "(TabbyML docs); /v1/embeddings unconfirmed"
            ),
        ),
        "koboldcpp": _local(
            "KoboldCpp",
            "http://127.0.0.1:5001/v1",
            "D/-/D",
            "LostRuins/koboldcpp koboldcpp.py (2024-10 snapshot)",
            "in that snapshot whole responses carried a constant placeholder usage "
            "(100/100/200): later releases unverified; tools emulated through a grammar",
            embeddings=None,
            embeddings_source=(
                "U: --embeddingsmodel loads an embedding model (a third party's docs); "
                "/v1/embeddings not in the source snapshot this preset was built from"
            ),
        ),
        "tgi": _local(
            "Hugging Face Text Generation Inference",
            "http://127.0.0.1:8080/v1",
            "D/-/D",
            "huggingface/text-generation-inference router/src/lib.rs",
            "in maintenance mode; response_format and tools cannot be combined; the bare "
            "launcher's port is 3000 (8080 is the Docker example's)",
            aliases=("text-generation-inference",),
            structured=ModelCapabilities(json_mode=True, json_schema=True),
            structured_output="tgi_grammar",
            embeddings=False,
            embeddings_source=(
                "D: TGI's router serves generation routes only; embeddings are Text Embeddings "
                "Inference, a separate server (use the tei provider)"
            ),
        ),
        "sglang": _local(
            "SGLang",
            "http://127.0.0.1:30000/v1",
            "D/-/D",
            "sgl-project/sglang docs (separate_reasoning)",
            "reasoning in reasoning_content with --reasoning-parser; separate_reasoning and "
            "stream_reasoning via provider_options",
            embeddings=True,
            embeddings_source=(
                "D: docs.sglang.io openai_api_embeddings: POST /v1/embeddings with --is-embedding"
            ),
        ),
        "text-generation-webui": _local(
            "oobabooga text-generation-webui",
            "http://127.0.0.1:5000/v1",
            "D/-/D",
            "oobabooga/text-generation-webui docs/12 - OpenAI API.md, modules/api",
            "needs --api; no JSON mode (only a GBNF grammar_string), so structured output is "
            "asked for in the prompt",
            aliases=("oobabooga",),
            structured=ModelCapabilities(json_mode=False, json_schema=False, grammar=False),
            embeddings=True,
            embeddings_source=(
                "D: extensions/openai: /v1/embeddings (model chosen by OPENEDAI_EMBEDDING_MODEL; "
                "the request's model is ignored)"
            ),
        ),
        "tabbyapi": _local(
            "TabbyAPI (ExLlama)",
            "http://127.0.0.1:5000/v1",
            "D/-/D",
            "theroyallab/tabbyAPI config_sample.yml, endpoints/OAI",
            "a key is required by default (server-generated tokens; x-api-key or Bearer)",
            key_required=True,
            embeddings=None,
            embeddings_source="U: embeddings not found in the sources this preset was built from",
        ),
        "lmdeploy": _local(
            "LMDeploy api_server",
            "http://127.0.0.1:23333/v1",
            "D/-/D",
            "InternLM/lmdeploy lmdeploy/serve/openai/protocol.py",
            embeddings=False,
            embeddings_source=(
                "D: lmdeploy/serve/openai/api_server.py: /v1/embeddings answers 400 'Unsupported by"
                " turbomind.'"
            ),
        ),
        "mlx-lm": _local(
            "MLX LM server",
            "http://127.0.0.1:8080/v1",
            "D/-/D",
            "ml-explore/mlx-lm mlx_lm/server.py",
            "reasoning in `reasoning`; structured output unverified",
            embeddings=False,
            embeddings_source=(
                "D: mlx_lm SERVER.md documents /v1/chat/completions, /v1/completions and /v1/models"
            ),
        ),
        "xinference": _local(
            "Xorbits Inference",
            "http://127.0.0.1:9997/v1",
            "D/-/D",
            "xorbitsai/inference doc/source/getting_started",
            embeddings=True,
            embeddings_source=(
                "D: inference.readthedocs.io embed ability: OpenAI-compatible /v1/embeddings"
            ),
        ),
        "docker-model-runner": _local(
            "Docker Model Runner",
            "http://127.0.0.1:12434/engines/v1",
            "C/-/U",
            "docs.docker.com (port); Kestra docs (the /engines/v1 path)",
            "from a container: http://model-runner.docker.internal/engines/v1",
            embeddings=True,
            embeddings_source=(
                "D: docs.docker.com model-runner api-reference: OpenAI-compatible embeddings at "
                "/engines/v1/embeddings"
            ),
        ),
        "lemonade": _local(
            "Lemonade Server",
            "http://127.0.0.1:13305/v1",
            "D/-/U",
            "lemonade-sdk/lemonade README",
            "the README's Python sample uses /api/v1",
            embeddings=True,
            embeddings_source=(
                "D: lemonade-server.ai OpenAI-compatible API: POST /v1/embeddings (and "
                "/api/v1/embeddings)"
            ),
        ),
        "cascadia": _local(
            "Cascadia",
            "http://127.0.0.1:9090/v1",
            "S/-/U",
            "any-llm",
            "CASCADIA_API_KEY is optional (not read: set ANYINFER_CASCADIA_API_KEY)",
            embeddings=None,
            embeddings_source=(
                "U: cascadia.to describes chat inference over a mesh; no embeddings found"
            ),
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
        where = preset.default_base_url or preset.base_url_template
        attrs: dict[str, Any] = {
            "__module__": __name__,
            "__doc__": preset.doc
            or f"{preset.title or provider_id}: the {provider_id} OpenAI-compatible preset "
            f"({where}).",
            "provider_id": provider_id,
            "default_base_url": preset.default_base_url,
            "api_key_env": preset.api_key_env,
            "api_key_required": preset.key_required,
            "base_url_template": where or OpenAICompatAdapter.base_url_template,
            "default_engine": provider_id,
            "profile": preset.profile,
            "preset": preset,
        }
        if preset.embed_max_batch is not None:
            attrs["embed_max_batch"] = preset.embed_max_batch
        cls = type(name, (preset.base,), attrs)
        _PRESET_CLASSES[(provider_id, preset)] = cls
    return cls


def preset_adapters() -> tuple[type[OpenAICompatAdapter], ...]:
    """Every preset's adapter class, in `PRESETS` order (the registry's built-ins)."""
    return tuple(preset_adapter(pid) for pid in PRESETS)


_EMBEDDINGS_OPTION = "embeddings"


def _preset_refusal(
    cls: type[OpenAICompatAdapter], preset: Preset, settings: ProviderSettings
) -> str:
    """The refusal of a preset whose `/embeddings` is not documented (`embeddings` is
    `None`) or documented absent (`False`)."""
    title = preset.title or cls.provider_id
    opt_in = (
        f"if yours does, opt in with ProviderSettings({settings.provider_id!r}, "
        "options={'embeddings': True})"
    )
    if preset.embeddings is None:
        return (
            f"whether {title} serves OpenAI's POST /embeddings is unknown to AnyInfer "
            f"({preset.embeddings_source}), so nothing is sent to a route that may not "
            f"exist; {opt_in}"
        )
    return (
        f"{title} does not serve OpenAI's POST /embeddings at this base URL "
        f"({preset.embeddings_source}); {opt_in}"
    )


@value_class
class PresetSummary:
    """What one preset is and whether this environment can reach it (no values shown).

    Attributes:
        provider_id: The preset's id.
        title: The service or engine.
        base_url: Where requests go: `ANYINFER_<ID>_BASE_URL` when set, else the
            preset's default; `None` when neither (a templated URL must be given).
        base_url_template: The endpoint's shape, for templated URLs.
        key_envs: Variables consulted for the key, in order.
        key_set: Which of `key_envs` is set (its name, never its value), or `None`.
        key_required: Whether the adapter refuses to build without a key.
        local: Whether `base_url` is on this machine.
        evidence: The entry's evidence grades (`Preset.evidence`).
    """

    provider_id: str
    title: str
    base_url: str | None
    base_url_template: str
    key_envs: tuple[str, ...]
    key_set: str | None
    key_required: bool
    local: bool
    evidence: str

    @property
    def ready(self) -> bool:
        """Whether an adapter would build: a URL, and a key when one is required."""
        return self.base_url is not None and (self.key_set is not None or not self.key_required)


def preset_summaries(environ: Mapping[str, str] | None = None) -> list[PresetSummary]:
    """Every preset, in `PRESETS` order, with what the environment supplies for it.

    For `anyinfer doctor` and listings: reads only variable names' presence, sends
    nothing and shows no secret.

    Args:
        environ: The environment to read; defaults to `os.environ`.
    """
    import os

    from .._client.instance import instance_config, locality_of
    from .._settings import ProviderSettings

    env = os.environ if environ is None else environ
    out: list[PresetSummary] = []
    for pid, preset in PRESETS.items():
        config = instance_config(ProviderSettings(pid), preset_adapter(pid), environ=env)
        key_set = next((name for name in config.key_envs if env.get(name)), None)
        out.append(
            PresetSummary(
                provider_id=pid,
                title=preset.title or pid,
                base_url=config.base_url,
                base_url_template=preset.base_url_template,
                key_envs=config.key_envs,
                key_set=key_set,
                key_required=preset.key_required,
                local=locality_of(config.base_url) == "local",
                evidence=preset.evidence,
            )
        )
    return out


_REQUEST_ONLY_QUIRKS = frozenset(
    {
        "engine",
        "max_tokens_field",
        "stream_usage",
        "structured_output",
        "json_object",
        "send_reasoning_effort",
        "reasoning_switch",
        "seed_field",
        "tool_choice_required",
        "drop_fields",
        "retry_without_reasoning_effort",
        "key_header",
        "embed_encodings",
        "embed_dimensions_field",
    }
)
"""Quirks that change only what a request carries (its fields, its key header), or act
only on a field (`reasoning_effort`) the conformance suite's requests never send."""


def reading_behaviour(cls: type[Any]) -> tuple[Any, ...] | None:
    """How an OpenAI-compatible class reads responses, as a hashable value.

    Two classes with equal values run the same response-reading code with the same
    reading quirks: the class they extend, and every `Quirks` field outside
    `_REQUEST_ONLY_QUIRKS`. The conformance suite runs its full property suite once
    per value (and dialect) and a per-entry check for every other preset.

    Returns:
        The value, or `None` for a class that is neither `OpenAICompatAdapter` nor a
        preset's class (its behaviour is its own).
    """
    if cls is OpenAICompatAdapter:
        base: type[Any] = cls
    elif isinstance(vars(cls).get("preset"), Preset):
        base = cls.__bases__[0]
    else:
        return None
    quirks = quirks_for(cls.default_engine, {})
    names = [f.name for f in fields(quirks) if f.name not in _REQUEST_ONLY_QUIRKS]
    reading = tuple((name, getattr(quirks, name)) for name in names)
    return (base, reading)


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


def _rejects_reasoning_effort(exc: ProviderError) -> bool:
    """A 400/422 naming the effort field (xAI says `reasoningEffort`)."""
    if exc.http_status not in _STREAM_OPTIONS_REJECTED:
        return False
    said = exc.message.lower()
    return "reasoning_effort" in said or "reasoningeffort" in said


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
