"""The `anthropic-messages` dialect's frames have the shapes of real Anthropic traffic.

For every recorded Anthropic Messages stream in the shared recordings (`shared/wire`,
beside the repository), a comparable wire-realistic script is built from what the
recording says (its text, thinking, tool calls, stop reason and usage, with usage
`cumulative` as every recording has it) and rendered by the dialect. Then:

- the set of event types (and of content block and delta types the script model can
  express) is the recording's;
- each kind of event (`message_start`, `content_block_start:text`,
  `content_block_delta:input_json_delta`, ...) has only field key paths that some real
  event of that kind has (`message.usage.cache_creation.ephemeral_5m_input_tokens`,
  `delta.stop_details`, ...), each with a JSON type a real one has, and every key path
  that all real events of that kind have;
- the response headers the recordings always have (`content-type`, `cache-control`)
  are sent with the recorded values; exactly one `message_delta` ends every stream
  before `message_stop`; a `ping` is byte for byte the recorded one.

Error responses are checked the same way against the recorded error bodies. Without
the shared recordings every test here skips, saying where it looked.
"""

from __future__ import annotations

import json
from collections import defaultdict
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
    sse_frames,
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
from anyinfer.fakeservers.dialects.anthropic import STOP_REASONS

DIALECT = get_dialect("anthropic-messages")
_WIRE_DIR, _WIRE_WHY = find_wire_dir()
RECORDED = (
    interactions(_WIRE_DIR, lambda i: i.protocol == "anthropic_messages") if _WIRE_DIR else []
)
STREAMS = [i for i in RECORDED if i.response.status == 200 and i.response.is_sse]
ERRORS = [i for i in RECORDED if i.response.status >= 400]

# Block and delta types the script model can express (server tools, citations and
# redacted thinking have no script piece); events of other kinds are left out of the
# comparison on both sides.
EXPRESSIBLE_BLOCKS = frozenset({"text", "thinking", "tool_use"})
EXPRESSIBLE_DELTAS = frozenset(
    {"text_delta", "thinking_delta", "signature_delta", "input_json_delta"}
)
_NEUTRAL_FINISH = {wire: neutral for neutral, wire in STOP_REASONS.items()}


def _params(items: list[Interaction]) -> list[Any]:
    empty = f"no Anthropic Messages recordings of this kind under {_WIRE_DIR}"
    return recording_params(items, empty)


# --- key paths ----------------------------------------------------------------------------


def key_paths(value: Any, prefix: str = "") -> dict[str, str]:
    """Every field path of a JSON value and its JSON type (`wire.typed_key_paths`); the
    model's own arguments (`input`) are not the protocol's shape."""
    return typed_key_paths(value, prefix, opaque=("input",))


def _kind(event: Mapping[str, Any]) -> str | None:
    """The event's kind, with the block or delta type it carries; `None` when the script
    model cannot express it."""
    kind = str(event.get("type"))
    if kind == "content_block_start":
        block = str(event["content_block"]["type"])
        return f"{kind}:{block}" if block in EXPRESSIBLE_BLOCKS else None
    if kind == "content_block_delta":
        delta = str(event["delta"]["type"])
        return f"{kind}:{delta}" if delta in EXPRESSIBLE_DELTAS else None
    return kind


def _events(body: bytes) -> list[tuple[str | None, dict[str, Any]]]:
    """`(event: name, payload)` for every event of an SSE body."""
    return [(frame.event, json.loads(frame.data)) for frame in sse_frames(body)]


def _expressible(body: bytes) -> list[dict[str, Any]]:
    """The events of a body the script model can say: the events of server-tool,
    redacted-thinking and other such blocks (their start, deltas and stop) left out."""
    events = [payload for _, payload in _events(body)]
    hidden = {e["index"] for e in events if e["type"] == "content_block_start" and _kind(e) is None}
    return [
        e
        for e in events
        if _kind(e) is not None
        and not (e["type"].startswith("content_block_") and e.get("index") in hidden)
    ]


def _first_block_expressible(body: bytes) -> bool:
    first = next((p for _, p in _events(body) if p["type"] == "content_block_start"), None)
    return first is not None and _kind(first) is not None


def _shapes(events: Iterable[Mapping[str, Any]]) -> Shapes:
    """The key paths of the events a script can say, by event kind (`input`, the model's
    own arguments, is not the protocol's shape)."""
    kinds = ((_kind(e), e) for e in events)
    return Shapes.of(((k, e) for k, e in kinds if k is not None), opaque=("input",))


@cache
def _recorded_shapes() -> Shapes:
    return _shapes(e for i in STREAMS for e in _expressible(i.response.body))


# --- a comparable script, read off a recording ------------------------------------------------


def comparable_script(recording: Interaction) -> Script:
    """The wire-realistic script that says what `recording` says, as far as scripts can."""
    events = [payload for _, payload in _events(recording.response.body)]
    pieces: list[Text | Reasoning | ToolFragment] = []
    kinds: dict[int, str] = {}
    slots: dict[int, int] = {}
    usage: dict[str, Any] = {}
    stop_reason: str | None = None
    for event in events:
        kind = event["type"]
        if kind == "message_start":
            usage.update(event["message"].get("usage") or {})
        elif kind == "content_block_start":
            block = event["content_block"]
            kinds[event["index"]] = block["type"]
            if block["type"] == "tool_use":
                slots[event["index"]] = slot = len(slots)
                pieces.append(ToolFragment(slot, "", id=block["id"], name=block["name"]))
        elif kind == "content_block_delta":
            delta = event["delta"]
            block_kind = kinds.get(event["index"])
            if delta["type"] == "text_delta" and block_kind == "text" and delta["text"]:
                pieces.append(Text(delta["text"]))
            elif delta["type"] == "thinking_delta" and delta["thinking"]:
                pieces.append(Reasoning(delta["thinking"]))
            elif (
                delta["type"] == "input_json_delta"
                and block_kind == "tool_use"
                and delta["partial_json"]
            ):
                pieces.append(ToolFragment(slots[event["index"]], delta["partial_json"]))
        elif kind == "message_delta":
            usage.update(event.get("usage") or {})
            stop_reason = event["delta"].get("stop_reason")
    # A call with no argument fragments has arguments `{}`.
    for slot in slots.values():
        if not any(isinstance(p, ToolFragment) and p.index == slot and p.arguments for p in pieces):
            at = next(
                n for n, p in enumerate(pieces) if isinstance(p, ToolFragment) and p.index == slot
            )
            first = pieces[at]
            assert isinstance(first, ToolFragment)
            pieces[at] = ToolFragment(slot, "{}", id=first.id, name=first.name)
    details = usage.get("output_tokens_details") or {}
    return Script(
        pieces=tuple(pieces),
        finish_reason=None
        if stop_reason is None
        else _NEUTRAL_FINISH.get(stop_reason, stop_reason),
        usage=ScriptUsage(
            input_tokens=usage.get("input_tokens"),
            output_tokens=usage.get("output_tokens"),
            cache_read_tokens=usage.get("cache_read_input_tokens"),
            cache_write_tokens=usage.get("cache_creation_input_tokens"),
            reasoning_tokens=details.get("thinking_tokens"),
        ),
        usage_placement="cumulative",
        model=str(events[0]["message"]["model"]),
    )


def _rendered_events(rendered: Rendered) -> list[dict[str, Any]]:
    return _expressible(rendered.body)


# --- streams -------------------------------------------------------------------------------


@pytest.mark.parametrize("recording", _params(STREAMS))
def test_event_types_are_the_recordings(recording: Interaction) -> None:
    script = comparable_script(recording)
    rendered = DIALECT.render(script, stream=True)
    real = {_kind(e) for e in _expressible(recording.response.body)}
    ours = {_kind(e) for e in _rendered_events(rendered)}
    if not _first_block_expressible(recording.response.body):
        # Streams that open with a server tool ping later or not at all; the script
        # cannot say those blocks, so its rendering pings after its first block.
        real.discard("ping")
        ours.discard("ping")
    assert ours == real, f"dialect sends {sorted(ours - real)}, lacks {sorted(real - ours)}"
    names = [name for name, payload in _events(rendered.body)]
    assert names == [payload["type"] for _, payload in _events(rendered.body)]


@pytest.mark.parametrize("recording", _params(STREAMS))
def test_key_paths_are_real_ones(recording: Interaction) -> None:
    script = comparable_script(recording)
    ours = _shapes(_rendered_events(DIALECT.render(script, stream=True)))
    problems = ours.differences(_recorded_shapes(), recording.id, noun="event")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("recording", _params(STREAMS))
def test_ping_follows_the_first_block_start(recording: Interaction) -> None:
    body = recording.response.body
    if not _first_block_expressible(body):
        pytest.skip("the recording opens with a block no script can say (a server tool)")
    ours = DIALECT.render(comparable_script(recording), stream=True).body
    for names in ([n for n, _ in _events(body)], [n for n, _ in _events(ours)]):
        assert names[:3] == ["message_start", "content_block_start", "ping"]


@pytest.mark.parametrize("recording", _params(STREAMS))
def test_one_message_delta_then_message_stop(recording: Interaction) -> None:
    for body in (
        recording.response.body,
        DIALECT.render(comparable_script(recording), stream=True).body,
    ):
        kinds = [payload["type"] for _, payload in _events(body)]
        assert kinds.count("message_delta") == 1
        assert kinds[-2:] == ["message_delta", "message_stop"]
        assert kinds[0] == "message_start"


@pytest.mark.parametrize("recording", _params(STREAMS))
def test_usage_reads_back_as_recorded(recording: Interaction) -> None:
    """The final figures the dialect sends for the comparable script are the recorded
    ones, and the provisional `output_tokens` of its `message_start` is not above them.

    (Server-tool streams raise `input_tokens` between `message_start` and
    `message_delta`; a script states final figures only, so only those are compared.)
    """
    ours = _rendered_events(DIALECT.render(comparable_script(recording), stream=True))
    real = _expressible(recording.response.body)
    final = next(e for e in ours if e["type"] == "message_delta")["usage"]
    real_final = next(e for e in real if e["type"] == "message_delta")["usage"]
    for key in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"):
        assert final[key] == real_final[key], key
    assert final["output_tokens"] == real_final["output_tokens"]
    assert final.get("output_tokens_details") == real_final.get("output_tokens_details")
    start = next(e for e in ours if e["type"] == "message_start")["message"]["usage"]
    assert 0 <= start["output_tokens"] <= final["output_tokens"]


@pytest.mark.parametrize("recording", _params(STREAMS))
def test_headers_are_the_recorded_ones(recording: Interaction) -> None:
    rendered = DIALECT.render(comparable_script(recording), stream=True)
    ours = {name.lower(): value for name, value in rendered.headers}
    always = set.intersection(*(set(i.response.headers) for i in STREAMS))
    for name in ("content-type", "cache-control"):
        assert name in always, f"every recording has {name}"
        assert (ours[name],) == recording.response.headers[name], name
    seen = {name for i in STREAMS for name in i.response.headers}
    assert set(ours) <= seen, f"headers no recording has: {sorted(set(ours) - seen)}"


def test_ping_is_byte_for_byte_the_recorded_one() -> None:
    if not STREAMS:
        pytest.skip(_WIRE_WHY if _WIRE_DIR is None else "no Anthropic streams recorded")
    recorded = {
        frame.data
        for i in STREAMS
        for frame in sse_frames(i.response.body)
        if frame.event == "ping"
    }
    assert recorded, "the recordings have ping events"
    ping = DIALECT.keepalive_frame()
    assert ping.startswith(b"event: ping\ndata: ") and ping.endswith(b"\n\n")
    assert {ping.removeprefix(b"event: ping\ndata: ").removesuffix(b"\n\n").decode()} == recorded


def test_whole_message_has_the_shape_of_a_streamed_one() -> None:
    """No non-streamed Message is recorded; its fields must be those of the recorded
    `message_start` shell, and its blocks those of the recorded `content_block_start`s."""
    if not STREAMS:
        pytest.skip(_WIRE_WHY if _WIRE_DIR is None else "no Anthropic streams recorded")
    shell: dict[str, set[str]] = defaultdict(set)
    blocks: dict[str, set[str]] = defaultdict(set)
    for recording in STREAMS:
        for event in _expressible(recording.response.body):
            if event["type"] == "message_start":
                for path, kind in key_paths(event["message"]).items():
                    shell[path].add(kind)
            elif event["type"] == "content_block_start":
                for path, kind in key_paths(event["content_block"]).items():
                    blocks[path].add(kind)
    script = Script(
        pieces=(
            Reasoning("thinking"),
            Text("answer"),
            ToolFragment(0, '{"a": 1}', id="toolu_01AbCdEfGh", name="f"),
        ),
        finish_reason="tool_calls",
        usage=ScriptUsage(10, 20, 0, 5, 3),
        usage_placement="cumulative",
    )
    message = json.loads(DIALECT.render(script, stream=False).body)
    for path, kind in key_paths(message).items():
        if path.startswith("content[]"):
            inner = path.removeprefix("content[]").removeprefix(".")
            if inner in ("thinking", "signature", "text") and kind == "string":
                continue  # filled in a whole message, empty strings at a block's start
            assert not inner or inner in blocks, f"content block field {inner} is not real"
        elif path.startswith("usage.output_tokens_details"):
            continue  # only `message_delta` reports it while streaming
        else:
            assert path in shell, f"{path} is not a field of a recorded Message"
            if path != "stop_reason":
                assert kind in shell[path], (path, kind, shell[path])


# --- errors ---------------------------------------------------------------------------------


@pytest.mark.parametrize("recording", _params(ERRORS))
def test_error_bodies_have_the_recorded_shape(recording: Interaction) -> None:
    real = recording.response.json
    assert isinstance(real, dict)
    fault = Fault("status", status=recording.response.status, message=real["error"]["message"])
    rendered = DIALECT.render_error(fault)
    ours = json.loads(rendered.body)
    assert key_paths(ours) == key_paths(real)
    assert ours["error"]["type"] == real["error"]["type"]
    assert ours["request_id"].startswith("req_011C") and len(ours["request_id"]) == len(
        real["request_id"]
    )
    headers = dict(rendered.headers)
    assert (headers["content-type"],) == recording.response.headers["content-type"]


def test_in_stream_error_is_the_captured_event() -> None:
    for error in DIALECT.profile.in_stream_errors:
        fault = Fault("provider_error", status=error.status, code=error.code, message=error.message)
        frame = DIALECT.error_frame(fault)
        (event,) = sse_frames(frame)
        assert event.event == "error"
        payload = json.loads(event.data)
        # As captured from live streams (see `AnthropicDialect.error_frame`).
        assert payload == {
            "type": "error",
            "error": {"details": None, "type": error.code, "message": error.message},
            "request_id": payload["request_id"],
        }
        assert payload["request_id"].startswith("req_011C") and len(payload["request_id"]) == 28
