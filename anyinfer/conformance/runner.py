"""Running scripts through the real client, core and adapter, and judging the outcome.

A `Harness` serves one script to one adapter — over a `FakeTransport` inside httpx, or
over a `FakeServer` on a loopback socket — through one of the four public paths
(`AsyncClient.stream`, `AsyncClient.generate`, `Client.stream`, `Client.generate`),
records what the consumer saw, and hands it to the checker. `Harness.verify` raises a
`ConformanceFailure` describing the broken guarantees, the events and the script.

Reproducing a reported failure outside pytest::

    from anyinfer.conformance.registry import ConformanceRegistry
    from anyinfer.conformance.runner import Harness
    from anyinfer.fakeservers import *

    registry = ConformanceRegistry()
    entry = registry.add("mine", MyAdapter, dialect="openai-chat")
    Harness(registry, entry).verify(Script(...), "async-stream")
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import traceback
import zlib
from collections.abc import Callable, Sequence
from dataclasses import MISSING, dataclass, fields, is_dataclass, replace
from typing import TYPE_CHECKING, Any, Literal, Protocol

import httpx

import anyinfer as ai
from anyinfer.fakeservers import (
    Dialect,
    FakeServer,
    FakeTransport,
    Fault,
    Rendered,
    Script,
    UnexpectedRequestError,
)

from .checker import (
    EARLY_EXIT,
    ERROR_TYPE,
    FROM_SCRIPT,
    ONE_REQUEST,
    ROBUST,
    FromScript,
    Observation,
    Violation,
    check,
    check_grammar,
    expect,
    format_events,
)

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy

    from .registry import AdapterEntry, ConformanceRegistry
    from .resources import ResourceMethod

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "MODES",
    "SERVER_STALL_TIMEOUT_S",
    "TRANSPORT_STALL_TIMEOUT_S",
    "DOCUMENTED_FINISH_REASONS",
    "ConformanceFailure",
    "Harness",
    "Mode",
    "NotReached",
    "Run",
    "Via",
    "documented_scripts",
    "failure_class",
    "property_seed",
    "script_repr",
]

Mode = Literal["async-stream", "async-generate", "sync-stream", "sync-generate"]
"""One public path through the client."""

Via = Literal["transport", "server"]
"""How the fake provider is reached: an httpx transport, or a loopback socket."""

MODES: tuple[Mode, ...] = ("async-stream", "async-generate", "sync-stream", "sync-generate")

PROMPT = "Conformance check: answer as scripted."
DEFAULT_TIMEOUT_S = 10.0
"""Request timeout for scripts without a stall (a hung adapter fails, it does not hang)."""
TRANSPORT_STALL_TIMEOUT_S = 0.02
"""Request timeout for stall scripts over `FakeTransport` (reads never wait otherwise)."""
SERVER_STALL_TIMEOUT_S = 0.4
"""Request timeout for stall scripts over a loopback socket."""
EARLY_EXIT_WAIT_S = 1.5
"""How long the server may take to see the client close after an early exit."""
EARLY_EXIT_TIMEOUT_S = 3.0
"""Request timeout in the early-exit check: well past the wait, so that a connection
closed only by the read timeout is not mistaken for a prompt close."""

DOCUMENTED_FINISH_REASONS: tuple[str, ...] = (
    "stop",
    "length",
    "tool_calls",
    "content_filter",
    "sparkles_42",
)
"""Every neutral finish reason, plus one no provider sends (it must become `other`)."""
DOCUMENTED_RETRY_AFTER_S = 7.0
"""The `Retry-After` the documented 429 case sends."""

_PATHS: dict[Mode, str] = {
    "async-stream": "AsyncClient.stream()",
    "async-generate": "AsyncClient.generate()",
    "sync-stream": "Client.stream()",
    "sync-generate": "Client.generate()",
}
_CONTENT = (ai.TextDelta, ai.ReasoningDelta, ai.ToolCallDelta)


class TransportFactory(Protocol):
    """Builds the fake transport for one script (the `anyinfer_fake_transport` fixture)."""

    def __call__(
        self, dialect: Dialect, scripts: Sequence[Script] | Callable[[httpx.Request], Script]
    ) -> FakeTransport: ...


class ServerFactory(Protocol):
    """Builds the fake server for one script (the `anyinfer_fake_server` fixture)."""

    def __call__(
        self, dialect: Dialect, scripts: Sequence[Script] | Callable[[httpx.Request], Script]
    ) -> FakeServer: ...


class SharedServer:
    """A running fake server plus the script it currently serves."""

    server: FakeServer
    script: Script = Script()


@dataclass(frozen=True, slots=True)
class Run:
    """One served script and what came of it.

    Attributes:
        observation: Events, result, exception.
        streamed: Whether the wire response was streamed (as the server decided from
            the request the adapter sent).
        rendered: The rendering served (streamed or whole).
        exchange_problems: What was wrong with the HTTP exchange itself (no request,
            several, an endpoint the dialect does not serve).
    """

    observation: Observation
    streamed: bool
    rendered: Rendered
    exchange_problems: tuple[str, ...] = ()


# --- reporting -----------------------------------------------------------------------


class ConformanceFailure(AssertionError):
    """An adapter broke at least one guarantee for one script.

    The message is the full report: adapter, path, violations, events, script, wire.

    Attributes:
        adapter: The adapter's name.
        mode: The client path used.
        via: How the fake provider was reached.
        violations: What was broken.
        script: The script served (after shrinking, the minimal one).
        guarantees: The guarantee ids violated, in report order.
    """

    def __init__(
        self,
        report: str,
        *,
        adapter: str = "",
        mode: str = "",
        via: str = "",
        violations: Sequence[Violation] = (),
        script: Script | None = None,
    ) -> None:
        super().__init__(report)
        self.report = report
        self.adapter = adapter
        self.mode = mode
        self.via = via
        self.violations = tuple(violations)
        self.script = script
        self.guarantees = tuple(dict.fromkeys(v.guarantee for v in self.violations))

    def __str__(self) -> str:
        return self.report

    @classmethod
    def build(
        cls,
        *,
        entry: AdapterEntry,
        mode: str,
        via: str,
        violations: Sequence[Violation],
        script: Script,
        run: Run | None,
        dialect: Dialect,
        shrinking: bool | None = None,
    ) -> ConformanceFailure:
        """A failure of the class for its first guarantee, with its report rendered.

        Args:
            shrinking: Whether Hypothesis shrinks the script before reporting it (`None`:
                the script was served directly, not drawn).
        """
        report = _render_report(
            entry, mode, via, violations, script, run, dialect, shrinking=shrinking
        )
        kind = failure_class(violations[0].guarantee) if violations else cls
        return kind(
            report, adapter=entry.name, mode=mode, via=via, violations=violations, script=script
        )


class NotReached(ConformanceFailure):
    """A check that could not be made: the attempt failed before what it checks.

    The early-exit check, for one, needs a first content delta to leave the stream
    after; an attempt that fails or ends before one never gets there. Such a failure
    names no broken guarantee (`guarantees` is empty), so the matrix shows `-` (not
    reached) for the guarantee, not `FAIL`: the tests of the other guarantees report
    what did break.

    Attributes:
        unreached: The guarantee that could not be checked.
        reason: Why it could not.
    """

    unreached: str
    reason: str

    @classmethod
    def before(
        cls,
        unreached: str,
        reason: str,
        *,
        entry: AdapterEntry,
        mode: str,
        via: str,
        script: Script,
        run: Run | None,
        dialect: Dialect,
        shrinking: bool | None = None,
    ) -> NotReached:
        """The failure for `unreached`, with its report rendered."""
        report = _render_report(
            entry,
            mode,
            via,
            (),
            script,
            run,
            dialect,
            shrinking=shrinking,
            not_reached=(unreached, reason),
        )
        failure = cls(report, adapter=entry.name, mode=mode, via=via, script=script)
        failure.unreached, failure.reason = unreached, reason
        return failure


_FAILURE_CLASSES: dict[str, type[ConformanceFailure]] = {}


def failure_class(guarantee: str) -> type[ConformanceFailure]:
    """A `ConformanceFailure` subclass per guarantee.

    Hypothesis tells distinct bugs apart by exception type, so raising one class per
    first-violated guarantee lets it shrink and report each broken guarantee separately.
    """
    cls = _FAILURE_CLASSES.get(guarantee)
    if cls is None:
        slug = "".join(part.capitalize() for part in guarantee.replace("-", " ").split())
        cls = type(f"ConformanceFailure_{slug}", (ConformanceFailure,), {})
        cls.__module__ = __name__
        _FAILURE_CLASSES[guarantee] = cls
    return cls


def _compact(value: Any) -> str:
    """A repr that leaves out dataclass fields at their defaults."""
    if is_dataclass(value) and not isinstance(value, type):
        parts: list[str] = []
        for f in fields(value):
            v = getattr(value, f.name)
            if f.default is not MISSING:
                if v == f.default:
                    continue
            elif f.default_factory is not MISSING:
                if v == f.default_factory():
                    continue
            else:
                parts.append(_compact(v))  # required: positional
                continue
            parts.append(f"{f.name}={_compact(v)}")
        return f"{type(value).__name__}({', '.join(parts)})"
    if isinstance(value, tuple):
        inner = ", ".join(_compact(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    return repr(value)


def script_repr(script: Script) -> str:
    """The script as Python source, omitting defaults (paste it into a regression test)."""
    return _compact(script)


def _frame_lines(rendered: Rendered, script: Script, streamed: bool) -> list[str]:
    exp = expect(script, rendered, streamed=streamed)
    lines = []
    delivered = set(exp.delivered)
    for i, frame in enumerate(rendered.frames[:40]):
        data = frame.data
        shown = repr(data) if len(data) <= 150 else f"{data[:40]!r} ... {data[-100:]!r}"
        tags = []
        if frame.pieces:
            tags.append("pieces " + ",".join(map(str, frame.pieces)))
        if frame.usage:
            tags.append("usage " + ",".join(sorted(frame.usage)))
        if frame.finish:
            tags.append("finish")
        if frame.sentinel:
            tags.append("sentinel")
        if frame.keepalive:
            tags.append("keep-alive")
        mark = " " if i in delivered else "x"
        lines.append(f"  {mark}[{i}] {shown}{'  <' + '; '.join(tags) + '>' if tags else ''}")
    if len(rendered.frames) > 40:
        lines.append(f"   ... {len(rendered.frames) - 40} more frames")
    return lines


_BROKEN_WIRE = frozenset({"malformed", "bomb"})
"""Fault kinds after which a hostile-world script has no single right reading."""

_SCRIPT_ORIGIN: dict[bool | None, str] = {
    None: "",
    True: " (minimal: shrunk by Hypothesis)",
    False: " (as drawn, not minimal: the Hypothesis profile leaves out Phase.shrink)",
}


def _render_report(
    entry: AdapterEntry,
    mode: str,
    via: str,
    violations: Sequence[Violation],
    script: Script,
    run: Run | None,
    dialect: Dialect,
    *,
    shrinking: bool | None = None,
    not_reached: tuple[str, str] | None = None,
) -> str:
    path = _PATHS.get(mode, mode)  # type: ignore[call-overload]
    where = "FakeTransport (httpx, in-process)" if via == "transport" else "FakeServer (loopback)"
    if not_reached is not None:
        unreached, reason = not_reached
        lines = [
            f"anyinfer conformance: adapter {entry.describe()} did not reach {unreached}",
            f"  path: {path} over {where}",
            f"  not reached: {reason}",
            "  (not a failure of that guarantee: the other tests report what broke)",
        ]
    else:
        guarantees = ", ".join(dict.fromkeys(v.guarantee for v in violations))
        lines = [
            f"anyinfer conformance: adapter {entry.describe()} broke {guarantees}",
            f"  path: {path} over {where}",
            "  violations:",
            *(f"    - {v}" for v in violations),
        ]
    if run is not None:
        obs = run.observation
        if obs.error is not None:
            lines.append(f"  outcome: raised {type(obs.error).__name__}: {obs.error}")
            if not isinstance(obs.error, ai.AnyInferError):
                tb = traceback.format_exception(obs.error)
                lines.append("  traceback (adapter side):")
                lines += ["    " + ln for chunk in tb[-12:] for ln in chunk.rstrip().splitlines()]
        elif obs.result is not None:
            r = obs.result
            lines.append(
                f"  outcome: result text={r.text!r} finish_reason={r.finish_reason!r} "
                f"usage={_compact(r.usage)} tool_calls={len(r.tool_calls)} "
                f"warnings={list(r.warnings)!r}"
            )
        if obs.events is not None:
            lines.append(f"  events ({len(obs.events)}):")
            lines += ["    " + ln for ln in format_events(obs.events)] or ["    (none)"]
        else:
            lines.append("  events: (generate() exposes none)")
    lines.append(f"  script{_SCRIPT_ORIGIN[shrinking]}:")
    lines.append(f"    {script_repr(script)}")
    if run is not None and (script.fault is None or script.fault.kind != "status"):
        form = "streamed" if run.streamed else "whole body"
        lines.append(f"  wire ({dialect.name}, {form}; x = not delivered before the fault):")
        lines += _frame_lines(run.rendered, script, run.streamed)
    lines.append(
        "  reproduce: anyinfer.conformance.runner.Harness(registry, entry).verify(script, "
        f"{mode!r}, via={via!r})"
    )
    return "\n".join(lines)


# --- running -------------------------------------------------------------------------


def documented_scripts(dialect: Dialect) -> list[tuple[str, Script]]:
    """One script per documented case, shaped as `dialect`'s provider sends it.

    Every HTTP error status the error taxonomy documents
    (`anyinfer.conformance.strategies.DOCUMENTED_STATUSES`; 429 with a `Retry-After`), and every
    finish reason in `DOCUMENTED_FINISH_REASONS` after some content, with usage where
    the provider puts it. Drawn scripts may miss a case at a shallow depth; these never
    do. The conformance suite's `test_documented_cases` serves each one through a
    stream and a `generate()` path.

    Returns:
        `(label, script)` pairs, in a fixed order.
    """
    from anyinfer.fakeservers import ScriptUsage, Text, ToolFragment, UsagePlacement

    from .strategies import DOCUMENTED_STATUSES

    profile = dialect.profile
    placement: UsagePlacement = next((p for p in profile.usage_placements if p != "none"), "none")
    figures = dict.fromkeys(profile.usage_fields, 0)
    for number, name in enumerate(figures):
        figures[name] = 11 + number
    usage = ScriptUsage(**figures) if placement != "none" else None
    cases: list[tuple[str, Script]] = []
    for status in DOCUMENTED_STATUSES:
        retry_after = DOCUMENTED_RETRY_AFTER_S if status == 429 else None
        fault = Fault("status", status=status, retry_after=retry_after)
        label = f"status {status}" + (" with Retry-After" if retry_after is not None else "")
        cases.append((label, Script(pieces=(Text("unsent"),), fault=fault)))
    for reason in DOCUMENTED_FINISH_REASONS:
        if reason == "tool_calls":
            call = ToolFragment(0, '{"city": "Paris"}', id="call_documented", name="weather")
            pieces: tuple[Text | ToolFragment, ...] = (call,)
        else:
            pieces = (Text("Documented "), Text("case."))
        script = Script(pieces=pieces, finish_reason=reason, usage=usage, usage_placement=placement)
        cases.append((f"finish reason {reason!r}", script))
    return cases


def _default_transport(
    dialect: Dialect, scripts: Sequence[Script] | Callable[[httpx.Request], Script]
) -> FakeTransport:
    return FakeTransport(dialect, scripts if callable(scripts) else list(scripts))


def _default_server(
    dialect: Dialect, scripts: Sequence[Script] | Callable[[httpx.Request], Script]
) -> FakeServer:
    return FakeServer(dialect, scripts if callable(scripts) else list(scripts))


class Harness:
    """Serves scripts to one adapter and checks the outcomes.

    Args:
        registry: The conformance registry (for dialect lookup).
        entry: The adapter under test.
        transport_factory: Builds a `FakeTransport` for a script.
        server_factory: Builds a `FakeServer` for a script.
        key: The default `key` of its properties (see `check_property`); the
            `anyinfer_harness` fixture passes the test's node id.
    """

    def __init__(
        self,
        registry: ConformanceRegistry,
        entry: AdapterEntry,
        *,
        transport_factory: TransportFactory | None = None,
        server_factory: ServerFactory | None = None,
        key: str | None = None,
    ) -> None:
        self.entry = entry
        self.key = key
        self.dialect = registry.dialect(entry.dialect)
        self._transport_factory = transport_factory or _default_transport
        self._server_factory = server_factory or _default_server
        self._providers = ai.ProviderRegistry(builtins=False, entry_points=False)
        self._providers.register(entry.name, entry.resolve_class())
        # While a property runs: whether Hypothesis shrinks the scripts it reports.
        self._shrinking: bool | None = None

    # --- clients -------------------------------------------------------------------

    def settings(
        self, *, transport: httpx.AsyncBaseTransport | None = None, base_url: str | None = None
    ) -> ai.ProviderSettings:
        """Provider settings pointing the adapter at a fake provider."""
        extra = dict(self.entry.settings)
        extra.setdefault("timeout_s", DEFAULT_TIMEOUT_S)
        return ai.ProviderSettings(
            self.entry.name,
            base_url=base_url or f"http://conformance.invalid{self.dialect.base_path}",
            api_key="sk-anyinfer-conformance",
            transport=transport,
            **extra,
        )

    def target(self, script: Script) -> str:
        """The target string for a script."""
        return f"{self.entry.name}:{script.model}"

    def route(self, script: Script) -> ai.Route:
        """A one-target route without retries: each script is served exactly once."""
        return ai.Route(self.target(script), retry=ai.RetryPolicy(max_retries=0))

    @staticmethod
    def timeout_for(script: Script, via: Via) -> float:
        """The per-call timeout: short for stall scripts, generous otherwise."""
        if script.fault is not None and script.fault.kind == "stall":
            return TRANSPORT_STALL_TIMEOUT_S if via == "transport" else SERVER_STALL_TIMEOUT_S
        return DEFAULT_TIMEOUT_S

    async def _observe_async(
        self, settings: ai.ProviderSettings, script: Script, mode: Mode, timeout: float
    ) -> Observation:
        events: list[ai.StreamEvent] = []
        async with ai.AsyncClient([settings], registry=self._providers) as client:
            try:
                if mode == "async-generate":
                    result = await client.generate(
                        PROMPT, route=self.route(script), timeout_s=timeout
                    )
                    return Observation(None, result, None)
                async with client.stream(
                    PROMPT, route=self.route(script), timeout_s=timeout
                ) as stream:
                    async for event in stream:
                        events.append(event)
                return Observation(tuple(events), _result_of(stream), None)
            except Exception as exc:
                return Observation(None if mode == "async-generate" else tuple(events), None, exc)

    def _observe_sync(
        self, settings: ai.ProviderSettings, script: Script, mode: Mode, timeout: float
    ) -> Observation:
        events: list[ai.StreamEvent] = []
        with ai.Client([settings], registry=self._providers) as client:
            try:
                if mode == "sync-generate":
                    result = client.generate(PROMPT, route=self.route(script), timeout_s=timeout)
                    return Observation(None, result, None)
                with client.stream(PROMPT, route=self.route(script), timeout_s=timeout) as st:
                    for event in st:
                        events.append(event)
                return Observation(tuple(events), _result_of(st), None)
            except Exception as exc:
                return Observation(None if mode == "sync-generate" else tuple(events), None, exc)

    def _observe(
        self,
        settings: ai.ProviderSettings,
        script: Script,
        mode: Mode,
        timeout: float,
        runner: asyncio.Runner | None,
    ) -> Observation:
        if mode.startswith("sync-"):
            return self._observe_sync(settings, script, mode, timeout)
        coro = self._observe_async(settings, script, mode, timeout)
        if runner is not None:
            return runner.run(coro)
        return asyncio.run(coro)

    def run(
        self,
        script: Script,
        mode: Mode,
        *,
        via: Via = "transport",
        runner: asyncio.Runner | None = None,
        server: SharedServer | None = None,
    ) -> Run:
        """Serve `script` through `mode` and record the outcome.

        Args:
            script: The script.
            mode: The client path.
            via: `transport` (in-process) or `server` (loopback socket).
            runner: An asyncio runner to reuse for async modes.
            server: A running shared server to use for `via="server"` (one is started
                for this script otherwise).

        Returns:
            The run.
        """
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}; expected one of {MODES}")
        timeout = self.timeout_for(script, via)
        problems: list[str] = []
        if via == "transport":
            transport = self._transport_factory(self.dialect, [script])
            observation = self._observe(
                self.settings(transport=transport), script, mode, timeout, runner
            )
            requests = list(transport.requests)
            try:
                transport.assert_all_used()
            except AssertionError as exc:
                problems.append(str(exc))
        elif server is not None:
            before = len(server.server.requests)
            server.script = script
            observation = self._observe(
                self.settings(base_url=server.server.base_url), script, mode, timeout, runner
            )
            requests = list(server.server.requests[before:])
        else:
            with self._server_factory(self.dialect, [script]) as one:
                observation = self._observe(
                    self.settings(base_url=one.base_url), script, mode, timeout, runner
                )
                requests = list(one.requests)
                try:
                    one.assert_all_used()
                except AssertionError as exc:
                    problems.append(str(exc))
        generation = [r for r in requests if self.dialect.is_generation(r.method, r.path)]
        if len(generation) != 1:
            problems.insert(
                0,
                f"expected exactly one {self.dialect.name} generation request, got "
                f"{len(generation)}: {[f'{r.method} {r.path}' for r in requests]}",
            )
        if generation:
            req = generation[0]
            streamed = self.dialect.request_wants_stream(req.method, req.path, req.json)
        else:
            streamed = mode.endswith("-stream")
        rendered = self.dialect.render(script, stream=streamed)
        return Run(observation, streamed, rendered, tuple(dict.fromkeys(problems)))

    def shared_server(self) -> SharedServer:
        """A fake server that serves whichever script `run(..., server=)` sets.

        Starting a server per example costs more than the example; a property starts
        one and points every example's fresh client at it.
        """
        shared = SharedServer()
        shared.server = self._server_factory(self.dialect, lambda request: shared.script)
        return shared

    def violations(self, script: Script, run: Run, *, robust: bool = False) -> list[Violation]:
        """Every guarantee `run` broke for `script`.

        Args:
            script: The script served.
            run: What came of it.
            robust: Judge a hostile-world script. A legal shape (odd line ends,
                split `data:` lines, interleaved tool slots, missing ids, no sentinel)
                still has one right reading and is checked in full; for a broken wire
                (a malformed frame, a compression bomb) only the guarantees that must
                hold whatever the provider sends (`ROBUST`) count, and any typed
                `AnyInferError` is an acceptable failure.
        """
        if run.exchange_problems or isinstance(run.observation.error, UnexpectedRequestError):
            return [Violation(ONE_REQUEST, p) for p in run.exchange_problems] or [
                Violation(ONE_REQUEST, str(run.observation.error))
            ]
        fault = script.fault
        found = check(
            script,
            run.rendered,
            run.observation,
            streamed=run.streamed,
            finish_reason=self.expected_finish_reason(script),
            in_stream_error_types=(
                self.dialect.in_stream_error_types(fault)
                if fault is not None and fault.kind == "provider_error"
                else None
            ),
        )
        if not robust or fault is None or fault.kind not in _BROKEN_WIRE:
            # A legal shape, however odd, still has one right reading.
            return found
        typed = run.observation.error is None or isinstance(run.observation.error, ai.AnyInferError)
        return [
            v for v in found if v.guarantee in ROBUST and not (typed and v.guarantee == ERROR_TYPE)
        ]

    def expected_finish_reason(self, script: Script) -> str | FromScript | None:
        """What a faithful adapter reports as the finish reason, before normalizing.

        A dialect whose protocol cannot carry every neutral reason (Gemini says `STOP`
        for tool calls too) says so with an `expected_finish_reason(script)` method;
        otherwise the script's own reason is expected.
        """
        hook = getattr(self.dialect, "expected_finish_reason", None)
        if callable(hook):
            value = hook(script)
            return value if value is None or isinstance(value, str) else FROM_SCRIPT
        return FROM_SCRIPT

    def verify(
        self,
        script: Script,
        mode: Mode,
        *,
        via: Via = "transport",
        runner: asyncio.Runner | None = None,
        server: SharedServer | None = None,
        robust: bool = False,
    ) -> Run:
        """Run `script` and raise if any guarantee broke.

        Args:
            script: The script.
            mode: The client path.
            via: `transport` (in-process) or `server` (loopback socket).
            runner: An asyncio runner to reuse for async modes.
            server: A running shared server to use for `via="server"`.
            robust: Judge it as a hostile-world script (see `violations`).

        Returns:
            The run, when every guarantee held.

        Raises:
            ConformanceFailure: A subclass named after the first broken guarantee.
        """
        run = self.run(script, mode, via=via, runner=runner, server=server)
        found = self.violations(script, run, robust=robust)
        if found:
            raise ConformanceFailure.build(
                entry=self.entry,
                mode=mode,
                via=via,
                violations=found,
                script=script,
                run=run,
                dialect=self.dialect,
                shrinking=self._shrinking,
            )
        return run

    # --- early exit ----------------------------------------------------------------

    def staged(self, script: Script, *, streamed: bool) -> Script:
        """`script` stalled right after its first content frame (when streamed).

        The early-exit check serves this: the connection stays open after the first
        content until the client closes it.
        """
        frames = self.dialect.render(script, stream=streamed).frames
        first = next((i for i, f in enumerate(frames) if f.pieces), None)
        if not streamed or first is None:
            return replace(script, fault=None)
        return replace(script, fault=Fault("stall", at=first + 1))

    def _staged(self, script: Script) -> Callable[[httpx.Request], Script]:
        dialect = self.dialect

        def choose(request: httpx.Request) -> Script:
            try:
                payload = json.loads(request.content) if request.content else None
            except ValueError:
                payload = None
            streamed = dialect.request_wants_stream(request.method, request.url.path, payload)
            return self.staged(script, streamed=streamed)

        return choose

    def verify_early_exit(self, script: Script, *, sync: bool) -> None:
        """Leave a stream after its first content delta; the provider must see the close.

        The server stalls right after the first content frame, so the connection stays
        open until the client closes it.

        Raises:
            ConformanceFailure: If the events before the exit were malformed, or the
                server never saw the connection close.
            NotReached: If the attempt raised or ended before its first content delta:
                there was nothing to leave early after, so the guarantee was not
                reached (the other tests report the failure itself).
        """
        mode: Mode = "sync-stream" if sync else "async-stream"
        events: list[ai.StreamEvent] = []
        error: BaseException | None = None
        closed = False
        with self._server_factory(self.dialect, self._staged(script)) as server:
            settings = self.settings(base_url=server.base_url)
            route = self.route(script)
            limit = EARLY_EXIT_TIMEOUT_S
            if sync:
                with ai.Client([settings], registry=self._providers) as client:
                    try:
                        with client.stream(PROMPT, route=route, timeout_s=limit) as st:
                            for event in st:
                                events.append(event)
                                if isinstance(event, _CONTENT):
                                    break
                    except Exception as exc:
                        error = exc
                    closed = server.wait_client_closed(1, timeout=EARLY_EXIT_WAIT_S)
            else:

                async def go() -> tuple[BaseException | None, bool]:
                    async with ai.AsyncClient([settings], registry=self._providers) as client:
                        try:
                            async with client.stream(PROMPT, route=route, timeout_s=limit) as st:
                                async for event in st:
                                    events.append(event)
                                    if isinstance(event, _CONTENT):
                                        break
                        except Exception as exc:
                            return exc, False
                        seen = await asyncio.to_thread(
                            server.wait_client_closed, 1, EARLY_EXIT_WAIT_S
                        )
                        return None, seen

                error, closed = asyncio.run(go())
            streamed = any(
                self.dialect.request_wants_stream(r.method, r.path, r.json)
                for r in server.requests
                if self.dialect.is_generation(r.method, r.path)
            )
        found = [v for v in check_grammar(events, succeeded=False)]
        got_content = any(isinstance(e, _CONTENT) for e in events)
        unreached: str | None = None
        if error is not None:
            unreached = (
                f"the stream raised {type(error).__name__}: {error} before its first "
                "content delta, so there was nothing to leave early after"
            )
        elif not got_content:
            unreached = (
                "the stream ended without any content delta, so there was nothing to "
                "leave early after"
            )
        elif streamed and not closed:
            found.append(
                Violation(
                    EARLY_EXIT,
                    f"after leaving the stream's context early, the server still had the "
                    f"connection open {EARLY_EXIT_WAIT_S:g}s later (the response was not "
                    "closed)",
                )
            )
        if found or unreached is not None:
            obs = Observation(tuple(events), None, error)
            served = self.staged(script, streamed=streamed)
            run = Run(obs, streamed, self.dialect.render(served, stream=streamed))
            context: dict[str, Any] = {
                "entry": self.entry,
                "mode": mode,
                "via": "server",
                "script": served,
                "run": run,
                "dialect": self.dialect,
                "shrinking": self._shrinking,
            }
            if found:
                raise ConformanceFailure.build(violations=found, **context)
            assert unreached is not None
            raise NotReached.before(EARLY_EXIT, unreached, **context)

    # --- resources -----------------------------------------------------------------

    def verify_resources(self, *, sync: bool, method: ResourceMethod = "generate") -> None:
        """Run the `resources` check through one long-lived client (see
        `anyinfer.conformance.resources`): more early exits, cancellations and faults than the
        pool has connections, then no held slot, one reused connection, fds, threads and
        tasks back at their baseline, steady memory, and a decompression bomb bounded by
        `max_response_bytes`.

        Args:
            sync: Check `Client` (else `AsyncClient`).
            method: `"generate"` (streams and generations), or `"embed"` or `"rerank"`
                for that call's own faults, cancellations and steady phases.

        Raises:
            ConformanceFailure: Naming the `resources` guarantee and what was left behind.
        """
        from .resources import check_resources

        found, script = check_resources(self, sync=sync, method=method)
        if found:
            if method == "generate":
                mode = "sync-stream" if sync else "async-stream"
            else:
                mode = f"{'Client' if sync else 'AsyncClient'}.{method}()"
            raise ConformanceFailure.build(
                entry=self.entry,
                mode=mode,
                via="server",
                violations=found,
                script=script or Script(),
                run=None,
                dialect=self.dialect,
            )

    # --- properties ----------------------------------------------------------------

    def check_property(
        self,
        strategy: SearchStrategy[Script],
        *,
        modes: Sequence[Mode],
        via: Via = "transport",
        max_examples: int,
        robust: bool = False,
        key: str | None = None,
    ) -> None:
        """Run a Hypothesis property: every drawn script, through a drawn mode, conforms.

        Args:
            strategy: Scripts to draw.
            modes: Client paths to draw from.
            robust: The scripts are hostile-world ones: check robustness only (see
                `violations`).
            via: How the fake provider is reached.
            max_examples: Examples to run.
            key: What tells this property apart from the others, such as the pytest
                node id (which names the test and the adapter); default: the
                harness's `key`. Under a derandomized profile each key draws its own
                reproducible sequence (`property_seed`); without one, every property
                replays the same sequence.

        Raises:
            ConformanceFailure: For the minimal failing script (or an exception group
                of them, one per distinct broken guarantee).
        """
        from hypothesis import HealthCheck, given, settings
        from hypothesis import strategies as st

        with contextlib.ExitStack() as stack:
            runner = stack.enter_context(asyncio.Runner())
            server: SharedServer | None = None
            if via == "server":
                server = self.shared_server()
                stack.enter_context(server.server)

            @settings(
                max_examples=max_examples,
                deadline=None,
                suppress_health_check=[
                    HealthCheck.too_slow,
                    HealthCheck.filter_too_much,
                    HealthCheck.data_too_large,
                ],
            )
            @given(script=strategy, mode=st.sampled_from(tuple(modes)))
            def conformance_property(script: Script, mode: Mode) -> None:
                self.verify(script, mode, via=via, runner=runner, server=server, robust=robust)

            self._run_property(conformance_property, key)

    def check_early_exit_property(
        self,
        strategy: SearchStrategy[Script],
        *,
        sync: bool,
        max_examples: int,
        key: str | None = None,
    ) -> None:
        """Early exit over a loopback socket, for scripts drawn from `strategy`.

        Args:
            strategy: Scripts to draw (each needs content to leave early after).
            sync: Through `Client.stream()` rather than `AsyncClient.stream()`.
            max_examples: Examples to run.
            key: Tells this property's sequence apart (default: the harness's `key`;
                see `check_property`).
        """
        from hypothesis import HealthCheck, given, settings

        @settings(
            max_examples=max_examples,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        )
        @given(script=strategy)
        def early_exit_property(script: Script) -> None:
            self.verify_early_exit(script, sync=sync)

        self._run_property(early_exit_property, key)

    def _run_property(self, test: Callable[[], None], key: str | None) -> None:
        """Run a `@given` test, seeded for `key` when derandomized, noting if it shrinks."""
        from hypothesis import Phase, seed, settings

        current = settings()
        key = self.key if key is None else key
        if key is not None and current.derandomize:
            # A derandomized run seeds itself from the test function, and every property
            # shares one inner function: without this, every test and adapter would
            # replay one sequence.
            test = seed(property_seed(key))(test)
        self._shrinking = Phase.shrink in current.phases
        try:
            test()
        finally:
            self._shrinking = None


def property_seed(key: str) -> int:
    """The Hypothesis seed a derandomized property uses for `key` (a pytest node id).

    Stable across runs, machines and Python versions (CRC-32 of the key's UTF-8), so a
    CI run is reproducible while each test x adapter draws its own sequence.
    """
    return zlib.crc32(key.encode("utf-8"))


def _result_of(stream: ai.AsyncStream | ai.SyncStream) -> ai.Generation | None:
    try:
        return stream.result
    except RuntimeError:
        return None
