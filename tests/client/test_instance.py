"""Instance configuration: one rule for base URL, key variables and locality, used everywhere.

Nothing here sends traffic: URLs are resolved and inspected, adapters are built but never
asked to connect, and a guard fails any connection to a non-loopback address.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import anyinfer as ai
from anyinfer._adapters.base import HTTPAdapter
from anyinfer._client.instance import (
    api_key_env,
    base_url_env,
    instance_config,
    locality_of,
    resolve_base_url,
)
from anyinfer._local import hardware as hardware_module
from anyinfer._providers.ollama import OllamaAdapter
from anyinfer._providers.openai_compat import configured_base_url

REMOTE = "http://10.0.0.5:11434"
EXPLICIT = "http://127.0.0.1:19999"
DEFAULT = OllamaAdapter.default_base_url
BIG_GPU = ai.HardwareProfile.of(ram_gb=64, gpus=[("NVIDIA RTX 4090", 24)])


@pytest.fixture(autouse=True)
def no_remote_connections(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail loudly if anything tries to reach a non-loopback address."""
    real = socket.socket.connect

    def guarded(self: socket.socket, address: Any) -> None:
        if isinstance(address, tuple):
            try:
                loopback = ipaddress.ip_address(address[0]).is_loopback
            except ValueError:
                loopback = address[0] == "localhost"
            if not loopback:
                raise AssertionError(f"connection attempted to {address!r}")
        real(self, address)

    monkeypatch.setattr(socket.socket, "connect", guarded)


@pytest.fixture
def no_probe(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record (and refuse) any probe of this machine's hardware."""
    calls: list[str] = []

    def refuse(*args: Any, **kwargs: Any) -> ai.HardwareProfile:
        calls.append("detect_hardware")
        raise AssertionError("this machine's hardware was probed for a remote engine")

    monkeypatch.setattr(hardware_module, "detect_hardware", refuse)
    return calls


def test_env_names_follow_the_instance_id() -> None:
    assert base_url_env("gpu-box") == "ANYINFER_GPU_BOX_BASE_URL"
    assert api_key_env("llama.cpp") == "ANYINFER_LLAMA_CPP_API_KEY"


@pytest.mark.parametrize(
    ("url", "locality"),
    [
        ("http://127.0.0.1:11434", "local"),
        ("http://127.8.9.1:8080/v1", "local"),
        ("http://localhost:11434", "local"),
        ("http://LOCALHOST.:11434", "local"),
        ("http://ollama.localhost", "local"),
        ("http://[::1]:8000/v1", "local"),
        ("http://[::ffff:127.0.0.1]:8000", "local"),
        ("http+unix://%2Frun%2Follama.sock", "local"),
        ("unix:///run/ollama.sock", "local"),
        ("127.0.0.1:11434", "local"),
        (REMOTE, "remote"),
        ("http://192.168.1.20:11434", "remote"),
        ("http://[fe80::1]:11434", "remote"),
        ("http://localhost.example.com", "remote"),
        ("http://127.0.0.1.nip.io", "remote"),
        ("https://api.openai.com/v1", "remote"),
        ("", "remote"),
        (None, "remote"),
    ],
)
def test_locality_is_read_from_the_url(url: str | None, locality: str) -> None:
    assert locality_of(url) == locality


def test_base_url_precedence_settings_then_env_then_default() -> None:
    explicit = ai.ProviderSettings("ollama", base_url=EXPLICIT)
    bare = ai.ProviderSettings("ollama")
    env = {base_url_env("ollama"): REMOTE}
    assert resolve_base_url(explicit, DEFAULT, environ=env) == EXPLICIT
    assert resolve_base_url(bare, DEFAULT, environ=env) == REMOTE
    assert resolve_base_url(bare, DEFAULT, environ={}) == DEFAULT
    assert resolve_base_url(bare, None, environ={}) is None
    config = instance_config(bare, OllamaAdapter, environ=env)
    assert (config.base_url, config.base_url_source, config.locality) == (REMOTE, "env", "remote")
    assert config.key_envs == ("ANYINFER_OLLAMA_API_KEY", "OLLAMA_API_KEY")
    assert instance_config(bare, OllamaAdapter, environ={}).base_url_source == "default"


def test_key_variables_instance_first_then_provider() -> None:
    config = instance_config(
        ai.ProviderSettings("openai", alias="work"), ai.default_registry().adapter_class("openai")
    )
    assert config.key_envs == ("ANYINFER_WORK_API_KEY", "OPENAI_API_KEY")


def test_a_remote_instance_configured_only_by_environment_is_never_probed_as_local(
    monkeypatch: pytest.MonkeyPatch, no_probe: list[str]
) -> None:
    monkeypatch.setenv(base_url_env("gpu-box"), REMOTE)
    monkeypatch.setenv(base_url_env("ollama"), REMOTE)
    instances = [ai.ProviderSettings("ollama", alias="gpu-box"), ai.ProviderSettings("ollama")]
    with ai.Client(instances) as client:
        for instance in ("gpu-box", "ollama"):
            view = client.local_catalog(instance)
            assert view.hardware_source == "unavailable"
            assert {f.verdict for f in view} == {"unknown"}
            answered = client.local_catalog(instance, hardware=BIG_GPU)
            assert answered.hardware_source == "supplied"
    assert no_probe == []


def test_a_loopback_env_url_is_still_local(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    calls: list[object] = []

    def fake(*args: Any, **kwargs: Any) -> ai.HardwareProfile:
        calls.append(args)
        return ai.HardwareProfile.of(ram_gb=16)

    monkeypatch.setattr(hardware_module, "detect_hardware", fake)
    monkeypatch.setenv(base_url_env("ollama"), "http://localhost:11434")
    with ai.Client([ai.ProviderSettings("ollama")], model_dir=tmp_path) as client:
        client.local_catalog("ollama")
    assert len(calls) == 1


@pytest.mark.parametrize(
    ("settings_url", "env_url", "expected"),
    [(EXPLICIT, REMOTE, EXPLICIT), (None, REMOTE, REMOTE), (None, None, DEFAULT)],
    ids=["explicit", "env", "default"],
)
def test_every_call_site_agrees(
    monkeypatch: pytest.MonkeyPatch,
    settings_url: str | None,
    env_url: str | None,
    expected: str,
) -> None:
    """The adapter, `configured_base_url`, the client's locality and the CLI's settings."""
    monkeypatch.delenv(base_url_env("ollama"), raising=False)
    if env_url:
        monkeypatch.setenv(base_url_env("ollama"), env_url)
    settings = ai.ProviderSettings("ollama", base_url=settings_url)

    async def built() -> tuple[str, bool]:
        client = ai.AsyncClient([settings])
        try:
            adapter = client._adapter("ollama")
            assert isinstance(adapter, HTTPAdapter)
            _, local = client._local_engines("ollama")
            return adapter.base_url, local
        finally:
            await client.aclose()

    adapter_url, client_local = asyncio.run(built())
    assert adapter_url == expected
    assert configured_base_url(settings, OllamaAdapter.default_base_url) == expected
    assert instance_config(settings, OllamaAdapter).base_url == expected
    assert client_local == (locality_of(expected) == "local")

    from anyinfer._cli import _settings as cli_settings

    cli = cli_settings("ollama", settings_url, None, None)
    assert instance_config(cli, OllamaAdapter).base_url == expected


def _cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "PYTHONUNBUFFERED": "1", **env}
    return subprocess.run(
        [sys.executable, "-m", "anyinfer", *args],
        capture_output=True,
        text=True,
        env=full,
        timeout=60,
        check=False,
    )


def test_the_cli_sees_the_same_locality(tmp_path: Path) -> None:
    env = {"ANYINFER_MODEL_DIR": str(tmp_path / "store"), "HF_HOME": str(tmp_path / "hf")}
    remote = _cli(
        "catalog", "--provider", "ollama", "--json", env={**env, base_url_env("ollama"): REMOTE}
    )
    assert remote.returncode == 0, remote.stderr
    data = json.loads(remote.stdout)
    assert data["hardware_source"] == "unavailable"
    assert {m["verdict"] for m in data["models"]} == {"unknown"}
    flagged = _cli("catalog", "--provider", "gpu-box", "--base-url", REMOTE, "--json", env=env)
    assert flagged.returncode == 0, flagged.stderr
    assert json.loads(flagged.stdout)["hardware_source"] == "unavailable"
    local = _cli(
        "catalog",
        "--provider",
        "ollama",
        "--json",
        env={**env, base_url_env("ollama"): "http://127.0.0.1:11434"},
    )
    assert local.returncode == 0, local.stderr
    assert json.loads(local.stdout)["hardware_source"] == "detected"
