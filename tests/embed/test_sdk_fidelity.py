"""The official SDKs read the fake embedding endpoints as AnyInfer does.

The `openai` SDK's `embeddings.create` (its default base64 request, decoded by the SDK,
and `encoding_format="float"`) and the `ollama` SDK's `embed` are served by the fake
servers; what each SDK reads must be the vectors, count and usage AnyInfer reads from
the same server, so the dialects say what the SDKs expect.
"""

from __future__ import annotations

from array import array

import pytest

import anyinfer as ai
from anyinfer.fakeservers import FakeServer, Script

openai = pytest.importorskip("openai")
ollama = pytest.importorskip("ollama")

TEXTS = ["the quick brown fox", "jumps over", "the lazy dog"]

pytestmark = pytest.mark.loopback


def _anyinfer(settings: ai.ProviderSettings, target: str, **kwargs: object) -> ai.Embeddings:
    with ai.Client([settings]) as client:
        return client.embed(TEXTS, target=target, **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize("encoding", ["base64", "float"])
def test_openai_sdk_reads_what_anyinfer_reads(encoding: str) -> None:
    with FakeServer("openai-chat", lambda request: Script()) as srv:
        sdk_kwargs = {} if encoding == "base64" else {"encoding_format": "float"}
        with openai.OpenAI(api_key="sk-test", base_url=srv.base_url, max_retries=0) as sdk:
            answer = sdk.embeddings.create(
                model="text-embedding-3-small", input=TEXTS, dimensions=12, **sdk_kwargs
            )
        settings = ai.ProviderSettings("openai", api_key="sk-test", base_url=srv.base_url)
        ours = _anyinfer(
            settings, "openai:text-embedding-3-small", dimensions=12, encoding=encoding
        )
        sdk_body, our_body = srv.requests[0].json, srv.requests[1].json
    assert sdk_body["encoding_format"] == our_body["encoding_format"] == encoding
    assert [d.index for d in answer.data] == [0, 1, 2]
    assert tuple(array("f", d.embedding) for d in answer.data) == ours.vectors
    assert answer.usage.prompt_tokens == ours.usage.input_tokens
    assert answer.usage.total_tokens == ours.usage.total_tokens


def test_ollama_sdk_reads_what_anyinfer_reads() -> None:
    with FakeServer("ollama-chat", lambda request: Script()) as srv:
        with ollama.Client(host=srv.base_url) as sdk:
            answer = sdk.embed(model="nomic-embed-text", input=TEXTS, dimensions=12)
        settings = ai.ProviderSettings("ollama", base_url=srv.base_url)
        ours = _anyinfer(settings, "ollama:nomic-embed-text", dimensions=12)
        assert srv.requests[0].json == srv.requests[1].json
    assert tuple(array("f", v) for v in answer.embeddings) == ours.vectors
    assert answer.prompt_eval_count == ours.usage.input_tokens
    assert answer.load_duration is not None and answer.total_duration is not None
    assert ours.timing.phases["server_total_ms"] == answer.total_duration / 1_000_000
