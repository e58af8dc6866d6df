"""Replay real AWS Bedrock Converse recordings through the Bedrock adapter.

Every interaction in the shared recordings whose request went to
`…/model/{modelId}/converse` or `…/converse-stream` (pydantic-ai's `test_bedrock`
cassettes: Nova, Claude, gpt-oss; streamed event-stream bodies stored byte for byte as
`!!binary`, whole bodies re-serialized from `parsed_body`, and two HTTP 400s) is served
back through the `transport` seam, and the result is compared with what the recorded
body says. The expected values are computed here without the adapter's code: the
binary frames are decoded with botocore's `EventStreamBuffer` directly and the JSON is
read by hand, following the Bedrock Runtime API reference (`ConverseStreamOutput`,
`ConverseOutput`, `TokenUsage`, `StopReason`): text, reasoning, client-side tool calls,
usage, the finish reason, the provider's latency, the order of content and usage, and
the raw payload kept with `retain_raw`.

Streamed recordings go through `AsyncClient.stream` in several read splits (one read,
one byte at a time, 13 bytes); whole ones through `AsyncClient.generate`.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

import pytest
from helpers import NO_RETRY
from wire import Interaction, find_wire_dir, interactions, replay_transport, split_params

import anyinfer as ai
from anyinfer._providers.bedrock import content_blocks

_WIRE_DIR, _WIRE_WHY = find_wire_dir()


def _is_converse(item: Interaction) -> bool:
    path = item.request.path.rstrip("/")
    return "/model/" in path and path.endswith(("/converse", "/converse-stream"))


BEDROCK = interactions(_WIRE_DIR, _is_converse) if _WIRE_DIR else []
STREAMED = [i for i in BEDROCK if i.request.path.endswith("/converse-stream")]
SUCCEEDED_STREAMS = [i for i in STREAMED if i.response.status < 400]
OTHERS = [i for i in BEDROCK if i not in SUCCEEDED_STREAMS]

# `StopReason` in the Bedrock Runtime API reference, read into our vocabulary:
#   end_turn: the model finished its turn; stop_sequence: a stop sequence was generated
#       -> "stop"
#   max_tokens: the maximum number of tokens was reached; model_context_window_exceeded:
#       the context window was filled -> "length"
#   tool_use: the model asks for a tool -> "tool_calls"
#   guardrail_intervened: a guardrail blocked the content; content_filtered: the
#       model's content filter did -> "content_filter"
# A reason this test has not read the documentation for fails the test.
_DOCUMENTED_STOP = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_calls",
    "guardrail_intervened": "content_filter",
    "content_filtered": "content_filter",
}


# --- expected values, straight from the recorded body ---------------------------------


@dataclass
class Expected:
    """What one recorded response says, independent of the adapter."""

    text: str = ""
    reasoning: str = ""
    calls: list[ai.ToolCall] = field(default_factory=list)
    stop: str | None = None
    usage: ai.Usage = field(default_factory=ai.Usage)
    latency_ms: float | None = None
    order: list[str] = field(default_factory=list)
    payloads: list[Any] = field(default_factory=list)
    signatures: list[str] = field(default_factory=list)
    redacted: int = 0
    whole: Any = None  # the parsed body of a whole response

    @property
    def raw(self) -> Any:
        """What `retain_raw` keeps: each event's payload, or the whole body."""
        return self.payloads if self.whole is None else self.whole

    @property
    def finish_reason(self) -> str:
        assert self.stop in _DOCUMENTED_STOP, f"undocumented stopReason {self.stop!r}"
        return _DOCUMENTED_STOP[self.stop]


def _usage(u: dict[str, Any]) -> ai.Usage:
    """`TokenUsage`: `inputTokens` (the prompt, prompt-cache reads and writes not
    included: those are `cacheReadInputTokens` / `cacheWriteInputTokens`),
    `outputTokens`, and `totalTokens`, which adds all four. AnyInfer's total is input
    plus output."""
    read, write = u.get("cacheReadInputTokens"), u.get("cacheWriteInputTokens")
    assert u["totalTokens"] == u["inputTokens"] + u["outputTokens"] + (read or 0) + (write or 0)
    return ai.Usage(
        input_tokens=u["inputTokens"],
        output_tokens=u["outputTokens"],
        total_tokens=u["inputTokens"] + u["outputTokens"],
        cache_read_tokens=read,
        cache_write_tokens=write,
    )


def _frames(body: bytes) -> list[tuple[dict[str, Any], Any]]:
    """The recorded body's event-stream messages: headers and parsed JSON payload."""
    from botocore.eventstream import EventStreamBuffer

    buffer = EventStreamBuffer()
    buffer.add_data(body)
    out = [(dict(m.headers), json.loads(m.payload)) for m in buffer]
    assert out, "no frames"
    return out


def expected_stream(item: Interaction) -> Expected:
    exp = Expected()
    calls: dict[int, dict[str, Any]] = {}  # contentBlockIndex -> call being built
    order: list[int] = []
    for headers, payload in _frames(item.response.body):
        assert headers[":message-type"] == "event"
        exp.payloads.append(payload)
        kind = headers[":event-type"]
        index = payload.get("contentBlockIndex")
        if kind == "contentBlockStart":
            use = payload["start"].get("toolUse")
            # Server-side tools (`"type": "server_tool_use"`) run at Bedrock.
            if use is not None and use.get("type", "tool_use") == "tool_use":
                calls[index] = {"id": use["toolUseId"], "name": use["name"], "input": ""}
                order.append(index)
                exp.order.append("ToolCallDelta")
        elif kind == "contentBlockDelta":
            delta = payload["delta"]
            if delta.get("text"):
                exp.text += delta["text"]
                exp.order.append("TextDelta")
            elif (delta.get("reasoningContent") or {}).get("text"):
                exp.reasoning += delta["reasoningContent"]["text"]
                exp.order.append("ReasoningDelta")
            elif "signature" in (delta.get("reasoningContent") or {}):
                exp.signatures.append(delta["reasoningContent"]["signature"])
            elif "redactedContent" in (delta.get("reasoningContent") or {}):
                exp.redacted += 1
            elif "toolUse" in delta and index in calls:
                calls[index]["input"] += delta["toolUse"]["input"]
                if delta["toolUse"]["input"]:
                    exp.order.append("ToolCallDelta")
        elif kind == "messageStop":
            exp.stop = payload["stopReason"]
        elif kind == "metadata":
            exp.usage = _usage(payload["usage"])
            exp.latency_ms = float(payload["metrics"]["latencyMs"])
            exp.order.append("UsageUpdate")
    for index in order:
        call = calls[index]
        arguments = json.loads(call["input"]) if call["input"].strip() else {}
        exp.calls.append(ai.ToolCall(call["id"], call["name"], arguments))
    return exp


def expected_whole(item: Interaction) -> Expected:
    body = json.loads(item.response.body)
    exp = Expected(whole=body)
    for block in body["output"]["message"]["content"]:
        if "text" in block:
            exp.text += block["text"]
        elif "reasoningContent" in block:
            reasoning = block["reasoningContent"]
            if "redactedContent" in reasoning:
                exp.redacted += 1
            else:
                exp.reasoning += reasoning["reasoningText"]["text"]
                if "signature" in reasoning["reasoningText"]:
                    exp.signatures.append(reasoning["reasoningText"]["signature"])
        elif "toolUse" in block and block["toolUse"].get("type", "tool_use") == "tool_use":
            use = block["toolUse"]
            exp.calls.append(ai.ToolCall(use["toolUseId"], use["name"], use["input"]))
    exp.stop = body["stopReason"]
    exp.usage = _usage(body["usage"])
    exp.latency_ms = float(body["metrics"]["latencyMs"])
    return exp


def _model(item: Interaction) -> str:
    encoded = item.request.url.raw_path.decode().split("/model/", 1)[1].rsplit("/", 1)[0]
    return unquote(encoded)


def _settings(item: Interaction, transport: Any) -> ai.ProviderSettings:
    root = f"{item.request.url.scheme}://{item.request.url.host}"
    return ai.ProviderSettings("bedrock", api_key="bedrock-key", base_url=root, transport=transport)


def _route(item: Interaction) -> ai.Route:
    return ai.Route(f"bedrock:{_model(item)}", retry=NO_RETRY)


def _check_request(item: Interaction, transport: Any) -> None:
    (sent,) = transport.requests
    assert sent.method == "POST"
    assert sent.url.host == item.request.url.host
    assert sent.url.raw_path == item.request.url.raw_path  # same model id, same encoding
    assert sent.headers["authorization"] == "Bearer bedrock-key"
    assert isinstance(json.loads(sent.content)["messages"], list)


def _check_result(exp: Expected, result: ai.Generation) -> None:
    assert result.text == exp.text
    assert result.reasoning == exp.reasoning
    assert list(result.tool_calls) == exp.calls
    assert result.finish_reason == exp.finish_reason
    assert result.usage.input_tokens == exp.usage.input_tokens
    assert result.usage.output_tokens == exp.usage.output_tokens
    assert result.usage.total_tokens == exp.usage.total_tokens
    assert result.usage.cache_read_tokens == exp.usage.cache_read_tokens
    assert result.usage.cache_write_tokens == exp.usage.cache_write_tokens
    assert result.timing.phases.get("provider_latency_ms") == exp.latency_ms
    assert result.warnings == ()
    assert result.raw == exp.raw
    # The turn rebuilt for sending back (`content_blocks`, the adapter's public helper
    # under test): every text, reasoning (signed or redacted) and client tool-call block.
    blocks = content_blocks(result.raw)
    assert "".join(b.get("text", "") for b in blocks) == exp.text
    reasoning = [b["reasoningContent"] for b in blocks if "reasoningContent" in b]
    texts = [r["reasoningText"] for r in reasoning if "reasoningText" in r]
    assert "".join(t["text"] for t in texts) == exp.reasoning
    assert [t["signature"] for t in texts if "signature" in t] == exp.signatures
    assert sum("redactedContent" in r for r in reasoning) == exp.redacted
    uses = [b["toolUse"] for b in blocks if "toolUse" in b]
    assert [ai.ToolCall(u["toolUseId"], u["name"], u["input"]) for u in uses] == exp.calls


# --- the tests --------------------------------------------------------------------------


def test_the_recordings_cover_streams_tools_reasoning_and_errors() -> None:
    if not BEDROCK:
        pytest.skip(_WIRE_WHY or "no Bedrock recordings")
    streamed = [expected_stream(i) for i in SUCCEEDED_STREAMS]
    whole = [expected_whole(i) for i in OTHERS if i.response.status < 400]
    assert any(e.calls for e in streamed) and any(e.calls for e in whole)
    assert any(e.reasoning for e in streamed) and any(e.reasoning for e in whole)
    assert any(e.usage.cache_write_tokens for e in whole)
    assert any(e.signatures for e in streamed) and any(e.signatures for e in whole)
    assert any(e.redacted for e in streamed)
    assert {e.stop for e in streamed + whole} >= {"end_turn", "tool_use", "max_tokens"}
    assert any(i.response.status >= 400 for i in STREAMED)
    assert any(i.response.status >= 400 for i in OTHERS)


@pytest.mark.parametrize(
    ("item", "split"), split_params(SUCCEEDED_STREAMS, (None, 1, 13), what="Bedrock")
)
def test_streamed_recordings(item: Interaction, split: int | None) -> None:
    exp = expected_stream(item)
    transport = replay_transport([item], chunk_size=split)
    events: list[ai.StreamEvent] = []

    async def go() -> ai.Generation:
        async with ai.AsyncClient([_settings(item, transport)], retain_raw=True) as client:
            async with client.stream("replayed", route=_route(item)) as st:
                async for ev in st:
                    events.append(ev)
            return st.result

    result = asyncio.run(go())
    transport.assert_all_used()
    _check_request(item, transport)
    _check_result(exp, result)
    # The grammar: attempt_start, one first_token right before the first content delta,
    # StreamEnded last; content and usage in wire order (usage after everything).
    assert isinstance(events[0], ai.TimingMark) and events[0].name == "attempt_start"
    assert isinstance(events[-1], ai.StreamEnded)
    content = (ai.TextDelta, ai.ReasoningDelta, ai.ToolCallDelta)
    first = next(i for i, ev in enumerate(events) if isinstance(ev, content))
    marks = [i for i, ev in enumerate(events) if isinstance(ev, ai.TimingMark)]
    assert marks == [0, first - 1]
    seen = [type(ev).__name__ for ev in events if isinstance(ev, (*content, ai.UsageUpdate))]
    assert seen == exp.order


@pytest.mark.parametrize(("item", "split"), split_params(OTHERS, what="Bedrock"))
def test_whole_and_failed_recordings(item: Interaction, split: int | None) -> None:
    transport = replay_transport([item])
    streamed = item.request.path.endswith("/converse-stream")

    async def go() -> ai.Generation:
        async with ai.AsyncClient([_settings(item, transport)], retain_raw=True) as client:
            if streamed:
                async with client.stream("replayed", route=_route(item)) as st:
                    async for _ in st:
                        pass
                return st.result
            return await client.generate("replayed", route=_route(item))

    if item.response.status >= 400:
        # `{"message": ...}`; these recordings kept no x-amzn-errortype header, so the
        # status alone classifies: a 400 is a rejected request, not retryable.
        message = json.loads(item.response.body)["message"]
        with pytest.raises(ai.AllTargetsFailedError) as info:
            asyncio.run(go())
        last = info.value.attempts[-1].error
        assert last is not None
        assert (last.type_name, last.http_status, last.retryable) == (
            "ProviderError",
            item.response.status,
            False,
        )
        assert message in last.detail
        transport.assert_all_used()
        return
    result = asyncio.run(go())
    transport.assert_all_used()
    _check_request(item, transport)
    _check_result(expected_whole(item), result)


# --- the dialect says only what Bedrock says ---------------------------------------------


def _recorded_shapes() -> tuple[dict[str, dict[str, str]], dict[str, str]]:
    """Field paths (and JSON types) per event type in the recorded streams, and in the
    recorded whole bodies; the `usage` objects of both count for both (stream usage
    has the same `TokenUsage` type, cache fields only appear in the whole recordings)."""
    from wire import typed_key_paths

    events: dict[str, dict[str, str]] = {}
    whole: dict[str, str] = {}
    usage: dict[str, str] = {}
    for item in SUCCEEDED_STREAMS:
        for headers, payload in _frames(item.response.body):
            paths = typed_key_paths(payload, opaque=("input",))
            events.setdefault(headers[":event-type"], {}).update(paths)
            usage.update(typed_key_paths(payload.get("usage", {})))
    for item in OTHERS:
        if item.response.status < 400:
            body = json.loads(item.response.body)
            whole.update(typed_key_paths(body, opaque=("input", "trace")))
            usage.update(typed_key_paths(body["usage"]))
    events["metadata"].update({f"usage.{k}": v for k, v in usage.items()})
    whole.update({f"usage.{k}": v for k, v in usage.items()})
    return events, whole


def test_the_dialect_renders_only_recorded_shapes() -> None:
    if not SUCCEEDED_STREAMS:
        pytest.skip(_WIRE_WHY or "no Bedrock recordings")
    from wire import typed_key_paths

    from anyinfer.fakeservers import Reasoning, Script, ScriptUsage, Text, ToolFragment
    from anyinfer.fakeservers.dialects.bedrock_converse import BedrockConverseDialect

    dialect = BedrockConverseDialect()
    recorded, recorded_whole = _recorded_shapes()
    scripts = [
        Script(pieces=(Text("a"), Text("b")), usage=ScriptUsage(input_tokens=1, output_tokens=2)),
        Script(
            pieces=(
                Reasoning("r"),
                Text("t"),
                ToolFragment(0, '{"a":', id="tooluse_1", name="f"),
                ToolFragment(0, " 1}"),
                ToolFragment(1, "{}", id="tooluse_2", name="g"),
            ),
            finish_reason="tool_calls",
            usage=ScriptUsage(
                input_tokens=1, output_tokens=2, cache_read_tokens=3, cache_write_tokens=4
            ),
        ),
        Script(pieces=(Text("x"),), finish_reason="length", usage=ScriptUsage(5, 6)),
    ]
    for script in scripts:
        for headers, payload in _frames(dialect.render(script, stream=True).body):
            kind = headers[":event-type"]
            assert kind in recorded, kind
            assert headers[":content-type"] == "application/json"
            rendered = typed_key_paths(payload, opaque=("input",))
            extra = {p: t for p, t in rendered.items() if recorded[kind].get(p) != t}
            assert not extra, (kind, extra)
        body = json.loads(dialect.render(script, stream=False).body)
        rendered = typed_key_paths(body, opaque=("input",))
        extra = {p: t for p, t in rendered.items() if recorded_whole.get(p) != t}
        assert not extra, extra
