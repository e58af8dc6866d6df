"""Capability layers: catalog < discovery < probe < override, field by field."""

from __future__ import annotations

import copy
import dataclasses
import pickle

import pytest

from anyinfer._adapters.base import DiscoveredModel
from anyinfer._errors import ConfigError
from anyinfer._knowledge.capabilities import (
    CAPABILITY_FIELDS,
    PROVENANCE_ORDER,
    CapabilityStore,
    ModelCapabilities,
    capabilities_from_discovery,
    is_trusted,
    split_key,
)
from anyinfer._knowledge.catalog import Catalog
from anyinfer._knowledge.pricing import PricingTable

CATALOG = Catalog(
    models={
        "openai:gpt-x": {
            "context_window": 128_000,
            "max_output_tokens": 16_384,
            "tools": True,
            "vision": True,
            "json_schema": True,
        }
    }
)


def test_field_list_matches_the_dataclass() -> None:
    names = tuple(f.name for f in dataclasses.fields(ModelCapabilities) if f.name != "provenance")
    assert names == CAPABILITY_FIELDS
    assert PROVENANCE_ORDER == ("catalog", "discovery", "probe", "override")


@pytest.mark.parametrize(
    "kwargs",
    [
        {"context_window": 0},
        {"context_window": -5},
        {"context_window": True},
        {"max_output_tokens": 1.5},
        {"tools": 1},
        {"vision": "yes"},
        {"provenance": {"tools": "guess"}},
        {"provenance": {"colour": "catalog"}},
    ],
)
def test_capabilities_reject_wrong_types(kwargs: dict[str, object]) -> None:
    with pytest.raises(ConfigError):
        ModelCapabilities(**kwargs)  # type: ignore[arg-type]


def test_from_mapping_rejects_unknown_fields() -> None:
    with pytest.raises(ConfigError, match="colour"):
        ModelCapabilities.from_mapping({"colour": "blue"})
    caps = ModelCapabilities.from_mapping({"tools": True, "vision": None})
    assert caps.known() == {"tools": True}


def test_capabilities_are_hashable_frozen_and_picklable() -> None:
    caps = ModelCapabilities(tools=True).at("probe")
    assert hash(caps) == hash(ModelCapabilities(tools=True).at("probe"))
    assert caps != ModelCapabilities(tools=True).at("override")
    assert caps.provenance == {"tools": "probe"}
    with pytest.raises(TypeError):
        caps.provenance["tools"] = "override"  # type: ignore[index]
    assert pickle.loads(pickle.dumps(caps)) == caps
    assert copy.deepcopy(caps) == caps


def test_layers_assemble_field_by_field_with_provenance() -> None:
    store = CapabilityStore(
        catalog=CATALOG,
        overrides={"openai:gpt-x": ModelCapabilities(context_window=64_000, vision=False)},
    )
    store.record(
        "openai:gpt-x", ModelCapabilities(context_window=100_000, tools=False), "discovery"
    )
    store.record("openai:gpt-x", ModelCapabilities(max_output_tokens=8_000), "probe")

    caps = store.get("openai:gpt-x")

    # override beats discovery beats catalog, per field
    assert caps.context_window == 64_000 and caps.source("context_window") == "override"
    assert caps.vision is False and caps.source("vision") == "override"
    assert caps.tools is False and caps.source("tools") == "discovery"
    assert caps.max_output_tokens == 8_000 and caps.source("max_output_tokens") == "probe"
    assert caps.json_schema is True and caps.source("json_schema") == "catalog"
    # nobody knows: unknown, not "no"
    assert caps.reasoning is None and caps.source("reasoning") is None
    assert "reasoning" not in caps.provenance


def test_discovery_beats_catalog_without_override() -> None:
    store = CapabilityStore(catalog=CATALOG)
    assert store.get("openai:gpt-x").source("context_window") == "catalog"
    store.record("openai:gpt-x", ModelCapabilities(context_window=100_000), "discovery")
    caps = store.get("openai:gpt-x")
    assert (caps.context_window, caps.source("context_window")) == (100_000, "discovery")
    store.record("openai:gpt-x", ModelCapabilities(context_window=90_000), "probe")
    assert store.get("openai:gpt-x").context_window == 90_000


def test_override_applies_every_supplied_field_even_false() -> None:
    store = CapabilityStore(
        catalog=CATALOG,
        overrides={"openai:gpt-x": ModelCapabilities(tools=False, json_schema=False)},
    )
    store.record("openai:gpt-x", ModelCapabilities(tools=True), "probe")
    caps = store.get("openai:gpt-x")
    assert caps.tools is False and caps.json_schema is False
    assert caps.source("tools") == caps.source("json_schema") == "override"


def test_catalog_falls_back_from_instance_to_engine() -> None:
    store = CapabilityStore(catalog=CATALOG)
    caps = store.get("work:gpt-x", provider_id="openai")
    assert caps.context_window == 128_000 and caps.source("context_window") == "catalog"
    # without the engine id there is nothing to fall back to
    assert store.get("work:gpt-x").context_window is None


def test_discovery_stays_with_its_instance() -> None:
    store = CapabilityStore(catalog=CATALOG)
    store.record("work:gpt-x", ModelCapabilities(context_window=32_000), "discovery")
    assert store.get("work:gpt-x", provider_id="openai").context_window == 32_000
    assert store.get("home:gpt-x", provider_id="openai").context_window == 128_000
    assert store.get("openai:gpt-x").context_window == 128_000


def test_instance_override_beats_engine_override() -> None:
    store = CapabilityStore(
        catalog=CATALOG,
        overrides={
            "openai:gpt-x": ModelCapabilities(context_window=50_000, vision=False),
            "work:gpt-x": ModelCapabilities(context_window=40_000),
        },
    )
    work = store.get("work:gpt-x", provider_id="openai")
    assert work.context_window == 40_000 and work.vision is False
    assert store.get("home:gpt-x", provider_id="openai").context_window == 50_000


def test_records_within_a_layer_overlay() -> None:
    store = CapabilityStore()
    store.record("ollama:qwen3:8b", ModelCapabilities(context_window=8192, tools=True), "discovery")
    store.record("ollama:qwen3:8b", ModelCapabilities(context_window=40960), "discovery")
    caps = store.get("ollama:qwen3:8b")
    assert (caps.context_window, caps.tools) == (40960, True)
    assert store.layer("OLLAMA:qwen3:8b", "discovery") is not None
    store.forget("ollama:qwen3:8b", "discovery")
    assert store.get("ollama:qwen3:8b") == ModelCapabilities()


def test_pricing_windows_fill_catalog_gaps_only() -> None:
    # a genai-prices dataset carries context windows alongside prices
    data = [
        {
            "id": "openai",
            "models": [
                {
                    "id": "gpt-x",
                    "context_window": 1_000,
                    "prices": {"input_mtok": 1, "output_mtok": 2},
                },
                {
                    "id": "gpt-y",
                    "context_window": 2_000,
                    "prices": {"input_mtok": 1, "output_mtok": 2},
                },
            ],
        }
    ]
    table = PricingTable.from_genai_prices(data)
    store = CapabilityStore(catalog=CATALOG, pricing=table)
    assert store.get("openai:gpt-x").context_window == 128_000  # the catalog wins
    caps = store.get("openai:gpt-y")
    assert caps.context_window == 2_000 and caps.source("context_window") == "catalog"


def test_bad_overrides_and_keys_are_config_errors() -> None:
    with pytest.raises(ConfigError):
        CapabilityStore(overrides={"openai:gpt-x": {"tools": True}})  # type: ignore[dict-item]
    with pytest.raises(ConfigError):
        CapabilityStore(overrides={"gpt-x": ModelCapabilities(tools=True)})
    with pytest.raises(ConfigError):
        CapabilityStore().record("openai:m", ModelCapabilities(), "guess")  # type: ignore[arg-type]
    assert split_key("Ollama:qwen3:8b") == ("ollama", "qwen3:8b")


def test_capabilities_from_discovery() -> None:
    found = DiscoveredModel(
        provider="ollama",
        id="qwen3:8b",
        context_window=40960,
        facts={"tools": True, "vision": "maybe", "context_window": 1, "family": "qwen3"},
    )
    caps = capabilities_from_discovery(found)
    assert caps.known() == {"context_window": 40960, "tools": True}
    assert set(caps.provenance.values()) == {"discovery"}
    assert capabilities_from_discovery(DiscoveredModel(provider="x", id="m")) == ModelCapabilities()


def test_trust() -> None:
    assert all(is_trusted(p) for p in PROVENANCE_ORDER)
    assert not is_trusted(None)
