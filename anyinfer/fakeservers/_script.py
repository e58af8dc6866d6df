"""Scripts: provider-neutral descriptions of one response, and their rendered frames.

A `Script` says *what* a provider sends — content pieces, finish reason, usage and where
the wire puts it, keep-alive lines, how the bytes are cut into network reads, and an
optional fault. A dialect (`anyinfer.fakeservers.dialects`) renders it into one protocol's frames;
each `Frame` records which parts of the script it carries, so a checker can say exactly
what a consumer must have seen when a fault cuts the response short.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

__all__ = [
    "EmbedBreak",
    "EmbedShape",
    "Fault",
    "FaultKind",
    "Frame",
    "LineEnding",
    "Piece",
    "Reasoning",
    "Rendered",
    "Script",
    "ScriptUsage",
    "Text",
    "ToolFragment",
    "UsagePlacement",
]


@dataclass(frozen=True, slots=True)
class Text:
    """A piece of visible answer text."""

    text: str


@dataclass(frozen=True, slots=True)
class Reasoning:
    """A piece of reasoning/thinking text."""

    text: str


@dataclass(frozen=True, slots=True)
class ToolFragment:
    """A fragment of the tool call in slot `index`.

    The first fragment of a slot normally carries `id` and `name`; later ones carry
    only argument text. A dialect whose protocol sends calls whole joins a slot's
    fragments into one call.
    """

    index: int
    arguments: str
    id: str | None = None
    name: str | None = None


Piece = Text | Reasoning | ToolFragment
"""One content piece of a script."""


@dataclass(frozen=True, slots=True)
class ScriptUsage:
    """Usage figures a script's provider reports."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    reasoning_tokens: int | None = None


UsagePlacement = Literal["trailing", "finish", "split", "cumulative", "none"]
"""Where usage goes on the wire.

- `trailing`: a usage-only frame after the finish frame (OpenAI `include_usage`).
- `finish`: inside the frame that carries the finish reason.
- `split`: input-side figures early (before content), output-side figures late
  (Anthropic's `message_start` / `message_delta`); dialects without a split put all of
  it in the finish frame.
- `cumulative`: running counts repeated as the response goes on, the last report
  carrying the final figures (Gemini's `usageMetadata` on every chunk, Anthropic's
  provisional `output_tokens` in `message_start`); a report never goes down. Dialects
  without running counts put all of it in the finish frame.
- `none`: the provider reports no usage.
"""

LineEnding = Literal["lf", "crlf", "cr"]
"""The line terminator of a streamed body: `\\n`, `\\r\\n` or a bare `\\r` (all legal
server-sent-events line ends; real providers send `\\n`)."""

FaultKind = Literal["disconnect", "status", "malformed", "stall", "provider_error", "bomb"]


@dataclass(frozen=True, slots=True)
class Fault:
    """Something going wrong at a point in the response.

    Attributes:
        kind: `disconnect` (the connection closes), `status` (an HTTP error status
            instead of a response), `malformed` (a frame of garbage), `stall` (the
            server stops sending but keeps the connection open), `provider_error` (the
            provider reports an error inside a 200 stream: the frames before `at`,
            then the dialect's in-stream error frame, then the body ends; a whole,
            non-streamed response answers with `status` instead, as providers do), or
            `bomb` (a small body whose `Content-Encoding` expands it far past any sane
            response size).
        at: Frame index the fault happens before (0 = before the first frame). Clamped
            to the number of frames; a `provider_error` is also clamped to the first
            frame that carries the finish reason or the sentinel (providers fail
            before finishing, and never after their sentinel).
            Ignored for `status` and `bomb`.
        partial_bytes: For `disconnect`, how many bytes of frame `at` are written
            before the close (a frame cut in half).
        status: For `status`, the HTTP status; for `provider_error`, the status the
            error stands for (the dialect renders the protocol's own code for it).
        retry_after: For `status`, a `Retry-After` header value in seconds.
        message: For `status` and `provider_error`, the provider error message.
        code: For `status` and `provider_error`, the provider error code/type (e.g.
            `context_length_exceeded`, `overloaded_error`).
    """

    kind: FaultKind
    at: int = 0
    partial_bytes: int = 0
    status: int = 500
    retry_after: float | None = None
    message: str = "scripted failure"
    code: str | None = None


EmbedBreak = Literal["wrong_dimensions", "missing_entry", "duplicate_index"]
"""A hostile embedding answer no real provider sends (see `EmbedShape.broken`)."""


@dataclass(frozen=True, slots=True)
class EmbedShape:
    """How one embedding answer is shaped: what real answers differ in, and labelled
    hostile shapes.

    The vectors themselves are the fake's (`dialects._embeddings.fake_vector` of each
    input, at the request's `dimensions` or else `native_dimensions`) and so are the
    token counts (`dialects._embeddings.token_count`): a checker knows, from the inputs
    alone, what every vector and count must be.

    Attributes:
        order_seed: List the entries in a shuffled order (seeded), each carrying its
            input's index; `None` keeps input order. Only protocols whose entries
            carry an index can (`EmbeddingProfile.indexed`); others ignore it.
        native_dimensions: The model's vector length when the request asks for none.
        usage: Whether the answer reports token usage.
        floats: Send JSON numbers even when the request asked for base64 (a server
            that ignores `encoding_format`): odd but legal, with one right reading.
        broken: A hostile shape no real answer has, which a reader must refuse with a
            typed error: `wrong_dimensions` (one vector a value short, or one long
            when it has a single value), `missing_entry` (one entry left out),
            `duplicate_index` (one entry carries another's index).
        broken_at: Which entry (modulo the entry count) `broken` hits.
    """

    order_seed: int | None = None
    native_dimensions: int = 256
    usage: bool = True
    floats: bool = False
    broken: EmbedBreak | None = None
    broken_at: int = 0


@dataclass(frozen=True, slots=True)
class Script:
    """One scripted provider response.

    Attributes:
        pieces: Content in wire order.
        finish_reason: A neutral finish reason (`stop`, `length`, `tool_calls`,
            `content_filter`) or any other string, which dialects send verbatim (a value
            no provider uses yet); `None` sends no finish reason at all.
        usage: Usage figures, or `None` for none.
        usage_placement: Where usage goes (see `UsagePlacement`).
        keepalives: Frame indices before which a keep-alive/comment line is sent.
        read_sizes: How the body's bytes are cut into network reads: empty means one
            read per frame; otherwise reads of these sizes in turn, the last size
            repeating (`(1,)` sends byte by byte, splitting multi-byte UTF-8).
        sentinel: Whether the protocol's terminal sentinel is sent.
        fault: What goes wrong, if anything.
        model: The model name the provider reports.
        line_ending: The streamed body's line terminator (see `LineEnding`).
        multiline_data: Split each server-sent event's JSON payload over two `data:`
            lines (legal SSE: a reader joins them with a newline, which is JSON
            whitespace). Only dialects that stream server-sent events apply it.
        embedding: How an embedding request's answer is shaped (`EmbedShape`); `None`
            answers the fake's plain shape. Generation requests ignore it.
        pause: `(write, seconds)`: wait `seconds` before network write number `write`
            (a slow body; shorter than the read timeout, the response must still be read
            whole). `None` sends without pausing.
    """

    pieces: tuple[Piece, ...] = ()
    finish_reason: str | None = "stop"
    usage: ScriptUsage | None = None
    usage_placement: UsagePlacement = "trailing"
    keepalives: tuple[int, ...] = ()
    read_sizes: tuple[int, ...] = ()
    sentinel: bool = True
    fault: Fault | None = None
    model: str = "fake-model"
    line_ending: LineEnding = "lf"
    multiline_data: bool = False
    embedding: EmbedShape | None = None
    pause: tuple[int, float] | None = None

    @property
    def text(self) -> str:
        """All text pieces joined."""
        return "".join(p.text for p in self.pieces if isinstance(p, Text))

    @property
    def reasoning(self) -> str:
        """All reasoning pieces joined."""
        return "".join(p.text for p in self.pieces if isinstance(p, Reasoning))


@dataclass(frozen=True, slots=True)
class Frame:
    """One logical frame of a rendered response, and what it carries.

    Attributes:
        data: The frame's bytes.
        pieces: Indices into `Script.pieces` this frame delivers.
        usage: Usage fields this frame reports (`input_tokens`, …).
        finish: Whether it carries the finish reason.
        sentinel: Whether it is the protocol's terminal sentinel.
        keepalive: Whether it is a keep-alive/comment frame.
        usage_values: Figures this frame reports that differ from the script's final
            ones (a provisional or running count), as `(field, value)` pairs; a field
            in `usage` but not here reports the script's value.
    """

    data: bytes
    pieces: tuple[int, ...] = ()
    usage: frozenset[str] = field(default_factory=frozenset)
    finish: bool = False
    sentinel: bool = False
    keepalive: bool = False
    usage_values: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True, slots=True)
class Rendered:
    """A script rendered by a dialect: status, headers and frames in order.

    Attributes:
        status: The HTTP status.
        headers: Response headers, in order (framing headers such as
            `transfer-encoding` are the server's business and left out).
        frames: The body's frames, in order.
        malformed: The garbage frame a `malformed` fault inserts into this body, in the
            dialect's framing; `None` lets `anyinfer.fakeservers.plan` use a generic
            server-sent-events one.
    """

    status: int
    headers: tuple[tuple[str, str], ...]
    frames: tuple[Frame, ...]
    malformed: bytes | None = None

    @property
    def body(self) -> bytes:
        """All frames' bytes joined."""
        return b"".join(f.data for f in self.frames)
