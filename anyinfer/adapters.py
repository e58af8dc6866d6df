"""The adapter author's toolkit: everything a third-party adapter needs.

Subclass `HTTPAdapter` (or `Adapter` for non-HTTP engines), implement `generate` to yield
parts, and register the class under the `anyinfer.adapters` entry-point group. See the
adapter authors' guide in the docs.
"""

from __future__ import annotations

from ._adapter import Adapter, DiscoveredModel, Health, HTTPAdapter, SSEEvent
from ._parts import (
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
from ._request import GenerationRequest

__all__ = [
    "END",
    "Adapter",
    "DiscoveredModel",
    "EndPart",
    "FinishPart",
    "GenerationRequest",
    "HTTPAdapter",
    "Health",
    "Part",
    "PhasesPart",
    "RawPart",
    "ReasoningPart",
    "SSEEvent",
    "TextPart",
    "ToolCallPart",
    "UsagePart",
    "WarningPart",
]
