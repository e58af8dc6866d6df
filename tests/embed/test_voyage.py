"""Voyage AI (`voyage`): what is sent and read, over loopback against the `voyage` fake.

The fields are Voyage's (its OpenAPI description and the `voyageai` SDK): embeddings
take `input`, `model`, `input_type`, `output_dimension`, `output_dtype` and
`encoding_format: "base64"` and answer `data[{embedding, index}]` with
`usage.total_tokens`; rerank takes `query`, `documents`, `model`, `top_k` and answers
`data[{index, relevance_score}]` with `usage.total_tokens`. The shared guarantees (order,
batching, typed failures) are in `test_retrieval_providers.py`.
"""

from __future__ import annotations

import base64
import json
import struct
from array import array

import httpx
import pytest
from helpers import NO_RETRY, last_error

import anyinfer as ai
from anyinfer._providers.voyage import EMBED_MAX_INPUTS, RERANK_MAX_DOCUMENTS, VoyageAdapter
from anyinfer.fakeservers import FakeServer, Fault, Script
from anyinfer.fakeservers.dialects._embeddings import fake_vector, token_count

MODEL = "voyage-fake"
"""A model the catalog does not know, so the fake's own dimensions (256, or any asked
for) are not held to a real model's."""


def voyage(base_url: str) -> ai.ProviderSettings:
    return ai.ProviderSettings("voyage", api_key="pa-test", base_url=base_url)


def test_defaults_are_voyages() -> None:
    assert VoyageAdapter.default_base_url == "https://api.voyageai.com/v1"
    assert VoyageAdapter.api_key_env == "VOYAGE_API_KEY"
    assert VoyageAdapter.embed_max_batch == EMBED_MAX_INPUTS == 1000
    assert VoyageAdapter.rerank_max_documents == RERANK_MAX_DOCUMENTS == 1000
    assert ai.default_registry().canonical("voyageai") == "voyage"


@pytest.mark.loopback
def test_the_embeddings_body_is_voyages_and_input_type_goes_as_it_is() -> None:
    with FakeServer("voyage", lambda request: Script()) as srv:
        with ai.Client([voyage(srv.base_url)]) as client:
            query = client.embed("find cats", target=f"voyage:{MODEL}", input_type="query")
            docs = client.embed(
                ["cats", "dogs"], target=f"voyage:{MODEL}", input_type="document", dimensions=8
            )
            plain = client.embed(["x"], target=f"voyage:{MODEL}", encoding="float")
        bodies = [r.json for r in srv.requests]
        headers = srv.requests[0]
    assert bodies[0] == {
        "input": ["find cats"],
        "model": MODEL,
        "input_type": "query",
        "encoding_format": "base64",
    }
    assert bodies[1]["input_type"] == "document" and bodies[1]["output_dimension"] == 8
    assert "input_type" not in bodies[2] and "encoding_format" not in bodies[2]
    assert [r.path for r in srv.requests] == ["/v1/embeddings"] * 3
    assert query.vectors == (array("f", fake_vector("find cats")),)
    assert docs.dimensions == 8 and plain.vectors == (array("f", fake_vector("x")),)
    assert query.warnings == ()  # Voyage carries input_type: nothing to warn about
    assert headers is not None


def test_the_key_goes_as_a_bearer_token() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        vec = base64.b64encode(struct.pack("<2f", 0.5, -0.25)).decode()
        return httpx.Response(
            200, json={"data": [{"embedding": vec, "index": 0}], "usage": {"total_tokens": 3}}
        )

    settings = ai.ProviderSettings(
        "voyage", api_key="pa-secret", transport=httpx.MockTransport(handler)
    )
    with ai.Client([settings]) as client:
        result = client.embed("hi", target=f"voyage:{MODEL}")
    assert seen[0].headers["authorization"] == "Bearer pa-secret"
    assert str(seen[0].url) == "https://api.voyageai.com/v1/embeddings"
    assert result.vectors == (array("f", [0.5, -0.25]),)
    assert result.usage.input_tokens == 3 == result.usage.total_tokens


def test_an_answer_without_usage_has_unknown_usage() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200, json={"object": "list", "data": [{"embedding": [1.0], "index": 0}]}
        )

    settings = ai.ProviderSettings("voyage", api_key="k", transport=httpx.MockTransport(handler))
    with ai.Client([settings]) as client:
        result = client.embed("hi", target=f"voyage:{MODEL}", encoding="float")
    assert result.usage.input_tokens is None and result.usage.total_tokens is None


def test_unknown_input_types_and_quantized_dtypes_are_refused_before_dispatch() -> None:
    sent: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(500)

    settings = ai.ProviderSettings("voyage", api_key="k", transport=httpx.MockTransport(handler))
    route = ai.Route(f"voyage:{MODEL}", retry=NO_RETRY)
    with ai.Client([settings]) as client:
        with pytest.raises(ai.AllTargetsFailedError) as info:
            client.embed("hi", route=route, input_type="classification")
        error = last_error(info.value)
        assert error.type_name == "ConfigError"
        assert "'query' or 'document'" in error.detail
        options = {"voyage": {"output_dtype": "int8"}}
        with pytest.raises(ai.AllTargetsFailedError) as info:
            client.embed("hi", route=route, provider_options=options)
        error = last_error(info.value)
        assert "output_dtype 'int8'" in error.detail
    assert sent == []


@pytest.mark.loopback
def test_a_400_from_voyage_is_an_invalid_request_with_its_detail() -> None:
    with FakeServer("voyage", lambda request: Script()) as srv:
        with ai.Client([voyage(srv.base_url)]) as client:
            route = ai.Route(f"voyage:{MODEL}", retry=NO_RETRY)
            with pytest.raises(ai.AllTargetsFailedError) as info:
                client.embed(["fine", ""], route=route)
    error = last_error(info.value)
    assert error.type_name == "ProviderError"
    assert error.http_status == 400 and "non-empty strings" in error.detail
    assert not error.retryable


def test_batches_are_cut_at_voyages_1000_texts() -> None:
    sizes: list[int] = []

    def handler(request: httpx.Request) -> httpx.Response:
        texts = json.loads(request.content)["input"]
        sizes.append(len(texts))
        data = [{"embedding": [1.0, 0.0], "index": i} for i in range(len(texts))]
        return httpx.Response(200, json={"data": data, "usage": {"total_tokens": len(texts)}})

    settings = ai.ProviderSettings("voyage", api_key="k", transport=httpx.MockTransport(handler))
    with ai.Client([settings]) as client:
        result = client.embed(["t"] * 2500, target=f"voyage:{MODEL}", encoding="float")
    assert sorted(sizes) == [500, 1000, 1000] and len(result) == 2500
    assert result.usage.input_tokens == 2500


@pytest.mark.loopback
def test_a_401_detail_is_the_message() -> None:
    fault = Fault("status", status=401, message="Provided API key is invalid.")
    with FakeServer("voyage", [Script(fault=fault)]) as srv:
        with ai.Client([voyage(srv.base_url)]) as client:
            with pytest.raises(ai.AllTargetsFailedError) as info:
                client.embed("hi", route=ai.Route(f"voyage:{MODEL}", retry=NO_RETRY))
    error = last_error(info.value)
    assert error.type_name == "AuthenticationError"
    assert error.detail.endswith("HTTP 401: Provided API key is invalid.")


@pytest.mark.loopback
def test_rerank_sends_top_k_and_reads_relevance_scores() -> None:
    docs = ["cats nap", "bread", "cats sleep on mats"]
    with FakeServer("voyage", lambda request: Script()) as srv:
        with ai.Client([voyage(srv.base_url)]) as client:
            result = client.rerank("where cats sleep", docs, target="voyage:rerank-2.5", top_n=2)
        body = srv.requests[0].json
    assert srv.requests[0].path == "/v1/rerank"
    assert body == {
        "query": "where cats sleep",
        "documents": docs,
        "model": "rerank-2.5",
        "top_k": 2,
    }
    assert [r.index for r in result] == [2, 0]
    assert result[0].document == "cats sleep on mats" and result[0].score >= result[1].score
    expected = token_count("where cats sleep") * 3 + sum(token_count(d) for d in docs)
    assert result.usage.input_tokens == expected


def test_a_ranking_that_names_a_document_twice_is_a_protocol_error() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        data = [{"index": 0, "relevance_score": 0.9}, {"index": 0, "relevance_score": 0.1}]
        return httpx.Response(200, json={"data": data, "usage": {"total_tokens": 1}})

    settings = ai.ProviderSettings("voyage", api_key="k", transport=httpx.MockTransport(handler))
    with ai.Client([settings]) as client:
        with pytest.raises(ai.AllTargetsFailedError) as info:
            client.rerank("q", ["a", "b"], route=ai.Route("voyage:rerank-2.5", retry=NO_RETRY))
    error = last_error(info.value)
    assert error.type_name == "ProtocolError"
    assert "data[1].index is 0" in error.detail


def test_non_json_and_shapeless_answers_are_typed() -> None:
    bodies = [b"<html>gateway</html>", json.dumps({"data": {"0": []}}).encode(), b"[]"]
    for body in bodies:
        settings = ai.ProviderSettings(
            "voyage",
            api_key="k",
            transport=httpx.MockTransport(lambda r, b=body: httpx.Response(200, content=b)),
        )
        with ai.Client([settings]) as client:
            for call in (
                lambda: client.embed("hi", route=ai.Route(f"voyage:{MODEL}", retry=NO_RETRY)),
                lambda: client.rerank(
                    "q", ["a"], route=ai.Route("voyage:rerank-2.5", retry=NO_RETRY)
                ),
            ):
                with pytest.raises(ai.AllTargetsFailedError) as info:
                    call()
                error = last_error(info.value)
                assert error.type_name == "ProtocolError", (body, error)


@pytest.mark.loopback
def test_a_priced_model_costs_its_input_tokens() -> None:
    # voyage-3.5 is in the bundled catalog (256 is one of its output dimensions) and
    # pricing table: total_tokens, read as input tokens, are what it costs.
    with FakeServer("voyage", lambda request: Script()) as srv:
        with ai.Client([voyage(srv.base_url)]) as client:
            result = client.embed(
                ["hello world", "cats"], target="voyage:voyage-3.5", dimensions=256
            )
    price = ai.PricingTable.default().lookup("voyage", "voyage-3.5")
    assert price is not None and price.input > 0
    assert result.usage.input_tokens == 3
    assert result.cost_usd == price.input * 3
