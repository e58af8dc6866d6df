"""Structured output: schema normalization, validation, extraction, mechanism choice."""

from __future__ import annotations

import copy
import importlib
import json
import sys
from typing import Any, ClassVar, Literal

import pytest
from pydantic import BaseModel, ConfigDict, Field

from anyinfer._adapters.registry import ProviderRegistry
from anyinfer._errors import ConfigError
from anyinfer._knowledge.capabilities import ModelCapabilities
from anyinfer._messages import Message
from anyinfer._structured.output import (
    MECHANISMS,
    NormalizedSchema,
    Repair,
    SchemaSpec,
    SupportsJSONSchema,
    choose_mechanism,
    extract_json,
    inline_refs,
    normalize_schema,
    plan_structured,
    repair_messages,
    response_format_for,
    schema_instructions,
    strict_issues,
    strip_titles,
    with_instructions,
)
from anyinfer._types import Mechanism

jsonschema: Any = importlib.import_module("jsonschema")  # no type stubs installed


class Address(BaseModel):
    street: str
    postcode: str | None = None


class City(BaseModel):
    """A city and where its town hall is."""

    name: str
    population: int = Field(ge=0)
    kind: Literal["city", "town"] = "city"
    town_hall: Address


class Tagged(BaseModel):
    labels: dict[str, str]


class Node(BaseModel):
    value: int
    children: list[Node] = []


class Closed(BaseModel):
    model_config = ConfigDict(extra="forbid")
    a: int
    b: str | None


CITY_JSON = '{"name": "Lyon", "population": 520000, "town_hall": {"street": "Place de la Comédie"}}'


class DuckSchema:
    """Something with model_json_schema() that is not a pydantic model."""

    schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {"n": {"type": "integer"}},
        "required": ["n"],
        "additionalProperties": False,
    }

    @classmethod
    def model_json_schema(cls) -> dict[str, Any]:
        return cls.schema


# --- normalize_schema -----------------------------------------------------------------


def test_a_pydantic_model_is_inlined_untitled_and_strict() -> None:
    n = normalize_schema(City)
    assert n.name == "City" and n.strict and n.model is City and n.warnings == ()
    assert n.description == "A city and where its town hall is."
    assert n.json_schema == {
        "type": "object",
        "description": "A city and where its town hall is.",
        "properties": {
            "name": {"type": "string"},
            "population": {"type": "integer", "minimum": 0},
            "kind": {"type": "string", "enum": ["city", "town"]},
            "town_hall": {
                "type": "object",
                "properties": {
                    "street": {"type": "string"},
                    "postcode": {"anyOf": [{"type": "string"}, {"type": "null"}]},
                },
                "required": ["street", "postcode"],
                "additionalProperties": False,
            },
        },
        "required": ["name", "population", "kind", "town_hall"],
        "additionalProperties": False,
    }
    assert strict_issues(n.json_schema) == []
    jsonschema.Draft202012Validator.check_schema(n.json_schema)


def test_strict_off_sends_the_schema_as_generated() -> None:
    n = normalize_schema(SchemaSpec(City, name="city_v2", strict=False))
    assert n.name == "city_v2" and not n.strict and n.warnings == ()
    assert n.json_schema["required"] == ["name", "population", "town_hall"]
    assert n.json_schema["properties"]["kind"]["default"] == "city"
    assert "additionalProperties" not in n.json_schema


def test_a_model_outside_the_strict_subset_is_sent_non_strict_with_a_warning() -> None:
    n = normalize_schema(Tagged)
    assert not n.strict
    assert n.warnings == (
        "schema 'Tagged' is outside strict mode's subset ($.properties.labels allows "
        "additional properties); it is sent with strict mode off",
    )


def test_recursive_models_keep_their_definitions() -> None:
    n = normalize_schema(Node)
    assert n.json_schema["$defs"]["Node"]["properties"]["children"]["items"] == {
        "$ref": "#/$defs/Node"
    }
    jsonschema.Draft202012Validator.check_schema(n.json_schema)
    value, errors = n.validate('{"value": 1, "children": [{"value": 2}]}')
    assert errors == [] and value == Node(value=1, children=[Node(value=2)])


def test_pydantic_replies_validate_to_model_instances() -> None:
    n = normalize_schema(City)
    value, errors = n.validate(CITY_JSON)
    assert errors == []
    assert isinstance(value, City) and isinstance(value.town_hall, Address)
    assert value.kind == "city" and value.population == 520000


def test_pydantic_violations_list_each_error_with_its_path() -> None:
    n = normalize_schema(City)
    value, errors = n.validate('{"name": "Lyon", "population": -3, "town_hall": {}}')
    assert value is None
    assert errors == [
        "$.population: Input should be greater than or equal to 0",
        "$.town_hall.street: Field required",
    ]


def test_a_mapping_validates_with_jsonschema_to_plain_values() -> None:
    schema = {
        "title": "weather_report",
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "temps": {"type": "array", "items": {"type": "number"}},
        },
        "required": ["city", "temps"],
        "additionalProperties": False,
    }
    n = normalize_schema(schema)
    assert n.name == "weather_report" and n.strict and n.model is None
    assert n.json_schema == schema
    value, errors = n.validate('{"city": "Oslo", "temps": [1.5, -2]}')
    assert errors == [] and value == {"city": "Oslo", "temps": [1.5, -2]}
    value, errors = n.validate('{"city": 3, "temps": [1, "x"], "extra": true}')
    assert value is None
    assert errors == [
        "$: Additional properties are not allowed ('extra' was unexpected)",
        "$.city: 3 is not of type 'string'",
        "$.temps[1]: 'x' is not of type 'number'",
    ]


def test_a_mapping_is_not_modified_and_its_refs_are_inlined() -> None:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {"home": {"$ref": "#/definitions/Place"}},
        "required": ["home"],
        "additionalProperties": False,
        "definitions": {
            "Place": {
                "type": "object",
                "properties": {"x": {"type": "number"}},
                "required": ["x"],
                "additionalProperties": False,
            }
        },
    }
    before = copy.deepcopy(schema)
    n = normalize_schema(schema)
    assert schema == before
    assert n.json_schema["properties"]["home"] == before["definitions"]["Place"]
    assert "definitions" not in n.json_schema
    assert n.strict
    assert n.validate('{"home": {"x": "no"}}')[1] == ["$.home.x: 'no' is not of type 'number'"]


def test_a_mapping_outside_the_strict_subset_warns() -> None:
    n = normalize_schema({"type": "object", "properties": {"a": {"type": "integer"}}})
    assert n.name == "output" and not n.strict
    assert "allows additional properties" in n.warnings[0]
    assert normalize_schema(SchemaSpec({"type": "array"}, strict=False)).warnings == ()


def test_an_invalid_mapping_schema_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="not a valid JSON Schema"):
        normalize_schema({"type": "objekt"})


def test_mappings_need_jsonschema(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "jsonschema", None)
    with pytest.raises(ConfigError, match=r"needs the jsonschema package"):
        normalize_schema({"type": "object"})
    assert normalize_schema(City).model is City  # pydantic models do not


def test_anything_with_model_json_schema_validates_with_jsonschema() -> None:
    assert isinstance(DuckSchema, SupportsJSONSchema)
    n = normalize_schema(DuckSchema)
    assert n.name == "DuckSchema" and n.model is None and n.strict
    assert n.validate('{"n": 2}') == ({"n": 2}, [])
    assert n.validate('{"n": "2"}') == (None, ["$.n: '2' is not of type 'integer'"])


def test_a_failing_model_json_schema_is_a_config_error() -> None:
    class Broken:
        @classmethod
        def model_json_schema(cls) -> dict[str, Any]:
            raise RuntimeError("nope")

    with pytest.raises(ConfigError, match="model_json_schema\\(\\) of Broken failed"):
        normalize_schema(Broken)


def test_schema_spec_checks_its_fields() -> None:
    with pytest.raises(ConfigError, match="schema name"):
        SchemaSpec(City, name="has space")
    with pytest.raises(ConfigError, match="must be a JSON Schema mapping"):
        SchemaSpec(42)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="must not itself be a SchemaSpec"):
        SchemaSpec(SchemaSpec(City))  # type: ignore[arg-type]
    n = normalize_schema(SchemaSpec({"type": "object"}, description="The answer."))
    assert n.description == "The answer."


def test_invalid_default_names_fall_back_to_output() -> None:
    assert normalize_schema({"title": "Not valid!", "type": "object"}).name == "output"


def test_repair_budget_is_validated() -> None:
    assert Repair().max_attempts == 1
    assert Repair(0).max_attempts == 0
    for bad in (-1, True, 1.5, "2"):
        with pytest.raises(ConfigError, match="max_attempts"):
            Repair(bad)  # type: ignore[arg-type]


def test_strict_required_fields_may_still_be_null() -> None:
    n = normalize_schema(Closed)
    assert n.strict and n.json_schema["required"] == ["a", "b"]
    assert n.validate('{"a": 1, "b": null}') == (Closed(a=1, b=None), [])


# --- validation of replies ------------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "error"),
    [
        ("", "the reply is empty"),
        ("Sorry, I cannot help with that.", "no JSON object or array found in the reply"),
        ('{"name": "Lyon",', "the reply is not valid JSON: Expecting property name enclosed"),
    ],
)
def test_replies_that_hold_no_json(reply: str, error: str) -> None:
    value, errors = normalize_schema(City).validate(reply)
    assert value is None and len(errors) == 1 and errors[0].startswith(error)


def test_replies_are_extracted_before_validation() -> None:
    n = normalize_schema(City)
    value, errors = n.validate(f"Here you go:\n```json\n{CITY_JSON}\n```\nAnything else?")
    assert errors == [] and isinstance(value, City)


def test_long_errors_are_clipped() -> None:
    n = normalize_schema({"type": "object", "properties": {"s": {"type": "integer"}}})
    _, errors = n.validate(json.dumps({"s": "x" * 1000}))
    assert len(errors[0]) == 300 and errors[0].endswith("…")


# --- extract_json ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a": 1}', '{"a": 1}'),
        ("  [1, 2]\n", "[1, 2]"),
        ("42", "42"),
        ('```json\n{"a": {"b": [1]}}\n```', '{"a": {"b": [1]}}'),
        ('```\n{"a": 1}\n```', '{"a": 1}'),
        ('Sure!\n```JSON\n{"a": 1}\n```\nDone.', '{"a": 1}'),
        ('```python\nx = {1: 2}\n```\n```json\n{"a": 1}\n```', '{"a": 1}'),
        ('The result is {"a": "}"} as requested.', '{"a": "}"}'),
        ('Options [see below]: {"pick": [1, 2]}', '{"pick": [1, 2]}'),
        ('<think>maybe {"draft": true}</think>\n{"final": 1}', '{"final": 1}'),
        ('<think>hmm</think>{"a": 1}', '{"a": 1}'),
    ],
)
def test_extract_json(text: str, expected: str) -> None:
    assert extract_json(text) == expected


@pytest.mark.parametrize("text", ["", "   ", "no json here", "{broken", "{'single': 1}"])
def test_extract_json_raises_when_there_is_none(text: str) -> None:
    with pytest.raises(ValueError):
        extract_json(text)


# --- mechanism choice -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("caps", "provider", "mechanism", "warned"),
    [
        (ModelCapabilities(grammar=True, json_schema=True, json_mode=True), "x", "grammar", False),
        (ModelCapabilities(grammar=False, json_schema=True), "openai", "json_schema", False),
        (ModelCapabilities(json_schema=False, json_mode=True), "x", "json_mode", True),
        (ModelCapabilities(json_schema=False, json_mode=False), "x", "prompt", True),
        (ModelCapabilities(), "some-new-engine", "prompt", True),
        (ModelCapabilities(), "anthropic", "prompt", True),
        # engine defaults fill what nobody knows ...
        (ModelCapabilities(), "llama.cpp", "grammar", False),
        (ModelCapabilities(), "vllm", "grammar", False),
        (ModelCapabilities(), "ollama", "json_schema", False),
        (ModelCapabilities(), "Gemini", "json_schema", False),
        (ModelCapabilities(), "lmstudio", "json_schema", False),
        # ... and never override what somebody does know.
        (ModelCapabilities(grammar=False), "llama.cpp", "json_schema", False),
        (ModelCapabilities(json_schema=False), "ollama", "json_mode", True),
        (ModelCapabilities(json_schema=False), "lmstudio", "prompt", True),
        (ModelCapabilities(json_schema=True), "anthropic", "json_schema", False),
    ],
)
def test_choose_mechanism(
    caps: ModelCapabilities, provider: str, mechanism: str, warned: bool
) -> None:
    chosen, warnings = choose_mechanism(caps, provider)
    assert chosen == mechanism
    assert bool(warnings) == warned
    if warned:
        assert warnings[0].startswith(f"{provider}: structured output ")
        assert warnings[0].endswith("validated client-side")


def test_downgrade_warnings_say_what_is_enforced() -> None:
    _, mode = choose_mechanism(ModelCapabilities(json_mode=True), "x")
    _, prompt = choose_mechanism(ModelCapabilities(), "x")
    assert mode == [
        "x: structured output enforced by json_mode (the provider guarantees JSON, not the "
        "schema); validated client-side"
    ]
    assert prompt == [
        "x: structured output requested in the prompt (the provider enforces neither JSON "
        "nor the schema); validated client-side"
    ]


def test_engine_defaults_only_claim_known_mechanisms() -> None:
    assert MECHANISMS == ("grammar", "json_schema", "json_mode", "prompt")
    registry = ProviderRegistry(entry_points=False)
    declared = [registry.adapter_class(p).profile.structured for p in registry.ids()]
    assert any(declared)
    for caps in declared:
        if caps is not None:
            assert set(caps.known()) <= {"grammar", "json_schema", "json_mode"}


# --- response formats and plans -------------------------------------------------------


def test_response_format_shapes() -> None:
    n = normalize_schema(City)
    expected = {
        "type": "json_schema",
        "name": "City",
        "schema": dict(n.json_schema),
        "strict": True,
        "description": "A city and where its town hall is.",
    }
    assert response_format_for("json_schema", n) == expected
    assert response_format_for("grammar", n) == expected
    assert response_format_for("json_mode", n) == {"type": "json_object"}
    assert response_format_for("prompt", n) is None
    with pytest.raises(ConfigError, match="unknown structured-output mechanism"):
        response_format_for("telepathy", n)  # type: ignore[arg-type]
    fmt = response_format_for("json_schema", n)
    assert fmt is not None
    fmt["schema"]["properties"].clear()
    assert n.json_schema["properties"], "the response format holds a copy"


def test_a_plan_carries_strict_warnings_only_where_strict_is_sent() -> None:
    enforced = plan_structured(Tagged, ModelCapabilities(json_schema=True), "openai")
    assert enforced.mechanism == "json_schema"
    assert enforced.warnings == enforced.schema.warnings
    assert enforced.response_format is not None and enforced.response_format["strict"] is False
    prompted = plan_structured(Tagged, ModelCapabilities(), "anthropic")
    assert prompted.mechanism == "prompt" and prompted.response_format is None
    assert len(prompted.warnings) == 1 and "requested in the prompt" in prompted.warnings[0]
    again = plan_structured(enforced.schema, ModelCapabilities(), "ollama")
    assert again.schema is enforced.schema


def test_instructions_are_added_for_prompt_and_json_mode_only() -> None:
    n = normalize_schema(City)
    msgs = (Message.system("Be brief."), Message.user("Describe Lyon."))
    enforced: tuple[Mechanism, ...] = ("grammar", "json_schema")
    prompted: tuple[Mechanism, ...] = ("prompt", "json_mode")
    for mechanism in enforced:
        assert with_instructions(msgs, n, mechanism) == msgs
    for mechanism in prompted:
        out = with_instructions(msgs, n, mechanism)
        assert [m.role for m in out] == ["system", "system", "user"]
        assert out[0] == msgs[0] and out[2] == msgs[1]
        assert out[1].text == schema_instructions(n)
    bare = with_instructions((Message.user("hi"),), n, "prompt")
    assert [m.role for m in bare] == ["system", "user"]
    plan = plan_structured(n, ModelCapabilities(json_mode=True), "x")
    assert plan.messages(msgs) == with_instructions(msgs, n, "json_mode")


def test_schema_instructions_carry_the_schema_and_say_json() -> None:
    n = normalize_schema(City)
    text = schema_instructions(n)
    assert "JSON" in text and "'City'" in text
    assert "(A city and where its town hall is.)" in text
    schema_part = text[text.index("{") :]
    assert json.loads(schema_part) == n.json_schema


def test_repair_messages_feed_back_the_reply_and_errors() -> None:
    turn = repair_messages('{"name": 1}', ["$.name: Input should be a valid string"])
    assert [m.role for m in turn] == ["assistant", "user"]
    assert turn[0].text == '{"name": 1}'
    assert "- $.name: Input should be a valid string" in turn[1].text
    assert "only the corrected JSON" in turn[1].text
    empty = repair_messages("  ", ["the reply is empty"])
    assert [m.role for m in empty] == ["user"]
    assert "was empty" in empty[0].text


# --- schema helpers -------------------------------------------------------------------


def test_inline_refs_merges_siblings_and_unwraps_single_all_of() -> None:
    schema = {
        "type": "object",
        "properties": {
            "a": {"$ref": "#/$defs/A", "description": "first"},
            "b": {"allOf": [{"$ref": "#/$defs/A"}], "description": "second"},
            "c": {"$ref": "#/$defs/C"},
            "ext": {"$ref": "https://example.com/schema.json"},
        },
        "$defs": {
            "A": {"type": "string", "description": "an A"},
            "C": {"type": "array", "items": {"$ref": "#/$defs/A"}},
        },
    }
    out = inline_refs(schema)
    assert out["properties"] == {
        "a": {"type": "string", "description": "first"},
        "b": {"type": "string", "description": "second"},
        "c": {"type": "array", "items": {"type": "string", "description": "an A"}},
        "ext": {"$ref": "https://example.com/schema.json"},
    }
    assert "$defs" not in out


def test_inline_refs_keeps_mutually_recursive_definitions() -> None:
    schema = {
        "type": "object",
        "properties": {"root": {"$ref": "#/$defs/Even"}, "leaf": {"$ref": "#/$defs/Leaf"}},
        "$defs": {
            "Even": {"type": "object", "properties": {"next": {"$ref": "#/$defs/Odd"}}},
            "Odd": {"type": "object", "properties": {"next": {"$ref": "#/$defs/Even"}}},
            "Leaf": {"type": "integer"},
        },
    }
    out = inline_refs(schema)
    assert out["properties"] == {"root": {"$ref": "#/$defs/Even"}, "leaf": {"type": "integer"}}
    assert set(out["$defs"]) == {"Even", "Odd"}
    jsonschema.Draft202012Validator.check_schema(out)
    validator = jsonschema.Draft202012Validator(out)
    assert validator.is_valid({"root": {"next": {"next": {}}}, "leaf": 3})


def test_strip_titles_leaves_values_and_property_names_alone() -> None:
    schema = {
        "title": "Root",
        "type": "object",
        "properties": {"title": {"title": "Title", "type": "string", "default": "title"}},
        "examples": [{"title": "kept"}],
    }
    assert strip_titles(schema) == {
        "type": "object",
        "properties": {"title": {"type": "string", "default": "title"}},
        "examples": [{"title": "kept"}],
    }


def test_strict_issues() -> None:
    good = {
        "type": "object",
        "properties": {"a": {"type": "integer"}},
        "required": ["a"],
        "additionalProperties": False,
    }
    assert strict_issues(good) == []
    assert strict_issues({"type": "array", "items": good}) == ["the root is not an object"]
    nested = {**good, "properties": {"a": {"type": "object", "properties": {"x": {}}}}}
    assert strict_issues(nested) == [
        "$.properties.a allows additional properties",
        "$.properties.a does not require 'x'",
    ]


def test_normalized_schema_is_frozen() -> None:
    n = normalize_schema(City)
    assert isinstance(n, NormalizedSchema)
    with pytest.raises(AttributeError):
        n.name = "other"  # type: ignore[misc]
