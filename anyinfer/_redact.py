"""Secret registry and redaction.

Every credential the library resolves is registered here, process-wide, at the moment it
is resolved. Anything that renders text a user or an observer may see — error messages,
`ErrorInfo.detail`, reprs, telemetry — goes through `redact`.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["MASK", "SENSITIVE_HEADERS", "redact", "redact_headers", "register_secret"]

MASK = "[secure]"
SENSITIVE_HEADERS = frozenset(
    {
        "authorization",
        "proxy-authorization",
        "x-api-key",
        "api-key",
        "x-goog-api-key",
        "cookie",
        "set-cookie",
        "openai-organization",
        "openai-project",
        "anthropic-organization-id",
    }
)
"""Header names whose values are secrets or account identifiers: masked in errors, logs
and raw payloads, and scrubbed from recorded cassettes (one list for both)."""
_MIN_SECRET_LEN = 4

_lock = threading.Lock()
_secrets: frozenset[str] = frozenset()
_pattern: re.Pattern[str] | None = None


def register_secret(secret: str | None) -> None:
    """Register a secret so that `redact` masks it from now on.

    Args:
        secret: The secret text. Values shorter than four characters are ignored: masking
            them would mangle ordinary text without protecting anything.
    """
    global _secrets, _pattern
    if not secret or len(secret) < _MIN_SECRET_LEN or secret in _secrets:
        return
    with _lock:
        _secrets = _secrets | {secret}
        # Longest first so that a secret containing another is masked whole.
        ordered = sorted(_secrets, key=len, reverse=True)
        _pattern = re.compile("|".join(re.escape(s) for s in ordered))


def registered_secrets() -> frozenset[str]:
    """The secrets registered so far."""
    return _secrets


def redact(text: str) -> str:
    """Mask every registered secret in `text`.

    Args:
        text: Any text.

    Returns:
        The text with each registered secret replaced by `[secure]`.
    """
    pattern = _pattern
    if pattern is None or not text:
        return text
    return pattern.sub(MASK, text)


def redact_headers(headers: Mapping[str, str] | Iterable[tuple[str, str]]) -> dict[str, str]:
    """Render headers with sensitive values masked.

    Args:
        headers: A mapping or pairs of header names and values.

    Returns:
        A new dict; sensitive headers show `[secure]`, others are redacted text.
    """
    items = headers.items() if isinstance(headers, Mapping) else headers
    return {
        name: MASK if name.lower() in SENSITIVE_HEADERS else redact(value) for name, value in items
    }


def redact_value(value: Any) -> Any:
    """Redact secrets inside a JSON-like value (dicts, lists, strings)."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, Mapping):
        return {
            k: (MASK if isinstance(k, str) and k.lower() in SENSITIVE_HEADERS else redact_value(v))
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [redact_value(v) for v in value]
    return value
