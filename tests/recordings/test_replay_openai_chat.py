"""Replay real OpenAI Chat Completions recordings through the OpenAI adapter.

Every interaction in the shared recordings whose request went to `…/chat/completions`
(OpenAI, Azure, Groq, OpenRouter, DeepSeek, Mistral, Hugging Face, Ollama, …) is served
back through the `transport` seam and the result is compared with what the recorded body
says. The expected values are computed here, straight from the recorded JSON, without
the adapter's code: text, reasoning, tool calls, usage, finish reason, and the typed
error for error statuses and error frames.

Streamed recordings go through `AsyncClient.stream` (their events also get the ordering
checks of the event-stream grammar); non-streamed ones through `AsyncClient.generate`.
"""

from __future__ import annotations

import asyncio
import dataclasses
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
    SSEFrame,
    check_attempt_failed,
    check_events_match_result,
    check_generation,
    check_one_post,
    check_ordering,
    check_same_result,
    find_wire_dir,
    interactions,
    list_cassettes,
    load_cassette,
    recording_params,
    replay_transport,
    replay_with,
    require_wire_dir,
    sse_frames,
    sse_json,
    usage_seen,
)

import anyinfer as ai

# --- the recordings -------------------------------------------------------------------------

_WIRE_DIR, _WIRE_WHY = find_wire_dir()
CHAT = interactions(_WIRE_DIR, lambda i: i.protocol == "openai_chat") if _WIRE_DIR else []
STREAMED = [i for i in CHAT if i.request.wants_stream and i.response.status < 400]

# Recordings the adapter currently reads wrongly. Each test keeps asserting the correct
# behaviour; the mark comes off when the adapter is fixed (strict: an unexpected pass fails).
KNOWN_BUGS: dict[str, str] = {}


def _params(items: list[Interaction], known_bugs: dict[str, str] | None = None) -> list[Any]:
    return recording_params(
        items, f"no OpenAI Chat Completions recordings under {_WIRE_DIR}", known_bugs
    )


# --- expected values, straight from the recorded body --------------------------------------

# Our finish vocabulary for a choice's `finish_reason`, read from OpenAI's Chat Completions
# API reference (the chat completion object), not from the adapter:
#   "stop": a natural stop point or a provided stop sequence   -> "stop"
#   "length": the maximum number of tokens in the request       -> "length"
#   "content_filter": content omitted by OpenAI's filters       -> "content_filter"
#   "tool_calls": the model called a tool                       -> "tool_calls"
#   "function_call": (deprecated) the model called a function   -> "tool_calls"
# The compatible servers recorded here (Groq, OpenRouter, DeepSeek, Mistral, Hugging Face,
# Ollama, Azure) send the same values. A value this test has not read the docs for fails
# the test instead of silently expecting "other".
_DOCUMENTED_FINISH = {
    "stop": "stop",
    "length": "length",
    "content_filter": "content_filter",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
}


@dataclass
class Expected:
    """What one recorded response says, independent of the adapter."""

    text: str = ""
    reasoning: str = ""
    calls: dict[int, ExpectedCall] = field(default_factory=dict)
    raw_finish: str | None = None
    usage: dict[str, Any] | None = None
    usage_reports: int = 0
    sentinel: bool = False
    error: ExpectedError | None = None
    host: str = ""

    @property
    def has_content(self) -> bool:
        return bool(self.text or self.reasoning or self.calls)

    @property
    def finish_reason(self) -> str:
        """The normalized finish reason (DESIGN.md, "Other normalizations")."""
        if self.raw_finish is None:
            return "stop"  # only reached when the sentinel arrived; see `outcome`
        assert self.raw_finish in _DOCUMENTED_FINISH, f"undocumented {self.raw_finish!r}"
        return _DOCUMENTED_FINISH[self.raw_finish]

    def tool_calls(self) -> list[ai.ToolCall]:
        return [self.calls[index].tool_call(index) for index in sorted(self.calls)]

    def expected_usage(self) -> ai.Usage:
        return _usage(self.usage, self.host) if self.usage else ai.Usage()


def _usage(u: dict[str, Any], host: str) -> ai.Usage:
    """One recorded `usage` object, read from each server's documentation.

    OpenAI's API reference, the `usage` object: `prompt_tokens`, `completion_tokens`
    (reasoning included), `total_tokens` (their sum), `prompt_tokens_details.cached_tokens`
    and `completion_tokens_details.reasoning_tokens`; OpenRouter, Groq, Ollama and Azure
    use the same fields. Cache hits elsewhere: DeepSeek's API docs ("context caching")
    report `prompt_cache_hit_tokens` and `prompt_cache_miss_tokens`, which sum to
    `prompt_tokens`; Mistral reports `num_cached_tokens` and Hugging Face's router a
    top-level `cached_tokens` (both as recorded here).
    """
    prompt, completion = u.get("prompt_tokens"), u.get("completion_tokens")
    if None not in (prompt, completion, u.get("total_tokens")):
        assert u["total_tokens"] == prompt + completion, "the recording breaks OpenAI's sum"
    cached = (u.get("prompt_tokens_details") or {}).get("cached_tokens")
    if host == "api.deepseek.com":
        cached = u["prompt_cache_hit_tokens"]
        assert cached + u["prompt_cache_miss_tokens"] == prompt, "DeepSeek's documented sum"
    elif host == "api.mistral.ai" and "num_cached_tokens" in u:
        cached = u["num_cached_tokens"]
    elif host == "router.huggingface.co" and "cached_tokens" in u:
        cached = u["cached_tokens"]
    usage = ai.Usage(
        input_tokens=prompt,
        output_tokens=completion,
        total_tokens=u.get("total_tokens"),
        cache_read_tokens=cached,
        reasoning_tokens=(u.get("completion_tokens_details") or {}).get("reasoning_tokens"),
    )
    return usage.normalized()


def _read_message(exp: Expected, msg: dict[str, Any]) -> None:
    """Fold one `delta` (or whole `message`) into the expectation.

    OpenAI's reference: `content` (text), `refusal` (text the model refused with),
    `tool_calls[]` with `index`, `id`, `function.name` and `function.arguments` fragments
    to concatenate per index. Reasoning text: `reasoning_content` (DeepSeek's "reasoning
    model" docs, also Groq's parsed reasoning), `reasoning` (OpenRouter's reasoning-tokens
    docs); Mistral's content is a list of `text` and `thinking` chunks (its
    magistral/reasoning docs).
    """
    for key in ("reasoning_content", "reasoning"):
        if isinstance(msg.get(key), str) and msg[key]:
            exp.reasoning += msg[key]
            break
    content = msg.get("content")
    if isinstance(content, str):
        exp.text += content
    elif isinstance(content, list):  # Mistral content chunks: text and thinking parts
        for piece in content:
            if piece.get("type") == "text":
                exp.text += piece.get("text") or ""
            elif piece.get("type") == "thinking":
                for inner in piece.get("thinking") or []:
                    exp.reasoning += inner.get("text") or ""
    if isinstance(msg.get("refusal"), str):
        exp.text += msg["refusal"]
    for position, call in enumerate(msg.get("tool_calls") or []):
        index = call.get("index", position)
        slot = exp.calls.setdefault(index, ExpectedCall())
        fn = call.get("function") or {}
        slot.id = slot.id or call.get("id") or None
        slot.name = slot.name or fn.get("name") or None
        args = fn.get("arguments")
        if isinstance(args, dict):
            args = json.dumps(args)
        slot.arguments += args or ""


def _read_chunk(exp: Expected, chunk: dict[str, Any], key: str) -> None:
    for choice in chunk.get("choices") or []:
        if choice.get("index", 0) != 0:
            continue
        _read_message(exp, choice.get(key) or {})
        if choice.get("finish_reason"):
            exp.raw_finish = choice["finish_reason"]
    usage = chunk.get("usage") or (chunk.get("x_groq") or {}).get("usage")
    if usage:
        exp.usage = usage
        exp.usage_reports += 1


def _error_type(status: int | None, code: Any, message: str) -> type[ai.AnyInferError]:
    """The error class the recorded status and error body call for.

    OpenAI's "Error codes" guide: 401 invalid authentication, 403 unsupported region,
    404 unknown model, 429 rate limit or quota, 503 overloaded; a prompt over the model's
    window is a 400 with code `context_length_exceeded`.
    """
    said = f"{code or ''} {message}".lower()
    if "context_length_exceeded" in said or "context length" in said:
        return ai.ContextWindowError
    if status in (401, 403):
        return ai.AuthenticationError
    if status == 429:
        return ai.RateLimitError
    if status == 404:
        return ai.ModelNotFoundError
    if status in (503, 529):
        return ai.OverloadedError
    return ai.ProviderError


def _error_from(body: Any, status: int | None) -> ExpectedError:
    err = body.get("error", body) if isinstance(body, dict) else body
    if not isinstance(err, dict):
        return ExpectedError(_error_type(status, None, str(err)), status, str(err))
    message = str(err.get("message") or "")
    code = err.get("code") or err.get("type")
    if status is None:  # an error frame: the status it reports, if any
        reported = err.get("status_code", err.get("code"))
        status = reported if isinstance(reported, int) else None
    return ExpectedError(_error_type(status, code, message), status, message)


def expected_from(item: Interaction) -> Expected:
    """Everything the recorded response says, computed from its body alone."""
    resp = item.response
    exp = Expected(host=item.request.url.host)
    if resp.status >= 400:
        exp.error = _error_from(resp.json, resp.status)
        return exp
    if not item.request.wants_stream:
        body = resp.json
        assert isinstance(body, dict), f"{item.id}: a non-streamed body should be a JSON object"
        _read_chunk(exp, body, "message")
        exp.sentinel = True  # a whole JSON body is complete by construction
        return exp
    payloads, exp.sentinel = sse_json(resp.body)
    for chunk in payloads:
        if chunk.get("error"):
            # Usage carried by the error frame itself must still reach the consumer.
            usage = chunk.get("usage")
            if usage:
                exp.usage = usage
                exp.usage_reports += 1
            exp.error = _error_from(chunk, None)
            return exp
        _read_chunk(exp, chunk, "delta")
    if not exp.sentinel and exp.raw_finish is None:
        exp.error = ExpectedError(ai.StreamError, None, "ended before a finish reason")
    return exp


# --- replaying -------------------------------------------------------------------------------


def replay(item: Interaction, *, chunk_size: int | None = None) -> Replay:
    """Serve `item` to the OpenAI adapter the way it was originally requested."""
    return replay_with(
        item, "openai", endpoint="/chat/completions", chunk_size=chunk_size, api_key="sk-replay"
    )


# --- checks ----------------------------------------------------------------------------------


def check_request(item: Interaction, sent: list[httpx.Request]) -> None:
    """The adapter sent the recorded request's shape: one POST to the same path."""
    body = check_one_post(item, sent)
    assert item.request.path.endswith("/chat/completions")
    if item.request.wants_stream:
        assert body.get("stream_options") == {"include_usage": True}


# --- the tests -------------------------------------------------------------------------------


@pytest.mark.parametrize("item", _params(CHAT, KNOWN_BUGS))
def test_replay_matches_recording(item: Interaction) -> None:
    exp = expected_from(item)
    run = replay(item)
    check_request(item, run.requests)
    if exp.error is not None:
        assert run.result is None, f"expected {exp.error.type.__name__}, got a result"
        assert run.error is not None
        _check_failure(item, exp, run)
        if item.request.wants_stream:
            check_ordering(run.events, ended=False)
        return

    result = check_generation(run, exp, reasoning=exp.reasoning)
    assert result.target == ai.ResolvedTarget("openai", result.target.model, "openai")
    assert [a.outcome for a in result.attempts] == ["ok"]
    if not exp.sentinel:  # finish reason but no [DONE]: success, flagged
        assert any(w.startswith("usage may be incomplete") for w in result.warnings)
    if item.request.wants_stream:
        check_ordering(run.events, ended=True)
        check_events_match_result(run.events, result)
        assert len([e for e in run.events if isinstance(e, ai.UsageUpdate)]) >= min(
            exp.usage_reports, 1
        )


def _check_failure(item: Interaction, exp: Expected, run: Replay) -> None:
    assert exp.error is not None
    error = run.error
    if exp.has_content and item.request.wants_stream:
        # Content was shown: no fallback, the typed error itself propagates.
        assert not isinstance(error, ai.AllTargetsFailedError), repr(error)
        assert type(error) is exp.error.type, repr(error)
        assert isinstance(error, ai.ProviderError)
        assert error.phase == "stream"
        assert error.provider == "openai"
        # Failure-path flushing: usage the wire carried is observable before the raise.
        assert usage_seen(run.events) == exp.expected_usage()
        # What was shown matches the recording up to the failure.
        shown = "".join(e.text for e in run.events if isinstance(e, ai.TextDelta))
        thought = "".join(e.text for e in run.events if isinstance(e, ai.ReasoningDelta))
        assert (shown, thought) == (exp.text, exp.reasoning)
        return
    info = check_attempt_failed(error, exp.error, "openai")
    if exp.error.type is ai.RateLimitError:
        assert info.retryable is True
    if item.request.wants_stream:
        assert [type(e) for e in run.events] == [ai.TimingMark, ai.AttemptFailed]


@pytest.mark.parametrize("item", _params(STREAMED))
def test_replay_split_reads_match_whole_body(item: Interaction) -> None:
    """Framing must not depend on where the network splits the bytes."""
    whole = replay(item)
    split = replay(item, chunk_size=7)
    check_same_result(whole, split)
    assert getattr(split.error, "message", None) == getattr(whole.error, "message", None)


def test_the_recordings_cover_the_expected_ground() -> None:
    """Guard against the filter silently matching nothing (or the folder shrinking)."""
    if _WIRE_DIR is None:
        pytest.skip(_WIRE_WHY)
    files = {i.cassette for i in CHAT}
    assert len(files) >= 20
    assert len(CHAT) >= 40
    assert any(i.response.status >= 400 for i in CHAT)
    assert any(i.request.wants_stream for i in CHAT)
    assert any(not i.request.wants_stream and i.response.status < 400 for i in CHAT)
    hosts = {i.request.url.host for i in CHAT}
    assert {"api.openai.com", "api.groq.com", "openrouter.ai", "api.mistral.ai"} <= hosts


def _cut_before_done(item: Interaction) -> Interaction | None:
    """The same recording with the `data: [DONE]` event (and anything after) cut off."""
    body = item.response.body
    at = body.rfind(b"data: [DONE]")
    if at < 0:
        return None
    cut = replace(item.response, body=body[:at])
    return replace(item, response=cut)


_DONE_ENDED = [i for i in STREAMED if expected_from(i).error is None]


@pytest.mark.parametrize("item", _params(_DONE_ENDED, KNOWN_BUGS))
def test_replay_without_done_follows_trailing_usage_rule(item: Interaction) -> None:
    """Cut `[DONE]` off a real stream: success only if the finish reason had arrived.

    DESIGN.md, "The trailing-usage rule": a stream that ends after the finish reason
    but before the sentinel succeeds with what arrived and a warning; before the finish
    reason it fails. The OpenRouter tool-call variants a and b never send a finish
    reason, so without `[DONE]` they must fail (with it, they end with "stop").
    """
    cut = _cut_before_done(item)
    assert cut is not None, "every recording here ended with [DONE]"
    exp = expected_from(cut)
    run = replay(cut)
    if exp.raw_finish is None:
        assert run.result is None
        error = run.error
        if exp.has_content:
            assert type(error) is ai.StreamError, repr(error)
        else:
            assert isinstance(error, ai.AllTargetsFailedError), repr(error)
            assert error.attempts[0].error is not None
            assert error.attempts[0].error.type_name == "StreamError"
        assert usage_seen(run.events) == exp.expected_usage()
        check_ordering(run.events, ended=False)
        return
    assert run.error is None, repr(run.error)
    result = run.result
    assert result is not None
    assert result.text == exp.text
    assert result.finish_reason == exp.finish_reason
    assert list(result.tool_calls) == exp.tool_calls()
    assert dataclasses.replace(result.usage, cost_usd=None) == exp.expected_usage()
    assert any(w.startswith("usage may be incomplete") for w in result.warnings)
    check_ordering(run.events, ended=True)


def test_openrouter_variants_without_finish_reason_still_end_with_stop() -> None:
    """The README's warning, spelled out: variants a and b send no finish reason."""
    if _WIRE_DIR is None:
        pytest.skip(_WIRE_WHY)
    first_turns = [i for i in CHAT if i.id.startswith("test_tools_streaming_variant_")]
    by_variant = {i.id: i for i in first_turns if i.index == 0}
    assert set(by_variant) == {f"test_tools_streaming_variant_{v}.yaml#0" for v in "abcd"}
    for variant in "ab":
        item = by_variant[f"test_tools_streaming_variant_{variant}.yaml#0"]
        exp = expected_from(item)
        assert exp.raw_finish is None and exp.sentinel, "the recording changed"
        run = replay(item)
        assert run.result is not None, repr(run.error)
        assert run.result.finish_reason == "stop"
        assert [c.name for c in run.result.tool_calls] == ["llm_version"]
        assert not run.result.warnings


# --- the wire helpers themselves ------------------------------------------------------------


def test_every_recording_loads_and_decodes() -> None:
    """All cassettes parse; gzip `!!binary` bodies come out as readable text."""
    root = require_wire_dir()
    files = list_cassettes(root)
    assert files
    gzipped = 0
    for path in files:
        loaded = load_cassette(path)
        assert loaded, path
        binary = "!!binary" in path.read_text(encoding="utf-8")
        for item in loaded:
            body = item.response.body
            assert body[:2] != b"\x1f\x8b", item.id
            if item.response.content_type == "application/vnd.amazon.eventstream":
                continue  # binary AWS event-stream frames: test_replay_bedrock.py decodes them
            if item.response.status < 400 and item.response.content_type:
                text = body.decode("utf-8")  # every other protocol here is text
                if item.response.is_sse:
                    assert sse_frames(text), item.id
                elif "json" in item.response.content_type:
                    json.loads(text)
            gzipped += binary
    assert gzipped > 0, "the folder should include gzip-compressed recordings"


def test_sse_frames_reads_the_format_plainly() -> None:
    body = b": keep-alive\r\nevent: a\r\ndata: 1\r\ndata: 2\r\n\r\ndata:x\rdata: [DONE]"
    assert sse_frames(body) == [SSEFrame("a", "1\n2"), SSEFrame(None, "x\n[DONE]")]
    payloads, done = sse_json(b'data: {"a": 1}\n\ndata: [DONE]\n\ndata: {"b": 2}\n\n')
    assert (payloads, done) == ([{"a": 1}], True)


def test_replay_transport_is_strict() -> None:
    item = CHAT[0] if CHAT else None
    if item is None:
        pytest.skip(_WIRE_WHY)
    transport = replay_transport([item])
    with pytest.raises(AssertionError, match="never requested"):
        transport.assert_all_used()

    async def twice() -> None:
        async with httpx.AsyncClient(transport=transport) as client:
            first = await client.post(item.request.uri, content=b"{}")
            assert first.status_code == item.response.status
            assert first.content == item.response.body
            await client.post(item.request.uri, content=b"{}")

    with pytest.raises(AssertionError, match="unexpected request #2"):
        asyncio.run(twice())
    transport.assert_all_used()
    assert transport.sent_json(0) == {}
