"""The Vertex AI adapters: routing per location, Google Cloud credentials, body shapes, errors.

Credentials go through google-auth's real code: a service-account key file made here
(a throwaway RSA key) whose `token_uri` points at a token endpoint on 127.0.0.1. The
endpoint checks the signed JWT assertion google-auth sends, counts exchanges and answers
like Google's (`access_token`, `expires_in`, `token_type`). Generation requests go
through the `vertex-gemini` and `vertex-anthropic` fake-server dialects.
"""

from __future__ import annotations

import asyncio
import base64
import json
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import httpx
import pytest
from helpers import NO_RETRY, QuietHandler, http_server, run

import anyinfer as ai
from anyinfer._client.instance import instance_config
from anyinfer._extras import missing_hint
from anyinfer._providers.vertex import (
    VERTEX_ANTHROPIC_VERSION,
    VertexAnthropicAdapter,
    VertexGeminiAdapter,
    vertex_base_url,
)
from anyinfer.fakeservers import FakeTransport, Script, ScriptUsage, Text, get_dialect

cryptography = pytest.importorskip("cryptography")
from cryptography.hazmat.primitives import hashes, serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import padding, rsa  # noqa: E402

CLOUD_ENVS = (
    "GOOGLE_CLOUD_PROJECT",
    "ANTHROPIC_VERTEX_PROJECT_ID",
    "GOOGLE_CLOUD_LOCATION",
    "CLOUD_ML_REGION",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "ANYINFER_VERTEX_GEMINI_PROJECT",
    "ANYINFER_VERTEX_GEMINI_LOCATION",
    "ANYINFER_VERTEX_GEMINI_API_KEY",
    "ANYINFER_VERTEX_ANTHROPIC_PROJECT",
    "ANYINFER_VERTEX_ANTHROPIC_LOCATION",
    "ANYINFER_VERTEX_ANTHROPIC_API_KEY",
    "ANYINFER_VERTEX_GEMINI_BASE_URL",
    "ANYINFER_VERTEX_ANTHROPIC_BASE_URL",
)


@pytest.fixture(autouse=True)
def _clean_cloud_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test states the Google Cloud environment it needs."""
    for name in CLOUD_ENVS:
        monkeypatch.delenv(name, raising=False)


def _script(text: str = "hi") -> Script:
    return Script(pieces=(Text(text),), usage=ScriptUsage(input_tokens=3, output_tokens=1))


class Recording(httpx.AsyncBaseTransport):
    """Records each request (URL, headers, JSON body), then lets a fake server answer."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner = inner
        self.seen: list[tuple[httpx.URL, httpx.Headers, Any]] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = await request.aread()
        self.seen.append((request.url, request.headers, json.loads(body) if body else None))
        return await self.inner.handle_async_request(request)


def _recording(dialect: str) -> Recording:
    return Recording(FakeTransport(dialect, lambda _request: _script()))


async def _generate(settings: ai.ProviderSettings, model: str, *, stream: bool = False) -> str:
    async with ai.AsyncClient([settings]) as client:
        route = ai.Route(f"{settings.instance_id}:{model}", retry=NO_RETRY)
        if not stream:
            return (await client.generate("hello", route=route)).text
        async with client.stream("hello", route=route) as s:
            async for _ in s:
                pass
            return s.result.text


# --- endpoints ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("location", "host"),
    [
        ("us-central1", "us-central1-aiplatform.googleapis.com"),
        ("europe-west4", "europe-west4-aiplatform.googleapis.com"),
        ("global", "aiplatform.googleapis.com"),
        ("us", "aiplatform.us.rep.googleapis.com"),
        ("eu", "aiplatform.eu.rep.googleapis.com"),
    ],
)
def test_gemini_url_per_location(location: str, host: str) -> None:
    t = _recording("vertex-gemini")
    options = {"project": "proj-1", "location": location, "access_token": "ya29.static-token"}
    s = ai.ProviderSettings("vertex-gemini", transport=t, options=options)
    assert run(_generate(s, "gemini-2.5-flash")) == "hi"
    assert run(_generate(s, "gemini-2.5-flash", stream=True)) == "hi"
    root = f"https://{host}/v1/projects/proj-1/locations/{location}/publishers/google/models"
    (whole, _, _), (streamed, headers, _) = t.seen
    assert str(whole) == f"{root}/gemini-2.5-flash:generateContent"
    assert str(streamed) == f"{root}/gemini-2.5-flash:streamGenerateContent?alt=sse"
    assert headers["authorization"] == "Bearer ya29.static-token"
    assert "x-goog-api-key" not in headers


@pytest.mark.parametrize("location", ["us-east5", "global", "eu"])
def test_anthropic_url_per_location(location: str) -> None:
    t = _recording("vertex-anthropic")
    options = {"project": "proj-2", "location": location, "access_token": "ya29.static-token"}
    s = ai.ProviderSettings("vertex-claude", transport=t, options=options)
    assert run(_generate(s, "claude-sonnet-4-5@20250929")) == "hi"
    assert run(_generate(s, "claude-sonnet-4-5@20250929", stream=True)) == "hi"
    base = vertex_base_url(location)
    root = f"{base}/projects/proj-2/locations/{location}/publishers/anthropic/models"
    (whole, headers, _), (streamed, _, _) = t.seen
    assert str(whole) == f"{root}/claude-sonnet-4-5@20250929:rawPredict"
    assert str(streamed) == f"{root}/claude-sonnet-4-5@20250929:streamRawPredict"
    assert headers["authorization"] == "Bearer ya29.static-token"
    assert "x-api-key" not in headers and "anthropic-version" not in headers


def test_api_version_swaps_the_version() -> None:
    t = _recording("vertex-gemini")
    s = ai.ProviderSettings(
        "vertex",
        transport=t,
        api_version="v1beta1",
        options={"project": "p", "location": "global", "access_token": "ya29.tok"},
    )
    run(_generate(s, "gemini-3-flash-preview"))
    assert str(t.seen[0][0]) == (
        "https://aiplatform.googleapis.com/v1beta1/projects/p/locations/global/"
        "publishers/google/models/gemini-3-flash-preview:generateContent"
    )


def test_project_and_location_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "env-project")
    monkeypatch.setenv("CLOUD_ML_REGION", "us-east5")
    t = _recording("vertex-anthropic")
    s = ai.ProviderSettings("vertex-anthropic", transport=t, options={"access_token": "ya29.t"})
    run(_generate(s, "claude-haiku-4-5"))
    assert str(t.seen[-1][0]).startswith(
        "https://us-east5-aiplatform.googleapis.com/v1/projects/env-project/locations/us-east5/"
    )
    # GOOGLE_CLOUD_LOCATION comes before CLOUD_ML_REGION; the instance's own variables
    # before both; options before everything.
    monkeypatch.setenv("GOOGLE_CLOUD_LOCATION", "europe-west1")
    run(_generate(s, "claude-haiku-4-5"))
    assert "/projects/env-project/locations/europe-west1/" in str(t.seen[-1][0])
    monkeypatch.setenv("ANYINFER_VERTEX_ANTHROPIC_PROJECT", "mine")
    monkeypatch.setenv("ANYINFER_VERTEX_ANTHROPIC_LOCATION", "asia-east1")
    run(_generate(s, "claude-haiku-4-5"))
    assert str(t.seen[-1][0]).startswith(
        "https://asia-east1-aiplatform.googleapis.com/v1/projects/mine/locations/asia-east1/"
    )
    opts = {"access_token": "ya29.t", "project": "opt", "location": "global"}
    run(_generate(ai.ProviderSettings("vertex-anthropic", transport=t, options=opts), "m"))
    assert "aiplatform.googleapis.com/v1/projects/opt/locations/global/" in str(t.seen[-1][0])


def test_anthropic_vertex_project_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_VERTEX_PROJECT_ID", "claude-project")
    t = _recording("vertex-anthropic")
    s = ai.ProviderSettings("vertex-anthropic", transport=t, options={"access_token": "ya29.t"})
    run(_generate(s, "claude-opus-4-1"))
    assert "/projects/claude-project/locations/global/" in str(t.seen[0][0])
    # Gemini does not read the Anthropic SDK's variable.
    g = ai.ProviderSettings("vertex-gemini", transport=t, options={"access_token": "ya29.t"})
    with pytest.raises(ai.AllTargetsFailedError) as info:
        run(_generate(g, "gemini-2.5-pro"))
    error = info.value.attempts[-1].error
    assert error is not None and error.type_name == "ConfigError"
    assert (
        "GOOGLE_CLOUD_PROJECT" in error.detail and "ANYINFER_VERTEX_GEMINI_PROJECT" in error.detail
    )


def test_instance_config_reports_the_derived_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOOGLE_CLOUD_LOCATION", "us-central1")
    config = instance_config(ai.ProviderSettings("vertex-gemini"), VertexGeminiAdapter)
    assert config.base_url == "https://us-central1-aiplatform.googleapis.com/v1"
    assert config.base_url_source == "default" and config.locality == "remote"
    env = {"ANYINFER_VERTEX_ANTHROPIC_BASE_URL": "http://127.0.0.1:9/v1"}
    local = instance_config(
        ai.ProviderSettings("vertex-anthropic"), VertexAnthropicAdapter, environ=env
    )
    assert local.base_url == "http://127.0.0.1:9/v1" and local.is_local


def test_express_mode_uses_the_global_host_and_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOOGLE_CLOUD_LOCATION", "us-central1")  # express mode ignores it
    t = _recording("vertex-gemini")
    s = ai.ProviderSettings("google-vertex", transport=t, api_key="AQ.express-key-123")
    run(_generate(s, "gemini-2.5-flash", stream=True))
    url, headers, _ = t.seen[0]
    assert str(url) == (
        "https://aiplatform.googleapis.com/v1/publishers/google/models/"
        "gemini-2.5-flash:streamGenerateContent?alt=sse"
    )
    assert headers["x-goog-api-key"] == "AQ.express-key-123"
    assert "authorization" not in headers
    # With a project, the key goes to the project's path (a standard Google Cloud API key),
    # at the location's host.
    keyed = ai.ProviderSettings(
        "vertex", transport=t, api_key="AQ.express-key-123", options={"project": "p"}
    )
    run(_generate(keyed, "gemini-2.5-flash"))
    assert str(t.seen[-1][0]).startswith(
        "https://us-central1-aiplatform.googleapis.com/v1/projects/p/locations/us-central1/"
    )


def test_a_gateway_base_url_naming_the_location_and_resource_names() -> None:
    t = _recording("vertex-gemini")
    base = "https://gateway.example/acct/google-vertex-ai/v1/projects/gw/locations/us-central1"
    s = ai.ProviderSettings(
        "vertex-gemini", transport=t, base_url=base, options={"access_token": "ya29.t"}
    )
    run(_generate(s, "gemini-2.5-flash"))
    assert str(t.seen[0][0]) == f"{base}/publishers/google/models/gemini-2.5-flash:generateContent"
    own = ai.ProviderSettings(
        "vertex-gemini",
        transport=t,
        options={"project": "p", "location": "us-central1", "access_token": "ya29.t"},
    )
    run(_generate(own, "publishers/google/models/gemini-2.0-flash-001"))
    assert str(t.seen[-1][0]).endswith(
        "/v1/projects/p/locations/us-central1/publishers/google/models/gemini-2.0-flash-001:generateContent"
    )


def test_missing_project_is_a_config_error_before_sending() -> None:
    t = _recording("vertex-anthropic")
    s = ai.ProviderSettings("vertex-anthropic", transport=t, options={"access_token": "ya29.t"})
    with pytest.raises(ai.AllTargetsFailedError) as info:
        run(_generate(s, "claude-haiku-4-5"))
    error = info.value.attempts[-1].error
    assert error is not None and error.type_name == "ConfigError"
    assert "ANTHROPIC_VERTEX_PROJECT_ID" in error.detail
    assert t.seen == []


# --- request bodies -----------------------------------------------------------------------


def test_raw_predict_bodies_have_no_model_and_the_vertex_version() -> None:
    t = _recording("vertex-anthropic")
    options = {"project": "p", "location": "us-east5", "access_token": "ya29.t"}
    s = ai.ProviderSettings("vertex-anthropic", transport=t, options=options)
    run(_generate(s, "claude-sonnet-4-5"))
    run(_generate(s, "claude-sonnet-4-5", stream=True))
    whole, streamed = t.seen[0][2], t.seen[1][2]
    for body in (whole, streamed):
        assert "model" not in body
        assert body["anthropic_version"] == VERTEX_ANTHROPIC_VERSION == "vertex-2023-10-16"
        assert body["messages"] == [{"role": "user", "content": "hello"}]
        assert body["max_tokens"] == 4096
    assert "stream" not in whole
    assert streamed["stream"] is True
    # The fake refuses the body the plain Anthropic adapter would send there.
    fault = get_dialect("vertex-anthropic").request_fault(
        "POST", t.seen[0][0].path, {**whole, "model": "claude-sonnet-4-5"}
    )
    assert fault is not None and fault.status == 400


def test_provider_options_override_the_anthropic_version() -> None:
    t = _recording("vertex-anthropic")
    s = ai.ProviderSettings(
        "vertex-anthropic", transport=t, options={"project": "p", "access_token": "ya29.t"}
    )

    async def call() -> str:
        async with ai.AsyncClient([s]) as client:
            result = await client.generate(
                "hi",
                route=ai.Route("vertex-anthropic:claude-x", retry=NO_RETRY),
                provider_options={"vertex-anthropic": {"anthropic_version": "2026-10-21"}},
            )
            return result.text

    assert run(call()) == "hi"
    assert t.seen[0][2]["anthropic_version"] == "2026-10-21"


def test_the_fake_vertex_refuses_a_body_naming_the_model() -> None:
    dialect = get_dialect("vertex-anthropic")
    path = "/v1/projects/p/locations/global/publishers/anthropic/models/claude-x:rawPredict"
    assert dialect.is_generation("POST", path)
    assert not dialect.is_generation("POST", "/v1/messages")
    ok = {"anthropic_version": "vertex-2023-10-16", "messages": [], "max_tokens": 5}
    assert dialect.request_fault("POST", path, ok) is None
    fault = dialect.request_fault("POST", path, {**ok, "model": "claude-x"})
    assert fault is not None and fault.status == 400 and "model" in fault.message
    missing = dialect.request_fault("POST", path, {"messages": [], "max_tokens": 5})
    assert missing is not None and "anthropic_version" in missing.message
    gemini = get_dialect("vertex-gemini")
    assert gemini.is_generation(
        "POST", "/v1/projects/p/locations/l/publishers/google/models/g:generateContent"
    )
    assert gemini.is_generation("POST", "/v1/publishers/google/models/g:streamGenerateContent")
    assert not gemini.is_generation("POST", "/v1beta/models/g:generateContent")


# --- errors -------------------------------------------------------------------------------


def _google_error(status: int, name: str, message: str) -> bytes:
    return json.dumps({"error": {"code": status, "message": message, "status": name}}).encode()


@pytest.mark.parametrize(
    ("status", "body", "expected"),
    [
        (
            429,
            _google_error(429, "RESOURCE_EXHAUSTED", "Quota exceeded for aiplatform"),
            ai.RateLimitError,
        ),
        (
            404,
            _google_error(404, "NOT_FOUND", "Publisher Model was not found"),
            ai.ModelNotFoundError,
        ),
        (403, _google_error(403, "PERMISSION_DENIED", "Permission denied"), ai.AuthenticationError),
        (
            401,
            _google_error(401, "UNAUTHENTICATED", "Request had invalid credentials"),
            ai.AuthenticationError,
        ),
        (
            529,
            json.dumps(
                {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
            ).encode(),
            ai.OverloadedError,
        ),
        (
            400,
            json.dumps(
                [
                    {
                        "error": {
                            "code": 400,
                            "message": "prompt is too long: 300000 tokens",
                            "status": "INVALID_ARGUMENT",
                        }
                    }
                ]
            ).encode(),
            ai.ContextWindowError,
        ),
    ],
)
@pytest.mark.parametrize("cls", [VertexAnthropicAdapter, VertexGeminiAdapter])
def test_vertex_error_bodies_are_typed(
    cls: type[VertexAnthropicAdapter | VertexGeminiAdapter],
    status: int,
    body: bytes,
    expected: type,
) -> None:
    if cls is VertexGeminiAdapter and b"overloaded_error" in body:
        expected = ai.OverloadedError  # the status decides
    adapter = cls(
        ai.ProviderSettings(cls.provider_id, options={"project": "p", "access_token": "ya29.t"})
    )
    error = adapter.error_from_response(status, httpx.Headers(), body)
    assert type(error) is expected, (error, body)
    assert error.http_status == status
    run(adapter.aclose())


# --- Google Cloud credentials through google-auth -------------------------------------------


def _b64url(data: bytes) -> bytes:
    return base64.urlsafe_b64encode(data).rstrip(b"=")


def _unb64url(data: str) -> bytes:
    return base64.urlsafe_b64decode(data + "=" * (-len(data) % 4))


class TokenEndpoint:
    """What the fake Google token endpoint saw and will answer."""

    def __init__(self, public_key: rsa.RSAPublicKey) -> None:
        self.public_key = public_key
        self.lock = threading.Lock()
        self.exchanges: list[dict[str, Any]] = []
        self.delay_s = 0.0
        self.expires_in = 3600
        self.refuse = False
        self.url = ""

    def answer(self, form: dict[str, list[str]]) -> tuple[int, dict[str, Any]]:
        time.sleep(self.delay_s)
        if self.refuse:
            return 400, {"error": "invalid_grant", "error_description": "Invalid JWT Signature."}
        assert form["grant_type"] == ["urn:ietf:params:oauth:grant-type:jwt-bearer"]
        header, payload, signature = form["assertion"][0].split(".")
        self.public_key.verify(
            _unb64url(signature),
            f"{header}.{payload}".encode(),
            padding.PKCS1v15(),
            hashes.SHA256(),
        )
        claims = json.loads(_unb64url(payload))
        with self.lock:
            self.exchanges.append(claims)
            n = len(self.exchanges)
        return 200, {
            "access_token": f"ya29.fake-{n}",
            "expires_in": self.expires_in,
            "token_type": "Bearer",
        }


@pytest.fixture
def token_endpoint(tmp_path: Path) -> Iterator[tuple[TokenEndpoint, Path]]:
    """A service-account key file whose `token_uri` is a token endpoint on 127.0.0.1."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    endpoint = TokenEndpoint(key.public_key())

    class Handler(QuietHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("content-length", "0"))
            form = parse_qs(self.rfile.read(length).decode())
            status, payload = endpoint.answer(form)
            self.reply(status, json.dumps(payload).encode(), "application/json")

    with http_server(Handler) as root:
        endpoint.url = f"{root}/token"
        pem = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ).decode()
        info = {
            "type": "service_account",
            "project_id": "sa-project",
            "private_key_id": "0123456789abcdef",
            "private_key": pem,
            "client_email": "anyinfer-test@sa-project.iam.gserviceaccount.com",
            "client_id": "1234567890",
            "token_uri": endpoint.url,
        }
        path = tmp_path / "service-account.json"
        path.write_text(json.dumps(info), "utf-8")
        yield endpoint, path


def test_service_account_token_is_fetched_once_for_concurrent_requests(
    token_endpoint: tuple[TokenEndpoint, Path],
) -> None:
    endpoint, key_file = token_endpoint
    endpoint.delay_s = 0.6  # the exchange is slow: every request arrives while it runs
    t = _recording("vertex-gemini")
    s = ai.ProviderSettings(
        "vertex-gemini",
        transport=t,
        options={"service_account_file": str(key_file), "location": "us-central1"},
    )

    async def main() -> tuple[list[str], float]:
        gaps: list[float] = []
        done = asyncio.Event()

        async def ticker() -> None:
            last = time.monotonic()
            while not done.is_set():
                await asyncio.sleep(0.02)
                now = time.monotonic()
                gaps.append(now - last)
                last = now

        async with ai.AsyncClient([s]) as client:
            tick = asyncio.create_task(ticker())
            results = await asyncio.gather(
                *(
                    client.generate(
                        f"q{i}", route=ai.Route("vertex-gemini:gemini-2.5-flash", retry=NO_RETRY)
                    )
                    for i in range(20)
                )
            )
            done.set()
            await tick
            again = await client.generate(
                "later", route=ai.Route("vertex-gemini:gemini-2.5-flash", retry=NO_RETRY)
            )
        return [r.text for r in [*results, again]], max(gaps)

    texts, worst_gap = run(main())
    assert texts == ["hi"] * 21
    assert len(endpoint.exchanges) == 1  # one exchange served all 21 requests
    claims = endpoint.exchanges[0]
    assert claims["iss"] == "anyinfer-test@sa-project.iam.gserviceaccount.com"
    assert claims["scope"] == "https://www.googleapis.com/auth/cloud-platform"
    assert len(t.seen) == 21
    assert {headers["authorization"] for _, headers, _ in t.seen} == {"Bearer ya29.fake-1"}
    # The project comes from the key file when nothing else names one.
    assert all("/projects/sa-project/locations/us-central1/" in str(url) for url, _, _ in t.seen)
    # The exchange ran in a worker thread: the event loop kept ticking meanwhile.
    assert worst_gap < 0.45, worst_gap


def test_a_token_near_its_expiry_is_refreshed(token_endpoint: tuple[TokenEndpoint, Path]) -> None:
    endpoint, key_file = token_endpoint
    endpoint.expires_in = 120  # inside the refresh margin: each request needs a new one
    t = _recording("vertex-anthropic")
    s = ai.ProviderSettings(
        "vertex-anthropic", transport=t, options={"service_account_file": str(key_file)}
    )

    async def main() -> None:
        async with ai.AsyncClient([s]) as client:
            for _ in range(3):
                await client.generate(
                    "x", route=ai.Route("vertex-anthropic:claude-haiku-4-5", retry=NO_RETRY)
                )

    run(main())
    assert len(endpoint.exchanges) == 3
    assert [h["authorization"] for _, h, _ in t.seen] == [
        "Bearer ya29.fake-1",
        "Bearer ya29.fake-2",
        "Bearer ya29.fake-3",
    ]


def test_application_default_credentials(
    token_endpoint: tuple[TokenEndpoint, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    endpoint, key_file = token_endpoint
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(key_file))
    t = _recording("vertex-gemini")
    s = ai.ProviderSettings("vertex-gemini", transport=t)  # nothing configured: ADC
    assert run(_generate(s, "gemini-2.5-flash")) == "hi"
    url, headers, _ = t.seen[0]
    assert headers["authorization"] == "Bearer ya29.fake-1"
    assert str(url).startswith(
        "https://aiplatform.googleapis.com/v1/projects/sa-project/locations/global/"
    )
    assert len(endpoint.exchanges) == 1


def test_a_credentials_object_is_used_and_refreshed(
    token_endpoint: tuple[TokenEndpoint, Path],
) -> None:
    from google.oauth2 import service_account

    _endpoint, key_file = token_endpoint
    creds = service_account.Credentials.from_service_account_file(
        str(key_file), scopes=["https://www.googleapis.com/auth/cloud-platform"]
    )
    t = _recording("vertex-gemini")
    s = ai.ProviderSettings(
        "vertex-gemini", transport=t, options={"credentials": creds, "project": "p"}
    )
    run(_generate(s, "gemini-2.5-flash"))
    assert t.seen[0][1]["authorization"] == "Bearer ya29.fake-1"
    assert creds.token == "ya29.fake-1"


def test_refused_and_missing_credentials_are_authentication_errors(
    token_endpoint: tuple[TokenEndpoint, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    endpoint, key_file = token_endpoint
    endpoint.refuse = True
    t = _recording("vertex-gemini")
    s = ai.ProviderSettings(
        "vertex-gemini", transport=t, options={"service_account_file": str(key_file)}
    )
    with pytest.raises(ai.AllTargetsFailedError) as info:
        run(_generate(s, "gemini-2.5-flash"))
    error = info.value.attempts[-1].error
    assert error is not None and error.type_name == "AuthenticationError"
    assert "invalid_grant" in error.detail
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "absent.json"))
    adc = ai.ProviderSettings("vertex-gemini", transport=t, options={"project": "p"})
    with pytest.raises(ai.AllTargetsFailedError) as info:
        run(_generate(adc, "gemini-2.5-flash"))
    error = info.value.attempts[-1].error
    assert error is not None and error.type_name == "AuthenticationError"
    assert "no Google Cloud credentials" in error.detail
    assert t.seen == []  # no generation request went out without a token


def test_a_bad_service_account_file_is_a_config_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", "utf-8")
    with pytest.raises(ai.ConfigError, match="cannot read the service-account file"):
        VertexGeminiAdapter(
            ai.ProviderSettings("vertex-gemini", options={"service_account_file": str(bad)})
        )


def test_the_token_is_redacted(token_endpoint: tuple[TokenEndpoint, Path]) -> None:
    _endpoint, key_file = token_endpoint

    def echo(request: httpx.Request) -> httpx.Response:
        said = request.headers["authorization"]
        return httpx.Response(
            401,
            json={"error": {"code": 401, "message": f"bad {said}", "status": "UNAUTHENTICATED"}},
        )

    s = ai.ProviderSettings(
        "vertex-gemini",
        transport=httpx.MockTransport(echo),
        options={"service_account_file": str(key_file)},
    )
    with pytest.raises(ai.AllTargetsFailedError) as info:
        run(_generate(s, "gemini-2.5-flash"))
    error = info.value.attempts[-1].error
    assert error is not None and error.type_name == "AuthenticationError"
    assert "ya29.fake-1" not in error.detail and "ya29.fake-1" not in str(info.value)


# --- the optional dependency -------------------------------------------------------------------


@pytest.mark.parametrize(
    "options",
    [{"service_account_file": "/nonexistent.json"}, {"project": "p"}],
    ids=["service-account", "adc"],
)
def test_without_google_auth_the_hint_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, options: dict[str, Any]
) -> None:
    monkeypatch.setitem(sys.modules, "google.auth", None)
    with pytest.raises(ai.ConfigError) as info:
        VertexAnthropicAdapter(ai.ProviderSettings("vertex-anthropic", options=options))
    hint = missing_hint("vertex-anthropic with Google Cloud credentials", ["google"])
    assert str(info.value) == hint
    assert "pip install 'anyinfer-kit[vertex]'" in hint and "\n" not in hint


def test_a_static_token_needs_no_google_auth(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "google.auth", None)
    t = _recording("vertex-anthropic")
    s = ai.ProviderSettings(
        "vertex-anthropic", transport=t, api_key="ya29.from-gcloud", options={"project": "p"}
    )
    assert run(_generate(s, "claude-haiku-4-5")) == "hi"
    assert t.seen[0][1]["authorization"] == "Bearer ya29.from-gcloud"


def test_aliases_and_profiles() -> None:
    registry = ai.default_registry()
    assert registry.adapter_class("vertex") is VertexGeminiAdapter
    assert registry.adapter_class("google-vertex") is VertexGeminiAdapter
    assert registry.adapter_class("vertex-claude") is VertexAnthropicAdapter
    assert VertexGeminiAdapter.profile.conformance_dialect == "vertex-gemini"
    assert VertexAnthropicAdapter.profile.conformance_dialect == "vertex-anthropic"
    usage = VertexAnthropicAdapter.profile.usage
    assert usage is not None and usage.input_includes_cache is False


def test_the_claude_fake_keeps_the_messages_api_content_checks() -> None:
    """Vertex's own body rules first, then Anthropic's (no audio block, PDFs only)."""
    from anyinfer.fakeservers import get_dialect

    dialect = get_dialect("vertex-anthropic")
    path = "/v1/projects/p/locations/us-east5/publishers/anthropic/models/claude:rawPredict"
    audio = {"type": "audio", "source": {"type": "base64", "data": "AAAA"}}
    body = {
        "anthropic_version": "vertex-2023-10-16",
        "max_tokens": 5,
        "messages": [{"role": "user", "content": [audio]}],
    }
    fault = dialect.request_fault("POST", path, body)
    assert fault is not None and fault.status == 400
    assert dialect.request_fault("POST", path, {**body, "model": "claude"}) is not None
    fine = {**body, "messages": [{"role": "user", "content": "hi"}]}
    assert dialect.request_fault("POST", path, fine) is None
