"""The Responses reader's inline answer for an output text delta (`ResponsesReader.event`)
gives exactly what the general event path (`ResponsesReader._other`) gives.

Hypothesis draws runs of text deltas near the usual shape (the delta, both indices and the
item id each present, absent, null or of another type) and reads each run with two
readers: one through `event`, one through the general path. The parts, the error that
stops a run, and what each reader recorded must agree, as must what a closing
`output_text.done` adds to the deltas (it reads what the deltas recorded).
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import anyinfer as ai
from anyinfer._providers.openai_responses import OpenAIResponsesAdapter, ResponsesReader
from anyinfer._stream.parts import TextPart
from tests.helpers import mutated

ADAPTER = OpenAIResponsesAdapter(ai.ProviderSettings("openai-responses", api_key="test-key"))

KIND = "response.output_text.delta"
USUAL = {
    "type": KIND,
    "sequence_number": 4,
    "item_id": "msg_1",
    "output_index": 0,
    "content_index": 0,
    "delta": "Hi",
    "logprobs": [],
}
PATHS = [("delta",), ("item_id",), ("output_index",), ("content_index",)]
values = st.sampled_from(
    [None, -1, 0, 1, 2, True, False, 0.0, 1.0, 1.5, "", "msg_1", "msg_2", " there", [], {}]
)
deltas = mutated(USUAL, PATHS, values)


def read(events: list[dict[str, Any]], general: bool) -> list[Any]:
    """The parts of `events`, then the error that stopped them, then what a `.done` of
    the usual text adds, and what the reader recorded."""
    reader = ResponsesReader(ADAPTER, phase="stream")
    out: list[Any] = []
    try:
        for ev in events:
            out.extend(reader._other(ev, KIND) if general else reader.event(ev))
    except Exception as exc:
        out.append((type(exc).__name__, str(exc)))
    done = {**USUAL, "type": "response.output_text.done", "text": "Hi there"}
    out.extend(reader.event(done))
    out.append((dict(reader._emitted), reader._ids))
    return out


@settings(max_examples=300)  # microseconds an example: a wide search costs little
@given(st.lists(deltas, min_size=1, max_size=4))
def test_the_inline_delta_gives_what_the_general_path_gives(events: list[Any]) -> None:
    assert read(events, general=False) == read(events, general=True)


def test_the_usual_delta_is_text_and_recorded() -> None:
    reader = ResponsesReader(ADAPTER, phase="stream")
    assert list(reader.event(USUAL)) == [TextPart("Hi")]
    assert list(reader.event({**USUAL, "delta": " there"})) == [TextPart(" there")]
    assert dict(reader._emitted) == {(0, 0, "text"): ["Hi", " there"]}
    assert reader._ids == {"msg_1": 0}
