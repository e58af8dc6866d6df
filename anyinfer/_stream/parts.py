"""Provider-neutral parts: what an adapter yields, and all it yields.

Adapters translate wire bytes into these parts; the core turns them into the public
`StreamEvent` sequence: it times it, orders it and assembles the result. An adapter never
times anything, never marks the first token or the end of a stream, and never assembles
tool calls.

The content and usage parts are the public events themselves (`TextPart` is
`TextDelta`, `ReasoningPart` is `ReasoningDelta`, `ToolCallPart` is `ToolCallDelta`,
`UsagePart` is `UsageUpdate`): the core passes them on as they are, with the timing marks
and the first-token rule around them, so a chunk builds its event once. The other parts
say what only the core reads (the finish reason, the sentinel, raw payloads, warnings,
phases). All are frozen values, compared and hashed by their fields.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from typing import Any, Generic, ParamSpec, TypeVar

from .._values import value_class
from .events import ReasoningDelta, TextDelta, ToolCallDelta, UsageUpdate

__all__ = [
    "batched",
    "Batches",
    "EndPart",
    "FinishPart",
    "Part",
    "PhasesPart",
    "RawPart",
    "ReasoningPart",
    "Served",
    "TextPart",
    "ToolCallPart",
    "UsagePart",
    "WarningPart",
]


TextPart = TextDelta
"""Visible answer text: the public `TextDelta` itself, passed on by the core as it is."""

ReasoningPart = ReasoningDelta
"""Reasoning/thinking text: the public `ReasoningDelta`, passed on as it is."""

ToolCallPart = ToolCallDelta
"""A fragment of the tool call in slot `index`: the public `ToolCallDelta`, passed on as
it is.

A protocol that delivers calls whole yields one part per call with the full JSON
arguments as the fragment.
"""

UsagePart = UsageUpdate
"""A usage report, yielded as soon as the wire carries it: the public `UsageUpdate`,
passed on as it is."""


@value_class
class FinishPart:
    """The provider's finish reason, mapped where the adapter knows the value.

    Known values are `stop`, `length`, `tool_calls`, `content_filter` and `other`; any
    other string is passed through and normalized to `other` by the core.
    """

    reason: str


@value_class
class PhasesPart:
    """Provider-reported sub-timings in milliseconds (e.g. `prefill_ms`)."""

    phases: Mapping[str, float]


@value_class
class RawPart:
    """A provider-native payload, yielded only when the request asks to retain raw."""

    payload: Any


@value_class
class WarningPart:
    """A non-fatal notice for `Generation.warnings`."""

    text: str


@value_class
class EndPart:
    """The protocol's terminal sentinel arrived (`[DONE]`, `message_stop`, `done: true`).

    Yielding it tells the core the response is complete; a response that ends without
    it is truncated.
    """


Part = (
    TextPart
    | ReasoningPart
    | ToolCallPart
    | UsagePart
    | FinishPart
    | PhasesPart
    | RawPart
    | WarningPart
    | EndPart
)
"""Anything an adapter yields."""

END = EndPart()


_T = TypeVar("_T")
_P = ParamSpec("_P")


class Served(Generic[_T]):
    """An async iterator of items that arrive in batches (`next_batch`), served one at a
    time from the current batch: what `Batches` and a router's `Routed` share."""

    __slots__ = ("_batch", "_next")

    def __init__(self) -> None:
        self._batch: Sequence[_T] = ()
        self._next = 0

    async def next_batch(self) -> Sequence[_T]:
        """The next batch (each kind says where from).

        Raises:
            StopAsyncIteration: There are no more.
        """
        raise NotImplementedError

    def __aiter__(self) -> Served[_T]:
        return self

    async def __anext__(self) -> _T:
        """The next item; awaits the next batch only when this one is used up."""
        i, batch = self._next, self._batch
        while i >= len(batch):
            batch = self._batch = await self.next_batch()
            i = 0
        self._next = i + 1
        return batch[i]


class Batches(Served[_T]):
    """An async iterator whose source produces its items in batches.

    The stream layers (the adapter template, the core) do all the synchronous work of
    one network read at once and hand the next layer a list, so a read costs one async
    hop per layer rather than one per layer per item. A layer that knows this type takes
    `source` (the batch generator) directly; anyone else iterates it item by item,
    served from the current batch.

    Args:
        source: The async generator of batches (closed by `aclose`).
    """

    __slots__ = ("source",)

    def __init__(self, source: AsyncGenerator[Sequence[_T], None]) -> None:
        super().__init__()
        self.source = source

    async def next_batch(self) -> Sequence[_T]:
        """The source's next batch."""
        return await self.source.__anext__()

    async def aclose(self) -> None:
        """Close the source (and what it holds open)."""
        self._batch = ()
        await self.source.aclose()


def batched(
    func: Callable[_P, AsyncGenerator[Sequence[_T], None]],
) -> Callable[_P, Batches[_T]]:
    """Make a batch generator function return its batches as `Batches`.

    A stream layer writes its work as an async generator of batches and decorates it,
    so callers get a `Batches` without a second function restating its parameters.

    Args:
        func: The async generator function (a method is fine).

    Returns:
        A function with `func`'s parameters that returns `Batches(func(...))`.
    """

    @functools.wraps(func)
    def start(*args: _P.args, **kwargs: _P.kwargs) -> Batches[_T]:
        return Batches(func(*args, **kwargs))

    return start
