"""Telemetry for `embed()` and `rerank()`: the events, payload privacy, redaction,
laziness, and the OpenTelemetry mapping (the GenAI conventions' embeddings page).

Embeddings are served by the fake servers' OpenAI endpoint (`FakeTransport`), reranks by
a small in-process adapter registered in a private registry.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from dataclasses import fields, is_dataclass
from decimal import Decimal
from typing import Any

import pytest
from helpers import metric_points

import anyinfer as ai
from anyinfer._adapters.registry import ProviderRegistry
from anyinfer._embed._types import RankedDocument, RerankReply, RerankRequest
from anyinfer._redact import register_secret
from anyinfer._telemetry import (
    BatchAttemptEnded,
    OperationEnded,
    OperationStarted,
    TelemetryEvent,
    with_payloads,
    without_payloads,
)
from anyinfer._types import Usage
from anyinfer.adapters import HTTPAdapter
from anyinfer.fakeservers import FakeTransport, Fault, Script
from anyinfer.fakeservers.dialects._embeddings import token_count

SECRET = "sk-embed-telemetry-secret-42"
register_secret(SECRET)

MODEL = "text-embedding-3-small"
TEXTS = ["the quarterly numbers", "private diary entry", f"key {SECRET} leaked", "d", "e"]
FAST = ai.RetryPolicy(max_retries=2, backoff_base_s=0.001, jitter=0.0)
PRICE = Decimal("0.00000002")


class Recorder:
    def __init__(self) -> None:
        self.events: list[TelemetryEvent] = []

    def on_event(self, event: TelemetryEvent) -> None:
        self.events.append(event)


def texts_in(value: Any) -> Iterator[str]:
    """Every string reachable inside an event."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from texts_in(k)
            yield from texts_in(v)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from texts_in(v)
    elif is_dataclass(value):
        for f in fields(value):
            yield from texts_in(getattr(value, f.name))
    elif hasattr(value, "items"):
        yield from texts_in(dict(value.items()))


def _client(script: Any, **kwargs: Any) -> tuple[ai.Client, FakeTransport]:
    transport = FakeTransport("openai-chat", script)
    settings = ai.ProviderSettings("openai", api_key="sk-x", transport=transport)
    table = ai.PricingTable({f"openai:{MODEL}": ai.ModelPrice(input=PRICE, output=Decimal(0))})
    return ai.Client([settings], pricing_table=table, **kwargs), transport


def _kinds(events: list[TelemetryEvent]) -> list[str]:
    return [type(e).__name__ for e in events]


def test_an_observed_embed_reports_start_each_batch_attempt_and_end() -> None:
    calls = iter([Script(fault=Fault("status", status=503)), *[Script()] * 5])
    rec = Recorder()
    client, _ = _client(lambda request: next(calls), observers=[rec])
    route = ai.Route(f"openai:{MODEL}", retry=FAST)
    with client:
        result = client.embed(
            TEXTS, route=route, batch_size=2, concurrency=1, metadata={"job": "index-7"}
        )
    kinds = _kinds(rec.events)
    assert kinds[0] == "OperationStarted" and kinds[-1] == "OperationEnded"
    assert kinds[1:-1] == ["BatchAttemptEnded"] * 4  # 3 batches, the first one retried

    started = rec.events[0]
    assert isinstance(started, OperationStarted)
    assert started.operation == "embeddings"
    assert [str(t) for t in started.targets] == [f"openai:{MODEL}"]
    assert (started.input_count, started.batch_count) == (5, 3)
    assert started.encoding == "base64" and started.dimensions is None

    attempts = [e for e in rec.events if isinstance(e, BatchAttemptEnded)]
    summary = [(a.batch, a.attempt, a.input_count, a.outcome) for a in attempts]
    assert summary == [(0, 1, 2, "retried"), (0, 2, 2, "ok"), (1, 1, 2, "ok"), (2, 1, 1, "ok")]
    failed = attempts[0]
    assert failed.error is not None and failed.error.type_name == "OverloadedError"
    assert failed.usage == Usage() and failed.cost_usd is None
    for a in attempts[1:]:
        assert a.timing is not None and a.timing.total_ms >= 0
        assert a.usage.input_tokens is not None
        assert a.cost_usd == PRICE * a.usage.input_tokens
    assert [(a.batch, a.usage.input_tokens) for a in attempts[1:]] == [
        (0, token_count(TEXTS[0]) + token_count(TEXTS[1])),
        (1, token_count(TEXTS[2]) + token_count(TEXTS[3])),
        (2, token_count(TEXTS[4])),
    ]

    ended = rec.events[-1]
    assert isinstance(ended, OperationEnded)
    assert ended.ok and ended.error is None and ended.operation == "embeddings"
    assert ended.target == result.target
    assert ended.usage == result.usage and ended.cost_usd == result.cost_usd is not None
    assert ended.cost_usd == sum(a.cost_usd for a in attempts[1:] if a.cost_usd is not None)
    assert ended.dimensions == result.dimensions
    assert (ended.input_count, ended.batch_count) == (5, 3)
    assert len({e.request_id for e in rec.events}) == 1
    assert all(e.metadata == {"job": "index-7"} for e in rec.events)


def test_each_batch_attempt_and_the_end_carry_every_field_of_the_trail_and_result() -> None:
    """Whole events compared: a field the instrument stops filling in (the record's
    error or timing, a batch's place, its priced usage) fails here."""
    calls = iter([Script(fault=Fault("status", status=503)), *[Script()] * 5])
    rec = Recorder()
    client, _ = _client(lambda request: next(calls), observers=[rec])
    route = ai.Route(f"openai:{MODEL}", retry=FAST)
    meta = {"job": "index-7"}
    with client:
        result = client.embed(TEXTS, route=route, batch_size=2, concurrency=1, metadata=meta)
    records = result.attempts
    assert [r.outcome for r in records] == ["retried", "ok", "ok", "ok"]
    assert all(r.timing is not None for r in records) and records[0].error is not None
    rid = rec.events[0].request_id
    places = [(0, 1, TEXTS[:2]), (0, 2, TEXTS[:2]), (1, 1, TEXTS[2:4]), (2, 1, TEXTS[4:])]
    expected = []
    for record, (batch, number, texts) in zip(records, places, strict=True):
        usage, cost = Usage(), None
        if record.outcome == "ok":
            tokens = sum(map(token_count, texts))
            cost = PRICE * tokens
            usage = Usage(input_tokens=tokens, total_tokens=tokens, cost_usd=cost)
        expected.append(
            BatchAttemptEnded(
                request_id=rid,
                metadata=meta,
                target=record.target,
                operation="embeddings",
                batch=batch,
                attempt=number,
                input_count=len(texts),
                outcome=record.outcome,
                error=record.error,
                timing=record.timing,
                usage=usage,
                cost_usd=cost,
            )
        )
    assert [e for e in rec.events if isinstance(e, BatchAttemptEnded)] == expected
    assert result.cost_usd is not None
    assert rec.events[-1] == OperationEnded(
        request_id=rid,
        metadata=meta,
        operation="embeddings",
        ok=True,
        target=result.target,
        input_count=5,
        batch_count=3,
        usage=result.usage,
        cost_usd=result.cost_usd,
        timing=result.timing,
        dimensions=result.dimensions,
    )


def test_a_batch_attempts_usage_carries_its_cost_as_a_generation_attempts_does() -> None:
    """Every event that reports a usage whose price is known reports it priced, and its
    `cost_usd`, where it has one, is that usage's: a successful generation attempt's
    `AttemptEnded.usage` is the priced usage, and so is a batch attempt's."""
    rec = Recorder()
    client, _ = _client(lambda request: Script(), observers=[rec])
    with client:
        client.embed(TEXTS, target=f"openai:{MODEL}", batch_size=2)
    attempts = [e for e in rec.events if isinstance(e, BatchAttemptEnded)]
    assert len(attempts) == 3
    for a in attempts:
        assert a.cost_usd is not None and a.usage.input_tokens is not None
        assert a.usage.cost_usd == a.cost_usd == PRICE * a.usage.input_tokens


def test_the_unary_event_fields_stay_as_documented() -> None:
    """The events' fields are the public contract: their names and order."""
    common = ["request_id", "metadata"]
    assert [f.name for f in fields(BatchAttemptEnded)] == [
        *common,
        *["target", "operation", "batch", "attempt", "input_count", "outcome", "error"],
        *["timing", "usage", "cost_usd", "search_units"],
    ]
    assert [f.name for f in fields(OperationEnded)] == [
        *common,
        *["operation", "ok", "target", "input_count", "batch_count", "usage", "cost_usd"],
        *["timing", "error", "dimensions", "result_count", "search_units"],
    ]


def test_embed_events_are_payload_free_by_default_and_redacted_with_payloads() -> None:
    bare, full = Recorder(), Recorder()
    client, _ = _client(lambda request: Script())
    client.subscribe(bare)
    client.subscribe(full, payloads=True)
    with client:
        client.embed(TEXTS, target=f"openai:{MODEL}", metadata={"note": f"by {SECRET}"})
    seen_bare = [t for e in bare.events for t in texts_in(e)]
    seen_full = [t for e in full.events for t in texts_in(e)]
    for text in ("the quarterly numbers", "private diary entry", "leaked"):
        assert not any(text in t for t in seen_bare), text
        assert any(text in t for t in seen_full), text
    assert not any(SECRET in t for t in seen_bare + seen_full)  # redacted for everyone
    started = full.events[0]
    assert isinstance(started, OperationStarted)
    assert started.texts is not None and started.texts[2] == "key [secure] leaked"
    assert started.metadata == {"note": "by [secure]"}
    bare_started = bare.events[0]
    assert isinstance(bare_started, OperationStarted) and bare_started.texts is None
    assert _kinds(bare.events) == _kinds(full.events)


def test_a_failed_embed_ends_with_the_error_and_every_attempt() -> None:
    rec = Recorder()
    client, transport = _client(
        lambda request: Script(fault=Fault("status", status=500)), observers=[rec]
    )
    with client, pytest.raises(ai.AllTargetsFailedError):
        client.embed(["a", "b"], route=ai.Route(f"openai:{MODEL}", retry=FAST))
    attempts = [e for e in rec.events if isinstance(e, BatchAttemptEnded)]
    assert [(a.attempt, a.outcome) for a in attempts] == [
        (1, "retried"),
        (2, "retried"),
        (3, "failed"),
    ]
    assert all(a.error is not None and a.error.http_status == 500 for a in attempts)
    ended = rec.events[-1]
    assert isinstance(ended, OperationEnded) and not ended.ok
    assert ended.error is not None and ended.error.type_name == "AllTargetsFailedError"
    assert ended.target is None and ended.cost_usd is None
    assert transport.served == 3


def test_an_unobserved_embed_builds_no_event_and_never_loads_the_event_classes() -> None:
    code = f"""
import sys
import anyinfer as ai
from anyinfer.fakeservers import FakeTransport, Script

class Seen:
    def __init__(self): self.kinds = []
    def on_event(self, event): self.kinds.append(type(event).__name__)

transport = FakeTransport("openai-chat", lambda request: Script())
settings = ai.ProviderSettings("openai", api_key="k", transport=transport)
with ai.Client([settings]) as client:
    assert len(client.embed(["a", "b", "c"], target="openai:{MODEL}", batch_size=2)) == 3
    assert "anyinfer._telemetry" not in sys.modules, "loaded with no observer"
    seen = Seen()
    client.subscribe(seen)
    client.embed(["a"], target="openai:{MODEL}")
    assert seen.kinds == ["OperationStarted", "BatchAttemptEnded", "OperationEnded"], seen.kinds
print("ok")
"""
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert out.stdout.strip() == "ok", out.stderr


def test_the_silent_instrument_hands_walk_no_recorder() -> None:
    from anyinfer._embed._observe import SILENT, UnaryInstrument, unary_instrument
    from anyinfer._observers import Telemetry

    hub = Telemetry()
    assert unary_instrument(hub, {}, "embeddings") is SILENT
    assert unary_instrument(None, {}, "rerank") is SILENT
    assert not SILENT.active
    assert SILENT.reporter(None, batch=0, input_count=1) is None  # type: ignore[arg-type]
    hub.subscribe(Recorder())
    observed = unary_instrument(hub, {}, "rerank")
    assert type(observed) is UnaryInstrument and observed.active


def test_privacy_functions_strip_and_redact_operation_payloads() -> None:
    event = OperationStarted(
        request_id="r",
        metadata={"m": SECRET},
        operation="rerank",
        input_count=1,
        texts=(f"doc {SECRET}",),
        query=f"query {SECRET}",
    )
    bare = without_payloads(event)
    assert isinstance(bare, OperationStarted)
    assert bare.texts is None and bare.query is None and bare.metadata == {"m": "[secure]"}
    full = with_payloads(event)
    assert isinstance(full, OperationStarted)
    assert full.texts == ("doc [secure]",) and full.query == "query [secure]"


# --- rerank ---------------------------------------------------------------------------


class Overlap(HTTPAdapter):
    """Ranks by shared words; one search unit and a token per document per request."""

    provider_id = "overlap"
    default_base_url = "http://127.0.0.1:9"
    rerank_max_documents = 2

    def generate(self, request: Any) -> Any:
        raise ai.ConfigError("overlap only reranks", provider=self.instance_id)

    async def rerank(self, request: RerankRequest) -> RerankReply:
        words = set(request.query.split())
        ranked = sorted(
            (
                RankedDocument(i, float(len(words & set(d.split()))), d)
                for i, d in enumerate(request.documents)
            ),
            key=lambda r: -r.score,
        )
        if request.top_n is not None:
            ranked = ranked[: request.top_n]
        usage = Usage(input_tokens=len(request.documents))
        return RerankReply(tuple(ranked), usage=usage, search_units=1)


DOCS = ["cats purr", "dogs bark", "cats and dogs", "stocks fell", "a quiet cat"]


def _rerank_client(table: ai.PricingTable, **kwargs: Any) -> ai.Client:
    registry = ProviderRegistry()
    registry.register("overlap", Overlap)
    settings = ai.ProviderSettings("overlap", api_key="k")
    return ai.Client([settings], registry=registry, pricing_table=table, **kwargs)


def test_an_observed_rerank_reports_the_same_events_priced_by_search_unit() -> None:
    unit = ai.ModelPrice(input=Decimal(0), output=Decimal(0), search_unit=Decimal("0.002"))
    rec, full = Recorder(), Recorder()
    with _rerank_client(ai.PricingTable({"overlap:ranker": unit}), observers=[rec]) as client:
        client.subscribe(full, payloads=True)
        result = client.rerank("cats", DOCS, target="overlap:ranker", top_n=2)
    assert _kinds(rec.events) == ["OperationStarted", *["BatchAttemptEnded"] * 3, "OperationEnded"]
    started, ended = rec.events[0], rec.events[-1]
    assert isinstance(started, OperationStarted) and isinstance(ended, OperationEnded)
    assert started.operation == ended.operation == "rerank"
    assert (started.input_count, started.batch_count, started.top_n) == (5, 3, 2)
    assert started.query is None and started.texts is None
    attempts = [e for e in rec.events if isinstance(e, BatchAttemptEnded)]
    assert sorted((a.batch, a.input_count, a.search_units) for a in attempts) == [
        (0, 2, 1),
        (1, 2, 1),
        (2, 1, 1),
    ]
    assert all(a.cost_usd == a.usage.cost_usd == Decimal("0.002") for a in attempts)
    assert result.cost_usd == Decimal("0.006") == ended.cost_usd
    assert ended.search_units == 3 and ended.result_count == 2
    assert not any("cats purr" in t for e in rec.events for t in texts_in(e))
    payload_start = full.events[0]
    assert isinstance(payload_start, OperationStarted)
    assert payload_start.query == "cats" and payload_start.texts == tuple(DOCS)


def test_a_token_billed_rerank_is_priced_by_input_tokens() -> None:
    tokens = ai.ModelPrice(input=Decimal("0.00000005"), output=Decimal(0))
    with _rerank_client(ai.PricingTable({"overlap:ranker": tokens})) as client:
        result = client.rerank("cats", DOCS, target="overlap:ranker")
    assert result.usage.input_tokens == 5
    assert result.cost_usd == Decimal("0.00000005") * 5


# --- OpenTelemetry ---------------------------------------------------------------------


def test_otel_embeddings_span_and_metrics_follow_the_conventions(
    otel: tuple[Any, Any, Any],
) -> None:
    observer, exporter, reader = otel
    calls = iter([Script(fault=Fault("status", status=429)), *[Script()] * 3])
    client, _ = _client(lambda request: next(calls))
    client.subscribe(observer, payloads=True)
    with client:
        result = client.embed(
            TEXTS,
            route=ai.Route(f"openai:{MODEL}", retry=FAST),
            batch_size=3,
            concurrency=1,
            dimensions=256,
        )
    (span,) = exporter.get_finished_spans()
    attrs = dict(span.attributes)
    assert span.name == f"embeddings {MODEL}"
    assert span.kind.name == "CLIENT"
    assert attrs["gen_ai.operation.name"] == "embeddings"
    assert attrs["gen_ai.provider.name"] == "openai"
    assert attrs["gen_ai.request.model"] == attrs["gen_ai.response.model"] == MODEL
    assert attrs["gen_ai.embeddings.dimension.count"] == 256
    assert tuple(attrs["gen_ai.request.encoding_formats"]) == ("base64",)
    assert attrs["gen_ai.usage.input_tokens"] == result.usage.input_tokens
    assert attrs["anyinfer.cost_usd"] == pytest.approx(float(result.cost_usd or 0))
    assert "error.type" not in attrs
    assert [e.name for e in span.events] == ["anyinfer.attempt_failed"]
    assert span.events[0].attributes["error.type"] == "RateLimitError"
    assert span.events[0].attributes["anyinfer.batch"] == 0
    dumped = span.to_json()
    assert "quarterly" not in dumped and "diary" not in dumped

    points = metric_points(reader)
    (tokens,) = points["gen_ai.client.embeddings.operation.input_tokens"]
    assert tokens.sum == result.usage.input_tokens
    assert tokens.attributes["gen_ai.operation.name"] == "embeddings"
    (duration,) = points["gen_ai.client.embeddings.duration"]
    assert duration.attributes["gen_ai.request.model"] == MODEL
    # embeddings are not reported on the inference metrics
    assert "gen_ai.client.operation.duration" not in points
    assert "gen_ai.client.token.usage" not in points


def test_otel_marks_a_failed_embed_and_maps_rerank_to_a_span(otel: tuple[Any, Any, Any]) -> None:
    observer, exporter, reader = otel
    client, _ = _client(lambda request: Script(fault=Fault("status", status=400)))
    client.subscribe(observer)
    with client, pytest.raises(ai.AllTargetsFailedError):
        client.embed(["a"], route=ai.Route(f"openai:{MODEL}", retry=FAST))
    (failed,) = exporter.get_finished_spans()
    assert failed.status.status_code.name == "ERROR"
    assert failed.attributes["error.type"] == "AllTargetsFailedError"
    (duration,) = metric_points(reader)["gen_ai.client.embeddings.duration"]
    assert duration.attributes["error.type"] == "AllTargetsFailedError"

    exporter.clear()
    unit = ai.ModelPrice(input=Decimal(0), output=Decimal(0), search_unit=Decimal("0.002"))
    with _rerank_client(ai.PricingTable({"overlap:ranker": unit}), observers=[observer]) as c:
        c.rerank("cats", DOCS, target="overlap:ranker")
    (span,) = exporter.get_finished_spans()
    assert span.name == "rerank ranker"
    assert span.attributes["gen_ai.operation.name"] == "rerank"
    assert span.attributes["gen_ai.provider.name"] == "overlap"
    assert span.attributes["anyinfer.search_units"] == 3
    assert span.attributes["gen_ai.usage.input_tokens"] == 5
    assert "cats purr" not in span.to_json()
