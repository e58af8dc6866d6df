"""Cohere embed v2 and rerank v2 through `embed()` and `rerank()`, against the fake
`cohere-v2` dialect over real loopback HTTP (`FakeServer`), or its httpx transport where
many calls are made; hostile bodies through `httpx.MockTransport`.
"""

from __future__ import annotations

import asyncio
import base64
import json
import struct
from decimal import Decimal
from typing import Any

import httpx
import pytest
from helpers import f32, failed_as
from hypothesis import given, settings
from hypothesis import strategies as st

import anyinfer as ai
from anyinfer._embed._runner import split_batches
from anyinfer.fakeservers import FakeServer, FakeTransport, Fault, Script
from anyinfer.fakeservers.dialects._embeddings import fake_vector, token_count
from anyinfer.fakeservers.dialects._retrieval import fake_relevance as relevance

FAST = ai.RetryPolicy(max_retries=2, backoff_base_s=0.001, jitter=0.0)
EMBED = "cohere:embed-v4.0"
RERANK = "cohere:rerank-v3.5"
DOCS = [
    "The capital of Nevada is Carson City.",
    "Stock markets fell sharply on Monday.",
    "Washington is the capital of the United States.",
    "Capital letters start English sentences.",
    "Cats sleep most of the day.",
]
QUERY = "what is the capital of the united states"


def cohere(base_url: str | None = None, alias: str | None = None, **kw: Any) -> ai.ProviderSettings:
    return ai.ProviderSettings("cohere", api_key="co-test", base_url=base_url, alias=alias, **kw)


def failures(scripts: list[Script], target: str, call: Any) -> list[str]:
    """The error type each call ends with, one call per script, over loopback: no
    retries, and a breaker that stays closed over every failure."""
    found = []
    with FakeServer("cohere-v2", scripts) as srv:
        route = ai.Route(target, retry=ai.RetryPolicy(max_retries=0), breaker_threshold=50)
        with ai.Client([cohere(srv.base_url)]) as client:
            for _ in scripts:
                with pytest.raises(ai.AnyInferError) as info:
                    call(client, route)
                found.append(failed_as(info.value))
        srv.assert_all_used()
    return found


# --- embed v2 ----------------------------------------------------------------------


@pytest.mark.loopback
def test_embed_sends_cohere_fields_and_reads_float_embeddings_and_billed_tokens() -> None:
    texts = ["hello world", "a cat", "x"]
    with FakeServer("cohere-v2", [Script(), Script()]) as srv:
        with ai.Client([cohere(srv.base_url)]) as client:
            query = client.embed(texts, target=EMBED, input_type="query", dimensions=512)
            docs = client.embed(texts, target=EMBED, input_type="classification")
        bodies = [r.json for r in srv.requests]
        assert {r.path for r in srv.requests} == {"/v2/embed"}
    assert bodies[0] == {
        "model": "embed-v4.0",
        "texts": texts,
        "input_type": "search_query",
        "embedding_types": ["float"],
        "output_dimension": 512,
    }
    assert bodies[1]["input_type"] == "classification" and "output_dimension" not in bodies[1]
    assert query.vectors == tuple(f32(fake_vector(t, 512)) for t in texts)
    assert docs.dimensions == 256
    tokens = sum(token_count(t) for t in texts)
    assert query.usage.input_tokens == tokens == docs.usage.input_tokens
    assert query.warnings == ()


@pytest.mark.loopback
def test_embed_without_input_type_sends_search_document_and_says_so() -> None:
    with FakeServer("cohere-v2", [Script()]) as srv:
        with ai.Client([cohere(srv.base_url)]) as client:
            result = client.embed(["stored text"], target=EMBED)
        assert srv.requests[0].json["input_type"] == "search_document"
    assert len(result.warnings) == 1
    assert "search_document" in result.warnings[0] and "input_type" in result.warnings[0]


def test_embed_splits_into_batches_of_96() -> None:
    texts = [f"text number {i}" for i in range(200)]
    transport = FakeTransport("cohere-v2", lambda request: Script())
    with ai.Client([cohere(transport=transport)]) as client:
        result = client.embed(texts, target=EMBED, input_type="document")
    assert [len(r.json["texts"]) for r in transport.requests] == [96, 96, 8]
    assert result.vectors == tuple(f32(fake_vector(t)) for t in texts)
    assert result.usage.input_tokens == sum(token_count(t) for t in texts)


def test_embed_reads_base64_int8_and_uint8_answers_and_refuses_packed_bits() -> None:
    transport = FakeTransport("cohere-v2", lambda request: Script())
    text = "vectors in another encoding"
    want = fake_vector(text)
    with ai.Client([cohere(transport=transport)]) as client:

        def embed(kind: str) -> ai.Embeddings:
            options = {"cohere": {"embedding_types": [kind]}}
            return client.embed([text], target=EMBED, input_type="query", provider_options=options)

        assert embed("base64").vectors == (f32(want),)
        int8 = embed("int8")[0]
        assert list(int8) == [float(max(-128, min(127, round(v * 127)))) for v in want]
        assert list(embed("uint8")[0]) == [v + 128 for v in int8]
        sent = len(transport.requests)
        with pytest.raises(ai.AnyInferError, match="packed bits"):
            embed("ubinary")
        assert len(transport.requests) == sent  # refused before sending


@pytest.mark.loopback
def test_embed_errors_are_typed() -> None:
    scripts = [
        Script(fault=Fault("status", status=404, message="model 'nope' not found")),
        Script(fault=Fault("status", status=498, message="invalid api token")),
        Script(fault=Fault("status", status=429, message="rate limited", retry_after=0.001)),
        Script(fault=Fault("status", status=503, message="service unavailable")),
        Script(fault=Fault("malformed")),
        Script(fault=Fault("disconnect", partial_bytes=20)),
    ]
    found = failures(
        scripts, EMBED, lambda client, route: client.embed(["a"], route=route, input_type="query")
    )
    assert found == [
        "ModelNotFoundError",
        "AuthenticationError",
        "RateLimitError",
        "OverloadedError",
        "ProtocolError",
        "StreamError",
    ]


# --- rerank v2 ---------------------------------------------------------------------


@pytest.mark.loopback
def test_rerank_puts_the_relevant_document_first_with_cohere_shapes() -> None:
    with FakeServer("cohere-v2", [Script()]) as srv:
        with ai.Client([cohere(srv.base_url)]) as client:
            result = client.rerank(QUERY, DOCS, target=RERANK, top_n=3)
        body = srv.requests[0].json
        assert srv.requests[0].path == "/v2/rerank"
    assert body == {"model": "rerank-v3.5", "query": QUERY, "documents": DOCS, "top_n": 3}
    assert result[0].index == 2 and result[0].document == DOCS[2]
    assert len(result) == 3
    expected = sorted(range(len(DOCS)), key=lambda i: (-relevance(QUERY, DOCS[i]), i))[:3]
    assert [r.index for r in result] == expected
    assert [r.score for r in result] == [relevance(QUERY, DOCS[i]) for i in expected]
    assert result.search_units == 1
    assert result.usage.input_tokens is None  # Cohere bills rerank by search units
    assert result.cost_usd is None
    assert str(result.target) == RERANK and [a.outcome for a in result.attempts] == ["ok"]


def test_rerank_over_1000_documents_is_split_and_merged() -> None:
    docs = [f"filler document {i} about weather" for i in range(1500)]
    docs[1234] = QUERY  # the one that matches
    transport = FakeTransport("cohere-v2", lambda request: Script())
    with ai.Client([cohere(transport=transport)]) as client:
        result = client.rerank(QUERY, docs, target=RERANK, top_n=5)
    sent = [r.json for r in transport.requests]
    assert sorted(len(b["documents"]) for b in sent) == [500, 1000]  # the fake refuses > 1000
    assert all(b["top_n"] == 5 for b in sent)
    assert result[0].index == 1234 and result[0].document == QUERY
    assert len(result) == 5
    whole = sorted(range(len(docs)), key=lambda i: (-relevance(QUERY, docs[i]), i))[:5]
    assert [r.index for r in result] == whole
    assert result.search_units == 10 + 5  # one per started hundred documents, summed
    assert len(result.batch_targets) == 2


@pytest.mark.loopback
def test_rerank_errors_are_typed_and_retried_then_fall_back_to_the_same_model() -> None:
    down = Script(fault=Fault("status", status=503, message="service unavailable"))
    with (
        FakeServer("cohere-v2", [down, down, down]) as primary,
        FakeServer("cohere-v2", [Script()]) as backup,
    ):
        providers = [cohere(primary.base_url), cohere(backup.base_url, alias="backup")]
        route = ai.Route([RERANK, "backup:rerank-v3.5"], retry=FAST)
        with ai.Client(providers) as client:
            result = client.rerank(QUERY, DOCS, route=route)
        primary.assert_all_used()
        backup.assert_all_used()
    assert [a.outcome for a in result.attempts] == ["retried", "retried", "failed", "ok"]
    assert str(result.target) == "backup:rerank-v3.5"
    assert result[0].index == 2 and len(result) == len(DOCS)


@pytest.mark.loopback
def test_rerank_4xx_5xx_and_malformed_answers_are_typed() -> None:
    scripts = [
        Script(fault=Fault("status", status=400, message="invalid request: bad model")),
        Script(fault=Fault("status", status=401, message="invalid api token")),
        Script(fault=Fault("status", status=500, message="internal server error")),
        Script(fault=Fault("malformed")),
        Script(fault=Fault("disconnect", partial_bytes=10)),
    ]
    found = failures(scripts, RERANK, lambda client, route: client.rerank(QUERY, DOCS, route=route))
    assert found == [
        "ProviderError",
        "AuthenticationError",
        "ProviderError",
        "ProtocolError",
        "StreamError",
    ]


@pytest.mark.loopback
def test_a_body_the_fake_refuses_is_cohere_400() -> None:
    with FakeServer("cohere-v2", [Script()]) as srv:
        route = ai.Route(RERANK, retry=ai.RetryPolicy(max_retries=0))
        options = {"cohere": {"documents": [1, 2]}}  # overrides the documents: not strings
        with ai.Client([cohere(srv.base_url)]) as client:
            with pytest.raises(ai.AnyInferError) as info:
                client.rerank(QUERY, DOCS, route=route, provider_options=options)
    error = info.value.attempts[-1].error
    assert error is not None and error.http_status == 400 and "documents" in error.detail


HOSTILE_RERANK: list[Any] = [
    {},
    [],
    {"results": None},
    {"results": "x"},
    {"results": [{"relevance_score": 0.5}]},
    {"results": [{"index": "0", "relevance_score": 0.5}]},
    {"results": [{"index": 0, "relevance_score": "high"}]},
    {"results": [{"index": 99, "relevance_score": 0.5}]},
    {"results": [{"index": -1, "relevance_score": 0.5}]},
    {"results": [{"index": 0, "relevance_score": 0.5}, {"index": 0, "relevance_score": 0.4}]},
    {"results": [{"index": 0, "relevance_score": 0.5}]},  # one of two documents missing
    {
        "results": [{"index": 0, "relevance_score": 0.5}, {"index": 1, "relevance_score": 0.4}],
        "meta": [],
    },
    {
        "results": [{"index": 0, "relevance_score": 0.5}, {"index": 1, "relevance_score": 0.4}],
        "meta": {"billed_units": {"search_units": "one"}},
    },
]

HOSTILE_EMBED: list[Any] = [
    {},
    {"embeddings": None},
    {"embeddings": []},
    {"embeddings": {}},
    {"embeddings": {"float": "x"}},
    {"embeddings": {"float": [[0.1], ["a"]]}},
    {"embeddings": {"float": [[0.1]]}},  # one vector for two texts
    {"embeddings": {"float": [[0.1], []]}},
    {"embeddings": {"base64": ["%%%", "AAAA"]}},
    {"embeddings": {"float": [[0.1], [0.2]]}, "meta": {"billed_units": {"input_tokens": "3"}}},
    {"embeddings": {"float": [[0.1], [0.2, 0.3]]}},  # dimensions differ
]


def _serving(body: Any) -> ai.ProviderSettings:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=body)

    return cohere(transport=httpx.MockTransport(handler))


@pytest.mark.parametrize("body", HOSTILE_RERANK)
def test_a_hostile_rerank_body_is_a_typed_error_never_a_key_error(body: Any) -> None:
    route = ai.Route(RERANK, retry=ai.RetryPolicy(max_retries=0))
    with ai.Client([_serving(body)]) as client:
        with pytest.raises(ai.AnyInferError):
            client.rerank("q", ["a", "b"], route=route)


@pytest.mark.parametrize("body", HOSTILE_EMBED)
def test_a_hostile_embed_body_is_a_typed_error_never_a_key_error(body: Any) -> None:
    route = ai.Route(EMBED, retry=ai.RetryPolicy(max_retries=0))
    with ai.Client([_serving(body)]) as client:
        with pytest.raises(ai.AnyInferError):
            client.embed(["a", "b"], route=route, input_type="query")


def test_base64_embeddings_are_little_endian_float32() -> None:
    values = [[0.5, -1.25], [2.0, 0.0]]
    packed = [base64.b64encode(struct.pack("<2f", *v)).decode() for v in values]
    with ai.Client([_serving({"embeddings": {"base64": packed}})]) as client:
        result = client.embed(["a", "b"], target=EMBED, input_type="query")
    assert result.vectors == (f32(values[0]), f32(values[1]))
    assert result.usage.input_tokens is None  # no meta: usage unknown, not zero


def test_a_cohere_embed_model_price_prices_the_call() -> None:
    price = ai.ModelPrice(input=Decimal("0.00000012"), output=Decimal("0"))
    table = ai.PricingTable({EMBED: price})
    transport = FakeTransport("cohere-v2", lambda request: Script())
    with ai.Client([cohere(transport=transport)], pricing_table=table) as client:
        result = client.embed(["one two three", "four"], target=EMBED, input_type="document")
    assert result.cost_usd == Decimal("0.00000012") * 4


def test_a_search_unit_price_prices_a_split_rerank() -> None:
    price = ai.ModelPrice(input=Decimal(0), output=Decimal(0), search_unit=Decimal("0.002"))
    table = ai.PricingTable({RERANK: price})
    transport = FakeTransport("cohere-v2", lambda request: Script())
    docs = [f"document {i}" for i in range(1050)]
    with ai.Client([cohere(transport=transport)], pricing_table=table) as client:
        result = client.rerank(QUERY, docs, target=RERANK, top_n=3)
    assert result.search_units == 10 + 1  # 1000 documents, then 50
    assert result.cost_usd == Decimal("0.002") * 11


def test_sync_and_async_rerank_agree_over_the_fake() -> None:
    transport = FakeTransport("cohere-v2", lambda request: Script())
    with ai.Client([cohere(transport=transport)]) as client:
        sync_result = client.rerank(QUERY, DOCS, target=RERANK, top_n=2, batch_size=2)

    async def main() -> ai.Reranking:
        transport = FakeTransport("cohere-v2", lambda request: Script())
        async with ai.AsyncClient([cohere(transport=transport)]) as client:
            return await client.rerank(QUERY, DOCS, target=RERANK, top_n=2, batch_size=2)

    async_result = asyncio.run(main())
    assert async_result.results == sync_result.results
    assert async_result.search_units == sync_result.search_units == 3


def test_a_stalled_rerank_is_a_typed_timeout() -> None:
    transport = FakeTransport("cohere-v2", [Script(fault=Fault("stall"))])
    route = ai.Route(RERANK, retry=ai.RetryPolicy(max_retries=0))
    with ai.Client([cohere(transport=transport)]) as client:
        with pytest.raises(ai.AllTargetsFailedError) as info:
            client.rerank(QUERY, DOCS, route=route, timeout_s=0.05)
    assert failed_as(info.value) == "ProviderTimeoutError"


def test_a_provider_without_rerank_is_refused_by_name() -> None:
    with ai.Client([ai.ProviderSettings("openai", api_key="sk-test")]) as client:
        with pytest.raises(ai.ConfigError, match="openai:text-embedding-3-small") as info:
            client.rerank("q", ["a"], target="openai:text-embedding-3-small")
    assert "rerank" in str(info.value)


WORDS = ["cat", "dog", "sun", "capital", "river", "bread", "night", "state"]


@settings(max_examples=40, deadline=None)
@given(
    docs=st.lists(
        st.lists(st.sampled_from(WORDS), min_size=1, max_size=4).map(" ".join),
        min_size=1,
        max_size=24,
        unique=True,
    ),
    batch_size=st.integers(1, 8),
    concurrency=st.integers(1, 3),
    top_n=st.none() | st.integers(1, 30),
    failing=st.sets(st.integers(0, 23)),
    status=st.sampled_from([429, 500, 502, 503]),
)
def test_property_split_reranks_equal_one_ranking_and_retries_lose_nothing(
    docs: list[str],
    batch_size: int,
    concurrency: int,
    top_n: int | None,
    failing: set[int],
    status: int,
) -> None:
    query = "the cat in the sun"
    spans = split_batches(len(docs), batch_size)
    failing = {i for i in failing if i < len(spans)}
    # Each failing request answers its first attempt with a retryable status (the
    # documents are distinct, so a request's first document names it).
    remaining = {docs[spans[i].start] for i in failing}

    def source(request: httpx.Request) -> Script:
        first = json.loads(request.content)["documents"][0]
        if first in remaining:
            remaining.discard(first)
            return Script(fault=Fault("status", status=status, message="scripted"))
        return Script()

    transport = FakeTransport("cohere-v2", source)
    route = ai.Route(RERANK, retry=FAST, breaker_threshold=0)
    with ai.Client([cohere(transport=transport)]) as client:
        result = client.rerank(
            query, docs, route=route, top_n=top_n, batch_size=batch_size, concurrency=concurrency
        )
    whole = sorted(range(len(docs)), key=lambda i: (-relevance(query, docs[i]), i))
    whole = whole if top_n is None else whole[:top_n]
    assert [r.index for r in result] == whole
    assert [r.document for r in result] == [docs[i] for i in whole]
    assert [r.score for r in result] == [relevance(query, docs[i]) for i in whole]
    outcomes = [a.outcome for a in result.attempts]
    assert outcomes.count("retried") == len(failing) and outcomes.count("ok") == len(spans)
    assert result.search_units == len(spans)  # every request is under 100 documents
    assert transport.served == len(spans) + len(failing)
