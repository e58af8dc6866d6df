"""Replay real embedding recordings through the embedding adapters.

pydantic-ai's `tests/cassettes/test_embeddings/` recordings (bundled under
`tests/data/wire/pydantic__pydantic-ai/`, see the README there) are served back through
the `transport` seam: Gemini API `:batchEmbedContents`, Vertex AI `:predict` and
`:embedContent`, and Bedrock InvokeModel (Titan Text Embeddings, one text a request, so a
call fans out; Cohere Embed). For each one the call
is rebuilt from the recorded request (its texts, task or input type, dimensions, model,
other body fields as provider options), and two things are checked against the recording,
without the adapter's code: the body AnyInfer sends is the recorded one, and what
`embed()` returns is what the recorded answer says (every vector value as float32,
usage where the answer reports it and unknown where it does not, the typed error of an
error status).
"""

from __future__ import annotations

import json
from array import array
from typing import Any
from urllib.parse import unquote

import httpx
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


# --- Bedrock InvokeModel (Titan Text Embeddings, Cohere Embed) ---------------------------

# Fields of the recorded bodies that are the call's inputs, options or input type; any
# other field (`normalize`, `truncate`) is passed through as a provider option.
_TITAN_CALL = {"inputText", "dimensions"}
_COHERE_CALL = {"texts", "input_type", "output_dimension"}


BEDROCK: dict[str, list[Interaction]] = {}
for _item in (
    interactions(_WIRE_DIR, lambda i: i.request.path.endswith("/invoke")) if _WIRE_DIR else []
):
    if "bedrock-runtime" in (_item.request.url.host or ""):
        BEDROCK.setdefault(_item.cassette.name, []).append(_item)


def _canonical(body: Any) -> str:
    return json.dumps(body, sort_keys=True)


@pytest.mark.skipif(not BEDROCK, reason=_WIRE_WHY or "no Bedrock embedding recordings")
@pytest.mark.parametrize("name", sorted(BEDROCK))
def test_bedrock_recordings(name: str) -> None:
    recorded = BEDROCK[name]
    model = unquote(recorded[0].request.url.raw_path.decode()).split("/model/", 1)[1]
    model = model.removesuffix("/invoke")
    bodies = [i.request.json for i in recorded]
    answers = {_canonical(i.request.json): i.response for i in recorded}
    titan = "inputText" in bodies[0]
    call = _TITAN_CALL if titan else _COHERE_CALL
    extra = {k: v for k, v in bodies[0].items() if k not in call}
    assert all({k: v for k, v in b.items() if k not in call} == extra for b in bodies)
    if titan:
        inputs = [b["inputText"] for b in bodies]
        dimensions = bodies[0].get("dimensions")
        input_type = None
    else:
        (only,) = bodies  # one Cohere request carries every text
        inputs, dimensions = only["texts"], only.get("output_dimension")
        input_type = only["input_type"]  # Cohere's own name, passed through as it is
    seen: list[httpx.Request] = []

    def serve(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        answer = answers[_canonical(json.loads(request.content))]
        return httpx.Response(answer.status, headers=answer.served_headers(), content=answer.body)

    options = {"region": "us-east-1"}
    if model.startswith("arn:"):
        options["embedding_family"] = "titan" if titan else "cohere"  # the id names no model
    settings = ai.ProviderSettings(
        "bedrock", api_key="br-test", options=options, transport=httpx.MockTransport(serve)
    )
    result = _embed(
        settings,
        f"bedrock:{model}",
        inputs=inputs,
        dimensions=dimensions,
        input_type=input_type,
        provider_options={"bedrock": extra},
    )
    # The bodies sent are the recorded ones, at the recorded (percent-encoded) path.
    assert sorted(_canonical(json.loads(r.content)) for r in seen) == sorted(answers)
    assert {r.url.raw_path for r in seen} == {i.request.url.raw_path for i in recorded}
    # The vectors are the recorded ones, in input order; usage is what Bedrock counted.
    if titan:
        answer_for = {i.request.json["inputText"]: i.response.json for i in recorded}
        vectors = [array("f", answer_for[t]["embedding"]) for t in inputs]
        tokens = sum(a["inputTextTokenCount"] for a in answer_for.values())
    else:
        embeddings = recorded[0].response.json["embeddings"]
        rows = embeddings["float"] if isinstance(embeddings, dict) else embeddings
        vectors = [array("f", row) for row in rows]
        tokens = int(recorded[0].response.headers["x-amzn-bedrock-input-token-count"][0])
    assert list(result.vectors) == vectors
    assert result.usage.input_tokens == tokens
    assert not result.warnings


# --- Vertex AI (`:predict`, `:embedContent`) ----------------------------------------------


def _vertex(item: Interaction) -> bool:
    return item.request.url.host == "aiplatform.googleapis.com" and item.request.path.endswith(
        (":predict", ":embedContent")
    )


VERTEX = interactions(_WIRE_DIR, _vertex) if _WIRE_DIR else []


@pytest.mark.skipif(not VERTEX, reason=_WIRE_WHY or "no Vertex AI embedding recordings")
@pytest.mark.parametrize("item", VERTEX, ids=lambda i: i.id)
def test_vertex_recordings(item: Interaction) -> None:
    sent = item.request.json
    root, _, resource = item.request.path.partition("/publishers/google/models/")
    model, _, method = resource.partition(":")
    if method == "predict":
        inputs = [i["content"] for i in sent["instances"]]
        tasks = {i.get("task_type") for i in sent["instances"]}
        dimensions = (sent.get("parameters") or {}).get("outputDimensionality")
    else:
        inputs = ["".join(p["text"] for p in sent["content"]["parts"])]
        config = sent.get("embedContentConfig") or {}
        tasks, dimensions = {config.get("taskType")}, config.get("outputDimensionality")
    (task,) = tasks
    transport = replay_transport([item])
    settings = ai.ProviderSettings(
        "vertex-gemini",
        base_url=f"https://{item.request.url.host}{root}",  # names the project and location
        options={"access_token": "ya29.test"},
        transport=transport,
    )
    result = _embed(
        settings,
        f"vertex-gemini:{model}",
        inputs=inputs,
        input_type=None if task is None else _INPUT_TYPES[task],
        dimensions=dimensions,
    )
    answer = item.response.json
    if method == "predict":
        embeddings = [p["embeddings"] for p in answer["predictions"]]
        vectors = tuple(array("f", e["values"]) for e in embeddings)
        tokens = sum(int(e["statistics"]["token_count"]) for e in embeddings)
    else:
        vectors = (array("f", answer["embedding"]["values"]),)
        tokens = answer["usageMetadata"]["promptTokenCount"]
    assert result.vectors == vectors
    assert result.usage.input_tokens == tokens
    transport.assert_all_used()
    assert transport.requests[0].url.path == item.request.path
    assert transport.sent_json(0) == sent
