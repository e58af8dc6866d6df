"""The OpenAI Chat stream's shortcut for text-only chunks (`plain_text`) reads exactly what
the general chunk walk (`OpenAIChatAdapter.parts_from_chunk`) reads.

Hypothesis draws chunks near the usual shape (each field present, absent, null or of
another type); wherever the shortcut answers, the walk must give the same parts. The real
recordings check that the shortcut does fire on what OpenAI actually sends.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

import anyinfer as ai
from anyinfer._providers.openai_chat import OpenAIChatAdapter, plain_text
from anyinfer._stream.parts import TextPart
from tests.helpers import mutated
from tests.wire import require_wire_dir, streamed_chunks

ADAPTER = OpenAIChatAdapter(ai.ProviderSettings("openai", api_key="sk-test"))

USUAL = {
    "id": "chatcmpl-1",
    "object": "chat.completion.chunk",
    "created": 1,
    "model": "gpt-4o-mini",
    "system_fingerprint": None,
    "choices": [{"index": 0, "delta": {"content": "Hi"}, "logprobs": None, "finish_reason": None}],
}
C, D = ("choices", 0), ("choices", 0, "delta")
PATHS = [
    (),
    ("choices",),
    ("usage",),
    ("error",),
    ("x_groq",),
    C,
    (*C, "index"),
    (*C, "finish_reason"),
    D,
    (*D, "content"),
    (*D, "role"),
    (*D, "refusal"),
    (*D, "reasoning_content"),
    (*D, "tool_calls"),
]
values = st.one_of(
    st.none(),
    st.text(max_size=3),
    st.integers(-1, 1),
    st.sampled_from(["stop", "assistant", "0"]),
    st.just([]),
    st.just({}),
    st.just({"prompt_tokens": 1, "completion_tokens": 2}),
    st.just([{"index": 0, "delta": {"content": "x"}}, {"index": 1, "delta": {}}]),
    st.just([{"type": "text", "text": "x"}]),
)
chunks = mutated(USUAL, PATHS, values)


def walked(chunk: Any) -> list[Any] | None:
    """What the general walk gives, or `None` when it raises."""
    try:
        return list(ADAPTER.parts_from_chunk(chunk, "delta"))
    except Exception:
        return None


@given(chunks)
def test_the_shortcut_reads_what_the_walk_reads(chunk: Any) -> None:
    text = plain_text(chunk)
    if text is not None:
        assert walked(chunk) == ([TextPart(text)] if text else [])


def test_the_shortcut_fires_on_the_usual_chunks() -> None:
    usual = USUAL
    assert plain_text(usual) == "Hi"
    first = {**usual, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}
    assert plain_text(first) == ""
    finish = {**usual, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    assert plain_text(finish) is None
    refusal = {**usual, "choices": [{"index": 0, "delta": {"refusal": "No"}}]}
    assert plain_text(refusal) is None


def test_real_chunks_agree_and_most_take_the_shortcut() -> None:
    require_wire_dir()
    taken = seen = 0
    for chunk in streamed_chunks("openai_chat"):
        seen += 1
        text = plain_text(chunk)
        if text is not None:
            taken += 1
            assert walked(chunk) == ([TextPart(text)] if text else [])
    assert seen, "no streamed OpenAI Chat recording"
    assert taken * 2 > seen, (taken, seen)
