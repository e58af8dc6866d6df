"""The one error classifier: an error status, a provider's code and message → a typed error.

Every adapter maps errors here, error statuses and in-stream error frames alike. The
HTTP status class decides first; the provider's hints only refine within it:

1. The status gives the class and its default type (`kind_for_status`): 401/403
   `AuthenticationError`, 404 `ModelNotFoundError`, 408 `ProviderTimeoutError`, 429
   `RateLimitError`, 503/529 `OverloadedError`, any other 4xx a non-retryable
   `ProviderError`, any other 5xx a retryable `ProviderError`.
2. The hints — first the provider's reading of its own error code or type
   (`HTTPAdapter.error_hint`), then keywords in the code and message
   (`keyword_kind`) — refine a generic type into a specific one of the same class:
   a 400 saying "context length exceeded" is a `ContextWindowError`, a 500 saying
   `overloaded_error` an `OverloadedError`, a 429 with `insufficient_quota` a
   non-retryable `RateLimitError`. A hint of the other class is ignored: a 500
   "authentication failed" or a 503 "safety service unavailable" stays a retryable
   server error (and never triggers a content-policy redirect).
3. With no status at all (an error frame inside a 200 stream), the code's hint picks
   the class, keywords refine as above, and an error nothing identifies is a
   retryable `ProviderError`.

A provider module holds only its protocol's hints (Anthropic's error-type → status
table, Gemini's `status` names); the phrase list and the `(message, code)` extractor
below are the only ones.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal, NamedTuple, get_args

from .._errors import (
    AuthenticationError,
    ContentFilterError,
    ContextWindowError,
    ModelNotFoundError,
    OverloadedError,
    ProviderError,
    ProviderTimeoutError,
    RateLimitError,
)

__all__ = [
    "CODE_KINDS",
    "CONTENT_POLICY_PHRASES",
    "CONTEXT_OVERFLOW_PHRASES",
    "ErrorFields",
    "ErrorKind",
    "classify",
    "error_fields",
    "keyword_kind",
    "kind_for_status",
    "message_and_code",
    "status_from_code",
]

ErrorKind = Literal[
    "context_window",
    "content_filter",
    "auth",
    "not_found",
    "timeout",
    "rate_limit",
    "quota",
    "invalid",
    "overloaded",
    "server",
]
"""What an error means, provider-neutrally. `invalid` (a rejected request) and `server`
(a server failure) are the generic kinds of the 4xx and the 5xx class."""

_SERVER_KINDS: frozenset[ErrorKind] = frozenset({"overloaded", "server"})
_CLIENT_KINDS: frozenset[ErrorKind] = frozenset(get_args(ErrorKind)) - _SERVER_KINDS
"""Kinds of the 4xx class (the request, the credential or the quota is at fault)."""
_GENERIC_KINDS: frozenset[ErrorKind] = frozenset({"invalid", "server"})

CONTEXT_OVERFLOW_PHRASES: tuple[str, ...] = (
    "context_length_exceeded",
    "context length",
    "context window",
    "maximum context",
    "too many tokens",
    "prompt is too long",
    "exceeds the available context size",
    "exceed_context_size",
    "exceed context limit",  # Anthropic: "input length and max_tokens exceed context limit"
    "exceeds the maximum number of tokens",  # Gemini
    "input is too long",
)
"""Phrases (lower case) by which providers say the prompt does not fit the model."""

CONTENT_POLICY_PHRASES: tuple[str, ...] = (
    "content_filter",
    "content_policy",
    "safety system",
    "safety filter",
    "safety polic",
    "safety reasons",
    "blocked for safety",
)
"""Phrases (lower case) by which providers say a content policy refused the request. A
bare "safety" is not one: "Invalid value at 'safety_settings'" is a malformed request."""

CODE_KINDS: Mapping[str, ErrorKind] = {
    "context_length_exceeded": "context_window",
    "exceed_context_size_error": "context_window",
    "content_filter": "content_filter",
    "content_policy_violation": "content_filter",
    "invalid_api_key": "auth",
    "authentication": "auth",
    "authentication_error": "auth",
    "permission_error": "auth",
    "model_not_found": "not_found",
    "not_found_error": "not_found",
    "insufficient_quota": "quota",
    "rate_limit_exceeded": "rate_limit",
    "rate_limit_error": "rate_limit",
    "overloaded": "overloaded",
    "overloaded_error": "overloaded",
    "server_error": "server",
    "api_error": "server",
    "invalid_request_error": "invalid",
}
"""The OpenAI-family error codes and types (shared by many providers) and their kinds."""


def kind_for_status(status: int) -> ErrorKind:
    """The kind an HTTP status stands for when nothing else is known."""
    if status in (401, 403):
        return "auth"
    if status == 404:
        return "not_found"
    if status == 408:
        return "timeout"
    if status == 429:
        return "rate_limit"
    if status in (503, 529):
        return "overloaded"
    return "server" if status >= 500 else "invalid"


def keyword_kind(code: str | None, message: str) -> ErrorKind | None:
    """The kind an error's code and message text suggest, most specific first."""
    lowered = f"{code or ''} {message}".lower()
    if any(phrase in lowered for phrase in CONTEXT_OVERFLOW_PHRASES):
        return "context_window"
    if any(phrase in lowered for phrase in CONTENT_POLICY_PHRASES):
        return "content_filter"
    if "authentication" in lowered or "invalid_api_key" in lowered:
        return "auth"
    if "insufficient_quota" in lowered or "quota" in (code or ""):
        return "quota"
    if "rate_limit" in lowered:
        return "rate_limit"
    if "overloaded" in lowered:
        return "overloaded"
    if "model_not_found" in lowered:
        return "not_found"
    return None


def _refines(base: ErrorKind, hint: ErrorKind, cross: bool = False) -> bool:
    if (base in _CLIENT_KINDS) != (hint in _CLIENT_KINDS) and not (
        cross and base in _GENERIC_KINDS
    ):
        return False  # a hint does not cross the status class
    if base in _GENERIC_KINDS:
        return hint not in _GENERIC_KINDS
    return base == "rate_limit" and hint == "quota"


def classify(
    status: int | None,
    message: str,
    code: str | None,
    *,
    hint: ErrorKind | None,
    provider: str,
    cross_class: frozenset[ErrorKind] = frozenset(),
    retry_after: float | None = None,
    phase: str = "generate",
) -> ProviderError:
    """The typed error for an error status or error frame (see the module docstring).

    Args:
        status: The HTTP status, or `None` for an error inside a 200 stream.
        message: The provider's error message.
        code: The provider's error code or type, verbatim.
        hint: The provider's reading of `code` (`HTTPAdapter.error_hint`).
        cross_class: Kinds the provider's hint carries even across the status class
            (`HTTPAdapter.cross_class_hints`): a server known to report them under a
            generic status of the other class. Keywords never cross.
        provider: The instance id, for the message and the error's context.
        retry_after: Seconds the provider asked to wait (used by `RateLimitError`).
        phase: Lifecycle phase.
    """
    keyword = keyword_kind(code, message)
    if status is not None and 400 <= status <= 599:
        kind = kind_for_status(status)
    elif status is not None:
        kind = "invalid"  # not an error status: nothing to refine
        keyword = hint = None
    else:
        kind = hint if hint is not None else (keyword or "server")
    if hint is not None and _refines(kind, hint, hint in cross_class):
        kind = hint
    elif keyword is not None and _refines(kind, keyword):
        kind = keyword
    where = f"HTTP {status}" if status is not None else "error frame"
    label = f" ({code})" if code else ""
    text = f"{provider}: {where}{label}: {message or 'no message'}"
    kw: dict[str, Any] = {"provider": provider, "http_status": status, "phase": phase}
    if kind == "context_window":
        return ContextWindowError(text, **kw)
    if kind == "content_filter":
        return ContentFilterError(text, **kw)
    if kind == "auth":
        return AuthenticationError(text, **kw)
    if kind == "not_found":
        return ModelNotFoundError(text, **kw)
    if kind == "timeout":
        return ProviderTimeoutError(text, timeout_kind="total", **kw)
    if kind in ("rate_limit", "quota"):
        return RateLimitError(text, retry_after=retry_after, retryable=kind == "rate_limit", **kw)
    if kind == "overloaded":
        return OverloadedError(text, **kw)
    return ProviderError(text, retryable=kind == "server", **kw)


# --- reading error bodies and objects --------------------------------------------------


class ErrorFields(NamedTuple):
    """What an error object says."""

    message: str
    code: str | None
    """The first textual code or type (`None` when there is none)."""
    status: int | None
    """An HTTP status the object names in a numeric code (gateways relay the upstream
    status there); `None` unless it is an error status."""


def status_from_code(value: Any) -> int | None:
    """An error status (400-599) from a numeric code (`502`, `"502"`), else `None`.

    Only ASCII digits count: `"²"` is a digit to `str.isdigit` but not a number.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) == 3:
        value = int(value)
    if isinstance(value, int) and 400 <= value <= 599:
        return value
    return None


def _is_numeric(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    return isinstance(value, int | float) or (
        isinstance(value, str) and value.isascii() and value.isdigit()
    )


def error_fields(error: Any, code_keys: Sequence[str] = ("code", "type", "status")) -> ErrorFields:
    """Read one error object: `{"message", "code", "type", ...}` or a bare string.

    Args:
        error: The error object.
        code_keys: Where the code is, in the provider's order of preference. A textual
            value wins over a numeric one (llama.cpp and vLLM put the HTTP status in
            `code` and the kind of error in `type`); a numeric one becomes `status`.
            The placeholder type `"error"` is no code.
    """
    if isinstance(error, str):
        return ErrorFields(error, None, None)
    if not isinstance(error, dict):
        return ErrorFields(brief_json(error), None, None)
    message = error.get("message")
    code: str | None = None
    numeric: str | None = None
    status: int | None = None
    for key in code_keys:
        value = error.get(key)
        if value is None or value == "" or value == "error" or isinstance(value, dict | list):
            continue
        if _is_numeric(value):
            numeric = numeric or str(value)
            status = status or status_from_code(value)
        elif code is None:
            code = str(value)
    return ErrorFields(
        str(message) if message else brief_json(error),
        code if code is not None else numeric,
        status,
    )


def message_and_code(
    payload: Any, code_keys: Sequence[str] = ("code", "type", "status")
) -> tuple[str, str | None]:
    """Find a message and a code in the common error-body shapes.

    Handles `{"error": {"message", "type", "code"}}`, `{"error": "text"}`,
    `{"message": ...}`, FastAPI's `{"detail": ...}` and lists of those (Gemini wraps
    errors in a list); the code is read as `error_fields` reads it.
    """
    if isinstance(payload, list) and payload:
        payload = payload[0]
    if not isinstance(payload, dict):
        return brief_json(payload), None
    detail = payload.get("detail")
    if detail is not None and "error" not in payload and "message" not in payload:
        # FastAPI's `{"detail": "..."}` (Voyage AI, Jina AI), or its validation list
        return (detail if isinstance(detail, str) else brief_json(detail)), None
    err = payload.get("error", payload)
    if isinstance(err, str):
        return err, None
    if not isinstance(err, dict):
        return brief_json(payload), None
    fields = error_fields(err, code_keys)
    return fields.message, fields.code


_TEXT_MAX = 500


def brief_json(value: Any) -> str:
    """`value` as short text for an error message: a string as it is, anything else as
    JSON, at most 500 characters; a value nested too deeply to print is named by type."""
    if isinstance(value, str):
        return value[:_TEXT_MAX]
    try:
        return json.dumps(value, default=str)[:_TEXT_MAX]
    except (RecursionError, ValueError, TypeError):
        return f"<{type(value).__name__} nested too deeply to print>"
