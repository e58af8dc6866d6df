"""Closing work that a cancellation cannot cut short, run in the caller's own task.

An httpx response whose close is interrupted by a cancellation keeps its connection
pool slot forever, and after `max_connections` such closes every request waits for a
slot that never comes free. `finish_uncancelled` runs the closing work to its end and
re-raises a cancellation that arrived meanwhile once the work is done.

The obvious way to do that, a task of its own awaited with `asyncio.wait`, costs three
more turns of the event loop and a task on every response closed (measured: about
170 µs per non-streamed request on the benchmark machine, most of the library's
per-request overhead). Instead the closing coroutine is driven here, in the caller's
task, one step at a time:

- where it yields to the loop bare (`asyncio.sleep(0)`, anyio's checkpoints), a
  cancellation thrown into the caller is caught here and the work simply resumes;
- where it waits on a future, the caller waits on a proxy future completed by that
  future instead, so a cancellation of the caller cancels the proxy and never the
  future the work is waiting for.

The work's own deadline (`timeout`) is enforced here too, by cancelling the future the
work waits on, because a deadline built on cancelling the task (`asyncio.timeout`)
would cancel the caller, and that cancellation is exactly what is held back.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Generator
from typing import Any

__all__ = ["finish_uncancelled"]


def _wake(proxy: asyncio.Future[None], _done: asyncio.Future[Any]) -> None:
    if not proxy.done():
        proxy.set_result(None)


class _Uncancelled:
    """The awaitable `finish_uncancelled` returns (see the module docstring)."""

    __slots__ = ("_aw", "_timeout")

    def __init__(self, aw: Awaitable[None], timeout: float | None) -> None:
        self._aw = aw
        self._timeout = timeout

    def __await__(self) -> Generator[Any, None, None]:
        inner = self._aw.__await__()
        # The caller's first cancellation, raised once the work is done (the same
        # exception: anyio tells its cancel scopes' cancellations by their message).
        cancelled: asyncio.CancelledError | None = None
        # The future the work waits on now (None at a bare yield), and the deadline's
        # state: 0 not passed, 1 passed and still to deliver, 2 delivered (once only:
        # the work's own cleanup after it must not be cut short in turn).
        waiting: list[asyncio.Future[Any] | None] = [None]
        deadline = [0]
        timer: asyncio.TimerHandle | None = None
        if self._timeout is not None:

            def expire() -> None:
                fut = waiting[0]
                if fut is not None and not fut.done():
                    fut.cancel()  # the work sees a CancelledError where it waits
                    deadline[0] = 2
                else:
                    deadline[0] = 1

            timer = asyncio.get_running_loop().call_later(self._timeout, expire)
        throw: BaseException | None = None
        try:
            while True:
                waiting[0] = None
                if deadline[0] == 1:
                    deadline[0] = 2
                    throw = asyncio.CancelledError()
                try:
                    if throw is None:
                        yielded = inner.send(None)
                    else:
                        exc, throw = throw, None
                        yielded = inner.throw(exc)
                except StopIteration:
                    break
                except BaseException as exc:
                    if isinstance(exc, asyncio.CancelledError) and deadline[0] == 2:
                        break  # the work stopped at its deadline: done
                    if cancelled is not None:
                        raise cancelled from exc
                    raise
                if yielded is None:  # a bare yield: the caller's task resumes us
                    try:
                        yield None
                    except asyncio.CancelledError as exc:
                        cancelled = cancelled or exc
                    continue
                if not isinstance(yielded, asyncio.Future):
                    # Not asyncio's protocol: passed through, unprotected.
                    try:
                        yield yielded
                    except BaseException as exc:  # forwarded to the work
                        throw = exc
                    continue
                fut = yielded
                fut._asyncio_future_blocking = False  # this awaitable waits for it
                waiting[0] = fut
                while not fut.done():
                    proxy: asyncio.Future[None] = fut.get_loop().create_future()
                    fut.add_done_callback(functools.partial(_wake, proxy))
                    try:
                        yield from proxy
                    except asyncio.CancelledError as exc:
                        cancelled = cancelled or exc
        finally:
            if timer is not None:
                timer.cancel()
            inner.close()
        if cancelled is not None:
            raise cancelled


def finish_uncancelled(aw: Awaitable[None], *, timeout: float | None = None) -> Awaitable[None]:
    """Await `aw` to its end even if the current task is cancelled meanwhile.

    A cancellation that arrives while `aw` runs is held back and re-raised once it is
    done, so closing a response always completes: an httpx response whose close is
    interrupted keeps its pool slot forever, and after `max_connections` such closes
    every request waits for a slot that never comes free. The work runs in the caller's
    task (no task is spawned), so it costs nothing when nothing is cancelled.

    Args:
        aw: The closing work (e.g. `response.aclose()`).
        timeout: The longest the work may run, in seconds; when it passes, the work is
            stopped where it waits (it sees a `CancelledError` there, which is not
            raised to the caller). `None` waits for as long as the work takes. Do not
            put `asyncio.timeout` inside `aw` instead: its deadline cancels the caller's
            task, which is what is held back here.

    Returns:
        An awaitable; the caller's cancellation, if one arrived, is raised from it once
        the work is done.
    """
    return _Uncancelled(aw, timeout)
