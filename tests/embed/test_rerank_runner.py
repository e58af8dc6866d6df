"""`rerank()`'s runner: the call's checks, the same-model rule, splitting, merging, top_n.

A small in-process adapter (`WordOverlap`, registered in a private registry) ranks by
shared words and records every request it receives, so a test can see what was sent —
and that nothing was, when a call is refused. The wire (Cohere's `/v2/rerank` over the
fake servers) is tested in `test_rerank_cohere.py`.
"""

from __future__ import annotations

import asyncio
import inspect
from typing import Any, ClassVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import anyinfer as ai
from anyinfer._adapters.registry import ProviderRegistry
from anyinfer._embed._rerank import merge
from anyinfer._embed._types import RankedDocument, RerankReply, RerankRequest
from anyinfer._types import Usage
from anyinfer.adapters import HTTPAdapter


class WordOverlap(HTTPAdapter):
    """Scores a document by the share of the query's words it holds."""

    provider_id = "overlap"
    default_base_url = "http://127.0.0.1:9"
    rerank_max_documents = 4
    sent: ClassVar[list[RerankRequest]] = []
    reply: ClassVar[Any] = None  # a callable(request) -> RerankReply overriding the scoring

    def generate(self, request: Any) -> Any:
        raise ai.ConfigError("overlap only reranks", provider=self.instance_id)

    async def rerank(self, request: RerankRequest) -> RerankReply:
        type(self).sent.append(request)
        if type(self).reply is not None:
            return type(self).reply(request)  # type: ignore[no-any-return]
        words = set(request.query.lower().split())
        scored = sorted(
            (
                (len(words & set(d.lower().split())) / len(words), i)
                for i, d in enumerate(request.documents)
            ),
            key=lambda pair: -pair[0],
        )
        if request.top_n is not None:
            scored = scored[: request.top_n]
        ranked = tuple(RankedDocument(i, s, request.documents[i]) for s, i in scored)
        return RerankReply(ranked, usage=Usage(input_tokens=len(request.documents)), search_units=1)


class NoRerank(HTTPAdapter):
    provider_id = "plain"
    default_base_url = "http://127.0.0.1:9"

    def generate(self, request: Any) -> Any:
        raise ai.ConfigError("unused", provider=self.instance_id)


@pytest.fixture
def client() -> Any:
    WordOverlap.sent = []
    WordOverlap.reply = None
    registry = ProviderRegistry()
    registry.register("overlap", WordOverlap)
    registry.register("plain", NoRerank)
    providers = [
        ai.ProviderSettings("overlap", api_key="k"),
        ai.ProviderSettings("overlap", api_key="k", alias="twin"),
        ai.ProviderSettings("plain", api_key="k"),
    ]
    with ai.Client(providers, registry=registry) as c:
        yield c


DOCS = [
    "cats purr and sleep",
    "dogs bark at night",
    "a cat and a dog",
    "the stock market fell",
    "cats chase mice at night",
    "quiet night",
    "dogs and cats are pets",
]


@pytest.mark.parametrize(
    ("query", "documents", "extra", "needle"),
    [
        ("", DOCS, {}, "query must not be empty"),
        ("   ", DOCS, {}, "query must not be empty"),
        (b"cats", DOCS, {}, "query must be a string"),
        ("cats", [], {}, "at least one document"),
        ("cats", "one string", {}, "one string is not a list"),
        ("cats", ["ok", 3], {}, "documents[1] must be a string, got int"),
        ("cats", ["ok", None], {}, "documents[1] must be a string"),
        ("cats", DOCS, {"top_n": 0}, "top_n"),
        ("cats", DOCS, {"top_n": -2}, "top_n"),
        ("cats", DOCS, {"top_n": 2.0}, "top_n"),
        ("cats", DOCS, {"top_n": True}, "top_n"),
        ("cats", DOCS, {"batch_size": 0}, "batch_size"),
        ("cats", DOCS, {"concurrency": 0}, "concurrency"),
        ("cats", DOCS, {"timeout_s": 0}, "timeout_s"),
        ("cats", DOCS, {"same_model": "yes"}, "same_model"),
        ("cats", DOCS, {"target": "plain:m"}, "plain:m: plain (plain) does not serve reranking"),
    ],
)
def test_an_invalid_call_is_refused_before_anything_is_sent(
    client: Any, query: Any, documents: Any, extra: dict[str, Any], needle: str
) -> None:
    kwargs = {"target": "overlap:m", **extra}
    with pytest.raises(ai.ConfigError) as info:
        client.rerank(query, documents, **kwargs)
    assert needle in str(info.value)
    assert WordOverlap.sent == []


def test_a_fallback_to_another_model_is_refused_unless_declared_the_same(client: Any) -> None:
    with pytest.raises(ai.ConfigError) as info:
        client.rerank("cats", DOCS, route=["overlap:m", "twin:other-model"])
    message = str(info.value)
    assert "twin:other-model" in message and "'m'" in message and "same_model=True" in message
    assert WordOverlap.sent == []
    # The same model under another instance is fine, and so is a declared twin.
    assert len(client.rerank("cats", DOCS, route=["overlap:m", "twin:m"])) == len(DOCS)
    declared = client.rerank("cats", DOCS, route=["overlap:m", "twin:x"], same_model=True)
    assert len(declared) == len(DOCS)


def test_a_long_list_is_split_merged_by_score_and_cut_after_the_merge(client: Any) -> None:
    result = client.rerank("cats at night", DOCS, target="overlap:m", top_n=3)
    # Documents 0-3 and 4-6 went in two requests (rerank_max_documents = 4), each
    # asking for at most top_n.
    assert [list(r.documents) for r in WordOverlap.sent] == [DOCS[:4], DOCS[4:]]
    assert [r.top_n for r in WordOverlap.sent] == [3, 3]
    # 3/3, 2/3, then the first of three 1/3 ties (0, 5, 6: across both requests)
    assert [r.index for r in result] == [4, 1, 0]
    assert [r.document for r in result] == [DOCS[4], DOCS[1], DOCS[0]]
    assert result[0].score == pytest.approx(1.0)
    assert result.usage.input_tokens == len(DOCS)  # summed over both requests
    assert result.search_units == 2
    assert len(result.batch_targets) == 2 and str(result.target) == "overlap:m"
    assert [a.outcome for a in result.attempts] == ["ok", "ok"]
    assert result.cost_usd is None  # no price for this model
    assert result.timing.total_ms >= 0
    # The repr stays short whatever the documents: no texts in it.
    assert repr(result).startswith("Reranking(count=3, best=4@1,") and DOCS[4] not in repr(result)


def test_without_top_n_every_document_comes_back_once(client: Any) -> None:
    result = client.rerank("dogs", DOCS, target="overlap:m", batch_size=2)
    assert len(WordOverlap.sent) == 4 and all(r.top_n is None for r in WordOverlap.sent)
    assert sorted(r.index for r in result) == list(range(len(DOCS)))
    scores = [r.score for r in result]
    assert scores == sorted(scores, reverse=True)
    assert all(r.document == DOCS[r.index] for r in result)


def test_top_n_larger_than_the_list_returns_everything(client: Any) -> None:
    result = client.rerank("cats", DOCS[:3], target="overlap:m", top_n=50)
    assert WordOverlap.sent[0].top_n == 3
    assert len(result) == 3


@pytest.mark.parametrize(
    ("ranked", "needle"),
    [
        ((RankedDocument(0, 0.5, ""),), "1 ranked document(s) for 2"),
        ((RankedDocument(0, 0.5, ""), RankedDocument(0, 0.4, "")), "not a distinct position"),
        ((RankedDocument(0, 0.5, ""), RankedDocument(2, 0.4, "")), "index 2"),
        ((RankedDocument(0, 0.5, ""), RankedDocument(1, float("nan"), "")), "not a finite number"),
    ],
)
def test_a_reply_breaking_the_guarantees_is_a_typed_failure(
    client: Any, ranked: tuple[RankedDocument, ...], needle: str
) -> None:
    WordOverlap.reply = lambda request: RerankReply(ranked)
    route = ai.Route(["overlap:m"], retry=ai.RetryPolicy(max_retries=0))
    with pytest.raises(ai.AnyInferError) as info:
        client.rerank("cats", DOCS[:2], route=route)
    assert needle in str(info.value) or any(
        a.error is not None and needle in a.error.detail for a in info.value.attempts
    )


def test_a_failed_request_fails_the_call_with_no_partial_ranking(client: Any) -> None:
    def reply(request: RerankRequest) -> RerankReply:
        if request.documents[0] == DOCS[4]:
            raise ai.ProviderError("second request broke", provider="overlap", retryable=False)
        return RerankReply(tuple(RankedDocument(i, 1.0, "") for i in range(len(request.documents))))

    WordOverlap.reply = reply
    with pytest.raises(ai.AnyInferError) as info:
        client.rerank("cats", DOCS, target="overlap:m", concurrency=1)
    assert info.value.attempts  # the trail of both requests travels with the error
    assert {a.outcome for a in info.value.attempts} >= {"failed"}


def test_sync_and_async_rerank_have_one_signature_and_agree(client: Any) -> None:
    sync_sig = inspect.signature(ai.Client.rerank)
    async_sig = inspect.signature(ai.AsyncClient.rerank)
    assert sync_sig == async_sig
    assert inspect.iscoroutinefunction(ai.AsyncClient.rerank)
    assert sync_sig.return_annotation in ("Reranking", ai.Reranking)
    sync_result = client.rerank("dogs at night", DOCS, target="overlap:m", top_n=4)

    async def run() -> ai.Reranking:
        registry = ProviderRegistry()
        registry.register("overlap", WordOverlap)
        async with ai.AsyncClient(
            [ai.ProviderSettings("overlap", api_key="k")], registry=registry
        ) as ac:
            return await ac.rerank("dogs at night", DOCS, target="overlap:m", top_n=4)

    async_result = asyncio.run(run())
    assert async_result.results == sync_result.results
    assert ai.Reranking.__module__ == "anyinfer" and ai.RankedDocument.__module__ == "anyinfer"
    assert {"Reranking", "RankedDocument"} <= set(ai.__all__)


@settings(max_examples=60, deadline=None)
@given(
    scores=st.lists(st.floats(-10, 10, allow_nan=False), min_size=1, max_size=40),
    size=st.integers(1, 9),
    top_n=st.none() | st.integers(1, 45),
)
def test_merge_equals_one_sort_of_everything(
    scores: list[float], size: int, top_n: int | None
) -> None:
    documents = [f"d{i}" for i in range(len(scores))]
    replies = []
    for start in range(0, len(scores), size):
        chunk = list(enumerate(scores[start : start + size]))
        chunk.sort(key=lambda pair: -pair[1])
        if top_n is not None:
            chunk = chunk[:top_n]
        replies.append((start, RerankReply(tuple(RankedDocument(i, s, "") for i, s in chunk))))
    merged = merge(replies, documents, top_n)
    whole = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
    if top_n is not None:
        whole = whole[:top_n]
    assert [r.index for r in merged] == whole
    assert [r.document for r in merged] == [documents[i] for i in whole]
