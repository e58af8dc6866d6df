"""The harness end to end, in-process: real client, core and adapters over fake servers.

One hand-picked script per broken adapter shows each bug caught under the right
guarantee, quickly and deterministically; the pytester tests then show the same through
`pytest --anyinfer-conformance` with generated scripts.
"""

from __future__ import annotations

import asyncio
import contextlib
import zlib
from collections.abc import Iterator
from typing import Any

import pytest
from conformance_broken import BROKEN

import anyinfer as ai
from anyinfer._providers.openai_chat import OpenAIChatAdapter
from anyinfer.adapters import Part
from anyinfer.conformance._suite import test_documented_cases as run_documented_cases
from anyinfer.conformance.checker import EARLY_EXIT, ONE_REQUEST, normalize_finish
from anyinfer.conformance.registry import ConformanceRegistry, RegistryError, load_builtins
from anyinfer.conformance.runner import (
    DOCUMENTED_FINISH_REASONS,
    MODES,
    ConformanceFailure,
    Harness,
    Mode,
    NotReached,
    documented_scripts,
    property_seed,
)
from anyinfer.fakeservers import Fault, Reasoning, Script, ScriptUsage, Text, ToolFragment

GOOD = Script(
    pieces=(
        Reasoning("thinking "),
        Text("héllo "),
        ToolFragment(1, '{"q": "日本', id="call_b", name="search"),
        ToolFragment(0, "", name="clock"),
        ToolFragment(1, '語"}'),
        Text("🙂"),
    ),
    finish_reason="sparkles_42",
    usage=ScriptUsage(input_tokens=9, output_tokens=4, cache_read_tokens=2),
    keepalives=(1, 3),
    read_sizes=(1,),
)


def harness(name: str = "openai", cls: type[OpenAIChatAdapter] | None = None) -> Harness:
    registry = ConformanceRegistry()
    if cls is None:
        load_builtins(registry)
    else:
        registry.add(name, cls, dialect="openai-chat")
    return Harness(registry, registry.get(name))


@pytest.mark.parametrize("mode", MODES)
def test_builtin_adapter_conforms_over_transport(mode: Mode) -> None:
    run = harness().verify(GOOD, mode)
    result = run.observation.result
    assert result is not None
    assert result.text == "héllo 🙂"
    assert [c.id for c in result.tool_calls] == ["call_0", "call_b"]
    assert result.finish_reason == "other"


@pytest.mark.loopback
@pytest.mark.parametrize("mode", ["async-stream", "sync-generate"])
def test_builtin_adapter_conforms_over_loopback(mode: Mode) -> None:
    harness().verify(GOOD, mode, via="server")


@pytest.mark.loopback
@pytest.mark.parametrize("sync", [False, True])
def test_builtin_adapter_closes_on_early_exit(sync: bool) -> None:
    harness().verify_early_exit(GOOD, sync=sync)


CAUGHT: list[tuple[str, Script, Mode]] = [
    (
        "broken-stops-at-finish",
        Script(pieces=(Text("hi"),), usage=ScriptUsage(1, 2)),
        "async-stream",
    ),
    (
        "broken-holds-usage",
        Script(
            pieces=(Text("hi"),),
            finish_reason=None,
            usage=ScriptUsage(input_tokens=5),
            usage_placement="finish",
            fault=Fault("disconnect", at=3),  # after the usage frame, before [DONE]
        ),
        "async-stream",
    ),
    (
        "broken-merges-tool-calls",
        Script(
            pieces=(
                ToolFragment(0, "{}", id="a", name="f"),
                ToolFragment(1, "{}", id="b", name="g"),
            )
        ),
        "sync-stream",
    ),
    ("broken-tool-slots", Script(pieces=(ToolFragment(0, "{}", name="f"),)), "async-generate"),
    ("broken-drops-reasoning", Script(pieces=(Reasoning("r"), Text("t"))), "sync-generate"),
    (
        "broken-unknown-finish",
        Script(pieces=(Text("t"),), finish_reason="sparkles_42"),
        "async-stream",
    ),
    ("broken-bare-malformed", Script(fault=Fault("malformed", at=1)), "async-stream"),
    ("broken-swallows-status", Script(fault=Fault("status", status=503)), "sync-generate"),
    (
        "broken-holds-content",
        Script(pieces=(Text("a"), Text("b")), fault=Fault("disconnect", at=2)),
        "async-stream",
    ),
    ("broken-forgets-sentinel", Script(pieces=(Text("hi"),)), "sync-stream"),
    (
        "broken-ignores-error-chunk",
        Script(pieces=(Text("hi"),), fault=Fault("provider_error", at=9, status=429)),
        "async-stream",
    ),
    (
        "broken-drops-retry-after",
        Script(fault=Fault("status", status=429, retry_after=7)),
        "async-stream",
    ),
    (
        "broken-lf-only-framing",
        Script(pieces=(Text("hi"),), line_ending="crlf", fault=Fault("disconnect", at=2)),
        "sync-stream",
    ),
]


@pytest.mark.parametrize(("name", "script", "mode"), CAUGHT, ids=[c[0] for c in CAUGHT])
def test_broken_adapter_is_caught(name: str, script: Script, mode: Mode) -> None:
    cls, guarantee = BROKEN[name]
    with pytest.raises(ConformanceFailure) as info:
        harness(name, cls).verify(script, mode)
    failure = info.value
    assert guarantee in failure.guarantees
    assert failure.adapter == name
    report = str(failure)
    assert f"adapter {name} " in report
    assert guarantee in report
    assert "events" in report and "script" in report
    assert "Script(" in report


def test_every_broken_adapter_has_a_hand_picked_case() -> None:
    assert {c[0] for c in CAUGHT} | {"broken-pumps-in-background"} == set(BROKEN)


@pytest.mark.loopback
def test_background_pump_is_caught_on_early_exit() -> None:
    cls, guarantee = BROKEN["broken-pumps-in-background"]
    assert guarantee == EARLY_EXIT
    with pytest.raises(ConformanceFailure) as info:
        harness("broken-pumps-in-background", cls).verify_early_exit(GOOD, sync=False)
    assert info.value.guarantees == (EARLY_EXIT,)
    assert "Fault('stall'" in str(info.value)  # the report shows the script as served


class _AsksTwice(OpenAIChatAdapter):
    """Sends a warm-up request before the real one (an extra, unscripted request)."""

    async def generate(self, request):  # type: ignore[no-untyped-def]
        await self.send("POST", "/chat/completions", json_body=self.build_body(request))
        async for part in super().generate(request):
            yield part


def test_an_extra_request_is_named() -> None:
    with pytest.raises(ConformanceFailure) as info:
        harness("asks-twice", _AsksTwice).verify(Script(pieces=(Text("a"),)), "async-stream")
    assert info.value.guarantees == (ONE_REQUEST,)


def test_a_shared_runner_and_server_serve_many_scripts() -> None:
    h = harness()
    shared = h.shared_server()
    scripts = [Script(pieces=(Text(str(i)),)) for i in range(3)]
    with asyncio.Runner() as runner, shared.server:
        for script in scripts:
            run = h.verify(script, "async-stream", via="server", runner=runner, server=shared)
            assert run.observation.result is not None
            assert run.observation.result.text == script.text


def test_registry_rejects_bad_registrations() -> None:
    registry = ConformanceRegistry()
    load_builtins(registry)
    assert "openai" in registry.names()  # the built-ins come from AnyInfer's registry
    with pytest.raises(RegistryError, match="already registered"):
        registry.add("openai")
    with pytest.raises(RegistryError, match="Adapter subclass"):
        registry.add("x", object)  # type: ignore[arg-type]
    with pytest.raises(RegistryError, match="base_url"):
        registry.add("y", OpenAIChatAdapter, settings={"base_url": "http://x"})
    registry.add("z", OpenAIChatAdapter, dialect="nope")
    with pytest.raises(RegistryError, match="unknown dialect 'nope'"):
        registry.check()
    with pytest.raises(RegistryError, match=r"no conformance adapter named 'missing'.*, z$"):
        registry.select(["missing"])


# --- sampling: each test x adapter draws its own sequence ------------------------------


@contextlib.contextmanager
def _derandomized() -> Iterator[None]:
    """The CI profile's sampling (derandomized, no database) for the duration."""
    from hypothesis import settings

    current = settings.get_current_profile_name()
    settings.register_profile("harness-derandomized", derandomize=True, database=None)
    settings.load_profile("harness-derandomized")
    try:
        yield
    finally:
        settings.load_profile(current)


def _drawn(h: Harness, key: str | None = None) -> list[str]:
    from hypothesis import strategies as st

    seen: list[str] = []

    def served(text: str) -> Script:
        seen.append(text)
        return Script(pieces=(Text(text),))

    words = st.text("abcdefgh", min_size=1, max_size=12).map(served)
    with _derandomized():
        h.check_property(words, modes=("async-generate",), max_examples=12, key=key)
    return seen


def test_each_key_draws_its_own_reproducible_sequence() -> None:
    h = harness()
    first = _drawn(h, "anyinfer-conformance::test_generate_paths[openai]")
    assert first == _drawn(h, "anyinfer-conformance::test_generate_paths[openai]")
    assert first != _drawn(h, "anyinfer-conformance::test_generate_paths[anthropic]")
    assert first != _drawn(h, "anyinfer-conformance::test_stream_paths[openai]")
    # The harness's own key is the default (the anyinfer_harness fixture passes the
    # test's node id).
    keyed = harness()
    keyed.key = "anyinfer-conformance::test_generate_paths[openai]"
    assert _drawn(keyed) == first
    assert property_seed("x") == zlib.crc32(b"x")


# --- documented cases ----------------------------------------------------------------


def test_documented_scripts_cover_every_status_and_finish_reason() -> None:
    from anyinfer.conformance.strategies import DOCUMENTED_STATUSES

    cases = documented_scripts(harness().dialect)
    faults = [s.fault for _, s in cases if s.fault is not None]
    assert sorted(f.status for f in faults) == sorted(DOCUMENTED_STATUSES)
    assert {f.status for f in faults if f.retry_after is not None} == {429}
    reasons = [s.finish_reason for _, s in cases if s.fault is None]
    assert reasons == list(DOCUMENTED_FINISH_REASONS)
    assert {"stop", "length", "tool_calls", "content_filter"} < set(reasons)
    assert normalize_finish(DOCUMENTED_FINISH_REASONS[-1]) == "other"


@pytest.mark.parametrize("name", ["openai", "anthropic", "gemini", "ollama", "openai-responses"])
def test_builtin_adapters_pass_the_documented_cases(name: str) -> None:
    registry = ConformanceRegistry()
    load_builtins(registry)
    run_documented_cases(Harness(registry, registry.get(name)))


def test_documented_cases_catch_a_swallowed_status_and_list_every_case() -> None:
    cls, guarantee = BROKEN["broken-swallows-status"]
    with pytest.raises(ConformanceFailure) as info:
        run_documented_cases(harness("broken-swallows-status", cls))
    assert info.value.guarantees[0] == guarantee
    notes = "\n".join(getattr(info.value, "__notes__", []))
    for status in (401, 404, 413, 422, 529):
        assert f"status {status} via" in notes


# --- reports -------------------------------------------------------------------------


class _ChokesOnContent(OpenAIChatAdapter):
    """Raises at the first text delta: an agreement bug, with nothing to leave early."""

    def parts_from_delta(self, delta: dict[str, Any], key: str) -> Iterator[Part]:
        if delta.get("content"):
            raise ai.ProtocolError("choked on content", provider=self.instance_id)
        yield from super().parts_from_delta(delta, key)


@pytest.mark.loopback
def test_early_exit_is_not_reached_when_the_attempt_fails_before_any_delta() -> None:
    with pytest.raises(NotReached) as info:
        harness("chokes", _ChokesOnContent).verify_early_exit(
            Script(pieces=(Text("a"), Text("b"))), sync=True
        )
    failure = info.value
    assert failure.guarantees == ()  # the matrix shows "-" for exit, not FAIL
    assert failure.unreached == EARLY_EXIT
    assert "did not reach early-exit-cancels" in str(failure)
    assert "ProtocolError: choked on content before its first content delta" in str(failure)


def test_a_served_script_is_not_called_minimal() -> None:
    with pytest.raises(ConformanceFailure) as info:
        harness("chokes", _ChokesOnContent).verify(Script(pieces=(Text("a"),)), "sync-stream")
    report = str(info.value)
    assert "\n  script:\n" in report
    assert "minimal" not in report


@pytest.mark.parametrize("shrink", [False, True])
def test_a_drawn_script_is_called_minimal_only_when_hypothesis_shrinks(shrink: bool) -> None:
    from hypothesis import Phase, settings
    from hypothesis import strategies as st

    phases = [Phase.generate, Phase.shrink] if shrink else [Phase.generate]
    current = settings.get_current_profile_name()
    settings.register_profile("harness-phases", database=None, phases=phases)
    settings.load_profile("harness-phases")
    try:
        with pytest.raises(ConformanceFailure) as info:
            harness("chokes", _ChokesOnContent).check_property(
                st.just(Script(pieces=(Text("a"),))), modes=("sync-stream",), max_examples=2
            )
    finally:
        settings.load_profile(current)
    report = str(info.value)
    if shrink:
        assert "  script (minimal: shrunk by Hypothesis):" in report
    else:
        assert "  script (as drawn, not minimal: " in report
        assert "minimal: shrunk" not in report
