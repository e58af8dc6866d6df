"""Jina AI (`jina`): what is sent and read, over loopback against the `jina` fake.

The fields are Jina's (its API documentation): embeddings are OpenAI's body plus
`task`, `dimensions` and `embedding_type`, answered in OpenAI's shape with
`usage.total_tokens`; rerank takes `query`, `documents`, `top_n`, `return_documents` and
answers `results[{index, relevance_score, document?}]`. The shared guarantees (order,
batching, typed failures) are in `test_retrieval_providers.py`.
"""

from __future__ import annotations

import json
from array import array

import httpx
import pytest
from helpers import NO_RETRY, last_error

import anyinfer as ai
from anyinfer._providers.jina import TASKS, JinaAdapter
from anyinfer.fakeservers import FakeServer, Fault, Script
from anyinfer.fakeservers.dialects._embeddings import fake_vector

MODEL = "jina-embeddings-fake"
"""A model the catalog does not know (see `test_retrieval_providers.py`)."""


def jina(base_url: str) -> ai.ProviderSettings:
    return ai.ProviderSettings("jina", api_key="jina_test", base_url=base_url)


def test_defaults_are_jinas() -> None:
    assert JinaAdapter.default_base_url == "https://api.jina.ai/v1"
    assert JinaAdapter.api_key_env == "JINA_API_KEY"
    assert ai.default_registry().canonical("jinaai") == "jina"
    assert TASKS == {"query": "retrieval.query", "document": "retrieval.passage"}


@pytest.mark.loopback
def test_input_type_becomes_a_task_and_encoding_an_embedding_type() -> None:
    with FakeServer("jina", lambda request: Script()) as srv:
        with ai.Client([jina(srv.base_url)]) as client:
            target = f"jina:{MODEL}"
            query = client.embed("find cats", target=target, input_type="query")
            passages = client.embed(["cats", "dogs"], target=target, input_type="document")
            matching = client.embed(
                ["a"], target=target, input_type="text-matching", dimensions=32, encoding="float"
            )
        bodies = [r.json for r in srv.requests]
    assert bodies[0] == {
        "model": MODEL,
        "input": ["find cats"],
        "embedding_type": "base64",
        "task": "retrieval.query",
    }
    assert bodies[1]["task"] == "retrieval.passage"
    assert bodies[2]["task"] == "text-matching" and bodies[2]["dimensions"] == 32
    assert bodies[2]["embedding_type"] == "float"
    assert [r.path for r in srv.requests] == ["/v1/embeddings"] * 3
    assert query.vectors == (array("f", fake_vector("find cats")),)
    assert passages.vectors == (array("f", fake_vector("cats")), array("f", fake_vector("dogs")))
    assert matching.dimensions == 32 and query.warnings == ()


def test_the_key_goes_as_a_bearer_token_and_json_is_asked_for() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        data = [{"object": "embedding", "index": 0, "embedding": [0.5, 0.5]}]
        return httpx.Response(200, json={"data": data, "usage": {"total_tokens": 4}})

    transport = httpx.MockTransport(handler)
    with ai.Client([ai.ProviderSettings("jina", api_key="jina_s3", transport=transport)]) as client:
        result = client.embed("hi", target=f"jina:{MODEL}", encoding="float")
    assert seen[0].headers["authorization"] == "Bearer jina_s3"
    assert seen[0].headers["accept"] == "application/json"
    assert str(seen[0].url) == "https://api.jina.ai/v1/embeddings"
    assert result.usage.input_tokens == 4 and result.vectors == (array("f", [0.5, 0.5]),)


def test_packed_bit_embedding_types_are_refused_before_dispatch() -> None:
    sent: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(500)

    settings = ai.ProviderSettings("jina", api_key="k", transport=httpx.MockTransport(handler))
    with ai.Client([settings]) as client:
        with pytest.raises(ai.AllTargetsFailedError) as info:
            client.embed(
                "hi",
                route=ai.Route(f"jina:{MODEL}", retry=NO_RETRY),
                provider_options={"jina": {"embedding_type": "binary"}},
            )
    error = last_error(info.value)
    assert error.type_name == "ConfigError"
    assert "'binary' is not a float encoding" in error.detail
    assert sent == []


@pytest.mark.loopback
def test_a_validation_422_is_an_invalid_request_with_its_detail() -> None:
    with FakeServer("jina", lambda request: Script()) as srv:
        with ai.Client([jina(srv.base_url)]) as client:
            with pytest.raises(ai.AllTargetsFailedError) as info:
                client.embed(
                    "hi",
                    route=ai.Route(f"jina:{MODEL}", retry=NO_RETRY),
                    provider_options={"jina": {"dimensions": 0}},
                )
    error = last_error(info.value)
    assert error.type_name == "ProviderError"
    assert error.http_status == 422 and "dimensions must be a positive integer" in error.detail


@pytest.mark.loopback
def test_a_401_detail_is_the_message() -> None:
    fault = Fault("status", status=401, message="Failed to authenticate with the provided api key.")
    with FakeServer("jina", [Script(fault=fault)]) as srv:
        with ai.Client([jina(srv.base_url)]) as client:
            with pytest.raises(ai.AllTargetsFailedError) as info:
                client.rerank("q", ["d"], route=ai.Route("jina:jina-reranker-fake", retry=NO_RETRY))
    error = last_error(info.value)
    assert error.type_name == "AuthenticationError"
    assert error.detail.endswith("Failed to authenticate with the provided api key.")


@pytest.mark.loopback
def test_rerank_asks_for_no_documents_back_and_reads_the_ranking() -> None:
    docs = ["cats nap", "bread", "cats sleep on mats"]
    with FakeServer("jina", lambda request: Script()) as srv:
        with ai.Client([jina(srv.base_url)]) as client:
            result = client.rerank(
                "where cats sleep", docs, target="jina:jina-reranker-fake", top_n=2
            )
        body = srv.requests[0].json
    assert srv.requests[0].path == "/v1/rerank"
    assert body == {
        "model": "jina-reranker-fake",
        "query": "where cats sleep",
        "documents": docs,
        "return_documents": False,
        "top_n": 2,
    }
    assert [r.index for r in result] == [2, 0]
    assert [r.document for r in result] == ["cats sleep on mats", "cats nap"]
    assert result.usage.input_tokens is not None


def test_documents_echoed_as_text_objects_are_read_and_the_callers_text_kept() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        results = [
            {"index": 1, "document": {"text": "two"}, "relevance_score": 0.8},
            {"index": 0, "document": {"text": "one"}, "relevance_score": 0.2},
        ]
        return httpx.Response(
            200, json={"model": "m", "usage": {"total_tokens": 9}, "results": results}
        )

    settings = ai.ProviderSettings("jina", api_key="k", transport=httpx.MockTransport(handler))
    with ai.Client([settings]) as client:
        result = client.rerank("q", ["one", "two"], target="jina:m")
    assert [(r.index, r.document, r.score) for r in result] == [(1, "two", 0.8), (0, "one", 0.2)]
    assert result.usage.input_tokens == 9


def test_a_ranking_without_usage_has_unknown_usage_and_a_bad_score_is_typed() -> None:
    answers = iter(
        [
            {"results": [{"index": 0, "relevance_score": 0.5}]},
            {"results": [{"index": 0, "relevance_score": "high"}]},
            {"results": [{"index": 3, "relevance_score": 0.5}]},
        ]
    )

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=json.dumps(next(answers)).encode())

    settings = ai.ProviderSettings("jina", api_key="k", transport=httpx.MockTransport(handler))
    route = ai.Route("jina:m", retry=NO_RETRY)
    with ai.Client([settings]) as client:
        assert client.rerank("q", ["a"], route=route).usage.input_tokens is None
        for wrong in ("relevance_score is 'high'", "index is 3"):
            with pytest.raises(ai.AllTargetsFailedError) as info:
                client.rerank("q", ["a"], route=route)
            error = last_error(info.value)
            assert error.type_name == "ProtocolError"
            assert wrong in error.detail
