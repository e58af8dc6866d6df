"""Acquisition with the hub unreachable: a typed `LocalRuntimeError`, nothing registered,
and a one-line CLI error instead of a traceback (issue 16)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from click.testing import CliRunner

import anyinfer as ai
from anyinfer._cli import main


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port  # nothing listens here any more: connecting is refused


@pytest.fixture
def unreachable_hub(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> str:
    endpoint = f"http://127.0.0.1:{_closed_port()}"
    monkeypatch.setenv("HF_ENDPOINT", endpoint)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    monkeypatch.setenv("ANYINFER_MODEL_DIR", str(tmp_path / "store"))
    monkeypatch.delenv("HF_TOKEN", raising=False)
    return endpoint


@pytest.mark.parametrize("dry_run", [True, False])
def test_unreachable_hub_is_a_local_runtime_error_and_registers_nothing(
    unreachable_hub: str, tmp_path: Path, dry_run: bool
) -> None:
    with ai.Client(model_dir=tmp_path / "store") as client:
        with pytest.raises(ai.LocalRuntimeError, match="hub"):
            client.acquire_model("smollm2-135m", variant_id="llama.cpp:Q8_0", dry_run=dry_run)
        assert client.installed_models() == []
    assert not any((tmp_path / "store").rglob("*.gguf"))


def test_pull_with_the_hub_unreachable_prints_one_line_not_a_traceback(
    unreachable_hub: str,
) -> None:
    result = CliRunner().invoke(main, ["pull", "smollm2-135m", "--variant", "llama.cpp:Q8_0"])
    assert result.exit_code == 1
    assert isinstance(result.exception, SystemExit)  # a ClickException, not a crash
    assert "LocalRuntimeError" in result.output
    assert "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) <= 2
