"""AnyInfer: one typed way to call LLM providers, hosted and local.

import anyinfer as ai

with ai.Client([ai.ProviderSettings("openai", api_key="env://OPENAI_API_KEY")]) as client:
    result = client.generate("Say hi", target="openai:gpt-4o-mini")
    print(result.text, result.usage)
"""

from __future__ import annotations

import contextlib

from ._client import AsyncClient, Client
from ._credentials import CredentialResolver, EnvResolver, KeyringResolver, ResolverChain
from ._errors import (
    AllTargetsFailedError,
    AnyInferError,
    AuthenticationError,
    ConfigError,
    ContentFilterError,
    ContextWindowError,
    LocalRuntimeError,
    ModelNotFoundError,
    OverloadedError,
    ProtocolError,
    ProviderError,
    ProviderTimeoutError,
    RateLimitError,
    ResponseTooLargeError,
    SchemaViolationError,
    StreamError,
    ToolLoopError,
)
from ._events import (
    AttemptFailed,
    ReasoningDelta,
    StreamEnded,
    StreamEvent,
    TextDelta,
    TimingMark,
    TimingMarkName,
    ToolCallDelta,
    UsageUpdate,
)
from ._messages import ContentPart, ImageContent, Message, MessagesInput, Role, TextContent
from ._redact import register_secret
from ._registry import ENTRY_POINT_GROUP, ProviderRegistry, default_registry
from ._request import ReasoningEffort, Sampling, ToolChoice, ToolSpec
from ._route import Decision, RetryPolicy, Route, default_decision
from ._settings import ProviderSettings
from ._stream import AsyncStream, SyncStream
from ._types import (
    DETAIL_MAX_CHARS,
    AttemptRecord,
    ErrorInfo,
    FinishReason,
    Generation,
    Mechanism,
    Outcome,
    ResolvedTarget,
    Target,
    Timing,
    ToolCall,
    Usage,
)

__version__ = "0.1.0"

__all__ = [
    "DETAIL_MAX_CHARS",
    "ENTRY_POINT_GROUP",
    "AllTargetsFailedError",
    "AnyInferError",
    "AsyncClient",
    "AsyncStream",
    "AttemptFailed",
    "AttemptRecord",
    "AuthenticationError",
    "Client",
    "ConfigError",
    "ContentFilterError",
    "ContentPart",
    "ContextWindowError",
    "ErrorInfo",
    "FinishReason",
    "Generation",
    "ImageContent",
    "LocalRuntimeError",
    "Mechanism",
    "Message",
    "MessagesInput",
    "ModelNotFoundError",
    "Outcome",
    "OverloadedError",
    "ProtocolError",
    "ProviderError",
    "ProviderRegistry",
    "ProviderSettings",
    "ProviderTimeoutError",
    "RateLimitError",
    "ReasoningDelta",
    "ReasoningEffort",
    "ResolvedTarget",
    "ResponseTooLargeError",
    "Role",
    "RetryPolicy",
    "Route",
    "ResolverChain",
    "CredentialResolver",
    "EnvResolver",
    "KeyringResolver",
    "Decision",
    "default_decision",
    "Sampling",
    "SchemaViolationError",
    "StreamEnded",
    "StreamError",
    "StreamEvent",
    "SyncStream",
    "Target",
    "TextContent",
    "TextDelta",
    "Timing",
    "TimingMark",
    "TimingMarkName",
    "ToolCall",
    "ToolCallDelta",
    "ToolChoice",
    "ToolLoopError",
    "ToolSpec",
    "Usage",
    "UsageUpdate",
    "default_registry",
    "register_secret",
]


def _publish() -> None:
    # Reprs, tracebacks and docs say `anyinfer.Generation`, not a private module path.
    for name in __all__:
        obj = globals()[name]
        if isinstance(obj, type) or (callable(obj) and hasattr(obj, "__module__")):
            with contextlib.suppress(AttributeError, TypeError):
                obj.__module__ = "anyinfer"


_publish()
