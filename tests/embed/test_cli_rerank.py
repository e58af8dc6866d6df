"""`anyinfer rerank`: ranked documents on stdout, best first; a summary on stderr."""

from __future__ import annotations

import json

import pytest
from helpers import cli as run

from anyinfer.fakeservers import FakeServer, Fault, Script

SECRET = "co-cli-secret-key-0000111122223333"
QUERY = "capital of the united states"
DOCS = ["Carson City is in Nevada.", "Washington is the capital of the United States.", "Cats."]

pytestmark = pytest.mark.loopback


def test_rerank_prints_index_score_and_document_best_first() -> None:
    with FakeServer("cohere-v2", lambda request: Script()) as srv:
        done = run(
            "rerank", QUERY, *DOCS, "--target", "cohere:rerank-v3.5", "--top-n", "2",
            "--batch-size", "2", "--base-url", srv.base_url, "--api-key", SECRET,
        )  # fmt: skip
        sent = [r.json for r in srv.requests]
    assert done.returncode == 0, done.stderr
    assert sorted(len(b["documents"]) for b in sent) == [1, 2]
    rows = [line.split("\t") for line in done.stdout.splitlines()]
    assert len(rows) == 2
    assert int(rows[0][0]) == 1 and rows[0][2] == DOCS[1]
    assert float(rows[0][1]) >= float(rows[1][1])
    assert "2 of 3 documents" in done.stderr and "2 request(s)" in done.stderr
    assert "2 search unit(s)" in done.stderr
    assert SECRET not in done.stdout + done.stderr


def test_rerank_reads_stdin_and_prints_json() -> None:
    with FakeServer("cohere-v2", [Script()]) as srv:
        done = run(
            "rerank", QUERY, "-t", "cohere:rerank-v3.5", "--json",
            "--base-url", srv.base_url, "--api-key", SECRET, stdin="\n".join(DOCS) + "\n\n",
        )  # fmt: skip
        assert srv.requests[0].json["documents"] == DOCS
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["results"][0]["index"] == 1
    assert {r["document"] for r in result["results"]} == set(DOCS)
    assert result["search_units"] == 1


def test_rerank_errors_are_one_line() -> None:
    with FakeServer("cohere-v2", [Script(fault=Fault("status", status=401, message="bad"))]) as srv:
        done = run(
            "rerank", QUERY, "a", "-t", "cohere:rerank-v3.5",
            "--base-url", srv.base_url, "--api-key", SECRET,
        )  # fmt: skip
    assert done.returncode == 1
    assert done.stderr.startswith("Error: AuthenticationError")
    assert len(done.stderr.splitlines()) == 1
    missing = run("rerank", QUERY, "a")
    assert missing.returncode == 2 and "--target" in missing.stderr
    nothing = run("rerank", QUERY, "-t", "cohere:rerank-v3.5", "--api-key", SECRET, stdin="")
    assert nothing.returncode == 1 and "nothing to rerank" in nothing.stderr
