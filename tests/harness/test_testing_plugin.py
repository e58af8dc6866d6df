"""The scripted-provider fixtures, used by unrelated projects through pytester.

The main case is the one the testing guide shows: an app package (`weatherbot`) with a
fallback route, a tool loop and a structured reply, and a test file using the fixtures,
both taken verbatim from `docs/guides/testing.md` and run in a fresh pytest process with
no `conftest.py`: the fixtures come from the `pytest11` entry point alone.
"""

from __future__ import annotations

import re
import tomllib
from importlib.metadata import entry_points
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "guides" / "testing.md"
PLUGIN = "anyinfer.testing.pytest_plugin"


def guide_block(fence: str, contains: str) -> str:
    """The guide's code block fenced as `fence` that contains `contains`."""
    text = GUIDE.read_text("utf-8")
    found = [
        m.group(1)
        for m in re.finditer(rf"^```{fence}\n(.*?)^```", text, re.S | re.M)
        if contains in m.group(1)
    ]
    assert len(found) == 1, f"expected one ```{fence} block with {contains!r} in {GUIDE.name}"
    return found[0]


def app_project(pytester: pytest.Pytester) -> None:
    """The guide's app as its own package under src/, and the guide's test file."""
    pytester.makeini("[pytest]\npythonpath = src\n")
    package = pytester.mkdir("src") / "weatherbot"
    package.mkdir()
    (package / "__init__.py").write_text(guide_block("python", "ROUTE = ai.Route"), "utf-8")
    tests = pytester.mkdir("tests")
    (tests / "test_weatherbot.py").write_text(guide_block("py", "anyinfer_scripted"), "utf-8")


def test_the_entry_point_is_declared_and_installed() -> None:
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))
    table = declared["project"]["entry-points"]["pytest11"]
    assert table["anyinfer-testing"] == PLUGIN
    installed = {ep.name: ep.value for ep in entry_points(group="pytest11")}
    assert installed.get("anyinfer-testing") == PLUGIN, (
        "the installed metadata predates the entry point: run `pip install -e .` again"
    )


def test_an_app_tests_its_fallback_tool_loop_and_repair_budget(pytester: pytest.Pytester) -> None:
    app_project(pytester)
    assert not list(pytester.path.rglob("conftest.py"))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-v")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(
        [
            "*test_answer_falls_back PASSED*",
            "*test_forecast_calls_the_tool PASSED*",
            "*test_plan_repairs_once PASSED*",
        ]
    )


def test_the_app_tests_catch_a_broken_app(pytester: pytest.Pytester) -> None:
    """The same tests fail when the app loses its fallback, its tool or its repair
    budget: they test the app, not the fixtures."""
    app_project(pytester)
    app = pytester.path / "src" / "weatherbot" / "__init__.py"
    source = app.read_text("utf-8")
    broken = (
        source.replace('["primary:large-model", "backup:small-model"]', '["primary:large-model"]')
        .replace("tools=[get_weather]", "tools=[]")
        .replace("repair=ai.Repair(1)", "repair=ai.Repair(0)")
    )
    assert broken.count("primary:large-model") == 1 and "tools=[]" in broken
    app.write_text(broken, "utf-8")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(failed=3)
    out = result.stdout.str()
    assert "AllTargetsFailedError" in out  # no fallback left
    assert "SchemaViolationError" in out  # no repair left


def test_strictness_at_teardown(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_strict="""
        from anyinfer.testing import Fail, ScriptExhaustedError

        def test_passes_but_leaves_a_reply(anyinfer_scripted, anyinfer_scripted_client):
            anyinfer_scripted("p", ["used", "left over"])
            assert anyinfer_scripted_client.generate("x", target="p:m").text == "used"

        def test_fails_and_leaves_a_reply(anyinfer_scripted, anyinfer_scripted_client):
            anyinfer_scripted("p", ["never asked"])
            assert False, "the test's own failure"

        def test_lax_provider(anyinfer_scripted, anyinfer_scripted_client):
            anyinfer_scripted("p", ["maybe"], strict=False)

        def test_one_call_too_many(anyinfer_scripted, anyinfer_scripted_client):
            anyinfer_scripted("p", ["one"])
            anyinfer_scripted_client.generate("x", target="p:m")
            anyinfer_scripted_client.generate("x", target="p:m")
        """
    )
    result = pytester.runpytest("-p", "no:cacheprovider", "-rA")
    result.assert_outcomes(passed=2, failed=2, errors=1)
    out = result.stdout.str()
    assert out.count("UnusedRepliesError") >= 1
    result.stdout.fnmatch_lines(
        [
            "*ERROR at teardown of test_passes_but_leaves_a_reply*",
            "*'p' was called 1 time(s) and still has 1 unused reply: Reply('left over')*",
        ]
    )
    assert "ERROR at teardown of test_fails_and_leaves_a_reply" not in out
    assert "the test's own failure" in out
    result.stdout.fnmatch_lines(["*ScriptExhaustedError*no reply for call #2*"])


def test_async_clients_and_overriding_a_fixture(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        """
        import pytest

        @pytest.fixture
        def anyinfer_scripted_client(anyinfer_scripted):
            with anyinfer_scripted.client(retain_raw=True) as client:
                yield client
        """
    )
    pytester.makepyfile(
        test_more="""
        import asyncio
        from anyinfer.testing import Reply

        def test_overridden(anyinfer_scripted, anyinfer_scripted_client):
            anyinfer_scripted("p", Reply("x", raw={"kept": True}))
            assert anyinfer_scripted_client.generate("x", target="p:m").raw == {"kept": True}

        def test_async(anyinfer_scripted):
            anyinfer_scripted("p", ["a", "b"])

            async def go():
                async with anyinfer_scripted.async_client() as client:
                    first = await client.generate("x", target="p:m")
                    second = await client.stream("y", target="p:m").collect()
                return first.text + second.text

            assert asyncio.run(go()) == "ab"
            assert [c.stream for c in anyinfer_scripted.calls] == [False, True]
        """
    )
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)


def test_fixtures_are_listed(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--fixtures", "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(
        [
            "*anyinfer_scripted -- *pytest_plugin.py*",
            "*Scripted providers for this test, in a registry of their own.*",
            "*anyinfer_scripted_client -- *pytest_plugin.py*",
        ]
    )


def test_inert_for_a_project_that_does_not_use_it(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_plain="""
        import sys

        def test_nothing_heavy_was_imported():
            assert "anyinfer.testing.pytest_plugin" in sys.modules  # the plugin is loaded
            # No adapter module (nor httpx through it) until a provider is registered.
            assert "anyinfer.testing._adapter" not in sys.modules
            assert "anyinfer._adapters.base" not in sys.modules
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
