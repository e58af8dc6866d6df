"""The adapter author's toolkit: everything a third-party adapter needs.

Subclass `HTTPAdapter` (or `Adapter` for non-HTTP engines), implement `generate` to yield
parts (an `HTTPAdapter` usually returns `self.stream_parts(...)`, the template that owns
sending, framing, draining, raw capture and closing, with a `PartAssembler` for tool-call
slots and finish reconciliation), and register the class under the `anyinfer.adapters`
entry-point group. A provider that speaks a protocol AnyInfer already has subclasses
that protocol's adapter instead (`OpenAIChatAdapter`, `OpenAICompatAdapter`,
`OpenAIResponsesAdapter`, `AnthropicAdapter`, `GeminiAdapter`, `OllamaAdapter`) and overrides its
hooks (`default_headers`, `build_body`, `parts_from_chunk`, `chunk_usage`, `error_message`,
`error_hint`, ...). Those classes load on first use, so importing this module
stays cheap. See the adapter authors' guide in the docs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._adapters.assembler import PartAssembler
from ._adapters.base import (
    OPERATIONS,
    Adapter,
    DiscoveredModel,
    Framing,
    Health,
    HTTPAdapter,
    Operation,
    Sender,
    SSEEvent,
    parse_retry_after,
)
from ._adapters.errormap import ErrorFields, ErrorKind, error_fields, message_and_code
from ._adapters.framing import DEFAULT_MAX_FRAME_BYTES, EventFramer, decode_json
from ._adapters.orphans import reclaim_orphans
from ._adapters.profile import AdapterProfile, InputSupport, UsageConvention
from ._adapters.shielded import finish_uncancelled
from ._embed._types import EmbedReply, EmbedRequest
from ._request import GenerationRequest
from ._stream.parts import (
    END,
    EndPart,
    FinishPart,
    Part,
    PhasesPart,
    RawPart,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    UsagePart,
    WarningPart,
)

if TYPE_CHECKING:
    from ._providers.anthropic import AnthropicAdapter
    from ._providers.gemini import GeminiAdapter
    from ._providers.ollama import OllamaAdapter
    from ._providers.openai_chat import OpenAIChatAdapter
    from ._providers.openai_compat import OpenAICompatAdapter
    from ._providers.openai_responses import OpenAIResponsesAdapter

__all__ = [
    "DEFAULT_MAX_FRAME_BYTES",
    "END",
    "OPERATIONS",
    "Adapter",
    "AdapterProfile",
    "AnthropicAdapter",
    "DiscoveredModel",
    "EmbedReply",
    "EmbedRequest",
    "EndPart",
    "ErrorFields",
    "ErrorKind",
    "EventFramer",
    "FinishPart",
    "Framing",
    "GeminiAdapter",
    "GenerationRequest",
    "HTTPAdapter",
    "Health",
    "InputSupport",
    "OllamaAdapter",
    "OpenAIChatAdapter",
    "OpenAICompatAdapter",
    "OpenAIResponsesAdapter",
    "Operation",
    "Part",
    "PartAssembler",
    "PhasesPart",
    "RawPart",
    "ReasoningPart",
    "SSEEvent",
    "Sender",
    "TextPart",
    "ToolCallPart",
    "UsageConvention",
    "UsagePart",
    "WarningPart",
    "decode_json",
    "error_fields",
    "message_and_code",
    "finish_uncancelled",
    "parse_retry_after",
    "reclaim_orphans",
]

_PROTOCOL_ADAPTERS: dict[str, str] = {
    "AnthropicAdapter": "._providers.anthropic",
    "GeminiAdapter": "._providers.gemini",
    "OllamaAdapter": "._providers.ollama",
    "OpenAIChatAdapter": "._providers.openai_chat",
    "OpenAICompatAdapter": "._providers.openai_compat",
    "OpenAIResponsesAdapter": "._providers.openai_responses",
}
"""The built-in protocol adapters, public for subclassing, imported on first access."""


def __getattr__(name: str) -> Any:
    module = _PROTOCOL_ADAPTERS.get(name)
    if module is None:
        raise AttributeError(f"module 'anyinfer.adapters' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module, "anyinfer"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_PROTOCOL_ADAPTERS))
