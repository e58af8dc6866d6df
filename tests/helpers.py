"""Helpers shared by the test suite: one definition each, imported where used.

`tests/` is on pythonpath, so a test module writes `from helpers import NO_RETRY, run`.
What lives here:

- `NO_RETRY`: a retry policy that makes one attempt (the adapter alone is under test).
- `run`: run a coroutine to completion (`asyncio.run`).
- `cli`: run the `anyinfer` command in a subprocess (`python -m anyinfer`).
- `f32` / `last_error` / `embed_errors` / `failed_as`: embedding tests' float32
  vectors, the error of a failed call's last attempt, the errors of failing `embed()`
  calls in turn, and the type name a failure surfaced as.
- `sse`: build a server-sent-events body from JSON payloads (`data:` lines, optional
  `event:` lines, comments, numbering, `[DONE]`, line ends).
- `settings` / `settings_for`: `ProviderSettings` reached through a transport, a request
  handler, a loopback server or a URL; `settings_for` binds one provider and its defaults
  for a module.
- `Caller` (and the module-level `generate` / `stream`): one call through the real
  `AsyncClient`, returning the `Generation`, or the events, result and typed error as an
  `Outcome`.
- `QuietHandler` / `http_server`: a stdlib HTTP server on a loopback port, in a thread,
  for tests that need a real socket (cassette recording, pricing mirrors, header echoes).
- `local_engine_script`: `scripts/local_engine.py` (install, find and start the local
  engine the live tests and recordings use), loaded as a module.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
from array import array
from collections.abc import Callable, Coroutine, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, NamedTuple, TypeVar

import httpx
import pytest

import anyinfer as ai

__all__ = [
    "mutated",
    "NO_RETRY",
    "Caller",
    "Outcome",
    "QuietHandler",
    "cli",
    "embed_errors",
    "f32",
    "failed_as",
    "generate",
    "http_server",
    "last_error",
    "local_engine_script",
    "run",
    "settings",
    "settings_for",
    "sse",
    "stream",
]

T = TypeVar("T")

NO_RETRY = ai.RetryPolicy(max_retries=0)
"""One attempt, no retries: one recorded or scripted exchange, one request."""


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run `coro` to completion on a fresh event loop and return its result."""
    return asyncio.run(coro)


def cli(
    *args: str, env: Mapping[str, str] | None = None, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run `python -m anyinfer ARGS` (this environment plus `env`, unbuffered), feeding it
    `stdin`; its exit status, stdout and stderr, within 60 s."""
    return subprocess.run(
        [sys.executable, "-m", "anyinfer", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
        input=stdin,
        timeout=60,
        check=False,
    )


# --- embeddings ----------------------------------------------------------------------------


def f32(values: list[float]) -> array[float]:
    """`values` as float32, the precision of every vector `embed()` returns."""
    return array("f", values)


def last_error(exc: ai.AllTargetsFailedError) -> ai.ErrorInfo:
    """The error of the failed call's last attempt (asserted to be there)."""
    error = exc.attempts[-1].error
    assert error is not None
    return error


def failed_as(exc: ai.AnyInferError) -> str:
    """The type name of what a failed call surfaced as: its last attempt's error, else
    the exception's own type (one refused before anything was sent)."""
    info = exc.attempts[-1].error if exc.attempts else None
    return info.type_name if info is not None else type(exc).__name__


def embed_errors(
    settings: ai.ProviderSettings, count: int, inputs: list[str], route: ai.Route, **kw: Any
) -> list[ai.ErrorInfo]:
    """The last attempt's error of each of `count` `embed()` calls that must fail, a
    client each, so that no breaker opens between them."""
    found = []
    for _ in range(count):
        with ai.Client([settings]) as client:
            with pytest.raises(ai.AllTargetsFailedError) as info:
                client.embed(inputs, route=route, **kw)
        found.append(last_error(info.value))
    return found


# --- wire bodies ---------------------------------------------------------------------------


def sse(
    *payloads: Any,
    done: bool = True,
    comments: Sequence[bytes] = (),
    eol: str = "\n",
    event_lines: bool = False,
    numbered: str | None = None,
) -> bytes:
    """A server-sent-events body: one `data:` event per JSON payload.

    Args:
        *payloads: The events' JSON payloads, in order.
        done: End with OpenAI's `data: [DONE]` sentinel.
        comments: Raw lines (e.g. `b": ping\\n\\n"`) put before the first event.
        eol: The line end (`"\\r\\n"` for servers that use CRLF framing).
        event_lines: Put an `event: <payload["type"]>` line before each `data:` line.
        numbered: Add this field to each payload with its position (0, 1, ...), e.g.
            the Responses API's `sequence_number`.

    Returns:
        The body bytes.
    """
    end = eol.encode()
    out = b"".join(comments)
    for n, payload in enumerate(payloads):
        if numbered is not None:
            payload = {**payload, numbered: n}
        if event_lines:
            out += b"event: " + str(payload["type"]).encode() + end
        out += b"data: " + json.dumps(payload).encode() + end + end
    return out + (b"data: [DONE]" + end + end if done else b"")


# --- a real loopback server ----------------------------------------------------------------


class QuietHandler(BaseHTTPRequestHandler):
    """A request handler that logs nothing, with `reply` for a whole response."""

    def reply(self, status: int, body: bytes, content_type: str, **headers: str) -> None:
        """Send `status` with `body` (its type and length) and any further headers
        (`x_echo="..."` is sent as `x-echo`)."""
        self.send_response(status)
        self.send_header("content-type", content_type)
        for name, value in headers.items():
            self.send_header(name.replace("_", "-"), value)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        """Log nothing: a test's output is its assertions."""


@contextmanager
def http_server(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """Serve `handler` on a free loopback port from a daemon thread.

    Yields:
        The server's root URL, `http://127.0.0.1:<port>`; the server is shut down and its
        thread joined on exit.
    """
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def local_engine_script() -> Any:
    """`scripts/local_engine.py`, loaded as a module (it is a script, not a package)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "scripts" / "local_engine.py"
    spec = importlib.util.spec_from_file_location("local_engine", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# --- provider settings ---------------------------------------------------------------------


def settings(provider: str, via: Any = None, /, **kw: Any) -> ai.ProviderSettings:
    """`ProviderSettings` for `provider`, reached through `via`.

    Args:
        provider: The provider id (`"openai"`, `"anthropic"`, ...).
        via: How requests reach the provider: an httpx transport (used as is), a request
            handler (wrapped in an `httpx.MockTransport`), a loopback server or anything
            with a `base_url` (its URL), a URL string, or `None` (the provider's own).
        **kw: Further `ProviderSettings` fields.

    Returns:
        The settings.
    """
    if isinstance(via, httpx.AsyncBaseTransport | httpx.BaseTransport):
        kw["transport"] = via
    elif isinstance(via, str):
        kw["base_url"] = via
    elif via is not None and isinstance(getattr(via, "base_url", None), str):
        kw["base_url"] = via.base_url
    elif callable(via):
        kw["transport"] = httpx.MockTransport(via)
    elif via is not None:
        raise TypeError(f"cannot reach a provider through {via!r}")
    return ai.ProviderSettings(provider, **kw)


def settings_for(
    provider: str, /, *, alias_first: bool = False, **defaults: Any
) -> Callable[..., ai.ProviderSettings]:
    """`settings` bound to one provider and its defaults, for one test module.

    The bound function is `(via=None, provider=None, /, **kw)`: `provider` switches to
    another provider id (the defaults belong to the bound one and are then left out),
    `kw` overrides the defaults. With `alias_first` it is `(alias, via, /, **kw)`, for
    modules that name each instance.

    Args:
        provider: The provider id.
        alias_first: Take the instance alias as the first argument.
        **defaults: `ProviderSettings` fields every call gets.

    Returns:
        The bound function.
    """

    def bound(via: Any = None, other: str | None = None, /, **kw: Any) -> ai.ProviderSettings:
        if other is not None and other != provider:
            return settings(other, via, **kw)
        return settings(provider, via, **{**defaults, **kw})

    def named(alias: str, via: Any = None, /, **kw: Any) -> ai.ProviderSettings:
        return settings(provider, via, **{**defaults, "alias": alias, **kw})

    return named if alias_first else bound


# --- calls through the client --------------------------------------------------------------


class Outcome(NamedTuple):
    """What one streamed call produced: unpack it, or read it by name.

    Attributes:
        events: Every event the stream yielded, in order.
        result: The `Generation`, or `None` when the call failed.
        error: The typed error the call raised, or `None`.
    """

    events: list[ai.StreamEvent]
    result: ai.Generation | None
    error: BaseException | None


Via = ai.AsyncClient | ai.ProviderSettings | Iterable[ai.ProviderSettings] | Any


class Caller:
    """Calls through the real `AsyncClient` (core and adapter), one per call.

    Args:
        make: Builds the settings from what a test passes (a transport, a server, ...)
            and the `settings` mapping of the call; default: the test passes settings or
            an `AsyncClient` itself.
        route: The route every call gets unless it names its own `route` or `target`.
        by_target: The second positional argument is the target (a one-attempt route to
            it, default `target`), not the messages.
        target: The default target when `by_target`.
    """

    def __init__(
        self,
        make: Callable[..., ai.ProviderSettings] | None = None,
        *,
        route: ai.Route | None = None,
        by_target: bool = False,
        target: str | None = None,
    ) -> None:
        self.make = make
        self.route = route
        self.by_target = by_target
        self.target = target

    def _client(
        self, via: Via, options: Mapping[str, Any] | None, retain_raw: bool
    ) -> ai.AsyncClient:
        if isinstance(via, ai.AsyncClient):
            return via
        if isinstance(via, ai.ProviderSettings):
            return ai.AsyncClient([via], retain_raw=retain_raw)
        if isinstance(via, list | tuple) and all(isinstance(s, ai.ProviderSettings) for s in via):
            return ai.AsyncClient(list(via), retain_raw=retain_raw)
        if self.make is None:
            raise TypeError(f"no settings builder for {via!r}")
        return ai.AsyncClient([self.make(via, **(options or {}))], retain_raw=retain_raw)

    def _call(self, arg: Any, kw: dict[str, Any]) -> Any:
        """The messages of the call; puts the route into `kw`."""
        messages = "hi"
        if self.by_target:
            target = arg if arg is not None else self.target
            if target is not None and "route" not in kw and "target" not in kw:
                kw["route"] = ai.Route(target, retry=NO_RETRY)
        elif arg is not None:
            messages = arg
        if self.route is not None and "route" not in kw and "target" not in kw:
            kw["route"] = self.route
        return kw.pop("messages", messages)

    def generate(
        self,
        via: Via,
        arg: Any = None,
        /,
        *,
        retain_raw: bool = False,
        settings: Mapping[str, Any] | None = None,
        **kw: Any,
    ) -> ai.Generation:
        """One `generate` call; typed errors propagate."""
        messages = self._call(arg, kw)
        client = self._client(via, settings, retain_raw)

        async def go() -> ai.Generation:
            async with client:
                return await client.generate(messages, **kw)

        return asyncio.run(go())

    def stream(
        self,
        via: Via,
        arg: Any = None,
        /,
        *,
        retain_raw: bool = False,
        settings: Mapping[str, Any] | None = None,
        **kw: Any,
    ) -> Outcome:
        """One streamed call; its events, result, and typed error (captured)."""
        messages = self._call(arg, kw)
        client = self._client(via, settings, retain_raw)
        events: list[ai.StreamEvent] = []

        async def go() -> Outcome:
            async with client:
                try:
                    async with client.stream(messages, **kw) as st:
                        async for event in st:
                            events.append(event)
                except ai.AnyInferError as exc:
                    return Outcome(events, None, exc)
                return Outcome(events, st.result, None)

        return asyncio.run(go())


_DEFAULT = Caller()
generate = _DEFAULT.generate
"""`generate(client_or_settings, messages="hi", **kw)`: one call, typed errors propagate."""
stream = _DEFAULT.stream
"""`stream(client_or_settings, messages="hi", **kw)`: one streamed call, as an `Outcome`."""


def metric_points(reader: Any) -> dict[str, list[Any]]:
    """An OpenTelemetry `InMemoryMetricReader`'s data points, by metric name."""
    found: dict[str, list[Any]] = {}
    for resource in reader.get_metrics_data().resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                found.setdefault(metric.name, []).extend(metric.data.data_points)
    return found


def mutated(usual: Any, paths: Sequence[tuple[Any, ...]], values: Any) -> Any:
    """A Hypothesis strategy for JSON values near `usual`: copies with up to three
    changes, each at one of `paths` (keys and indices from the top; `()` is the whole
    value), which is either removed (a key) or replaced by a value drawn from `values`.

    About a quarter of the draws are `usual` unchanged; a change whose place an earlier
    change removed is skipped.
    """
    import copy

    from hypothesis import strategies as st

    @st.composite
    def build(draw: Any) -> Any:
        value = copy.deepcopy(usual)
        for _ in range(draw(st.integers(0, 3))):
            path = draw(st.sampled_from(list(paths)))
            remove = draw(st.booleans())
            new = None if remove else draw(values)
            if not path:
                value = new
                continue
            parent = value
            for step in path[:-1]:
                try:
                    parent = parent[step]
                except (KeyError, IndexError, TypeError):
                    parent = None
                    break
            last = path[-1]
            if isinstance(parent, dict) and remove:
                parent.pop(last, None)
            elif isinstance(parent, dict) or (
                isinstance(parent, list) and isinstance(last, int) and last < len(parent)
            ):
                parent[last] = new
        return value

    return build()
