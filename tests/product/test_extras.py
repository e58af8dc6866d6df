"""Optional dependencies: each missing one is reported once, in one line naming its extra.

The table in `anyinfer/_extras.py` must agree with `pyproject.toml` (the extra it names
installs the package) and with the code (every optional import the library makes is in
it). Then each feature that needs one is run without it: the library's constructors raise
a `ConfigError` carrying the hint, and the pytest plugin stops the run with one `ERROR:`
line, no traceback, and nothing written to disk.
"""

from __future__ import annotations

import ast
import importlib
import re
import sys
import tomllib
from pathlib import Path

import pytest

import anyinfer as ai
from anyinfer._extras import DISTRIBUTION, OPTIONAL, missing, missing_hint

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))

# Import names the library may import that are not optional: its runtime dependencies
# (pyproject `dependencies`), a few of their own dependencies (name -> the declared
# dependency that requires it), and pytest (imported only by the pytest plugin, which
# only pytest loads).
DECLARED = {"httpx", "pydantic", "huggingface_hub", "psutil", "platformdirs", "click"}
DECLARED |= {"jsonschema"}
TRANSITIVE = {
    "anyio": "httpx",
    "certifi": "httpx",  # the CA bundle httpx verifies with (_adapters/tls.py)
    "httpcore": "httpx",  # its connection pool, whose orphans _adapters/orphans.py reclaims
    "pydantic_core": "pydantic",
    "tqdm": "huggingface_hub",
    "filelock": "huggingface_hub",
}
RUNTIME = DECLARED | set(TRANSITIVE) | {"pytest"}


def _requirement_name(requirement: str) -> str:
    return re.split(r"[<>=!~\[; ]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def _imported_top_level_modules() -> dict[str, set[str]]:
    """Top-level module -> the library files importing it (statically or by
    `importlib.import_module("...")`), excluding the standard library and anyinfer."""
    found: dict[str, set[str]] = {}
    for path in sorted((ROOT / "anyinfer").rglob("*.py")):
        tree = ast.parse(path.read_text("utf-8"))
        names: list[str] = []
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names += [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.append(node.module)
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "import_module"
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
            ):
                names.append(node.args[0].value)
        for name in names:
            top = name.split(".")[0]
            if top in sys.stdlib_module_names or top in ("anyinfer", "__future__"):
                continue
            found.setdefault(top, set()).add(str(path.relative_to(ROOT)))
    return found


# --- the table -----------------------------------------------------------------------


def test_each_extra_named_installs_its_package() -> None:
    extras = PYPROJECT["project"]["optional-dependencies"]
    for dep in OPTIONAL.values():
        assert dep.extra in extras, f"{dep.module}: no [{dep.extra}] extra in pyproject.toml"
        names = {_requirement_name(r) for r in extras[dep.extra]}
        assert dep.package.lower() in names, f"[{dep.extra}] does not install {dep.package}"


def test_every_optional_import_has_an_entry_and_every_entry_is_imported() -> None:
    imported = _imported_top_level_modules()
    known = RUNTIME | set(OPTIONAL)
    unlisted = {m: sorted(files) for m, files in imported.items() if m not in known}
    assert not unlisted, f"optional imports with no install hint in anyinfer/_extras.py: {unlisted}"
    stale = sorted(set(OPTIONAL) - set(imported))
    assert not stale, f"anyinfer/_extras.py lists modules the library never imports: {stale}"


def test_runtime_allowance_is_what_pyproject_installs() -> None:
    """The allowed names are the declared dependencies and what those require."""
    from importlib.metadata import requires

    deps = PYPROJECT["project"]["dependencies"]
    assert {_requirement_name(r).replace("-", "_") for r in deps} == DECLARED
    for module, parent in TRANSITIVE.items():
        required = {_requirement_name(r) for r in requires(parent) or () if "extra ==" not in r}
        assert module.replace("_", "-") in required, f"{parent} does not require {module}"


def test_hint_is_one_line_naming_package_and_extra() -> None:
    assert missing_hint("TiktokenEstimator", ["tiktoken"]) == (
        "TiktokenEstimator needs tiktoken, which is not installed: "
        f"pip install '{DISTRIBUTION}[tiktoken]'"
    )
    both = missing_hint("pytest --anyinfer-conformance", ["hypothesis", "yaml"])
    assert both == (
        "pytest --anyinfer-conformance needs hypothesis and pyyaml, which are not installed: "
        "pip install 'anyinfer-kit[conformance]'"
    )
    assert "\n" not in missing_hint("x", ["hypothesis", "vcr", "yaml", "keyring"])
    assert missing_hint("x", ["vcr", "keyring"]).endswith("'anyinfer-kit[conformance,keyring]'")
    with pytest.raises(KeyError):
        missing_hint("x", ["numpy"])
    with pytest.raises(ValueError):
        missing_hint("x", [])


def test_missing_sees_blocked_and_absent_modules(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "hypothesis", None)
    assert missing(["json", "hypothesis", "no_such_module_anywhere", "yaml"]) == [
        "hypothesis",
        "no_such_module_anywhere",
    ]


# --- the library's features ------------------------------------------------------------


def test_otel_observer_without_opentelemetry(monkeypatch: pytest.MonkeyPatch) -> None:
    from anyinfer.otel import OpenTelemetryObserver

    monkeypatch.setitem(sys.modules, "opentelemetry", None)
    with pytest.raises(ai.ConfigError) as info:
        OpenTelemetryObserver()
    assert str(info.value).startswith(missing_hint("OpenTelemetryObserver", ["opentelemetry"]))


def test_system_keyring_reference_without_keyring(monkeypatch: pytest.MonkeyPatch) -> None:
    from anyinfer._client.credentials import KeyringResolver

    monkeypatch.setitem(sys.modules, "keyring", None)
    with pytest.raises(ai.ConfigError) as info:
        KeyringResolver().resolve("credential://system/openai")
    assert missing_hint("credential://system/...", ["keyring"]) in str(info.value)


def test_strategies_module_without_hypothesis(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "hypothesis", None)
    monkeypatch.delitem(sys.modules, "anyinfer.conformance.strategies", raising=False)
    with pytest.raises(ModuleNotFoundError) as info:
        importlib.import_module("anyinfer.conformance.strategies")
    assert str(info.value) == missing_hint("anyinfer.conformance.strategies", ["hypothesis"])
    assert info.value.name == "hypothesis"


# --- the pytest plugin ------------------------------------------------------------------

BLOCKER = """
import os
import sys
from importlib.abc import MetaPathFinder

BLOCKED = set(os.environ["ANYINFER_TEST_BLOCK"].split(","))


class Block(MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, Block())
"""


def _run_without(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, blocked: str, *args: str
) -> pytest.RunResult:
    """Run pytest in a subprocess in which `blocked` (comma-separated) cannot be imported,
    as if not installed: a `-p` plugin, loaded before any other, installs the blocker."""
    pytester.makepyfile(block_optional=BLOCKER)
    monkeypatch.setenv("ANYINFER_TEST_BLOCK", blocked)
    plugins = ["-p", "block_optional"]
    if "hypothesis" in blocked:
        plugins += ["-p", "no:hypothesispytest"]  # not installed either, then
    return pytester.runpytest_subprocess(*plugins, "-p", "no:cacheprovider", *args)


def _error_lines(result: pytest.RunResult) -> list[str]:
    return [line for line in result.outlines + result.errlines if line.startswith("ERROR")]


def _no_traceback(result: pytest.RunResult) -> None:
    text = result.stdout.str() + result.stderr.str()
    assert "Traceback" not in text and "ModuleNotFoundError" not in text, text


def test_conformance_without_hypothesis_is_one_line(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(test_own="def test_own():\n    pass\n")
    result = _run_without(pytester, monkeypatch, "hypothesis", "--anyinfer-conformance")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    expected = missing_hint("pytest --anyinfer-conformance", ["hypothesis"])
    assert _error_lines(result) == [f"ERROR: {expected}"]
    _no_traceback(result)
    both = _run_without(pytester, monkeypatch, "hypothesis,yaml", "--anyinfer-conformance")
    expected = missing_hint("pytest --anyinfer-conformance", ["hypothesis", "yaml"])
    assert _error_lines(both) == [f"ERROR: {expected}"]


def test_without_hypothesis_the_plugin_stays_out_of_the_way(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the flag the project's own tests run; `--help` still works with it."""
    pytester.makepyfile(test_own="def test_own():\n    pass\n")
    _run_without(pytester, monkeypatch, "hypothesis").assert_outcomes(passed=1)
    helped = _run_without(pytester, monkeypatch, "hypothesis", "--anyinfer-conformance", "--help")
    assert helped.ret == pytest.ExitCode.OK
    helped.stdout.fnmatch_lines(["*--anyinfer-conformance*"])


CASSETTE_TEST = """
import pytest

@pytest.mark.anyinfer_cassette(provider="acme")
def test_recorded(anyinfer_cassette):
    pass

def test_plain():
    pass

def test_dynamic(request):
    request.getfixturevalue("anyinfer_cassette")
"""


def test_cassettes_without_vcrpy_are_one_line_and_leave_nothing(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(test_cassettes=CASSETTE_TEST)
    result = _run_without(pytester, monkeypatch, "vcr", "--anyinfer-record-mode=once")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    hint = missing_hint("the anyinfer_cassette fixture", ["vcr"])
    assert _error_lines(result) == [f"ERROR: {hint} (1 selected test(s) use it)"]
    _no_traceback(result)
    assert not (pytester.path / "cassettes").exists()
    # Tests that do not use cassettes still run on their own; one that asks for a
    # cassette at run time fails with the same line, and nothing is written either.
    plain = _run_without(pytester, monkeypatch, "vcr", "-k", "plain or dynamic")
    plain.assert_outcomes(passed=1, failed=1)
    plain.stdout.fnmatch_lines([hint])
    _no_traceback(plain)
    assert not (pytester.path / "cassettes").exists()
