"""Secret registry and redaction.

Every credential the library resolves is registered here, process-wide, at the moment it
is resolved. Anything that renders text a user or an observer may see — error messages,
`ErrorInfo.detail`, reprs, telemetry, retained raw payloads, httpx/httpcore log records —
goes through `redact`.

A secret is masked in the forms it takes when some layer escapes it, not only verbatim:
surrounding whitespace stripped, JSON-escaped, `repr`-escaped (as text and as UTF-8
bytes, the way `b'...'` shows up in an exception message), URL-encoded, and each of
those escaped once more. The forms are computed once, when the secret is registered, into
one precompiled alternation; `redact` with nothing registered is a single `None` check.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import quote, quote_plus

__all__ = [
    "MASK",
    "SENSITIVE_HEADERS",
    "install_log_redaction",
    "redact",
    "redact_chunks",
    "redact_headers",
    "register_secret",
]

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
_forms: frozenset[str] = frozenset()
_pattern: re.Pattern[str] | None = None
_prefixes: tuple[str, ...] | None = None
"""The forms' distinct first four characters, when few enough that `in` checks for them
(a fast C scan each) beat the alternation's scan of a text holding no secret."""
_MAX_PREFIXES = 8


def _escaped_forms(secret: str) -> set[str]:
    """The secret as the layers between it and a reader may have escaped it."""
    out: set[str] = set()
    for base in {secret, secret.strip()}:
        if not base:
            continue
        once = {
            base,
            json.dumps(base)[1:-1],
            json.dumps(base, ensure_ascii=False)[1:-1],
            repr(base)[1:-1],
            repr(base.encode("utf-8", "backslashreplace"))[2:-1],
            quote(base, safe=""),
            quote_plus(base, safe=""),
        }
        out |= once
        for form in once:  # escaped twice: a repr inside an exception message, JSON of it
            out.add(json.dumps(form)[1:-1])
            out.add(repr(form)[1:-1])
    return {form for form in out if len(form) >= _MIN_SECRET_LEN}


def register_secret(secret: str | None) -> None:
    """Register a secret so that `redact` masks it from now on.

    The secret is masked verbatim and in its escaped forms (stripped, JSON, `repr`,
    URL-encoded). Registering the first secret also installs the log filter that redacts
    httpx and httpcore log records (`install_log_redaction`).

    Args:
        secret: The secret text. Values shorter than four characters are ignored: masking
            them would mangle ordinary text without protecting anything.
    """
    global _secrets, _forms, _pattern, _prefixes
    if not secret or len(secret) < _MIN_SECRET_LEN or secret in _secrets:
        return
    with _lock:
        _secrets = _secrets | {secret}
        _forms = _forms | _escaped_forms(secret)
        # Longest first so that a secret containing another is masked whole.
        ordered = sorted(_forms, key=len, reverse=True)
        prefixes = tuple(sorted({s[:_MIN_SECRET_LEN] for s in ordered}))
        # One prefix: the alternation's own literal-prefix scan is faster still.
        _prefixes = prefixes if 1 < len(prefixes) <= _MAX_PREFIXES else None
        _pattern = re.compile("|".join(re.escape(s) for s in ordered))
    install_log_redaction()


def registered_secrets() -> frozenset[str]:
    """The secrets registered so far."""
    return _secrets


def secret_pattern() -> re.Pattern[str] | None:
    """The compiled alternation of every registered secret's forms; `None` when none is."""
    return _pattern


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
    prefixes = _prefixes
    if prefixes is not None:
        for prefix in prefixes:
            if prefix in text:
                return pattern.sub(MASK, text)
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
    if isinstance(value, bytes) and _pattern is not None:
        text = value.decode("utf-8", "surrogateescape")
        masked = redact(text)
        return value if masked == text else masked.encode("utf-8", "surrogateescape")
    return value


_Path = tuple[Any, ...]


def _string_leaves(value: Any, path: _Path, out: list[tuple[_Path, str]]) -> None:
    if isinstance(value, str):
        out.append((path, value))
    elif isinstance(value, dict):
        for key, item in value.items():
            _string_leaves(item, (*path, key), out)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _string_leaves(item, (*path, index), out)


def _set_leaf(root: Any, path: _Path, text: str) -> Any:
    if not path:
        return text
    node = root
    for step in path[:-1]:
        node = node[step]
    node[path[-1]] = text
    return root


def redact_chunks(
    chunks: Sequence[Any], *, pattern: re.Pattern[str] | None = None, mask: str = MASK
) -> list[Any]:
    """Redact a sequence of payloads, including secrets split across them.

    Each payload is redacted on its own (`redact_value`); then the strings found at the
    same place in successive payloads — the same key path, the way a streamed text or
    tool-argument delta arrives — are read as one text, and a secret that runs across
    two or more of them is masked: the mask goes where the secret starts, and the rest of
    it is removed from the payloads it continued into, so the joined text reads as if the
    secret had arrived whole and been masked.

    Args:
        chunks: JSON-like payloads (dicts, lists, strings), in arrival order.
        pattern: What to mask; defaults to the registered secrets.
        mask: The replacement text.

    Returns:
        New payloads (the input is not modified).
    """
    pattern = pattern or _pattern
    out = [redact_value(chunk) for chunk in chunks]
    if pattern is None or len(out) < 2:
        return out
    if mask != MASK:
        out = [_remask(chunk, mask) for chunk in out]
    by_path: dict[_Path, list[tuple[int, _Path, str]]] = {}
    for number, chunk in enumerate(out):
        leaves: list[tuple[_Path, str]] = []
        _string_leaves(chunk, (), leaves)
        for path, text in leaves:
            by_path.setdefault(path, []).append((number, path, text))
    for pieces in by_path.values():
        if len(pieces) < 2:
            continue
        joined = "".join(text for _, _, text in pieces)
        matches = [(m.start(), m.end()) for m in pattern.finditer(joined)]
        if not matches:
            continue
        offset = 0
        for number, path, text in pieces:
            start, end = offset, offset + len(text)
            offset = end
            kept: list[str] = []
            position = start
            for m_start, m_end in matches:
                if m_end <= start or m_start >= end:
                    continue
                kept.append(joined[position : max(m_start, start)])
                if m_start >= start:
                    kept.append(mask)
                position = min(m_end, end)
            if position == start and not kept:
                continue
            kept.append(joined[position:end])
            out[number] = _set_leaf(out[number], path, "".join(kept))
    return out


def _remask(value: Any, mask: str) -> Any:
    if isinstance(value, str):
        return value.replace(MASK, mask)
    if isinstance(value, dict):
        return {k: _remask(v, mask) for k, v in value.items()}
    if isinstance(value, list):
        return [_remask(v, mask) for v in value]
    return value


# --- logging -----------------------------------------------------------------------

_LOGGERS = (
    "httpx",
    "httpcore",
    "httpcore.connection",
    "httpcore.http11",
    "httpcore.http2",
    "httpcore.proxy",
    "httpcore.socks",
)
"""httpx's and httpcore's loggers. A logger's filter sees only records logged to that
logger itself (not its children's), so each module logger gets the filter."""


class _RedactingFilter(logging.Filter):
    """Rewrites a log record's message with registered secrets masked."""

    def filter(self, record: logging.LogRecord) -> bool:
        if _pattern is None:
            return True
        message = record.getMessage()
        masked = redact(message)
        if masked != message:
            record.msg, record.args = masked, None
        return True


_log_filter = _RedactingFilter("anyinfer.redact")
_log_filter_installed = False


def install_log_redaction() -> None:
    """Install the redacting filter on the httpx and httpcore loggers (once).

    The filter runs only for records that are actually emitted — httpcore checks its
    level before building a record — so it costs nothing while their logging is off.
    """
    global _log_filter_installed
    if _log_filter_installed:
        return
    _log_filter_installed = True
    for name in _LOGGERS:
        logger = logging.getLogger(name)
        if _log_filter not in logger.filters:
            logger.addFilter(_log_filter)
