"""Model pricing and exact call cost.

Prices are `Decimal` US dollars per token. The bundled table (`anyinfer/data/pricing.json`)
holds standard-tier list prices for the catalog's hosted models, with the date they were
compiled; `fetch_pricing()` loads newer numbers from a URL when the application asks —
never implicitly. Tables load from this package's own JSON format or from the maintained
[genai-prices](https://github.com/pydantic/genai-prices) dataset.

Cost rule (`ModelPrice.cost`). With the whole prompt `P` (cache reads `R` and writes `W`
included), everything generated `G` (reasoning `Z` included)::

    (P - R - W) * input_price + R * cache_read_price + W * cache_write_price
      + (G - Z) * output_price + Z * reasoning_price

where reasoning is billed at the output price unless the model lists a separate reasoning
price, and a long-prompt tier is chosen by `P`. Adapters report usage as their provider
counts it, so `P` and `G` are derived per engine (`UsageConvention`): OpenAI-style
`input_tokens` (OpenAI, Azure, Gemini, OpenAI-compatible engines) already include cache
reads, Anthropic's exclude cache reads and writes; every built-in adapter's
`output_tokens` includes reasoning.

The result is exact. It is `None` — never a guess — when the model has no price, when
`input_tokens` or `output_tokens` is unknown, when cache or reasoning tokens were reported
that the model has no price for, or when the figures contradict each other (more cached
than total prompt tokens). Unreported cache and reasoning counts are taken as zero.

Embedding and reranking calls (`ModelPrice.unary_cost`) generate nothing, so their cost
is the input tokens at the input price — except for models billed per search unit
(Cohere's rerank models: one query with up to 100 documents is one unit), which carry a
`search_unit` price and are billed by the units the provider reported, tokens aside.
In the JSON format that price is per 1,000 search units, as Cohere publishes it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, date, datetime
from decimal import Context, Decimal, InvalidOperation, localcontext
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NamedTuple, TypeGuard

from .._adapters.profile import UsageConvention
from .._bundled import Bundled
from .._errors import ConfigError, ProviderError, ProviderTimeoutError
from .._values import value_class

if TYPE_CHECKING:
    import httpx

    from .._types import Usage

__all__ = [
    "DEFAULT_PRICING_URL",
    "DEFAULT_USAGE_CONVENTIONS",
    "PRICING_FORMAT",
    "ModelPrice",
    "PriceTier",
    "PricingTable",
    "UsageConvention",
    "afetch_pricing",
    "fetch_pricing",
]

PRICING_FORMAT = "anyinfer-pricing/1"
"""The `format` tag of this package's pricing JSON."""

DEFAULT_PRICING_URL = (
    "https://raw.githubusercontent.com/pydantic/genai-prices/main/prices/new_data/v2/data.json"
)
"""Where `fetch_pricing()` looks by default: the genai-prices v2 dataset, the same file the
`genai-prices` package itself refreshes from. It is maintained by the Pydantic team, MIT
licensed, and updated as providers change their prices."""

_MILLION = Decimal(1_000_000)
_THOUSAND = Decimal(1_000)
_EXACT = Context(prec=60)
_PRICE_FIELDS = ("input", "output", "cache_read", "cache_write", "reasoning")

_default: Bundled[PricingTable] = Bundled(
    "pricing.json", lambda doc: PricingTable.from_json(doc), parse_float=Decimal
)


def _decimal(value: Any, what: str) -> Decimal:
    if isinstance(value, bool):
        raise ConfigError(f"{what}: expected a price, got {value!r}")
    try:
        result = value if isinstance(value, Decimal) else Decimal(str(value))
    except (InvalidOperation, ValueError, TypeError):
        raise ConfigError(f"{what}: expected a price, got {value!r}") from None
    if not result.is_finite() or result < 0:
        raise ConfigError(f"{what}: expected a finite non-negative price, got {value!r}")
    return result


def _per_token(value: Any, what: str) -> Decimal:
    with localcontext(_EXACT):
        return _decimal(value, what) / _MILLION


def _per_thousand(value: Any, what: str) -> Decimal:
    with localcontext(_EXACT):
        return _decimal(value, what) / _THOUSAND


def _per_million(value: Decimal) -> str:
    with localcontext(_EXACT):
        return format((value * _MILLION).normalize(), "f")


@value_class
class PriceTier:
    """Prices that replace the base prices once a prompt is long enough.

    The whole request is billed at the tier's prices once `input_tokens` exceeds
    `above_input_tokens` (the "cliff" model Google and Anthropic use for long prompts).
    A `None` price keeps the base price.

    Attributes:
        above_input_tokens: The prompt size the request must exceed.
        input: USD per uncached input token.
        output: USD per output token.
        cache_read: USD per cache-read token.
        cache_write: USD per cache-write token.
        reasoning: USD per reasoning token.
    """

    above_input_tokens: int
    input: Decimal | None = None
    output: Decimal | None = None
    cache_read: Decimal | None = None
    cache_write: Decimal | None = None
    reasoning: Decimal | None = None


@value_class
class ModelPrice:
    """One model's prices, in US dollars per token.

    Attributes:
        input: Per uncached input token.
        output: Per output token.
        cache_read: Per input token served from the prompt cache; `None` when unpriced.
        cache_write: Per input token written to the prompt cache; `None` when unpriced.
        reasoning: Per reasoning token when billed differently from output; `None` means
            reasoning tokens are billed as output (they are part of `output_tokens`).
        tiers: Long-prompt tiers, ascending by threshold.
        search_unit: Per search unit, for models billed by search units instead of
            tokens (Cohere's rerank models); `None` for token-billed models.
    """

    input: Decimal
    output: Decimal
    cache_read: Decimal | None = None
    cache_write: Decimal | None = None
    reasoning: Decimal | None = None
    tiers: tuple[PriceTier, ...] = ()
    search_unit: Decimal | None = None

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "tiers", tuple(sorted(self.tiers, key=lambda t: t.above_input_tokens))
        )

    @classmethod
    def per_million(
        cls,
        input: Decimal | str | int,
        output: Decimal | str | int,
        *,
        cache_read: Decimal | str | int | None = None,
        cache_write: Decimal | str | int | None = None,
        reasoning: Decimal | str | int | None = None,
        tiers: Sequence[PriceTier] = (),
    ) -> ModelPrice:
        """Build from prices per million tokens, as providers publish them.

        Tiers must already be per token (`PriceTier` values are per token).

        Raises:
            ConfigError: On a negative or non-numeric price.
        """
        return cls(
            input=_per_token(input, "input"),
            output=_per_token(output, "output"),
            cache_read=None if cache_read is None else _per_token(cache_read, "cache_read"),
            cache_write=None if cache_write is None else _per_token(cache_write, "cache_write"),
            reasoning=None if reasoning is None else _per_token(reasoning, "reasoning"),
            tiers=tuple(tiers),
        )

    def for_prompt(self, input_tokens: int) -> ModelPrice:
        """The prices that apply to a request with this many prompt tokens."""
        applied = self
        for tier in self.tiers:
            if input_tokens > tier.above_input_tokens:
                changes = {
                    name: value
                    for name in _PRICE_FIELDS
                    if (value := getattr(tier, name)) is not None
                }
                applied = replace(self, **changes, tiers=())
        return applied if applied is not self else replace(self, tiers=())

    def unary_cost(
        self,
        usage: Usage,
        search_units: int | None = None,
        convention: UsageConvention | None = None,
    ) -> Decimal | None:
        """The exact cost of one embedding or rerank request, or `None` when unknown.

        A model with a `search_unit` price costs `search_units` of them (its tokens are
        not billed); `None` when the provider reported no units. Any other model costs
        its input tokens at the input price (nothing is generated, so a missing
        `output_tokens` counts as 0); `None` when `input_tokens` is unknown.

        Args:
            usage: The request's usage, as the adapter reports it.
            search_units: Billed search units, where the provider reports them.
            convention: How the adapter counts usage; OpenAI-style by default.
        """
        if self.search_unit is not None:
            if search_units is None or search_units < 0:
                return None
            with localcontext(_EXACT):
                return search_units * self.search_unit
        if usage.input_tokens is None:
            return None
        return self.cost(replace(usage, output_tokens=usage.output_tokens or 0), convention)

    def cost(self, usage: Usage, convention: UsageConvention | None = None) -> Decimal | None:
        """The exact cost of one call, or `None` when it cannot be known.

        Args:
            usage: The call's usage, as the engine's adapter reports it.
            convention: How that adapter counts; OpenAI-style by default.

        See the module docstring for the rule and for when the result is `None`.
        """
        conv = convention or UsageConvention()
        inp, out = usage.input_tokens, usage.output_tokens
        if inp is None or out is None:
            return None
        cache_read = usage.cache_read_tokens or 0
        cache_write = usage.cache_write_tokens or 0
        reasoning = usage.reasoning_tokens
        if conv.input_includes_cache:
            prompt, uncached = inp, inp - cache_read - cache_write
        else:
            prompt, uncached = inp + cache_read + cache_write, inp
        generated = out if conv.output_includes_reasoning else out + (reasoning or 0)
        if min(inp, out, cache_read, cache_write, uncached, reasoning or 0) < 0:
            return None
        price = self.for_prompt(prompt)
        if (cache_read and price.cache_read is None) or (cache_write and price.cache_write is None):
            return None
        with localcontext(_EXACT):
            total = uncached * price.input + generated * price.output
            if cache_read:
                assert price.cache_read is not None
                total += cache_read * price.cache_read
            if cache_write:
                assert price.cache_write is not None
                total += cache_write * price.cache_write
            if price.reasoning is not None and price.reasoning != price.output:
                if reasoning is None or reasoning > generated:
                    return None
                total += reasoning * (price.reasoning - price.output)
            return total


DEFAULT_USAGE_CONVENTIONS: Mapping[str, UsageConvention] = MappingProxyType({})
"""Table-level conventions a default table starts with: none, since each adapter declares
its own in `AdapterProfile.usage` (kept for code that passes it as `conventions=`)."""


def _profile_convention(provider_id: str) -> UsageConvention | None:
    """The usage convention the default registry's adapter class declares, if any."""
    from .._adapters.registry import default_registry

    registry = default_registry()
    if provider_id not in registry:
        return None
    return registry.adapter_class(provider_id).profile.usage


# --- model-name matching -------------------------------------------------------------


_LEAVES = ("equals", "starts_with", "ends_with", "contains", "regex")
"""The clause kinds that test the name itself (`or` and `and` hold clauses)."""


class _Clause(NamedTuple):
    """A case-insensitive model-name predicate, in genai-prices' clause vocabulary.

    `_Clause` and `_Entry` are named tuples, not dataclasses: the client imports this
    module for `Usage.cost_usd`, and creating a frozen dataclass costs about a
    millisecond at import (a named tuple about a seventh of that).
    """

    kind: str
    value: str | tuple[_Clause, ...]

    @classmethod
    def parse(cls, data: Any, where: str) -> _Clause:
        if not isinstance(data, Mapping) or len(data) != 1:
            raise ConfigError(f"{where}: a match clause is an object with exactly one key")
        ((kind, value),) = data.items()
        if kind in ("or", "and"):
            if isinstance(value, str) or not isinstance(value, Sequence) or not value:
                raise ConfigError(f"{where}: {kind!r} takes a non-empty list of clauses")
            return cls(kind, tuple(cls.parse(v, where) for v in value))
        if kind not in _LEAVES or not isinstance(value, str):
            raise ConfigError(f"{where}: unknown match clause {kind!r}")
        if kind == "regex":
            try:
                re.compile(value)
            except re.error as exc:
                raise ConfigError(f"{where}: bad regex {value!r}: {exc}") from None
        return cls(kind, value)

    def matches(self, name: str) -> bool:
        """Whether `name` (already lower-cased) satisfies this clause."""
        value = self.value
        if isinstance(value, tuple):
            results = (clause.matches(name) for clause in value)
            return any(results) if self.kind == "or" else all(results)
        if self.kind == "regex":
            return re.search(value, name) is not None
        needle = value.lower()
        if self.kind == "equals":
            return name == needle
        if self.kind == "starts_with":
            return name.startswith(needle)
        if self.kind == "ends_with":
            return name.endswith(needle)
        return needle in name

    def to_json(self) -> dict[str, Any]:
        value = self.value
        if isinstance(value, tuple):
            return {self.kind: [c.to_json() for c in value]}
        return {self.kind: value}


class _Entry(NamedTuple):
    provider: str
    model: str
    price: ModelPrice
    aliases: tuple[str, ...] = ()
    match: _Clause | None = None
    context_window: int | None = None


# --- the table -----------------------------------------------------------------------


class PricingTable:
    """Prices per provider and model.

    Lookup matches a model name exactly (case-insensitively) against each entry's name
    and its listed aliases first, then against entries' explicit match rules (prefixes
    and the like) in table order. Nothing is inferred: a dated snapshot such as
    `gpt-4o-mini-2024-07-18` is priced only because the table lists it as an alias.

    Build one with `default()`, `from_json()`, `from_genai_prices()` or `fetch_pricing()`,
    or directly from `{"provider:model": ModelPrice}`.

    Args:
        prices: `"provider_id:model"` → price.
        fallbacks: Engine id → engine ids whose prices it may use when it has none of its
            own (one level).
        as_of: When the prices were compiled.
        source: Where they came from.
        conventions: Engine id → how its adapter counts usage, over what the adapter
            class declares in `AdapterProfile.usage` (see `cost`).
    """

    def __init__(
        self,
        prices: Mapping[str, ModelPrice] | None = None,
        *,
        fallbacks: Mapping[str, Sequence[str]] | None = None,
        as_of: str | None = None,
        source: str | None = None,
        conventions: Mapping[str, UsageConvention] | None = None,
    ) -> None:
        entries = []
        for key, price in (prices or {}).items():
            provider, sep, model = key.partition(":")
            if not sep or not provider.strip() or not model.strip():
                raise ConfigError(f"pricing key {key!r} must look like 'provider:model'")
            if not isinstance(price, ModelPrice):
                raise ConfigError(f"pricing[{key!r}] must be a ModelPrice")
            entries.append(_Entry(provider.strip().lower(), model.strip(), price))
        self._init(entries, fallbacks or {}, as_of, source, conventions)

    def _init(
        self,
        entries: Iterable[_Entry],
        fallbacks: Mapping[str, Sequence[str]],
        as_of: str | None,
        source: str | None,
        conventions: Mapping[str, UsageConvention] | None = None,
    ) -> None:
        self._entries = tuple(entries)
        exact: dict[tuple[str, str], _Entry] = {}
        ruled: dict[str, list[_Entry]] = {}
        for entry in self._entries:
            for name in (entry.model, *entry.aliases):
                exact.setdefault((entry.provider, name.lower()), entry)
            if entry.match is not None:
                ruled.setdefault(entry.provider, []).append(entry)
        self._exact = exact
        self._ruled = {p: tuple(es) for p, es in ruled.items()}
        self._fallbacks = MappingProxyType(
            {p.strip().lower(): tuple(x.strip().lower() for x in fb) for p, fb in fallbacks.items()}
        )
        self._conventions = MappingProxyType(
            {
                p.strip().lower(): c
                for p, c in (
                    DEFAULT_USAGE_CONVENTIONS if conventions is None else conventions
                ).items()
            }
        )
        self.as_of = as_of
        self.source = source

    @property
    def conventions(self) -> Mapping[str, UsageConvention]:
        """Per-engine usage conventions used by `cost`."""
        return self._conventions

    @classmethod
    def _from_entries(
        cls,
        entries: Iterable[_Entry],
        *,
        fallbacks: Mapping[str, Sequence[str]] | None = None,
        as_of: str | None = None,
        source: str | None = None,
        conventions: Mapping[str, UsageConvention] | None = None,
    ) -> PricingTable:
        table = cls.__new__(cls)
        table._init(entries, fallbacks or {}, as_of, source, conventions)
        return table

    # --- loading -----------------------------------------------------------------------

    @classmethod
    def default(cls) -> PricingTable:
        """The table bundled with this release, read once and cached."""
        return _default.get()

    @classmethod
    def from_json(cls, source: str | Path | Mapping[str, Any]) -> PricingTable:
        """Load a table in this package's format (`"format": "anyinfer-pricing/1"`).

        Prices are per million tokens, as strings or numbers:

            {"format": "anyinfer-pricing/1", "as_of": "2026-11-29",
             "providers": {"openai": {"gpt-4o-mini": {
                 "input": "0.15", "output": "0.60", "cache_read": "0.075",
                 "aliases": ["gpt-4o-mini-2024-07-18"]}}}}

        A model may also carry `cache_write`, `reasoning`, `prefixes` (names starting
        with one of them match), `match` (a genai-prices style clause), `tiers`
        (`[{"above_input_tokens": 200000, "input": "2.50", ...}]`) and
        `context_window`; the document may carry `fallbacks`, `as_of` and `source`.

        Args:
            source: A path to such a file, or the parsed document.

        Raises:
            ConfigError: If the file cannot be read or the document is malformed.
        """
        data = _read_json(source, "pricing table")
        if not isinstance(data, Mapping) or data.get("format") != PRICING_FORMAT:
            raise ConfigError(
                f"a pricing table must be a JSON object with format {PRICING_FORMAT!r}"
            )
        providers = data.get("providers")
        if not isinstance(providers, Mapping):
            raise ConfigError("pricing table: 'providers' must be an object")
        entries: list[_Entry] = []
        for provider, models in providers.items():
            if not isinstance(models, Mapping):
                raise ConfigError(f"pricing table: provider {provider!r} must map model names")
            for model, spec in models.items():
                entries.append(_entry_from_ours(str(provider).strip().lower(), str(model), spec))
        fallbacks = data.get("fallbacks") or {}
        if not isinstance(fallbacks, Mapping):
            raise ConfigError("pricing table: 'fallbacks' must be an object")
        return cls._from_entries(
            entries,
            fallbacks=fallbacks,
            as_of=_opt_str(data.get("as_of")),
            source=_opt_str(data.get("source")),
        )

    @classmethod
    def from_genai_prices(
        cls,
        source: str | Path | Sequence[Any],
        *,
        provider_map: Mapping[str, str] | None = None,
        at: date | datetime | None = None,
    ) -> PricingTable:
        """Load the genai-prices dataset (its v2 `data.json` / `data_slim.json`).

        Takes each model's standard prices in force on `at` (today by default; dated
        price changes are honoured, service-tier and batch variants are not). A model is
        left out — so its cost stays unknown — when its price depends on the time of day,
        lacks an input or output token price, or charges for something a chat call
        always or possibly incurs that `Usage` does not count (per-request fees,
        separately priced image tokens, citations). Prices for units AnyInfer never
        sends (audio, video, web search, one-hour cache writes) are ignored.

        Args:
            source: A path to the JSON file, or the parsed list of providers.
            provider_map: genai-prices provider id → AnyInfer engine id, added to the
                defaults (`google` → `gemini`, `azure` → `azure-foundry`); other ids are
                kept as they are.
            at: The date whose prices to take.

        Raises:
            ConfigError: If the data is not in the expected shape.
        """
        data = _read_json(source, "genai-prices data")
        if not isinstance(data, Sequence) or isinstance(data, str | bytes):
            raise ConfigError("genai-prices data must be a JSON list of providers")
        mapping = {**_GENAI_PROVIDER_MAP, **(provider_map or {})}
        when = _as_date(at)
        entries: list[_Entry] = []
        fallbacks: dict[str, list[str]] = {"openai-responses": ["openai"]}
        for provider in data:
            if not isinstance(provider, Mapping) or not isinstance(provider.get("id"), str):
                raise ConfigError("genai-prices data: each provider needs an 'id'")
            genai_id: str = provider["id"]
            ours = mapping.get(genai_id, genai_id).strip().lower()
            fb = provider.get("fallback_model_providers") or ()
            if fb:
                fallbacks[ours] = [mapping.get(str(p), str(p)).lower() for p in fb]
            models = provider.get("models") or ()
            if not isinstance(models, Sequence):
                raise ConfigError(f"genai-prices data: {provider['id']!r} models must be a list")
            for model in models:
                entry = _entry_from_genai(ours, model, when)
                if entry is not None:
                    entries.append(entry)
        return cls._from_entries(
            entries,
            fallbacks=fallbacks,
            as_of=when.isoformat(),
            source="genai-prices (https://github.com/pydantic/genai-prices)",
        )

    # --- queries -----------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"PricingTable(models={len(self._entries)}, as_of={self.as_of!r})"

    def _find(self, provider_id: str, model: str) -> _Entry | None:
        name = model.strip().lower()
        provider = provider_id.strip().lower()
        for engine in (provider, *self._fallbacks.get(provider, ())):
            entry = self._exact.get((engine, name))
            if entry is not None:
                return entry
            for candidate in self._ruled.get(engine, ()):
                assert candidate.match is not None
                if candidate.match.matches(name):
                    return candidate
        return None

    def lookup(self, provider_id: str, model: str) -> ModelPrice | None:
        """The price of a model at an engine, or `None` when the table has none."""
        entry = self._find(provider_id, model)
        return None if entry is None else entry.price

    def context_window(self, provider_id: str, model: str) -> int | None:
        """The context window the table records for a model, if any."""
        entry = self._find(provider_id, model)
        return None if entry is None else entry.context_window

    def cost(
        self,
        usage: Usage,
        provider_id: str,
        model: str,
        *,
        convention: UsageConvention | None = None,
    ) -> Decimal | None:
        """The exact cost of one call, or `None` when it cannot be known.

        Args:
            usage: The call's usage, as the engine's adapter reported it.
            provider_id: The engine id that served it (not the instance alias).
            model: The model name as sent.
            convention: How the adapter counts usage. A convention this table sets for
                the engine (`conventions=`) wins; then this one; then the profile of
                the adapter class registered under `provider_id` in the default
                registry (`AdapterProfile.usage`); otherwise the OpenAI way.
        """
        price = self.lookup(provider_id, model)
        if price is None:
            return None
        pid = provider_id.strip().lower()
        chosen = self._conventions.get(pid) or convention or _profile_convention(pid)
        return price.cost(usage, chosen)

    def unary_cost(
        self,
        usage: Usage,
        provider_id: str,
        model: str,
        *,
        search_units: int | None = None,
        convention: UsageConvention | None = None,
    ) -> Decimal | None:
        """The exact cost of one embedding or rerank request (`ModelPrice.unary_cost`),
        or `None` when it cannot be known. Arguments as for `cost`, plus the billed
        `search_units` where the provider reports them."""
        price = self.lookup(provider_id, model)
        if price is None:
            return None
        pid = provider_id.strip().lower()
        chosen = self._conventions.get(pid) or convention or _profile_convention(pid)
        return price.unary_cost(usage, search_units, chosen)

    def merged(self, newer: PricingTable) -> PricingTable:
        """A table where `newer`'s entries win and this one's fill the gaps."""
        return PricingTable._from_entries(
            (*newer._entries, *self._entries),
            fallbacks={**self._fallbacks, **newer._fallbacks},
            as_of=newer.as_of or self.as_of,
            source=newer.source or self.source,
            conventions={**self._conventions, **newer._conventions},
        )

    def to_json(self) -> dict[str, Any]:
        """This table in this package's format, e.g. to keep a fetched table offline."""
        providers: dict[str, dict[str, Any]] = {}
        for entry in self._entries:
            models = providers.setdefault(entry.provider, {})
            if entry.model in models:
                continue
            models[entry.model] = _entry_to_ours(entry)
        doc: dict[str, Any] = {"format": PRICING_FORMAT}
        if self.as_of:
            doc["as_of"] = self.as_of
        if self.source:
            doc["source"] = self.source
        doc["unit"] = "per_million_tokens"
        if self._fallbacks:
            doc["fallbacks"] = {p: list(fb) for p, fb in self._fallbacks.items()}
        doc["providers"] = providers
        return doc


# --- our JSON format -----------------------------------------------------------------


def _opt_str(value: Any) -> str | None:
    return None if value is None else str(value)


def _read_json(source: Any, what: str) -> Any:
    if isinstance(source, str | Path):
        try:
            return json.loads(Path(source).read_text("utf-8"), parse_float=Decimal)
        except (OSError, ValueError) as exc:
            raise ConfigError(f"cannot read {what} {str(source)!r}: {exc}") from None
    return source


def _entry_from_ours(provider: str, model: str, spec: Any) -> _Entry:
    where = f"pricing {provider}:{model}"
    if not isinstance(spec, Mapping):
        raise ConfigError(f"{where}: expected an object")
    known = {
        *_PRICE_FIELDS,
        "aliases",
        "prefixes",
        "match",
        "tiers",
        "context_window",
        "search_unit",
    }
    unknown = set(spec) - known
    if unknown:
        raise ConfigError(f"{where}: unknown field(s) {', '.join(sorted(unknown))}")
    if "input" not in spec or "output" not in spec:
        raise ConfigError(f"{where}: 'input' and 'output' prices are required")
    tiers = []
    for tier in spec.get("tiers") or ():
        if not isinstance(tier, Mapping) or not _is_count(tier.get("above_input_tokens")):
            raise ConfigError(f"{where}: each tier needs an integer 'above_input_tokens'")
        extra = set(tier) - {*_PRICE_FIELDS, "above_input_tokens"}
        if extra:
            raise ConfigError(f"{where}: unknown tier field(s) {', '.join(sorted(extra))}")
        tiers.append(
            PriceTier(
                above_input_tokens=tier["above_input_tokens"],
                **{
                    name: _per_token(tier[name], f"{where} tier {name}")
                    for name in _PRICE_FIELDS
                    if tier.get(name) is not None
                },
            )
        )
    price = ModelPrice(
        input=_per_token(spec["input"], f"{where} input"),
        output=_per_token(spec["output"], f"{where} output"),
        **{
            name: _per_token(spec[name], f"{where} {name}")
            for name in ("cache_read", "cache_write", "reasoning")
            if spec.get(name) is not None
        },
        tiers=tuple(tiers),
        search_unit=None
        if spec.get("search_unit") is None
        else _per_thousand(spec["search_unit"], f"{where} search_unit"),
    )
    aliases = _names(spec.get("aliases"), f"{where} aliases")
    prefixes = _names(spec.get("prefixes"), f"{where} prefixes")
    clauses: list[_Clause] = [_Clause("starts_with", p) for p in prefixes]
    if spec.get("match") is not None:
        clauses.append(_Clause.parse(spec["match"], where))
    match: _Clause | None = None
    if len(clauses) == 1:
        match = clauses[0]
    elif clauses:
        match = _Clause("or", tuple(clauses))
    window = spec.get("context_window")
    if window is not None and not (_is_count(window) and window > 0):
        raise ConfigError(f"{where}: context_window must be a positive integer")
    return _Entry(provider, model, price, aliases, match, window)


def _entry_to_ours(entry: _Entry) -> dict[str, Any]:
    price = entry.price
    spec: dict[str, Any] = {}
    for name in _PRICE_FIELDS:
        value = getattr(price, name)
        if value is not None:
            spec[name] = _per_million(value)
    if price.search_unit is not None:
        with localcontext(_EXACT):
            spec["search_unit"] = format((price.search_unit * _THOUSAND).normalize(), "f")
    if entry.aliases:
        spec["aliases"] = list(entry.aliases)
    if entry.match is not None:
        spec["match"] = entry.match.to_json()
    if price.tiers:
        spec["tiers"] = [
            {"above_input_tokens": t.above_input_tokens}
            | {n: _per_million(v) for n in _PRICE_FIELDS if (v := getattr(t, n)) is not None}
            for t in price.tiers
        ]
    if entry.context_window is not None:
        spec["context_window"] = entry.context_window
    return spec


def _names(value: Any, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise ConfigError(f"{where}: expected a list of names")
    if not all(isinstance(v, str) and v.strip() for v in value):
        raise ConfigError(f"{where}: expected a list of names")
    return tuple(v.strip() for v in value)


def _is_count(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


# --- genai-prices ----------------------------------------------------------------------

_GENAI_PROVIDER_MAP = {"google": "gemini", "azure": "azure-foundry"}
_GENAI_KEYS = {
    "input_mtok": "input",
    "output_mtok": "output",
    "cache_read_mtok": "cache_read",
    "cache_write_mtok": "cache_write",
    "output_reasoning_mtok": "reasoning",
}
# Units AnyInfer never sends, so their prices cannot apply to its calls.
_GENAI_IGNORED = frozenset(
    {
        "input_audio_mtok",
        "output_audio_mtok",
        "cache_audio_read_mtok",
        "input_video_mtok",
        "output_video_mtok",
        "web_searches_kcount",
        "storage_searches_kcount",
        "cache_write_1h_mtok",
    }
)


def _as_date(at: date | datetime | None) -> date:
    if at is None:
        return datetime.now(UTC).date()
    if isinstance(at, datetime):
        return (at.astimezone(UTC) if at.tzinfo else at).date()
    return at


def _entry_from_genai(provider: str, model: Any, when: date) -> _Entry | None:
    if not isinstance(model, Mapping) or not isinstance(model.get("id"), str):
        raise ConfigError(f"genai-prices data: a {provider!r} model lacks an 'id'")
    model_id: str = model["id"]
    where = f"genai-prices {provider}:{model_id}"
    prices = _genai_prices_on(model.get("prices"), when, where)
    if prices is None:
        return None
    values: dict[str, Decimal] = {}
    tiers: dict[int, dict[str, Decimal]] = {}
    for key, raw in prices.items():
        if raw is None or key in _GENAI_IGNORED:
            continue
        ours = _GENAI_KEYS.get(key)
        if ours is None:
            return None  # a unit Usage does not count could apply: the cost is unknowable
        if isinstance(raw, Mapping):
            values[ours] = _per_token(raw.get("base"), where)
            for tier in raw.get("tiers") or ():
                if not isinstance(tier, Mapping) or not _is_count(tier.get("start")):
                    raise ConfigError(f"{where}: bad price tier {tier!r}")
                tiers.setdefault(tier["start"], {})[ours] = _per_token(tier.get("price"), where)
        else:
            values[ours] = _per_token(raw, where)
    if "input" not in values or "output" not in values:
        return None
    price_tiers = []
    running: dict[str, Decimal] = {}
    for start in sorted(tiers):
        # genai-prices tiers are per field; a field without its own tier at this start
        # keeps whatever tier (or base) price applied below it.
        running.update(tiers[start])
        price_tiers.append(PriceTier(above_input_tokens=start, **running))
    price = ModelPrice(
        input=values["input"],
        output=values["output"],
        cache_read=values.get("cache_read"),
        cache_write=values.get("cache_write"),
        reasoning=values.get("reasoning"),
        tiers=tuple(price_tiers),
    )
    match = _Clause.parse(model["match"], where) if model.get("match") is not None else None
    window = model.get("context_window")
    return _Entry(
        provider,
        model_id,
        price,
        (),
        match,
        window if _is_count(window) and window > 0 else None,
    )


def _genai_prices_on(prices: Any, when: date, where: str) -> Mapping[str, Any] | None:
    if isinstance(prices, Mapping):
        return prices
    if isinstance(prices, str) or not isinstance(prices, Sequence) or not prices:
        raise ConfigError(f"{where}: 'prices' must be an object or a list of conditional prices")
    chosen: Mapping[str, Any] | None = None
    for conditional in prices:
        if not isinstance(conditional, Mapping) or not isinstance(
            conditional.get("prices"), Mapping
        ):
            raise ConfigError(f"{where}: bad conditional price")
        constraint = conditional.get("constraint")
        if constraint is None:
            active = True
        elif isinstance(constraint, Mapping) and "start_date" in constraint:
            try:
                active = date.fromisoformat(str(constraint["start_date"])) <= when
            except ValueError:
                raise ConfigError(f"{where}: bad start_date {constraint!r}") from None
        else:
            return None  # time-of-day pricing: the price depends on when the call ran
        if active:
            chosen = conditional["prices"]  # the last active price wins
    if chosen is None:
        chosen = prices[0]["prices"]
    return chosen


# --- fetching ------------------------------------------------------------------------


def _parse_fetched(content: bytes, url: str) -> PricingTable:
    try:
        data = json.loads(content, parse_float=Decimal)
    except ValueError as exc:
        raise ConfigError(f"pricing from {url} is not JSON: {exc}") from None
    if isinstance(data, Mapping):
        return PricingTable.from_json(data)
    if isinstance(data, list):
        return PricingTable.from_genai_prices(data)
    raise ConfigError(f"pricing from {url} is neither an AnyInfer nor a genai-prices document")


def _fetch_error(exc: Exception, url: str) -> ProviderError:
    import httpx

    if isinstance(exc, httpx.TimeoutException):
        return ProviderTimeoutError(f"fetching pricing from {url} timed out", phase="discover")
    return ProviderError(
        f"fetching pricing from {url} failed: {type(exc).__name__}: {exc}",
        phase="discover",
        retryable=True,
    )


def _check_status(response: httpx.Response, url: str) -> None:
    if response.status_code != 200:
        raise ProviderError(
            f"fetching pricing from {url} failed: HTTP {response.status_code}",
            phase="discover",
            http_status=response.status_code,
            retryable=response.status_code >= 500 or response.status_code == 429,
        )


PRICING_URL_ENV = "ANYINFER_PRICING_URL"
"""Environment variable naming a pricing mirror that replaces `DEFAULT_PRICING_URL`."""


def _pricing_url(url: str | None) -> str:
    import os

    return url or os.environ.get(PRICING_URL_ENV) or DEFAULT_PRICING_URL


def fetch_pricing(
    url: str | None = None,
    *,
    timeout_s: float = 10.0,
    transport: httpx.BaseTransport | None = None,
) -> PricingTable:
    """Download a pricing table. Never called implicitly: the library works offline.

    Accepts this package's format and the genai-prices dataset (`DEFAULT_PRICING_URL`),
    telling them apart by shape. Pass the result as `AsyncClient(pricing_table=...)`,
    or `PricingTable.default().merged(result)` to keep bundled prices the download lacks.

    Args:
        url: Where to fetch from; defaults to `$ANYINFER_PRICING_URL`, else
            `DEFAULT_PRICING_URL`.
        timeout_s: Overall timeout, in seconds.
        transport: An httpx transport, for tests and proxies.

    Returns:
        The table.

    Raises:
        ProviderError: On a network failure or a non-200 answer
            (`ProviderTimeoutError` on a timeout).
        ConfigError: If the payload is not a pricing document.
    """
    import httpx

    url = _pricing_url(url)
    try:
        with httpx.Client(transport=transport, timeout=timeout_s, follow_redirects=True) as client:
            response = client.get(url, headers={"accept": "application/json"})
    except httpx.HTTPError as exc:
        raise _fetch_error(exc, url) from None
    _check_status(response, url)
    return _parse_fetched(response.content, url)


async def afetch_pricing(
    url: str | None = None,
    *,
    timeout_s: float = 10.0,
    transport: httpx.AsyncBaseTransport | None = None,
) -> PricingTable:
    """Async `fetch_pricing()`: the same contract, without blocking the event loop."""
    import httpx

    url = _pricing_url(url)
    try:
        async with httpx.AsyncClient(
            transport=transport, timeout=timeout_s, follow_redirects=True
        ) as client:
            response = await client.get(url, headers={"accept": "application/json"})
    except httpx.HTTPError as exc:
        raise _fetch_error(exc, url) from None
    _check_status(response, url)
    return _parse_fetched(response.content, url)
