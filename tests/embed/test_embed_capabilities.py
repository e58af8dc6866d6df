"""Embedding capabilities and pricing: the layered facts (catalog < discovery < probe <
override), the refusals before dispatch they allow, the batch size they cap, and the
bundled prices of embedding models and the search-unit pricing of rerank models.

Served by the fake servers' OpenAI endpoint (`FakeTransport`), which counts what it was
sent, so a refusal can be seen to have sent nothing.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

import anyinfer as ai
from anyinfer._adapters.base import DiscoveredModel
from anyinfer._embed._runner import check_capabilities, input_token_floor
from anyinfer._knowledge.capabilities import (
    EMBEDDING_FIELDS,
    ModelCapabilities,
    capabilities_from_discovery,
)
from anyinfer._knowledge.pricing import ModelPrice, PricingTable
from anyinfer._types import ResolvedTarget, Usage
from anyinfer.fakeservers import FakeTransport, Script

UNKNOWN = "some-embedding-model"  # a model no layer knows anything about


def _client(**kwargs: Any) -> tuple[ai.Client, FakeTransport]:
    transport = FakeTransport("openai-chat", lambda request: Script())
    settings = ai.ProviderSettings("openai", api_key="sk-x", transport=transport)
    return ai.Client([settings], **kwargs), transport


def _sent(transport: FakeTransport) -> list[list[str]]:
    return [list(r.json["input"]) for r in transport.requests]


def test_the_bundled_catalog_knows_openais_embedding_models_at_catalog_provenance() -> None:
    client, _ = _client()
    with client:
        small = client.capabilities("openai:text-embedding-3-small")
        ada = client.capabilities("openai:text-embedding-ada-002")
    assert small.embed_dimensions == 1536 and small.embed_max_dimensions == 1536
    assert small.embed_dimensions_param is True and small.embed_max_batch == 2048
    assert small.embed_input_types == ()  # OpenAI's API has no input type
    assert small.source("embed_max_input_tokens") == "catalog"
    assert ada.embed_dimensions_param is False


def test_dimensions_a_model_cannot_produce_are_refused_before_dispatch() -> None:
    overrides = {f"openai:{UNKNOWN}": ModelCapabilities(embed_dimension_options=(256, 512))}
    client, transport = _client(capability_overrides=overrides)
    with client:
        with pytest.raises(ai.ConfigError, match=r"takes no dimensions parameter.*catalog"):
            client.embed(["a"], target="openai:text-embedding-ada-002", dimensions=512)
        with pytest.raises(ai.ConfigError, match=r"at most 1536 dimensions, not 2000"):
            client.embed(["a"], target="openai:text-embedding-3-small", dimensions=2000)
        with pytest.raises(ai.ConfigError, match=r"offers dimensions 256, 512, not 300.*override"):
            client.embed(["a"], target=f"openai:{UNKNOWN}", dimensions=300)
        assert transport.served == 0  # nothing was sent
        client.embed(["a"], target=f"openai:{UNKNOWN}", dimensions=256)
        client.embed(["a"], target="openai:text-embedding-3-small", dimensions=1536)
        client.embed(["a"], target="openai:other-model", dimensions=4096)  # unknown: sent
    assert transport.served == 3


def test_an_input_over_the_token_limit_is_refused_saying_it_is_an_estimate() -> None:
    overrides = {f"openai:{UNKNOWN}": ModelCapabilities(embed_max_input_tokens=10)}
    client, transport = _client(capability_overrides=overrides)
    long_text = "word " * 40  # 200 bytes: at least 25 tokens by the byte heuristic
    fits = "short words only here"  # 21 bytes: floor 2 tokens
    with client:
        with pytest.raises(ai.ConfigError) as info:
            client.embed([fits, long_text], target=f"openai:{UNKNOWN}")
        assert transport.served == 0
        client.embed([fits, "x" * 80], target=f"openai:{UNKNOWN}")  # floor 10: may fit
    message = str(info.value)
    assert "inputs[1]" in message and "at least 25 tokens" in message
    assert "an estimate" in message and "at most 10" in message and "override" in message
    assert transport.served == 1


def test_the_token_limit_is_not_applied_with_the_context_gate_off() -> None:
    overrides = {f"openai:{UNKNOWN}": ModelCapabilities(embed_max_input_tokens=10)}
    client, transport = _client(capability_overrides=overrides, context_gate=False)
    with client:
        client.embed(["word " * 40], target=f"openai:{UNKNOWN}")
    assert transport.served == 1


def test_the_batch_size_is_the_smallest_of_adapter_model_and_call() -> None:
    overrides = {f"openai:{UNKNOWN}": ModelCapabilities(embed_max_batch=3)}
    texts = [f"text {i}" for i in range(10)]
    client, transport = _client(capability_overrides=overrides)
    with client:
        result = client.embed(texts, target=f"openai:{UNKNOWN}", concurrency=1)
        assert [len(b) for b in _sent(transport)] == [3, 3, 3, 1]
        assert len(result.batch_targets) == 4
        client.embed(texts, target=f"openai:{UNKNOWN}", batch_size=5, concurrency=1)
        assert [len(b) for b in _sent(transport)][4:] == [3, 3, 3, 1]  # the model's 3 wins
        client.embed(texts, target=f"openai:{UNKNOWN}", batch_size=2, concurrency=1)
        assert [len(b) for b in _sent(transport)][8:] == [2] * 5
        client.embed(texts, target="openai:other-model", concurrency=1)  # adapter: 2048
        assert [len(b) for b in _sent(transport)][-1] == 10


def test_discovery_facts_layer_under_overrides() -> None:
    client, transport = _client(
        capability_overrides={f"openai:{UNKNOWN}": ModelCapabilities(embed_max_batch=2)}
    )
    found = DiscoveredModel(
        "openai", UNKNOWN, facts={"embed_max_batch": 4, "embed_max_dimensions": 64}
    )
    caps = capabilities_from_discovery(found)
    assert caps.embed_max_batch == 4 and caps.source("embed_max_batch") == "discovery"
    with client:
        client._async._targets.record(f"openai:{UNKNOWN}", caps, "discovery")
        assembled = client.capabilities(f"openai:{UNKNOWN}")
        assert assembled.embed_max_batch == 2 and assembled.source("embed_max_batch") == "override"
        assert assembled.source("embed_max_dimensions") == "discovery"
        with pytest.raises(ai.ConfigError, match="discovery"):
            client.embed(["a"], target=f"openai:{UNKNOWN}", dimensions=128)
        client.embed(["a", "b", "c"], target=f"openai:{UNKNOWN}", concurrency=1)
    assert [len(b) for b in _sent(transport)] == [2, 1]


def test_a_fallback_targets_known_limits_refuse_the_call_too() -> None:
    """Every target embeds into one vector space, so one model fact holds for all."""
    transport = FakeTransport("openai-chat", lambda request: Script())
    providers = [
        ai.ProviderSettings("openai", api_key="k", transport=transport),
        ai.ProviderSettings("openai", api_key="k", alias="proxy", transport=transport),
    ]
    overrides = {f"proxy:{UNKNOWN}": ModelCapabilities(embed_max_dimensions=64)}
    with ai.Client(providers, capability_overrides=overrides) as client:
        route = [f"openai:{UNKNOWN}", f"proxy:{UNKNOWN}"]
        with pytest.raises(ai.ConfigError, match=f"proxy:{UNKNOWN} produces at most 64"):
            client.embed(["a"], route=route, dimensions=128)
    assert transport.served == 0


def test_capability_fields_check_their_types() -> None:
    caps = ModelCapabilities.from_mapping(
        {"embed_dimension_options": [256, 512], "embed_input_types": ["query", "document"]}
    )
    assert caps.embed_dimension_options == (256, 512)
    assert caps.embed_input_types == ("query", "document")
    assert set(caps.at("probe").provenance) == {"embed_dimension_options", "embed_input_types"}
    assert EMBEDDING_FIELDS[0] == "embed_dimensions" and len(EMBEDDING_FIELDS) == 7
    for bad in (
        {"embed_dimension_options": (0, 256)},
        {"embed_dimension_options": (True,)},
        {"embed_input_types": ("",)},
        {"embed_max_batch": 0},
        {"embed_max_input_tokens": 1.5},
        {"embed_dimensions_param": "yes"},
    ):
        with pytest.raises(ai.ConfigError):
            ModelCapabilities(**bad)  # type: ignore[arg-type]
    ignored = capabilities_from_discovery(
        DiscoveredModel("p", "m", facts={"embed_max_batch": "many", "embed_input_types": [1]})
    )
    assert ignored.known() == {}


def test_input_token_floor_is_the_estimators_floor_without_chat_framing() -> None:
    assert input_token_floor("x" * 80, None, "m") == 10  # bytes / 8
    assert input_token_floor("é" * 8, None, "m") == 2  # 16 bytes
    assert input_token_floor("", None, "m") == 0
    pytest.importorskip("tiktoken")
    try:
        counter = ai.TiktokenEstimator()
        exact = input_token_floor("hello world", counter, "text-embedding-3-small")
    except Exception as exc:  # the encoding files may not be reachable offline
        pytest.skip(f"tiktoken encoding unavailable: {exc}")
    assert exact == 2  # 'hello', ' world': no message framing counted


def test_check_capabilities_with_nothing_known_refuses_nothing() -> None:
    target = ResolvedTarget("openai", "m", "openai")
    check_capabilities(
        target, ModelCapabilities(), texts=["x" * 100_000], dimensions=7, estimator=None
    )


# --- pricing -----------------------------------------------------------------------------


def test_the_bundled_table_prices_embedding_models_by_input_tokens() -> None:
    table = PricingTable.default()
    usage = Usage(input_tokens=1_000_000)
    expected = {
        ("openai", "text-embedding-3-small"): "0.02",
        ("openai", "text-embedding-3-large"): "0.13",
        ("openai", "text-embedding-ada-002"): "0.10",
        ("gemini", "gemini-embedding-001"): "0.15",
        ("cohere", "embed-v4.0"): "0.12",
        ("voyage", "voyage-3.5"): "0.06",
        ("mistral", "mistral-embed"): "0.10",
    }
    for (provider, model), price in expected.items():
        assert table.unary_cost(usage, provider, model) == Decimal(price), model
    assert table.unary_cost(Usage(), "openai", "text-embedding-3-small") is None
    assert table.lookup("cohere", "rerank-v3.5") is None  # not verified: left out
    assert "genai-prices" in (table.source or "")


def test_search_unit_pricing_round_trips_and_ignores_tokens() -> None:
    doc = {
        "format": "anyinfer-pricing/1",
        "providers": {
            "acme": {
                "ranker": {"input": "0", "output": "0", "search_unit": "2.00"},
                "tokens": {"input": "0.05", "output": "0"},
            }
        },
    }
    table = PricingTable.from_json(doc)
    ranker = table.lookup("acme", "ranker")
    assert ranker is not None and ranker.search_unit == Decimal("0.002")
    usage = Usage(input_tokens=12_345)
    assert table.unary_cost(usage, "acme", "ranker", search_units=3) == Decimal("0.006")
    assert table.unary_cost(usage, "acme", "ranker") is None  # no units reported
    assert table.unary_cost(usage, "acme", "tokens", search_units=3) == Decimal("0.05") * Decimal(
        12_345
    ) / Decimal(1_000_000)
    again = PricingTable.from_json(table.to_json())
    assert again.lookup("acme", "ranker") == ranker
    assert table.to_json()["providers"]["acme"]["ranker"]["search_unit"] == "2"
    for bad in ("-1", "free"):
        broken = {
            "format": "anyinfer-pricing/1",
            "providers": {"a": {"m": {"input": "0", "output": "0", "search_unit": bad}}},
        }
        with pytest.raises(ai.ConfigError):
            PricingTable.from_json(broken)
    assert ModelPrice(Decimal(0), Decimal(0)).unary_cost(Usage(), 5) is None
