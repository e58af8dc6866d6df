"""Deterministic, realistic-looking identifiers for rendered responses.

Real responses carry ids that differ from one response to the next (`chatcmpl-…`,
`resp_…`, `fp_…`) and a `created` time. A dialect derives them from the script it
renders, so two scripts get different ids while repeated renders of one script (the
checker re-renders) stay byte-identical. The script's fault is left out of the seed: a
strategy that measures a fault-free rendering and then adds a fault (a cut inside a
frame) sees the same bytes the server sends.
"""

from __future__ import annotations

import hashlib
import string
from dataclasses import replace

from .._script import Script

__all__ = ["ALNUM", "HEX", "ScriptIds"]

ALNUM = string.ascii_letters + string.digits
"""Letters and digits, the alphabet of most provider ids."""
HEX = string.digits + "abcdef"
"""Lower-case hex digits."""


class ScriptIds:
    """Stable pseudo-random ids and numbers for one script.

    Args:
        script: The script being rendered (its `fault` is ignored).
        salt: Distinguishes dialects, so two protocols never share an id.
    """

    __slots__ = ("_seed",)

    def __init__(self, script: Script, salt: str = "") -> None:
        seed = f"{salt}\x00{replace(script, fault=None)!r}"
        self._seed = hashlib.sha256(seed.encode("utf-8")).digest()

    def _value(self, name: str) -> int:
        return int.from_bytes(hashlib.sha256(self._seed + name.encode("utf-8")).digest(), "big")

    def token(self, name: str, length: int, alphabet: str = ALNUM) -> str:
        """A string of `length` characters from `alphabet`, fixed for `name`."""
        value = self._value(name)
        out = []
        for _ in range(length):
            value, digit = divmod(value, len(alphabet))
            out.append(alphabet[digit])
            if value == 0:
                value = self._value(name + "".join(out))
        return "".join(out)

    def number(self, name: str, low: int, high: int) -> int:
        """An integer in `[low, high]`, fixed for `name`."""
        return low + self._value(name) % (high - low + 1)
