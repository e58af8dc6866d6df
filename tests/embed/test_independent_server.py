"""`embed()` against a server written here from OpenAI's documented `/embeddings` shape.

The fake servers (`anyinfer.fakeservers`) and the adapters were written by the same
team, so a shared misreading would pass both. This server is a few lines of the
standard library's `http.server`, holding to what OpenAI's API reference documents:
`{"object": "list", "data": [{"object": "embedding", "index", "embedding"}], "model",
"usage": {"prompt_tokens", "total_tokens"}}`, `encoding_format` `"float"` or
`"base64"` (little-endian float32), an error envelope `{"error": {"message", "type",
"code"}}`, and `Retry-After` on 429. It answers `data` in reverse index order, which the
API allows (the reference says `index` gives the position), so order must come from
`index`.
"""

from __future__ import annotations

import base64
import json
import struct
import threading
from collections.abc import Iterator
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from helpers import failed_as

import anyinfer as ai

pytestmark = pytest.mark.loopback

DIMS = 4


def _vector(text: str) -> list[float]:
    # Exactly representable in float32, so both encodings decode to these values.
    return [float(len(text)), float(ord(text[0])) if text else 0.0, 0.5, -0.25][:DIMS]


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.bodies: list[dict[str, Any]] = []
        self.plan: list[tuple[int, dict[str, str], bytes]] = []  # forced answers, in order
        self.lock = threading.Lock()


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        body = json.loads(self.rfile.read(length))
        with self.server.lock:
            self.server.bodies.append(body)
            forced = self.server.plan.pop(0) if self.server.plan else None
        if self.path != "/v1/embeddings":
            forced = (
                404,
                {},
                b'{"error": {"message": "not found", "type": "invalid_request_error"}}',
            )
        if forced is not None:
            status, headers, payload = forced
        else:
            status, headers, payload = 200, {}, self._answer(body)
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def _answer(self, body: dict[str, Any]) -> bytes:
        texts = [body["input"]] if isinstance(body["input"], str) else body["input"]
        data = []
        for index, text in enumerate(texts):
            vec = _vector(text)
            if body.get("encoding_format") == "base64":
                item: Any = base64.b64encode(struct.pack(f"<{len(vec)}f", *vec)).decode()
            else:
                item = vec
            data.append({"object": "embedding", "index": index, "embedding": item})
        data.reverse()
        tokens = sum(len(t.split()) or 1 for t in texts)
        return json.dumps(
            {
                "object": "list",
                "data": data,
                "model": body["model"],
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            }
        ).encode()


@pytest.fixture
def server() -> Iterator[_Server]:
    srv = _Server()
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    try:
        yield srv
    finally:
        srv.shutdown()
        srv.server_close()


def _client(srv: _Server, *instances: str) -> ai.Client:
    url = f"http://127.0.0.1:{srv.server_address[1]}/v1"
    settings = [ai.ProviderSettings("openai", api_key="sk-test", base_url=url)]
    settings += [
        ai.ProviderSettings("openai", alias=name, api_key="sk-test", base_url=url)
        for name in instances
    ]
    return ai.Client(settings, use_default_catalog=False)


TEXTS = [f"text number {i} " + "word " * (i % 3) for i in range(11)]


@pytest.mark.parametrize("encoding", ["base64", "float"])
def test_batches_come_back_in_input_order_with_usage_and_cost(
    server: _Server, encoding: str
) -> None:
    with _client(server) as client:
        result = client.embed(
            TEXTS,
            target="openai:text-embedding-3-small",
            batch_size=4,
            concurrency=2,
            encoding=encoding,  # type: ignore[arg-type]
        )
    assert [list(v) for v in result.vectors] == [_vector(t) for t in TEXTS]
    assert result.dimensions == DIMS
    sizes = sorted(len(b["input"]) for b in server.bodies)
    assert sizes == [3, 4, 4]
    assert all(b.get("encoding_format") == encoding for b in server.bodies)
    tokens = sum(len(t.split()) for t in TEXTS)
    assert result.usage.input_tokens == tokens
    price = client_price("text-embedding-3-small")
    assert result.cost_usd == price * tokens


def client_price(model: str) -> Decimal:
    with ai.Client(use_default_catalog=False) as client:
        found = client.pricing_table.lookup("openai", model)
    assert found is not None, f"no bundled price for {model}"
    return found.input


def test_a_route_across_models_is_refused_before_anything_is_sent(server: _Server) -> None:
    with _client(server) as client, pytest.raises(ai.ConfigError, match="not comparable"):
        client.embed(
            TEXTS, route=["openai:text-embedding-3-small", "openai:text-embedding-3-large"]
        )
    assert server.bodies == []


def test_a_rate_limit_is_retried_after_its_retry_after(server: _Server) -> None:
    server.plan.append(
        (
            429,
            {"Retry-After": "0"},
            b'{"error": {"message": "Rate limit reached", "type": "requests", '
            b'"code": "rate_limit_exceeded"}}',
        )
    )
    with _client(server) as client:
        result = client.embed(["one", "two"], target="openai:text-embedding-3-small")
    assert [a.outcome for a in result.attempts] == ["retried", "ok"]
    assert result.attempts[0].error is not None
    assert result.attempts[0].error.type_name == "RateLimitError"
    assert [list(v) for v in result.vectors] == [_vector("one"), _vector("two")]


def test_a_server_error_falls_back_to_the_same_model_elsewhere(server: _Server) -> None:
    envelope = b'{"error": {"message": "The server had an error", "type": "server_error"}}'
    server.plan.append((500, {}, envelope))
    route = ai.Route(
        ["openai:text-embedding-3-small", "backup:text-embedding-3-small"],
        retry=ai.RetryPolicy(max_retries=0),
    )
    with _client(server, "backup") as client:
        result = client.embed(["one"], route=route)
    assert [(a.target.provider, a.outcome) for a in result.attempts] == [
        ("openai", "failed"),
        ("backup", "ok"),
    ]
    assert result.batch_targets[0].provider == "backup"


@pytest.mark.parametrize(
    ("status", "payload", "error"),
    [
        (
            401,
            b'{"error": {"message": "Incorrect API key", "type": "invalid_request_error", '
            b'"code": "invalid_api_key"}}',
            ai.AuthenticationError,
        ),
        (
            400,
            b'{"error": {"message": "bad input", "type": "invalid_request_error"}}',
            ai.ProviderError,
        ),
        (200, b'{"object": "list", "data": [{"index": 0', ai.ProtocolError),
        (200, b'{"object": "list", "data": [], "model": "m", "usage": {}}', ai.ProtocolError),
    ],
)
def test_failures_are_typed_errors(
    server: _Server, status: int, payload: bytes, error: type[Exception]
) -> None:
    server.plan.append((status, {}, payload))
    route = ai.Route("openai:text-embedding-3-small", retry=ai.RetryPolicy(max_retries=0))
    with _client(server) as client, pytest.raises(ai.AnyInferError) as caught:
        client.embed(["one"], route=route)
    assert failed_as(caught.value) == error.__name__
