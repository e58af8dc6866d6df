"""`embed()` on the Gemini API: `models/{model}:batchEmbedContents` over real loopback HTTP.

Served by the `gemini` fake dialect's embedding endpoint (deterministic vectors, Gemini's
refusals in Google's error envelope); a few malformed answers come from an
`httpx.MockTransport`. The `google-genai` SDK, served by the same fake, is the oracle for
the body and the answer's reading.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from helpers import NO_RETRY, embed_errors, f32, last_error

import anyinfer as ai
from anyinfer._embed._wire import gemini_task_type
from anyinfer.fakeservers import FakeServer, FakeTransport, Fault, Script
from anyinfer.fakeservers.dialects._embeddings import fake_vector, token_count

FAST = ai.RetryPolicy(max_retries=2, backoff_base_s=0.001, jitter=0.0)
MODEL = "gemini-embedding-001"
TARGET = f"gemini:{MODEL}"


def gemini(base_url: str | None = None, **kwargs: Any) -> ai.ProviderSettings:
    return ai.ProviderSettings("gemini", api_key="AIza-test", base_url=base_url, **kwargs)


@pytest.mark.loopback
def test_batches_of_at_most_100_in_order_with_usage_summed() -> None:
    texts = [f"note {i} on {'rivers' if i % 3 else 'mountains'}" for i in range(250)]
    with FakeServer("gemini", lambda request: Script()) as srv:
        with ai.Client([gemini(srv.base_url)]) as client:
            result = client.embed(texts, target=TARGET, concurrency=3)
        paths = {r.path for r in srv.requests}
        sizes = sorted(len(r.json["requests"]) for r in srv.requests)
    assert paths == {f"/v1beta/models/{MODEL}:batchEmbedContents"}
    assert sizes == [50, 100, 100]
    assert len(result) == 250 and result.dimensions == 256
    assert result.vectors == tuple(f32(fake_vector(t)) for t in texts)
    tokens = sum(token_count(t) for t in texts)
    assert result.usage.input_tokens == tokens == result.usage.total_tokens
    assert len(result.batch_targets) == 3 and not result.warnings


@pytest.mark.loopback
def test_one_input_body_dimensions_task_type_and_options() -> None:
    with FakeServer("gemini", lambda request: Script()) as srv:
        with ai.Client([gemini(srv.base_url)]) as client:
            one = client.embed(
                "what is a fjord?",
                target=TARGET,
                dimensions=16,
                input_type="document",
                provider_options={"gemini": {"title": "Geography"}},
            )
        sent = srv.requests[0]
    assert sent.path == f"/v1beta/models/{MODEL}:batchEmbedContents"
    assert sent.json == {
        "requests": [
            {
                "model": f"models/{MODEL}",
                "content": {"parts": [{"text": "what is a fjord?"}]},
                "taskType": "RETRIEVAL_DOCUMENT",
                "outputDimensionality": 16,
                "title": "Geography",
            }
        ]
    }
    assert one.dimensions == 16 and one[0] == f32(fake_vector("what is a fjord?", 16))
    assert one.usage.input_tokens == 4


def test_input_type_maps_to_task_type() -> None:
    assert gemini_task_type(None) is None
    assert gemini_task_type("query") == "RETRIEVAL_QUERY"
    assert gemini_task_type("search_document") == "RETRIEVAL_DOCUMENT"
    assert gemini_task_type("semantic_similarity") == "SEMANTIC_SIMILARITY"
    assert gemini_task_type("CODE_RETRIEVAL_QUERY") == "CODE_RETRIEVAL_QUERY"
    assert gemini_task_type("fact-verification") == "FACT_VERIFICATION"
    transport = FakeTransport("gemini", lambda request: Script())
    with ai.Client([gemini(transport=transport)]) as client:
        for given, wire in (("query", "RETRIEVAL_QUERY"), ("clustering", "CLUSTERING")):
            client.embed(["a", "b"], target=TARGET, input_type=given)
            body = transport.requests[-1].json
            assert [r["taskType"] for r in body["requests"]] == [wire, wire]
        # A name outside Gemini's TaskType enum is refused by the (fake) server, typed.
        with pytest.raises(ai.AllTargetsFailedError) as info:
            client.embed(["a"], route=ai.Route(TARGET, retry=FAST), input_type="bogus")
    error = last_error(info.value)
    assert error.type_name == "ProviderError" and error.http_status == 400
    assert "TaskType" in error.detail


def test_gemini_embedding_2_task_type_is_sent_with_a_warning() -> None:
    transport = FakeTransport("gemini", lambda request: Script())
    with ai.Client([gemini(transport=transport)]) as client:
        result = client.embed(["a b"], target="gemini:gemini-embedding-2", input_type="query")
        plain = client.embed(["a b"], target="gemini:gemini-embedding-2")
    assert transport.requests[0].json["requests"][0]["taskType"] == "RETRIEVAL_QUERY"
    assert any("prefix of the text" in w for w in result.warnings)
    assert not plain.warnings and "taskType" not in transport.requests[1].json["requests"][0]


@pytest.mark.loopback
def test_errors_are_typed() -> None:
    key = Fault("status", status=400, message="API key not valid.", code="API_KEY_INVALID")
    scripts = [
        Script(fault=key),
        Script(fault=Fault("status", status=429, message="quota", retry_after=7)),
        Script(fault=Fault("status", status=404, message="models/nope is not found")),
        Script(fault=Fault("status", status=503, message="overloaded")),
        Script(fault=Fault("malformed")),
        Script(fault=Fault("disconnect", at=0, partial_bytes=10)),
    ]
    with FakeServer("gemini", scripts) as srv:
        route = ai.Route(TARGET, retry=NO_RETRY)
        errors = embed_errors(gemini(srv.base_url), len(scripts), ["a", "b"], route)
        srv.assert_all_used()
    found = [(error.type_name, error.http_status) for error in errors]
    assert found == [
        ("AuthenticationError", 400),
        ("RateLimitError", 429),
        ("ModelNotFoundError", 404),
        ("OverloadedError", 503),
        ("ProtocolError", None),
        ("StreamError", None),
    ]


@pytest.mark.loopback
def test_the_fake_refuses_what_gemini_refuses_and_the_adapter_never_sends_it() -> None:
    transport = FakeTransport("gemini", lambda request: Script())
    with ai.Client([gemini(transport=transport)]) as client:
        client.embed(["x"] * 101, target=TARGET, batch_size=101)  # capped at 100 a batch
    assert [len(r.json["requests"]) for r in transport.requests] == [100, 1]

    def entry(**extra: Any) -> dict[str, Any]:
        return {"model": f"models/{MODEL}", "content": {"parts": [{"text": "a"}]}, **extra}

    refused = [
        ({"requests": [entry()] * 101}, "at most 100 requests can be in one batch"),
        ({"requests": [entry(model="models/other")]}, "not the model of the URL"),
        ({"requests": [entry(taskType="NOPE")]}, "TaskType"),
        ({"requests": [entry(outputDimensionality=-1)]}, "output_dimensionality"),
        ({"requests": [entry(colour="red")]}, 'Unknown name "colour"'),
        ({"requests": []}, "requests"),
        ({"requests": [{"model": f"models/{MODEL}"}]}, "content.parts"),
    ]
    with (
        FakeServer("gemini", lambda request: Script()) as srv,
        httpx.Client(base_url=srv.base_url) as http,
    ):
        url = f"/models/{MODEL}:batchEmbedContents"
        for body, words in refused:
            answer = http.post(url, json=body)
            assert answer.status_code == 400, body
            error = answer.json()["error"]
            assert error["status"] == "INVALID_ARGUMENT" and error["code"] == 400
            assert words in error["message"], (words, error)
        fine = http.post(url, json={"requests": [entry(outputDimensionality=0)]})
    assert len(fine.json()["embeddings"][0]["values"]) == 256  # 0 is proto3's unset


def _mock(answer: Any) -> ai.ProviderSettings:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=answer(json.loads(request.content)))

    return gemini(transport=httpx.MockTransport(handler))


def test_malformed_answers_are_protocol_errors_and_usage_may_be_unknown() -> None:
    def rows(body: dict[str, Any]) -> list[dict[str, Any]]:
        return [{"values": [1.0, 2.0]} for _ in body["requests"]]

    with ai.Client([_mock(lambda body: {"embeddings": rows(body)})]) as client:
        plain = client.embed(["a", "b"], target=TARGET)
    assert plain.usage.input_tokens is None and plain.usage.total_tokens is None
    assert plain.vectors == (f32([1.0, 2.0]), f32([1.0, 2.0]))
    cases: list[tuple[Any, str]] = [
        (lambda body: {"embeddings": rows(body)[:1]}, "ProtocolError"),  # too few
        (lambda body: {"embeddings": [{"values": "x"}, {"values": [1.0]}]}, "ProtocolError"),
        (lambda body: {"embeddings": [{}, {}]}, "ProtocolError"),  # no values
        (lambda body: {"embedding": {"values": [1.0]}}, "ProtocolError"),  # the single shape
        (
            lambda body: {"embeddings": rows(body), "usageMetadata": {"promptTokenCount": "2"}},
            "ProtocolError",
        ),
        (lambda body: [], "ProtocolError"),
        (
            lambda body: {
                "error": {"code": 429, "message": "slow down", "status": "RESOURCE_EXHAUSTED"}
            },
            "RateLimitError",
        ),
    ]
    for answer, kind in cases:
        with ai.Client([_mock(answer)]) as client:
            with pytest.raises(ai.AllTargetsFailedError) as info:
                client.embed(
                    ["a", "b"], route=ai.Route(TARGET, retry=ai.RetryPolicy(max_retries=0))
                )
        assert last_error(info.value).type_name == kind, answer


genai = pytest.importorskip("google.genai")


@pytest.mark.loopback
def test_google_genai_sdk_sends_and_reads_what_anyinfer_does() -> None:
    from google.genai import types

    texts = ["the quick brown fox", "jumps over", "the lazy dog"]
    with FakeServer("gemini", lambda request: Script()) as srv:
        root = srv.base_url.removesuffix("/v1beta")
        sdk = genai.Client(
            api_key="AIza-test", http_options=types.HttpOptions(base_url=root, api_version="v1beta")
        )
        answer = sdk.models.embed_content(
            model=MODEL,
            contents=texts,
            config=types.EmbedContentConfig(task_type="RETRIEVAL_QUERY", output_dimensionality=12),
        )
        with ai.Client([gemini(srv.base_url)]) as client:
            ours = client.embed(texts, target=TARGET, dimensions=12, input_type="query")
        sdk_sent, our_sent = srv.requests[0], srv.requests[1]
    assert sdk_sent.path == our_sent.path
    for entry in sdk_sent.json["requests"]:
        assert entry["content"].pop("role") == "user"  # google-genai adds it; it is optional
    assert sdk_sent.json == our_sent.json
    assert answer.embeddings is not None
    assert tuple(f32(e.values or []) for e in answer.embeddings) == ours.vectors
    assert answer.usage_metadata is not None
    assert answer.usage_metadata.prompt_token_count == ours.usage.input_tokens
