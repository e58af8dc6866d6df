"""Structured output and tools through the client, over fake servers, for every adapter."""

from __future__ import annotations

import asyncio
import json
from typing import Any, Literal

import pydantic
import pytest

import anyinfer as ai
from anyinfer.conformance.checker import check_grammar
from anyinfer.fakeservers import FakeTransport, Script, ScriptUsage, Text, ToolFragment, get_dialect

# (provider id, dialect, extra settings) for every adapter with a dialect.
ADAPTERS: list[tuple[str, str, dict[str, Any]]] = [
    ("openai", "openai-chat", {}),
    ("openai-responses", "openai-responses", {}),
    ("anthropic", "anthropic-messages", {}),
    ("ollama", "ollama-chat", {}),
    ("gemini", "gemini", {}),
    ("llama.cpp", "llama.cpp", {}),
    ("openai-compat", "openai-chat", {"base_url": "http://127.0.0.1:9/v1"}),
    ("azure-foundry", "azure-openai", {"base_url": "https://res.openai.azure.com"}),
]


class City(pydantic.BaseModel):
    name: str
    population: int
    kind: Literal["capital", "town"]


GOOD = '{"name": "Oslo", "population": 709000, "kind": "capital"}'
BAD = '{"name": "Oslo", "population": "lots"}'


def client_for(
    provider: str, dialect: str, scripts: list[Script], **kw: Any
) -> tuple[ai.Client, FakeTransport]:
    t = FakeTransport(dialect, scripts)
    settings = ai.ProviderSettings(provider, alias="p", api_key="k", transport=t, **kw)
    return ai.Client([settings]), t


def sent(t: FakeTransport, n: int = -1) -> dict[str, Any]:
    body = t.requests[n].json
    assert body is not None
    return body


def wire_text(body: dict[str, Any]) -> str:
    return json.dumps(body)


@pytest.mark.parametrize(("provider", "dialect", "extra"), ADAPTERS, ids=[a[0] for a in ADAPTERS])
def test_structured_output_on_every_adapter(
    provider: str, dialect: str, extra: dict[str, Any]
) -> None:
    client, t = client_for(provider, dialect, [Script(pieces=(Text(GOOD),))], **extra)
    with client:
        result = client.generate("Largest city in Norway?", target="p:some-model", schema=City)
    assert result.structured == City(name="Oslo", population=709000, kind="capital")
    assert result.structured_mechanism in ("grammar", "json_schema", "json_mode", "prompt")
    body = wire_text(sent(t))
    # Whatever the mechanism, the schema reaches the provider: natively or in the prompt.
    assert "population" in body


def test_mechanisms_strongest_first_and_downgrade_warnings() -> None:
    cases = {
        "json_schema": ai.ModelCapabilities(json_schema=True, json_mode=True),
        "json_mode": ai.ModelCapabilities(json_schema=False, json_mode=True),
        "prompt": ai.ModelCapabilities(json_schema=False, json_mode=False, grammar=False),
    }
    for expected, caps in cases.items():
        t = FakeTransport("openai-chat", [Script(pieces=(Text(GOOD),))])
        client = ai.Client(
            [ai.ProviderSettings("openai", transport=t, api_key="k")],
            capability_overrides={"openai:m": caps},
        )
        with client:
            result = client.generate("city?", target="openai:m", schema=City)
        body = sent(t)
        assert result.structured_mechanism == expected
        assert result.structured is not None and result.structured.name == "Oslo"
        if expected == "json_schema":
            assert body["response_format"]["type"] == "json_schema"
            assert body["response_format"]["json_schema"]["schema"]["required"]
            assert not result.warnings
        elif expected == "json_mode":
            assert body["response_format"] == {"type": "json_object"}
            assert any("json_mode" in w for w in result.warnings)
        else:
            assert "response_format" not in body
            assert "population" in json.dumps(body["messages"])
            assert any("prompt" in w for w in result.warnings)


def test_grammar_on_llama_cpp() -> None:
    client, t = client_for("llama.cpp", "llama.cpp", [Script(pieces=(Text(GOOD),))])
    with client:
        result = client.generate("city?", target="p:m", schema=City)
    assert result.structured_mechanism == "grammar"
    assert "json_schema" in sent(t)  # llama-server's own constrained-decoding field


def test_mapping_schema_gives_plain_values() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    client, _ = client_for("openai", "openai-chat", [Script(pieces=(Text('{"n": 3}'),))])
    with client:
        result = client.generate("n?", target="p:m", schema=ai.SchemaSpec(schema, name="count"))
    assert result.structured == {"n": 3}


def test_repair_reruns_in_the_same_stream() -> None:
    client, t = client_for(
        "openai",
        "openai-chat",
        [Script(pieces=(Text(BAD),), usage=ScriptUsage(5, 5)), Script(pieces=(Text(GOOD),))],
    )
    with (
        client,
        client.stream("city?", target="p:m", schema=City, repair=ai.Repair(max_attempts=2)) as s,
    ):
        events = list(s)
    result = s.result
    starts = [e for e in events if isinstance(e, ai.TimingMark) and e.name == "attempt_start"]
    assert len(starts) == 2 and not any(isinstance(e, ai.AttemptFailed) for e in events)
    assert result.repair_attempts == 1 and result.structured is not None
    assert result.text == GOOD  # the last attempt only
    assert check_grammar(events, succeeded=True) == []
    second = sent(t, 1)["messages"]
    assert any("population" in json.dumps(m) for m in second[-1:])  # errors fed back
    assert [a.outcome for a in result.attempts] == ["retried", "ok"]


def test_exhausted_repair_raises_schema_violation() -> None:
    client, _ = client_for(
        "openai", "openai-chat", [Script(pieces=(Text(BAD),)), Script(pieces=(Text("nope"),))]
    )
    with client, pytest.raises(ai.SchemaViolationError) as info:
        client.generate("city?", target="p:m", schema=City, repair=ai.Repair(max_attempts=1))
    assert info.value.text == "nope" and info.value.errors
    with pytest.raises(ai.ConfigError, match="schema"):
        ai.AsyncClient().stream("x", target="openai:m", repair=ai.Repair())


def test_client_default_repair_applies() -> None:
    t = FakeTransport("openai-chat", [Script(pieces=(Text(BAD),)), Script(pieces=(Text(GOOD),))])
    client = ai.Client(
        [ai.ProviderSettings("openai", transport=t)], repair=ai.Repair(max_attempts=1)
    )
    with client:
        assert client.generate("city?", target="openai:m", schema=City).repair_attempts == 1


calls: list[str] = []


@ai.tool
def double(x: int) -> int:
    """Double a number.

    Args:
        x: The number.
    """
    calls.append(f"double({x})")
    return x * 2


@ai.tool
async def shout(text: str) -> str:
    """Upper-case text."""
    await asyncio.sleep(0)
    calls.append(f"shout({text})")
    return text.upper()


@ai.tool
def explode(reason: str) -> str:
    """Always fails."""
    calls.append("explode")
    raise RuntimeError(f"kaboom: {reason}")


def tool_round(*fragments: ToolFragment) -> Script:
    return Script(pieces=fragments, finish_reason="tool_calls")


@pytest.mark.parametrize(("provider", "dialect", "extra"), ADAPTERS, ids=[a[0] for a in ADAPTERS])
def test_tool_loop_three_rounds_parallel_calls_and_a_raising_tool(
    provider: str, dialect: str, extra: dict[str, Any]
) -> None:
    calls.clear()
    scripts = [
        tool_round(
            ToolFragment(0, '{"x": 21}', id="a1", name="double"),
            ToolFragment(1, '{"text": "hi"}', id="a2", name="shout"),
        ),
        tool_round(ToolFragment(0, '{"reason": "test"}', id="b1", name="explode")),
        tool_round(ToolFragment(0, '{"x": 1}', id="c1", name="double")),
        Script(pieces=(Text("all done"),)),
    ]
    client, t = client_for(provider, dialect, scripts, **extra)
    with client:
        result = client.run_tools("go", tools=[double, shout, explode], target="p:m")
    assert result.text == "all done"
    assert calls == ["double(21)", "shout(hi)", "explode", "double(1)"]
    last = wire_text(sent(t))
    assert "42" in last and "HI" in last and "kaboom" in last  # results fed back, errors too


def test_unknown_tool_and_round_budget() -> None:
    client, _ = client_for(
        "openai", "openai-chat", [tool_round(ToolFragment(0, "{}", id="x", name="nope"))]
    )
    with client, pytest.raises(ai.ToolLoopError, match="nope"):
        client.run_tools("go", tools=[double], target="p:m")
    loop = [tool_round(ToolFragment(0, '{"x": 1}', id=f"c{i}", name="double")) for i in range(3)]
    client, _ = client_for("openai", "openai-chat", loop)
    with client, pytest.raises(ai.ToolLoopError, match="2 round"):
        client.run_tools("go", tools=[double], target="p:m", max_rounds=2)


def test_plain_functions_are_tools_and_tool_choice_is_mapped() -> None:
    def add(a: int, b: int = 1) -> int:
        """Add."""
        return a + b

    client, t = client_for(
        "openai",
        "openai-chat",
        [
            tool_round(ToolFragment(0, '{"a": 2}', id="c", name="add")),
            Script(pieces=(Text("3"),)),
        ],
    )
    with client:
        result = client.run_tools("add", tools=[add], target="p:m", tool_choice="add")
    assert result.text == "3"
    assert sent(t, 0)["tool_choice"] == {"type": "function", "function": {"name": "add"}}
    assert sent(t, 1)["tool_choice"] == "auto"
    spec = sent(t, 0)["tools"][0]["function"]
    assert spec["parameters"]["required"] == ["a"] and "$ref" not in json.dumps(spec)


def test_run_tools_sends_anthropic_thinking_signatures_back() -> None:
    from anyinfer.fakeservers import Reasoning

    scripts = [
        Script(
            pieces=(
                Reasoning("let me double it"),
                ToolFragment(0, '{"x": 4}', id="t1", name="double"),
            ),
            finish_reason="tool_calls",
        ),
        Script(pieces=(Text("8"),)),
    ]
    client, t = client_for("anthropic", "anthropic-messages", scripts)
    with client:
        result = client.run_tools("double 4", tools=[double], target="p:claude-x")
    assert result.text == "8" and result.raw is None  # raw kept only for the rounds
    turn = sent(t, 1)["messages"][1]
    assert turn["role"] == "assistant"
    thinking = [b for b in turn["content"] if b["type"] == "thinking"]
    rendered = json.loads(get_dialect("anthropic-messages").render(scripts[0], stream=False).body)
    assert thinking and thinking[0]["signature"] == rendered["content"][0]["signature"]
    assert any(b["type"] == "tool_use" and b["id"] == "t1" for b in turn["content"])
