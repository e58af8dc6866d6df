"""httpx's transport failures become typed errors in one place
(`HTTPAdapter._transport_error`): sending (before the response) and reading the body
(mid-response), each kind with its own type, message and attributes, raised without
httpx's exception chained."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import httpx
import pytest

import anyinfer as ai
from anyinfer._providers.openai_chat import OpenAIChatAdapter
from anyinfer._request import GenerationRequest

BASE = "http://127.0.0.1:9/v1"


def _adapter(serve: Callable[[httpx.Request], httpx.Response]) -> OpenAIChatAdapter:
    settings = ai.ProviderSettings(
        "openai",
        api_key="sk-test",
        base_url=BASE,
        transport=httpx.MockTransport(serve),
        options={"max_connections": 7},
    )
    return OpenAIChatAdapter(settings)


def _send_failure(exc: Exception, phase: str = "generate") -> ai.AnyInferError:
    def serve(request: httpx.Request) -> httpx.Response:
        raise exc

    async def go() -> ai.AnyInferError:
        adapter = _adapter(serve)
        try:
            await adapter.send("POST", "/chat/completions", json_body={}, phase=phase)
        except ai.AnyInferError as error:
            return error
        finally:
            await adapter.aclose()
        raise AssertionError("send did not fail")

    return asyncio.run(go())


def _unchained(error: BaseException) -> None:
    assert error.__cause__ is None and error.__suppress_context__


def test_a_pool_timeout_is_pool_exhaustion_naming_the_pool_size() -> None:
    error = _send_failure(httpx.PoolTimeout("no connection"), phase="discover")
    assert type(error) is ai.PoolExhaustedError
    assert str(error) == (
        "openai: the connection pool is exhausted: all 7 connections stayed busy until the "
        "timeout (raise the provider option max_connections, or send fewer requests at once)"
    )
    assert (error.timeout_kind, error.max_connections) == ("pool", 7)
    assert (error.provider, error.phase, error.retryable) == ("openai", "discover", False)
    _unchained(error)


@pytest.mark.parametrize(
    ("exc", "kind"),
    [
        (httpx.ConnectTimeout("slow handshake"), "connect"),
        (httpx.ReadTimeout("no first byte"), "first_byte"),
        (httpx.WriteTimeout("body not taken"), "first_byte"),
    ],
)
def test_a_timeout_before_the_response_names_its_kind(exc: Exception, kind: str) -> None:
    error = _send_failure(exc)
    assert type(error) is ai.ProviderTimeoutError
    assert str(error) == f"openai: {kind} timeout"
    assert error.timeout_kind == kind
    assert (error.provider, error.phase, error.retryable) == ("openai", "generate", True)
    _unchained(error)


def test_a_refused_connection_is_a_retryable_provider_error_naming_the_base_url() -> None:
    error = _send_failure(httpx.ConnectError("connection refused"))
    assert type(error) is ai.ProviderError
    assert str(error) == f"openai: cannot connect to {BASE}: connection refused"
    assert (error.provider, error.phase, error.retryable) == ("openai", "generate", True)
    _unchained(error)


def test_another_transport_failure_before_the_response_is_a_stream_error() -> None:
    error = _send_failure(httpx.RemoteProtocolError("peer closed"))
    assert type(error) is ai.StreamError
    assert str(error) == (
        "openai: connection failed before the response: RemoteProtocolError('peer closed')"
    )
    assert (error.provider, error.phase, error.retryable) == ("openai", "generate", True)
    _unchained(error)


class _Breaking(httpx.AsyncByteStream):
    """A body that sends one event, then fails with `exc`."""

    def __init__(self, exc: Exception) -> None:
        self.exc = exc

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield b'data: {"choices":[{"index":0,"delta":{"content":"hi"}}]}\n\n'
        raise self.exc


def _read_failure(exc: Exception) -> tuple[list[object], ai.AnyInferError]:
    def serve(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200, headers={"content-type": "text/event-stream"}, stream=_Breaking(exc)
        )

    async def go() -> tuple[list[object], ai.AnyInferError]:
        adapter = _adapter(serve)
        request = GenerationRequest(model="m", messages=(ai.Message.user("x"),))
        parts: list[object] = []
        try:
            async for part in adapter.generate(request):
                parts.append(part)
        except ai.AnyInferError as error:
            return parts, error
        finally:
            await adapter.aclose()
        raise AssertionError("the stream did not fail")

    return asyncio.run(go())


@pytest.mark.parametrize(
    "exc", [httpx.ReadTimeout("quiet"), httpx.PoolTimeout("odd"), httpx.ConnectTimeout("odd")]
)
def test_any_timeout_mid_response_is_an_idle_timeout(exc: Exception) -> None:
    parts, error = _read_failure(exc)
    assert parts == [ai.TextDelta("hi")]
    assert type(error) is ai.ProviderTimeoutError
    assert str(error) == "openai: the stream went idle past the read timeout"
    assert error.timeout_kind == "idle"
    assert (error.provider, error.phase, error.retryable) == ("openai", "stream", True)
    _unchained(error)


@pytest.mark.parametrize(
    "exc", [httpx.ReadError("reset by peer"), httpx.ConnectError("reset by peer")]
)
def test_any_other_transport_failure_mid_response_is_a_lost_connection(exc: Exception) -> None:
    parts, error = _read_failure(exc)
    assert parts == [ai.TextDelta("hi")]
    assert type(error) is ai.StreamError
    assert str(error) == "openai: connection lost mid-response: reset by peer"
    assert (error.provider, error.phase, error.retryable) == ("openai", "stream", True)
    _unchained(error)
