"""AWS Bedrock Converse (`POST /model/{modelId}/converse` and `/converse-stream`).

The shapes follow the Bedrock Runtime API reference (`Converse`, `ConverseStream` and
their error lists) and recorded traffic (pydantic-ai's `test_bedrock` cassettes, bundled
under `tests/data/wire/pydantic__pydantic-ai`). A stream is AWS *event-stream* framing
(`application/vnd.amazon.eventstream`), binary, rendered here byte for byte
(`encode_message`): a 12-byte prelude (total length, headers length, CRC32 of those
eight bytes), the headers (`:event-type`, `:content-type`, `:message-type`, each a
one-byte name length, the name, type 7 (string), a two-byte value length and the
value), the JSON payload, and a CRC32 of everything before it. The events, as recorded:

- `messageStart` `{"p": ..., "role": "assistant"}`;
- per content block, numbered by `contentBlockIndex` across all blocks: text blocks
  are `contentBlockDelta`s with `{"text": ...}` and no start; reasoning blocks
  `{"reasoningContent": {"text": ...}}` deltas and then one `{"reasoningContent":
  {"signature": ...}}` (Anthropic models sign their thinking); a tool call a
  `contentBlockStart` `{"start": {"toolUse": {"name", "toolUseId"}}}` and one
  `{"toolUse": {"input": ...}}` delta per argument fragment; every block ends with a
  `contentBlockStop`;
- `messageStop` `{"p": ..., "stopReason": ...}`;
- `metadata` `{"metrics": {"latencyMs": ...}, "p": ..., "usage": {...}}`: the last
  event, which this dialect marks as the sentinel; it carries all the usage, after
  the finish reason.

Every payload carries the `"p"` padding Bedrock adds (a prefix of `a…zA…Z0…9` whose
length varies). An error inside a 200 stream is an exception message
(`:message-type: exception`, `:exception-type: throttlingException`, payload
`{"message": ...}`), after which the body ends.
"""

from __future__ import annotations

import json
import re
import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

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
from ._ids import ScriptIds
from .anthropic import _blocks

__all__ = ["EXCEPTION_STATUS", "STOP_REASONS", "BedrockConverseDialect", "encode_message"]

STOP_REASONS: dict[str, str] = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "content_filter": "content_filtered",
}
"""Bedrock's `stopReason` for each neutral finish reason; others are sent verbatim."""

_ERROR_TYPES: dict[int, str] = {
    400: "ValidationException",
    401: "UnrecognizedClientException",
    403: "AccessDeniedException",
    404: "ResourceNotFoundException",
    408: "ModelTimeoutException",
    424: "ModelErrorException",
    429: "ThrottlingException",
    500: "InternalServerException",
    503: "ServiceUnavailableException",
}
"""The exception Bedrock names for each status (its error lists: `Converse` and
`ConverseStream` in the API reference; 401 is what the service calls an unknown access
key, which it really answers with 403). Other 4xx statuses use `ValidationException`,
other 5xx ones `InternalServerException` (Bedrock itself sends none of those)."""

EXCEPTION_STATUS: dict[str, int] = {
    "validationException": 400,
    "modelTimeoutException": 408,
    "modelStreamErrorException": 424,
    "throttlingException": 429,
    "internalServerException": 500,
    "serviceUnavailableException": 503,
}
"""The status each stream exception stands for (the `ConverseStreamOutput` members)."""

_STREAM_ERRORS: dict[str, str] = {
    "validationException": "ProviderError",
    "modelTimeoutException": "ProviderTimeoutError",
    "modelStreamErrorException": "ProviderError",
    "throttlingException": "RateLimitError",
    "internalServerException": "ProviderError",
    "serviceUnavailableException": "OverloadedError",
}
"""The `anyinfer` error a faithful adapter raises for each stream exception: it has no
HTTP status, so its type says what the status would be."""

_STATUS_EXCEPTIONS: dict[int, str] = {v: k for k, v in EXCEPTION_STATUS.items()}

_PADDING = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
_ERROR_NAMESPACE = "http://internal.amazon.com/coral/com.amazon.bedrock/"
_GENERATION = re.compile(r"/model/[^/]+/converse(-stream)?/?$")


def encode_message(headers: Sequence[tuple[str, str]], payload: bytes) -> bytes:
    """One AWS event-stream message with string headers.

    Args:
        headers: `(name, value)` pairs, in order.
        payload: The message payload.

    Returns:
        The message's bytes: prelude, prelude CRC32, headers, payload, message CRC32.
    """
    encoded = b"".join(
        bytes([len(n)]) + n + b"\x07" + struct.pack(">H", len(v)) + v
        for n, v in ((name.encode(), value.encode()) for name, value in headers)
    )
    total = 12 + len(encoded) + len(payload) + 4
    prelude = struct.pack(">II", total, len(encoded))
    head = prelude + struct.pack(">I", zlib.crc32(prelude) & 0xFFFFFFFF) + encoded + payload
    return head + struct.pack(">I", zlib.crc32(head) & 0xFFFFFFFF)


def _event(event_type: str, payload: dict[str, Any]) -> bytes:
    return encode_message(
        (
            (":event-type", event_type),
            (":content-type", "application/json"),
            (":message-type", "event"),
        ),
        json_bytes(payload),
    )


class BedrockConverseDialect(Dialect):
    """The Bedrock Converse protocol.

    Content blocks are grouped as the Anthropic dialect groups them (a run of reasoning
    pieces, a run of text pieces, each tool call whole at the position of its first
    fragment once every lower slot has been sent: Bedrock sends one block after another,
    and a tool call's slot is its order among the `toolUse` blocks), then numbered by
    `contentBlockIndex`. An `id` or `name` the script omits is left out of the block
    start. Finish reasons map `stop` → `end_turn`, `length` → `max_tokens`, `tool_calls`
    → `tool_use`, `content_filter` → `content_filtered`; others are sent verbatim, and
    none at all leaves `stopReason` out of `messageStop`.

    Usage always rides on `metadata`, the sentinel, whatever the script's placement
    (Bedrock has no other place for it): `inputTokens`, `outputTokens`,
    `cacheReadInputTokens`, `cacheWriteInputTokens` as the script sets them, and
    `totalTokens` (all four added, as Bedrock counts) when input and output are both
    set; `none` sends `metadata` without usage. Bedrock reports no reasoning count, so a
    script's reasoning tokens are never sent. A script without the sentinel ends after
    `messageStop`, its usage unsent. The whole (non-streamed) response carries the same
    blocks, `stopReason`, `usage` and `metrics`.

    Bedrock sends no keep-alives; the keep-alive frame of the hostile world is an event
    of a type Bedrock does not have (`keepAlive`, `{}`), which readers skip. The
    malformed frame is a well-formed event whose message CRC is wrong.

    `profile` states what real Bedrock traffic has: usage after the finish reason
    (`trailing`), input and output always and the cache figures sometimes, reasoning
    blocks, no keep-alives, the stream exceptions of `ConverseStream`
    (`throttlingException` 429, `modelStreamErrorException` 424,
    `internalServerException` 500, `serviceUnavailableException` 503), text before tool
    calls, parallel calls, `tooluse_` ids.
    """

    name = "bedrock-converse"
    base_path = ""
    content_type = "application/vnd.amazon.eventstream"
    profile = WireProfile(
        usage_placements=("trailing",),
        usage_fields=("input_tokens", "output_tokens"),
        optional_usage_fields=("cache_read_tokens", "cache_write_tokens"),
        reasoning=True,
        keepalives=False,
        in_stream_errors=(
            InStreamError(
                429, "throttlingException", "Too many tokens, please wait before trying again."
            ),
            InStreamError(
                424,
                "modelStreamErrorException",
                "An error occurred while streaming the response. Retry your request.",
            ),
            InStreamError(
                500,
                "internalServerException",
                "The system encountered an unexpected error during processing. Try your "
                "request again.",
            ),
            InStreamError(
                503, "serviceUnavailableException", "Bedrock is unable to process your request."
            ),
        ),
        line_endings=("lf",),
        text_with_tools=True,
        max_tool_calls=3,
        tool_call_id_prefix="tooluse_",
    )
    embedding = EmbeddingProfile(
        # InvokeModel answers carry no index (Titan one vector, Cohere a list in input
        # order), floats; the token count is on every recorded answer (Titan's body and
        # the header). The suite embeds with Cohere Embed v4, whose model id picks the
        # body and which takes a batch per request; its `output_dimension` takes four
        # sizes only, so the suite asks for none.
        indexed=False,
        encodings=("float",),
        usage="always",
        dimensions=False,
        breaks=("wrong_dimensions", "missing_entry"),
        model="cohere.embed-v4:0",
    )

    # --- rendering -----------------------------------------------------------------

    def render(self, script: Script, *, stream: bool) -> Rendered:
        """Render a script as a Converse event stream or a whole Converse response.

        Args:
            script: What the provider sends.
            stream: Whether to render the streamed (event-stream) form.

        Returns:
            The rendered response.

        Raises:
            ValueError: If the script's tool slots are not numbered `0..n-1`.
        """
        ids = ScriptIds(script, "bedrock")
        if stream:
            return self._render_stream(script, ids)
        return self._render_whole(script, ids)

    def _padded(self, ids: ScriptIds, n: int, payload: dict[str, Any]) -> dict[str, Any]:
        """`payload` with Bedrock's `"p"` padding, keys sorted as Bedrock sends them."""
        padded = {**payload, "p": _PADDING[: ids.number(f"p{n}", 1, len(_PADDING))]}
        return dict(sorted(padded.items()))

    def _render_stream(self, script: Script, ids: ScriptIds) -> Rendered:
        frames: list[Frame] = []
        count = 0

        def event(event_type: str, payload: dict[str, Any]) -> bytes:
            nonlocal count
            count += 1
            return _event(event_type, self._padded(ids, count, payload))

        frames.append(Frame(event("messageStart", {"role": "assistant"})))
        for number, block in enumerate(_blocks(script)):
            if block.kind == "text":
                for i in block.pieces:
                    piece = script.pieces[i]
                    assert isinstance(piece, Text)
                    delta = {"contentBlockIndex": number, "delta": {"text": piece.text}}
                    frames.append(Frame(event("contentBlockDelta", delta), pieces=(i,)))
            elif block.kind == "thinking":
                for i in block.pieces:
                    piece = script.pieces[i]
                    assert isinstance(piece, Reasoning)
                    thought = {"reasoningContent": {"text": piece.text}}
                    delta = {"contentBlockIndex": number, "delta": thought}
                    frames.append(Frame(event("contentBlockDelta", delta), pieces=(i,)))
                signed = {"reasoningContent": {"signature": _signature(ids, number)}}
                frames.append(
                    Frame(
                        event("contentBlockDelta", {"contentBlockIndex": number, "delta": signed})
                    )
                )
            else:
                first = script.pieces[block.pieces[0]]
                assert isinstance(first, ToolFragment)
                use: dict[str, Any] = {}
                if first.name is not None:
                    use["name"] = first.name
                if first.id is not None:
                    use["toolUseId"] = first.id
                start = {"contentBlockIndex": number, "start": {"toolUse": use}}
                frames.append(Frame(event("contentBlockStart", start), pieces=(block.pieces[0],)))
                for i in block.pieces:
                    piece = script.pieces[i]
                    assert isinstance(piece, ToolFragment)
                    if not piece.arguments:
                        continue
                    fragment = {"toolUse": {"input": piece.arguments}}
                    delta = {"contentBlockIndex": number, "delta": fragment}
                    frames.append(Frame(event("contentBlockDelta", delta), pieces=(i,)))
            frames.append(Frame(event("contentBlockStop", {"contentBlockIndex": number})))
        reason = script.finish_reason
        stop: dict[str, Any] = {}
        if reason is not None:
            stop["stopReason"] = STOP_REASONS.get(reason, reason)
        frames.append(Frame(event("messageStop", stop), finish=reason is not None))
        if script.sentinel:
            usage, sent = _usage_json(script)
            metadata: dict[str, Any] = {"metrics": {"latencyMs": ids.number("latency", 150, 9000)}}
            if usage:
                metadata["usage"] = usage
            frames.append(Frame(event("metadata", metadata), usage=sent, sentinel=True))
        headers = (
            ("content-type", self.content_type),
            ("x-amzn-requestid", _request_id(ids)),
        )
        # A binary protocol: no line endings or multi-line data to apply.
        return Rendered(
            200,
            headers,
            self.with_keepalives(frames, script.keepalives),
            malformed=self.malformed_frame(),
        )

    def _render_whole(self, script: Script, ids: ScriptIds) -> Rendered:
        content: list[dict[str, Any]] = []
        for number, block in enumerate(_blocks(script)):
            pieces = [script.pieces[i] for i in block.pieces]
            if block.kind == "text":
                content.append({"text": "".join(p.text for p in pieces if isinstance(p, Text))})
            elif block.kind == "thinking":
                text = "".join(p.text for p in pieces if isinstance(p, Reasoning))
                reasoning = {"signature": _signature(ids, number), "text": text}
                content.append({"reasoningContent": {"reasoningText": reasoning}})
            else:
                content.append({"toolUse": _whole_tool_use(pieces)})
        payload: dict[str, Any] = {
            "metrics": {"latencyMs": ids.number("latency", 150, 9000)},
            "output": {"message": {"content": content, "role": "assistant"}},
        }
        reason = script.finish_reason
        if reason is not None:
            payload["stopReason"] = STOP_REASONS.get(reason, reason)
        usage, sent = _usage_json(script)
        if usage:
            payload["usage"] = usage
        rendered = self.whole_response(script, payload, usage=sent, finish=reason is not None)
        return Rendered(
            rendered.status,
            (*rendered.headers, ("x-amzn-requestid", _request_id(ids))),
            rendered.frames,
            malformed=rendered.malformed,
        )

    def render_error(self, fault: Fault) -> Rendered:
        """Render `{"message": ...}` with the exception named in `x-amzn-errortype`.

        The exception is Bedrock's for the status (`ValidationException` 400,
        `AccessDeniedException` 403, `ResourceNotFoundException` 404,
        `ModelTimeoutException` 408, `ThrottlingException` 429, `InternalServerException`
        500, `ServiceUnavailableException` 503, ...). Bedrock's error bodies have no code
        field, so a fault's code, when set, opens the message (`"code: message"`).

        Args:
            fault: The `status` fault.

        Returns:
            The error response, with `retry-after` when `fault.retry_after` is set
            (Bedrock itself sends none; a proxy in front of it may).
        """
        kind = _ERROR_TYPES.get(
            fault.status,
            "InternalServerException" if fault.status >= 500 else "ValidationException",
        )
        message = f"{fault.code}: {fault.message}" if fault.code else fault.message
        headers: list[tuple[str, str]] = [
            ("content-type", "application/json"),
            ("x-amzn-requestid", _fault_request_id(fault)),
            ("x-amzn-errortype", f"{kind}:{_ERROR_NAMESPACE}"),
        ]
        if fault.retry_after is not None:
            headers.append(("retry-after", f"{fault.retry_after:g}"))
        return Rendered(fault.status, tuple(headers), (Frame(json_bytes({"message": message})),))

    def error_frame(self, fault: Fault) -> bytes:
        """The exception message Bedrock sends when a started stream fails.

        `:exception-type` is `fault.code` when set, else the stream exception for
        `fault.status` (`throttlingException` for 429, `serviceUnavailableException` for
        503, `modelTimeoutException` for 408, `validationException` for other 4xx,
        `internalServerException` for other 5xx); the payload is `{"message": ...}`.

        Args:
            fault: The `provider_error` fault.

        Returns:
            The message's bytes.
        """
        kind = fault.code or _stream_exception(fault.status)
        return encode_message(
            (
                (":exception-type", kind),
                (":content-type", "application/json"),
                (":message-type", "exception"),
            ),
            json_bytes({"message": fault.message}),
        )

    def in_stream_error_types(self, fault: Fault) -> frozenset[str] | None:
        """What a stream exception's type stands for, without an HTTP status to go by.

        Args:
            fault: The `provider_error` fault.

        Returns:
            The acceptable error class names for an uncoded fault (its frame names the
            exception for its status, which is all an adapter sees), or `None`.
        """
        if fault.code is not None:
            return None
        return frozenset({_STREAM_ERRORS[_stream_exception(fault.status)]})

    def malformed_frame(self) -> bytes:
        """A `contentBlockDelta` event whose message CRC does not match its bytes."""
        good = _event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "x"}})
        crc = struct.unpack(">I", good[-4:])[0]
        return good[:-4] + struct.pack(">I", crc ^ 0xFFFFFFFF)

    def keepalive_frame(self) -> bytes:
        """An event of a type Bedrock does not send (hostile world only; see the class)."""
        return _event("keepAlive", {})

    # --- routing -------------------------------------------------------------------

    def is_generation(self, method: str, path: str) -> bool:
        """`POST …/model/{modelId}/converse` or `…/converse-stream`."""
        return method == "POST" and _GENERATION.search(path) is not None

    def request_wants_stream(self, method: str, path: str, request_json: Any) -> bool:
        """Streaming is chosen by endpoint: `converse-stream` streams."""
        return path.rstrip("/").endswith("/converse-stream")

    # --- embeddings (InvokeModel) ----------------------------------------------------

    def is_embedding(self, method: str, path: str) -> bool:
        """`POST …/model/{modelId}/invoke` (see `embedding_fault_at`)."""
        return method == "POST" and _INVOKE.search(path) is not None

    def embedding_fault_at(self, path: str, request_json: Any) -> Fault | None:
        """Bedrock's 400 `ValidationException` for an InvokeModel body the model's
        schema refuses, in Bedrock's words (`Malformed input request: #: required key
        [texts] not found#: extraneous key [inputText] is not permitted, please reformat
        your input and try again.`): a missing required key, a key the schema does not
        have, a value outside its enum (Titan v2 `dimensions` 256/512/1024, Cohere v4
        `output_dimension` 256/512/1024/1536, `input_type`, `truncate`), more than 96
        Cohere texts. The schemas are the model parameters pages' (Titan Text Embeddings
        G1 and V2, Cohere Embed v3 and v4). A model that is neither is refused as an
        invalid model identifier."""
        family = _embed_family(_invoke_model(path))
        if family is None:
            return Fault("status", status=400, message="The provided model identifier is invalid.")
        if not isinstance(request_json, dict):
            return _malformed(
                ["#: expected type: JSONObject, found: " + type(request_json).__name__]
            )
        return _malformed(_EMBED_SCHEMAS[family].problems(request_json))

    def embedding_inputs(self, request_json: Any) -> list[str] | None:
        """The texts of an InvokeModel embedding body: Cohere's `texts`, or Titan's one
        `inputText`."""
        if not isinstance(request_json, dict):
            return None
        if isinstance(request_json.get("texts"), list):
            return [str(t) for t in request_json["texts"]]
        text = request_json.get("inputText")
        return [text] if isinstance(text, str) else None

    def read_embedding_answer(self, payload: Any) -> tuple[list[list[float]], int | None] | None:
        """Titan's `embedding` and `inputTextTokenCount`, or Cohere's `embeddings` (a list,
        or `{"float": [...]}`); Cohere's count travels in a header, not the body."""
        if not isinstance(payload, dict):
            return None
        if isinstance(payload.get("embedding"), list):
            tokens = payload.get("inputTextTokenCount")
            return [[float(v) for v in payload["embedding"]]], (
                tokens if isinstance(tokens, int) else None
            )
        rows = payload.get("embeddings")
        if isinstance(rows, dict):
            rows = rows.get("float")
        if not isinstance(rows, list) or not all(isinstance(r, list) for r in rows):
            return None
        return [[float(v) for v in r] for r in rows], None

    def render_embeddings_at(self, path: str, request_json: Any) -> Rendered:
        """The plain answer (`render_embedding_answer` without a shape)."""
        return self.render_embedding_answer(path, request_json, None)

    def render_embedding_answer(
        self, path: str, request_json: Any, shape: EmbedShape | None
    ) -> Rendered:
        """The model's InvokeModel answer: Titan's `{"embedding", "embeddingsByType"
        (V2), "inputTextTokenCount"}`, Cohere's `{"embeddings", "id", "response_type",
        "texts"}` (`embeddings_floats`, a list of vectors, for v3 without
        `embedding_types`; `embeddings_by_type`, `{"float": [...]}`, otherwise and always
        for v4; v3 echoes its texts lower-cased, as recorded), with the
        `x-amzn-bedrock-input-token-count` and `-invocation-latency` headers every
        recorded answer has. Vectors and token counts are the fake's
        (`dialects._embeddings.embedding_rows`), shaped by `shape` (in input order: no
        index; the count left out when the shape reports none)."""
        from ._embeddings import embedding_rows, float32_json, rendered_json

        family = _embed_family(_invoke_model(path)) or "titan-v2"
        body = request_json if isinstance(request_json, dict) else {}
        texts = self.embedding_inputs(body) or []
        key = "dimensions" if family == "titan-v2" else "output_dimension"
        dims = body.get(key) if family in ("titan-v2", "cohere-v4") else None
        rows = embedding_rows(
            texts, dims if isinstance(dims, int) and dims > 0 else None, shape, indexed=False
        )
        vectors = [[float32_json(v) for v in vec] for _, vec in rows.entries]
        payload: dict[str, Any] = {}
        if family.startswith("titan"):
            if vectors:
                payload["embedding"] = vectors[0]
                if family == "titan-v2":
                    payload["embeddingsByType"] = {"float": vectors[0]}
            if rows.tokens is not None:
                payload["inputTextTokenCount"] = rows.tokens
        else:
            asked = body.get("embedding_types")
            by_type = family == "cohere-v4" or asked is not None
            payload = {
                "embeddings": _by_type(vectors, asked or ["float"]) if by_type else vectors,
                "id": _request_id(ScriptIds(Script(), json.dumps(texts))),
                "response_type": "embeddings_by_type" if by_type else "embeddings_floats",
                "texts": texts if family == "cohere-v4" else [t.lower() for t in texts],
            }
        rendered = rendered_json(json_bytes(payload), "application/json", b"{not json")
        headers = [
            *rendered.headers,
            ("x-amzn-requestid", _request_id(ScriptIds(Script(), json.dumps(body)))),
            ("x-amzn-bedrock-invocation-latency", "51"),
        ]
        if rows.tokens is not None:
            headers.append(("x-amzn-bedrock-input-token-count", str(rows.tokens)))
        return Rendered(
            rendered.status, tuple(headers), rendered.frames, malformed=rendered.malformed
        )


def _stream_exception(status: int) -> str:
    found = _STATUS_EXCEPTIONS.get(status)
    if found is not None:
        return found
    return "internalServerException" if status >= 500 else "validationException"


def _request_id(ids: ScriptIds) -> str:
    """A UUID-shaped request id, like Bedrock's `x-amzn-requestid`."""
    hexed = ids.token("request-id", 32, "0123456789abcdef")
    return "-".join((hexed[:8], hexed[8:12], hexed[12:16], hexed[16:20], hexed[20:]))


def _fault_request_id(fault: Fault) -> str:
    return _request_id(ScriptIds(Script(), repr(fault)))


def _signature(ids: ScriptIds, number: int) -> str:
    """An opaque reasoning signature (base64 text, like Anthropic's on Bedrock)."""
    return "Eu" + ids.token(f"signature{number}", 94, _PADDING + "+/")


def _usage_json(script: Script) -> tuple[dict[str, int], frozenset[str]]:
    """The `usage` object for the fields the script sets, and those fields' names."""
    usage: ScriptUsage | None = script.usage
    if usage is None or script.usage_placement == "none":
        return {}, frozenset()
    wire = {
        "cache_read_tokens": "cacheReadInputTokens",
        "cache_write_tokens": "cacheWriteInputTokens",
        "input_tokens": "inputTokens",
        "output_tokens": "outputTokens",
    }
    out: dict[str, int] = {}
    sent: set[str] = set()
    for name, key in wire.items():
        value = getattr(usage, name)
        if value is not None:
            out[key] = value
            sent.add(name)
    if usage.input_tokens is not None and usage.output_tokens is not None:
        out["totalTokens"] = sum(out.values())
    return dict(sorted(out.items())), frozenset(sent)


def _whole_tool_use(fragments: Sequence[Any]) -> dict[str, Any]:
    first = fragments[0]
    assert isinstance(first, ToolFragment)
    text = "".join(f.arguments for f in fragments if isinstance(f, ToolFragment)).strip()
    try:
        arguments = json.loads(text) if text else {}
    except ValueError:
        arguments = {}
    use: dict[str, Any] = {"input": arguments if isinstance(arguments, dict) else {}}
    if first.name is not None:
        use["name"] = first.name
    if first.id is not None:
        use["toolUseId"] = first.id
    return use


# --- embeddings (InvokeModel) ---------------------------------------------------------

_INVOKE = re.compile(r"/model/(.+)/invoke/?$")


def _invoke_model(path: str) -> str:
    match = _INVOKE.search(path)
    return unquote(match.group(1)) if match else ""


def _embed_family(model: str) -> str | None:
    """Which embedding schema a model id (foundation model, inference profile or ARN)
    takes: `titan-v2`, `titan-g1`, `cohere-v4`, `cohere-v3`, or `None`."""
    name = model.rsplit("/", 1)[-1]
    if re.search(r"(?:^|\.)amazon\.titan-embed-text-v2", name):
        return "titan-v2"
    if re.search(r"(?:^|\.)amazon\.titan-embed-(?:text-v1|g1-text)", name):
        return "titan-g1"
    if re.search(r"(?:^|\.)cohere\.embed-v4", name):
        return "cohere-v4"
    if re.search(r"(?:^|\.)cohere\.embed-(?:english|multilingual)-v3", name):
        return "cohere-v3"
    return None


def _by_type(rows: list[list[float]], kinds: Sequence[str]) -> dict[str, Any]:
    """Cohere's `embeddings_by_type`: floats, or quantized as Cohere documents it (int8
    and uint8 per value; binary and ubinary one bit per value, packed eight to a byte,
    binary signed)."""
    out: dict[str, Any] = {}
    for kind in kinds:
        if kind == "float":
            out[kind] = rows
        elif kind in ("int8", "uint8"):
            shift = 128 if kind == "uint8" else 0
            out[kind] = [[max(-128, min(127, round(v * 127))) + shift for v in r] for r in rows]
        else:
            shift = 128 if kind == "binary" else 0
            out[kind] = [
                [
                    int("".join("1" if v > 0 else "0" for v in r[i : i + 8]).ljust(8, "0"), 2)
                    - shift
                    for i in range(0, len(r), 8)
                ]
                for r in rows
            ]
    return out


def _malformed(problems: Sequence[str]) -> Fault | None:
    if not problems:
        return None
    return Fault(
        "status",
        status=400,
        message="Malformed input request: "
        + "".join(problems)
        + ", please reformat your input and try again.",
    )


_JSON_TYPES = {str: "String", bool: "Boolean", int: "Integer", float: "Number", list: "JSONArray"}


def _type_name(value: Any) -> str:
    return _JSON_TYPES.get(type(value), "JSONObject" if isinstance(value, dict) else "Null")


@dataclass(frozen=True, slots=True)
class _Schema:
    """One model's InvokeModel body schema, checked as Bedrock's validator words it."""

    required: tuple[str, ...]
    types: dict[str, type]
    enums: dict[str, frozenset[Any]]
    max_items: dict[str, int]

    def problems(self, body: dict[str, Any]) -> list[str]:
        out = [f"#: required key [{k}] not found" for k in self.required if k not in body]
        out += [f"#: extraneous key [{k}] is not permitted" for k in body if k not in self.types]
        for key, value in body.items():
            want = self.types.get(key)
            if want is None:
                continue
            ok = isinstance(value, want) and not (want is int and isinstance(value, bool))
            if not ok:
                out.append(
                    f"#/{key}: expected type: {_JSON_TYPES[want]}, found: {_type_name(value)}"
                )
                continue
            allowed = self.enums.get(key)
            items = value if isinstance(value, list) else [value]
            if isinstance(value, list):
                limit = self.max_items.get(key)
                if limit is not None and len(value) > limit:
                    out.append(
                        f"#/{key}: expected maximum item count: {limit}, found: {len(value)}"
                    )
                if key == "texts":
                    out += [
                        f"#/texts/{i}: expected type: String, found: {_type_name(t)}"
                        for i, t in enumerate(value)
                        if not isinstance(t, str)
                    ]
            if allowed is not None:
                out += [
                    f"#/{key}{'/' + str(i) if isinstance(value, list) else ''}: "
                    f"{item} is not a valid enum value"
                    for i, item in enumerate(items)
                    if item not in allowed
                ]
        return out


_COHERE_TYPES = frozenset({"float", "int8", "uint8", "binary", "ubinary"})
_COHERE_INPUT_TYPES = frozenset(
    {"search_document", "search_query", "classification", "clustering", "image"}
)
_EMBED_SCHEMAS: dict[str, _Schema] = {
    "titan-g1": _Schema(("inputText",), {"inputText": str}, {}, {}),
    "titan-v2": _Schema(
        ("inputText",),
        {"inputText": str, "dimensions": int, "normalize": bool, "embeddingTypes": list},
        {
            "dimensions": frozenset({256, 512, 1024}),
            "embeddingTypes": frozenset({"float", "binary"}),
        },
        {},
    ),
    "cohere-v3": _Schema(
        ("texts", "input_type"),
        {
            "texts": list,
            "images": list,
            "input_type": str,
            "truncate": str,
            "embedding_types": list,
        },
        {
            "input_type": _COHERE_INPUT_TYPES,
            "truncate": frozenset({"NONE", "START", "END"}),
            "embedding_types": _COHERE_TYPES,
        },
        {"texts": 96},
    ),
    "cohere-v4": _Schema(
        ("texts", "input_type"),
        {
            "texts": list,
            "images": list,
            "inputs": list,
            "input_type": str,
            "truncate": str,
            "embedding_types": list,
            "output_dimension": int,
            "max_tokens": int,
        },
        {
            "input_type": _COHERE_INPUT_TYPES,
            "truncate": frozenset({"NONE", "START", "END"}),
            "embedding_types": _COHERE_TYPES,
            "output_dimension": frozenset({256, 512, 1024, 1536}),
        },
        {"texts": 96},
    ),
}
"""The embedding models' body schemas (their model parameters pages)."""
