"""The conformance checker on hand-made event sequences and observations.

The core enforces the grammar itself, so no adapter can emit a content delta before
`first_token`; these tests prove the checker would still catch it (and every other
grammar break), and that its expectations follow the script and the frames delivered.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

import anyinfer as ai
from anyinfer._stream.core import USAGE_MAY_BE_INCOMPLETE
from anyinfer.conformance.checker import (
    ERROR_TYPE,
    FAILURE_FLUSH,
    G1,
    G2,
    G3,
    G4,
    GUARANTEES,
    RESULT_AGREEMENT,
    TRAILING_USAGE,
    Observation,
    Violation,
    check,
    check_concatenation,
    check_grammar,
    expect,
    format_events,
    normalize_finish,
)
from anyinfer.fakeservers import (
    Fault,
    FaultKind,
    Reasoning,
    Script,
    ScriptUsage,
    Text,
    ToolFragment,
    get_dialect,
)

TARGET = ai.ResolvedTarget("p", "m", "p")
START = ai.TimingMark("attempt_start", 0.0)
FIRST = ai.TimingMark("first_token", 1.0)
DIALECT = get_dialect("openai-chat")


def gen(
    text: str = "",
    *,
    reasoning: str = "",
    calls: Sequence[ai.ToolCall] = (),
    finish: ai.FinishReason = "stop",
    usage: ai.Usage | None = None,
    warnings: Sequence[str] = (),
) -> ai.Generation:
    return ai.Generation(
        text=text,
        structured=None,
        tool_calls=tuple(calls),
        target=TARGET,
        finish_reason=finish,
        usage=usage or ai.Usage(),
        timing=ai.Timing(0.0),
        warnings=tuple(warnings),
        reasoning=reasoning,
    )


def failed(type_name: str = "StreamError", status: int | None = None) -> ai.AttemptFailed:
    info = ai.ErrorInfo(type_name, "p", "stream", True, status, "boom")
    return ai.AttemptFailed(ai.AttemptRecord(TARGET, "failed", info))


def guarantees(found: Sequence[Violation]) -> set[str]:
    return {v.guarantee for v in found}


# --- the grammar (G1-G3) on hand-made sequences --------------------------------------


def test_well_formed_success_has_no_violations() -> None:
    result = gen("ab")
    events: list[ai.StreamEvent] = [
        START,
        ai.UsageUpdate(ai.Usage(input_tokens=3)),
        FIRST,
        ai.TextDelta("a"),
        ai.TextDelta("b"),
        ai.StreamEnded(result),
    ]
    assert check_grammar(events, succeeded=True) == []
    assert check_concatenation(events, result) == []


def test_fallback_then_success_is_well_formed() -> None:
    events: list[ai.StreamEvent] = [
        START,
        failed(),
        START,
        FIRST,
        ai.TextDelta("x"),
        ai.StreamEnded(gen("x")),
    ]
    assert check_grammar(events, succeeded=True) == []


def test_content_delta_before_first_token_breaks_g2() -> None:
    events: list[ai.StreamEvent] = [
        START,
        ai.TextDelta("a"),
        FIRST,
        ai.TextDelta("b"),
        ai.StreamEnded(gen("ab")),
    ]
    found = check_grammar(events, succeeded=True)
    assert guarantees(found) == {G2}
    assert any("has no first_token" in v.message for v in found)


def test_two_first_token_marks_break_g2() -> None:
    events: list[ai.StreamEvent] = [
        START,
        FIRST,
        ai.TextDelta("a"),
        FIRST,
        ai.TextDelta("b"),
        ai.StreamEnded(gen()),
    ]
    assert any("second first_token" in v.message for v in check_grammar(events, succeeded=True))


def test_first_token_not_right_before_content_breaks_g2() -> None:
    events: list[ai.StreamEvent] = [
        START,
        FIRST,
        ai.UsageUpdate(ai.Usage()),
        ai.TextDelta("a"),
        ai.StreamEnded(gen()),
    ]
    found = check_grammar(events, succeeded=True)
    assert guarantees(found) == {G2}
    assert "not by a content delta" in found[0].message


def test_first_token_in_a_segment_without_content_breaks_g2() -> None:
    events: list[ai.StreamEvent] = [START, FIRST, ai.StreamEnded(gen())]
    assert guarantees(check_grammar(events, succeeded=True)) == {G2}


def test_missing_attempt_start_breaks_g2() -> None:
    events: list[ai.StreamEvent] = [FIRST, ai.TextDelta("a"), ai.StreamEnded(gen("a"))]
    assert G2 in guarantees(check_grammar(events, succeeded=True))


def test_content_after_attempt_failed_without_new_segment_breaks_g2() -> None:
    events: list[ai.StreamEvent] = [START, failed(), ai.TextDelta("a")]
    assert G2 in guarantees(check_grammar(events, succeeded=False))


def test_attempt_failed_after_content_breaks_g1() -> None:
    events: list[ai.StreamEvent] = [
        START,
        FIRST,
        ai.TextDelta("a"),
        failed(),
        START,
        ai.StreamEnded(gen()),
    ]
    assert G1 in guarantees(check_grammar(events, succeeded=True))


@pytest.mark.parametrize(
    ("events", "succeeded", "needle"),
    [
        ([START, FIRST, ai.TextDelta("a")], True, "0 StreamEnded"),
        ([START, ai.StreamEnded(gen()), ai.StreamEnded(gen())], True, "2 StreamEnded"),
        ([START, ai.StreamEnded(gen()), ai.UsageUpdate(ai.Usage())], True, "is followed by"),
        ([START, ai.StreamEnded(gen())], False, "yielded StreamEnded"),
    ],
)
def test_stream_ended_placement_breaks_g3(
    events: list[ai.StreamEvent], succeeded: bool, needle: str
) -> None:
    found = check_grammar(events, succeeded=succeeded)
    assert guarantees(found) == {G3}
    assert needle in found[0].message


def test_concatenation_mismatches_break_g4() -> None:
    calls = [ai.ToolCall("call_0", "f", {"a": 1})]
    events: list[ai.StreamEvent] = [
        START,
        FIRST,
        ai.TextDelta("a"),
        ai.ReasoningDelta("r"),
        ai.ToolCallDelta(0, None, "f", '{"a": 2}'),
        ai.StreamEnded(gen("ab", reasoning="r", calls=calls)),
    ]
    found = check_concatenation(events, gen("ab", reasoning="r", calls=calls))
    assert [v.guarantee for v in found] == [G4, G4]
    assert "TextDeltas join to 'a'" in found[0].message
    assert "ToolCallDeltas" in found[1].message


def test_concatenation_uses_only_the_last_segment() -> None:
    events: list[ai.StreamEvent] = [
        START,
        FIRST,
        ai.TextDelta("old"),
        START,
        FIRST,
        ai.TextDelta("new"),
    ]
    assert check_concatenation(events, gen("new")) == []


def test_format_events_numbers_and_elides() -> None:
    events: list[ai.StreamEvent] = [START, *[ai.TextDelta(str(i)) for i in range(100)]]
    lines = format_events(events, limit=10)
    assert lines[0].endswith("TimingMark(attempt_start)")
    assert "more" in lines[5]
    assert len(lines) == 11


# --- expectations from the script and the frames ------------------------------------


def test_normalize_finish() -> None:
    assert normalize_finish("length") == "length"
    assert normalize_finish("sparkles_42") == "other"
    assert normalize_finish(None) == "stop"
    assert normalize_finish(None, sentinel=False) is None


def test_expect_a_clean_stream() -> None:
    script = Script(
        pieces=(Text("a"), ToolFragment(1, '{"x":', id=None, name="f"), ToolFragment(1, "1}")),
        finish_reason="sparkles_42",
        usage=ScriptUsage(input_tokens=3, output_tokens=2, cache_write_tokens=9),
    )
    exp = expect(script, DIALECT.render(script, stream=True), streamed=True)
    assert exp.succeeds and exp.sentinel_delivered and not exp.incomplete_warning
    assert exp.text == "a"
    assert exp.finish_reason == "other"
    # The OpenAI wire has no cache-write figure, so none is expected.
    assert exp.usage == {"input_tokens": 3, "output_tokens": 2}
    assert exp.trailing_usage == {"input_tokens", "output_tokens"}
    (call,) = exp.tool_calls
    assert (call.index, call.id, call.name, call.arguments) == (1, "call_1", "f", {"x": 1})


def test_expect_cut_after_finish_succeeds_with_warning() -> None:
    script = Script(pieces=(Text("a"),), usage=ScriptUsage(input_tokens=1), sentinel=False)
    exp = expect(script, DIALECT.render(script, stream=True), streamed=True)
    assert exp.succeeds and exp.incomplete_warning


def test_expect_cut_before_finish_fails_with_content_shown() -> None:
    script = Script(pieces=(Text("a"), Text("b")), fault=Fault("disconnect", at=2))
    exp = expect(script, DIALECT.render(script, stream=True), streamed=True)
    assert not exp.succeeds
    assert exp.error_types == {"StreamError"}
    assert exp.text == "a"  # frames 0 (role) and 1 arrived
    assert exp.content_before_failure


def test_expect_partial_frame_is_not_delivered_but_a_whole_one_is() -> None:
    script = Script(pieces=(Text("a"), Text("b")))
    frames = DIALECT.render(script, stream=True).frames
    cut = Script(pieces=script.pieces, fault=Fault("disconnect", at=2, partial_bytes=5))
    whole = Script(pieces=script.pieces, fault=Fault("disconnect", at=2, partial_bytes=10**6))
    rendered = DIALECT.render(script, stream=True)
    assert expect(cut, rendered, streamed=True).text == "a"
    assert expect(whole, rendered, streamed=True).text == "ab"
    assert len(frames[2].data) > 5


@pytest.mark.parametrize(
    ("dialect", "ending", "delivered"),
    [
        ("openai-chat", "crlf", True),  # `\r\n\r` already ends the blank line
        ("openai-chat", "lf", False),  # `\n` without the second `\n`: no blank line yet
        ("openai-chat", "cr", False),
        ("ollama-chat", "crlf", True),  # NDJSON: the CR ends the line
        ("ollama-chat", "lf", False),
        ("gemini-json-array", "lf", True),  # the element closed; a newline follows
    ],
)
def test_expect_a_cut_one_byte_short_delivers_what_the_framing_has_finished(
    dialect: str, ending: str, delivered: bool
) -> None:
    served = get_dialect(dialect)
    script = Script(pieces=(Text("a"), Text("b")), line_ending=ending)  # type: ignore[arg-type]
    rendered = served.render(script, stream=True)
    at = next(i for i, f in enumerate(rendered.frames) if 1 in f.pieces)
    short = Fault("disconnect", at=at, partial_bytes=len(rendered.frames[at].data) - 1)
    exp = expect(
        Script(pieces=script.pieces, fault=short, line_ending=ending), rendered, streamed=True
    )  # type: ignore[arg-type]
    assert exp.text == ("ab" if delivered else "a")
    # A whole body needs every byte, whatever its framing.
    whole = served.render(script, stream=False)
    cut = Fault("disconnect", at=0, partial_bytes=len(whole.frames[0].data) - 1)
    assert not expect(Script(pieces=script.pieces, fault=cut), whole, streamed=False).succeeds


def test_expect_status_fault() -> None:
    script = Script(pieces=(Text("a"),), fault=Fault("status", status=429, retry_after=2.0))
    exp = expect(script, DIALECT.render_error(script.fault), streamed=True)  # type: ignore[arg-type]
    assert not exp.succeeds
    assert exp.error_types == {"RateLimitError"}
    assert exp.http_status == 429


def test_expect_whole_body_faults_always_fail_before_content() -> None:
    kinds: tuple[FaultKind, ...] = ("disconnect", "malformed", "stall")
    for kind in kinds:
        script = Script(pieces=(Text("a"),), fault=Fault(kind, at=1))
        exp = expect(script, DIALECT.render(script, stream=False), streamed=False)
        assert not exp.succeeds and not exp.content_before_failure


# --- whole observations --------------------------------------------------------------


def _stream_events(script: Script, result: ai.Generation) -> list[ai.StreamEvent]:
    events: list[ai.StreamEvent] = [START]
    if result.text:
        events += [FIRST, ai.TextDelta(result.text)]
    events.append(ai.UsageUpdate(result.usage))
    events.append(ai.StreamEnded(result))
    return events


def test_a_faithful_observation_passes() -> None:
    script = Script(pieces=(Text("hi"),), usage=ScriptUsage(input_tokens=4, output_tokens=1))
    usage = ai.Usage(input_tokens=4, output_tokens=1, total_tokens=5)
    result = gen("hi", usage=usage)
    obs = Observation(tuple(_stream_events(script, result)), result)
    assert check(script, DIALECT.render(script, stream=True), obs, streamed=True) == []


def test_lost_trailing_usage_is_named() -> None:
    script = Script(pieces=(Text("hi"),), usage=ScriptUsage(output_tokens=7))
    result = gen("hi")
    obs = Observation(tuple(_stream_events(script, result)), result)
    found = check(script, DIALECT.render(script, stream=True), obs, streamed=True)
    assert guarantees(found) == {TRAILING_USAGE}
    assert "output_tokens=7" in found[0].message


def test_missing_incomplete_usage_warning_is_named() -> None:
    script = Script(pieces=(Text("hi"),), sentinel=False)
    result = gen("hi")
    obs = Observation(tuple(_stream_events(script, result)), result)
    found = check(script, DIALECT.render(script, stream=True), obs, streamed=True)
    assert guarantees(found) == {TRAILING_USAGE}
    warned = gen("hi", warnings=[USAGE_MAY_BE_INCOMPLETE])
    obs = Observation(tuple(_stream_events(script, warned)), warned)
    assert check(script, DIALECT.render(script, stream=True), obs, streamed=True) == []


def test_unflushed_usage_on_failure_is_named() -> None:
    script = Script(
        pieces=(Text("hi"),),
        finish_reason=None,
        usage=ScriptUsage(input_tokens=5),
        usage_placement="finish",
        sentinel=False,
    )
    events = (START, FIRST, ai.TextDelta("hi"))
    obs = Observation(events, None, ai.StreamError("cut"))
    found = check(script, DIALECT.render(script, stream=True), obs, streamed=True)
    assert guarantees(found) == {FAILURE_FLUSH}
    flushed = Observation((*events, ai.UsageUpdate(ai.Usage(input_tokens=5))), None, obs.error)
    assert check(script, DIALECT.render(script, stream=True), flushed, streamed=True) == []


def test_wrong_error_route_and_type_are_named() -> None:
    script = Script(pieces=(Text("hi"),), fault=Fault("status", status=401))
    rendered = DIALECT.render_error(script.fault)  # type: ignore[arg-type]
    # Right: AttemptFailed, then AllTargetsFailedError carrying the typed error.
    good = ai.AllTargetsFailedError(
        "all failed", attempts=[failed("AuthenticationError", 401).record]
    )
    obs = Observation((START, failed("AuthenticationError", 401)), None, good)
    assert check(script, rendered, obs, streamed=True) == []
    # Wrong type in the attempt record.
    bad = ai.AllTargetsFailedError("all failed", attempts=[failed("ProviderError", 401).record])
    obs = Observation((START, failed("ProviderError", 401)), None, bad)
    assert guarantees(check(script, rendered, obs, streamed=True)) == {ERROR_TYPE}
    # An untyped exception.
    obs = Observation((START,), None, KeyError("finish_reason"))
    found = check(script, rendered, obs, streamed=True)
    assert guarantees(found) == {ERROR_TYPE}
    assert "untyped KeyError" in found[0].message
    # Success where the status must fail.
    ok = gen()
    obs = Observation((START, ai.StreamEnded(ok)), ok)
    assert guarantees(check(script, rendered, obs, streamed=True)) == {ERROR_TYPE}


def test_result_disagreement_is_named() -> None:
    script = Script(pieces=(Reasoning("think"), Text("hi")), finish_reason="sparkles_42")
    result = gen("hi", finish="stop")
    events = (START, FIRST, ai.TextDelta("hi"), ai.StreamEnded(result))
    found = check(
        script, DIALECT.render(script, stream=True), Observation(events, result), streamed=True
    )
    assert guarantees(found) == {RESULT_AGREEMENT}
    messages = " ".join(v.message for v in found)
    assert "reasoning" in messages and "'other'" in messages


def test_violations_come_in_guarantee_order() -> None:
    script = Script(pieces=(Text("hi"),), usage=ScriptUsage(output_tokens=7))
    result = gen("no")
    events = (START, ai.TextDelta("hi"), ai.StreamEnded(result))
    found = check(
        script, DIALECT.render(script, stream=True), Observation(events, result), streamed=True
    )
    order = [GUARANTEES.index(v.guarantee) for v in found]
    assert order == sorted(order)
    assert {G2, G4, TRAILING_USAGE, RESULT_AGREEMENT} <= guarantees(found)


def test_every_documented_status_has_its_typed_error() -> None:
    """`STATUS_ERRORS` names the error for every status the taxonomy documents, and it
    is the error AnyInfer's HTTP adapters raise for that status and a plain message."""
    from anyinfer.adapters import OpenAIChatAdapter
    from anyinfer.conformance.checker import STATUS_ERRORS
    from anyinfer.conformance.strategies import DOCUMENTED_STATUSES

    assert sorted(STATUS_ERRORS) == sorted(DOCUMENTED_STATUSES)
    adapter = OpenAIChatAdapter(ai.ProviderSettings("openai", api_key="sk-test"))
    for status, name in STATUS_ERRORS.items():
        error = adapter.error_from_parts(status, "scripted failure", None)
        assert type(error).__name__ == name, status
        assert isinstance(error, getattr(ai, name)) and error.http_status == status
