"""Targets: what a target string names, what serves it, and what its model can do.

`Targets` is the part of a client that knows its providers. It resolves a target string
(`"provider:model"`, or a catalog alias) to a `ResolvedTarget`, builds one adapter per
provider instance on first use (resolving the instance's credential then), and owns the
knowledge about models that routing and budgeting consult: the alias catalog, the
pricing table and the capability store. Everything heavy (catalog data, pricing data,
the capability layers) loads on first use, never at import.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

from .._errors import ConfigError
from .._settings import ProviderSettings
from .._types import ResolvedTarget, Target
from .credentials import ResolverChain, check_secret
from .instance import instance_config

if TYPE_CHECKING:
    from .._adapters.base import Adapter
    from .._adapters.profile import AdapterProfile, UsageConvention
    from .._adapters.registry import ProviderRegistry
    from .._knowledge.capabilities import CapabilityStore, ModelCapabilities, Provenance
    from .._knowledge.catalog import Catalog
    from .._knowledge.pricing import PricingTable

__all__ = ["Targets"]

_ASSEMBLED_MAX = 1024
"""Targets whose assembled capabilities are kept at most (the cache is emptied past it)."""


class Targets:
    """A client's providers: target resolution, adapters, catalog, pricing, capabilities.

    Args:
        registry: The provider registry adapters come from.
        settings: Per-instance settings keyed by instance id, in preference order (the
            order aliases resolve in).
        resolver: The credential resolver chain for `api_key` references.
        catalog: The alias catalog; `None` loads the bundled one on first use when
            `use_default_catalog` is set.
        use_default_catalog: Whether to load the bundled catalog when none was given.
        pricing: The pricing table; `None` loads the bundled one on first use.
        overrides: Capability overrides keyed by `"provider:model"`.
    """

    def __init__(
        self,
        registry: ProviderRegistry,
        settings: Mapping[str, ProviderSettings],
        resolver: ResolverChain,
        *,
        catalog: Catalog | None,
        use_default_catalog: bool,
        pricing: PricingTable | None,
        overrides: Mapping[str, ModelCapabilities],
    ) -> None:
        self.registry = registry
        self._settings = settings
        self._resolver = resolver
        self._adapters: dict[str, Adapter] = {}
        self._catalog = catalog
        self._use_default_catalog = use_default_catalog
        self._pricing = pricing
        self._overrides = overrides
        self._caps: CapabilityStore | None = None
        # Assembled capabilities per target. The catalog and pricing table are immutable
        # and the overrides fixed, so only a `record()` changes an answer: it bumps the
        # generation and clears the cache (a lookup that raced with it is not kept).
        self._assembled: dict[ResolvedTarget, ModelCapabilities] = {}
        self._assembled_gen = 0
        self._assembled_lock = threading.Lock()
        self.closed = False

    # --- knowledge ---------------------------------------------------------------

    @property
    def catalog(self) -> Catalog | None:
        """The alias catalog in force, if any (the bundled one loads on first use)."""
        if self._catalog is None and self._use_default_catalog:
            from .._knowledge.catalog import Catalog

            self._catalog = Catalog.load_default()
        return self._catalog

    @property
    def pricing(self) -> PricingTable:
        """The pricing table behind `Usage.cost_usd` (the bundled one loads on first use)."""
        if self._pricing is None:
            from .._knowledge.pricing import PricingTable

            self._pricing = PricingTable.default()
        return self._pricing

    @property
    def store(self) -> CapabilityStore:
        """The capability store: catalog < discovery < probes < overrides."""
        if self._caps is None:
            from .._knowledge.capabilities import CapabilityStore

            self._caps = CapabilityStore(
                catalog=self.catalog, pricing=self.pricing, overrides=self._overrides
            )
        return self._caps

    def capabilities(self, target: ResolvedTarget) -> ModelCapabilities:
        """What a resolved target's model can do, from every layer (assembled once per
        target until the next `record()`)."""
        caps = self._assembled.get(target)
        if caps is not None:
            return caps
        gen = self._assembled_gen
        caps = self.store.get(f"{target.provider}:{target.model}", provider_id=target.provider_id)
        with self._assembled_lock:
            if gen == self._assembled_gen:
                if len(self._assembled) >= _ASSEMBLED_MAX:
                    self._assembled.clear()
                self._assembled[target] = caps
        return caps

    def record(self, key: str, caps: ModelCapabilities, layer: Provenance) -> None:
        """Record facts into the capability store (see `CapabilityStore.record`).

        Every write to the store goes through here, so that `capabilities()` never
        answers from an assembly the write made stale.
        """
        self.store.record(key, caps, layer)
        with self._assembled_lock:
            self._assembled_gen += 1
            self._assembled.clear()

    # --- resolution --------------------------------------------------------------

    def profile(self, provider_id: str) -> AdapterProfile:
        """The profile the adapter class registered for an engine id declares."""
        return self.registry.adapter_class(provider_id).profile

    def convention(self, provider_id: str) -> UsageConvention:
        """How the adapter class registered for an engine id counts usage, for pricing:
        its profile's, else the OpenAI way (`UsageConvention()`)."""
        from .._adapters.profile import UsageConvention

        return self.profile(provider_id).usage or UsageConvention()

    def settings_for(self, instance: str) -> ProviderSettings:
        """The settings of a configured instance, or a registered provider's defaults.

        Raises:
            ConfigError: If `instance` is neither (close matches are named).
        """
        settings = self._settings.get(instance)
        if settings is not None:
            return settings
        if instance in self.registry:
            return ProviderSettings.of(instance)
        import difflib

        known = sorted(set(self._settings) | set(self.registry.ids()))
        close = difflib.get_close_matches(instance, known, n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise ConfigError(f"unknown provider {instance!r}{hint}")

    def resolve(self, target: Target) -> ResolvedTarget:
        """Resolve a target string (see `AsyncClient.resolve`).

        Raises:
            ConfigError: If the target is malformed, names an unknown provider, or is an
                unknown alias.
        """
        if not isinstance(target, str) or not target.strip():
            raise ConfigError(f"target must be a non-empty string, got {target!r}")
        if ":" not in target:
            return self._resolve_alias(target.strip())
        instance, _, model = target.partition(":")
        instance = instance.strip().lower()
        model = model.strip()
        if not model:
            raise ConfigError(f"target {target!r} names no model")
        settings = self.settings_for(instance)
        provider_id = self.registry.canonical(settings.provider_id)
        return ResolvedTarget(settings.instance_id, model, provider_id)

    def _resolve_alias(self, name: str) -> ResolvedTarget:
        catalog = self.catalog
        if catalog is None:
            raise ConfigError(
                f"target {name!r} must look like 'provider:model' (alias resolution is off: "
                "this client has no catalog)"
            )
        order = [(iid, self.registry.canonical(s.provider_id)) for iid, s in self._settings.items()]
        if not order:
            # Nothing configured: the providers the catalog lists for this alias, in the
            # catalog's order (the alias's home provider first), with their defaults.
            listed = catalog.aliases.get(name.strip().lower(), {})
            order = [(pid, pid) for pid in listed if pid in self.registry]
            order = order or [(pid, pid) for pid in self.registry.ids()]
        matches = catalog.resolve_alias(name, order)
        if not matches:
            known = [f"{iid}:" for iid, _ in order]
            raise catalog.unknown_target_error(name, known)
        instance, model = matches[0]
        provider_id = dict(order)[instance]
        return ResolvedTarget(instance, model, provider_id, alias=name)

    # --- adapters ----------------------------------------------------------------

    def adapter(self, instance: str) -> Adapter:
        """The adapter serving an instance, built (and its credential resolved) once.

        Raises:
            ConfigError: If the client is closed, the instance is unknown, or its
                credential cannot be resolved.
        """
        adapter = self._adapters.get(instance)
        if adapter is not None:
            return adapter
        if self.closed:
            raise ConfigError("this client is closed")
        settings = self.settings_for(instance)
        cls = self.registry.adapter_class(settings.provider_id)
        resolved, key = settings.with_resolved_key(self._resolver)
        if key is None:
            # ANYINFER_<INSTANCE>_API_KEY, then the provider's usual variable.
            for name in instance_config(settings, cls).key_envs:
                env_key = os.environ.get(name)
                if env_key:
                    check_secret(env_key, source=f"environment variable {name}", provider=instance)
                    resolved = replace(resolved, api_key=env_key)
                    break
        adapter = cls(resolved)
        self._adapters[instance] = adapter
        return adapter

    async def aclose(self) -> None:
        """Close every adapter built so far; later `adapter()` calls raise."""
        self.closed = True
        adapters, self._adapters = list(self._adapters.values()), {}
        for adapter in adapters:
            await adapter.aclose()
