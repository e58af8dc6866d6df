"""Credential references and the resolver chain.

`ProviderSettings.api_key` takes a literal or a reference. References are resolved once,
when the provider's adapter is built, by the first resolver in the chain that claims the
reference's scheme; the secret is registered for redaction at that moment.

A resolved key is **checked, never altered**: it must be printable ASCII with no
whitespace, because it travels in an HTTP header. A key with a trailing newline (read
from a file or a mounted secret), surrounding spaces, a control character or a non-ASCII
character is refused with a `ConfigError` naming the instance and where the key came from
— before anything is sent, and without the key in the message. Stripping it silently
would hide a broken secret source; the fix belongs where the secret is stored.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from .._errors import ConfigError
from .._redact import SENSITIVE_HEADERS, register_secret

__all__ = [
    "CredentialResolver",
    "EnvResolver",
    "KeyringResolver",
    "ResolverChain",
    "check_literal_key",
    "check_secret",
    "register_header_secrets",
]

_SCHEME_CHARS = "abcdefghijklmnopqrstuvwxyz0123456789+.-"
_SECRET_OPTIONS = frozenset({"api_key", "apikey", "token", "access_token", "secret", "password"})
"""`ProviderSettings.options` keys whose values are registered as secrets."""


# The two checks below are string methods, not regular expressions: compiling those
# cost about half a millisecond of every client's import.


def _is_reference(value: str) -> bool:
    """Whether `value` starts with `<scheme>://`: a lower-case ASCII letter, then
    lower-case letters, digits, `+`, `.` or `-`."""
    scheme, sep, _ = value.partition("://")
    return bool(sep) and "a" <= scheme[:1] <= "z" and not scheme.strip(_SCHEME_CHARS)


def _sendable(value: str, *, header: bool) -> bool:
    """Whether a header can carry `value`: non-empty printable ASCII without whitespace;
    a whole header value may hold inner spaces (`Bearer <token>`)."""
    if not value or not value.isascii() or not value.isprintable():
        return False
    return value[0] != " " and value[-1] != " " if header else " " not in value


def _problem(value: str, *, header: bool) -> str | None:
    """What makes `value` unusable in a header, described without quoting it."""
    if _sendable(value, header=header):
        return None
    if value.endswith(("\n", "\r")):
        return "ends with a newline (as a value read from a file or a mounted secret often does)"
    if value != value.strip():
        return "starts or ends with whitespace"
    if "\n" in value or "\r" in value:
        return "contains a newline"
    if not value.isascii():
        return "contains a non-ASCII character"
    if any(ch.isspace() for ch in value):
        return "contains whitespace"
    return "contains a control character"


def check_secret(
    secret: str, *, source: str, provider: str | None = None, header: bool = False
) -> str:
    """Register a credential for redaction, then refuse it if a header cannot carry it.

    The value is registered first, so that even a refused key is masked wherever it
    might show up. It is never stripped or otherwise changed.

    Args:
        secret: The credential.
        source: Where it came from, for the message (`"api_key"`, `"environment
            variable OPENAI_API_KEY"`, `"headers['x-api-key']"`).
        provider: The instance it is for.
        header: Whether `secret` is a whole header value (inner spaces allowed, as in
            `Bearer <token>`) rather than a bare key.

    Returns:
        `secret`, unchanged.

    Raises:
        ConfigError: If it contains a newline, whitespace, a control character or a
            non-ASCII character; the message names the problem, never the value.
    """
    register_secret(secret)
    problem = _problem(secret, header=header)
    if problem is not None:
        where = f" of provider instance {provider!r}" if provider else ""
        raise ConfigError(
            f"the {source}{where} {problem}; a credential must be printable ASCII without "
            "whitespace, because it is sent in an HTTP header. AnyInfer does not strip or "
            "alter credentials: fix the value where it is stored",
            provider=provider,
        )
    return secret


def check_literal_key(value: str | None, *, provider: str) -> None:
    """Check an `api_key` given as a literal value when the client is built.

    A reference (`env://NAME`, `credential://...`) is resolved, and checked, when its
    instance's adapter is first built; a literal is known now, so a broken one (a
    trailing newline from a file, say) is refused at once, where it was passed.

    Raises:
        ConfigError: As `check_secret`, naming the instance, never the value.
    """
    if value is not None and not _is_reference(value):
        check_secret(value, source="api_key", provider=provider)


def register_header_secrets(
    headers: Mapping[str, str], options: Mapping[str, Any], *, provider: str | None = None
) -> None:
    """Register credentials passed as headers or provider options, and check the headers.

    A sensitive header in `ProviderSettings.headers` (`authorization`, `x-api-key`, …,
    see `SENSITIVE_HEADERS`) is checked like a key (see `check_secret`; inner spaces are
    allowed) and registered whole and, for `<scheme> <token>` values, by its token alone.
    Sensitive headers under `options["headers"]` and options named like a credential
    (`api_key`, `token`, `password`, …) are registered the same way, not checked: an
    adapter may use them for something other than a header.

    Args:
        headers: `ProviderSettings.headers`.
        options: `ProviderSettings.options`.
        provider: The instance, for error context.

    Raises:
        ConfigError: If a sensitive header's value cannot be sent in a header.
    """
    for name, value in headers.items():
        if isinstance(value, str) and name.lower() in SENSITIVE_HEADERS:
            check_secret(value, source=f"headers[{name!r}]", provider=provider, header=True)
            _register_token(value)
    extra = options.get("headers")
    found = list(extra.items()) if isinstance(extra, Mapping) else []
    found = [(k, v) for k, v in found if isinstance(k, str) and k.lower() in SENSITIVE_HEADERS]
    found += [
        (k, v) for k, v in options.items() if isinstance(k, str) and k.lower() in _SECRET_OPTIONS
    ]
    for _, value in found:
        if isinstance(value, str):
            register_secret(value)
            _register_token(value)


def _register_token(value: str) -> None:
    scheme, _, token = value.strip().partition(" ")
    if token and scheme.isalpha():
        register_secret(token.strip())


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
            from .._extras import missing_hint

            raise ConfigError(
                missing_hint("credential://system/...", ["keyring"]), provider=provider
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
            ConfigError: If the reference's scheme is unknown, it cannot be resolved, or the
                secret cannot be sent in a header (see `check_secret`).
        """
        if value is None:
            return None
        secret, source = value, "api_key"
        if _is_reference(value):
            source = f"api_key ({value})"  # the reference names a secret, it is not one
            for resolver in self.resolvers:
                if resolver.claims(value):
                    secret = resolver.resolve(value, provider=provider)
                    break
            else:
                scheme = value.split("://", 1)[0]
                raise ConfigError(
                    f"no credential resolver handles {scheme}:// references", provider=provider
                )
        return check_secret(secret, source=source, provider=provider)
