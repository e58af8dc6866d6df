"""The fault matrix: every fault x streaming/non-streaming x sync/async, over sockets.

Each fault has one documented outcome — a retry, a fallback, a redirect, or a typed
raise — and usage the provider already sent is never lost.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any

import psutil
import pytest

import anyinfer as ai
from anyinfer.fakeservers import FakeServer, Fault, Script, ScriptUsage, Text

SECRET = "sk-matrix-secret-0123456789abcdef"
ROUTE = ai.Route(
    ["primary:m", "backup:m"],
    retry=ai.RetryPolicy(max_retries=1, backoff_base_s=0.001, jitter=0.0),
    content_policy_targets=["safe:m"],
    breaker_threshold=0,
)
GOOD = Script(pieces=(Text("from "), Text("backup")), usage=ScriptUsage(3, 2))
SAFE = Script(pieces=(Text("safe answer"),), usage=ScriptUsage(3, 2))
LONG = tuple(Text(f"word{i} ") for i in range(8))


@dataclass(frozen=True)
class Case:
    name: str
    script: Script | None  # None: connection refused
    outcomes: tuple[str, ...] | None  # the trail on success
    raises: type[ai.AnyInferError] | None = None  # or the typed raise
    text: str = "from backup"
    error_type: str | None = None  # type name of the primary's failure
    stream_only_raise: bool = False  # content was shown only when streaming
    max_response_bytes: int | None = None
    usage_out: int | None = None
    # A non-streaming body cut short is a failure even after the last JSON byte.
    generate_outcomes: tuple[str, ...] | None = None


def status(http: int, **kw: Any) -> Script:
    return Script(fault=Fault("status", status=http, **kw))


CASES = [
    Case("refused", None, ("retried", "failed", "ok"), error_type="ProviderError"),
    Case(
        "disconnect-before-first-byte",
        Script(pieces=LONG, fault=Fault("disconnect", at=0)),
        ("retried", "failed", "ok"),
        error_type="StreamError",
    ),
    Case(
        "disconnect-after-first-byte",
        Script(pieces=LONG, fault=Fault("disconnect", at=0, partial_bytes=7)),
        ("retried", "failed", "ok"),
        error_type="StreamError",
    ),
    Case(
        "disconnect-after-content",
        Script(pieces=LONG, fault=Fault("disconnect", at=4)),
        ("retried", "failed", "ok"),
        raises=ai.StreamError,
        stream_only_raise=True,
        error_type="StreamError",
    ),
    Case(
        "disconnect-after-usage",
        Script(
            pieces=(Text("primary "), Text("done")),
            usage=ScriptUsage(7, 5),
            usage_placement="finish",
            fault=Fault("disconnect", at=99, partial_bytes=0),
            sentinel=False,
        ),
        ("ok",),
        text="primary done",
        usage_out=5,
        generate_outcomes=("retried", "failed", "ok"),
    ),
    Case(
        "401",
        status(401, message=f"Incorrect API key provided: {SECRET}"),
        ("failed", "ok"),
        error_type="AuthenticationError",
    ),
    Case(
        "404",
        status(404, message="The model does not exist", code="model_not_found"),
        ("failed", "ok"),
        error_type="ModelNotFoundError",
    ),
    Case("408", status(408), ("retried", "failed", "ok"), error_type="ProviderTimeoutError"),
    Case(
        "429-retry-after",
        status(429, retry_after=0.05, code="rate_limit_exceeded"),
        ("retried", "failed", "ok"),
        error_type="RateLimitError",
    ),
    Case("500", status(500), ("retried", "failed", "ok"), error_type="ProviderError"),
    Case("503", status(503), ("retried", "failed", "ok"), error_type="OverloadedError"),
    Case(
        "malformed-frame",
        Script(pieces=LONG, fault=Fault("malformed", at=0)),
        ("failed", "ok"),
        error_type="ProtocolError",
    ),
    Case(
        "malformed-after-content",
        Script(pieces=LONG, fault=Fault("malformed", at=3)),
        ("failed", "ok"),
        raises=ai.ProtocolError,
        stream_only_raise=True,
        error_type="ProtocolError",
    ),
    Case(
        "stall",
        Script(pieces=LONG, fault=Fault("stall", at=0)),
        ("retried", "failed", "ok"),
        error_type="ProviderTimeoutError",
    ),
    Case(
        "oversize-body",
        Script(pieces=LONG),
        None,
        raises=ai.AllTargetsFailedError,
        max_response_bytes=60,
        error_type="ResponseTooLargeError",
    ),
    Case(
        "content-filter",
        Script(pieces=(Text("I can't"),), finish_reason="content_filter"),
        ("redirected", "ok"),
        text="safe answer",
    ),
]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def servers(case: Case) -> Iterator[list[ai.ProviderSettings]]:
    with ExitStack() as stack:
        if case.script is None:
            primary_url = f"http://127.0.0.1:{_closed_port()}/v1"
        else:
            script = case.script
            primary = stack.enter_context(FakeServer("openai-chat", lambda _r: script))
            primary_url = primary.base_url
        backup = stack.enter_context(FakeServer("openai-chat", lambda _r: GOOD))
        safe = stack.enter_context(FakeServer("openai-chat", lambda _r: SAFE))
        yield [
            ai.ProviderSettings("openai", alias="primary", api_key=SECRET, base_url=primary_url),
            ai.ProviderSettings("openai", alias="backup", api_key=SECRET, base_url=backup.base_url),
            ai.ProviderSettings("openai", alias="safe", api_key=SECRET, base_url=safe.base_url),
        ]


def run_case(case: Case, providers: list[ai.ProviderSettings], *, stream: bool, sync: bool):
    kw: dict[str, Any] = {
        "route": ROUTE,
        "timeout_s": 0.4,
        "max_response_bytes": case.max_response_bytes,
    }
    events: list[ai.StreamEvent] = []
    if sync:
        with ai.Client(providers, retain_raw=True) as client:
            if not stream:
                return client.generate("hi", **kw), events
            with client.stream("hi", **kw) as s:
                for e in s:
                    events.append(e)
            return s.result, events

    async def go() -> ai.Generation:
        async with ai.AsyncClient(providers, retain_raw=True) as client:
            if not stream:
                return await client.generate("hi", **kw)
            async with client.stream("hi", **kw) as s:
                async for e in s:
                    events.append(e)
            return s.result

    return asyncio.run(go()), events


def _leaks_secret(*objects: object) -> bool:
    return any(SECRET in repr(o) or SECRET in str(o) for o in objects)


@pytest.mark.parametrize("sync", [False, True], ids=["async", "sync"])
@pytest.mark.parametrize("stream", [True, False], ids=["stream", "generate"])
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_fault_matrix(
    case: Case, stream: bool, sync: bool, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    expect_raise = case.raises if (stream or not case.stream_only_raise) else None
    with servers(case) as providers:
        if expect_raise is not None:
            events: list[ai.StreamEvent] = []
            with pytest.raises(expect_raise) as info:
                result, events = run_case(case, providers, stream=stream, sync=sync)
            err = info.value
            trail = err.attempts
            assert trail and trail[0].error is not None
            assert trail[0].error.type_name == case.error_type
            assert not _leaks_secret(err, err.to_info(), trail)
            if isinstance(err, ai.AllTargetsFailedError):
                assert all(a.error is not None for a in trail)
            else:
                # Raised after content: no retry, no fallback, nothing asserting completion.
                assert [a.outcome for a in trail] == ["failed"]
                assert not any(isinstance(e, ai.StreamEnded) for e in events)
        elif not stream and case.generate_outcomes is not None:
            result, events = run_case(case, providers, stream=stream, sync=sync)
            assert [a.outcome for a in result.attempts] == list(case.generate_outcomes)
            assert result.text == "from backup"
        else:
            result, events = run_case(case, providers, stream=stream, sync=sync)
            assert [a.outcome for a in result.attempts] == list(case.outcomes or ())
            assert result.text == case.text
            if case.error_type is not None:
                first = result.attempts[0].error
                assert first is not None and first.type_name == case.error_type
            if case.usage_out is not None:
                assert result.usage.output_tokens == case.usage_out
                assert result.warnings  # usage may be incomplete: the sentinel never came
            assert not _leaks_secret(result, result.raw, result.attempts)
            if stream:
                failed = [e for e in events if isinstance(e, ai.AttemptFailed)]
                assert len(failed) == sum(o in ("retried", "failed") for o in case.outcomes or ())
                assert isinstance(events[-1], ai.StreamEnded)
    assert SECRET not in caplog.text


def test_a_thousand_requests_leak_nothing() -> None:
    proc = psutil.Process()
    threads_before = {t.ident for t in threading.enumerate()}
    fds_before = proc.num_fds()
    scripts: list[Callable[[], Script]] = [
        lambda: GOOD,
        lambda: status(500),
        lambda: status(429, retry_after=0.0),
        lambda: Script(pieces=LONG, fault=Fault("disconnect", at=3)),
        lambda: Script(pieces=LONG, fault=Fault("malformed", at=1)),
    ]
    counter = iter(range(10**6))
    route = ai.Route("p:m", retry=ai.RetryPolicy(max_retries=0), breaker_threshold=0)

    async def go(url: str) -> dict[str, int]:
        tally: dict[str, int] = {}
        async with ai.AsyncClient(
            [ai.ProviderSettings("openai", alias="p", api_key=SECRET, base_url=url)]
        ) as c:
            for i in range(1000):
                try:
                    if i % 2:
                        await c.generate("hi", route=route)
                    else:
                        async with c.stream("hi", route=route) as s:
                            async for e in s:
                                if i % 10 == 4 and isinstance(e, ai.TextDelta):
                                    break  # early exits too
                    key = "ok"
                except ai.AnyInferError as exc:
                    key = type(exc).__name__
                tally[key] = tally.get(key, 0) + 1
            assert {t for t in asyncio.all_tasks() if t is not asyncio.current_task()} == set()
        return tally

    with FakeServer("openai-chat", lambda _r: scripts[next(counter) % len(scripts)]()) as srv:
        tally = asyncio.run(go(srv.base_url))
        port = srv.port
        assert [
            c for c in proc.net_connections(kind="tcp") if c.raddr and c.raddr.port == port
        ] == []
    assert sum(tally.values()) == 1000 and len(tally) >= 3, tally
    assert {t.ident for t in threading.enumerate()} <= threads_before
    assert proc.num_fds() <= fds_before + 2
