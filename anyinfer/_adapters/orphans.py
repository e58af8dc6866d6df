"""Connections an httpx pool would keep forever after a cancelled request, reclaimed.

httpcore 1.0 (encode/httpcore#1093, unfixed in 1.0.9) can leave a connection behind in
its pool when a request is cancelled after the pool gave it a new connection and before
the request was sent on it. The cancellation then arrives at one of the connection's
locks: before it connects (it says `CONNECTING`), or after (an HTTP/1.1 connection in
state `NEW`, with its socket open). No request owns that connection any more, and the
pool never reaps it: it is not idle, closed or expired, and a `NEW` HTTP/1.1
connection is never offered to another request. Once `max_connections` of them have
gathered, every request waits for a slot until it fails with a pool timeout, however
healthy the server. An `asyncio.timeout` a few milliseconds long, or a sync stream left
at its first event while the loop is still connecting, is enough: a soak of 400 such
cancellations through one client jammed its two-connection pool after 90 to 290 of them.

A third way gets there under load. When a response body fails (the server cut it),
httpcore closes it itself, under a shield that holds off anyio's cancellations but not
a task's own `cancel()`: one that arrives at that close's lock (a sync stream dropped
while the server cuts it, so its pump task is cancelled) leaves the connection
`ACTIVE`, its request gone. Eight threads reading two events of cut streams and
dropping them left two or three such connections in a pool of eight, in about one run
in three.

`reclaim` applies the cure the upstream fixes apply (encode/httpcore#1094,
pydantic/httpx2#983), from outside: a connection that no request in the pool owns and
that is neither idle, available, closed nor expired is taken out of the pool and
closed, and queued requests are given the slots it held. A connection a request still
owns (connecting, or answering) is never touched, since its request stays in the pool
until its response is closed. `HTTPAdapter`'s transport runs it after every request
that raised, and before a request to a full pool (`is_full`), where an orphan would
make it wait; a pool with room is not searched, so a request pays for the check only
a length comparison.

It reads the pool's private state (`_requests`, `_connections`, its lock and its
assignment step), the same names through httpcore 1.0; a pool without them is left
alone.
"""

from __future__ import annotations

from typing import Any

import httpcore
import httpx

__all__ = ["is_full", "pool_of", "reclaim", "reclaim_orphans"]


def pool_of(transport: httpx.AsyncBaseTransport) -> Any | None:
    """`transport`'s httpcore pool, when it is an `httpx.AsyncHTTPTransport` over
    httpcore 1.0's pool (the state `reclaim` reads), else `None`."""
    pool: Any = getattr(transport, "_pool", None)
    if not isinstance(pool, httpcore.AsyncConnectionPool):
        return None
    if not all(hasattr(pool, name) for name in _POOL_STATE):
        return None  # another httpcore: none of this applies
    return pool


_POOL_STATE = (
    "_requests",
    "_connections",
    "_max_connections",
    "_optional_thread_lock",
    "_assign_requests_to_connections",
    "_close_connections",
)
"""The pool's private state `reclaim` reads, the same through httpcore 1.0."""


def is_full(pool: Any) -> bool:
    """Whether `pool` has no room for a new connection: when an orphan would make a
    request wait, so `HTTPAdapter`'s transport reclaims them before the request."""
    full: bool = len(pool._connections) >= pool._max_connections
    return full


def _orphans(pool: Any) -> list[Any]:
    """The pool's connections that no request owns and that the pool cannot reap or
    reuse (see the module docstring)."""
    owned = {id(r.connection) for r in pool._requests if r.connection is not None}
    return [
        c
        for c in pool._connections
        if id(c) not in owned
        and not (c.is_idle() or c.is_available() or c.is_closed() or c.has_expired())
    ]


async def reclaim(pool: Any) -> None:
    """Take `pool`'s orphaned connections out of it and close them (`pool_of`'s pool)."""
    with pool._optional_thread_lock:
        orphans = _orphans(pool)
        if not orphans:
            return
        for connection in orphans:
            pool._connections.remove(connection)
        closing = pool._assign_requests_to_connections()  # queued requests: the slots
    await pool._close_connections([*orphans, *closing])


async def reclaim_orphans(transport: httpx.AsyncBaseTransport) -> None:
    """Take orphaned connections out of `transport`'s pool and close them (call after
    the transport's `handle_async_request` raised, or before a request to a full pool).

    `HTTPAdapter`'s transport does this for every request; an adapter that sends
    through an httpx client of its own can wrap its transport the same way::

        try:
            return await transport.handle_async_request(request)
        except BaseException:
            await finish_uncancelled(reclaim_orphans(transport))
            raise

    Args:
        transport: An `httpx.AsyncHTTPTransport` (any other transport is left alone).
    """
    pool = pool_of(transport)
    if pool is not None:
        await reclaim(pool)
