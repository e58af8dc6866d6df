"""The official `cohere` SDK reads what the `cohere-v2` fake serves at `/v2/embed` and
`/v2/rerank`, and the fake accepts what the SDK sends.

`ClientV2.embed()` and `ClientV2.rerank()` against one loopback `FakeServer`: the SDK's
typed `EmbedByTypeResponse` and `V2RerankResponse` must hold the same vectors, indices,
scores, billed units and search units that AnyInfer reads from the same answers, and the
SDK's own request bodies (with its explicit nulls) must not be refused. Error statuses
must reach the SDK as its error classes. The SDK is a test-only dependency; without it
these tests skip.
"""

from __future__ import annotations

from array import array
from typing import Any

import pytest

import anyinfer as ai
from anyinfer.fakeservers import FakeServer, Fault, Script
from anyinfer.fakeservers.dialects._embeddings import fake_vector

cohere = pytest.importorskip("cohere")

pytestmark = [
    pytest.mark.loopback,
    pytest.mark.filterwarnings("ignore::DeprecationWarning:cohere.*"),
]

TEXTS = ["hello world", "a cat in the sun", "x"]
QUERY = "where is the cat"
DOCS = ["stock prices", "the cat is in the sun", "a dog", "cat food"]


def sdk(base_url: str) -> Any:
    return cohere.ClientV2(api_key="co-test", base_url=base_url)


def test_sdk_embed_reads_the_vectors_and_billed_units_anyinfer_reads() -> None:
    with FakeServer("cohere-v2", lambda request: Script()) as srv:
        answer = sdk(srv.base_url).embed(
            texts=TEXTS, model="embed-v4.0", input_type="search_document", embedding_types=["float"]
        )
        settings = ai.ProviderSettings("cohere", api_key="co-test", base_url=srv.base_url)
        with ai.Client([settings]) as client:
            ours = client.embed(TEXTS, target="cohere:embed-v4.0", input_type="document")
        sdk_body, our_body = srv.requests[0].json, srv.requests[1].json
    floats = answer.embeddings.float_
    assert [array("f", v) for v in floats] == list(ours.vectors)
    assert ours.vectors == tuple(array("f", fake_vector(t)) for t in TEXTS)
    assert answer.meta.billed_units.input_tokens == ours.usage.input_tokens
    assert answer.texts == TEXTS and answer.response_type == "embeddings_by_type"
    # The same fields, save the SDK's explicit nulls.
    assert {k: v for k, v in sdk_body.items() if v is not None} == our_body


def test_sdk_embed_reads_int8_and_base64() -> None:
    with FakeServer("cohere-v2", lambda request: Script()) as srv:
        answer = sdk(srv.base_url).embed(
            texts=TEXTS, model="embed-v4.0", input_type="search_query",
            embedding_types=["int8", "base64"],
        )  # fmt: skip
        settings = ai.ProviderSettings("cohere", api_key="co-test", base_url=srv.base_url)
        with ai.Client([settings]) as client:
            options = {"cohere": {"embedding_types": ["base64"]}}
            ours = client.embed(TEXTS, target="cohere:embed-v4.0", input_type="query",
                                provider_options=options)  # fmt: skip
    assert len(answer.embeddings.int8) == len(TEXTS)
    assert all(-128 <= v <= 127 for row in answer.embeddings.int8 for v in row)
    assert len(answer.embeddings.base64) == len(TEXTS)
    assert ours.vectors == tuple(array("f", fake_vector(t)) for t in TEXTS)


def test_sdk_rerank_reads_the_ranking_anyinfer_reads() -> None:
    with FakeServer("cohere-v2", lambda request: Script()) as srv:
        answer = sdk(srv.base_url).rerank(model="rerank-v3.5", query=QUERY, documents=DOCS, top_n=3)
        settings = ai.ProviderSettings("cohere", api_key="co-test", base_url=srv.base_url)
        with ai.Client([settings]) as client:
            ours = client.rerank(QUERY, DOCS, target="cohere:rerank-v3.5", top_n=3)
        sdk_body, our_body = srv.requests[0].json, srv.requests[1].json
    assert [(r.index, r.relevance_score) for r in answer.results] == [
        (r.index, r.score) for r in ours
    ]
    assert answer.results[0].index == 1
    assert answer.meta.billed_units.search_units == ours.search_units == 1
    assert {k: v for k, v in sdk_body.items() if v is not None} == our_body


@pytest.mark.parametrize(
    ("status", "error"),
    [
        (400, "BadRequestError"),
        (401, "UnauthorizedError"),
        (404, "NotFoundError"),
        (429, "TooManyRequestsError"),
        (498, "InvalidTokenError"),
        (500, "InternalServerError"),
    ],
)
def test_sdk_sees_rerank_errors_as_its_own_classes(status: int, error: str) -> None:
    with FakeServer(
        "cohere-v2", [Script(fault=Fault("status", status=status, message="no"))]
    ) as srv:
        client = cohere.ClientV2(api_key="co-test", base_url=srv.base_url)
        with pytest.raises(Exception) as info:
            client.rerank(
                model="rerank-v3.5", query=QUERY, documents=DOCS, request_options={"max_retries": 0}
            )
    assert type(info.value).__name__ == error
