"""The OpenAI-protocol dialects produce the frames real servers sent, field for field.

For every real recording of a protocol (the shared `wire` folder beside the repository,
read with `tests/wire.py`; for llama.cpp, the live recordings under `cassettes/llama.cpp`)
the recording is read back into a comparable script — the same text, reasoning and
tool-call fragments, finish reason and usage — and the dialect renders it. Then:

- **event kinds**: the rendered sequence of frame kinds (a chat chunk's role, content,
  finish and usage-only chunks and `[DONE]`; a Responses event's `type`, with the item
  type for `output_item` events) is the recorded one, wherever the script can say
  everything the recording said;
- **key paths**: every field path a rendered frame has (`choices[].delta.content`,
  `usage.prompt_tokens_details.cached_tokens`, ...) was seen in a real frame of that kind
  from the same provider, and every path all real frames of that kind share is there;
- **headers**: the content type is the recorded one, and every header the dialect sends
  was recorded from that provider.

A few differences are allowed and say why (`REQUEST_DEPENDENT`, `SDK_TYPED`): fields a
server adds only when a request asks for them, and fields the official SDK's types
require that postdate the recordings. Skipped, with the reason, when no recordings are
found.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from wire import REPO_ROOT, Interaction, find_wire_dir, interactions, load_cassette, sse_frames

from anyinfer.fakeservers import (
    Piece,
    Reasoning,
    Rendered,
    Script,
    ScriptUsage,
    Text,
    ToolFragment,
    get_dialect,
)

_WIRE_DIR, _WIRE_WHY = find_wire_dir()
LLAMA_CASSETTES = REPO_ROOT / "cassettes" / "llama.cpp"

# Transfer headers describe the recorded transfer, not the body; the fake server frames
# bodies itself.
_TRANSFER = frozenset({"content-length", "transfer-encoding", "connection", "keep-alive"})

REQUEST_DEPENDENT: dict[str, frozenset[str]] = {
    # Every recorded reasoning item was asked for `include: ["reasoning.encrypted_content"]`
    # (see the request bodies); AnyInfer does not ask, and OpenAI then sends none.
    # The responses echo the request's `tools`; a request without tools gets `[]`.
    "openai-responses": frozenset({"encrypted_content", "item.encrypted_content", "tools[].type"}),
}
"""Paths every recording has only because every recorded request asked for them."""

SDK_TYPED: dict[str, frozenset[str]] = {
    # `ResponseUsage.input_tokens_details.cache_write_tokens` is a required field of the
    # official SDK's types; the recordings predate it.
    "openai-responses": frozenset(
        {
            "response.usage.input_tokens_details.cache_write_tokens",
            "usage.input_tokens_details.cache_write_tokens",
        }
    ),
}
"""Paths the official SDK's types require that the (older) recordings lack."""


# --- the recordings ---------------------------------------------------------------------------


def _host(item: Interaction) -> str:
    return item.request.url.host or ""


def _first_json(item: Interaction) -> Any:
    if item.request.wants_stream:
        for frame in sse_frames(item.response.body):
            if frame.data.strip() != "[DONE]":
                return json.loads(frame.data)
        return None
    return item.response.json


def _is_openai_chat(item: Interaction) -> bool:
    # The simonw/llm "tool streaming" variants went through OpenRouter despite their
    # api.openai.com URI: their ids are `gen-…`.
    first = _first_json(item)
    return (
        _host(item) == "api.openai.com"
        and isinstance(first, dict)
        and str(first.get("id", "")).startswith("chatcmpl-")
    )


@cache
def _recordings(dialect: str) -> tuple[Interaction, ...]:
    """The successful real recordings of one dialect's provider."""
    if dialect == "llama.cpp":
        found = [
            i
            for path in sorted(LLAMA_CASSETTES.rglob("*.yaml"))
            for i in load_cassette(path)
            if i.request.path.endswith("/chat/completions")
        ]
    elif _WIRE_DIR is None:
        return ()
    elif dialect == "openai-chat":
        found = interactions(_WIRE_DIR, lambda i: i.protocol == "openai_chat")
        found = [i for i in found if _is_openai_chat(i)]
    elif dialect == "azure-openai":
        found = interactions(_WIRE_DIR, lambda i: i.protocol == "openai_chat")
        found = [i for i in found if _host(i).endswith(".openai.azure.com")]
    else:
        found = interactions(_WIRE_DIR, lambda i: i.protocol == "openai_responses")
        found = [i for i in found if _host(i) == "api.openai.com"]
    return tuple(i for i in found if i.response.status == 200)


def _params(dialect: str) -> list[Any]:
    if dialect != "llama.cpp" and _WIRE_DIR is None:
        return [pytest.param(None, id="no-recordings", marks=pytest.mark.skip(reason=_WIRE_WHY))]
    items = _recordings(dialect)
    if not items:
        reason = f"no real {dialect} recordings found"
        return [pytest.param(None, id="no-recordings", marks=pytest.mark.skip(reason=reason))]
    return [pytest.param(i, id=i.id) for i in items]


# --- frames, kinds and key paths --------------------------------------------------------------


def key_paths(value: Any, prefix: str = "") -> set[str]:
    """Every field path in a JSON value; list items are `[]`."""
    out: set[str] = set()
    if isinstance(value, dict):
        for key, inner in value.items():
            path = f"{prefix}.{key}" if prefix else str(key)
            out.add(path)
            out |= key_paths(inner, path)
    elif isinstance(value, list):
        for inner in value:
            out |= key_paths(inner, prefix + "[]")
    return out


def _chat_kind(payload: Any) -> str:
    if payload == "[DONE]":
        return "[DONE]"
    if not isinstance(payload, dict) or payload.get("object") != "chat.completion.chunk":
        return "other"
    choices = payload.get("choices") or []
    if not choices:
        return "usage" if payload.get("usage") else "other"
    choice = choices[0]
    if choice.get("finish_reason"):
        return "finish"
    if "role" in (choice.get("delta") or {}):
        return "role"
    return "delta"


def _responses_kind(payload: Any) -> str:
    kind = str(payload.get("type", "?"))
    if kind.startswith("response.output_item."):
        return f"{kind}:{payload['item']['type']}"
    return kind


@dataclass(frozen=True)
class Framed:
    """One body as frames: each frame's kind and its JSON (`"[DONE]"` for the sentinel)."""

    kinds: tuple[str, ...]
    payloads: tuple[Any, ...]


def _frame(dialect: str, body: bytes, streamed: bool) -> Framed:
    if not streamed:
        payload = json.loads(body)
        kinds, payloads = [str(payload.get("object"))], [payload]
    else:
        payloads = []
        for frame in sse_frames(body):
            data = frame.data.strip()
            payloads.append("[DONE]" if data == "[DONE]" else json.loads(data))
        kind = _responses_kind if dialect == "openai-responses" else _chat_kind
        kinds = [kind(p) for p in payloads]
    if dialect == "openai-responses":
        return _items_apart(kinds, payloads)
    return Framed(tuple(kinds), tuple(payloads))


def _items_apart(kinds: list[str], payloads: list[Any]) -> Framed:
    """A `Response`'s output items as frames of their own (`item:<type>`).

    Which items a response lists depends on what the model said (a reasoning item, a
    function call), so their fields are checked per item type, not per response.
    """
    out_kinds: list[str] = []
    out: list[Any] = []
    for kind, payload in zip(kinds, payloads):
        response = payload.get("response", payload) if isinstance(payload, dict) else None
        items = response.get("output") if isinstance(response, dict) else None
        if not items:
            out_kinds.append(kind)
            out.append(payload)
            continue
        if response is payload:
            stripped: Any = {**payload, "output": []}
        else:
            stripped = {**payload, "response": {**response, "output": []}}
        out_kinds.append(kind)
        out.append(stripped)
        for item in items:
            out_kinds.append(f"item:{item['type']}")
            out.append(item)
    return Framed(tuple(out_kinds), tuple(out))


def _by_kind(framed: Iterable[Framed]) -> dict[str, list[set[str]]]:
    out: dict[str, list[set[str]]] = {}
    for f in framed:
        for kind, payload in zip(f.kinds, f.payloads):
            out.setdefault(kind, []).append(key_paths(payload))
    return out


@cache
def _real_paths(dialect: str, streamed: bool) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """Per frame kind: the union and the intersection of the real frames' key paths."""
    framed = [
        _frame(dialect, i.response.body, streamed)
        for i in _recordings(dialect)
        if i.request.wants_stream == streamed
    ]
    union: dict[str, set[str]] = {}
    shared: dict[str, set[str]] = {}
    for kind, sets in _by_kind(framed).items():
        union[kind] = set().union(*sets)
        shared[kind] = set.intersection(*sets)
    return union, shared


# --- recordings read back into scripts --------------------------------------------------------


def _chat_usage(usage: dict[str, Any]) -> ScriptUsage:
    prompt = usage.get("prompt_tokens_details") or {}
    completion = usage.get("completion_tokens_details") or {}
    return ScriptUsage(
        input_tokens=usage.get("prompt_tokens"),
        output_tokens=usage.get("completion_tokens"),
        cache_read_tokens=prompt.get("cached_tokens"),
        reasoning_tokens=completion.get("reasoning_tokens"),
    )


def chat_script(framed: Framed, streamed: bool) -> Script:
    """A chat recording as the script that says the same."""
    pieces: list[Piece] = []
    finish: str | None = None
    usage: ScriptUsage | None = None
    placement = "none"
    model = "fake-model"
    for payload in framed.payloads:
        if not isinstance(payload, dict):
            continue
        model = payload.get("model") or model
        if payload.get("usage"):
            usage = _chat_usage(payload["usage"])
            placement = "trailing" if streamed and not payload.get("choices") else "finish"
        for choice in payload.get("choices") or ():
            delta = choice.get("delta" if streamed else "message") or {}
            if delta.get("reasoning_content"):
                pieces.append(Reasoning(delta["reasoning_content"]))
            if delta.get("content"):
                pieces.append(Text(delta["content"]))
            for position, call in enumerate(delta.get("tool_calls") or ()):
                fn = call.get("function") or {}
                index = call.get("index", position)
                pieces.append(
                    ToolFragment(
                        index, fn.get("arguments") or "", id=call.get("id"), name=fn.get("name")
                    )
                )
            finish = choice.get("finish_reason") or finish
    return Script(
        pieces=tuple(pieces),
        finish_reason=finish,
        usage=usage,
        usage_placement=placement,  # type: ignore[arg-type]
        model=model,
    )


def _responses_usage(usage: dict[str, Any] | None) -> ScriptUsage | None:
    if not usage:
        return None
    inp = usage.get("input_tokens_details") or {}
    out = usage.get("output_tokens_details") or {}
    return ScriptUsage(
        input_tokens=usage.get("input_tokens"),
        output_tokens=usage.get("output_tokens"),
        cache_read_tokens=inp.get("cached_tokens"),
        cache_write_tokens=inp.get("cache_write_tokens"),
        reasoning_tokens=out.get("reasoning_tokens"),
    )


def _responses_finish(response: dict[str, Any], has_calls: bool) -> str:
    if response.get("status") == "incomplete":
        reason = (response.get("incomplete_details") or {}).get("reason")
        return "length" if reason == "max_output_tokens" else str(reason)
    return "tool_calls" if has_calls else "stop"


def _whole_pieces(output: Sequence[dict[str, Any]]) -> list[Piece]:
    pieces: list[Piece] = []
    slot = 0
    for item in output:
        if item["type"] == "reasoning":
            pieces += [Reasoning(p["text"]) for p in item.get("summary") or () if p["text"]]
        elif item["type"] == "message":
            pieces += [Text(p["text"]) for p in item["content"] if p.get("text")]
        elif item["type"] == "function_call":
            args = item.get("arguments") or ""
            pieces.append(ToolFragment(slot, args, id=item.get("call_id"), name=item.get("name")))
            slot += 1
    return pieces


def responses_script(framed: Framed, streamed: bool) -> Script:
    """A Responses recording as the script that says the same."""
    if not streamed:
        response = framed.payloads[0]
        items = [p for k, p in zip(framed.kinds, framed.payloads) if k.startswith("item:")]
        pieces = _whole_pieces(items)
    else:
        pieces = []
        slots: dict[int, tuple[int, str | None, str | None]] = {}
        started: set[int] = set()
        response = {}
        for payload in framed.payloads:
            kind = payload["type"]
            if kind == "response.output_text.delta":
                pieces.append(Text(payload["delta"]))
            elif kind == "response.reasoning_summary_text.delta":
                pieces.append(Reasoning(payload["delta"]))
            elif kind == "response.output_item.added" and payload["item"]["type"] == (
                "function_call"
            ):
                item = payload["item"]
                slots[payload["output_index"]] = (len(slots), item.get("call_id"), item["name"])
            elif kind == "response.function_call_arguments.delta":
                slot, call_id, name = slots[payload["output_index"]]
                first = slot not in started
                started.add(slot)
                pieces.append(
                    ToolFragment(
                        slot,
                        payload["delta"],
                        id=call_id if first else None,
                        name=name if first else None,
                    )
                )
            elif kind in ("response.completed", "response.incomplete"):
                response = payload["response"]
    has_calls = any(isinstance(p, ToolFragment) for p in pieces)
    return Script(
        pieces=tuple(pieces),
        finish_reason=_responses_finish(response, has_calls),
        usage=_responses_usage(response.get("usage")),
        usage_placement="finish",
        model=response.get("model") or "fake-model",
    )


def _expressible(dialect: str, framed: Framed) -> bool:
    """Whether a script can say everything the recording said, frame for frame."""
    if dialect != "openai-responses":
        chat_kinds = ("role", "delta", "finish", "usage", "[DONE]", "chat.completion")
        return all(k in chat_kinds for k in framed.kinds)
    reasoning: set[int] = set()
    summarized: set[int] = set()
    items = [p for k, p in zip(framed.kinds, framed.payloads) if k.startswith("item:")]
    if any(i["type"] not in ("message", "reasoning", "function_call") for i in items):
        return False  # hosted tools (web search) have no script pieces
    thoughts = [i for i in items if i["type"] == "reasoning"]
    if len(thoughts) > 1 or any(len(i.get("summary") or ()) != 1 for i in thoughts):
        return False  # the dialect renders one reasoning item with one summary part
    for kind, payload in zip(framed.kinds, framed.payloads):
        if kind.startswith("item:"):
            continue
        if kind.startswith("response.output_item.") and not kind.endswith(
            (":message", ":reasoning", ":function_call")
        ):
            return False  # hosted tools (web search) have no script pieces
        if kind == "response.output_item.added:reasoning":
            reasoning.add(payload["output_index"])
        if kind == "response.reasoning_summary_text.delta":
            summarized.add(payload["output_index"])
        if kind == "response.reasoning_summary_part.added" and payload["summary_index"] > 0:
            return False  # the dialect renders one summary part
    return reasoning <= summarized  # a reasoning item without summary text has no pieces


# --- the checks ---------------------------------------------------------------------------------


def _render(dialect: str, item: Interaction) -> tuple[Framed, Framed, Rendered]:
    streamed = item.request.wants_stream
    real = _frame(dialect, item.response.body, streamed)
    reader = responses_script if dialect == "openai-responses" else chat_script
    script = reader(real, streamed)
    rendered = get_dialect(dialect).render(script, stream=streamed)
    return real, _frame(dialect, rendered.body, streamed), rendered


def _check_paths(dialect: str, item: Interaction, mine: Framed) -> None:
    union, shared = _real_paths(dialect, item.request.wants_stream)
    extra = SDK_TYPED.get(dialect, frozenset())
    optional = REQUEST_DEPENDENT.get(dialect, frozenset())
    problems: list[str] = []
    for kind, payload in zip(mine.kinds, mine.payloads):
        if kind not in union:
            problems.append(f"{kind}: no real frame of this kind")
            continue
        paths = key_paths(payload)
        unseen = sorted(paths - union[kind] - extra)
        missing = sorted(shared[kind] - paths - optional)
        if unseen:
            problems.append(f"{kind}: never seen in a real frame: {unseen}")
        if missing:
            problems.append(f"{kind}: every real frame has {missing}")
    assert not problems, "\n".join(dict.fromkeys(problems))


def _check_headers(dialect: str, item: Interaction, rendered: Rendered) -> None:
    mine = dict(rendered.headers)
    recorded = item.response.headers.get("content-type", ())
    assert mine["content-type"] == (recorded[0] if recorded else None)
    seen = {
        name
        for i in _recordings(dialect)
        if i.request.wants_stream == item.request.wants_stream
        for name in i.response.headers
    }
    assert set(mine) - _TRANSFER <= seen, f"headers never recorded: {set(mine) - seen}"


DIALECTS = ("openai-chat", "azure-openai", "llama.cpp", "openai-responses")


@pytest.mark.parametrize(
    ("dialect", "item"),
    [
        pytest.param(d, p.values[0], id=f"{d}:{p.id}", marks=p.marks)
        for d in DIALECTS
        for p in _params(d)
    ],
)
def test_dialect_renders_the_recorded_shape(dialect: str, item: Interaction | None) -> None:
    assert item is not None
    real, mine, rendered = _render(dialect, item)
    _check_headers(dialect, item, rendered)
    _check_paths(dialect, item, mine)
    if _expressible(dialect, real):
        # Chat: a moderation request's extra chunk is the request's doing.
        assert mine.kinds == tuple(k for k in real.kinds if k != "other")
    else:
        assert set(mine.kinds) <= set(real.kinds)


def test_every_openai_dialect_has_a_real_recording() -> None:
    """The recordings the shape checks rely on are where this module looks."""
    if _WIRE_DIR is None:
        pytest.skip(_WIRE_WHY)
    for dialect in DIALECTS:
        assert _recordings(dialect), f"no real recording for {dialect}"
    streamed = {d: any(i.request.wants_stream for i in _recordings(d)) for d in DIALECTS}
    assert streamed == {
        "openai-chat": True,
        "azure-openai": False,  # Azure is recorded whole only
        "llama.cpp": True,
        "openai-responses": True,
    }
    assert Path(LLAMA_CASSETTES).is_dir()
