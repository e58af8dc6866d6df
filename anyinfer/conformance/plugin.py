"""The pytest plugin: `pytest --anyinfer-conformance`.

Registered through the `pytest11` entry point, so installing `anyinfer` is enough. It is
inert unless asked: importing it imports nothing heavy, it collects nothing, and it
changes nothing about a test run without `--anyinfer-conformance` (or the
`anyinfer_conformance = true` ini setting). It does offer its fixtures
(`anyinfer_fake_transport`, `anyinfer_fake_server`, ...) to any test that asks for them.

With the flag, the run collects only the conformance suite — for every registered
adapter, or the ones named with `--anyinfer-adapter` — instead of the project's own
tests, and ends with an adapter x guarantee matrix.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy

    from anyinfer.fakeservers import FakeServer, FakeTransport, Script

    from .registry import AdapterEntry, ConformanceRegistry
    from .runner import Harness, ServerFactory, TransportFactory

__all__ = [
    "INI_ADAPTERS",
    "INI_CONFORMANCE",
    "INI_EXAMPLES",
    "MARKER",
    "OPTION_ADAPTER",
    "OPTION_CONFORMANCE",
    "OPTION_EXAMPLES",
    "OPTION_RESOURCES",
    "SUITE_NODEID",
]

OPTION_CONFORMANCE = "--anyinfer-conformance"
"""Run the conformance suite instead of the project's tests."""
OPTION_ADAPTER = "--anyinfer-adapter"
"""Select adapters by provider id or shell-style glob (`acme-*`; repeatable); default:
every registered adapter."""
OPTION_EXAMPLES = "--anyinfer-examples"
"""Hypothesis examples per property."""
OPTION_RESOURCES = "--anyinfer-resources"
"""Also run the `resources` check (slower: its own CI job)."""
INI_CONFORMANCE = "anyinfer_conformance"
INI_ADAPTERS = "anyinfer_adapters"
INI_EXAMPLES = "anyinfer_examples"
MARKER = "anyinfer_conformance"
"""Marker on suite tests: `anyinfer_conformance(covers=(guarantee, ...))`."""
SUITE_NODEID = "anyinfer-conformance"
"""Node id prefix of every conformance item."""

_SUITE_PATH = Path(__file__).with_name("_suite.py")

_NEEDS = ("hypothesis", "yaml")
"""What the suite imports beyond the runtime dependencies (the `conformance` extra)."""


@dataclass(slots=True)
class _State:
    """Per-session state of an enabled conformance run."""

    selected: list[str]
    examples_option: int | None
    registry: ConformanceRegistry | None = None
    entries: list[AdapterEntry] = field(default_factory=list)
    # (adapter, guarantee) -> "ok" / "FAIL" / "error" / "skip"
    cells: dict[tuple[str, str], str] = field(default_factory=dict)


_STATE = pytest.StashKey[_State]()


# --- options -------------------------------------------------------------------------


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    """Add the `pytest_anyinfer_configure` hook specification."""
    from . import hooks

    pluginmanager.add_hookspecs(hooks)


def pytest_addoption(parser: pytest.Parser) -> None:
    """Add the `anyinfer` option group and its ini equivalents."""
    group = parser.getgroup("anyinfer", "AnyInfer")
    group.addoption(
        OPTION_CONFORMANCE,
        action="store_true",
        default=None,
        dest="anyinfer_conformance",
        help="run the AnyInfer conformance suite for the registered adapters "
        "(instead of this project's tests)",
    )
    group.addoption(
        OPTION_ADAPTER,
        action="append",
        default=[],
        dest="anyinfer_adapters",
        metavar="NAME",
        help="only check this adapter (provider id, or a glob such as 'acme-*'); repeatable",
    )
    group.addoption(
        OPTION_EXAMPLES,
        type=int,
        default=None,
        dest="anyinfer_examples",
        metavar="N",
        help="Hypothesis examples per conformance property (default: the active "
        "Hypothesis profile's max_examples)",
    )
    group.addoption(
        OPTION_RESOURCES,
        action="store_true",
        default=False,
        dest="anyinfer_resources",
        help="also run the conformance resources check (many requests through one "
        "long-lived client; about 3 s per adapter)",
    )
    parser.addini(INI_CONFORMANCE, "run the AnyInfer conformance suite", type="bool", default=False)
    parser.addini(
        INI_ADAPTERS, "conformance adapters to check (provider ids or globs)", type="args"
    )
    parser.addini(INI_EXAMPLES, "Hypothesis examples per conformance property", default="")


def _enabled(config: pytest.Config) -> bool:
    flag = config.getoption("anyinfer_conformance")
    if flag is not None:
        return bool(flag)
    return bool(config.getini(INI_CONFORMANCE))


def _examples_option(config: pytest.Config) -> int | None:
    value: Any = config.getoption("anyinfer_examples")
    source = OPTION_EXAMPLES
    if value is None:
        raw = str(config.getini(INI_EXAMPLES)).strip()
        if not raw:
            return None
        source = INI_EXAMPLES
        try:
            value = int(raw)
        except ValueError:
            raise pytest.UsageError(f"{source} must be a positive integer, got {raw!r}") from None
    if value < 1:
        raise pytest.UsageError(f"{source} must be a positive integer, got {value}")
    return int(value)


def pytest_configure(config: pytest.Config) -> None:
    """Register the marker; remember the options when the suite is asked for.

    Raises:
        pytest.UsageError: When the suite is asked for but the `conformance` extra is not
            installed: one line naming what is missing and the extra to install.
    """
    config.addinivalue_line(
        "markers",
        f"{MARKER}(covers): a conformance suite test and the guarantees it checks",
    )
    if not _enabled(config) or config.option.help:
        return
    from anyinfer._extras import missing, missing_hint

    absent = missing(_NEEDS)
    if absent:
        raise pytest.UsageError(missing_hint(f"pytest {OPTION_CONFORMANCE}", absent))
    selected = list(config.getoption("anyinfer_adapters") or []) or list(
        config.getini(INI_ADAPTERS) or []
    )
    config.stash[_STATE] = _State(selected=selected, examples_option=_examples_option(config))
    config.pluginmanager.register(_RetrievalMatrix(), "anyinfer-conformance-retrieval-matrix")


# --- collection ----------------------------------------------------------------------


def _build_registry(config: pytest.Config) -> ConformanceRegistry:
    from .registry import RegistryError, build_registry

    try:
        return build_registry(lambda reg: config.hook.pytest_anyinfer_configure(registry=reg))
    except RegistryError as exc:
        raise pytest.UsageError(f"anyinfer conformance: {exc}") from exc


@pytest.hookimpl(tryfirst=True)
def pytest_collection(session: pytest.Session) -> bool | None:
    """In conformance mode, collect the conformance suite and nothing else."""
    state = session.config.stash.get(_STATE, None)
    if state is None:
        return None
    from .registry import RegistryError

    registry = _build_registry(session.config)
    try:
        entries = registry.select(state.selected)
    except RegistryError as exc:
        raise pytest.UsageError(f"anyinfer conformance: {exc}") from exc
    state.registry, state.entries = registry, entries

    module = pytest.Module.from_parent(session, path=_SUITE_PATH, nodeid=SUITE_NODEID)
    items = list(session.genitems(module))
    session.items = items
    hook = session.config.hook
    hook.pytest_collection_modifyitems(session=session, config=session.config, items=items)
    hook.pytest_collection_finish(session=session)
    session.testscollected = len(items)
    return True


def adapter_entries(config: pytest.Config) -> list[AdapterEntry]:
    """The adapters a conformance run checks (used by the suite's parametrization)."""
    state = config.stash.get(_STATE, None)
    return list(state.entries) if state is not None else []


# --- fixtures ------------------------------------------------------------------------


@pytest.fixture(scope="session")
def anyinfer_conformance_registry(pytestconfig: pytest.Config) -> ConformanceRegistry:
    """Registered adapters and dialects (built from every source, hooks included)."""
    state = pytestconfig.stash.get(_STATE, None)
    if state is not None and state.registry is not None:
        return state.registry
    return _build_registry(pytestconfig)


@pytest.fixture(scope="session")
def anyinfer_examples(pytestconfig: pytest.Config) -> int:
    """Hypothesis examples per transport property.

    `--anyinfer-examples`, else the `anyinfer_examples` ini value, else the active
    Hypothesis profile's `max_examples`.
    """
    state = pytestconfig.stash.get(_STATE, None)
    chosen = state.examples_option if state is not None else _examples_option(pytestconfig)
    if chosen is not None:
        return chosen
    from hypothesis import settings

    return max(1, settings().max_examples)


@pytest.fixture
def anyinfer_scripts(
    anyinfer_adapter: AdapterEntry, anyinfer_conformance_registry: ConformanceRegistry
) -> SearchStrategy[Script]:
    """The wire-realistic scripts the agreement properties draw (override to narrow them).

    `anyinfer.conformance.strategies.realistic_scripts` for the adapter's dialect: only what the
    real provider could send.
    """
    from .strategies import realistic_scripts

    return realistic_scripts(anyinfer_conformance_registry.dialect(anyinfer_adapter.dialect))


@pytest.fixture
def anyinfer_hostile_scripts(
    anyinfer_adapter: AdapterEntry, anyinfer_conformance_registry: ConformanceRegistry
) -> SearchStrategy[Script]:
    """The hostile-world scripts the robustness property draws (override to narrow them).

    `anyinfer.conformance.strategies.hostile_scripts` for the adapter's dialect.
    """
    from .strategies import hostile_scripts

    return hostile_scripts(anyinfer_conformance_registry.dialect(anyinfer_adapter.dialect))


@pytest.fixture(scope="session")
def anyinfer_fake_transport() -> TransportFactory:
    """Factory `(dialect, scripts) -> fakeservers.FakeTransport` (strict)."""
    from anyinfer.fakeservers import FakeTransport

    def make(dialect: Any, scripts: Any) -> FakeTransport:
        return FakeTransport(dialect, scripts)

    return make


@pytest.fixture(scope="session")
def anyinfer_fake_server() -> ServerFactory:
    """Factory `(dialect, scripts) -> fakeservers.FakeServer` (not yet started).

    Use the server as a context manager: `with anyinfer_fake_server("openai-chat",
    [script]) as srv: ... srv.base_url ...`.
    """
    from anyinfer.fakeservers import FakeServer

    def make(dialect: Any, scripts: Any) -> FakeServer:
        return FakeServer(dialect, scripts)

    return make


@pytest.fixture
def anyinfer_harness(
    request: pytest.FixtureRequest,
    anyinfer_conformance_registry: ConformanceRegistry,
    anyinfer_adapter: AdapterEntry,
    anyinfer_fake_transport: TransportFactory,
    anyinfer_fake_server: ServerFactory,
) -> Harness:
    """A `anyinfer.conformance.runner.Harness` for the adapter under test.

    Its key is the test's node id (test and adapter), so under a derandomized profile
    every test x adapter draws its own reproducible sequence of scripts.
    """
    from .runner import Harness

    return Harness(
        anyinfer_conformance_registry,
        anyinfer_adapter,
        transport_factory=anyinfer_fake_transport,
        server_factory=anyinfer_fake_server,
        key=request.node.nodeid,
    )


# --- reporting -----------------------------------------------------------------------


def _failures(exc: BaseException) -> list[Any]:
    """The `ConformanceFailure`s in `exc` (itself, or inside an exception group)."""
    from .runner import ConformanceFailure

    if isinstance(exc, ConformanceFailure):
        return [exc]
    if isinstance(exc, BaseExceptionGroup):
        found: list[Any] = []
        for inner in exc.exceptions:
            more = _failures(inner)
            if not more:
                return []  # something else went wrong too: keep pytest's own report
            found += more
        return found
    return []


def _covers(item: pytest.Item) -> tuple[str, ...]:
    marker = item.get_closest_marker(MARKER)
    if marker is None:
        return ()
    covers = marker.kwargs.get("covers", ())
    return tuple(covers)


def _adapter_of(item: pytest.Item) -> str | None:
    callspec = getattr(item, "callspec", None)
    entry = callspec.params.get("anyinfer_adapter") if callspec is not None else None
    return getattr(entry, "name", None)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Record matrix cells and replace tracebacks with the conformance report."""
    report = yield
    state = item.config.stash.get(_STATE, None)
    if state is None or not item.nodeid.startswith(SUITE_NODEID):
        return report
    adapter = _adapter_of(item)
    covers = _covers(item)
    if adapter is None:
        return report
    failures = _failures(call.excinfo.value) if call.excinfo is not None else []
    if report.failed:
        if failures:
            broken = {g for f in failures for g in f.guarantees}
            for g in broken:
                state.cells[(adapter, g)] = "FAIL"
            lines = [f.report for f in failures]
            if len(failures) > 1:
                lines.insert(0, f"{len(failures)} distinct failures:")
            notes = getattr(call.excinfo.value, "__notes__", None) if call.excinfo else None
            if notes:
                lines.append("\n".join(str(n) for n in notes))
            report.longrepr = "\n\n".join(lines)
        else:
            for g in covers:
                state.cells.setdefault((adapter, g), "error")
    elif report.when == "call" and report.passed:
        for g in covers:
            state.cells.setdefault((adapter, g), "ok")
    elif report.skipped and report.when in ("setup", "call"):
        for g in covers:
            state.cells.setdefault((adapter, g), "skip")
    return report


def _row(state: _State, name: str, basis: str | None, guarantees: Sequence[str]) -> list[str]:
    """An entry's matrix cells: its own, or, for an entry standing on `basis`, the
    basis's results once its own entry check held (its own cells when it did not)."""
    own = [state.cells.get((name, g), "-") for g in guarantees]
    if basis is None or "FAIL" in own or "error" in own:
        return own
    if "ok" not in own:  # its entry check did not run (or was skipped)
        return own
    return [state.cells.get((basis, g), "-") for g in guarantees]


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    """Print the adapter x guarantee matrix."""
    state = config.stash.get(_STATE, None)
    if state is None or not state.entries or config.option.collectonly:
        return
    from hypothesis import settings

    from .checker import GUARANTEES, SHORT_NAMES
    from .registry import standing

    entries = [e for e in state.entries if e.generates()]
    if not entries:
        return
    names = [e.name for e in entries]
    first = max(len("adapter"), *(len(n) for n in names)) + 2
    labels = [SHORT_NAMES.get(g, g) for g in GUARANTEES]
    widths = [max(len(label), 4) + 2 for label in labels]
    stands = standing(entries)
    tr = terminalreporter
    tr.section("anyinfer conformance: adapter x guarantee")
    header = "adapter".ljust(first) + "".join(lb.ljust(w) for lb, w in zip(labels, widths))
    tr.write_line(header.rstrip())
    for entry in entries:
        cells = _row(state, entry.name, stands.get(entry.name), GUARANTEES)
        line = entry.name.ljust(first) + "".join(c.ljust(w) for c, w in zip(cells, widths))
        if entry.name in stands:
            line = line.rstrip() + f"  (as {stands[entry.name]})"
        bad = "FAIL" in cells or "error" in cells
        tr.write_line(line.rstrip(), red=bad, green=not bad and "ok" in cells)
    tr.write_line("")
    tr.write_line("  ".join(f"{SHORT_NAMES.get(g, g)} = {g}" for g in GUARANTEES[:5]))
    tr.write_line("  ".join(f"{SHORT_NAMES.get(g, g)} = {g}" for g in GUARANTEES[5:]))
    tr.write_line(
        "ok: held in every example; FAIL: broken (see the report above); error: the test "
        "failed for another reason; -: not reached"
    )
    if stands:
        tr.write_line(
            f"(as X): {len(stands)} presets read responses exactly as X does (same dialect, "
            "adapter code and reading quirks; they differ in URL, key and request fields), so "
            "the property suite ran once, for X; each ran its own entry check (its class, its "
            "URL path, key header and request quirks, documented streams and a whole "
            "response): its row shows X's results when that check held, else its own"
        )
    dialects = ", ".join(f"{e.name}: {e.dialect}" for e in entries if e.name not in stands)
    tr.write_line(f"dialects: {dialects}")
    profile = settings.get_current_profile_name()
    examples = state.examples_option or settings().max_examples
    where = f", hypothesis profile {profile!r}" if profile else ""
    tr.write_line(f"examples per property: {examples}{where}")


class _RetrievalMatrix:
    """Prints the embedding and rerank matrix after the generation one."""

    @pytest.hookimpl(trylast=True)
    def pytest_terminal_summary(
        self, terminalreporter: Any, exitstatus: int, config: pytest.Config
    ) -> None:
        """The adapter x embedding and rerank guarantee matrix, for every selected adapter
        whose class embeds or reranks (`n/a` in the columns of an operation it does not
        serve)."""
        state = config.stash.get(_STATE, None)
        if state is None or not state.entries or config.option.collectonly:
            return
        from .embeddings import EMBED_GUARANTEES, EMBED_SHORT_NAMES
        from .registry import standing
        from .reranking import RERANK_GUARANTEES, RERANK_SHORT_NAMES

        rows: list[tuple[AdapterEntry, bool, bool]] = []
        for entry in state.entries:
            try:
                cls = entry.resolve_class()
                embeds, reranks = cls.serves_embeddings(), cls.serves_rerank()
            except Exception:  # unresolvable: the generation matrix reports it
                continue
            if embeds or reranks:
                rows.append((entry, embeds, reranks))
        if not rows:
            return
        stands = standing([entry for entry, _e, _r in rows])
        guarantees = (*EMBED_GUARANTEES, *RERANK_GUARANTEES)
        short = {**EMBED_SHORT_NAMES, **RERANK_SHORT_NAMES}
        names = [entry.name for entry, _e, _r in rows]
        first = max(len("adapter"), *(len(n) for n in names)) + 2
        labels = [short[g] for g in guarantees]
        widths = [max(len(label), 4) + 2 for label in labels]
        tr = terminalreporter
        tr.section("anyinfer conformance: embeddings and rerank x guarantee")
        header = "adapter".ljust(first) + "".join(lb.ljust(w) for lb, w in zip(labels, widths))
        tr.write_line(header.rstrip())
        for entry, embeds, reranks in rows:
            cells = _row(state, entry.name, stands.get(entry.name), guarantees)
            served = [embeds] * len(EMBED_GUARANTEES) + [reranks] * len(RERANK_GUARANTEES)
            cells = [c if on else "n/a" for c, on in zip(cells, served)]
            line = entry.name.ljust(first) + "".join(c.ljust(w) for c, w in zip(cells, widths))
            if entry.name in stands:
                line = line.rstrip() + f"  (as {stands[entry.name]})"
            bad = "FAIL" in cells or "error" in cells
            tr.write_line(line.rstrip(), red=bad, green=not bad and "ok" in cells)
        tr.write_line("")
        tr.write_line("  ".join(f"{short[g]} = {g}" for g in EMBED_GUARANTEES))
        tr.write_line("  ".join(f"{short[g]} = {g}" for g in RERANK_GUARANTEES))
        tr.write_line(
            "ok: held in every example; FAIL: broken (see the report above); error: the test "
            "failed for another reason; skip: the dialect scripts no such answers; n/a: the "
            "adapter does not serve the operation; -: not reached"
        )
