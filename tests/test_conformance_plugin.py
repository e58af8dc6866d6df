"""`pytest --anyinfer-conformance` itself, driven through pytester.

- Every deliberately broken adapter (tests/conformance_broken), registered from a
  conftest through `pytest_anyinfer_configure`, makes the run fail and is reported under
  the guarantee it breaks.
- A correct adapter shipped in a separate, installed package (a package plus a
  `.dist-info` with entry points, on `PYTHONPATH`) is found and passes.
- Without the flag the plugin is inert: nothing collected, nothing heavy imported.

Runs that execute Hypothesis properties go through a subprocess, so the profile their
conftest loads cannot leak into this session.
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conformance_broken import BROKEN

from conformance.checker import GUARANTEES, SHORT_NAMES
from conformance.plugin import (
    INI_ADAPTERS,
    INI_CONFORMANCE,
    INI_EXAMPLES,
    OPTION_ADAPTER,
    OPTION_CONFORMANCE,
    OPTION_EXAMPLES,
    SUITE_NODEID,
)

pytest_plugins = ["pytester"]

TESTS_DIR = Path(__file__).resolve().parent

PROFILE = """
from hypothesis import Phase, settings

settings.register_profile(
    "pytester-run",
    derandomize=True,
    database=None,
    deadline=None,
    phases={phases},
)
settings.load_profile("pytester-run")
"""

NO_SHRINK = "[Phase.explicit, Phase.reuse, Phase.generate]"
WITH_SHRINK = "[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink]"

BROKEN_CONFTEST = """
import sys

sys.path.insert(0, {tests!r})

from conformance_broken import BROKEN


def pytest_anyinfer_configure(registry):
    for name, (cls, _guarantee) in BROKEN.items():
        registry.add(name, cls, dialect="openai-chat")
"""


def _broken_project(pytester: pytest.Pytester, *, shrink: bool) -> None:
    profile = PROFILE.format(phases=WITH_SHRINK if shrink else NO_SHRINK)
    pytester.makeconftest(profile + BROKEN_CONFTEST.format(tests=str(TESTS_DIR)))
    # The project's own test, which conformance mode must not run.
    pytester.makepyfile(test_project="def test_own():\n    raise AssertionError('ran')\n")


def _matrix(output: str) -> dict[str, dict[str, str]]:
    """Parse the terminal matrix: adapter -> guarantee id -> cell."""
    lines = output.splitlines()
    section = next(i for i, ln in enumerate(lines) if "adapter x guarantee" in ln)
    start = next(i for i in range(section, len(lines)) if lines[i].startswith("adapter "))
    header = lines[start].split()
    by_label = {label: g for g, label in SHORT_NAMES.items()}
    columns = [by_label[label] for label in header[1:]]
    rows: dict[str, dict[str, str]] = {}
    for line in lines[start + 1 :]:
        if not line.strip():
            break
        name, *cells = line.split()
        rows[name] = dict(zip(columns, cells, strict=True))
    return rows


def test_every_broken_adapter_is_caught_and_named(pytester: pytest.Pytester) -> None:
    _broken_project(pytester, shrink=False)
    args = [OPTION_CONFORMANCE, OPTION_EXAMPLES, "25", "-p", "no:cacheprovider"]
    for name in BROKEN:
        args += [OPTION_ADAPTER, name]
    result = pytester.runpytest_subprocess(*args, timeout=240)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    output = result.stdout.str()
    assert "test_own" not in output  # the project's own tests did not run
    matrix = _matrix(output)
    assert set(matrix) == set(BROKEN)
    for name, (_cls, guarantee) in BROKEN.items():
        assert matrix[name][guarantee] == "FAIL", (name, guarantee, matrix[name])
        # The failure report names the adapter and the guarantee.
        pattern = rf"anyinfer conformance: adapter {re.escape(name)} \(.*\) broke .*{guarantee}"
        assert re.search(pattern, output), (name, guarantee)
    # Reports carry the events and a script to reproduce with.
    assert "  events (" in output
    assert "    Script(" in output


def test_one_broken_adapter_fails_with_a_shrunk_script(pytester: pytest.Pytester) -> None:
    _broken_project(pytester, shrink=True)
    result = pytester.runpytest_subprocess(
        OPTION_CONFORMANCE,
        OPTION_ADAPTER,
        "broken-stops-at-finish",
        OPTION_EXAMPLES,
        "25",
        "-k",
        "test_async_stream",
        "-p",
        "no:cacheprovider",
        timeout=240,
    )
    result.assert_outcomes(failed=1, deselected=9)
    output = result.stdout.str()
    assert f"{SUITE_NODEID}::test_async_stream[broken-stops-at-finish]" in output
    assert "broke trailing-usage" in output
    assert "[trailing-usage] result.usage lacks" in output
    # Shrunk: no pieces, no fault, only usage left (Hypothesis minimises the figures).
    script_line = output.split("script (minimal once Hypothesis has shrunk it):")[1].splitlines()[1]
    assert script_line.strip().startswith("Script(usage=ScriptUsage(")
    assert "pieces" not in script_line and "fault" not in script_line


GOOD_PACKAGE = '''
"""An OpenAI-compatible provider adapter, distributed outside AnyInfer."""

from anyinfer._providers.openai_chat import OpenAIChatAdapter


class AcmeAdapter(OpenAIChatAdapter):
    provider_id = "acme"
    default_base_url = "https://api.acme.invalid/v1"
    api_key_env = "ACME_API_KEY"
    conformance_dialect = "openai-chat"

    def default_headers(self):
        headers = super().default_headers()
        headers["x-acme-client"] = "anyinfer"
        return headers


def configure(registry):
    registry.add(
        "acme-eu", AcmeAdapter, dialect="openai-chat", settings={"headers": {"x-region": "eu"}}
    )
'''

ENTRY_POINTS = """
[anyinfer.adapters]
acme = acme_anyinfer:AcmeAdapter

[anyinfer.conformance]
acme = acme_anyinfer:configure
"""


def test_correct_adapter_from_an_installed_package_passes(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = pytester.mkdir("site-packages")
    (site / "acme_anyinfer.py").write_text(textwrap.dedent(GOOD_PACKAGE))
    dist = site / "acme_anyinfer-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-anyinfer\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(ENTRY_POINTS)
    monkeypatch.setenv("PYTHONPATH", str(site))
    pytester.makeconftest(PROFILE.format(phases=WITH_SHRINK))
    result = pytester.runpytest_subprocess(
        OPTION_CONFORMANCE,
        OPTION_ADAPTER,
        "acme",
        OPTION_ADAPTER,
        "acme-eu",
        OPTION_EXAMPLES,
        "15",
        "-p",
        "no:cacheprovider",
        timeout=240,
    )
    result.assert_outcomes(passed=18, skipped=2)  # no bundled cassettes for these two
    matrix = _matrix(result.stdout.str())
    assert set(matrix) == {"acme", "acme-eu"}
    for row in matrix.values():
        assert set(row.values()) == {"ok"}, row
    assert "acme: openai-chat, acme-eu: openai-chat" in result.stdout.str()


def test_inert_without_the_flag(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_plain="""
        import sys

        SUITE = ("checker", "runner", "registry", "strategies", "_suite")

        def test_nothing_heavy_was_imported():
            loaded = [m for m in sys.modules if m.split(".")[0] in ("anyinfer", "fakeservers")]
            loaded += [m for m in sys.modules if m in {"conformance." + n for n in SUITE}]
            assert loaded == []
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-v")
    result.assert_outcomes(passed=1)
    assert SUITE_NODEID not in result.stdout.str()
    assert "adapter x guarantee" not in result.stdout.str()


def test_plugin_import_is_light() -> None:
    code = (
        "import sys, conformance.plugin\n"
        "heavy = ('anyinfer', 'fakeservers', 'hypothesis', 'httpx')\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & set(heavy)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_collect_only_lists_the_suite_for_each_adapter(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_project="def test_own():\n    pass\n")
    result = pytester.runpytest(OPTION_CONFORMANCE, "--collect-only", "-q")
    lines = [ln for ln in result.stdout.lines if "::" in ln]
    assert lines and all(ln.startswith(f"{SUITE_NODEID}::") for ln in lines)
    assert f"{SUITE_NODEID}::test_async_stream[openai]" in lines
    assert not any("test_own" in ln for ln in lines)


def test_ini_settings_enable_and_select(pytester: pytest.Pytester) -> None:
    pytester.makeini(
        f"""
        [pytest]
        {INI_CONFORMANCE} = true
        {INI_ADAPTERS} = openai
        {INI_EXAMPLES} = 3
        """
    )
    result = pytester.runpytest("--collect-only", "-q")
    assert f"{SUITE_NODEID}::test_sync_generate[openai]" in result.stdout.lines


def test_unknown_adapter_is_a_usage_error(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest(OPTION_CONFORMANCE, OPTION_ADAPTER, "nope", "--collect-only")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*no conformance adapter named 'nope'; registered: *openai*"])


def test_bad_registration_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        """
        def pytest_anyinfer_configure(registry):
            registry.add("mine", object)
        """
    )
    result = pytester.runpytest(OPTION_CONFORMANCE, "--collect-only")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*adapter_class for 'mine' must be an anyinfer.adapters.Adapter*"])


def test_bad_examples_value_is_a_usage_error(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest(OPTION_CONFORMANCE, OPTION_EXAMPLES, "0", "--collect-only")
    assert result.ret == pytest.ExitCode.USAGE_ERROR


def test_guarantee_labels_cover_every_guarantee() -> None:
    assert set(SHORT_NAMES) == set(GUARANTEES)
    assert len(set(SHORT_NAMES.values())) == len(GUARANTEES)


def test_fixtures_can_be_overridden_from_a_conftest(pytester: pytest.Pytester) -> None:
    log = pytester.path / "served.txt"
    pytester.makeconftest(
        f"""
        import pytest
        from hypothesis import strategies as st
        from fakeservers import Script, Text

        def _record(script):
            with open({str(log)!r}, "a") as f:
                f.write(script.text + "\\n")
            return script

        @pytest.fixture
        def anyinfer_scripts(anyinfer_adapter):
            return st.just(Script(pieces=(Text("only-" + anyinfer_adapter.name),))).map(_record)

        @pytest.fixture(scope="session")
        def anyinfer_examples():
            return 2
        """
    )
    result = pytester.runpytest(
        OPTION_CONFORMANCE, OPTION_ADAPTER, "openai", "-k", "test_async_generate", "-q"
    )
    result.assert_outcomes(passed=1, deselected=9)
    assert set(log.read_text().split()) == {"only-openai"}
