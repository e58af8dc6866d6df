"""Small checked accessors for provider JSON, shared by the adapters.

Provider payloads are validated at the edge: a field of the wrong type is a
`ProtocolError` naming the field, never a `KeyError` or `TypeError` deep in the core.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from .._errors import ProtocolError
from .._messages import Message

if TYPE_CHECKING:
    from .._stream.parts import Part
    from .._types import Generation

__all__ = [
    "as_dict",
    "as_int",
    "as_list",
    "as_str",
    "flushed",
    "native_turn",
    "opt_dict",
    "opt_int",
    "opt_str",
]


def flushed(parts: list[Part], error: Exception) -> Iterator[Part]:
    """`parts`, then `error` raised.

    What a decoder that builds a frame's parts in a list (cheaper than a generator)
    returns when the frame fails part-way: the parts before the failure still reach the
    core, in order, before the error does (the failure-flush rule: a usage report the
    failing frame carried must count).
    """
    yield from parts
    raise error


def _bad(provider: str, where: str, expected: str, value: Any) -> ProtocolError:
    return ProtocolError(
        f"{provider}: expected {expected} at {where}, got {type(value).__name__}",
        provider=provider,
    )


def as_dict(value: Any, provider: str, where: str) -> dict[str, Any]:
    """`value` as a JSON object, or a `ProtocolError`."""
    if not isinstance(value, dict):
        raise _bad(provider, where, "an object", value)
    return value


def opt_dict(value: Any, provider: str, where: str) -> dict[str, Any] | None:
    """`value` as a JSON object or `None`."""
    return None if value is None else as_dict(value, provider, where)


def as_list(value: Any, provider: str, where: str) -> list[Any]:
    """`value` as a JSON array (`None` reads as empty), or a `ProtocolError`."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise _bad(provider, where, "an array", value)
    return value


def opt_str(value: Any, provider: str, where: str) -> str | None:
    """`value` as a string or `None`."""
    if value is None or isinstance(value, str):
        return value
    raise _bad(provider, where, "a string", value)


def as_str(value: Any, provider: str, where: str) -> str:
    """`value` as a string (`None` reads as empty)."""
    return opt_str(value, provider, where) or ""


def opt_int(value: Any, provider: str, where: str) -> int | None:
    """`value` as a non-negative integer or `None` (integral floats accepted)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _bad(provider, where, "a number", value)
    if isinstance(value, float) and not value.is_integer():
        raise _bad(provider, where, "an integer", value)
    if value < 0:
        # A count, an index or a size: a negative one is a broken answer, not a figure.
        raise ProtocolError(
            f"{provider}: expected a non-negative integer at {where}, got {int(value)}",
            provider=provider,
        )
    return int(value)


def as_int(value: Any, provider: str, where: str) -> int:
    """`value` as an integer (`None` reads as 0)."""
    return opt_int(value, provider, where) or 0


def native_turn(
    generation: Generation, key: str, field: str, read: Callable[[Any], list[Any]]
) -> Message:
    """The assistant turn of `generation`, carrying its provider-native content.

    With native content (`read` of a kept raw payload: its blocks or parts), the message
    holds it as `provider_data[key][field]`, which the provider's adapter sends back
    verbatim (signed thinking, thought signatures); without any (no raw payload kept, or
    none in it), only the text and tool calls.

    Args:
        generation: The result.
        key: The provider's `provider_data` key.
        field: The name of the native content under it (`"content"`, `"parts"`).
        read: The protocol's reading of the native content from `generation.raw`.
    """
    raw = generation.raw
    native = None if raw is None else read(raw)
    if not native:
        return Message.assistant(generation.text, generation.tool_calls)
    return Message(
        "assistant",
        generation.text,
        tool_calls=generation.tool_calls,
        provider_data={key: {field: native}},
    )
