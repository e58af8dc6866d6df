"""Ollama's native chat API (`POST /api/chat`), streamed as NDJSON and whole.

The shapes follow Ollama's own server (`api/types.go`, `server/routes.go`, read at
ollama/ollama@fb30760) and the `ollama` SDK's pydantic types (`ChatResponse` validates
every line): every streamed line is `{"model", "created_at", "message": {...}, "done":
false}`; the last line is `"done": true` with `done_reason`, the token counts and the
timings, and is the protocol's sentinel; tool calls are sent whole, with their
arguments as a JSON object; errors are `{"error": "text"}`. Zero counts and durations
are left out, as Ollama's `omitempty` fields are.

Facts the `WireProfile` records, and where they come from:

- Lines are `json.Marshal` output plus `\\n` (`streamResponse`): Go's encoder escapes
  `<`, `>`, `&`, U+2028 and U+2029 as `\\u003c`, `\\u003e`, `\\u0026`, `\\u2028` and
  `\\u2029`, so none of them appears raw (a raw U+2028 would break a reader that splits
  lines the way `str.splitlines` does, as `httpx.iter_lines` under the `ollama` SDK
  does). Other non-ASCII text is raw UTF-8.
- Usage and timings ride only on the `done: true` line (`finish`); there are no cache
  or reasoning counters.
- No keep-alive or blank lines: the SDK `json.loads` every line and fails on them.
- An error after the stream started is one more line, `{"error": "text"}` — no status,
  no code (`streamResponse` writes `gin.H{"error": e}` once the body is written) — and
  the body ends. The runner's failures read "an error was encountered while running
  the model: ..." and "model runner has unexpectedly stopped, ...".
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from .._script import (
    EmbedShape,
    Fault,
    Frame,
    Piece,
    Reasoning,
    Rendered,
    Script,
    ScriptUsage,
    Text,
    ToolFragment,
)
from ._base import Dialect, EmbeddingProfile, InStreamError, WireProfile, json_bytes
from ._ids import ScriptIds

__all__ = ["OllamaDialect"]

_EPOCH = datetime(2025, 1, 1, tzinfo=UTC)
"""The earliest `created_at` a rendered response reports."""

_CREATED_AT = "2024-05-01T12:00:00.000000Z"
"""`modified_at` of the listed models."""

_CONTEXT_ERROR = "the input length exceeds the context length"
"""What Ollama says when a prompt does not fit and may not be truncated."""

_RUNNER_EOF = "an error was encountered while running the model: unexpected EOF"
"""What Ollama streams when its model runner dies mid-response (`llm/llama_server.go`)."""
_RUNNER_STOPPED = (
    "model runner has unexpectedly stopped, this may be due to resource limitations or an "
    "internal error, check ollama server logs for details"
)
"""What Ollama reports when the runner is gone (`llm/llama_server.go`)."""

_GO_ESCAPES = (
    (b"<", b"\\u003c"),
    (b">", b"\\u003e"),
    (b"&", b"\\u0026"),
    ("\u2028".encode(), b"\\u2028"),
    ("\u2029".encode(), b"\\u2029"),
)
"""What Go's `json.Marshal` escapes that Python's `json.dumps(ensure_ascii=False)` does
not. Each can appear only inside a JSON string, so replacing bytes is exact."""

# Error text markers -> the typed error the shared mapping gives a code-less message.
_TEXT_ERRORS = (
    (("context length", "context window", "context_length_exceeded"), "ContextWindowError"),
    (("content_filter", "content_policy", "safety"), "ContentFilterError"),
    (("authentication", "invalid_api_key"), "AuthenticationError"),
    (("rate_limit",), "RateLimitError"),
    (("overloaded", "server busy"), "OverloadedError"),
    (("model_not_found",), "ModelNotFoundError"),
)


def go_json(payload: Any) -> bytes:
    """Serialize `payload` as Ollama's Go server does (`json.Marshal`).

    Compact, raw UTF-8, with `<`, `>`, `&`, U+2028 and U+2029 escaped. Numbers keep
    Python's spelling (`1.0` where Go writes `1`): the same values.
    """
    out = json_bytes(payload)
    for raw, escaped in _GO_ESCAPES:
        if raw in out:
            out = out.replace(raw, escaped)
    return out


class OllamaDialect(Dialect):
    """The Ollama native chat protocol.

    Text pieces become `message.content`, reasoning pieces `message.thinking`. Ollama
    sends tool calls whole, so a slot's fragments are joined into one call, sent in one
    line once the slot and every lower slot are complete (calls go out in slot order,
    as Ollama numbers them); the line carries all of the slot's fragments. The joined
    arguments are sent as a JSON object, or verbatim as a string when they do not
    parse to one (a value Ollama itself could not send). A call's `id` is the script's
    (Ollama sends `call_` ids since 0.12); `function.index` is its position.

    The finish reason, usage (`prompt_eval_count`, `eval_count`) and timings
    (`total_duration`, `load_duration`, `prompt_eval_duration`, `eval_duration`, in
    nanoseconds, different for each script) all ride on the final `done: true` line,
    in Go's field order, whatever the script's usage placement; Ollama has no cache or
    reasoning counters, so those figures are never sent. A script without the
    sentinel ends before that line, so its finish reason and usage are never sent
    either. Ollama says `done_reason: "stop"` even when the model called tools: a
    `tool_calls` script with tool calls renders `stop` (the adapter maps it back), and
    one without any renders `tool_calls` verbatim. Every other reason is sent verbatim.
    `created_at` is an RFC 3339 UTC time with nanoseconds, unique to the script and
    growing line by line. Lines are encoded as Go does (`go_json`). Keep-alive frames
    are blank lines (Ollama sends none).
    """

    name = "ollama-chat"
    base_path = ""
    content_type = "application/x-ndjson"
    profile = WireProfile(
        usage_placements=("finish",),
        usage_fields=("input_tokens", "output_tokens"),
        optional_usage_fields=(),
        reasoning=True,
        keepalives=False,
        in_stream_errors=(
            InStreamError(500, None, _RUNNER_EOF),
            InStreamError(500, None, _RUNNER_STOPPED),
        ),
        line_endings=("lf",),
        text_with_tools=True,
        max_tool_calls=3,
    )
    embedding = EmbeddingProfile(
        # `/api/embed` answers `embeddings` in input order, without indices, as JSON
        # numbers; `prompt_eval_count` is on every answer of the API docs' examples.
        indexed=False,
        encodings=("float",),
        usage="always",
        dimensions=True,
        breaks=("wrong_dimensions", "missing_entry"),
    )

    # --- rendering -----------------------------------------------------------------

    def render(self, script: Script, *, stream: bool) -> Rendered:
        """Render a script as an NDJSON stream or one whole `done: true` object.

        Args:
            script: What the provider sends.
            stream: Whether to render the streamed (NDJSON) form.

        Returns:
            The rendered response.
        """
        if stream:
            return self._render_stream(script)
        return self._render_whole(script)

    def expected_finish_reason(self, script: Script) -> str | None:
        """The finish reason a faithful adapter reports for `script`, before normalizing.

        Ollama cannot say "stop" for a response that called tools (its `stop` then
        means `tool_calls`), so a script finishing `stop` with tool calls reads back as
        `tool_calls`; every other script reads back as it says.

        Args:
            script: The script.

        Returns:
            The finish reason, or `None` when the script sends none.
        """
        if script.finish_reason == "stop" and _has_tool_calls(script.pieces):
            return "tool_calls"
        return script.finish_reason

    def _object(
        self, script: Script, message: dict[str, Any], *, done: bool, created_at: str
    ) -> dict[str, Any]:
        return {
            "model": script.model,
            "created_at": created_at,
            "message": {"role": "assistant", **message},
            "done": done,
        }

    @staticmethod
    def _line(payload: Any) -> bytes:
        return go_json(payload) + b"\n"

    def _final(
        self, script: Script, message: dict[str, Any], clock: _Clock
    ) -> tuple[dict[str, Any], Frame]:
        """The `done: true` object and the frame metadata it carries (data left empty)."""
        payload = self._object(script, message, done=True, created_at=clock.next())
        reason = _wire_finish(script)
        if reason is not None:
            payload["done_reason"] = reason
        counts: dict[str, int] = {}
        fields: frozenset[str] = frozenset()
        if script.usage is not None and script.usage_placement != "none":
            counts, fields = _usage_json(script.usage)
        # Go's field order (api.Metrics): durations and counts interleaved.
        durations = clock.durations()
        for key in (
            "total_duration",
            "load_duration",
            "prompt_eval_count",
            "prompt_eval_duration",
            "eval_count",
            "eval_duration",
        ):
            value = counts.get(key, durations.get(key))
            if value:
                payload[key] = value
        return payload, Frame(
            b"", usage=fields, finish=script.finish_reason is not None, sentinel=True
        )

    def _render_stream(self, script: Script) -> Rendered:
        clock = _Clock(script)
        frames: list[Frame] = []
        for message, pieces in _stream_messages(script.pieces):
            payload = self._object(script, message, done=False, created_at=clock.next())
            frames.append(Frame(self._line(payload), pieces=pieces))
        if script.sentinel:
            payload, meta = self._final(script, {"content": ""}, clock)
            frames.append(
                Frame(self._line(payload), usage=meta.usage, finish=meta.finish, sentinel=True)
            )
        return Rendered(
            200,
            (("content-type", self.content_type),),
            self.finish_frames(frames, script),
            malformed=self.malformed_frame(),
        )

    def _render_whole(self, script: Script) -> Rendered:
        message: dict[str, Any] = {"content": script.text}
        if script.reasoning:
            message["thinking"] = script.reasoning
        calls = [call for call, _ in _whole_calls(script.pieces)]
        if calls:
            message["tool_calls"] = calls
        payload, meta = self._final(script, message, _Clock(script))
        frame = Frame(
            go_json(payload),
            pieces=tuple(range(len(script.pieces))),
            usage=meta.usage,
            finish=meta.finish,
            sentinel=True,
        )
        return Rendered(
            200,
            (("content-type", "application/json; charset=utf-8"),),
            (frame,),
            malformed=self.malformed_body(),
        )

    def render_error(self, fault: Fault) -> Rendered:
        """Render `{"error": "text"}` with `fault.status`.

        Ollama's errors have no code field: a `context_length_exceeded` code becomes
        Ollama's own context-overflow text, any other code prefixes the message
        (`"code: message"`).

        Args:
            fault: The `status` fault.

        Returns:
            The error response, with `Retry-After` when `fault.retry_after` is set.
        """
        headers: list[tuple[str, str]] = [("content-type", "application/json; charset=utf-8")]
        if fault.retry_after is not None:
            headers.append(("retry-after", f"{fault.retry_after:g}"))
        body = go_json({"error": _error_text(fault)})
        return Rendered(fault.status, tuple(headers), (Frame(body),))

    def error_frame(self, fault: Fault) -> bytes | None:
        """Ollama's error inside a 200 stream: one more line, `{"error": "text"}`.

        No status and no code travel with it (the text is `render_error`'s).

        Args:
            fault: The `provider_error` fault.

        Returns:
            The line's bytes.
        """
        return go_json({"error": _error_text(fault)}) + b"\n"

    def in_stream_error_types(self, fault: Fault) -> frozenset[str] | None:
        """What a faithful adapter raises for the code-less error line: a
        `ProviderError`, or the more specific error the text itself names.

        Args:
            fault: The `provider_error` fault.

        Returns:
            Acceptable error class names.
        """
        text = _error_text(fault).lower()
        named = {name for markers, name in _TEXT_ERRORS if any(m in text for m in markers)}
        if "model" in text and "not found" in text:  # "model 'x' not found"
            named.add("ModelNotFoundError")
        return frozenset(named or {"ProviderError"})

    def malformed_frame(self) -> bytes:
        """An NDJSON line that is not JSON."""
        return b"{not json\n"

    def keepalive_frame(self) -> bytes:
        """A blank line (NDJSON readers skip it)."""
        return b"\n"

    # --- routing -------------------------------------------------------------------

    def is_generation(self, method: str, path: str) -> bool:
        """`POST …/api/chat`."""
        return method == "POST" and path.rstrip("/").endswith("/api/chat")

    def is_models(self, method: str, path: str) -> bool:
        """`GET …/api/tags`."""
        return method == "GET" and path.rstrip("/").endswith("/api/tags")

    def is_embedding(self, method: str, path: str) -> bool:
        """`POST …/api/embed` (see `dialects._embeddings`)."""
        return method == "POST" and path.rstrip("/").endswith("/api/embed")

    def embedding_fault(self, request_json: Any) -> Fault | None:
        """Ollama's 400 for an `/api/embed` input it cannot read."""
        from ._embeddings import ollama_embed_fault

        return ollama_embed_fault(request_json)

    def embedding_inputs(self, request_json: Any) -> list[str] | None:
        """The body's `input` (one string or a list of them)."""
        from ._embeddings import embedding_texts

        return embedding_texts(request_json)

    def read_embedding_answer(self, payload: Any) -> tuple[list[list[float]], int | None] | None:
        """`read_ollama_embeddings` (see `dialects._embeddings`)."""
        from ._embeddings import read_ollama_embeddings

        return read_ollama_embeddings(payload)

    def render_embedding_answer(
        self, path: str, request_json: Any, shape: EmbedShape | None
    ) -> Rendered:
        """Ollama's `/api/embed` answer, shaped by `shape` (in input order: its entries
        carry no index), encoded as Go encodes it."""
        from ._embeddings import ollama_embed_payload, rendered_json

        body = go_json(ollama_embed_payload(request_json, shape))
        return rendered_json(body, "application/json; charset=utf-8", self.malformed_body())

    def wants_stream(self, request_json: Any) -> bool:
        """Ollama streams unless the body says `"stream": false`."""
        return not (isinstance(request_json, dict) and request_json.get("stream") is False)

    def models_response(self, models: Sequence[str]) -> Rendered:
        """`GET /api/tags`: `{"models": [{"name", "model", "details", ...}]}`.

        Args:
            models: Model names to list.

        Returns:
            A 200 response.
        """
        payload = {"models": [_tag_entry(m) for m in models]}
        return Rendered(
            200,
            (("content-type", "application/json; charset=utf-8"),),
            (Frame(json_bytes(payload), sentinel=True),),
        )

    def is_show(self, method: str, path: str) -> bool:
        """`POST …/api/show` (the fake servers do not route it; a test transport may)."""
        return method == "POST" and path.rstrip("/").endswith("/api/show")

    def show_response(
        self,
        model: str,
        *,
        context_length: int = 32768,
        capabilities: Sequence[str] = ("completion", "tools"),
        architecture: str = "fakearch",
        parameters: str = "",
    ) -> Rendered:
        """The answer to `POST /api/show {"model": model}`.

        Args:
            model: The model name.
            context_length: Reported as `model_info["<architecture>.context_length"]`.
            capabilities: Ollama capability names (`completion`, `tools`, `vision`,
                `thinking`, ...).
            architecture: `model_info["general.architecture"]`.
            parameters: Modelfile-style parameter lines (e.g. `"num_ctx 8192"`).

        Returns:
            A 200 response.
        """
        payload: dict[str, Any] = {
            "parameters": parameters,
            "details": _tag_entry(model)["details"],
            "model_info": {
                "general.architecture": architecture,
                f"{architecture}.context_length": context_length,
            },
            "capabilities": list(capabilities),
            "modified_at": _CREATED_AT,
        }
        return Rendered(
            200,
            (("content-type", "application/json; charset=utf-8"),),
            (Frame(json_bytes(payload), sentinel=True),),
        )


# --- helpers -------------------------------------------------------------------------


class _Clock:
    """`created_at` times and server timings for one rendered response, fixed by its
    script: a start time after `_EPOCH`, then a few milliseconds per line."""

    __slots__ = ("_ids", "_ns", "_step")

    def __init__(self, script: Script) -> None:
        self._ids = ScriptIds(script, "ollama-chat")
        self._ns = self._ids.number("created_at", 0, 500 * 86_400 * 10**9)
        self._step = self._ids.number("line_step", 4_000_000, 60_000_000)

    def next(self) -> str:
        """The next line's `created_at`, as Go's `time.RFC3339Nano` writes UTC."""
        seconds, fraction = divmod(self._ns, 10**9)
        self._ns += self._step + self._ids.number(f"jitter{self._ns}", 0, 999_999)
        stamp = (_EPOCH + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%S")
        if fraction:
            stamp += "." + f"{fraction:09d}".rstrip("0")
        return stamp + "Z"

    def durations(self) -> dict[str, int]:
        """`load_duration`, `prompt_eval_duration`, `eval_duration` and their
        `total_duration`, in nanoseconds."""
        load = self._ids.number("load_duration", 15_000_000, 3_000_000_000)
        prompt = self._ids.number("prompt_eval_duration", 2_000_000, 900_000_000)
        decode = self._ids.number("eval_duration", 20_000_000, 9_000_000_000)
        overhead = self._ids.number("overhead", 500_000, 30_000_000)
        return {
            "total_duration": load + prompt + decode + overhead,
            "load_duration": load,
            "prompt_eval_duration": prompt,
            "eval_duration": decode,
        }


def _error_text(fault: Fault) -> str:
    """Ollama's text for a fault's error (it has no code field)."""
    if fault.code and "context_length_exceeded" in fault.code:
        return _CONTEXT_ERROR
    if fault.code:
        return f"{fault.code}: {fault.message}"
    return fault.message


def _has_tool_calls(pieces: Sequence[Piece]) -> bool:
    return any(isinstance(p, ToolFragment) for p in pieces)


def _wire_finish(script: Script) -> str | None:
    reason = script.finish_reason
    if reason == "tool_calls" and _has_tool_calls(script.pieces):
        return "stop"
    return reason


def _tool_call_json(fragments: Sequence[ToolFragment], number: int) -> dict[str, Any]:
    """One whole Ollama tool call from a slot's fragments; `number` is its wire index."""
    call_id = next((f.id for f in fragments if f.id is not None), None)
    name = next((f.name for f in fragments if f.name is not None), None)
    text = "".join(f.arguments for f in fragments)
    arguments: Any
    if not text.strip():
        arguments = {}
    else:
        try:
            parsed = json.loads(text)
        except ValueError:
            parsed = None
        arguments = parsed if isinstance(parsed, dict) else text
    call: dict[str, Any] = {}
    if call_id is not None:
        call["id"] = call_id
    call["function"] = {"index": number, "name": name or "", "arguments": arguments}
    return call


def _slots(pieces: Sequence[Piece]) -> dict[int, list[int]]:
    """Piece indices of each tool-call slot's fragments, in wire order."""
    slots: dict[int, list[int]] = {}
    for i, piece in enumerate(pieces):
        if isinstance(piece, ToolFragment):
            slots.setdefault(piece.index, []).append(i)
    return slots


def _whole_calls(pieces: Sequence[Piece]) -> list[tuple[dict[str, Any], tuple[int, ...]]]:
    """Every slot's whole call, in slot order, with the piece indices it carries."""
    slots = _slots(pieces)
    out = []
    for number, index in enumerate(sorted(slots)):
        members = slots[index]
        frags = [p for i in members if isinstance(p := pieces[i], ToolFragment)]
        out.append((_tool_call_json(frags, number), tuple(members)))
    return out


def _stream_messages(
    pieces: Sequence[Piece],
) -> list[tuple[dict[str, Any], tuple[int, ...]]]:
    """The streamed lines' `message` objects and the piece indices each carries.

    Text and reasoning go out where they stand; a tool call goes out right after the
    last fragment of its slot, held back until every lower slot has gone out.
    """
    slots = _slots(pieces)
    order = sorted(slots)
    last = {index: members[-1] for index, members in slots.items()}
    calls = dict(zip(order, _whole_calls(pieces), strict=True))
    done: set[int] = set()
    next_slot = 0
    out: list[tuple[dict[str, Any], tuple[int, ...]]] = []
    for i, piece in enumerate(pieces):
        if isinstance(piece, Text):
            out.append(({"content": piece.text}, (i,)))
        elif isinstance(piece, Reasoning):
            out.append(({"content": "", "thinking": piece.text}, (i,)))
        elif last[piece.index] == i:
            done.add(piece.index)
            while next_slot < len(order) and order[next_slot] in done:
                call, members = calls[order[next_slot]]
                out.append(({"content": "", "tool_calls": [call]}, members))
                next_slot += 1
    return out


def _usage_json(usage: ScriptUsage) -> tuple[dict[str, int], frozenset[str]]:
    """Ollama's counters for `usage` (zeros left out), and the neutral fields sent."""
    out: dict[str, int] = {}
    fields: set[str] = set()
    if usage.input_tokens:
        out["prompt_eval_count"] = usage.input_tokens
        fields.add("input_tokens")
    if usage.output_tokens:
        out["eval_count"] = usage.output_tokens
        fields.add("output_tokens")
    return out, frozenset(fields)


def _tag_entry(model: str) -> dict[str, Any]:
    return {
        "name": model,
        "model": model,
        "modified_at": _CREATED_AT,
        "size": 1_000_000_000,
        "digest": "0" * 64,
        "details": {
            "parent_model": "",
            "format": "gguf",
            "family": "fakearch",
            "families": ["fakearch"],
            "parameter_size": "1B",
            "quantization_level": "Q4_K_M",
        },
    }
