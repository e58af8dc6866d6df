"""`embed()`: batching, order, decoding, usage, routing and the vector-space rule.

Served by the fake servers' embedding endpoints (`fakeservers/dialects/_embeddings.py`):
`FakeServer` over real loopback HTTP, `FakeTransport` where many calls are made.
"""

from __future__ import annotations

import asyncio
import base64
import json
import struct
import sys
from array import array
from decimal import Decimal
from typing import Any

import httpx
import pytest
from helpers import f32
from hypothesis import given, settings
from hypothesis import strategies as st

import anyinfer as ai
from anyinfer._adapters.registry import ProviderRegistry
from anyinfer._embed._runner import check_vector_space, split_batches
from anyinfer._embed._wire import decode_vector
from anyinfer.adapters import Adapter, EmbedReply, EmbedRequest, HTTPAdapter
from anyinfer.fakeservers import FakeServer, FakeTransport, Fault, Script
from anyinfer.fakeservers.dialects._embeddings import fake_vector, token_count

FAST = ai.RetryPolicy(max_retries=2, backoff_base_s=0.001, jitter=0.0)
MODEL = "text-embedding-3-small"
TEXTS = [f"document number {i} about {'cats' if i % 2 else 'dogs'}" for i in range(10)]


def openai(base_url: str, alias: str | None = None) -> ai.ProviderSettings:
    return ai.ProviderSettings("openai", api_key="sk-test", base_url=base_url, alias=alias)


def statuses(result: ai.Embeddings | ai.AnyInferError) -> list[str]:
    return [a.outcome for a in result.attempts]


@pytest.mark.loopback
def test_order_count_and_usage_across_batches() -> None:
    with FakeServer("openai-chat", [Script()] * 4) as srv:
        with ai.Client([openai(srv.base_url)]) as client:
            result = client.embed(TEXTS, target=f"openai:{MODEL}", batch_size=3, concurrency=2)
        srv.assert_all_used()
        sent = [r.json["input"] for r in srv.requests]
    assert sorted(len(batch) for batch in sent) == [1, 3, 3, 3]
    assert sorted(t for batch in sent for t in batch) == sorted(TEXTS)
    assert len(result) == len(TEXTS) == len(result.vectors)
    for text, vec in zip(TEXTS, result, strict=True):
        assert isinstance(vec, array) and vec.typecode == "f"
        assert vec == f32(fake_vector(text))
    assert result.dimensions == 256
    tokens = sum(token_count(t) for t in TEXTS)
    assert result.usage.input_tokens == tokens and result.usage.total_tokens == tokens
    assert len(result.batch_targets) == 4 and str(result.target) == f"openai:{MODEL}"
    assert statuses(result) == ["ok"] * 4
    # the bundled table prices text-embedding-3-small at $0.02 per million input tokens
    assert result.cost_usd == Decimal("0.02") * tokens / 1_000_000
    assert result.timing.total_ms > 0


@pytest.mark.loopback
def test_base64_and_float_decode_to_the_same_vectors() -> None:
    with FakeServer("openai-chat", [Script(), Script()]) as srv:
        with ai.Client([openai(srv.base_url)]) as client:
            packed = client.embed(["a b c", "d"], target=f"openai:{MODEL}")
            floats = client.embed(["a b c", "d"], target=f"openai:{MODEL}", encoding="float")
        bodies = [r.json for r in srv.requests]
    assert [b["encoding_format"] for b in bodies] == ["base64", "float"]
    assert packed.vectors == floats.vectors == (f32(fake_vector("a b c")), f32(fake_vector("d")))


def test_decode_vector_reads_little_endian_float32_and_refuses_garbage() -> None:
    values = [1.5, -2.25, 0.0, 3.0e-8]
    wire = base64.b64encode(struct.pack("<4f", *values)).decode()
    assert decode_vector(wire, "p", "x") == f32(values)
    assert decode_vector([1, 2.5], "p", "x") == f32([1.0, 2.5])
    bad = ["%%%", base64.b64encode(b"\x00" * 6).decode(), [1, "2"], [True], [], {"v": 1}, None]
    for value in bad:
        with pytest.raises(ai.ProtocolError):
            decode_vector(value, "p", "x")
    assert sys.byteorder in ("little", "big")  # the decoder swaps on big-endian hosts


@pytest.mark.loopback
def test_ollama_embed_dimensions_phases_and_input_type_warning() -> None:
    with FakeServer("ollama-chat", [Script()]) as srv:
        settings_ = ai.ProviderSettings("ollama", base_url=srv.base_url)
        with ai.Client([settings_]) as client:
            result = client.embed(
                ["hello world", "cats"],
                target="ollama:nomic-embed-text",
                dimensions=16,
                input_type="query",
            )
        body = srv.requests[0].json
    assert srv.requests[0].path == "/api/embed"
    assert body == {"model": "nomic-embed-text", "input": ["hello world", "cats"], "dimensions": 16}
    assert result.dimensions == 16
    assert result.vectors == (f32(fake_vector("hello world", 16)), f32(fake_vector("cats", 16)))
    assert result.usage.input_tokens == 3
    assert set(result.timing.phases) == {"model_load_ms", "server_total_ms"}
    assert any("input_type" in w for w in result.warnings)


@pytest.mark.loopback
def test_an_openai_compatible_preset_inherits_embeddings() -> None:
    with FakeServer("openai-chat", [Script()]) as srv:
        preset = ai.ProviderSettings("together", api_key="k", base_url=srv.base_url)
        with ai.Client([preset]) as client:
            result = client.embed("one text", target="together:BAAI/bge-base-en-v1.5")
    assert srv.requests[0].path == "/v1/embeddings"
    assert len(result) == 1 and result[0] == f32(fake_vector("one text"))


@pytest.mark.loopback
def test_retry_then_fallback_to_a_target_of_the_same_model() -> None:
    down = Script(fault=Fault("status", status=503, message="overloaded"))
    with (
        FakeServer("openai-chat", [down] * 3) as primary,
        FakeServer("openai-chat", [Script()]) as backup,
    ):
        providers = [openai(primary.base_url), openai(backup.base_url, alias="backup")]
        route = ai.Route([f"openai:{MODEL}", f"backup:{MODEL}"], retry=FAST)
        with ai.Client(providers) as client:
            result = client.embed(["x y", "z"], route=route)
        primary.assert_all_used()
        backup.assert_all_used()
    assert statuses(result) == ["retried", "retried", "failed", "ok"]
    assert str(result.target) == f"backup:{MODEL}"
    assert result.attempts[0].error is not None and result.attempts[0].error.http_status == 503
    assert result.vectors == (f32(fake_vector("x y")), f32(fake_vector("z")))


@pytest.mark.loopback
def test_rate_limit_is_retried_on_the_same_target() -> None:
    limited = Script(
        fault=Fault("status", status=429, retry_after=0.01, code="rate_limit_exceeded")
    )
    with FakeServer("openai-chat", [limited, Script()]) as srv:
        route = ai.Route(f"openai:{MODEL}", retry=FAST)
        with ai.Client([openai(srv.base_url)]) as client:
            result = client.embed(["a"], route=route)
    assert statuses(result) == ["retried", "ok"]
    assert result.attempts[0].error is not None
    assert result.attempts[0].error.type_name == "RateLimitError"


@pytest.mark.loopback
def test_a_fallback_of_another_model_is_refused_before_dispatch() -> None:
    with FakeServer("openai-chat", []) as srv, FakeServer("ollama-chat", [Script()]) as oll:
        providers = [openai(srv.base_url), ai.ProviderSettings("ollama", base_url=oll.base_url)]
        with ai.Client(providers) as client:
            with pytest.raises(ai.ConfigError, match="not comparable") as info:
                client.embed(["a"], route=[f"openai:{MODEL}", "ollama:nomic-embed-text"])
            assert "same_vector_space=True" in str(info.value)
            assert srv.requests == [] and oll.requests == []
            # Declared the same space by the caller: served.
            result = client.embed(
                ["a"], route=["ollama:nomic-embed-text", f"openai:{MODEL}"], same_vector_space=True
            )
    assert len(result) == 1


def test_check_vector_space_compares_models() -> None:
    a = ai.ResolvedTarget("openai", "m1", "openai")
    b = ai.ResolvedTarget("backup", "m1", "openai")
    c = ai.ResolvedTarget("backup", "m2", "openai")
    check_vector_space([a, b], 256, same_space=False)
    check_vector_space([a], None, same_space=False)
    check_vector_space([a, c], None, same_space=True)
    with pytest.raises(ai.ConfigError, match="at 256 dimensions"):
        check_vector_space([a, b, c], 256, same_space=False)


@pytest.mark.loopback
def test_errors_are_typed() -> None:
    scripts = [
        Script(fault=Fault("status", status=401, message="bad key", code="invalid_api_key")),
        Script(),  # answered with the fake's 400 for an empty string input
        Script(fault=Fault("malformed")),
    ]
    with FakeServer("openai-chat", scripts) as srv:
        route = ai.Route(f"openai:{MODEL}", retry=FAST)
        with ai.Client([openai(srv.base_url)]) as client:
            found = []
            for inputs in (["a"], [""], ["a"]):
                with pytest.raises(ai.AllTargetsFailedError) as info:
                    client.embed(inputs, route=route)
                last = info.value.attempts[-1].error
                assert last is not None
                found.append(last.type_name)
    assert found == ["AuthenticationError", "ProviderError", "ProtocolError"]


def test_a_provider_that_cannot_embed_is_refused_by_name() -> None:
    providers = [
        ai.ProviderSettings("anthropic", api_key="sk-ant-test"),
        ai.ProviderSettings("vertex-anthropic", options={"access_token": "t", "project": "p"}),
    ]
    with ai.Client(providers) as client:
        for target in ("anthropic:claude-x", "vertex-anthropic:claude-sonnet-4"):
            with pytest.raises(ai.ConfigError, match="cannot embed") as info:
                client.embed(["a"], target=target)
            assert info.value.provider == target.split(":")[0]


def test_invalid_calls_raise_config_error() -> None:
    transport = FakeTransport("openai-chat", [])
    with ai.Client([ai.ProviderSettings("openai", api_key="k", transport=transport)]) as client:
        target = f"openai:{MODEL}"
        bad: list[dict[str, Any]] = [
            {"inputs": []},
            {"inputs": b"bytes"},
            {"inputs": ["a", 3]},
            {"inputs": ["a"], "dimensions": 0},
            {"inputs": ["a"], "batch_size": 0},
            {"inputs": ["a"], "concurrency": True},
            {"inputs": ["a"], "encoding": "int8"},
            {"inputs": ["a"], "timeout_s": -1},
        ]
        for kwargs in bad:
            with pytest.raises(ai.ConfigError):
                client.embed(target=target, **kwargs)
    assert transport.requests == []


def test_a_failed_batch_fails_the_call_and_nothing_partial_is_returned() -> None:
    scripts = [Script(), Script(fault=Fault("status", status=400, message="no")), Script()]
    transport = FakeTransport("openai-chat", scripts)
    route = ai.Route(f"openai:{MODEL}", retry=FAST)
    with ai.Client([ai.ProviderSettings("openai", api_key="k", transport=transport)]) as client:
        with pytest.raises(ai.AllTargetsFailedError) as info:
            client.embed(["a", "b", "c"], route=route, batch_size=1, concurrency=1)
    assert "ok" in statuses(info.value) and "failed" in statuses(info.value)
    assert transport.served == 2  # the third batch was never sent


def _mock(answer: Any) -> ai.ProviderSettings:
    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        return httpx.Response(200, json=answer(body))

    return ai.ProviderSettings("openai", api_key="k", transport=httpx.MockTransport(handler))


def _data(vectors: list[list[float]], order: list[int] | None = None) -> dict[str, Any]:
    idx = order or list(range(len(vectors)))
    items = [{"object": "embedding", "index": i, "embedding": vectors[i]} for i in idx]
    return {"object": "list", "data": items, "model": MODEL, "usage": {"prompt_tokens": 2}}


def test_entries_are_put_back_in_order_by_index() -> None:
    settings_ = _mock(lambda body: _data([[1.0], [2.0], [3.0]], order=[2, 0, 1]))
    with ai.Client([settings_]) as client:
        result = client.embed(["a", "b", "c"], target=f"openai:{MODEL}")
    assert [v[0] for v in result] == [1.0, 2.0, 3.0]


def test_wrong_count_duplicate_index_and_dimension_drift_are_typed_attempt_failures() -> None:
    cases = [
        (lambda body: _data([[1.0]]), "ProtocolError"),  # one vector for two inputs
        (lambda body: _data([[1.0], [2.0]], order=[0, 0]), "ProtocolError"),  # same index
        (lambda body: _data([[1.0, 2.0], [3.0]]), "ProtocolError"),  # lengths differ
        (lambda body: {"error": {"message": "quota", "type": "insufficient_quota"}}, None),
    ]
    for answer, kind in cases:
        with ai.Client([_mock(answer)]) as client:
            with pytest.raises(ai.AllTargetsFailedError) as info:
                client.embed(["a", "b"], route=ai.Route(f"openai:{MODEL}", retry=FAST))
        last = info.value.attempts[-1].error
        assert last is not None
        # A 200 body carrying only an error goes through the one classifier.
        assert last.type_name == (kind or "RateLimitError"), last
    with ai.Client([_mock(lambda body: _data([[1.0, 2.0], [3.0, 4.0]]))]) as client:
        with pytest.raises(ai.AllTargetsFailedError, match="3 were asked for"):
            client.embed(["a", "b"], target=f"openai:{MODEL}", dimensions=3)


def test_dimension_drift_across_batches_is_refused() -> None:
    calls = iter([[[1.0, 2.0]], [[1.0, 2.0, 3.0]]])
    with ai.Client([_mock(lambda body: _data(next(calls)))]) as client:
        with pytest.raises(ai.ProtocolError, match="one vector space") as info:
            client.embed(["a", "b"], target=f"openai:{MODEL}", batch_size=1, concurrency=1)
    assert statuses(info.value) == ["ok", "ok"]


def test_cost_is_priced_per_batch_when_the_model_has_a_price() -> None:
    price = ai.ModelPrice(input=Decimal("0.00000002"), output=Decimal("0"))
    table = ai.PricingTable({f"openai:{MODEL}": price})
    transport = FakeTransport("openai-chat", lambda request: Script())
    settings_ = ai.ProviderSettings("openai", api_key="k", transport=transport)
    with ai.Client([settings_], pricing_table=table) as client:
        result = client.embed(TEXTS, target=f"openai:{MODEL}", batch_size=4)
    tokens = sum(token_count(t) for t in TEXTS)
    assert result.cost_usd == Decimal("0.00000002") * tokens


def test_async_client_embeds_with_the_same_result() -> None:
    async def main() -> ai.Embeddings:
        transport = FakeTransport("openai-chat", lambda request: Script())
        settings_ = ai.ProviderSettings("openai", api_key="k", transport=transport)
        async with ai.AsyncClient([settings_]) as client:
            return await client.embed(TEXTS, target=f"openai:{MODEL}", batch_size=4)

    result = asyncio.run(main())
    assert result.vectors == tuple(f32(fake_vector(t)) for t in TEXTS)


def test_timeout_is_a_typed_timeout() -> None:
    transport = FakeTransport("openai-chat", [Script(fault=Fault("stall"))])
    route = ai.Route(f"openai:{MODEL}", retry=ai.RetryPolicy(max_retries=0))
    with ai.Client([ai.ProviderSettings("openai", api_key="k", transport=transport)]) as client:
        with pytest.raises(ai.AllTargetsFailedError) as info:
            client.embed(["a"], route=route, timeout_s=0.05)
    last = info.value.attempts[-1].error
    assert last is not None and last.type_name == "ProviderTimeoutError"


def test_split_batches() -> None:
    assert split_batches(5, 2) == [range(0, 2), range(2, 4), range(4, 5)]
    assert split_batches(2, 10) == [range(0, 2)]


@settings(max_examples=25, deadline=None)
@given(
    texts=st.lists(st.text(min_size=1, max_size=12), min_size=1, max_size=30),
    batch_size=st.integers(1, 8),
    concurrency=st.integers(1, 4),
    encoding=st.sampled_from(["base64", "float"]),
)
def test_property_order_count_and_usage(
    texts: list[str], batch_size: int, concurrency: int, encoding: ai.EmbedEncoding
) -> None:
    transport = FakeTransport("openai-chat", lambda request: Script())
    settings_ = ai.ProviderSettings("openai", api_key="k", transport=transport)
    with ai.Client([settings_]) as client:
        result = client.embed(
            texts,
            target=f"openai:{MODEL}",
            batch_size=batch_size,
            concurrency=concurrency,
            encoding=encoding,
            dimensions=8,
        )
    assert result.vectors == tuple(f32(fake_vector(t, 8)) for t in texts)
    assert result.dimensions == 8
    assert result.usage.input_tokens == sum(token_count(t) for t in texts)
    assert len(result.batch_targets) == -(-len(texts) // batch_size) == transport.served


def test_a_broken_body_is_typed_and_retried() -> None:
    scripts = [Script(fault=Fault("disconnect", partial_bytes=10)), Script()]
    transport = FakeTransport("openai-chat", scripts)
    route = ai.Route(f"openai:{MODEL}", retry=FAST)
    with ai.Client([ai.ProviderSettings("openai", api_key="k", transport=transport)]) as client:
        result = client.embed(["a b"], route=route)
    assert statuses(result) == ["retried", "ok"]
    first = result.attempts[0].error
    assert first is not None and first.type_name == "StreamError" and first.retryable


def test_an_open_breaker_skips_its_target_for_embeddings_too() -> None:
    down = Script(fault=Fault("status", status=500))
    primary = FakeTransport("openai-chat", [down])
    backup = FakeTransport("openai-chat", lambda request: Script())
    providers = [
        ai.ProviderSettings("openai", api_key="k", transport=primary),
        ai.ProviderSettings("openai", api_key="k", alias="backup", transport=backup),
    ]
    route = ai.Route(
        [f"openai:{MODEL}", f"backup:{MODEL}"],
        retry=ai.RetryPolicy(max_retries=0),
        breaker_threshold=1,
        breaker_cooldown_s=60,
    )
    with ai.Client(providers) as client:
        first = client.embed(["a"], route=route)
        second = client.embed(["b"], route=route)
    assert statuses(first) == ["failed", "ok"]
    assert statuses(second) == ["skipped_unhealthy", "ok"]
    assert primary.served == 1 and backup.served == 2


@settings(max_examples=25, deadline=None)
@given(
    texts=st.lists(st.sampled_from(["alpha", "beta gamma", "delta", "x y z"]), max_size=20),
    batch_size=st.integers(1, 6),
    concurrency=st.integers(1, 3),
    failing=st.sets(st.integers(0, 19)),
    status=st.sampled_from([429, 500, 502, 503]),
)
def test_property_retryable_batch_failures_lose_nothing(
    texts: list[str], batch_size: int, concurrency: int, failing: set[int], status: int
) -> None:
    # At least one input; each text unique, so a batch's content says which batch it is
    # (two batches of equal texts would share one failure budget).
    texts = [f"{t} {i}" for i, t in enumerate([*texts, "last"])]
    spans = split_batches(len(texts), batch_size)
    failing = {i for i in failing if i < len(spans)}
    # Each failing batch answers its first request with a retryable status.
    remaining: dict[tuple[str, ...], int] = {}
    for i in failing:
        key = tuple(texts[spans[i].start : spans[i].stop])
        remaining[key] = remaining.get(key, 0) + 1

    def source(request: httpx.Request) -> Script:
        key = tuple(json.loads(request.content)["input"])
        if remaining.get(key, 0) > 0:
            remaining[key] -= 1
            return Script(fault=Fault("status", status=status))
        return Script()

    transport = FakeTransport("openai-chat", source)
    settings_ = ai.ProviderSettings("openai", api_key="k", transport=transport)
    route = ai.Route(f"openai:{MODEL}", retry=FAST, breaker_threshold=0)
    with ai.Client([settings_]) as client:
        result = client.embed(
            texts, route=route, batch_size=batch_size, concurrency=concurrency, dimensions=8
        )
    assert result.vectors == tuple(f32(fake_vector(t, 8)) for t in texts)
    assert result.usage.input_tokens == sum(token_count(t) for t in texts)
    outcomes = statuses(result)
    assert outcomes.count("retried") == len(failing) and outcomes.count("ok") == len(spans)
    assert transport.served == len(spans) + len(failing)


def test_a_third_party_adapter_embeds_through_the_documented_seam() -> None:
    # The adapter authors' guide's example, run: the core batches by its embed_max_batch.
    from pathlib import Path

    guide = (Path(__file__).resolve().parents[2] / "docs/adapter-authors.md").read_text("utf-8")
    code = guide.split("### Embeddings", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    ns: dict[str, Any] = {}
    exec(code, ns)
    adapter_class = ns["AcmeEmbedAdapter"]
    adapter_class.embed_max_batch = 2

    def handler(request: httpx.Request) -> httpx.Response:
        texts = json.loads(request.content)["texts"]
        return httpx.Response(200, json={"vectors": [[float(len(t)), 1.0] for t in texts]})

    registry = ai.ProviderRegistry(entry_points=False)
    registry.register("acme-embed", adapter_class)
    settings_ = ai.ProviderSettings("acme-embed", transport=httpx.MockTransport(handler))
    with ai.Client([settings_], registry=registry) as client:
        result = client.embed(["a", "bbb", "cc"], target="acme-embed:m1")
        assert [v[0] for v in result] == [1.0, 3.0, 2.0]
        assert len(result.batch_targets) == 2 and result.usage.input_tokens is None
        assert adapter_class.operations() == ("embed",)
        with pytest.raises(ai.ConfigError, match=r"does not serve generation.*serves embeddings"):
            client.generate("hi", target="acme-embed:m1")


class _SlowEmbedder(Adapter):
    """An adapter that is not HTTP (`bounds_calls` is False) and never answers."""

    provider_id = "slow-embed"

    async def embed(self, request: EmbedRequest) -> EmbedReply:
        await asyncio.sleep(30)
        raise AssertionError("not reached")


def test_a_call_the_adapter_does_not_bound_gets_a_deadline_of_timeout_s() -> None:
    # An HTTP adapter applies timeout_s to its own I/O (`HTTPAdapter.send`); for any
    # other the core bounds the whole call.
    registry = ProviderRegistry()
    registry.register("slow-embed", _SlowEmbedder)
    route = ai.Route("slow-embed:m", retry=ai.RetryPolicy(max_retries=0))
    with ai.Client([ai.ProviderSettings("slow-embed")], registry=registry) as client:
        with pytest.raises(ai.AllTargetsFailedError) as info:
            client.embed(["a"], route=route, timeout_s=0.05)
    last = info.value.attempts[-1].error
    assert last is not None and last.type_name == "ProviderTimeoutError"
    assert "took longer than timeout_s=0.05" in last.detail
    assert not _SlowEmbedder.bounds_calls and HTTPAdapter.bounds_calls
