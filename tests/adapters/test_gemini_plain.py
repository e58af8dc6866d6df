"""Gemini's stream shortcut for text-only chunks (`plain_text`) reads exactly what the
general chunk walk (`GeminiAdapter.parts_from_chunk`) reads.

Hypothesis draws chunks near the usual shape (each field present, absent, null or of
another type); wherever the shortcut answers, the walk must give the same parts. The real
recordings check that the shortcut fires on what Gemini actually sends.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

import anyinfer as ai
from anyinfer._adapters.assembler import PartAssembler
from anyinfer._providers.gemini import GeminiAdapter, plain_text
from anyinfer._stream.parts import TextPart, UsagePart
from tests.helpers import mutated
from tests.wire import require_wire_dir, streamed_chunks

ADAPTER = GeminiAdapter(ai.ProviderSettings("gemini", api_key="test-key"))

USUAL = {
    "candidates": [{"content": {"parts": [{"text": "Hi"}], "role": "model"}, "index": 0}],
    "usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": 1, "totalTokenCount": 4},
    "modelVersion": "gemini-2.0-flash",
}
C, P, U = ("candidates", 0), ("candidates", 0, "content", "parts", 0), ("usageMetadata",)
PATHS = [
    (),
    ("candidates",),
    ("error",),
    ("promptFeedback",),
    U,
    (*U, "candidatesTokenCount"),
    (*U, "thoughtsTokenCount"),
    (*U, "toolUsePromptTokenCount"),
    (*U, "cachedContentTokenCount"),
    C,
    (*C, "finishReason"),
    (*C, "content"),
    (*C, "content", "parts"),
    P,
    (*P, "text"),
    (*P, "thought"),
    (*P, "functionCall"),
]
values = st.one_of(
    st.none(),
    st.text(max_size=3),
    st.integers(-1, 9),
    st.booleans(),
    st.sampled_from(["STOP", "SAFETY", "7"]),
    st.just([]),
    st.just({}),
    st.just({"name": "f", "args": {}}),
    st.just([{"text": "a"}, {"text": "b"}]),
    st.just({"blockReason": "SAFETY"}),
)
chunks = mutated(USUAL, PATHS, values)


def walked(chunk: Any) -> list[Any] | str:
    """What the general walk gives, or the name of the error it raises."""
    try:
        return list(ADAPTER.parts_from_chunk(chunk, PartAssembler(tool_finish=True), "stream"))
    except Exception as exc:
        return type(exc).__name__


def shortcut(chunk: Any, text: str) -> list[Any] | str:
    """What the stream's shortcut gives for a chunk `plain_text` answered."""
    meta = chunk.get("usageMetadata")
    out: list[Any] = [TextPart(text)] if text else []
    if meta:
        try:
            out.append(UsagePart(ADAPTER.usage_from(meta)))
        except Exception as exc:
            return type(exc).__name__
    return out


@given(chunks)
def test_the_shortcut_reads_what_the_walk_reads(chunk: Any) -> None:
    text = plain_text(chunk)
    if text is not None:
        assert shortcut(chunk, text) == walked(chunk)


def test_the_shortcut_fires_on_the_usual_chunk_and_not_on_a_finish() -> None:
    usual = {
        "candidates": [{"content": {"parts": [{"text": "Hi"}], "role": "model"}, "index": 0}],
        "usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": 1, "totalTokenCount": 4},
        "modelVersion": "gemini-2.0-flash",
    }
    assert plain_text(usual) == "Hi"
    finish = {**usual, "candidates": [{**usual["candidates"][0], "finishReason": "STOP"}]}
    assert plain_text(finish) is None
    thought = {"candidates": [{"content": {"parts": [{"text": "hm", "thought": True}]}}]}
    assert plain_text(thought) is None


def test_real_chunks_agree_and_many_take_the_shortcut() -> None:
    require_wire_dir()
    taken = seen = 0
    for chunk in streamed_chunks("gemini"):
        seen += 1
        text = plain_text(chunk)
        if text is not None:
            taken += 1
            assert shortcut(chunk, text) == walked(chunk)
    assert seen, "no streamed Gemini recording"
    assert taken * 3 > seen, (taken, seen)
