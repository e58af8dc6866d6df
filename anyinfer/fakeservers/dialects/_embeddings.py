"""Embedding endpoints of the fake servers: OpenAI's `/embeddings`, Ollama's `/api/embed`.

The vectors are the fake's own, deterministic in the input text: each lower-cased word
is hashed to a dimension and a sign (feature hashing), the whole text adds a small
component of its own (so a text without words still has a direction), and the vector is
L2-normalized and rounded to float32. Texts that share words point in similar
directions, so a cosine-similarity search over them behaves like a (very small)
semantic search. Token counts are the fake's too: one per word, at least one per input.

The shapes are the providers': OpenAI's `{"object": "list", "data": [{"object":
"embedding", "index", "embedding"}], "model", "usage": {"prompt_tokens",
"total_tokens"}}`, the embedding a JSON array or, for `encoding_format: "base64"`, the
base64 of little-endian float32 values (what the `openai` SDK asks for and decodes);
Ollama's `{"model", "embeddings", "total_duration", "load_duration",
"prompt_eval_count"}` in Go's field order. A body the real server refuses for certain
(an input that is not a string or a list of strings; for OpenAI also an empty string,
more than 2048 inputs or a non-positive `dimensions`) is answered with the provider's 400
error envelope, in the fake's own words.
"""

from __future__ import annotations

import base64
import hashlib
import math
import random
import re
import struct
from dataclasses import dataclass
from typing import Any

from .._script import EmbedShape, Fault, Frame, Rendered

__all__ = [
    "DEFAULT_DIMENSIONS",
    "EmbeddingRows",
    "embedding_rows",
    "embedding_texts",
    "fake_vector",
    "float32_json",
    "ollama_embed_fault",
    "ollama_embed_payload",
    "openai_embeddings_fault",
    "openai_embeddings_payload",
    "read_ollama_embeddings",
    "read_openai_embeddings",
    "string_list",
    "token_count",
]

DEFAULT_DIMENSIONS = 256
"""The fake model's native vector length (a request's `dimensions` shortens it)."""

OPENAI_MAX_INPUTS = 2048
"""The most inputs one OpenAI embeddings request may carry (the `openai` SDK's docs)."""

_WORD = re.compile(r"\w+")


def string_list(value: Any) -> list[str] | None:
    """`value` as a list of strings (one string is a list of one), else `None`."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    return None


def _inputs(request_json: Any) -> list[str] | None:
    return string_list(request_json.get("input")) if isinstance(request_json, dict) else None


def _dimensions(request_json: Any) -> int | None:
    dims = request_json.get("dimensions") if isinstance(request_json, dict) else None
    return dims if isinstance(dims, int) and not isinstance(dims, bool) else None


def fake_vector(text: str, dimensions: int = DEFAULT_DIMENSIONS) -> list[float]:
    """The fake's vector for `text`: hashed words, normalized, float32-rounded."""
    vec = [0.0] * dimensions
    for word in _WORD.findall(text.lower()):
        digest = hashlib.sha256(word.encode()).digest()
        vec[int.from_bytes(digest[:4], "little") % dimensions] += 1.0 if digest[4] & 1 else -1.0
    whole = hashlib.sha256(b"text:" + text.encode()).digest()
    vec[int.from_bytes(whole[:4], "little") % dimensions] += 0.25
    norm = math.sqrt(sum(v * v for v in vec)) or 1.0
    return [struct.unpack("<f", struct.pack("<f", v / norm))[0] for v in vec]


def token_count(text: str) -> int:
    """The fake's token count of one input: its words, at least one."""
    return max(1, len(_WORD.findall(text)))


def float32_json(value: float) -> float:
    """`value` (a float32) as the shortest decimal that reads back as the same float32,
    as Go's `json.Marshal` of a `float32` writes it."""
    packed = struct.pack("<f", value)
    for digits in range(1, 10):
        short = float(f"{value:.{digits}g}")
        if struct.pack("<f", short) == packed:
            return short
    return value


@dataclass(frozen=True, slots=True)
class EmbeddingRows:
    """One embedding answer's content, protocol-neutral, shape applied.

    Attributes:
        entries: `(index, vector)` pairs in the order the wire lists them.
        tokens: The token count to report, or `None` to report none.
        floats: Send JSON numbers even if the request asked for base64.
    """

    entries: tuple[tuple[int, list[float]], ...]
    tokens: int | None
    floats: bool = False


def embedding_rows(
    texts: list[str], dimensions: int | None, shape: EmbedShape | None, *, indexed: bool
) -> EmbeddingRows:
    """The fake's answer to `texts`: every dialect renders its embeddings from this, so
    a checker can work out each vector and count from the inputs alone.

    Args:
        texts: The request's inputs, in order.
        dimensions: The dimensions the request asked for, if any.
        shape: The script's `EmbedShape` (`None`: the plain answer, in order, usage
            reported, `DEFAULT_DIMENSIONS` long).
        indexed: Whether the protocol's entries carry an index (only then may they be
            listed out of order, or one carry another's index).
    """
    shape = shape or EmbedShape(native_dimensions=DEFAULT_DIMENSIONS)
    dims = dimensions or shape.native_dimensions
    entries = [(i, fake_vector(t, dims)) for i, t in enumerate(texts)]
    if indexed and shape.order_seed is not None:
        random.Random(shape.order_seed).shuffle(entries)
    if shape.broken is not None and entries:
        k = shape.broken_at % len(entries)
        index, vec = entries[k]
        if shape.broken == "wrong_dimensions":
            entries[k] = (index, vec[:-1] if len(vec) > 1 else [*vec, 0.0])
        elif shape.broken == "missing_entry":
            del entries[k]
        elif indexed:  # duplicate_index: another entry's index (past the end when alone)
            other = entries[(k + 1) % len(entries)][0] if len(entries) > 1 else len(entries)
            entries[k] = (other, vec)
    tokens = sum(token_count(t) for t in texts) if shape.usage else None
    return EmbeddingRows(tuple(entries), tokens, shape.floats)


def _bad(message: str) -> Fault:
    return Fault("status", status=400, message=message, code="invalid_request_error")


def openai_embeddings_fault(request_json: Any) -> Fault | None:
    """The 400 OpenAI answers for an embeddings body it refuses, or `None`."""
    texts = _inputs(request_json)
    if texts is None:
        return _bad("fake: 'input' must be a string or an array of strings")
    if not texts or any(t == "" for t in texts):
        return _bad("fake: 'input' must not be empty nor hold an empty string")
    if len(texts) > OPENAI_MAX_INPUTS:
        return _bad(f"fake: 'input' holds {len(texts)} items, at most 2048 are accepted")
    dims = request_json.get("dimensions")
    if dims is not None and (_dimensions(request_json) is None or dims < 1):
        return _bad("fake: 'dimensions' must be a positive integer")
    fmt = request_json.get("encoding_format", "float")
    if fmt not in ("float", "base64"):
        return _bad("fake: 'encoding_format' must be 'float' or 'base64'")
    return None


def openai_embeddings_payload(
    request_json: dict[str, Any], shape: EmbedShape | None = None
) -> dict[str, Any]:
    """The JSON body OpenAI answers an (accepted) embeddings request with, shaped by
    `shape` (see `embedding_rows`); without one, every entry in input order."""
    rows = embedding_rows(
        _inputs(request_json) or [], _dimensions(request_json), shape, indexed=True
    )
    as_base64 = request_json.get("encoding_format") == "base64" and not rows.floats
    data = []
    for index, vec in rows.entries:
        embedding: Any
        if as_base64:
            embedding = base64.b64encode(struct.pack(f"<{len(vec)}f", *vec)).decode("ascii")
        else:
            embedding = [float32_json(v) for v in vec]
        data.append({"object": "embedding", "index": index, "embedding": embedding})
    payload: dict[str, Any] = {
        "object": "list",
        "data": data,
        "model": str(request_json.get("model", "")),
    }
    if rows.tokens is not None:
        payload["usage"] = {"prompt_tokens": rows.tokens, "total_tokens": rows.tokens}
    return payload


def ollama_embed_fault(request_json: Any) -> Fault | None:
    """The 400 Ollama answers for an `/api/embed` body it refuses, or `None`."""
    if _inputs(request_json) is None:
        return Fault("status", status=400, message="invalid input type")
    return None


def ollama_embed_payload(
    request_json: dict[str, Any], shape: EmbedShape | None = None
) -> dict[str, Any]:
    """The JSON body Ollama answers an (accepted) `/api/embed` request with, shaped by
    `shape` (see `embedding_rows`; its entries carry no index). A count left out is
    `omitempty` at work, as in Ollama's Go response type."""
    rows = embedding_rows(
        _inputs(request_json) or [], _dimensions(request_json), shape, indexed=False
    )
    payload: dict[str, Any] = {
        "model": str(request_json.get("model", "")),
        "embeddings": [[float32_json(v) for v in vec] for _index, vec in rows.entries],
        "total_duration": 14_143_917,
        "load_duration": 1_019_500,
    }
    if rows.tokens is not None:
        payload["prompt_eval_count"] = rows.tokens
    return payload


def read_openai_embeddings(
    payload: Any, *, tokens_key: str = "prompt_tokens"
) -> tuple[list[list[float]], int | None] | None:
    """An OpenAI embeddings answer read back: `data[].embedding` (numbers, or base64 of
    little-endian float32) put in order by `index`, and `usage.prompt_tokens` (or the
    count under `tokens_key`: Voyage AI's and Jina AI's `total_tokens`)."""
    data = payload.get("data") if isinstance(payload, dict) else None
    if not isinstance(data, list):
        return None
    placed: dict[int, list[float]] = {}
    for position, item in enumerate(data):
        value = item.get("embedding") if isinstance(item, dict) else None
        index = item.get("index", position) if isinstance(item, dict) else position
        if isinstance(value, str):
            raw = base64.b64decode(value)
            placed[index] = list(struct.unpack(f"<{len(raw) // 4}f", raw))
        elif isinstance(value, list):
            placed[index] = [float(v) for v in value]
        else:
            return None
    usage = payload.get("usage")
    tokens = usage.get(tokens_key) if isinstance(usage, dict) else None
    return [placed[i] for i in sorted(placed)], tokens if isinstance(tokens, int) else None


def read_ollama_embeddings(payload: Any) -> tuple[list[list[float]], int | None] | None:
    """An Ollama `/api/embed` answer read back: `embeddings` and `prompt_eval_count`."""
    rows = payload.get("embeddings") if isinstance(payload, dict) else None
    if not isinstance(rows, list) or not all(isinstance(r, list) for r in rows):
        return None
    tokens = payload.get("prompt_eval_count")
    return [[float(v) for v in r] for r in rows], tokens if isinstance(tokens, int) else None


def embedding_texts(request_json: Any) -> list[str] | None:
    """The inputs of an OpenAI or Ollama embedding body (`input`: a string or strings)."""
    return _inputs(request_json)


def rendered_json(body: bytes, content_type: str, malformed: bytes) -> Rendered:
    """A whole JSON answer as one frame (the servers apply a script's faults to it)."""
    return Rendered(
        200, (("content-type", content_type),), (Frame(body, sentinel=True),), malformed=malformed
    )
