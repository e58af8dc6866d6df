"""`HTTPAdapter.tool_call_part`: one rule for a tool-use block whose arguments come as a
JSON value (Anthropic's `tool_use`, Bedrock's `toolUse`).

The id and name are read as optional strings (empty reads as none; a wrong type is a
`ProtocolError` naming the field's place), and the arguments become their JSON text, or
`""` when the block carries none.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

import httpx
import pytest

import anyinfer as ai
from anyinfer._providers.anthropic import AnthropicAdapter, _StreamState
from anyinfer._providers.bedrock import BedrockAdapter, StreamState
from anyinfer.adapters import HTTPAdapter, ToolCallPart


class _Adapter(HTTPAdapter):
    provider_id: ClassVar[str] = "tool-call-part"


def adapter() -> HTTPAdapter:
    transport = httpx.MockTransport(lambda request: httpx.Response(500))
    return _Adapter(ai.ProviderSettings("tool-call-part", base_url="http://x", transport=transport))


@pytest.mark.parametrize(
    ("block", "arguments", "expected"),
    [
        ({"id": "t1", "name": "f"}, {"a": 1}, ToolCallPart(3, "t1", "f", '{"a": 1}')),
        ({"id": "t1", "name": "f"}, {"q": "é"}, ToolCallPart(3, "t1", "f", '{"q": "\\u00e9"}')),
        ({"id": "t1", "name": "f"}, {}, ToolCallPart(3, "t1", "f", "{}")),
        ({"id": "t1", "name": "f"}, None, ToolCallPart(3, "t1", "f", "")),
        ({"id": "", "name": ""}, [1, 2], ToolCallPart(3, None, None, "[1, 2]")),
        ({}, "x", ToolCallPart(3, None, None, '"x"')),
    ],
)
def test_a_block_becomes_one_part(
    block: dict[str, Any], arguments: Any, expected: ToolCallPart
) -> None:
    assert adapter().tool_call_part(3, block, "content[]", arguments) == expected


def test_the_id_may_have_another_name() -> None:
    part = adapter().tool_call_part(
        0, {"toolUseId": "u", "id": "no"}, "toolUse", id_key="toolUseId"
    )
    assert part == ToolCallPart(0, "u", None, "")


@pytest.mark.parametrize(
    ("block", "where"),
    [({"id": 7}, r"content\[\]\.id"), ({"name": ["f"]}, r"content\[\]\.name")],
)
def test_an_id_or_name_that_is_not_a_string_is_a_protocol_error_naming_it(
    block: dict[str, Any], where: str
) -> None:
    with pytest.raises(ai.ProtocolError, match=rf"expected a string at {where}"):
        adapter().tool_call_part(0, block, "content[]", {})


def _anthropic() -> AnthropicAdapter:
    transport = httpx.MockTransport(lambda request: httpx.Response(500))
    return AnthropicAdapter(ai.ProviderSettings("anthropic", api_key="k", transport=transport))


def _bedrock() -> BedrockAdapter:
    transport = httpx.MockTransport(lambda request: httpx.Response(500))
    settings = ai.ProviderSettings(
        "bedrock", api_key="k", transport=transport, options={"region": "us-east-1"}
    )
    return BedrockAdapter(settings)


def test_anthropic_whole_messages_and_block_starts_use_it() -> None:
    message = {
        "content": [
            {"type": "tool_use", "id": "a", "name": "f", "input": {"x": 1}},
            {"type": "text", "text": "t"},
            {"type": "tool_use", "id": "b", "name": "g", "input": {}},
        ],
        "stop_reason": "tool_use",
    }
    calls = [p for p in _anthropic().parts_from_message(message) if isinstance(p, ToolCallPart)]
    assert calls == [ToolCallPart(0, "a", "f", '{"x": 1}'), ToolCallPart(1, "b", "g", "{}")]
    with pytest.raises(ai.ProtocolError, match=r"content\[\]\.id"):
        list(_anthropic().parts_from_message({"content": [{"type": "tool_use", "id": 1}]}))
    start = {
        "type": "content_block_start",
        "index": 4,
        "content_block": {"type": "tool_use", "id": "c", "name": "h", "input": {}},
    }
    parts = list(_anthropic().parts_from_event("content_block_start", start, _StreamState()))
    assert parts == [ToolCallPart(0, "c", "h", "")]
    start["content_block"] = {"type": "tool_use", "name": 3}
    with pytest.raises(ai.ProtocolError, match=r"content_block\.name"):
        list(_anthropic().parts_from_event("content_block_start", start, _StreamState()))


def test_bedrock_whole_responses_and_block_starts_use_it() -> None:
    use = {"toolUseId": "u1", "name": "f", "input": {"city": "Oslo"}}
    body = {
        "output": {"message": {"content": [{"toolUse": use}]}},
        "stopReason": "tool_use",
    }
    calls = [p for p in _bedrock().parts_from_response(body) if isinstance(p, ToolCallPart)]
    assert calls == [ToolCallPart(0, "u1", "f", json.dumps({"city": "Oslo"}))]
    start = {"contentBlockIndex": 2, "start": {"toolUse": {"toolUseId": "u2", "name": "g"}}}
    parts = list(_bedrock().parts_from_event("contentBlockStart", start, StreamState()))
    assert parts == [ToolCallPart(0, "u2", "g", "")]
    bad = {"output": {"message": {"content": [{"toolUse": {"toolUseId": 5}}]}}}
    with pytest.raises(ai.ProtocolError, match=r"toolUse\.toolUseId"):
        list(_bedrock().parts_from_response(bad))
