"""Hugging Face TEI (`tei`): what is sent and read, over loopback against the `tei` fake.

The fields and errors are TEI's router's (`router/src/http/types.rs`, `server.rs`):
`POST /embed` takes `inputs`, `normalize`, `dimensions`, `prompt_name` and answers a
bare array of float arrays; `POST /rerank` takes `query`, `texts`, `raw_scores`,
`return_text` and answers `[{index, score}]`; usage is the `x-compute-tokens` header;
errors are `{"error", "error_type"}`; `GET /info` describes the served model. The shared
guarantees (order, batching, typed failures) are in `test_retrieval_providers.py`.
"""

from __future__ import annotations

from array import array

import httpx
import pytest
from helpers import NO_RETRY, last_error

import anyinfer as ai
from anyinfer._providers.tei import DEFAULT_MAX_CLIENT_BATCH_SIZE, TEIAdapter
from anyinfer.fakeservers import FakeServer, Fault, Script
from anyinfer.fakeservers.dialects._embeddings import fake_vector, token_count
from anyinfer.fakeservers.dialects._retrieval import fake_ranking

MODEL = "fake/bge-small"
"""A model the catalog does not know (see `test_retrieval_providers.py`)."""


def tei(base_url: str, **kw: object) -> ai.ProviderSettings:
    return ai.ProviderSettings("tei", base_url=base_url, **kw)  # type: ignore[arg-type]


def route(target: str = f"tei:{MODEL}") -> ai.Route:
    return ai.Route(target, retry=NO_RETRY)


def test_defaults_are_a_local_keyless_tei() -> None:
    assert TEIAdapter.default_base_url == "http://127.0.0.1:8080"
    assert TEIAdapter.api_key_env is None
    assert TEIAdapter.embed_max_batch == TEIAdapter.rerank_max_documents == 32
    assert DEFAULT_MAX_CLIENT_BATCH_SIZE == 32
    assert ai.default_registry().canonical("text-embeddings-inference") == "tei"


@pytest.mark.loopback
def test_the_embed_body_and_the_token_header() -> None:
    with FakeServer("tei", lambda request: Script()) as srv:
        with ai.Client([tei(srv.base_url)]) as client:
            result = client.embed(
                ["cats", "dogs run"], target=f"tei:{MODEL}", input_type="query", dimensions=8
            )
            plain = client.embed("x", target=f"tei:{MODEL}")
        bodies = [r.json for r in srv.requests]
    assert srv.requests[0].path == "/embed"
    assert bodies[0] == {
        "inputs": ["cats", "dogs run"],
        "normalize": True,
        "prompt_name": "query",
        "dimensions": 8,
    }
    assert bodies[1] == {"inputs": ["x"], "normalize": True}
    assert result.vectors == (
        array("f", fake_vector("cats", 8)),
        array("f", fake_vector("dogs run", 8)),
    )
    assert result.usage.input_tokens == token_count("cats") + token_count("dogs run")
    assert plain.dimensions == 256 and plain.warnings == ()


@pytest.mark.loopback
def test_more_than_32_inputs_go_in_batches_of_32() -> None:
    texts = [f"text {i}" for i in range(70)]
    with FakeServer("tei", lambda request: Script()) as srv:
        with ai.Client([tei(srv.base_url)]) as client:
            result = client.embed(texts, target=f"tei:{MODEL}")
        sizes = sorted(len(r.json["inputs"]) for r in srv.requests)
    assert sizes == [6, 32, 32]
    assert result.vectors == tuple(array("f", fake_vector(t)) for t in texts)


def test_an_answer_without_the_token_header_has_unknown_usage_and_a_bad_one_is_typed() -> None:
    headers = iter([{}, {"x-compute-tokens": "many"}])

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=[[1.0, 0.0]], headers=next(headers))

    with ai.Client([ai.ProviderSettings("tei", transport=httpx.MockTransport(handler))]) as client:
        assert client.embed("a", target=f"tei:{MODEL}").usage.input_tokens is None
        with pytest.raises(ai.AllTargetsFailedError) as info:
            client.embed("a", route=route())
    error = last_error(info.value)
    assert error.type_name == "ProtocolError"
    assert "x-compute-tokens" in error.detail


@pytest.mark.loopback
def test_rerank_ranks_every_text_and_top_n_is_cut_here() -> None:
    docs = ["cats nap", "bread", "cats sleep on mats", "dogs"]
    with FakeServer("tei", lambda request: Script()) as srv:
        with ai.Client([tei(srv.base_url)]) as client:
            result = client.rerank(
                "where cats sleep", docs, target="tei:fake/bge-reranker", top_n=2
            )
        body = srv.requests[0].json
    assert srv.requests[0].path == "/rerank"
    assert body == {
        "query": "where cats sleep",
        "texts": docs,
        "raw_scores": False,
        "return_text": False,
    }
    assert [(r.index, r.score) for r in result] == fake_ranking("where cats sleep", docs, 2)
    q = token_count("where cats sleep")
    assert result.usage.input_tokens == sum(q + token_count(d) for d in docs)


# TEI's error types and the typed error each one is (the status is the router's).
TEI_ERRORS = [
    (Fault("status", status=400, message="`inputs` cannot be empty"), "ProviderError", False),
    (Fault("status", status=413, message="too big"), "ProviderError", False),
    (Fault("status", status=422, message="Validation"), "ProviderError", False),
    (Fault("status", status=424, message="model is not a re-ranker model"), "ProviderError", False),
    (Fault("status", status=429, message="Model is overloaded"), "RateLimitError", True),
    (Fault("status", status=503, message="unhealthy"), "OverloadedError", True),
    (Fault("status", status=401, message=""), "AuthenticationError", False),
]


@pytest.mark.loopback
@pytest.mark.parametrize(
    ("fault", "error", "retryable"), TEI_ERRORS, ids=[str(f.status) for f, _, _ in TEI_ERRORS]
)
def test_tei_errors_are_typed(fault: Fault, error: str, retryable: bool) -> None:
    with FakeServer("tei", [Script(fault=fault)] * 2) as srv:
        with ai.Client([tei(srv.base_url)]) as client:
            for call in (
                lambda: client.embed("a", route=route()),
                lambda: client.rerank("q", ["d"], route=route("tei:fake/bge-reranker")),
            ):
                with pytest.raises(ai.AllTargetsFailedError) as info:
                    call()
                last = info.value.attempts[-1].error
                assert last is not None and last.type_name == error, last
                assert last.retryable is retryable and last.http_status == fault.status


class WideTEI(TEIAdapter):
    """A client that believes the server takes 64 texts a request (the fake takes 32)."""

    provider_id = "tei-wide"
    embed_max_batch = 64


@pytest.mark.loopback
def test_a_batch_over_the_servers_limit_is_its_422_in_its_words() -> None:
    registry = ai.ProviderRegistry(entry_points=False)
    registry.register("tei-wide", WideTEI)
    with FakeServer("tei", lambda request: Script()) as srv:
        settings = ai.ProviderSettings("tei-wide", base_url=srv.base_url)
        with ai.Client([settings], registry=registry) as client:
            with pytest.raises(ai.AllTargetsFailedError) as info:
                client.embed([f"t{i}" for i in range(40)], route=route("tei-wide:m"))
            with pytest.raises(ai.AllTargetsFailedError) as empty:
                client.embed(
                    ["a"], route=route("tei-wide:m"), provider_options={"tei-wide": {"inputs": []}}
                )
    error = last_error(info.value)
    assert error.http_status == 422 and not error.retryable
    assert "(Validation): batch size 40 > maximum allowed batch size 32" in error.detail
    error = empty.value.attempts[-1].error
    assert error is not None and error.http_status == 400
    assert "(Empty): `inputs` cannot be empty" in error.detail


@pytest.mark.loopback
def test_models_and_health_read_info() -> None:
    with FakeServer("tei", [], models=["BAAI/bge-large-en-v1.5"]) as srv:
        with ai.Client([tei(srv.base_url)]) as client:
            (model,) = client.models("tei")
            health = client.health("tei")
        assert [r.path for r in srv.requests] == ["/info", "/info"]
    assert model.id == "BAAI/bge-large-en-v1.5" and model.context_window == 512
    assert model.facts == {
        "model_type": "embedding",
        "max_client_batch_size": 32,
        "max_batch_tokens": 16384,
    }
    assert health.ok and health.models == 1


def test_a_key_is_sent_only_when_set() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json=[[1.0]], headers={"x-compute-tokens": "1"})

    transport = httpx.MockTransport(handler)
    for key in (None, "tei-secret"):
        with ai.Client([ai.ProviderSettings("tei", api_key=key, transport=transport)]) as client:
            client.embed("a", target=f"tei:{MODEL}")
    assert "authorization" not in seen[0].headers
    assert seen[1].headers["authorization"] == "Bearer tei-secret"
    assert str(seen[0].url) == "http://127.0.0.1:8080/embed"
