"""The conformance suite: collected only by `pytest --anyinfer-conformance`.

Each test runs for every selected adapter (the `anyinfer_adapter` parameter). The
properties go through the real client, the real core and the adapter, against a fake
provider speaking the adapter's dialect.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest

from .checker import (
    EARLY_EXIT,
    ERROR_TYPE,
    FAILURE_FLUSH,
    G1,
    G2,
    G3,
    G4,
    ONE_REQUEST,
    RESOURCES,
    RESULT_AGREEMENT,
    TRAILING_USAGE,
)
from .embeddings import EMBED_GUARANTEES
from .plugin import adapter_entries
from .reranking import RERANK_GUARANTEES
from .runner import MODES, ConformanceFailure, Mode, documented_scripts

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy

    from anyinfer.fakeservers import Script

    from .registry import AdapterEntry, ConformanceRegistry
    from .runner import Harness

STREAM = (G1, G2, G3, G4, TRAILING_USAGE, FAILURE_FLUSH, RESULT_AGREEMENT, ERROR_TYPE, ONE_REQUEST)
WHOLE = (RESULT_AGREEMENT, ERROR_TYPE, ONE_REQUEST)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Run every test once per selected adapter that generates (`AdapterEntry.generates`):
    the property tests for each one that does not stand on another selected one
    (`registry.standing`), the entry check (`test_preset_entry`) for each one that does."""
    if "anyinfer_adapter" in metafunc.fixturenames:
        from .registry import standing

        retrieval = {**dict.fromkeys(_EMBEDDING_TESTS, _embeds)}
        retrieval.update(dict.fromkeys(_RERANK_TESTS, _reranks))
        serves = retrieval.get(metafunc.function)
        if serves is not None:
            # Every selected adapter whose class embeds (or reranks), generating or not.
            chosen = [e for e in adapter_entries(metafunc.config) if serves(e)]
            stands = standing(chosen)
            chosen = [e for e in chosen if e.name not in stands]
            metafunc.parametrize("anyinfer_adapter", chosen, ids=[e.name for e in chosen])
            return
        entries = [e for e in adapter_entries(metafunc.config) if e.generates()]
        stands = standing(entries)
        want = metafunc.function is test_preset_entry
        entries = [e for e in entries if (e.name in stands) == want]
        metafunc.parametrize("anyinfer_adapter", entries, ids=[e.name for e in entries])


def _has_content(script: Script) -> bool:
    from anyinfer.fakeservers import Reasoning, Text

    return any(not isinstance(p, Text | Reasoning) or p.text for p in script.pieces)


@pytest.mark.anyinfer_conformance(covers=STREAM)
def test_stream_paths(
    anyinfer_harness: Harness, anyinfer_scripts: SearchStrategy[Script], anyinfer_examples: int
) -> None:
    """`AsyncClient.stream()` and `Client.stream()` (each example draws one): grammar,
    trailing usage, flushing, agreement, errors."""
    anyinfer_harness.check_property(
        anyinfer_scripts, modes=("async-stream", "sync-stream"), max_examples=anyinfer_examples
    )


@pytest.mark.anyinfer_conformance(covers=WHOLE)
def test_generate_paths(
    anyinfer_harness: Harness, anyinfer_scripts: SearchStrategy[Script], anyinfer_examples: int
) -> None:
    """`AsyncClient.generate()` and `Client.generate()` (each example draws one): the
    result and the errors."""
    anyinfer_harness.check_property(
        anyinfer_scripts,
        modes=("async-generate", "sync-generate"),
        max_examples=anyinfer_examples,
    )


@pytest.mark.anyinfer_conformance(covers=STREAM)
def test_stream_cuts(
    anyinfer_harness: Harness, anyinfer_scripts: SearchStrategy[Script], anyinfer_examples: int
) -> None:
    """Streams cut right after the frames that matter (usage, finish, content)."""
    from hypothesis import strategies as st

    from .strategies import cut_scripts, flush_scripts

    dialect = anyinfer_harness.dialect
    anyinfer_harness.check_property(
        st.one_of(
            flush_scripts(dialect, scripts=anyinfer_scripts),
            cut_scripts(dialect, scripts=anyinfer_scripts),
        ),
        modes=("async-stream", "sync-stream"),
        max_examples=anyinfer_examples,
    )


@pytest.mark.anyinfer_conformance(
    covers=(G1, G2, G3, G4, RESULT_AGREEMENT, ERROR_TYPE, ONE_REQUEST)
)
def test_documented_cases(anyinfer_harness: Harness) -> None:
    """Every documented error status (429 with `Retry-After`) and every finish reason,
    plus one no provider sends, each served once through a stream and once through
    `generate()`: checked at any sampling depth (`runner.documented_scripts`)."""
    import asyncio

    paths: tuple[tuple[Mode, Mode], ...] = (
        ("async-stream", "sync-generate"),
        ("sync-stream", "async-generate"),
    )
    failures: list[tuple[str, ConformanceFailure]] = []
    with asyncio.Runner() as runner:
        for number, (label, script) in enumerate(documented_scripts(anyinfer_harness.dialect)):
            for mode in paths[number % 2]:
                try:
                    anyinfer_harness.verify(script, mode, runner=runner)
                except ConformanceFailure as failure:
                    failures.append((f"{label} via {mode}", failure))
    if failures:
        raise _grouped(failures)


def _grouped(failures: list[tuple[str, ConformanceFailure]]) -> Exception:
    """One failure per first broken guarantee, noting every documented case that failed."""
    first: dict[str, ConformanceFailure] = {}
    for _label, failure in failures:
        first.setdefault(failure.guarantees[0] if failure.guarantees else "", failure)
    cases = "; ".join(f"{label} ({', '.join(f.guarantees)})" for label, f in failures)
    error: Exception = (
        next(iter(first.values()))
        if len(first) == 1
        else ExceptionGroup(f"{len(first)} distinct failures", list(first.values()))
    )
    error.add_note(f"documented cases that failed ({len(failures)}): {cases}")
    return error


@pytest.mark.anyinfer_conformance(covers=STREAM)
def test_hostile(
    anyinfer_harness: Harness,
    anyinfer_hostile_scripts: SearchStrategy[Script],
    anyinfer_examples: int,
) -> None:
    """Hostile-world scripts: odd but legal shapes are checked in full (they have one right
    reading); after a malformed frame only the grammar, nothing lost, a typed error and
    no hang are asked. The line-ending cases (`_line_ending_cases`) run after, at any
    sampling depth."""
    anyinfer_harness.check_property(
        anyinfer_hostile_scripts,
        modes=("async-stream", "sync-stream", "async-generate"),
        max_examples=anyinfer_examples,
        robust=True,
    )
    failures: list[tuple[str, ConformanceFailure]] = []
    for label, script in _line_ending_cases(anyinfer_harness):
        try:
            anyinfer_harness.verify(script, "async-stream", robust=True)
        except ConformanceFailure as failure:
            failures.append((label, failure))
    if failures:
        raise _grouped(failures)


def _line_ending_cases(harness: Harness) -> list[tuple[str, Script]]:
    """Every line ending the framing allows, each for a clean response, a cut after the
    first frame of a one-frame response (after its finish reason: the trailing-usage
    rule) and a cut after content (the failure-flush rule). A shallow sampling (the CI
    profile) can miss these; a framer that held back a bare CR broke exactly them.

    Then, per line ending, a cut one byte short of each frame of a two-piece response:
    the byte left out can be one no framer waits for (the LF of a closing CRLF, the
    newline after a JSON array's element), so the frame may have been delivered. The
    deep profile found an oracle that said otherwise; shallow sampling seldom draws
    exactly that byte."""
    from dataclasses import replace

    from anyinfer.fakeservers import Fault, Script, Text

    from .strategies import LINE_ENDINGS

    sse = harness.dialect.content_type == "text/event-stream"
    cases: list[tuple[str, Script]] = []
    for ending in LINE_ENDINGS if sse else ("lf", "crlf"):
        text = (Text("Line "), Text("ends."))
        clean = Script(pieces=text, line_ending=ending)
        cases += [
            (f"{ending}: clean", clean),
            (
                f"{ending}: cut after the finish",
                Script(
                    finish_reason="other_0", fault=Fault("disconnect", at=1), line_ending=ending
                ),
            ),
            (
                f"{ending}: cut after content",
                Script(pieces=text, fault=Fault("disconnect", at=1), line_ending=ending),
            ),
        ]
        frames = harness.dialect.render(clean, stream=True).frames
        for at, frame in enumerate(frames):
            if len(frame.data) > 1:
                short = Fault("disconnect", at=at, partial_bytes=len(frame.data) - 1)
                cases.append(
                    (f"{ending}: cut one byte short of frame {at}", replace(clean, fault=short))
                )
    return cases


@pytest.mark.anyinfer_conformance(covers=STREAM)
def test_loopback(
    anyinfer_harness: Harness, anyinfer_scripts: SearchStrategy[Script], anyinfer_examples: int
) -> None:
    """A sample over a real 127.0.0.1 socket, through all four paths."""
    anyinfer_harness.check_property(
        anyinfer_scripts, modes=MODES, via="server", max_examples=max(2, anyinfer_examples // 4)
    )


@pytest.mark.anyinfer_conformance(covers=(EARLY_EXIT, G2))
def test_early_exit_async(
    anyinfer_harness: Harness, anyinfer_scripts: SearchStrategy[Script], anyinfer_examples: int
) -> None:
    """Leaving `async with client.stream(...)` after the first delta closes the connection."""
    anyinfer_harness.check_early_exit_property(
        anyinfer_scripts.filter(_has_content),
        sync=False,
        max_examples=max(2, anyinfer_examples // 10),
    )


@pytest.mark.anyinfer_conformance(covers=(EARLY_EXIT, G2))
def test_early_exit_sync(
    anyinfer_harness: Harness, anyinfer_scripts: SearchStrategy[Script], anyinfer_examples: int
) -> None:
    """Leaving `with client.stream(...)` after the first delta closes the connection."""
    anyinfer_harness.check_early_exit_property(
        anyinfer_scripts.filter(_has_content),
        sync=True,
        max_examples=max(2, anyinfer_examples // 10),
    )


def _resources_enabled(config: pytest.Config) -> None:
    if not config.getoption("anyinfer_resources", False):
        pytest.skip("the resources check runs with --anyinfer-resources")


@pytest.mark.anyinfer_conformance(covers=(RESOURCES,))
def test_resources_async(anyinfer_harness: Harness, pytestconfig: pytest.Config) -> None:
    """One long-lived `AsyncClient` through more early exits, cancellations and faults
    than its pool has connections leaves nothing behind (`anyinfer.conformance.resources`)."""
    _resources_enabled(pytestconfig)
    anyinfer_harness.verify_resources(sync=False)


@pytest.mark.anyinfer_conformance(covers=(RESOURCES,))
def test_resources_sync(anyinfer_harness: Harness, pytestconfig: pytest.Config) -> None:
    """The same through one long-lived `Client` (its background loop and threads)."""
    _resources_enabled(pytestconfig)
    anyinfer_harness.verify_resources(sync=True)


@pytest.mark.anyinfer_conformance(covers=(G1, G2, G3, G4, TRAILING_USAGE))
def test_recorded_traffic(anyinfer_harness: Harness, anyinfer_cassette_dir: Any) -> None:
    """Bundled cassettes of this adapter replay through it with every guarantee holding.

    Each generation request recorded under `<cassette dir>/<adapter>/` is answered with
    its recorded response (status, headers, body) and run through the client; the
    events must follow the grammar, the text deltas must make the result, and the
    result's usage must be what the usage updates say — on real traffic, not scripts.
    """
    from .cassettes import replay_interactions

    folder = anyinfer_cassette_dir / anyinfer_harness.entry.name
    recordings = sorted(folder.rglob("*.yaml")) if folder.is_dir() else []
    if not recordings:
        pytest.skip(f"no bundled cassettes under {folder}")
    checked = replay_interactions(anyinfer_harness, recordings)
    assert checked, f"no generation requests in the cassettes under {folder}"


@pytest.mark.anyinfer_conformance(covers=(G1, G2, G3, G4))
def test_schema_repair_rerun(anyinfer_harness: Harness) -> None:
    """A schema-repair re-run keeps the grammar: a fresh `attempt_start`, no `AttemptFailed`,
    and the result is the last segment's (async and sync streams)."""
    import anyinfer as ai
    from anyinfer.fakeservers import FakeTransport, Script, ScriptUsage, Text

    from .checker import check_grammar

    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    for sync in (False, True):
        scripts = [
            Script(pieces=(Text('{"n": "not a number"}'),), usage=ScriptUsage(3, 4)),
            Script(pieces=(Text('{"n": 7}'),), usage=ScriptUsage(9, 2)),
        ]
        transport = FakeTransport(anyinfer_harness.dialect, scripts)
        settings = anyinfer_harness.settings(transport=transport)
        route = ai.Route(f"{anyinfer_harness.entry.name}:m", retry=ai.RetryPolicy(max_retries=0))
        kw: dict[str, Any] = {"route": route, "schema": schema, "repair": ai.Repair(max_attempts=1)}
        events: list[ai.StreamEvent] = []
        if sync:
            with ai.Client([settings], registry=anyinfer_harness._providers) as client:
                with client.stream("n?", **kw) as stream:
                    events.extend(stream)
                result = stream.result
        else:
            import asyncio

            async def run(
                settings: ai.ProviderSettings = settings,
                kw: dict[str, Any] = kw,
                events: list[ai.StreamEvent] = events,
            ) -> ai.Generation:
                async with ai.AsyncClient([settings], registry=anyinfer_harness._providers) as c:
                    async with c.stream("n?", **kw) as stream:
                        async for event in stream:
                            events.append(event)
                    return stream.result

            result = asyncio.run(run())
        problems = check_grammar(events, succeeded=True)
        assert not problems, "; ".join(str(p) for p in problems)
        starts = [e for e in events if isinstance(e, ai.TimingMark) and e.name == "attempt_start"]
        assert len(starts) == 2 and not any(isinstance(e, ai.AttemptFailed) for e in events)
        assert result.repair_attempts == 1 and result.structured == {"n": 7}
        last = max(
            i
            for i, e in enumerate(events)
            if isinstance(e, ai.TimingMark) and e.name == "attempt_start"
        )
        text = "".join(e.text for e in events[last:] if isinstance(e, ai.TextDelta))
        assert text == result.text
        transport.assert_all_used()


ENTRY_CHECK = (
    G1,
    G2,
    G3,
    G4,
    TRAILING_USAGE,
    RESULT_AGREEMENT,
    ONE_REQUEST,
    *EMBED_GUARANTEES,
)
"""What `test_preset_entry` checks itself, for an entry standing on another's full run."""


@pytest.mark.anyinfer_conformance(covers=ENTRY_CHECK)
def test_preset_entry(
    anyinfer_adapter: AdapterEntry, anyinfer_conformance_registry: ConformanceRegistry
) -> None:
    """A preset that reads responses as another entry does (`AdapterEntry.stands_on`):
    its class is the one its `PRESETS` entry makes; with no `base_url` given, a request
    goes to its own default URL's path (a templated URL filled in) with its key where
    its quirks put it and its request quirks applied; and documented streams (text with
    usage, a tool call) and a whole response decode with every guarantee holding."""
    import dataclasses
    from urllib.parse import urlsplit

    import httpx

    from anyinfer._providers.openai_compat import PRESETS, preset_adapter, quirks_for
    from anyinfer.fakeservers import FakeTransport

    from .runner import Harness as _Harness
    from .runner import documented_scripts

    entry = anyinfer_adapter
    preset = PRESETS[entry.name]
    cls = entry.resolve_class()
    assert cls is preset_adapter(entry.name), f"{entry.name}: not its PRESETS entry's class"
    assert (cls.default_base_url, cls.api_key_env) == (preset.default_base_url, preset.api_key_env)
    url = preset.default_base_url or preset.base_url_template.format_map(_Filled("conformance"))
    quirks = quirks_for(entry.name, {})
    seen: list[httpx.Request] = []

    class Recording(FakeTransport):
        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            seen.append(request)
            return await super().handle_async_request(request)

    class OwnURL(_Harness):
        def settings(self, **kw: Any) -> Any:
            chosen = super().settings(**kw)
            # The preset's own default; only a templated URL needs one given.
            return dataclasses.replace(chosen, base_url=None if preset.default_base_url else url)

    harness = OwnURL(
        anyinfer_conformance_registry,
        entry,
        transport_factory=lambda dialect, scripts: Recording(dialect, scripts),
    )
    cases = dict(documented_scripts(harness.dialect))
    runs = (
        (cases["finish reason 'stop'"], "async-stream"),
        (cases["finish reason 'tool_calls'"], "sync-stream"),
        (cases["finish reason 'length'"], "async-generate"),
    )
    path = urlsplit(url).path.rstrip("/") + "/chat/completions"
    key = harness.settings().api_key
    for script, mode in runs:
        seen.clear()
        harness.verify(script, mode)  # type: ignore[arg-type]
        (request,) = seen
        assert (request.url.host, request.url.path) == (urlsplit(url).hostname, path), (
            f"{entry.name}: request went to {request.url}, not under {url}"
        )
        header = quirks.key_header.lower()
        expected = f"Bearer {key}" if header == "authorization" else key
        assert request.headers.get(header) == expected, f"{entry.name}: key not in {header}"
        body = json.loads(request.content)
        streamed = mode.endswith("-stream")
        assert ("stream_options" in body) == (streamed and quirks.stream_usage), (
            f"{entry.name}: stream_options {'sent' if 'stream_options' in body else 'missing'}"
        )
        for name in quirks.drop_fields:
            assert name not in body, f"{entry.name}: {name} sent"
    if _embeds(entry) and harness.dialect.embedding is not None:
        # Its embeddings: two batches, a 429 retried, each to its own URL's embeddings
        # path (no `dimensions`: whether a preset's server takes them is its own quirk).
        from .embeddings import EmbedHarness, embed_documented_cases

        seen.clear()
        case = dict(embed_documented_cases(harness.dialect))["429, Retry-After 0 (retried)"]
        EmbedHarness(harness).verify(case)
        assert seen and {(r.url.host, r.url.path) for r in seen} == {
            (urlsplit(url).hostname, urlsplit(url).path.rstrip("/") + "/embeddings")
        }, f"{entry.name}: embedding requests went to {[str(r.url) for r in seen]}"


class _Filled(dict[str, str]):
    """Fills every `{placeholder}` of a URL template with one value."""

    def __init__(self, value: str) -> None:
        super().__init__()
        self.value = value

    def __missing__(self, key: str) -> str:
        return self.value


# --- embeddings ----------------------------------------------------------------------


def _embeds(entry: AdapterEntry) -> bool:
    """Whether the entry's class embeds (`Adapter.serves_embeddings`)."""
    try:
        return entry.resolve_class().serves_embeddings()
    except Exception:  # an unresolvable class is reported by the generation tests
        return False


def _half(examples: int) -> int:
    """Examples for a retrieval property: half the generation properties' (each case is
    several requests, each with its own answers, and the documented cases run at any
    depth), at least ten."""
    return max(10, examples // 2)


def _embedding_harness(harness: Harness) -> Any:
    """The adapter's `EmbedHarness`, or a skip when its dialect scripts no answers."""
    from .embeddings import EmbedHarness

    if harness.dialect.embedding is None:
        pytest.skip(
            f"dialect {harness.dialect.name!r} declares no EmbeddingProfile "
            "(fakeservers.EmbeddingProfile), so its embedding answers cannot be scripted"
        )
    return EmbedHarness(harness)


@pytest.mark.anyinfer_conformance(covers=EMBED_GUARANTEES)
def test_embed_paths(anyinfer_harness: Harness, anyinfer_examples: int) -> None:
    """`AsyncClient.embed()` and `Client.embed()` (each example draws one) on wire-realistic
    answers, over the httpx transport: order, count, dimensions, usage, typed errors,
    nothing lost on a failed batch, retries and fallbacks as the route says."""
    from .embeddings import realistic_embed_cases

    embedding = _embedding_harness(anyinfer_harness)
    embedding.check_property(
        realistic_embed_cases(anyinfer_harness.dialect), max_examples=_half(anyinfer_examples)
    )


@pytest.mark.anyinfer_conformance(covers=EMBED_GUARANTEES)
def test_embed_hostile(anyinfer_harness: Harness, anyinfer_examples: int) -> None:
    """The hostile embedding world: floats where base64 was asked, usage left out, a
    malformed body, vectors a dimension short, entries missing, indices repeated. Each
    has one right reading (a result, or a typed failure), checked in full."""
    from .embeddings import hostile_embed_cases

    embedding = _embedding_harness(anyinfer_harness)
    embedding.check_property(
        hostile_embed_cases(anyinfer_harness.dialect),
        max_examples=max(5, anyinfer_examples // 4),
    )


@pytest.mark.anyinfer_conformance(covers=EMBED_GUARANTEES)
def test_embed_documented(anyinfer_harness: Harness) -> None:
    """Every documented embedding case once (`embeddings.embed_documented_cases`): each
    error status, a 429 waited for and one that falls back, a cut, a stall, a malformed
    body, every broken shape, and a batch failing on both instances."""
    _embedding_harness(anyinfer_harness).verify_documented()


@pytest.mark.anyinfer_conformance(covers=EMBED_GUARANTEES)
def test_embed_loopback(anyinfer_harness: Harness, anyinfer_examples: int) -> None:
    """A sample of the realistic embedding cases over a real 127.0.0.1 socket."""
    from .embeddings import realistic_embed_cases

    embedding = _embedding_harness(anyinfer_harness)
    embedding.check_property(
        realistic_embed_cases(anyinfer_harness.dialect),
        via="server",
        max_examples=max(2, anyinfer_examples // 15),
    )


@pytest.mark.anyinfer_conformance(covers=EMBED_GUARANTEES)
def test_recorded_embeddings(anyinfer_harness: Harness, anyinfer_cassette_dir: Any) -> None:
    """Bundled cassettes of this adapter's embedding requests replay through `embed()`:
    every vector is the recorded one (decoded from the recording itself), in input
    order, usage is the recorded count, an error status is its typed error."""
    from .cassettes import replay_embeddings

    folder = anyinfer_cassette_dir / anyinfer_harness.entry.name
    recordings = sorted(folder.rglob("*.yaml")) if folder.is_dir() else []
    checked = replay_embeddings(anyinfer_harness, recordings) if recordings else 0
    if not checked:
        pytest.skip(f"no bundled embedding cassettes under {folder}")


@pytest.mark.anyinfer_conformance(covers=(RESOURCES,))
def test_embed_resources_async(anyinfer_harness: Harness, pytestconfig: pytest.Config) -> None:
    """One long-lived `AsyncClient` through more failed, cut, stalled and cancelled
    `embed()` calls than its pool has connections leaves nothing behind."""
    _resources_enabled(pytestconfig)
    _embedding_harness(anyinfer_harness)
    anyinfer_harness.verify_resources(sync=False, method="embed")


@pytest.mark.anyinfer_conformance(covers=(RESOURCES,))
def test_embed_resources_sync(anyinfer_harness: Harness, pytestconfig: pytest.Config) -> None:
    """The same through one long-lived `Client`."""
    _resources_enabled(pytestconfig)
    _embedding_harness(anyinfer_harness)
    anyinfer_harness.verify_resources(sync=True, method="embed")


_EMBEDDING_TESTS = (
    test_embed_paths,
    test_embed_hostile,
    test_embed_documented,
    test_embed_loopback,
    test_recorded_embeddings,
    test_embed_resources_async,
    test_embed_resources_sync,
)
"""Parametrized over the adapters whose class embeds."""


# --- reranking -----------------------------------------------------------------------


def _reranks(entry: AdapterEntry) -> bool:
    """Whether the entry's class reranks (`Adapter.serves_rerank`)."""
    try:
        return entry.resolve_class().serves_rerank()
    except Exception:  # an unresolvable class is reported by the generation tests
        return False


def _rerank_harness(harness: Harness) -> Any:
    """The adapter's `RerankHarness`, or a skip when its dialect answers no rerank."""
    from .reranking import RerankHarness, reranks

    if not reranks(harness.dialect):
        pytest.skip(f"dialect {harness.dialect.name!r} answers no rerank requests")
    return RerankHarness(harness)


@pytest.mark.anyinfer_conformance(covers=RERANK_GUARANTEES)
def test_rerank_paths(anyinfer_harness: Harness, anyinfer_examples: int) -> None:
    """`AsyncClient.rerank()` and `Client.rerank()` (each example draws one) over the httpx
    transport: indices a permutation subset of the documents, best first with the
    provider's scores, `top_n` respected, typed errors, retries and fallbacks as the
    route says, and no partial ranking after a failed request."""
    from .reranking import realistic_rerank_cases

    rerank = _rerank_harness(anyinfer_harness)
    rerank.check_property(
        realistic_rerank_cases(anyinfer_harness.dialect, limit=rerank.limit),
        max_examples=_half(anyinfer_examples),
    )


@pytest.mark.anyinfer_conformance(covers=RERANK_GUARANTEES)
def test_rerank_hostile(anyinfer_harness: Harness, anyinfer_examples: int) -> None:
    """The rerank calls plus malformed bodies, which must fail typed."""
    from .reranking import hostile_rerank_cases

    rerank = _rerank_harness(anyinfer_harness)
    rerank.check_property(
        hostile_rerank_cases(anyinfer_harness.dialect, limit=rerank.limit),
        max_examples=max(5, anyinfer_examples // 4),
    )


@pytest.mark.anyinfer_conformance(covers=RERANK_GUARANTEES)
def test_rerank_documented(anyinfer_harness: Harness) -> None:
    """Every documented rerank case once (`reranking.rerank_documented_cases`)."""
    _rerank_harness(anyinfer_harness).verify_documented()


@pytest.mark.anyinfer_conformance(covers=RERANK_GUARANTEES)
def test_rerank_loopback(anyinfer_harness: Harness, anyinfer_examples: int) -> None:
    """A sample of the rerank calls over a real 127.0.0.1 socket."""
    from .reranking import realistic_rerank_cases

    rerank = _rerank_harness(anyinfer_harness)
    rerank.check_property(
        realistic_rerank_cases(anyinfer_harness.dialect, limit=rerank.limit),
        via="server",
        max_examples=max(2, anyinfer_examples // 15),
    )


@pytest.mark.anyinfer_conformance(covers=(RESOURCES,))
def test_rerank_resources_async(anyinfer_harness: Harness, pytestconfig: pytest.Config) -> None:
    """One long-lived `AsyncClient` through more failed, cut, stalled and cancelled
    `rerank()` calls than its pool has connections leaves nothing behind."""
    _resources_enabled(pytestconfig)
    _rerank_harness(anyinfer_harness)
    anyinfer_harness.verify_resources(sync=False, method="rerank")


@pytest.mark.anyinfer_conformance(covers=(RESOURCES,))
def test_rerank_resources_sync(anyinfer_harness: Harness, pytestconfig: pytest.Config) -> None:
    """The same through one long-lived `Client`."""
    _resources_enabled(pytestconfig)
    _rerank_harness(anyinfer_harness)
    anyinfer_harness.verify_resources(sync=True, method="rerank")


_RERANK_TESTS = (
    test_rerank_paths,
    test_rerank_hostile,
    test_rerank_documented,
    test_rerank_loopback,
    test_rerank_resources_async,
    test_rerank_resources_sync,
)
"""Parametrized over the adapters whose class reranks."""
