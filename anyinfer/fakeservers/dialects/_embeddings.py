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
import re
import struct
from typing import Any

from .._script import Fault, Frame, Rendered

__all__ = [
    "DEFAULT_DIMENSIONS",
    "fake_vector",
    "float32_json",
    "ollama_embed_fault",
    "ollama_embed_payload",
    "openai_embeddings_fault",
    "openai_embeddings_payload",
    "token_count",
]

DEFAULT_DIMENSIONS = 256
"""The fake model's native vector length (a request's `dimensions` shortens it)."""

OPENAI_MAX_INPUTS = 2048
"""The most inputs one OpenAI embeddings request may carry (the `openai` SDK's docs)."""

_WORD = re.compile(r"\w+")


def _inputs(request_json: Any) -> list[str] | None:
    if not isinstance(request_json, dict):
        return None
    value = request_json.get("input")
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    return None


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


def openai_embeddings_payload(request_json: dict[str, Any]) -> dict[str, Any]:
    """The JSON body OpenAI answers an (accepted) embeddings request with."""
    texts = _inputs(request_json) or []
    dims = _dimensions(request_json) or DEFAULT_DIMENSIONS
    as_base64 = request_json.get("encoding_format") == "base64"
    data = []
    for i, text in enumerate(texts):
        vec = fake_vector(text, dims)
        embedding: Any
        if as_base64:
            embedding = base64.b64encode(struct.pack(f"<{len(vec)}f", *vec)).decode("ascii")
        else:
            embedding = [float32_json(v) for v in vec]
        data.append({"object": "embedding", "index": i, "embedding": embedding})
    tokens = sum(token_count(t) for t in texts)
    return {
        "object": "list",
        "data": data,
        "model": str(request_json.get("model", "")),
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }


def ollama_embed_fault(request_json: Any) -> Fault | None:
    """The 400 Ollama answers for an `/api/embed` body it refuses, or `None`."""
    if _inputs(request_json) is None:
        return Fault("status", status=400, message="invalid input type")
    return None


def ollama_embed_payload(request_json: dict[str, Any]) -> dict[str, Any]:
    """The JSON body Ollama answers an (accepted) `/api/embed` request with."""
    texts = _inputs(request_json) or []
    dims = _dimensions(request_json) or DEFAULT_DIMENSIONS
    return {
        "model": str(request_json.get("model", "")),
        "embeddings": [[float32_json(v) for v in fake_vector(t, dims)] for t in texts],
        "total_duration": 14_143_917,
        "load_duration": 1_019_500,
        "prompt_eval_count": sum(token_count(t) for t in texts),
    }


def rendered_json(body: bytes, content_type: str, malformed: bytes) -> Rendered:
    """A whole JSON answer as one frame (the servers apply a script's faults to it)."""
    return Rendered(
        200, (("content-type", content_type),), (Frame(body, sentinel=True),), malformed=malformed
    )
