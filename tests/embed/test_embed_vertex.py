"""`embed()` on Vertex AI (`vertex-gemini`): `:predict` and `:embedContent` over loopback.

Vertex embeds through its own endpoints, not the Gemini API's: `:predict` with
`instances` (all of a batch's texts, or one a request for `gemini-embedding-001`) and,
for `gemini-embedding-2*`, `:embedContent` with one content a request. Served by the
`vertex-gemini` fake dialect; the `google-genai` SDK in Vertex mode, served by the same
fake, is the oracle for the bodies and the answers' reading.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from helpers import NO_RETRY, embed_errors, f32, last_error

import anyinfer as ai
from anyinfer.fakeservers import FakeServer, FakeTransport, Fault, Script
from anyinfer.fakeservers.dialects._embeddings import fake_vector, token_count

TEXTS = ["rivers run to the sea", "mountains stand tall", "a short one"]
ROOT = "/v1/projects/anyinfer-conformance/locations/us-central1/publishers/google/models"


def vertex(base_url: str | None = None, **kwargs: Any) -> ai.ProviderSettings:
    options = {"access_token": "ya29.test", "project": "anyinfer-conformance"}
    options["location"] = "us-central1"
    return ai.ProviderSettings("vertex-gemini", base_url=base_url, options=options, **kwargs)


@pytest.mark.loopback
def test_predict_sends_a_batch_in_one_request_with_task_type_and_dimensions() -> None:
    with FakeServer("vertex-gemini", lambda request: Script()) as srv:
        with ai.Client([vertex(srv.base_url)]) as client:
            result = client.embed(
                TEXTS,
                target="vertex-gemini:text-embedding-005",
                dimensions=32,
                input_type="document",
                provider_options={"vertex-gemini": {"parameters": {"autoTruncate": False}}},
            )
        (sent,) = srv.requests
    assert sent.path == f"{ROOT}/text-embedding-005:predict"
    assert sent.json == {
        "instances": [{"content": t, "task_type": "RETRIEVAL_DOCUMENT"} for t in TEXTS],
        "parameters": {"outputDimensionality": 32, "autoTruncate": False},
    }
    assert result.vectors == tuple(f32(fake_vector(t, 32)) for t in TEXTS)
    assert result.usage.input_tokens == sum(token_count(t) for t in TEXTS)
    assert not result.warnings


def test_batches_of_250_and_one_a_request_for_gemini_embedding_001() -> None:
    transport = FakeTransport("vertex-gemini", lambda request: Script())
    texts = [f"t {i}" for i in range(251)]
    with ai.Client([vertex(transport=transport)]) as client:
        many = client.embed(texts, target="vertex-gemini:text-embedding-005", concurrency=1)
        assert [len(r.json["instances"]) for r in transport.requests] == [250, 1]
        one_each = client.embed(TEXTS, target="vertex-gemini:gemini-embedding-001")
    assert [len(r.json["instances"]) for r in transport.requests[2:]] == [1, 1, 1]
    assert many.vectors[250] == f32(fake_vector("t 250"))
    assert one_each.vectors == tuple(f32(fake_vector(t)) for t in TEXTS)
    assert one_each.usage.input_tokens == sum(token_count(t) for t in TEXTS)


@pytest.mark.loopback
def test_gemini_embedding_2_uses_embed_content_one_text_a_request() -> None:
    with FakeServer("vertex-gemini", lambda request: Script()) as srv:
        with ai.Client([vertex(srv.base_url)]) as client:
            result = client.embed(
                TEXTS, target="vertex-gemini:gemini-embedding-2", dimensions=8, input_type="query"
            )
        bodies = [r.json for r in srv.requests]
        paths = {r.path for r in srv.requests}
    assert paths == {f"{ROOT}/gemini-embedding-2:embedContent"}
    assert sorted(bodies, key=lambda b: TEXTS.index(b["content"]["parts"][0]["text"])) == [
        {
            "content": {"parts": [{"text": t}]},
            "embedContentConfig": {"taskType": "RETRIEVAL_QUERY", "outputDimensionality": 8},
        }
        for t in TEXTS
    ]
    assert result.vectors == tuple(f32(fake_vector(t, 8)) for t in TEXTS)
    assert result.usage.input_tokens == sum(token_count(t) for t in TEXTS)
    assert any("prefix of the text" in w for w in result.warnings)


@pytest.mark.loopback
def test_errors_and_refusals_are_typed() -> None:
    scripts = [
        Script(
            fault=Fault("status", status=403, message="Permission denied", code="PERMISSION_DENIED")
        ),
        Script(fault=Fault("status", status=429, message="Quota exceeded", retry_after=3)),
        Script(fault=Fault("status", status=404, message="Publisher model not found")),
        Script(fault=Fault("status", status=503, message="unavailable")),
        Script(fault=Fault("malformed")),
    ]
    with FakeServer("vertex-gemini", scripts) as srv:
        route = ai.Route("vertex-gemini:text-embedding-005", retry=NO_RETRY)
        errors = embed_errors(vertex(srv.base_url), len(scripts), ["a"], route)
        srv.assert_all_used()
    found = [(error.type_name, error.http_status) for error in errors]
    with (
        FakeServer("vertex-gemini", lambda request: Script()) as srv,
        httpx.Client(base_url=srv.base_url) as http,
    ):
        batch = http.post(
            "/publishers/google/models/gemini-embedding-001:predict",
            json={"instances": [{"content": "a"}, {"content": "b"}]},
        )
        task = http.post(
            "/publishers/google/models/text-embedding-005:predict",
            json={"instances": [{"content": "a", "task_type": "NOPE"}]},
        )
    assert found == [
        ("AuthenticationError", 403),
        ("RateLimitError", 429),
        ("ModelNotFoundError", 404),
        ("OverloadedError", 503),
        ("ProtocolError", None),
    ]
    assert batch.status_code == task.status_code == 400
    assert batch.json()["error"]["message"] == (
        "Unable to submit request because batchSize must be 1 but the entered value was 2."
    )
    assert batch.json()["error"]["status"] == "INVALID_ARGUMENT"


def _mock(answer: Any) -> ai.ProviderSettings:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=answer)

    return vertex(transport=httpx.MockTransport(handler))


def test_malformed_answers_are_protocol_errors_and_usage_may_be_unknown() -> None:
    def prediction(values: Any, stats: Any = None) -> dict[str, Any]:
        emb: dict[str, Any] = {"values": values}
        if stats is not None:
            emb["statistics"] = stats
        return {"embeddings": emb}

    with ai.Client([_mock({"predictions": [prediction([1.0, 2.0])]})]) as client:
        plain = client.embed(["a"], target="vertex-gemini:text-embedding-005")
    assert plain.usage.input_tokens is None and plain.vectors == (f32([1.0, 2.0]),)
    with ai.Client([_mock({"predictions": [prediction([1.0], {"token_count": 3.0})]})]) as c:
        assert c.embed(["a"], target="vertex-gemini:text-embedding-005").usage.input_tokens == 3
    cases = [
        {"predictions": []},
        {"predictions": [prediction("x")]},
        {"predictions": [prediction([1.0], {"token_count": 2.5})]},
        {"predictions": [{"embedding": {"values": [1.0]}}]},
        {"embeddings": [{"values": [1.0]}]},
    ]
    for answer in cases:
        with ai.Client([_mock(answer)]) as client:
            with pytest.raises(ai.AllTargetsFailedError) as info:
                client.embed(
                    ["a"], route=ai.Route("vertex-gemini:text-embedding-005", retry=NO_RETRY)
                )
        assert last_error(info.value).type_name == "ProtocolError", answer


genai = pytest.importorskip("google.genai")


@pytest.mark.loopback
@pytest.mark.parametrize("model", ["text-embedding-005", "gemini-embedding-2"])
def test_google_genai_sdk_on_vertex_sends_and_reads_what_anyinfer_does(model: str) -> None:
    from google.genai import types
    from google.oauth2.credentials import Credentials

    texts = TEXTS if model == "text-embedding-005" else TEXTS[:1]  # embedContent: one
    with FakeServer("vertex-gemini", lambda request: Script()) as srv:
        sdk = genai.Client(
            vertexai=True,
            project="anyinfer-conformance",
            location="us-central1",
            credentials=Credentials("ya29.test"),
            http_options=types.HttpOptions(
                base_url=srv.base_url.split("/v1/")[0], api_version="v1"
            ),
        )
        config = types.EmbedContentConfig(task_type="RETRIEVAL_QUERY", output_dimensionality=12)
        answer = sdk.models.embed_content(model=model, contents=texts, config=config)
        with ai.Client([vertex(srv.base_url)]) as client:
            ours = client.embed(
                texts, target=f"vertex-gemini:{model}", dimensions=12, input_type="query"
            )
        sdk_sent, our_sent = srv.requests
    assert sdk_sent.path == our_sent.path
    sdk_body = sdk_sent.json
    if "content" in sdk_body:
        assert sdk_body["content"].pop("role") == "user"  # google-genai adds it; optional
    assert sdk_body == our_sent.json
    assert answer.embeddings is not None
    assert tuple(f32(e.values or []) for e in answer.embeddings) == ours.vectors
    if model == "text-embedding-005":
        counts = [e.statistics.token_count for e in answer.embeddings if e.statistics]
        assert sum(int(c or 0) for c in counts) == ours.usage.input_tokens
    else:
        assert answer.usage_metadata is not None
        assert answer.usage_metadata.prompt_token_count == ours.usage.input_tokens
