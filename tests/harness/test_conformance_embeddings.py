"""The embedding and rerank guarantees of the conformance suite
(`anyinfer.conformance.embeddings`, `anyinfer.conformance.reranking`).

- The fake servers render scripted embedding answers (`EmbedShape`) in each dialect's
  own shape: entries out of order with their `index`, usage left out, floats where
  base64 was asked, and the labelled broken shapes.
- The two worlds: realistic cases stay inside the dialect's `EmbeddingProfile`, hostile
  ones add the labelled shapes; calls split into batches.
- The oracle walks the route as `embed()` must (retry, `Retry-After`, fallback).
- Correct adapters pass (OpenAI and Ollama, over the transport and a loopback socket);
  every deliberately broken embedding adapter (`tests/conformance_broken/embed.py`) is
  caught and named, directly and through `pytest --anyinfer-conformance`'s matrix.
- Real recorded embedding traffic (cassettes/openai) replays through the OpenAI adapter,
  and an adapter that misreads it is caught.
- Rerank: the built-in rerankers pass their documented cases; the broken rerank adapters
  (`tests/conformance_broken/rerank.py`) are caught and named.
"""

from __future__ import annotations

import base64
import json
import re
import struct
from array import array
from pathlib import Path
from typing import Any

import pytest
from conformance_broken.embed import BROKEN_EMBED
from conformance_broken.rerank import BROKEN_RERANK
from hypothesis import given, settings

import anyinfer as ai
from anyinfer._providers.openai_chat import OpenAIChatAdapter
from anyinfer.adapters import EmbedReply
from anyinfer.conformance.cassettes import replay_embeddings
from anyinfer.conformance.embeddings import (
    EMBED_GUARANTEES,
    EMBED_NOTHING_LOST,
    EMBED_SHORT_NAMES,
    FALLBACK,
    PRIMARY,
    EmbedCase,
    EmbedHarness,
    ExpectedAttempt,
    embed_documented_cases,
    expect_embed,
    hostile_embed_cases,
    realistic_embed_cases,
    walk_batch,
)
from anyinfer.conformance.plugin import OPTION_ADAPTER, OPTION_CONFORMANCE
from anyinfer.conformance.registry import ConformanceRegistry, load_builtins
from anyinfer.conformance.reranking import (
    RERANK_GUARANTEES,
    RERANK_SHORT_NAMES,
    RerankHarness,
    rerank_documented_cases,
)
from anyinfer.conformance.runner import ConformanceFailure, Harness
from anyinfer.fakeservers import EmbedShape, Fault, Script, get_dialect
from anyinfer.fakeservers.dialects._embeddings import fake_vector

pytest_plugins = ["pytester"]

TESTS_DIR = Path(__file__).resolve().parents[1]
ROOT = TESTS_DIR.parent
INPUTS = ["apple #0", "river stone #1", "café #2"]


def _answer(dialect: str, shape: EmbedShape | None, **body: Any) -> dict[str, Any]:
    request = {"model": "m", "input": INPUTS, **body}
    rendered = get_dialect(dialect).render_embedding_answer("/v1/embeddings", request, shape)
    payload: dict[str, Any] = json.loads(rendered.body)
    return payload


def _floats(value: Any) -> list[float]:
    if isinstance(value, str):
        raw = base64.b64decode(value)
        return list(struct.unpack(f"<{len(raw) // 4}f", raw))
    return [float(v) for v in value]


# --- the fake servers' scripted answers ----------------------------------------------


def test_a_shuffled_openai_answer_keeps_each_vector_with_its_index() -> None:
    payload = _answer("openai-chat", EmbedShape(order_seed=3, native_dimensions=8))
    indices = [entry["index"] for entry in payload["data"]]
    assert sorted(indices) == [0, 1, 2] and indices != [0, 1, 2]
    for entry in payload["data"]:
        want = array("f", fake_vector(INPUTS[entry["index"]], 8))
        assert array("f", _floats(entry["embedding"])) == want
    # One token per word ("0", "1" and "2" are words too).
    assert payload["usage"] == {"prompt_tokens": 7, "total_tokens": 7}


def test_openai_answers_base64_as_asked_unless_the_shape_ignores_it() -> None:
    asked = _answer("openai-chat", EmbedShape(native_dimensions=4), encoding_format="base64")
    assert all(isinstance(e["embedding"], str) for e in asked["data"])
    ignored = _answer(
        "openai-chat", EmbedShape(native_dimensions=4, floats=True), encoding_format="base64"
    )
    assert all(isinstance(e["embedding"], list) for e in ignored["data"])


def test_usage_left_out_and_dimensions_asked() -> None:
    openai = _answer("openai-chat", EmbedShape(usage=False), dimensions=3)
    assert "usage" not in openai and {len(e["embedding"]) for e in openai["data"]} == {3}
    ollama = _answer("ollama-chat", EmbedShape(usage=False, native_dimensions=5))
    assert "prompt_eval_count" not in ollama and {len(v) for v in ollama["embeddings"]} == {5}
    assert list(_answer("ollama-chat", None))[-1] == "prompt_eval_count"  # Go's field order


def test_ollama_has_no_index_so_its_answers_stay_in_input_order() -> None:
    payload = _answer("ollama-chat", EmbedShape(order_seed=3, native_dimensions=8))
    assert [array("f", v) for v in payload["embeddings"]] == [
        array("f", fake_vector(t, 8)) for t in INPUTS
    ]


@pytest.mark.parametrize(
    ("broken", "check"),
    [
        ("wrong_dimensions", lambda d: sorted(len(e["embedding"]) for e in d) == [7, 8, 8]),
        ("missing_entry", lambda d: len(d) == 2),
        ("duplicate_index", lambda d: sorted(e["index"] for e in d) == [0, 2, 2]),
    ],
)
def test_the_broken_shapes(broken: Any, check: Any) -> None:
    shape = EmbedShape(native_dimensions=8, broken=broken, broken_at=1)
    assert check(_answer("openai-chat", shape)["data"])


def test_the_servers_apply_the_script_shape_and_faults() -> None:
    from anyinfer.fakeservers import FakeTransport

    shape = EmbedShape(order_seed=3, native_dimensions=8)
    scripts = [
        Script(embedding=shape, fault=Fault("status", status=429, retry_after=0.0)),
        Script(embedding=shape),
    ]
    transport = FakeTransport("openai-chat", scripts)
    settings_ = ai.ProviderSettings("openai", api_key="sk-test", transport=transport)
    with ai.Client([settings_]) as client:
        result = client.embed(INPUTS, target="openai:m", encoding="float")
    assert result.vectors == tuple(array("f", fake_vector(t, 8)) for t in INPUTS)
    assert [a.outcome for a in result.attempts] == ["retried", "ok"]
    assert result.attempts[0].error is not None and result.attempts[0].error.retry_after == 0.0
    transport.assert_all_used()


# --- the worlds and the oracle -------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(case=realistic_embed_cases(get_dialect("ollama-chat")))
def test_realistic_cases_stay_inside_the_profile(case: EmbedCase) -> None:
    for batch, answers in zip(case.batches, case.answers, strict=True):
        assert answers, batch
        for script in answers:
            shape = script.embedding
            assert shape is not None
            assert shape.broken is None and not shape.floats and shape.usage
            assert shape.order_seed is None  # Ollama's entries carry no index
            assert script.fault is None or script.fault.kind in ("status", "disconnect", "stall")
    assert case.native_dimensions in (16, 4, 48)  # one model: the answers agree
    assert len(set(case.inputs)) == len(case.inputs)


@settings(max_examples=40, deadline=None)
@given(case=realistic_embed_cases(get_dialect("openai-chat")))
def test_realistic_openai_cases_report_usage_and_answer_as_asked(case: EmbedCase) -> None:
    for answers in case.answers:
        for script in answers:
            assert script.embedding is not None
            assert script.embedding.usage and not script.embedding.floats
            assert script.embedding.broken is None


def test_both_worlds_split_calls_and_the_hostile_one_draws_its_shapes() -> None:
    from hypothesis import Phase
    from hypothesis import find as find_shrunk

    quick = settings(phases=[Phase.generate], max_examples=400, database=None)

    def find(strategy: Any, condition: Any) -> Any:
        return find_shrunk(strategy, condition, settings=quick)

    openai = get_dialect("openai-chat")
    find(realistic_embed_cases(openai), lambda c: len(c.batches) >= 3)
    find(
        realistic_embed_cases(openai),
        lambda c: any(s.embedding and s.embedding.order_seed for a in c.answers for s in a),
    )
    hostile = hostile_embed_cases(openai)
    for wanted in ("wrong_dimensions", "missing_entry", "duplicate_index"):
        find(
            hostile,
            lambda c, b=wanted: any(
                s.embedding and s.embedding.broken == b for a in c.answers for s in a
            ),
        )
    find(
        hostile,
        lambda c: any(s.fault and s.fault.kind == "malformed" for a in c.answers for s in a),
    )
    # The hostile one leaves usage out and sends floats where base64 was asked.
    for odd in (lambda sh: not sh.usage, lambda sh: sh.floats):
        find(
            hostile,
            lambda c, odd=odd: any(s.embedding and odd(s.embedding) for a in c.answers for s in a),
        )


def test_the_route_walk() -> None:
    clean = Script(embedding=EmbedShape())

    def walk(*answers: Script) -> tuple[list[ExpectedAttempt], str | None]:
        used, attempts, by = walk_batch(lambda n: answers[n])
        assert len(used) == len(answers)
        return attempts, by

    wait = Script(fault=Fault("status", status=429, retry_after=0.0))
    assert walk(wait, clean) == (
        [
            ExpectedAttempt(PRIMARY, "retried", "RateLimitError", 429, 0.0),
            ExpectedAttempt(PRIMARY, "ok"),
        ],
        PRIMARY,
    )
    too_long = Script(fault=Fault("status", status=429, retry_after=7.0))
    attempts, by = walk(too_long, clean)
    assert [(a.provider, a.outcome) for a in attempts] == [(PRIMARY, "failed"), (FALLBACK, "ok")]
    assert by == FALLBACK
    cut = Script(fault=Fault("disconnect", partial_bytes=3))
    attempts, by = walk(cut, cut, cut, cut)
    assert [a.outcome for a in attempts] == ["retried", "failed", "retried", "failed"]
    assert by is None and {a.type_name for a in attempts} == {"StreamError"}
    broken = Script(embedding=EmbedShape(broken="missing_entry"))
    attempts, by = walk(broken, clean)
    assert attempts[0].type_name == "ProtocolError" and by == FALLBACK


def test_the_oracle_sums_usage_only_when_every_batch_reports_it() -> None:
    reported = Script(embedding=EmbedShape())
    silent = Script(embedding=EmbedShape(usage=False))
    both = expect_embed(EmbedCase(("a #0", "b b #1"), 1, ((reported,), (reported,))))
    assert both.succeeds and both.input_tokens == 2 + 3 and both.requests == 2
    one = expect_embed(EmbedCase(("a #0", "b #1"), 1, ((reported,), (silent,))))
    assert one.input_tokens is None


# --- correct adapters pass; broken ones are caught -----------------------------------


def _harness(
    name: str, cls: type[ai.Adapter] | None = None, dialect: str = "openai-chat"
) -> EmbedHarness:
    registry = ConformanceRegistry()
    entry = registry.add(name, cls, dialect=dialect)
    return EmbedHarness(Harness(registry, entry))


@pytest.mark.parametrize(
    ("name", "dialect"), [("openai", "openai-chat"), ("ollama", "ollama-chat")]
)
def test_the_builtin_adapters_pass_every_documented_case(name: str, dialect: str) -> None:
    harness = _harness(name, dialect=dialect)
    harness.verify_documented()
    labels = [label for label, _ in embed_documented_cases(harness.dialect)]
    assert (
        "a batch failing on both instances" in labels
        and "429, Retry-After 7 (falls back)" in labels
    )


@pytest.mark.loopback
def test_a_case_over_a_loopback_socket() -> None:
    harness = _harness("openai")
    shape = EmbedShape(order_seed=5, native_dimensions=4)
    case = EmbedCase(
        tuple(INPUTS),
        2,
        (
            (
                Script(embedding=shape, fault=Fault("disconnect", partial_bytes=9)),
                Script(embedding=shape),
            ),
            (Script(embedding=shape, read_sizes=(1,)),),
        ),
    )
    obs = harness.verify(case, via="server", sync=True)
    assert obs.result is not None and obs.requests == 3


CAUGHT: dict[str, EmbedCase] = {
    "broken-embed-drops-index": EmbedCase(
        ("#0", "#1"), 2, ((Script(embedding=EmbedShape(order_seed=1)),),)
    ),
    "broken-embed-running-usage": EmbedCase(
        ("#0", "#1"), 1, ((Script(embedding=EmbedShape()),), (Script(embedding=EmbedShape()),))
    ),
    "broken-embed-pads-failed-batch": EmbedCase(
        ("#0",),
        1,
        ((Script(fault=Fault("status", status=401)), Script(fault=Fault("status", status=401))),),
        dimensions=3,
    ),
}


@pytest.mark.parametrize("name", sorted(BROKEN_EMBED))
def test_every_broken_embedding_adapter_is_caught(name: str) -> None:
    cls, guarantee = BROKEN_EMBED[name]
    assert guarantee in EMBED_GUARANTEES
    harness = _harness(name, cls)
    harness.verify(EmbedCase(("x #0",), 1, ((Script(),),)))  # a plain call passes
    with pytest.raises(ConformanceFailure) as info:
        harness.verify(CAUGHT[name])
    failure = info.value
    assert failure.guarantees[0] == guarantee, failure.report
    assert failure.adapter == name
    assert f"adapter {name} (dialect openai-chat" in failure.report
    assert "    EmbedCase(" in failure.report and "reproduce:" in failure.report


def test_a_padded_failed_batch_is_named_in_the_report() -> None:
    cls, _ = BROKEN_EMBED["broken-embed-pads-failed-batch"]
    with pytest.raises(ConformanceFailure) as info:
        _harness("pads", cls).verify(CAUGHT["broken-embed-pads-failed-batch"])
    assert info.value.guarantees == (EMBED_NOTHING_LOST,)
    assert "batch 0 failed on every instance" in info.value.report


@pytest.mark.parametrize("name", ["cohere", "voyage", "jina", "tei"])
def test_the_builtin_rerankers_pass_every_documented_case(name: str) -> None:
    registry = ConformanceRegistry()
    load_builtins(registry)
    RerankHarness(Harness(registry, registry.get(name))).verify_documented()


@pytest.mark.parametrize("name", sorted(BROKEN_RERANK))
def test_every_broken_rerank_adapter_is_caught(name: str) -> None:
    cls, guarantee = BROKEN_RERANK[name]
    assert guarantee in RERANK_GUARANTEES
    registry = ConformanceRegistry()
    harness = RerankHarness(Harness(registry, registry.add(name, cls, dialect="cohere-v2")))
    cases = dict(rerank_documented_cases())
    with pytest.raises(ConformanceFailure) as info:
        harness.verify(cases["status 400"])
    assert guarantee in info.value.guarantees, info.value.report
    assert f"adapter {name} (dialect cohere-v2" in info.value.report


def _embedding_matrix(output: str) -> dict[str, dict[str, str]]:
    lines = output.splitlines()
    section = next(i for i, ln in enumerate(lines) if "embeddings and rerank x guarantee" in ln)
    header = lines[section + 1].split()
    by_label = {label: g for g, label in {**EMBED_SHORT_NAMES, **RERANK_SHORT_NAMES}.items()}
    columns = [by_label[label] for label in header[1:]]
    rows: dict[str, dict[str, str]] = {}
    for line in lines[section + 2 :]:
        if not line.strip():
            break
        name, *cells = line.split()
        rows[name] = dict(zip(columns, cells[: len(columns)], strict=True))
    return rows


BROKEN_CONFTEST = f"""
import sys

sys.path.insert(0, {str(TESTS_DIR)!r})

from conformance_broken.embed import BROKEN_EMBED
from conformance_broken.rerank import BROKEN_RERANK


def pytest_anyinfer_configure(registry):
    for name, (cls, _guarantee) in BROKEN_EMBED.items():
        registry.add(name, cls, dialect="openai-chat")
    for name, (cls, _guarantee) in BROKEN_RERANK.items():
        registry.add(name, cls, dialect="cohere-v2")
"""


@pytest.mark.timeout(300)
def test_the_suite_catches_and_names_every_broken_embedding_adapter(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeconftest(BROKEN_CONFTEST)
    # The documented cases catch each of them at any sampling depth, and quickly.
    args = [OPTION_CONFORMANCE, "-p", "no:cacheprovider"]
    args += ["-k", "test_embed_documented or test_rerank_documented"]
    for name in (*BROKEN_EMBED, *BROKEN_RERANK, "openai", "cohere"):
        args += [OPTION_ADAPTER, name]
    # In-process: the documented cases draw nothing, so no Hypothesis profile is loaded.
    result = pytester.runpytest(*args)
    output = result.stdout.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED, output[-3000:]
    matrix = _embedding_matrix(output)
    assert set(matrix) == {*BROKEN_EMBED, *BROKEN_RERANK, "openai", "cohere"}
    assert set(matrix["cohere"].values()) == {"ok"}, matrix["cohere"]
    assert {matrix["openai"][g] for g in EMBED_GUARANTEES} == {"ok"}, matrix["openai"]
    assert {matrix["openai"][g] for g in RERANK_GUARANTEES} == {"n/a"}, matrix["openai"]
    for name, (_cls, guarantee) in (*BROKEN_EMBED.items(), *BROKEN_RERANK.items()):
        assert matrix[name][guarantee] == "FAIL", (name, matrix[name])
        pattern = rf"anyinfer conformance: adapter {re.escape(name)} \(.*\) broke .*{guarantee}"
        assert re.search(pattern, output), name


# --- recorded traffic ----------------------------------------------------------------


class _MisreadsFloats(OpenAIChatAdapter):
    """Reads every vector value negated (a sign slip in a hand-written decoder)."""

    async def embed(self, request):  # type: ignore[no-untyped-def]
        reply = await super().embed(request)
        flipped = tuple(array("f", (-v for v in vec)) for vec in reply.vectors)
        return EmbedReply(vectors=flipped, usage=reply.usage, model=reply.model)


def test_recorded_openai_embeddings_replay_and_a_misreading_is_caught() -> None:
    recordings = sorted((ROOT / "cassettes" / "openai").rglob("*TestOpenAI*.yaml"))
    assert len(recordings) == 4
    good = _harness("openai").harness
    assert replay_embeddings(good, recordings) == 4
    bad = _harness("openai", _MisreadsFloats).harness
    with pytest.raises(AssertionError, match="vector 0 is not the recorded one"):
        replay_embeddings(bad, recordings)


# --- the adapter authors' guide ------------------------------------------------------


def _guide_block(after: str, containing: str) -> str:
    guide = (ROOT / "docs" / "adapter-authors.md").read_text("utf-8")
    section = guide.split(after, 1)[1]
    blocks = [b.split("```", 1)[0] for b in section.split("```python\n")[1:]]
    return next(b for b in blocks if containing in b)


def test_the_guides_third_party_embedding_dialect_passes_the_embedding_checks() -> None:
    """The guide's `AcmeEmbedAdapter` and `AcmeEmbedDialect`, run as written: registered
    through its `pytest_anyinfer_configure`, they pass every documented embedding case
    and a sample of both worlds, over the transport and a loopback socket."""
    ns: dict[str, Any] = {}
    exec(_guide_block("### Embeddings\n", "class AcmeEmbedAdapter"), ns)
    exec(_guide_block("### Embedding and rerank answers", "class AcmeEmbedDialect"), ns)
    registry = ConformanceRegistry()
    ns["pytest_anyinfer_configure"](registry)
    entry = registry.get("acme-embed")
    assert not entry.generates() and entry.resolve_class().serves_embeddings()
    harness = EmbedHarness(Harness(registry, entry))
    harness.verify_documented()
    harness.check_property(realistic_embed_cases(harness.dialect), max_examples=8)
    harness.check_property(hostile_embed_cases(harness.dialect), max_examples=8)
    harness.check_property(realistic_embed_cases(harness.dialect), max_examples=2, via="server")


@pytest.mark.loopback
def test_the_guides_third_party_embedding_adapter_passes_the_resources_check() -> None:
    """The guide's `AcmeEmbedAdapter` through one long-lived `AsyncClient`: faults and
    cancellations leave no slot held, and its calls' `timeout_s` reaches `send`."""
    ns: dict[str, Any] = {}
    exec(_guide_block("### Embeddings\n", "class AcmeEmbedAdapter"), ns)
    exec(_guide_block("### Embedding and rerank answers", "class AcmeEmbedDialect"), ns)
    registry = ConformanceRegistry()
    ns["pytest_anyinfer_configure"](registry)
    Harness(registry, registry.get("acme-embed")).verify_resources(sync=False, method="embed")


@pytest.mark.parametrize("loopback", [False, pytest.param(True, marks=pytest.mark.loopback)])
def test_a_slow_body_pauses_mid_body_and_is_read_whole(loopback: bool) -> None:
    import contextlib
    import dataclasses
    import time

    from anyinfer.fakeservers import FakeServer, FakeTransport, Pause, plan

    dialect = get_dialect("openai-chat")
    shape = EmbedShape(native_dimensions=64)
    script = Script(embedding=shape, read_sizes=(256,), pause=(2, 0.05))
    body = {"model": "m", "input": INPUTS, "encoding_format": "float"}
    rendered = dialect.render_embedding_answer("/v1/embeddings", body, shape)
    actions = plan(rendered, script, dialect)
    assert isinstance(actions[2], Pause) and actions[2].seconds == 0.05
    assert sum(isinstance(a, Pause) for a in actions) == 1
    with pytest.raises(ValueError, match="negative"):
        plan(rendered, dataclasses.replace(script, pause=(2, -1.0)), dialect)
    with FakeServer("openai-chat", [script]) if loopback else contextlib.nullcontext() as server:
        where: dict[str, Any] = (
            {"base_url": server.base_url}
            if server is not None
            else {"transport": FakeTransport("openai-chat", [script])}
        )
        settings_ = ai.ProviderSettings("openai", api_key="sk-test", **where)
        with ai.Client([settings_]) as client:
            start = time.monotonic()
            result = client.embed(INPUTS, target="openai:m", encoding="float")
            elapsed = time.monotonic() - start
    assert elapsed >= 0.05
    assert result.vectors == tuple(array("f", fake_vector(t, 64)) for t in INPUTS)
