"""`embed()` on AWS Bedrock: InvokeModel (`POST /model/{modelId}/invoke`) over loopback.

Amazon Titan Text Embeddings take one text a request (a batch fans out), Cohere Embed up
to 96. Served by the `bedrock-converse` fake dialect's InvokeModel endpoint (each model's
body schema, refused in Bedrock's `ValidationException` words) over real loopback HTTP;
many-request cases over `FakeTransport`.
"""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from helpers import NO_RETRY, embed_errors, f32, last_error

import anyinfer as ai
from anyinfer.fakeservers import FakeServer, FakeTransport, Fault, Script
from anyinfer.fakeservers.dialects._embeddings import fake_vector, token_count

pytest.importorskip("botocore")

TITAN = "amazon.titan-embed-text-v2:0"
COHERE_V3 = "cohere.embed-english-v3"
COHERE_V4 = "cohere.embed-v4:0"
TEXTS = ["rivers run to the sea", "mountains stand tall", "a short one"]


@pytest.fixture(autouse=True)
def no_aws_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in (
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
        "AWS_REGION",
        "AWS_DEFAULT_REGION",
        "AWS_BEARER_TOKEN_BEDROCK",
        "ANYINFER_BEDROCK_API_KEY",
        "ANYINFER_BEDROCK_BASE_URL",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def bedrock(base_url: str | None = None, **kwargs: Any) -> ai.ProviderSettings:
    kwargs.setdefault("api_key", "bedrock-api-key")
    options = {"region": "us-east-1", **kwargs.pop("options", {})}
    return ai.ProviderSettings("bedrock", base_url=base_url, options=options, **kwargs)


class Seen:
    """A script source keeping every `httpx.Request` it answers."""

    def __init__(self) -> None:
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> Script:
        self.requests.append(request)
        return Script()


@pytest.mark.loopback
def test_titan_fans_out_one_request_per_text_in_order() -> None:
    seen = Seen()
    with FakeServer("bedrock-converse", seen) as srv:
        with ai.Client([bedrock(srv.base_url)]) as client:
            result = client.embed(TEXTS, target=f"bedrock:{TITAN}", dimensions=512)
        bodies = sorted((r.json for r in srv.requests), key=lambda b: TEXTS.index(b["inputText"]))
    assert bodies == [{"inputText": t, "dimensions": 512} for t in TEXTS]
    for request in seen.requests:
        assert request.url.raw_path == b"/model/amazon.titan-embed-text-v2%3A0/invoke"
        assert request.headers["authorization"] == "Bearer bedrock-api-key"
        assert request.headers["accept"] == "application/json"
    assert result.vectors == tuple(f32(fake_vector(t, 512)) for t in TEXTS)
    tokens = sum(token_count(t) for t in TEXTS)
    assert result.usage.input_tokens == tokens == result.usage.total_tokens
    assert result.timing.phases["provider_latency_ms"] == 51.0 * len(TEXTS)
    assert len(result.batch_targets) == 1 and not result.warnings


def test_titan_batches_of_96_fan_out_and_input_type_is_a_warning() -> None:
    transport = FakeTransport("bedrock-converse", lambda request: Script())
    texts = [f"text number {i}" for i in range(100)]
    with ai.Client([bedrock(transport=transport)]) as client:
        result = client.embed(texts, target=f"bedrock:{TITAN}", input_type="query")
    assert len(transport.requests) == 100
    assert sorted(r.json["inputText"] for r in transport.requests) == sorted(texts)
    assert result.vectors == tuple(f32(fake_vector(t)) for t in texts)
    assert len(result.batch_targets) == 2  # 96 + 4
    assert any("input_type='query' was not sent" in w for w in result.warnings)


def test_a_failed_titan_request_fails_its_batch_with_a_typed_error() -> None:
    scripts = [Script(), Script(fault=Fault("status", status=429, message="Too many"))] * 2
    transport = FakeTransport("bedrock-converse", scripts)
    with ai.Client([bedrock(transport=transport)]) as client:
        with pytest.raises(ai.AllTargetsFailedError) as info:
            client.embed(["a", "b"], route=ai.Route(f"bedrock:{TITAN}", retry=NO_RETRY))
    error = last_error(info.value)
    assert error.type_name == "RateLimitError" and error.http_status == 429


@pytest.mark.loopback
def test_cohere_v3_batches_of_96_input_types_and_header_usage() -> None:
    texts = [f"Passage {i} about things" for i in range(200)]
    with FakeServer("bedrock-converse", lambda request: Script()) as srv:
        with ai.Client([bedrock(srv.base_url)]) as client:
            docs = client.embed(texts, target=f"bedrock:{COHERE_V3}", input_type="document")
            query = client.embed(
                "what about things?", target=f"bedrock:{COHERE_V3}", input_type="query"
            )
            own = client.embed(
                "label me", target=f"bedrock:{COHERE_V3}", input_type="classification"
            )
            default = client.embed("no type", target=f"bedrock:{COHERE_V3}")
        bodies = [r.json for r in srv.requests]
    assert sorted(len(b["texts"]) for b in bodies[:3]) == [8, 96, 96]
    assert {b["input_type"] for b in bodies[:3]} == {"search_document"}
    assert [b["input_type"] for b in bodies[3:]] == [
        "search_query",
        "classification",
        "search_document",
    ]
    assert set(bodies[3]) == {"texts", "input_type"}  # no output_dimension, no truncate
    assert docs.vectors == tuple(f32(fake_vector(t)) for t in texts)
    assert docs.usage.input_tokens == sum(token_count(t) for t in texts)
    assert query.usage.input_tokens == 3 and not query.warnings and not own.warnings
    assert any("'search_document' was sent" in w for w in default.warnings)


@pytest.mark.loopback
def test_cohere_v4_dimensions_and_by_type_answers_through_an_inference_profile() -> None:
    with FakeServer("bedrock-converse", lambda request: Script()) as srv:
        with ai.Client([bedrock(srv.base_url)]) as client:
            result = client.embed(
                TEXTS, target=f"bedrock:us.{COHERE_V4}", dimensions=256, input_type="query"
            )
        body, path = srv.requests[0].json, srv.requests[0].path
    assert path.endswith("/model/us.cohere.embed-v4%3A0/invoke") or path.endswith(
        "/model/us.cohere.embed-v4:0/invoke"
    )
    assert body == {"texts": TEXTS, "input_type": "search_query", "output_dimension": 256}
    assert result.dimensions == 256
    assert result.vectors == tuple(f32(fake_vector(t, 256)) for t in TEXTS)


def test_ids_without_their_model_need_the_embedding_family_option() -> None:
    arn = "arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/abc123"
    transport = FakeTransport("bedrock-converse", lambda request: Script())
    with ai.Client([bedrock(transport=transport)]) as client:
        with pytest.raises(ai.AllTargetsFailedError, match="embedding_family") as info:
            client.embed(["a"], route=ai.Route(f"bedrock:{arn}", retry=NO_RETRY))
        assert last_error(info.value).type_name == "ConfigError"
        with pytest.raises(ai.AllTargetsFailedError, match="embed"):
            client.embed(["a"], route=ai.Route("bedrock:amazon.nova-micro-v1:0", retry=NO_RETRY))
    assert transport.requests == []
    profile = FakeTransport("bedrock-converse", lambda request: Script())
    titan_profile = bedrock(transport=profile, options={"embedding_family": "titan"})
    with ai.Client([titan_profile]) as client:
        with pytest.raises(ai.AllTargetsFailedError):  # the fake knows no such profile
            client.embed(["a"], route=ai.Route(f"bedrock:{arn}", retry=NO_RETRY))
    assert profile.requests[0].json == {"inputText": "a"}  # sent as Titan's body
    wrong = bedrock(transport=profile, options={"embedding_family": "nova"})
    with ai.Client([wrong]) as client:
        with pytest.raises(ai.AllTargetsFailedError, match="'titan' or 'cohere'"):
            client.embed(["a"], route=ai.Route(f"bedrock:{arn}", retry=NO_RETRY))


@pytest.mark.loopback
def test_the_fake_refuses_what_the_schemas_refuse_in_bedrocks_words() -> None:
    with FakeServer("bedrock-converse", lambda request: Script()) as srv:
        with ai.Client([bedrock(srv.base_url)]) as client:
            with pytest.raises(ai.AllTargetsFailedError) as titan:
                client.embed(
                    ["a"], route=ai.Route(f"bedrock:{TITAN}", retry=NO_RETRY), dimensions=300
                )
            with pytest.raises(ai.AllTargetsFailedError) as v3:
                client.embed(
                    ["a"],
                    route=ai.Route(f"bedrock:{COHERE_V3}", retry=NO_RETRY),
                    dimensions=512,
                    input_type="query",
                )
        with httpx.Client(base_url=srv.base_url) as http:
            many = http.post(
                f"/model/{COHERE_V3}/invoke", json={"texts": ["x"] * 97, "input_type": "clustering"}
            )
            wrong = http.post(f"/model/{COHERE_V3}/invoke", json={"inputText": "x"})
    error = last_error(titan.value)
    assert (error.type_name, error.http_status) == ("ProviderError", 400)
    assert "#/dimensions: 300 is not a valid enum value" in error.detail
    assert "#: extraneous key [output_dimension] is not permitted" in last_error(v3.value).detail
    assert many.status_code == 400
    assert "ValidationException" in many.headers["x-amzn-errortype"]
    assert "expected maximum item count: 96, found: 97" in many.json()["message"]
    assert wrong.json()["message"] == (
        "Malformed input request: #: required key [texts] not found#: required key "
        "[input_type] not found#: extraneous key [inputText] is not permitted, please "
        "reformat your input and try again."
    )


@pytest.mark.loopback
def test_errors_are_typed() -> None:
    scripts = [
        Script(fault=Fault("status", status=403, message="not authorized")),
        Script(fault=Fault("status", status=429, message="Too many requests")),
        Script(fault=Fault("status", status=404, message="no such model")),
        Script(fault=Fault("status", status=503, message="unavailable")),
        Script(fault=Fault("status", status=500, message="internal")),
        Script(fault=Fault("malformed")),
    ]
    with FakeServer("bedrock-converse", scripts) as srv:
        route = ai.Route(f"bedrock:{COHERE_V3}", retry=NO_RETRY)
        errors = embed_errors(
            bedrock(srv.base_url), len(scripts), ["a", "b"], route, input_type="query"
        )
        srv.assert_all_used()
    found = [(error.type_name, error.http_status) for error in errors]
    assert found == [
        ("AuthenticationError", 403),
        ("RateLimitError", 429),
        ("ModelNotFoundError", 404),
        ("OverloadedError", 503),
        ("ProviderError", 500),
        ("ProtocolError", None),
    ]


def _mock(answer: Any, headers: dict[str, str] | None = None) -> ai.ProviderSettings:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=answer, headers=headers or {})

    return bedrock(transport=httpx.MockTransport(handler))


def test_malformed_answers_are_protocol_errors_and_usage_may_be_unknown() -> None:
    with ai.Client(
        [_mock({"embeddings": [[1.0, 2.0]], "response_type": "embeddings_floats"})]
    ) as c:
        plain = c.embed(["a"], target=f"bedrock:{COHERE_V3}", input_type="query")
    assert plain.usage.input_tokens is None and plain.vectors == (f32([1.0, 2.0]),)
    cases: list[tuple[Any, dict[str, str] | None, str, str]] = [
        ({"embeddings": [[1.0]]}, None, COHERE_V3, "ProtocolError"),  # one for two
        ({"embeddings": {"int8": [[1], [2]]}}, None, COHERE_V4, "ProtocolError"),
        ({"embeddings": "x"}, None, COHERE_V3, "ProtocolError"),
        (
            {"embeddings": [[1.0], [2.0]]},
            {"x-amzn-bedrock-input-token-count": "many"},
            COHERE_V3,
            "ProtocolError",
        ),
        ({"embedding": "nope", "inputTextTokenCount": 1}, None, TITAN, "ProtocolError"),
        ({"embedding": [1.0], "inputTextTokenCount": "1"}, None, TITAN, "ProtocolError"),
        ([1, 2], None, TITAN, "ProtocolError"),
    ]
    for answer, headers, model, kind in cases:
        with ai.Client([_mock(answer, headers)]) as client:
            with pytest.raises(ai.AllTargetsFailedError) as info:
                client.embed(
                    ["a", "b"],
                    route=ai.Route(f"bedrock:{model}", retry=NO_RETRY),
                    input_type="query",
                )
        assert last_error(info.value).type_name == kind, answer


def test_invoke_requests_are_signed_with_sigv4(monkeypatch: pytest.MonkeyPatch) -> None:
    import botocore.auth

    now = datetime.datetime(2025, 1, 2, 3, 4, 5)
    monkeypatch.setattr(botocore.auth, "get_current_datetime", lambda *a, **k: now)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        text = __import__("json").loads(request.content)["inputText"]
        return httpx.Response(200, json={"embedding": [0.5], "inputTextTokenCount": len(text)})

    settings = ai.ProviderSettings(
        "bedrock", options={"region": "eu-west-1"}, transport=httpx.MockTransport(handler)
    )
    with ai.Client([settings]) as client:
        result = client.embed(["one", "three"], target=f"bedrock:{TITAN}")
    assert result.usage.input_tokens == 8
    signatures = set()
    for request in seen:
        assert request.url.host == "bedrock-runtime.eu-west-1.amazonaws.com"
        assert request.headers["x-amz-date"] == "20250102T030405Z"
        auth = request.headers["authorization"]
        assert auth.startswith(
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20250102/eu-west-1/bedrock/aws4_request, "
            "SignedHeaders=content-type;host;x-amz-date, Signature="
        )
        signatures.add(auth)
    assert len(signatures) == 2  # each body signed on its own


@pytest.mark.loopback
@pytest.mark.parametrize("model", [TITAN, f"us.{COHERE_V4}"])
def test_botocore_invoke_model_takes_the_same_path_and_reads_the_same_answer(model: str) -> None:
    import json

    import botocore.session

    seen = Seen()
    with FakeServer("bedrock-converse", seen) as srv:
        sdk = botocore.session.get_session().create_client(
            "bedrock-runtime",
            region_name="us-east-1",
            endpoint_url=srv.base_url,
            aws_access_key_id="AKIDEXAMPLE",
            aws_secret_access_key="secret",
        )
        body = (
            {"inputText": "a b"}
            if "titan" in model
            else {"texts": ["a b"], "input_type": "search_query"}
        )
        answer = sdk.invoke_model(
            modelId=model,
            body=json.dumps(body),
            contentType="application/json",
            accept="application/json",
        )
        payload = json.loads(answer["body"].read())
        with ai.Client([bedrock(srv.base_url)]) as client:
            ours = client.embed(["a b"], target=f"bedrock:{model}", input_type="query")
        sdk_body, our_body = srv.requests[0].json, srv.requests[1].json
    sdk_sent, our_sent = seen.requests
    assert sdk_sent.url.raw_path == our_sent.url.raw_path
    assert sdk_sent.headers["accept"] == our_sent.headers["accept"] == "application/json"
    assert sdk_body == our_body
    vector = payload["embedding"] if "titan" in model else payload["embeddings"]["float"][0]
    assert ours.vectors == (f32(vector),)
    tokens = answer["ResponseMetadata"]["HTTPHeaders"]["x-amzn-bedrock-input-token-count"]
    assert ours.usage.input_tokens == int(tokens)
