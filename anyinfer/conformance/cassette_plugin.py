"""The cassette side of the pytest plugin: record once, replay offline.

Registered through its own `pytest11` entry point (`anyinfer-cassettes`); its options sit
in the same `anyinfer` group. Inert unless a test asks for a cassette: vcrpy is imported
only by the `anyinfer_cassette` fixture.

    @pytest.mark.anyinfer_cassette(provider="llama.cpp")
    def test_plain_stream(anyinfer_cassette):
        ...  # HTTP from here is replayed from cassettes/llama.cpp/<module>/<test>.yaml

Record with `--anyinfer-record-mode=once` (missing cassettes), `new_episodes`, `all` or
`rewrite`; the default, `none`, only replays — what CI runs. `--anyinfer-live` marks a
run against a real engine (tests decide what that means: the bundled cassette tests
start the local llama.cpp engine and re-record).
"""

from __future__ import annotations

from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

__all__ = [
    "CASSETTE_MARKER",
    "INI_CASSETTE_DIR",
    "INI_RECORD_MODE",
    "OPTION_CASSETTE_DIR",
    "OPTION_LIVE",
    "OPTION_RECORD_MODE",
]

OPTION_RECORD_MODE = "--anyinfer-record-mode"
"""`none` (default: replay only), `once`, `new_episodes`, `all` or `rewrite`."""
OPTION_CASSETTE_DIR = "--anyinfer-cassette-dir"
"""Where cassettes live; default: the project's top-level `cassettes/`."""
OPTION_LIVE = "--anyinfer-live"
"""Run the opt-in live tests against a real engine."""
INI_RECORD_MODE = "anyinfer_record_mode"
INI_CASSETTE_DIR = "anyinfer_cassette_dir"
CASSETTE_MARKER = "anyinfer_cassette"

_MODES = ("none", "once", "new_episodes", "all", "rewrite")

_FIXTURE = "anyinfer_cassette"
_NEEDS = ("vcr", "yaml")
"""What cassettes import beyond the runtime dependencies (the `conformance` extra)."""


def pytest_addoption(parser: pytest.Parser) -> None:
    """Cassette options, in the `anyinfer` group."""
    group = parser.getgroup("anyinfer", "AnyInfer conformance and cassettes")
    group.addoption(
        OPTION_RECORD_MODE,
        choices=_MODES,
        default=None,
        help="Cassette record mode: none (replay only; the default), once, new_episodes, "
        "all, rewrite.",
    )
    group.addoption(
        OPTION_CASSETTE_DIR,
        default=None,
        help="Cassette directory (default: <rootdir>/cassettes).",
    )
    group.addoption(
        OPTION_LIVE,
        action="store_true",
        default=False,
        help="Run the opt-in live tests against a real local engine.",
    )
    parser.addini(INI_RECORD_MODE, "Default cassette record mode.", default="none")
    parser.addini(INI_CASSETTE_DIR, "Cassette directory, relative to the rootdir.", default="")


def pytest_configure(config: pytest.Config) -> None:
    """Register the cassette marker."""
    config.addinivalue_line(
        "markers",
        f"{CASSETTE_MARKER}(name=None, *, provider='default'): replay (or record) this test's "
        "HTTP from cassettes/<provider>/<module>/<name or test>.yaml",
    )


def _missing_hint() -> str | None:
    """The one-line install hint when vcrpy or pyyaml is missing, else `None`."""
    from anyinfer._extras import missing, missing_hint

    absent = missing(_NEEDS)
    return missing_hint(f"the {_FIXTURE} fixture", absent) if absent else None


def pytest_collection_finish(session: pytest.Session) -> None:
    """Stop the run with one line when selected tests use cassettes that cannot work.

    Raises:
        pytest.UsageError: If a test selected to run uses the `anyinfer_cassette` fixture
            and vcrpy or pyyaml is not installed.
    """
    users = [item for item in session.items if _FIXTURE in getattr(item, "fixturenames", ())]
    if not users:
        return
    hint = _missing_hint()
    if hint is not None:
        raise pytest.UsageError(f"{hint} ({len(users)} selected test(s) use it)")


@pytest.fixture(scope="session")
def anyinfer_record_mode(pytestconfig: pytest.Config) -> str:
    """The record mode in force: the option, else the ini value, else `none`."""
    mode = pytestconfig.getoption(OPTION_RECORD_MODE) or pytestconfig.getini(INI_RECORD_MODE)
    if mode not in _MODES:
        raise pytest.UsageError(f"{INI_RECORD_MODE} must be one of {', '.join(_MODES)}")
    return str(mode)


@pytest.fixture(scope="session")
def anyinfer_cassette_dir(pytestconfig: pytest.Config) -> Path:
    """Where cassettes live."""
    option = pytestconfig.getoption(OPTION_CASSETTE_DIR) or pytestconfig.getini(INI_CASSETTE_DIR)
    if option:
        path = Path(option)
        return path if path.is_absolute() else pytestconfig.rootpath / path
    return pytestconfig.rootpath / "cassettes"


@pytest.fixture(scope="session")
def anyinfer_live(pytestconfig: pytest.Config) -> bool:
    """Whether `--anyinfer-live` was given."""
    return bool(pytestconfig.getoption(OPTION_LIVE))


@pytest.fixture
def anyinfer_cassette(
    request: pytest.FixtureRequest, anyinfer_record_mode: str, anyinfer_cassette_dir: Path
) -> Generator[Any, None, None]:
    """The test's cassette (a vcrpy `Cassette`), active for the whole test.

    Strict: in replay a request with no recording fails, and so does a recorded
    interaction the test never made. While replaying, connections that would leave
    loopback raise `NetworkBlockedError`. Secrets are scrubbed before recording.
    """
    hint = _missing_hint()  # requested dynamically, past the collection-time check
    if hint is not None:
        pytest.fail(hint, pytrace=False)
    from .cassettes import block_non_loopback, cassette_path, make_vcr, unplayed

    marker = request.node.get_closest_marker(CASSETTE_MARKER)
    name = (marker.args[0] if marker and marker.args else None) or (
        marker.kwargs.get("name") if marker else None
    )
    provider = marker.kwargs.get("provider", "default") if marker else "default"
    path = cassette_path(
        anyinfer_cassette_dir,
        provider,
        request.node.module.__name__.rpartition(".")[2],
        name or request.node.name,
    )
    mode = anyinfer_record_mode
    if mode == "rewrite" and path.exists():
        path.unlink()
    if mode == "none" and not path.exists():
        pytest.fail(
            f"no cassette at {path}: record it with {OPTION_RECORD_MODE}=once against a live "
            "provider or engine",
            pytrace=False,
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    vcr = make_vcr(path.parent, mode)
    replaying = mode in ("none", "once") and path.exists()
    with vcr.use_cassette(path.name) as cassette:
        if replaying:
            with block_non_loopback():
                yield cassette
        else:
            yield cassette
        left = unplayed(cassette) if replaying else []
    if left:
        pytest.fail(
            f"cassette {path.name} has {len(left)} recorded interaction(s) the test never "
            f"made: {', '.join(left)}",
            pytrace=False,
        )
