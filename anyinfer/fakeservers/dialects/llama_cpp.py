"""llama.cpp's `llama-server`, OpenAI-compatible side (`POST …/v1/chat/completions`).

The wire is OpenAI Chat Completions with llama.cpp's own habits, taken from the server's
source (`tools/server`: `server-task.cpp`, `server-common.cpp`, `server-context.cpp`):
chunks carry a per-response `id` (`chatcmpl-` and 32 characters, `gen_chatcmplid`), the
server's `system_fingerprint` (`b<build>-<commit>`) and never a `"usage": null`
placeholder; choices have no `logprobs` unless asked for; the first delta is
`{"role": "assistant", "content": null}`; reasoning streams as
`delta.reasoning_content`; a tool call's first entry carries its id, name and the
argument text generated so far; a `timings` object (`cache_n`, `prompt_n`, `prompt_ms`,
`predicted_n`, `predicted_ms`, ...) rides on the last chunk before `[DONE]`; and usage
is sent only when asked for. An error after streaming began is
`data: {"error": {"code": <status>, "message", "type"}}` (`format_oai_sse`), and the
stream ends there, without `[DONE]`.

Usage placements map to what real builds do:

- `trailing`: `stream_options.include_usage` honoured - a usage-only chunk with
  `"choices": []` after the finish chunk, carrying `timings` too;
- `finish`: older builds - usage and `timings` inside the finish chunk;
- `split`: current builds without `include_usage` - no usage object at all, only
  `timings` on the finish chunk, from which a client reads the counts (`prompt_n +
  cache_n` prompt tokens, `predicted_n` output tokens, `cache_n` served from cache);
- `cumulative`: as `finish` (llama.cpp sends no running counts);
- `none`: neither usage nor `timings`.

llama.cpp's usage object has only `prompt_tokens`, `completion_tokens` and
`total_tokens`; cache reads travel as `timings.cache_n`; reasoning and cache-write
figures are never sent, so frames do not claim them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._script import Fault, Frame, Rendered, Script, ScriptUsage, Text, ToolFragment
from ._base import InStreamError, WireProfile, json_bytes
from ._ids import ScriptIds
from .openai_chat import OpenAIChatDialect, _joined_tool_calls, _tool_call_delta

__all__ = ["LlamaCppDialect"]

_CREATED = 1_700_000_000
# The live recordings under cassettes/llama.cpp show these headers.
_STREAM_HEADERS = (
    ("server", "llama.cpp"),
    ("x-accel-buffering", "no"),
    ("content-type", "text/event-stream"),
)
_JSON_HEADERS = (("server", "llama.cpp"), ("content-type", "application/json; charset=utf-8"))
_FINGERPRINT = "b6502-e1c4b73f"
"""One server build reports one fingerprint, whatever the request."""
# Fixed, plausible durations: the point is that they reach `timing.phases`.
PROMPT_MS = 12.5
"""The `timings.prompt_ms` every rendered response reports."""
PREDICTED_MS = 40.25
"""The `timings.predicted_ms` every rendered response reports."""

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    501: "not_supported_error",
    503: "unavailable_error",
}


class LlamaCppDialect(OpenAIChatDialect):
    """llama.cpp server's OpenAI-compatible chat endpoint.

    Errors are `{"error": {"code": <status>, "message": ..., "type": ...}}`; a
    `context_length_exceeded` fault renders as llama.cpp's own
    `exceed_context_size_error`. Model listings carry llama.cpp's `meta` object
    (`n_ctx_train` and friends).
    """

    name = "llama.cpp"
    checks_content_parts = False  # its content-part schema is not OpenAI's, unverified
    base_path = "/v1"
    profile = WireProfile(
        # `include_usage` honoured (AnyInfer asks for it), older builds' usage in the
        # finish chunk, and current builds' `timings`-only finish chunk (see above).
        usage_placements=("trailing", "finish", "split"),
        # `timings.cache_n` is always reported beside the counts.
        usage_fields=("input_tokens", "output_tokens", "cache_read_tokens"),
        reasoning=True,  # `reasoning_content`, with the default `--reasoning-format`
        keepalives=False,
        in_stream_errors=(InStreamError(500, "server_error", "scripted in-stream failure"),),
        line_endings=("lf",),
        text_with_tools=True,
        max_tool_calls=3,
    )

    def refuses(self, script: Script) -> bool:
        """Never: llama.cpp has no `refusal` field; `content_filter` is sent as it is."""
        return False

    @staticmethod
    def _choice(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        return {"finish_reason": finish_reason, "index": 0, "delta": delta}

    def _base_chunk(self, script: Script, choices: list[dict[str, Any]]) -> dict[str, Any]:
        ids = ScriptIds(script, self.name)
        return {
            "choices": choices,
            "created": ids.number("created", 1_730_000_000, 1_790_000_000),
            "id": "chatcmpl-" + ids.token("id", 32),
            "model": script.model,
            "system_fingerprint": _FINGERPRINT,
            "object": "chat.completion.chunk",
        }

    def _render_stream(self, script: Script) -> Rendered:
        frames: list[Frame] = []
        role = self._choice({"role": "assistant", "content": None})
        frames.append(Frame(self._sse(self._base_chunk(script, [role]))))
        for i, piece in enumerate(script.pieces):
            delta: dict[str, Any]
            if isinstance(piece, Text):
                delta = {"content": piece.text}
            elif isinstance(piece, ToolFragment):
                delta = {"tool_calls": [_tool_call_delta(piece)]}
            else:
                delta = {"reasoning_content": piece.text}
            chunk = self._base_chunk(script, [self._choice(delta)])
            frames.append(Frame(self._sse(chunk), pieces=(i,)))

        placement = script.usage_placement if script.usage is not None else "none"
        if placement == "cumulative":
            placement = "finish"  # llama.cpp sends no running counts
        usage_json, usage_fields = _usage_object(script.usage)
        timings, timing_fields = _timings(script.usage, derive=placement == "split")
        finish_chunk = self._base_chunk(script, [self._choice({}, script.finish_reason)])
        finish_fields: frozenset[str] = frozenset()
        if placement in ("finish", "split"):
            if placement == "finish":
                finish_chunk["usage"] = usage_json
                finish_fields = usage_fields | timing_fields
            else:
                finish_fields = timing_fields
            finish_chunk["timings"] = timings
        if script.finish_reason is not None or placement in ("finish", "split"):
            frames.append(
                Frame(
                    self._sse(finish_chunk),
                    usage=finish_fields,
                    finish=script.finish_reason is not None,
                )
            )
        if placement == "trailing":
            chunk = self._base_chunk(script, [])
            chunk["usage"] = usage_json
            chunk["timings"] = timings
            frames.append(Frame(self._sse(chunk), usage=usage_fields | timing_fields))
        if script.sentinel:
            frames.append(Frame(b"data: [DONE]\n\n", sentinel=True))
        return Rendered(
            200,
            _STREAM_HEADERS,
            self.finish_frames(frames, script),
            malformed=self.malformed_frame(),
        )

    def _render_whole(self, script: Script) -> Rendered:
        message: dict[str, Any] = {"role": "assistant", "content": script.text or None}
        if script.reasoning:
            message["reasoning_content"] = script.reasoning
        calls = _joined_tool_calls(script)
        if calls:
            message["tool_calls"] = calls
        envelope = self._base_chunk(script, [])
        payload: dict[str, Any] = {
            "choices": [{"finish_reason": script.finish_reason, "index": 0, "message": message}],
            "created": envelope["created"],
            "model": script.model,
            "system_fingerprint": _FINGERPRINT,
            "object": "chat.completion",
            "id": envelope["id"],
        }
        placement = script.usage_placement if script.usage is not None else "none"
        fields: frozenset[str] = frozenset()
        if placement != "none":
            timings, timing_fields = _timings(script.usage, derive=placement == "split")
            fields = timing_fields
            if placement != "split":
                payload["usage"], usage_fields = _usage_object(script.usage)
                fields = fields | usage_fields
            payload["timings"] = timings
        rendered = self.whole_response(
            script, payload, usage=fields, finish=script.finish_reason is not None
        )
        return Rendered(200, _JSON_HEADERS, rendered.frames, malformed=rendered.malformed)

    def render_error(self, fault: Fault) -> Rendered:
        """`{"error": {"code": status, "message", "type"}}`, llama.cpp's error shape.

        Args:
            fault: The `status` fault; its `code` becomes the error `type`.

        Returns:
            The error response, with `Retry-After` when `fault.retry_after` is set.
        """
        payload = _error_body(fault)
        headers: list[tuple[str, str]] = [("content-type", "application/json")]
        if fault.retry_after is not None:
            headers.append(("retry-after", f"{fault.retry_after:g}"))
        return Rendered(fault.status, tuple(headers), (Frame(json_bytes(payload)),))

    def error_frame(self, fault: Fault) -> bytes | None:
        """`data: {"error": {...}}` (llama.cpp's error object), ending the stream.

        Args:
            fault: The `provider_error` fault.

        Returns:
            The frame's bytes (no `[DONE]` follows).
        """
        return self._sse(_error_body(fault))

    def models_response(self, models: Sequence[str]) -> Rendered:
        """llama.cpp's `/v1/models`: OpenAI's list with a `meta` object per model.

        Args:
            models: Model names to list.

        Returns:
            A 200 response; each entry reports a loaded context `meta.n_ctx = 4096`
            and a training context `meta.n_ctx_train = 8192`.
        """
        payload = {
            "object": "list",
            "data": [
                {
                    "id": m,
                    "object": "model",
                    "created": _CREATED,
                    "owned_by": "llamacpp",
                    "meta": {
                        "vocab_type": 2,
                        "n_vocab": 49152,
                        "n_ctx": 4096,
                        "n_ctx_train": 8192,
                        "n_params": 134515008,
                        "ftype": "Q4_1",
                    },
                }
                for m in models
            ],
        }
        return Rendered(
            200,
            (("content-type", "application/json"),),
            (Frame(json_bytes(payload), sentinel=True),),
        )


def _error_body(fault: Fault) -> dict[str, Any]:
    """llama.cpp's `format_error_response` object for `fault`."""
    kind = fault.code or _ERROR_TYPES.get(fault.status, "server_error")
    message = fault.message
    if fault.code and "context_length_exceeded" in fault.code:
        kind = "exceed_context_size_error"
        message = "the request exceeds the available context size, try increasing it"
    return {"error": {"code": fault.status, "message": message, "type": kind}}


def _usage_object(usage: ScriptUsage | None) -> tuple[dict[str, Any], frozenset[str]]:
    """llama.cpp's usage object, and the neutral fields it reports.

    The three counts, and (current builds, see the live recordings)
    `prompt_tokens_details.cached_tokens`; `prompt_tokens` counts the cached tokens too.
    """
    out: dict[str, Any] = {}
    fields: set[str] = set()
    if usage is None:
        return out, frozenset()
    if usage.output_tokens is not None:
        out["completion_tokens"] = usage.output_tokens
        fields.add("output_tokens")
    if usage.input_tokens is not None:
        out["prompt_tokens"] = usage.input_tokens
        fields.add("input_tokens")
    if usage.input_tokens is not None and usage.output_tokens is not None:
        out["total_tokens"] = usage.input_tokens + usage.output_tokens
    if usage.cache_read_tokens is not None:
        out["prompt_tokens_details"] = {"cached_tokens": usage.cache_read_tokens}
        fields.add("cache_read_tokens")
    return out, frozenset(fields)


def _rates(count: int, ms: float, prefix: str) -> dict[str, float]:
    """llama.cpp's `<prefix>_per_token_ms` and `<prefix>_per_second` for one phase."""
    if count <= 0:
        return {}
    return {f"{prefix}_per_token_ms": ms / count, f"{prefix}_per_second": 1e3 / ms * count}


def _timings(usage: ScriptUsage | None, *, derive: bool) -> tuple[dict[str, Any], frozenset[str]]:
    """A `timings` object for `usage`, and the neutral fields a client reads from it.

    `cache_n` always reports cache reads. With `derive` (no usage object beside it),
    `prompt_n` and `predicted_n` are the only source of the prompt and output counts, so
    they are set to reproduce the script's figures (`prompt_n = input - cache`); a
    cache figure larger than the prompt cannot be expressed that way and is left out.
    """
    timings: dict[str, Any] = {}
    fields: set[str] = set()
    inp = usage.input_tokens if usage else None
    out = usage.output_tokens if usage else None
    cache = usage.cache_read_tokens if usage else None
    if derive and cache is not None and inp is not None and cache > inp:
        cache = None
    if cache is not None:
        timings["cache_n"] = cache
        fields.add("cache_read_tokens")
    if inp is not None:
        # prompt_n counts the tokens evaluated; the cached ones are not among them.
        timings["prompt_n"] = inp - cache if cache is not None and cache <= inp else inp
        if derive:
            fields.add("input_tokens")
    timings["prompt_ms"] = PROMPT_MS
    timings.update(_rates(timings.get("prompt_n", 0), PROMPT_MS, "prompt"))
    if out is not None:
        timings["predicted_n"] = out
        if derive:
            fields.add("output_tokens")
    timings["predicted_ms"] = PREDICTED_MS
    timings.update(_rates(out or 0, PREDICTED_MS, "predicted"))
    return timings, frozenset(fields)
