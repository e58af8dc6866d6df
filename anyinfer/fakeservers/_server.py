"""`FakeServer`: a scripted provider behind a real HTTP/1.1 socket on 127.0.0.1.

The server runs its own asyncio loop on a background thread, so a test can drive it
from synchronous code, from an async test, or from the synchronous `anyinfer.Client`
(whose own loop lives on another thread). Responses are sent with chunked transfer
encoding and `TCP_NODELAY`, one write per planned `Write`, so the client's reads see the
script's cuts (coalescing by the kernel aside, as on a real network).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from http import HTTPStatus
from types import TracebackType

import httpx

from ._bomb import bomb_rendered
from ._plan import Action, Disconnect, Pause, Stall, Write, answer, plan, request_kind
from ._script import Fault, Rendered
from ._source import RecordedRequest, Scripts, ScriptSource, parse_json_body
from .dialects import Dialect, resolve_dialect

__all__ = ["FakeServer"]

_MAX_HEADER_LINES = 200
_MAX_BODY = 64 * 1024 * 1024
_FLUSH_LIMIT_S = 2.0
# Headers the server owns: it frames every body itself.
_FRAMING_HEADERS = frozenset({"content-length", "transfer-encoding", "connection"})


class _BadRequest(Exception):
    """The bytes received are not an HTTP/1.1 request this server understands."""


class _End(Enum):
    KEEP = "keep"  # the response is complete; read the next request
    CLIENT = "client"  # the client closed the connection
    SERVER = "server"  # this server closed (or must close) the connection


@dataclass(frozen=True, slots=True)
class _Request:
    method: str
    target: str
    path: str
    headers: tuple[tuple[str, str], ...]
    body: bytes

    def header(self, name: str) -> str | None:
        for key, value in self.headers:
            if key == name:
                return value
        return None


class FakeServer:
    """A real HTTP/1.1 server on an ephemeral 127.0.0.1 port, answering from scripts.

    Use it as a context manager (or call `start` and `stop`), then point a client at
    `base_url`::

        with FakeServer("openai-chat", [Script(pieces=(Text("hi"),))]) as srv:
            settings = ai.ProviderSettings("openai", api_key="sk-test", base_url=srv.base_url)
            ...
            srv.assert_all_used()

    Generation requests are answered from the scripts (in order, or by the callable,
    which receives an `httpx.Request` rebuilt from what arrived). A `disconnect` fault
    writes the bytes before it and aborts the connection with no terminating chunk;
    a `stall` fault stops writing and waits until the client closes or the server stops;
    a `status` fault answers with the dialect's error response; a `bomb` fault answers
    with a few KB of `Content-Encoding: gzip, gzip` that decode to 1 GiB. Connections
    are kept alive across requests.

    Strict: a request with no script left, or to an endpoint the dialect does not
    serve, gets an error response in the dialect's shape and makes `assert_all_used`
    fail.

    Args:
        dialect: The dialect, or its registered name.
        scripts: Scripts in serving order, one script, or a callable
            `(httpx.Request) -> Script`.
        models: Model names the models endpoint lists.
        write_delay: Seconds to sleep after each write (0 still yields to the loop).

    Attributes:
        dialect: The dialect in use.
        requests: Every request received, in order.
        connections_opened: Connections accepted so far.
        connections_closed: Connections ended so far, by either side.
        client_closes: Connections the client ended (EOF or reset from its side).
    """

    def __init__(
        self,
        dialect: Dialect | str,
        scripts: Scripts,
        *,
        models: Sequence[str] = ("fake-model",),
        write_delay: float = 0.0,
    ) -> None:
        self.dialect = resolve_dialect(dialect)
        self._source = ScriptSource(scripts)
        self.models = list(models)
        self.write_delay = write_delay
        self.requests: list[RecordedRequest] = []
        self.connections_opened = 0
        self.connections_closed = 0
        self.client_closes = 0
        self._cond = threading.Condition()
        self._port: int | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._startup_error: BaseException | None = None

    def __repr__(self) -> str:
        where = f"port={self._port}" if self._port is not None else "stopped"
        return f"FakeServer({self.dialect.name!r}, {where})"

    # --- public surface ------------------------------------------------------------

    @property
    def port(self) -> int:
        """The listening port.

        Raises:
            RuntimeError: If the server is not running.
        """
        if self._port is None or self._thread is None:
            raise RuntimeError("the fake server is not running; call start() first")
        return self._port

    @property
    def url(self) -> str:
        """The server's root URL, `http://127.0.0.1:PORT`."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        """The URL a client of this dialect uses: root URL plus `dialect.base_path`."""
        return f"{self.url}{self.dialect.base_path}"

    @property
    def served(self) -> int:
        """How many scripts have been served."""
        return self._source.served

    def start(self) -> FakeServer:
        """Start listening and serving on a background thread.

        Returns:
            The server, for chaining.

        Raises:
            RuntimeError: If it is already running.
            OSError: If the socket could not be opened.
        """
        if self._thread is not None:
            raise RuntimeError("the fake server is already running")
        started = threading.Event()
        self._startup_error = None
        thread = threading.Thread(
            target=self._main, args=(started,), name=f"fakeservers-{self.dialect.name}", daemon=True
        )
        thread.start()
        started.wait()
        if self._startup_error is not None:
            thread.join()
            raise self._startup_error
        self._thread = thread
        return self

    def stop(self) -> None:
        """Stop serving: close every connection and the listener, join the thread.

        Idempotent. Stalled responses end here.

        Raises:
            RuntimeError: If called from the server's own thread (a script callable).
        """
        thread = self._thread
        if thread is None:
            return
        if thread is threading.current_thread():
            raise RuntimeError("stop() cannot be called from the server's own thread")
        loop = self._loop
        if loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop already closed
                loop.call_soon_threadsafe(loop.stop)
        thread.join()
        self._thread = None
        self._loop = None
        self._server = None

    def __enter__(self) -> FakeServer:
        """Start the server."""
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Stop the server."""
        self.stop()

    def wait_client_closed(self, n: int = 1, timeout: float = 5.0) -> bool:
        """Wait until clients have closed `n` connections in total.

        A client close is an end of file or reset from the client's side — after a
        response, or in the middle of one (an early exit, a client read timeout).
        Connections this server aborts (a `disconnect` fault, `stop`) do not count.

        Args:
            n: How many client-side closes to wait for, counted since start.
            timeout: Seconds to wait at most.

        Returns:
            Whether the count reached `n` in time.
        """
        with self._cond:
            return self._cond.wait_for(lambda: self.client_closes >= n, timeout)

    def assert_all_used(self) -> None:
        """Fail if any script was never requested or any request was unexpected.

        Raises:
            AssertionError: Describing the leftovers and unexpected requests.
        """
        self._source.assert_all_used()

    # --- loop thread ---------------------------------------------------------------

    def _main(self, started: threading.Event) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            try:
                server = loop.run_until_complete(
                    asyncio.start_server(self._on_connection, "127.0.0.1", 0)
                )
            except BaseException as exc:
                self._startup_error = exc
                started.set()
                return
            self._server = server
            self._port = int(server.sockets[0].getsockname()[1])
            started.set()
            loop.run_forever()
            loop.run_until_complete(self._shutdown(server))
        finally:
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    async def _shutdown(self, server: asyncio.Server) -> None:
        server.close()
        # Connections accepted just now get their handler task started (and
        # registered) on this turn of the loop; cancel them after it.
        await asyncio.sleep(0)
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        await server.wait_closed()

    async def _on_connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        sock = writer.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self._cond:
            self.connections_opened += 1
        by_client = False
        try:
            by_client = await self._serve_connection(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            by_client = True
        except Exception as exc:  # a bug here must not pass silently
            self._source.record_problem(f"fakeservers: the server failed: {exc!r}")
        finally:
            # Count the close first: nothing after this await may be lost if the task
            # is collected or cancelled while it waits.
            with self._cond:
                self.connections_closed += 1
                if by_client:
                    self.client_closes += 1
                self._cond.notify_all()
            writer.transport.abort()
            # Best effort, and the task's last await: the close waiter is cancelled when
            # `stop()` ends the loop's tasks, and a CancelledError escaping here reaches
            # asyncio's connection callback, which logs it as an error.
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await writer.wait_closed()
            if task is not None:
                self._tasks.discard(task)

    async def _serve_connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> bool:
        """Serve requests until the connection ends; whether the client ended it."""
        while True:
            try:
                request = await _read_request(reader)
            except _BadRequest as exc:
                error = self.dialect.render_error(Fault("status", status=400, message=str(exc)))
                await self._send_whole(writer, error, keep_alive=False)
                return False
            if request is None:
                return True
            end = await self._respond(request, reader, writer)
            if end is not _End.KEEP:
                return end is _End.CLIENT

    async def _respond(
        self, request: _Request, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> _End:
        method, path = request.method, request.path
        payload = parse_json_body(request.body)
        self.requests.append(RecordedRequest(method, path, payload))
        keep_alive = (request.header("connection") or "").lower() != "close"
        http_request = httpx.Request(
            method, f"{self.url}{request.target}", headers=request.headers, content=request.body
        )
        dialect = self.dialect
        if dialect.is_models(method, path):
            listing = dialect.models_response(self.models)
            return await self._send_whole(writer, listing, keep_alive=keep_alive)
        kind = request_kind(dialect, method, path)
        if kind is None:
            exc = self._source.unexpected(
                http_request, f"the {dialect.name} dialect does not serve it"
            )
            error = dialect.render_error(
                Fault("status", status=404, message=str(exc), code="fakeservers_unexpected_request")
            )
            return await self._send_whole(writer, error, keep_alive=keep_alive)
        try:
            script = self._source.next(http_request)
        except Exception as exc:  # out of scripts, or the callable failed: answer loudly
            if not isinstance(exc, AssertionError):
                self._source.record_problem(f"fakeservers: choosing a script failed: {exc!r}")
            error = dialect.render_error(
                Fault("status", status=500, message=str(exc), code="fakeservers_no_script")
            )
            return await self._send_whole(writer, error, keep_alive=keep_alive)
        rendered, is_error = answer(dialect, script, method, path, payload, kind=kind)
        if is_error:
            return await self._send_whole(writer, rendered, keep_alive=keep_alive)
        if script.fault is not None and script.fault.kind == "bomb":
            return await self._send_whole(writer, bomb_rendered(rendered), keep_alive=keep_alive)
        return await self._send_planned(
            reader, writer, rendered, plan(rendered, script, dialect), keep_alive=keep_alive
        )

    async def _send_whole(
        self, writer: asyncio.StreamWriter, rendered: Rendered, *, keep_alive: bool
    ) -> _End:
        body = rendered.body
        writer.write(_head(rendered, keep_alive, ("content-length", str(len(body)))) + body)
        await writer.drain()
        return _End.KEEP if keep_alive else _End.SERVER

    async def _send_planned(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        rendered: Rendered,
        actions: list[Action],
        *,
        keep_alive: bool,
    ) -> _End:
        writer.write(_head(rendered, keep_alive, ("transfer-encoding", "chunked")))
        await writer.drain()
        for action in actions:
            if isinstance(action, Write):
                writer.write(b"%x\r\n%b\r\n" % (len(action.data), action.data))
                await writer.drain()
                await asyncio.sleep(self.write_delay)
            elif isinstance(action, Pause):
                await asyncio.sleep(action.seconds)
            elif isinstance(action, Disconnect):
                await _flush(writer)
                writer.transport.abort()  # no terminating chunk: the body is incomplete
                return _End.SERVER
            else:
                assert isinstance(action, Stall)
                return await _wait_for_client_close(reader)
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        return _End.KEEP if keep_alive else _End.SERVER


def _head(rendered: Rendered, keep_alive: bool, framing: tuple[str, str]) -> bytes:
    try:
        phrase = HTTPStatus(rendered.status).phrase
    except ValueError:
        phrase = "Unknown"
    lines = [f"HTTP/1.1 {rendered.status} {phrase}"]
    lines += [f"{k}: {v}" for k, v in rendered.headers if k.lower() not in _FRAMING_HEADERS]
    lines.append(f"{framing[0]}: {framing[1]}")
    lines.append(f"connection: {'keep-alive' if keep_alive else 'close'}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


async def _flush(writer: asyncio.StreamWriter) -> None:
    """Wait until asyncio has handed every buffered byte to the kernel (bounded)."""
    await writer.drain()
    deadline = time.monotonic() + _FLUSH_LIMIT_S
    transport = writer.transport
    while transport.get_write_buffer_size() > 0 and time.monotonic() < deadline:
        await asyncio.sleep(0.001)


async def _wait_for_client_close(reader: asyncio.StreamReader) -> _End:
    """Send nothing; return once the client closes (cancelled when the server stops)."""
    with contextlib.suppress(ConnectionError):
        while await reader.read(65536):
            pass
    return _End.CLIENT


async def _read_request(reader: asyncio.StreamReader) -> _Request | None:
    """Read one request; `None` when the client closed the connection cleanly first.

    Raises:
        _BadRequest: For bytes that are not an HTTP/1.1 request.
        asyncio.IncompleteReadError: If the client closed in the middle of one.
    """
    line = await reader.readline()
    while line in (b"\r\n", b"\n"):  # tolerate stray line ends between requests
        line = await reader.readline()
    if not line:
        return None
    if not line.endswith(b"\n"):
        raise asyncio.IncompleteReadError(line, None)
    parts = line.decode("latin-1").split()
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise _BadRequest(f"bad request line {line[:100]!r}")
    method, target, _version = parts
    headers: list[tuple[str, str]] = []
    while True:
        raw = await reader.readline()
        if not raw.endswith(b"\n"):
            raise asyncio.IncompleteReadError(raw, None)
        if raw in (b"\r\n", b"\n"):
            break
        if len(headers) >= _MAX_HEADER_LINES:
            raise _BadRequest("too many header lines")
        name, sep, value = raw.decode("latin-1").partition(":")
        if not sep:
            raise _BadRequest(f"bad header line {raw[:100]!r}")
        headers.append((name.strip().lower(), value.strip()))
    fields = dict(headers)
    if "chunked" in fields.get("transfer-encoding", "").lower():
        body = await _read_chunked(reader)
    else:
        try:
            length = int(fields.get("content-length", "0"))
        except ValueError:
            raise _BadRequest("bad content-length") from None
        if not 0 <= length <= _MAX_BODY:
            raise _BadRequest(f"content-length {length} out of range")
        body = await reader.readexactly(length) if length else b""
    path = target.split("?", 1)[0]
    return _Request(method.upper(), target, path, tuple(headers), body)


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    body = bytearray()
    while True:
        size_line = await reader.readline()
        if not size_line.endswith(b"\n"):
            raise asyncio.IncompleteReadError(size_line, None)
        try:
            size = int(size_line.split(b";", 1)[0].strip(), 16)
        except ValueError:
            raise _BadRequest(f"bad chunk size {size_line[:40]!r}") from None
        if size == 0:
            while (await reader.readline()) not in (b"\r\n", b"\n", b""):
                pass  # trailers
            return bytes(body)
        if len(body) + size > _MAX_BODY:
            raise _BadRequest("request body too large")
        body += await reader.readexactly(size)
        await reader.readexactly(2)  # the CRLF after the chunk
