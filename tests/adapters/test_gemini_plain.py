"""Gemini's stream shortcut for text-only chunks (`plain_text` and `counts` in the stream's
frame) gives exactly what the general chunk walk (`GeminiAdapter.parts_from_chunk`) gives.

Hypothesis draws streams of chunks near the usual shape (each field present, absent, null
or of another type) and reads each through the adapter and through a subclass that keeps
the walk for every chunk: the parts, and the error that ends them, must agree. The real
recordings check that the shortcut fires on what Gemini actually sends.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

import anyinfer as ai
from anyinfer._providers.gemini import GeminiAdapter, counts, plain_text
from anyinfer._request import GenerationRequest
from anyinfer._types import Usage
from tests.helpers import mutated, run, sse
from tests.wire import require_wire_dir, streamed_chunks

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
    st.sampled_from([2.0, 2.5]),
    st.booleans(),
    st.sampled_from(["STOP", "SAFETY", "7"]),
    st.just([]),
    st.just({}),
    st.just({"name": "f", "args": {}}),
    st.just([{"text": "a"}, {"text": "b"}]),
    st.just({"blockReason": "SAFETY"}),
)
THINKING = {  # a thinking model's running counts, with a cached prompt
    **USUAL,
    "usageMetadata": {
        "promptTokenCount": 3,
        "candidatesTokenCount": 1,
        "thoughtsTokenCount": 5,
        "cachedContentTokenCount": 2,
        "totalTokenCount": 9,
    },
}
chunks = st.one_of(mutated(USUAL, PATHS, values), mutated(THINKING, PATHS, values))


class Walked(GeminiAdapter):
    """Reads every chunk with the general walk: it overrides a hook the shortcut stands
    for (`_adapters.base.inherits`)."""

    def usage_from(self, u: dict[str, Any]) -> Usage:
        return super().usage_from(u)


def streamed(cls: type[GeminiAdapter], body: bytes) -> list[Any]:
    """The parts `cls` reads from a streamed `body`, then the error that ended them."""

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=body, headers={"content-type": "text/event-stream"})

    async def main() -> list[Any]:
        settings = ai.ProviderSettings(
            "gemini",
            api_key="k",
            base_url="http://127.0.0.1:9",
            transport=httpx.MockTransport(handler),
        )
        adapter = cls(settings)
        request = GenerationRequest(model="m", messages=(ai.Message.user("hi"),), stream=True)
        out: list[Any] = []
        try:
            async for part in adapter.generate(request):
                out.append(part)
        except Exception as exc:
            out.append((type(exc).__name__, str(exc)))
        finally:
            await adapter.aclose()
        return out

    return run(main())


@given(st.lists(chunks, min_size=1, max_size=4))
def test_the_shortcut_gives_what_the_walk_gives(stream: list[Any]) -> None:
    body = sse(*stream, done=False)
    assert streamed(GeminiAdapter, body) == streamed(Walked, body)


def test_counts_answers_only_for_integer_counts() -> None:
    meta = {"promptTokenCount": 3, "toolUsePromptTokenCount": 2, "thoughtsTokenCount": 4}
    assert counts(meta) == Usage(5, 4, None, None, None, 4)
    assert counts({**meta, "candidatesTokenCount": 1}) == Usage(5, 5, None, None, None, 4)
    assert counts({"totalTokenCount": True}) is None
    assert counts({"cachedContentTokenCount": 2.0}) is None
    assert counts({**meta, "candidatesTokenCount": -1}) is None
    adapter = GeminiAdapter(ai.ProviderSettings("gemini", api_key="k"))
    assert adapter.usage_from({"cachedContentTokenCount": 2.0}) == Usage(cache_read_tokens=2)


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
    real = list(streamed_chunks("gemini"))
    assert real, "no streamed Gemini recording"
    taken = 0
    for chunk in real:
        meta = chunk.get("usageMetadata")
        if plain_text(chunk) is not None and (not meta or counts(meta) is not None):
            taken += 1
        body = sse(chunk, done=False)
        assert streamed(GeminiAdapter, body) == streamed(Walked, body)
    assert taken * 3 > len(real), (taken, len(real))


@pytest.mark.parametrize("key", ["promptTokenCount", "candidatesTokenCount", "totalTokenCount"])
def test_a_negative_count_fails_typed_on_both_paths(key: str) -> None:
    chunk = {
        "candidates": [{"content": {"parts": [{"text": "Hi"}], "role": "model"}, "index": 0}],
        "usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": 1, key: -2},
    }
    body = sse(chunk, done=False)
    got = streamed(GeminiAdapter, body)
    assert got == streamed(Walked, body)
    assert got[-1] == (
        "ProtocolError",
        f"gemini: expected a non-negative integer at usageMetadata.{key}, got -2",
    )
