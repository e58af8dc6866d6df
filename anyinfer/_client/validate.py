"""Argument checks shared by every entry point, sync and async.

One rule: a call argument of the wrong type or out of range raises `ConfigError`
naming the parameter and what it accepts, before anything is sent. `AsyncClient`'s
public methods call these first thing (the sync `Client` forwards to them, so both
raise the same error), and the value types (`Sampling`, `RetryPolicy`,
`ProviderSettings`) check their fields with the same helpers when they are built.

The checks are `isinstance` tests on the hot path (no model construction), so a plain
call pays a few microseconds. This module imports nothing from the library at module
level but the errors, so the value types can use it without import cycles.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from .._errors import ConfigError
from .._structured import keywords

__all__ = [
    "REASONING_EFFORTS",
    "check_budget_call",
    "check_metadata",
    "check_request",
    "check_run_tools_call",
    "need_int",
    "need_number",
    "need_optional_str",
]

REASONING_EFFORTS = ("none", "minimal", "low", "medium", "high")
"""The values `reasoning=` accepts (the `ReasoningEffort` literal)."""

_REQUEST_KEYS = frozenset(
    {
        "target",
        "route",
        "schema",
        "tools",
        "tool_choice",
        "sampling",
        "reasoning",
        "timeout_s",
        "repair",
        "provider_options",
        "metadata",
        "max_response_bytes",
    }
)


def _kind(value: Any) -> str:
    """How a rejected value is shown: its type, plus a short repr for plain scalars."""
    if isinstance(value, bool | int | float | str) and len(repr(value)) <= 40:
        return f"{type(value).__name__} {value!r}"
    return type(value).__name__


def _fail(name: str, accepts: str, value: Any) -> ConfigError:
    return ConfigError(f"{name} must be {accepts}, got {_kind(value)}")


def need_number(
    value: Any, name: str, *, positive: bool = False, minimum: float | None = None
) -> None:
    """Check that `value` is a finite real number (not a bool or a string).

    Args:
        value: The argument.
        name: The parameter's name, for the message.
        positive: Require `value > 0`.
        minimum: Require `value >= minimum`.

    Raises:
        ConfigError: If it is not.
    """
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise _fail(name, "a finite number", value)
    if positive and value <= 0:
        raise _fail(name, "positive", value)
    if minimum is not None and value < minimum:
        raise _fail(name, f"at least {minimum:g}", value)


def need_int(value: Any, name: str, *, minimum: int | None = None) -> None:
    """Check that `value` is an `int` (not a bool, a float or a string).

    Args:
        value: The argument.
        name: The parameter's name, for the message.
        minimum: Require `value >= minimum`.

    Raises:
        ConfigError: If it is not.
    """
    if isinstance(value, bool) or not isinstance(value, int):
        accepts = "an integer" if minimum is None else f"an integer >= {minimum}"
        raise _fail(name, accepts, value)
    if minimum is not None and value < minimum:
        raise _fail(name, f"an integer >= {minimum}", value)


def need_optional_str(value: Any, name: str, *, secret: bool = False) -> None:
    """Check that `value` is `None` or a string.

    Args:
        value: The argument.
        name: The parameter's name, for the message.
        secret: Never show the value (a credential), only its type.

    Raises:
        ConfigError: If it is not.
    """
    if value is not None and not isinstance(value, str):
        shown = type(value).__name__ if secret else _kind(value)
        raise ConfigError(f"{name} must be a string or None, got {shown}")


def _need_targets(value: Any, name: str) -> None:
    if isinstance(value, str):
        if not value.strip():
            raise _fail(name, 'a non-empty "provider:model" string', value)
        return
    if not isinstance(value, Sequence) or not value:
        raise _fail(name, 'a "provider:model" string or a non-empty sequence of them', value)
    for item in value:
        if not isinstance(item, str) or not item.strip():
            raise ConfigError(
                f'{name} must hold non-empty "provider:model" strings, got {_kind(item)}'
            )


def _need_tools(tools: Any) -> None:
    if isinstance(tools, str | bytes | Mapping) or not isinstance(tools, Sequence):
        raise _fail("tools", "a sequence of tools (ToolSpec, Tool or callables)", tools)
    if not tools:
        return
    from .._request import ToolSpec

    for i, entry in enumerate(tools):
        if isinstance(entry, ToolSpec):
            if not isinstance(entry.name, str) or not entry.name:
                raise ConfigError(f"tools[{i}].name must be a non-empty string")
            check_json_schema(entry.parameters, f"tools[{i}] ({entry.name}) parameters")
        elif not callable(entry) and not hasattr(entry, "spec"):
            raise _fail(f"tools[{i}]", "a ToolSpec, a Tool or a callable", entry)


# Sorted, so the first malformed keyword named is the same on every run.
_SCHEMA_MAPS = tuple(sorted(keywords.MAPS))
_SCHEMA_ONE = tuple(sorted(keywords.ONE - {"items"}))  # `items` is read below: one or a list
_SCHEMA_LISTS = tuple(sorted(keywords.LISTS - {"items"}))


def check_json_schema(schema: Any, name: str) -> None:
    """Check a JSON Schema mapping's shape: the keywords that hold subschemas,
    `type`, `required` and `enum` have the JSON types the specification gives them.

    A structural check, not the metaschema (which `normalize_schema` still applies):
    cheap enough for tool parameters on every call, and it stops a mistyped keyword
    (`"properties": 5`) before it surfaces as a `TypeError` from deep inside.
    Iterative, so a deeply nested schema cannot exhaust the stack.

    Args:
        schema: The schema.
        name: What it is, for the message (`"schema"`, `"tools[0] parameters"`).

    Raises:
        ConfigError: Naming the JSON pointer of the first malformed keyword.
    """
    if not isinstance(schema, Mapping):
        raise _fail(name, "a JSON Schema mapping", schema)
    stack: list[tuple[Any, str]] = [(schema, "#")]
    while stack:
        node, where = stack.pop()
        if isinstance(node, bool):
            continue
        if not isinstance(node, Mapping):
            raise ConfigError(f"{name}: {where} must be a schema (a mapping), got {_kind(node)}")
        for key in _SCHEMA_MAPS:
            if key in node:
                sub = node[key]
                if not isinstance(sub, Mapping):
                    raise ConfigError(
                        f"{name}: {where}/{key} must map names to schemas, got {_kind(sub)}"
                    )
                stack.extend((v, f"{where}/{key}/{k}") for k, v in sub.items())
        for key in _SCHEMA_ONE:
            if key in node:
                stack.append((node[key], f"{where}/{key}"))
        for key in _SCHEMA_LISTS:
            if key in node:
                sub = node[key]
                if isinstance(sub, str | Mapping) or not isinstance(sub, Sequence):
                    raise ConfigError(
                        f"{name}: {where}/{key} must be a list of schemas, got {_kind(sub)}"
                    )
                stack.extend((v, f"{where}/{key}/{i}") for i, v in enumerate(sub))
        if "items" in node:
            items = node["items"]
            if isinstance(items, list | tuple):
                stack.extend((v, f"{where}/items/{i}") for i, v in enumerate(items))
            else:
                stack.append((items, f"{where}/items"))
        # `type` is a name or a list of them; `required` a list of names (or, in older
        # drafts, a boolean).
        for key, alone, accepts in (
            ("type", str, "a type name or a list of them"),
            ("required", bool, "a list of property names"),
        ):
            if key in node and not _alone_or_names(node[key], alone):
                raise ConfigError(
                    f"{name}: {where}/{key} must be {accepts}, got {_kind(node[key])}"
                )
        if "enum" in node and not isinstance(node["enum"], list | tuple):
            raise ConfigError(f"{name}: {where}/enum must be a list, got {_kind(node['enum'])}")


def _alone_or_names(value: Any, alone: type) -> bool:
    """Whether `value` is an `alone` instance or a list of strings."""
    if isinstance(value, alone):
        return True
    return isinstance(value, list | tuple) and all(isinstance(x, str) for x in value)


def _need_schema(schema: Any) -> None:
    from .._structured.output import SchemaSpec

    source = schema.schema if isinstance(schema, SchemaSpec) else schema
    if isinstance(source, Mapping):
        check_json_schema(source, "schema")
    elif not callable(getattr(source, "model_json_schema", None)):
        raise _fail("schema", "a pydantic model, a JSON Schema mapping or a SchemaSpec", source)


def check_request(
    *,
    target: Any = None,
    route: Any = None,
    schema: Any = None,
    tools: Any = (),
    tool_choice: Any = "auto",
    sampling: Any = None,
    reasoning: Any = None,
    timeout_s: Any = None,
    repair: Any = None,
    provider_options: Any = None,
    metadata: Any = None,
    max_response_bytes: Any = None,
) -> None:
    """Check the arguments of `generate()` / `stream()` (and a `run_tools` round).

    Raises:
        ConfigError: For the first argument of the wrong type or out of range, naming
            it and what it accepts.
    """
    if target is not None and (not isinstance(target, str) or not target.strip()):
        raise _fail("target", 'a "provider:model" string', target)
    if route is not None:
        from .route import Route

        if not isinstance(route, Route):
            _need_targets(route, "route")
    if type(tools) is not tuple or tools:
        _need_tools(tools)
    if tool_choice != "auto" and not isinstance(tool_choice, str):
        raise _fail("tool_choice", "'auto', 'none', 'required' or a tool's name", tool_choice)
    if sampling is not None:
        from .._request import Sampling

        if not isinstance(sampling, Sampling):
            raise _fail("sampling", "a Sampling (ai.Sampling(temperature=...))", sampling)
    if reasoning is not None and reasoning not in REASONING_EFFORTS:
        raise _fail("reasoning", f"one of {', '.join(REASONING_EFFORTS)} or None", reasoning)
    if timeout_s is not None:
        need_number(timeout_s, "timeout_s", positive=True)
    if max_response_bytes is not None:
        need_int(max_response_bytes, "max_response_bytes", minimum=1)
    if provider_options is not None:
        if not isinstance(provider_options, Mapping):
            raise _fail(
                "provider_options",
                "a mapping of provider id to a mapping of fields",
                provider_options,
            )
        for key, fields in provider_options.items():
            if not isinstance(key, str) or not isinstance(fields, Mapping):
                raise ConfigError(
                    "provider_options must map provider ids (strings) to mappings of body "
                    f"fields, got {_kind(key)} -> {_kind(fields)}"
                )
    if metadata is not None:
        check_metadata(metadata)
    if schema is not None:
        _need_schema(schema)
    if repair is not None:
        from .._structured.output import Repair

        if not isinstance(repair, Repair):
            raise _fail("repair", "a Repair (ai.Repair(max_attempts))", repair)


def check_run_tools_call(tools: Any, max_rounds: Any, kwargs: Mapping[str, Any]) -> None:
    """Check the arguments of `run_tools()`: its own and those it forwards.

    Raises:
        ConfigError: For an argument of the wrong type, or a keyword `generate()` does
            not take.
    """
    need_int(max_rounds, "max_rounds", minimum=0)
    unknown = sorted(set(kwargs) - _REQUEST_KEYS)
    if unknown:
        raise ConfigError(
            f"run_tools() got unexpected keyword(s) {', '.join(unknown)}; it forwards "
            f"only {', '.join(sorted(_REQUEST_KEYS))}"
        )
    check_request(tools=tools, **kwargs)


def check_budget_call(
    *, target: Any, schema: Any, tools: Any, sampling: Any, output_reserve_tokens: Any
) -> None:
    """Check the arguments of `budget()`.

    Raises:
        ConfigError: For an argument of the wrong type or out of range.
    """
    if not isinstance(target, str) or not target.strip():
        raise _fail("target", 'a "provider:model" string', target)
    check_request(schema=schema, tools=tools, sampling=sampling)
    if output_reserve_tokens is not None:
        need_int(output_reserve_tokens, "output_reserve_tokens", minimum=0)


def check_metadata(metadata: object) -> dict[str, str]:
    """A call's `metadata`, checked (strings to strings) and copied; `{}` for `None`.

    The one check for every operation that takes `metadata` (generation, embeddings,
    reranking). Its message names the offending key's and value's types (a short
    scalar is shown), never a whole container.

    Raises:
        ConfigError: If it is not a mapping of strings to strings.
    """
    if metadata is None:
        return {}
    if not isinstance(metadata, Mapping):
        raise _fail("metadata", "a mapping of strings to strings", metadata)
    for key, val in metadata.items():
        if not isinstance(key, str) or not isinstance(val, str):
            raise ConfigError(
                f"metadata must map strings to strings, got {_kind(key)} -> {_kind(val)}"
            )
    return dict(metadata)
