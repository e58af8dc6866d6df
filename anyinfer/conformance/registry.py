"""Which adapters the conformance suite runs, and which dialect each one speaks.

Adapters come from four places, in this order:

1. AnyInfer's built-in adapters (each class names its dialect in
   `profile.conformance_dialect`);
2. functions registered under the `anyinfer.conformance` entry-point group, each called
   with the registry (`def configure(registry): registry.add(...)`);
3. `pytest_anyinfer_configure(registry)` implementations in conftest files and pytest
   plugins;
4. adapter classes registered under the `anyinfer.adapters` entry-point group whose
   `profile.conformance_dialect` names the dialect they speak.

Built-in and third-party classes are read the same way: this module keeps no table of
which provider speaks which dialect.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from anyinfer.adapters import Adapter
    from anyinfer.fakeservers import Dialect

__all__ = [
    "BUILTIN_ADAPTERS",
    "BUILTIN_VARIANTS",
    "CONFORMANCE_ENTRY_POINT_GROUP",
    "AdapterEntry",
    "ConformanceRegistry",
    "RegistryError",
    "standing",
]

_GLOB = re.compile(r"[*?\[]")

CONFORMANCE_ENTRY_POINT_GROUP = "anyinfer.conformance"
"""Entry-point group of `configure(registry)` functions installed packages provide."""

BUILTIN_ADAPTERS: tuple[tuple[str, str], ...] = ()
"""Kept for compatibility: empty, since every built-in class declares its dialect in
`profile.conformance_dialect`."""

BUILTIN_VARIANTS: tuple[tuple[str, str, str, dict[str, object]], ...] = (
    # (suite name, provider id, dialect, settings): built-ins whose other wire forms
    # need settings to reach.
    (
        "gemini-json-array",
        "gemini",
        "gemini-json-array",
        {"options": {"stream_format": "json-array"}},
    ),
    (
        "azure-deployments",
        "azure-foundry",
        "azure-openai",
        {"options": {"api": "openai-deployments"}},
    ),
)
"""Extra built-in entries: the same adapter on another wire form of its protocol."""

# Settings the harness owns: it points every adapter at a fake server.
_RESERVED_SETTINGS = frozenset({"provider_id", "base_url", "transport", "alias", "api_key"})


class RegistryError(ValueError):
    """An adapter or dialect registration is invalid."""


@dataclass(frozen=True, slots=True)
class AdapterEntry:
    """One adapter under test.

    Attributes:
        name: The provider id the suite registers it under; `--anyinfer-adapter`
            selects by this name and test ids carry it.
        adapter_class: The adapter class, or `None` to use the class AnyInfer's own
            provider registry has for `name`.
        dialect: Name of the dialect its fake server speaks.
        settings: Extra `ProviderSettings` fields (headers, options, api_version,
            timeout_s...).
        origin: Where the registration came from, for reports.
        stands_on: For a built-in OpenAI-compatible preset that reads responses exactly
            as another entry does (same dialect, settings, adapter code and reading
            quirks): that entry's name. When both are selected, the full property
            suite runs for that entry only, and this one gets its own entry check
            (`test_preset_entry`); the matrix shows its row as standing on that entry.
    """

    name: str
    adapter_class: type[Adapter] | None
    dialect: str
    settings: Mapping[str, Any] = field(default_factory=dict)
    origin: str = ""
    stands_on: str | None = None

    def resolve_class(self) -> type[Adapter]:
        """The adapter class, looked up in AnyInfer's registry when not given."""
        if self.adapter_class is not None:
            return self.adapter_class
        from anyinfer import default_registry

        return default_registry().adapter_class(self.name)

    def generates(self) -> bool:
        """Whether its class generates (`Adapter.serves_generation`): the generation
        suite and its matrix run only entries that do; one that only embeds or reranks
        is left to the embedding and rerank checks."""
        return self.resolve_class().serves_generation()

    def describe(self) -> str:
        """`name (dialect ..., class module.Qualname)`."""
        try:
            cls = self.resolve_class()
            where = f"{cls.__module__}.{cls.__qualname__}"
        except Exception as exc:  # described, not raised: this is for reports
            where = f"unresolvable: {exc}"
        return f"{self.name} (dialect {self.dialect}, class {where})"


class ConformanceRegistry:
    """Adapters and dialects for one conformance session."""

    def __init__(self) -> None:
        self._entries: dict[str, AdapterEntry] = {}
        self._dialects: dict[str, Dialect] = {}
        self.origin = ""

    def add(
        self,
        provider_id: str,
        adapter_class: type[Adapter] | None = None,
        *,
        dialect: str | Dialect = "openai-chat",
        settings: Mapping[str, Any] | None = None,
        replace: bool = False,
    ) -> AdapterEntry:
        """Put an adapter under test.

        Args:
            provider_id: The id to test it under (lower-cased); also what
                `--anyinfer-adapter` selects.
            adapter_class: An `anyinfer.adapters.Adapter` subclass, or `None` to use
                the class AnyInfer's provider registry has under `provider_id` (a
                built-in, or an `anyinfer.adapters` entry point).
            dialect: The dialect its protocol speaks: a registered name, or a
                `fakeservers.Dialect` instance (which is registered too).
            settings: Extra `ProviderSettings` fields; `base_url`, `transport`,
                `api_key`, `alias` and `provider_id` belong to the harness.
            replace: Replace an adapter already registered under this id.

        Returns:
            The entry.

        Raises:
            RegistryError: For a taken id, a class that is not an adapter, a reserved
                setting, or an empty id.
        """
        name = provider_id.strip().lower() if isinstance(provider_id, str) else ""
        if not name or ":" in name:
            raise RegistryError(f"provider id {provider_id!r} must be non-empty without ':'")
        if name in self._entries and not replace:
            raise RegistryError(
                f"adapter {name!r} is already registered ({self._entries[name].origin}); "
                "pass replace=True to replace it"
            )
        if adapter_class is not None:
            from anyinfer.adapters import Adapter

            if not (isinstance(adapter_class, type) and issubclass(adapter_class, Adapter)):
                raise RegistryError(
                    f"adapter_class for {name!r} must be an anyinfer.adapters.Adapter "
                    f"subclass, got {adapter_class!r}"
                )
        extra = dict(settings or {})
        reserved = sorted(_RESERVED_SETTINGS & set(extra))
        if reserved:
            raise RegistryError(
                f"settings for {name!r} may not set {', '.join(reserved)}: the harness "
                "points the adapter at its fake server"
            )
        dialect_name = dialect if isinstance(dialect, str) else self.add_dialect(dialect).name
        entry = AdapterEntry(name, adapter_class, dialect_name, extra, self.origin)
        self._entries[name] = entry
        return entry

    def add_dialect(self, dialect: Dialect) -> Dialect:
        """Make a dialect available to `add(..., dialect=name)`.

        Args:
            dialect: A `fakeservers.Dialect` instance with a `name`.

        Returns:
            The dialect.

        Raises:
            RegistryError: If it is not a dialect or has no name.
        """
        from anyinfer.fakeservers import Dialect

        if not isinstance(dialect, Dialect):
            raise RegistryError(f"add_dialect() takes a fakeservers.Dialect, got {dialect!r}")
        if not dialect.name:
            raise RegistryError(f"{type(dialect).__name__} has no name")
        self._dialects[dialect.name] = dialect
        return dialect

    def dialect(self, name: str) -> Dialect:
        """The dialect registered under `name` here or in `fakeservers`.

        Raises:
            RegistryError: If no dialect has that name.
        """
        found = self._dialects.get(name)
        if found is not None:
            return found
        from anyinfer.fakeservers import dialect_names, get_dialect

        try:
            return get_dialect(name)
        except KeyError:
            known = sorted({*self._dialects, *dialect_names()})
            raise RegistryError(
                f"unknown dialect {name!r}; registered: {', '.join(known) or 'none'}"
            ) from None

    def names(self) -> list[str]:
        """The registered adapter ids, in registration order."""
        return list(self._entries)

    def entries(self) -> list[AdapterEntry]:
        """The registered adapters, in registration order."""
        return list(self._entries.values())

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.strip().lower() in self._entries

    def get(self, name: str) -> AdapterEntry:
        """The entry registered under `name`.

        Raises:
            KeyError: If there is none.
        """
        return self._entries[name.strip().lower()]

    def select(self, names: Iterable[str]) -> list[AdapterEntry]:
        """The entries named, in the order given (all of them when `names` is empty).

        A name may be a shell-style glob (`acme-*`, `openai*`, `*-eu`; `fnmatch` rules,
        case-insensitive): it selects every registered id it matches, in registration
        order. An id selected twice runs once.

        Raises:
            RegistryError: If a name is not registered, or a glob matches nothing (the
                message lists the known ones).
        """
        wanted = [n.strip().lower() for n in names if n.strip()]
        if not wanted:
            return self.entries()
        chosen: list[str] = []
        missing: list[str] = []
        for name in wanted:
            if name in self._entries:
                chosen.append(name)
                continue
            glob = _GLOB.search(name) is not None
            matched = [n for n in self._entries if glob and fnmatch.fnmatchcase(n, name)]
            if matched:
                chosen += matched
            else:
                missing.append(name)
        if missing:
            what = "named or matching" if any(_GLOB.search(n) for n in missing) else "named"
            raise RegistryError(
                f"no conformance adapter {what} {', '.join(map(repr, missing))}; "
                f"registered: {', '.join(self._entries) or 'none'}"
            )
        return [self._entries[n] for n in dict.fromkeys(chosen)]

    def check(self) -> None:
        """Verify every entry's dialect exists and its class resolves.

        Raises:
            RegistryError: Naming the first broken entry.
        """
        for entry in self._entries.values():
            self.dialect(entry.dialect)
            try:
                entry.resolve_class()
            except Exception as exc:
                raise RegistryError(
                    f"adapter {entry.name!r} ({entry.origin}) has no usable class: {exc}"
                ) from exc


def standing(entries: Iterable[AdapterEntry]) -> dict[str, str]:
    """Entries that stand on another selected entry's full run: name to that entry's name.

    An entry whose `stands_on` entry is not among `entries` is not standing: the full
    suite runs for it (naming one preset with `--anyinfer-adapter` checks it in full).
    Nor is one whose basis a `pytest_anyinfer_configure` hook or entry point replaced.
    """
    by_name = {e.name: e for e in entries}
    found: dict[str, str] = {}
    for entry in by_name.values():
        basis = by_name.get(entry.stands_on or "")
        # Only a built-in on the built-in it was grouped with (a hook may replace either).
        if basis is not None and entry.origin == basis.origin == "built-in":
            found[entry.name] = basis.name
    return found


def _group_presets(registry: ConformanceRegistry, classes: Mapping[str, type[Adapter]]) -> None:
    """Mark each built-in preset that reads responses as an earlier entry does.

    Entries are grouped by dialect, settings and `openai_compat.reading_behaviour`; a
    group's first member stands for it, a class that is not a preset (`openai-compat`)
    before the presets, which go in `PRESETS` order.
    """
    from anyinfer._providers.openai_compat import PRESETS, reading_behaviour

    order = [n for n in registry.names() if n not in PRESETS] + [
        n for n in PRESETS if n in registry
    ]
    first: dict[Any, str] = {}
    for name in order:
        entry = registry.get(name)
        cls = classes.get(name)
        behaviour = reading_behaviour(cls) if cls is not None and not entry.settings else None
        if behaviour is None:
            continue
        key = (entry.dialect, behaviour)
        if key not in first:
            first[key] = name
        elif name in PRESETS:
            registry._entries[name] = replace(entry, stands_on=first[key])


def _entry_points(group: str) -> list[Any]:
    from importlib.metadata import entry_points

    return list(entry_points(group=group))


def load_builtins(registry: ConformanceRegistry) -> None:
    """Register AnyInfer's built-in adapters that name their conformance dialect.

    Every built-in provider whose adapter class's profile names a conformance dialect
    is added (each OpenAI-compatible preset included).

    Raises:
        RegistryError: If a built-in adapter fails to import.
    """
    from anyinfer import ProviderRegistry

    registry.origin = "built-in"
    fallback = dict(BUILTIN_ADAPTERS)
    builtins = ProviderRegistry(builtins=True, entry_points=False)
    classes: dict[str, type[Adapter]] = {}
    for name in builtins.ids():
        try:
            cls = builtins.adapter_class(name)
        except Exception as exc:
            raise RegistryError(f"built-in adapter {name!r} failed to import: {exc}") from exc
        dialect = cls.profile.conformance_dialect or fallback.get(name)
        if dialect:
            registry.add(name, None, dialect=dialect)
            classes[name] = cls
    _group_presets(registry, classes)
    for name, provider, dialect, settings in BUILTIN_VARIANTS:
        registry.add(name, builtins.adapter_class(provider), dialect=dialect, settings=settings)


def load_configure_entry_points(registry: ConformanceRegistry) -> None:
    """Call every `anyinfer.conformance` entry point with the registry.

    Raises:
        RegistryError: If one fails to load or is not callable.
    """
    for ep in _entry_points(CONFORMANCE_ENTRY_POINT_GROUP):
        registry.origin = f"entry point {CONFORMANCE_ENTRY_POINT_GROUP}:{ep.name}"
        try:
            configure = ep.load()
        except Exception as exc:
            raise RegistryError(f"{registry.origin} ({ep.value}) failed to load: {exc}") from exc
        if not callable(configure):
            raise RegistryError(f"{registry.origin} ({ep.value}) is not callable")
        configure(registry)


def load_adapter_entry_points(registry: ConformanceRegistry) -> None:
    """Register `anyinfer.adapters` classes whose profile names a conformance dialect.

    Entry points whose id is already registered are left alone, so an explicit
    registration (with settings, say) wins.

    Raises:
        RegistryError: If an entry point fails to load.
    """
    from anyinfer import ENTRY_POINT_GROUP

    for ep in _entry_points(ENTRY_POINT_GROUP):
        registry.origin = f"entry point {ENTRY_POINT_GROUP}:{ep.name}"
        try:
            cls = ep.load()
        except Exception as exc:
            raise RegistryError(f"{registry.origin} ({ep.value}) failed to load: {exc}") from exc
        from anyinfer.adapters import Adapter

        if not (isinstance(cls, type) and issubclass(cls, Adapter)):
            continue  # the provider registry reports it when the adapter is used
        dialect = cls.profile.conformance_dialect
        if not dialect:
            continue
        name = (getattr(cls, "provider_id", "") or ep.name).strip().lower()
        if name in registry:
            continue
        registry.add(name, cls, dialect=dialect)


def build_registry(configure_hooks: Callable[[ConformanceRegistry], object]) -> ConformanceRegistry:
    """Build a session's registry from every source, in the documented order.

    Args:
        configure_hooks: Calls the `pytest_anyinfer_configure` implementations.

    Returns:
        The registry, checked.

    Raises:
        RegistryError: For any bad registration.
    """
    registry = ConformanceRegistry()
    load_builtins(registry)
    load_configure_entry_points(registry)
    registry.origin = "pytest_anyinfer_configure"
    configure_hooks(registry)
    load_adapter_entry_points(registry)
    registry.origin = ""
    registry.check()
    return registry
