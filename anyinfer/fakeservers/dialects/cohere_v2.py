"""Cohere API v2: chat (`POST …/v2/chat`, streamed and whole), embed and rerank.

The wire shapes follow the official `cohere` Python SDK's types (`V2ChatStreamResponse`,
`V2ChatResponse`, `Usage`, `ChatFinishReason`), Cohere's streaming and RAG-streaming
guides, and real recordings (langchain-ai/langchain-cohere's streamed cassettes and
pydantic/pydantic-ai's whole responses, bundled under `tests/data/wire/`). Every event is
sent as `event: <type>` plus `data: <json>` whose `type` repeats the name, and the body
ends with `data: [DONE]` (no `event:` line), as every recorded stream does.

`POST …/v2/embed` and `POST …/v2/rerank` answer in the shapes of the SDK's
`EmbedByTypeResponse` and `V2RerankResponse` and of the recordings (pydantic-ai's
`test_embeddings/TestCohere.*`, langchain-cohere's `test_langchain_cohere_rerank_*`), with
the fake's own numbers: vectors from `dialects._embeddings.fake_vector`, and as
relevance scores `dialects._retrieval.fake_ranking`'s (the cosine of the query's and the
document's fake vectors, moved to Cohere's `[0, 1]`, as every fake reranker scores), so
a document sharing the query's words ranks first. The
fake bills one search unit per started hundred documents (Cohere's pricing unit: one
query over up to 100 documents). Bodies Cohere refuses for certain get its 400 shape
`{"id", "message"}`, in the fake's words: embed without `texts` of strings or without
`input_type`, more than 96 texts, an `output_dimension` other than 256, 512, 1024 or 1536,
an unknown embedding type; rerank without a query or documents of strings, more than
1,000 documents, a `top_n` below 1. One refusal is the fake's own limit, not Cohere's:
it renders no packed `binary`/`ubinary` embeddings (AnyInfer's adapter never asks).
"""

from __future__ import annotations

import base64
import hashlib
import struct
import uuid
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from .._script import (
    EmbedShape,
    Fault,
    Frame,
    Reasoning,
    Rendered,
    Script,
    ScriptUsage,
    Text,
    ToolFragment,
)
from ._base import Dialect, EmbeddingProfile, InStreamError, WireProfile, json_bytes
from ._embeddings import embedding_rows, float32_json, rendered_json
from ._retrieval import fake_ranking, positive_int

__all__ = [
    "FINISH_REASONS",
    "CohereV2Dialect",
    "embed_fault",
    "embed_payload",
    "rerank_fault",
    "rerank_payload",
]

FINISH_REASONS: dict[str, str] = {
    "stop": "COMPLETE",
    "length": "MAX_TOKENS",
    "tool_calls": "TOOL_CALL",
}
"""Cohere's `finish_reason` for each neutral finish reason it has; others (Cohere has no
content-filter reason) are sent verbatim, as a value no provider uses yet is."""

SENTINEL = b"data: [DONE]\n\n"
"""The last event of every recorded stream."""

CONTEXT_ERROR = (
    "too many tokens: total number of tokens in the prompt cannot exceed 4081 - received "
    "4292. Try using a shorter prompt, or enabling prompt truncating. See "
    "https://docs.cohere.com/reference/generate for more details."
)
"""Cohere's documented 400 message for a prompt over the model's limit (its errors page)."""

IN_STREAM_ERROR = "internal server error, this has been reported to our developers"
"""The text of a scripted `message-end` error (Cohere's own 500 wording)."""

# Error text markers -> the typed error the shared classifier gives a code-less message.
_TEXT_ERRORS = (
    (("too many tokens", "context length", "context_length_exceeded"), "ContextWindowError"),
    (("content_filter", "content_policy"), "ContentFilterError"),
    (("authentication", "invalid_api_key"), "AuthenticationError"),
    (("rate_limit",), "RateLimitError"),
    (("overloaded",), "OverloadedError"),
    (("model_not_found",), "ModelNotFoundError"),
)


def _uuid(seed: str) -> str:
    """A UUID4-shaped id derived from `seed` (Cohere's response ids are UUIDs)."""
    digest = hashlib.sha256(seed.encode("utf-8", "surrogatepass")).digest()
    return str(uuid.UUID(bytes=digest[:16], version=4))


def _seed(script: Script) -> str:
    """What a script's ids derive from: the script without its fault, so that a cut
    measured on the fault-free rendering lands on the same bytes the server sends."""
    return repr(replace(script, fault=None))


class CohereV2Dialect(Dialect):
    """The Cohere Chat API v2 protocol.

    A stream opens with `message-start` (the `id` and an empty assistant shell:
    `content`, `tool_plan`, `tool_calls`, `citations`, as recorded). A run of reasoning
    pieces is one `thinking` content block and a run of text pieces one `text` block
    (`content-start` with empty text, a `content-delta` per piece, `content-end`), the
    blocks numbered 0, 1, … by `index`. Each tool call is `tool-call-start` (`index` = the
    script's slot, `id`, `type: function`, `function.name` and empty `arguments`, as
    recorded), a `tool-call-delta` per argument fragment and `tool-call-end` after its
    last fragment. `message-end` carries the finish reason (`stop` → `COMPLETE`,
    `length` → `MAX_TOKENS`, `tool_calls` → `TOOL_CALL`, others verbatim) and every usage
    figure (`billed_units` and `tokens` with `input_tokens` and `output_tokens`, plus
    `cached_tokens` for cache reads); Cohere has no split or running counts, so every
    placement but `none` puts usage there. `data: [DONE]` is the sentinel.

    The whole response is a `V2ChatResponse`: `id`, `message` (`role`, `content` items
    of type `thinking` and `text`, `tool_calls` with whole `arguments`), `finish_reason`
    and `usage`, in the recorded order.

    `profile` states what real Cohere traffic has: usage in `message-end` only, with
    input and output tokens always and `cached_tokens` sometimes; thinking content
    (reasoning models); no keep-alives; an in-stream failure as a `message-end` with
    `finish_reason: ERROR` and its `error` text (the SDK's `ChatMessageEndEventDelta`);
    no answer text beside tool calls (a tool-calling turn streams a `tool_plan` or
    thinking, then the calls: the recordings and the SDK's examples); parallel calls.
    """

    name = "cohere-v2"
    base_path = ""
    content_type = "text/event-stream"
    profile = WireProfile(
        usage_placements=("finish",),
        usage_fields=("input_tokens", "output_tokens"),
        optional_usage_fields=("cache_read_tokens",),
        reasoning=True,
        keepalives=False,
        in_stream_errors=(InStreamError(500, None, IN_STREAM_ERROR),),
        line_endings=("lf",),
        text_with_tools=False,
        max_tool_calls=3,
        # Cohere's call ids are the tool's name, `_` and 12 base-36 characters
        # (`get_weather_9gpb31r7h7mj`); scripts name their tools independently, so the
        # ids start with a recorded example's prefix.
        tool_call_id_prefix="get_weather_",
    )
    embedding = EmbeddingProfile(
        # `/v2/embed` answers `embeddings.float` in input order, without indices, as
        # JSON numbers (floats are what AnyInfer asks for); `meta.billed_units` carries
        # `input_tokens` in every recorded answer. `output_dimension` takes only 256,
        # 512, 1024 or 1536, so the harness's free sizes are not asked for.
        indexed=False,
        encodings=("float",),
        usage="always",
        dimensions=False,
        breaks=("wrong_dimensions", "missing_entry"),
    )

    # --- rendering -----------------------------------------------------------------

    @staticmethod
    def sse_event(payload: dict[str, Any]) -> bytes:
        """One event as Cohere frames it: `event: <type>` and `data: <json>`.

        Args:
            payload: The event object; its `type` names the event.

        Returns:
            The event's bytes, blank line included.
        """
        name = str(payload.get("type", "message"))
        return b"event: " + name.encode() + b"\ndata: " + json_bytes(payload) + b"\n\n"

    def render(self, script: Script, *, stream: bool) -> Rendered:
        """Render a script as a v2 chat event stream or a whole `V2ChatResponse`.

        Args:
            script: What the provider sends.
            stream: Whether to render the streamed (SSE) form.

        Returns:
            The rendered response.
        """
        if stream:
            return self._render_stream(script)
        return self._render_whole(script)

    def _render_stream(self, script: Script) -> Rendered:
        seed = _seed(script)
        frames: list[Frame] = []
        shell = {
            "role": "assistant",
            "content": [],
            "tool_plan": "",
            "tool_calls": [],
            "citations": [],
        }
        start = {"id": _uuid(seed), "type": "message-start", "delta": {"message": shell}}
        frames.append(Frame(self.sse_event(start)))
        last_fragment: dict[int, int] = {}
        for i, piece in enumerate(script.pieces):
            if isinstance(piece, ToolFragment):
                last_fragment[piece.index] = i
        block: str | None = None
        block_index = -1
        opened: set[int] = set()
        for i, piece in enumerate(script.pieces):
            kind = "text" if isinstance(piece, Text) else "thinking"
            if isinstance(piece, ToolFragment):
                kind = "tool"
            if block is not None and kind != block:
                frames.append(Frame(self._content_end(block_index)))
                block = None
            if isinstance(piece, ToolFragment):
                frames.extend(self._tool_frames(piece, i, opened, last_fragment))
                continue
            assert isinstance(piece, Text | Reasoning)
            if block is None:
                block, block_index = kind, block_index + 1
                content = {"type": kind, kind: ""}
                event = {"type": "content-start", "index": block_index, "delta": _msg(content)}
                frames.append(Frame(self.sse_event(event)))
            event = {
                "type": "content-delta",
                "index": block_index,
                "delta": _msg({kind: piece.text}),
            }
            frames.append(Frame(self.sse_event(event), pieces=(i,)))
        if block is not None:
            frames.append(Frame(self._content_end(block_index)))
        delta: dict[str, Any] = {}
        reason = script.finish_reason
        if reason is not None:
            delta["finish_reason"] = FINISH_REASONS.get(reason, reason)
        usage, usage_set = _usage_json(script.usage if script.usage_placement != "none" else None)
        if usage_set:
            delta["usage"] = usage
        end = {"type": "message-end", "delta": delta}
        frames.append(Frame(self.sse_event(end), usage=usage_set, finish=reason is not None))
        if script.sentinel:
            frames.append(Frame(SENTINEL, sentinel=True))
        return Rendered(
            200,
            (("content-type", self.content_type), ("cache-control", _CACHE_CONTROL)),
            self.finish_frames(frames, script),
            malformed=self.malformed_frame(),
        )

    def _content_end(self, index: int) -> bytes:
        return self.sse_event({"type": "content-end", "index": index})

    def _tool_frames(
        self, piece: ToolFragment, i: int, opened: set[int], last: dict[int, int]
    ) -> list[Frame]:
        frames: list[Frame] = []
        slot = piece.index
        if slot not in opened:
            opened.add(slot)
            call: dict[str, Any] = {}
            if piece.id is not None:
                call["id"] = piece.id
            call["type"] = "function"
            function: dict[str, Any] = {}
            if piece.name is not None:
                function["name"] = piece.name
            function["arguments"] = ""
            call["function"] = function
            event = {"type": "tool-call-start", "index": slot, "delta": _msg_calls(call)}
            frames.append(Frame(self.sse_event(event), pieces=(i,)))
        if piece.arguments:
            event = {
                "type": "tool-call-delta",
                "index": slot,
                "delta": _msg_calls({"function": {"arguments": piece.arguments}}),
            }
            frames.append(Frame(self.sse_event(event), pieces=(i,)))
        if last[slot] == i:
            frames.append(Frame(self.sse_event({"type": "tool-call-end", "index": slot})))
        return frames

    def _render_whole(self, script: Script) -> Rendered:
        seed = _seed(script)
        content: list[dict[str, Any]] = []
        calls: dict[int, list[ToolFragment]] = {}
        for piece in script.pieces:
            if isinstance(piece, ToolFragment):
                calls.setdefault(piece.index, []).append(piece)
                continue
            kind = "text" if isinstance(piece, Text) else "thinking"
            if content and content[-1]["type"] == kind:
                content[-1][kind] += piece.text
            else:
                content.append({"type": kind, kind: piece.text})
        message: dict[str, Any] = {"role": "assistant"}
        if calls:
            # A whole response lists its calls by slot: their position is their slot.
            message["tool_calls"] = [_whole_call(calls[slot]) for slot in sorted(calls)]
        if content:
            message["content"] = content
        payload: dict[str, Any] = {"id": _uuid(seed), "message": message}
        reason = script.finish_reason
        if reason is not None:
            payload["finish_reason"] = FINISH_REASONS.get(reason, reason)
        usage, usage_set = _usage_json(script.usage if script.usage_placement != "none" else None)
        if usage_set:
            payload["usage"] = usage
        return self.whole_response(script, payload, usage=usage_set, finish=reason is not None)

    def render_error(self, fault: Fault) -> Rendered:
        """Render `{"id": ..., "message": ...}` with `fault.status`.

        Cohere's error bodies have an id and a message, no code (its errors page says
        `{"message": string}`; the recordings add the `id`). A `context_length_exceeded`
        code becomes Cohere's documented "too many tokens" text, any other code prefixes
        the message (`"code: message"`).

        Args:
            fault: The `status` fault.

        Returns:
            The error response, with `retry-after` when `fault.retry_after` is set.
        """
        headers: list[tuple[str, str]] = [("content-type", "application/json")]
        if fault.retry_after is not None:
            headers.append(("retry-after", f"{fault.retry_after:g}"))
        body = json_bytes({"id": _uuid(repr(fault)), "message": _error_text(fault)})
        return Rendered(fault.status, tuple(headers), (Frame(body),))

    def error_frame(self, fault: Fault) -> bytes:
        """The `message-end` event of a generation that failed after it started:
        `finish_reason` `ERROR` and the `error` text (the SDK's
        `ChatMessageEndEventDelta.error`), then `data: [DONE]`.

        Args:
            fault: The `provider_error` fault.

        Returns:
            The events' bytes.
        """
        delta = {"error": _error_text(fault), "finish_reason": "ERROR"}
        return self.sse_event({"type": "message-end", "delta": delta}) + SENTINEL

    def in_stream_error_types(self, fault: Fault) -> frozenset[str] | None:
        """What a faithful adapter raises for the code-less error: a `ProviderError`,
        or the more specific error the text itself names.

        Args:
            fault: The `provider_error` fault.

        Returns:
            Acceptable error class names.
        """
        text = _error_text(fault).lower()
        named = {name for markers, name in _TEXT_ERRORS if any(m in text for m in markers)}
        return frozenset(named or {"ProviderError"})

    def malformed_frame(self) -> bytes:
        """A `content-delta` event whose data is not JSON."""
        return b"event: content-delta\ndata: {not json\n\n"

    def models_response(self, models: Sequence[str]) -> Rendered:
        """Cohere's model list (`GET /v1/models`): `models[]` with `name` and
        `endpoints`, no next page.

        Args:
            models: Model names to list.

        Returns:
            A 200 response.
        """
        payload = {"models": [{"name": m, "endpoints": ["chat"]} for m in models]}
        return Rendered(
            200,
            (("content-type", "application/json"),),
            (Frame(json_bytes(payload), sentinel=True),),
        )

    # --- routing -------------------------------------------------------------------

    def is_generation(self, method: str, path: str) -> bool:
        """`POST …/v2/chat` (any prefix, so proxies' paths work too)."""
        return method == "POST" and path.rstrip("/").endswith("/v2/chat")

    def is_embedding(self, method: str, path: str) -> bool:
        """`POST …/v2/embed`."""
        return method == "POST" and path.rstrip("/").endswith("/v2/embed")

    def embedding_fault(self, request_json: Any) -> Fault | None:
        """Cohere's 400 for an embed body it refuses (`embed_fault`)."""
        return embed_fault(request_json)

    def render_embedding_answer(
        self, path: str, request_json: Any, shape: EmbedShape | None
    ) -> Rendered:
        """Cohere's `embeddings_by_type` answer, shaped by `shape` (in input order: its
        entries carry no index)."""
        body = json_bytes(embed_payload(request_json, shape))
        return rendered_json(body, "application/json", self.malformed_body())

    def embedding_inputs(self, request_json: Any) -> list[str] | None:
        """The body's `texts`."""
        return _strings(request_json.get("texts")) if isinstance(request_json, dict) else None

    def read_embedding_answer(self, payload: Any) -> tuple[list[list[float]], int | None] | None:
        """An embed answer read back: `embeddings.float` and
        `meta.billed_units.input_tokens`."""
        embeddings = payload.get("embeddings") if isinstance(payload, dict) else None
        rows = embeddings.get("float") if isinstance(embeddings, dict) else None
        if not isinstance(rows, list) or not all(isinstance(r, list) for r in rows):
            return None
        meta = payload.get("meta")
        billed = meta.get("billed_units") if isinstance(meta, dict) else None
        tokens = billed.get("input_tokens") if isinstance(billed, dict) else None
        return [[float(v) for v in r] for r in rows], tokens if isinstance(tokens, int) else None

    def is_rerank(self, method: str, path: str) -> bool:
        """`POST …/v2/rerank`."""
        return method == "POST" and path.rstrip("/").endswith("/v2/rerank")

    def rerank_fault(self, request_json: Any) -> Fault | None:
        """Cohere's 400 for a rerank body it refuses (`rerank_fault`)."""
        return rerank_fault(request_json)

    def render_rerank(self, request_json: Any) -> Rendered:
        """Cohere's rerank answer (`rerank_payload`)."""
        return rendered_json(
            json_bytes(rerank_payload(request_json)), "application/json", self.malformed_body()
        )


EMBED_MAX_TEXTS = 96
"""The most texts one embed request may carry (the SDK's `texts` documentation)."""

OUTPUT_DIMENSIONS = (256, 512, 1024, 1536)
"""The `output_dimension` values Cohere accepts (embed-v4 and later)."""

EMBEDDING_TYPES = ("float", "int8", "uint8", "binary", "ubinary", "base64")
"""Cohere's embedding types (the SDK's `EmbeddingType`)."""

RERANK_MAX_DOCUMENTS = 1000
"""The most documents one rerank request may carry (Cohere's reranking best practices)."""

_DOCUMENTS_PER_SEARCH_UNIT = 100

_API_VERSION = {"version": "2"}


def _refused(message: str) -> Fault:
    return Fault("status", status=400, message=f"invalid request: {message}")


def _strings(value: Any) -> list[str] | None:
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return value
    return None


def embed_fault(request_json: Any) -> Fault | None:
    """The 400 Cohere answers for an embed body it refuses for certain, or `None`."""
    body = request_json if isinstance(request_json, dict) else {}
    texts = _strings(body.get("texts"))
    if not texts:
        return _refused("fake: 'texts' must be a non-empty array of strings")
    if len(texts) > EMBED_MAX_TEXTS:
        return _refused(f"fake: 'texts' holds {len(texts)} items, at most 96 are accepted")
    if not isinstance(body.get("input_type"), str):
        return _refused("fake: 'input_type' is required for embed models v3 and higher")
    dims = body.get("output_dimension")
    if dims is not None and (isinstance(dims, bool) or dims not in OUTPUT_DIMENSIONS):
        return _refused("fake: 'output_dimension' must be one of 256, 512, 1024, 1536")
    types = body.get("embedding_types", ["float"])
    if not isinstance(types, list) or any(t not in EMBEDDING_TYPES for t in types):
        return _refused("fake: 'embedding_types' holds an unknown type")
    if any(t in ("binary", "ubinary") for t in types):
        # Cohere serves these; this fake does not render packed bits (not Cohere's words).
        return _refused("fake: this fake server renders no binary or ubinary embeddings")
    return None


def _encoded(vec: list[float], kind: str) -> Any:
    """One fake vector in an embedding type: float numbers, base64 of little-endian
    float32, or the fake's int8/uint8 quantization (the value times 127, rounded; uint8
    is that plus 128)."""
    if kind == "float":
        return [float32_json(v) for v in vec]
    if kind == "base64":
        return base64.b64encode(struct.pack(f"<{len(vec)}f", *vec)).decode("ascii")
    signed = [max(-128, min(127, round(v * 127))) for v in vec]
    return signed if kind == "int8" else [v + 128 for v in signed]


def embed_payload(request_json: dict[str, Any], shape: EmbedShape | None = None) -> dict[str, Any]:
    """The JSON body Cohere answers an (accepted) embed request with, shaped by `shape`
    (see `dialects._embeddings.embedding_rows`); without one, every text in order."""
    texts = _strings(request_json.get("texts")) or []
    rows = embedding_rows(texts, request_json.get("output_dimension"), shape, indexed=False)
    vectors = [vec for _index, vec in rows.entries]
    types = request_json.get("embedding_types") or ["float"]
    billed: dict[str, int] = {"image_tokens": 0}
    if rows.tokens is not None:
        billed["input_tokens"] = rows.tokens
    return {
        "id": _uuid(repr(request_json)),
        "embeddings": {kind: [_encoded(v, kind) for v in vectors] for kind in types},
        "texts": texts,
        "meta": {"api_version": _API_VERSION, "billed_units": billed},
        "response_type": "embeddings_by_type",
    }


def rerank_fault(request_json: Any) -> Fault | None:
    """The 400 Cohere answers for a rerank body it refuses for certain, or `None`."""
    body = request_json if isinstance(request_json, dict) else {}
    if not isinstance(body.get("query"), str) or not body["query"]:
        return _refused("fake: 'query' must be a non-empty string")
    docs = _strings(body.get("documents"))
    if not docs:
        return _refused("fake: 'documents' must be a non-empty array of strings")
    if len(docs) > RERANK_MAX_DOCUMENTS:
        return _refused(f"fake: 'documents' holds {len(docs)} items, at most 1000 are accepted")
    top_n = body.get("top_n")
    if top_n is not None and not positive_int(top_n):
        return _refused("fake: 'top_n' must be a positive integer")
    return None


def rerank_payload(request_json: dict[str, Any]) -> dict[str, Any]:
    """The JSON body Cohere answers an (accepted) rerank request with: results best
    first (ties in document order), cut to `top_n`."""
    docs = _strings(request_json.get("documents")) or []
    top_n = request_json.get("top_n")
    ranked = fake_ranking(
        str(request_json.get("query", "")), docs, top_n if positive_int(top_n) else None
    )
    return {
        "id": _uuid(repr(request_json)),
        "results": [{"index": i, "relevance_score": score} for i, score in ranked],
        "meta": {
            "api_version": _API_VERSION,
            "billed_units": {"search_units": -(-len(docs) // _DOCUMENTS_PER_SEARCH_UNIT)},
        },
    }


_CACHE_CONTROL = "no-cache, no-store, no-transform, must-revalidate, private, max-age=0"
"""The `cache-control` every recorded Cohere response carries."""


def _msg(content: dict[str, Any]) -> dict[str, Any]:
    return {"message": {"content": content}}


def _msg_calls(call: dict[str, Any]) -> dict[str, Any]:
    return {"message": {"tool_calls": call}}


def _error_text(fault: Fault) -> str:
    """Cohere's text for a fault's error (it has no code field)."""
    if fault.code and "context_length_exceeded" in fault.code:
        return CONTEXT_ERROR
    if fault.code:
        return f"{fault.code}: {fault.message}"
    return fault.message


def _whole_call(fragments: Sequence[ToolFragment]) -> dict[str, Any]:
    first = fragments[0]
    call: dict[str, Any] = {}
    if first.id is not None:
        call["id"] = first.id
    call["type"] = "function"
    function: dict[str, Any] = {}
    if first.name is not None:
        function["name"] = first.name
    function["arguments"] = "".join(f.arguments for f in fragments)
    call["function"] = function
    return call


def _usage_json(usage: ScriptUsage | None) -> tuple[dict[str, Any], frozenset[str]]:
    """Cohere's `usage` object for the script's figures it can carry, and their names.

    `billed_units` repeats the token counts (as recorded for a prompt without Cohere's
    system preamble; billing is not something the scripts describe), `tokens` carries
    them, and `cached_tokens` the cache reads. Cohere reports no cache writes and no
    separate reasoning count.
    """
    if usage is None:
        return {}, frozenset()
    sent: set[str] = set()
    tokens: dict[str, int] = {}
    for name in ("input_tokens", "output_tokens"):
        value = getattr(usage, name)
        if value is not None:
            tokens[name] = value
            sent.add(name)
    out: dict[str, Any] = {}
    if tokens:
        out["billed_units"] = dict(tokens)
        out["tokens"] = tokens
    if usage.cache_read_tokens is not None:
        out["cached_tokens"] = usage.cache_read_tokens
        sent.add("cache_read_tokens")
    return out, frozenset(sent)
