"""Plans: a rendered response turned into what a server does, write by write.

`plan` applies a script's fault and read sizes to a rendered body and returns a list of
actions — writes, then possibly a disconnect or a stall — that both fake servers carry
out the same way, so a script behaves identically in-process and over a socket.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

from ._script import Fault, Rendered, Script

if TYPE_CHECKING:
    from .dialects import Dialect

__all__ = [
    "Action",
    "Disconnect",
    "Pause",
    "RequestKind",
    "Stall",
    "Write",
    "answer",
    "error_answer",
    "plan",
    "provider_error_at",
    "request_kind",
]

GENERIC_MALFORMED = b"data: {not json\n\n"
"""The garbage frame used when a `Rendered` names none of its own."""

RequestKind = Literal["generation", "embedding", "rerank"]
"""What a request to a fake server asks for (the dialect's `is_generation`,
`is_embedding`, `is_rerank`)."""


def request_kind(dialect: Dialect, method: str, path: str) -> RequestKind | None:
    """What a request asks `dialect` for, or `None` when the dialect serves no such
    endpoint (model listings are answered before this is asked)."""
    if dialect.is_embedding(method, path):
        return "embedding"
    if dialect.is_rerank(method, path):
        return "rerank"
    if dialect.is_generation(method, path):
        return "generation"
    return None


@dataclass(frozen=True, slots=True)
class Write:
    """Send these bytes (one network write; the client may still read them in parts)."""

    data: bytes


@dataclass(frozen=True, slots=True)
class Disconnect:
    """Close the connection abruptly, leaving the body incomplete."""


@dataclass(frozen=True, slots=True)
class Stall:
    """Stop sending but keep the connection open (the client's read timeout decides)."""


@dataclass(frozen=True, slots=True)
class Pause:
    """Wait this long, then carry on with the next write (a slow body)."""

    seconds: float


Action = Write | Disconnect | Stall | Pause
"""One step of a plan."""


def answer(
    dialect: Dialect,
    script: Script,
    method: str,
    path: str,
    payload: Any,
    *,
    kind: RequestKind,
) -> tuple[Rendered, bool]:
    """What a fake server answers a generation, embedding or rerank request (`kind`)
    with, and whether it is an error (sent whole, never planned).

    The one rule both servers (loopback and transport) follow: the dialect's refusal of
    the body first (`request_fault`, `embedding_fault_at`), then the script's status or
    provider-error fault (`error_answer`), else the dialect's rendering of the script
    (`render`, streamed when the request asks for it) or of the embeddings, shaped by
    the script's `embedding` (`render_embedding_answer`).

    A rerank request goes the same way: refused by `rerank_fault`, answered by
    `render_rerank`.
    """
    stream = kind == "generation" and dialect.request_wants_stream(method, path, payload)
    if kind == "embedding":
        refused = dialect.embedding_fault_at(path, payload)
    elif kind == "rerank":
        refused = dialect.rerank_fault(payload)
    else:
        refused = dialect.request_fault(method, path, payload)
    fault = refused or error_answer(script, stream=stream)
    if fault is not None:
        return dialect.render_error(fault), True
    if kind == "embedding":
        return dialect.render_embedding_answer(path, payload, script.embedding), False
    if kind == "rerank":
        return dialect.render_rerank(payload), False
    return dialect.render(script, stream=stream), False


def error_answer(script: Script, *, stream: bool) -> Fault | None:
    """The `status` fault a server answers with instead of rendering `script`, if any.

    A `status` fault always answers with its HTTP error; a `provider_error` does so
    when the response is not streamed (providers report errors in-band only once a
    stream has started).

    Args:
        script: The script about to be served.
        stream: Whether the request asked for a stream.
    """
    fault = script.fault
    if fault is None:
        return None
    if fault.kind == "status":
        return fault
    if fault.kind == "provider_error" and not stream:
        return replace(fault, kind="status")
    return None


def provider_error_at(rendered: Rendered, fault: Fault) -> int:
    """Where a `provider_error` fault's error frame goes: `fault.at`, clamped to the
    frame count and to the first frame carrying the finish reason or the sentinel
    (providers fail before finishing, and never after their sentinel)."""
    at = max(0, min(fault.at, len(rendered.frames)))
    finish = next((i for i, f in enumerate(rendered.frames) if f.finish or f.sentinel), None)
    return at if finish is None else min(at, finish)


def plan(rendered: Rendered, script: Script, dialect: Dialect | None = None) -> list[Action]:
    """The actions that serve `rendered` with `script`'s fault and read sizes.

    Faults (`script.fault`, its `at` clamped to `len(rendered.frames)`):

    - `disconnect`: frames before `at` are written, then the first `partial_bytes`
      bytes of frame `at` (if any), then `Disconnect`.
    - `malformed`: the dialect's garbage frame (`rendered.malformed`) is inserted
      before frame `at`; the remaining frames follow.
    - `stall`: frames before `at` are written, then `Stall`.
    - `provider_error`: frames before `at` (see `provider_error_at`) are written, then
      the dialect's `stream_error_frame`, and the body ends cleanly.
    - `status`: not applied here; the servers answer with the dialect's
      `render_error` instead of rendering the script (see `error_answer`).
    - `bomb`: not applied here; the servers answer with a compressed body instead.

    Read sizes (`script.read_sizes`): empty means one `Write` per frame; otherwise the
    body's bytes are cut into writes of those sizes in turn, the last size repeating,
    regardless of frame and UTF-8 character boundaries.

    A pause (`script.pause`, `(write, seconds)`) puts a `Pause` before that write (the
    last one when there are fewer), never before the first nor after the last.

    Args:
        rendered: The rendered response.
        script: The script it was rendered from.
        dialect: The dialect that rendered it (needed for `provider_error`).

    Returns:
        The actions in order; the last one may be `Disconnect` or `Stall`.

    Raises:
        ValueError: If a read size or `partial_bytes` is negative, a read size is 0, a
            pause is negative, or a `provider_error` is served by a dialect without an
            in-stream error.
    """
    chunks = [frame.data for frame in rendered.frames]
    ending: Action | None = None
    fault = script.fault
    if fault is not None and fault.kind not in ("status", "bomb"):
        at = max(0, min(fault.at, len(chunks)))
        if fault.kind == "disconnect":
            if fault.partial_bytes < 0:
                raise ValueError(f"partial_bytes must be >= 0, got {fault.partial_bytes}")
            cut = chunks[at][: fault.partial_bytes] if at < len(chunks) else b""
            chunks = [*chunks[:at], cut]
            ending = Disconnect()
        elif fault.kind == "malformed":
            garbage = rendered.malformed if rendered.malformed is not None else GENERIC_MALFORMED
            chunks.insert(at, garbage)
        elif fault.kind == "stall":
            chunks = chunks[:at]
            ending = Stall()
        elif fault.kind == "provider_error":
            at = provider_error_at(rendered, fault)
            frame = (
                dialect.stream_error_frame(fault, script, rendered.frames[:at])
                if dialect is not None
                else None
            )
            if frame is None:
                name = dialect.name if dialect is not None else "(no dialect given)"
                raise ValueError(f"dialect {name} has no in-stream error frame")
            chunks = [*chunks[:at], frame]
        else:  # pragma: no cover - FaultKind is closed; guards a caller's typo
            raise ValueError(f"unknown fault kind {fault.kind!r}")

    actions: list[Action] = [Write(c) for c in _cut(chunks, script.read_sizes) if c]
    if script.pause is not None:
        write, seconds = script.pause
        if seconds < 0:
            raise ValueError(f"a pause must not be negative, got {seconds}")
        if len(actions) > 1:
            actions.insert(max(1, min(write, len(actions) - 1)), Pause(seconds))
    if ending is not None:
        actions.append(ending)
    return actions


def _cut(chunks: list[bytes], sizes: tuple[int, ...]) -> list[bytes]:
    if not sizes:
        return chunks
    for size in sizes:
        if size <= 0:
            raise ValueError(f"read sizes must be positive, got {sizes!r}")
    body = b"".join(chunks)
    out: list[bytes] = []
    pos = 0
    turn = 0
    while pos < len(body):
        size = sizes[min(turn, len(sizes) - 1)]
        out.append(body[pos : pos + size])
        pos += size
        turn += 1
    return out
