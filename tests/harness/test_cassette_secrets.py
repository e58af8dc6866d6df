"""Cassette scrubbing of a registered secret split across streamed frames."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import QuietHandler, http_server

import anyinfer as ai
from anyinfer.conformance import cassettes

KEY = "sk-cassette-split-key-0123456789"


def _chunk(content: str) -> str:
    payload = {"choices": [{"index": 0, "delta": {"content": content}, "finish_reason": None}]}
    return f"data: {json.dumps(payload)}\n\n"


@pytest.fixture
def split_key_server() -> Iterator[str]:
    """An OpenAI-style stream whose text spells the key across two events."""

    class Handler(QuietHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["content-length"]))
            done = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
            body = (
                _chunk("the key is " + KEY[:12])
                + _chunk(KEY[12:] + ", keep it safe")
                + f"data: {json.dumps(done)}\n\ndata: [DONE]\n\n"
            ).encode()
            self.reply(200, body, "text/event-stream")

    with http_server(Handler) as url:
        yield f"{url}/v1"


def test_a_key_split_across_two_events_never_reaches_the_cassette(
    tmp_path: Path, split_key_server: str
) -> None:
    settings = ai.ProviderSettings("openai", base_url=split_key_server, api_key=KEY)
    with cassettes.make_vcr(tmp_path, "all").use_cassette("split.yaml"):
        with ai.Client([settings]) as client:
            live = client.stream("hi", target="openai:m").collect()
    assert live.text == f"the key is {KEY}, keep it safe"
    text = (tmp_path / "split.yaml").read_text()
    assert KEY[12:] not in text and KEY[:12] not in text
    assert "data: [DONE]" in text

    with cassettes.make_vcr(tmp_path, "none").use_cassette("split.yaml"):
        with ai.Client([settings]) as client:
            replayed = client.stream("hi", target="openai:m").collect()
    assert replayed.text == "the key is REDACTED, keep it safe"
    assert replayed.finish_reason == "stop"


def test_scrub_frames_keeps_untouched_lines_byte_for_byte() -> None:
    ai.register_secret(KEY)
    body = (
        'data: {"d": "a ' + KEY[:5] + '"}\r\n\r\n'
        'data: {"d": "' + KEY[5:] + ' b"}\r\n\r\n'
        'data: {"other":  "spaced"}\r\n\r\n'
        "data: [DONE]\r\n\r\n"
    )
    out = cassettes.scrub_frames(body)
    lines = out.split("\n")
    assert json.loads(lines[0][5:]) == {"d": "a REDACTED"} and lines[0].endswith("\r")
    assert json.loads(lines[2][5:]) == {"d": " b"}
    assert 'data: {"other":  "spaced"}\r' in lines  # an unchanged frame is not re-dumped
    assert KEY[5:] not in out


def test_scrub_frames_reads_a_json_array_stream() -> None:
    ai.register_secret(KEY)
    body = json.dumps([{"t": KEY[:7]}, {"t": KEY[7:] + "!"}], indent=2)
    out = json.loads(cassettes.scrub_frames(body))
    assert out == [{"t": "REDACTED"}, {"t": "!"}]
    assert cassettes.scrub_frames('{"single": "document"}') == '{"single": "document"}'
