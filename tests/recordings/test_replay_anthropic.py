"""Replay real Anthropic Messages recordings through the Anthropic adapter.

Every interaction in the shared recordings whose request went to `…/v1/messages`
(simonw/llm-anthropic and pydantic-ai cassettes) is served back through the `transport`
seam. Each call is rebuilt from the recorded request (messages, sampling, tools, thinking
budget), so the body the adapter sends can be compared with the recorded one, and the
result is compared with what the recorded response says. Expected values are computed
here from the recorded events, without the adapter's code: text, reasoning, tool calls
(client `tool_use` blocks only; server-side `server_tool_use` blocks are not calls),
usage merged across `message_start` and `message_delta`, the finish reason, and the
typed error for error statuses.

Multi-turn recordings are replayed as conversations: the second request is built from
the first result with `assistant_message`, so the thinking signature and the server-tool
blocks must survive the round trip to match what the recording sent.
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass, field, replace
from typing import Any

import httpx
import pytest
from wire import (
    ExpectedCall,
    Interaction,
    Replay,
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
from anyinfer._providers.anthropic import assistant_message, content_blocks

# --- the recordings -------------------------------------------------------------------------

_WIRE_DIR, _WIRE_WHY = find_wire_dir()
MESSAGES = (
    interactions(_WIRE_DIR, lambda i: i.protocol == "anthropic_messages") if _WIRE_DIR else []
)
# Anthropic exchanges with another endpoint (token counting): their error bodies still
# speak the protocol's error shape.
OTHER = (
    interactions(
        _WIRE_DIR,
        lambda i: i.request.url.host == "api.anthropic.com" and i.protocol is None,
    )
    if _WIRE_DIR
    else []
)
STREAMED = [i for i in MESSAGES if i.request.wants_stream and i.response.status < 400]


def _params(items: list[Interaction]) -> list[Any]:
    return recording_params(items, f"no Anthropic Messages recordings under {_WIRE_DIR}")


def _one(name: str, index: int) -> Interaction:
    found = [i for i in MESSAGES if i.cassette.name == name and i.index == index]
    if not found:
        pytest.skip(f"recording {name}#{index} not found" if _WIRE_DIR else _WIRE_WHY)
    return found[0]


# --- expected values, straight from the recorded body --------------------------------------

# Our finish vocabulary for Anthropic's `stop_reason`, read from Anthropic's Messages API
# reference ("stop_reason" of the Message object) and its "Handling stop reasons" guide,
# not from the adapter:
#   "end_turn": the model reached a natural stopping point      -> "stop"
#   "stop_sequence": one of the custom stop sequences was hit    -> "stop"
#   "max_tokens": the requested `max_tokens` was reached         -> "length"
#   "tool_use": the model invoked one or more tools              -> "tool_calls"
#   "refusal": streaming classifiers intervened (policy refusal) -> "content_filter"
# "pause_turn" (a long server-tool turn paused, to be resumed by sending it back) has no
# counterpart in our vocabulary, so DESIGN.md's "unknown finish reasons normalize to
# 'other'" applies. A stop reason this test has not read the docs for fails the test
# instead of silently expecting "other".
_DOCUMENTED_STOP = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
}
_NO_COUNTERPART = {"pause_turn"}


@dataclass
class Expected:
    """What one recorded response says, independent of the adapter."""

    text: str = ""
    reasoning: str = ""
    calls: list[ExpectedCall] = field(default_factory=list)
    stop_reason: str | None = None
    usage: dict[str, int] = field(default_factory=dict)
    usage_reports: int = 0
    sentinel: bool = False
    signatures: list[str] = field(default_factory=list)
    error_type: str | None = None
    http_status: int | None = None
    error_message: str = ""

    @property
    def finish_reason(self) -> str:
        if self.stop_reason is None:
            return "stop"
        if self.stop_reason in _NO_COUNTERPART:
            return "other"
        assert self.stop_reason in _DOCUMENTED_STOP, f"undocumented {self.stop_reason!r}"
        return _DOCUMENTED_STOP[self.stop_reason]

    def tool_calls(self) -> list[ai.ToolCall]:
        return [call.tool_call(n) for n, call in enumerate(self.calls)]

    def expected_usage(self) -> ai.Usage:
        return ai.Usage(**self.usage).normalized()  # type: ignore[arg-type]


def _fold_usage(exp: Expected, usage: dict[str, Any] | None) -> None:
    """Read one `usage` object (of `message_start`'s message, or of `message_delta`).

    Anthropic's Messages API reference, "usage": `input_tokens` (the input not read
    from or written to the cache), `output_tokens`, `cache_read_input_tokens`,
    `cache_creation_input_tokens`. Its streaming guide: the counts in `message_delta`'s
    usage are cumulative, so a figure that arrives later replaces the earlier one.
    Thinking tokens appear in these recordings as `output_tokens_details.thinking_tokens`
    (a part of `output_tokens`).
    """
    if not usage:
        return
    exp.usage_reports += 1
    if isinstance(usage.get("input_tokens"), int):
        exp.usage["input_tokens"] = usage["input_tokens"]
    if isinstance(usage.get("output_tokens"), int):
        exp.usage["output_tokens"] = usage["output_tokens"]
    if isinstance(usage.get("cache_read_input_tokens"), int):
        exp.usage["cache_read_tokens"] = usage["cache_read_input_tokens"]
    if isinstance(usage.get("cache_creation_input_tokens"), int):
        exp.usage["cache_write_tokens"] = usage["cache_creation_input_tokens"]
    thinking = (usage.get("output_tokens_details") or {}).get("thinking_tokens")
    if isinstance(thinking, int):
        exp.usage["reasoning_tokens"] = thinking


def _error_class(status: int | None, error_type: str, message: str) -> str:
    """Our error class for an Anthropic error, from Anthropic's "Errors" page: each
    `error.type` with its HTTP status (401 `authentication_error`, 403
    `permission_error`, 404 `not_found_error`, 429 `rate_limit_error`, 529
    `overloaded_error`); a too-long prompt is a 400 `invalid_request_error` whose
    message says "prompt is too long"."""
    if "prompt is too long" in message.lower():
        return "ContextWindowError"
    by_type = {
        "authentication_error": "AuthenticationError",
        "permission_error": "AuthenticationError",
        "not_found_error": "ModelNotFoundError",
        "rate_limit_error": "RateLimitError",
        "overloaded_error": "OverloadedError",
    }
    if error_type in by_type:
        return by_type[error_type]
    return {401: "AuthenticationError", 404: "ModelNotFoundError", 429: "RateLimitError"}.get(
        status or 0, "ProviderError"
    )


def expected_from(item: Interaction) -> Expected:
    """Everything the recorded response says, computed from its body alone."""
    exp = Expected()
    resp = item.response
    if resp.status >= 400:
        err = (resp.json or {}).get("error") or {}
        exp.http_status = resp.status
        exp.error_message = str(err.get("message") or "")
        exp.error_type = _error_class(resp.status, str(err.get("type")), exp.error_message)
        return exp
    tool_blocks: dict[int, ExpectedCall] = {}
    signatures: dict[int, str] = {}
    for frame in sse_frames(resp.body):
        event = json.loads(frame.data)
        kind = event["type"]
        if kind == "message_start":
            _fold_usage(exp, event["message"].get("usage"))
        elif kind == "content_block_start":
            block = event["content_block"]
            if block["type"] == "tool_use":
                call = ExpectedCall(block.get("id"), block.get("name"))
                tool_blocks[event["index"]] = call
                exp.calls.append(call)
            elif block["type"] == "text":
                exp.text += block.get("text") or ""
        elif kind == "content_block_delta":
            delta = event["delta"]
            if delta["type"] == "text_delta":
                exp.text += delta["text"]
            elif delta["type"] == "thinking_delta":
                exp.reasoning += delta["thinking"]
            elif delta["type"] == "signature_delta":
                signatures[event["index"]] = signatures.get(event["index"], "") + delta["signature"]
            elif delta["type"] == "input_json_delta" and event["index"] in tool_blocks:
                tool_blocks[event["index"]].arguments += delta["partial_json"]
        elif kind == "message_delta":
            exp.stop_reason = event["delta"].get("stop_reason") or exp.stop_reason
            _fold_usage(exp, event.get("usage"))
        elif kind == "message_stop":
            exp.sentinel = True
            break
        elif kind == "error":
            err = event["error"]
            exp.error_message = err["message"]
            exp.error_type = _error_class(None, err["type"], err["message"])
            break
    exp.signatures = [signatures[i] for i in sorted(signatures)]
    return exp


# --- rebuilding the call from the recorded request -----------------------------------------

_EFFORT_BY_BUDGET = {1024: "low", 4096: "medium", 16384: "high"}


@dataclass
class Call:
    """The AnyInfer call that should produce the recorded request."""

    messages: list[ai.Message]
    sampling: ai.Sampling
    tools: list[ai.ToolSpec]
    reasoning: str | None
    provider_options: dict[str, Any]


def _message_from(m: dict[str, Any]) -> list[ai.Message]:
    content = m["content"]
    if m["role"] == "user":
        if isinstance(content, str):
            return [ai.Message.user(content)]
        if all(b["type"] == "tool_result" for b in content):
            return [
                ai.Message.tool_result(
                    b["tool_use_id"], b["content"], is_error=bool(b.get("is_error"))
                )
                for b in content
            ]
        assert all(b["type"] == "text" for b in content), content
        return [ai.Message.user([ai.TextContent(b["text"]) for b in content])]
    if isinstance(content, list) and all(b["type"] == "text" for b in content):
        return [ai.Message("assistant", tuple(ai.TextContent(b["text"]) for b in content))]
    return [ai.Message("assistant", "", provider_data={"anthropic": {"content": content}})]


def call_for(recorded: dict[str, Any]) -> Call:
    messages: list[ai.Message] = []
    if isinstance(recorded.get("system"), str):
        messages.append(ai.Message.system(recorded["system"]))
    for m in recorded["messages"]:
        messages.extend(_message_from(m))
    sampling = ai.Sampling(
        max_output_tokens=recorded.get("max_tokens"),
        temperature=recorded.get("temperature"),
        top_p=recorded.get("top_p"),
        stop=tuple(recorded.get("stop_sequences") or ()),
    )
    options: dict[str, Any] = {}
    tools: list[ai.ToolSpec] = []
    for tool in recorded.get("tools") or []:
        if "input_schema" in tool and tool.get("type", "custom") == "custom":
            tools.append(
                ai.ToolSpec(tool["name"], tool.get("description", ""), tool["input_schema"])
            )
        else:
            options["tools"] = recorded["tools"]  # server tools: sent as given
    reasoning = None
    thinking = recorded.get("thinking")
    if thinking:
        effort = _EFFORT_BY_BUDGET.get(thinking.get("budget_tokens", 0))
        if thinking.get("type") == "enabled" and effort:
            reasoning = effort
        else:
            options["thinking"] = thinking
    for key in ("output_config", "metadata", "top_k"):
        if key in recorded:
            options[key] = recorded[key]
    return Call(messages, sampling, tools, reasoning, options)


# --- replaying -------------------------------------------------------------------------------


def replay(
    item: Interaction,
    *,
    chunk_size: int | None = None,
    messages: list[ai.Message] | None = None,
) -> Replay:
    """Serve `item` to the Anthropic adapter, called the way the recording was made."""
    recorded = item.request.json or {}
    call = call_for(recorded)
    return replay_with(
        item,
        "anthropic",
        endpoint="/messages",
        chunk_size=chunk_size,
        messages=messages or call.messages,
        retain_raw=True,
        call={
            "sampling": call.sampling,
            "tools": call.tools,
            "reasoning": call.reasoning,
            "provider_options": {"anthropic": call.provider_options},
        },
        api_key="sk-ant-replay",
    )


# --- checks ----------------------------------------------------------------------------------


# Typographic characters the pydantic-ai recorder flattened in request bodies only.
_FLATTENED = str.maketrans({"\u2013": "-", "\u2019": "'"})


def _flatten(value: Any) -> Any:
    return json.loads(json.dumps(value, ensure_ascii=False).translate(_FLATTENED))


def check_request(item: Interaction, sent: list[httpx.Request]) -> None:
    """One POST to the recorded path whose body maps the call as the recording did."""
    body = check_one_post(item, sent)
    assert sent[0].headers["x-api-key"] == "sk-ant-replay"
    assert sent[0].headers["anthropic-version"] == "2023-06-01"
    recorded = item.request.json or {}
    for key in ("model", "max_tokens", "system", "temperature", "top_p", "stop_sequences"):
        assert body.get(key) == recorded.get(key), key
    assert _flatten(body["messages"]) == _flatten(recorded["messages"])
    thinking = recorded.get("thinking")
    if thinking and thinking.get("type") == "enabled":
        assert body["thinking"] == {"type": "enabled", "budget_tokens": thinking["budget_tokens"]}
    else:
        assert body.get("thinking") == thinking
    sent_tools = body.get("tools") or []
    recorded_tools = recorded.get("tools") or []
    assert len(sent_tools) == len(recorded_tools)
    for mine, theirs in zip(sent_tools, recorded_tools):
        if "input_schema" in theirs:  # a function tool: our mapping, empty description omitted
            assert mine["name"] == theirs["name"]
            assert mine.get("description", "") == theirs.get("description", "")
            assert mine["input_schema"] == theirs["input_schema"]
        else:
            assert mine == theirs
    assert body.get("output_config") == recorded.get("output_config")
    extra = set(body) - set(recorded) - {"tool_choice"}
    assert not extra, f"sent fields the recording did not: {extra}"


# --- the tests -------------------------------------------------------------------------------


@pytest.mark.parametrize("item", _params(MESSAGES))
def test_replay_matches_recording(item: Interaction) -> None:
    exp = expected_from(item)
    run = replay(item)
    check_request(item, run.requests)
    if exp.error_type is not None:
        assert run.result is None
        error = run.error
        assert isinstance(error, ai.AllTargetsFailedError), repr(error)
        info = error.attempts[0].error
        assert info is not None
        assert info.type_name == exp.error_type, info
        assert info.http_status == exp.http_status
        assert info.provider == "anthropic"
        assert exp.error_message[:60] in info.detail
        return
    result = check_generation(run, exp, reasoning=exp.reasoning)
    assert not result.warnings
    assert [a.outcome for a in result.attempts] == ["ok"]
    if item.request.wants_stream:
        assert exp.sentinel
        check_ordering(run.events, ended=True)
        check_events_match_result(run.events, result)
        updates = [e for e in run.events if isinstance(e, ai.UsageUpdate)]
        assert len(updates) == exp.usage_reports  # message_start and message_delta


@pytest.mark.parametrize("item", _params(STREAMED))
def test_replay_split_reads_match_whole_body(item: Interaction) -> None:
    """Framing must not depend on where the network splits the bytes."""
    whole = replay(item)
    assert whole.result is not None
    check_same_result(whole, replay(item, chunk_size=7), "raw")


def _with_distinct_cache_counts(item: Interaction) -> Interaction:
    """The same recording with its zero cache counts rewritten to 3 (read) and 5 (write).

    Every recording here reports both cache counts as 0, so a swapped or dropped cache
    field would still match; distinct values make each field's reading observable.
    """
    body = re.sub(rb'("cache_read_input_tokens":\s*)0\b', rb"\g<1>3", item.response.body)
    body = re.sub(rb'("cache_creation_input_tokens":\s*)0\b', rb"\g<1>5", body)
    return replace(item, response=replace(item.response, body=body))


@pytest.mark.parametrize("item", _params(STREAMED))
def test_replay_reads_each_cache_count_from_its_own_field(item: Interaction) -> None:
    changed = _with_distinct_cache_counts(item)
    exp = expected_from(changed)
    assert (exp.usage["cache_read_tokens"], exp.usage["cache_write_tokens"]) == (3, 5)
    run = replay(changed)
    assert run.result is not None, repr(run.error)
    assert dataclasses.replace(run.result.usage, cost_usd=None) == exp.expected_usage()


def _cut_before(item: Interaction, event: bytes) -> Interaction:
    body = item.response.body
    at = body.rfind(b"event: " + event)
    assert at >= 0
    return replace(item, response=replace(item.response, body=body[:at]))


@pytest.mark.parametrize("item", _params(STREAMED))
def test_replay_without_message_stop_follows_trailing_usage_rule(item: Interaction) -> None:
    """Cut `message_stop` off: the stop reason had arrived, so success with a warning."""
    cut = _cut_before(item, b"message_stop")
    exp = expected_from(cut)
    run = replay(cut)
    assert run.error is None, repr(run.error)
    result = run.result
    assert result is not None
    assert result.finish_reason == exp.finish_reason
    assert result.text == exp.text
    assert dataclasses.replace(result.usage, cost_usd=None) == exp.expected_usage()
    assert any(w.startswith("usage may be incomplete") for w in result.warnings)
    check_ordering(run.events, ended=True)


@pytest.mark.parametrize("item", _params(STREAMED))
def test_replay_without_message_delta_fails_but_flushes_usage(item: Interaction) -> None:
    """Cut before `message_delta`: no stop reason, so the stream fails, input usage shown."""
    cut = _cut_before(item, b"message_delta")
    exp = expected_from(cut)
    run = replay(cut)
    assert run.result is None
    error = run.error
    if exp.text or exp.reasoning or exp.calls:
        assert type(error) is ai.StreamError, repr(error)
    else:  # the refusal recording: no content, so the attempt fails and routing gives up
        assert isinstance(error, ai.AllTargetsFailedError), repr(error)
    merged = ai.Usage()
    for e in run.events:
        if isinstance(e, ai.UsageUpdate):
            merged = merged.merge(e.usage)
    assert merged.normalized() == exp.expected_usage()
    assert merged.input_tokens is not None
    check_ordering(run.events, ended=False)


@pytest.mark.parametrize("item", _params([i for i in STREAMED if expected_from(i).signatures]))
def test_thinking_signatures_survive_in_raw(item: Interaction) -> None:
    exp = expected_from(item)
    run = replay(item)
    assert run.result is not None
    # The raw payload is the recorded events themselves, read here without the adapter.
    raw = run.result.raw
    assert isinstance(raw, list)
    kept_deltas = [
        e["delta"]["signature"]
        for e in raw
        if e.get("type") == "content_block_delta" and e["delta"].get("type") == "signature_delta"
    ]
    assert "".join(kept_deltas) == "".join(exp.signatures)
    # `content_blocks` (the adapter's public helper, under test here) rebuilds the blocks.
    blocks = content_blocks(raw)
    kept = [b["signature"] for b in blocks if b["type"] == "thinking"]
    assert kept == exp.signatures
    thinking = "".join(b["thinking"] for b in blocks if b["type"] == "thinking")
    assert thinking == exp.reasoning


def test_tool_chain_with_thinking_round_trips_the_signature() -> None:
    """llm-anthropic: turn 2 must carry turn 1's signed thinking block and tool_use."""
    first = _one("test_fixed_version_tool_chain_with_thinking_display_regression.yaml", 0)
    second = _one("test_fixed_version_tool_chain_with_thinking_display_regression.yaml", 1)
    run1 = replay(first)
    assert run1.result is not None
    assert run1.result.finish_reason == "tool_calls"
    (call,) = run1.result.tool_calls
    question = first.request.json["messages"][0]["content"][0]["text"]
    recorded_result = second.request.json["messages"][2]["content"][0]["content"]
    conversation = [
        ai.Message.user([ai.TextContent(question)]),
        assistant_message(run1.result),
        ai.Message.tool_result(call.id, recorded_result),
    ]
    run2 = replay(second, messages=conversation)
    check_request(second, run2.requests)  # messages identical to the recorded ones
    assert run2.result is not None
    assert run2.result.text == expected_from(second).text


def test_pause_turn_continuation_sends_the_paused_content_back() -> None:
    """pydantic-ai: a `pause_turn` turn is resumed by sending its content back verbatim."""
    first = _one("test_pause_turn_web_search_streaming_vcr.yaml", 0)
    second = _one("test_pause_turn_web_search_streaming_vcr.yaml", 1)
    run1 = replay(first)
    assert run1.result is not None
    assert run1.result.finish_reason == "other"  # pause_turn passes through
    assert run1.result.tool_calls == ()  # web searches run at Anthropic
    question = first.request.json["messages"][0]["content"][0]["text"]
    conversation = [ai.Message.user([ai.TextContent(question)]), assistant_message(run1.result)]
    run2 = replay(second, messages=conversation)
    check_request(second, run2.requests)
    assert run2.result is not None
    assert run2.result.finish_reason == "stop"


def test_count_tokens_error_body_maps_like_a_messages_error() -> None:
    """The token-counting 404 uses the same error shape: served to a messages request."""
    if not OTHER:
        pytest.skip(_WIRE_WHY if _WIRE_DIR is None else "no count_tokens recording")
    for item in OTHER:
        served = replace(
            item, request=replace(item.request, uri="https://api.anthropic.com/v1/messages")
        )
        run = replay(served)
        error = run.error
        assert isinstance(error, ai.AllTargetsFailedError), repr(error)
        info = error.attempts[0].error
        assert info is not None
        assert info.type_name == "ModelNotFoundError"
        assert info.http_status == 404


def test_the_recordings_cover_the_expected_ground() -> None:
    """Guard against the filter silently matching nothing (or the folder shrinking)."""
    if _WIRE_DIR is None:
        pytest.skip(_WIRE_WHY)
    assert len(MESSAGES) >= 14
    stops = {expected_from(i).stop_reason for i in STREAMED}
    assert {"end_turn", "tool_use", "stop_sequence", "refusal", "pause_turn"} <= stops
    assert any(expected_from(i).signatures for i in STREAMED)
    assert any(b"redacted_thinking" in i.response.body for i in STREAMED)
    assert any(b"server_tool_use" in i.response.body for i in STREAMED)
    assert any(i.response.status >= 400 for i in MESSAGES)
