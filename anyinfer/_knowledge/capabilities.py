"""Model capabilities, assembled in layers with per-field provenance.

What a model can do — its context window, output cap, whether it takes tools, images,
documents, audio or a JSON Schema; for an embedding model, the dimensions it can produce,
how many inputs one request takes, how long an input may be and which input types it
knows — is known from several places of different strength.
`CapabilityStore` keeps one layer per source and assembles them field by field, weakest first:

1. ``catalog`` — the bundled (or a custom) catalog, plus context windows a pricing table
   carries. Facts as published; a local engine's served window is never in it.
2. ``discovery`` — what the provider's own model listing reported (`models()`).
3. ``probe`` — what was measured against the running provider.
4. ``override`` — `capability_overrides`, deliberate local corrections. Always wins.

A field nobody knows stays `None`: unknown is never turned into a guess. Every known field
records which layer supplied it in `ModelCapabilities.provenance`, so a caller can tell a
catalog number from a measured one.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from dataclasses import field, replace
from typing import TYPE_CHECKING, Any, Literal, get_args

from .._errors import ConfigError
from .._values import value_class

if TYPE_CHECKING:
    from .catalog import Catalog
    from .pricing import PricingTable

__all__ = [
    "CAPABILITY_FIELDS",
    "EMBEDDING_FIELDS",
    "PROVENANCE_ORDER",
    "TRUSTED_PROVENANCES",
    "CapabilityStore",
    "ModelCapabilities",
    "Provenance",
    "capabilities_from_discovery",
    "is_trusted",
    "split_key",
]

Provenance = Literal["catalog", "discovery", "probe", "override"]
"""Where a capability fact came from, weakest first."""

PROVENANCE_ORDER: tuple[Provenance, ...] = get_args(Provenance)
"""The layers in assembly order: each one outranks those before it."""

TRUSTED_PROVENANCES: frozenset[Provenance] = frozenset(
    {"catalog", "discovery", "probe", "override"}
)
"""Provenances whose context window may make the context gate refuse a request.

All four are trusted, each for its own reason: the catalog only holds hosted providers'
published windows (a local engine's window is a server setting, so the catalog leaves it
unknown and discovery supplies it); discovery is the provider describing itself; a probe
measured it; an override is the user's deliberate word. What keeps the gate safe is
therefore not distrust of a layer but two other rules: an unknown window never refuses,
and the gate compares only the estimate's floor, never its ceiling.
"""

_INT_FIELDS = ("context_window", "max_output_tokens")
_BOOL_FIELDS = (
    "tools",
    "parallel_tools",
    "json_mode",
    "json_schema",
    "grammar",
    "reasoning",
    "vision",
    "documents",
    "audio",
    "streaming_usage",
)
EMBEDDING_FIELDS: tuple[str, ...] = (
    "embed_dimensions",
    "embed_dimensions_param",
    "embed_dimension_options",
    "embed_max_dimensions",
    "embed_max_batch",
    "embed_max_input_tokens",
    "embed_input_types",
)
"""The embedding models' capability fields, in declaration order."""
_POSITIVE_FIELDS = frozenset(
    (
        *_INT_FIELDS,
        "embed_dimensions",
        "embed_max_dimensions",
        "embed_max_batch",
        "embed_max_input_tokens",
    )
)
_FLAG_FIELDS = frozenset((*_BOOL_FIELDS, "embed_dimensions_param"))
_SIZES_FIELDS = frozenset({"embed_dimension_options"})
_NAMES_FIELDS = frozenset({"embed_input_types"})
CAPABILITY_FIELDS: tuple[str, ...] = _INT_FIELDS + _BOOL_FIELDS + EMBEDDING_FIELDS
"""The capability fields, in declaration order (`provenance` excluded)."""
_FIELD_NAMES = frozenset(CAPABILITY_FIELDS)

_KINDS = {
    name: "a positive int"
    if name in _POSITIVE_FIELDS
    else "a bool"
    if name in _FLAG_FIELDS
    else "a tuple of positive ints"
    if name in _SIZES_FIELDS
    else "a tuple of non-empty strings"
    for name in CAPABILITY_FIELDS
}

CapabilityValue = int | bool | tuple[int, ...] | tuple[str, ...]
"""What one known capability field holds."""


def _valid(name: str, value: Any) -> bool:
    """Whether `value` is of the right shape for field `name` (`None` is not)."""
    if name in _POSITIVE_FIELDS:
        return isinstance(value, int) and not isinstance(value, bool) and value > 0
    if name in _FLAG_FIELDS:
        return isinstance(value, bool)
    if name in _SIZES_FIELDS:
        return isinstance(value, tuple) and all(
            isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in value
        )
    return isinstance(value, tuple) and all(isinstance(v, str) and v for v in value)


def _tupled(name: str, value: Any) -> Any:
    """A JSON list for a tuple-valued field as a tuple (other values unchanged)."""
    if (name in _SIZES_FIELDS or name in _NAMES_FIELDS) and isinstance(value, list):
        return tuple(value)
    return value


def is_trusted(provenance: Provenance | None) -> bool:
    """Whether a fact of this provenance may gate a request.

    Args:
        provenance: The layer that supplied the fact; `None` when nobody did.

    Returns:
        `True` for the provenances in `TRUSTED_PROVENANCES`; `False` for `None`.
    """
    return provenance is not None and provenance in TRUSTED_PROVENANCES


class _FrozenMap(Mapping[str, "Provenance"]):
    """A read-only, hashable, picklable mapping (a `MappingProxyType` is none of the last two)."""

    __slots__ = ("_data",)

    def __init__(self, data: Mapping[str, Provenance] | None = None) -> None:
        self._data = dict(data or {})

    def __getitem__(self, key: str) -> Provenance:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __hash__(self) -> int:
        return hash(frozenset(self._data.items()))

    def __repr__(self) -> str:
        return repr(self._data)


@value_class
class ModelCapabilities:
    """What one model can do, as far as anybody knows.

    Every field is optional: `None` means unknown, never "no".

    Attributes:
        context_window: Tokens the model can attend to (for providers that publish
            separate input and output limits, the input limit).
        max_output_tokens: The most tokens one response may contain.
        tools: Accepts tool (function) declarations.
        parallel_tools: May call several tools in one response.
        json_mode: Can be constrained to emit some JSON object.
        json_schema: Can be constrained to a caller-supplied JSON Schema.
        grammar: Can be constrained to a formal grammar (GBNF and the like).
        reasoning: Produces hidden reasoning/thinking before answering.
        vision: Accepts images in user messages (`ImageContent`).
        documents: Accepts PDF documents in user messages (`DocumentContent`).
        audio: Accepts audio in user messages (`AudioContent`).
        streaming_usage: Reports token usage in streamed responses.
        embed_dimensions: An embedding model's vector length when no `dimensions` is
            asked for.
        embed_dimensions_param: Whether `dimensions` may be passed at all (`False`: the
            model always answers with `embed_dimensions` and refuses the parameter).
        embed_dimension_options: The exact sizes `dimensions` may take, for models that
            offer a fixed set (Matryoshka sizes).
        embed_max_dimensions: `dimensions` may be any size up to this one.
        embed_max_batch: The most inputs one embedding request may carry.
        embed_max_input_tokens: The most tokens one input may have.
        embed_input_types: The `input_type` values the model distinguishes (empty: it
            takes none).
        provenance: Which layer supplied each known field, keyed by field name.
    """

    context_window: int | None = None
    max_output_tokens: int | None = None
    tools: bool | None = None
    parallel_tools: bool | None = None
    json_mode: bool | None = None
    json_schema: bool | None = None
    grammar: bool | None = None
    reasoning: bool | None = None
    vision: bool | None = None
    documents: bool | None = None
    audio: bool | None = None
    streaming_usage: bool | None = None
    embed_dimensions: int | None = None
    embed_dimensions_param: bool | None = None
    embed_dimension_options: tuple[int, ...] | None = None
    embed_max_dimensions: int | None = None
    embed_max_batch: int | None = None
    embed_max_input_tokens: int | None = None
    embed_input_types: tuple[str, ...] | None = None
    provenance: Mapping[str, Provenance] = field(default_factory=_FrozenMap)

    def __post_init__(self) -> None:
        for name in CAPABILITY_FIELDS:
            value = getattr(self, name)
            if value is None:
                continue
            if isinstance(value, list):  # a JSON list, or a caller's list: kept as a tuple
                value = _tupled(name, value)
                object.__setattr__(self, name, value)
            if not _valid(name, value):
                raise ConfigError(f"ModelCapabilities.{name} must be {_KINDS[name]}, got {value!r}")
        for name, layer in self.provenance.items():
            if name not in CAPABILITY_FIELDS or layer not in PROVENANCE_ORDER:
                raise ConfigError(f"bad provenance entry {name!r}: {layer!r}")
        if not isinstance(self.provenance, _FrozenMap):
            object.__setattr__(self, "provenance", _FrozenMap(self.provenance))

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> ModelCapabilities:
        """Build capabilities from a JSON-like mapping of field names to values.

        `None` values are allowed and mean unknown; `provenance` is not read.

        Raises:
            ConfigError: On an unknown key or a value of the wrong type.
        """
        unknown = data.keys() - _FIELD_NAMES
        if unknown:
            raise ConfigError(f"unknown capability field(s): {', '.join(sorted(unknown))}")
        return cls(**{k: data[k] for k in CAPABILITY_FIELDS if k in data})

    def known(self) -> dict[str, CapabilityValue]:
        """The known fields and their values."""
        return {
            name: value for name in CAPABILITY_FIELDS if (value := getattr(self, name)) is not None
        }

    def at(self, layer: Provenance) -> ModelCapabilities:
        """A copy whose every known field is marked as coming from `layer`."""
        known: dict[str, Any] = self.known()
        if type(self) is not ModelCapabilities:  # a subclass may add fields: keep them
            return replace(self, provenance=dict.fromkeys(known, layer))
        # Every other field is unknown (`None`, its default): built from the known ones
        # alone, without `replace()` reading all twenty fields (a catalog makes one per
        # model when it loads).
        return ModelCapabilities(**known, provenance=dict.fromkeys(known, layer))

    def source(self, name: str) -> Provenance | None:
        """The layer that supplied field `name`, or `None` when it is unknown."""
        if name not in CAPABILITY_FIELDS:
            raise KeyError(name)
        return self.provenance.get(name)

    def overlay(self, stronger: ModelCapabilities) -> ModelCapabilities:
        """Overlay `stronger`'s known fields (and their provenance) onto this one."""
        changes: dict[str, Any] = stronger.known()
        if not changes:
            return self
        provenance = dict(self.provenance)
        for name in changes:
            layer = stronger.provenance.get(name)
            if layer is None:
                provenance.pop(name, None)
            else:
                provenance[name] = layer
        return replace(self, **changes, provenance=provenance)


def split_key(key: str) -> tuple[str, str]:
    """Split a `"provider:model"` key at its first colon.

    Everything after the first colon is the model, so `"ollama:qwen3:8b"` is provider
    `ollama` and model `qwen3:8b`. The provider part is lower-cased.

    Raises:
        ConfigError: If the key has no colon or an empty half.
    """
    provider, sep, model = key.partition(":")
    provider = provider.strip().lower()
    model = model.strip()
    if not sep or not provider or not model:
        raise ConfigError(f"capability key {key!r} must look like 'provider:model'")
    return provider, model


def capabilities_from_discovery(discovered: Any) -> ModelCapabilities:
    """Turn one discovered model's report into capabilities at discovery provenance.

    Reads `context_window` and `max_output_tokens`, and from `facts` any key named like
    a capability field whose value has the right type; anything else is ignored, since
    a provider's listing is not ours to validate.

    Args:
        discovered: A `DiscoveredModel` (or anything with those attributes).

    Returns:
        The capabilities, every known field marked `discovery`.
    """
    values: dict[str, Any] = {}
    facts = getattr(discovered, "facts", None) or {}
    for name in CAPABILITY_FIELDS:
        value = getattr(discovered, name, None) if name in _INT_FIELDS else None
        if value is None:
            value = _tupled(name, facts.get(name))
        if value is not None and _valid(name, value):
            values[name] = value
    return ModelCapabilities(**values).at("discovery")


class CapabilityStore:
    """Capability layers per `"provider:model"`, assembled on demand.

    Keys name the provider *instance* (the alias when one is set). The catalog and
    override layers also fall back to the engine's provider id, so an instance aliased
    `"work"` of engine `"openai"` gets OpenAI's catalog facts, and an override keyed
    `"openai:gpt-4o"` applies to every OpenAI instance unless one keyed by the instance
    itself says otherwise. Discovery and probe facts are about one running instance and
    never cross to another.

    Thread-safe: recording and reading may happen from different threads.

    Args:
        catalog: Catalog supplying the catalog layer, if any.
        pricing: Pricing table whose context windows fill catalog-layer gaps, if any.
        overrides: Deliberate corrections keyed by `"provider:model"`. Every supplied
            field applies at override provenance.

    Raises:
        ConfigError: If an override key is malformed or a value is not
            `ModelCapabilities`.
    """

    def __init__(
        self,
        *,
        catalog: Catalog | None = None,
        pricing: PricingTable | None = None,
        overrides: Mapping[str, ModelCapabilities] | None = None,
    ) -> None:
        self._catalog = catalog
        self._pricing = pricing
        self._lock = threading.Lock()
        self._layers: dict[Provenance, dict[str, ModelCapabilities]] = {
            layer: {} for layer in PROVENANCE_ORDER
        }
        for key, caps in (overrides or {}).items():
            if not isinstance(caps, ModelCapabilities):
                raise ConfigError(
                    f"capability_overrides[{key!r}] must be ModelCapabilities, "
                    f"got {type(caps).__name__}"
                )
            self.record(key, caps, "override")

    @property
    def catalog(self) -> Catalog | None:
        """The catalog supplying the catalog layer."""
        return self._catalog

    def record(self, key: str, caps: ModelCapabilities, layer: Provenance) -> None:
        """Record facts for `key` in one layer.

        Within a layer, a later record's known fields replace earlier ones; unknown
        fields never erase what the layer already knew.

        Args:
            key: `"provider:model"`, the provider being the instance id.
            caps: The facts; their own provenance is ignored and set to `layer`.
            layer: The layer to record into.

        Raises:
            ConfigError: On a malformed key or an unknown layer.
        """
        if layer not in PROVENANCE_ORDER:
            raise ConfigError(f"unknown capability layer {layer!r}")
        norm = "{}:{}".format(*split_key(key))
        stamped = caps.at(layer)
        with self._lock:
            current = self._layers[layer].get(norm)
            self._layers[layer][norm] = stamped if current is None else current.overlay(stamped)

    def forget(self, key: str, layer: Provenance) -> None:
        """Drop what one layer recorded for `key` (e.g. after a provider restarts)."""
        norm = "{}:{}".format(*split_key(key))
        with self._lock:
            self._layers[layer].pop(norm, None)

    def layer(self, key: str, layer: Provenance) -> ModelCapabilities | None:
        """What one layer alone says about `key` (no fallbacks), if anything."""
        norm = "{}:{}".format(*split_key(key))
        with self._lock:
            return self._layers[layer].get(norm)

    def get(self, key: str, *, provider_id: str | None = None) -> ModelCapabilities:
        """Assemble the capabilities of `key`, field by field, strongest layer winning.

        Args:
            key: `"instance:model"`.
            provider_id: The instance's engine id, for catalog and override fallbacks;
                defaults to the instance id itself.

        Returns:
            The assembled capabilities; unknown fields are `None` and absent from
            `provenance`.
        """
        instance, model = split_key(key)
        engine = (provider_id or instance).strip().lower()
        norm = f"{instance}:{model}"
        result = self._catalog_layer(instance, engine, model)
        with self._lock:
            layers = {layer: dict(entries) for layer, entries in self._layers.items()}
        for layer in ("discovery", "probe"):
            found = layers[layer].get(norm)
            if found is not None:
                result = result.overlay(found)
        overrides = layers["override"]
        if engine != instance:
            engine_override = overrides.get(f"{engine}:{model}")
            if engine_override is not None:
                result = result.overlay(engine_override)
        own_override = overrides.get(norm)
        if own_override is not None:
            result = result.overlay(own_override)
        return result

    def _catalog_layer(self, instance: str, engine: str, model: str) -> ModelCapabilities:
        result = ModelCapabilities()
        if self._pricing is not None:
            window = self._pricing.context_window(engine, model)
            if window is not None:
                result = ModelCapabilities(context_window=window).at("catalog")
        if self._catalog is not None:
            facts = self._catalog.facts(engine, model)
            if facts is not None:
                result = result.overlay(facts)
            if engine != instance:
                facts = self._catalog.facts(instance, model)
                if facts is not None:
                    result = result.overlay(facts)
        with self._lock:
            recorded = [
                self._layers["catalog"].get(f"{p}:{model}")
                for p in dict.fromkeys((engine, instance))
            ]
        for entry in recorded:
            if entry is not None:
                result = result.overlay(entry)
        return result
