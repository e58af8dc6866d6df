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
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conformance_broken import BROKEN

import anyinfer.conformance
from anyinfer.conformance.cassette_plugin import INI_CASSETTE_DIR, OPTION_CASSETTE_DIR
from anyinfer.conformance.checker import EARLY_EXIT, GUARANTEES, SHORT_NAMES
from anyinfer.conformance.plugin import (
    INI_ADAPTERS,
    INI_CONFORMANCE,
    INI_EXAMPLES,
    OPTION_ADAPTER,
    OPTION_CONFORMANCE,
    OPTION_EXAMPLES,
    SUITE_NODEID,
)

pytest_plugins = ["pytester"]

TESTS_DIR = Path(__file__).resolve().parents[1]
ROOT = TESTS_DIR.parent
SUITE_TESTS = len(
    re.findall(
        r"^def test_", Path(anyinfer.conformance.__file__).with_name("_suite.py").read_text(), re.M
    )
)
"""How many tests the conformance suite runs per adapter."""
RERANK_TESTS = len(
    re.findall(
        r"^def test_rerank_",
        Path(anyinfer.conformance.__file__).with_name("_suite.py").read_text(),
        re.M,
    )
)
"""How many of them check reranking (parametrized only over adapters that rerank)."""

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


ALSO_NAMED: dict[str, tuple[str, ...]] = {
    # LF-only framing loses the events of a CRLF stream: the failure flush sees the
    # usage that was sent go missing, and result agreement sees the text go missing;
    # Hypothesis's example order decides which is reported (both were seen in CI runs).
    "broken-lf-only-framing": ("result-agreement",),
}


@pytest.mark.timeout(900)
def test_every_broken_adapter_is_caught_and_named(pytester: pytest.Pytester) -> None:
    _broken_project(pytester, shrink=False)
    args = [OPTION_CONFORMANCE, OPTION_EXAMPLES, "25", "-p", "no:cacheprovider"]
    # Their embeddings are OpenAI's own, checked in test_conformance_embeddings.py.
    args += ["-k", "not test_embed and not test_recorded_embeddings"]
    for name in BROKEN:
        args += [OPTION_ADAPTER, name]
    result = pytester.runpytest_subprocess(*args, timeout=840)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    output = result.stdout.str()
    assert "test_own" not in output  # the project's own tests did not run
    matrix = _matrix(output)
    assert set(matrix) == set(BROKEN)
    for name, (_cls, guarantee) in BROKEN.items():
        # Which guarantee trips first can depend on which generated example fails first:
        # an adapter whose bug two guarantees see may be named under either.
        accepted = (guarantee, *ALSO_NAMED.get(name, ()))
        failed = [g for g in accepted if matrix[name][g] == "FAIL"]
        assert failed, (name, accepted, matrix[name])
        # The failure report names the adapter and the guarantee.
        named = "|".join(re.escape(g) for g in failed)
        pattern = rf"anyinfer conformance: adapter {re.escape(name)} \(.*\) broke .*({named})"
        assert re.search(pattern, output), (name, failed)
    # Reports carry the events and a script to reproduce with; with shrinking off, the
    # script is not called minimal.
    assert "  events (" in output
    assert "    Script(" in output
    assert "  script (as drawn, not minimal: the Hypothesis profile leaves out" in output
    assert "minimal: shrunk" not in output
    # A bug elsewhere never shows as an early-exit failure: an attempt that fails
    # before its first delta leaves `exit` not reached.
    for name, (_cls, guarantee) in BROKEN.items():
        if guarantee != EARLY_EXIT:
            assert matrix[name][EARLY_EXIT] != "FAIL", (name, matrix[name])


def test_one_broken_adapter_fails_with_a_shrunk_script(pytester: pytest.Pytester) -> None:
    _broken_project(pytester, shrink=True)
    result = pytester.runpytest_subprocess(
        OPTION_CONFORMANCE,
        OPTION_ADAPTER,
        "broken-stops-at-finish",
        OPTION_EXAMPLES,
        "25",
        "-k",
        "test_stream_paths",
        "-p",
        "no:cacheprovider",
        timeout=240,
    )
    result.assert_outcomes(failed=1, deselected=SUITE_TESTS - 1)
    output = result.stdout.str()
    assert f"{SUITE_NODEID}::test_stream_paths[broken-stops-at-finish]" in output
    assert "broke trailing-usage" in output
    assert "[trailing-usage] result.usage lacks" in output
    # Shrunk: no fault, at most the one text piece a realistic response has, and the
    # usage (Hypothesis minimises the figures).
    script_line = output.split("script (minimal: shrunk by Hypothesis):")[1].splitlines()[1]
    assert script_line.strip().startswith("Script(")
    assert "usage=ScriptUsage(" in script_line
    assert script_line.count("Text(") <= 1 and "fault" not in script_line


GOOD_PACKAGE = '''
"""An OpenAI-compatible provider adapter, distributed outside AnyInfer."""

from anyinfer.adapters import OpenAIChatAdapter


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
    # Nothing fails; the recorded-traffic test (no cassettes for these two) and the
    # opt-in checks skip, and so do the preset entry check (no preset stands on
    # another entry here) and the rerank tests (these adapters do not rerank): one
    # item each with an empty parameter set.
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) == outcomes.get("errors", 0) == 0, outcomes
    single = 1 + RERANK_TESTS
    assert outcomes["passed"] + outcomes["skipped"] == 2 * (SUITE_TESTS - single) + single, outcomes
    matrix = _matrix(result.stdout.str())
    assert set(matrix) == {"acme", "acme-eu"}
    for row in matrix.values():
        assert set(row.values()) <= {"ok", "skip"}, row
        assert row[EARLY_EXIT] == row[GUARANTEES[0]] == "ok", row
    assert "acme: openai-chat, acme-eu: openai-chat" in result.stdout.str()


def test_inert_without_the_flag(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_plain="""
        import sys

        SUITE = ("checker", "runner", "registry", "strategies", "_suite")

        def test_nothing_heavy_was_imported():
            harness = {"anyinfer.conformance." + n for n in SUITE}
            fakes = "anyinfer.fakeservers"
            loaded = [m for m in sys.modules if m in harness or m.startswith(fakes)]
            assert loaded == []
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-v")
    result.assert_outcomes(passed=1)
    assert SUITE_NODEID not in result.stdout.str()
    assert "adapter x guarantee" not in result.stdout.str()


def test_plugin_import_is_light() -> None:
    code = (
        "import sys, anyinfer\n"
        "before = set(sys.modules)\n"
        "import anyinfer.conformance.plugin\n"
        "light = {'anyinfer.conformance', 'anyinfer.conformance.plugin'}\n"
        "ours = {m for m in set(sys.modules) - before if m.startswith('anyinfer')} - light\n"
        "heavy = {m.split('.')[0] for m in sys.modules} & {'hypothesis', 'httpx', 'pydantic'}\n"
        "print(sorted(ours | heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_collect_only_lists_the_suite_for_each_adapter(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_project="def test_own():\n    pass\n")
    result = pytester.runpytest(OPTION_CONFORMANCE, "--collect-only", "-q")
    lines = [ln for ln in result.stdout.lines if "::" in ln]
    assert lines and all(ln.startswith(f"{SUITE_NODEID}::") for ln in lines)
    assert f"{SUITE_NODEID}::test_stream_paths[openai]" in lines
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
    assert f"{SUITE_NODEID}::test_generate_paths[openai]" in result.stdout.lines


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
        from anyinfer.fakeservers import Script, Text

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
        OPTION_CONFORMANCE, OPTION_ADAPTER, "openai", "-k", "test_generate_paths", "-q"
    )
    result.assert_outcomes(passed=1, deselected=SUITE_TESTS - 1)
    assert set(log.read_text().split()) == {"only-openai"}


# --- third-party ergonomics ----------------------------------------------------------


def _collected_adapters(result: pytest.RunResult, test: str) -> set[str]:
    prefix = f"{SUITE_NODEID}::{test}["
    return {ln[len(prefix) : -1] for ln in result.stdout.lines if ln.startswith(prefix)}


def test_adapters_are_selected_by_glob(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest(
        OPTION_CONFORMANCE, OPTION_ADAPTER, "openai-*", OPTION_ADAPTER, "ollama", "--co", "-q"
    )
    assert result.ret == pytest.ExitCode.OK
    picked = _collected_adapters(result, "test_generate_paths")
    assert picked == {"openai-compat", "openai-responses", "ollama"}

    pytester.makeini(f"[pytest]\n{INI_CONFORMANCE} = true\n{INI_ADAPTERS} = azure-* gem?ni\n")
    result = pytester.runpytest("--co", "-q")
    picked = _collected_adapters(result, "test_generate_paths")
    assert picked == {"azure-foundry", "azure-deployments", "gemini"}


def test_a_glob_that_matches_nothing_is_a_usage_error(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest(OPTION_CONFORMANCE, OPTION_ADAPTER, "acme-*", "--co")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*no conformance adapter named or matching 'acme-*'*"])


def _docs_python_block(page: str, marker: str) -> str:
    text = (ROOT / "docs" / page).read_text("utf-8")
    found = [b for b in re.findall(r"^```python\n(.*?)^```", text, re.S | re.M) if marker in b]
    assert len(found) == 1, f"expected one python block with {marker!r} in {page}"
    return found[0]


@pytest.mark.parametrize(("how", "profile"), [("env", "ci"), ("option", "ci"), ("none", "default")])
def test_the_docs_profile_snippet_loads_the_profile(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, how: str, profile: str
) -> None:
    """The adapter guide's conftest snippet, verbatim: `HYPOTHESIS_PROFILE=ci` (or
    Hypothesis's own `--hypothesis-profile ci`) really selects the registered profile."""
    pytester.makeconftest(_docs_python_block("adapter-authors.md", "register_profile"))
    monkeypatch.delenv("HYPOTHESIS_PROFILE", raising=False)
    args = [OPTION_CONFORMANCE, OPTION_ADAPTER, "openai", "-k", "test_generate_paths"]
    if how == "env":
        monkeypatch.setenv("HYPOTHESIS_PROFILE", "ci")
    elif how == "option":
        args += ["--hypothesis-profile", "ci"]
    result = pytester.runpytest_subprocess(*args, "-p", "no:cacheprovider", timeout=240)
    result.assert_outcomes(passed=1, deselected=SUITE_TESTS - 1)
    examples = 30 if profile == "ci" else 100
    assert f"examples per property: {examples}, hypothesis profile {profile!r}" in (
        result.stdout.str()
    )


def test_recorded_traffic_replays_the_configured_cassette_dir(pytester: pytest.Pytester) -> None:
    recorded = pytester.mkdir("recorded")
    shutil.copytree(ROOT / "cassettes" / "openai", recorded / "openai")
    args = [OPTION_CONFORMANCE, OPTION_ADAPTER, "openai", "-k", "test_recorded_traffic"]
    args += ["-p", "no:cacheprovider", "-rs"]

    # The default, <rootdir>/cassettes, does not exist in this project.
    result = pytester.runpytest_subprocess(*args, timeout=840)
    result.assert_outcomes(skipped=1, deselected=SUITE_TESTS - 1)
    assert f"no bundled cassettes under {pytester.path / 'cassettes' / 'openai'}" in (
        result.stdout.str()
    )

    result = pytester.runpytest_subprocess(*args, f"{OPTION_CASSETTE_DIR}=recorded", timeout=240)
    result.assert_outcomes(passed=1, deselected=SUITE_TESTS - 1)

    pytester.makeini(f"[pytest]\n{INI_CASSETTE_DIR} = recorded\n")
    result = pytester.runpytest_subprocess(*args, timeout=840)
    result.assert_outcomes(passed=1, deselected=SUITE_TESTS - 1)


CHOKES_CONFTEST = """
from anyinfer import ProtocolError
from anyinfer.adapters import OpenAIChatAdapter, ReasoningPart, TextPart, ToolCallPart


class ChokesOnContent(OpenAIChatAdapter):
    # Raises at the first content part: a bug in reading content, not in closing.
    def parts_from_chunk(self, chunk, key):
        for part in super().parts_from_chunk(chunk, key):
            if isinstance(part, (TextPart, ReasoningPart, ToolCallPart)):
                raise ProtocolError("choked on content", provider=self.instance_id)
            yield part


def pytest_anyinfer_configure(registry):
    registry.add("chokes", ChokesOnContent, dialect="openai-chat")
"""


def test_exit_shows_not_reached_when_attempts_fail_before_any_delta(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeconftest(PROFILE.format(phases=NO_SHRINK) + CHOKES_CONFTEST)
    result = pytester.runpytest_subprocess(
        OPTION_CONFORMANCE,
        OPTION_ADAPTER,
        "chokes",
        OPTION_EXAMPLES,
        "10",
        "-k",
        "test_early_exit or test_stream_paths",
        "-p",
        "no:cacheprovider",
        timeout=240,
    )
    result.assert_outcomes(failed=3, deselected=SUITE_TESTS - 3)
    output = result.stdout.str()
    row = _matrix(output)["chokes"]
    assert row[EARLY_EXIT] == "-", row
    assert "FAIL" in row.values()  # the stream test names what did break
    assert "anyinfer conformance: adapter chokes (" in output
    assert ") did not reach early-exit-cancels" in output
