"""A minimal loopback HTTP/1.1 server for the benchmarks, serving pre-encoded bytes.

It speaks just enough HTTP/1.1 for httpx: keep-alive connections, request bodies with
`Content-Length`, and responses framed either with `Transfer-Encoding: chunked` (one
HTTP chunk per server-sent event, as an OpenAI-style server flushes them) or with
`Content-Length`. Every response body is rendered once, on first use, and cached, so
serving a request costs the server almost nothing: the benchmark measures the client.

Routes (the chunk count rides in the path so that the same base URL works for
`anyinfer` and for raw httpx; one route per built-in wire protocol)::

    POST /n/<N>/v1/chat/completions   OpenAI Chat: SSE of N chunks, or chat.completion JSON
    POST /n/<N>/v1/responses          OpenAI Responses: SSE events, or a Response JSON
    POST /n/<N>/v1/messages           Anthropic Messages: SSE events, or a Message JSON
    POST /n/<N>/v1beta/models/<m>:streamGenerateContent?alt=sse   Gemini SSE chunks
    POST /n/<N>/v1beta/models/<m>:generateContent                 Gemini whole JSON
    POST /n/<N>/api/chat              Ollama: NDJSON lines, or one `done: true` object

OpenAI Chat is rendered here by hand (as before). The other protocols are rendered by
the conformance harness's dialects (`anyinfer.fakeservers.dialects`), the same real-shaped bytes
the conformance suite serves: a `Script` of `N` text pieces (the same pieces as OpenAI
Chat's) with usage placed where that provider puts it.

Run it as a script: it prints ``PORT <number>`` on stdout once listening, and exits when
its stdin closes (so it never outlives the benchmark that started it)::

    python benchmarks/_server.py [--port 0] [--framing chunked|length]

`bench.py` imports `expected_text` and `PROMPT_TOKENS` from here so
that both sides check what they parsed against the same source.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import threading
from pathlib import Path
from typing import Any

MODEL = "gpt-4o-mini-2024-07-18"
COMPLETION_ID = "chatcmpl-B9mQz3xTkV8aLrP2sN7wYc4HdE1fJ"
CREATED = 1_730_000_000
FINGERPRINT = "fp_0ba0d124f1"
PROMPT_TOKENS = 23

# A few tokens per delta, as real streams carry; a couple of non-ASCII pieces keep the
# UTF-8 path honest.
_PIECES = (
    " The",
    " quick brown",
    " fox",
    " jumps over",
    " the lazy",
    " dog,",
    " and then",
    " naïvely",
    " asks",
    " why",
    " — again",
    " and",
    " again.",
    "\n\n",
    "Streaming",
    " responses",
    " arrive",
    " token by",
    " token",
    ".",
)

_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def pieces(n: int) -> list[str]:
    """The `n` content deltas of a response."""
    return [_PIECES[i % len(_PIECES)] for i in range(n)]


def expected_text(n: int) -> str:
    """The full answer text of an `n`-chunk response."""
    return "".join(pieces(n))


def _usage(n: int) -> dict[str, object]:
    completion = 2 * n
    return {
        "prompt_tokens": PROMPT_TOKENS,
        "completion_tokens": completion,
        "total_tokens": PROMPT_TOKENS + completion,
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": 0,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }


def _chunk(choices: list[dict[str, object]], usage: object = None) -> dict[str, object]:
    return {
        "id": COMPLETION_ID,
        "object": "chat.completion.chunk",
        "created": CREATED,
        "model": MODEL,
        "service_tier": "default",
        "system_fingerprint": FINGERPRINT,
        "choices": choices,
        "usage": usage,
    }


def stream_events(n: int) -> list[bytes]:
    """The SSE events of an `n`-chunk stream, each a complete `data: ...\\n\\n` block.

    The shape follows OpenAI with `stream_options.include_usage`: a role chunk with the
    first content, content chunks with `"usage": null`, a finish chunk with an empty
    delta, a usage-only chunk with `"choices": []`, then `data: [DONE]`.
    """
    events: list[bytes] = []
    for i, piece in enumerate(pieces(n)):
        delta: dict[str, object] = {"content": piece}
        if i == 0:
            delta = {"role": "assistant", "content": piece, "refusal": None}
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": None}
        events.append(b"data: " + _dumps(_chunk([choice])).encode() + b"\n\n")
    finish = {"index": 0, "delta": {}, "logprobs": None, "finish_reason": "stop"}
    events.append(b"data: " + _dumps(_chunk([finish])).encode() + b"\n\n")
    events.append(b"data: " + _dumps(_chunk([], _usage(n))).encode() + b"\n\n")
    events.append(b"data: [DONE]\n\n")
    return events


def render_stream(n: int, framing: str) -> bytes:
    """A whole HTTP response (head and body) for an `n`-chunk SSE stream."""
    events = stream_events(n)
    head = [
        b"HTTP/1.1 200 OK",
        b"content-type: text/event-stream; charset=utf-8",
        b"cache-control: no-cache",
        b"x-request-id: req_bench",
    ]
    if framing == "chunked":
        head.append(b"transfer-encoding: chunked")
        body = b"".join(b"%x\r\n%s\r\n" % (len(e), e) for e in events) + b"0\r\n\r\n"
    else:
        body = b"".join(events)
        head.append(b"content-length: %d" % len(body))
    return b"\r\n".join(head) + b"\r\n\r\n" + body


def completion_json(n: int) -> bytes:
    """A non-streaming `chat.completion` whose answer is the `n`-chunk text."""
    doc = {
        "id": COMPLETION_ID,
        "object": "chat.completion",
        "created": CREATED,
        "model": MODEL,
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": expected_text(n),
                    "refusal": None,
                    "annotations": [],
                },
                "logprobs": None,
                "finish_reason": "stop",
            }
        ],
        "usage": _usage(n),
        "service_tier": "default",
        "system_fingerprint": FINGERPRINT,
    }
    return _dumps(doc).encode()


def render_completion(n: int) -> bytes:
    """A whole HTTP response (head and body) for a non-streaming completion."""
    body = completion_json(n)
    head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n"
    return head % len(body) + body


# --- the other protocols, rendered by the conformance harness's dialects ------------

PROTOCOL_DIALECTS = {
    "openai-responses": "openai-responses",
    "anthropic": "anthropic-messages",
    "gemini": "gemini",
    "ollama": "ollama-chat",
}
"""Benchmark protocol name -> `fakeservers` dialect name."""

PROTOCOL_MODELS = {
    "openai-responses": MODEL,
    "anthropic": "claude-haiku-4-5-20251001",
    "gemini": "gemini-2.5-flash",
    "ollama": "qwen3:8b",
}
"""The model name each protocol's answer reports (its `model` or `modelVersion`): one of
that provider's own, as real recordings carry, so no answer names another's model."""


def _dialect(protocol: str) -> Any:
    try:
        import anyinfer.fakeservers.dialects as dialects
    except ImportError:  # run from a checkout without the harness installed
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
        import anyinfer.fakeservers.dialects as dialects
    return dialects.get_dialect(PROTOCOL_DIALECTS[protocol])


def dialect_response(
    protocol: str, n: int, streamed: bool
) -> tuple[list[tuple[str, str]], list[bytes]]:
    """The headers and frames a protocol's dialect renders for an `n`-piece answer.

    Usage is `PROMPT_TOKENS` in and `2 * n` out, placed the way the provider places it
    (the dialect profile's first, most usual placement: Gemini's running counts on every
    chunk, Anthropic's provisional count in `message_start`, ...).
    """
    from anyinfer.fakeservers._script import Script, ScriptUsage, Text

    dialect = _dialect(protocol)
    script = Script(
        pieces=tuple(Text(p) for p in pieces(n)),
        usage=ScriptUsage(input_tokens=PROMPT_TOKENS, output_tokens=2 * n),
        usage_placement=dialect.profile.usage_placements[0],
        model=PROTOCOL_MODELS[protocol],
    )
    rendered = dialect.render(script, stream=streamed)
    frames = [f.data for f in rendered.frames if f.data]  # Gemini's end "frame" is b""
    return list(rendered.headers), frames


def render_dialect(protocol: str, n: int, streamed: bool, framing: str) -> bytes:
    """A whole HTTP response (head and body) for one protocol, streamed or not."""
    headers, frames = dialect_response(protocol, n, streamed)
    head = [b"HTTP/1.1 200 OK"] + [f"{k}: {v}".encode() for k, v in headers]
    if streamed and framing == "chunked":
        head.append(b"transfer-encoding: chunked")
        body = b"".join(b"%x\r\n%s\r\n" % (len(f), f) for f in frames) + b"0\r\n\r\n"
    else:
        body = b"".join(frames)
        head.append(b"content-length: %d" % len(body))
    return b"\r\n".join(head) + b"\r\n\r\n" + body


def route(rest: bytes, body: bytes) -> tuple[str, bool] | None:
    """The protocol and streamed-ness a request asks for, from its path after `/n/<N>`."""
    if rest.startswith(b"/v1beta/models/"):
        if rest.endswith(b":streamGenerateContent"):
            return "gemini", True
        if rest.endswith(b":generateContent"):
            return "gemini", False
        return None
    protocol = {
        b"/v1/chat/completions": "openai-chat",
        b"/v1/responses": "openai-responses",
        b"/v1/messages": "anthropic",
        b"/api/chat": "ollama",
    }.get(rest)
    if protocol is None:
        return None
    stream = json.loads(body).get("stream")
    # Ollama streams unless told not to; the others only when asked.
    return protocol, (stream is not False) if protocol == "ollama" else (stream is True)


_NOT_FOUND = (
    b"HTTP/1.1 404 Not Found\r\ncontent-type: text/plain\r\ncontent-length: 9\r\n\r\nnot found"
)
_BAD = b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"


class _Responses:
    """Rendered responses, cached by (protocol, chunk count, streamed)."""

    def __init__(self, framing: str) -> None:
        self.framing = framing
        self._cache: dict[tuple[str, int, bool], bytes] = {}

    def get(self, path: bytes, body: bytes) -> bytes:
        # /n/<N><rest>, rest being the protocol's own path
        parts = path.split(b"?", 1)[0].split(b"/", 3)
        if len(parts) != 4 or parts[0] != b"" or parts[1] != b"n":
            return _NOT_FOUND
        try:
            n = int(parts[2])
            routed = route(b"/" + parts[3], body)
        except ValueError:
            return _BAD
        if routed is None:
            return _NOT_FOUND
        protocol, streamed = routed
        key = (protocol, n, streamed)
        response = self._cache.get(key)
        if response is None:
            if protocol != "openai-chat":
                response = render_dialect(protocol, n, streamed, self.framing)
            elif streamed:
                response = render_stream(n, self.framing)
            else:
                response = render_completion(n)
            self._cache[key] = response
        return response


class _Connection(asyncio.Protocol):
    """One keep-alive connection: parse requests as bytes arrive, answer each in turn."""

    def __init__(self, responses: _Responses) -> None:
        self._responses = responses
        self._buf = b""
        self._transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport

    def data_received(self, data: bytes) -> None:
        self._buf += data
        transport = self._transport
        assert transport is not None
        while True:
            end = self._buf.find(b"\r\n\r\n")
            if end < 0:
                return
            head = self._buf[:end].split(b"\r\n")
            length = 0
            close = False
            for line in head[1:]:
                name, _, value = line.partition(b":")
                name = name.strip().lower()
                if name == b"content-length":
                    length = int(value)
                elif name == b"connection":
                    close = value.strip().lower() == b"close"
                elif name == b"transfer-encoding":
                    transport.write(_BAD)
                    transport.close()
                    return
            start = end + 4
            if len(self._buf) < start + length:
                return
            body = self._buf[start : start + length]
            self._buf = self._buf[start + length :]
            try:
                _method, path, _version = head[0].split(b" ", 2)
            except ValueError:
                transport.write(_BAD)
                transport.close()
                return
            transport.write(self._responses.get(path, body))
            if close:
                transport.close()
                return


def _exit_when_stdin_closes() -> None:
    sys.stdin.buffer.read()
    os._exit(0)


async def _serve(port: int, framing: str) -> None:
    responses = _Responses(framing)
    loop = asyncio.get_running_loop()
    server = await loop.create_server(
        lambda: _Connection(responses), "127.0.0.1", port, backlog=1024
    )
    bound = server.sockets[0].getsockname()[1]
    print(f"PORT {bound}", flush=True)
    async with server:
        await server.serve_forever()


def main() -> None:
    """Run the server until stdin closes."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--port", type=int, default=0, help="port (0: pick a free one)")
    parser.add_argument("--framing", choices=("chunked", "length"), default="chunked")
    args = parser.parse_args()
    threading.Thread(target=_exit_when_stdin_closes, daemon=True).start()
    asyncio.run(_serve(args.port, args.framing))


if __name__ == "__main__":
    main()
