"""The scripted-provider fixtures, for any project with AnyInfer installed.

Registered through its own `pytest11` entry point (`anyinfer-testing`), so a project
needs no `conftest.py` to use them:

- `anyinfer_scripted`: a `ScriptedProviders`. Call it
  (`anyinfer_scripted("primary", replies)`) to add a scripted provider to its own
  registry.
- `anyinfer_scripted_client`: an `anyinfer.Client` on that registry, serving every
  provider added (before or after the client was made).

Both are function-scoped and overridable. When the test ends the client is closed, the
registrations are undone, and — if the test itself passed — every strict provider must
have used up its scripted replies (`UnusedRepliesError` otherwise), as respx and the fake
servers insist.

The plugin is inert for projects that do not ask for the fixtures: importing it loads
`anyinfer.testing` and nothing heavy (no httpx, no adapter), and it adds no options.
Its one hook notes whether each test's call phase failed, so an unused-reply error
never buries the test's own failure.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from anyinfer import Client

    from ._scripted import ScriptedProviders

__all__ = ["anyinfer_scripted", "anyinfer_scripted_client"]

_CALL_FAILED = pytest.StashKey[bool]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Note whether the test's call phase failed (read by the fixtures' teardown)."""
    report = yield
    if report.when == "call":
        item.stash[_CALL_FAILED] = report.failed
    return report


@pytest.fixture
def anyinfer_scripted(request: pytest.FixtureRequest) -> Generator[ScriptedProviders, None, None]:
    """Scripted providers for this test, in a registry of their own.

    `anyinfer_scripted("primary", [Fail("server"), "Hello"])` adds one (see
    `anyinfer.testing.ScriptedProviders.add`); `.client()` and `.async_client()` build
    clients on the registry, `.calls` lists every call in order.
    """
    from ._scripted import ScriptedProviders

    scripted = ScriptedProviders()
    try:
        yield scripted
    finally:
        scripted.close()
    if not request.node.stash.get(_CALL_FAILED, False):
        scripted.assert_all_used()


@pytest.fixture
def anyinfer_scripted_client(anyinfer_scripted: ScriptedProviders) -> Generator[Client, None, None]:
    """An `anyinfer.Client` serving the `anyinfer_scripted` providers (closed afterwards)."""
    client = anyinfer_scripted.client()
    try:
        yield client
    finally:
        client.close()
