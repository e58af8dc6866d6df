"""The dialect contract and the process-wide dialect registry.

A dialect knows one wire protocol: it renders a `Script` into that protocol's frames
(streamed or whole), renders error responses in the protocol's error-body shape, and
recognises the protocol's endpoints so a fake server can route requests. The fake
servers (`FakeTransport`, `FakeServer`) are protocol-agnostic; everything they know about
a protocol comes from here.
"""

from __future__ import annotations

import json
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from .._script import (
    EmbedBreak,
    EmbedShape,
    Fault,
    Frame,
    LineEnding,
    Rendered,
    Script,
    UsagePlacement,
)

__all__ = [
    "Dialect",
    "EmbeddingProfile",
    "InStreamError",
    "WireProfile",
    "dialect_names",
    "get_dialect",
    "json_bytes",
    "register_dialect",
    "resolve_dialect",
    "split_sse_data",
]

SSE_MALFORMED = b"data: {not json\n\n"
"""A server-sent event framed correctly whose payload is not JSON."""

SSE_KEEPALIVE = b": keep-alive\n\n"
"""A server-sent-events comment line, as servers send to keep a connection warm."""


def json_bytes(payload: Any) -> bytes:
    """Serialize `payload` the way providers do: compact JSON, raw UTF-8.

    Non-ASCII characters stay multi-byte UTF-8 on the wire (not `\\u` escapes), so a
    read split can fall inside one.
    """
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


@dataclass(frozen=True, slots=True)
class InStreamError:
    """One error a provider really reports inside a 200 stream.

    Attributes:
        status: The HTTP status the error stands for (what the provider would have
            answered had it failed before streaming).
        code: The provider's error code or type, as its error frame carries it.
        message: A message like the provider's.
    """

    status: int
    code: str | None
    message: str = "scripted in-stream failure"


@dataclass(frozen=True, slots=True)
class WireProfile:
    """What one provider really sends: the shape of the wire-realistic script world.

    `anyinfer.conformance.strategies.realistic_scripts(dialect)` draws only scripts inside this
    profile, so every agreement property runs on traffic the real provider could have
    produced; the hostile world (`hostile_scripts`) ignores it.

    Attributes:
        usage_placements: Where this provider puts usage; `none` only if it can omit
            usage entirely (OpenAI Chat without `include_usage`).
        usage_fields: Usage fields the provider always reports when it reports usage.
        optional_usage_fields: Fields it reports only sometimes (cache, reasoning).
        reasoning: Whether the protocol streams reasoning text.
        keepalives: Whether the provider sends keep-alive frames (Anthropic's `ping`).
        in_stream_errors: Errors the provider reports inside a 200 stream (empty when
            the protocol has no such frame).
        line_endings: Line terminators the real server uses.
        text_with_tools: Whether text may precede tool calls in one response.
        max_tool_calls: Most parallel tool calls in one response.
        tool_call_id_prefix: How the provider's tool-call ids begin (`call_` for
            OpenAI, `toolu_01` for Anthropic); realistic scripts' ids start with it.
    """

    usage_placements: tuple[UsagePlacement, ...] = ("finish",)
    usage_fields: tuple[str, ...] = ("input_tokens", "output_tokens")
    optional_usage_fields: tuple[str, ...] = ()
    reasoning: bool = True
    keepalives: bool = False
    in_stream_errors: tuple[InStreamError, ...] = ()
    line_endings: tuple[LineEnding, ...] = ("lf",)
    text_with_tools: bool = True
    max_tool_calls: int = 3
    tool_call_id_prefix: str = "call_"


@dataclass(frozen=True, slots=True)
class EmbeddingProfile:
    """What one provider's embedding answers really look like: the realistic world of
    `anyinfer.conformance.embeddings`, which scripts answers (`EmbedShape`) inside it.

    A dialect that declares one must implement `embedding_inputs` and
    `render_embedding_answer`; the conformance suite then checks every adapter speaking
    it whose class `serves_embeddings()`.

    Attributes:
        indexed: Each entry carries its input's index, and the protocol lets entries
            come in any order (OpenAI's guide says a response may not list them in
            the order of the inputs and to match them back by `index`).
        encodings: The vector encodings the protocol answers in, as the request
            chooses (`"float"`, `"base64"`).
        usage: Whether answers report token usage: `"always"`, `"sometimes"` (a real
            answer may leave it out) or `"never"`.
        dimensions: Whether a request may ask for shorter vectors.
        breaks: The hostile shapes (`EmbedShape.broken`) the protocol can express.
    """

    indexed: bool = False
    encodings: tuple[str, ...] = ("float",)
    usage: Literal["always", "sometimes", "never"] = "always"
    dimensions: bool = True
    breaks: tuple[EmbedBreak, ...] = ("wrong_dimensions", "missing_entry")
    model: str = "fake-embed"
    """The model id the suite embeds with. A protocol whose model id decides the
    request body (Bedrock's InvokeModel) names one of its real embedding models."""


_LINE_ENDINGS: dict[str, bytes] = {"lf": b"\n", "crlf": b"\r\n", "cr": b"\r"}


def split_sse_data(event: bytes) -> bytes:
    """One server-sent event with its JSON `data:` payload split over two `data:` lines.

    The split falls after the first `,` or `:` outside a JSON string, so the payload a
    reader reassembles (the lines joined by a newline) is the same JSON value. Events
    without such a point are returned unchanged.

    Args:
        event: One event's bytes, blank line included.

    Returns:
        The event's bytes with the payload split.
    """
    lines = event.split(b"\n")
    for n, line in enumerate(lines):
        if not line.startswith(b"data:"):
            continue
        head = 6 if line.startswith(b"data: ") else 5
        payload = line[head:]
        cut = _json_split_point(payload)
        if cut is None:
            return event
        lines[n : n + 1] = [line[: head + cut], b"data: " + payload[cut:]]
        return b"\n".join(lines)
    return event


def _json_split_point(payload: bytes) -> int | None:
    in_string = escaped = False
    for i, byte in enumerate(payload):
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x2C, 0x3A):  # , :
            return i + 1
    return None


class Dialect(ABC):
    """One wire protocol, as a fake server speaks it.

    Subclasses set the class attributes and implement `render`, `render_error` and
    `is_generation`; the other methods have defaults that fit JSON-over-HTTP protocols
    that stream server-sent events.

    Attributes:
        name: Registry name, e.g. `"openai-chat"`.
        base_path: What follows the host in a client's `base_url`, e.g. `"/v1"`.
        content_type: The `content-type` of streamed responses.
    """

    name: str = ""
    base_path: str = ""
    content_type: str = "text/event-stream"
    profile: WireProfile = WireProfile()
    """What the real provider sends (see `WireProfile`)."""
    embedding: EmbeddingProfile | None = None
    """What the real provider's embedding answers look like (see `EmbeddingProfile`);
    `None` when the conformance suite scripts no embedding answers for this dialect."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"

    # --- rendering -----------------------------------------------------------------

    @abstractmethod
    def render(self, script: Script, *, stream: bool) -> Rendered:
        """Render a script as this protocol's successful response.

        Args:
            script: What the provider sends. Its `fault` is ignored here (see
                `anyinfer.fakeservers.plan` and `render_error`).
            stream: `True` for the streamed body, one `Frame` per protocol frame, with
                keep-alive frames inserted before the indices in `script.keepalives` and
                the sentinel frame left out when `script.sentinel` is false. `False` for
                the non-streaming response: one frame carrying everything.

        Returns:
            The rendered response.
        """

    @abstractmethod
    def render_error(self, fault: Fault) -> Rendered:
        """Render an HTTP error response in this protocol's error-body shape.

        Args:
            fault: A `status` fault: its status, message, code and `retry_after`
                (sent as a `Retry-After` header when set).

        Returns:
            The rendered error response (one frame).
        """

    def expected_finish_reason(self, script: Script) -> str | None:
        """The finish reason a faithful adapter reads back from this dialect's bytes.

        The script's own reason by default. Protocols that cannot express every reason
        override it: Gemini and Ollama say "stop" even when the model called tools, so
        a script saying "stop" with tool calls reads back as "tool_calls".
        """
        return script.finish_reason

    def error_frame(self, fault: Fault) -> bytes | None:
        """The frame a provider sends to report an error inside a 200 stream.

        `anyinfer.fakeservers.plan` ends a `provider_error` script's body with it.

        Args:
            fault: A `provider_error` fault: its status, code and message.

        Returns:
            The frame's bytes (it may include what the provider sends after it, such
            as a sentinel), or `None` when the protocol has no in-stream error.
        """
        return None

    def stream_error_frame(
        self, fault: Fault, script: Script, sent: Sequence[Frame]
    ) -> bytes | None:
        """The in-stream error frame for `fault`, seeing the stream it interrupts.

        `anyinfer.fakeservers.plan` calls this. Protocols whose error frame repeats something of
        the stream (the Responses API's `response.failed` carries the response id and
        the next `sequence_number`) override it; the default is `error_frame(fault)`.

        Args:
            fault: A `provider_error` fault.
            script: The script being served.
            sent: The frames written before the error frame.

        Returns:
            The frame's bytes, or `None` when the protocol has no in-stream error.
        """
        return self.error_frame(fault)

    def in_stream_error_types(self, fault: Fault) -> frozenset[str] | None:
        """The typed errors a faithful adapter raises for this dialect's error frame.

        Args:
            fault: The `provider_error` fault.

        Returns:
            Acceptable `anyinfer` error class names, or `None` to expect what the same
            status and code would raise as an HTTP error.
        """
        return None

    def finish_frames(self, frames: Sequence[Frame], script: Script) -> tuple[Frame, ...]:
        """A streamed body's frames as the script sends them: keep-alives, framing.

        Dialects call this last when rendering a stream. It inserts keep-alive frames
        (`script.keepalives`), splits server-sent-event payloads over two `data:`
        lines (`script.multiline_data`, for `text/event-stream` dialects) and applies
        `script.line_ending`.

        Args:
            frames: The content frames, sentinel included.
            script: The script being rendered.

        Returns:
            The frames to send.
        """
        out = self.with_keepalives(frames, script.keepalives)
        sse = self.content_type == "text/event-stream"
        ending = _LINE_ENDINGS[script.line_ending]
        if not (script.multiline_data and sse) and ending == b"\n":
            return out
        changed: list[Frame] = []
        for frame in out:
            data = frame.data
            if script.multiline_data and sse and not frame.keepalive:
                data = split_sse_data(data)
            if ending != b"\n":
                data = data.replace(b"\n", ending)
            changed.append(replace(frame, data=data))
        return tuple(changed)

    def malformed_frame(self) -> bytes:
        """A frame framed correctly whose payload is garbage.

        Returns:
            The frame's bytes; by default a server-sent event whose data is not JSON.
        """
        return SSE_MALFORMED

    def whole_response(
        self,
        script: Script,
        payload: Any,
        *,
        usage: frozenset[str],
        finish: bool,
        content_type: str = "application/json",
    ) -> Rendered:
        """A non-streamed response: one JSON frame carrying every piece of `script`.

        Args:
            script: The script the payload renders.
            payload: The JSON body.
            usage: Usage fields the body reports.
            finish: Whether the body carries the finish reason.
            content_type: The response's content type.
        """
        frame = Frame(
            json_bytes(payload),
            pieces=tuple(range(len(script.pieces))),
            usage=usage,
            finish=finish,
            sentinel=True,
        )
        return Rendered(
            200, (("content-type", content_type),), (frame,), malformed=self.malformed_body()
        )

    def malformed_body(self) -> bytes:
        """Garbage for a non-streaming body: bytes that make the JSON body invalid."""
        return b"{not json"

    def keepalive_frame(self) -> bytes:
        """A keep-alive/comment frame; by default a server-sent-events comment."""
        return SSE_KEEPALIVE

    def models_response(self, models: Sequence[str]) -> Rendered:
        """The answer to a model-listing request.

        Args:
            models: Model names to list.

        Returns:
            A 200 response with `{"object": "list", "data": [{"id": ...}, ...]}`.
        """
        payload = {
            "object": "list",
            "data": [{"id": m, "object": "model", "owned_by": "fakeservers"} for m in models],
        }
        return Rendered(
            200,
            (("content-type", "application/json"),),
            (Frame(json_bytes(payload), sentinel=True),),
        )

    # --- routing -------------------------------------------------------------------

    @abstractmethod
    def is_generation(self, method: str, path: str) -> bool:
        """Whether a request is a generation request of this protocol.

        Args:
            method: HTTP method, upper case.
            path: URL path, without the query string.
        """

    def request_fault(self, method: str, path: str, request_json: Any) -> Fault | None:
        """The error a real server answers for a generation request it refuses.

        The servers call this after taking the request's script, and answer with
        `render_error` of the fault instead of the script. By default every body is
        accepted; a dialect overrides it for what its provider refuses for certain (Vertex
        AI refuses a Claude body that names a `model`).

        Args:
            method: HTTP method, upper case.
            path: URL path, without the query string.
            request_json: The parsed request body, or `None`.

        Returns:
            A `status` fault, or `None` to serve the script.
        """
        return None

    def is_embedding(self, method: str, path: str) -> bool:
        """Whether a request asks for embeddings; by default no endpoint does.

        The servers answer one with a script as they do a generation (its `status`,
        `disconnect`, `malformed` and `stall` faults apply), rendering
        `render_embeddings` instead of the script's pieces.
        """
        return False

    def embedding_fault(self, request_json: Any) -> Fault | None:
        """The error the real server answers for an embedding body it refuses, or `None`."""
        return None

    def render_embeddings(self, request_json: Any) -> Rendered:
        """The successful answer to an embedding request (`is_embedding`): by default,
        for a dialect that overrides `render_embedding_answer`, that without a shape
        (at no particular path).

        Raises:
            NotImplementedError: For a dialect whose protocol has no embeddings.
        """
        if type(self).render_embedding_answer is Dialect.render_embedding_answer:
            raise NotImplementedError(f"the {self.name} dialect serves no embeddings")
        return self.render_embedding_answer("", request_json, None)

    def embedding_fault_at(self, path: str, request_json: Any) -> Fault | None:
        """`embedding_fault` for a request at `path` (what the servers call).

        A dialect whose endpoint's path carries part of the request (Gemini's model and
        method, Bedrock's model id) overrides this instead of `embedding_fault`.
        """
        return self.embedding_fault(request_json)

    def render_embeddings_at(self, path: str, request_json: Any) -> Rendered:
        """`render_embeddings` for a request at `path` (what the servers call); see
        `embedding_fault_at`."""
        return self.render_embeddings(request_json)

    def embedding_inputs(self, request_json: Any) -> list[str] | None:
        """The texts an embedding request asks for, in order, or `None` when the body
        has none this protocol reads (the conformance harness tells batches apart by
        them). No protocol's by default."""
        return None

    def read_embedding_answer(self, payload: Any) -> tuple[list[list[float]], int | None] | None:
        """Read a (recorded) answer of this protocol back: its vectors in input order and
        its token count (`None` where it reports none). The conformance suite checks
        replayed cassettes against this reading, made without the adapter's code.

        Returns:
            The vectors and count, or `None` when this dialect cannot read one.
        """
        return None

    def render_embedding_answer(
        self, path: str, request_json: Any, shape: EmbedShape | None
    ) -> Rendered:
        """The answer to an embedding request, shaped by the script's `shape`.

        What the servers call. `None` is the plain answer (`render_embeddings_at`). A
        dialect that declares an `embedding` profile overrides this to render any shape
        inside it: the fake's vectors and token counts
        (`dialects._embeddings.embedding_rows` computes them, shape applied), in its
        protocol's fields.

        Raises:
            NotImplementedError: For a shape, from a dialect that renders none.
        """
        if shape is None:
            return self.render_embeddings_at(path, request_json)
        raise NotImplementedError(f"the {self.name} dialect renders no scripted embedding shape")

    def is_models(self, method: str, path: str) -> bool:
        """Whether a request lists models; by default `GET …/models`.

        Args:
            method: HTTP method, upper case.
            path: URL path, without the query string.
        """
        return method == "GET" and path.rstrip("/").endswith("/models")

    def wants_stream(self, request_json: Any) -> bool:
        """Whether a generation request body asks for a streamed response.

        Args:
            request_json: The parsed request body, or `None`.

        Returns:
            By default, whether the body has `"stream": true`.
        """
        return isinstance(request_json, dict) and request_json.get("stream") is True

    def request_wants_stream(self, method: str, path: str, request_json: Any) -> bool:
        """Whether a generation request asks for a stream, seeing the whole request.

        The servers call this. Protocols that choose streaming by endpoint rather than
        by body field override it; the default asks `wants_stream`.

        Args:
            method: HTTP method, upper case.
            path: URL path, without the query string.
            request_json: The parsed request body, or `None`.
        """
        return self.wants_stream(request_json)

    def is_rerank(self, method: str, path: str) -> bool:
        """Whether a request asks to rerank documents; by default no endpoint does.

        The servers answer one with a script as they do an embedding request (its
        `status`, `disconnect`, `malformed` and `stall` faults apply), rendering
        `render_rerank` instead of the script's pieces.
        """
        return False

    def rerank_fault(self, request_json: Any) -> Fault | None:
        """The error the real server answers for a rerank body it refuses, or `None`."""
        return None

    def render_rerank(self, request_json: Any) -> Rendered:
        """The successful answer to a rerank request (`is_rerank`).

        Raises:
            NotImplementedError: For a dialect whose protocol does not rerank.
        """
        raise NotImplementedError(f"the {self.name} dialect serves no reranking")

    def rerank_documents(self, request_json: Any) -> list[str] | None:
        """The documents a rerank request asks to rank, in order, or `None` when the body
        has none this protocol reads (the conformance harness tells requests apart by
        them). By default the body's `documents` (Cohere, Voyage, Jina) or `texts` (Hugging
        Face TEI), when they are strings."""
        if not isinstance(request_json, dict):
            return None
        docs = request_json.get("documents", request_json.get("texts"))
        if isinstance(docs, list) and docs and all(isinstance(d, str) for d in docs):
            return list(docs)
        return None

    def read_rerank_answer(self, payload: Any) -> list[tuple[int, float]] | None:
        """Read a rerank answer of this protocol back: `(index, score)` in the order the
        wire lists them. The conformance suite checks results against this reading, made
        without the adapter's code. By default a list of objects with `index` and
        `relevance_score` (or `score`), bare (TEI) or under `results` (Cohere, Jina) or
        `data` (Voyage).

        Returns:
            The ranking, or `None` when this dialect cannot read the payload.
        """
        rows = payload
        if isinstance(payload, dict):
            rows = payload.get("results", payload.get("data"))
        if not isinstance(rows, list):
            return None
        out: list[tuple[int, float]] = []
        for row in rows:
            if not isinstance(row, dict):
                return None
            index, score = row.get("index"), row.get("relevance_score", row.get("score"))
            if not isinstance(index, int) or not isinstance(score, int | float):
                return None
            out.append((index, float(score)))
        return out

    # --- helpers for subclasses ----------------------------------------------------

    def with_keepalives(self, frames: Sequence[Frame], before: Iterable[int]) -> tuple[Frame, ...]:
        """Insert keep-alive frames before the given frame indices.

        Args:
            frames: The content frames, sentinel included.
            before: Indices into `frames`; each inserts one keep-alive frame before that
                frame. Indices are clamped to `[0, len(frames)]`, so an index past the
                end sends the keep-alive after the last frame.

        Returns:
            The frames with keep-alive frames inserted.
        """
        counts = [0] * (len(frames) + 1)
        for index in before:
            counts[max(0, min(index, len(frames)))] += 1
        out: list[Frame] = []
        keepalive = Frame(self.keepalive_frame(), keepalive=True)
        for i, frame in enumerate(frames):
            out.extend([keepalive] * counts[i])
            out.append(frame)
        out.extend([keepalive] * counts[len(frames)])
        return tuple(out)


# --- registry ----------------------------------------------------------------------

_REGISTRY: dict[str, Dialect] = {}
_LOCK = threading.Lock()


def register_dialect(dialect: Dialect, *, replace: bool = False) -> Dialect:
    """Register a dialect under its `name`.

    Registering again under a taken name replaces the entry when the new dialect is of
    the same class (so repeated plugin setup is harmless); a different class needs
    `replace=True`.

    Args:
        dialect: The dialect instance.
        replace: Replace a dialect of another class registered under the same name.

    Returns:
        The dialect, for chaining.

    Raises:
        TypeError: If `dialect` is not a `Dialect` instance.
        ValueError: If it has no name, or the name is taken by another class.
    """
    if not isinstance(dialect, Dialect):
        raise TypeError(f"register_dialect() takes a Dialect instance, got {dialect!r}")
    name = dialect.name
    if not isinstance(name, str) or not name:
        raise ValueError(f"{type(dialect).__name__} has no name")
    with _LOCK:
        existing = _REGISTRY.get(name)
        if existing is not None and type(existing) is not type(dialect) and not replace:
            raise ValueError(
                f"dialect {name!r} is already registered by {type(existing).__name__}; "
                "pass replace=True to replace it"
            )
        _REGISTRY[name] = dialect
    return dialect


def get_dialect(name: str) -> Dialect:
    """The dialect registered under `name`.

    Raises:
        KeyError: If no dialect has that name (the message lists the known ones).
    """
    with _LOCK:
        dialect = _REGISTRY.get(name)
        known = sorted(_REGISTRY)
    if dialect is None:
        raise KeyError(f"unknown dialect {name!r}; registered: {', '.join(known) or 'none'}")
    return dialect


def dialect_names() -> tuple[str, ...]:
    """Names of all registered dialects, sorted."""
    with _LOCK:
        return tuple(sorted(_REGISTRY))


def resolve_dialect(dialect: Dialect | str) -> Dialect:
    """A dialect given as an instance or as a registered name."""
    if isinstance(dialect, Dialect):
        return dialect
    if isinstance(dialect, str):
        return get_dialect(dialect)
    raise TypeError(f"expected a Dialect or a dialect name, got {dialect!r}")
