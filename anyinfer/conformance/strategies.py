"""Hypothesis strategies over provider scripts, for the conformance suite and for you.

Every strategy here builds `fakeservers` script values (`Script`, `Text`, `Reasoning`,
`ToolFragment`, `ScriptUsage`, `Fault`) out of small, independent draws, so a failing
example shrinks to a short, readable script: one text piece instead of six, no fault
instead of a stall, usage present but placement `trailing`, and so on.

Options are keyword-only. Slots that describe *content* take strategies (pass
`st.just(x)` for a fixed value); size limits and menus of kinds take plain values.
Contradictory options raise `hypothesis.errors.InvalidArgument` when the strategy is
built, not when it is drawn from.

Example::

    from hypothesis import given, strategies as st
    from anyinfer.conformance import strategies as cs

    @given(cs.scripts(fault=st.none(), pieces=cs.pieces(tool_calls=cs.tool_calls(max_calls=0))))
    def test_text_only(script): ...
"""

from __future__ import annotations

import itertools
import json
import string
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import Any, TypeVar

try:
    from hypothesis import strategies as st
    from hypothesis.errors import InvalidArgument
    from hypothesis.strategies import SearchStrategy
except ModuleNotFoundError as exc:
    if exc.name != "hypothesis":
        raise
    from anyinfer._extras import missing_hint

    raise ModuleNotFoundError(
        missing_hint("anyinfer.conformance.strategies", ["hypothesis"]), name=exc.name
    ) from None

from anyinfer.fakeservers import Dialect, Frame, WireProfile
from anyinfer.fakeservers._script import (
    Fault,
    FaultKind,
    LineEnding,
    Piece,
    Reasoning,
    Script,
    ScriptUsage,
    Text,
    ToolFragment,
    UsagePlacement,
)

__all__ = [
    "DOCUMENTED_STATUSES",
    "ERROR_STATUSES",
    "FAULT_KINDS",
    "KNOWN_FINISH_REASONS",
    "LINE_ENDINGS",
    "MULTIBYTE_SAMPLES",
    "USAGE_PLACEMENTS",
    "WORLDS",
    "cut_scripts",
    "fault_or_none",
    "flush_scripts",
    "faults",
    "hostile_scripts",
    "finish_reasons",
    "invented_finish_reasons",
    "keepalive_positions",
    "pieces",
    "read_sizes",
    "realistic_faults",
    "realistic_scripts",
    "reasonings",
    "scripts",
    "sentinels",
    "text_content",
    "texts",
    "tool_arguments",
    "tool_calls",
    "usage_placements",
    "usages",
]

T = TypeVar("T")

KNOWN_FINISH_REASONS: tuple[str, ...] = ("stop", "length", "tool_calls", "content_filter")
"""The neutral finish reasons a dialect maps to its protocol's own values."""

ERROR_STATUSES: tuple[int, ...] = (400, 401, 403, 404, 408, 429, 500, 503)
"""HTTP error statuses the default `faults()` draws from."""

FAULT_KINDS: tuple[FaultKind, ...] = ("disconnect", "malformed", "stall", "status")
"""Every fault kind a script can carry."""

USAGE_PLACEMENTS: tuple[UsagePlacement, ...] = (
    "trailing",
    "finish",
    "split",
    "cumulative",
    "none",
)
"""Every place a protocol may put usage; `trailing` first so failures shrink to it."""

MULTIBYTE_SAMPLES: tuple[str, ...] = (
    "é",
    "ß",
    "Ω",
    "中文",
    "日本語",
    "한국어",
    "🙂",
    "👩‍💻",
    "🇺🇳",
    "\U0001d518\U0001d52b\U0001d526",  # Fraktur letters: four bytes each
    "ﬁ",
    "\u00a0",
    "a\u0301",
)
"""Characters whose UTF-8 takes two, three or four bytes, including emoji built from
several code points (ZWJ sequences, flags) and a combining accent. A byte-by-byte read
split lands inside every one of them."""

_CALL_ID_ALPHABET = string.ascii_letters + string.digits
_TOOL_NAME_ALPHABET = string.ascii_lowercase + string.digits + "_"
_INVENTED_ALPHABET = string.ascii_lowercase
# Provider-specific spellings adapters legitimately map to a known reason; an invented
# reason must not collide with one of them.
_RESERVED_FINISH = frozenset(
    {
        *KNOWN_FINISH_REASONS,
        "other",
        "function_call",
        "eos",
        "end_turn",
        "max_tokens",
        "stop_sequence",
        "tool_use",
        "safety",
        "recitation",
    }
)


def _require_strategy(name: str, value: object) -> None:
    if not isinstance(value, SearchStrategy):
        raise InvalidArgument(
            f"{name}= takes a Hypothesis strategy, got {value!r}; "
            f"wrap a fixed value as st.just(...)"
        )


def _require_sizes(name: str, min_value: int, max_value: int, *, floor: int = 0) -> None:
    if isinstance(min_value, bool) or not isinstance(min_value, int):
        raise InvalidArgument(f"min_{name} must be an int, got {min_value!r}")
    if isinstance(max_value, bool) or not isinstance(max_value, int):
        raise InvalidArgument(f"max_{name} must be an int, got {max_value!r}")
    if min_value < floor:
        raise InvalidArgument(f"min_{name} must be >= {floor}, got {min_value}")
    if max_value < min_value:
        raise InvalidArgument(f"max_{name}={max_value} is below min_{name}={min_value}")


def _or(
    value: SearchStrategy[T] | None, name: str, default: Callable[[], SearchStrategy[T]]
) -> SearchStrategy[T]:
    if value is None:
        return default()
    _require_strategy(name, value)
    return value


# --- content -------------------------------------------------------------------------


def text_content(*, min_size: int = 1, max_size: int = 8) -> SearchStrategy[str]:
    """Strings for text and reasoning pieces: any encodable Unicode, biased to multibyte.

    Args:
        min_size: Fewest characters (at least 1: providers do not stream empty deltas
            as content).
        max_size: Most characters in the general branch.

    Returns:
        A strategy of non-empty strings; about a third are built from
        `MULTIBYTE_SAMPLES`, so emoji and CJK text split across reads are common.
    """
    _require_sizes("size", min_size, max_size, floor=1)
    anything = st.text(
        st.characters(codec="utf-8"),
        min_size=min_size,
        max_size=max_size,
    )
    multibyte = st.lists(
        st.sampled_from(MULTIBYTE_SAMPLES), min_size=1, max_size=max(1, max_size // 2)
    ).map("".join)
    mixed = st.tuples(
        st.text(string.ascii_letters + " ", min_size=0, max_size=4),
        st.sampled_from(MULTIBYTE_SAMPLES),
    ).map("".join)
    return st.one_of(anything, multibyte, mixed).filter(lambda s: len(s) >= min_size)


def texts(*, content: SearchStrategy[str] | None = None) -> SearchStrategy[Text]:
    """`Text` pieces.

    Args:
        content: Strategy for the piece's string; `text_content()` by default. Empty
            strings are rejected (a provider's empty delta carries no content).
    """
    content = _or(content, "content", text_content)
    return content.filter(bool).map(Text)


def reasonings(*, content: SearchStrategy[str] | None = None) -> SearchStrategy[Reasoning]:
    """`Reasoning` pieces.

    Args:
        content: Strategy for the piece's string; `text_content()` by default.
    """
    content = _or(content, "content", text_content)
    return content.filter(bool).map(Reasoning)


def _json_values() -> SearchStrategy[Any]:
    scalars = st.one_of(
        st.text(st.characters(codec="utf-8"), max_size=5),
        st.integers(-(10**9), 10**9),
        st.booleans(),
        st.none(),
        st.floats(allow_nan=False, allow_infinity=False, width=64),
    )
    return st.recursive(
        scalars,
        lambda inner: st.one_of(
            st.lists(inner, max_size=2),
            st.dictionaries(st.text(max_size=4), inner, max_size=2),
        ),
        max_leaves=3,
    )


def tool_arguments(*, max_keys: int = 2) -> SearchStrategy[dict[str, Any]]:
    """JSON objects to use as tool-call arguments (nested values, Unicode keys).

    Args:
        max_keys: Most top-level keys.
    """
    _require_sizes("keys", 0, max_keys)
    return st.dictionaries(
        st.text(st.characters(codec="utf-8"), max_size=6),
        _json_values(),
        max_size=max_keys,
    )


def _call_ids() -> SearchStrategy[str | None]:
    present = st.text(_CALL_ID_ALPHABET, min_size=1, max_size=10).map(lambda s: "call_" + s)
    return st.one_of(present, st.none())


def _tool_names() -> SearchStrategy[str]:
    return st.text(_TOOL_NAME_ALPHABET, min_size=1, max_size=12).filter(
        lambda s: s[0] in string.ascii_lowercase
    )


@st.composite
def _one_call(
    draw: st.DrawFn,
    index: int,
    names: SearchStrategy[str],
    arguments: SearchStrategy[dict[str, Any]],
    ids: SearchStrategy[str | None],
    max_fragments: int,
) -> list[ToolFragment]:
    name = draw(names)
    call_id = draw(ids)
    payload = json.dumps(draw(arguments), ensure_ascii=draw(st.booleans()))
    cuts = draw(st.lists(st.integers(0, len(payload)), max_size=max_fragments - 1, unique=True))
    bounds = [0, *sorted(cuts), len(payload)]
    texts_ = [payload[a:b] for a, b in itertools.pairwise(bounds)]
    first = ToolFragment(index, texts_[0], id=call_id, name=name)
    return [first, *(ToolFragment(index, t) for t in texts_[1:])]


@st.composite
def _interleave(draw: st.DrawFn, runs: list[list[T]]) -> list[T]:
    """Merge several sequences, keeping each one's own order; shrinks to concatenation."""
    tags = [i for i, run in enumerate(runs) for _ in run]
    order = draw(st.permutations(tags)) if len(runs) > 1 else tags
    cursors = [0] * len(runs)
    out: list[T] = []
    for tag in order:
        out.append(runs[tag][cursors[tag]])
        cursors[tag] += 1
    return out


def tool_calls(
    *,
    min_calls: int = 0,
    max_calls: int = 3,
    max_fragments: int = 3,
    names: SearchStrategy[str] | None = None,
    arguments: SearchStrategy[dict[str, Any]] | None = None,
    ids: SearchStrategy[str | None] | None = None,
) -> SearchStrategy[tuple[ToolFragment, ...]]:
    """Fragments of several parallel tool calls, interleaved.

    Calls occupy slots `0..n-1`. Each call's JSON arguments are cut into fragments at
    random character positions (so a fragment may be empty, or split an escape
    sequence's neighbourhood); the first fragment of a slot carries its `name` and its
    `id`, which is sometimes omitted so the core must synthesize `call_<index>`.
    Fragments of different calls are interleaved, each call's own order kept.

    Args:
        min_calls: Fewest calls.
        max_calls: Most calls.
        max_fragments: Most fragments per call (at least 1).
        names: Strategy for tool names (snake-case ASCII by default).
        arguments: Strategy for argument objects (`tool_arguments()` by default).
        ids: Strategy for call ids, `None` meaning "omitted" (an id or `None` by
            default).

    Returns:
        A strategy of fragment tuples, possibly empty.
    """
    _require_sizes("calls", min_calls, max_calls)
    _require_sizes("fragments", 1, max_fragments, floor=1)
    names_ = _or(names, "names", _tool_names)
    arguments_ = _or(arguments, "arguments", tool_arguments)
    ids_ = _or(ids, "ids", _call_ids)

    @st.composite
    def build(draw: st.DrawFn) -> tuple[ToolFragment, ...]:
        count = draw(st.integers(min_calls, max_calls))
        runs = [
            draw(_one_call(index, names_, arguments_, ids_, max_fragments))
            for index in range(count)
        ]
        return tuple(draw(_interleave(runs)))

    return build()


def pieces(
    *,
    text: SearchStrategy[Text] | None = None,
    reasoning: SearchStrategy[Reasoning] | None = None,
    tools: SearchStrategy[tuple[ToolFragment, ...]] | None = None,
    max_text: int = 4,
    max_reasoning: int = 2,
) -> SearchStrategy[tuple[Piece, ...]]:
    """Content pieces in wire order: reasoning, text and tool-call fragments interleaved.

    Args:
        text: Strategy for text pieces (`texts()` by default).
        reasoning: Strategy for reasoning pieces (`reasonings()` by default).
        tools: Strategy for the tool-call fragments (`tool_calls()` by default; pass
            `tool_calls(max_calls=0)` for none).
        max_text: Most text pieces.
        max_reasoning: Most reasoning pieces (0 for none).

    Returns:
        A strategy of piece tuples; shrinks towards reasoning, then text, then tool
        calls, each in order.
    """
    _require_sizes("text", 0, max_text)
    _require_sizes("reasoning", 0, max_reasoning)
    text_ = _or(text, "text", texts)
    reasoning_ = _or(reasoning, "reasoning", reasonings)
    tools_ = _or(tools, "tools", tool_calls)

    @st.composite
    def build(draw: st.DrawFn) -> tuple[Piece, ...]:
        runs: list[list[Piece]] = [
            list(draw(st.lists(reasoning_, max_size=max_reasoning))),
            list(draw(st.lists(text_, max_size=max_text))),
            list(draw(tools_)),
        ]
        return tuple(draw(_interleave([run for run in runs if run])))

    return build()


# --- ending --------------------------------------------------------------------------


def invented_finish_reasons() -> SearchStrategy[str]:
    """Finish reasons no provider uses (yet), such as `"sparkles_42"`.

    They never collide with a known reason or a provider's known spelling of one, so
    the only correct normalization is `"other"`.
    """
    built = st.builds(
        lambda word, n: f"{word}_{n}",
        st.text(_INVENTED_ALPHABET, min_size=1, max_size=8),
        st.integers(0, 999),
    )
    return st.one_of(st.just("sparkles_42"), built).filter(lambda r: r not in _RESERVED_FINISH)


def finish_reasons(
    *, known: bool = True, invented: bool = True, missing: bool = True
) -> SearchStrategy[str | None]:
    """Finish reasons as a script states them (`None`: the provider sends none).

    Args:
        known: Include the neutral reasons (`stop`, `length`, ...).
        invented: Include values no provider uses yet (must normalize to `other`).
        missing: Include `None`.

    Raises:
        InvalidArgument: If every kind is switched off.
    """
    branches: list[SearchStrategy[str | None]] = []
    if known:
        branches.append(st.sampled_from(KNOWN_FINISH_REASONS))
    if invented:
        branches.append(invented_finish_reasons())
    if missing:
        branches.append(st.none())
    if not branches:
        raise InvalidArgument("finish_reasons() needs at least one of known/invented/missing")
    return st.one_of(branches)


def usages(*, max_tokens: int = 1_000_000, none: bool = True) -> SearchStrategy[ScriptUsage | None]:
    """Usage figures, each field independently present or absent.

    Args:
        max_tokens: Largest token count.
        none: Also produce `None` (the provider reports no usage object).
    """
    _require_sizes("tokens", 0, max_tokens)
    count = st.one_of(st.integers(0, max_tokens), st.none())
    figures = st.builds(
        ScriptUsage,
        input_tokens=count,
        output_tokens=count,
        cache_read_tokens=count,
        cache_write_tokens=count,
        reasoning_tokens=count,
    )
    return st.one_of(figures, st.none()) if none else figures


def usage_placements(
    *, placements: Iterable[UsagePlacement] = USAGE_PLACEMENTS
) -> SearchStrategy[UsagePlacement]:
    """Where the wire puts usage.

    Args:
        placements: The placements to choose from.

    Raises:
        InvalidArgument: If `placements` is empty or names an unknown placement.
    """
    chosen = tuple(placements)
    if not chosen:
        raise InvalidArgument("usage_placements() needs at least one placement")
    unknown = [p for p in chosen if p not in USAGE_PLACEMENTS]
    if unknown:
        raise InvalidArgument(f"unknown usage placement(s) {unknown!r}; known: {USAGE_PLACEMENTS}")
    return st.sampled_from(chosen)


def keepalive_positions(
    *, max_count: int = 3, max_index: int = 24
) -> SearchStrategy[tuple[int, ...]]:
    """Frame indices before which a keep-alive/comment line is sent.

    Args:
        max_count: Most keep-alive lines.
        max_index: Largest frame index (dialects clamp past the end).
    """
    _require_sizes("count", 0, max_count)
    _require_sizes("index", 0, max_index)
    return st.lists(st.integers(0, max_index), max_size=max_count).map(lambda xs: tuple(sorted(xs)))


def read_sizes(*, max_size: int = 32) -> SearchStrategy[tuple[int, ...]]:
    """How the body is cut into network reads.

    Draws one read per frame (`()`), byte-by-byte reads (`(1,)`, which splits every
    multi-byte UTF-8 character), or a few small sizes (the last one repeating). Byte by
    byte costs a read per byte, so it is drawn less often than the other two.

    Args:
        max_size: Largest read size in the random branch.
    """
    _require_sizes("size", 1, max_size, floor=1)
    sizes = st.lists(st.integers(1, max_size), min_size=1, max_size=4).map(tuple)
    return st.one_of(st.just(()), sizes, st.just(()), sizes, st.just((1,)))


def sentinels() -> SearchStrategy[bool]:
    """Whether the protocol's terminal sentinel is sent; mostly yes, shrinking to yes."""
    return st.sampled_from((True, True, True, False))


def faults(
    *,
    kinds: Sequence[FaultKind] = FAULT_KINDS,
    statuses: SearchStrategy[int] | None = None,
    max_at: int = 24,
    max_partial_bytes: int = 48,
    retry_after: SearchStrategy[float | None] | None = None,
    codes: SearchStrategy[str | None] | None = None,
) -> SearchStrategy[Fault]:
    """Faults: disconnects (whole or mid-frame), malformed frames, stalls, error statuses.

    Args:
        kinds: The fault kinds to draw.
        statuses: Strategy for `status` faults' HTTP statuses (`ERROR_STATUSES` by
            default); every value must be an error status (>= 400).
        max_at: Largest frame index a fault happens before (clamped by the server).
        max_partial_bytes: Most bytes of a frame written before a disconnect.
        retry_after: Strategy for a 429's `Retry-After` seconds (`None` or a small
            number by default); other statuses send none.
        codes: Strategy for the provider error code (`None` by default).

    Raises:
        InvalidArgument: For an empty or unknown `kinds`, or bad limits.
    """
    chosen = tuple(dict.fromkeys(kinds))
    if not chosen:
        raise InvalidArgument("faults() needs at least one fault kind")
    unknown = [k for k in chosen if k not in FAULT_KINDS]
    if unknown:
        raise InvalidArgument(f"unknown fault kind(s) {unknown!r}; known: {FAULT_KINDS}")
    _require_sizes("at", 0, max_at)
    _require_sizes("partial_bytes", 0, max_partial_bytes)
    statuses_ = _or(statuses, "statuses", lambda: st.sampled_from(ERROR_STATUSES)).map(
        _check_status
    )
    retry_ = _or(
        retry_after,
        "retry_after",
        lambda: st.one_of(st.none(), st.integers(0, 120).map(float)),
    )
    codes_ = _or(codes, "codes", st.none)
    at = st.integers(0, max_at)
    branches: list[SearchStrategy[Fault]] = []
    for kind in chosen:
        if kind == "disconnect":
            branches.append(
                st.builds(
                    Fault,
                    kind=st.just("disconnect"),
                    at=at,
                    partial_bytes=st.integers(0, max_partial_bytes),
                )
            )
        elif kind == "status":
            branches.append(st.builds(_status_fault, statuses_, retry_, codes_))
        else:
            branches.append(st.builds(Fault, kind=st.just(kind), at=at))
    return st.one_of(branches)


def _check_status(status: int) -> int:
    if isinstance(status, bool) or not isinstance(status, int) or not 400 <= status <= 599:
        raise InvalidArgument(
            f"statuses= must produce HTTP error statuses (400-599), got {status!r}"
        )
    return status


def _status_fault(status: int, retry_after: float | None, code: str | None) -> Fault:
    return Fault(
        "status",
        status=status,
        retry_after=retry_after if status == 429 else None,
        code=code,
    )


def fault_or_none(*, fault: SearchStrategy[Fault] | None = None) -> SearchStrategy[Fault | None]:
    """No fault, or one drawn from `fault` (`faults()` by default); shrinks to none."""
    fault_ = _or(fault, "fault", faults)
    return st.one_of(st.none(), fault_)


# --- whole scripts -------------------------------------------------------------------


def scripts(
    *,
    pieces: SearchStrategy[tuple[Piece, ...]] | None = None,
    finish_reason: SearchStrategy[str | None] | None = None,
    usage: SearchStrategy[ScriptUsage | None] | None = None,
    usage_placement: SearchStrategy[UsagePlacement] | None = None,
    keepalives: SearchStrategy[tuple[int, ...]] | None = None,
    read_sizes: SearchStrategy[tuple[int, ...]] | None = None,
    sentinel: SearchStrategy[bool] | None = None,
    fault: SearchStrategy[Fault | None] | None = None,
    model: SearchStrategy[str] | None = None,
) -> SearchStrategy[Script]:
    """Whole provider scripts; each slot takes a strategy and defaults to the above.

    Args:
        pieces: Content pieces (`pieces()`).
        finish_reason: Finish reason (`finish_reasons()`).
        usage: Usage figures (`usages()`).
        usage_placement: Where usage goes (`usage_placements()`).
        keepalives: Keep-alive positions (`keepalive_positions()`).
        read_sizes: Network read sizes (`read_sizes()`).
        sentinel: Whether the terminal sentinel is sent (`sentinels()`).
        fault: The fault, or `None` (`fault_or_none()`; pass `st.none()` for
            fault-free scripts).
        model: The model name the provider reports (`"fake-model"`).

    Returns:
        A strategy of `Script`s.

    Raises:
        InvalidArgument: If a slot is given something other than a strategy.
    """
    return st.builds(
        Script,
        pieces=_or(pieces, "pieces", _default_pieces),
        finish_reason=_or(finish_reason, "finish_reason", finish_reasons),
        usage=_or(usage, "usage", usages),
        usage_placement=_or(usage_placement, "usage_placement", usage_placements),
        keepalives=_or(keepalives, "keepalives", keepalive_positions),
        read_sizes=_or(read_sizes, "read_sizes", _default_read_sizes),
        sentinel=_or(sentinel, "sentinel", sentinels),
        fault=_or(fault, "fault", fault_or_none),
        model=_or(model, "model", lambda: st.just("fake-model")),
    )


def _default_pieces() -> SearchStrategy[tuple[Piece, ...]]:
    return pieces()


def _default_read_sizes() -> SearchStrategy[tuple[int, ...]]:
    return read_sizes()


def _default_scripts() -> SearchStrategy[Script]:
    return scripts()


# --- cuts at the frames that matter --------------------------------------------------

_CUT_KINDS: tuple[FaultKind, ...] = ("disconnect", "stall", "malformed")


def _check_cut_kinds(kinds: Sequence[FaultKind]) -> tuple[FaultKind, ...]:
    chosen = tuple(dict.fromkeys(kinds))
    if not chosen:
        raise InvalidArgument("needs at least one fault kind")
    bad = [k for k in chosen if k not in _CUT_KINDS]
    if bad:
        raise InvalidArgument(f"cuts happen mid-body; {bad!r} not in {_CUT_KINDS}")
    return chosen


def _resolve(dialect: Dialect | str) -> Dialect:
    from anyinfer.fakeservers.dialects import resolve_dialect

    try:
        return resolve_dialect(dialect)
    except (KeyError, TypeError) as exc:
        raise InvalidArgument(str(exc)) from None


@st.composite
def _cut_at(
    draw: st.DrawFn,
    script: Script,
    frames: Sequence[Frame],
    points: Sequence[int],
    kinds: Sequence[FaultKind],
) -> Script:
    at = draw(st.sampled_from(points))
    kind = draw(st.sampled_from(kinds))
    partial = 0
    if kind == "disconnect" and at < len(frames) and len(frames[at].data) > 1:
        partial = draw(st.integers(0, len(frames[at].data) - 1))  # never the whole frame
    return replace(script, fault=Fault(kind, at=at, partial_bytes=partial))


def cut_scripts(
    dialect: Dialect | str,
    *,
    scripts: SearchStrategy[Script] | None = None,
    kinds: Sequence[FaultKind] = _CUT_KINDS,
) -> SearchStrategy[Script]:
    """Streamed scripts cut right after a frame that matters.

    Random fault positions mostly land before the first frame or past the end; these
    cut right after a content frame, the finish frame or a usage frame (as `dialect`
    renders the script), where the trailing-usage rule and failure flushing decide
    what the consumer must see.

    Args:
        dialect: The dialect (or its registered name) that will serve the scripts.
        scripts: Base scripts (`scripts()`); their own faults are replaced.
        kinds: Fault kinds to cut with.

    Raises:
        InvalidArgument: For an unknown dialect or a kind that is not a mid-body cut.
    """
    d = _resolve(dialect)
    chosen = _check_cut_kinds(kinds)
    base = _or(scripts, "scripts", _default_scripts)

    @st.composite
    def build(draw: st.DrawFn) -> Script:
        script = replace(draw(base), fault=None)
        frames = d.render(script, stream=True).frames
        points = sorted({i + 1 for i, f in enumerate(frames) if f.pieces or f.finish or f.usage})
        return draw(_cut_at(script, frames, points or [0], chosen))

    return build()


def flush_scripts(
    dialect: Dialect | str,
    *,
    scripts: SearchStrategy[Script] | None = None,
    kinds: Sequence[FaultKind] = _CUT_KINDS,
) -> SearchStrategy[Script]:
    """Streamed scripts that fail after usage arrived and before the finish reason.

    Each script reports usage, and is cut right after a frame that delivers usage while
    no finish reason has arrived yet — the case failure-path flushing is about: the
    generation fails, and every usage figure already sent must reach the consumer as
    `UsageUpdate` events before the error. When the base script's rendering has no such
    frame (the protocol sends usage with or after the finish reason), its finish
    reason is dropped so that one exists.

    Args:
        dialect: The dialect (or its registered name) that will serve the scripts.
        scripts: Base scripts (`scripts()`); usage is added when they have none.
        kinds: Fault kinds to cut with.

    Raises:
        InvalidArgument: For an unknown dialect or a kind that is not a mid-body cut.
    """
    d = _resolve(dialect)
    chosen = _check_cut_kinds(kinds)
    base = _or(scripts, "scripts", _default_scripts)
    figures = usages(none=False).filter(
        lambda u: any(getattr(u, f) is not None for f in ("input_tokens", "output_tokens"))
    )
    placements = usage_placements(placements=("trailing", "finish", "split"))

    def points_of(frames: Sequence[Frame]) -> list[int]:
        out = []
        usage_seen = False
        for i, f in enumerate(frames):
            if f.finish or f.sentinel:
                break
            usage_seen = usage_seen or bool(f.usage)
            if usage_seen:
                out.append(i + 1)
        return out

    @st.composite
    def build(draw: st.DrawFn) -> Script:
        script = replace(draw(base), fault=None)
        reported = script.usage is not None and any(
            getattr(script.usage, f) is not None for f in ("input_tokens", "output_tokens")
        )
        if not reported:
            script = replace(script, usage=draw(figures))
        if script.usage_placement == "none":
            script = replace(script, usage_placement=draw(placements))
        for candidate in (script, replace(script, finish_reason=None)):
            frames = d.render(candidate, stream=True).frames
            points = points_of(frames)
            if points:
                return draw(_cut_at(candidate, frames, points, chosen))
        frames = d.render(script, stream=True).frames
        return draw(_cut_at(script, frames, [0], chosen))

    return build()


# --- the two script worlds -----------------------------------------------------------

DOCUMENTED_STATUSES: tuple[int, ...] = (
    400,
    401,
    403,
    404,
    408,
    409,
    413,
    422,
    429,
    500,
    502,
    503,
    504,
    529,
)
"""Every HTTP error status the error taxonomy documents; the realistic world draws them."""

LINE_ENDINGS: tuple[LineEnding, ...] = ("lf", "crlf", "cr")
"""Every line terminator a streamed body may use."""

WORLDS: tuple[str, ...] = ("realistic", "hostile")
"""The two script worlds: what real providers send, and odd or malformed shapes."""


def _realistic_usage(profile: WireProfile) -> SearchStrategy[ScriptUsage]:
    count = st.integers(0, 100_000)
    fields_ = {name: count for name in profile.usage_fields}
    for name in profile.optional_usage_fields:
        fields_[name] = st.one_of(st.none(), count)
    return st.builds(ScriptUsage, **fields_)


def _sequential_calls(
    max_calls: int, max_fragments: int, id_prefix: str = "call_"
) -> SearchStrategy[tuple[ToolFragment, ...]]:
    """Tool calls as real providers stream them: slot 0 first, each call's fragments
    together, an id (starting with `id_prefix`) and a name on every call's first
    fragment."""
    # Strategies are built once here: building them inside a draw costs more than the
    # rest of an example.
    ids = st.lists(
        st.text(_CALL_ID_ALPHABET, min_size=8, max_size=24).map(lambda s: id_prefix + s),
        min_size=max_calls,
        max_size=max_calls,
        unique=True,
    )
    names = _tool_names()
    arguments = tool_arguments()
    count_ = st.integers(0, max_calls)

    @st.composite
    def build(draw: st.DrawFn) -> tuple[ToolFragment, ...]:
        count = draw(count_)
        if not count:
            return ()
        call_ids = draw(ids)
        out: list[ToolFragment] = []
        for index in range(count):
            call = _one_call(index, names, arguments, st.just(call_ids[index]), max_fragments)
            out.extend(draw(call))
        return tuple(out)

    return build()


def realistic_faults(dialect: Dialect | str) -> SearchStrategy[Fault]:
    """Faults real traffic has, in `dialect`'s own shapes.

    Every documented error status (429 with or without `Retry-After`), connections
    dropped mid-body, stalls, and the errors the provider reports inside a 200 stream
    (`WireProfile.in_stream_errors`). Malformed frames and compression bombs belong to
    the hostile world.

    Args:
        dialect: The dialect (or its registered name).
    """
    d = _resolve(dialect)
    branches: list[SearchStrategy[Fault]] = [
        faults(
            kinds=("disconnect", "stall", "status"),
            statuses=st.sampled_from(DOCUMENTED_STATUSES),
        )
    ]
    errors = d.profile.in_stream_errors
    if errors:
        branches.append(
            st.builds(
                lambda e, at: Fault(
                    "provider_error", at=at, status=e.status, code=e.code, message=e.message
                ),
                st.sampled_from(errors),
                st.integers(0, 24),
            )
        )
    return st.one_of(branches)


def realistic_scripts(
    dialect: Dialect | str,
    *,
    fault: SearchStrategy[Fault | None] | None = None,
    read_sizes: SearchStrategy[tuple[int, ...]] | None = None,
    max_text: int = 4,
    max_reasoning: int = 2,
    max_fragments: int = 3,
) -> SearchStrategy[Script]:
    """The wire-realistic world: scripts the real provider behind `dialect` could send.

    The dialect's `WireProfile` decides: usage where that provider puts it, with the
    fields it always reports; reasoning only where the protocol streams it; tool calls
    in slot order with ids and names, each call's fragments together; keep-alives only
    where the provider sends them; the sentinel always sent; the finish reason
    `tool_calls` when there are calls. Faults are `realistic_faults`. Every agreement
    property of the conformance suite draws from here.

    Args:
        dialect: The dialect (or its registered name) that will serve the scripts.
        fault: Override the fault strategy (`st.none()` for fault-free scripts).
        read_sizes: Override how bodies are cut into reads (`read_sizes()`).
        max_text: Most text pieces.
        max_reasoning: Most reasoning pieces (ignored when the protocol has none).
        max_fragments: Most argument fragments per tool call.

    Raises:
        InvalidArgument: For an unknown dialect or bad limits.
    """
    d = _resolve(dialect)
    profile = d.profile
    _require_sizes("text", 0, max_text)
    _require_sizes("reasoning", 0, max_reasoning)
    fault_ = _or(fault, "fault", lambda: st.one_of(st.none(), realistic_faults(d)))
    reads = _or(read_sizes, "read_sizes", _default_read_sizes)
    placements = profile.usage_placements
    with_usage = tuple(p for p in placements if p != "none")

    reasoning_ = st.lists(reasonings(), max_size=max_reasoning) if profile.reasoning else None
    calls_ = _sequential_calls(profile.max_tool_calls, max_fragments, profile.tool_call_id_prefix)
    text_with_calls = st.lists(texts(), max_size=max_text if profile.text_with_tools else 0)
    text_alone = st.lists(texts(), min_size=1, max_size=max(1, max_text))
    reasons = st.one_of(
        st.sampled_from(("stop", "stop", "length", "content_filter")),
        invented_finish_reasons(),
    )
    placement_ = st.sampled_from(placements)
    usage_ = _realistic_usage(profile)
    keepalives_ = keepalive_positions() if profile.keepalives else None
    endings = st.sampled_from(profile.line_endings)

    @st.composite
    def build(draw: st.DrawFn) -> Script:
        reasoning = draw(reasoning_) if reasoning_ is not None else []
        calls = draw(calls_)
        text = draw(text_with_calls if calls else text_alone)
        reason: str | None = "tool_calls" if calls else draw(reasons)
        placement = draw(placement_)
        usage = draw(usage_) if placement != "none" and with_usage else None
        return Script(
            pieces=(*reasoning, *text, *calls),
            finish_reason=reason,
            usage=usage,
            usage_placement=placement,
            keepalives=draw(keepalives_) if keepalives_ is not None else (),
            read_sizes=draw(reads),
            sentinel=True,
            fault=draw(fault_),
            line_ending=draw(endings),
        )

    return build()


def hostile_scripts(dialect: Dialect | str) -> SearchStrategy[Script]:
    """The hostile world: odd but legal, or malformed, shapes no profile promises.

    Everything `scripts()` draws (interleaved tool slots, missing ids, keep-alives
    anywhere, usage in any placement, no sentinel, no finish reason, malformed frames),
    plus `\\r\\n` and bare `\\r` line ends, `data:` payloads split over several lines,
    and in-stream errors at any point. The conformance suite checks the legal ones in
    full (they still have one right reading) and, after a malformed frame, robustness
    only (`anyinfer.conformance.checker.ROBUST`): the grammar, nothing lost, typed errors, no
    hang.

    Args:
        dialect: The dialect (or its registered name) that will serve the scripts.
    """
    d = _resolve(dialect)
    kinds: list[FaultKind] = ["disconnect", "malformed", "stall", "status"]
    base_faults: list[SearchStrategy[Fault | None]] = [
        st.none(),
        faults(kinds=kinds, statuses=st.sampled_from(DOCUMENTED_STATUSES)),
    ]
    if d.error_frame(Fault("provider_error", status=500)) is not None:
        base_faults.append(
            st.builds(
                lambda status, at: Fault("provider_error", at=at, status=status),
                st.sampled_from(DOCUMENTED_STATUSES),
                st.integers(0, 24),
            )
        )
    # A bare CR ends a line in server-sent events only; NDJSON and JSON bodies take LF
    # or CRLF.
    endings = LINE_ENDINGS if d.content_type == "text/event-stream" else ("lf", "crlf")
    return st.builds(
        lambda script, ending, multiline: replace(
            script, line_ending=ending, multiline_data=multiline
        ),
        scripts(fault=st.one_of(base_faults)),
        st.sampled_from(endings),
        st.booleans(),
    )
