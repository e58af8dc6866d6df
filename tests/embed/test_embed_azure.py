"""`embed()` on Azure OpenAI: a deployment's `/embeddings` (and the v1 route) over loopback.

Served by the `azure-openai` fake dialect, which answers OpenAI's embeddings shapes at
Azure's routes and refuses in Azure's error envelope. The `openai` SDK's `AzureOpenAI`
client, served by the same fake, is the oracle for the route, the query and the body.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from helpers import NO_RETRY, embed_errors, f32, last_error

import anyinfer as ai
from anyinfer.fakeservers import FakeServer, FakeTransport, Fault, Script
from anyinfer.fakeservers.dialects._embeddings import fake_vector, token_count

DEPLOYMENT = "my-embedding-deployment"
TARGET = f"azure-foundry:{DEPLOYMENT}"
TEXTS = ["first document about rivers", "second about mountains", "third"]


def azure(base_url: str | None = None, **kwargs: Any) -> ai.ProviderSettings:
    """Azure settings; a loopback base URL is no Azure OpenAI host, so the route is named."""
    kwargs.setdefault("base_url", base_url)
    kwargs.setdefault("options", {"api": "openai-deployments"})
    return ai.ProviderSettings("azure-foundry", api_key="azure-key", **kwargs)


class Seen:
    """A script source that keeps the `httpx.Request` of every request it answers."""

    def __init__(self, script: Script | None = None) -> None:
        self.requests: list[httpx.Request] = []
        self.script = script or Script()

    def __call__(self, request: httpx.Request) -> Script:
        self.requests.append(request)
        return self.script


@pytest.mark.loopback
@pytest.mark.parametrize("encoding", ["base64", "float"])
def test_deployment_route_query_key_body_and_vectors(encoding: str) -> None:
    seen = Seen()
    with FakeServer("azure-openai", seen) as srv:
        settings = azure(f"{srv.base_url}/openai")  # a root given with its /openai tail
        with ai.Client([settings]) as client:
            result = client.embed(TEXTS, target=TARGET, dimensions=24, encoding=encoding)
        body = srv.requests[0].json
    sent = seen.requests[0]
    assert sent.url.path == f"/openai/deployments/{DEPLOYMENT}/embeddings"
    assert sent.url.params["api-version"] == "2024-10-21"
    assert sent.headers["api-key"] == "azure-key" and "authorization" not in sent.headers
    assert body == {
        "model": DEPLOYMENT,
        "input": TEXTS,
        "encoding_format": encoding,
        "dimensions": 24,
    }
    assert result.vectors == tuple(f32(fake_vector(t, 24)) for t in TEXTS)
    tokens = sum(token_count(t) for t in TEXTS)
    assert result.usage.input_tokens == tokens == result.usage.total_tokens
    assert not result.warnings


@pytest.mark.loopback
def test_v1_route_bearer_auth_and_api_version_setting() -> None:
    seen = Seen()
    with FakeServer("azure-openai", seen) as srv:
        v1 = azure(srv.base_url, options={"api": "openai-v1", "auth": "bearer"})  # v1 route
        pinned = azure(srv.base_url, alias="pinned", api_version="2025-04-01-preview")
        with ai.Client([v1, pinned]) as client:
            client.embed(TEXTS[:1], target=TARGET)
            client.embed(TEXTS[:1], target=f"pinned:{DEPLOYMENT}")
    first, second = seen.requests
    assert first.url.path == "/openai/v1/embeddings" and "api-version" not in first.url.params
    assert first.headers["authorization"] == "Bearer azure-key" and "api-key" not in first.headers
    assert second.url.params["api-version"] == "2025-04-01-preview"


def test_batches_of_at_most_2048() -> None:
    transport = FakeTransport("azure-openai", lambda request: Script())
    texts = [f"t{i}" for i in range(2049)]
    with ai.Client([azure("https://r.openai.azure.com", transport=transport)]) as client:
        result = client.embed(texts, target=TARGET, concurrency=1)
    assert [len(r.json["input"]) for r in transport.requests] == [2048, 1]
    assert result.vectors[2048] == f32(fake_vector("t2048"))


@pytest.mark.loopback
def test_the_model_inference_route_embeds_with_its_input_type() -> None:
    seen = Seen()
    with FakeServer("azure-openai", seen) as srv:
        settings = azure(srv.base_url, options={"api": "model-inference"})
        with ai.Client([settings]) as client:
            result = client.embed(TEXTS, target="azure-foundry:cohere-embed-v3", input_type="query")
            extra = client.embed(
                TEXTS[:1],
                target="azure-foundry:cohere-embed-v3",
                provider_options={"azure-foundry": {"truncate": "END"}},
            )
        bodies = [r.json for r in srv.requests]
    first, second = seen.requests
    assert first.url.path == "/models/embeddings"
    assert first.url.params["api-version"] == "2024-05-01-preview"
    assert bodies[0] == {
        "input": TEXTS,
        "model": "cohere-embed-v3",
        "encoding_format": "base64",
        "input_type": "query",
    }
    assert "extra-parameters" not in first.headers
    assert second.headers["extra-parameters"] == "pass-through"
    assert bodies[1]["truncate"] == "END"
    assert result.vectors == tuple(f32(fake_vector(t)) for t in TEXTS)
    assert not result.warnings and not extra.warnings


@pytest.mark.loopback
def test_errors_are_typed_from_azure_envelopes() -> None:
    scripts = [
        Script(fault=Fault("status", status=401, message="Access denied", code="401")),
        Script(fault=Fault("status", status=429, message="Rate limit", retry_after=1.5)),
        Script(
            fault=Fault("status", status=404, message="no deployment", code="DeploymentNotFound")
        ),
        Script(fault=Fault("status", status=500, message="internal")),
        Script(fault=Fault("malformed")),
    ]
    with FakeServer("azure-openai", scripts) as srv:
        errors = embed_errors(
            azure(srv.base_url), len(scripts), ["a"], ai.Route(TARGET, retry=NO_RETRY)
        )
        srv.assert_all_used()
    found = [(error.type_name, error.http_status, error.retry_after) for error in errors]
    assert found == [
        ("AuthenticationError", 401, None),
        ("RateLimitError", 429, 1.5),
        ("ModelNotFoundError", 404, None),
        ("ProviderError", 500, None),
        ("ProtocolError", None, None),
    ]


@pytest.mark.loopback
def test_the_fake_refuses_an_empty_input_in_azures_envelope() -> None:
    with FakeServer("azure-openai", lambda request: Script()) as srv:
        with ai.Client([azure(srv.base_url)]) as client:
            with pytest.raises(ai.AllTargetsFailedError) as info:
                client.embed(["ok", ""], route=ai.Route(TARGET, retry=NO_RETRY))
        with httpx.Client(base_url=srv.base_url) as http:
            answer = http.post(
                f"/openai/deployments/{DEPLOYMENT}/embeddings",
                params={"api-version": "2024-10-21"},
                json={"input": [""]},
            )
    error = last_error(info.value)
    assert error.http_status == 400
    assert answer.status_code == 400 and set(answer.json()) == {"error"}
    assert {"code", "message"} <= set(answer.json()["error"])


openai = pytest.importorskip("openai")


@pytest.mark.loopback
def test_openai_sdk_azure_client_sends_and_reads_what_anyinfer_does() -> None:
    seen = Seen()
    with FakeServer("azure-openai", seen) as srv:
        sdk = openai.AzureOpenAI(
            azure_endpoint=srv.base_url,
            api_key="azure-key",
            api_version="2024-10-21",
            max_retries=0,
        )
        with sdk:
            answer = sdk.embeddings.create(model=DEPLOYMENT, input=TEXTS, dimensions=12)
        with ai.Client([azure(srv.base_url)]) as client:
            ours = client.embed(TEXTS, target=TARGET, dimensions=12)
        sdk_body, our_body = srv.requests[0].json, srv.requests[1].json
    sdk_sent, our_sent = seen.requests
    assert sdk_sent.url.path == our_sent.url.path
    assert sdk_sent.url.params["api-version"] == our_sent.url.params["api-version"]
    assert sdk_sent.headers["api-key"] == our_sent.headers["api-key"]
    assert sdk_body == our_body
    assert tuple(f32(d.embedding) for d in answer.data) == ours.vectors
    assert answer.usage.prompt_tokens == ours.usage.input_tokens
