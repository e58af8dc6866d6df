"""The shared framing (`anyinfer._adapters.framing`) and the HTTP template's edges.

Linear work on huge frames (counted, not timed), the frame cap over real sockets for
each framing, deep JSON as a `ProtocolError` that routing falls back from, redirects
as typed errors, and capped exception messages.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest

import anyinfer as ai
from anyinfer._adapters.framing import (
    DEFAULT_MAX_FRAME_BYTES,
    EventFramer,
    JSONArrayFramer,
    LineFramer,
    NDJSONFramer,
    SSEEvent,
    SSEFramer,
    decode_json,
)
from anyinfer._errors import MESSAGE_MAX_CHARS
from anyinfer._providers.openai_chat import OpenAIChatAdapter
from anyinfer._request import GenerationRequest
from anyinfer._stream.parts import END, Batches, Part, TextPart, WarningPart

NO_RETRY = ai.RetryPolicy(max_retries=0)
MB = 1_000_000
READ = 64 * 1024


def reads(body: bytes, size: int = READ) -> Iterator[bytes]:
    for start in range(0, len(body), size):
        yield body[start : start + size]


# --- linear work ---------------------------------------------------------------------


def test_a_16_mb_sse_line_is_buffered_once_not_once_per_read() -> None:
    # 16 MB in 64 KiB reads is 245 reads: re-joining the buffer on every read (the old
    # framer) copies ~2 GB; a linear framer copies each byte into the buffer once.
    payload = json.dumps({"choices": [{"delta": {"content": "x" * (16 * MB)}}]}).encode()
    body = b"data: " + payload + b"\n\ndata: [DONE]\n\n"
    framer = SSEFramer("p", DEFAULT_MAX_FRAME_BYTES + MB)
    events = [event for chunk in reads(body) for event in framer.feed(chunk)]
    assert [e.data for e in events] == [payload, b"[DONE]"]
    assert framer.lines.bytes_buffered <= len(body)
    assert len(decode_json(events[0].data, "p")["choices"][0]["delta"]["content"]) == 16 * MB


def test_ndjson_and_json_array_framers_are_linear_too() -> None:
    line = json.dumps({"message": {"content": "y" * (8 * MB)}}).encode()
    nd = NDJSONFramer("p", DEFAULT_MAX_FRAME_BYTES)
    got = [obj for chunk in reads(line + b"\r\n" + line) for obj in nd.feed(chunk)]
    got += nd.close()
    assert got == [line, line]
    assert nd.lines.bytes_buffered <= 2 * len(line)
    array = JSONArrayFramer("p", DEFAULT_MAX_FRAME_BYTES)
    body = b"[" + line + b",\r\n" + line + b"]"
    assert [doc for chunk in reads(body) for doc in array.feed(chunk)] == [line, line]
    assert array.closed and array.bytes_buffered <= len(body)


@pytest.mark.parametrize("split", [1, 2, 3, 7])
def test_line_ends_split_across_reads_end_lines_at_once(split: int) -> None:
    body = b"a\rb\r\nc\n\r\nd\r"
    framer = LineFramer("p", 100)
    lines = [line for chunk in reads(body, split) for line in framer.feed(chunk)]
    assert lines == [b"a", b"b", b"c", b"", b"d"]
    assert framer.rest() == b""


def test_the_cap_is_checked_while_a_line_grows_not_when_it_ends() -> None:
    framer = LineFramer("p", 10)
    assert framer.feed(b"0123456789") == []
    with pytest.raises(ai.ResponseTooLargeError, match="max_frame_bytes=10"):
        framer.feed(b"a")
    events = SSEFramer("p", 11)
    events.feed(b"data: 12345\n")
    with pytest.raises(ai.ResponseTooLargeError, match="event"):
        events.feed(b"data: 67890\n")  # two lines within the cap, one event past it


@pytest.mark.parametrize("value", [0, -5, "1", True, 1.5])
def test_max_frame_bytes_must_be_a_positive_integer(value: object) -> None:
    s = ai.ProviderSettings(
        "openai", api_key="k", base_url="http://x.invalid", options={"max_frame_bytes": value}
    )
    with pytest.raises(ai.ConfigError, match=r"options\['max_frame_bytes'\]"):
        OpenAIChatAdapter(s)


# --- the cap over real sockets -------------------------------------------------------------


@contextmanager
def raw_server(head: bytes, body: Iterator[bytes]) -> Iterator[tuple[str, list[int]]]:
    """A one-connection HTTP server on 127.0.0.1 that sends `head`, then `body` piece by
    piece, and keeps the connection open until the client leaves (an unterminated
    line never ends). Yields the base URL and the count of bytes it sent."""
    listener = socket.create_server(("127.0.0.1", 0))
    # A small send buffer (inherited by the accepted socket): what the server counts as
    # sent is then at most this much ahead of what reached the client's buffer.
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER)
    port = listener.getsockname()[1]
    sent = [0]

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.settimeout(10)
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            head_end = data.index(b"\r\n\r\n") + 4
            length = int(
                next(
                    line.split(b":")[1]
                    for line in data[:head_end].split(b"\r\n")
                    if line.lower().startswith(b"content-length")
                )
            )
            while len(data) - head_end < length:
                data += conn.recv(65536)
            try:
                conn.sendall(head)
                for piece in body:
                    conn.sendall(b"%x\r\n%s\r\n" % (len(piece), piece))
                    sent[0] += len(piece)
                conn.recv(1)  # hold the line open until the client closes
            except OSError:
                pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}", sent
    finally:
        listener.close()
        thread.join(10)


SEND_BUFFER = 64 * 1024


def _in_flight_bound() -> int:
    """The most bytes a server can have sent that the client has not read: the kernel's
    largest autotuned receive buffer (`tcp_rmem`'s maximum: 32 MB on some machines, so a
    fixed bound fails when the client reads slowly under load), twice the send buffer
    (Linux doubles what is set), and a read of slack."""
    try:
        with open("/proc/sys/net/ipv4/tcp_rmem") as f:
            receive = int(f.read().split()[2])
    except (OSError, ValueError, IndexError):
        receive = 6 * 1024 * 1024  # Linux's usual default
    return receive + 2 * SEND_BUFFER + READ


def _endless(prefix: bytes) -> Iterator[bytes]:
    yield prefix
    for _ in range(10_000):  # 655 MB if nothing stopped it: far past any in-flight bound
        yield b"z" * READ


_HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: %s\r\ntransfer-encoding: chunked\r\n\r\n"

FRAMINGS = {
    "sse": ("openai", b"text/event-stream", b'data: {"choices": [{"delta": {"content": "'),
    "ndjson": ("ollama", b"application/x-ndjson", b'{"message": {"content": "'),
    "json-array": ("gemini", b"application/json", b'[{"candidates": [{"content": "'),
}


@pytest.mark.parametrize("framing", sorted(FRAMINGS))
def test_an_unterminated_frame_past_the_cap_fails_typed_over_a_socket(framing: str) -> None:
    provider, content_type, prefix = FRAMINGS[framing]
    cap = 2 * MB
    with raw_server(_HEAD % content_type, _endless(prefix)) as (base_url, sent):
        options: dict[str, Any] = {"max_frame_bytes": cap}
        if provider == "gemini":
            options["stream_format"] = "json-array"
        s = ai.ProviderSettings(
            provider, api_key="k", base_url=base_url, options=options, timeout_s=10
        )
        with ai.Client([s]) as client:
            route = ai.Route([f"{provider}:m"], retry=NO_RETRY)
            with pytest.raises(ai.AllTargetsFailedError) as info:
                client.stream("hi", route=route).collect()
    last = info.value.attempts[-1].error
    assert last is not None and last.type_name == "ResponseTooLargeError"
    assert f"max_frame_bytes={cap}" in last.detail
    # Failed as the frame grew past the cap, not at the end of the body.
    assert sent[0] < 2 * cap + _in_flight_bound()


def test_a_frame_within_a_raised_cap_is_read() -> None:
    text = "w" * (3 * MB)
    chunk = json.dumps({"choices": [{"delta": {"content": text}, "finish_reason": "stop"}]})
    body = f"data: {chunk}\n\ndata: [DONE]\n\n".encode()

    def serve(_request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=body, headers={"content-type": "text/event-stream"})

    def client(cap: int) -> ai.Client:
        return ai.Client(
            [
                ai.ProviderSettings(
                    "openai",
                    api_key="k",
                    transport=httpx.MockTransport(serve),
                    options={"max_frame_bytes": cap},
                )
            ]
        )

    route = ai.Route(["openai:m"], retry=NO_RETRY)
    with client(4 * MB) as c:
        assert c.stream("hi", route=route).collect().text == text
    with client(1 * MB) as c, pytest.raises(ai.AllTargetsFailedError, match="max_frame_bytes"):
        c.stream("hi", route=route).collect()


# --- deep JSON -------------------------------------------------------------------------


DEEP = b"[" * 200_000 + b"]" * 200_000


def test_deep_json_is_a_protocol_error_not_a_recursion_error() -> None:
    with pytest.raises(ai.ProtocolError, match="nested too deeply"):
        decode_json(DEEP, "p")


def _two_targets(first: Callable[[httpx.Request], httpx.Response]) -> ai.Client:
    good = (
        b'data: {"choices": [{"delta": {"content": "fallback"}, "finish_reason": "stop"}]}\n\n'
        b"data: [DONE]\n\n"
    )

    whole = b'{"choices": [{"message": {"content": "fallback"}, "finish_reason": "stop"}]}'

    def second(request: httpx.Request) -> httpx.Response:
        if json.loads(request.content).get("stream"):
            return httpx.Response(200, content=good, headers={"content-type": "text/event-stream"})
        return httpx.Response(200, content=whole, headers={"content-type": "application/json"})

    return ai.Client(
        [
            ai.ProviderSettings("openai", api_key="k", transport=httpx.MockTransport(first)),
            ai.ProviderSettings(
                "openai", alias="backup", api_key="k", transport=httpx.MockTransport(second)
            ),
        ]
    )


@pytest.mark.parametrize("where", ["stream line", "whole body", "error body"])
def test_deep_json_fails_over_to_the_next_target(where: str) -> None:
    def first(request: httpx.Request) -> httpx.Response:
        if where == "stream line":
            return httpx.Response(
                200,
                content=b"data: " + DEEP + b"\n\n",
                headers={"content-type": "text/event-stream"},
            )
        if where == "whole body":
            return httpx.Response(200, content=DEEP, headers={"content-type": "application/json"})
        return httpx.Response(500, content=b'{"error": ' + DEEP + b"}")

    route = ai.Route(["openai:m", "backup:m"], retry=NO_RETRY)
    with _two_targets(first) as client:
        if where == "whole body":
            result = client.generate("hi", route=route)
        else:
            result = client.stream("hi", route=route).collect()
    assert result.text == "fallback"
    failed = result.attempts[0]
    assert failed.outcome == "failed" and failed.error is not None
    expected = "ProviderError" if where == "error body" else "ProtocolError"
    assert failed.error.type_name == expected


# --- redirects -------------------------------------------------------------------------


@pytest.mark.parametrize("status", [301, 302, 307, 308])
def test_a_redirect_is_a_typed_error_naming_status_and_location(status: int) -> None:
    location = "https://user:pw@elsewhere.example/v1/chat?sig=s3cr3t-token"

    def serve(_request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, headers={"location": location})

    s = ai.ProviderSettings("openai", api_key="k", transport=httpx.MockTransport(serve))
    with ai.Client([s]) as client:
        route = ai.Route(["openai:m"], retry=NO_RETRY)
        with pytest.raises(ai.AllTargetsFailedError) as info:
            client.stream("hi", route=route).collect()
    error = info.value.attempts[-1].error
    assert error is not None and error.type_name == "ProviderError"
    assert error.http_status == status and not error.retryable
    assert f"HTTP {status}" in error.detail
    assert "https://elsewhere.example/v1/chat?…" in error.detail
    assert "s3cr3t" not in error.detail and "pw@" not in error.detail


# --- message caps ------------------------------------------------------------------------


def test_an_error_frame_after_content_gives_a_capped_message() -> None:
    huge = "E" * MB
    body = (
        b'data: {"choices": [{"delta": {"content": "partial"}}]}\n\n'
        + b"data: "
        + json.dumps({"error": {"message": huge, "type": "server_error"}}).encode()
        + b"\n\n"
    )

    def serve(_request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=body, headers={"content-type": "text/event-stream"})

    s = ai.ProviderSettings("openai", api_key="k", transport=httpx.MockTransport(serve))

    async def go() -> BaseException:
        async with ai.AsyncClient([s]) as client:
            try:
                await client.stream("hi", route=ai.Route(["openai:m"], retry=NO_RETRY)).collect()
            except ai.AnyInferError as exc:
                return exc
        raise AssertionError("the stream did not fail")

    exc = asyncio.run(go())
    assert isinstance(exc, ai.ProviderError)
    assert len(str(exc)) <= MESSAGE_MAX_CHARS and len(exc.message) <= MESSAGE_MAX_CHARS
    assert "more characters cut" in str(exc)
    assert len(repr(exc)) <= MESSAGE_MAX_CHARS + 200


# --- the documented template ---------------------------------------------------------------


class _TemplateAdapter(OpenAIChatAdapter):
    """The adapter-authors guide's `stream_parts` example (an NDJSON protocol)."""

    provider_id = "template-example"

    def generate(self, request: GenerationRequest) -> AsyncIterator[Part]:
        def send(warnings: list[str]) -> Awaitable[httpx.Response]:
            warnings.append("sent without sampling")
            body = {"model": request.model, "stream": request.stream}
            return self.send("POST", "/generate", json_body=body, request=request)

        def decode(frame: Any, event: str | None) -> Iterator[Part]:
            if frame.get("done"):
                yield END
            elif frame.get("text"):
                yield TextPart(frame["text"])

        return self.stream_parts(request, send, decode, framing="ndjson")


def test_the_documented_template_example_streams_and_keeps_the_connection() -> None:
    body = b'{"text": "Hel"}\n{"text": "lo"}\n{"done": true}\n'

    def serve(_request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=body, headers={"content-type": "application/x-ndjson"})

    adapter = _TemplateAdapter(
        ai.ProviderSettings("template-example", transport=httpx.MockTransport(serve))
    )
    request = GenerationRequest(model="m", messages=(ai.Message.user("hi"),), stream=True)

    async def go() -> list[Part]:
        try:
            return [part async for part in adapter.generate(request)]
        finally:
            await adapter.aclose()

    parts = asyncio.run(go())
    assert parts == [WarningPart("sent without sampling"), TextPart("Hel"), TextPart("lo"), END]


# --- an adapter's own event framer -----------------------------------------------------


class _RecordFramer:
    """Events as JSON records ended by an ASCII record separator; the last record may
    go unterminated (returned at the end of the body)."""

    def __init__(self) -> None:
        self.rest = b""

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        *records, self.rest = (self.rest + chunk).split(b"\x1e")
        return [SSEEvent("record", record) for record in records]

    def close(self) -> list[SSEEvent]:
        return [SSEEvent("record", self.rest)] if self.rest else []


def _no_body(request: GenerationRequest) -> tuple[dict[str, Any], list[str]]:
    return {}, []


class _RecordAdapter(OpenAIChatAdapter):
    """A protocol whose events are not server-sent events (`event_framer`)."""

    provider_id = "record-example"

    def event_framer(self, response: httpx.Response, *, bare_json: bool = False) -> EventFramer:
        return _RecordFramer()

    def generate(self, request: GenerationRequest) -> Batches[Part]:
        def decode(frame: Any, event: str | None) -> Iterator[Part]:
            assert event == "record"
            yield TextPart(frame["t"])

        return self.stream_parts(request, self.body_sender(request, "/x", _no_body), decode)


_RECORDS = (b'{"t": "a"}\x1e{"t": "b"}\x1e{"t": ', b'"c"}\x1e', b'{"t": "d"}')
"""Four records in three reads: the first read completes two, the second one, and the
end of the body the last."""


class _Reads(httpx.AsyncByteStream):
    async def __aiter__(self) -> AsyncIterator[bytes]:
        for read in _RECORDS:
            yield read


def _record_adapter() -> _RecordAdapter:
    transport = httpx.MockTransport(lambda _request: httpx.Response(200, stream=_Reads()))
    return _RecordAdapter(ai.ProviderSettings("record-example", transport=transport))


def test_an_adapters_own_event_framer_is_read_inline_one_batch_per_read() -> None:
    adapter = _record_adapter()
    request = GenerationRequest(model="m", messages=(ai.Message.user("hi"),), stream=True)

    async def go() -> list[list[Part]]:
        try:
            return [list(batch) async for batch in adapter.generate(request).source]
        finally:
            await adapter.aclose()

    a, b, c, d = (TextPart(text) for text in "abcd")
    assert asyncio.run(go()) == [[a, b], [c], [d]]


def test_iter_sse_frames_with_the_adapters_event_framer_too() -> None:
    adapter = _record_adapter()

    async def go() -> list[SSEEvent]:
        try:
            response = await adapter.send("POST", "/x", json_body={})
            return [event async for event in adapter.iter_sse(response)]
        finally:
            await adapter.aclose()

    assert asyncio.run(go()) == [SSEEvent("record", f'{{"t": "{t}"}}'.encode()) for t in "abcd"]
