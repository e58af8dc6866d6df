"""Cassette machinery: scrubbing before disk, strict replay, the network guard."""

from __future__ import annotations

import gzip
import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import httpx
import pytest
from helpers import QuietHandler, http_server

import anyinfer as ai
from anyinfer.conformance import cassettes

pytest_plugins = ["pytester"]

SECRET = "sk-planted-secret-abcdefghijklmnop"
REGISTERED = "registered-only-secret-value-42"


@pytest.fixture
def leaky_server() -> Iterator[str]:
    """A provider that echoes secrets back in headers and a gzipped SSE body."""

    class Handler(QuietHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["content-length"]))
            body = (
                f'data: {{"choices":[{{"index":0,"delta":{{"content":"key {SECRET} and '
                f'{REGISTERED}"}},"finish_reason":"stop"}}]}}\n\ndata: [DONE]\n\n'
            ).encode()
            packed = gzip.compress(body)
            self.reply(
                200,
                packed,
                "text/event-stream",
                content_encoding="gzip",
                set_cookie=f"session={SECRET}",
                openai_organization="org-abcdefghijklmnopqrstu",
                x_echo=SECRET,
            )

    with http_server(Handler) as url:
        yield f"{url}/v1"


def test_planted_secret_never_reaches_the_cassette(tmp_path: Path, leaky_server: str) -> None:
    ai.register_secret(REGISTERED)
    vcr = cassettes.make_vcr(tmp_path, "all")
    settings = ai.ProviderSettings(
        "openai",
        base_url=leaky_server + f"?key={SECRET}"[:0],
        api_key=SECRET,
        headers={"x-api-key": SECRET, "api-key": SECRET, "x-goog-api-key": SECRET},
    )
    with vcr.use_cassette("leak.yaml"), ai.Client([settings]) as client:
        result = client.stream(f"my key is {SECRET}", target="openai:m").collect()
    assert SECRET in result.text  # the live call itself saw everything
    text = (tmp_path / "leak.yaml").read_text()
    assert SECRET not in text and REGISTERED not in text
    assert "org-abcdefghijklmnopqrstu" not in text
    assert "REDACTED" in text
    assert "set-cookie" not in text.lower()
    assert "data: [DONE]" in text  # decompressed, stored as text
    assert "string: |" in text  # a YAML literal block

    with (
        cassettes.make_vcr(tmp_path, "none").use_cassette("leak.yaml"),
        ai.Client([settings]) as client,
    ):
        replayed = client.stream(f"my key is {SECRET}", target="openai:m").collect()
    assert "REDACTED" in replayed.text and replayed.finish_reason == "stop"


def test_scrub_text_masks_key_shapes() -> None:
    for secret in ("sk-proj-" + "a" * 30, "AIza" + "b" * 35, "hf_" + "c" * 30, "gsk_" + "d" * 30):
        assert secret not in cassettes.scrub_text(f"value {secret} end")


def test_query_secrets_are_masked() -> None:
    class Req:
        headers: ClassVar[dict[str, str]] = {"Authorization": "Bearer x", "accept": "*/*"}
        uri = "https://generativelanguage.googleapis.com/v1beta/models?key=AIzaSECRETSECRETSECRET&pageSize=5"
        body = None

    scrubbed = cassettes.scrub_request(Req())
    assert "AIzaSECRET" not in scrubbed.uri and "pageSize=5" in scrubbed.uri
    assert scrubbed.headers["Authorization"] == "REDACTED"


def test_network_guard_blocks_everything_but_loopback(monkeypatch: pytest.MonkeyPatch) -> None:
    attempted: list[Any] = []
    # Stand in for the real connect first, so no packet could leave even if the guard failed.
    monkeypatch.setattr(socket.socket, "connect", lambda self, address: attempted.append(address))
    with cassettes.block_non_loopback():
        s = socket.socket()
        try:
            with pytest.raises(cassettes.NetworkBlockedError, match="no recording"):
                s.connect(("198.51.100.7", 443))
            s.connect(("127.0.0.1", 9))
        finally:
            s.close()
    assert attempted == [("127.0.0.1", 9)]
    assert cassettes._is_loopback(("::1", 80, 0, 0)) and not cassettes._is_loopback(
        ("example.com", 80)
    )


TEST_FILE = """
import httpx, pytest

@pytest.mark.anyinfer_cassette("shared", provider="demo")
def test_one_request(anyinfer_cassette):
    with httpx.Client() as c:
        assert c.get("http://127.0.0.1:9/ping").text == "pong"
"""

CASSETTE = {
    "version": 1,
    "interactions": [
        {
            "request": {
                "method": "GET",
                "uri": "http://127.0.0.1:9/ping",
                "body": None,
                "headers": {},
            },
            "response": {
                "status": {"code": 200, "message": "OK"},
                "headers": {},
                "body": {"string": "pong"},
            },
        }
    ],
}


def _write_cassette(root: Path, interactions: int) -> None:
    path = root / "cassettes" / "demo" / "test_replay" / "shared.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    data = dict(CASSETTE, interactions=CASSETTE["interactions"] * interactions)
    path.write_text(json.dumps(data))  # JSON is valid YAML


def test_strict_replay_passes_when_everything_is_played(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_replay=TEST_FILE)
    _write_cassette(pytester.path, 1)
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=1)


def test_unplayed_interaction_fails_the_test(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_replay=TEST_FILE)
    _write_cassette(pytester.path, 2)
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*1 recorded interaction(s) the test never made*"])


def test_missing_cassette_fails_with_a_clear_message(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_replay=TEST_FILE)
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(failed=0, errors=1)
    result.stdout.fnmatch_lines(["*no cassette at*--anyinfer-record-mode=once*"])


def test_request_without_recording_fails(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_replay=TEST_FILE.replace("/ping", "/other"))
    _write_cassette(pytester.path, 1)
    result = pytester.runpytest("-p", "no:cacheprovider")
    assert result.ret != 0
    result.stdout.fnmatch_lines(
        ["*CannotOverwriteExistingCassetteException*no recorded interaction matches*"]
    )


def test_options_are_registered(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--help")
    result.stdout.fnmatch_lines(
        ["*--anyinfer-record-mode*", "*--anyinfer-cassette-dir*", "*--anyinfer-live*"]
    )
    assert httpx  # imported for the pytester files' benefit
