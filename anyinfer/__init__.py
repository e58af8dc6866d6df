"""AnyInfer: one typed way to call LLM providers, hosted and local.

import anyinfer as ai

with ai.Client([ai.ProviderSettings("openai", api_key="env://OPENAI_API_KEY")]) as client:
    result = client.generate("Say hi", target="openai:gpt-4o-mini")
    print(result.text, result.usage)
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

from ._adapters.registry import ENTRY_POINT_GROUP, ProviderRegistry, default_registry
from ._client.aclient import AsyncClient
from ._client.credentials import CredentialResolver, EnvResolver, KeyringResolver, ResolverChain
from ._client.route import Decision, RetryPolicy, Route, default_decision
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
    PoolExhaustedError,
    ProtocolError,
    ProviderError,
    ProviderTimeoutError,
    RateLimitError,
    ResponseTooLargeError,
    SchemaViolationError,
    StreamError,
    ToolLoopError,
)
from ._messages import (
    AudioContent,
    ContentPart,
    DocumentContent,
    ImageContent,
    Message,
    MessagesInput,
    Role,
    TextContent,
)
from ._redact import register_secret
from ._request import DEFAULT_MAX_ROUNDS, ReasoningEffort, Sampling, ToolChoice, ToolSpec
from ._settings import ProviderSettings
from ._stream.events import (
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
from ._stream.generation import AsyncStream, SyncStream
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
    "DEFAULT_MAX_ROUNDS",
    "EmbedEncoding",
    "Embeddings",
    "RankedDocument",
    "Reranking",
    "Repair",
    "SchemaSpec",
    "SupportsJSONSchema",
    "Tool",
    "tool",
    "DEFAULT_PRICING_URL",
    "AttemptEnded",
    "AttemptStarted",
    "ByteHeuristicEstimator",
    "Catalog",
    "ContextBudget",
    "FirstToken",
    "ModelCapabilities",
    "ModelPrice",
    "Observer",
    "PriceTier",
    "PricingTable",
    "Provenance",
    "RequestEnded",
    "RequestStarted",
    "TelemetryEvent",
    "TiktokenEstimator",
    "TokenEstimate",
    "TokenEstimator",
    "UsageConvention",
    "UsageReported",
    "afetch_pricing",
    "fetch_pricing",
    "AcquisitionProgress",
    "AcquisitionReport",
    "CatalogView",
    "Fit",
    "FitVerdict",
    "GPU",
    "HardwareProfile",
    "HardwareSource",
    "LocalModel",
    "ModelStore",
    "PlannedFile",
    "Posture",
    "ProgressSink",
    "RemovalReport",
    "ResolvedModel",
    "StoreEntry",
    "StoredFile",
    "Variant",
    "VariantPrefs",
    "DETAIL_MAX_CHARS",
    "ENTRY_POINT_GROUP",
    "AllTargetsFailedError",
    "AnyInferError",
    "AsyncClient",
    "AsyncStream",
    "AttemptFailed",
    "AttemptRecord",
    "AudioContent",
    "AuthenticationError",
    "Client",
    "ConfigError",
    "ContentFilterError",
    "ContentPart",
    "ContextWindowError",
    "DocumentContent",
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
    "PoolExhaustedError",
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


# Imported on first use, so `import anyinfer` stays fast.
_LAZY: dict[str, str] = {
    "Client": "._client.sync",
    **dict.fromkeys(
        ("AcquisitionProgress", "AcquisitionReport", "PlannedFile", "ProgressSink"),
        "._local.acquire",
    ),
    **dict.fromkeys(
        ("CatalogView", "Fit", "FitVerdict", "LocalModel", "Posture", "Variant", "VariantPrefs"),
        "._local.catalog",
    ),
    **dict.fromkeys(("GPU", "HardwareProfile", "HardwareSource"), "._local.hardware"),
    **dict.fromkeys(
        ("ModelStore", "RemovalReport", "ResolvedModel", "StoreEntry", "StoredFile"),
        "._local.store",
    ),
    "UsageConvention": "._adapters.profile",
    **dict.fromkeys(("ModelCapabilities", "Provenance"), "._knowledge.capabilities"),
    "Catalog": "._knowledge.catalog",
    **dict.fromkeys(
        ("EmbedEncoding", "Embeddings", "RankedDocument", "Reranking"), "._embed._types"
    ),
    **dict.fromkeys(("Tool", "tool"), "._structured.tools"),
    **dict.fromkeys(("Repair", "SchemaSpec", "SupportsJSONSchema"), "._structured.output"),
    **dict.fromkeys(
        (
            "DEFAULT_PRICING_URL",
            "ModelPrice",
            "PriceTier",
            "PricingTable",
            "afetch_pricing",
            "fetch_pricing",
        ),
        "._knowledge.pricing",
    ),
    **dict.fromkeys(
        (
            "ByteHeuristicEstimator",
            "ContextBudget",
            "TiktokenEstimator",
            "TokenEstimate",
            "TokenEstimator",
        ),
        "._knowledge.budget",
    ),
    **dict.fromkeys(
        (
            "AttemptEnded",
            "AttemptStarted",
            "FirstToken",
            "Observer",
            "RequestEnded",
            "RequestStarted",
            "TelemetryEvent",
            "UsageReported",
        ),
        "._telemetry",
    ),
}

if TYPE_CHECKING:
    from ._client.sync import Client
    from ._embed._types import Embeddings, EmbedEncoding, RankedDocument, Reranking
    from ._local.acquire import AcquisitionProgress, AcquisitionReport, PlannedFile, ProgressSink
    from ._local.catalog import (
        CatalogView,
        Fit,
        FitVerdict,
        LocalModel,
        Posture,
        Variant,
        VariantPrefs,
    )
    from ._local.hardware import GPU, HardwareProfile, HardwareSource
    from ._local.store import ModelStore, RemovalReport, ResolvedModel, StoredFile, StoreEntry


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'anyinfer' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module, __name__), name)
    with contextlib.suppress(AttributeError, TypeError):
        value.__module__ = "anyinfer"
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


def _publish() -> None:
    # Reprs, tracebacks and docs say `anyinfer.Generation`, not a private module path.
    for name in __all__:
        if name in _LAZY:
            continue
        obj = globals()[name]
        if isinstance(obj, type) or (callable(obj) and hasattr(obj, "__module__")):
            with contextlib.suppress(AttributeError, TypeError):
                obj.__module__ = "anyinfer"


_publish()
