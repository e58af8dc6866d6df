"""Dialects: one per wire protocol, plus the registry the servers and plugin use.

The built-in `openai-chat` dialect is registered on import. Third-party packages add
theirs with `register_dialect` (the conformance plugin's configure hook is the usual
place).
"""

from __future__ import annotations

from ._base import Dialect, dialect_names, get_dialect, register_dialect, resolve_dialect
from .openai_chat import OpenAIChatDialect

__all__ = [
    "Dialect",
    "OpenAIChatDialect",
    "dialect_names",
    "get_dialect",
    "register_dialect",
    "resolve_dialect",
]

register_dialect(OpenAIChatDialect())
