"""Installing anyinfer-kit does not get in a project's way, and its extras match its features.

The pytest plugin is loaded into every pytest run once the package is installed, so its
names must not collide with a project's own: a project with its own top-level
`conformance/` and `fakeservers/` packages (generic names the harness once used) must
collect and run its tests, with and without `--anyinfer-conformance`.

Two levels:

- in-process (default suite, a few seconds): pytester projects, with this checkout's
  plugin;
- `-m packaging` (deselected by default; its own step in `.ci/run`, about a minute): the
  wheel is built, installed in a fresh venv with only its runtime dependencies and
  pytest, and the same project runs there; without the `conformance` extra the harness
  and the cassette fixture say so in one line; after `pip install 'wheel[conformance]'`
  the harness runs and a cassette records.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from anyinfer._extras import missing_hint

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[2]

OWN_TESTS = """
import conformance
import conformance.plugin
import fakeservers


def test_own_packages_are_the_projects():
    assert conformance.OWNER == "project"
    assert conformance.plugin.OWNER == "project"
    assert fakeservers.OWNER == "project"
"""


def _project(root: Path) -> None:
    """A project whose own top-level packages are named `conformance` and `fakeservers`
    (with a `conformance.plugin` module, the name the harness's entry point once had)."""
    for package in ("conformance", "fakeservers"):
        (root / package).mkdir()
        (root / package / "__init__.py").write_text('OWNER = "project"\n')
    (root / "conformance" / "plugin.py").write_text('OWNER = "project"\n')
    (root / "tests").mkdir()
    (root / "tests" / "test_own.py").write_text(OWN_TESTS)
    (root / "pytest.ini").write_text("[pytest]\npythonpath = .\n")


# --- in-process --------------------------------------------------------------------------


def test_project_with_its_own_conformance_package_runs(pytester: pytest.Pytester) -> None:
    _project(pytester.path)
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=1)


def test_project_with_its_own_conformance_package_runs_the_harness(
    pytester: pytest.Pytester,
) -> None:
    _project(pytester.path)
    result = pytester.runpytest(
        "-p",
        "no:cacheprovider",
        "--anyinfer-conformance",
        "--anyinfer-adapter=openai",
        "--anyinfer-examples=1",
        "-k",
        "stream_paths or generate_paths",
    )
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*anyinfer conformance: adapter x guarantee*", "openai *ok*"])
    assert "test_own_packages_are_the_projects" not in result.stdout.str()


# --- a clean venv with the built wheel ----------------------------------------------------

CASSETTE_TEST = """
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest


class Hello(BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", "5")
        self.end_headers()
        self.wfile.write(b"hello")

    def log_message(self, *args):
        pass


@pytest.mark.anyinfer_cassette(provider="loopback")
def test_records(anyinfer_cassette):
    server = ThreadingHTTPServer(("127.0.0.1", 0), Hello)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/hello"
        assert httpx.get(url).text == "hello"
    finally:
        server.shutdown()
        server.server_close()
"""


def _run(*args: str | Path, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "HYPOTHESIS_"))}
    env.pop("PYTHONPATH", None)
    env.pop("VIRTUAL_ENV", None)
    return subprocess.run(
        [str(a) for a in args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _ok(done: subprocess.CompletedProcess[str]) -> str:
    text = done.stdout + done.stderr
    assert done.returncode == 0, f"{done.args} exited {done.returncode}:\n{text}"
    return done.stdout


def _one_error_line(done: subprocess.CompletedProcess[str], expected: str) -> None:
    text = done.stdout + done.stderr
    assert done.returncode == pytest.ExitCode.USAGE_ERROR, text
    errors = [line for line in text.splitlines() if line.startswith("ERROR")]
    assert errors == [f"ERROR: {expected}"], text
    assert "Traceback" not in text and "No module named" not in text, text


@pytest.mark.packaging
def test_wheel_in_a_clean_venv(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    _ok(_run(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", dist, ROOT, cwd=ROOT))
    (wheel,) = dist.glob("anyinfer_kit-*.whl")
    venv = tmp_path / "venv"
    _ok(_run(sys.executable, "-m", "venv", venv, cwd=tmp_path))
    python = venv / "bin" / "python"
    _ok(_run(python, "-m", "pip", "install", "-q", wheel, "pytest", cwd=tmp_path))
    absent = "import importlib.util as u; "
    absent += "print([m for m in ['hypothesis', 'vcr'] if not u.find_spec(m)])"
    assert _ok(_run(python, "-c", absent, cwd=tmp_path)).strip() == "['hypothesis', 'vcr']"

    project = tmp_path / "project"
    project.mkdir()
    _project(project)
    pytest_cmd = (python, "-m", "pytest", "-p", "no:cacheprovider")

    # The project's own packages win, with the plugin installed.
    assert "1 passed" in _ok(_run(*pytest_cmd, cwd=project))

    # Without the extra: one line naming it, for the harness and for cassettes.
    _one_error_line(
        _run(*pytest_cmd, "--anyinfer-conformance", cwd=project),
        missing_hint("pytest --anyinfer-conformance", ["hypothesis"]),
    )
    (project / "tests" / "test_cassette.py").write_text(CASSETTE_TEST)
    _one_error_line(
        _run(*pytest_cmd, "--anyinfer-record-mode=once", cwd=project),
        missing_hint("the anyinfer_cassette fixture", ["vcr"]) + " (1 selected test(s) use it)",
    )
    assert not (project / "cassettes").exists()

    # With the extra: the harness runs in this project, and a cassette records.
    _ok(_run(python, "-m", "pip", "install", "-q", f"{wheel}[conformance]", cwd=tmp_path))
    out = _ok(
        _run(
            *pytest_cmd,
            "--anyinfer-conformance",
            "--anyinfer-adapter=openai",
            "--anyinfer-examples=1",
            "-k",
            "stream_paths",
            cwd=project,
        )
    )
    assert "1 passed" in out and "anyinfer conformance: adapter x guarantee" in out, out
    out = _ok(_run(*pytest_cmd, "--anyinfer-record-mode=once", cwd=project))
    assert "2 passed" in out, out
    recorded = project / "cassettes" / "loopback" / "test_cassette" / "test_records.yaml"
    assert "hello" in recorded.read_text("utf-8")
