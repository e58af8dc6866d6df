"""The offline guarantee, proven: replay and fake-server tests pass with no network at all.

Runs a subset of the suite in a fresh network namespace that has only a loopback
interface (`unshare -n`), the way CI runs the whole suite. Skipped where network
namespaces are not available (not root, no `unshare`).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _netns_works() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "-n", "true"], capture_output=True, timeout=10, check=False)
    return probe.returncode == 0


@pytest.mark.skipif(not _netns_works(), reason="network namespaces (unshare -n) unavailable here")
def test_replay_and_fakes_pass_without_network() -> None:
    script = (
        "ip link set lo up 2>/dev/null || true; "
        f"{sys.executable} -m pytest -q -p no:cacheprovider -p no:randomly "
        "tests/harness/test_cassettes.py tests/adapters/test_loopback.py "
        "tests/recordings/test_replay_openai_chat.py"
    )
    done = subprocess.run(
        ["unshare", "-n", "sh", "-c", script],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert " passed" in done.stdout and "failed" not in done.stdout
    # And nothing in there could have reached the network: prove the namespace is empty.
    probe = subprocess.run(
        [
            "unshare",
            "-n",
            sys.executable,
            "-c",
            "import socket; s = socket.socket(); s.settimeout(1); s.connect(('1.1.1.1', 53))",
        ],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert probe.returncode != 0 and "unreachable" in probe.stderr.lower()
