"""Instance configuration: the one rule for an instance's base URL, key variable and locality.

Every place that needs to know where a configured instance lives — the HTTP adapters
(which connect to it), the client (which decides whether this machine's hardware is the
right one to probe for a local engine) and the CLI (which builds settings from flags and
variables) — asks this module, so the three can never disagree.

- **Base URL:** `ProviderSettings.base_url`, else `ANYINFER_<INSTANCE>_BASE_URL`, else the
  adapter class's default (`provider_default_base_url`): its `default_base_url`, or what
  its `default_base_url_for(settings, environ)` classmethod derives from the settings
  when it has one (Vertex AI's host depends on the location).
- **Key variables:** `ANYINFER_<INSTANCE>_API_KEY`, then the adapter class's
  `api_key_env`, then its `fallback_api_key_env` (consulted only when the settings give
  no key).
- **Project and location** (Google Cloud, `cloud_placement`): `options["project"]`, else
  `ANYINFER_<INSTANCE>_PROJECT`, else the provider's variables (`GOOGLE_CLOUD_PROJECT`, ...);
  `options["location"]`, else `ANYINFER_<INSTANCE>_LOCATION`, else the provider's variables
  (`GOOGLE_CLOUD_LOCATION`, `CLOUD_ML_REGION`), else the provider's default location.
- **Locality:** a loopback address (`127.0.0.0/8`, `::1`), `localhost` (and
  `*.localhost`) or a Unix-socket URL is `"local"`; any other host is `"remote"`. No name
  is looked up and nothing is sent: locality is read from the URL alone.
"""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Literal, NamedTuple
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from .._adapters.base import Adapter
    from .._settings import ProviderSettings

__all__ = [
    "BaseURLSource",
    "CloudPlacement",
    "InstanceConfig",
    "Locality",
    "api_key_env",
    "base_url_env",
    "cloud_placement",
    "instance_config",
    "instance_env",
    "locality_of",
    "provider_default_base_url",
    "resolve_base_url",
]

Locality = Literal["local", "remote"]
"""Where an instance runs: on this machine, or somewhere AnyInfer cannot probe."""

BaseURLSource = Literal["settings", "env", "default"]
"""Which rung of the base-URL rule supplied an instance's URL."""

_UNIX_SCHEMES = ("unix", "http+unix", "https+unix")


def instance_env(instance_id: str, what: str) -> str:
    """`ANYINFER_<INSTANCE>_<WHAT>`: the instance id upper-cased, other characters `_`."""
    return "ANYINFER_" + re.sub(r"[^A-Za-z0-9]", "_", instance_id).upper() + "_" + what


def base_url_env(instance_id: str) -> str:
    """The variable that supplies an instance's base URL when its settings give none:
    `ANYINFER_<INSTANCE>_BASE_URL`, upper-cased, other characters as `_`."""
    return instance_env(instance_id, "BASE_URL")


def api_key_env(instance_id: str) -> str:
    """`ANYINFER_<INSTANCE>_API_KEY`: an instance's key when its settings give none."""
    return instance_env(instance_id, "API_KEY")


def provider_default_base_url(
    adapter_class: type[Adapter] | None,
    settings: ProviderSettings,
    *,
    environ: Mapping[str, str] | None = None,
) -> str | None:
    """The endpoint a provider uses when neither the settings nor the environment name one.

    The class's `default_base_url_for(settings, environ)` classmethod when it defines one
    (a provider whose host depends on the settings, such as Vertex AI's location), else
    its `default_base_url`; `None` without a class.

    Args:
        adapter_class: The instance's adapter class.
        settings: The instance's settings.
        environ: The environment to read; defaults to `os.environ`.
    """
    if adapter_class is None:
        return None
    derive = getattr(adapter_class, "default_base_url_for", None)
    if callable(derive):
        derived = derive(settings, environ=environ)
        return derived if isinstance(derived, str) and derived else None
    return adapter_class.default_base_url


class CloudPlacement(NamedTuple):
    """Where a Google Cloud instance's requests go: its project and location.

    A named tuple, not a dataclass: every client imports it, and a frozen dataclass
    costs about a millisecond to create at import (a named tuple about a seventh).

    Attributes:
        project: The project id, or `None` when nothing names one (application default
            credentials may still supply it).
        location: The location (`"global"`, `"us-central1"`, `"us"`, ...), or `None` when
            nothing names one and the provider has no default.
    """

    project: str | None
    location: str | None


def cloud_placement(
    settings: ProviderSettings,
    *,
    project_envs: tuple[str, ...] = (),
    location_envs: tuple[str, ...] = (),
    default_location: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> CloudPlacement:
    """An instance's Google Cloud project and location (see the module's rule).

    Args:
        settings: The instance's settings (`options["project"]`, `options["location"]`).
        project_envs: The provider's project variables, in order.
        location_envs: The provider's location variables, in order.
        default_location: The location when nothing names one.
        environ: The environment to read; defaults to `os.environ`.
    """
    env = os.environ if environ is None else environ

    def pick(option: str, what: str, names: tuple[str, ...]) -> str | None:
        given = settings.options.get(option)
        if isinstance(given, str) and given.strip():
            return given.strip()
        for name in (instance_env(settings.instance_id, what), *names):
            value = env.get(name, "").strip()
            if value:
                return value
        return None

    return CloudPlacement(
        project=pick("project", "PROJECT", project_envs),
        location=pick("location", "LOCATION", location_envs) or default_location,
    )


def _resolve(
    settings: ProviderSettings, default: str | None, environ: Mapping[str, str] | None
) -> tuple[str | None, BaseURLSource | None]:
    env = os.environ if environ is None else environ
    if settings.base_url:
        return settings.base_url, "settings"
    from_env = env.get(base_url_env(settings.instance_id))
    if from_env:
        return from_env, "env"
    if default:
        return default, "default"
    return None, None


def resolve_base_url(
    settings: ProviderSettings,
    default: str | None = None,
    *,
    environ: Mapping[str, str] | None = None,
) -> str | None:
    """An instance's base URL: its settings, then `ANYINFER_<INSTANCE>_BASE_URL`, then
    `default` (the adapter class's `default_base_url`); `None` when none applies.

    Args:
        settings: The instance's settings.
        default: The provider's default endpoint.
        environ: The environment to read; defaults to `os.environ`.
    """
    return _resolve(settings, default, environ)[0]


def locality_of(url: str | None) -> Locality:
    """`"local"` for a loopback, `localhost` or Unix-socket URL; `"remote"` otherwise.

    A missing URL is `"remote"`: nothing says the instance is on this machine. Only the
    URL's text is inspected; no name is resolved.
    """
    if not url:
        return "remote"
    parts = urlsplit(url if "://" in url else "//" + url)
    if parts.scheme.lower() in _UNIX_SCHEMES:
        return "local"
    host = (parts.hostname or "").lower().rstrip(".")
    if host == "localhost" or host.endswith(".localhost"):
        return "local"
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return "remote"
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return "local" if address.ipv4_mapped.is_loopback else "remote"
    return "local" if address.is_loopback else "remote"


class InstanceConfig(NamedTuple):
    """What the base-URL, key and locality rules say about one configured instance.

    A named tuple, not a dataclass (as `CloudPlacement`).

    Attributes:
        instance_id: The instance's identity (its alias, else its provider id).
        base_url: The endpoint its adapter connects to, or `None` when nothing supplies
            one (the adapter refuses to build).
        base_url_source: Which rung supplied `base_url`.
        key_envs: Variables consulted, in order, for the key when the settings give none.
        locality: Whether the endpoint is on this machine.
    """

    instance_id: str
    base_url: str | None
    base_url_source: BaseURLSource | None
    key_envs: tuple[str, ...]
    locality: Locality

    @property
    def is_local(self) -> bool:
        """Whether the instance runs on this machine."""
        return self.locality == "local"


def instance_config(
    settings: ProviderSettings,
    adapter_class: type[Adapter] | None = None,
    *,
    environ: Mapping[str, str] | None = None,
) -> InstanceConfig:
    """Resolve a configured instance's base URL, key variables and locality.

    Args:
        settings: The instance's settings.
        adapter_class: The class its adapter is built from (for `default_base_url`,
            `api_key_env` and `fallback_api_key_env`); `None` for no provider defaults.
        environ: The environment to read; defaults to `os.environ`.
    """
    default = provider_default_base_url(adapter_class, settings, environ=environ)
    url, source = _resolve(settings, default, environ)
    provider_envs = (
        (adapter_class.api_key_env, adapter_class.fallback_api_key_env)
        if adapter_class is not None
        else ()
    )
    key_envs = (api_key_env(settings.instance_id), *(n for n in provider_envs if n))
    return InstanceConfig(
        instance_id=settings.instance_id,
        base_url=url,
        base_url_source=source,
        key_envs=key_envs,
        locality=locality_of(url),
    )
