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
from typing import Any

from .._script import Fault, Frame, Reasoning, Rendered, Script, ScriptUsage, Text, ToolFragment
from ._base import Dialect, InStreamError, WireProfile, json_bytes
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
