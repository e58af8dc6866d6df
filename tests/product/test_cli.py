"""The `anyinfer` command line, driven as a user would: a subprocess, real output."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from anyinfer.fakeservers import FakeServer, Fault, Script, ScriptUsage, Text
from tests.fakehub import FakeHub, HubFile

SECRET = "sk-cli-secret-key-0000111122223333"
REPO = "bartowski/SmolLM2-135M-Instruct-GGUF"


def run(
    *args: str, env: dict[str, str] | None = None, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "anyinfer", *args],
        capture_output=True,
        text=True,
        env=full,
        input=stdin,
        timeout=60,
        check=False,
    )


@pytest.fixture
def store_env(tmp_path: Path) -> dict[str, str]:
    return {"ANYINFER_MODEL_DIR": str(tmp_path / "store"), "HF_HOME": str(tmp_path / "hf")}


def test_help_everywhere() -> None:
    top = run("--help")
    assert top.returncode == 0
    for command in ("chat", "models", "health", "catalog", "pull", "ls", "rm", "locate"):
        assert command in top.stdout
        sub = run(command, "--help")
        assert sub.returncode == 0 and "Usage:" in sub.stdout


def test_chat_streams_and_summarizes() -> None:
    script = Script(pieces=(Text("Hello"), Text(" there")), usage=ScriptUsage(5, 2))
    with FakeServer("openai-chat", [script]) as srv:
        done = run(
            "chat", "openai:fake-model", "hi", "--base-url", srv.base_url, "--api-key", SECRET
        )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Hello there"
    assert "TTFT" in done.stderr and "in 5 / out 2 tokens" in done.stderr
    assert SECRET not in done.stdout + done.stderr


def test_chat_json_parses() -> None:
    script = Script(pieces=(Text("{}"),), usage=ScriptUsage(1, 1))
    with FakeServer("openai-chat", [script]) as srv:
        done = run(
            "chat", "openai:m", "hi", "--json", env={"ANYINFER_OPENAI_BASE_URL": srv.base_url}
        )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["text"] == "{}" and result["usage"]["total_tokens"] == 2


def test_chat_interactive_keeps_the_conversation() -> None:
    scripts = [Script(pieces=(Text("one"),)), Script(pieces=(Text("two"),))]
    with FakeServer("openai-chat", scripts) as srv:
        done = run("chat", "openai:m", "--base-url", srv.base_url, stdin="first\nsecond\n\n")
        second = srv.requests[1].json
    assert done.returncode == 0, done.stderr
    assert "one" in done.stdout and "two" in done.stdout
    assert second is not None
    assert [m["role"] for m in second["messages"]] == ["user", "assistant", "user"]


def test_errors_are_reported_without_secrets() -> None:
    script = Script(
        fault=Fault("status", status=401, message=f"Incorrect API key provided: {SECRET}")
    )
    with FakeServer("openai-chat", [script, script, script]) as srv:
        done = run("chat", "openai:m", "hi", "--base-url", srv.base_url, "--api-key", SECRET)
    assert done.returncode != 0
    assert "AuthenticationError" in done.stderr and SECRET not in done.stderr + done.stdout


def test_models_and_health() -> None:
    with FakeServer("openai-chat", [], models=["alpha", "beta"]) as srv:
        listed = run("models", "openai", "--base-url", srv.base_url, "--json")
        healthy = run("health", "openai", "--base-url", srv.base_url)
    assert [m["id"] for m in json.loads(listed.stdout)] == ["alpha", "beta"]
    assert healthy.returncode == 0 and "ready" in healthy.stdout
    dead = run("health", "openai", "--base-url", "http://127.0.0.1:9/v1", "--timeout", "2")
    assert dead.returncode == 1 and "NOT ready" in dead.stdout


def test_catalog_table_and_json(store_env: dict[str, str]) -> None:
    table = run("catalog", "--best-at", "coding", env=store_env)
    assert table.returncode == 0 and "qwen2.5-coder-7b" in table.stdout
    data = json.loads(
        run("catalog", "--ram-gb", "64", "--gpu", "RTX 4090:24", "--json", env=store_env).stdout
    )
    verdicts = {m["id"]: m["verdict"] for m in data["models"]}
    assert verdicts["qwen3-8b"] == "gpu"
    bad = run("catalog", "--best-at", "juggling", env=store_env)
    assert bad.returncode != 0 and "best_at" in bad.stderr


def test_pull_ls_locate_rm_against_a_fake_hub(store_env: dict[str, str]) -> None:
    data = b"GGUF" + b"x" * 3_000_000
    repos = {REPO: {"SmolLM2-135M-Instruct-Q4_K_M.gguf": HubFile(data)}}
    with FakeHub(repos) as hub:
        env = {**store_env, "HF_ENDPOINT": hub.endpoint}
        dry = run("pull", "smollm2-135m", "--variant", "llama.cpp:Q4_K_M", "--dry-run", env=env)
        assert dry.returncode == 0, dry.stderr
        assert f"{len(data)} bytes" in dry.stdout
        pulled = run("pull", "smollm2-135m", "--variant", "llama.cpp:Q4_K_M", env=env)
    assert pulled.returncode == 0, pulled.stderr
    assert f"{len(data)} bytes" in pulled.stdout  # the exact size comes first
    progress = [line for line in pulled.stderr.splitlines() if "%" in line]
    assert progress and progress[-1].lstrip().startswith("100.0%")
    assert "3.0 MB / 3.0 MB" in progress[-1]

    listed = json.loads(run("ls", "--json", env=store_env).stdout)
    assert [e["model_id"] for e in listed] == ["smollm2-135m"]
    located = json.loads(run("locate", "smollm2-135m", "--verify", "--json", env=store_env).stdout)
    assert located["verified"] and located["launch"]["llama.cpp"][0] == "llama-server"
    removed = run("rm", listed[0]["entry_id"], env=store_env)
    assert removed.returncode == 0 and "freed" in removed.stdout
    assert json.loads(run("ls", "--json", env=store_env).stdout) == []
    missing = run("locate", "smollm2-135m", env=store_env)
    assert missing.returncode != 0 and "not installed" in missing.stderr


def test_budget_reports_the_window(tmp_path: Path) -> None:
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("word " * 1000)
    done = run("budget", "openai:gpt-4o-mini", str(prompt), "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["context_window"] == 128000 and data["verdict"] == "fits"
    assert data["prompt"]["floor"] <= 1000 <= data["prompt"]["ceiling"]
    text = run("budget", "gpt-4o-mini", str(prompt))
    assert "window: 128000 (catalog)" in text.stdout and "verdict: fits" in text.stdout
    unknown = run("budget", "local:mystery", str(prompt), "--base-url", "http://127.0.0.1:9/v1")
    assert "verdict: unknown" in unknown.stdout
