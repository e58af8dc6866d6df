"""Replay real Gemini recordings through the Gemini adapter.

Every interaction in the shared recordings whose request went to `…:generateContent` or
`…:streamGenerateContent` — the Gemini Developer API (pydantic-ai's `test_google`
cassettes, server-sent events and whole bodies; simonw/llm-gemini's cassettes, the
plain JSON-array stream body, gzipped) and two Vertex AI responses, which share the
response shape — is served back through the `transport` seam, and the result is
compared with what the recorded body says. The expected values are computed here,
straight from the recorded JSON, without the adapter's code: text, reasoning, tool
calls, usage (merged report by report, later figures winning), finish reason, the
order in which content and usage reports arrive, the thought signatures kept in the
raw payload, and the typed error for error statuses and blocked prompts.

Streamed recordings go through `AsyncClient.stream` in several read splits (their
events also get the ordering checks of the event-stream grammar); non-streamed ones
through `AsyncClient.generate`.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field, fields, replace
from typing import Any

import pytest
from helpers import NO_RETRY
from wire import (
    Interaction,
    find_wire_dir,
    interactions,
    replay_transport,
    split_params,
    sse_json,
)

import anyinfer as ai
from anyinfer._providers.gemini import content_parts

_WIRE_DIR, _WIRE_WHY = find_wire_dir()
GEMINI = interactions(_WIRE_DIR, lambda i: i.protocol == "gemini") if _WIRE_DIR else []
STREAMED = [i for i in GEMINI if i.request.wants_stream and i.response.status < 400]

# Our finish vocabulary for a candidate's `finishReason`, read from the Gemini API
# reference (`FinishReason` of `GenerateContentResponse`), not from the adapter:
#   STOP: natural stop point of the model or a provided stop sequence -> "stop" (or
#       "tool_calls" when the candidate holds `functionCall` parts: Gemini's function
#       calling guide ends a call turn with STOP, it has no reason of its own)
#   MAX_TOKENS: the maximum number of tokens in the request was reached -> "length"
#   SAFETY, RECITATION, BLOCKLIST, PROHIBITED_CONTENT, SPII: the candidate was flagged
#       for safety or recitation, holds forbidden terms, prohibited content or personal
#       data -> "content_filter"
#   LANGUAGE, OTHER, MALFORMED_FUNCTION_CALL: no counterpart -> "other"
# A reason this test has not read the docs for fails the test instead of silently
# expecting "other".
_DOCUMENTED_FINISH = {
    "MAX_TOKENS": "length",
    **dict.fromkeys(
        ("SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII"), "content_filter"
    ),
    **dict.fromkeys(("LANGUAGE", "OTHER", "MALFORMED_FUNCTION_CALL"), "other"),
}
# Google APIs' error model (`google.rpc.Code`, in the error body's `status`), as the Gemini
# API troubleshooting page lists it: NOT_FOUND 404, UNAUTHENTICATED 401, PERMISSION_DENIED
# 403 (a key without access), RESOURCE_EXHAUSTED 429 (rate limit), UNAVAILABLE 503.
_STATUS_ERRORS: dict[str, type[ai.ProviderError]] = {
    "NOT_FOUND": ai.ModelNotFoundError,
    "UNAUTHENTICATED": ai.AuthenticationError,
    "PERMISSION_DENIED": ai.AuthenticationError,
    "RESOURCE_EXHAUSTED": ai.RateLimitError,
    "UNAVAILABLE": ai.OverloadedError,
}


# --- expected values, straight from the recorded body ---------------------------------


@dataclass
class Expected:
    """What one recorded response says, independent of the adapter."""

    text: str = ""
    reasoning: str = ""
    calls: list[ai.ToolCall] = field(default_factory=list)
    raw_finish: str | None = None
    usage: ai.Usage = field(default_factory=ai.Usage)
    chunks: int = 0
    order: list[str] = field(default_factory=list)
    signatures: int = 0
    closed: bool = False  # the JSON array's closing bracket arrived
    framing: str = "whole"
    error: tuple[type[ai.ProviderError], int | None, str] | None = None

    @property
    def finish_reason(self) -> str:
        raw = self.raw_finish
        if raw is None:
            return "stop"
        if raw == "STOP":
            return "tool_calls" if self.calls else "stop"
        assert raw in _DOCUMENTED_FINISH, f"undocumented finishReason {raw!r}"
        return _DOCUMENTED_FINISH[raw]

    @property
    def succeeds(self) -> bool:
        if self.error is not None:
            return False
        if self.framing == "sse":
            return self.raw_finish is not None
        return True


def _usage(meta: dict[str, Any]) -> ai.Usage:
    """One `usageMetadata` report, read from the Gemini API reference (`UsageMetadata`).

    `promptTokenCount` is the whole prompt (cached content included, which
    `cachedContentTokenCount` counts again on its own); `toolUsePromptTokenCount` is
    the prompt the tools' results added; `candidatesTokenCount` the generated
    candidates; `thoughtsTokenCount` a thinking model's thoughts; `totalTokenCount` the
    sum of the four. In our terms the input is the prompt plus the tool-use prompt,
    the output is everything generated (candidates and thoughts: a reasoning model's
    output includes its reasoning, as OpenAI counts it), the reasoning is the thoughts.
    """

    def count(*names: str) -> int | None:
        values = [meta[n] for n in names if n in meta]
        return sum(values) if values else None

    input_tokens = count("promptTokenCount", "toolUsePromptTokenCount")
    output_tokens = count("candidatesTokenCount", "thoughtsTokenCount")
    total = meta.get("totalTokenCount")
    if total is not None:  # the recording itself obeys the documented sum
        assert total == (input_tokens or 0) + (output_tokens or 0), meta
    return ai.Usage(
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        total_tokens=total,
        cache_read_tokens=meta.get("cachedContentTokenCount"),
        reasoning_tokens=meta.get("thoughtsTokenCount"),
    )


def _merge(old: ai.Usage, new: ai.Usage) -> ai.Usage:
    known = {f.name: getattr(new, f.name) for f in fields(new) if getattr(new, f.name) is not None}
    return replace(old, **known)


def _chunks(item: Interaction) -> tuple[list[dict[str, Any]], str, bool]:
    response = item.response
    if response.is_sse:
        payloads, _ = sse_json(response.body)
        return payloads, "sse", False
    data = json.loads(response.body)
    if isinstance(data, list):
        return data, "array", response.body.rstrip().endswith(b"]")
    return [data], "whole", False


def expected_from(item: Interaction) -> Expected:
    response = item.response
    if response.status >= 400:
        body = response.json
        error = (body[0] if isinstance(body, list) else body)["error"]
        kind = _STATUS_ERRORS.get(error.get("status", ""), ai.ProviderError)
        return Expected(error=(kind, response.status, error["message"]))
    chunks, framing, closed = _chunks(item)
    exp = Expected(chunks=len(chunks), framing=framing, closed=closed)
    for chunk in chunks:
        candidates = chunk.get("candidates") or []
        block = (chunk.get("promptFeedback") or {}).get("blockReason")
        if block and not candidates:
            exp.error = (ai.ContentFilterError, None, block)
            return exp
        for cand in candidates[:1]:
            for part in (cand.get("content") or {}).get("parts") or []:
                if "thoughtSignature" in part:
                    exp.signatures += 1
                if "text" in part:
                    if not part["text"]:
                        continue
                    if part.get("thought"):
                        exp.reasoning += part["text"]
                        exp.order.append("ReasoningDelta")
                    else:
                        exp.text += part["text"]
                        exp.order.append("TextDelta")
                elif "functionCall" in part:
                    fc = part["functionCall"]
                    call_id = fc.get("id") or f"call_{len(exp.calls)}"
                    exp.calls.append(ai.ToolCall(call_id, fc.get("name", ""), fc.get("args", {})))
                    exp.order.append("ToolCallDelta")
            if cand.get("finishReason"):
                exp.raw_finish = cand["finishReason"]
        if "usageMetadata" in chunk:
            exp.usage = _merge(exp.usage, _usage(chunk["usageMetadata"]))
            exp.order.append("UsageUpdate")
    return exp


def _model(item: Interaction) -> str:
    return item.request.path.rsplit("/models/", 1)[1].split(":", 1)[0]


def _settings(item: Interaction, transport: Any) -> ai.ProviderSettings:
    options = {}
    if item.request.wants_stream and item.request.url.params.get("alt") != "sse":
        options["stream_format"] = "json-array"  # the recorded request asked for the array
    return ai.ProviderSettings("gemini", api_key="k", transport=transport, options=options)


def _route(item: Interaction) -> ai.Route:
    return ai.Route(f"gemini:{_model(item)}", retry=NO_RETRY)


# --- the checks -------------------------------------------------------------------------


def _check_request(item: Interaction, transport: Any) -> None:
    (sent,) = transport.requests
    recorded = item.request
    assert sent.method == "POST"
    assert sent.headers["x-goog-api-key"] == "k"
    endpoint = recorded.path.rsplit(":", 1)[1]
    assert sent.url.path == f"/v1beta/models/{_model(item)}:{endpoint}"
    if recorded.url.host == "generativelanguage.googleapis.com":
        assert sent.url.host == recorded.url.host
        assert sent.url.params.get("alt") == recorded.url.params.get("alt")


def _check_result(exp: Expected, result: ai.Generation) -> None:
    assert result.text == exp.text
    assert result.reasoning == exp.reasoning
    assert list(result.tool_calls) == exp.calls
    assert result.finish_reason == exp.finish_reason
    # The client adds cost_usd from its pricing table; the adapter's figures are the tokens.
    assert replace(result.usage, cost_usd=None) == exp.usage.normalized()
    assert result.warnings == ()


def _check_grammar(events: list[ai.StreamEvent], exp: Expected) -> None:
    assert isinstance(events[0], ai.TimingMark) and events[0].name == "attempt_start"
    assert isinstance(events[-1], ai.StreamEnded)
    assert sum(isinstance(ev, ai.StreamEnded) for ev in events) == 1
    content = (ai.TextDelta, ai.ReasoningDelta, ai.ToolCallDelta)
    marks = [i for i, ev in enumerate(events) if isinstance(ev, ai.TimingMark)]
    first = next((i for i, ev in enumerate(events) if isinstance(ev, content)), None)
    if first is None:
        assert marks == [0]
    else:
        assert marks == [0, first - 1]
        assert events[first - 1].name == "first_token"  # type: ignore[union-attr]
    # Content and usage arrive in wire order: each chunk's parts, then its usage report.
    seen = [type(ev).__name__ for ev in events if isinstance(ev, (*content, ai.UsageUpdate))]
    assert seen == exp.order


def test_the_recordings_cover_both_stream_framings_and_whole_bodies() -> None:
    if not GEMINI:
        pytest.skip(_WIRE_WHY or "no Gemini recordings")
    framings = {expected_from(i).framing for i in GEMINI if i.response.status < 400}
    assert framings == {"sse", "array", "whole"}
    assert any(i.response.status >= 400 for i in GEMINI)


@pytest.mark.parametrize(("item", "split"), split_params(STREAMED, (None, 1, 13), what="Gemini"))
def test_streamed_recordings(item: Interaction, split: int | None) -> None:
    exp = expected_from(item)
    transport = replay_transport([item], chunk_size=split)
    events: list[ai.StreamEvent] = []

    async def go() -> ai.Generation:
        async with ai.AsyncClient([_settings(item, transport)], retain_raw=True) as client:
            async with client.stream("replayed", route=_route(item)) as st:
                async for ev in st:
                    events.append(ev)
            return st.result

    if not exp.succeeds:
        with pytest.raises(ai.AnyInferError):
            asyncio.run(go())
        return
    result = asyncio.run(go())
    transport.assert_all_used()
    _check_request(item, transport)
    _check_result(exp, result)
    _check_grammar(events, exp)
    # Every chunk is kept raw, thought signatures included: the raw payload is the
    # recorded chunks themselves (compared with this test's own parse of the body).
    assert isinstance(result.raw, list) and len(result.raw) == exp.chunks
    assert result.raw == _chunks(item)[0]
    # `content_parts` (the adapter's public helper, under test here) keeps every signature.
    kept = content_parts(result.raw)
    assert sum("thoughtSignature" in p for p in kept) == exp.signatures
    if exp.framing == "array":
        assert exp.closed  # these recordings end with `]`, the array form's sentinel


@pytest.mark.parametrize(
    ("item", "split"), split_params([i for i in GEMINI if i not in STREAMED], what="Gemini")
)
def test_whole_and_failed_recordings(item: Interaction, split: int | None) -> None:
    exp = expected_from(item)
    transport = replay_transport([item])

    async def go() -> ai.Generation:
        async with ai.AsyncClient([_settings(item, transport)], retain_raw=True) as client:
            return await client.generate("replayed", route=_route(item))

    if exp.error is not None:
        kind, status, detail = exp.error
        with pytest.raises(ai.AllTargetsFailedError) as info:
            asyncio.run(go())
        last = info.value.attempts[-1].error
        assert last is not None
        assert last.type_name == kind.__name__
        assert last.http_status == status
        assert detail in last.detail
        return
    result = asyncio.run(go())
    transport.assert_all_used()
    _check_request(item, transport)
    _check_result(exp, result)
    assert isinstance(result.raw, dict)
