"""`HTTPAdapter.finish_parts`: one rule for a payload's finish reason.

The reason is read as an optional string (a wrong type is a `ProtocolError` naming where
it stood), mapped through the class's `finish_reasons`, passed through verbatim when the
table does not know it, and gives no part when the payload carries none.
"""

from __future__ import annotations

from typing import Any, ClassVar

import httpx
import pytest

import anyinfer as ai
from anyinfer._providers import anthropic, bedrock
from anyinfer.adapters import FinishPart, HTTPAdapter


class TableAdapter(HTTPAdapter):
    provider_id: ClassVar[str] = "finish-table"
    finish_reasons: ClassVar[dict[str, str]] = {"done": "stop", "cut": "length"}


def adapter(cls: type[HTTPAdapter] = TableAdapter) -> HTTPAdapter:
    transport = httpx.MockTransport(lambda request: httpx.Response(500))
    return cls(ai.ProviderSettings("finish-table", base_url="http://x", transport=transport))


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("done", (FinishPart("stop"),)),
        ("cut", (FinishPart("length"),)),
        ("brand_new", (FinishPart("brand_new"),)),
        (None, ()),
        ("", ()),
    ],
)
def test_a_reason_is_mapped_passed_through_or_absent(value: Any, expected: tuple[Any]) -> None:
    assert adapter().finish_parts(value, "choices[0].finish_reason") == expected


@pytest.mark.parametrize("value", [7, ["stop"], {"reason": "stop"}, True])
def test_a_reason_that_is_not_a_string_is_a_protocol_error_naming_its_place(value: Any) -> None:
    with pytest.raises(ai.ProtocolError, match=r"expected a string at body\.stop_reason"):
        adapter().finish_parts(value, "body.stop_reason")


def test_an_adapter_without_a_table_passes_every_reason_through() -> None:
    class Plain(HTTPAdapter):
        provider_id: ClassVar[str] = "finish-plain"

    assert adapter(Plain).finish_parts("end_turn", "x") == (FinishPart("end_turn"),)


@pytest.mark.parametrize(
    ("cls", "table"),
    [
        (anthropic.AnthropicAdapter, anthropic.FINISH_MAP),
        (bedrock.BedrockAdapter, bedrock.FINISH_MAP),
    ],
)
def test_the_protocol_adapters_map_through_their_published_table(
    cls: type[HTTPAdapter], table: Any
) -> None:
    assert cls.finish_reasons is table
