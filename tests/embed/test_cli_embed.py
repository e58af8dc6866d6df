"""`anyinfer embed`: vectors on stdout in input order, a summary on stderr."""

from __future__ import annotations

import json

import pytest
from helpers import cli as run

from anyinfer.fakeservers import FakeServer, Fault, Script
from anyinfer.fakeservers.dialects._embeddings import fake_vector

SECRET = "sk-cli-secret-key-0000111122223333"

pytestmark = pytest.mark.loopback


def _f32(text: str, dims: int) -> list[float]:
    from array import array

    return array("f", fake_vector(text, dims)).tolist()


def test_embed_prints_one_vector_per_input_in_order() -> None:
    with FakeServer("openai-chat", lambda request: Script()) as srv:
        done = run(
            "embed", "openai:text-embedding-3-small", "a cat", "a dog", "x",
            "--dimensions", "8", "--batch-size", "2",
            "--base-url", srv.base_url, "--api-key", SECRET,
        )  # fmt: skip
        assert len(srv.requests) == 2
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert [json.loads(line) for line in lines] == [_f32(t, 8) for t in ("a cat", "a dog", "x")]
    assert "3 vectors of 8 dimensions" in done.stderr and "2 batch(es)" in done.stderr
    assert SECRET not in done.stdout + done.stderr


def test_embed_reads_stdin_and_prints_json() -> None:
    with FakeServer("ollama-chat", [Script()]) as srv:
        done = run(
            "embed", "ollama:nomic-embed-text", "--json", "--dimensions", "4",
            "--base-url", srv.base_url, stdin="first line\n\nsecond line\n",
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["vectors"] == [_f32("first line", 4), _f32("second line", 4)]
    assert result["dimensions"] == 4 and result["usage"]["input_tokens"] == 4


def test_embed_failure_is_one_line_without_traceback() -> None:
    refused = Script(fault=Fault("status", status=401, message="bad key"))
    with FakeServer("openai-chat", [refused]) as srv:
        done = run(
            "embed", "openai:text-embedding-3-small", "hi",
            "--base-url", srv.base_url, "--api-key", SECRET,
        )  # fmt: skip
    assert done.returncode == 1
    assert "Traceback" not in done.stderr and "AuthenticationError" in done.stderr
