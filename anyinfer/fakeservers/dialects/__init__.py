"""Dialects: one per wire protocol, plus the registry the servers and plugin use.

The built-in `openai-chat` dialect is registered on import. Third-party packages add
theirs with `register_dialect` (the conformance plugin's configure hook is the usual
place).
"""

from __future__ import annotations

from ._base import (
    Dialect,
    EmbeddingProfile,
    InStreamError,
    WireProfile,
    dialect_names,
    get_dialect,
    register_dialect,
    resolve_dialect,
    split_sse_data,
)
from .anthropic import AnthropicDialect
from .azure_openai import AzureOpenAIDialect
from .bedrock_converse import BedrockConverseDialect
from .cohere_v2 import CohereV2Dialect
from .gemini import GeminiDialect, GeminiJSONArrayDialect
from .jina import JinaDialect
from .llama_cpp import LlamaCppDialect
from .ollama import OllamaDialect
from .openai_chat import OpenAIChatDialect
from .openai_responses import OpenAIResponsesDialect
from .tei import TEIDialect
from .vertex import VertexAnthropicDialect, VertexGeminiDialect
from .voyage import VoyageDialect

__all__ = [
    "AnthropicDialect",
    "AzureOpenAIDialect",
    "CohereV2Dialect",
    "BedrockConverseDialect",
    "Dialect",
    "EmbeddingProfile",
    "GeminiDialect",
    "GeminiJSONArrayDialect",
    "InStreamError",
    "JinaDialect",
    "LlamaCppDialect",
    "OllamaDialect",
    "OpenAIChatDialect",
    "OpenAIResponsesDialect",
    "TEIDialect",
    "VertexAnthropicDialect",
    "VertexGeminiDialect",
    "VoyageDialect",
    "WireProfile",
    "dialect_names",
    "get_dialect",
    "register_dialect",
    "resolve_dialect",
    "split_sse_data",
]

register_dialect(OpenAIChatDialect())
register_dialect(LlamaCppDialect())
register_dialect(AzureOpenAIDialect())
register_dialect(OpenAIResponsesDialect())
register_dialect(OllamaDialect())
register_dialect(AnthropicDialect())
register_dialect(CohereV2Dialect())
register_dialect(GeminiDialect())
register_dialect(GeminiJSONArrayDialect())
register_dialect(VertexGeminiDialect())
register_dialect(VertexAnthropicDialect())
register_dialect(BedrockConverseDialect())
register_dialect(VoyageDialect())
register_dialect(JinaDialect())
register_dialect(TEIDialect())
