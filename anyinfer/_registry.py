"""The provider registry: provider ids and aliases to adapter classes."""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ._errors import ConfigError

if TYPE_CHECKING:
    from ._adapter import Adapter

__all__ = ["ENTRY_POINT_GROUP", "ProviderRegistry", "default_registry"]

ENTRY_POINT_GROUP = "anyinfer.adapters"
"""Entry-point group third-party packages use to register adapter classes."""

AdapterFactory = Callable[..., "Adapter"]

# Built-in adapters, imported only when first used so `import anyinfer` stays fast.
_BUILTINS: dict[str, tuple[str, tuple[str, ...]]] = {
    "openai": ("anyinfer._providers.openai_chat:OpenAIChatAdapter", ()),
    "openai-responses": ("anyinfer._providers.openai_responses:OpenAIResponsesAdapter", ()),
    "anthropic": ("anyinfer._providers.anthropic:AnthropicAdapter", ("claude",)),
    "ollama": ("anyinfer._providers.ollama:OllamaAdapter", ()),
    "openai-compat": ("anyinfer._providers.openai_compat:OpenAICompatAdapter", ()),
    "llama.cpp": ("anyinfer._providers.openai_compat:LlamaCppAdapter", ("llamacpp", "llama-cpp")),
    "vllm": ("anyinfer._providers.openai_compat:VLLMAdapter", ()),
    "lmstudio": ("anyinfer._providers.openai_compat:LMStudioAdapter", ("lm-studio",)),
    "azure-foundry": ("anyinfer._providers.azure:AzureFoundryAdapter", ("azure",)),
    "gemini": ("anyinfer._providers.gemini:GeminiAdapter", ("google",)),
}


def _load(path: str) -> Any:
    module, _, attr = path.partition(":")
    return getattr(importlib.import_module(module), attr)


class ProviderRegistry:
    """Maps provider ids (and their aliases) to adapter classes.

    Built-in adapters are registered by import path and loaded on first use; third-party
    adapters are discovered from the `anyinfer.adapters` entry-point group (each entry
    point names an `Adapter` subclass whose `provider_id` and `aliases` say what it
    serves), or registered directly with `register`.
    """

    def __init__(self, *, builtins: bool = True, entry_points: bool = True) -> None:
        self._lock = threading.Lock()
        self._factories: dict[str, AdapterFactory | str] = {}
        self._aliases: dict[str, str] = {}
        self._scan_entry_points = entry_points
        self._scanned = False
        if builtins:
            for pid, (path, aliases) in _BUILTINS.items():
                self._factories[pid] = path
                for alias in aliases:
                    self._aliases[alias] = pid

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
            aliases: Other names for the same provider.
            replace: Allow replacing an existing registration.

        Raises:
            ConfigError: If the id is taken and `replace` is false.
        """
        pid = provider_id.strip().lower()
        with self._lock:
            if not replace and (pid in self._factories or pid in self._aliases):
                raise ConfigError(f"provider {pid!r} is already registered")
            self._factories[pid] = factory
            self._aliases.pop(pid, None)
            for alias in aliases:
                self._aliases[alias.strip().lower()] = pid

    def unregister(self, provider_id: str) -> None:
        """Remove a provider and its aliases."""
        pid = self.canonical(provider_id)
        with self._lock:
            self._factories.pop(pid, None)
            for alias in [a for a, p in self._aliases.items() if p == pid]:
                del self._aliases[alias]

    def _ensure_scanned(self) -> None:
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
            self.register(pid, cls, aliases=tuple(getattr(cls, "aliases", ())), replace=True)

    def canonical(self, provider_id: str) -> str:
        """The registered id for an id or alias (unknown names come back unchanged)."""
        pid = provider_id.strip().lower()
        if pid not in self._factories and pid not in self._aliases:
            self._ensure_scanned()
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


_default: ProviderRegistry | None = None


def default_registry() -> ProviderRegistry:
    """The process-wide registry."""
    global _default
    if _default is None:
        _default = ProviderRegistry()
    return _default
