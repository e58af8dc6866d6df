"""Replay real embedding recordings through the embedding adapters.

pydantic-ai's `tests/cassettes/test_embeddings/` recordings (bundled under
`tests/data/wire/pydantic__pydantic-ai/`, see the README there) are served back through
the `transport` seam. For each one the call is rebuilt from the recorded request (its
texts, task type, dimensions, model), and two things are checked against the recording,
without the adapter's code: the body AnyInfer sends is the recorded one, and what
`embed()` returns is what the recorded answer says (every vector value as float32,
usage where the answer reports it and unknown where it does not, the typed error of an
error status).
"""

from __future__ import annotations

from array import array
from typing import Any

import pytest
from wire import Interaction, find_wire_dir, interactions, replay_transport

import anyinfer as ai

_WIRE_DIR, _WIRE_WHY = find_wire_dir()

# Gemini API task types read as AnyInfer's input_type (the API reference's TaskType:
# RETRIEVAL_QUERY is a search query, RETRIEVAL_DOCUMENT a document of the corpus).
_INPUT_TYPES = {"RETRIEVAL_QUERY": "query", "RETRIEVAL_DOCUMENT": "document"}


def _gemini(item: Interaction) -> bool:
    return item.request.url.host == "generativelanguage.googleapis.com" and (
        item.request.path.endswith(":batchEmbedContents")
    )


GEMINI = interactions(_WIRE_DIR, _gemini) if _WIRE_DIR else []

NO_RETRY = ai.RetryPolicy(max_retries=0)


def _embed(settings: ai.ProviderSettings, target: str, **kwargs: Any) -> ai.Embeddings:
    with ai.Client([settings]) as client:
        return client.embed(route=ai.Route(target, retry=NO_RETRY), **kwargs)


@pytest.mark.skipif(not GEMINI, reason=_WIRE_WHY or "no Gemini embedding recordings")
@pytest.mark.parametrize("item", GEMINI, ids=lambda i: i.id)
def test_gemini_recordings(item: Interaction) -> None:
    sent = item.request.json
    entries = sent["requests"]
    model = item.request.path.rsplit("/", 1)[-1].removesuffix(":batchEmbedContents")
    tasks = {e.get("taskType") for e in entries}
    dims = {e.get("outputDimensionality") for e in entries}
    assert len(tasks) == len(dims) == 1  # one call's options, the same for every input
    task, dimensions = tasks.pop(), dims.pop()
    transport = replay_transport([item])
    settings = ai.ProviderSettings("gemini", api_key="AIza-test", transport=transport)
    kwargs: dict[str, Any] = {
        "inputs": [e["content"]["parts"][0]["text"] for e in entries],
        "input_type": None if task is None else _INPUT_TYPES[task],
        "dimensions": dimensions,
    }
    answer = item.response.json
    if item.response.status >= 400:
        with pytest.raises(ai.AllTargetsFailedError) as info:
            _embed(settings, f"gemini:{model}", **kwargs)
        error = info.value.attempts[-1].error
        assert error is not None and error.http_status == item.response.status
        expected = {"NOT_FOUND": "ModelNotFoundError"}[answer["error"]["status"]]
        assert error.type_name == expected
        assert answer["error"]["message"][:40] in error.detail
    else:
        result = _embed(settings, f"gemini:{model}", **kwargs)
        assert result.vectors == tuple(array("f", e["values"]) for e in answer["embeddings"])
        assert result.dimensions == len(answer["embeddings"][0]["values"])
        meta = answer.get("usageMetadata")
        tokens = None if meta is None else meta["promptTokenCount"]
        assert result.usage.input_tokens == tokens
        # Only the documented caveat of gemini-embedding-2* models' task types.
        assert all("prefix of the text" in w for w in result.warnings)
        assert bool(result.warnings) == (task is not None and "embedding-2" in model)
    transport.assert_all_used()
    assert transport.requests[0].url.path == item.request.path
    assert transport.sent_json(0) == sent
