"""Structured output: schema normalization, mechanism choice, validation and repair.

A request's `schema=` may be a pydantic model class, anything else with
`model_json_schema()`, a JSON Schema mapping, or a `SchemaSpec` naming one of those.
`normalize_schema` turns each into a `NormalizedSchema`: the JSON Schema sent to the
provider (local `$ref`s inlined, so providers that reject references accept it), the
name and strictness it is sent with, and a `validate` that checks the model's reply.

How the schema is enforced depends on what the target can do. `choose_mechanism` picks
the strongest mechanism available, in this order:

1. ``grammar`` — the engine constrains decoding with a grammar compiled from the schema
   (llama.cpp's server, vLLM's guided decoding).
2. ``json_schema`` — the provider constrains the reply to the schema (OpenAI, Gemini,
   Ollama's `format`).
3. ``json_mode`` — the provider guarantees some JSON object, not this schema.
4. ``prompt`` — nothing is enforced: the schema goes in a system message and the JSON is
   extracted from whatever the model wrote.

Every mechanism is followed by client-side validation, so a downgrade changes how likely
the first reply is to validate, never whether an invalid one is caught.

Nothing here imports pydantic or jsonschema at module level: `import anyinfer` stays
fast, and jsonschema is needed only to validate JSON Schema mappings.
"""

from __future__ import annotations

import copy
import importlib
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import field
from typing import Any, Protocol, runtime_checkable

from .._errors import ConfigError
from .._knowledge.capabilities import ModelCapabilities
from .._messages import Message
from .._types import Mechanism
from .._values import value_class
from . import keywords

__all__ = [
    "MECHANISMS",
    "NormalizedSchema",
    "Repair",
    "SchemaSpec",
    "StructuredPlan",
    "SupportsJSONSchema",
    "choose_mechanism",
    "extract_json",
    "inline_refs",
    "normalize_schema",
    "plan_structured",
    "repair_messages",
    "response_format_for",
    "schema_instructions",
    "strict_issues",
    "strip_titles",
    "with_instructions",
]

MECHANISMS: tuple[Mechanism, ...] = ("grammar", "json_schema", "json_mode", "prompt")
"""The structured-output mechanisms, strongest first."""

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_ERROR_MAX_CHARS = 300


@runtime_checkable
class SupportsJSONSchema(Protocol):
    """Anything that describes itself as a JSON Schema, as pydantic models do.

    A pydantic model class is the common case; its replies validate to model instances.
    Anything else with `model_json_schema()` is validated against the schema it returns
    (with `jsonschema`), unless it also has pydantic's `model_validate_json`.
    """

    def model_json_schema(self) -> Mapping[str, Any]:
        """The JSON Schema describing valid values."""
        ...


@value_class
class SchemaSpec:
    """A structured-output schema, with the name and strictness it is sent with.

    Passing a pydantic model or a JSON Schema mapping as `schema=` is shorthand for
    `SchemaSpec(that)`; use `SchemaSpec` to choose the name or to turn strict mode off.

    Attributes:
        schema: A JSON Schema mapping, or a pydantic model class (or anything else
            with `model_json_schema()`).
        name: The name the schema is sent under (1 to 64 letters, digits, `_` or `-`, as
            OpenAI requires). `None` takes the model class's name, or the mapping's
            `title` when it is a valid name, else `"output"`.
        strict: Ask the provider to enforce the schema exactly (OpenAI's strict mode).
            Schemas derived from pydantic models are brought into the strict subset
            (every property required, no additional properties) when this is on; a
            hand-written mapping outside that subset is sent with strict mode off.
        description: What the output is, for providers that take a description.

    Raises:
        ConfigError: If the name is not a valid schema name, or `schema` is neither a
            mapping nor something with `model_json_schema()`.
    """

    schema: Mapping[str, Any] | SupportsJSONSchema
    name: str | None = None
    strict: bool = True
    description: str | None = None

    def __post_init__(self) -> None:
        if self.name is not None and not _NAME.match(self.name):
            raise ConfigError(f"schema name {self.name!r} must be 1-64 letters, digits, '_' or '-'")
        if isinstance(self.schema, SchemaSpec):
            raise ConfigError("SchemaSpec.schema must not itself be a SchemaSpec")
        if not isinstance(self.schema, Mapping) and not callable(
            getattr(self.schema, "model_json_schema", None)
        ):
            raise ConfigError(
                "SchemaSpec.schema must be a JSON Schema mapping or have model_json_schema(), "
                f"got {type(self.schema).__name__}"
            )


@value_class
class Repair:
    """The repair budget for structured output that fails validation.

    When a reply does not validate, the target is re-run inside the same stream with
    the validation errors fed back, up to `max_attempts` times. Each re-run opens a new
    attempt segment with a fresh `TimingMark("attempt_start")`; the result's
    `repair_attempts` says how many were needed. When the budget is spent, the request
    raises `SchemaViolationError` carrying the last text and its errors.

    Attributes:
        max_attempts: Re-runs allowed after the first invalid reply; `0` disables repair.

    Raises:
        ConfigError: If `max_attempts` is not a non-negative int.
    """

    max_attempts: int = 1

    def __post_init__(self) -> None:
        value = self.max_attempts
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ConfigError(f"Repair.max_attempts must be an int >= 0, got {value!r}")


@value_class
class NormalizedSchema:
    """A schema ready to be sent and to validate replies.

    Attributes:
        name: The name the schema is sent under.
        json_schema: The JSON Schema sent to the provider: local `$ref`s inlined where
            the schema is not recursive, and, for pydantic models in strict mode,
            brought into the strict subset.
        strict: Whether the provider is asked for strict enforcement.
        description: What the output is, when known.
        model: The pydantic model (or other class) replies validate into; `None` when
            they validate with `jsonschema` to plain values.
        warnings: Notices about how the schema will be sent (e.g. strict mode off).
    """

    name: str
    json_schema: Mapping[str, Any]
    strict: bool = True
    description: str | None = None
    model: Any | None = field(default=None, repr=False)
    warnings: tuple[str, ...] = ()
    _validator: Any | None = field(default=None, repr=False, compare=False)

    def validate(self, text: str) -> tuple[Any | None, list[str]]:
        """Parse and validate a reply.

        The JSON is taken from the text as is when it parses, otherwise extracted from
        the surrounding prose or code fence (see `extract_json`).

        Args:
            text: The model's reply.

        Returns:
            `(value, [])` when the reply validates — a model instance for pydantic
            schemas, a plain JSON value for mappings — else `(None, errors)` with one
            readable line per problem.
        """
        try:
            candidate = extract_json(text)
            value = json.loads(candidate)
        except ValueError as exc:
            return None, [_clip(str(exc))]
        if self.model is not None and self._validator is None:
            return _validate_model(self.model, candidate)
        validator = self._validator
        assert validator is not None
        errors = sorted(validator.iter_errors(value), key=lambda e: _path(e.absolute_path))
        if errors:
            return None, [_clip(f"{_path(e.absolute_path)}: {e.message}") for e in errors]
        return value, []


@value_class
class StructuredPlan:
    """How one target will be asked for structured output.

    Attributes:
        schema: The normalized schema.
        mechanism: The mechanism chosen for the target.
        response_format: What goes in `GenerationRequest.response_format`.
        warnings: Notices for the result: a downgrade below `json_schema`, or strict
            mode turned off for a `json_schema` target.
    """

    schema: NormalizedSchema
    mechanism: Mechanism
    response_format: Mapping[str, Any] | None
    warnings: tuple[str, ...] = ()

    def messages(self, messages: Sequence[Message]) -> tuple[Message, ...]:
        """The conversation to send: `with_instructions` for this plan's mechanism."""
        return with_instructions(messages, self.schema, self.mechanism)


def normalize_schema(
    schema: SchemaSpec | Mapping[str, Any] | SupportsJSONSchema,
) -> NormalizedSchema:
    """Turn any accepted `schema=` value into a `NormalizedSchema`.

    Args:
        schema: A pydantic model class, anything with `model_json_schema()`, a JSON
            Schema mapping, or a `SchemaSpec` wrapping one of those.

    Returns:
        The normalized schema.

    Raises:
        ConfigError: If the value is none of those, its schema is not a valid JSON
            Schema, or validating it needs `jsonschema` and that is not installed.
    """
    spec = schema if isinstance(schema, SchemaSpec) else SchemaSpec(schema)
    source = spec.schema
    warnings: list[str] = []
    if isinstance(source, Mapping):
        raw = copy.deepcopy(dict(source))
        model = None
        default_name = raw.get("title") if isinstance(raw.get("title"), str) else None
        json_schema = inline_refs(raw)
    else:
        try:
            generated = source.model_json_schema()
        except Exception as exc:
            raise ConfigError(
                f"model_json_schema() of {_label(source)} failed: {type(exc).__name__}: {exc}"
            ) from exc
        if not isinstance(generated, Mapping):
            raise ConfigError(f"model_json_schema() of {_label(source)} did not return a mapping")
        raw = copy.deepcopy(dict(generated))
        model = source
        default_name = getattr(source, "__name__", None)
        json_schema = strip_titles(inline_refs(raw))
    name = spec.name or (default_name if default_name and _NAME.match(default_name) else "output")
    description = spec.description
    if description is None and isinstance(raw.get("description"), str):
        description = raw["description"]
    strict = spec.strict
    if strict:
        if model is not None:
            json_schema = to_strict(json_schema)
        issues = strict_issues(json_schema)
        if issues:
            strict = False
            warnings.append(
                f"schema {name!r} is outside strict mode's subset ({issues[0]}"
                + (f", and {len(issues) - 1} more" if len(issues) > 1 else "")
                + "); it is sent with strict mode off"
            )
    validator = None
    if model is None or not callable(getattr(model, "model_validate_json", None)):
        validator = _json_schema_validator(raw, name)
        model = None
    return NormalizedSchema(
        name=name,
        json_schema=json_schema,
        strict=strict,
        description=description,
        model=model,
        warnings=tuple(warnings),
        _validator=validator,
    )


def choose_mechanism(
    capabilities: ModelCapabilities,
    provider_id: str,
    *,
    defaults: ModelCapabilities | None = None,
) -> tuple[Mechanism, list[str]]:
    """Pick the strongest structured-output mechanism a target supports.

    A capability counts only when it is known to be `True`. Fields nobody knows fall
    back to what the engine enforces for any model it serves (its adapter class's
    `AdapterProfile.structured`: constrained decoding is a property of the engine, not
    of the weights); still unknown means unavailable.

    Args:
        capabilities: The target model's assembled capabilities.
        provider_id: The engine id (the adapter's `provider_id`, e.g. `"llama.cpp"`,
            not an instance alias), used in warnings and, when `defaults` is not
            given, to find the engine's profile in the default registry.
        defaults: The engine's structured-output defaults (the client passes its
            adapter class's `profile.structured`).

    Returns:
        The mechanism, and warnings to put on the result: one when the mechanism is
        weaker than `json_schema`, since then the provider does not enforce the schema.
    """
    if defaults is None:
        defaults = _profile_structured(provider_id.strip().lower()) or ModelCapabilities()

    def has(name: str) -> bool:
        value = getattr(capabilities, name)
        return bool(getattr(defaults, name)) if value is None else bool(value)

    if has("grammar"):
        return "grammar", []
    if has("json_schema"):
        return "json_schema", []
    if has("json_mode"):
        return "json_mode", [
            f"{provider_id}: structured output enforced by json_mode (the provider guarantees "
            "JSON, not the schema); validated client-side"
        ]
    return "prompt", [
        f"{provider_id}: structured output requested in the prompt (the provider enforces "
        "neither JSON nor the schema); validated client-side"
    ]


def _profile_structured(provider_id: str) -> ModelCapabilities | None:
    """The structured-output defaults the default registry's adapter class declares."""
    from .._adapters.registry import default_registry

    registry = default_registry()
    if provider_id not in registry:
        return None
    return registry.adapter_class(provider_id).profile.structured


def response_format_for(mechanism: Mechanism, schema: NormalizedSchema) -> Mapping[str, Any] | None:
    """The neutral `GenerationRequest.response_format` for a mechanism.

    `grammar` and `json_schema` both send `{"type": "json_schema", "name", "schema",
    "strict"}`: the engines that enforce with a grammar (llama.cpp, vLLM) take the JSON
    Schema and compile it themselves, and their adapters put it in the engine's own
    field. `json_mode` sends `{"type": "json_object"}`; `prompt` sends nothing.

    Args:
        mechanism: The chosen mechanism.
        schema: The normalized schema.

    Returns:
        The response format, or `None` for `prompt`.

    Raises:
        ConfigError: On an unknown mechanism.
    """
    if mechanism in ("grammar", "json_schema"):
        out: dict[str, Any] = {
            "type": "json_schema",
            "name": schema.name,
            "schema": copy.deepcopy(dict(schema.json_schema)),
            "strict": schema.strict,
        }
        if schema.description:
            out["description"] = schema.description
        return out
    if mechanism == "json_mode":
        return {"type": "json_object"}
    if mechanism == "prompt":
        return None
    raise ConfigError(f"unknown structured-output mechanism {mechanism!r}")


def plan_structured(
    schema: SchemaSpec | Mapping[str, Any] | SupportsJSONSchema | NormalizedSchema,
    capabilities: ModelCapabilities,
    provider_id: str,
    *,
    defaults: ModelCapabilities | None = None,
) -> StructuredPlan:
    """Normalize a schema and plan how one target is asked for it.

    Args:
        schema: Any accepted `schema=` value, or an already normalized schema.
        capabilities: The target model's capabilities.
        provider_id: The target's engine id (see `choose_mechanism`).
        defaults: The engine's structured-output defaults (see `choose_mechanism`).

    Returns:
        The plan: mechanism, response format and the warnings for the result.
    """
    normalized = schema if isinstance(schema, NormalizedSchema) else normalize_schema(schema)
    mechanism, warnings = choose_mechanism(capabilities, provider_id, defaults=defaults)
    if mechanism in ("grammar", "json_schema"):
        warnings.extend(normalized.warnings)
    return StructuredPlan(
        schema=normalized,
        mechanism=mechanism,
        response_format=response_format_for(mechanism, normalized),
        warnings=tuple(warnings),
    )


def schema_instructions(schema: NormalizedSchema) -> str:
    """The system-prompt text asking for JSON that satisfies `schema`.

    Used by the `prompt` mechanism, and by `json_mode` as reinforcement (OpenAI's JSON
    mode also refuses a conversation that never mentions JSON).
    """
    about = f" ({schema.description})" if schema.description else ""
    return (
        f"Reply with a single JSON value{about} that satisfies the JSON Schema below, and "
        "nothing else: no explanation, no Markdown code fence.\n\n"
        f"JSON Schema {schema.name!r}:\n"
        f"{json.dumps(dict(schema.json_schema), indent=2, ensure_ascii=False)}"
    )


def with_instructions(
    messages: Sequence[Message], schema: NormalizedSchema, mechanism: Mechanism
) -> tuple[Message, ...]:
    """The conversation with the schema instructions added, where the mechanism needs them.

    For `prompt` and `json_mode`, a system message carrying `schema_instructions` is
    inserted after any leading system messages; `grammar` and `json_schema` send the
    schema in the request itself, so the conversation is returned unchanged.

    Args:
        messages: The normalized conversation.
        schema: The normalized schema.
        mechanism: The chosen mechanism.

    Returns:
        The conversation to send.
    """
    msgs = tuple(messages)
    if mechanism not in ("prompt", "json_mode"):
        return msgs
    at = 0
    while at < len(msgs) and msgs[at].role == "system":
        at += 1
    return (*msgs[:at], Message.system(schema_instructions(schema)), *msgs[at:])


def repair_messages(text: str, errors: Sequence[str]) -> tuple[Message, ...]:
    """The turn appended to the conversation for a repair re-run.

    The invalid reply goes back as the assistant's message (skipped when empty, since
    several providers reject empty assistant messages), followed by a user message
    listing the validation errors and asking for a corrected reply.

    Args:
        text: The reply that failed validation.
        errors: Its validation errors.

    Returns:
        The messages to append to the conversation the failed attempt was sent.
    """
    listed = "\n".join(f"- {e}" for e in errors) or "- the reply did not validate"
    if text.strip():
        opening = "Your previous reply does not satisfy the required JSON Schema."
        turn: tuple[Message, ...] = (Message.assistant(text),)
    else:
        opening = "Your previous reply was empty; it must be JSON satisfying the schema."
        turn = ()
    feedback = (
        f"{opening}\n\nValidation errors:\n{listed}\n\n"
        "Reply again with only the corrected JSON value, and nothing else."
    )
    return (*turn, Message.user(feedback))


_THINK = re.compile(r"<think>.*?</think>", re.S | re.I)
_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[ \t]*\n(.*?)```", re.S)


def extract_json(text: str) -> str:
    """Find the JSON value in a reply that may wrap it in prose or a code fence.

    In order: the whole text, when it parses as JSON; the first fenced block (```json or a
    bare fence) that parses; the first JSON object or array that parses, scanning from
    each `{` or `[`. `<think>` blocks are ignored.

    Args:
        text: The reply.

    Returns:
        The JSON text.

    Raises:
        ValueError: If the reply holds no JSON object or array.
    """
    stripped = text.strip()
    try:
        json.loads(stripped)
    except ValueError as exc:
        whole_error = exc
    else:
        return stripped
    body = _THINK.sub("", text)
    if _parses(body.strip()):
        return body.strip()
    for match in _FENCE.finditer(body):
        if match.group(1).lower() in ("", "json", "jsonc", "json5") and _parses(
            match.group(2).strip()
        ):
            return match.group(2).strip()
    decoder = json.JSONDecoder()
    for match in re.finditer(r"[{\[]", body):
        try:
            _, end = decoder.raw_decode(body, match.start())
        except ValueError:
            continue
        return body[match.start() : end]
    if not stripped:
        raise ValueError("the reply is empty")
    if stripped[0] in "{[":
        raise ValueError(f"the reply is not valid JSON: {whole_error}")
    raise ValueError("no JSON object or array found in the reply")


# --- JSON Schema helpers ---------------------------------------------------------------

_SUBSCHEMA = keywords.ONE
_SUBSCHEMA_LISTS = keywords.LISTS
_SUBSCHEMA_MAPS = keywords.MAPS


def _map_schema(node: Any, visit: Callable[[dict[str, Any]], Any]) -> Any:
    """Rebuild a schema bottom-up, applying `visit` to every (sub)schema object."""
    if not isinstance(node, Mapping):
        return copy.deepcopy(node)
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _SUBSCHEMA and isinstance(value, Mapping):
            out[key] = _map_schema(value, visit)
        elif key in _SUBSCHEMA_LISTS and isinstance(value, list):
            out[key] = [_map_schema(v, visit) for v in value]
        elif key in _SUBSCHEMA_MAPS and isinstance(value, Mapping):
            out[key] = {name: _map_schema(v, visit) for name, v in value.items()}
        else:
            out[key] = copy.deepcopy(value)
    return visit(out)


def _subschemas(node: Mapping[str, Any]) -> Iterable[Any]:
    """The direct subschemas of a schema object."""
    for key, value in node.items():
        if key in _SUBSCHEMA and isinstance(value, Mapping):
            yield value
        elif key in _SUBSCHEMA_LISTS and isinstance(value, list):
            yield from value
        elif key in _SUBSCHEMA_MAPS and isinstance(value, Mapping):
            yield from value.values()


def _local_ref(ref: Any) -> tuple[str, str] | None:
    """`("$defs", name)` for a local definition reference, else `None`."""
    if not isinstance(ref, str):
        return None
    for container in ("$defs", "definitions"):
        prefix = f"#/{container}/"
        if ref.startswith(prefix) and "/" not in ref[len(prefix) :]:
            return container, ref[len(prefix) :].replace("~1", "/").replace("~0", "~")
    return None


def inline_refs(schema: Mapping[str, Any]) -> dict[str, Any]:
    """Replace local `$ref`s to `$defs` (or `definitions`) with the definitions.

    Definitions that refer to themselves, directly or through others, cannot be
    inlined; references to them stay, and they alone are kept under the root's
    `$defs`/`definitions`. Keywords beside a `$ref` are merged over the definition, and
    an `allOf` of a single reference is unwrapped the same way.

    Args:
        schema: A JSON Schema.

    Returns:
        A new schema; the input is not modified.
    """
    schema = _map_schema(schema, _unwrap_single_all_of)
    defs: dict[tuple[str, str], Any] = {}
    for container in ("$defs", "definitions"):
        table = schema.get(container)
        if isinstance(table, Mapping):
            for name, body in table.items():
                defs[(container, name)] = body
    if not defs:
        return dict(schema)

    def refs_in(node: Any) -> set[tuple[str, str]]:
        found: set[tuple[str, str]] = set()
        if isinstance(node, Mapping):
            target = _local_ref(node.get("$ref"))
            if target is not None and target in defs:
                found.add(target)
            for sub in _subschemas(node):
                found |= refs_in(sub)
        return found

    graph = {key: refs_in(body) for key, body in defs.items()}
    recursive = {key for key in defs if _reaches(graph, key, key)}
    resolved: dict[tuple[str, str], Any] = {}

    def resolve(key: tuple[str, str]) -> Any:
        if key not in resolved:
            resolved[key] = expand(defs[key])
        return resolved[key]

    def expand(node: Any) -> Any:
        return _map_schema(node, substitute)

    def substitute(node: dict[str, Any]) -> Any:
        target = _local_ref(node.get("$ref"))
        if target is None or target not in defs or target in recursive:
            return node
        siblings = {k: v for k, v in node.items() if k != "$ref"}
        return {**copy.deepcopy(resolve(target)), **siblings}

    body = {k: v for k, v in schema.items() if k not in ("$defs", "definitions")}
    out: dict[str, Any] = expand(body)
    if isinstance(out, dict):
        for container in ("$defs", "definitions"):
            kept = {name: resolve((c, name)) for (c, name) in recursive if c == container}
            if kept:
                out[container] = dict(sorted(kept.items()))
    return out


def _unwrap_single_all_of(node: dict[str, Any]) -> dict[str, Any]:
    """`{"allOf": [{"$ref": r}], ...}` as `{"$ref": r, ...}` (older pydantic's wrapping)."""
    all_of = node.get("allOf")
    if (
        isinstance(all_of, list)
        and len(all_of) == 1
        and isinstance(all_of[0], Mapping)
        and set(all_of[0]) == {"$ref"}
    ):
        rest = {k: v for k, v in node.items() if k != "allOf"}
        return {"$ref": all_of[0]["$ref"], **rest}
    return node


def _reaches(
    graph: Mapping[tuple[str, str], set[tuple[str, str]]],
    start: tuple[str, str],
    goal: tuple[str, str],
) -> bool:
    seen: set[tuple[str, str]] = set()
    stack = list(graph.get(start, ()))
    while stack:
        key = stack.pop()
        if key == goal:
            return True
        if key not in seen:
            seen.add(key)
            stack.extend(graph.get(key, ()))
    return False


def strip_titles(schema: Mapping[str, Any]) -> dict[str, Any]:
    """Drop the `title` keyword from every (sub)schema.

    pydantic titles every model and field after its Python name; providers gain nothing
    from them and they cost tokens. Only the keyword goes: a property named `title` is
    kept.
    """

    def drop(node: dict[str, Any]) -> dict[str, Any]:
        if isinstance(node.get("title"), str):
            del node["title"]
        return node

    return dict(_map_schema(schema, drop))


def to_strict(schema: Mapping[str, Any]) -> dict[str, Any]:
    """Bring a generated schema into strict mode's subset.

    Every object schema lists all its properties as required and sets
    `additionalProperties: false` when it said nothing; defaults are dropped, since a
    required property has no use for one. Validation stays with the pydantic model,
    which accepts everything this schema allows.
    """

    def tighten(node: dict[str, Any]) -> dict[str, Any]:
        node.pop("default", None)
        props = node.get("properties")
        if isinstance(props, Mapping) or node.get("type") == "object":
            if "additionalProperties" not in node:
                node["additionalProperties"] = False
            node["required"] = list(props) if isinstance(props, Mapping) else []
        return node

    return dict(_map_schema(schema, tighten))


def strict_issues(schema: Mapping[str, Any]) -> list[str]:
    """Why a schema is outside strict mode's subset; empty when it is inside.

    Strict mode (OpenAI's structured outputs) needs every object schema to list all its
    properties as required and to set `additionalProperties: false`, and the root to be
    an object.
    """
    issues: list[str] = []
    if schema.get("type") != "object":
        issues.append("the root is not an object")

    def check(node: Any, path: str) -> None:
        if not isinstance(node, Mapping):
            return
        props = node.get("properties")
        if isinstance(props, Mapping) or node.get("type") == "object":
            if node.get("additionalProperties") is not False:
                issues.append(f"{path} allows additional properties")
            missing = [p for p in (props or {}) if p not in (node.get("required") or ())]
            if missing:
                issues.append(f"{path} does not require {', '.join(map(repr, missing))}")
        for key, value in node.items():
            if key in _SUBSCHEMA and isinstance(value, Mapping):
                check(value, f"{path}.{key}")
            elif key in _SUBSCHEMA_LISTS and isinstance(value, list):
                for i, sub in enumerate(value):
                    check(sub, f"{path}.{key}[{i}]")
            elif key in _SUBSCHEMA_MAPS and isinstance(value, Mapping):
                for name, sub in value.items():
                    check(sub, f"{path}.{key}.{name}")

    check(schema, "$")
    return issues


# --- internals -------------------------------------------------------------------------


def _json_schema_validator(schema: Mapping[str, Any], name: str) -> Any:
    """A `jsonschema` validator for `schema`, checked to be a valid schema."""
    try:
        jsonschema: Any = importlib.import_module("jsonschema")
    except ImportError:
        raise ConfigError(
            f"validating replies against the JSON Schema {name!r} needs the jsonschema "
            "package (pip install jsonschema), or pass a pydantic model as schema="
        ) from None
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except jsonschema.exceptions.SchemaError as exc:
        raise ConfigError(f"schema {name!r} is not a valid JSON Schema: {exc.message}") from None
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def _validate_model(model: Any, candidate: str) -> tuple[Any | None, list[str]]:
    from pydantic import ValidationError

    try:
        return model.model_validate_json(candidate), []
    except ValidationError as exc:
        return None, [
            _clip(f"{_path(err['loc'])}: {err['msg']}") for err in exc.errors(include_url=False)
        ]


def _path(parts: Iterable[Any]) -> str:
    out = "$"
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def _parses(text: str) -> bool:
    if not text or text[0] not in "{[":
        return False
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def _clip(text: str) -> str:
    return text if len(text) <= _ERROR_MAX_CHARS else text[: _ERROR_MAX_CHARS - 1] + "…"


def _label(source: Any) -> str:
    return str(getattr(source, "__name__", None) or type(source).__name__)
