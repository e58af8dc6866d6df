"""Stream handles: `AsyncStream` and its blocking twin `SyncStream`."""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from types import TracebackType
from typing import TYPE_CHECKING, Any

from ._events import StreamEnded, StreamEvent
from ._types import Generation

if TYPE_CHECKING:
    import asyncio
    import concurrent.futures

__all__ = ["AsyncStream", "SyncStream"]


class AsyncStream:
    """An async iterator over stream events, with the final result attached.

    Supports the three consumption shapes the design targets: iterate deltas, watch
    for the first-token mark and then read the result, or ignore events and read the
    result. Use it as an async context manager so that leaving the block early cancels
    the in-flight request.
    """

    def __init__(self, source: AsyncIterator[StreamEvent]) -> None:
        self._source = source
        self._result: Generation | None = None
        self._closed = False

    @property
    def result(self) -> Generation:
        """The final result.

        Raises:
            RuntimeError: If the stream has not been fully consumed yet.
        """
        if self._result is None:
            raise RuntimeError("the stream has not been consumed to completion")
        return self._result

    def __aiter__(self) -> AsyncStream:
        """Iterate stream events."""
        return self

    async def __anext__(self) -> StreamEvent:
        """Yield the next event, capturing the result when the stream ends."""
        if self._closed:
            raise StopAsyncIteration
        event = await self._source.__anext__()
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
        async for _ in self:
            pass
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

    def run(self, coro: Any) -> Any:
        """Run a coroutine on the loop and wait for its result."""
        if threading.current_thread() is self.thread:
            coro.close()
            raise RuntimeError("cannot call the sync Client from its own loop thread")
        return self.submit(coro).result()

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
        import asyncio

        current = asyncio.current_task()
        tasks = [t for t in asyncio.all_tasks(self.loop) if t is not current]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        await self.loop.shutdown_asyncgens()


_DONE = object()


class SyncStream:
    """A blocking iterator over stream events, fed from the background loop.

    Use it as a context manager so an early exit cancels the underlying request instead
    of leaving it running::

        with client.stream(messages, target="ollama:qwen3:8b") as stream:
            for event in stream:
                ...
            final = stream.result
    """

    def __init__(self, loop: _LoopThread, factory: Callable[[], AsyncStream]) -> None:
        self._loop = loop
        self._factory = factory
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._pump: concurrent.futures.Future[Any] | None = None
        self._task: asyncio.Task[Any] | None = None
        self._result: Generation | None = None
        self._finished = False

    def _start(self) -> None:
        if self._pump is None:
            self._pump = self._loop.submit(self._run())

    async def _run(self) -> None:
        import asyncio

        self._task = asyncio.current_task()
        put = self._queue.put
        try:
            stream = self._factory()
            async with stream:
                async for event in stream:
                    put(event)
        except BaseException as exc:  # delivered to the consuming thread
            put(_Failure(exc))
            if isinstance(exc, asyncio.CancelledError):
                raise
        else:
            put(_DONE)

    @property
    def result(self) -> Generation:
        """The final result.

        Raises:
            RuntimeError: If the stream has not been consumed to completion.
        """
        if self._result is None:
            raise RuntimeError("the stream has not been consumed to completion")
        return self._result

    def __iter__(self) -> Iterator[StreamEvent]:
        """Iterate events as they arrive."""
        return self

    def __next__(self) -> StreamEvent:
        """Block for the next event, re-raising loop-side exceptions here."""
        if self._finished:
            raise StopIteration
        self._start()
        item = self._queue.get()
        if item is _DONE:
            self._finished = True
            raise StopIteration
        if type(item) is _Failure:
            self._finished = True
            raise item.exc
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
        """Cancel the underlying request and drain any buffered events."""
        self._finished = True
        pump = self._pump
        if pump is None or pump.done():
            return
        loop = self._loop.loop

        def cancel() -> None:
            if self._task is not None:
                self._task.cancel()
            else:
                pump.cancel()

        from concurrent.futures import CancelledError

        loop.call_soon_threadsafe(cancel)
        # Cancellation is the point; a failure after close is moot.
        with contextlib.suppress(CancelledError, Exception):
            pump.result()

    def collect(self) -> Generation:
        """Drain the stream and return the final result."""
        for _ in self:
            pass
        return self.result


class _Failure:
    __slots__ = ("exc",)

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc
