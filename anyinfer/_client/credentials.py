"""Credential references and the resolver chain.

`ProviderSettings.api_key` takes a literal or a reference. References are resolved once,
when the provider's adapter is built, by the first resolver in the chain that claims the
reference's scheme; the secret is registered for redaction at that moment.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from .._errors import ConfigError
from .._redact import register_secret

__all__ = ["CredentialResolver", "EnvResolver", "KeyringResolver", "ResolverChain"]

_SCHEME = re.compile(r"^([a-z][a-z0-9+.-]*)://")


@runtime_checkable
class CredentialResolver(Protocol):
    """Resolves credential references of the schemes it claims."""

    def claims(self, reference: str) -> bool:
        """Whether this resolver handles `reference` (by its scheme)."""
        ...

    def resolve(self, reference: str, *, provider: str | None = None) -> str:
        """The secret `reference` names.

        Raises:
            ConfigError: If the reference cannot be resolved.
        """
        ...


class EnvResolver:
    """`env://NAME`: the value of environment variable `NAME`."""

    def claims(self, reference: str) -> bool:
        """Claims `env://` references."""
        return reference.startswith("env://")

    def resolve(self, reference: str, *, provider: str | None = None) -> str:
        """Read the environment variable."""
        name = reference[len("env://") :]
        secret = os.environ.get(name)
        if not secret:
            raise ConfigError(
                f"api_key refers to environment variable {name!r}, which is not set",
                provider=provider,
            )
        return secret


class KeyringResolver:
    """`credential://system/NAME`: the system keyring's password `NAME` under service
    `anyinfer` (needs the optional `keyring` package)."""

    service = "anyinfer"

    def claims(self, reference: str) -> bool:
        """Claims `credential://` references."""
        return reference.startswith("credential://")

    def resolve(self, reference: str, *, provider: str | None = None) -> str:
        """Look the credential up in the system keyring."""
        store, _, name = reference[len("credential://") :].partition("/")
        if store != "system" or not name:
            raise ConfigError(
                f"credential reference {reference!r} must look like credential://system/NAME",
                provider=provider,
            )
        try:
            import keyring  # type: ignore[import-not-found, unused-ignore]
        except ImportError:
            raise ConfigError(
                "credential://system/... needs the system keyring: pip install keyring",
                provider=provider,
            ) from None
        try:
            secret = keyring.get_password(self.service, name)
        except Exception as exc:  # keyring backends raise their own error types
            raise ConfigError(
                f"the system keyring could not be read: {type(exc).__name__}", provider=provider
            ) from None
        if not secret:
            raise ConfigError(
                f"no credential named {name!r} in the system keyring (service {self.service!r})",
                provider=provider,
            )
        return str(secret)


class ResolverChain:
    """An ordered chain of credential resolvers.

    The default chain resolves `env://` and `credential://system/` references. Extend it
    by putting your own resolver first::

        chain = ai.ResolverChain([VaultResolver(), *ai.ResolverChain().resolvers])

    Args:
        resolvers: Resolvers in order; defaults to environment then system keyring.
    """

    def __init__(self, resolvers: Sequence[CredentialResolver] | None = None) -> None:
        self.resolvers: tuple[CredentialResolver, ...] = (
            tuple(resolvers) if resolvers is not None else (EnvResolver(), KeyringResolver())
        )

    def resolve(self, value: str | None, *, provider: str | None = None) -> str | None:
        """Resolve a literal or reference and register the result for redaction.

        Args:
            value: A literal secret or a `scheme://...` reference.
            provider: The provider instance, for error context.

        Returns:
            The secret, or `None` when no credential was configured.

        Raises:
            ConfigError: If the reference's scheme is unknown or it cannot be resolved.
        """
        if value is None:
            return None
        secret = value
        if _SCHEME.match(value):
            for resolver in self.resolvers:
                if resolver.claims(value):
                    secret = resolver.resolve(value, provider=provider)
                    break
            else:
                scheme = value.split("://", 1)[0]
                raise ConfigError(
                    f"no credential resolver handles {scheme}:// references", provider=provider
                )
        register_secret(secret)
        return secret
