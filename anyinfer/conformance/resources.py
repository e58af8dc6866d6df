"""The `resources` check: what many requests through one long-lived client leave behind.

One client per path (`AsyncClient` or `Client`) with a small connection pool serves more
early exits, cancellations and faults than the pool has connections — leaving streams
through their context manager and keeping the handle, or breaking out and dropping it;
cancelling a consumer (a task, `asyncio.timeout`, a task cancelled while the stream is
closing, `close()` from another thread); disconnects, stalls, error statuses, malformed
frames and a decompression bomb. Afterwards:

- no pool slot is held: as many streams as the pool has connections start at once;
- sequential requests reuse one connection (the body is drained after the sentinel);
- file descriptors, threads and asyncio tasks are back where they started (psutil);
- memory is steady: after a warm-up, two more phases of the same requests (plain,
  failing and abandoned ones) leave no objects behind per request (CPython's count of
  allocated blocks, `sys.getallocatedblocks`);
- the bomb (a few KB that decode to 1 GiB) failed typed, with memory bounded near
  `max_response_bytes`.

An adapter that embeds or reranks gets the same check of `embed()` and `rerank()`
(`check_resources(..., method="embed")`): more error statuses, cut, stalled and
malformed answers (and, for embeddings, answers an entry short) than the pool has
connections, and on `AsyncClient` as many calls cancelled mid-answer; then no held slot,
one reused connection, fds, threads and tasks at their baseline, and steady memory over
phases of clean, cut and failing calls.

Run it with `pytest --anyinfer-conformance --anyinfer-resources`.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import gc
import itertools
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

import anyinfer as ai
from anyinfer.fakeservers import EmbedShape, FakeServer, Fault, Script, ScriptUsage, Text

from .checker import RESOURCES, Violation

if TYPE_CHECKING:
    import httpx

    from .runner import Harness

__all__ = [
    "BOMB_LIMIT_BYTES",
    "BOMB_RSS_SLACK_BYTES",
    "POOL_SIZE",
    "ROUNDS",
    "STEADY_BLOCKS_PER_REQUEST",
    "STEADY_REQUESTS",
    "STEADY_ROUNDS",
    "STEADY_WARMUP",
    "SLOW_TIMEOUT_SLACK_S",
    "ResourceMethod",
    "check_resources",
]

POOL_SIZE = 2
"""The pool the check runs with (the provider option `max_connections`)."""
ROUNDS = POOL_SIZE + 1
"""How many of each kind of early exit, cancellation and fault: more than the pool."""
REQUEST_TIMEOUT_S = 3.0
"""Timeout of ordinary requests (and of a pool wait: a held slot shows up as a
`PoolExhaustedError` this long after the request)."""
STALL_TIMEOUT_S = 0.25
"""Timeout of the stall faults."""
START_LIMIT_S = 1.5
"""How long `POOL_SIZE` concurrent streams may take to show their first content."""
SETTLE_S = 3.0
"""How long fds, threads and tasks may take to return to their baseline."""
BOMB_LIMIT_BYTES = 4 * 1024 * 1024
"""`max_response_bytes` of the bomb request."""
BOMB_RSS_SLACK_BYTES = 96 * 1024 * 1024
"""How far resident memory may grow while the bomb is read (it decodes to 1 GiB)."""
STEADY_ROUNDS = 25
"""Rounds of each steady-memory phase, each round `STEADY_REQUESTS` requests."""
STEADY_WARMUP = 2
"""Steady phases run before the two measured ones, for whatever the first requests
load or cache once (the type attribute cache is cleared before each count, see
`_Run.steady_blocks`)."""
_STEADY_ROUND: tuple[tuple[str, str], ...] = (
    ("generate", "plain"),
    ("generate", "cut"),
    ("stream", "failing"),
    ("stream left early and dropped", "plain"),
    ("stream", "plain"),
)
"""One steady round, `(request, script)` each: a generate, one whose connection is cut,
a stream that fails with a 500, a stream left early and dropped, and a whole stream
(scripts: `_steady_scripts`)."""
STEADY_REQUESTS = len(_STEADY_ROUND)
"""Requests in one steady round."""
STEADY_BLOCKS_PER_REQUEST = 0.5
"""How many allocated blocks a steady request may leave behind, in the better of the two
measured phases. A client that keeps anything of each request (an exception, a record, a
buffer's holder) leaves one or more; a clean one leaves none, give or take a cache
filling up (about 0.02 on the built-in adapters)."""

SLOW_TIMEOUT_SLACK_S = 1.0
"""How much longer than its `timeout_s` (`STALL_TIMEOUT_S`) a stalled `embed()` or
`rerank()` call may take: one that takes the provider's `REQUEST_TIMEOUT_S` instead was
not bounded by its own."""
CANCEL_AFTER_S = 0.1
"""When a cancelled call (`asyncio.timeout` around it) is cancelled, its answer stalled."""
CONNECT_CANCELS = 200
"""How many generations the async path cancels early, between sending and the first
byte (`asyncio.timeout` of a fraction of a clean one's time to first content), to land
some cancellations while the connection is being opened: each one a leaked pool slot
in a client on httpcore 1.0's pool without `reclaim_orphans` (8 in 300 cancellations at
0 to 2 ms, where it was measured; without the reclaim this scenario failed every
built-in adapter, in two runs of two)."""
CONNECT_CANCEL_STEPS = 40
"""The delays of those cancellations: this many evenly spaced from 0 to the measured
time to first content, over and over."""
ResourceMethod = Literal["generate", "embed", "rerank"]
"""What a resources check calls: streams and generations, `embed()`, or `rerank()`."""
_RETRIEVAL_STEADY_ROUND = ("plain", "cut", "failing")
"""One steady round of `embed()` or `rerank()` calls: a clean one, one whose connection
is cut mid-body, one failing with a 500 (scripts: `_retrieval_scripts`)."""

_CONTENT = (ai.TextDelta, ai.ReasoningDelta, ai.ToolCallDelta)
_PROMPT = "Resource check: answer as scripted."


@dataclass(slots=True)
class _Served:
    """The script the shared server answers with next (`FakeServer` takes a callable)."""

    harness: Harness
    script: Script = field(default_factory=Script)
    staged: bool = False

    def __call__(self, request: httpx.Request) -> Script:
        import json

        if not self.staged:
            return self.script
        try:
            payload = json.loads(request.content) if request.content else None
        except ValueError:
            payload = None
        dialect = self.harness.dialect
        streamed = dialect.request_wants_stream(request.method, request.url.path, payload)
        return self.harness.staged(self.script, streamed=streamed)


@dataclass(slots=True)
class _Report:
    """Violations found, with the script that was being served."""

    found: list[Violation] = field(default_factory=list)
    script: Script | None = None

    def add(self, message: str, script: Script | None = None) -> None:
        violation = Violation(RESOURCES, message)
        if violation not in self.found:
            self.found.append(violation)
        if self.script is None and script is not None:
            self.script = script


class _Abort(Exception):
    """The pool is exhausted: every later request would only wait for it."""


def _pool_exhausted(exc: BaseException) -> bool:
    import httpx

    # httpx's own `PoolTimeout`: an adapter that sends by itself and lets it through.
    if isinstance(exc, ai.PoolExhaustedError | httpx.PoolTimeout):
        return True
    if isinstance(exc, ai.AllTargetsFailedError) and exc.attempts:
        error = exc.attempts[-1].error
        return error is not None and error.type_name == "PoolExhaustedError"
    return False


def _base_script() -> Script:
    return Script(pieces=tuple(Text(f"w{i} ") for i in range(12)), usage=ScriptUsage(5, 12))


def _faults(base: Script) -> list[tuple[str, Script, float]]:
    """`(name, script, timeout)` of the faults served, `ROUNDS` rounds in all."""
    kinds: list[tuple[str, Script, float]] = [
        ("disconnect", replace(base, fault=Fault("disconnect", at=3, partial_bytes=2)), 0.0),
        ("stall", replace(base, fault=Fault("stall", at=2)), STALL_TIMEOUT_S),
        ("status 500", replace(base, fault=Fault("status", status=500, message="boom")), 0.0),
        ("status 429", replace(base, fault=Fault("status", status=429, message="slow")), 0.0),
        ("malformed", replace(base, fault=Fault("malformed", at=2)), 0.0),
    ]
    return kinds * ROUNDS


class _Sampler:
    """Samples this process's resident memory on a thread, keeping the peak."""

    def __init__(self) -> None:
        import psutil

        self._proc = psutil.Process()
        self.start = self.peak = self._proc.memory_info().rss
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="anyinfer-rss", daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.002):
            self.peak = max(self.peak, self._proc.memory_info().rss)

    def __enter__(self) -> _Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self._proc.memory_info().rss)

    @property
    def growth(self) -> int:
        return self.peak - self.start


@dataclass(frozen=True, slots=True)
class _Snapshot:
    fds: int
    threads: frozenset[int]
    tasks: int

    @classmethod
    def take(cls, tasks: int) -> _Snapshot:
        import psutil

        return cls(
            psutil.Process().num_fds(),
            frozenset(t.ident for t in threading.enumerate() if t.ident is not None),
            tasks,
        )

    def leftovers(self, now: _Snapshot) -> list[str]:
        problems = []
        if now.fds > self.fds:
            problems.append(f"{now.fds - self.fds} more open file descriptors ({now.fds})")
        extra = now.threads - self.threads
        if extra:
            names = sorted(t.name for t in threading.enumerate() if t.ident in extra)
            problems.append(f"{len(extra)} more threads: {', '.join(names)}")
        if now.tasks > self.tasks:
            problems.append(f"{now.tasks - self.tasks} more asyncio tasks on the client's loop")
        return problems


def check_resources(
    harness: Harness, *, sync: bool, method: ResourceMethod = "generate"
) -> tuple[list[Violation], Script | None]:
    """Run the resources check for one path and one kind of call.

    Args:
        harness: The harness of the adapter under test.
        sync: Check `Client` (else `AsyncClient`).
        method: `"generate"`: streams and generations (the scenarios above);
            `"embed"` or `"rerank"`: that call's faults, cancellations and steady
            phases (`_RetrievalRun`), for an adapter that serves it.

    Returns:
        The violations (empty when the guarantee held) and the script being served when
        the first one was found.
    """
    report = _Report()
    served = _Served(harness)
    with FakeServer(harness.dialect, served) as server:
        settings = harness.settings(base_url=server.base_url)
        options = {**settings.options, "max_connections": POOL_SIZE}
        settings = replace(settings, options=options, timeout_s=REQUEST_TIMEOUT_S)
        target = f"{harness.entry.name}:{_model(harness, method)}"
        # No retries (each script is served once) and no breaker: a fault must not stop
        # later requests from reaching the server.
        route = ai.Route(target, retry=ai.RetryPolicy(max_retries=0), breaker_threshold=0)
        with contextlib.suppress(_Abort):
            if method == "generate":
                run = _SyncRun if sync else _AsyncRun
                run(harness, server, served, settings, route, report).go()
            else:
                retrieval = _RetrievalRun(harness, server, served, settings, route, report)
                retrieval.calls = (_SyncCalls if sync else _AsyncCalls)(
                    settings, harness, method, route
                )
                retrieval.go()
    return report.found, report.script


def _model(harness: Harness, method: ResourceMethod) -> str:
    """The model a `method` call asks for (the one its fake answers are scripted for)."""
    if method == "embed":
        from .embeddings import MODEL as EMBED_MODEL

        profile = harness.dialect.embedding
        return profile.model if profile is not None else EMBED_MODEL
    if method == "rerank":
        from .reranking import MODEL

        return MODEL
    return _base_script().model


class _Run(abc.ABC):
    """What both paths share: the scenarios, in order, and the checks after them."""

    def __init__(
        self,
        harness: Harness,
        server: FakeServer,
        served: _Served,
        settings: ai.ProviderSettings,
        route: ai.Route,
        report: _Report,
    ) -> None:
        self.harness = harness
        self.server = server
        self.served = served
        self.settings = settings
        self.route = route
        self.report = report
        self.kept: list[Any] = []  # stream handles kept alive until the end
        self.requests = 0

    def serve(self, script: Script, *, staged: bool = False) -> Script:
        self.served.script, self.served.staged = script, staged
        self.requests += 1
        return script

    def check_pool(self, name: str, script: Script, exc: BaseException) -> None:
        """Stop at the first request that found the pool exhausted: a slot is held."""
        if _pool_exhausted(exc):
            self.report.add(
                f"{name}: the connection pool (max_connections={POOL_SIZE}) was exhausted at "
                f"request {self.requests}: earlier early exits, cancellations or faults left "
                f"a pool slot held ({type(exc).__name__}: {exc})",
                script,
            )
            raise _Abort

    def typed(self, name: str, script: Script, exc: BaseException | None) -> None:
        if exc is not None:
            self.check_pool(name, script, exc)
        if exc is not None and not isinstance(exc, ai.AnyInferError):
            self.report.add(f"{name}: raised {type(exc).__name__}: {exc!r}", script)

    def leftovers(self, baseline: _Snapshot, tasks: Callable[[], int]) -> list[str]:
        """What is still there that was not at the start (called until it settles)."""
        gc.collect()
        return baseline.leftovers(_Snapshot.take(tasks()))

    def after(self, problems: list[str], opened_before: int) -> None:
        """Report the leftovers, and whether sequential requests reused a connection."""
        for problem in problems:
            self.report.add(f"after the run, compared with its start: {problem}")
        opened = self.server.connections_opened - opened_before
        if opened > 1:
            self.report.add(
                f"sequential requests opened {opened} connections, not one: the connection "
                "is not reused (is the body drained after the protocol's end marker?)",
                self.served.script,
            )

    def bomb_verdict(self, sampler: _Sampler, exc: BaseException | None, script: Script) -> None:
        if exc is not None:
            self.check_pool("the decompression bomb", script, exc)
        if not isinstance(exc, ai.ResponseTooLargeError | ai.AllTargetsFailedError):
            what = "succeeded" if exc is None else f"raised {type(exc).__name__}: {exc}"
            self.report.add(
                f"a decompression bomb under max_response_bytes={BOMB_LIMIT_BYTES} {what}, "
                "not ResponseTooLargeError",
                script,
            )
        elif isinstance(exc, ai.AllTargetsFailedError):
            error = exc.attempts[-1].error if exc.attempts else None
            if error is None or error.type_name != "ResponseTooLargeError":
                kind = error.type_name if error is not None else "nothing"
                self.report.add(
                    f"a decompression bomb failed as {kind}, not ResponseTooLargeError", script
                )
        if sampler.growth > BOMB_RSS_SLACK_BYTES:
            self.report.add(
                f"reading a decompression bomb with max_response_bytes={BOMB_LIMIT_BYTES} grew "
                f"resident memory by {sampler.growth // (1024 * 1024)} MB (the body is decoded "
                "before its size is checked)",
                script,
            )

    def steady_blocks(self) -> int:
        """Allocated blocks now, after a collection, without the server's request log
        (which keeps every request: the check's own record, not the client's)."""
        gc.collect()
        self.server.requests.clear()
        # CPython's type attribute cache keeps a reference to each name it caches, by
        # the name's address: names built at run time (asyncio's and anyio's reprs build
        # some on every new connection) fill its 4096 entries over a few hundred
        # requests, a slowly shrinking growth of up to 1.8 blocks a request that is the
        # interpreter's, not the client's. Cleared, a built-in adapter's requests leave
        # about 0.02 blocks each from the first phase on.
        sys._clear_type_cache()
        return sys.getallocatedblocks()

    @staticmethod
    def steady_round() -> list[tuple[str, Script]]:
        """One steady round's requests (`_STEADY_ROUND`), each with the script it is
        served."""
        base = _base_script()
        scripts = {
            "plain": base,
            "cut": replace(base, fault=Fault("disconnect", at=3, partial_bytes=2)),
            "failing": replace(base, fault=Fault("status", status=500, message="boom")),
        }
        return [(kind, scripts[script]) for kind, script in _STEADY_ROUND]

    def steady_phases(
        self, requests: list[tuple[str, Script]], make: Callable[[str, Script], object]
    ) -> list[int]:
        """Run the steady-memory phases on a blocking path: `STEADY_WARMUP` + 2 phases of
        `STEADY_ROUNDS` rounds of `requests` (`(kind, script)` each, made by `make`), and
        the blocks counted after each (`_AsyncRun.steady` is the awaiting twin)."""
        marks = []
        for _phase in range(STEADY_WARMUP + 2):
            for _ in range(STEADY_ROUNDS):
                for kind, script in requests:
                    self.serve(script)
                    try:
                        make(kind, script)
                    except BaseException as exc:
                        self.steady_outcome(kind, script, exc)
            marks.append(self.steady_blocks())
        return marks

    def steady_outcome(self, kind: str, script: Script, exc: BaseException | None) -> None:
        """Judge one steady request: a typed failure is what a faulted script is for; a
        held pool slot ends the check, as everywhere (`typed`)."""
        if exc is None:
            return
        name = f"a steady {kind}"
        self.typed(name, script, exc)
        if script.fault is None and isinstance(exc, ai.AnyInferError):
            self.report.add(f"{name} failed: {type(exc).__name__}: {exc}", script)

    def steady_verdict(
        self,
        marks: list[int],
        per_round: int = STEADY_REQUESTS,
        kinds: str = "plain, failing, and left early and dropped",
    ) -> None:
        """Judge the blocks counted after each steady phase (the warm-up's first), of
        phases of `STEADY_ROUNDS` rounds of `per_round` requests (`kinds` of them)."""
        marks = marks[STEADY_WARMUP - 1 :]
        if not marks[0]:
            return  # an interpreter that does not count its blocks
        requests = STEADY_ROUNDS * per_round
        left = min(b - a for a, b in itertools.pairwise(marks)) / requests
        if left > STEADY_BLOCKS_PER_REQUEST:
            self.report.add(
                f"memory is not steady: each of {requests} more requests ({kinds}) left "
                f"{left:.1f} allocated blocks behind, in each of two phases after a warm-up "
                f"(allowed: {STEADY_BLOCKS_PER_REQUEST}); something keeps every request's "
                "objects (an exception, a record, a cache without a bound)",
                self.served.script,
            )

    def start_verdict(self, when: str, script: Script, exc: Exception | None, took: float) -> None:
        """Judge `POOL_SIZE` concurrent stream starts: all must start, and at once."""
        if exc is not None:
            self.check_pool(f"{when}: {POOL_SIZE} concurrent streams", script, exc)
            self.report.add(
                f"{when}: {POOL_SIZE} concurrent streams could not all start "
                f"(max_connections={POOL_SIZE}): {type(exc).__name__}: {exc} — a pool slot "
                "is held",
                script,
            )
        elif took > START_LIMIT_S:
            self.report.add(
                f"{when}: {POOL_SIZE} concurrent streams took {took:.2f}s to start "
                "(a pool slot was held)",
                script,
            )

    @abc.abstractmethod
    def go(self) -> None:
        """Run every scenario through this path's client."""


def _loop_tasks(client: ai.Client) -> Callable[[], int]:
    """A count of the unfinished tasks on a sync `Client`'s background loop."""
    loop = getattr(getattr(client, "_loop", None), "loop", None)

    def tasks() -> int:
        return len(asyncio.all_tasks(loop)) if loop is not None else 0

    return tasks


class _SyncRun(_Run):
    def go(self) -> None:
        with ai.Client([self.settings], registry=self.harness._providers) as client:
            self.client = client
            self.concurrent_starts("warm-up")
            self.full_stream()
            tasks = _loop_tasks(client)
            baseline = _Snapshot.take(tasks())
            base = _base_script()
            for _ in range(ROUNDS):
                self.early_exit(base, staged=True, keep=True)
                self.early_exit(base, staged=False, keep=True)
                self.early_exit(base, staged=True, keep=False)
                self.close_from_another_thread(base)
            for name, script, timeout in _faults(base):
                self.fault(name, script, timeout)
            self.bomb(base)
            self.concurrent_starts("after the run")
            opened = self.server.connections_opened
            for _ in range(3):
                self.full_stream()
                self.generate()
            deadline = time.monotonic() + SETTLE_S
            while (problems := self.leftovers(baseline, tasks)) and time.monotonic() < deadline:
                time.sleep(0.05)
            self.after(problems, opened)
            self.steady()
            self.kept.clear()

    def stream(self, script: Script, timeout: float = 0.0, **kw: Any) -> ai.SyncStream:
        return self.client.stream(
            _PROMPT, route=self.route, timeout_s=timeout or REQUEST_TIMEOUT_S, **kw
        )

    def full_stream(self) -> None:
        script = self.serve(_base_script())
        try:
            self.stream(script).collect()
        except Exception as exc:
            self.check_pool("a plain stream", script, exc)
            self.report.add(f"a plain stream failed: {type(exc).__name__}: {exc}", script)

    def generate(self) -> None:
        script = self.serve(_base_script())
        try:
            self.client.generate(_PROMPT, route=self.route, timeout_s=REQUEST_TIMEOUT_S)
        except Exception as exc:
            self.check_pool("a plain generate", script, exc)
            self.report.add(f"a plain generate failed: {type(exc).__name__}: {exc}", script)

    def early_exit(self, base: Script, *, staged: bool, keep: bool) -> None:
        script = self.serve(base, staged=staged)
        name = f"early exit ({'stalled' if staged else 'finite'} stream, " + (
            "with, handle kept)" if keep else "no with, handle dropped)"
        )
        try:
            stream = self.stream(script)
            if keep:
                self.kept.append(stream)
                with stream:
                    for event in stream:
                        if isinstance(event, _CONTENT):
                            break
            else:
                for event in stream:
                    if isinstance(event, _CONTENT):
                        break
                del stream
        except BaseException as exc:
            self.typed(name, script, exc)

    def steady(self) -> None:
        """The steady-memory phases (`steady_phases` of `_STEADY_ROUND`)."""
        self.steady_verdict(self.steady_phases(self.steady_round(), self.steady_request))

    def steady_request(self, kind: str, script: Script) -> None:
        """Make one of `_STEADY_ROUND`'s requests."""
        if kind == "generate":
            self.client.generate(_PROMPT, route=self.route, timeout_s=REQUEST_TIMEOUT_S)
        elif kind == "stream":
            self.stream(script).collect()
        else:  # left early: break out at the first content, drop the stream (no `with`)
            for event in self.stream(script):
                if isinstance(event, _CONTENT):
                    break

    def close_from_another_thread(self, base: Script) -> None:
        script = self.serve(base, staged=True)
        stream = self.stream(script)
        started = threading.Event()
        outcome: list[BaseException | None] = []

        def consume() -> None:
            try:
                for event in stream:
                    if isinstance(event, _CONTENT):
                        started.set()
                outcome.append(None)
            except BaseException as exc:
                outcome.append(exc)
            finally:
                started.set()

        thread = threading.Thread(target=consume, name="anyinfer-resources-consumer")
        thread.start()
        started.wait(REQUEST_TIMEOUT_S)
        stream.close()
        thread.join(REQUEST_TIMEOUT_S * 2)
        if thread.is_alive():
            self.report.add("close() from another thread did not end the iteration", script)
        elif outcome and outcome[0] is not None:
            exc = outcome[0]
            self.check_pool("close() from another thread", script, exc)
            self.report.add(
                "close() from another thread mid-stream raised "
                f"{type(exc).__name__}: {exc!r} in the consuming thread (it should just end)",
                script,
            )

    def fault(self, name: str, script: Script, timeout: float) -> None:
        self.serve(script)
        try:
            self.stream(script, timeout).collect()
        except BaseException as exc:
            self.typed(name, script, exc)

    def bomb(self, base: Script) -> None:
        script = self.serve(replace(base, fault=Fault("bomb")))
        error: BaseException | None = None
        with _Sampler() as sampler:
            try:
                self.stream(script, max_response_bytes=BOMB_LIMIT_BYTES).collect()
            except BaseException as exc:
                error = exc
        self.bomb_verdict(sampler, error, script)

    def concurrent_starts(self, when: str) -> None:
        script = self.serve(_base_script(), staged=True)
        streams = [self.stream(script) for _ in range(POOL_SIZE)]
        start = time.monotonic()
        try:
            for stream in streams:
                for event in stream:
                    if isinstance(event, _CONTENT):
                        break
        except Exception as exc:
            self.start_verdict(when, script, exc, 0.0)
        else:
            self.start_verdict(when, script, None, time.monotonic() - start)
        finally:
            for stream in streams:
                stream.close()


class _AsyncRun(_Run):
    def go(self) -> None:
        asyncio.run(self.main())

    async def main(self) -> None:
        async with ai.AsyncClient([self.settings], registry=self.harness._providers) as client:
            self.client = client
            await self.concurrent_starts("warm-up")
            await self.full_stream()
            current = asyncio.current_task()

            def tasks() -> int:
                return len([t for t in asyncio.all_tasks() if t is not current])

            baseline = _Snapshot.take(tasks())
            base = _base_script()
            for _ in range(ROUNDS):
                await self.early_exit(base, staged=True, keep=True)
                await self.early_exit(base, staged=False, keep=True)
                await self.early_exit(base, staged=True, keep=False)
                await self.cancel_task(base, while_closing=False)
                await self.cancel_task(base, while_closing=True)
                await self.timeout_around(base)
            for name, script, timeout in _faults(base):
                await self.fault(name, script, timeout)
            await self.cancels_while_connecting(base)
            await self.bomb(base)
            await self.concurrent_starts("after the run")
            opened = self.server.connections_opened
            for _ in range(3):
                await self.full_stream()
                await self.generate()
            deadline = time.monotonic() + SETTLE_S
            while (problems := self.leftovers(baseline, tasks)) and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            self.after(problems, opened)
            await self.steady()
            self.kept.clear()

    def stream(self, script: Script, timeout: float = 0.0, **kw: Any) -> ai.AsyncStream:
        return self.client.stream(
            _PROMPT, route=self.route, timeout_s=timeout or REQUEST_TIMEOUT_S, **kw
        )

    async def full_stream(self) -> None:
        script = self.serve(_base_script())
        try:
            await self.stream(script).collect()
        except Exception as exc:
            self.check_pool("a plain stream", script, exc)
            self.report.add(f"a plain stream failed: {type(exc).__name__}: {exc}", script)

    async def generate(self) -> None:
        script = self.serve(_base_script())
        try:
            await self.client.generate(_PROMPT, route=self.route, timeout_s=REQUEST_TIMEOUT_S)
        except Exception as exc:
            self.check_pool("a plain generate", script, exc)
            self.report.add(f"a plain generate failed: {type(exc).__name__}: {exc}", script)

    async def early_exit(self, base: Script, *, staged: bool, keep: bool) -> None:
        script = self.serve(base, staged=staged)
        name = f"early exit ({'stalled' if staged else 'finite'} stream, " + (
            "async with, handle kept)" if keep else "no async with, handle dropped)"
        )
        try:
            stream = self.stream(script)
            if keep:
                self.kept.append(stream)
                async with stream:
                    async for event in stream:
                        if isinstance(event, _CONTENT):
                            break
            else:
                async for event in stream:
                    if isinstance(event, _CONTENT):
                        break
                del stream
                gc.collect()
                for _ in range(5):
                    await asyncio.sleep(0)  # the async generator finalizer runs here
        except BaseException as exc:
            self.typed(name, script, exc)

    async def steady(self) -> None:
        """The steady-memory phases (`STEADY_ROUNDS` rounds each)."""
        requests = self.steady_round()
        marks = []
        for _phase in range(STEADY_WARMUP + 2):
            for _ in range(STEADY_ROUNDS):
                for kind, script in requests:
                    self.serve(script)
                    try:
                        await self.steady_request(kind, script)
                    except BaseException as exc:
                        self.steady_outcome(kind, script, exc)
            for _ in range(5):
                await asyncio.sleep(0)  # the dropped streams' finalizers run here
            marks.append(self.steady_blocks())
        self.steady_verdict(marks)

    async def steady_request(self, kind: str, script: Script) -> None:
        """Make one of `_STEADY_ROUND`'s requests."""
        if kind == "generate":
            await self.client.generate(_PROMPT, route=self.route, timeout_s=REQUEST_TIMEOUT_S)
        elif kind == "stream":
            await self.stream(script).collect()
        else:  # left early: break out at the first content, drop the stream (no `async with`)
            async for event in self.stream(script):
                if isinstance(event, _CONTENT):
                    break

    async def cancel_task(self, base: Script, *, while_closing: bool) -> None:
        script = self.serve(base, staged=True)
        started = asyncio.Event()
        task: asyncio.Task[None] | None = None

        async def consume() -> None:
            async with self.stream(script) as stream:
                async for event in stream:
                    if isinstance(event, _CONTENT):
                        if while_closing:
                            # Cancelled as the context manager closes the stream.
                            assert task is not None
                            asyncio.get_running_loop().call_soon(task.cancel)
                            break
                        started.set()

        task = asyncio.create_task(consume())
        if not while_closing:
            waiter = asyncio.create_task(started.wait())
            await asyncio.wait(
                (task, waiter), timeout=REQUEST_TIMEOUT_S, return_when=asyncio.FIRST_COMPLETED
            )
            waiter.cancel()
            task.cancel()
        name = "a consumer task cancelled " + ("while closing" if while_closing else "mid-stream")
        try:
            await task
        except asyncio.CancelledError:
            pass
        except BaseException as exc:
            self.typed(name, script, exc)

    async def timeout_around(self, base: Script) -> None:
        script = self.serve(base, staged=True)
        try:
            async with asyncio.timeout(0.1), self.stream(script) as stream:
                async for _ in stream:
                    pass
        except TimeoutError:
            pass
        except BaseException as exc:
            self.typed("asyncio.timeout around the iteration", script, exc)

    async def cancels_while_connecting(self, base: Script) -> None:
        """`CONNECT_CANCELS` generations cancelled before their first byte, at delays
        spread over a clean one's time to first content, so that some cancellations
        land while a new connection is opened (every cancelled one closes its
        connection, so each next one opens its own). A pool that keeps a connection so
        cancelled shows as a held slot in the concurrent starts after the run."""
        script = self.serve(base, staged=True)
        took = []
        for _ in range(3):
            start = time.monotonic()
            try:
                async with self.stream(script) as stream:
                    async for event in stream:
                        if isinstance(event, _CONTENT):
                            break
            except BaseException as exc:
                self.typed("a stream before the cancellations while connecting", script, exc)
                return
            took.append(time.monotonic() - start)
        first = sorted(took)[1]
        for i in range(CONNECT_CANCELS):
            delay = first * (i % CONNECT_CANCEL_STEPS) / CONNECT_CANCEL_STEPS
            try:
                async with asyncio.timeout(delay):
                    await self.client.generate(
                        _PROMPT, route=self.route, timeout_s=REQUEST_TIMEOUT_S
                    )
            except TimeoutError:
                pass
            except BaseException as exc:
                self.typed("a generate cancelled while connecting", script, exc)

    async def fault(self, name: str, script: Script, timeout: float) -> None:
        self.serve(script)
        try:
            await self.stream(script, timeout).collect()
        except BaseException as exc:
            self.typed(name, script, exc)

    async def bomb(self, base: Script) -> None:
        script = self.serve(replace(base, fault=Fault("bomb")))
        error: BaseException | None = None
        with _Sampler() as sampler:
            try:
                await self.stream(script, max_response_bytes=BOMB_LIMIT_BYTES).collect()
            except BaseException as exc:
                error = exc
        self.bomb_verdict(sampler, error, script)

    async def concurrent_starts(self, when: str) -> None:
        script = self.serve(_base_script(), staged=True)
        streams = [self.stream(script) for _ in range(POOL_SIZE)]

        async def first_content(stream: ai.AsyncStream) -> None:
            async for event in stream:
                if isinstance(event, _CONTENT):
                    return

        start = time.monotonic()
        try:
            await asyncio.gather(*(first_content(s) for s in streams))
        except Exception as exc:
            self.start_verdict(when, script, exc, 0.0)
        else:
            self.start_verdict(when, script, None, time.monotonic() - start)
        finally:
            for stream in streams:
                await stream.aclose()


# --- embed() and rerank() ----------------------------------------------------------------


def _retrieval_scripts(harness: Harness, method: ResourceMethod) -> dict[str, Script]:
    """The answers a retrieval run serves, by name: a clean one and each fault (and, for
    `embed`, an answer an entry short, where the dialect can send one)."""
    clean = Script(embedding=EmbedShape()) if method == "embed" else Script()
    scripts = {
        "plain": clean,
        "cut": replace(clean, fault=Fault("disconnect", partial_bytes=20)),
        "failing": replace(clean, fault=Fault("status", status=500, message="boom")),
        "status 429": replace(clean, fault=Fault("status", status=429, message="slow")),
        "stall": replace(clean, fault=Fault("stall")),
        "malformed": replace(clean, fault=Fault("malformed", at=1)),
    }
    profile = harness.dialect.embedding
    if method == "embed" and profile is not None and "missing_entry" in profile.breaks:
        scripts["an entry short"] = Script(embedding=EmbedShape(broken="missing_entry"))
    return scripts


class _Calls(abc.ABC):
    """One long-lived client on one path, making one kind of retrieval call.

    Args:
        settings: The adapter's instance, pointed at the fake server.
        harness: The harness (its providers registry).
        method: `"embed"` or `"rerank"`.
        route: The route of every call.
    """

    def __init__(
        self,
        settings: ai.ProviderSettings,
        harness: Harness,
        method: ResourceMethod,
        route: ai.Route,
    ) -> None:
        self.method = method
        self.what = f"{method}()"
        self.route = route
        self.args: tuple[Any, ...] = (
            (["resource check", "second input", "third input"],)
            if method == "embed"
            else ("resource check", ["first document", "second document", "third document"])
        )
        self.open(settings, harness._providers)

    def kwargs(self, timeout: float) -> dict[str, Any]:
        return {"route": self.route, "timeout_s": timeout}

    @abc.abstractmethod
    def open(self, settings: ai.ProviderSettings, registry: Any) -> None:
        """Make the client."""

    @abc.abstractmethod
    def call(self, timeout: float) -> None:
        """Make one call (raising what it raises)."""

    @abc.abstractmethod
    def tasks(self) -> int:
        """Unfinished asyncio tasks on the client's loop."""

    @abc.abstractmethod
    def pause(self, seconds: float) -> None:
        """Let the client's loop run for a moment."""

    @abc.abstractmethod
    def close(self) -> None:
        """Close the client."""


class _SyncCalls(_Calls):
    def open(self, settings: ai.ProviderSettings, registry: Any) -> None:
        self.client = ai.Client([settings], registry=registry)
        self._tasks = _loop_tasks(self.client)

    def call(self, timeout: float) -> None:
        getattr(self.client, self.method)(*self.args, **self.kwargs(timeout))

    def tasks(self) -> int:
        return self._tasks()

    def pause(self, seconds: float) -> None:
        time.sleep(seconds)

    def close(self) -> None:
        self.client.close()


class _AsyncCalls(_Calls):
    """`AsyncClient` calls, each run to completion on one event loop kept for the client
    (`run_until_complete`, not `asyncio.Runner.run`, whose SIGINT handler swap on every
    run allocates as much as the call it wraps)."""

    def open(self, settings: ai.ProviderSettings, registry: Any) -> None:
        self.loop = asyncio.new_event_loop()
        self.client = ai.AsyncClient([settings], registry=registry)

    async def _call(self, timeout: float) -> None:
        await getattr(self.client, self.method)(*self.args, **self.kwargs(timeout))

    def call(self, timeout: float) -> None:
        self.loop.run_until_complete(self._call(timeout))

    def cancel(self) -> None:
        """Make one call and cancel it while its answer stalls: `asyncio.timeout` around
        it, `CANCEL_AFTER_S` in (a `Client` call cannot be cancelled by its caller)."""

        async def cancelled() -> None:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(CANCEL_AFTER_S):
                    await self._call(REQUEST_TIMEOUT_S)

        self.loop.run_until_complete(cancelled())

    def tasks(self) -> int:
        return len(asyncio.all_tasks(self.loop))

    def pause(self, seconds: float) -> None:
        self.loop.run_until_complete(asyncio.sleep(seconds))

    def close(self) -> None:
        try:
            self.loop.run_until_complete(self.client.aclose())
            self.loop.run_until_complete(self.loop.shutdown_asyncgens())
        finally:
            self.loop.close()


class _RetrievalRun(_Run):
    """The resources check of `embed()` or `rerank()` (`_Calls`): more faults and
    cancellations than the pool has connections, then no held slot, one reused
    connection, fds, threads and tasks back at their baseline, and steady memory."""

    calls: _Calls
    """The client making the calls (set by `check_resources`, from the run's settings
    and route)."""

    def go(self) -> None:
        calls = self.calls
        try:
            scripts = _retrieval_scripts(self.harness, calls.method)
            self.plain(scripts["plain"])  # the warm-up: a connection, lazy imports
            baseline = _Snapshot.take(calls.tasks())
            faults = [name for name in scripts if name != "plain"]
            for _ in range(ROUNDS):
                for name in faults:
                    self.fault(name, scripts[name])
                if isinstance(calls, _AsyncCalls):
                    self.cancelled(calls, scripts["stall"])
            opened = self.server.connections_opened
            for _ in range(3):
                self.plain(scripts["plain"])
            deadline = time.monotonic() + SETTLE_S
            while (problems := self.leftovers(baseline, calls.tasks)) and (
                time.monotonic() < deadline
            ):
                calls.pause(0.05)
            self.after(problems, opened)
            self.steady(scripts)
        finally:
            calls.close()

    def plain(self, script: Script) -> None:
        self.serve(script)
        try:
            self.calls.call(REQUEST_TIMEOUT_S)
        except Exception as exc:
            name = f"a plain {self.calls.what}"
            self.check_pool(name, script, exc)
            self.report.add(f"{name} failed: {type(exc).__name__}: {exc}", script)

    def fault(self, name: str, script: Script) -> None:
        self.serve(script)
        stalls = script.fault is not None and script.fault.kind == "stall"
        start = time.monotonic()
        try:
            self.calls.call(STALL_TIMEOUT_S if stalls else REQUEST_TIMEOUT_S)
        except Exception as exc:
            self.typed(f"{self.calls.what} answered with {name}", script, exc)
        took = time.monotonic() - start
        if stalls and took > STALL_TIMEOUT_S + SLOW_TIMEOUT_SLACK_S:
            self.report.add(
                f"a stalled {self.calls.what} with timeout_s={STALL_TIMEOUT_S} took {took:.1f}s "
                f"(the provider's timeout_s is {REQUEST_TIMEOUT_S}): the call's timeout_s "
                "does not bound its request (pass the request to HTTPAdapter.send: "
                "send(..., request=request))",
                script,
            )

    def cancelled(self, calls: _AsyncCalls, script: Script) -> None:
        self.serve(script)
        try:
            calls.cancel()
        except Exception as exc:
            self.typed(f"{self.calls.what} cancelled while its answer stalled", script, exc)

    def steady(self, scripts: dict[str, Script]) -> None:
        """The steady-memory phases (`steady_phases` of `_RETRIEVAL_STEADY_ROUND`)."""
        what = self.calls.what
        requests = [(what, scripts[kind]) for kind in _RETRIEVAL_STEADY_ROUND]
        marks = self.steady_phases(
            requests, lambda _kind, _script: self.calls.call(REQUEST_TIMEOUT_S)
        )
        self.steady_verdict(marks, len(requests), f"clean, cut and failing {what} calls")
