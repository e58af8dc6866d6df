"""Replay real recordings through the Vertex AI adapters.

`vertex-gemini`: every recorded Vertex AI Gemini exchange in the bundled recordings
(pydantic-ai's `test_google_vertex_*` and `test_google_model_vertex_*` cassettes, to
`aiplatform.googleapis.com/v1beta1/projects/.../publishers/google/models/...`) is served
back through the adapter, configured with the recorded project, location and API version
and a static access token. The adapter must ask for exactly the recorded URL, with the
bearer token, and the result must say what the recorded body says.

`vertex-anthropic`: no recording of Claude on Vertex AI is bundled (none of the projects
the recordings come from publish one). Vertex serves Claude's responses in the Anthropic
Messages format byte for byte (Anthropic's "Claude on Vertex AI" page: the same API, the
model in the URL, `anthropic_version` in the body), so the recorded Anthropic Messages
responses are served at the Vertex URLs instead: this checks the Vertex request (path,
no `model`, `anthropic_version`, `stream`) and that the decoding is Anthropic's.

The expected values are read from the recorded JSON here, following the Gemini API and
Anthropic Messages references, without the adapters' tables.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, fields, replace
from typing import Any

import pytest
from helpers import NO_RETRY
from wire import Interaction, find_wire_dir, interactions, replay_transport, run_replay, sse_json

import anyinfer as ai

_WIRE_DIR, _WIRE_WHY = find_wire_dir()
_VERTEX_URL = re.compile(
    r"^/(?P<version>v1(?:beta1)?)/projects/(?P<project>[^/]+)/locations/(?P<location>[^/]+)"
    r"/publishers/google/models/(?P<model>[^/:]+):(?P<method>\w+)$"
)


def _is_vertex_gemini(item: Interaction) -> bool:
    return item.protocol == "gemini" and item.request.url.host.endswith("aiplatform.googleapis.com")


VERTEX_GEMINI = interactions(_WIRE_DIR, _is_vertex_gemini) if _WIRE_DIR else []
ANTHROPIC = (
    [
        i
        for i in interactions(_WIRE_DIR, lambda i: i.protocol == "anthropic_messages")
        if i.response.status == 200
    ]
    if _WIRE_DIR
    else []
)
TOKEN = "ya29.replay-access-token"


def _params(items: list[Interaction], what: str, sizes: tuple[int | None, ...]) -> list[Any]:
    if not items:
        why = _WIRE_WHY if _WIRE_DIR is None else f"no {what} recordings under {_WIRE_DIR}"
        return [pytest.param(None, None, id="no-recordings", marks=pytest.mark.skip(reason=why))]
    return [
        pytest.param(
            item, size, id=f"{item.id}-{'one-read' if size is None else f'reads-of-{size}'}"
        )
        for item in items
        for size in sizes
    ]


def _merge(old: ai.Usage, new: ai.Usage) -> ai.Usage:
    known = {f.name: getattr(new, f.name) for f in fields(new) if getattr(new, f.name) is not None}
    return replace(old, **known)


@dataclass
class Expected:
    """What one recorded response says."""

    text: str = ""
    reasoning: str = ""
    calls: list[ai.ToolCall] = field(default_factory=list)
    finish: str = "stop"
    usage: ai.Usage = field(default_factory=ai.Usage)
    blocked: str | None = None  # a prompt blocked before any candidate: its reason


# --- Gemini on Vertex --------------------------------------------------------------------

# The Gemini API reference's `FinishReason`: STOP is a natural stop (a turn of function
# calls ends with it too, so it reads as tool_calls then), MAX_TOKENS the token limit.
_GEMINI_FINISH = {
    "MAX_TOKENS": "length",
    "SAFETY": "content_filter",
    "RECITATION": "content_filter",
}


def _gemini_usage(meta: dict[str, Any]) -> ai.Usage:
    """`UsageMetadata`: the prompt (plus the tool-use prompt) is the input; candidates and
    thoughts are what the model generated; thoughts are the reasoning; cached content is
    the part of the prompt read from the cache."""

    def count(*names: str) -> int | None:
        values = [meta[n] for n in names if n in meta]
        return sum(values) if values else None

    return ai.Usage(
        input_tokens=count("promptTokenCount", "toolUsePromptTokenCount"),
        output_tokens=count("candidatesTokenCount", "thoughtsTokenCount"),
        total_tokens=meta.get("totalTokenCount"),
        cache_read_tokens=meta.get("cachedContentTokenCount"),
        reasoning_tokens=meta.get("thoughtsTokenCount"),
    )


def gemini_expected(item: Interaction) -> Expected:
    response = item.response
    chunks = sse_json(response.body)[0] if response.is_sse else [json.loads(response.body)]
    exp = Expected()
    raw_finish = None
    for chunk in chunks:
        # `promptFeedback.blockReason` without candidates: the prompt was refused (Vertex's
        # Model Armor among the reasons).
        block = (chunk.get("promptFeedback") or {}).get("blockReason")
        if block and not chunk.get("candidates"):
            exp.blocked = block
        for cand in (chunk.get("candidates") or [])[:1]:
            for part in (cand.get("content") or {}).get("parts") or []:
                if part.get("text"):
                    if part.get("thought"):
                        exp.reasoning += part["text"]
                    else:
                        exp.text += part["text"]
                elif "functionCall" in part:
                    fc = part["functionCall"]
                    exp.calls.append(
                        ai.ToolCall(
                            fc.get("id") or f"call_{len(exp.calls)}", fc["name"], fc.get("args", {})
                        )
                    )
            raw_finish = cand.get("finishReason", raw_finish)
        if "usageMetadata" in chunk:
            exp.usage = _merge(exp.usage, _gemini_usage(chunk["usageMetadata"]))
    if raw_finish == "STOP":
        exp.finish = "tool_calls" if exp.calls else "stop"
    elif raw_finish is not None:
        exp.finish = _GEMINI_FINISH.get(raw_finish, "other")
    exp.usage = exp.usage.normalized()
    return exp


def test_the_vertex_gemini_recordings_are_bundled() -> None:
    if _WIRE_DIR is None:
        pytest.skip(_WIRE_WHY)
    assert len(VERTEX_GEMINI) >= 5
    assert any(i.request.wants_stream for i in VERTEX_GEMINI)
    assert any(gemini_expected(i).calls for i in VERTEX_GEMINI)
    assert any(gemini_expected(i).blocked for i in VERTEX_GEMINI)


@pytest.mark.parametrize(("item", "size"), _params(VERTEX_GEMINI, "Vertex Gemini", (None, 7)))
def test_vertex_gemini_replay(item: Interaction, size: int | None) -> None:
    match = _VERTEX_URL.match(item.request.url.path)
    assert match is not None, item.request.uri
    transport = replay_transport([item], chunk_size=size)
    settings = ai.ProviderSettings(
        "vertex-gemini",
        transport=transport,
        api_version=match["version"],
        options={"project": match["project"], "location": match["location"], "access_token": TOKEN},
    )
    route = ai.Route(f"vertex-gemini:{match['model']}", retry=NO_RETRY)
    run = run_replay(item, transport, settings, route=route)
    (sent,) = run.requests
    assert sent.url == item.request.url  # host, path and `?alt=sse`, exactly as recorded
    assert sent.headers["authorization"] == f"Bearer {TOKEN}"
    assert "x-goog-api-key" not in sent.headers
    exp = gemini_expected(item)
    if exp.blocked is not None:
        assert isinstance(run.error, ai.AllTargetsFailedError), repr(run.error)
        info = run.error.attempts[-1].error
        assert info is not None and info.type_name == "ContentFilterError"
        assert exp.blocked in info.detail
        return
    assert run.error is None, repr(run.error)
    result = run.result
    assert result is not None
    assert result.text == exp.text
    assert result.reasoning == exp.reasoning
    assert list(result.tool_calls) == exp.calls
    assert result.finish_reason == exp.finish
    assert replace(result.usage, cost_usd=None) == exp.usage


# --- Claude on Vertex (Anthropic Messages bodies) -------------------------------------------

# The Messages reference's `stop_reason`: end_turn and stop_sequence are natural stops,
# max_tokens the token cap, tool_use a turn of tool calls, refusal a policy refusal.
_ANTHROPIC_FINISH = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
}


def _anthropic_usage(u: dict[str, Any]) -> ai.Usage:
    """`usage`: `input_tokens` excludes the cache reads (`cache_read_input_tokens`) and
    writes (`cache_creation_input_tokens`); `output_tokens` is everything generated."""
    details = u.get("output_tokens_details") or {}
    return ai.Usage(
        input_tokens=u.get("input_tokens"),
        output_tokens=u.get("output_tokens"),
        cache_read_tokens=u.get("cache_read_input_tokens"),
        cache_write_tokens=u.get("cache_creation_input_tokens"),
        reasoning_tokens=details.get("thinking_tokens"),
    )


def anthropic_expected(item: Interaction) -> Expected:
    exp = Expected()
    response = item.response
    if not response.is_sse:
        message = json.loads(response.body)
        for block in message.get("content") or []:
            if block.get("type") == "text":
                exp.text += block["text"]
            elif block.get("type") == "thinking":
                exp.reasoning += block.get("thinking", "")
            elif block.get("type") == "tool_use":
                exp.calls.append(ai.ToolCall(block["id"], block["name"], block.get("input") or {}))
        exp.finish = _ANTHROPIC_FINISH.get(message.get("stop_reason") or "", "other")
        exp.usage = _anthropic_usage(message.get("usage") or {}).normalized()
        return exp
    events, _ = sse_json(response.body, sentinel="")
    blocks: dict[int, dict[str, Any]] = {}
    arguments: dict[int, str] = {}
    for event in events:
        kind = event.get("type")
        if kind == "message_start":
            exp.usage = _merge(exp.usage, _anthropic_usage(event["message"].get("usage") or {}))
        elif kind == "content_block_start":
            blocks[event["index"]] = event["content_block"]
        elif kind == "content_block_delta":
            delta = event["delta"]
            if delta["type"] == "text_delta":
                exp.text += delta["text"]
            elif delta["type"] == "thinking_delta":
                exp.reasoning += delta["thinking"]
            elif delta["type"] == "input_json_delta":
                arguments[event["index"]] = (
                    arguments.get(event["index"], "") + delta["partial_json"]
                )
        elif kind == "message_delta":
            exp.usage = _merge(exp.usage, _anthropic_usage(event.get("usage") or {}))
            reason = (event.get("delta") or {}).get("stop_reason")
            if reason:
                exp.finish = _ANTHROPIC_FINISH.get(reason, "other")
    for index in sorted(blocks):
        block = blocks[index]
        if block.get("type") == "tool_use":
            text = arguments.get(index, "").strip()
            args = json.loads(text) if text else (block.get("input") or {})
            exp.calls.append(ai.ToolCall(block["id"], block["name"], args))
    exp.usage = exp.usage.normalized()
    return exp


def _message_stopped(item: Interaction) -> bool:
    if not item.response.is_sse:
        return True
    events, _ = sse_json(item.response.body, sentinel="")
    return any(e.get("type") == "message_stop" for e in events)


CLAUDE = [i for i in ANTHROPIC if _message_stopped(i)]


@pytest.mark.parametrize(("item", "size"), _params(CLAUDE, "Anthropic Messages", (None, 11)))
def test_vertex_anthropic_replay(item: Interaction, size: int | None) -> None:
    recorded = item.request.json or {}
    model = str(recorded.get("model") or "claude-recorded")
    transport = replay_transport([item], chunk_size=size)
    settings = ai.ProviderSettings(
        "vertex-anthropic",
        transport=transport,
        options={"project": "replay-project", "location": "us-east5", "access_token": TOKEN},
    )
    route = ai.Route(f"vertex-anthropic:{model}", retry=NO_RETRY)
    run = run_replay(item, transport, settings, route=route)
    (sent,) = run.requests
    method = "streamRawPredict" if item.request.wants_stream else "rawPredict"
    assert str(sent.url) == (
        "https://us-east5-aiplatform.googleapis.com/v1/projects/replay-project/locations/"
        f"us-east5/publishers/anthropic/models/{model}:{method}"
    )
    assert sent.headers["authorization"] == f"Bearer {TOKEN}"
    body = json.loads(sent.content)
    assert "model" not in body and body["anthropic_version"] == "vertex-2023-10-16"
    assert body.get("stream", False) is item.request.wants_stream
    assert run.error is None, repr(run.error)
    result = run.result
    assert result is not None
    exp = anthropic_expected(item)
    assert result.text == exp.text
    assert result.reasoning == exp.reasoning
    assert list(result.tool_calls) == exp.calls
    assert result.finish_reason == exp.finish
    assert replace(result.usage, cost_usd=None) == exp.usage
