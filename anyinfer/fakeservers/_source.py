"""Where the fake servers get their scripts from, and what they record."""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any, NamedTuple

import httpx

from ._script import Script

__all__ = ["RecordedRequest", "ScriptSource", "Scripts", "UnexpectedRequestError"]

Scripts = Iterable[Script] | Script | Callable[[httpx.Request], Script]
"""Scripts in serving order (one per generation request), one script, or a function
choosing the script for each request."""


class UnexpectedRequestError(AssertionError):
    """A fake server got a request it had no script for (or does not serve)."""


class RecordedRequest(NamedTuple):
    """One request a fake server received.

    Attributes:
        method: HTTP method.
        path: URL path, without the query string.
        json: The parsed JSON body, or `None` when the body was empty or not JSON.
    """

    method: str
    path: str
    json: Any


def parse_json_body(body: bytes) -> Any:
    """The JSON a request body holds, or `None`."""
    if not body:
        return None
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None


_EXHAUSTED = object()
_PEEK = 1000


class ScriptSource:
    """Hands out scripts, strictly: running out fails, and so do leftovers.

    Thread-safe: `FakeServer` draws scripts on its loop thread while a test checks
    `assert_all_used` on its own.
    """

    def __init__(self, scripts: Scripts) -> None:
        self._lock = threading.Lock()
        self._choose: Callable[[httpx.Request], Script] | None = None
        self._iter: Iterator[Script] | None = None
        if isinstance(scripts, Script):
            self._iter = iter((scripts,))
        elif callable(scripts):
            self._choose = scripts
        else:
            self._iter = iter(scripts)
        self.served = 0
        self.problems: list[str] = []

    def next(self, request: httpx.Request) -> Script:
        """The script for `request`.

        Raises:
            UnexpectedRequestError: If the scripts ran out (also recorded, so that
                `assert_all_used` fails even if the error was swallowed).
            TypeError: If the source yields something that is not a `Script`.
        """
        if self._choose is not None:
            script = self._choose(request)
        else:
            assert self._iter is not None
            with self._lock:
                item: Any = next(self._iter, _EXHAUSTED)
                if item is _EXHAUSTED:
                    message = (
                        f"fakeservers: no script left for {request.method} {request.url.path} "
                        f"(all {self.served} scripted responses were already served)"
                    )
                    self.problems.append(message)
                    raise UnexpectedRequestError(message)
                script = item
        if not isinstance(script, Script):
            raise TypeError(f"fakeservers: expected a Script, got {script!r}")
        with self._lock:
            self.served += 1
        return script

    def unexpected(self, request: httpx.Request, why: str) -> UnexpectedRequestError:
        """Record a request the server does not serve, returning the error to raise."""
        message = f"fakeservers: unexpected request {request.method} {request.url.path}: {why}"
        with self._lock:
            self.problems.append(message)
        return UnexpectedRequestError(message)

    def record_problem(self, message: str) -> None:
        """Record a failure for `assert_all_used` to report."""
        with self._lock:
            self.problems.append(message)

    def assert_all_used(self) -> None:
        """Fail if a scripted response was never requested or a request went unanswered.

        A callable source never has leftovers.

        Raises:
            AssertionError: Naming what was left over or unexpected.
        """
        with self._lock:
            problems = list(self.problems)
            if self._iter is not None:
                # Peek a bounded number, so an endless iterable cannot hang the check.
                left = list(itertools.islice(self._iter, _PEEK))
                if left:
                    count = f"{len(left)}" if len(left) < _PEEK else f"at least {_PEEK}"
                    problems.append(
                        f"fakeservers: {count} scripted response(s) were never requested "
                        f"({self.served} served)"
                    )
                    self._iter = itertools.chain(left, self._iter)
        if problems:
            raise AssertionError("; ".join(problems))
