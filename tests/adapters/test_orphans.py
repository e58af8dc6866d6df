"""A request cancelled as its new connection opens leaves no connection in the pool.

httpcore 1.0's pool keeps such a connection forever (encode/httpcore#1093): after
`max_connections` of them every request fails with a pool timeout. These tests deliver
the cancellation at the two places where it strands one, through a real loopback
server, and check that `HTTPAdapter`'s transport gives the slot back:

- a request queued for a full pool is given a new connection and cancelled before it
  wakes up (the connection never connects: `CONNECTING`);
- a request's new connection has connected, and the cancellation arrives before the
  request goes out on it (HTTP/1.1 state `NEW`, its socket open).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

import anyinfer as ai
from anyinfer.fakeservers import FakeServer, Fault, Script, Text

ROUTE = ai.Route("openai:fake-model", retry=ai.RetryPolicy(max_retries=0))
STALLED = Script(pieces=(Text("a"), Text("b")), fault=Fault("stall", at=2))
CLEAN = Script(pieces=(Text("hi"),))


def _serve(request: Any) -> Script:
    return CLEAN if b"clean" in request.content else STALLED


def _client(server: FakeServer) -> ai.AsyncClient:
    settings = ai.ProviderSettings(
        "openai", api_key="sk-test", base_url=server.base_url, options={"max_connections": 1}
    )
    return ai.AsyncClient([settings])


def _pool(client: ai.AsyncClient) -> Any:
    return client._adapter("openai")._transport.inner._pool  # type: ignore[attr-defined]


async def _first_text(stream: ai.AsyncStream) -> None:
    async for event in stream:
        if isinstance(event, ai.TextDelta):
            return


@contextlib.asynccontextmanager
async def _queued_behind_a_stream(client: ai.AsyncClient) -> AsyncIterator[asyncio.Task[Any]]:
    """A stream holding the pool's one connection at its first text, and a request
    queued behind it (yielded); leaving closes the stream, and its connection."""
    async with client.stream("hi", route=ROUTE, timeout_s=5.0) as stream:
        await _first_text(stream)
        queued = asyncio.create_task(client.generate("hi", route=ROUTE))
        await asyncio.sleep(0.05)  # waiting for the pool's one connection
        yield queued


async def _slot_is_free(client: ai.AsyncClient) -> None:
    result = await client.generate("clean", route=ROUTE, timeout_s=2.0)
    assert result.text == "hi"


def test_a_queued_request_cancelled_as_it_gets_a_new_connection_gives_it_back() -> None:
    async def main() -> None:
        with FakeServer("openai-chat", _serve) as server:
            async with _client(server) as client:
                pool = _pool(client)
                async with _queued_behind_a_stream(client) as queued:
                    create = pool.create_connection

                    def create_connection(origin: Any) -> Any:
                        queued.cancel()  # before it wakes to its new connection
                        return create(origin)

                    pool.create_connection = create_connection
                # Leaving the stream closes its connection: the pool makes one for the
                # queued request, which is cancelled before it can use it.
                with pytest.raises(asyncio.CancelledError):
                    await queued
                assert pool.connections == []  # httpcore alone: [<... [CONNECTING]>]
                await _slot_is_free(client)

    asyncio.run(main())


def test_a_request_cancelled_once_its_connection_connected_gives_it_back() -> None:
    async def main() -> None:
        with FakeServer("openai-chat", _serve) as server:
            async with _client(server) as client:
                pool = _pool(client)
                backend = pool._network_backend
                connect = backend.connect_tcp
                armed = [True]

                async def connect_tcp(*args: Any, **kwargs: Any) -> Any:
                    stream = await connect(*args, **kwargs)
                    if armed[0]:
                        armed[0] = False
                        task = asyncio.current_task()
                        assert task is not None
                        task.cancel()  # arrives at the connection's state lock
                    return stream

                backend.connect_tcp = connect_tcp
                with pytest.raises(asyncio.CancelledError):
                    await asyncio.create_task(client.generate("clean", route=ROUTE))
                assert not armed[0], "the cancellation was not delivered"
                assert pool.connections == []  # httpcore alone: [<... HTTP/1.1, NEW ...>]
                await _slot_is_free(client)

    asyncio.run(main())


def test_a_connection_a_request_still_owns_is_never_reclaimed() -> None:
    """A request queued behind an active stream is cancelled: the stream's connection
    stays, and the stream still reads."""

    async def main() -> None:
        with FakeServer("openai-chat", _serve) as server:
            async with _client(server) as client:
                pool = _pool(client)
                async with _queued_behind_a_stream(client) as queued:
                    (active,) = pool.connections
                    queued.cancel()
                    with pytest.raises(asyncio.CancelledError):
                        await queued
                    assert pool.connections == [active] and not active.is_idle()
                await _slot_is_free(client)

    asyncio.run(main())


def test_a_connection_whose_close_was_cut_short_is_reclaimed_when_the_pool_is_full(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A cut stream's connection closes inside httpcore; a cancellation that arrives at
    that close's lock (a sync stream dropped as the server cuts it) leaves the
    connection `ACTIVE` with no request: the next request to the full pool takes it
    back instead of waiting out its timeout."""
    from httpcore._async.http11 import AsyncHTTP11Connection

    closed = AsyncHTTP11Connection._response_closed
    armed = [True]

    async def response_closed(self: Any) -> None:
        if armed[0]:
            armed[0] = False
            task = asyncio.current_task()
            assert task is not None
            task.cancel()  # arrives at the state lock, inside httpcore's own close
        await closed(self)

    monkeypatch.setattr(AsyncHTTP11Connection, "_response_closed", response_closed)
    cut = Script(pieces=(Text("a"), Text("b"), Text("c")), fault=Fault("disconnect", at=2))

    async def main() -> None:
        with FakeServer("openai-chat", lambda r: CLEAN if b"clean" in r.content else cut) as server:
            async with _client(server) as client:
                pool = _pool(client)
                task = asyncio.create_task(client.generate("hi", route=ROUTE))
                with pytest.raises(BaseException):  # noqa: B017 - cancelled or typed
                    await task
                assert not armed[0], "the cancellation was not delivered"
                (stuck,) = pool.connections  # httpcore alone keeps it for good
                assert "ACTIVE" in stuck.info() and not pool._requests
                start = asyncio.get_running_loop().time()
                await _slot_is_free(client)
                assert asyncio.get_running_loop().time() - start < 1.0
                assert stuck not in pool.connections

    asyncio.run(main())
