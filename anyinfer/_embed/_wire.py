"""Embedding wire formats of the built-in adapters.

- OpenAI (`POST /embeddings`, which every OpenAI-compatible preset that embeds serves):
  `{"model", "input": [...], "encoding_format", "dimensions"?}` answered by
  `{"data": [{"index", "embedding"}], "model", "usage": {"prompt_tokens",
  "total_tokens"}}`. With `encoding_format: "base64"` (what the official `openai` SDK
  asks for by default) each `embedding` is the base64 of little-endian float32 values;
  with `"float"` it is a JSON array of numbers. Both are decoded; entries are put back
  in order by `index`.
- Ollama (`POST /api/embed`): `{"model", "input": [...], "dimensions"?}` answered by
  `{"model", "embeddings": [[...]], "total_duration", "load_duration",
  "prompt_eval_count"}` (durations in nanoseconds).

- Gemini (`POST models/{model}:batchEmbedContents`, at most 100 requests, for one input
  too, as the `google-genai` SDK sends it): `{"requests": [{"model", "content":
  {"parts": [{"text"}]}, "taskType"?, "outputDimensionality"?}]}` (each `model` must be
  the URL's) answered by `{"embeddings": [{"values"}]}` in input order, with
  `usageMetadata.promptTokenCount` when the model reports it (the 2026 recordings have
  it; earlier ones have none, and then usage is unknown).

A reply that breaks these shapes is a `ProtocolError`; an error body goes through the
adapter's one classifier (`HTTPAdapter.error_from_parts`), so every failure is typed.
"""

from __future__ import annotations

import base64
import binascii
import sys
from array import array
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from .._adapters.errormap import message_and_code
from .._errors import ProtocolError
from .._providers._wire import as_dict, as_list, opt_int, opt_str
from .._types import Usage
from ._types import EmbedReply, EmbedRequest

if TYPE_CHECKING:
    import httpx

    from .._adapters.base import Bounded, HTTPAdapter
    from .._providers.gemini import GeminiAdapter

__all__ = [
    "GEMINI_TASK_TYPES",
    "decode_vector",
    "gemini_embed",
    "gemini_task_type",
    "gemini_task_warnings",
    "ollama_embed",
    "openai_embed",
    "openai_shaped_reply",
]

_NS_PER_MS = 1_000_000


def decode_vector(value: Any, provider: str, where: str) -> array[float]:
    """One vector from its wire form: base64 of little-endian float32, or numbers.

    Raises:
        ProtocolError: For anything else (bad base64, a length not a multiple of 4, a
            non-numeric element, an empty vector).
    """
    vec: array[float] = array("f")
    if isinstance(value, str):
        try:
            raw = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raise _bad(provider, where, "base64 float32 data", "malformed base64") from None
        if len(raw) % 4:
            raise _bad(provider, where, "base64 float32 data", f"{len(raw)} bytes")
        vec.frombytes(raw)
        if sys.byteorder == "big":
            vec.byteswap()  # the wire is little-endian
    elif isinstance(value, list):
        if any(isinstance(v, bool) or not isinstance(v, int | float) for v in value):
            raise _bad(provider, where, "an array of numbers", "a non-numeric element")
        vec.extend(value)
    else:
        raise _bad(provider, where, "a vector", type(value).__name__)
    if not vec:
        raise _bad(provider, where, "a vector", "an empty one")
    return vec


def _bad(provider: str, where: str, expected: str, got: str) -> ProtocolError:
    return ProtocolError(
        f"{provider}: expected {expected} at {where}, got {got}", provider=provider
    )


def _count(provider: str, got: int, sent: int) -> ProtocolError:
    return ProtocolError(
        f"{provider}: the provider returned {got} embedding(s) for {sent} input(s)",
        provider=provider,
    )


def known_sum(counts: Iterable[int | None]) -> int | None:
    """The sum of the token counts of several requests (one batch fanned out), or
    `None` when any of them is unknown."""
    total = 0
    for count in counts:
        if count is None:
            return None
        total += count
    return total


def embed_body(
    request: EmbedRequest,
    inputs_key: str,
    encoding: bool,
    *,
    dimensions_key: str = "dimensions",
    input_type_key: str | None = None,
) -> dict[str, Any]:
    """An OpenAI-shaped embeddings body: model, inputs, `encoding_format` when
    `encoding`, dimensions under `dimensions_key`, the `input_type` as it is under
    `input_type_key` when given (Azure AI model inference's), then the provider
    options."""
    body: dict[str, Any] = {"model": request.model, inputs_key: list(request.inputs)}
    if encoding:
        body["encoding_format"] = request.encoding
    if request.dimensions is not None:
        body[dimensions_key] = request.dimensions
    if input_type_key is not None and request.input_type is not None:
        body[input_type_key] = request.input_type
    body.update(request.provider_options)
    return body


def _no_input_type(adapter: HTTPAdapter, request: EmbedRequest, api: str) -> tuple[str, ...]:
    if request.input_type is None:
        return ()
    return (
        f"{adapter.instance_id}: {api} has no input type; input_type="
        f"{request.input_type!r} was not sent",
    )


async def _post_json(
    adapter: HTTPAdapter,
    path: str,
    body: Mapping[str, Any],
    headers: Mapping[str, str] | None = None,
    *,
    request: Bounded,
) -> Any:
    """POST `body` as JSON and read the JSON answer (the response closed after), within
    `request.timeout_s` (`HTTPAdapter.send`)."""
    payload, _ = await _post_json_headers(adapter, path, body, headers, request=request)
    return payload


async def _post_json_headers(
    adapter: HTTPAdapter,
    path: str,
    body: Mapping[str, Any],
    headers: Mapping[str, str] | None = None,
    *,
    request: Bounded,
) -> tuple[Any, httpx.Headers]:
    """`_post_json`, with the response headers too (for counts a provider sends there)."""
    response = await adapter.send("POST", path, json_body=body, headers=headers, request=request)
    try:
        return await adapter.read_json(response), response.headers
    finally:
        await response.aclose()


def _error_in_body(adapter: HTTPAdapter, payload: Mapping[str, Any]) -> None:
    """Raise the typed error of a 200 body that carries only an error object."""
    if "error" in payload and payload.get("data") is None and payload.get("embeddings") is None:
        message, code = message_and_code(payload, adapter.error_code_keys)
        raise adapter.error_from_parts(None, message, code)


async def openai_embed(
    adapter: HTTPAdapter,
    request: EmbedRequest,
    path: str = "/embeddings",
    *,
    body: Mapping[str, Any] | None = None,
    api: str | None = "the OpenAI embeddings API",
) -> EmbedReply:
    """`POST /embeddings` (OpenAI and OpenAI-compatible servers), or any protocol that
    answers in OpenAI's shape with a body of its own (Voyage AI, Jina AI).

    Args:
        adapter: The adapter sending it.
        request: The batch.
        path: The endpoint.
        body: The request body, when the protocol's differs from OpenAI's (its own
            encoding and input-type fields); `provider_options` already merged in.
        api: The protocol's name for the warning that `input_type` was not sent, or
            `None` when `body` carries the input type.
    """
    body = embed_body(request, "input", True) if body is None else body
    payload = await _post_json(adapter, path, body, request=request)
    warnings = () if api is None else _no_input_type(adapter, request, api)
    return openai_shaped_reply(adapter, request, payload, warnings)


def openai_shaped_reply(
    adapter: HTTPAdapter,
    request: EmbedRequest,
    payload: Any,
    warnings: tuple[str, ...] = (),
) -> EmbedReply:
    """Read an answer in OpenAI's embeddings shape: `{"data": [{"index", "embedding"}],
    "model"?, "usage"?: {"prompt_tokens"?, "total_tokens"?}}`.

    Entries are put back in input order by `index` (position when it is missing); each
    embedding is base64 float32 or numbers (`decode_vector`). An embedding has input
    tokens only, so a `usage` with `total_tokens` and no `prompt_tokens` (Voyage AI's and
    Jina AI's) counts them as `input_tokens` too.

    Raises:
        ProtocolError: For a body that breaks the shape (a count that is not the input
            count, a missing, repeated or out-of-range index, a bad vector).
        ProviderError: The typed error of a 200 body that carries only an error.
    """
    pid = adapter.instance_id
    payload = as_dict(payload, pid, "body")
    _error_in_body(adapter, payload)
    data = as_list(payload.get("data"), pid, "data")
    sent = len(request.inputs)
    if len(data) != sent:
        raise _count(pid, len(data), sent)
    slots: list[array[float] | None] = [None] * sent
    for position, item in enumerate(data):
        entry = as_dict(item, pid, f"data[{position}]")
        index = opt_int(entry.get("index"), pid, f"data[{position}].index")
        at = position if index is None else index
        if not 0 <= at < sent or slots[at] is not None:
            raise _bad(
                pid, f"data[{position}].index", "a distinct index below the input count", str(at)
            )
        slots[at] = decode_vector(entry.get("embedding"), pid, f"data[{position}].embedding")
    usage_obj = payload.get("usage")
    usage = Usage()
    if usage_obj is not None:
        u = as_dict(usage_obj, pid, "usage")
        total = opt_int(u.get("total_tokens"), pid, "usage.total_tokens")
        prompt = opt_int(u.get("prompt_tokens"), pid, "usage.prompt_tokens")
        usage = Usage(input_tokens=total if prompt is None else prompt, total_tokens=total)
    vectors = tuple(v for v in slots if v is not None)
    return EmbedReply(
        vectors=vectors,
        usage=usage,
        model=opt_str(payload.get("model"), pid, "model"),
        warnings=warnings,
    )


async def ollama_embed(adapter: HTTPAdapter, request: EmbedRequest) -> EmbedReply:
    """`POST /api/embed` (Ollama)."""
    pid = adapter.instance_id
    body = embed_body(request, "input", False)
    payload = as_dict(await _post_json(adapter, "/api/embed", body, request=request), pid, "body")
    _error_in_body(adapter, payload)
    rows = as_list(payload.get("embeddings"), pid, "embeddings")
    sent = len(request.inputs)
    if len(rows) != sent:
        raise _count(pid, len(rows), sent)
    vectors = tuple(decode_vector(row, pid, f"embeddings[{i}]") for i, row in enumerate(rows))
    phases: dict[str, float] = {}
    for key, phase in (("load_duration", "model_load_ms"), ("total_duration", "server_total_ms")):
        ns = opt_int(payload.get(key), pid, key)
        if ns is not None:
            phases[phase] = ns / _NS_PER_MS
    return EmbedReply(
        vectors=vectors,
        usage=Usage(
            input_tokens=opt_int(payload.get("prompt_eval_count"), pid, "prompt_eval_count")
        ),
        model=opt_str(payload.get("model"), pid, "model"),
        warnings=_no_input_type(adapter, request, "Ollama's /api/embed"),
        phases=phases,
    )


GEMINI_TASK_TYPES: Mapping[str, str] = {
    "query": "RETRIEVAL_QUERY",
    "search_query": "RETRIEVAL_QUERY",
    "document": "RETRIEVAL_DOCUMENT",
    "search_document": "RETRIEVAL_DOCUMENT",
}
"""`input_type` values Gemini spells differently; any other value is taken as one of
Gemini's own task names (`semantic_similarity`, `CLASSIFICATION`, ...) and sent upper-cased."""

_GEMINI_PREFIX_TASK_MODELS = ("gemini-embedding-2",)
"""Models whose task Google documents as a prefix of the text (`task: ... | query: ...`)
rather than `taskType`: the server accepts `taskType` (a recording of
`gemini-embedding-2-preview` shows it), but it may not condition them, so asking for an
`input_type` adds a warning."""


def gemini_task_type(input_type: str | None) -> str | None:
    """The Gemini `taskType` for an `input_type` (`query` is `RETRIEVAL_QUERY`,
    `document` `RETRIEVAL_DOCUMENT`; Gemini's own names pass through upper-cased)."""
    if input_type is None:
        return None
    name = input_type.strip()
    return GEMINI_TASK_TYPES.get(name.lower()) or name.upper().replace("-", "_")


def gemini_task_warnings(provider: str, model: str, task: str | None) -> tuple[str, ...]:
    """The caveat for a task type sent to a model whose task Google documents as a text
    prefix (`gemini-embedding-2*`), on the Gemini API and Vertex AI alike."""
    if task is None or not model.rsplit("/", 1)[-1].startswith(_GEMINI_PREFIX_TASK_MODELS):
        return ()
    return (
        f"{provider}: Google documents {model}'s task as a prefix of the text "
        f"(task: ... | query: ...), not taskType; taskType {task} was sent as asked, "
        "but may not change its vectors",
    )


def _gemini_entry(request: EmbedRequest, text: str, model: str, task: str | None) -> dict[str, Any]:
    entry: dict[str, Any] = {"model": model}
    entry["content"] = {"parts": [{"text": text}]}
    if task is not None:
        entry["taskType"] = task
    if request.dimensions is not None:
        entry["outputDimensionality"] = request.dimensions
    entry.update(request.provider_options)
    return entry


async def gemini_embed(adapter: GeminiAdapter, request: EmbedRequest) -> EmbedReply:
    """`POST models/{model}:batchEmbedContents` (the Gemini API), one request per input.

    A single input goes the same way, as the `google-genai` SDK sends it: one code path
    and one answer shape, with `usageMetadata` where the model reports it.
    `provider_options` are merged into each input's request (`title`, say).
    """
    pid = adapter.instance_id
    model = adapter.model_path(request.model)
    task = gemini_task_type(request.input_type)
    warnings = gemini_task_warnings(pid, request.model, task)
    body = {"requests": [_gemini_entry(request, t, model, task) for t in request.inputs]}
    path = f"/{model}:batchEmbedContents"
    payload = as_dict(await _post_json(adapter, path, body, request=request), pid, "body")
    if "error" in payload and payload.get("embeddings") is None:
        raise adapter.error_from_payload(payload["error"], None, None)
    items = as_list(payload.get("embeddings"), pid, "embeddings")
    sent = len(request.inputs)
    if len(items) != sent:
        raise _count(pid, len(items), sent)
    vectors = tuple(
        decode_vector(
            as_dict(item, pid, f"embeddings[{i}]").get("values"), pid, f"embeddings[{i}].values"
        )
        for i, item in enumerate(items)
    )
    usage = Usage()
    meta = payload.get("usageMetadata")
    if meta is not None:
        m = as_dict(meta, pid, "usageMetadata")
        usage = Usage(
            input_tokens=opt_int(m.get("promptTokenCount"), pid, "usageMetadata.promptTokenCount"),
            total_tokens=opt_int(m.get("totalTokenCount"), pid, "usageMetadata.totalTokenCount"),
        )
    return EmbedReply(vectors=vectors, usage=usage, warnings=warnings)
