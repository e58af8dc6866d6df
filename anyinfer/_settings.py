"""Provider settings and credential references."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from ._client.credentials import ResolverChain, register_header_secrets
from ._client.validate import need_number, need_optional_str
from ._errors import ConfigError
from ._redact import MASK

__all__ = ["ProviderSettings"]


@dataclass(frozen=True)
class ProviderSettings:
    """How one provider instance should be configured on a client.

    A client may hold several instances of the same underlying engine — two Azure
    tenants, a local and a remote Ollama — by giving each one an `alias`. The alias is the
    instance's identity everywhere else: it is what an `alias:model` target names, what
    the client keys its adapters by, and what telemetry reports.

    Attributes:
        provider_id: Registered provider id or alias, e.g. `"openai"` or `"claude"`. This
            selects the engine — which adapter is built and how it talks.
        base_url: Endpoint override. Optional for providers with a default; required for
            ones that have none (`openai-compat`, `azure-foundry`).
        api_key: Credential for the provider. Accepts a reference
            (`"env://OPENAI_API_KEY"`, `"credential://system/openai"`) as well as a
            literal; it is resolved once, when the adapter is first built, and registered
            for redaction at that point. Never shown in `repr()`.
        api_version: Version pin for providers that take one (Azure, Anthropic).
        headers: Extra headers merged into every request.
        options: Provider-specific settings, per the provider's documented fields.
        timeout_s: Default per-request timeout for this provider.
        transport: Test seam — an **httpx** transport (`httpx.AsyncBaseTransport`) that
            intercepts this provider's traffic (used by the fake-server and cassette
            modes). The spec pages say httpx2; AnyInfer takes httpx on purpose, because
            respx, vcrpy and the rest of the test tooling patch httpx.
        alias: Instance id, when this is one of several instances of `provider_id`.
            Defaults to `provider_id` itself, which is the single-instance case.
    """

    provider_id: str
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    api_version: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    options: Mapping[str, Any] = field(default_factory=dict)
    timeout_s: float = 120.0
    transport: Any | None = field(default=None, repr=False)
    alias: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.provider_id, str) or not self.provider_id.strip():
            raise ConfigError("ProviderSettings.provider_id must be a non-empty string")
        if self.alias is not None and (":" in self.alias or not self.alias.strip()):
            raise ConfigError(f"provider alias {self.alias!r} must be non-empty without ':'")
        need_number(self.timeout_s, "ProviderSettings.timeout_s", positive=True)
        need_optional_str(self.api_key, "ProviderSettings.api_key", secret=True)
        need_optional_str(self.base_url, "ProviderSettings.base_url")
        need_optional_str(self.api_version, "ProviderSettings.api_version")
        if not isinstance(self.headers, Mapping) or not isinstance(self.options, Mapping):
            raise ConfigError("ProviderSettings.headers and .options must be mappings")

    def __repr__(self) -> str:
        key = MASK if self.api_key else None
        return (
            f"ProviderSettings(provider_id={self.provider_id!r}, alias={self.alias!r}, "
            f"base_url={self.base_url!r}, api_key={key!r}, timeout_s={self.timeout_s!r})"
        )

    @property
    def instance_id(self) -> str:
        """This instance's identity: the alias when set, else the provider id."""
        return self.alias or self.provider_id

    @classmethod
    def of(cls, provider_id: str, **kwargs: Any) -> ProviderSettings:
        """Build settings for a provider id, normalizing the id and any alias.

        Registered aliases map to their engine (`"claude"` becomes `"anthropic"`); ids
        and aliases are lower-cased and stripped.

        Args:
            provider_id: A registered provider id or alias.
            **kwargs: Any other `ProviderSettings` field.

        Returns:
            The settings.
        """
        from ._adapters.registry import default_registry

        pid = default_registry().canonical(provider_id.strip().lower())
        alias = kwargs.pop("alias", None)
        if alias is not None:
            alias = alias.strip().lower()
        return cls(provider_id=pid, alias=alias, **kwargs)

    def with_resolved_key(
        self, chain: ResolverChain | None = None
    ) -> tuple[ProviderSettings, str | None]:
        """Resolve `api_key`, check it, and register it and any header credentials for
        redaction.

        Credentials passed only as headers (`headers={"x-api-key": ...}`, an
        `authorization` header, sensitive headers or credential-named keys in `options`)
        are registered too, so they are masked like `api_key`.

        Args:
            chain: The resolver chain; defaults to environment and system keyring.

        Returns:
            A copy of these settings with the key replaced by its resolved value, and the
            value itself.

        Raises:
            ConfigError: If the key (or a sensitive header) cannot be sent in an HTTP
                header — it contains a newline, whitespace, a control character or a
                non-ASCII character. The message says which and where it came from,
                never the value.
        """
        register_header_secrets(self.headers, self.options, provider=self.instance_id)
        key = (chain or ResolverChain()).resolve(self.api_key, provider=self.instance_id)
        return replace(self, api_key=key), key
