"""Fake provider HTTP servers, scriptable chunk by chunk and byte by byte, with faults.

A `Script` describes one provider response without naming a protocol; a `Dialect`
renders it into one wire protocol's frames; `plan` turns the frames into writes, cut at
the script's read sizes and broken by its fault; and a server carries the plan out —
`FakeTransport` inside an httpx client, `FakeServer` over a real loopback socket::

    import anyinfer as ai
    from anyinfer.fakeservers import FakeServer, Script, ScriptUsage, Text

    script = Script(pieces=(Text("Hello"), Text(" world")), usage=ScriptUsage(5, 2))
    with FakeServer("openai-chat", [script]) as srv:
        s = ai.ProviderSettings("openai", api_key="sk-test", base_url=srv.base_url)
        with ai.Client([s]) as client:
            assert client.generate("hi", target="openai:fake-model").text == "Hello world"
        srv.assert_all_used()
"""

from __future__ import annotations

from ._plan import (
    Action,
    Disconnect,
    Pause,
    Stall,
    Write,
    error_answer,
    plan,
    provider_error_at,
)
from ._script import (
    EmbedBreak,
    EmbedShape,
    Fault,
    FaultKind,
    Frame,
    LineEnding,
    Piece,
    Reasoning,
    Rendered,
    Script,
    ScriptUsage,
    Text,
    ToolFragment,
    UsagePlacement,
)
from ._server import FakeServer
from ._source import RecordedRequest, UnexpectedRequestError
from ._transport import FakeTransport
from .dialects import (
    AnthropicDialect,
    AzureOpenAIDialect,
    Dialect,
    EmbeddingProfile,
    GeminiDialect,
    GeminiJSONArrayDialect,
    InStreamError,
    LlamaCppDialect,
    OllamaDialect,
    OpenAIChatDialect,
    OpenAIResponsesDialect,
    WireProfile,
    dialect_names,
    get_dialect,
    register_dialect,
)
from .dialects._embeddings import EmbeddingRows, embedding_rows, fake_vector, token_count

__all__ = [
    "Action",
    "AnthropicDialect",
    "AzureOpenAIDialect",
    "Dialect",
    "Disconnect",
    "EmbedBreak",
    "EmbedShape",
    "EmbeddingProfile",
    "EmbeddingRows",
    "FakeServer",
    "FakeTransport",
    "Fault",
    "FaultKind",
    "Frame",
    "InStreamError",
    "LineEnding",
    "GeminiDialect",
    "GeminiJSONArrayDialect",
    "LlamaCppDialect",
    "OllamaDialect",
    "OpenAIChatDialect",
    "OpenAIResponsesDialect",
    "Pause",
    "Piece",
    "Reasoning",
    "RecordedRequest",
    "Rendered",
    "Script",
    "ScriptUsage",
    "Stall",
    "Text",
    "ToolFragment",
    "UnexpectedRequestError",
    "UsagePlacement",
    "WireProfile",
    "Write",
    "dialect_names",
    "embedding_rows",
    "error_answer",
    "fake_vector",
    "get_dialect",
    "plan",
    "provider_error_at",
    "register_dialect",
    "token_count",
]
