"""`Client`: the synchronous facade over one background event loop and an `AsyncClient`."""

from __future__ import annotations

import contextlib
import inspect
import threading
import warnings
import weakref
from collections.abc import Callable, Coroutine, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

from .._errors import ConfigError
from .._messages import MessagesInput
from .._request import DEFAULT_MAX_ROUNDS
from .._stream.generation import SyncStream, _is_cancellation, _LoopThread
from .._types import Generation, ResolvedTarget, Target
from .aclient import AsyncClient, call_keywords
from .route import Route

if TYPE_CHECKING:
    from .._knowledge.capabilities import ModelCapabilities
    from .._knowledge.catalog import Catalog
    from .._knowledge.pricing import PricingTable
    from .._local.store import ModelStore
    from .._telemetry import Observer

__all__ = ["Client"]

_T = TypeVar("_T")
_P = ParamSpec("_P")
_S = TypeVar("_S")


def _signed_as(
    method: Callable[Concatenate[AsyncClient, _P], Any],
) -> Callable[[Callable[Concatenate[_S, ...], _T]], Callable[Concatenate[_S, _P], _T]]:
    """Give a `Client` method the parameters of its `AsyncClient` counterpart.

    Type checkers see them through `ParamSpec`, `inspect.signature` and the docs through
    `__signature__` (the return annotation stays the method's own), so the two cannot
    drift. The method is returned as it is: it takes `*args, **kwargs` and passes them
    on unchanged, so the facade holds no argument logic and adds no call layer.

    Args:
        method: The `AsyncClient` method whose parameters are given.
    """

    def sign(call: Callable[Concatenate[_S, ...], _T]) -> Callable[Concatenate[_S, _P], _T]:
        fields: Any = call
        returns = inspect.signature(call).return_annotation
        fields.__signature__ = inspect.signature(method).replace(return_annotation=returns)
        return call

    return sign


def _blocking(
    method: Callable[Concatenate[AsyncClient, _P], Coroutine[Any, Any, _T]],
    summary: str,
    *notes: str,
) -> Callable[Concatenate[Client, _P], _T]:
    """The `Client` method that runs an `AsyncClient` coroutine method on the client's loop.

    It has the async method's signature (`_signed_as`) and forwards its arguments
    unchanged.

    Args:
        method: The `AsyncClient` method, looked up on the client's `AsyncClient` at
            each call by name.
        summary: The first line of the method's docstring.
        *notes: Paragraphs about what differs in the blocking form.
    """
    name = method.__name__

    def call(self: Client, /, *args: Any, **kwargs: Any) -> _T:
        coro: Coroutine[Any, Any, _T] = getattr(self._async, name)(*args, **kwargs)
        return self._call(coro)

    return _twin(call, method, summary, notes)


def _direct(
    method: Callable[Concatenate[AsyncClient, _P], _T], summary: str, *notes: str
) -> Callable[Concatenate[Client, _P], _T]:
    """Like `_blocking`, for an `AsyncClient` method that is not a coroutine (it runs on
    the calling thread)."""
    name = method.__name__

    def call(self: Client, /, *args: Any, **kwargs: Any) -> _T:
        result: _T = getattr(self._async, name)(*args, **kwargs)
        return result

    return _twin(call, method, summary, notes)


def _twin(
    call: Callable[Concatenate[Client, ...], _T],
    method: Callable[Concatenate[AsyncClient, _P], Any],
    summary: str,
    notes: tuple[str, ...],
) -> Callable[Concatenate[Client, _P], _T]:
    """`call` named, documented and signed as `method`'s `Client` form."""
    name = method.__name__
    fields: Any = call
    fields.__name__ = name
    fields.__qualname__ = f"Client.{name}"
    # It returns what the async method does (its result, for a coroutine method).
    fields.__annotations__["return"] = inspect.signature(method).return_annotation
    paragraphs = (
        summary,
        f"The blocking form of `AsyncClient.{name}`, with the same signature: see it for "
        "the arguments, the result and the errors.",
        *notes,
    )
    fields.__doc__ = "\n\n".join(paragraphs)
    return _signed_as(method)(call)


class Client:
    """The synchronous inference client.

    A thin facade: every method schedules work on one background event loop that owns
    the real `AsyncClient`. Safe to call from multiple threads, and concurrent requests
    still overlap on the loop. Arguments are identical to `AsyncClient`.

    Not for async code: a blocking call made inside a running event loop raises
    `ConfigError` (use `AsyncClient` there), and one made on the client's own loop thread
    (an async tool, an observer) raises `RuntimeError`. Ctrl-C during a call cancels its
    request and waits until the connection is released before `KeyboardInterrupt`
    propagates. A client garbage-collected without `close()` is closed then, with a
    `ResourceWarning`.

    Every method has its `AsyncClient` counterpart's signature, so type checkers and
    IDEs see the real keywords, and forwards its arguments unchanged: the facade holds no
    argument logic of its own. Most are made from the async method itself (`_blocking`);
    `__init__` and `stream` (which returns a `SyncStream`) take its parameters
    (`_signed_as`). So the two signatures cannot drift, and only `run_tools` restates
    its own (the spec gives `tools` another type); a test compares them with the spec
    page.
    """

    # `anyinfer` loads this module on first use of `anyinfer.Client` (async code never
    # needs it); the public name holds however the class is reached.
    __module__ = "anyinfer"

    @_signed_as(AsyncClient.__init__)
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._loop = _LoopThread()
        try:
            self._async = AsyncClient(*args, **kwargs)
        except BaseException:
            self._loop.stop()
            raise
        self._closed = False
        # A client dropped without close() still releases its thread and connections.
        # The callback holds the loop and the async client, never `self`.
        self._finalizer = weakref.finalize(self, _release_dropped, self._loop, self._async)
        self._finalizer.atexit = False

    def __enter__(self) -> Client:
        """Enter a context that closes the client on exit."""
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Close the client on context exit."""
        self.close()

    def close(self) -> None:
        """Close adapters, stop the background loop, and join its thread."""
        if self._closed:
            return
        self._closed = True
        self._finalizer.detach()
        try:
            self._loop.run_alone(self._async.aclose())
        finally:
            self._loop.stop()

    def _call(self, coro: Coroutine[Any, Any, _T]) -> _T:
        if self._closed:
            coro.close()
            raise ConfigError("this client is closed")
        try:
            result: _T = self._loop.run(coro)
        except BaseException as exc:
            # `close()` from another thread cancels the calls still running: say so, as a
            # stream open at that moment does, not with a bare `CancelledError`.
            if self._closed and _is_cancellation(exc):
                raise ConfigError("the client was closed while this call was running") from None
            raise
        return result

    @property
    def catalog(self) -> Catalog | None:
        """The alias catalog in force, if any."""
        return self._async.catalog

    @property
    def pricing_table(self) -> PricingTable:
        """The pricing table behind `Usage.cost_usd`."""
        return self._async.pricing_table

    def subscribe(self, observer: Observer, *, payloads: bool = False) -> None:
        """Register a telemetry observer. See `AsyncClient.subscribe`."""
        self._async.subscribe(observer, payloads=payloads)

    def unsubscribe(self, observer: Observer) -> None:
        """Remove a telemetry observer."""
        self._async.unsubscribe(observer)

    def capabilities(self, target: Target) -> ModelCapabilities:
        """What a target's model can do, with provenance. See `AsyncClient.capabilities`."""
        return self._async.capabilities(target)

    budget = _direct(
        AsyncClient.budget,
        "Compute the context budget for a request without sending it.",
        "Pure computation: it runs directly on the calling thread.",
    )

    models = _blocking(AsyncClient.models, "List a provider's models.")

    health = _blocking(AsyncClient.health, "Probe a provider's readiness.")

    def resolve(self, target: Target) -> ResolvedTarget:
        """Resolve a target string without issuing a request."""
        return self._async.resolve(target)

    @property
    def model_store(self) -> ModelStore:
        """The store acquired model weights live in."""
        return self._async.model_store

    local_catalog = _blocking(AsyncClient.local_catalog, "Browse the local model catalog.")

    acquire_model = _blocking(
        AsyncClient.acquire_model,
        "Download a catalog model's weights.",
        "The progress sink is invoked from the background loop thread, so it must not "
        "block and must not call back into this client.",
    )

    installed_models = _blocking(
        AsyncClient.installed_models, "Every model acquired into this client's store."
    )

    locate_model = _blocking(AsyncClient.locate_model, "Find an acquired model on disk.")

    remove_model = _blocking(AsyncClient.remove_model, "Delete an acquired model.")

    generate = _blocking(AsyncClient.generate, "Generate a single result.")

    embed = _blocking(AsyncClient.embed, "Embed texts, one vector per input in input order.")

    rerank = _blocking(AsyncClient.rerank, "Rank documents by relevance to a query, best first.")

    def run_tools(
        self,
        messages: MessagesInput,
        *,
        tools: Sequence[Any],
        target: Target | None = None,
        route: Route | Target | Sequence[Target] | None = None,
        max_rounds: int = DEFAULT_MAX_ROUNDS,
        **kwargs: Any,
    ) -> Generation:
        """Generate, dispatching tools until the model answers.

        See `AsyncClient.run_tools`. Sync tools run in worker threads; async tools run on
        the client's background loop. (Restated: the spec gives `tools` another type
        here than on `AsyncClient`.)
        """
        return self._call(self._async.run_tools(**call_keywords(locals())))

    @_signed_as(AsyncClient.stream)
    def stream(self, *args: Any, **kwargs: Any) -> SyncStream:
        """Start a streaming generation, returning a blocking iterator.

        See `AsyncClient.stream`, whose arguments it takes. Use the result as a context
        manager so that leaving the block early cancels the in-flight request. Arguments
        are checked at once.
        """
        if self._closed:
            raise ConfigError("this client is closed")
        source = self._async.stream(*args, **kwargs)
        handle = SyncStream(self._loop, lambda: source)
        handle._owner = self  # `client.stream(...)` on a temporary client keeps it alive
        return handle


def _release_dropped(loop: _LoopThread, client: AsyncClient) -> None:
    """Finalizer of a `Client` collected without `close()`: warn, then close it.

    Runs wherever the last reference died. On the loop's own thread (an async tool
    dropping the last reference) it cannot wait for that loop, so a helper thread does
    the closing.
    """
    warnings.warn(
        "an anyinfer.Client was garbage-collected without close(); its loop thread and "
        "connections were released now (use `with ai.Client(...)` or call close())",
        ResourceWarning,
        stacklevel=2,
    )

    def release() -> None:
        try:
            with contextlib.suppress(Exception):  # best effort: the loop stops regardless
                loop.run_alone(client.aclose())
        finally:
            loop.stop()

    if threading.current_thread() is loop.thread:
        threading.Thread(target=release, name="anyinfer-release", daemon=True).start()
    else:
        release()
