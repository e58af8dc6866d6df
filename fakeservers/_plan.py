"""Plans: a rendered response turned into what a server does, write by write.

`plan` applies a script's fault and read sizes to a rendered body and returns a list of
actions — writes, then possibly a disconnect or a stall — that both fake servers carry
out the same way, so a script behaves identically in-process and over a socket.
"""

from __future__ import annotations

from dataclasses import dataclass

from ._script import Rendered, Script

__all__ = ["Action", "Disconnect", "Stall", "Write", "plan"]

GENERIC_MALFORMED = b"data: {not json\n\n"
"""The garbage frame used when a `Rendered` names none of its own."""


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


Action = Write | Disconnect | Stall
"""One step of a plan."""


def plan(rendered: Rendered, script: Script) -> list[Action]:
    """The actions that serve `rendered` with `script`'s fault and read sizes.

    Faults (`script.fault`, its `at` clamped to `len(rendered.frames)`):

    - `disconnect`: frames before `at` are written, then the first `partial_bytes`
      bytes of frame `at` (if any), then `Disconnect`.
    - `malformed`: the dialect's garbage frame (`rendered.malformed`) is inserted
      before frame `at`; the remaining frames follow.
    - `stall`: frames before `at` are written, then `Stall`.
    - `status`: not applied here; the servers answer with the dialect's
      `render_error` instead of rendering the script.

    Read sizes (`script.read_sizes`): empty means one `Write` per frame; otherwise the
    body's bytes are cut into writes of those sizes in turn, the last size repeating,
    regardless of frame and UTF-8 character boundaries.

    Args:
        rendered: The rendered response.
        script: The script it was rendered from.

    Returns:
        The actions in order; the last one may be `Disconnect` or `Stall`.

    Raises:
        ValueError: If a read size or `partial_bytes` is negative, or a read size is 0.
    """
    chunks = [frame.data for frame in rendered.frames]
    ending: Action | None = None
    fault = script.fault
    if fault is not None and fault.kind != "status":
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
        else:  # pragma: no cover - FaultKind is closed; guards a caller's typo
            raise ValueError(f"unknown fault kind {fault.kind!r}")

    actions: list[Action] = [Write(c) for c in _cut(chunks, script.read_sizes) if c]
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
