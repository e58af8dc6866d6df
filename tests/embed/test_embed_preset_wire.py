"""What an OpenAI-compatible preset sends to `/embeddings` where its server differs.

The `Quirks` fields `embed_encodings` and `embed_dimensions_field` hold the documented
differences: DashScope takes only float vectors, Heroku only base64, Scaleway neither
`encoding_format` nor `dimensions`, and Mistral names the dimensions `output_dimension`.
The caller's `encoding` is a wire detail (the vectors are the same), so it is changed to
one the server takes; `dimensions` the server cannot take is refused before sending.
"""

from __future__ import annotations

import base64
import json
import struct
from typing import Any

import httpx
import pytest

import anyinfer as ai


def _server(seen: list[dict[str, Any]]) -> httpx.MockTransport:
    def answer(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        seen.append(body)
        size = body.get("dimensions") or body.get("output_dimension") or 3
        vec = [0.5] * size
        fmt = body.get("encoding_format", "float")
        item: Any = (
            base64.b64encode(struct.pack(f"<{size}f", *vec)).decode() if fmt == "base64" else vec
        )
        return httpx.Response(
            200,
            json={
                "object": "list",
                "data": [
                    {"object": "embedding", "index": i, "embedding": item}
                    for i in range(len(body["input"]))
                ],
                "model": body["model"],
                "usage": {"prompt_tokens": 2, "total_tokens": 2},
            },
        )

    return httpx.MockTransport(answer)


def _embed(provider: str, **kwargs: Any) -> tuple[ai.Embeddings, list[dict[str, Any]]]:
    seen: list[dict[str, Any]] = []
    options = kwargs.pop("options", {})
    settings = ai.ProviderSettings(
        provider,
        api_key="k",
        base_url="http://embed.test/v1",
        transport=_server(seen),
        options=options,
    )
    with ai.Client([settings], use_default_catalog=False) as client:
        result = client.embed(["a", "b"], target=f"{provider}:m", **kwargs)
    return result, seen


def test_dashscope_is_sent_floats_whatever_the_call_asked() -> None:
    result, seen = _embed("dashscope")  # the call's default is base64
    assert seen[0]["encoding_format"] == "float"
    assert [list(v) for v in result] == [[0.5] * 3] * 2


def test_heroku_is_sent_base64_when_the_call_asks_for_floats() -> None:
    result, seen = _embed("heroku", encoding="float")
    assert seen[0]["encoding_format"] == "base64"
    assert [list(v) for v in result] == [[0.5] * 3] * 2


def test_scaleway_gets_no_encoding_format_and_refuses_dimensions_before_sending() -> None:
    result, seen = _embed("scaleway")
    assert "encoding_format" not in seen[0] and len(result) == 2
    # Refused at the target before its request is built (a fallback target that takes
    # dimensions would still be tried, as for any attempt refused before dispatch).
    with pytest.raises(ai.AllTargetsFailedError, match="takes no dimensions") as caught:
        _embed("scaleway", dimensions=8)
    last = caught.value.attempts[-1].error
    assert last is not None and last.type_name == "ConfigError"


def test_mistral_gets_output_dimension() -> None:
    result, seen = _embed("mistral", dimensions=4)
    assert seen[0]["output_dimension"] == 4 and "dimensions" not in seen[0]
    assert result.dimensions == 4


def test_openai_compat_keeps_the_call_s_encoding_and_dimensions() -> None:
    result, seen = _embed("openai-compat", dimensions=4, encoding="float")
    assert seen[0]["encoding_format"] == "float" and seen[0]["dimensions"] == 4
    assert result.dimensions == 4


def test_the_quirks_can_be_set_per_instance_and_bad_values_are_refused() -> None:
    _result, seen = _embed("openai-compat", options={"quirks": {"embed_encodings": ["float"]}})
    assert seen[0]["encoding_format"] == "float"
    with pytest.raises(ai.AnyInferError, match=r"quirk 'embed_encodings' must be"):
        _embed("openai-compat", options={"quirks": {"embed_encodings": ["int8"]}})
