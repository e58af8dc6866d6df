"""`finish_uncancelled`: closing work runs to its end in the caller's task."""

from __future__ import annotations

import asyncio

import anyio
import pytest

from anyinfer.adapters import finish_uncancelled


async def _wait_on(fut: asyncio.Future[None], log: list[str]) -> None:
    log.append("start")
    await fut
    log.append("after future")
    for _ in range(3):
        await asyncio.sleep(0)  # bare yields, as anyio's checkpoints are
    log.append("done")


def test_a_cancellation_waits_for_the_work_and_is_raised_after() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        log: list[str] = []
        caller = asyncio.ensure_future(finish_uncancelled(_wait_on(fut, log)))
        await asyncio.sleep(0.01)
        caller.cancel()
        await asyncio.sleep(0.01)
        assert not fut.cancelled(), "the future the work waits on was cancelled"
        assert not caller.done(), "the caller gave up before the work ended"
        fut.set_result(None)
        with pytest.raises(asyncio.CancelledError):
            await caller
        assert log == ["start", "after future", "done"]

    asyncio.run(main())


def test_cancellations_at_bare_yields_are_held_back_too() -> None:
    async def work(log: list[str]) -> None:
        for i in range(20):
            await asyncio.sleep(0)
            log.append(str(i))

    async def main() -> None:
        log: list[str] = []
        caller = asyncio.ensure_future(finish_uncancelled(work(log)))
        for _ in range(5):
            await asyncio.sleep(0)
            caller.cancel()  # again and again, as anyio delivers a scope's cancellation
        with pytest.raises(asyncio.CancelledError):
            await caller
        assert log == [str(i) for i in range(20)]

    asyncio.run(main())


def test_no_task_is_spawned_and_no_cancellation_means_no_error() -> None:
    async def main() -> None:
        before = len(asyncio.all_tasks())
        seen: list[int] = []

        async def work() -> None:
            seen.append(len(asyncio.all_tasks()))
            await asyncio.sleep(0.001)
            seen.append(len(asyncio.all_tasks()))

        await finish_uncancelled(work())
        assert seen == [before, before]

    asyncio.run(main())


def test_the_works_exception_is_raised_unless_a_cancellation_came() -> None:
    async def failing() -> None:
        await asyncio.sleep(0.001)
        raise ValueError("boom")

    async def main() -> None:
        with pytest.raises(ValueError, match="boom"):
            await finish_uncancelled(failing())
        caller = asyncio.ensure_future(finish_uncancelled(failing()))
        await asyncio.sleep(0)
        caller.cancel()
        with pytest.raises(asyncio.CancelledError):
            await caller

    asyncio.run(main())


def test_the_deadline_stops_the_work_once_and_lets_its_cleanup_finish() -> None:
    async def slow(log: list[str]) -> None:
        never: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        try:
            await never
        except asyncio.CancelledError:
            log.append("stopped")
            # Cleanup after the deadline: bare yields and a real wait, neither cut short.
            await asyncio.sleep(0)
            await asyncio.sleep(0.01)
            log.append("cleaned up")
            raise

    async def main() -> None:
        log: list[str] = []
        loop = asyncio.get_running_loop()
        start = loop.time()
        await finish_uncancelled(slow(log), timeout=0.02)  # returns: the deadline is no error
        assert 0.02 <= loop.time() - start < 1.0
        assert log == ["stopped", "cleaned up"]

    asyncio.run(main())


def test_the_deadline_reaches_work_busy_at_bare_yields() -> None:
    async def spinning(log: list[str]) -> None:
        try:
            while True:
                await asyncio.sleep(0)
        except asyncio.CancelledError:
            log.append("stopped")
            raise

    async def main() -> None:
        log: list[str] = []
        await finish_uncancelled(spinning(log), timeout=0.01)
        assert log == ["stopped"]

    asyncio.run(main())


def test_a_deadline_and_a_cancellation_together() -> None:
    async def main() -> None:
        never: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        caller = asyncio.ensure_future(finish_uncancelled(never, timeout=0.02))
        await asyncio.sleep(0)
        caller.cancel()
        with pytest.raises(asyncio.CancelledError):
            await caller
        assert never.cancelled()  # by the deadline, not before it

    asyncio.run(main())


def test_anyio_work_inside_an_anyio_cancel_scope() -> None:
    """An anyio scope cancelled around the close (a user's `fail_after`): the lock work
    httpcore does on release still completes."""
    lock = anyio.Lock()
    log: list[str] = []

    async def release() -> None:
        async with lock:
            await anyio.sleep(0.01)
            log.append("released")

    async def main() -> None:
        with anyio.move_on_after(0.001):
            await finish_uncancelled(release())
        assert log == ["released"]

    anyio.run(main)
