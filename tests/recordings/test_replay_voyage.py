"""Replay real Voyage AI recordings through the `voyage` adapter.

pydantic-ai's `TestVoyageAI` recordings (`tests/cassettes/test_embeddings/`, bundled under
`tests/data/wire/pydantic__pydantic-ai/`, see the README there) were made with the
`voyageai` SDK's body: every field present, unset ones as `null`. For each one the call is
rebuilt from the recorded body (texts, model, input type, `truncation` as a provider
option), served back through the `transport` seam, and checked against the recording
without the adapter's code: the body AnyInfer sends is the recorded one without its
nulls, the vectors are the recorded base64 read as little-endian float32, the usage is
`usage.total_tokens`, and a recorded 400 is a typed `ProviderError` carrying its detail.
The `voyage` fake dialect is held to the same recordings: its answer to each recorded
body has the recorded answer's fields, nested the same way.
"""

from __future__ import annotations

import base64
import json
import struct
from array import array
from typing import Any

import pytest
from wire import Interaction, find_wire_dir, interactions, replay_transport

import anyinfer as ai
from anyinfer.fakeservers import Fault, get_dialect

_WIRE_DIR, _WIRE_WHY = find_wire_dir()

VOYAGE = (
    interactions(_WIRE_DIR, lambda i: i.request.url.host == "api.voyageai.com") if _WIRE_DIR else []
)

NO_RETRY = ai.RetryPolicy(max_retries=0)


def _float32(encoded: str) -> array[float]:
    raw = base64.b64decode(encoded)
    return array("f", struct.unpack(f"<{len(raw) // 4}f", raw))


def test_the_voyage_recordings_are_bundled() -> None:
    if _WIRE_DIR is None:
        pytest.skip(_WIRE_WHY)
    assert len(VOYAGE) == 6
    assert {i.request.path for i in VOYAGE} == {"/v1/embeddings"}


@pytest.mark.skipif(not VOYAGE, reason=_WIRE_WHY or "no Voyage AI recordings")
@pytest.mark.parametrize("item", VOYAGE, ids=lambda i: i.id)
def test_voyage_recordings(item: Interaction) -> None:
    sent = item.request.json
    kwargs: dict[str, Any] = {
        "inputs": sent["input"],
        "input_type": sent["input_type"],
        "dimensions": sent["output_dimension"],
        "provider_options": {"voyage": {"truncation": sent["truncation"]}},
    }
    assert sent["encoding_format"] == "base64" and sent["output_dtype"] is None
    transport = replay_transport([item])
    settings = ai.ProviderSettings("voyage", api_key="pa-test", transport=transport)
    route = ai.Route(f"voyage:{sent['model']}", retry=NO_RETRY)
    answer = item.response.json
    with ai.Client([settings]) as client:
        if item.response.status >= 400:
            with pytest.raises(ai.AllTargetsFailedError) as info:
                client.embed(route=route, **kwargs)
            error = info.value.attempts[-1].error
            assert error is not None and error.type_name == "ProviderError"
            assert error.http_status == item.response.status and not error.retryable
            assert answer["detail"][:60] in error.detail
        else:
            result = client.embed(route=route, **kwargs)
            expected = tuple(
                _float32(entry["embedding"])
                for entry in sorted(answer["data"], key=lambda e: e["index"])
            )
            assert result.vectors == expected
            assert result.dimensions == len(expected[0])
            tokens = answer["usage"]["total_tokens"]
            assert result.usage.input_tokens == tokens == result.usage.total_tokens
            assert result.warnings == ()
    transport.assert_all_used()
    assert str(transport.requests[0].url) == item.request.url
    assert transport.sent_json(0) == {k: v for k, v in sent.items() if v is not None}


def _shape(value: Any) -> Any:
    """The keys of a JSON value, nested (lists by their first element), values dropped."""
    if isinstance(value, dict):
        return {k: _shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_shape(value[0])] if value else []
    return type(value).__name__ if isinstance(value, str | bool) else "number"


@pytest.mark.skipif(not VOYAGE, reason=_WIRE_WHY or "no Voyage AI recordings")
@pytest.mark.parametrize("item", VOYAGE, ids=lambda i: i.id)
def test_the_voyage_fake_answers_in_the_recorded_shape(item: Interaction) -> None:
    # The fake dialect says only what Voyage says: its answer to the recorded body has the
    # recorded answer's fields, nested the same way (values are the fake's own).
    dialect = get_dialect("voyage")
    if item.response.status >= 400:
        fault = Fault("status", status=item.response.status, message="fake")
        rendered = dialect.render_error(fault)
    else:
        assert dialect.embedding_fault(item.request.json) is None
        rendered = dialect.render_embeddings(item.request.json)
    assert rendered.status == item.response.status
    assert _shape(json.loads(rendered.body)) == _shape(item.response.json)
