"""Pricing: exact Decimal cost, never a guess, bundled/genai-prices/fetched tables."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from datetime import date
from decimal import Decimal
from pathlib import Path
from typing import ClassVar

import pytest
from helpers import QuietHandler, http_server

from anyinfer._errors import ConfigError, ProviderError
from anyinfer._knowledge.pricing import (
    DEFAULT_PRICING_URL,
    PRICING_FORMAT,
    ModelPrice,
    PriceTier,
    PricingTable,
    UsageConvention,
    afetch_pricing,
    fetch_pricing,
)
from anyinfer._types import Usage

M = Decimal(1_000_000)


@pytest.fixture(scope="module")
def table() -> PricingTable:
    return PricingTable.default()


def test_default_table_is_dated_and_cached(table: PricingTable) -> None:
    assert PricingTable.default() is table
    assert table.as_of and date.fromisoformat(table.as_of)
    assert len(table) >= 15


def test_cost_matches_the_table_for_a_recorded_usage(table: PricingTable) -> None:
    # A recorded OpenAI gpt-4o-mini usage: 1000 prompt tokens of which 200 cached.
    usage = Usage(input_tokens=1000, output_tokens=500, cache_read_tokens=200)
    expected = (800 * Decimal("0.15") + 200 * Decimal("0.075") + 500 * Decimal("0.60")) / M
    assert table.cost(usage, "openai", "gpt-4o-mini") == expected == Decimal("0.000435")
    # the dated snapshot is priced because the table lists it, not by guessing
    assert table.cost(usage, "openai", "gpt-4o-mini-2024-07-18") == expected


def test_unknown_pricing_is_none(table: PricingTable) -> None:
    usage = Usage(input_tokens=10, output_tokens=10)
    assert table.cost(usage, "openai", "gpt-4o-mini-2099-01-01") is None  # no guessing
    assert table.cost(usage, "openai", "gpt-4o-mini-turbo") is None
    assert table.cost(usage, "ollama", "qwen3:8b") is None
    assert table.cost(usage, "azure-foundry", "gpt-4o-mini") is None  # no Azure list price


def test_missing_or_contradictory_usage_is_none(table: PricingTable) -> None:
    assert table.cost(Usage(input_tokens=10), "openai", "gpt-4o") is None
    assert table.cost(Usage(output_tokens=10), "openai", "gpt-4o") is None
    contradictory = Usage(input_tokens=10, output_tokens=1, cache_read_tokens=11)
    assert table.cost(contradictory, "openai", "gpt-4o") is None
    # OpenAI has no cache-write price: a reported cache write makes the cost unknowable
    writes = Usage(input_tokens=10, output_tokens=1, cache_write_tokens=5)
    assert table.cost(writes, "openai", "gpt-4o") is None


def test_anthropic_counts_cache_outside_input(table: PricingTable) -> None:
    usage = Usage(
        input_tokens=100, output_tokens=50, cache_read_tokens=1000, cache_write_tokens=200
    )
    expected = (
        100 * Decimal("3") + 1000 * Decimal("0.30") + 200 * Decimal("3.75") + 50 * Decimal("15")
    ) / M
    assert table.cost(usage, "anthropic", "claude-sonnet-4-5-20250929") == expected
    assert expected == Decimal("0.0021")


def test_gemini_bills_thoughts_as_output_and_tiers_by_prompt(table: PricingTable) -> None:
    # the Gemini adapter reports output = candidates + thoughts
    flash = Usage(input_tokens=1000, output_tokens=500, reasoning_tokens=400)
    assert (
        table.cost(flash, "gemini", "gemini-2.5-flash")
        == (1000 * Decimal("0.30") + 500 * Decimal("2.50")) / M
    )
    short = Usage(input_tokens=200_000, output_tokens=10)
    long = Usage(input_tokens=200_001, output_tokens=10)
    assert (
        table.cost(short, "gemini", "gemini-2.5-pro")
        == (200_000 * Decimal("1.25") + 10 * Decimal("10")) / M
    )
    assert (
        table.cost(long, "gemini", "gemini-2.5-pro")
        == (200_001 * Decimal("2.50") + 10 * Decimal("15")) / M
    )


def test_separate_reasoning_price_needs_reasoning_count() -> None:
    price = ModelPrice.per_million("1", "4", reasoning="2")
    table = PricingTable({"acme:thinker": price})
    known = Usage(input_tokens=10, output_tokens=100, reasoning_tokens=60)
    assert table.cost(known, "acme", "thinker") == (10 * 1 + 40 * 4 + 60 * 2) / M
    assert table.cost(Usage(input_tokens=10, output_tokens=100), "acme", "thinker") is None
    over = Usage(input_tokens=10, output_tokens=100, reasoning_tokens=101)
    assert table.cost(over, "acme", "thinker") is None


def test_anthropic_long_prompt_tier_counts_cached_tokens() -> None:
    tier = PriceTier(above_input_tokens=1000, input=Decimal(2) / M, cache_read=Decimal(1) / M)
    table = PricingTable(
        {"anthropic:m": ModelPrice.per_million(1, 1, cache_read="0.5", tiers=[tier])}
    )
    # 10 uncached + 1000 cached = 1010 prompt tokens: over the threshold
    usage = Usage(input_tokens=10, output_tokens=0, cache_read_tokens=1000)
    assert table.cost(usage, "anthropic", "m") == (10 * 2 + 1000 * 1) / M


def test_conventions_are_per_engine_and_overridable() -> None:
    price = ModelPrice.per_million("1", "1", cache_read="0.5")
    usage = Usage(input_tokens=100, output_tokens=0, cache_read_tokens=100)
    openai_style = PricingTable({"a:m": price})
    assert openai_style.cost(usage, "a", "m") == Decimal(50) / M
    custom = PricingTable({"a:m": price}, conventions={"a": UsageConvention(False, True)})
    assert custom.cost(usage, "a", "m") == Decimal(150) / M
    # an engine whose output count leaves reasoning out
    apart = PricingTable({"a:m": price}, conventions={"a": UsageConvention(True, False)})
    thinking = Usage(input_tokens=0, output_tokens=10, reasoning_tokens=30)
    assert apart.cost(thinking, "a", "m") == Decimal(40) / M
    assert openai_style.cost(thinking, "a", "m") == Decimal(10) / M
    assert set(PricingTable.default().conventions) == set()  # adapters declare theirs


def test_cost_is_exact_decimal() -> None:
    price = ModelPrice.per_million("0.0000001", "3.333333333333333333")
    usage = Usage(input_tokens=987_654_321, output_tokens=123_456_789)
    result = price.cost(usage)
    assert isinstance(result, Decimal)
    expected = (
        987_654_321 * Decimal("0.0000001") + 123_456_789 * Decimal("3.333333333333333333")
    ) / M
    assert result == expected


def test_from_json_validates(tmp_path: Path) -> None:
    base = {"format": PRICING_FORMAT, "providers": {"acme": {"m": {"input": 1, "output": 2}}}}
    assert PricingTable.from_json(base).lookup("acme", "m") == ModelPrice.per_million(1, 2)
    path = tmp_path / "p.json"
    path.write_text(json.dumps(base))
    assert len(PricingTable.from_json(path)) == 1
    bad_models = [
        {"input": 1},
        {"input": -1, "output": 1},
        {"input": "abc", "output": 1},
        {"input": 1, "output": 1, "colour": "red"},
        {"input": 1, "output": 1, "aliases": "m2"},
        {"input": 1, "output": 1, "tiers": [{"input": 2}]},
        {"input": 1, "output": 1, "match": {"glob": "m*"}},
        {"input": 1, "output": 1, "match": {"regex": "("}},
        {"input": 1, "output": 1, "context_window": 0},
        "free",
    ]
    for spec in bad_models:
        with pytest.raises(ConfigError):
            PricingTable.from_json({**base, "providers": {"acme": {"m": spec}}})
    with pytest.raises(ConfigError):
        PricingTable.from_json({"providers": {}})
    with pytest.raises(ConfigError):
        PricingTable.from_json({"format": PRICING_FORMAT, "providers": []})


def test_prefixes_and_match_rules_are_explicit() -> None:
    doc = {
        "format": PRICING_FORMAT,
        "providers": {
            "acme": {
                "m1": {"input": 1, "output": 1, "prefixes": ["m1-"]},
                "m2": {"input": 2, "output": 2, "match": {"regex": "^m2-\\d{4}$"}},
            }
        },
    }
    table = PricingTable.from_json(doc)
    assert table.lookup("acme", "M1-anything") == ModelPrice.per_million(1, 1)
    assert table.lookup("acme", "m2-2030") == ModelPrice.per_million(2, 2)
    assert table.lookup("acme", "m2-later") is None
    assert table.lookup("acme", "m1") is not None and table.lookup("acme", "m1x") is None


def test_round_trip_through_our_format(table: PricingTable) -> None:
    again = PricingTable.from_json(json.loads(json.dumps(table.to_json())))
    assert again.to_json() == table.to_json()
    for key in (
        "openai:gpt-4o-mini-2024-07-18",
        "gemini:gemini-2.5-pro",
        "anthropic:claude-opus-4-1",
    ):
        provider, model = key.split(":")
        assert again.lookup(provider, model) == table.lookup(provider, model)


def test_merged_prefers_newer(table: PricingTable) -> None:
    newer = PricingTable(
        {"openai:gpt-4o-mini": ModelPrice.per_million("9", "9")}, as_of="2031-01-01"
    )
    merged = table.merged(newer)
    assert merged.lookup("openai", "gpt-4o-mini") == ModelPrice.per_million("9", "9")
    # the older table still fills gaps, snapshots included
    snapshot = table.lookup("openai", "gpt-4o-mini-2024-07-18")
    assert merged.lookup("openai", "gpt-4o-mini-2024-07-18") == snapshot
    assert merged.lookup("anthropic", "claude-opus-4-1") == table.lookup(
        "anthropic", "claude-opus-4-1"
    )
    assert merged.as_of == "2031-01-01"


def test_tiers_choose_by_prompt_size() -> None:
    tier = PriceTier(above_input_tokens=100, input=Decimal(2) / M)
    price = ModelPrice.per_million(1, 5, tiers=[tier])
    assert price.for_prompt(100).input == Decimal(1) / M
    assert price.for_prompt(101).input == Decimal(2) / M
    assert price.for_prompt(101).output == Decimal(5) / M  # None in a tier keeps the base


# --- genai-prices ------------------------------------------------------------------------

GENAI = [
    {
        "id": "openai",
        "name": "OpenAI",
        "api_pattern": "https://api\\.openai\\.com",
        "models": [
            {
                "id": "gpt-4o-mini",
                "match": {"or": [{"equals": "gpt-4o-mini"}, {"equals": "gpt-4o-mini-2024-07-18"}]},
                "context_window": 128000,
                "prices": {
                    "input_mtok": 0.15,
                    "cache_read_mtok": 0.075,
                    "output_mtok": 0.6,
                    "web_searches_kcount": 10,
                },
            },
            {
                "id": "o3",
                "match": {"starts_with": "o3"},
                "prices": [
                    {"prices": {"input_mtok": 10, "cache_read_mtok": 0.5, "output_mtok": 40}},
                    {
                        "constraint": {"start_date": "2025-06-10"},
                        "prices": {"input_mtok": 2, "cache_read_mtok": 0.5, "output_mtok": 8},
                    },
                ],
            },
            {
                "id": "gpt-image-1",
                "match": {"equals": "gpt-image-1"},
                "prices": {"input_mtok": 5, "output_mtok": 40, "output_image_mtok": 40},
            },
            {
                "id": "text-embedding-3-small",
                "match": {"equals": "text-embedding-3-small"},
                "prices": {"input_mtok": 0.02},
            },
        ],
    },
    {
        "id": "google",
        "name": "Google",
        "api_pattern": "x",
        "models": [
            {
                "id": "gemini-2.5-pro",
                "match": {"starts_with": "gemini-2.5-pro"},
                "prices": {
                    "input_mtok": {"base": 1.25, "tiers": [{"start": 200000, "price": 2.5}]},
                    "output_mtok": {"base": 10, "tiers": [{"start": 200000, "price": 15}]},
                },
            }
        ],
    },
    {
        "id": "deepseek",
        "name": "DeepSeek",
        "api_pattern": "x",
        "models": [
            {
                "id": "deepseek-chat",
                "match": {"equals": "deepseek-chat"},
                "prices": [
                    {"prices": {"input_mtok": 0.27, "output_mtok": 1.1}},
                    {
                        "constraint": {"start_time": "16:30:00Z", "end_time": "00:30:00Z"},
                        "prices": {"input_mtok": 0.135, "output_mtok": 0.55},
                    },
                ],
            }
        ],
    },
    {
        "id": "openrouter",
        "name": "OpenRouter",
        "api_pattern": "x",
        "fallback_model_providers": ["openai"],
        "models": [],
    },
]


def test_from_genai_prices() -> None:
    table = PricingTable.from_genai_prices(json.loads(json.dumps(GENAI)), at=date(2026, 1, 1))
    assert table.as_of == "2026-01-01" and table.source and "genai-prices" in table.source
    mini = table.lookup("openai", "GPT-4o-mini-2024-07-18")
    assert mini == ModelPrice.per_million("0.15", "0.6", cache_read="0.075")
    assert table.context_window("openai", "gpt-4o-mini") == 128000
    # dated price changes: the price in force on `at`
    assert table.lookup("openai", "o3") == ModelPrice.per_million(2, 8, cache_read="0.5")
    early = PricingTable.from_genai_prices(GENAI, at=date(2025, 1, 1))
    assert early.lookup("openai", "o3") == ModelPrice.per_million(10, 40, cache_read="0.5")
    # provider ids map to AnyInfer engine ids; tiers come across
    pro = table.lookup("gemini", "gemini-2.5-pro")
    assert pro is not None and pro.for_prompt(300_000) == ModelPrice.per_million("2.5", 15)
    assert table.lookup("google", "gemini-2.5-pro") is None
    # declared fallbacks, and the Responses engine borrowing OpenAI's prices
    assert table.lookup("openrouter", "gpt-4o-mini") == mini
    assert table.lookup("openai-responses", "gpt-4o-mini") == mini
    # never a guess: time-of-day prices, unpriced units, missing output price
    assert table.lookup("deepseek", "deepseek-chat") is None
    assert table.lookup("openai", "gpt-image-1") is None
    assert table.lookup("openai", "text-embedding-3-small") is None


def test_from_genai_prices_rejects_other_shapes(tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        PricingTable.from_genai_prices({"providers": []})  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        PricingTable.from_genai_prices([{"name": "no id"}])
    with pytest.raises(ConfigError):
        PricingTable.from_genai_prices([{"id": "x", "models": [{"id": "m", "prices": 3}]}])
    path = tmp_path / "data.json"
    path.write_text(json.dumps(GENAI))
    assert PricingTable.from_genai_prices(path).lookup("openai", "gpt-4o-mini") is not None


# --- fetching ----------------------------------------------------------------------------


class _Handler(QuietHandler):
    routes: ClassVar[dict[str, tuple[int, bytes]]] = {}

    def do_GET(self) -> None:
        self.reply(*self.routes.get(self.path, (404, b"not found")), "application/json")


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    ours = PricingTable(
        {"acme:m": ModelPrice.per_million("1.5", "2")}, as_of="2031-02-03", source="test"
    )
    _Handler.routes = {
        "/ours.json": (200, json.dumps(ours.to_json()).encode()),
        "/genai.json": (200, json.dumps(GENAI).encode()),
        "/garbage": (200, b"<html>not json</html>"),
        "/wrong-shape": (200, b'"a string"'),
        "/wrong-format": (200, b'{"format": "something-else/2"}'),
        "/boom": (500, b"{}"),
    }
    with http_server(_Handler) as url:
        yield url


@pytest.mark.loopback
def test_fetch_pricing_over_loopback(server: str) -> None:
    table = fetch_pricing(f"{server}/ours.json", timeout_s=5)
    assert table.as_of == "2031-02-03"
    assert table.cost(Usage(input_tokens=2, output_tokens=1), "acme", "m") == Decimal("5") / M
    genai = fetch_pricing(f"{server}/genai.json")
    assert genai.lookup("openai", "gpt-4o-mini") is not None


@pytest.mark.loopback
@pytest.mark.parametrize("path", ["/garbage", "/wrong-shape", "/wrong-format"])
def test_fetch_pricing_bad_payload_is_config_error(server: str, path: str) -> None:
    with pytest.raises(ConfigError):
        fetch_pricing(server + path)


@pytest.mark.loopback
def test_fetch_pricing_http_failures_are_provider_errors(server: str) -> None:
    with pytest.raises(ProviderError) as missing:
        fetch_pricing(f"{server}/nope")
    assert missing.value.http_status == 404 and not missing.value.retryable
    with pytest.raises(ProviderError) as boom:
        fetch_pricing(f"{server}/boom")
    assert boom.value.http_status == 500 and boom.value.retryable


@pytest.mark.loopback
def test_afetch_pricing_over_loopback(server: str) -> None:
    table = asyncio.run(afetch_pricing(f"{server}/ours.json", timeout_s=5))
    assert table.lookup("acme", "m") == ModelPrice.per_million("1.5", "2")
    with pytest.raises(ConfigError):
        asyncio.run(afetch_pricing(f"{server}/garbage"))


def test_fetch_pricing_connection_refused() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ProviderError):
        fetch_pricing(f"http://127.0.0.1:{port}/x", timeout_s=2)


def test_default_url_is_documented_genai_prices() -> None:
    assert DEFAULT_PRICING_URL.startswith(
        "https://raw.githubusercontent.com/pydantic/genai-prices/"
    )
