"""Safe defaults for one response: an overall deadline and a size cap.

`timeout_s` bounds silence only (connecting, the first byte, each gap between reads), so
a server that keeps sending keep-alive comments, or streams without end, would hold a
request open and grow its memory for ever. Every HTTP adapter therefore also enforces:

- `deadline_s` — the longest one response body may take, from its headers to its last
  byte, whatever arrives in between (default `DEFAULT_DEADLINE_S`). Past it the read
  fails with `ProviderTimeoutError(timeout_kind="total", phase="stream")`. It is checked
  as bytes arrive, so a silent server still fails on `timeout_s` first.
- `max_response_bytes` — the provider's default response cap, used when a call passes
  none (default `DEFAULT_MAX_RESPONSE_BYTES`); past it the read fails with
  `ResponseTooLargeError`. A call's own `max_response_bytes=` overrides it.

Both are `ProviderSettings.options` keys (`LIMIT_OPTIONS`), so every provider accepts
them; `None` turns a limit off.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from .._client.validate import need_int, need_number
from .._errors import ConfigError

if TYPE_CHECKING:
    from .._settings import ProviderSettings

__all__ = [
    "DEFAULT_DEADLINE_S",
    "DEFAULT_MAX_RESPONSE_BYTES",
    "LIMIT_OPTIONS",
    "ResponseLimits",
    "response_limits",
]

DEFAULT_DEADLINE_S = 1800.0
"""Longest one response may take, in seconds (30 minutes): far beyond any real
generation, short of for ever. Provider option `deadline_s`."""

DEFAULT_MAX_RESPONSE_BYTES = 64 * 1024 * 1024
"""Default cap on one response's decoded size (64 MiB): hundreds of times a long text
answer, and room for inline images. Provider option `max_response_bytes`."""

LIMIT_OPTIONS = frozenset({"deadline_s", "max_response_bytes"})
"""The `ProviderSettings.options` keys this module reads."""


class ResponseLimits(NamedTuple):
    """One provider instance's response limits (`None`: no limit)."""

    deadline_s: float | None
    max_response_bytes: int | None


def response_limits(settings: ProviderSettings) -> ResponseLimits:
    """Read and check a provider's `deadline_s` and `max_response_bytes` options.

    Args:
        settings: The provider's settings.

    Returns:
        The limits, defaults filled in.

    Raises:
        ConfigError: If an option is not a positive number (an integer for bytes) or
            `None`.
    """
    options = settings.options
    deadline = options.get("deadline_s", DEFAULT_DEADLINE_S)
    cap = options.get("max_response_bytes", DEFAULT_MAX_RESPONSE_BYTES)
    try:
        if deadline is not None:
            need_number(deadline, "options['deadline_s']", positive=True)
        if cap is not None:
            need_int(cap, "options['max_response_bytes']", minimum=1)
    except ConfigError as exc:
        raise ConfigError(
            f"provider {settings.instance_id!r}: {exc.message}", provider=settings.instance_id
        ) from None
    return ResponseLimits(None if deadline is None else float(deadline), cap)
