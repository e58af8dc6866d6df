"""One rule for what an adapter serves: the operations whose methods its class overrides.

`Adapter.operations()` lists them (`generate`, `embed`, `rerank`). The same rule refuses a
generation sent to a class that does not generate (before anything is sent, with a
`ConfigError` saying what the provider serves), keeps such a class out of the
conformance suite's generation matrix, and marks it in `anyinfer doctor`.
"""

from __future__ import annotations

import json
import sys
from array import array
from typing import Any

import httpx
import pytest
from click.testing import CliRunner

import anyinfer as ai
from anyinfer._cli import main
from anyinfer.adapters import OPERATIONS, Adapter, EmbedReply, EmbedRequest, HTTPAdapter
from anyinfer.conformance.plugin import OPTION_ADAPTER, OPTION_CONFORMANCE, SUITE_NODEID
from anyinfer.conformance.registry import build_registry

pytest_plugins = ["pytester"]


class EmbedOnly(HTTPAdapter):
    provider_id = "embed-only"
    default_base_url = "http://127.0.0.1:9/v1"

    async def embed(self, request: EmbedRequest) -> EmbedReply:
        return EmbedReply(vectors=tuple(array("f", [1.0]) for _ in request.inputs))


def test_operations_are_the_methods_a_class_overrides() -> None:
    registry = ai.default_registry()
    assert registry.adapter_class("openai").operations() == ("generate", "embed")
    assert registry.adapter_class("anthropic").operations() == ("generate",)
    assert registry.adapter_class("cohere").operations() == ("generate", "embed", "rerank")
    for pid in ("voyage", "jina", "tei"):
        cls = registry.adapter_class(pid)
        assert cls.operations() == ("embed", "rerank") and not cls.serves_generation()
    assert EmbedOnly.operations() == ("embed",)
    assert Adapter.operations() == ()
    assert OPERATIONS == ("generate", "embed", "rerank")  # public, for third-party code


def test_a_class_that_does_not_generate_is_refused_before_dispatch() -> None:
    sent: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(500)

    registry = ai.ProviderRegistry(entry_points=False)
    registry.register("embed-only", EmbedOnly)
    providers = [
        ai.ProviderSettings("embed-only", transport=httpx.MockTransport(handler)),
        ai.ProviderSettings("openai", api_key="sk-test", transport=httpx.MockTransport(handler)),
    ]
    with ai.Client(providers, registry=registry) as client:
        with pytest.raises(ai.ConfigError) as info:
            client.generate("hi", target="embed-only:m")
        assert str(info.value).startswith("generate(): target embed-only:m: ")
        assert "does not serve generation through AnyInfer; it serves embeddings" in str(info.value)
        assert info.value.provider == "embed-only"
        # a fallback that cannot generate refuses the whole route, at the call
        with pytest.raises(ai.ConfigError, match="stream\\(\\): target embed-only:m"):
            client.stream("hi", route=["openai:gpt-4o-mini", "embed-only:m"])
        assert client.embed(["a"], target="embed-only:m").vectors == (array("f", [1.0]),)
    assert sent == []


def test_async_generation_is_refused_the_same_way() -> None:
    import asyncio

    async def go() -> None:
        async with ai.AsyncClient([ai.ProviderSettings("voyage", api_key="k")]) as client:
            with pytest.raises(
                ai.ConfigError, match=r"voyage \(voyage\) does not serve generation"
            ):
                await client.generate("hi", target="voyage:voyage-3.5")

    asyncio.run(go())


def test_the_adapters_own_refusal_says_the_same() -> None:
    adapter = EmbedOnly(ai.ProviderSettings("embed-only"))
    with pytest.raises(ai.ConfigError, match=r"it serves embeddings$"):
        adapter.generate(None)  # type: ignore[arg-type]


def test_embed_only_builtins_are_registered_for_the_embedding_checks_not_generation() -> None:
    registry = build_registry(lambda r: None)
    entries = {e.name: e for e in registry.entries()}
    for pid in ("voyage", "jina", "tei"):
        assert entries[pid].dialect == pid
        assert not entries[pid].generates()
    assert entries["openai"].generates() and entries["cohere"].generates()


def test_the_generation_suite_leaves_out_adapters_that_do_not_generate(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_project="def test_own():\n    pass\n")
    result = pytester.runpytest(OPTION_CONFORMANCE, "--collect-only", "-q")
    lines = [ln for ln in result.stdout.lines if ln.startswith(f"{SUITE_NODEID}::")]
    assert f"{SUITE_NODEID}::test_stream_paths[openai]" in lines
    generation = [ln for ln in lines if "::test_stream_paths[" in ln or "::test_hostile[" in ln]
    for pid in ("voyage", "jina", "tei"):
        assert not any(ln.endswith(f"[{pid}]") for ln in generation), pid
    # selecting one of them alone is not an error, and runs no generation test for it
    alone = pytester.runpytest(OPTION_CONFORMANCE, OPTION_ADAPTER, "voyage", "--collect-only", "-q")
    assert alone.ret == 0
    assert not any("::test_stream_paths[voyage]" in ln for ln in alone.stdout.lines)


def test_doctor_marks_a_provider_that_does_not_generate(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VOYAGE_API_KEY", "pa-test-key")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-key")
    runner = CliRunner()
    out = runner.invoke(main, ["doctor", "--no-probe"]).output
    voyage = next(line for line in out.splitlines() if line.startswith("  voyage:"))
    assert voyage.endswith("(embed, rerank only)"), voyage
    openai = next(line for line in out.splitlines() if line.startswith("  openai:"))
    assert "only)" not in openai
    engines = next(line for line in out.splitlines() if "tei (embed, rerank only)" in line)
    assert "127.0.0.1:8080" in engines
    data: dict[str, Any] = json.loads(
        runner.invoke(main, ["doctor", "--no-probe", "--json"]).output
    )
    hosted = {row["provider"]: row["serves"] for row in data["hosted"]}
    assert hosted["voyage"] == ["embed", "rerank"] and hosted["openai"] == ["generate", "embed"]
    assert "pa-test-key" not in out and sys.modules.get("anyinfer") is not None


def test_conform_list_says_what_each_adapter_serves() -> None:
    out = CliRunner().invoke(main, ["conform", "--list"]).output.splitlines()
    rows = {line.split()[0]: line for line in out}
    assert rows["voyage"].endswith("(built-in, voyage; embed, rerank)")
    assert rows["tei"].endswith("(built-in, tei; embed, rerank)")
    assert rows["anthropic"].endswith("; generate)")
    assert rows["cohere"].endswith("; generate, embed, rerank)")
