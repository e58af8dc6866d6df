"""Ollama's stream shortcut for text-only lines (`plain_text`) reads exactly what the
general walk (`OllamaAdapter.parts_from_object`) reads.

Hypothesis draws lines made by changing a usual one at its known places; wherever the
shortcut answers, the walk must give the same parts.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

import anyinfer as ai
from anyinfer._adapters.assembler import PartAssembler
from anyinfer._providers.ollama import OllamaAdapter, plain_text
from anyinfer._stream.parts import TextPart
from tests.helpers import mutated

ADAPTER = OllamaAdapter(ai.ProviderSettings("ollama"))

USUAL = {
    "model": "qwen3:8b",
    "created_at": "2026-12-02T20:00:00Z",
    "message": {"role": "assistant", "content": "Hi"},
    "done": False,
}
M = ("message",)
PATHS = [
    (),
    ("done",),
    ("error",),
    ("done_reason",),
    ("eval_count",),
    M,
    (*M, "content"),
    (*M, "role"),
    (*M, "thinking"),
    (*M, "tool_calls"),
    (*M, "images"),
]
values = st.one_of(
    st.none(),
    st.booleans(),
    st.text(max_size=3),
    st.integers(-1, 9),
    st.just("stop"),
    st.just([]),
    st.just({}),
    st.just([{"function": {"name": "f", "arguments": {}}}]),
)
lines = mutated(USUAL, PATHS, values)


def walked(obj: Any) -> list[Any] | str:
    """What the general walk gives, or the name of the error it raises."""
    try:
        return list(ADAPTER.parts_from_object(obj, PartAssembler(tool_finish=True)))
    except Exception as exc:
        return type(exc).__name__


@given(lines)
def test_the_shortcut_reads_what_the_walk_reads(obj: Any) -> None:
    text = plain_text(obj)
    if text is not None:
        assert walked(obj) == ([TextPart(text)] if text else [])


def test_the_shortcut_fires_on_the_usual_line_and_not_on_the_last() -> None:
    assert plain_text(USUAL) == "Hi"
    assert plain_text({**USUAL, "done": True, "done_reason": "stop"}) is None
    assert plain_text({**USUAL, "message": {"role": "assistant", "thinking": "hm"}}) is None
