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

`reclaim_orphans` applies the cure the upstream fixes apply (encode/httpcore#1094,
pydantic/httpx2#983), from outside: after a request to the pool raised, a connection
that no request in the pool owns and that is neither idle, available, closed nor
expired is taken out of the pool and closed, and queued requests are given the slots
it held. A connection a request still owns (connecting, or answering) is never touched,
since its request stays in the pool until its response is closed.

It reads the pool's private state (`_requests`, `_connections`, its lock and its
assignment step), the same names through httpcore 1.0; a pool without them is left
alone.
"""

from __future__ import annotations

from typing import Any

import httpcore
import httpx

__all__ = ["reclaim_orphans"]


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


async def reclaim_orphans(transport: httpx.AsyncBaseTransport) -> None:
    """Take a cancelled request's orphaned connections out of `transport`'s pool and
    close them (call after the transport's `handle_async_request` raised).

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
    pool: Any = getattr(transport, "_pool", None)
    if not isinstance(pool, httpcore.AsyncConnectionPool):
        return
    try:
        with pool._optional_thread_lock:
            orphans = _orphans(pool)
            if not orphans:
                return
            for connection in orphans:
                pool._connections.remove(connection)
            closing = pool._assign_requests_to_connections()  # queued requests: the slots
    except AttributeError:  # not httpcore 1.0's pool: none of this applies
        return
    await pool._close_connections([*orphans, *closing])
