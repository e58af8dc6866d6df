"""The alias catalog: short model names, and what the catalog knows about each model.

A catalog holds two things:

- **aliases** — a provider-neutral name (`"gpt-4o-mini"`, `"claude-sonnet"`,
  `"qwen3-8b"`) mapped to the model name each engine knows it by. An alias resolves to
  one `instance:model` per configured provider instance whose engine carries it, in the
  client's provider order; routing tries them in that order.
- **model facts** — `ModelCapabilities` per `"provider_id:model"`, the weakest
  (`catalog`) layer of capability assembly.

The bundled catalog ships as `anyinfer/data/catalog.json` and is read on first use, not
at import.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any

from .._bundled import Bundled
from .._errors import ConfigError
from .capabilities import ModelCapabilities, split_key

__all__ = ["CATALOG_FORMAT", "Catalog"]

CATALOG_FORMAT = "anyinfer-catalog/1"
"""The `format` tag of the catalog's JSON document."""

_default: Bundled[Catalog] = Bundled("catalog.json", lambda doc: Catalog.from_json(doc))


class Catalog:
    """Model aliases and per-model capability facts.

    Args:
        aliases: Alias → `{provider_id: model_name}`. Alias names are matched
            case-insensitively; a mapping may also be keyed by a provider *instance* id,
            which then wins over its engine's entry.
        models: `"provider_id:model"` → capabilities (a `ModelCapabilities` or a mapping
            of field names to values, optionally with `"also"`: alternate exact model
            names — dated snapshots — sharing the same facts).
        provider_fallbacks: Engine id → engine ids whose aliases and facts it may use
            when it has none of its own (e.g. an OpenAI Responses engine borrowing
            OpenAI's).
        as_of: When the catalog's facts were compiled, for display.

    Raises:
        ConfigError: On malformed keys or capability values.
    """

    def __init__(
        self,
        *,
        aliases: Mapping[str, Mapping[str, str]] | None = None,
        models: Mapping[str, ModelCapabilities | Mapping[str, Any]] | None = None,
        provider_fallbacks: Mapping[str, Sequence[str]] | None = None,
        as_of: str | None = None,
    ) -> None:
        alias_table: dict[str, MappingProxyType[str, str]] = {}
        for name, targets in (aliases or {}).items():
            key = _alias_key(name)
            if not isinstance(targets, Mapping) or not targets:
                raise ConfigError(f"catalog alias {name!r} must map provider ids to model names")
            clean: dict[str, str] = {}
            for provider, model in targets.items():
                if not isinstance(model, str) or not model.strip():
                    raise ConfigError(f"catalog alias {name!r}: bad model for {provider!r}")
                clean[provider.strip().lower()] = model.strip()
            alias_table[key] = MappingProxyType(clean)
        facts: dict[str, ModelCapabilities] = {}
        for key, value in (models or {}).items():
            provider, model = split_key(key)
            if isinstance(value, ModelCapabilities):
                caps, also = value, ()
            elif isinstance(value, Mapping):
                data = dict(value)
                also_raw = data.pop("also", ())
                if isinstance(also_raw, str) or not all(isinstance(a, str) for a in also_raw):
                    raise ConfigError(f"catalog model {key!r}: 'also' must be a list of names")
                also = tuple(also_raw)
                try:
                    caps = ModelCapabilities.from_mapping(data)
                except ConfigError as exc:
                    raise ConfigError(f"catalog model {key!r}: {exc}") from None
            else:
                raise ConfigError(f"catalog model {key!r} must be a mapping or ModelCapabilities")
            stamped = caps.at("catalog")
            for name in (model, *also):
                facts[f"{provider}:{name}"] = stamped
        self._aliases = MappingProxyType(alias_table)
        self._facts = facts
        self._facts_folded = {k.lower(): v for k, v in facts.items()}
        self._fallbacks = MappingProxyType(
            {
                p.strip().lower(): tuple(f.strip().lower() for f in fb)
                for p, fb in (provider_fallbacks or {}).items()
            }
        )
        self.as_of = as_of

    # --- construction ------------------------------------------------------------------

    @classmethod
    def load_default(cls) -> Catalog:
        """The catalog bundled with this release, read once and cached."""
        return _default.get()

    @classmethod
    def from_json(cls, source: str | Path | Mapping[str, Any]) -> Catalog:
        """Build a catalog from a JSON document in the bundled catalog's format.

        Args:
            source: A path to a JSON file, or the already-parsed document: an object with
                `aliases`, `models`, optionally `provider_fallbacks` and `as_of`.

        Raises:
            ConfigError: If the file cannot be read or the document is malformed.
        """
        if isinstance(source, str | Path):
            try:
                data: Any = json.loads(Path(source).read_text("utf-8"))
            except (OSError, ValueError) as exc:
                raise ConfigError(f"cannot read catalog {str(source)!r}: {exc}") from None
        else:
            data = source
        if not isinstance(data, Mapping):
            raise ConfigError("a catalog document must be a JSON object")
        fmt = data.get("format", CATALOG_FORMAT)
        if fmt != CATALOG_FORMAT:
            raise ConfigError(f"unsupported catalog format {fmt!r} (expected {CATALOG_FORMAT!r})")
        for section in ("aliases", "models", "provider_fallbacks"):
            if not isinstance(data.get(section, {}), Mapping):
                raise ConfigError(f"catalog section {section!r} must be an object")
        return cls(
            aliases=data.get("aliases"),
            models=data.get("models"),
            provider_fallbacks=data.get("provider_fallbacks"),
            as_of=data.get("as_of"),
        )

    def extended(
        self,
        *,
        aliases: Mapping[str, Mapping[str, str]] | None = None,
        models: Mapping[str, ModelCapabilities | Mapping[str, Any]] | None = None,
    ) -> Catalog:
        """A new catalog with these aliases and facts added to this one's.

        A supplied alias replaces an existing alias of that name whole. Supplied model
        facts are laid over an existing entry field by field: what they leave unknown
        keeps its current value.
        """
        merged_aliases: dict[str, Mapping[str, str]] = dict(self._aliases)
        merged_aliases.update({_alias_key(k): v for k, v in (aliases or {}).items()})
        merged_models: dict[str, ModelCapabilities | Mapping[str, Any]] = dict(self._facts)
        for key, caps in Catalog(models=models)._facts.items():
            current = self._facts.get(key)
            merged_models[key] = caps if current is None else current.overlay(caps)
        return Catalog(
            aliases=merged_aliases,
            models=merged_models,
            provider_fallbacks=self._fallbacks,
            as_of=self.as_of,
        )

    # --- queries -----------------------------------------------------------------------

    @property
    def aliases(self) -> Mapping[str, Mapping[str, str]]:
        """Alias → `{provider_id: model_name}`, read-only."""
        return self._aliases

    @property
    def models(self) -> Mapping[str, ModelCapabilities]:
        """`"provider_id:model"` → catalog facts (snapshot names included), read-only."""
        return MappingProxyType(self._facts)

    def __contains__(self, alias: object) -> bool:
        return isinstance(alias, str) and alias.strip().lower() in self._aliases

    def _chain(self, provider: str) -> tuple[str, ...]:
        # The provider itself, then its declared fallbacks (one level: no cycles).
        return (provider, *self._fallbacks.get(provider, ()))

    def resolve_alias(
        self, name: str, provider_order: Iterable[tuple[str, str]]
    ) -> list[tuple[str, str]]:
        """Resolve an alias against the configured providers.

        Args:
            name: The alias, e.g. `"claude-sonnet"`.
            provider_order: `(instance_id, provider_id)` for each configured provider
                instance, in the client's preference order.

        Returns:
            `(instance_id, model)` for each instance that can serve the alias, in
            `provider_order`; empty when the name is not an alias or no configured
            instance carries it.
        """
        targets = self._aliases.get(name.strip().lower())
        if targets is None:
            return []
        resolved: list[tuple[str, str]] = []
        for instance_id, provider_id in provider_order:
            instance = instance_id.strip().lower()
            model = targets.get(instance)
            if model is None:
                for engine in self._chain(provider_id.strip().lower()):
                    model = targets.get(engine)
                    if model is not None:
                        break
            if model is not None:
                resolved.append((instance_id, model))
        return resolved

    def facts(self, provider_id: str, model: str) -> ModelCapabilities | None:
        """The catalog's facts for one model, at `catalog` provenance.

        Matches the model name exactly first, then case-insensitively; then tries the
        provider's declared fallbacks the same way.

        Returns:
            The facts, or `None` when the catalog knows nothing about the model.
        """
        for engine in self._chain(provider_id.strip().lower()):
            key = f"{engine}:{model.strip()}"
            found = self._facts.get(key) or self._facts_folded.get(key.lower())
            if found is not None:
                return found
        return None

    def suggest(self, name: str, known_targets: Iterable[str] = (), *, limit: int = 3) -> list[str]:
        """Close matches for a name that resolved to nothing.

        Args:
            name: What the caller asked for, e.g. `"gpt4o-mini"`.
            known_targets: Other valid names to consider (configured `provider:model`
                targets, provider ids), alongside this catalog's aliases.
            limit: The most suggestions to return.

        Returns:
            Up to `limit` candidates, closest first.
        """
        import difflib

        candidates = list(dict.fromkeys([*self._aliases, *known_targets]))
        query = name.strip()
        found = difflib.get_close_matches(query, candidates, n=limit, cutoff=0.6)
        if not found:
            lowered = {c.lower(): c for c in candidates}
            folded = difflib.get_close_matches(query.lower(), list(lowered), n=limit, cutoff=0.6)
            found = [lowered[m] for m in folded]
        return found

    def unknown_target_error(self, name: str, known_targets: Iterable[str] = ()) -> ConfigError:
        """A `ConfigError` for an unresolvable target, naming close matches.

        Returns:
            e.g. `unknown target 'gpt4o-mini'; did you mean gpt-4o-mini?`
        """
        close = self.suggest(name, known_targets)
        hint = (
            f"; did you mean {', '.join(close)}?"
            if close
            else " (not a catalog alias of a configured provider; targets look like "
            "'provider:model')"
        )
        return ConfigError(f"unknown target {name!r}{hint}")

    def __repr__(self) -> str:
        return (
            f"Catalog(aliases={len(self._aliases)}, models={len(self._facts)}, "
            f"as_of={self.as_of!r})"
        )


def _alias_key(name: str) -> str:
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(f"bad catalog alias name {name!r}")
    key = name.strip().lower()
    if ":" in key:
        raise ConfigError(f"catalog alias {name!r} must not contain ':' (that names a provider)")
    return key
