"""Replay real Cohere Chat v2 recordings through the Cohere adapter.

Every interaction in the bundled recordings whose request went to `…/v2/chat`
(langchain-ai/langchain-cohere's streamed and whole cassettes, pydantic/pydantic-ai's
whole ones) is served back through the `transport` seam. Each call is rebuilt from the
recorded request (messages, tools, sampling), so the body the adapter sends can be
compared with the recorded one, and the result is compared with what the recorded
response says. Expected values are computed here from the recorded JSON, by reading
Cohere's documented wire format (its API reference, streaming guide, and the `cohere`
SDK's `V2ChatResponse` / `V2ChatStreamResponse` types), never from the adapter's tables:
text from `text` content, reasoning from `thinking` content and `tool_plan`, tool calls
by the `tool-call-*` events' `index`, the finish reason from `finish_reason`, and usage
from `usage.tokens` and `usage.cached_tokens`.

pydantic-ai holds only whole (non-streamed) Cohere v2 responses; the streamed ones come
from langchain-cohere.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any

import pytest
from wire import (
    ExpectedCall,
    Interaction,
    check_events_match_result,
    check_generation,
    check_one_post,
    check_ordering,
    check_same_result,
    find_wire_dir,
    interactions,
    recording_params,
    replay_with,
    sse_frames,
)

import anyinfer as ai

_WIRE_DIR, _WIRE_WHY = find_wire_dir()
CHATS = (
    interactions(_WIRE_DIR, lambda i: i.request.path.rstrip("/").endswith("/v2/chat"))
    if _WIRE_DIR
    else []
)
STREAMED = [i for i in CHATS if i.request.wants_stream]

# Our finish vocabulary for Cohere's `finish_reason`, read from Cohere's Chat API v2
# reference ("finish_reason": COMPLETE when the model finished, STOP_SEQUENCE when a stop
# sequence was hit, MAX_TOKENS when the token limit was reached, TOOL_CALL when it called
# tools), not from the adapter. ERROR and TIMEOUT do not occur in these recordings; a value
# this test has not read the docs for fails the test instead of silently expecting "other".
_DOCUMENTED_FINISH = {
    "COMPLETE": "stop",
    "STOP_SEQUENCE": "stop",
    "MAX_TOKENS": "length",
    "TOOL_CALL": "tool_calls",
}


def _params(items: list[Interaction]) -> list[Any]:
    return recording_params(items, f"no Cohere v2 chat recordings under {_WIRE_DIR}")


@dataclass
class Expected:
    """What one recorded response says, independent of the adapter."""

    text: str = ""
    reasoning: str = ""
    calls: dict[int, ExpectedCall] = field(default_factory=dict)
    raw_finish: str | None = None
    usage: dict[str, int] = field(default_factory=dict)
    citations: int = 0
    done: bool = False

    @property
    def finish_reason(self) -> str:
        assert self.raw_finish in _DOCUMENTED_FINISH, f"undocumented {self.raw_finish!r}"
        return _DOCUMENTED_FINISH[self.raw_finish]

    def tool_calls(self) -> list[ai.ToolCall]:
        return [self.calls[k].tool_call(n) for n, k in enumerate(sorted(self.calls))]

    def expected_usage(self) -> ai.Usage:
        return ai.Usage(**self.usage).normalized()  # type: ignore[arg-type]


def _read_usage(exp: Expected, usage: dict[str, Any] | None) -> None:
    """Cohere's `Usage`: `tokens.input_tokens` / `tokens.output_tokens` are the tokens the
    model read and wrote; `cached_tokens` the prompt tokens served from the cache.
    (`billed_units` is Cohere's billing measure, deliberately not a token count here.)"""
    if not usage:
        return
    tokens = usage.get("tokens") or {}
    for name in ("input_tokens", "output_tokens"):
        if tokens.get(name) is not None:
            exp.usage[name] = int(tokens[name])
    if usage.get("cached_tokens") is not None:
        exp.usage["cache_read_tokens"] = int(usage["cached_tokens"])


def expected_of(item: Interaction) -> Expected:
    """Read the recorded body as Cohere documents it."""
    exp = Expected()
    if not item.request.wants_stream:
        body = json.loads(item.response.body)
        message = body.get("message") or {}
        for content in message.get("content") or []:
            if content["type"] == "text":
                exp.text += content["text"]
            elif content["type"] == "thinking":
                exp.reasoning += content["thinking"]
        exp.reasoning += message.get("tool_plan") or ""
        for n, call in enumerate(message.get("tool_calls") or []):
            fn = call["function"]
            exp.calls[n] = ExpectedCall(call.get("id"), fn.get("name"), fn.get("arguments") or "")
        exp.citations = len(message.get("citations") or [])
        exp.raw_finish = body.get("finish_reason")
        _read_usage(exp, body.get("usage"))
        exp.done = True
        return exp
    for frame in sse_frames(item.response.body):
        if frame.data == "[DONE]":
            exp.done = True
            continue
        event = json.loads(frame.data)
        assert event["type"] == frame.event, "the event line names the data's type"
        delta = event.get("delta") or {}
        message = delta.get("message") or {}
        kind = event["type"]
        if kind == "content-delta":
            content = message["content"]
            exp.text += content.get("text") or ""
            exp.reasoning += content.get("thinking") or ""
        elif kind == "tool-plan-delta":
            exp.reasoning += message.get("tool_plan") or ""
        elif kind == "tool-call-start":
            call = message["tool_calls"]
            fn = call.get("function") or {}
            exp.calls[event["index"]] = ExpectedCall(
                call.get("id"), fn.get("name"), fn.get("arguments") or ""
            )
        elif kind == "tool-call-delta":
            exp.calls[event["index"]].arguments += message["tool_calls"]["function"]["arguments"]
        elif kind == "citation-start":
            exp.citations += 1
        elif kind == "message-end":
            exp.raw_finish = delta.get("finish_reason")
            _read_usage(exp, delta.get("usage"))
    return exp


# --- rebuilding the call from the recorded request --------------------------------------


def _messages(recorded: list[dict[str, Any]]) -> list[ai.Message]:
    out: list[ai.Message] = []
    for m in recorded:
        role, content = m["role"], m.get("content")
        if role == "tool":
            out.append(ai.Message.tool_result(m["tool_call_id"], str(content or "")))
        elif role == "assistant":
            calls = [
                ai.ToolCall(c["id"], c["function"]["name"], json.loads(c["function"]["arguments"]))
                for c in m.get("tool_calls") or []
            ]
            out.append(ai.Message.assistant(content or "", calls))
        elif isinstance(content, list):
            parts: list[ai.ContentPart] = []
            for p in content:
                if p["type"] == "text":
                    parts.append(ai.TextContent(p["text"]))
                else:
                    parts.append(ai.ImageContent(url=p["image_url"]["url"]))
            out.append(ai.Message(role, tuple(parts)))
        else:
            out.append(ai.Message(role, str(content or "")))
    return out


def _call(item: Interaction) -> dict[str, Any]:
    body = item.request.json or {}
    tools = [
        ai.ToolSpec(
            t["function"]["name"],
            t["function"].get("description", ""),
            t["function"]["parameters"],
        )
        for t in body.get("tools") or []
    ]
    sampling = ai.Sampling(
        temperature=body.get("temperature"),
        stop=tuple(body.get("stop_sequences") or ()),
        max_output_tokens=body.get("max_tokens"),
    )
    return {"tools": tools, "sampling": sampling}


def _replay(item: Interaction, **kwargs: Any) -> Any:
    body = item.request.json or {}
    return replay_with(
        item,
        "cohere",
        endpoint="/v2/chat",
        messages=_messages(body["messages"]),
        api_key="co-test",
        call=_call(item),
        **kwargs,
    )


def _json_args(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages with tool-call arguments parsed (JSON text may differ in spacing only)."""
    out = []
    for m in messages:
        m = dict(m)
        if m.get("tool_calls"):
            m["tool_calls"] = [
                {
                    **c,
                    "function": {
                        **c["function"],
                        "arguments": json.loads(c["function"]["arguments"]),
                    },
                }
                for c in m["tool_calls"]
            ]
        out.append(m)
    return out


# --- the tests ------------------------------------------------------------------------


@pytest.mark.parametrize("item", _params(CHATS))
def test_replay_matches_recording(item: Interaction) -> None:
    """The adapter sends what the recorded client sent and reads back what Cohere said."""
    run = _replay(item)
    sent = check_one_post(item, run.requests)
    recorded = item.request.json or {}
    assert _json_args(sent["messages"]) == _json_args(recorded["messages"])
    for key in ("tools", "stop_sequences", "temperature"):
        assert sent.get(key) == recorded.get(key), key
    assert run.requests[0].headers["authorization"] == "Bearer co-test"
    exp = expected_of(item)
    assert exp.done
    result = check_generation(run, exp, reasoning=exp.reasoning)
    if item.request.wants_stream:
        check_ordering(run.events, ended=True)
        check_events_match_result(run.events, result)
    assert not result.warnings


@pytest.mark.parametrize("item", _params(STREAMED))
def test_replay_split_reads_match_whole_body(item: Interaction) -> None:
    """Served seven bytes at a time, a stream ends exactly as when read whole."""
    check_same_result(_replay(item), _replay(item, chunk_size=7))


@pytest.mark.parametrize("item", _params(STREAMED))
def test_replay_without_done_still_succeeds_with_a_warning(item: Interaction) -> None:
    """Cut after `message-end` but before `data: [DONE]`: the finish reason and usage
    arrived, so the generation succeeds, warning that usage may be incomplete."""
    body = item.response.body
    cut = body.rindex(b"data: [DONE]")
    run = _replay(_cut(item, cut))
    assert run.error is None, repr(run.error)
    assert run.result is not None
    exp = expected_of(item)
    assert run.result.text == exp.text
    assert run.result.usage.input_tokens == exp.usage["input_tokens"]
    assert any("usage may be incomplete" in w for w in run.result.warnings)


@pytest.mark.parametrize("item", _params(STREAMED))
def test_replay_cut_before_message_end_fails_typed(item: Interaction) -> None:
    """Cut before `message-end`: no finish reason arrived, so the attempt fails with a
    `StreamError` (after content, it raises the error itself)."""
    body = item.response.body
    run = _replay(_cut(item, body.rindex(b"event: message-end")))
    assert run.result is None
    assert isinstance(run.error, ai.StreamError | ai.AllTargetsFailedError), repr(run.error)


@pytest.mark.parametrize("item", _params(CHATS))
def test_raw_keeps_the_recorded_payload(item: Interaction) -> None:
    """With `retain_raw`, the result's raw payload is what Cohere sent: every event of
    a stream (citations and `billed_units` included) or the whole response."""
    run = _replay(item, retain_raw=True)
    assert run.result is not None, repr(run.error)
    raw = run.result.raw
    if item.request.wants_stream:
        frames = [json.loads(f.data) for f in sse_frames(item.response.body) if f.data != "[DONE]"]
        assert raw == frames
    else:
        assert raw == json.loads(item.response.body)
        if expected_of(item).citations:
            assert raw["message"]["citations"]


def test_citations_stay_out_of_the_text() -> None:
    """pydantic-ai's tool-result turn comes back with citations of the tool's output:
    they stay in the raw payload and are not turned into text."""
    found = [i for i in CHATS if expected_of(i).citations]
    if not found:
        pytest.skip(_WIRE_WHY or "no recording with citations")
    for item in found:
        run = _replay(item, retain_raw=True)
        assert run.result is not None
        assert run.result.text == expected_of(item).text
        assert run.result.raw["message"]["citations"]


def test_the_recordings_cover_the_expected_ground() -> None:
    """Streamed text, streamed tool calls with a tool plan, thinking, cached tokens, a
    stop sequence, a multi-turn tool conversation with citations."""
    if _WIRE_DIR is None:
        pytest.skip(_WIRE_WHY)
    seen = [expected_of(i) for i in CHATS]
    streamed = [expected_of(i) for i in STREAMED]
    assert any(e.text for e in streamed)
    assert any(e.calls and e.reasoning for e in streamed)
    assert any(e.calls and e.reasoning and not e.text for e in seen)
    assert any("cache_read_tokens" in e.usage for e in seen)
    assert {e.raw_finish for e in seen} >= {"COMPLETE", "TOOL_CALL", "STOP_SEQUENCE"}
    assert any(e.citations for e in seen)
    assert len(STREAMED) >= 3


def _cut(item: Interaction, at: int) -> Interaction:
    """`item` with its response body cut at byte `at`."""
    return replace(item, response=replace(item.response, body=item.response.body[:at]))
