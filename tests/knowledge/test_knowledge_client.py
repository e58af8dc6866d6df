"""The knowledge layer through the client: layers, aliases, the gate, cost, telemetry."""

from __future__ import annotations

import asyncio
from decimal import Decimal
from typing import Any

import pytest

import anyinfer as ai
from anyinfer.fakeservers import FakeTransport, Fault, Script, ScriptUsage, Text, ToolFragment

PROMPT = "What is the capital of Norway? unique-prompt-marker-7731"
ANSWER = "Oslo is the capital. unique-answer-marker-4410"


def transport(*scripts: Script, models: tuple[str, ...] = ("fake-model",)) -> FakeTransport:
    return FakeTransport("openai-chat", list(scripts), models=models)


def test_overrides_beat_discovery_beat_catalog_field_by_field() -> None:
    import httpx

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"data": [{"id": "gpt-4o-mini", "context_length": 64_000}]})

    client = ai.Client(
        [ai.ProviderSettings("openai", api_key="k", transport=httpx.MockTransport(handler))],
        capability_overrides={"openai:gpt-4o-mini": ai.ModelCapabilities(max_output_tokens=999)},
    )
    with client:
        before = client.capabilities("openai:gpt-4o-mini")
        assert (before.context_window, before.source("context_window")) == (128_000, "catalog")
        assert (before.max_output_tokens, before.source("max_output_tokens")) == (999, "override")
        client.models("openai")
        after = client.capabilities("openai:gpt-4o-mini")
        assert (after.context_window, after.source("context_window")) == (64_000, "discovery")
        assert (after.max_output_tokens, after.source("max_output_tokens")) == (999, "override")
        assert (after.tools, after.source("tools")) == (True, "catalog")
    overridden = ai.AsyncClient(
        [ai.ProviderSettings("openai")],
        capability_overrides={"openai:gpt-4o-mini": ai.ModelCapabilities(tools=False)},
    )
    caps = overridden.capabilities("gpt-4o-mini")
    assert (caps.tools, caps.source("tools")) == (False, "override")


def test_models_records_discovery_facts() -> None:
    import httpx

    def handler(request: httpx.Request) -> httpx.Response:
        # A discovery endpoint that reports a context length (vLLM, OpenRouter, llama.cpp do).
        return httpx.Response(200, json={"data": [{"id": "gpt-4o-mini", "max_model_len": 8192}]})

    settings = ai.ProviderSettings("openai", alias="local", transport=httpx.MockTransport(handler))
    with ai.Client([settings]) as client:
        before = client.capabilities("local:gpt-4o-mini")
        client.models("local")
        after = client.capabilities("local:gpt-4o-mini")
    assert before.source("context_window") == "catalog"
    assert (after.context_window, after.source("context_window")) == (8192, "discovery")


def test_alias_resolves_in_provider_order_and_typos_are_named() -> None:
    client = ai.AsyncClient([ai.ProviderSettings("anthropic"), ai.ProviderSettings("openai")])
    assert str(client.resolve("gpt-4o-mini")) == "openai:gpt-4o-mini"
    resolved = client.resolve("claude-sonnet")
    assert resolved.provider == "anthropic" and resolved.alias == "claude-sonnet"
    with pytest.raises(ai.ConfigError, match="did you mean gpt-4o-mini"):
        client.resolve("gpt4o-mini")
    bare = ai.AsyncClient([ai.ProviderSettings("openai")], use_default_catalog=False)
    assert bare.catalog is None
    with pytest.raises(ai.ConfigError, match="no catalog"):
        bare.resolve("gpt-4o-mini")


def test_gate_refuses_before_any_http_and_falls_back() -> None:
    small, big = transport(), transport(Script(pieces=(Text("fits"),)))
    client = ai.Client(
        [
            ai.ProviderSettings("openai", alias="small", transport=small),
            ai.ProviderSettings("openai", alias="big", transport=big),
        ],
        capability_overrides={"small:m": ai.ModelCapabilities(context_window=1_000)},
    )
    prompt = "word " * 20_000  # 100 kB: the floor estimate alone is 12,500 tokens
    with client:
        result = client.generate(prompt, route=["small:m", "big:m"])
        budget = client.budget(prompt, target="small:m")
    assert result.text == "fits"
    first = result.attempts[0]
    assert first.outcome == "failed" and first.error is not None
    assert first.error.type_name == "ContextWindowError"
    assert small.requests == []  # refused before any HTTP
    assert budget.verdict == "exceeds" and budget.remaining_tokens is not None
    assert budget.remaining_tokens < 0


def test_unknown_window_never_refuses() -> None:
    t = transport(Script(pieces=(Text("ok"),)))
    with ai.Client([ai.ProviderSettings("openai", alias="x", transport=t)]) as client:
        result = client.generate("word " * 50_000, target="x:unlisted-model")
        assert client.budget("hi", target="x:unlisted-model").verdict is None
    assert result.text == "ok"


def test_gate_can_be_turned_off() -> None:
    t = transport(Script(pieces=(Text("sent anyway"),)))
    client = ai.Client(
        [ai.ProviderSettings("openai", alias="small", transport=t)],
        capability_overrides={"small:m": ai.ModelCapabilities(context_window=10)},
        context_gate=False,
    )
    with client:
        assert client.generate("word " * 1000, target="small:m").text == "sent anyway"


def test_cost_matches_the_table_and_unknown_pricing_stays_none() -> None:
    usage = ScriptUsage(input_tokens=1_000_000, output_tokens=500_000, cache_read_tokens=200_000)
    priced = transport(Script(pieces=(Text("a"),), usage=usage))
    unpriced = transport(Script(pieces=(Text("b"),), usage=usage))
    with ai.Client(
        [
            ai.ProviderSettings("openai", transport=priced),
            ai.ProviderSettings("openai", alias="other", transport=unpriced),
        ]
    ) as client:
        result = client.generate("hi", target="openai:gpt-4o-mini")
        expected = client.pricing_table.cost(result.usage, "openai", "gpt-4o-mini")
        unknown = client.generate("hi", target="other:no-such-model")
    # gpt-4o-mini: $0.15/M input (uncached), $0.075/M cached, $0.60/M output.
    assert expected == Decimal("0.12") + Decimal("0.015") + Decimal("0.30")
    assert result.usage.cost_usd == expected
    assert unknown.usage.cost_usd is None


class Recorder:
    def __init__(self) -> None:
        self.events: list[Any] = []

    def on_event(self, event: Any) -> None:
        self.events.append(event)

    def text(self) -> str:
        return repr(self.events)


class Broken:
    def on_event(self, event: Any) -> None:
        raise RuntimeError("observer bug")


def _scenario(client: ai.AsyncClient) -> None:
    async def go() -> None:
        async with client:
            await client.generate(PROMPT, target="p:m", metadata={"tenant": "t1"})
            async with client.stream(PROMPT, target="p:m") as s:
                async for _ in s:
                    pass
            with pytest.raises(ai.AllTargetsFailedError):
                await client.generate(
                    PROMPT, route=ai.Route("p:m", retry=ai.RetryPolicy(max_retries=0))
                )

    asyncio.run(go())


def test_payload_free_observers_see_no_text_and_payload_observers_do() -> None:
    scripts = [
        Script(pieces=(Text(ANSWER),), usage=ScriptUsage(7, 3)),
        Script(
            pieces=(
                Text(ANSWER),
                ToolFragment(0, '{"q": "unique-args-marker-993"}', id="c1", name="f"),
            ),
            usage=ScriptUsage(7, 3),
        ),
        Script(pieces=(Text(ANSWER),), fault=Fault("disconnect", at=1)),
    ]
    quiet, loud = Recorder(), Recorder()
    client = ai.AsyncClient(
        [
            ai.ProviderSettings(
                "openai",
                alias="p",
                api_key="sk-observer-secret-1234",
                transport=transport(*scripts),
            )
        ],
        observers=[quiet, Broken()],
    )
    client.subscribe(loud, payloads=True)
    _scenario(client)
    kinds = [type(e).__name__ for e in quiet.events]
    for kind in (
        "RequestStarted",
        "AttemptStarted",
        "FirstToken",
        "UsageReported",
        "AttemptEnded",
        "RequestEnded",
    ):
        assert kind in kinds
    for marker in ("unique-prompt-marker", "unique-answer-marker", "unique-args-marker"):
        assert marker not in quiet.text()
        assert marker in loud.text()
    assert "sk-observer-secret-1234" not in quiet.text() + loud.text()
    assert all(
        e.metadata == {"tenant": "t1"}
        for e in quiet.events
        if e.request_id == quiet.events[0].request_id
    )
    ended = [e for e in quiet.events if type(e).__name__ == "RequestEnded"]
    assert [e.ok for e in ended] == [True, True, False]


def test_unsubscribe_stops_events() -> None:
    rec = Recorder()
    client = ai.AsyncClient(
        [ai.ProviderSettings("openai", alias="p", transport=transport(Script(pieces=(Text("x"),))))]
    )
    client.subscribe(rec)
    client.unsubscribe(rec)

    async def go() -> None:
        async with client:
            await client.generate("hi", target="p:m")

    asyncio.run(go())
    assert rec.events == []


def test_retain_raw_off_by_default() -> None:
    t = transport(Script(pieces=(Text("x"),)), Script(pieces=(Text("y"),)))
    with ai.Client([ai.ProviderSettings("openai", alias="p", transport=t)]) as client:
        assert client.generate("hi", target="p:m").raw is None
    t2 = transport(Script(pieces=(Text("x"),)))
    with ai.Client(
        [ai.ProviderSettings("openai", alias="p", transport=t2)], retain_raw=True
    ) as client:
        with client.stream("hi", target="p:m") as s:
            s.collect()
        assert isinstance(s.result.raw, list) and s.result.raw
