"""The JSON documents bundled in `anyinfer/data/`, each read once, on first use.

The alias catalog and the pricing table both ship as package data and are parsed only
when something asks for them, so `import anyinfer` reads no file; a `Bundled` holds one
document's parsed form, built once under a lock so concurrent first uses share it.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

__all__ = ["Bundled", "read_data"]

_T = TypeVar("_T")


class Bundled(Generic[_T]):
    """One bundled JSON document, turned into a `_T` by `build` on first `get()`.

    Args:
        name: The file's name in `anyinfer/data/`.
        build: Makes the value from the parsed document.
        parse_float: As for `json.loads` (pricing parses prices as `Decimal`).
    """

    __slots__ = ("_build", "_lock", "_name", "_parse_float", "_value")

    def __init__(
        self,
        name: str,
        build: Callable[[Any], _T],
        *,
        parse_float: Callable[[str], Any] | None = None,
    ) -> None:
        self._name = name
        self._build = build
        self._parse_float = parse_float
        self._lock = threading.Lock()
        self._value: _T | None = None

    @property
    def loaded(self) -> bool:
        """Whether the document has been read yet."""
        return self._value is not None

    def get(self) -> _T:
        """The value, reading and building it the first time."""
        with self._lock:
            if self._value is None:
                text = read_data(self._name)
                self._value = self._build(json.loads(text, parse_float=self._parse_float))
            return self._value


def read_data(name: str) -> str:
    """The text of `anyinfer/data/<name>`: read from the package's folder when it is on
    disk (an installed wheel, a checkout), else through `importlib.resources` (a zipped
    install), whose import costs a first request a few milliseconds."""
    try:
        with open(os.path.join(_DATA, name), encoding="utf-8") as f:
            return f.read()
    except OSError:
        from importlib import resources

        return resources.files("anyinfer").joinpath("data", name).read_text("utf-8")


_DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
