"""Wire framing shared by every HTTP adapter: SSE, NDJSON and streamed JSON arrays.

One incremental framer per framing, fed the body's bytes as they arrive (split
anywhere, UTF-8 characters included) and returning whole frames. The rules every
framer keeps:

- **Linear work.** A frame that spans many reads is gathered in one growing buffer and
  each read is scanned once; nothing already buffered is copied or searched again, so
  a 16 MB line costs as much as sixteen 1 MB lines (`bytes_buffered` counts the bytes
  copied into the buffer, for the tests that prove it).
- **A frame cap.** One line, one server-sent event or one array element may not grow
  past `max_frame_bytes` (`DEFAULT_MAX_FRAME_BYTES`, 16 MiB, unless the provider option
  `max_frame_bytes` says otherwise); past it the framer raises `ResponseTooLargeError`
  at once, without waiting for the frame to end, so an unterminated line cannot grow
  without bound. `GenerationRequest.max_response_bytes` still bounds the whole body.
- **Line ends.** `\\n`, `\\r\\n` and a bare `\\r` all end a line, also when the CR and
  the LF arrive in different reads.

`decode_json` is the one JSON decoder of the adapters: malformed text, bad UTF-8 and
nesting too deep for the decoder are all a `ProtocolError`, never a bare
`RecursionError`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Protocol

from .._errors import ProtocolError, ResponseTooLargeError

__all__ = [
    "DEFAULT_MAX_FRAME_BYTES",
    "EventFramer",
    "JSONArrayFramer",
    "LineFramer",
    "NDJSONFramer",
    "SSEEvent",
    "SSEFramer",
    "decode_json",
    "loads_or_none",
]

DEFAULT_MAX_FRAME_BYTES = 16 * 1024 * 1024
"""The largest line, server-sent event or JSON-array element a framer accepts (16 MiB),
unless the provider option `max_frame_bytes` sets another."""

_decoder = json.JSONDecoder()
_decode = _decoder.decode
_scan = _decoder.scan_once  # type: ignore[attr-defined]
"""The decoder's scanner: one value from an index, without `decode`'s whitespace
handling (a document with surrounding whitespace takes the full `decode`)."""


def decode_json(data: bytes | str, provider: str) -> Any:
    """Parse one JSON document from the provider.

    Args:
        data: The document, UTF-8 bytes or text.
        provider: The provider instance, for the error.

    Returns:
        The parsed value.

    Raises:
        ProtocolError: If the text is not JSON, not UTF-8, or nested too deeply to
            parse.
    """
    try:
        # json.loads(bytes) sniffs the encoding of every document; providers send
        # UTF-8, so decode once and skip json.loads' argument plumbing. The scanner
        # alone reads a document without surrounding whitespace (every frame, nearly);
        # anything else, errors included, goes through the full decoder below.
        text = data.decode() if isinstance(data, bytes) else data
        value, end = _scan(text, 0)
        if end == len(text):
            return value
    except (StopIteration, ValueError, UnicodeDecodeError, RecursionError):
        pass
    try:
        return _decode(data.decode() if isinstance(data, bytes) else data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ProtocolError(
            f"{provider}: malformed JSON from the provider: {exc}", provider=provider
        ) from None
    except RecursionError:
        raise ProtocolError(
            f"{provider}: the provider sent JSON nested too deeply to parse", provider=provider
        ) from None


def loads_or_none(data: bytes | str) -> Any | None:
    """Parse an error body as JSON, or `None` when it is not JSON (or too deep)."""
    try:
        return _decode(data.decode() if isinstance(data, bytes) else data)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None


def _too_large(provider: str, what: str, limit: int) -> ResponseTooLargeError:
    return ResponseTooLargeError(
        f"{provider}: one {what} of the response grew past max_frame_bytes={limit} "
        "(raise the provider option max_frame_bytes to accept larger frames)",
        provider=provider,
    )


class LineFramer:
    """Splits a byte stream into lines, in linear time and under a line cap.

    Args:
        provider: The provider instance, for errors.
        max_frame_bytes: The longest line accepted.
        what: How errors name a line (`"line"`, `"event"`).

    Attributes:
        bytes_buffered: Bytes copied into the buffer of a line spanning reads so far.
    """

    __slots__ = ("_after_cr", "_limit", "_pending", "_provider", "_what", "bytes_buffered")

    def __init__(self, provider: str, max_frame_bytes: int, what: str = "line") -> None:
        self._provider = provider
        self._limit = max_frame_bytes
        self._what = what
        self._pending = bytearray()
        # A read that ends in CR ends its line at once (a frame must not wait for the
        # next read, which may never come); an LF opening the next read is its pair.
        self._after_cr = False
        self.bytes_buffered = 0

    def _check(self, size: int) -> None:
        if size > self._limit:
            raise _too_large(self._provider, self._what, self._limit)

    def feed(self, chunk: bytes) -> list[bytes]:
        """Consume `chunk`; return the lines it completed, without their line ends.

        Raises:
            ResponseTooLargeError: If a line outgrows the cap.
        """
        if not chunk:
            return []
        if self._after_cr:
            self._after_cr = False
            if chunk[:1] == b"\n":
                chunk = chunk[1:]
        if b"\r" in chunk:
            self._after_cr = chunk.endswith(b"\r")
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        pending = self._pending
        if pending:
            end = chunk.find(b"\n")
            if end < 0:
                self._check(len(pending) + len(chunk))
                pending += chunk
                self.bytes_buffered += len(chunk)
                return []
            self._check(len(pending) + end)
            pending += chunk[:end]
            self.bytes_buffered += end
            lines = chunk[end + 1 :].split(b"\n")
            lines.insert(0, bytes(pending))
            pending.clear()
        else:
            lines = chunk.split(b"\n")
        tail = lines.pop()
        if len(chunk) > self._limit and lines:
            # Only a chunk longer than the cap can hold a line longer than it (the line
            # completed from `pending` was checked above).
            self._check(max(map(len, lines)))
        if tail:
            self._check(len(tail))
            pending += tail
            self.bytes_buffered += len(tail)
        return lines

    def rest(self) -> bytes:
        """The unterminated last line (at the end of the body); clears it."""
        out = bytes(self._pending)
        self._pending.clear()
        return out


@dataclass(slots=True, unsafe_hash=True)
class SSEEvent:
    """One server-sent event: its `event:` name (or `None`) and its `data:` bytes.

    A value, never changed once made (not a frozen dataclass only because that costs
    twice as much to build, once per event)."""

    event: str | None
    data: bytes


class EventFramer(Protocol):
    """What frames a stream of events into `SSEEvent`s: `SSEFramer` for server-sent
    events, or a protocol's own (Bedrock's AWS event stream), chosen per response by
    `HTTPAdapter.event_framer`."""

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        """Consume `chunk` (the body's next bytes); return the events it completed."""

    def close(self) -> list[SSEEvent]:
        """The end of the body: the events it completes (it may also raise, for a body
        that turns out to be no event stream at all)."""


class SSEFramer:
    """Frames server-sent events: comment lines skipped, an unterminated event dropped.

    Args:
        provider: The provider instance, for errors.
        max_frame_bytes: The largest line and the largest event accepted.
        bare_json: Also accept JSON objects sent bare between events (no `data:`),
            as Gemini reports a mid-stream error; each is returned as an event without
            a name, and one still open at the end of the body is returned as it is (its
            parse then fails).
    """

    def __init__(self, provider: str, max_frame_bytes: int, *, bare_json: bool = False) -> None:
        self._provider = provider
        self._limit = max_frame_bytes
        self.lines = LineFramer(provider, max_frame_bytes)
        self._data: list[bytes] = []
        self._size = 0
        self._event: str | None = None
        self._bare = JSONArrayFramer(provider, max_frame_bytes) if bare_json else None
        self._bare_lines: list[bytes] = []

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        """Consume `chunk`; return the events it completed.

        Raises:
            ResponseTooLargeError: If a line or an event outgrows the cap.
            ProtocolError: If a bare object is malformed between objects.
        """
        bare = self._bare
        lines = self.lines
        if (
            chunk[-2:] == b"\n\n"
            and not lines._pending
            and not lines._after_cr
            and not self._data
            and self._event is None
            and (bare is None or not bare._depth)
            and len(chunk) <= self._limit
            and b"\r" not in chunk
        ):
            # The usual read: exactly one event, `data: ...` or `event: ...` then
            # `data: ...`, and nothing carried over from the last read.
            end = len(chunk) - 2
            if chunk[:6] == b"data: ":
                if chunk.find(b"\n", 6) == end:
                    return [SSEEvent(None, chunk[6:end])]
            elif chunk[:7] == b"event: ":
                nl = chunk.find(b"\n", 7)
                if chunk[nl + 1 : nl + 7] == b"data: " and chunk.find(b"\n", nl + 7) == end:
                    return [SSEEvent(chunk[7:nl].decode("utf-8", "replace"), chunk[nl + 7 : end])]
        out: list[SSEEvent] = []
        # `_line` inlined for the lines nearly every event is made of: `data: ...`,
        # `event: ...` and the blank line that ends it (none of which opens or
        # continues a bare object).
        for line in lines.feed(chunk):
            if bare is not None and bare._depth:  # `bare.partial`, without the property
                self._line(line, out)
            elif not line:
                data = self._data
                if data:
                    out.append(
                        SSEEvent(self._event, data[0] if len(data) == 1 else b"\n".join(data))
                    )
                    self._data = []
                    self._size = 0
                self._event = None
            elif line[:6] == b"data: ":
                self._size += len(line) - 5
                if self._size > self._limit:
                    raise _too_large(self._provider, "event", self._limit)
                self._data.append(line[6:])
            elif line[:7] == b"event: ":
                self._event = line[7:].decode("utf-8", "replace")
            else:
                self._line(line, out)
        return out

    def _line(self, line: bytes, out: list[SSEEvent]) -> None:
        bare = self._bare
        if bare is not None and (bare.partial or (not self._data and line.lstrip()[:1] == b"{")):
            self._bare_lines.append(line)
            for document in bare.feed(line + b"\n"):
                self._bare_lines = []
                out.append(SSEEvent(None, document))
            return
        if not line:
            if self._data:
                data = self._data
                out.append(SSEEvent(self._event, data[0] if len(data) == 1 else b"\n".join(data)))
                self._data = []
                self._size = 0
            self._event = None
        elif line[0] == 58:  # b":" comment / keep-alive
            return
        else:
            name, _, value = line.partition(b":")
            if value[:1] == b" ":
                value = value[1:]
            if name == b"data":
                self._size += len(value) + 1
                if self._size > self._limit:
                    raise _too_large(self._provider, "event", self._limit)
                self._data.append(value)
            elif name == b"event":
                self._event = value.decode("utf-8", "replace")

    def close(self) -> list[SSEEvent]:
        """The end of the body: a bare object still open, else nothing."""
        rest = self.lines.rest()
        if self._bare is None or not self._bare_lines:
            return []
        done = self._bare.feed(rest)
        return [SSEEvent(None, done[0] if done else b"\n".join([*self._bare_lines, rest]))]


class NDJSONFramer:
    """Frames newline-delimited JSON: blank lines skipped, a final unterminated line kept.

    Any CR ends a line (JSON text holds no raw CR). Returns each line's bytes; the
    caller parses them (`decode_json`).
    """

    def __init__(self, provider: str, max_frame_bytes: int) -> None:
        self.lines = LineFramer(provider, max_frame_bytes)

    def feed(self, chunk: bytes) -> list[bytes]:
        """Consume `chunk`; return the non-blank lines it completed."""
        return [line for line in self.lines.feed(chunk) if line.strip()]

    def close(self) -> list[bytes]:
        """The end of the body: the last line, when it had no newline."""
        rest = self.lines.rest()
        return [rest] if rest.strip() else []


_STRUCTURAL = re.compile(rb'[{}\[\]"]')
_IN_STRING = re.compile(rb'["\\]')


class JSONArrayFramer:
    """Frames a JSON array of objects sent incrementally (or bare objects, one by one).

    Returns each complete top-level object's bytes and notes the closing `]`.
    Structural bytes are ASCII, so scanning bytes is safe inside multi-byte characters;
    object text is decoded only when whole. Each byte is scanned once.

    Args:
        provider: The provider instance, for errors.
        max_frame_bytes: The largest element accepted.

    Attributes:
        array: Whether the body opened with `[`.
        closed: Whether the closing `]` arrived.
    """

    def __init__(self, provider: str, max_frame_bytes: int) -> None:
        self._provider = provider
        self._limit = max_frame_bytes
        self._buf = bytearray()
        self._pos = 0
        self._depth = 0
        self._in_string = False
        self._escape = False
        self._started = False
        self.array = False
        self.closed = False
        self.bytes_buffered = 0

    @property
    def partial(self) -> bool:
        """Whether an object has begun but not ended."""
        return self._depth > 0

    def _bad(self, byte: int) -> ProtocolError:
        return ProtocolError(
            f"{self._provider}: malformed stream body: unexpected {chr(byte)!r} between "
            "response objects",
            provider=self._provider,
        )

    def feed(self, data: bytes) -> list[bytes]:
        """Consume `data`; return the objects it completed, in order.

        Raises:
            ProtocolError: For bytes that cannot appear between array elements.
            ResponseTooLargeError: If an element outgrows the cap.
        """
        if self.closed:
            return []
        buf = self._buf
        buf += data
        self.bytes_buffered += len(data)
        out: list[bytes] = []
        pos = self._pos
        start = 0
        n = len(buf)
        while pos < n:
            if self._depth:
                if self._escape:
                    self._escape = False
                    pos += 1
                    continue
                if self._in_string:
                    m = _IN_STRING.search(buf, pos)
                    if m is None:
                        pos = n
                        break
                    pos = m.start()
                    if buf[pos] == 0x5C:  # backslash: the next byte is escaped
                        self._escape = True
                    else:
                        self._in_string = False
                    pos += 1
                    continue
                m = _STRUCTURAL.search(buf, pos)
                if m is None:
                    pos = n
                    break
                pos = m.start()
                c = buf[pos]
                if c == 0x22:  # quote
                    self._in_string = True
                elif c in (0x7B, 0x5B):  # { [
                    self._depth += 1
                else:  # } ]
                    self._depth -= 1
                    if not self._depth:
                        out.append(bytes(buf[start : pos + 1]))
                        start = pos + 1
                pos += 1
                continue
            c = buf[pos]
            if c in (0x20, 0x09, 0x0A, 0x0D):  # whitespace
                pos += 1
                continue
            if not self._started:
                self._started = True
                if c == 0x5B:  # [
                    self.array = True
                    pos += 1
                    continue
            if c == 0x7B:
                self._depth = 1
                start = pos
            elif c == 0x2C and self.array:  # , between elements
                pass
            elif c == 0x5D and self.array:  # ] closes the stream
                self.closed = True
                self._buf = bytearray()
                self._pos = 0
                return out
            else:
                raise self._bad(c)
            pos += 1
        if self._depth:
            if start:
                del buf[:start]
            self._pos = pos - start
            if len(buf) > self._limit:
                raise _too_large(self._provider, "array element", self._limit)
        else:
            buf.clear()
            self._pos = 0
        return out
