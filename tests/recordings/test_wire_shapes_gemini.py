"""The `gemini` and `gemini-json-array` dialects' frames have the shapes of real Gemini
traffic.

For every recorded Gemini response in the shared recordings (`shared/wire`, beside the
repository) — `alt=sse` streams (pydantic-ai), JSON-array streams (simonw/llm-gemini),
whole `generateContent` responses and error bodies — a comparable script is built from
what the recording says (its thoughts, text, function calls, finish reason, model and
final usage, with usage `cumulative` when the recording's counts run and `split` when
only the prompt's do) and rendered by the dialect that speaks that framing. Then:

- each kind of chunk (`thought`, `text`, `functionCall`, `finish`, and a whole
  response) has only field key paths that some real chunk of that kind has
  (`candidates[].content.parts[].thoughtSignature`, `usageMetadata.serviceTier`, ...),
  each with a JSON type a real one has, and every key path that all real chunks of
  that kind have; every chunk carries `usageMetadata`, as every recorded one does;
- the bytes are framed as recorded: `alt=sse` events are `data: ` plus compact JSON with
  `": "` after keys, ended by `\\r\\n\\r\\n`; JSON-array bodies are `[`, two-space
  pretty-printed elements joined by `\\n,\\r\\n`, and `\\n]`;
- the response headers every recording of that framing has (`content-type`,
  `content-disposition`, `vary`, ...) are sent with the recorded values;
- error bodies, and the in-stream error object, have the recorded error's key paths.

Fields Gemini documents but no recording shows (cache counts) are allowed by name in
`DOCUMENTED`, with their source. Without the shared recordings every test here skips,
saying where it looked.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from functools import cache
from typing import Any

import pytest
from wire import (
    Interaction,
    Shapes,
    find_wire_dir,
    interactions,
    recording_params,
    sse_json,
    typed_key_paths,
)

from anyinfer.fakeservers import (
    Fault,
    Reasoning,
    Rendered,
    Script,
    ScriptUsage,
    Text,
    ToolFragment,
    get_dialect,
)

SSE = get_dialect("gemini")
ARRAY = get_dialect("gemini-json-array")
_WIRE_DIR, _WIRE_WHY = find_wire_dir()
RECORDED = interactions(_WIRE_DIR, lambda i: i.protocol == "gemini") if _WIRE_DIR else []
SSE_STREAMS = [i for i in RECORDED if i.response.status == 200 and i.response.is_sse]
ARRAY_STREAMS = [
    i
    for i in RECORDED
    if i.response.status == 200 and i.request.wants_stream and not i.response.is_sse
]
WHOLE = [i for i in RECORDED if i.response.status == 200 and not i.request.wants_stream]
ERRORS = [i for i in RECORDED if i.response.status >= 400]

DOCUMENTED = frozenset(
    {
        # UsageMetadata in the Gemini API reference (ai.google.dev/api/generate-content)
        # and google-genai's GenerateContentResponseUsageMetadata: the cached part of
        # the prompt, sent when a cached context is used.
        "usageMetadata.cachedContentTokenCount",
        "usageMetadata.cacheTokensDetails",
        "usageMetadata.cacheTokensDetails[].modality",
        "usageMetadata.cacheTokensDetails[].tokenCount",
    }
)
"""Key paths Gemini documents that no recording happens to show."""

INFRASTRUCTURE_HEADERS = frozenset(
    {"alt-svc", "server-timing", "transfer-encoding", "content-length", "content-encoding"}
)
"""Headers about the transfer or Google's front end, not the protocol: the fake server
frames its own bodies."""


def _params(items: list[Interaction], what: str) -> list[Any]:
    return recording_params(items, f"no recorded Gemini {what} under {_WIRE_DIR}")


# --- key paths ----------------------------------------------------------------------------


def key_paths(value: Any, prefix: str = "") -> dict[str, str]:
    """Every field path of a JSON value and its JSON type (`wire.typed_key_paths`); the
    model's own arguments (`args`) are not the protocol's shape."""
    return typed_key_paths(value, prefix, opaque=("args",))


def _parts(chunk: Mapping[str, Any]) -> list[dict[str, Any]]:
    candidates = chunk.get("candidates") or [{}]
    return list((candidates[0].get("content") or {}).get("parts") or [])


def kind(chunk: Mapping[str, Any]) -> str:
    """A streamed chunk's kind: `finish` when it carries the finish reason, else what
    its first part is (`thought`, `text`, `functionCall`), else `usage`."""
    candidates = chunk.get("candidates") or []
    if candidates and candidates[0].get("finishReason"):
        return "finish"
    parts = _parts(chunk)
    if not parts:
        return "usage"
    if "functionCall" in parts[0]:
        return "functionCall"
    return "thought" if parts[0].get("thought") else "text"


def _shapes(chunks: Iterable[tuple[str, Mapping[str, Any]]]) -> Shapes:
    """The shapes of `(kind, chunk)` pairs. A chunk's `usageMetadata` is the same object
    whatever the chunk carries, so it is compared as a kind of its own; `args`, the
    model's own arguments, is not the protocol's shape."""
    split: list[tuple[str, Mapping[str, Any]]] = []
    for name, chunk in chunks:
        split.append((name, {k: v for k, v in chunk.items() if k != "usageMetadata"}))
        if "usageMetadata" in chunk:
            split.append(("usageMetadata", {"usageMetadata": chunk["usageMetadata"]}))
    return Shapes.of(split, opaque=("args",))


def _compare(rendered: Shapes, real: Shapes, what: str) -> list[str]:
    return rendered.differences(real, what, noun="chunk", documented=DOCUMENTED)


# --- bodies as chunks ---------------------------------------------------------------------


def sse_chunks(body: bytes) -> list[dict[str, Any]]:
    payloads, _ = sse_json(body, sentinel="\x00no sentinel")
    return [p for p in payloads if isinstance(p, dict)]


def array_chunks(body: bytes) -> list[dict[str, Any]]:
    payload = json.loads(body)
    assert isinstance(payload, list)
    return payload


def _stream_chunks(rendered: Rendered, *, sse: bool) -> list[dict[str, Any]]:
    return sse_chunks(rendered.body) if sse else array_chunks(rendered.body)


@cache
def _recorded(framing: str) -> Shapes:
    if framing == "sse":
        chunks = [c for i in SSE_STREAMS for c in sse_chunks(i.response.body)]
    else:
        chunks = [c for i in ARRAY_STREAMS for c in array_chunks(i.response.body)]
    return _shapes((kind(c), c) for c in chunks)


@cache
def _recorded_whole() -> Shapes:
    return _shapes(("whole", i.response.json) for i in WHOLE)


# --- a comparable script, read off a recording ------------------------------------------------

_NEUTRAL_FINISH = {"MAX_TOKENS": "length", "SAFETY": "content_filter"}


def comparable_script(chunks: list[dict[str, Any]], *, sse: bool) -> Script:
    """The wire-realistic script that says what a recorded response says, as far as
    scripts can."""
    pieces: list[Any] = []
    calls = 0
    finish: str | None = None
    for chunk in chunks:
        for part in _parts(chunk):
            if "functionCall" in part:
                call = part["functionCall"]
                pieces.append(
                    ToolFragment(
                        calls,
                        json.dumps(call.get("args", {})),
                        id=call.get("id"),
                        name=call["name"],
                    )
                )
                calls += 1
            elif part.get("text"):
                piece = Reasoning if part.get("thought") else Text
                pieces.append(piece(part["text"]))
        for candidate in chunk.get("candidates") or ():
            if candidate.get("finishReason"):
                wire = candidate["finishReason"]
                finish = _NEUTRAL_FINISH.get(wire, "tool_calls" if calls else "stop")
    metas = [c.get("usageMetadata") or {} for c in chunks]
    last = metas[-1]
    thoughts = last.get("thoughtsTokenCount")
    output = (last.get("candidatesTokenCount") or 0) + (thoughts or 0)
    running = any("candidatesTokenCount" in m or "thoughtsTokenCount" in m for m in metas[:-1])
    usage = ScriptUsage(
        input_tokens=last.get("promptTokenCount"),
        output_tokens=output,
        cache_read_tokens=last.get("cachedContentTokenCount"),
        reasoning_tokens=thoughts,
    )
    return Script(
        pieces=tuple(pieces),
        finish_reason=finish,
        usage=usage,
        usage_placement="cumulative" if running or len(chunks) == 1 else "split",
        model=chunks[-1].get("modelVersion", "fake-model"),
        line_ending="crlf" if sse else "lf",
    )


# --- alt=sse streams ----------------------------------------------------------------------


@pytest.mark.parametrize("recording", _params(SSE_STREAMS, "alt=sse streams"))
def test_sse_chunks_have_recorded_key_paths(recording: Interaction) -> None:
    script = comparable_script(sse_chunks(recording.response.body), sse=True)
    rendered = SSE.render(script, stream=True)
    chunks = sse_chunks(rendered.body)
    assert all("usageMetadata" in c for c in chunks), "every recorded chunk carries usage"
    mine = _shapes((kind(c), c) for c in chunks)
    assert _compare(mine, _recorded("sse"), recording.id) == []


@pytest.mark.parametrize("recording", _params(SSE_STREAMS, "alt=sse streams"))
def test_sse_framing_is_the_recorded_one(recording: Interaction) -> None:
    def events(body: bytes) -> list[bytes]:
        assert body.endswith(b"\r\n\r\n")
        return body[: -len(b"\r\n\r\n")].split(b"\r\n\r\n")

    def framed_as_recorded(event: bytes) -> bool:
        assert event.startswith(b"data: ") and b"\n" not in event
        data = event[len(b"data: ") :]
        again = json.dumps(json.loads(data), separators=(",", ": "), ensure_ascii=False)
        return data == again.encode()

    recorded = events(recording.response.body)
    assert all(framed_as_recorded(e) for e in recorded)  # the recording's own framing
    script = comparable_script(sse_chunks(recording.response.body), sse=True)
    assert all(framed_as_recorded(e) for e in events(SSE.render(script, stream=True).body))


# --- JSON-array streams -------------------------------------------------------------------


@pytest.mark.parametrize("recording", _params(ARRAY_STREAMS, "JSON-array streams"))
def test_array_chunks_have_recorded_key_paths(recording: Interaction) -> None:
    script = comparable_script(array_chunks(recording.response.body), sse=False)
    chunks = array_chunks(ARRAY.render(script, stream=True).body)
    assert all("usageMetadata" in c for c in chunks)
    mine = _shapes((kind(c), c) for c in chunks)
    assert _compare(mine, _recorded("array"), recording.id) == []


@pytest.mark.parametrize("recording", _params(ARRAY_STREAMS, "JSON-array streams"))
def test_array_framing_is_the_recorded_one(recording: Interaction) -> None:
    def elements(body: bytes) -> list[bytes]:
        assert body.startswith(b"[{") and body.endswith(b"}\n]")
        return body[1:-2].split(b"\n,\r\n")

    def pretty(element: bytes) -> bool:
        again = json.dumps(json.loads(element), indent=2, ensure_ascii=False)
        return element == again.encode()

    assert all(pretty(e) for e in elements(recording.response.body))
    script = comparable_script(array_chunks(recording.response.body), sse=False)
    assert all(pretty(e) for e in elements(ARRAY.render(script, stream=True).body))


# --- headers ------------------------------------------------------------------------------


def _always_headers(items: list[Interaction]) -> dict[str, tuple[str, ...]]:
    common: dict[str, tuple[str, ...]] | None = None
    for item in items:
        headers = {
            k: tuple(v for v in vs)
            for k, vs in item.response.headers.items()
            if k not in INFRASTRUCTURE_HEADERS
        }
        common = (
            headers if common is None else {k: v for k, v in common.items() if headers.get(k) == v}
        )
    return common or {}


def _sent(rendered: Rendered) -> dict[str, tuple[str, ...]]:
    out: dict[str, tuple[str, ...]] = {}
    for name, value in rendered.headers:
        out[name] = (*out.get(name, ()), value)
    return out


@pytest.mark.parametrize(
    ("framing", "dialect"),
    [pytest.param("sse", SSE, id="alt=sse"), pytest.param("array", ARRAY, id="json-array")],
)
def test_stream_headers_are_the_recorded_ones(framing: str, dialect: Any) -> None:
    items = SSE_STREAMS if framing == "sse" else ARRAY_STREAMS
    if not items:
        pytest.skip(_WIRE_WHY if _WIRE_DIR is None else f"no recorded {framing} streams")
    sent = _sent(dialect.render(Script(pieces=(Text("x"),)), stream=True))
    expected = _always_headers(items)
    assert expected, "the recordings share some headers"
    assert {k: sent.get(k) for k in expected} == expected


# --- whole responses and errors -----------------------------------------------------------


@pytest.mark.parametrize("recording", _params(WHOLE, "generateContent responses"))
def test_whole_responses_have_recorded_key_paths(recording: Interaction) -> None:
    body = recording.response.json
    assert isinstance(body, dict)
    script = comparable_script([body], sse=False)
    rendered = SSE.render(script, stream=False)
    assert _sent(rendered)["content-type"] == recording.response.headers["content-type"]
    mine = _shapes([("whole", json.loads(rendered.body))])
    assert _compare(mine, _recorded_whole(), recording.id) == []


@pytest.mark.parametrize("recording", _params(ERRORS, "error responses"))
def test_error_bodies_and_the_in_stream_error_have_the_recorded_shape(
    recording: Interaction,
) -> None:
    body = recording.response.json
    real = key_paths(body[0] if isinstance(body, list) else body)
    error = body["error"] if isinstance(body, dict) else body[0]["error"]
    fault = Fault("status", status=recording.response.status, message=error["message"])
    rendered = SSE.render_error(fault)
    assert rendered.status == recording.response.status
    assert _sent(rendered)["content-type"] == recording.response.headers["content-type"]
    assert key_paths(json.loads(rendered.body)) == real
    assert json.loads(rendered.body) == body
    in_stream = SSE.error_frame(
        Fault("provider_error", status=recording.response.status, message=error["message"])
    )
    assert in_stream is not None and not in_stream.startswith(b"data:")
    assert key_paths(json.loads(in_stream)) == real
    array = json.loads(ARRAY.render_error(fault).body)
    assert isinstance(array, list) and key_paths(array[0]) == real


def test_documented_cache_counts_render_with_their_details() -> None:
    """The cache figures no recording shows render as the API reference documents them."""
    script = Script(
        pieces=(Text("a"), Text("b")),
        usage=ScriptUsage(input_tokens=40, output_tokens=5, cache_read_tokens=32),
        usage_placement="cumulative",
    )
    for chunk in sse_chunks(SSE.render(script, stream=True).body):
        meta = chunk["usageMetadata"]
        assert meta["cachedContentTokenCount"] == 32
        assert meta["cacheTokensDetails"] == [{"modality": "TEXT", "tokenCount": 32}]
        assert meta["promptTokenCount"] == 40  # the cached tokens are part of the prompt
