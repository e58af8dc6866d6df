"""Stream handles: `AsyncStream` and its blocking twin `SyncStream`."""

from __future__ import annotations

import contextlib
import functools
import queue
import threading
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterator, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, ParamSpec

from .._types import Generation
from .events import StreamEnded, StreamEvent, TimingMark
from .parts import Served

if TYPE_CHECKING:
    import asyncio
    import concurrent.futures

__all__ = ["AsyncStream", "Relay", "Routed", "RouterBatches", "SyncStream", "routed"]

_P = ParamSpec("_P")


class _Consumed:
    """What both kinds of stream give once consumed: the final result."""

    __slots__ = ()

    _result: Generation | None

    @property
    def result(self) -> Generation:
        """The final result.

        Raises:
            RuntimeError: If the stream has not been consumed to completion.
        """
        if self._result is None:
            raise RuntimeError("the stream has not been consumed to completion")
        return self._result


class Relay:
    """What a router yields to hand its reader one attempt's event batches directly.

    The reader (`Routed.next_batch`, and `AsyncStream` inline) reads `batches` itself
    until they end, then resumes the router; whatever they raise is thrown into the
    router at its `yield`, which handles it exactly as if its own `async for` over them
    had raised (retry, fall back, raise). The router keeps the attempt open around the
    `yield` and closes it when it is closed itself. A network read then costs no hop
    through the router's generator.

    Args:
        batches: The attempt's event batches.
    """

    __slots__ = ("batches",)

    def __init__(self, batches: AsyncIterator[Sequence[StreamEvent]]) -> None:
        self.batches = batches


RouterBatches = AsyncGenerator[Sequence[StreamEvent] | Relay, None]
"""A router's output: event batches, and `Relay`s handing over an attempt's."""


class Routed(Served[StreamEvent]):
    """A router's event stream (`routed`): its batches, read through its `Relay`s.

    `AsyncStream` serves it a batch at a time; iterated directly, it yields one event at
    a time like any async iterator.

    Args:
        source: The router's generator (closed by `aclose`).
    """

    __slots__ = ("relayed", "source")

    def __init__(self, source: RouterBatches) -> None:
        super().__init__()
        self.source = source
        self.relayed: AsyncIterator[Sequence[StreamEvent]] | None = None

    async def next_batch(self, failure: BaseException | None = None) -> Sequence[StreamEvent]:
        """The next non-empty batch: from the relayed attempt while there is one, else
        from the router.

        Args:
            failure: What reading the relayed attempt just raised (`StopAsyncIteration`
                when it ended), to hand to the router first.

        Raises:
            StopAsyncIteration: The router has finished.
        """
        while True:
            relayed = self.relayed
            if failure is not None:
                # Thrown at the router's `yield`, as its own `async for` would have
                # raised it (or resumed it, at the attempt's end).
                self.relayed = None
                thrown, failure = failure, None
                if type(thrown) is StopAsyncIteration:
                    batch = await self.source.asend(None)
                else:
                    batch = await self.source.athrow(thrown)
            elif relayed is not None:
                try:
                    batch = await relayed.__anext__()
                except BaseException as exc:
                    failure = exc
                    continue
            else:
                batch = await self.source.__anext__()
            if isinstance(batch, Relay):
                self.relayed = batch.batches
            elif batch:
                return batch

    async def aclose(self) -> None:
        """Close the router (which closes the attempt it relays)."""
        self._batch = ()
        await self.source.aclose()


def routed(func: Callable[_P, RouterBatches]) -> Callable[_P, AsyncStream]:
    """Make a router's generator function return its `AsyncStream`.

    Args:
        func: The generator function (a method is fine): event batches and `Relay`s.

    Returns:
        A function with `func`'s parameters that returns `AsyncStream(Routed(...))`.
    """

    @functools.wraps(func)
    def start(*args: _P.args, **kwargs: _P.kwargs) -> AsyncStream:
        return AsyncStream(Routed(func(*args, **kwargs)))

    return start


class AsyncStream(_Consumed):
    """An async iterator over stream events, with the final result attached.

    Supports the three consumption shapes the design targets: iterate deltas, watch
    for the first-token mark and then read the result, or ignore events and read the
    result. Use it as an async context manager so that leaving the block early cancels
    the in-flight request.
    """

    def __init__(self, source: AsyncIterator[StreamEvent]) -> None:
        self._source = source
        # A router's stream is read a batch at a time and served from it.
        self._routed = source if type(source) is Routed else None
        self._batch: Sequence[StreamEvent] = ()
        self._next = 0
        self._result: Generation | None = None
        self._closed = False

    def __aiter__(self) -> AsyncStream:
        """Iterate stream events."""
        return self

    async def __anext__(self) -> StreamEvent:
        """Yield the next event, capturing the result when the stream ends."""
        if self._closed:
            raise StopAsyncIteration
        i, batch = self._next, self._batch
        if i < len(batch):
            self._next = i + 1
            event = batch[i]
        elif (routed := self._routed) is None:
            event = await self._source.__anext__()
        else:
            # The usual read inline: the relayed attempt's next batch. `next_batch` does
            # the rest (the router's own batches, an attempt's end or failure).
            relayed, failure, batch = routed.relayed, None, ()
            if relayed is not None:
                try:
                    batch = await relayed.__anext__()
                except BaseException as exc:
                    failure = exc
            if not batch:
                batch = await routed.next_batch(failure)
            self._batch, self._next = batch, 1
            event = batch[0]
        if type(event) is StreamEnded:
            self._result = event.result
        return event

    async def __aenter__(self) -> AsyncStream:
        """Enter a context that guarantees the stream is closed."""
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Close the underlying generator, cancelling any in-flight request."""
        await self.aclose()

    async def aclose(self) -> None:
        """Close the stream early, releasing the provider connection."""
        self._closed = True
        aclose = getattr(self._source, "aclose", None)
        if aclose is not None:
            await aclose()

    async def collect(self) -> Generation:
        """Drain the stream and return the final result."""
        routed = self._routed
        if routed is None or self._closed:
            async for _ in self:
                pass
            return self.result
        # What iterating would do, a batch at a time: nothing to hand out one by one.
        ended = StreamEnded
        batch = self._batch[self._next :]
        self._batch, self._next = (), 0
        while True:
            for event in batch:
                if type(event) is ended:
                    self._result = event.result
            try:
                batch = await routed.next_batch()
            except StopAsyncIteration:
                return self.result


class _LoopThread:
    """One event loop running forever on a daemon thread."""

    def __init__(self) -> None:
        import asyncio

        self.loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self.thread = threading.Thread(target=self._main, name="anyinfer-loop", daemon=True)
        self.thread.start()
        self._ready.wait()

    def _main(self) -> None:
        import asyncio

        asyncio.set_event_loop(self.loop)
        self.loop.call_soon(self._ready.set)
        self.loop.run_forever()

    def submit(self, coro: Any) -> concurrent.futures.Future[Any]:
        """Schedule a coroutine on the loop."""
        import asyncio

        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def check_caller(self, *, in_running_loop_ok: bool = False) -> None:
        """Refuse a blocking call that could never complete.

        On the loop's own thread (an async tool, an observer) the call would wait for
        the loop it is blocking: a deadlock. In a thread running another event loop (a
        coroutine calling the sync client) it would freeze that loop, and with it
        anything the request needs from it.

        Args:
            in_running_loop_ok: Allow a thread running another loop (`close()`, which
                needs nothing from the caller's loop and must always be possible).

        Raises:
            RuntimeError: On the loop's own thread.
            ConfigError: In a thread with a running event loop: use `AsyncClient`.
        """
        import asyncio

        if threading.current_thread() is self.thread:
            raise RuntimeError(
                "cannot block on the sync Client from its own loop thread (an async tool "
                "or an observer): it would deadlock; await the AsyncClient instead"
            )
        if not in_running_loop_ok and asyncio._get_running_loop() is not None:
            from .._errors import ConfigError

            raise ConfigError(
                "the sync Client was called from a running event loop, which it would "
                "block (and deadlock, if the request needs that loop); use "
                "anyinfer.AsyncClient and await it there"
            )

    def run(self, coro: Any, *, in_running_loop_ok: bool = False) -> Any:
        """Run a coroutine on the loop and wait for its result.

        If the wait is interrupted (Ctrl-C: `KeyboardInterrupt`, or `SystemExit`), the
        coroutine is cancelled on the loop and awaited, so its request and connection
        are released before the interruption propagates.
        """
        try:
            self.check_caller(in_running_loop_ok=in_running_loop_ok)
        except BaseException:
            coro.close()
            raise
        box: list[asyncio.Task[Any]] = []
        future = self.submit(_tracked(coro, box))
        try:
            return future.result()
        except BaseException:
            if not future.done():
                self.abandon(future, box)
            raise

    def abandon(self, future: concurrent.futures.Future[Any], box: list[Any]) -> None:
        """Cancel a submitted call and wait (10 s at most) until it has unwound."""
        import asyncio

        async def cancel() -> None:
            if not box:
                future.cancel()
                return
            task = box[0]
            task.cancel()
            await asyncio.wait([task])

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(cancel(), self.loop).result(timeout=10)

    def stop(self) -> None:
        """Cancel what is still running on the loop, stop it, and join the thread."""
        if self.loop.is_closed():
            return
        if self.thread.is_alive():
            with contextlib.suppress(Exception):
                self.submit(self._drain()).result(timeout=10)
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join()
        self.loop.close()

    async def _drain(self) -> None:
        """Cancel every other task and finalize async generators, so none is destroyed
        while pending when the loop closes."""
        await self._cancel_others()
        await self.loop.shutdown_asyncgens()

    async def _cancel_others(self) -> None:
        import asyncio

        current = asyncio.current_task()
        tasks = [t for t in asyncio.all_tasks(self.loop) if t is not current]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    def run_alone(self, coro: Any) -> Any:
        """Cancel what is still running on the loop (open streams, calls from other
        threads), then run `coro`: closing a client ends its open streams as cancelled
        rather than with the errors of connections closed under them."""

        if threading.current_thread() is self.thread:
            coro.close()
            raise RuntimeError("cannot call the sync Client from its own loop thread")

        async def alone() -> Any:
            await self._cancel_others()
            return await coro

        return self.run(alone(), in_running_loop_ok=True)


async def _tracked(coro: Any, box: list[Any]) -> Any:
    """Run `coro`, leaving its task in `box` so that the caller can cancel and await it."""
    import asyncio

    box.append(asyncio.current_task())
    return await coro


_DONE = object()


class _Pump:
    """The loop side of a `SyncStream`: runs the async stream and feeds the queue.

    It holds no reference to its `SyncStream`, so a stream dropped without `close()` is
    collected, and its finalizer cancels the pump instead of leaving the request running.
    """

    __slots__ = ("queue", "task")

    def __init__(self) -> None:
        self.queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.task: asyncio.Task[Any] | None = None

    async def run(self, factory: Callable[[], AsyncStream]) -> None:
        """Feed the stream's events to the queue. A later attempt of the request (a
        retry, a fallback, a schema repair) waits at its `attempt_start` until the
        consumer has read everything before it (`_Gate`): nothing is sent to a provider
        again for a consumer that has left (its `close()` cancels the wait), however far
        ahead of it the pump had read."""
        import asyncio

        self.task = asyncio.current_task()
        loop = asyncio.get_running_loop()
        put = self.queue.put
        first = True
        try:
            stream = factory()
            async with stream:
                async for event in stream:
                    if type(event) is TimingMark and event.name == "attempt_start":
                        if not first:
                            gate = _Gate(loop)
                            put(gate)
                            await gate.opened
                        first = False
                    put(event)
        except BaseException as exc:  # delivered to the consuming thread
            put(_Failure(exc))
            if isinstance(exc, asyncio.CancelledError):
                raise
        else:
            put(_DONE)

    def cancel(self, future: concurrent.futures.Future[Any]) -> None:
        """Cancel the pump (call on the loop thread)."""
        if self.task is not None:
            self.task.cancel()
        else:
            future.cancel()


class SyncStream(_Consumed):
    """A blocking iterator over stream events, fed from the background loop.

    Use it as a context manager so an early exit cancels the underlying request instead
    of leaving it running::

        with client.stream(messages, target="ollama:qwen3:8b") as stream:
            for event in stream:
                ...
            final = stream.result

    Iterating on the client's own loop thread raises `RuntimeError`, and inside a
    running event loop `ConfigError`, at once instead of deadlocking. Ctrl-C while
    waiting for an event closes the stream (its connection released) before the
    `KeyboardInterrupt` propagates. An open stream keeps its client alive.
    """

    def __init__(self, loop: _LoopThread, factory: Callable[[], AsyncStream]) -> None:
        self._loop = loop
        self._factory = factory
        self._state = _Pump()
        self._queue = self._state.queue
        self._pump: concurrent.futures.Future[Any] | None = None
        self._result: Generation | None = None
        self._finished = False
        self._closed = False
        self._owner: Any = None  # the sync Client, kept alive while this stream is

    def _start(self) -> None:
        if self._pump is None:
            self._loop.check_caller()
            if self._loop.loop.is_closed():
                from .._errors import ConfigError

                self._finished = True
                raise ConfigError("this stream's client is closed")
            self._pump = self._loop.submit(self._state.run(self._factory))

    def __iter__(self) -> Iterator[StreamEvent]:
        """Iterate events as they arrive."""
        return self

    def __next__(self) -> StreamEvent:
        """Block for the next event, re-raising loop-side exceptions here."""
        if self._finished:
            raise StopIteration
        self._start()
        q = self._queue
        if q.empty():
            self._loop.check_caller()
        while True:
            try:
                item = q.get()
            except BaseException:  # Ctrl-C while waiting: release the request first
                self.close()
                raise
            if type(item) is not _Gate:
                break
            item.open()  # read up to a later attempt: let it go (`_Pump.run`)
        if item is _DONE:
            self._finished = True
            raise StopIteration
        if type(item) is _Failure:
            self._finished = True
            exc = item.exc
            if _is_cancellation(exc):
                if self._closed:  # close() from another thread: the stream just ends
                    raise StopIteration
                from .._errors import ConfigError

                raise ConfigError("the client was closed while this stream was open") from None
            raise exc
        if type(item) is StreamEnded:
            self._result = item.result
        return item  # type: ignore[no-any-return]

    def __enter__(self) -> SyncStream:
        """Enter a context that cancels the request on exit."""
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Close the stream, cancelling it if it was not fully consumed."""
        self.close()

    def close(self) -> None:
        """Cancel the underlying request and wait until it has released its connection.

        Idempotent, and safe from another thread while one is iterating: that iteration
        then simply ends.
        """
        self._finished = self._closed = True
        pump = self._pump
        if pump is None or pump.done():
            return
        loop = self._loop.loop
        from concurrent.futures import CancelledError

        with contextlib.suppress(RuntimeError):  # the loop is already closed
            loop.call_soon_threadsafe(self._state.cancel, pump)
        # Cancellation is the point; a failure after close is moot.
        with contextlib.suppress(CancelledError, Exception):
            pump.result()

    def __del__(self) -> None:
        # Dropped without close(): cancel the request rather than let it run on.
        pump = getattr(self, "_pump", None)
        if pump is None or pump.done():
            return
        with contextlib.suppress(Exception):
            loop = self._loop.loop
            if not loop.is_closed():
                loop.call_soon_threadsafe(self._state.cancel, pump)

    def collect(self) -> Generation:
        """Drain the stream and return the final result."""
        for _ in self:
            pass
        return self.result


class _Gate:
    """Where the pump waits for its consumer: before a later attempt of the request, which
    goes ahead once the consumer has read up to it (`open`, from the consumer's thread)."""

    __slots__ = ("_loop", "opened")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self.opened: asyncio.Future[None] = loop.create_future()

    def open(self) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is closed: nothing waits
            self._loop.call_soon_threadsafe(self._release)

    def _release(self) -> None:
        if not self.opened.done():  # not when the pump was cancelled meanwhile
            self.opened.set_result(None)


class _Failure:
    __slots__ = ("exc",)

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


def _is_cancellation(exc: BaseException) -> bool:
    import asyncio
    import concurrent.futures

    return isinstance(exc, asyncio.CancelledError | concurrent.futures.CancelledError)
