"""The alias catalog: bundled data, resolution order, suggestions, custom catalogs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from anyinfer._errors import ConfigError
from anyinfer._knowledge.capabilities import ModelCapabilities
from anyinfer._knowledge.catalog import CATALOG_FORMAT, Catalog

HOSTED = ("openai", "anthropic", "gemini")
LOCAL = ("ollama", "vllm", "llama.cpp", "lmstudio", "openai-compat")


@pytest.fixture(scope="module")
def default() -> Catalog:
    return Catalog.load_default()


def test_default_is_cached_and_dated(default: Catalog) -> None:
    assert Catalog.load_default() is default
    assert default.as_of
    assert {"gpt-4o-mini", "claude-sonnet", "qwen3-8b"} <= set(default.aliases)


def test_alias_resolves_in_provider_order(default: Catalog) -> None:
    order = [("azure", "azure-foundry"), ("openai", "openai"), ("local", "ollama")]
    assert default.resolve_alias("gpt-4o-mini", order) == [
        ("azure", "gpt-4o-mini"),
        ("openai", "gpt-4o-mini"),
    ]
    assert default.resolve_alias("GPT-4o-mini", list(reversed(order))) == [
        ("openai", "gpt-4o-mini"),
        ("azure", "gpt-4o-mini"),
    ]


def test_alias_resolves_per_instance_of_an_engine(default: Catalog) -> None:
    order = [("work", "openai"), ("personal", "openai"), ("claude", "anthropic")]
    assert default.resolve_alias("claude-sonnet", order) == [("claude", "claude-sonnet-4-5")]
    assert [i for i, _ in default.resolve_alias("gpt-4o", order)] == ["work", "personal"]


def test_local_alias(default: Catalog) -> None:
    order = [("ollama", "ollama"), ("gpu", "vllm")]
    assert default.resolve_alias("qwen3-8b", order) == [
        ("ollama", "qwen3:8b"),
        ("gpu", "Qwen/Qwen3-8B"),
    ]


def test_unknown_alias_or_no_carrier_resolves_to_nothing(default: Catalog) -> None:
    assert default.resolve_alias("gpt4o-mini", [("openai", "openai")]) == []
    assert default.resolve_alias("claude-sonnet", [("openai", "openai")]) == []


def test_suggestions_for_typos(default: Catalog) -> None:
    assert default.suggest("gpt4o-mini")[0] == "gpt-4o-mini"
    assert "claude-sonnet" in default.suggest("claude-sonet")
    assert default.suggest("openai:gpt4o", ["openai:gpt-4o"]) == ["openai:gpt-4o"]
    assert default.suggest("zzzzzzzz") == []
    err = default.unknown_target_error("gpt4o-mini")
    assert isinstance(err, ConfigError)
    assert str(err).startswith("unknown target 'gpt4o-mini'; did you mean gpt-4o-mini")
    assert str(default.unknown_target_error("zzzzzzzz")).startswith("unknown target 'zzzzzzzz' (")


def test_facts_at_catalog_provenance_including_snapshots(default: Catalog) -> None:
    caps = default.facts("openai", "gpt-4o-mini")
    assert caps is not None
    assert caps.context_window == 128_000 and caps.max_output_tokens == 16_384
    assert set(caps.provenance.values()) == {"catalog"}
    assert default.facts("openai", "gpt-4o-mini-2024-07-18") == caps
    assert default.facts("OpenAI", "GPT-4o-mini") == caps
    assert default.facts("openai", "gpt-4o-mini-2099-01-01") is None
    assert default.facts("openai-responses", "gpt-4o-mini") == caps  # declared fallback


def test_bundled_data_invariants(default: Catalog) -> None:
    for key, caps in default.models.items():
        provider = key.split(":", 1)[0]
        if provider in LOCAL:
            # a local engine's served window is a server setting, never catalog data
            assert caps.context_window is None, key
        if caps.context_window is not None and caps.max_output_tokens is not None:
            assert caps.max_output_tokens <= caps.context_window, key
    for alias, targets in default.aliases.items():
        for provider, model in targets.items():
            if provider in HOSTED:
                assert default.facts(provider, model) is not None, (alias, provider, model)


def test_custom_catalog() -> None:
    cat = Catalog(
        aliases={"Fast": {"openai": "gpt-4o-mini", "work": "my-deployment"}},
        models={
            "openai:gpt-4o-mini": ModelCapabilities(context_window=1000),
            "openai:o9": {"reasoning": True, "also": ["o9-2030-01-01"]},
        },
    )
    assert "fast" in cat and "FAST" in cat
    # an entry keyed by the instance id wins over its engine's
    assert cat.resolve_alias("fast", [("work", "azure-foundry"), ("openai", "openai")]) == [
        ("work", "my-deployment"),
        ("openai", "gpt-4o-mini"),
    ]
    o9 = cat.facts("openai", "o9-2030-01-01")
    assert o9 is not None and o9.reasoning is True and o9.source("reasoning") == "catalog"
    assert cat.facts("anthropic", "x") is None
    bigger = cat.extended(
        aliases={"tiny": {"openai": "gpt-4.1-nano"}},
        models={"openai:o9": {"tools": True}, "ollama:new": {"vision": True}},
    )
    assert "tiny" in bigger and "tiny" not in cat
    # laid over field by field: what the extension leaves unknown keeps its value
    assert bigger.facts("openai", "o9") == ModelCapabilities(tools=True, reasoning=True).at(
        "catalog"
    )
    assert bigger.facts("openai", "gpt-4o-mini") == cat.facts("openai", "gpt-4o-mini")
    assert bigger.facts("ollama", "new") is not None and cat.facts("ollama", "new") is None


@pytest.mark.parametrize(
    ("aliases", "models"),
    [
        ({"a:b": {"openai": "m"}}, {}),
        ({"a": {}}, {}),
        ({"a": {"openai": ""}}, {}),
        ({}, {"no-colon": {}}),
        ({}, {"openai:m": {"vision": "yes"}}),
        ({}, {"openai:m": {"also": "m2"}}),
        ({}, {"openai:m": 3}),
    ],
)
def test_malformed_catalog_is_config_error(aliases: dict[str, Any], models: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        Catalog(aliases=aliases, models=models)


def test_from_json_path_and_mapping(tmp_path: Path) -> None:
    doc = {
        "format": CATALOG_FORMAT,
        "as_of": "2030-01-01",
        "aliases": {"mine": {"ollama": "mine:1b"}},
        "models": {"ollama:mine:1b": {"tools": True}},
    }
    path = tmp_path / "catalog.json"
    path.write_text(json.dumps(doc))
    for source in (path, str(path), doc):
        cat = Catalog.from_json(source)
        assert cat.as_of == "2030-01-01"
        assert cat.resolve_alias("mine", [("ollama", "ollama")]) == [("ollama", "mine:1b")]
    with pytest.raises(ConfigError, match="format"):
        Catalog.from_json({**doc, "format": "other/9"})
    with pytest.raises(ConfigError):
        Catalog.from_json({"aliases": []})
    with pytest.raises(ConfigError, match="cannot read"):
        Catalog.from_json(tmp_path / "missing.json")


def test_knowledge_modules_load_nothing_at_import() -> None:
    code = """
import sys, anyinfer
before = set(sys.modules)
import anyinfer._knowledge.catalog, anyinfer._knowledge.pricing
import anyinfer._knowledge.budget, anyinfer._telemetry
import anyinfer._knowledge.capabilities, anyinfer.otel
new = set(sys.modules) - before
roots = {'httpx', 'pydantic', 'opentelemetry', 'difflib', 'tiktoken'}
heavy = {m for m in new if m.split('.')[0] in roots}
assert not heavy, heavy
assert not anyinfer._knowledge.catalog._default.loaded
assert not anyinfer._knowledge.pricing._default.loaded
print('ok')
"""
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
