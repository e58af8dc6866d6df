"""Safe defaults over real sockets: the overall deadline and the default response cap
(`anyinfer/_adapters/limits.py`), against servers that never finish (issue 16)."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
from helpers import NO_RETRY

import anyinfer as ai
from anyinfer._adapters.limits import DEFAULT_DEADLINE_S, DEFAULT_MAX_RESPONSE_BYTES

TOO_LARGE = (ai.ResponseTooLargeError, ai.AllTargetsFailedError)
"""Past the cap before any content was shown, the attempt fails and routing reports it."""


def _event(text: str) -> bytes:
    chunk = {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]}
    return b"data: " + json.dumps(chunk).encode() + b"\n\n"


@contextmanager
def endless_server(after_head: Callable[[int], bytes], pause_s: float) -> Iterator[str]:
    """An OpenAI-style SSE server that never ends its stream: after one content event it
    writes `after_head(i)` for i = 0, 1, ... with `pause_s` between writes, until the
    client goes away. Yields its base URL."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.settimeout(0.1)  # accept() wakes up to notice `stop`
    port = listener.getsockname()[1]
    stop = threading.Event()

    def serve(conn: socket.socket) -> None:
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            head = (
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n"
            )
            try:
                conn.sendall(head + _event("first"))
                i = 0
                while not stop.is_set():
                    conn.sendall(after_head(i))
                    i += 1
                    if pause_s:
                        time.sleep(pause_s)
            except OSError:
                return  # the client closed the connection: what the test wants

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue  # look at `stop` again
            except OSError:
                return
            conn.settimeout(None)
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        stop.set()
        listener.close()
        thread.join(5)


def test_keep_alives_cannot_hold_a_stream_open_past_the_deadline() -> None:
    # A comment line every 20 ms keeps every gap far below timeout_s: only the overall
    # deadline can end this stream.
    with endless_server(lambda _i: b": keep-alive\n\n", 0.02) as url:
        s = ai.ProviderSettings(
            "openai", api_key="sk-x", base_url=url, timeout_s=30, options={"deadline_s": 0.5}
        )
        with ai.Client([s]) as client, pytest.raises(ai.ProviderTimeoutError) as info:
            client.stream("hi", route=ai.Route("openai:m", retry=NO_RETRY)).collect()
    assert info.value.timeout_kind == "total"
    assert info.value.phase == "stream"
    assert "deadline" in str(info.value)


def test_an_endless_stream_stops_at_the_default_response_cap() -> None:
    piece = "x" * 60_000
    with endless_server(lambda _i: _event(piece), 0.0) as url:
        s = ai.ProviderSettings("openai", api_key="sk-x", base_url=url, timeout_s=30)
        with ai.Client([s]) as client, pytest.raises(ai.ResponseTooLargeError) as info:
            client.stream("hi", route=ai.Route("openai:m", retry=NO_RETRY)).collect()
    assert f"max_response_bytes={DEFAULT_MAX_RESPONSE_BYTES}" in str(info.value)


def test_the_provider_cap_is_an_option_and_a_call_overrides_it() -> None:
    piece = "x" * 1000
    with endless_server(lambda _i: _event(piece), 0.0) as url:
        s = ai.ProviderSettings(
            "openai", api_key="sk-x", base_url=url, options={"max_response_bytes": 50_000}
        )
        route = ai.Route("openai:m", retry=NO_RETRY)
        with ai.Client([s]) as client:
            with pytest.raises(TOO_LARGE, match="max_response_bytes=50000"):
                client.stream("hi", route=route).collect()
            with pytest.raises(TOO_LARGE, match="max_response_bytes=20000"):
                client.stream("hi", route=route, max_response_bytes=20_000).collect()


@pytest.mark.parametrize(
    "options",
    [{"deadline_s": "5"}, {"deadline_s": 0}, {"max_response_bytes": 1.5}, {"deadline_s": True}],
)
def test_bad_limit_options_are_config_errors(options: dict[str, object]) -> None:
    s = ai.ProviderSettings("openai", api_key="sk-x", options=options)
    # The adapter is built (and its options read) on the first attempt: the ConfigError
    # is that attempt's failure.
    with ai.Client([s]) as client, pytest.raises(ai.AllTargetsFailedError) as info:
        client.generate("hi", route=ai.Route("openai:m", retry=NO_RETRY))
    error = info.value.attempts[0].error
    assert error is not None and error.type_name == "ConfigError"
    assert next(iter(options)) in error.detail


def test_limits_can_be_turned_off_and_openai_compat_accepts_them() -> None:
    s = ai.ProviderSettings(
        "openai-compat",
        base_url="http://127.0.0.1:9/v1",
        options={"deadline_s": None, "max_response_bytes": None},
    )
    with ai.Client([s]) as client, pytest.raises(ai.AnyInferError) as info:
        client.generate("hi", route=ai.Route("openai-compat:m", retry=NO_RETRY))
    assert "cannot connect" in str(info.value)  # the adapter was built: options accepted
    assert DEFAULT_DEADLINE_S >= 600  # generous: far beyond a real generation
