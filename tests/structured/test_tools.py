"""Tools: schemas derived from signatures, argument validation, and dispatch."""

from __future__ import annotations

import asyncio
import datetime
import json
import subprocess
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from enum import Enum
from typing import Annotated, Any, Literal, Optional

import pytest
from helpers import run
from pydantic import BaseModel, Field
from typing_extensions import TypedDict  # pydantic needs this one on Python < 3.12

from anyinfer._errors import ConfigError, ToolLoopError
from anyinfer._redact import register_secret
from anyinfer._request import ToolSpec
from anyinfer._structured.tools import (
    DEFAULT_MAX_ROUNDS,
    Tool,
    coerce_tools,
    dispatch,
    dispatch_all,
    parse_docstring,
    tool,
)
from anyinfer._types import ToolCall

# --- types the tools below use (module level, so string annotations resolve) -------------


class Unit(Enum):
    CELSIUS = "celsius"
    FAHRENHEIT = "fahrenheit"


class Priority(int, Enum):
    LOW = 1
    HIGH = 2


class Address(BaseModel):
    street: str
    city: str = Field(description="City name")
    postcode: str | None = None


class Order(BaseModel):
    items: list[str]
    ship_to: Address
    gift: bool = False


class Node(BaseModel):
    label: str
    children: list[Node] = []


class Point(TypedDict):
    x: float
    y: float


@dataclass
class Reading:
    sensor: str
    value: float


def walk_refs(node: Any) -> list[str]:
    """Every `$ref` anywhere in a schema."""
    found: list[str] = []
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref":
                found.append(value)
            found.extend(walk_refs(value))
    elif isinstance(node, list):
        for value in node:
            found.extend(walk_refs(value))
    return found


def titles(node: Any) -> list[str]:
    """Every `title` keyword in a schema (not properties that happen to be named title)."""
    found: list[str] = []
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "title" and isinstance(value, str):
                found.append(value)
            elif key == "properties" and isinstance(value, dict):
                for sub in value.values():
                    found.extend(titles(sub))
            else:
                found.extend(titles(value))
    elif isinstance(node, list):
        for value in node:
            found.extend(titles(value))
    return found


# --- schema derivation ----------------------------------------------------------------


def test_nested_pydantic_arguments_match_a_hand_written_schema() -> None:
    @tool
    def place_order(
        order: Order, priority: Priority = Priority.LOW, note: str | None = None
    ) -> str:
        """Place an order for delivery.

        Args:
            order: What to ship, and where.
            priority: How urgent it is.
            note: A message for the courier.
        """
        return "ok"

    expected = {
        "type": "object",
        "properties": {
            "order": {
                "type": "object",
                "description": "What to ship, and where.",
                "properties": {
                    "items": {"type": "array", "items": {"type": "string"}},
                    "ship_to": {
                        "type": "object",
                        "properties": {
                            "street": {"type": "string"},
                            "city": {"type": "string", "description": "City name"},
                            "postcode": {
                                "anyOf": [{"type": "string"}, {"type": "null"}],
                                "default": None,
                            },
                        },
                        "required": ["street", "city"],
                    },
                    "gift": {"type": "boolean", "default": False},
                },
                "required": ["items", "ship_to"],
            },
            "priority": {
                "type": "integer",
                "enum": [1, 2],
                "default": 1,
                "description": "How urgent it is.",
            },
            "note": {
                "anyOf": [{"type": "string"}, {"type": "null"}],
                "default": None,
                "description": "A message for the courier.",
            },
        },
        "required": ["order"],
        "additionalProperties": False,
    }
    assert place_order.spec == ToolSpec(
        name="place_order", description="Place an order for delivery.", parameters=expected
    )
    assert walk_refs(place_order.spec.parameters) == []
    assert titles(place_order.spec.parameters) == []
    json.dumps(place_order.spec.parameters)  # JSON-serializable as sent


def test_scalars_literals_enums_containers_and_defaults() -> None:
    @tool
    def search(
        query: str,
        limit: int = 10,
        threshold: float = 0.5,
        exact: bool = False,
        mode: Literal["fast", "thorough"] = "fast",
        unit: Unit = Unit.CELSIUS,
        tags: list[str] | None = None,
        weights: dict[str, float] | None = None,
        since: Optional[datetime.date] = None,  # noqa: UP045 - Optional is what is tested
        at: datetime.datetime | None = None,
    ) -> list[str]:
        """Search the index."""
        return []

    props = search.spec.parameters["properties"]
    assert search.spec.parameters["required"] == ["query"]
    assert props["query"] == {"type": "string"}
    assert props["limit"] == {"type": "integer", "default": 10}
    assert props["threshold"] == {"type": "number", "default": 0.5}
    assert props["exact"] == {"type": "boolean", "default": False}
    assert props["mode"] == {"type": "string", "enum": ["fast", "thorough"], "default": "fast"}
    assert props["unit"] == {
        "type": "string",
        "enum": ["celsius", "fahrenheit"],
        "default": "celsius",
    }
    assert props["tags"] == {
        "anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}],
        "default": None,
    }
    assert props["weights"] == {
        "anyOf": [{"type": "object", "additionalProperties": {"type": "number"}}, {"type": "null"}],
        "default": None,
    }
    assert props["since"] == {
        "anyOf": [{"type": "string", "format": "date"}, {"type": "null"}],
        "default": None,
    }
    assert props["at"]["anyOf"][0] == {"type": "string", "format": "date-time"}
    assert search.spec.parameters["additionalProperties"] is False


def test_typed_dicts_dataclasses_decimals_and_annotated_constraints() -> None:
    @tool
    def record(
        where: Point,
        reading: Reading,
        amount: Decimal,
        count: Annotated[int, Field(ge=1, le=5, description="Between one and five")],
    ) -> None:
        """Record a reading."""

    props = record.spec.parameters["properties"]
    assert props["where"] == {
        "type": "object",
        "properties": {"x": {"type": "number"}, "y": {"type": "number"}},
        "required": ["x", "y"],
        "additionalProperties": False,  # the tool's extra="forbid" reaches TypedDicts
    }
    assert props["reading"]["properties"] == {
        "sensor": {"type": "string"},
        "value": {"type": "number"},
    }
    assert {"type": "string"} in props["amount"]["anyOf"]
    assert props["count"] == {
        "type": "integer",
        "minimum": 1,
        "maximum": 5,
        "description": "Between one and five",
    }
    assert record.spec.parameters["required"] == ["where", "reading", "amount", "count"]


def test_recursive_models_keep_only_their_own_definitions() -> None:
    @tool
    def draw(tree: Node) -> str:
        """Draw a tree."""
        return ""

    params = draw.spec.parameters
    assert params["properties"]["tree"] == {"$ref": "#/$defs/Node"}
    assert set(params["$defs"]) == {"Node"}
    assert params["$defs"]["Node"]["properties"]["children"]["items"] == {"$ref": "#/$defs/Node"}


def test_a_property_named_title_survives_title_stripping() -> None:
    @tool
    def publish(title: str, body: str = "") -> None:
        """Publish a post."""

    assert publish.spec.parameters["properties"]["title"] == {"type": "string"}
    assert publish.spec.parameters["required"] == ["title"]


def test_no_parameters_gives_an_empty_object_schema() -> None:
    @tool
    def now() -> str:
        """The current time."""
        return "noon"

    assert now.spec.parameters == {
        "type": "object",
        "properties": {},
        "required": [],
        "additionalProperties": False,
    }


def test_decorator_with_arguments_and_overrides() -> None:
    @tool(name="lookup-user", description="Find a user by id.")
    def find(user_id: int) -> str:
        """Ignored docstring."""
        return str(user_id)

    assert isinstance(find, Tool)
    assert find.name == "lookup-user"
    assert find.spec.description == "Find a user by id."
    renamed = tool(find, name="who")
    assert renamed.name == "who" and renamed.func is find.func
    assert tool(find) is find


def test_description_is_the_text_before_the_first_section() -> None:
    @tool
    def convert(amount: float, currency: str) -> float:
        """Convert money between currencies.

        Uses the day's reference rate, which is
        published at noon.

        Args:
            amount: How much to convert. Must be
                positive.
            currency (str): Target ISO code.

        Returns:
            The converted amount.
        """
        return amount

    assert convert.spec.description == (
        "Convert money between currencies.\n\n"
        "Uses the day's reference rate, which is published at noon."
    )
    props = convert.spec.parameters["properties"]
    assert props["amount"]["description"] == "How much to convert. Must be positive."
    assert props["currency"]["description"] == "Target ISO code."


def test_parse_docstring_sections() -> None:
    doc = """Summary line.

    Args:
        a: First.
        b (int, optional): Second,
            continued.
        *rest: Ignored star.

    Raises:
        ValueError: Not an argument.

    Note:
        Also not one.
    """
    text, params = parse_docstring(doc)
    assert text == "Summary line."
    assert params == {"a": "First.", "b": "Second, continued.", "rest": "Ignored star."}
    assert parse_docstring(None) == ("", {})
    assert parse_docstring("Just text.") == ("Just text.", {})


@pytest.mark.parametrize(
    ("define", "needle"),
    [
        (lambda: tool(lambda x: x, name="f"), "no type annotation"),
        (lambda: tool(_takes_args), "*values"),
        (lambda: tool(_takes_kwargs), "**options"),
        (lambda: tool(_takes_lock), "not a supported JSON type"),
        (lambda: tool(_takes_int, name="bad name!"), "must be 1 to 64"),
        (lambda: tool(lambda x: x), "'<lambda>'"),
        (lambda: tool(_unresolvable), "cannot resolve"),
    ],
)
def test_unsupported_signatures_raise_tool_loop_error(define: Any, needle: str) -> None:
    with pytest.raises(ToolLoopError) as info:
        define()
    assert needle in str(info.value)


def _takes_args(*values: int) -> None: ...


def _takes_kwargs(**options: str) -> None: ...


def _takes_lock(lock: threading.Lock) -> None: ...


def _takes_int(n: int) -> None: ...


def _unresolvable(x: NotDefinedAnywhere) -> None: ...  # type: ignore[name-defined]  # noqa: F821


def test_bound_methods_partials_and_callable_objects() -> None:
    class Greeter:
        def __init__(self, greeting: str) -> None:
            self.greeting = greeting

        def greet(self, name: str) -> str:
            """Greet someone."""
            return f"{self.greeting}, {name}"

    class Doubler:
        def __call__(self, n: int) -> int:
            """Double a number."""
            return n * 2

    import functools

    bound = tool(Greeter("Hi").greet)
    assert bound.name == "greet"
    assert list(bound.spec.parameters["properties"]) == ["name"]
    assert bound.call({"name": "Ada"}) == "Hi, Ada"

    doubler = tool(Doubler(), name="double")
    assert doubler.spec.parameters["required"] == ["n"]
    assert doubler.call({"n": "21"}) == 42

    part = tool(functools.partial(_power, exponent=3), name="cube")
    assert part.spec.parameters["required"] == ["base"]
    assert part.call({"base": 2}) == 8


def _power(base: int, exponent: int) -> int:
    return int(base**exponent)


# --- Tool.call ------------------------------------------------------------------------


def test_call_validates_and_coerces_arguments() -> None:
    seen: dict[str, Any] = {}

    @tool
    def ship(order: Order, unit: Unit = Unit.CELSIUS, when: datetime.date | None = None) -> str:
        """Ship."""
        seen.update(order=order, unit=unit, when=when)
        return order.ship_to.city

    result = ship.call(
        {
            "order": {"items": ["tea"], "ship_to": {"street": "1 Rue", "city": "Paris"}},
            "unit": "fahrenheit",
            "when": "2025-03-01",
        }
    )
    assert result == "Paris"
    assert isinstance(seen["order"], Order) and isinstance(seen["order"].ship_to, Address)
    assert seen["unit"] is Unit.FAHRENHEIT
    assert seen["when"] == datetime.date(2025, 3, 1)


def test_call_leaves_the_functions_own_defaults_alone() -> None:
    sentinel: list[int] = []

    def add(item: int, into: list[int] = sentinel) -> int:
        into.append(item)
        return len(into)

    t = tool(add)
    t.call({"item": 1})
    assert sentinel == [1]


def test_call_rejects_bad_arguments_with_every_problem_listed() -> None:
    @tool
    def ship(order: Order, count: int) -> str:
        """Ship."""
        return ""

    with pytest.raises(ValueError) as info:
        ship.call({"order": {"items": "not-a-list"}, "count": "many", "surprise": 1})
    message = str(info.value)
    assert message.startswith("invalid arguments for tool 'ship': ")
    for fragment in (
        "order.items: Input should be a valid list",
        "order.ship_to: Field required",
        "count: Input should be a valid integer",
        "surprise: Extra inputs are not permitted",
    ):
        assert fragment in message
    assert "errors.pydantic.dev" not in message


def test_positional_only_parameters_are_passed_positionally() -> None:
    def scale(value: float, /, factor: float = 2.0) -> float:
        return value * factor

    t = tool(scale)
    assert t.spec.parameters["required"] == ["value"]
    assert t.call({"value": 1.5}) == 3.0
    assert t.call({"value": 1.5, "factor": 3}) == 4.5


def test_async_tools_return_a_coroutine_from_call() -> None:
    @tool
    async def fetch(url: str) -> str:
        """Fetch a URL."""
        return f"got {url}"

    pending = fetch.call({"url": "x"})
    assert asyncio.iscoroutine(pending)
    assert run(pending) == "got x"


def test_a_hand_built_tool_passes_arguments_through() -> None:
    spec = ToolSpec("echo", "Echo.", {"type": "object", "properties": {"v": {}}})
    t = Tool(spec, lambda **kw: kw)
    assert t.call({"v": [1]}) == {"v": [1]}


def test_the_tool_stays_callable_as_the_function() -> None:
    @tool
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    assert add(2, 3) == 5


# --- coerce_tools ---------------------------------------------------------------------


def test_coerce_tools_accepts_tools_callables_and_specs() -> None:
    @tool
    def one(x: int) -> int:
        """One."""
        return x

    def two(y: str) -> str:
        """Two."""
        return y

    bare = ToolSpec("three", "Three.")
    specs, runnable = coerce_tools([one, two, bare])
    assert [s.name for s in specs] == ["one", "two", "three"]
    assert set(runnable) == {"one", "two"}
    assert runnable["one"] is one
    assert runnable["two"].spec.description == "Two."


def test_coerce_tools_rejects_duplicates_and_junk() -> None:
    def same(x: int) -> int:
        return x

    with pytest.raises(ConfigError, match="two tools are named 'same'"):
        coerce_tools([same, ToolSpec("same")])
    with pytest.raises(ConfigError, match="got int"):
        coerce_tools([42])  # type: ignore[list-item]


# --- dispatch -------------------------------------------------------------------------


def test_dispatch_runs_sync_tools_in_a_worker_thread() -> None:
    main = threading.get_ident()
    threads: list[int] = []

    @tool
    def where() -> dict[str, Any]:
        """Where am I."""
        threads.append(threading.get_ident())
        return {"ok": True, "n": 1}

    msg = run(dispatch(ToolCall("c1", "where", {}), {"where": where}))
    assert threads and threads[0] != main
    assert msg.role == "tool" and msg.tool_call_id == "c1" and msg.name == "where"
    assert not msg.is_error
    assert json.loads(msg.text) == {"ok": True, "n": 1}


def test_dispatch_awaits_async_tools_on_the_loop() -> None:
    @tool
    async def later(n: int) -> str:
        """Later."""
        await asyncio.sleep(0)
        return f"n={n}"

    msg = run(dispatch(ToolCall("c2", "later", {"n": 4}), {"later": later}))
    assert msg.text == "n=4" and not msg.is_error


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("plain text", "plain text"),
        (None, "null"),
        (3, "3"),
        ([1, "a"], '[1, "a"]'),
        (
            Address(street="1 Rue", city="Paris"),
            '{"street": "1 Rue", "city": "Paris", "postcode": null}',
        ),
        (Reading("t1", 2.5), '{"sensor": "t1", "value": 2.5}'),
        (
            {"when": datetime.date(2025, 1, 2), "unit": Unit.CELSIUS},
            '{"when": "2025-01-02", "unit": "celsius"}',
        ),
        ("héllo", "héllo"),
    ],
)
def test_dispatch_serializes_results(value: Any, expected: str) -> None:
    t = Tool(ToolSpec("f"), lambda: value)
    msg = run(dispatch(ToolCall("c", "f", {}), {"f": t}))
    assert msg.text == expected and not msg.is_error


def test_a_raising_tool_becomes_an_error_flagged_result() -> None:
    register_secret("sk-tool-secret-123")

    @tool
    def explode(x: int) -> str:
        """Explode."""
        raise RuntimeError(f"backend refused key sk-tool-secret-123 for x={x}")

    msg = run(dispatch(ToolCall("c3", "explode", {"x": 1}), {"explode": explode}))
    assert msg.is_error and msg.tool_call_id == "c3" and msg.name == "explode"
    assert msg.text == "RuntimeError: backend refused key [secure] for x=1"


def test_bad_arguments_become_an_error_flagged_result() -> None:
    @tool
    def square(n: int) -> int:
        """Square."""
        return n * n

    msg = run(dispatch(ToolCall("c4", "square", {"n": "four"}), {"square": square}))
    assert msg.is_error
    assert msg.text.startswith("ValueError: invalid arguments for tool 'square': n: ")


def test_an_unserializable_result_is_an_error_result() -> None:
    t = Tool(ToolSpec("f"), lambda: threading.Lock())
    msg = run(dispatch(ToolCall("c", "f", {}), {"f": t}))
    assert msg.is_error and msg.text.startswith("TypeError: the tool returned a lock")


def test_an_unknown_tool_raises_tool_loop_error() -> None:
    @tool
    def known() -> str:
        """Known."""
        return ""

    with pytest.raises(ToolLoopError, match=r"unknown tool 'ghost' \(runnable tools: known\)"):
        run(dispatch(ToolCall("c5", "ghost", {}), {"known": known}))


def test_dispatch_all_runs_calls_in_order_one_at_a_time() -> None:
    log: list[str] = []
    active = 0
    overlap = False

    async def step(name: str) -> str:
        nonlocal active, overlap
        active += 1
        overlap = overlap or active > 1
        await asyncio.sleep(0.01)
        log.append(name)
        active -= 1
        return name

    t = tool(step)
    calls = [ToolCall(f"c{i}", "step", {"name": n}) for i, n in enumerate("abc")]
    messages = run(dispatch_all(calls, {"step": t}))
    assert [m.text for m in messages] == ["a", "b", "c"] == log
    assert [m.tool_call_id for m in messages] == ["c0", "c1", "c2"]
    assert not overlap


def test_dispatch_all_runs_nothing_when_a_call_is_unknown() -> None:
    ran: list[str] = []
    t = Tool(ToolSpec("real"), lambda: ran.append("x"))
    calls = [ToolCall("a", "real", {}), ToolCall("b", "ghost", {})]
    with pytest.raises(ToolLoopError, match="'ghost'"):
        run(dispatch_all(calls, {"real": t}))
    assert ran == []


def test_default_max_rounds() -> None:
    assert DEFAULT_MAX_ROUNDS == 8


def test_tool_arguments_mapping_types_are_accepted() -> None:
    @tool
    def f(a: int) -> int:
        """F."""
        return a

    from types import MappingProxyType

    args: Mapping[str, Any] = MappingProxyType({"a": 7})
    assert f.call(args) == 7


def test_importing_the_modules_does_not_import_pydantic() -> None:
    code = (
        "import sys, anyinfer._structured.tools, anyinfer._structured.output; "
        "print('pydantic' in sys.modules, 'jsonschema' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.split() == ["False", "False"]
