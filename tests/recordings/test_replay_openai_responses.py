"""Replay real OpenAI Responses API recordings through the `openai-responses` adapter.

Every interaction in the shared recordings whose request went to `…/responses` (OpenAI,
Azure OpenAI, OpenRouter) is served back through the `transport` seam and the result is
compared with what the recorded body says. Expected values are computed here from the
recorded JSON alone — text from `output_text`/`refusal` deltas (or the output items of a
whole response), reasoning per summary part and reasoning-text part, tool calls per
`function_call` item, usage and status from the terminal `Response` — without the
adapter's code.

Streamed recordings go through `AsyncClient.stream` (and get the ordering checks of the
event-stream grammar); non-streamed ones through `AsyncClient.generate`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any

import httpx
import pytest
from wire import (
    ExpectedCall,
    ExpectedError,
    Interaction,
    Replay,
    check_attempt_failed,
    check_events_match_result,
    check_generation,
    check_one_post,
    check_ordering,
    check_same_result,
    find_wire_dir,
    interactions,
    recording_params,
    replay_with,
    sse_json,
    usage_seen,
)

import anyinfer as ai

PID = "openai-responses"

_WIRE_DIR, _WIRE_WHY = find_wire_dir()
RESPONSES = interactions(_WIRE_DIR, lambda i: i.protocol == "openai_responses") if _WIRE_DIR else []
STREAMED = [i for i in RESPONSES if i.request.wants_stream and i.response.status < 400]

# OpenAI's Responses API reference ("Streaming events"): a stream ends with one of these,
# carrying the whole Response.
_TERMINAL = ("response.completed", "response.incomplete", "response.failed")
# Our finish vocabulary for an incomplete Response, from the same reference (the Response
# object's `incomplete_details.reason`): "max_output_tokens" means the output hit the
# requested token limit ("length"), "content_filter" that content was withheld by
# OpenAI's filters ("content_filter"). A reason this test has not read the docs for fails
# the test instead of silently expecting "other".
_DOCUMENTED_INCOMPLETE = {"max_output_tokens": "length", "content_filter": "content_filter"}


def _params(items: list[Interaction]) -> list[Any]:
    return recording_params(items, f"no OpenAI Responses recordings under {_WIRE_DIR}")


# --- expected values, straight from the recorded body --------------------------------------


@dataclass
class Expected:
    """What one recorded response says, independent of the adapter."""

    text: str = ""
    reasoning_parts: dict[tuple[int, str, int], str] = field(default_factory=dict)
    calls: list[ExpectedCall] = field(default_factory=list)
    status: str | None = None  # of the terminal Response; None: it never arrived
    incomplete_reason: str | None = None
    refused: bool = False
    usage: dict[str, Any] | None = None
    error: ExpectedError | None = None

    @property
    def reasoning_texts(self) -> list[str]:
        """The non-empty reasoning parts (summaries, reasoning text), in output order."""
        return [t for t in self.reasoning_parts.values() if t]

    @property
    def has_content(self) -> bool:
        return bool(self.text or self.reasoning_texts or self.calls)

    @property
    def finish_reason(self) -> str:
        # A completed Response has no finish reason of its own: its output says why it
        # ended. `function_call` items: the model called tools; a `refusal` content part
        # (the reference: the model refused to answer) is our "content_filter".
        if self.status == "completed":
            if self.calls:
                return "tool_calls"
            return "content_filter" if self.refused else "stop"
        if self.status == "incomplete":
            reason = self.incomplete_reason
            if reason is None:
                return "other"
            assert reason in _DOCUMENTED_INCOMPLETE, f"undocumented {reason!r}"
            return _DOCUMENTED_INCOMPLETE[reason]
        return "other"

    def tool_calls(self) -> list[ai.ToolCall]:
        return [call.tool_call(index) for index, call in enumerate(self.calls)]

    def expected_usage(self) -> ai.Usage:
        """The Response's `usage`, read from the Responses API reference: `input_tokens`
        (with `input_tokens_details.cached_tokens` among them), `output_tokens` (with
        `output_tokens_details.reasoning_tokens` among them), `total_tokens` (the sum)."""
        if not self.usage:
            return ai.Usage()
        u = self.usage
        if None not in (u.get("input_tokens"), u.get("output_tokens"), u.get("total_tokens")):
            assert u["total_tokens"] == u["input_tokens"] + u["output_tokens"], u
        return ai.Usage(
            input_tokens=u.get("input_tokens"),
            output_tokens=u.get("output_tokens"),
            total_tokens=u.get("total_tokens"),
            cache_read_tokens=(u.get("input_tokens_details") or {}).get("cached_tokens"),
            reasoning_tokens=(u.get("output_tokens_details") or {}).get("reasoning_tokens"),
        ).normalized()


def check_reasoning(reasoning: str, parts: list[str]) -> None:
    """`reasoning` is the recorded parts, in order, with nothing but whitespace between.

    How the parts are joined is the adapter's choice, not the wire's, so the oracle
    does not assume a separator.
    """
    rest = reasoning
    for part in parts:
        at = rest.find(part)
        assert at >= 0, f"reasoning part missing or out of order: {part[:60]!r}"
        assert not rest[:at].strip(), f"unexpected reasoning text: {rest[:at][:60]!r}"
        rest = rest[at + len(part) :]
    assert not rest.strip(), f"unexpected reasoning text: {rest[:60]!r}"


def _error_type(status: int | None, code: Any, message: str) -> type[ai.AnyInferError]:
    said = f"{code or ''} {message}".lower()
    if "context_length_exceeded" in said:
        return ai.ContextWindowError
    if status in (401, 403):
        return ai.AuthenticationError
    if status == 429 or "rate_limit" in said:
        return ai.RateLimitError
    if status == 404 or "model_not_found" in said:
        return ai.ModelNotFoundError
    if status in (503, 529):
        return ai.OverloadedError
    return ai.ProviderError


def _error_from(err: Any, status: int | None) -> ExpectedError:
    if not isinstance(err, dict):
        return ExpectedError(_error_type(status, None, str(err)), status, str(err))
    message = str(err.get("message") or "")
    code = err.get("code") or err.get("type")
    return ExpectedError(_error_type(status, code, message), status, message)


def _read_terminal(exp: Expected, response: dict[str, Any]) -> None:
    exp.status = response.get("status")
    exp.usage = response.get("usage") or exp.usage
    exp.incomplete_reason = (response.get("incomplete_details") or {}).get("reason")
    if exp.status == "failed":
        exp.error = _error_from(response.get("error"), None)


def _read_output(exp: Expected, output: list[dict[str, Any]]) -> None:
    """A whole response's output items, in order."""
    for index, item in enumerate(output):
        if item["type"] == "message":
            for part in item.get("content") or []:
                if part["type"] == "output_text":
                    exp.text += part["text"]
                elif part["type"] == "refusal":
                    exp.text += part["refusal"]
                    exp.refused = True
        elif item["type"] == "function_call":
            args = item.get("arguments") or ""
            if not isinstance(args, str):
                args = json.dumps(args)
            exp.calls.append(ExpectedCall(item.get("call_id"), item.get("name"), args))
        elif item["type"] == "reasoning":
            for n, part in enumerate(item.get("summary") or []):
                exp.reasoning_parts[(index, "summary", n)] = part["text"]
            for n, part in enumerate(item.get("content") or []):
                if part["type"] == "reasoning_text":
                    exp.reasoning_parts[(index, "reasoning", n)] = part["text"]


def _read_stream(exp: Expected, events: list[dict[str, Any]]) -> None:
    """A stream's events up to its terminal event (or an error event)."""
    calls: dict[Any, ExpectedCall] = {}
    ids: dict[str, int] = {}

    def item_of(ev: dict[str, Any]) -> Any:
        if "output_index" in ev:
            return ev["output_index"]
        return ids.get(ev.get("item_id", ""), ev.get("item_id"))

    for ev in events:
        kind = ev["type"]
        if kind == "response.output_item.added":
            ids[ev["item"].get("id", "")] = ev["output_index"]
            if ev["item"]["type"] == "function_call":
                item = ev["item"]
                call = ExpectedCall(
                    item.get("call_id"), item.get("name"), item.get("arguments", "")
                )
                calls[ev["output_index"]] = call
                exp.calls.append(call)
        elif kind == "response.output_text.delta":
            exp.text += ev["delta"]
        elif kind == "response.refusal.delta":
            exp.text += ev["delta"]
            exp.refused = True
        elif kind == "response.function_call_arguments.delta":
            calls[item_of(ev)].arguments += ev["delta"]
        elif kind == "response.function_call_arguments.done":
            assert calls[item_of(ev)].arguments == ev["arguments"], "deltas disagree with done"
        elif kind == "response.reasoning_summary_text.delta":
            key = (item_of(ev), "summary", ev["summary_index"])
            exp.reasoning_parts[key] = exp.reasoning_parts.get(key, "") + ev["delta"]
        elif kind == "response.reasoning_text.delta":
            key = (item_of(ev), "reasoning", ev["content_index"])
            exp.reasoning_parts[key] = exp.reasoning_parts.get(key, "") + ev["delta"]
        elif kind in _TERMINAL:
            _read_terminal(exp, ev["response"])
            return
        elif kind == "error":
            err = ev.get("error") if isinstance(ev.get("error"), dict) else ev
            exp.error = _error_from(err, None)
            return
    exp.error = ExpectedError(ai.StreamError, None, "ended before a finish reason")


def expected_from(item: Interaction) -> Expected:
    """Everything the recorded response says, computed from its body alone."""
    resp = item.response
    exp = Expected()
    if resp.status >= 400:
        body = resp.json
        err = body.get("error", body) if isinstance(body, dict) else body
        exp.error = _error_from(err, resp.status)
        return exp
    if not item.request.wants_stream:
        body = resp.json
        assert isinstance(body, dict), f"{item.id}: a whole body should be a JSON object"
        _read_output(exp, body.get("output") or [])
        _read_terminal(exp, body)
        return exp
    events, _ = sse_json(resp.body)
    _read_stream(exp, events)
    return exp


# --- replaying -------------------------------------------------------------------------------


def replay(item: Interaction, *, chunk_size: int | None = None) -> Replay:
    """Serve `item` to the adapter the way it was originally requested."""
    return replay_with(item, PID, endpoint="/responses", chunk_size=chunk_size, api_key="sk-replay")


def check_request(item: Interaction, sent: list[httpx.Request]) -> None:
    """One POST to the recorded path, streamed as recorded, for the recorded model."""
    body = check_one_post(item, sent)
    assert body["store"] is False
    assert body["input"] == [{"role": "user", "content": "Hi"}]


# --- the tests -------------------------------------------------------------------------------


@pytest.mark.parametrize("item", _params(RESPONSES))
def test_replay_matches_recording(item: Interaction) -> None:
    exp = expected_from(item)
    run = replay(item)
    check_request(item, run.requests)
    if exp.error is not None:
        assert run.result is None, f"expected {exp.error.type.__name__}, got a result"
        _check_failure(item, exp, run)
        return
    result = check_generation(run, exp)
    check_reasoning(result.reasoning, exp.reasoning_texts)
    assert result.target == ai.ResolvedTarget(PID, result.target.model, PID)
    assert result.warnings == ()  # the terminal event is the sentinel: nothing is missing
    if item.request.wants_stream:
        check_ordering(run.events, ended=True)
        check_events_match_result(run.events, result)
        assert len([e for e in run.events if isinstance(e, ai.UsageUpdate)]) == 1


def _check_failure(item: Interaction, exp: Expected, run: Replay) -> None:
    assert exp.error is not None
    error = run.error
    if exp.has_content and item.request.wants_stream:
        assert type(error) is exp.error.type, repr(error)
        assert isinstance(error, ai.ProviderError)
        assert error.phase == "stream" and error.provider == PID
        assert usage_seen(run.events) == exp.expected_usage()
        shown = "".join(e.text for e in run.events if isinstance(e, ai.TextDelta))
        assert shown == exp.text
        check_ordering(run.events, ended=False)
        return
    check_attempt_failed(error, exp.error, PID)
    if item.request.wants_stream:
        assert [type(e) for e in run.events] == [ai.TimingMark, ai.AttemptFailed]


@pytest.mark.parametrize("item", _params(STREAMED))
def test_replay_split_reads_match_whole_body(item: Interaction) -> None:
    """Framing must not depend on where the network splits the bytes."""
    whole = replay(item)
    assert whole.result is not None
    check_same_result(whole, replay(item, chunk_size=7))


def _cut_before_terminal(item: Interaction) -> Interaction:
    """The same recording with the terminal event and everything after it removed."""
    body = item.response.body
    at = max(body.rfind(b"event: response.completed"), body.rfind(b'data: {"type":"response.c'))
    assert at > 0, f"{item.id}: no terminal event found"
    return replace(item, response=replace(item.response, body=body[:at]))


@pytest.mark.parametrize("item", _params(STREAMED))
def test_replay_without_terminal_event_fails(item: Interaction) -> None:
    """The terminal event is the sentinel *and* the finish: without it the stream failed.

    Whatever content arrived was shown, no `StreamEnded` claims a completion, and the
    failure is a `StreamError` (raised after content, an attempt failure before it).
    """
    cut = _cut_before_terminal(item)
    assert expected_from(cut).status is None
    run = replay(cut)
    assert run.result is None
    if any(isinstance(e, ai.TextDelta | ai.ToolCallDelta | ai.ReasoningDelta) for e in run.events):
        assert type(run.error) is ai.StreamError, repr(run.error)
    else:
        assert isinstance(run.error, ai.AllTargetsFailedError), repr(run.error)
        assert run.error.attempts[0].error is not None
        assert run.error.attempts[0].error.type_name == "StreamError"
    check_ordering(run.events, ended=False)


def test_openrouter_done_line_is_never_needed() -> None:
    """OpenRouter appends `data: [DONE]`; cutting it off changes nothing (no warning)."""
    if _WIRE_DIR is None:
        pytest.skip(_WIRE_WHY)
    (item,) = [i for i in STREAMED if i.request.url.host == "openrouter.ai"]
    body = item.response.body
    assert body.rstrip().endswith(b"data: [DONE]"), "the recording changed"
    cut = replace(item, response=replace(item.response, body=body[: body.rfind(b"data: [DONE]")]))
    with_done, without = replay(item), replay(cut)
    assert with_done.result is not None and without.result is not None
    assert without.result.text == with_done.result.text == "4"
    assert without.result.reasoning == with_done.result.reasoning
    assert without.result.reasoning.startswith("The user asks")
    assert without.result.warnings == () == with_done.result.warnings


def test_the_recordings_cover_the_expected_ground() -> None:
    """Guard against the filter silently matching nothing (or the folder shrinking)."""
    if _WIRE_DIR is None:
        pytest.skip(_WIRE_WHY)
    assert len({i.cassette for i in RESPONSES}) >= 10
    assert len(RESPONSES) >= 18
    assert any(i.response.status >= 400 for i in RESPONSES)
    assert len(STREAMED) >= 9
    assert any(not i.request.wants_stream and i.response.status < 400 for i in RESPONSES)
    assert {i.request.url.host for i in RESPONSES} >= {"api.openai.com", "openrouter.ai"}
    kinds = {
        ev["type"] for i in STREAMED for ev in sse_json(i.response.body)[0] if isinstance(ev, dict)
    }
    assert {
        "response.function_call_arguments.delta",
        "response.reasoning_summary_text.delta",
        "response.reasoning_text.delta",
        "response.output_text.delta",
        "response.completed",
    } <= kinds
    expectations = [expected_from(i) for i in RESPONSES]
    assert any(e.calls and len(e.calls) > 1 for e in expectations)
    assert any(e.finish_reason == "tool_calls" for e in expectations if e.error is None)
    assert any(
        (e.usage or {}).get("input_tokens_details", {}).get("cached_tokens") for e in expectations
    )
