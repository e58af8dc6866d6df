"""One batch sent as several requests, for protocols that embed one text a request.

Amazon Titan Text Embeddings on Bedrock and some Vertex AI models take a single input per
call, so their adapters answer an `EmbedRequest` batch with one request per text, a few
at a time. The batch keeps the core's rule: every vector in input order, or the first
typed failure raised as it is (the other requests cancelled), never an `ExceptionGroup`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

__all__ = ["DEFAULT_FANOUT", "fan_out"]

DEFAULT_FANOUT = 8
"""Requests of one batch in flight at once."""

_T = TypeVar("_T")
_I = TypeVar("_I")


async def fan_out(
    one: Callable[[_I], Awaitable[_T]], items: Sequence[_I], limit: int = DEFAULT_FANOUT
) -> list[_T]:
    """`one(item)` for every item, at most `limit` at once: the results in item order.

    Raises:
        BaseException: The first failure, as it was raised (the rest are cancelled).
    """
    gate = asyncio.Semaphore(max(1, limit))

    async def gated(item: _I) -> _T:
        async with gate:
            return await one(item)

    tasks = [asyncio.ensure_future(gated(item)) for item in items]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        for task in tasks:
            if task.done() and not task.cancelled():
                error = task.exception()
                if error is not None:
                    raise error
        return [task.result() for task in tasks]
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
