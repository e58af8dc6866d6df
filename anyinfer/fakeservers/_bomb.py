"""The `bomb` fault's body: a few kilobytes that decode to a gigabyte of spaces.

The body is gzip inside gzip (`Content-Encoding: gzip, gzip`): the inner layer is a
valid gzip member of `BOMB_DECODED_BYTES` spaces (about 1 MB compressed), the outer
layer squeezes that down to a few KB. A client that decodes a whole network read before
counting its size holds the gigabyte in memory; one that decodes incrementally stops at
its byte limit. Spaces are whitespace to every framing (JSON, server-sent events before
the line ends), so a reader consumes them rather than rejecting the body early.
"""

from __future__ import annotations

import functools
import gzip
import struct
import zlib

from ._script import Frame, Rendered

__all__ = ["BOMB_DECODED_BYTES", "BOMB_ENCODING", "bomb_body", "bomb_rendered"]

BOMB_DECODED_BYTES = 1 << 30
"""What the bomb body decodes to: 1 GiB."""
BOMB_ENCODING = "gzip, gzip"
"""Its `Content-Encoding` header."""

_BLOCK = 1 << 20
_FILL = b" "
_GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"  # deflate, no name, mtime 0


@functools.cache
def bomb_body() -> bytes:
    """The compressed body (built once, in a few milliseconds)."""
    co = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    # A full flush resets the compressor, so every block of zeros compresses to the
    # same bytes and the inner member is that block repeated.
    plain = _FILL * _BLOCK
    block = co.compress(plain) + co.flush(zlib.Z_FULL_FLUSH)
    tail = co.flush(zlib.Z_FINISH)
    count = BOMB_DECODED_BYTES // _BLOCK
    crc = _crc32_repeated(zlib.crc32(plain), _BLOCK, count)
    trailer = struct.pack("<II", crc, (count * _BLOCK) & 0xFFFFFFFF)
    inner = _GZIP_HEADER + block * count + tail + trailer
    return gzip.compress(inner, compresslevel=9, mtime=0)


def _crc32_repeated(piece: int, size: int, remaining: int) -> int:
    """The CRC-32 of a block repeated `remaining` times, from the block's CRC `piece`
    and length `size`, without touching the bytes (zlib's crc32_combine)."""
    crc = 0
    # Binary doubling over whole blocks: crc(A + B) = combine(crc(A), crc(B), len(B)).
    while remaining:
        if remaining & 1:
            crc = _combine(crc, piece, size)
        piece = _combine(piece, piece, size)
        size *= 2
        remaining >>= 1
    return crc


def _times(matrix: list[int], vector: int) -> int:
    total = 0
    i = 0
    while vector:
        if vector & 1:
            total ^= matrix[i]
        vector >>= 1
        i += 1
    return total


def _square(matrix: list[int]) -> list[int]:
    return [_times(matrix, matrix[n]) for n in range(32)]


def _combine(crc1: int, crc2: int, len2: int) -> int:
    """zlib's `crc32_combine`: the CRC of A + B from crc(A), crc(B) and len(B)."""
    if len2 <= 0:
        return crc1
    odd = [0xEDB88320] + [1 << n for n in range(31)]  # one zero bit
    even = _square(odd)  # two zero bits
    odd = _square(even)  # four zero bits
    while True:
        even = _square(odd)
        if len2 & 1:
            crc1 = _times(even, crc1)
        len2 >>= 1
        if not len2:
            break
        odd = _square(even)
        if len2 & 1:
            crc1 = _times(odd, crc1)
        len2 >>= 1
        if not len2:
            break
    return crc1 ^ crc2


def bomb_rendered(rendered: Rendered) -> Rendered:
    """`rendered`'s status line and headers with the bomb as its body.

    Args:
        rendered: The script as the dialect renders it (for its content type).

    Returns:
        A whole response: the bomb body, `Content-Encoding: gzip, gzip`.
    """
    headers = tuple((k, v) for k, v in rendered.headers if k.lower() != "content-encoding")
    return Rendered(
        rendered.status,
        (*headers, ("content-encoding", BOMB_ENCODING)),
        (Frame(bomb_body()),),
    )
