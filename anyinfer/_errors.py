"""The AnyInfer exception hierarchy.

Every error the library raises derives from `AnyInferError` and carries typed context —
the provider involved, the lifecycle phase, whether a retry could help, the HTTP status —
and converts to a redacted, serializable `ErrorInfo` with `to_info()`::

    AnyInferError
    ├── ConfigError                  bad settings, unknown provider or target
    ├── ProviderError                the provider failed (http_status when from HTTP)
    │   ├── AuthenticationError      401/403: the credential was refused
    │   ├── RateLimitError           429: carries retry_after seconds when sent
    │   ├── OverloadedError          503/529: the provider is at capacity
    │   ├── ModelNotFoundError       404: the model or endpoint does not exist
    │   ├── ContextWindowError       the prompt does not fit the model's window
    │   ├── ContentFilterError       the provider refused on content policy
    │   ├── ProviderTimeoutError     connect, first-byte or idle timeout
    │   │   └── PoolExhaustedError   no free connection in this client's pool in time
    │   ├── ResponseTooLargeError    the response exceeded max_response_bytes
    │   └── StreamError              the connection broke mid-response
    │       └── ProtocolError        the bytes did not follow the wire protocol
    ├── AllTargetsFailedError        every routed target failed; carries the attempts
    ├── SchemaViolationError         structured output never validated
    ├── ToolLoopError                unknown tool, bad tool signature, round budget spent
    └── LocalRuntimeError            local weights: transfer, digest, disk failures

Messages are capped at `MESSAGE_MAX_CHARS` characters (one place for every error), and
redacted when rendered: a secret registered with the redaction registry never appears in
`str()`, `repr()` or `ErrorInfo.detail`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ._redact import redact
from ._types import DETAIL_MAX_CHARS, ErrorInfo

if TYPE_CHECKING:
    from ._types import AttemptRecord

__all__ = [
    "AllTargetsFailedError",
    "AnyInferError",
    "AuthenticationError",
    "ConfigError",
    "ContentFilterError",
    "ContextWindowError",
    "LocalRuntimeError",
    "ModelNotFoundError",
    "OverloadedError",
    "PoolExhaustedError",
    "ProtocolError",
    "ProviderError",
    "ProviderTimeoutError",
    "RateLimitError",
    "ResponseTooLargeError",
    "SchemaViolationError",
    "StreamError",
    "ToolLoopError",
]


MESSAGE_MAX_CHARS = 8000
"""The longest error message kept (`str(exc)`, `exc.message`): a provider can put
megabytes into an error frame; the rest is cut, with a note saying how much."""


def cap_message(text: str) -> str:
    """`text` cut to `MESSAGE_MAX_CHARS`, ending with a note of what was cut."""
    if len(text) <= MESSAGE_MAX_CHARS:
        return text
    note = f" … [{len(text) - MESSAGE_MAX_CHARS + 60} more characters cut]"
    return text[: MESSAGE_MAX_CHARS - 60] + note


class AnyInferError(Exception):
    """Base class of every error AnyInfer raises.

    Attributes:
        provider: Id of the provider involved, or `None`.
        phase: Lifecycle stage that failed: `configure`, `discover`, `generate`,
            `stream`, `validate` or `cleanup`.
        retryable: Whether retrying the identical request could plausibly succeed.
        http_status: Status code, for failures that came from an HTTP response.
        attempts: The routing trail up to this error, when it ended a request.
    """

    default_phase = "generate"
    default_retryable = False

    def __init__(
        self,
        message: str,
        *,
        provider: str | None = None,
        phase: str | None = None,
        retryable: bool | None = None,
        http_status: int | None = None,
    ) -> None:
        self._message = cap_message(redact(message))
        super().__init__(self._message)
        self.provider = provider
        self.phase = phase or self.default_phase
        self.retryable = self.default_retryable if retryable is None else retryable
        self.http_status = http_status
        self.attempts: tuple[AttemptRecord, ...] = ()

    @property
    def message(self) -> str:
        """The redacted message."""
        return redact(self._message)

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        bits = [repr(self.message)]
        if self.provider:
            bits.append(f"provider={self.provider!r}")
        if self.http_status is not None:
            bits.append(f"http_status={self.http_status}")
        return f"{type(self).__name__}({', '.join(bits)})"

    def to_info(self) -> ErrorInfo:
        """Snapshot this error as a redacted, serializable `ErrorInfo`."""
        return ErrorInfo(
            type_name=type(self).__name__,
            provider=self.provider,
            phase=self.phase,
            retryable=self.retryable,
            http_status=self.http_status,
            detail=self.message[:DETAIL_MAX_CHARS],
            retry_after=getattr(self, "retry_after", None),
        )


class ConfigError(AnyInferError):
    """The client, a provider setting or a target is misconfigured."""

    default_phase = "configure"


class ProviderError(AnyInferError):
    """A provider answered with an error, or could not be reached."""


class AuthenticationError(ProviderError):
    """The provider refused the credential (HTTP 401/403)."""


class RateLimitError(ProviderError):
    """The provider is rate limiting this client (HTTP 429).

    Attributes:
        retry_after: Seconds the provider asked to wait, when it said.
    """

    default_retryable = True

    def __init__(self, message: str, *, retry_after: float | None = None, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.retry_after = retry_after


class OverloadedError(ProviderError):
    """The provider is temporarily at capacity (HTTP 503/529, `overloaded_error`)."""

    default_retryable = True


class ModelNotFoundError(ProviderError):
    """The model or endpoint does not exist at this provider (HTTP 404)."""


class ContextWindowError(ProviderError):
    """The request does not fit the model's context window."""


class ContentFilterError(ProviderError):
    """The provider refused the request or response on content policy."""


class ProviderTimeoutError(ProviderError):
    """The provider did not answer in time.

    Attributes:
        timeout_kind: Which limit ran out: `connect`, `first_byte`, `idle`, `total`, or
            `pool` (waiting for a free connection: `PoolExhaustedError`).
    """

    default_retryable = True

    def __init__(self, message: str, *, timeout_kind: str = "total", **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.timeout_kind = timeout_kind


class PoolExhaustedError(ProviderTimeoutError):
    """No connection to the provider came free in time: this client's own connection
    pool was exhausted (`timeout_kind` is `"pool"`).

    The request never reached the provider, so it says nothing about the provider's
    health. Too many concurrent requests for the pool's size (the provider option
    `max_connections`), or streams left open, cause it. Not retryable: routing falls
    back to the next target.

    Attributes:
        max_connections: The pool's size.
    """

    default_retryable = False

    def __init__(self, message: str, *, max_connections: int | None = None, **kwargs: Any) -> None:
        kwargs.setdefault("timeout_kind", "pool")
        super().__init__(message, **kwargs)
        self.max_connections = max_connections


class ResponseTooLargeError(ProviderError):
    """The response grew past the request's `max_response_bytes`."""

    default_phase = "stream"


class StreamError(ProviderError):
    """The connection broke before the response was complete."""

    default_phase = "stream"
    default_retryable = True


class ProtocolError(StreamError):
    """The response did not follow the provider's wire protocol (a malformed frame)."""

    default_retryable = False


class AllTargetsFailedError(AnyInferError):
    """Every target of a route failed.

    Attributes:
        attempts: The whole routing trail, one record per attempt.
    """

    def __init__(
        self, message: str, *, attempts: Sequence[AttemptRecord] = (), **kwargs: Any
    ) -> None:
        super().__init__(message, **kwargs)
        self.attempts: tuple[AttemptRecord, ...] = tuple(attempts)


class SchemaViolationError(AnyInferError):
    """Structured output never satisfied the schema.

    Attributes:
        text: The last response text.
        errors: The validation errors of the last attempt.
    """

    default_phase = "validate"

    def __init__(
        self, message: str, *, text: str = "", errors: Sequence[str] = (), **kwargs: Any
    ) -> None:
        super().__init__(message, **kwargs)
        self.text = text
        self.errors: tuple[str, ...] = tuple(errors)


class ToolLoopError(AnyInferError):
    """A tool loop cannot continue: unknown tool, bad signature, or rounds spent."""


class LocalRuntimeError(AnyInferError):
    """Local weights could not be acquired or used: transfer, digest or disk failure."""
