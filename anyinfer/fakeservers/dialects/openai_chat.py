"""OpenAI Chat Completions (`POST …/chat/completions`), streamed and whole.

The wire shapes follow recorded OpenAI traffic (the `shared/wire` recordings beside the
repository: `test_tool_use_basic`, `test_run_stream_sync_streams_real_model`,
`test_openai_moderation_stream`, `test_openai_native_output`) and the official `openai`
SDK's types (`ChatCompletionChunk`, `ChatCompletion`):

- every streamed chunk is a `chat.completion.chunk` with a per-response `id`
  (`chatcmpl-` and 29 characters), `created`, `model`, `service_tier: "default"`, a
  `system_fingerprint` (`fp_` and 10 hex digits) and an `obfuscation` padding string;
  each choice has `index`, `delta`, `logprobs: null` and `finish_reason`;
- the first chunk carries `"role": "assistant"` with `content: ""` and `refusal: null`
  (or, when the response opens with a tool call, `content: null` and the call's first
  entry);
- a tool call opens with `{"index", "id", "type": "function", "function": {"name",
  "arguments": ""}}`; its argument text follows in entries carrying only `index` and
  `function.arguments`;
- the finish chunk has an empty delta and the `finish_reason`;
- with `stream_options.include_usage` every chunk carries `"usage": null` and a
  usage-only chunk with `"choices": []` follows the finish chunk; usage always has
  `prompt_tokens_details` and `completion_tokens_details` (with the audio and
  prediction counters OpenAI reports as 0);
- `data: [DONE]` ends the stream.

A model refusal (structured outputs) is not a finish reason on this protocol: it streams
as `delta.refusal` text (`message.refusal` in a whole response, with `content: null`)
and ends with `finish_reason: "stop"` (OpenAI's structured-outputs guide). OpenAI also
documents the `content_filter` finish reason for content its filters omitted. A script
finishing `content_filter` with text and no tool calls or reasoning renders as one or the
other, chosen by the script's own hash (`refuses`): a faithful adapter reads both back
as `content_filter` with the refusal as the answer text.

An error inside a 200 stream is OpenAI's error object as a chunk,
`data: {"error": {"message", "type", "param", "code"}}`, followed by `data: [DONE]` (the
shape reported against the live API in sashabaranov/go-openai#396; the `openai` SDK raises
`APIError` for any chunk with an `error` key).
"""

from __future__ import annotations

from typing import Any

from .._script import (
    EmbedShape,
    Fault,
    Frame,
    Rendered,
    Script,
    ScriptUsage,
    Text,
    ToolFragment,
)
from ._base import Dialect, EmbeddingProfile, InStreamError, WireProfile, json_bytes
from ._ids import HEX, ScriptIds
from ._parts import chat_part_problem

__all__ = ["OpenAIChatDialect"]

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    403: "permission_error",
    404: "invalid_request_error",
    409: "invalid_request_error",
    413: "invalid_request_error",
    422: "invalid_request_error",
    429: "rate_limit_error",
}

# What each documented status raises when the only evidence is its HTTP status (the
# error taxonomy). An in-stream error frame carries no status, so an adapter reading one
# can only be that precise when the frame's type or code says so.
_STATUS_CLASSES = {
    401: "AuthenticationError",
    403: "AuthenticationError",
    404: "ModelNotFoundError",
    408: "ProviderTimeoutError",
    429: "RateLimitError",
    503: "OverloadedError",
    529: "OverloadedError",
}

_SERVER_ERROR = "The server had an error while processing your request. Sorry about that!"

_HEADERS = (("openai-version", "2020-10-01"),)


def _retry_after_value(seconds: float) -> str:
    return f"{seconds:g}"


class OpenAIChatDialect(Dialect):
    """The OpenAI Chat Completions protocol.

    Text pieces become `delta.content` (or `delta.refusal`, see `refuses`), reasoning
    pieces `delta.reasoning_content` (the field DeepSeek and vLLM use; OpenAI itself
    streams no reasoning, so only hostile scripts carry it), tool-call fragments
    `delta.tool_calls` entries. Usage reports `prompt_tokens`, `completion_tokens`,
    `total_tokens` (when both are known), `prompt_tokens_details.cached_tokens` and
    `completion_tokens_details.reasoning_tokens`; this protocol has no cache-write
    figure, so `cache_write_tokens` is never sent.

    Usage placements: `trailing` is `include_usage` (the usage-only chunk); `finish`,
    `split` and `cumulative` put the whole usage object in the finish chunk (OpenAI
    sends no running counts); `none` sends none and no `usage: null` markers.
    """

    name = "openai-chat"
    base_path = "/v1"
    content_type = "text/event-stream"
    profile = WireProfile(
        # AnyInfer asks for `include_usage`, which OpenAI honours with the trailing
        # usage-only chunk; without it OpenAI reports no usage in a stream.
        usage_placements=("trailing", "none"),
        # OpenAI always reports the cached and reasoning counts (0 when none); see the
        # usage objects of every recording.
        usage_fields=("input_tokens", "output_tokens", "cache_read_tokens", "reasoning_tokens"),
        # OpenAI Chat streams no reasoning text (`reasoning_content` is DeepSeek's,
        # vLLM's and llama.cpp's).
        reasoning=False,
        keepalives=False,
        in_stream_errors=(InStreamError(500, "server_error", _SERVER_ERROR),),
        line_endings=("lf",),
        text_with_tools=True,
        max_tool_calls=3,
    )
    embedding = EmbeddingProfile(
        # Every `data[]` entry carries `index`, and OpenAI's rate-limit guide says a
        # response may not list results in the order of the inputs, to match them back
        # by index. `usage` is on every recorded answer; `encoding_format` picks floats
        # or base64 of little-endian float32 (the openai SDK's default).
        indexed=True,
        encodings=("float", "base64"),
        usage="always",
        dimensions=True,
        breaks=("wrong_dimensions", "missing_entry", "duplicate_index"),
    )

    # --- rendering -----------------------------------------------------------------

    def render(self, script: Script, *, stream: bool) -> Rendered:
        """Render a script as a chat-completion stream or a whole `chat.completion`.

        Args:
            script: What the provider sends.
            stream: Whether to render the streamed (SSE) form.

        Returns:
            The rendered response.
        """
        if stream:
            return self._render_stream(script)
        return self._render_whole(script)

    def refuses(self, script: Script) -> bool:
        """Whether `script` renders as a model refusal (`refusal` text, finish `stop`).

        True for about half of the scripts that finish `content_filter` with text and
        without tool calls or reasoning (the script's hash decides, so one script always
        renders the same way); the others send `finish_reason: "content_filter"`.
        """
        if script.finish_reason != "content_filter" or not script.text:
            return False
        if any(not isinstance(p, Text) for p in script.pieces):
            return False
        return ScriptIds(script, self.name).number("refusal", 0, 1) == 1

    def ids(self, script: Script) -> ScriptIds:
        """The script's id source (salted with the dialect name)."""
        return ScriptIds(script, self.name)

    def envelope(self, script: Script, ids: ScriptIds) -> dict[str, Any]:
        """The fields every chunk (and the whole response) of one response shares."""
        return {
            "id": "chatcmpl-" + ids.token("id", 29),
            "object": "chat.completion.chunk",
            "created": ids.number("created", 1_730_000_000, 1_790_000_000),
            "model": script.model,
            "service_tier": "default",
            "system_fingerprint": "fp_" + ids.token("fingerprint", 10, HEX),
        }

    def _chunk(
        self,
        script: Script,
        ids: ScriptIds,
        n: int,
        choices: list[dict[str, Any]],
        usage: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        chunk = self.envelope(script, ids)
        chunk["choices"] = choices
        if usage is not None:
            chunk["usage"] = usage
        elif script.usage is not None and script.usage_placement == "trailing":
            chunk["usage"] = None  # OpenAI marks every chunk when include_usage is on
        chunk["obfuscation"] = ids.token(f"obfuscation{n}", 1 + ids.number(f"pad{n}", 0, 14))
        return chunk

    @staticmethod
    def _choice(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        return {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}

    @staticmethod
    def _sse(payload: Any) -> bytes:
        return b"data: " + json_bytes(payload) + b"\n\n"

    def headers(self, script: Script, *, stream: bool) -> tuple[tuple[str, str], ...]:
        """The response headers: content type, then OpenAI's own."""
        kind = f"{self.content_type}; charset=utf-8" if stream else "application/json"
        ms = ScriptIds(script, self.name).number("processing-ms", 80, 900)
        return (("content-type", kind), *_HEADERS, ("openai-processing-ms", str(ms)))

    def _render_stream(self, script: Script) -> Rendered:
        ids = self.ids(script)
        refusal = self.refuses(script)
        frames: list[Frame] = []

        def add(choices: list[dict[str, Any]], **kw: Any) -> None:
            usage = kw.pop("usage_json", None)
            chunk = self._chunk(script, ids, len(frames), choices, usage)
            frames.append(Frame(self._sse(chunk), **kw))

        pieces = script.pieces
        opener: dict[str, Any] = {"role": "assistant", "content": "", "refusal": None}
        if refusal:
            opener = {"role": "assistant", "content": None, "refusal": ""}
        first = pieces[0] if pieces else None
        merge_role = (
            isinstance(first, ToolFragment)
            and (first.id is not None or first.name is not None)
            and not refusal
        )
        if not merge_role:
            add([self._choice(opener)])
        for i, piece in enumerate(pieces):
            if isinstance(piece, ToolFragment):
                header = piece.id is not None or piece.name is not None
                if header:
                    delta: dict[str, Any] = {"tool_calls": [_tool_call_header(piece)]}
                    if i == 0 and merge_role:
                        delta = {"role": "assistant", "content": None, **delta, "refusal": None}
                    add([self._choice(delta)], pieces=(i,))
                if piece.arguments or not header:
                    args = {"index": piece.index, "function": {"arguments": piece.arguments}}
                    add([self._choice({"tool_calls": [args]})], pieces=(i,))
                continue
            if isinstance(piece, Text):
                delta = {"refusal" if refusal else "content": piece.text}
            else:
                delta = {"reasoning_content": piece.text}
            add([self._choice(delta)], pieces=(i,))

        usage_json, usage_fields = _usage_json(script.usage)
        placement = script.usage_placement if script.usage is not None else "none"
        in_finish = placement in ("finish", "split", "cumulative")
        reason = script.finish_reason
        if refusal:
            reason = "stop"
        if script.finish_reason is not None or in_finish:
            add(
                [self._choice({}, reason)],
                usage_json=usage_json if in_finish else None,
                usage=usage_fields if in_finish else frozenset(),
                finish=script.finish_reason is not None,
            )
        if placement == "trailing":
            add([], usage_json=usage_json, usage=usage_fields)
        if script.sentinel:
            frames.append(Frame(b"data: [DONE]\n\n", sentinel=True))
        return Rendered(
            200,
            self.headers(script, stream=True),
            self.finish_frames(frames, script),
            malformed=self.malformed_frame(),
        )

    def _render_whole(self, script: Script) -> Rendered:
        ids = self.ids(script)
        refusal = self.refuses(script)
        message: dict[str, Any] = {
            "role": "assistant",
            "content": None if refusal else script.text or None,
            "refusal": script.text if refusal else None,
            "annotations": [],
        }
        if script.reasoning:
            message["reasoning_content"] = script.reasoning
        calls = _joined_tool_calls(script)
        if calls:
            message["tool_calls"] = calls
        envelope = self.envelope(script, ids)
        payload: dict[str, Any] = {
            "id": envelope["id"],
            "object": "chat.completion",
            "created": envelope["created"],
            "model": script.model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": "stop" if refusal else script.finish_reason,
                }
            ],
        }
        usage_fields: frozenset[str] = frozenset()
        if script.usage is not None and script.usage_placement != "none":
            payload["usage"], usage_fields = _usage_json(script.usage)
        for key in ("service_tier", "system_fingerprint"):
            if key in envelope:
                payload[key] = envelope[key]
        rendered = self.whole_response(
            script, payload, usage=usage_fields, finish=script.finish_reason is not None
        )
        return Rendered(
            rendered.status,
            self.headers(script, stream=False),
            rendered.frames,
            malformed=rendered.malformed,
        )

    def render_error(self, fault: Fault) -> Rendered:
        """Render `{"error": {"message", "type", "param", "code"}}` with `fault.status`.

        Args:
            fault: The `status` fault.

        Returns:
            The error response, with `Retry-After` when `fault.retry_after` is set.
        """
        headers: list[tuple[str, str]] = [("content-type", "application/json")]
        if fault.retry_after is not None:
            headers.append(("retry-after", _retry_after_value(fault.retry_after)))
        return Rendered(fault.status, tuple(headers), (Frame(json_bytes(_error_body(fault))),))

    def error_frame(self, fault: Fault) -> bytes | None:
        """OpenAI's error object as a stream chunk, then `data: [DONE]`.

        Args:
            fault: The `provider_error` fault.

        Returns:
            The frame's bytes.
        """
        return self._sse(_error_body(fault)) + b"data: [DONE]\n\n"

    def in_stream_error_types(self, fault: Fault) -> frozenset[str] | None:
        """What an adapter can tell from the error chunk, which carries no HTTP status.

        The chunk's `type` and `code` say rate limits, context overflows and content
        filtering; for any other status a reader only knows a provider error occurred,
        so `ProviderError` is as right as the status's own class.
        """
        return statusless_error_types(fault)

    # --- routing -------------------------------------------------------------------

    #: Whether `request_fault` checks user content parts against OpenAI's schema. A
    #: server that only resembles OpenAI (llama.cpp, Azure) turns it off.
    checks_content_parts: bool = True

    def request_fault(self, method: str, path: str, request_json: Any) -> Fault | None:
        """A 400 `invalid_request_error` (code `invalid_value`) for a user content part
        OpenAI refuses: a type outside `text`, `image_url`, `input_audio` and `file`, an
        `input_audio` format other than wav or mp3, a `file` without `file_data` or
        `file_id`. The status and envelope are OpenAI's; the wording is the fake's own."""
        problem = chat_part_problem(request_json) if self.checks_content_parts else None
        if problem is None:
            return None
        return Fault("status", status=400, message=problem, code="invalid_value")

    def is_generation(self, method: str, path: str) -> bool:
        """`POST …/chat/completions` (any base path, so proxies' prefixes work too)."""
        return method == "POST" and path.rstrip("/").endswith("/chat/completions")

    def is_embedding(self, method: str, path: str) -> bool:
        """`POST …/embeddings` (see `dialects._embeddings`)."""
        return method == "POST" and path.rstrip("/").endswith("/embeddings")

    def embedding_fault(self, request_json: Any) -> Fault | None:
        """OpenAI's 400 for an embeddings body it refuses."""
        from ._embeddings import openai_embeddings_fault

        return openai_embeddings_fault(request_json)

    def embedding_inputs(self, request_json: Any) -> list[str] | None:
        """The body's `input` (one string or a list of them)."""
        from ._embeddings import embedding_texts

        return embedding_texts(request_json)

    def read_embedding_answer(self, payload: Any) -> tuple[list[list[float]], int | None] | None:
        """`read_openai_embeddings` (see `dialects._embeddings`)."""
        from ._embeddings import read_openai_embeddings

        return read_openai_embeddings(payload)

    def render_embedding_answer(
        self, path: str, request_json: Any, shape: EmbedShape | None
    ) -> Rendered:
        """OpenAI's embeddings list, shaped by `shape` (entries in any order, each with
        its `index`; `usage` left out when the shape reports none)."""
        from ._embeddings import openai_embeddings_payload, rendered_json

        body = json_bytes(openai_embeddings_payload(request_json, shape))
        return rendered_json(body, "application/json", self.malformed_body())


def statusless_error_types(fault: Fault) -> frozenset[str] | None:
    """The typed errors a reader can tell from an error frame that has no HTTP status.

    `None` (the status's own class) when the frame's type or code says it: a rate limit,
    a context overflow, a content filter; otherwise `ProviderError` or that class.
    """
    code = fault.code or ""
    if fault.status == 429 or "context_length_exceeded" in code or "content_filter" in code:
        return None
    own = _STATUS_CLASSES.get(fault.status)
    return frozenset({"ProviderError", own} if own else {"ProviderError"})


def _error_body(fault: Fault) -> dict[str, Any]:
    """OpenAI's error object for `fault`: a 5xx is a `server_error` type."""
    error_type = _ERROR_TYPES.get(fault.status, "server_error")
    code = None if fault.code == error_type else fault.code
    return {"error": {"message": fault.message, "type": error_type, "param": None, "code": code}}


def _tool_call_header(piece: ToolFragment) -> dict[str, Any]:
    """The entry that opens a tool call: id, type and name, no argument text yet."""
    call: dict[str, Any] = {"index": piece.index}
    if piece.id is not None:
        call["id"] = piece.id
        call["type"] = "function"
    function: dict[str, Any] = {}
    if piece.name is not None:
        function["name"] = piece.name
    function["arguments"] = ""
    call["function"] = function
    return call


def _tool_call_delta(piece: ToolFragment) -> dict[str, Any]:
    """One fragment as a single entry: header fields (when it has them) and its text."""
    call: dict[str, Any] = {"index": piece.index}
    if piece.id is not None:
        call["id"] = piece.id
        call["type"] = "function"
    function: dict[str, Any] = {}
    if piece.name is not None:
        function["name"] = piece.name
    function["arguments"] = piece.arguments
    call["function"] = function
    return call


def _joined_tool_calls(script: Script) -> list[dict[str, Any]]:
    """A script's tool-call fragments joined per slot, in slot order."""
    slots: dict[int, dict[str, Any]] = {}
    for piece in script.pieces:
        if not isinstance(piece, ToolFragment):
            continue
        slot = slots.setdefault(piece.index, {"id": None, "name": None, "arguments": ""})
        if piece.id is not None and slot["id"] is None:
            slot["id"] = piece.id
        if piece.name is not None and slot["name"] is None:
            slot["name"] = piece.name
        slot["arguments"] += piece.arguments
    calls: list[dict[str, Any]] = []
    for index in sorted(slots):
        slot = slots[index]
        call: dict[str, Any] = {}
        if slot["id"] is not None:
            call["id"] = slot["id"]
        call["type"] = "function"
        function: dict[str, Any] = {}
        if slot["name"] is not None:
            function["name"] = slot["name"]
        function["arguments"] = slot["arguments"]
        call["function"] = function
        calls.append(call)
    return calls


def _usage_json(usage: ScriptUsage | None) -> tuple[dict[str, Any], frozenset[str]]:
    """OpenAI's `usage` object for `usage`, and the neutral fields it reports.

    The detail objects appear when their figure is known, with the audio and prediction
    counters OpenAI reports beside it (always 0 for a text response).
    """
    if usage is None:
        return {}, frozenset()
    out: dict[str, Any] = {}
    fields: set[str] = set()
    if usage.input_tokens is not None:
        out["prompt_tokens"] = usage.input_tokens
        fields.add("input_tokens")
    if usage.output_tokens is not None:
        out["completion_tokens"] = usage.output_tokens
        fields.add("output_tokens")
    if usage.input_tokens is not None and usage.output_tokens is not None:
        out["total_tokens"] = usage.input_tokens + usage.output_tokens
    if usage.cache_read_tokens is not None:
        out["prompt_tokens_details"] = {"cached_tokens": usage.cache_read_tokens, "audio_tokens": 0}
        fields.add("cache_read_tokens")
    if usage.reasoning_tokens is not None:
        out["completion_tokens_details"] = {
            "reasoning_tokens": usage.reasoning_tokens,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        }
        fields.add("reasoning_tokens")
    return out, frozenset(fields)
