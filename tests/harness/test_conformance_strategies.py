"""The exported Hypothesis strategies: what they generate and how they refuse bad options."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from anyinfer.conformance import strategies as cs
from anyinfer.conformance.runner import script_repr
from anyinfer.fakeservers import (
    Fault,
    Reasoning,
    Script,
    ScriptUsage,
    Text,
    ToolFragment,
    get_dialect,
)

DIALECT = get_dialect("openai-chat")


@given(cs.tool_calls(min_calls=2, max_calls=3))
def test_tool_calls_are_well_formed_and_interleave_in_order(
    frags: tuple[ToolFragment, ...],
) -> None:
    slots: dict[int, list[ToolFragment]] = {}
    for frag in frags:
        slots.setdefault(frag.index, []).append(frag)
    assert sorted(slots) == list(range(len(slots)))
    for index, parts in slots.items():
        first, *rest = parts
        assert first.name  # the first fragment of a slot names the tool
        assert all(p.id is None and p.name is None for p in rest)
        assert isinstance(json.loads("".join(p.arguments for p in parts)), dict), index


def test_tool_calls_do_interleave_and_omit_ids() -> None:
    seen_interleaved = seen_missing_id = False

    @settings(max_examples=200, database=None)
    @given(cs.tool_calls(min_calls=2))
    def probe(frags: tuple[ToolFragment, ...]) -> None:
        nonlocal seen_interleaved, seen_missing_id
        order = [f.index for f in frags]
        if order != sorted(order):
            seen_interleaved = True
        if any(f.id is None and f.name for f in frags):
            seen_missing_id = True

    probe()
    assert seen_interleaved and seen_missing_id


def test_text_content_reaches_multibyte_and_emoji() -> None:
    widths: set[int] = set()

    @settings(max_examples=200, database=None)
    @given(cs.text_content())
    def probe(text: str) -> None:
        assert text
        widths.update(len(ch.encode()) for ch in text)

    probe()
    assert {1, 2, 3, 4} <= widths


@given(cs.invented_finish_reasons())
def test_invented_finish_reasons_are_unknown(reason: str) -> None:
    assert reason not in {"stop", "length", "tool_calls", "content_filter", "other", "eos"}


@given(cs.scripts())
def test_scripts_render_and_repr_round_trips(script: Script) -> None:
    DIALECT.render(script, stream=True)
    DIALECT.render(script, stream=False)
    namespace = {
        "Script": Script,
        "Text": Text,
        "Reasoning": Reasoning,
        "ToolFragment": ToolFragment,
        "ScriptUsage": ScriptUsage,
        "Fault": Fault,
    }
    assert eval(script_repr(script), namespace) == script


@given(cs.flush_scripts("openai-chat"))
def test_flush_scripts_cut_after_usage_before_finish(script: Script) -> None:
    assert script.fault is not None and script.usage is not None
    frames = DIALECT.render(script, stream=True).frames
    before = frames[: script.fault.at]
    assert any(f.usage for f in before)
    assert not any(f.finish or f.sentinel for f in before)


@given(cs.cut_scripts("openai-chat", kinds=("disconnect",)))
def test_cut_scripts_cut_right_after_a_frame_that_matters(script: Script) -> None:
    assert script.fault is not None and script.fault.kind == "disconnect"
    frames = DIALECT.render(script, stream=True).frames
    at = script.fault.at
    if at:
        frame = frames[at - 1]
        assert frame.pieces or frame.finish or frame.usage
    if at < len(frames):
        assert script.fault.partial_bytes < len(frames[at].data)


@pytest.mark.parametrize(
    ("build", "needle"),
    [
        (lambda: cs.tool_calls(min_calls=3, max_calls=1), "below min_calls"),
        (lambda: cs.tool_calls(max_fragments=0), "max_fragments"),
        (lambda: cs.scripts(pieces=()), "takes a Hypothesis strategy"),  # type: ignore[arg-type]
        (lambda: cs.texts(content="hi"), "st.just"),  # type: ignore[arg-type]
        (lambda: cs.faults(kinds=()), "at least one fault kind"),
        (lambda: cs.faults(kinds=("explode",)), "unknown fault kind"),  # type: ignore[arg-type]
        (lambda: cs.finish_reasons(known=False, invented=False, missing=False), "at least one"),
        (lambda: cs.usage_placements(placements=("middle",)), "unknown usage placement"),  # type: ignore[arg-type]
        (lambda: cs.text_content(min_size=0), "min_size must be >= 1"),
        (lambda: cs.cut_scripts("no-such-dialect"), "unknown dialect"),
        (lambda: cs.flush_scripts("openai-chat", kinds=("status",)), "mid-body"),
    ],
)
def test_bad_options_raise_invalid_argument(build, needle: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InvalidArgument, match=needle):
        build()


def test_statuses_must_be_error_statuses() -> None:
    @given(cs.faults(kinds=("status",), statuses=st.just(200)))
    def draw(fault: Fault) -> None:
        raise AssertionError(f"drew {fault}")

    with pytest.raises(InvalidArgument, match="400-599"):
        draw()
