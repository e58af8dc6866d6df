"""`rerank()` against a server written here from Cohere's documented `/v2/rerank` shape.

Like `test_independent_server.py` for embeddings: a few lines of `http.server`, not the
fake servers, holding to what Cohere's API reference documents for rerank v2. The
request is `{"model", "query", "documents": [str], "top_n"}`; the answer is `{"id",
"results": [{"index", "relevance_score"}], "meta": {"api_version": {"version": "2"},
"billed_units": {"search_units"}}}`, results best first; errors are `{"message"}` with
the HTTP status. The score here is how many of the query's words a document contains,
so the expected ranking is known.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from helpers import failed_as

import anyinfer as ai

pytestmark = pytest.mark.loopback


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.bodies: list[dict[str, Any]] = []
        self.plan: list[tuple[int, bytes]] = []
        self.lock = threading.Lock()


def _score(query: str, document: str) -> float:
    words = set(document.lower().split())
    return sum(w in words for w in query.lower().split()) / 8


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
        with self.server.lock:
            self.server.bodies.append(body)
            forced = self.server.plan.pop(0) if self.server.plan else None
        if forced is None and self.path == "/v2/rerank":
            ranked = sorted(
                range(len(body["documents"])),
                key=lambda i: (-_score(body["query"], body["documents"][i]), i),
            )
            top = body.get("top_n")
            results = [
                {"index": i, "relevance_score": _score(body["query"], body["documents"][i])}
                for i in (ranked if top is None else ranked[:top])
            ]
            status, payload = (
                200,
                json.dumps(
                    {
                        "id": "r-1",
                        "results": results,
                        "meta": {
                            "api_version": {"version": "2"},
                            "billed_units": {"search_units": 1},
                        },
                    }
                ).encode(),
            )
        else:
            status, payload = forced or (404, b'{"message": "not found"}')
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


@pytest.fixture
def server() -> Iterator[_Server]:
    srv = _Server()
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        yield srv
    finally:
        srv.shutdown()
        srv.server_close()


def _client(srv: _Server) -> ai.Client:
    url = f"http://127.0.0.1:{srv.server_address[1]}"
    return ai.Client(
        [ai.ProviderSettings("cohere", api_key="co-test", base_url=url)], use_default_catalog=False
    )


DOCS = [
    "the cat sat on the mat",
    "a dog in the fog",
    "cats and dogs and a mat",
    "nothing here",
    "the mat the cat the dog",
]


def test_the_ranking_is_the_servers_with_indices_into_the_callers_list(server: _Server) -> None:
    with _client(server) as client:
        ranked = client.rerank("cat dog mat", DOCS, target="cohere:rerank-v3.5", top_n=3)
    assert [r.index for r in ranked] == [4, 0, 1]  # 1 and 2 tie; the server keeps list order
    assert [r.document for r in ranked] == [DOCS[4], DOCS[0], DOCS[1]]
    assert [r.score for r in ranked] == [3 / 8, 2 / 8, 1 / 8]
    assert ranked.search_units == 1
    assert server.bodies[0]["documents"] == DOCS and server.bodies[0]["top_n"] == 3


def test_a_long_list_is_split_and_merged_by_score(server: _Server) -> None:
    docs = [f"doc {i} " + ("cat " if i % 5 == 0 else "") for i in range(12)]
    with _client(server) as client:
        ranked = client.rerank("cat", docs, target="cohere:rerank-v3.5", batch_size=5)
    assert sorted(len(b["documents"]) for b in server.bodies) == [2, 5, 5]
    assert [r.index for r in ranked][:3] == [0, 5, 10]
    assert sorted(r.index for r in ranked) == list(range(12))
    assert ranked.search_units == 3


@pytest.mark.parametrize(
    ("status", "payload", "error"),
    [
        (401, b'{"message": "invalid api token"}', ai.AuthenticationError),
        (429, b'{"message": "trial key rate limit"}', ai.RateLimitError),
        (200, b'{"id": "r", "results": [{"index": 9, "relevance_score": 0.5}]}', ai.ProtocolError),
        (200, b'{"id": "r", "results": [{"index": 0', ai.ProtocolError),
    ],
)
def test_failures_are_typed_errors(
    server: _Server, status: int, payload: bytes, error: type[Exception]
) -> None:
    server.plan.append((status, payload))
    route = ai.Route("cohere:rerank-v3.5", retry=ai.RetryPolicy(max_retries=0))
    with _client(server) as client, pytest.raises(ai.AnyInferError) as caught:
        client.rerank("cat", DOCS, route=route)
    assert failed_as(caught.value) == error.__name__
