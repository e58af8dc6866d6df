"""`FakeTransport`: a scripted provider inside an httpx client, no sockets involved."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import anyio
import anyio.lowlevel
import httpx

from ._bomb import bomb_rendered
from ._plan import Action, Disconnect, Pause, Stall, Write, answer, plan, request_kind
from ._source import RecordedRequest, Scripts, ScriptSource, parse_json_body
from .dialects import Dialect, resolve_dialect

__all__ = ["FakeTransport"]

DISCONNECT_MESSAGE = "peer closed connection without sending complete message body"
"""What httpx itself says when a server closes mid-body."""


class FakeTransport(httpx.AsyncBaseTransport):
    """An httpx transport that answers like a provider, from scripts.

    Pass it as `ProviderSettings(transport=...)`. Generation requests are answered
    from the scripts in order (or by the callable), rendered by the dialect and
    served through `plan`, so faults and read sizes behave as they would over a
    socket: a disconnect raises `httpx.RemoteProtocolError` mid-body, a stall waits
    for the request's read timeout and raises `httpx.ReadTimeout`. Model listing
    answers with `models`.

    Strict: a generation request with no script left, or a request to an endpoint the
    dialect does not serve, raises `UnexpectedRequestError` (an `AssertionError`) out
    of the client call, and `assert_all_used` fails on leftovers.

    Args:
        dialect: The dialect, or its registered name.
        scripts: Scripts in serving order, one script, or a callable
            `(httpx.Request) -> Script`.
        models: Model names the models endpoint lists.

    Attributes:
        dialect: The dialect in use.
        requests: Every request received, in order.
        closed_early: How many response bodies the client closed before every planned
            action was carried out (an early exit from a stream, for instance).
        models: Model names the models endpoint lists.
    """

    def __init__(
        self,
        dialect: Dialect | str,
        scripts: Scripts,
        *,
        models: Sequence[str] = ("fake-model",),
    ) -> None:
        self.dialect = resolve_dialect(dialect)
        self._source = ScriptSource(scripts)
        self.models = list(models)
        self.requests: list[RecordedRequest] = []
        self.closed_early = 0

    @property
    def served(self) -> int:
        """How many scripts have been served."""
        return self._source.served

    def assert_all_used(self) -> None:
        """Fail if any script was never requested or any request was unexpected.

        Raises:
            AssertionError: Describing the leftovers and unexpected requests.
        """
        self._source.assert_all_used()

    def _note_closed_early(self) -> None:
        self.closed_early += 1

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Answer one request from the scripts.

        Raises:
            UnexpectedRequestError: For a request with no script or no route.
        """
        body = await request.aread()
        payload = parse_json_body(body)
        method, path = request.method.upper(), request.url.path
        self.requests.append(RecordedRequest(method, path, payload))
        dialect = self.dialect
        if dialect.is_models(method, path):
            listing = dialect.models_response(self.models)
            return httpx.Response(listing.status, headers=listing.headers, content=listing.body)
        kind = request_kind(dialect, method, path)
        if kind is None:
            raise self._source.unexpected(request, f"the {dialect.name} dialect does not serve it")
        script = self._source.next(request)
        rendered, is_error = answer(dialect, script, method, path, payload, kind=kind)
        if is_error:
            return httpx.Response(rendered.status, headers=rendered.headers, content=rendered.body)
        timeouts: Any = request.extensions.get("timeout") or {}
        read_timeout = timeouts.get("read") if isinstance(timeouts, dict) else None
        if script.fault is not None and script.fault.kind == "bomb":
            # A stream body, so that httpx does not decode it here.
            rendered = bomb_rendered(rendered)
            actions: list[Action] = [Write(rendered.body)]
        else:
            actions = plan(rendered, script, dialect)
        body_stream = _PlannedStream(actions, request, read_timeout, self._note_closed_early)
        return httpx.Response(rendered.status, headers=rendered.headers, stream=body_stream)


class _PlannedStream(httpx.AsyncByteStream):
    """A response body carrying out a plan, one action per read."""

    def __init__(
        self,
        actions: list[Action],
        request: httpx.Request,
        read_timeout: float | None,
        on_closed_early: Callable[[], None],
    ) -> None:
        self._actions = actions
        self._request = request
        self._read_timeout = read_timeout
        self._on_closed_early = on_closed_early
        self._next = 0
        self._done = False
        self._closed = False

    def __aiter__(self) -> _PlannedStream:
        return self

    async def __anext__(self) -> bytes:
        if self._next >= len(self._actions):
            self._done = True
            raise StopAsyncIteration
        action = self._actions[self._next]
        self._next += 1
        while isinstance(action, Pause):  # never last: a write follows
            await anyio.sleep(action.seconds)
            action = self._actions[self._next]
            self._next += 1
        if isinstance(action, Write):
            if self._next >= len(self._actions):
                self._done = True  # the last bytes are handed over now
            await anyio.lowlevel.checkpoint()  # other tasks run between reads, as on a socket
            return action.data
        if isinstance(action, Disconnect):
            self._done = True
            raise httpx.RemoteProtocolError(DISCONNECT_MESSAGE, request=self._request)
        assert isinstance(action, Stall)
        timeout = self._read_timeout
        if timeout is None:
            await anyio.sleep_forever()  # no read timeout: only cancellation ends a stall
        else:
            await anyio.sleep(timeout)
        self._done = True
        raise httpx.ReadTimeout(
            "timed out waiting for the stalled fake server", request=self._request
        )

    async def aclose(self) -> None:
        """Close the body; closing before the plan is carried out counts as early."""
        if self._closed:
            return
        self._closed = True
        if not self._done:
            self._on_closed_early()
