"""Adapter profiles: provider facts declared on the adapter class, read by the core.

A third-party class declaring a profile gets exactly what a built-in gets (registry
aliases, conformance dialect, usage convention for pricing, structured-output defaults,
local engines) without any core table being edited; and an OpenAI-compatible preset is
one `PRESETS` entry.
"""

from __future__ import annotations

import asyncio
import json
from decimal import Decimal
from typing import Any, ClassVar

import httpx
import pytest

import anyinfer as ai
from anyinfer._adapters import registry as _registry
from anyinfer._knowledge.capabilities import ModelCapabilities
from anyinfer._providers import openai_compat
from anyinfer._providers.openai_compat import PRESETS, Preset, quirks_for
from anyinfer._structured.output import choose_mechanism
from anyinfer.adapters import AdapterProfile, OpenAIChatAdapter, UsageConvention
from anyinfer.conformance.registry import (
    ConformanceRegistry,
    load_adapter_entry_points,
    load_builtins,
)

M = Decimal(1_000_000)


class AcmeAdapter(OpenAIChatAdapter):
    """A third-party adapter: its facts live on the class, nowhere else."""

    provider_id: ClassVar[str] = "acme"
    default_base_url: ClassVar[str | None] = "https://api.acme.invalid/v1"
    api_key_env: ClassVar[str | None] = None
    profile: ClassVar[AdapterProfile] = AdapterProfile(
        aliases=("wile", "Coyote"),
        conformance_dialect="openai-chat",
        usage=UsageConvention(input_includes_cache=False),
        structured=ModelCapabilities(grammar=True),
    )


def _registry_with_acme() -> ai.ProviderRegistry:
    registry = ai.ProviderRegistry(entry_points=False)
    registry.register("acme", AcmeAdapter)
    return registry


def test_third_party_aliases_come_from_the_profile() -> None:
    registry = _registry_with_acme()
    assert registry.canonical("wile") == "acme"
    assert registry.canonical("coyote") == "acme"
    assert registry.adapter_class("WILE") is AcmeAdapter
    # the built-ins' aliases are read the same way
    assert registry.canonical("claude") == "anthropic"
    assert registry.canonical("llama-cpp") == "llama.cpp"


def test_builtin_aliases_resolve_after_the_class_was_loaded() -> None:
    registry = ai.ProviderRegistry(entry_points=False)
    assert registry.adapter_class("anthropic").provider_id == "anthropic"
    assert registry.canonical("claude") == "anthropic"
    replaced = ai.ProviderRegistry(entry_points=False)
    replaced.register("gemini", AcmeAdapter, replace=True)
    assert replaced.canonical("google") == "google"  # a replaced built-in's aliases go


def test_a_subclass_without_its_own_profile_inherits_all_but_the_aliases() -> None:
    class Child(AcmeAdapter):
        provider_id: ClassVar[str] = "acme-child"

    assert Child.profile.aliases == ()
    assert Child.profile.conformance_dialect == "openai-chat"
    assert Child.profile.usage == UsageConvention(input_includes_cache=False)


def test_legacy_class_attributes_fold_into_the_profile() -> None:
    class Legacy(OpenAIChatAdapter):
        provider_id: ClassVar[str] = "legacy"
        aliases = ("old",)
        conformance_dialect = "openai-chat"

    assert Legacy.profile.aliases == ("old",)
    assert Legacy.profile.conformance_dialect == "openai-chat"
    registry = ai.ProviderRegistry(builtins=False, entry_points=False)
    registry.register("legacy", Legacy)
    assert registry.canonical("old") == "legacy"


def test_third_party_dialect_reaches_the_conformance_registry(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class EntryPoint:
        name = "acme"
        value = "acme_pkg:AcmeAdapter"

        def load(self) -> type[AcmeAdapter]:
            return AcmeAdapter

    from anyinfer.conformance import registry as conformance_registry

    monkeypatch.setattr(conformance_registry, "_entry_points", lambda group: [EntryPoint()])
    registry = ConformanceRegistry()
    load_adapter_entry_points(registry)
    entry = registry.get("acme")
    assert (entry.dialect, entry.adapter_class) == ("openai-chat", AcmeAdapter)


def _chat_transport(seen: list[dict[str, Any]]) -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.content))
        return httpx.Response(
            200,
            json={
                "id": "c1",
                "object": "chat.completion",
                "model": "m",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": '{"a": 1}'},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {
                    "prompt_tokens": 100,
                    "completion_tokens": 0,
                    "total_tokens": 100,
                    "prompt_tokens_details": {"cached_tokens": 100},
                },
            },
        )

    return httpx.MockTransport(handler)


def test_third_party_usage_convention_prices_the_call() -> None:
    price = ai.ModelPrice.per_million("1", "1", cache_read="0.5")
    seen: list[dict[str, Any]] = []

    async def go() -> ai.Generation:
        client = ai.AsyncClient(
            providers=[ai.ProviderSettings("acme", api_key="k", transport=_chat_transport(seen))],
            registry=_registry_with_acme(),
            pricing_table=ai.PricingTable({"acme:m": price}),
        )
        try:
            return await client.generate("hi", target="acme:m")
        finally:
            await client.aclose()

    result = asyncio.run(go())
    # input_tokens excludes cache reads by the profile's convention: 100 + 100 * 0.5
    assert result.usage.cost_usd == Decimal(150) / M
    # the same table, asked directly with the class's convention, agrees
    usage = result.usage
    table = ai.PricingTable({"acme:m": price})
    assert table.cost(usage, "acme", "m", convention=AcmeAdapter.profile.usage) == Decimal(150) / M


def test_third_party_structured_defaults_choose_the_mechanism(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    unknown = ModelCapabilities()
    assert choose_mechanism(unknown, "acme", defaults=AcmeAdapter.profile.structured)[0] == (
        "grammar"
    )
    # through the default registry, exactly as a built-in engine id is looked up
    monkeypatch.setattr(_registry, "_default", _registry_with_acme())
    assert choose_mechanism(unknown, "acme")[0] == "grammar"
    assert choose_mechanism(unknown, "llama.cpp")[0] == "grammar"
    assert choose_mechanism(unknown, "anthropic")[0] == "prompt"


def test_third_party_structured_defaults_reach_the_client() -> None:
    seen: list[dict[str, Any]] = []

    async def go() -> ai.Generation:
        client = ai.AsyncClient(
            providers=[ai.ProviderSettings("acme", api_key="k", transport=_chat_transport(seen))],
            registry=_registry_with_acme(),
        )
        try:
            schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
            return await client.generate("hi", target="acme:m", schema=schema)
        finally:
            await client.aclose()

    result = asyncio.run(go())
    assert result.structured == {"a": 1}
    # grammar (from the profile) sends the schema; unknown capabilities would not
    assert seen[0]["response_format"]["type"] == "json_schema"
    assert not any("validated client-side" in w for w in result.warnings)


def test_every_builtin_declares_its_dialect_and_no_core_table_remains() -> None:
    registry = ai.ProviderRegistry(entry_points=False)
    for pid in registry.ids():
        cls = registry.adapter_class(pid)
        assert cls.provider_id == pid
        assert cls.profile.conformance_dialect, pid
    assert not hasattr(_registry, "_LOCAL_ENGINES")
    from anyinfer._client import aclient as _client
    from anyinfer._structured import output as _structured

    assert not hasattr(_client, "_LOCAL_ENGINES")
    assert not hasattr(_structured, "ENGINE_STRUCTURED_DEFAULTS")


# --- one preset, one entry -------------------------------------------------------------


def test_one_preset_entry_is_resolvable_listed_and_under_conformance(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    entry = Preset(
        "http://127.0.0.1:9911/v1",
        AdapterProfile(
            aliases=("acme-box",),
            conformance_dialect="openai-chat",
            structured=ModelCapabilities(json_schema=True),
            local_engines=("llama.cpp",),
        ),
        openai_compat.Quirks(stream_usage=False),
    )
    monkeypatch.setattr(openai_compat, "PRESETS", {**PRESETS, "acme-local": entry})

    registry = ai.ProviderRegistry(entry_points=False)
    assert "acme-local" in registry.ids()
    assert registry.canonical("acme-box") == "acme-local"
    cls = registry.adapter_class("acme-box")
    assert issubclass(cls, openai_compat.OpenAICompatAdapter)
    adapter = cls(ai.ProviderSettings("acme-local"))
    assert adapter.base_url == "http://127.0.0.1:9911/v1"
    assert adapter.quirks.engine == "acme-local"
    assert adapter.quirks.stream_usage is False
    assert quirks_for("openai-compat", {"engine": "acme-local"}).stream_usage is False

    monkeypatch.setattr(_registry, "_default", registry)
    conformance = ConformanceRegistry()
    load_builtins(conformance)
    assert conformance.get("acme-local").dialect == "openai-chat"
    assert choose_mechanism(ModelCapabilities(), "acme-local")[0] == "json_schema"

    client = ai.AsyncClient(providers=[ai.ProviderSettings("acme-local")], registry=registry)
    assert client._local_engines("acme-local") == (("llama.cpp",), True)

    # Listed where presets are listed (`anyinfer doctor`, the docs table's source) ...
    listed = {s.provider_id: s for s in openai_compat.preset_summaries({})}
    assert listed["acme-local"].base_url == "http://127.0.0.1:9911/v1"
    assert listed["acme-local"].local
    # ... and a request through the ordinary client goes to its URL and is read back.
    seen: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(str(request.url))
        body = {
            "choices": [{"index": 0, "message": {"content": "hi"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
        }
        return httpx.Response(200, json=body)

    settings = ai.ProviderSettings("acme-local", transport=httpx.MockTransport(answer))
    with ai.Client([settings], registry=registry) as sync_client:
        result = sync_client.generate("hi", target="acme-local:m")
    assert seen == ["http://127.0.0.1:9911/v1/chat/completions"]
    assert result.text == "hi"
    assert result.target.provider == "acme-local"
    assert (result.usage.input_tokens, result.usage.output_tokens) == (3, 1)


def test_builtin_presets_keep_their_names_and_facts() -> None:
    from anyinfer._providers.openai_compat import LlamaCppAdapter, LMStudioAdapter, VLLMAdapter

    assert [LlamaCppAdapter.__name__, VLLMAdapter.__name__, LMStudioAdapter.__name__] == [
        "LlamaCppAdapter",
        "VLLMAdapter",
        "LMStudioAdapter",
    ]
    assert LlamaCppAdapter.profile.aliases == ("llamacpp", "llama-cpp")
    assert VLLMAdapter.profile.local_engines == ("vllm",)
    assert LMStudioAdapter.profile.structured == ModelCapabilities(json_schema=True)
    assert set(PRESETS) <= set(openai_compat.ENGINE_QUIRKS)
