"""The two script worlds and the shapes they add: profiles, line ends, split `data:` lines,
in-stream provider errors, running usage counts and `Retry-After` in `ErrorInfo`."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import anyinfer as ai
from anyinfer.conformance import strategies as cs
from anyinfer.conformance.checker import expect
from anyinfer.fakeservers import (
    Dialect,
    Disconnect,
    Fault,
    Frame,
    InStreamError,
    Reasoning,
    Rendered,
    Script,
    ScriptUsage,
    Text,
    ToolFragment,
    WireProfile,
    Write,
    error_answer,
    get_dialect,
    plan,
)
from anyinfer.fakeservers.dialects import split_sse_data


class _Plain(Dialect):
    """A minimal SSE dialect: one `data:` event per piece, a finish event, `[DONE]`."""

    name = "worlds-plain"
    profile = WireProfile(
        usage_placements=("trailing",),
        reasoning=False,
        keepalives=False,
        in_stream_errors=(InStreamError(529, "overloaded"),),
        max_tool_calls=2,
    )

    def render(self, script: Script, *, stream: bool) -> Rendered:
        frames = [
            Frame(b"data: " + json.dumps({"i": i, "p": repr(p)}).encode() + b"\n\n", pieces=(i,))
            for i, p in enumerate(script.pieces)
        ]
        frames.append(Frame(b'data: {"finish": true, "n": 1}\n\n', finish=True))
        frames.append(Frame(b"data: [DONE]\n\n", sentinel=True))
        return Rendered(200, (), self.finish_frames(frames, script))

    def render_error(self, fault: Fault) -> Rendered:
        return Rendered(fault.status, (), (Frame(b"{}"),))

    def is_generation(self, method: str, path: str) -> bool:
        return True

    def error_frame(self, fault: Fault) -> bytes | None:
        return b'data: {"error": {"code": "' + (fault.code or "x").encode() + b'"}}\n\n'


class _NoErrors(_Plain):
    name = "worlds-no-errors"
    profile = WireProfile()

    def error_frame(self, fault: Fault) -> bytes | None:
        return None


PLAIN = _Plain()


def _joined_data(event: bytes) -> Any:
    lines = [ln for ln in event.split(b"\n") if ln.startswith(b"data:")]
    return json.loads(b"\n".join(ln[5:].lstrip(b" ") for ln in lines))


@given(
    st.dictionaries(st.text(max_size=5), st.one_of(st.text(max_size=5), st.integers()), min_size=1)
)
def test_split_sse_data_keeps_the_json_value(payload: dict[str, Any]) -> None:
    event = b"event: x\ndata: " + json.dumps(payload).encode() + b"\n\n"
    split = split_sse_data(event)
    assert split.count(b"\ndata: ") == 2  # two data lines now
    assert _joined_data(split) == payload
    assert split.startswith(b"event: x\n") and split.endswith(b"\n\n")


def test_split_sse_data_leaves_events_without_a_split_point() -> None:
    assert split_sse_data(b"data: [DONE]\n\n") == b"data: [DONE]\n\n"
    assert split_sse_data(b": comment\n\n") == b": comment\n\n"


@pytest.mark.parametrize(("ending", "raw"), [("crlf", b"\r\n"), ("cr", b"\r")])
def test_line_endings_replace_every_lf_and_keep_frame_metadata(ending: Any, raw: bytes) -> None:
    script = Script(pieces=(Text("a"),), line_ending=ending)
    plain = PLAIN.render(replace(script, line_ending="lf"), stream=True)
    ended = PLAIN.render(script, stream=True)
    assert [f.data.replace(raw, b"\n") for f in ended.frames] == [f.data for f in plain.frames]
    assert all(b"\n" not in f.data.replace(b"\r\n", b"") for f in ended.frames)
    assert [replace(f, data=b"") for f in ended.frames] == [
        replace(f, data=b"") for f in plain.frames
    ]


def test_multiline_data_applies_to_sse_dialects_only() -> None:
    script = Script(pieces=(Text("a"),), multiline_data=True)
    frames = PLAIN.render(script, stream=True).frames
    assert frames[0].data.count(b"data: ") == 2
    assert _joined_data(frames[0].data) == {"i": 0, "p": "Text(text='a')"}
    ollama = get_dialect("ollama-chat")  # NDJSON: one JSON document per line, unsplit
    assert all(f.data.count(b"\n") == 1 for f in ollama.render(script, stream=True).frames)


def test_provider_error_is_written_before_the_finish_frame_and_ends_the_body() -> None:
    script = Script(
        pieces=(Text("a"), Text("b")),
        fault=Fault("provider_error", at=99, status=529, code="overloaded"),
    )
    rendered = PLAIN.render(script, stream=True)
    actions = plan(rendered, script, PLAIN)
    assert all(isinstance(a, Write) for a in actions)
    written = b"".join(a.data for a in actions if isinstance(a, Write))
    assert written.endswith(b'data: {"error": {"code": "overloaded"}}\n\n')
    assert b"finish" not in written and b"[DONE]" not in written  # clamped to the finish
    assert b'"i": 1' in written
    exp = expect(script, rendered, streamed=True)
    assert not exp.succeeds and exp.ending == "provider_error"
    assert exp.pieces == (0, 1)
    assert exp.error_types == frozenset({"OverloadedError"})
    custom = expect(
        script, rendered, streamed=True, in_stream_error_types=frozenset({"StreamError"})
    )
    assert custom.error_types == frozenset({"StreamError"})


def test_provider_error_needs_a_dialect_with_an_error_frame() -> None:
    script = Script(fault=Fault("provider_error"))
    dialect = _NoErrors()
    with pytest.raises(ValueError, match="no in-stream error frame"):
        plan(dialect.render(script, stream=True), script, dialect)


def test_error_answer_turns_a_whole_body_provider_error_into_a_status() -> None:
    status = Script(fault=Fault("status", status=429, retry_after=3))
    assert error_answer(status, stream=True) == status.fault
    in_band = Script(fault=Fault("provider_error", status=503, code="overloaded"))
    assert error_answer(in_band, stream=True) is None
    answered = error_answer(in_band, stream=False)
    assert answered is not None and answered.kind == "status" and answered.status == 503
    assert error_answer(Script(fault=Fault("disconnect")), stream=False) is None
    assert error_answer(Script(), stream=True) is None


def test_running_usage_counts_decide_what_a_cut_must_flush() -> None:
    script = Script(
        pieces=(Text("a"),),
        usage=ScriptUsage(input_tokens=5, output_tokens=9),
        usage_placement="cumulative",
        fault=Fault("disconnect", at=2),
    )
    frames = (
        Frame(b"1", usage=frozenset({"input_tokens", "output_tokens"}),
              usage_values=(("output_tokens", 1),)),
        Frame(b"2", pieces=(0,)),
        Frame(b"3", usage=frozenset({"output_tokens"}), finish=True),
        Frame(b"4", sentinel=True),
    )  # fmt: skip
    rendered = Rendered(200, (), frames)
    cut = expect(script, rendered, streamed=True)
    assert cut.usage == {"input_tokens": 5, "output_tokens": 1}  # the provisional count
    whole = expect(replace(script, fault=None), rendered, streamed=True)
    assert whole.usage == {"input_tokens": 5, "output_tokens": 9}  # the final count wins


@given(cs.realistic_scripts(PLAIN))
def test_realistic_scripts_stay_inside_the_profile(script: Script) -> None:
    profile = PLAIN.profile
    assert script.usage_placement in profile.usage_placements
    assert script.usage is not None  # the profile has no `none` placement
    assert script.usage.input_tokens is not None and script.usage.output_tokens is not None
    assert script.keepalives == () and script.sentinel and script.line_ending == "lf"
    assert not script.multiline_data
    assert not any(isinstance(p, Reasoning) for p in script.pieces)
    calls = [p for p in script.pieces if isinstance(p, ToolFragment)]
    order = [p.index for p in calls]
    assert order == sorted(order)  # slot 0 first, each call's fragments together
    firsts = [p for p in calls if p.name is not None]
    assert [p.index for p in firsts] == list(range(len(firsts))) and len(firsts) <= 2
    assert all(p.id for p in firsts) and len({p.id for p in firsts}) == len(firsts)
    assert all(p.id is None and p.name is None for p in calls if p not in firsts)
    if calls:
        assert script.finish_reason == "tool_calls"
    else:
        assert script.finish_reason is not None and script.text
    fault = script.fault
    if fault is not None:
        assert fault.kind in ("disconnect", "stall", "status", "provider_error")
        if fault.kind == "status":
            assert fault.status in cs.DOCUMENTED_STATUSES
        if fault.kind == "provider_error":
            assert (fault.status, fault.code) == (529, "overloaded")


@given(cs.realistic_scripts(_NoErrors()))
def test_realistic_faults_skip_in_stream_errors_a_protocol_lacks(script: Script) -> None:
    assert script.fault is None or script.fault.kind != "provider_error"


def test_hostile_scripts_reach_every_odd_shape() -> None:
    from hypothesis import settings

    seen: set[str] = set()

    @settings(max_examples=300, database=None)
    @given(cs.hostile_scripts(PLAIN))
    def probe(script: Script) -> None:
        seen.add(script.line_ending)
        if script.multiline_data:
            seen.add("multiline")
        if script.fault is not None:
            seen.add(script.fault.kind)

    probe()
    assert {"lf", "crlf", "cr", "multiline", "malformed", "provider_error"} <= seen


def test_hostile_scripts_keep_bare_cr_to_sse_bodies() -> None:
    from hypothesis import settings

    @settings(max_examples=100, database=None)
    @given(cs.hostile_scripts("ollama-chat"))
    def probe(script: Script) -> None:
        assert script.line_ending in ("lf", "crlf")

    probe()


def test_error_info_carries_retry_after() -> None:
    error = ai.RateLimitError("slow down", retry_after=7.5, provider="p", http_status=429)
    assert error.to_info().retry_after == 7.5
    assert ai.ProviderError("x").to_info().retry_after is None
    # The spec's six-field constructor still works.
    info = ai.ErrorInfo("ProviderError", None, "generate", False, None, "d")
    assert info.retry_after is None


def test_disconnect_plan_is_unchanged_by_the_new_dialect_argument() -> None:
    script = Script(pieces=(Text("a"),), fault=Fault("disconnect", at=1))
    rendered = PLAIN.render(script, stream=True)
    assert plan(rendered, script) == plan(rendered, script, PLAIN)
    assert isinstance(plan(rendered, script)[-1], Disconnect)
