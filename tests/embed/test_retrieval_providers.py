"""Voyage AI, Jina AI and TEI, the providers that only embed and rerank, held to the
same guarantees: over real loopback HTTP against their fake dialects, through
`client.embed` and `client.rerank`.

Each provider's own request mapping is tested in its own file (`test_voyage.py`,
`test_jina.py`, `test_tei.py`); here every one of them must keep input order across
batches, sum usage, type every failure (4xx, 5xx, a malformed body: always an
`AnyInferError`, never a `KeyError`) and refuse generation before anything is sent.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest
from helpers import NO_RETRY, f32

import anyinfer as ai
from anyinfer.fakeservers import FakeServer, Fault, Script
from anyinfer.fakeservers.dialects._embeddings import fake_vector, token_count
from anyinfer.fakeservers.dialects._retrieval import fake_ranking

FAST = ai.RetryPolicy(max_retries=2, backoff_base_s=0.001, jitter=0.0)
TEXTS = [f"note {i} on {'cats and mats' if i % 3 else 'dogs in fog'}" for i in range(11)]
QUERY = "where do the cats sleep"
DOCS = [
    "dogs bark in the fog",
    "the cats sleep on mats",
    "a recipe for bread",
    "cats sleep where it is warm",
]


@dataclass(frozen=True)
class Provider:
    """One provider under test: its id, dialect, a model name and its fake's facts."""

    pid: str
    dialect: str
    model: str
    key: str | None
    rerank_model: str

    def settings(self, base_url: str) -> ai.ProviderSettings:
        return ai.ProviderSettings(self.pid, api_key=self.key, base_url=base_url)


PROVIDERS = [
    Provider("voyage", "voyage", "voyage-fake", "pa-test", "rerank-fake"),
    Provider("jina", "jina", "jina-embeddings-fake", "jina_test", "jina-reranker-fake"),
    Provider("tei", "tei", "fake/bge-small", None, "fake/bge-reranker"),
]
"""Models the catalog does not know, so the fake's own dimensions (256, or any asked
for) are not held to a real model's."""
IDS = [p.pid for p in PROVIDERS]


@pytest.mark.loopback
@pytest.mark.parametrize("provider", PROVIDERS, ids=IDS)
def test_batches_keep_input_order_and_usage_is_summed(provider: Provider) -> None:
    with FakeServer(provider.dialect, lambda request: Script()) as srv:
        with ai.Client([provider.settings(srv.base_url)]) as client:
            result = client.embed(
                TEXTS, target=f"{provider.pid}:{provider.model}", batch_size=4, concurrency=3
            )
        sent = [r.json for r in srv.requests]
    assert len(sent) == 3 and len(result.batch_targets) == 3
    assert result.vectors == tuple(f32(fake_vector(t)) for t in TEXTS)
    assert result.dimensions == 256
    assert result.usage.input_tokens == sum(token_count(t) for t in TEXTS)
    assert [a.outcome for a in result.attempts] == ["ok"] * 3


@pytest.mark.loopback
@pytest.mark.parametrize("provider", PROVIDERS, ids=IDS)
def test_dimensions_are_asked_for_and_checked(provider: Provider) -> None:
    with FakeServer(provider.dialect, lambda request: Script()) as srv:
        with ai.Client([provider.settings(srv.base_url)]) as client:
            result = client.embed(
                ["a b", "c"], target=f"{provider.pid}:{provider.model}", dimensions=16
            )
    assert result.dimensions == 16
    assert result.vectors == (f32(fake_vector("a b", 16)), f32(fake_vector("c", 16)))


@pytest.mark.loopback
@pytest.mark.parametrize("provider", PROVIDERS, ids=IDS)
def test_rerank_ranks_every_document_best_first_and_keeps_top_n(provider: Provider) -> None:
    expected = fake_ranking(QUERY, DOCS)
    with FakeServer(provider.dialect, lambda request: Script()) as srv:
        with ai.Client([provider.settings(srv.base_url)]) as client:
            target = f"{provider.pid}:{provider.rerank_model}"
            full = client.rerank(QUERY, DOCS, target=target)
            top = client.rerank(QUERY, DOCS, target=target, top_n=2)
    assert [(r.index, r.score) for r in full] == expected
    assert [r.document for r in full] == [DOCS[i] for i, _ in expected]
    assert [(r.index, r.score) for r in top] == expected[:2]
    assert full.usage.input_tokens is not None and full.usage.input_tokens > 0


@pytest.mark.loopback
@pytest.mark.parametrize("provider", PROVIDERS, ids=IDS)
def test_generation_is_refused_before_anything_is_sent(provider: Provider) -> None:
    with FakeServer(provider.dialect, []) as srv:
        with ai.Client([provider.settings(srv.base_url)]) as client:
            target = f"{provider.pid}:{provider.model}"
            with pytest.raises(ai.ConfigError, match="does not serve generation") as info:
                client.generate("hi", target=target)
            assert info.value.provider == provider.pid
            with pytest.raises(ai.ConfigError, match="serves embeddings, reranking"):
                client.stream("hi", target=target)
        assert srv.requests == []


# Each fault, and the typed error (class name) every provider's answer to it must be.
FAULTS = [
    (Fault("status", status=401, message="no such key"), "AuthenticationError", False),
    (Fault("status", status=429, message="slow down", retry_after=0.01), "RateLimitError", True),
    (Fault("status", status=500, message="boom"), "ProviderError", True),
    (Fault("status", status=503, message="not ready"), "OverloadedError", True),
    (Fault("malformed"), "ProtocolError", False),
    (Fault("disconnect", partial_bytes=7), "StreamError", True),
]


@pytest.mark.loopback
@pytest.mark.parametrize("provider", PROVIDERS, ids=IDS)
@pytest.mark.parametrize(
    ("fault", "error", "retryable"), FAULTS, ids=["401", "429", "500", "503", "malformed", "cut"]
)
def test_failures_are_typed_for_embed_and_rerank(
    provider: Provider, fault: Fault, error: str, retryable: bool
) -> None:
    with FakeServer(provider.dialect, lambda request: Script(fault=fault)) as srv:
        with ai.Client([provider.settings(srv.base_url)]) as client:
            calls: list[Callable[[], object]] = [
                lambda: client.embed(
                    ["a"], route=ai.Route(f"{provider.pid}:{provider.model}", retry=NO_RETRY)
                ),
                lambda: client.rerank(
                    "q",
                    ["d"],
                    route=ai.Route(f"{provider.pid}:{provider.rerank_model}", retry=NO_RETRY),
                ),
            ]
            for call in calls:
                with pytest.raises(ai.AllTargetsFailedError) as info:
                    call()
                last = info.value.attempts[-1].error
                assert last is not None
                assert last.type_name == error, last
                assert last.retryable is retryable


@pytest.mark.loopback
@pytest.mark.parametrize("provider", PROVIDERS, ids=IDS)
def test_a_retryable_failure_is_retried_and_then_served(provider: Provider) -> None:
    scripts = [Script(fault=Fault("status", status=429, message="slow down")), Script()]
    with FakeServer(provider.dialect, scripts) as srv:
        with ai.Client([provider.settings(srv.base_url)]) as client:
            route = ai.Route(f"{provider.pid}:{provider.model}", retry=FAST)
            result = client.embed(["x y"], route=route)
    assert [a.outcome for a in result.attempts] == ["retried", "ok"]
    assert result.vectors == (f32(fake_vector("x y")),)


@pytest.mark.loopback
@pytest.mark.parametrize("provider", PROVIDERS, ids=IDS)
def test_sequential_calls_reuse_one_connection(provider: Provider) -> None:
    with FakeServer(provider.dialect, lambda request: Script()) as srv:
        with ai.Client([provider.settings(srv.base_url)]) as client:
            for _ in range(3):
                client.embed(["a b"], target=f"{provider.pid}:{provider.model}")
                client.rerank("a", ["a b", "c"], target=f"{provider.pid}:{provider.rerank_model}")
        assert srv.connections_opened == 1
