"""The provider registry: provider ids and aliases to adapter classes."""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .._errors import ConfigError

if TYPE_CHECKING:
    from .base import Adapter

__all__ = ["ENTRY_POINT_GROUP", "ProviderRegistry", "default_registry"]

ENTRY_POINT_GROUP = "anyinfer.adapters"
"""Entry-point group third-party packages use to register adapter classes."""

AdapterFactory = Callable[..., "Adapter"]

# Built-in adapter classes by provider id, imported only when first used so `import
# anyinfer` stays fast. Everything else about a provider (aliases included) is declared
# on its class, in `profile`.
_BUILTINS: dict[str, str] = {
    "openai": "anyinfer._providers.openai_chat:OpenAIChatAdapter",
    "openai-responses": "anyinfer._providers.openai_responses:OpenAIResponsesAdapter",
    "anthropic": "anyinfer._providers.anthropic:AnthropicAdapter",
    "ollama": "anyinfer._providers.ollama:OllamaAdapter",
    "openai-compat": "anyinfer._providers.openai_compat:OpenAICompatAdapter",
    "azure-foundry": "anyinfer._providers.azure:AzureFoundryAdapter",
    "gemini": "anyinfer._providers.gemini:GeminiAdapter",
    "cohere": "anyinfer._providers.cohere:CohereAdapter",
    "bedrock": "anyinfer._providers.bedrock:BedrockAdapter",
    "vertex-gemini": "anyinfer._providers.vertex:VertexGeminiAdapter",
    "vertex-anthropic": "anyinfer._providers.vertex:VertexAnthropicAdapter",
    "voyage": "anyinfer._providers.voyage:VoyageAdapter",
    "jina": "anyinfer._providers.jina:JinaAdapter",
    "tei": "anyinfer._providers.tei:TEIAdapter",
}

# The OpenAI-compatible presets (llama.cpp, vllm, lmstudio, ...): a function returning
# their classes, each preset one entry of `openai_compat.PRESETS`.
_BUILTIN_PRESETS = "anyinfer._providers.openai_compat:preset_adapters"


def _load(path: str) -> Any:
    module, _, attr = path.partition(":")
    return getattr(importlib.import_module(module), attr)


class ProviderRegistry:
    """Maps provider ids (and their aliases) to adapter classes.

    Built-in adapters are registered by import path and loaded on first use; third-party
    adapters are discovered from the `anyinfer.adapters` entry-point group (each entry
    point names an `Adapter` subclass whose `provider_id` and `profile.aliases` say what
    it serves), or registered directly with `register`. Built-in and third-party
    classes are read the same way: the registry keeps no provider facts of its own.
    """

    def __init__(self, *, builtins: bool = True, entry_points: bool = True) -> None:
        self._lock = threading.Lock()
        self._factories: dict[str, AdapterFactory | str] = {}
        self._aliases: dict[str, str] = {}
        self._scan_entry_points = entry_points
        self._scanned = False
        # Built-in aliases and presets are read from the classes, loaded on the first
        # name that is not a built-in id.
        self._builtins_loaded = self._presets_loaded = not builtins
        if builtins:
            self._factories.update(_BUILTINS)

    def register(
        self,
        provider_id: str,
        factory: AdapterFactory | str,
        *,
        aliases: tuple[str, ...] = (),
        replace: bool = False,
    ) -> None:
        """Register an adapter class (or `"module:Class"` path) under an id.

        Args:
            provider_id: The id targets and settings use.
            factory: The adapter class, or its import path.
            aliases: Other names for the same provider, besides those an adapter
                class declares in `profile.aliases`.
            replace: Allow replacing an existing registration.

        Raises:
            ConfigError: If the id is taken and `replace` is false.
        """
        pid = provider_id.strip().lower()
        if not replace:
            self._ensure_builtins()  # a built-in alias is taken too
        with self._lock:
            if not replace and (pid in self._factories or pid in self._aliases):
                raise ConfigError(f"provider {pid!r} is already registered")
            self._factories[pid] = factory
            self._aliases.pop(pid, None)
            for alias in (*_profile_aliases(factory), *aliases):
                self._aliases[alias.strip().lower()] = pid

    def unregister(self, provider_id: str) -> None:
        """Remove a provider and its aliases."""
        pid = self.canonical(provider_id)
        with self._lock:
            self._factories.pop(pid, None)
            for alias in [a for a, p in self._aliases.items() if p == pid]:
                del self._aliases[alias]

    def _ensure_builtins(self, wanted: str | None = None) -> None:
        """Register the OpenAI-compatible presets, then the built-in classes' aliases.

        Args:
            wanted: The name being looked up: when a preset answers to it, the other
                built-in modules are not imported yet.
        """
        if self._builtins_loaded:
            return
        found: list[tuple[str, type[Adapter]]] = []
        if not self._presets_loaded:
            self._presets_loaded = True
            presets: tuple[type[Adapter], ...] = _load(_BUILTIN_PRESETS)()
            with self._lock:
                for cls in presets:
                    pid = cls.provider_id
                    if pid not in self._factories and pid not in self._aliases:
                        self._factories[pid] = cls
                        found.append((pid, cls))
                self._add_aliases(found)
            if wanted is not None and (wanted in self._factories or wanted in self._aliases):
                return
        self._builtins_loaded = True
        found = []
        with self._lock:
            for pid, path in _BUILTINS.items():
                factory = self._factories.get(pid)
                if isinstance(factory, type):
                    factory = f"{factory.__module__}:{factory.__qualname__}"
                if factory == path:  # the built-in, not replaced or unregistered since
                    cls = _load(path)
                    self._factories[pid] = cls
                    found.append((pid, cls))
            self._add_aliases(found)

    def _add_aliases(self, found: list[tuple[str, type[Adapter]]]) -> None:
        for pid, cls in found:
            for alias in _profile_aliases(cls):
                name = alias.strip().lower()
                if name not in self._factories:  # an explicit registration wins
                    self._aliases.setdefault(name, pid)

    def _ensure_scanned(self, wanted: str | None = None) -> None:
        self._ensure_builtins(wanted)
        if wanted is not None and (wanted in self._factories or wanted in self._aliases):
            return
        if self._scanned or not self._scan_entry_points:
            return
        self._scanned = True
        from importlib.metadata import entry_points

        for ep in entry_points(group=ENTRY_POINT_GROUP):
            if ep.name in self._factories:
                continue  # a built-in (our own entry point) or an explicit registration
            try:
                cls = ep.load()
            except Exception as exc:  # a broken plugin must not break unrelated use
                raise ConfigError(
                    f"adapter entry point {ep.name!r} ({ep.value}) failed to load: {exc}"
                ) from exc
            pid = getattr(cls, "provider_id", "") or ep.name
            self.register(pid, cls, replace=True)

    def canonical(self, provider_id: str) -> str:
        """The registered id for an id or alias (unknown names come back unchanged)."""
        pid = provider_id.strip().lower()
        if pid not in self._factories and pid not in self._aliases:
            self._ensure_scanned(pid)
        return self._aliases.get(pid, pid)

    def ids(self) -> list[str]:
        """Every registered provider id."""
        self._ensure_scanned()
        return sorted(self._factories)

    def __contains__(self, provider_id: str) -> bool:
        return self.canonical(provider_id) in self._factories

    def adapter_class(self, provider_id: str) -> type[Adapter]:
        """The adapter class for an id or alias.

        Raises:
            ConfigError: If nothing is registered under that name.
        """
        pid = self.canonical(provider_id)
        factory = self._factories.get(pid)
        if factory is None:
            import difflib

            known = sorted(set(self._factories) | set(self._aliases))
            close = difflib.get_close_matches(pid, known, n=3)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise ConfigError(f"unknown provider {provider_id!r}{hint}")
        if isinstance(factory, str):
            factory = _load(factory)
            with self._lock:
                self._factories[pid] = factory
        return factory  # type: ignore[return-value]


def _profile_aliases(factory: AdapterFactory | str) -> tuple[str, ...]:
    """The aliases an adapter class declares (none for a path or a plain factory)."""
    from .base import Adapter

    if isinstance(factory, type) and issubclass(factory, Adapter):
        return factory.profile.aliases
    return ()


_default: ProviderRegistry | None = None


def default_registry() -> ProviderRegistry:
    """The process-wide registry."""
    global _default
    if _default is None:
        _default = ProviderRegistry()
    return _default
