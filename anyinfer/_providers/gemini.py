"""Google Gemini API (`generativelanguage.googleapis.com`), streaming and not.

Requests go to `POST {base}/models/{model}:generateContent` (whole) and
`POST {base}/models/{model}:streamGenerateContent?alt=sse` (streamed), with the API key in
the `x-goog-api-key` header. The default base URL is
`https://generativelanguage.googleapis.com/v1beta`; `ProviderSettings.api_version`
(e.g. `"v1alpha"`) swaps the version when no `base_url` is given. Gemini on Vertex AI
(project/location URLs, OAuth2 tokens) is `anyinfer._providers.vertex.VertexGeminiAdapter`,
a subclass of this adapter: Vertex answers in the same response shape.

The wire shapes follow recorded Gemini traffic (the recordings in `shared/wire`, the
repository's sibling folder). Every response
chunk is a whole `GenerateContentResponse`: `candidates[0].content.parts` (text, thought
text, whole function calls, thought signatures), `candidates[0].finishReason`,
`usageMetadata`, `promptFeedback`, `modelVersion`, `responseId`.

Mapping decisions this adapter documents:

- **Credentials.** The key comes from `ProviderSettings.api_key`, else `GEMINI_API_KEY`
  (the client's `api_key_env` lookup), else `GOOGLE_API_KEY`. Unlike Google's own SDK,
  `GEMINI_API_KEY` wins when both variables are set, because the client consults it
  first.
- **Stream framing.** Streams are requested as server-sent events (`alt=sse`). Without
  `alt=sse` Gemini sends one JSON array whose elements arrive incrementally
  (`[{...}\\n,\\r\\n{...}\\n]`); the adapter reads that form too, incrementally and across
  arbitrary read splits, and picks the framing from the response's content type
  (`text/event-stream` or JSON), so a proxy that drops `alt=sse` still works.
  `ProviderSettings.options["stream_format"] = "json-array"` asks for the array form.
- **The end of a stream.** Gemini sends no `[DONE]`. In the SSE form the terminal
  sentinel is the clean end of the body after a chunk carrying `finishReason`: the
  adapter drains the body (usage may still arrive after the finish reason) and yields
  `END` when it ends cleanly having seen a finish reason. A body that ends before any
  finish reason is truncated, and the core fails the attempt; a connection that breaks
  after the finish reason completes with the "usage may be incomplete" warning. In the
  JSON-array form the closing `]` is the sentinel.
- **Usage** arrives live, cumulative, in many chunks; each report is yielded as it
  arrives and later reports win. `input_tokens` is `promptTokenCount` plus
  `toolUsePromptTokenCount` (both are prompt-side tokens Gemini bills as input),
  `output_tokens` is `candidatesTokenCount + thoughtsTokenCount` (Usage counts every
  token the model generated, reasoning included; a missing count reads as 0 when the
  other is present, since Gemini omits zero fields), `reasoning_tokens` is
  `thoughtsTokenCount`, `cache_read_tokens` is `cachedContentTokenCount` (a part of the
  prompt count) and `total_tokens` is `totalTokenCount`, so total = input + output.
  Gemini reports no cache-write figure.
- **Thoughts.** Parts with `"thought": true` are reasoning. Thought signatures (opaque
  `thoughtSignature` strings on any part) carry the model's reasoning state between
  turns, and Gemini 3 rejects a tool-use turn sent back without them (HTTP 400). With
  `retain_raw`, `Generation.raw` keeps every chunk (streaming) or the response
  (non-streaming), signatures included; `content_parts(raw)` rebuilds the model turn's
  parts from either, and `assistant_message(generation)` makes the assistant `Message`
  to append to the conversation, carrying those parts in
  `Message.provider_data["gemini"]["parts"]`, which this adapter sends verbatim as the
  model turn. Without the raw payload an assistant turn is rebuilt from its text and
  tool calls, and has no signatures.
- **Tool calls** arrive whole: one `ToolCallPart` per `functionCall`, slot index = the
  running count of calls in the response, arguments JSON-serialized, `call_id` the
  call's `id` when Gemini sends one (otherwise the core synthesizes `call_N`). A tool
  result becomes a `functionResponse` part, which needs the tool's name:
  `Message.name`, or the name of the earlier assistant tool call with that id.
  Consecutive tool results go back in one `user` turn; a result whose text is a JSON
  object is sent as that object, anything else as `{"output": text}` (`{"error": text}`
  for `is_error`).
- **Finish reasons.** `STOP` maps to `stop`, or `tool_calls` when the response made
  function calls (Gemini has no reason of its own for that); `MAX_TOKENS` to `length`;
  `SAFETY`, `RECITATION`, `BLOCKLIST`, `PROHIBITED_CONTENT`, `SPII` and the image
  variants to `content_filter`. Everything else (`MALFORMED_FUNCTION_CALL`, `OTHER`,
  `LANGUAGE`, `FINISH_REASON_UNSPECIFIED`, ...) passes through verbatim, so the core
  normalizes it to `other`; their `finishMessage` becomes a warning.
- **Blocked prompts.** A response with `promptFeedback.blockReason` and no candidates
  raises `ContentFilterError` (after yielding any usage it reports), never a silent
  empty answer.
- **Reasoning effort.** Gemini 3 and later models take `thinkingLevel` (the effort's
  own name; `none` cannot switch thinking off there and is sent as `minimal` with a
  warning); earlier models take `thinkingBudget` from `THINKING_BUDGETS` (`none` is 0,
  which Gemini 2.5 Pro rejects). `includeThoughts` is on whenever thinking is asked for,
  so thought summaries stream as reasoning.
- **Errors.** `{"error": {"code", "message", "status", "details"}}` bodies (sometimes
  wrapped in a list) map to typed errors: an invalid key (`API_KEY_INVALID`, sent as
  HTTP 400), `UNAUTHENTICATED` and `PERMISSION_DENIED` to `AuthenticationError`;
  "exceeds the maximum number of tokens" to `ContextWindowError`; `RESOURCE_EXHAUSTED`
  to `RateLimitError`, whose `retry_after` comes from `Retry-After` or the
  `RetryInfo.retryDelay` detail; `UNAVAILABLE` to `OverloadedError`; `NOT_FOUND` to
  `ModelNotFoundError` — within the HTTP status's class only (a 500 `UNAVAILABLE` is
  an `OverloadedError`, a 400 `UNAVAILABLE` stays a `ProviderError`; see
  `anyinfer._adapters.errormap`). Error objects inside a stream are handled the same way, after
  the usage already received: in the `alt=sse` form Gemini sends such an object bare
  (pretty-printed, without `data:`), and the adapter reads it between events too.
- **Embeddings.** `embed()` sends up to 100 inputs (the endpoint's limit) to
  `models/{model}:batchEmbedContents`, one request per input, a single input too (as
  `google-genai` does: one answer shape, and `usageMetadata` where it is reported).
  `input_type` becomes `taskType` (`query` is `RETRIEVAL_QUERY`, `document`
  `RETRIEVAL_DOCUMENT`, Gemini's own task names pass through; for `gemini-embedding-2*`,
  whose task Google documents as a text prefix, with a warning that it may have no
  effect); `dimensions` becomes `outputDimensionality`.
  Vectors are JSON numbers (the protocol has no base64 form). Usage is
  `usageMetadata.promptTokenCount` when the answer has it, else unknown (`None`).
- `ProviderSettings.provider_options` for `gemini` are merged into the body last; a
  mapping value (say `{"generationConfig": {"topK": 40}}`) is merged into the adapter's
  own mapping of that name rather than replacing it.
"""

from __future__ import annotations

import json
import mimetypes
import re
from collections.abc import AsyncIterator, Awaitable, Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, ClassVar

import httpx

from .._adapters.base import (
    DiscoveredModel,
    HTTPAdapter,
    PartAssembler,
    inherits,
    parse_retry_after,
)
from .._adapters.errormap import ErrorKind
from .._adapters.framing import loads_or_none
from .._adapters.profile import INPUT_KINDS, AdapterProfile, InputSupport
from .._client.instance import provider_default_base_url, resolve_base_url
from .._errors import (
    ConfigError,
    ContentFilterError,
    ProviderError,
)
from .._knowledge.capabilities import ModelCapabilities
from .._messages import AudioContent, DocumentContent, ImageContent, Message, TextContent
from .._request import GenerationRequest
from .._settings import ProviderSettings
from .._stream.parts import END, FinishPart, Part, ReasoningPart, TextPart, UsagePart, WarningPart
from .._types import Generation, Usage
from ._wire import as_dict, as_list, as_str, flushed, native_turn, opt_dict, opt_int, opt_str

if TYPE_CHECKING:
    from .._embed._types import EmbedReply, EmbedRequest

_SAMPLING_FIELDS: Mapping[str, str | None] = {
    "temperature": "temperature",
    "top_p": "topP",
    "max_output_tokens": "maxOutputTokens",
    "stop": "stopSequences",
    "seed": "seed",
    "presence_penalty": "presencePenalty",
    "frequency_penalty": "frequencyPenalty",
}

__all__ = [
    "CONTENT_FILTER_REASONS",
    "DEFAULT_BASE_URL",
    "FALLBACK_API_KEY_ENV",
    "PROVIDER_DATA_KEY",
    "THINKING_BUDGETS",
    "GeminiAdapter",
    "assistant_message",
    "content_parts",
    "merge_options",
]

DEFAULT_BASE_URL = "https://generativelanguage.googleapis.com/v1beta"
"""The Gemini Developer API endpoint."""

FALLBACK_API_KEY_ENV = "GOOGLE_API_KEY"
"""Read for the key when neither the settings nor `GEMINI_API_KEY` provide one."""

PROVIDER_DATA_KEY = "gemini"
"""`Message.provider_data` key under which an assistant turn keeps its native parts."""

THINKING_BUDGETS: Mapping[str, int] = {
    "none": 0,
    "minimal": 512,
    "low": 1024,
    "medium": 8192,
    "high": 24576,
}
"""`thinkingBudget` (tokens) per reasoning effort, for models before Gemini 3."""

CONTENT_FILTER_REASONS = frozenset(
    {
        "SAFETY",
        "RECITATION",
        "BLOCKLIST",
        "PROHIBITED_CONTENT",
        "SPII",
        "IMAGE_SAFETY",
        "IMAGE_PROHIBITED_CONTENT",
        "IMAGE_RECITATION",
    }
)
"""Gemini finish reasons that mean a content policy stopped the response."""

_FINISH_MAP: Mapping[str, str] = {
    "STOP": "stop",
    "MAX_TOKENS": "length",
    **{reason: "content_filter" for reason in CONTENT_FILTER_REASONS},
}

_MAX_MODEL_PAGES = 20
_MODELS_PAGE_SIZE = "1000"
_LEVEL_MODELS = re.compile(r"^gemini-(\d+)")
_RETRY_DELAY = re.compile(r"^\s*(\d+(?:\.\d+)?)s\s*$")
STATUS_NAME_KINDS: Mapping[str, ErrorKind] = {
    "INVALID_ARGUMENT": "invalid",
    "FAILED_PRECONDITION": "invalid",
    "OUT_OF_RANGE": "invalid",
    "UNAUTHENTICATED": "auth",
    "PERMISSION_DENIED": "auth",
    "NOT_FOUND": "not_found",
    "RESOURCE_EXHAUSTED": "rate_limit",
    "UNAVAILABLE": "overloaded",
    "INTERNAL": "server",
    "ABORTED": "server",
    "UNKNOWN": "server",
    "DEADLINE_EXCEEDED": "server",
}
"""What Gemini's error `status` names (Google's canonical codes) mean; an `ErrorInfo`
reason starting `API_KEY` means the key was refused."""
_UNMAPPED_PART_KINDS = (
    "inlineData",
    "fileData",
    "executableCode",
    "codeExecutionResult",
)


GEMINI_INPUTS = InputSupport(protocol="Gemini", kinds=frozenset(INPUT_KINDS))
"""What `generateContent` carries: images, PDFs and audio, as `inlineData` or by URL
(`fileData`); whether a model takes them is its capability."""


class GeminiAdapter(HTTPAdapter):
    """Adapter for the Google Gemini API (`generateContent` / `streamGenerateContent`).

    See the module documentation for the mapping decisions.
    """

    provider_id: ClassVar[str] = "gemini"
    profile: ClassVar[AdapterProfile] = AdapterProfile(
        aliases=("google",),
        conformance_dialect="gemini",
        structured=ModelCapabilities(json_mode=True, json_schema=True),
        inputs=GEMINI_INPUTS,
    )
    default_base_url: ClassVar[str | None] = DEFAULT_BASE_URL
    api_key_env: ClassVar[str | None] = "GEMINI_API_KEY"
    fallback_api_key_env: ClassVar[str | None] = FALLBACK_API_KEY_ENV

    @classmethod
    def default_base_url_for(
        cls, settings: ProviderSettings, *, environ: Mapping[str, str] | None = None
    ) -> str | None:
        """The endpoint when no base URL is configured: `ProviderSettings.api_version`
        (e.g. `"v1alpha"`) swaps the version of `DEFAULT_BASE_URL`."""
        if settings.api_version:
            version = settings.api_version.strip("/")
            return f"https://generativelanguage.googleapis.com/{version}"
        return cls.default_base_url

    def __init__(self, settings: ProviderSettings) -> None:
        default = provider_default_base_url(type(self), settings)
        if default != self.default_base_url and resolve_base_url(settings) is None:
            settings = replace(settings, base_url=default)  # a derived default endpoint
        super().__init__(settings)
        fmt = settings.options.get("stream_format", "sse")
        if fmt not in ("sse", "json-array"):
            raise ConfigError(
                f"gemini: options['stream_format'] must be 'sse' or 'json-array', got {fmt!r}",
                provider=settings.instance_id,
            )
        self.stream_format: str = fmt

    def default_headers(self) -> dict[str, str]:
        """The `x-goog-api-key` header plus the configured headers."""
        headers = super().default_headers()
        if self.settings.api_key:
            headers.setdefault("x-goog-api-key", self.settings.api_key)
        return headers

    # --- request -------------------------------------------------------------------

    @staticmethod
    def model_path(model: str) -> str:
        """The resource path of a model: `models/<id>`, or the name as given when it
        already names a collection (`models/...`, `tunedModels/...`)."""
        name = model.strip().strip("/")
        return name if "/" in name else f"models/{name}"

    def build_body(self, request: GenerationRequest) -> dict[str, Any]:
        """The JSON body for one request."""
        return self.prepare(request)[0]

    def prepare(self, request: GenerationRequest) -> tuple[dict[str, Any], list[str]]:
        """The JSON body for one request, and warnings about what could not be sent."""
        warnings: list[str] = []
        body: dict[str, Any] = {"contents": self.contents_json(request.messages)}
        system = request.system_text()
        if system:
            body["systemInstruction"] = {"parts": [{"text": system}]}
        config, _ = request.sampling.wire_fields(_SAMPLING_FIELDS)
        fmt = request.response_format
        if fmt is not None:
            config["responseMimeType"] = "application/json"
            if fmt.get("type") == "json_schema":
                config["responseJsonSchema"] = dict(fmt.get("schema") or {})
        if request.reasoning is not None:
            config["thinkingConfig"] = self.thinking_config(
                request.model, request.reasoning, warnings
            )
        if config:
            body["generationConfig"] = config
        if request.tools:
            body["tools"] = [
                {
                    "functionDeclarations": [
                        {
                            "name": t.name,
                            "description": t.description,
                            "parametersJsonSchema": dict(t.parameters),
                        }
                        for t in request.tools
                    ]
                }
            ]
            calling = self.function_calling_config(request)
            if calling is not None:
                body["toolConfig"] = {"functionCallingConfig": calling}
        return merge_options(body, request.provider_options), warnings

    def thinking_config(self, model: str, effort: str, warnings: list[str]) -> dict[str, Any]:
        """`generationConfig.thinkingConfig` for a reasoning effort on `model`."""
        match = _LEVEL_MODELS.match(model.strip().removeprefix("models/"))
        if match is not None and int(match.group(1)) >= 3:
            if effort == "none":
                warnings.append(
                    f"gemini: {model} cannot switch thinking off; sent thinkingLevel 'minimal' "
                    "for reasoning='none'"
                )
                return {"thinkingLevel": "minimal"}
            return {"thinkingLevel": effort, "includeThoughts": True}
        budget = THINKING_BUDGETS.get(effort)
        if budget is None:
            raise ConfigError(
                f"gemini: unknown reasoning effort {effort!r}; expected one of "
                f"{', '.join(THINKING_BUDGETS)}",
                provider=self.instance_id,
            )
        if budget == 0:
            return {"thinkingBudget": 0}
        return {"thinkingBudget": budget, "includeThoughts": True}

    @staticmethod
    def function_calling_config(request: GenerationRequest) -> dict[str, Any] | None:
        """`toolConfig.functionCallingConfig` for the tool choice; `None` for `auto`."""
        forced = request.tool_choice_name()
        if forced:
            return {"mode": "ANY", "allowedFunctionNames": [forced]}
        if request.tool_choice == "required":
            return {"mode": "ANY"}
        if request.tool_choice == "none":
            return {"mode": "NONE"}
        return None

    def contents_json(self, messages: Sequence[Message]) -> list[dict[str, Any]]:
        """The conversation as Gemini `contents` (system messages go elsewhere)."""
        contents: list[dict[str, Any]] = []
        calls: dict[str, tuple[str, bool]] = {}  # call id -> (tool name, send the id back)
        pending: list[dict[str, Any]] = []  # functionResponse parts of consecutive results
        for m in messages:
            if m.role == "tool":
                pending.append(self.function_response_json(m, calls))
                continue
            if pending:
                contents.append({"role": "user", "parts": pending})
                pending = []
            if m.role == "system":
                continue
            if m.role == "assistant":
                contents.append({"role": "model", "parts": self.model_parts(m, calls)})
            else:
                contents.append({"role": "user", "parts": self.user_parts(m)})
        if pending:
            contents.append({"role": "user", "parts": pending})
        return contents

    def user_parts(self, m: Message) -> list[dict[str, Any]]:
        """A user turn's parts: text, `inlineData` and `fileData`."""
        if isinstance(m.content, str):
            return [{"text": m.content}]
        parts: list[dict[str, Any]] = []
        for p in m.content:
            if isinstance(p, TextContent):
                parts.append({"text": p.text})
            elif isinstance(p, ImageContent):
                parts.append(image_part(p))
            else:
                parts.append(media_part(p))
        return parts or [{"text": ""}]

    def model_parts(self, m: Message, calls: dict[str, tuple[str, bool]]) -> list[dict[str, Any]]:
        """A model turn's parts: the native ones when kept, else text and function calls.

        Records each tool call's name (and whether its id goes back) in `calls`.
        """
        native = native_parts(m)
        native_ids = {
            str(fc["id"])
            for part in native or ()
            if isinstance(fc := part.get("functionCall"), Mapping) and fc.get("id")
        }
        for call in m.tool_calls:
            calls[call.id] = (call.name, native is None or call.id in native_ids)
        if native is not None:
            return native
        parts: list[dict[str, Any]] = []
        if m.text:
            parts.append({"text": m.text})
        for call in m.tool_calls:
            parts.append(
                {"functionCall": {"name": call.name, "args": dict(call.arguments), "id": call.id}}
            )
        return parts or [{"text": ""}]

    def function_response_json(
        self, m: Message, calls: Mapping[str, tuple[str, bool]]
    ) -> dict[str, Any]:
        """A `functionResponse` part answering `m.tool_call_id`.

        Raises:
            ConfigError: If the tool's name is unknown (no `Message.name` and no earlier
                assistant call with that id).
        """
        call_id = m.tool_call_id or ""
        known = calls.get(call_id)
        name = m.name or (known[0] if known else None)
        if not name:
            raise ConfigError(
                f"gemini needs the tool name for the result of call {call_id!r}: pass "
                "Message.tool_result(..., name=...) or keep the assistant message that made "
                "the call in the conversation",
                provider=self.instance_id,
            )
        text = m.text
        response: dict[str, Any]
        if m.is_error:
            response = {"error": text}
        else:
            try:
                parsed = json.loads(text)
            except (ValueError, RecursionError):
                parsed = None
            response = parsed if isinstance(parsed, dict) else {"output": text}
        out: dict[str, Any] = {"name": name, "response": response}
        if known is None or known[1]:
            out["id"] = call_id
        return {"functionResponse": out}

    # --- response ------------------------------------------------------------------

    def assistant_message(self, generation: Generation) -> Message:
        """The assistant turn with this protocol's native content (see `assistant_message`)."""
        return assistant_message(generation)

    def generate(self, request: GenerationRequest) -> AsyncIterator[Part]:
        """Send the request and yield its parts (see `Adapter.generate`).

        A streamed body is framed as its content type says (`_is_event_stream`):
        server-sent events with bare JSON objects between them, or a JSON array.
        """

        def send(warnings: list[str]) -> Awaitable[httpx.Response]:
            body, notes = self.prepare(request)
            warnings.extend(notes)
            path = self.model_path(request.model)
            params: dict[str, str] | None = None
            if request.stream:
                path += ":streamGenerateContent"
                if self.stream_format == "sse":
                    params = {"alt": "sse"}
            else:
                path += ":generateContent"
            return self.send("POST", "/" + path, json_body=body, params=params, request=request)

        calls = PartAssembler(tool_finish=True)

        def whole(payload: Any) -> Iterator[Part]:
            for chunk in payload if isinstance(payload, list) else [payload]:
                yield from self.parts_from_chunk(chunk, calls, "generate")

        def at_end() -> Iterator[Part]:
            if calls.finish is not None:
                yield END  # a clean end of the body after a finish reason

        def frame(chunk: Any, _event: str | None) -> Iterable[Part]:
            return self.parts_from_chunk(chunk, calls, "stream")

        if inherits(type(self), GeminiAdapter, *_CHUNK_HOOKS):

            def frame(chunk: Any, _event: str | None) -> Iterable[Part]:
                # Nearly every chunk is one candidate's text and the running counts:
                # read it without the general walk, which gives the same parts
                # (`plain_text`, `counts`); any other chunk, and one whose counts are
                # not all integers, goes there.
                text = plain_text(chunk)
                if text is not None:
                    meta = chunk.get("usageMetadata")
                    if not meta:
                        return (TextPart(text),) if text else ()
                    usage = counts(meta)
                    if usage is not None:
                        part = UsagePart(usage)
                        return (TextPart(text), part) if text else (part,)
                return self.parts_from_chunk(chunk, calls, "stream")

        return self.stream_parts(
            request,
            send,
            frame,
            whole=whole,
            framing=lambda response: (
                "sse+json" if _is_event_stream(response, self.stream_format) else "json-array"
            ),
            at_end=at_end,
            assembler=calls,
        )

    def parts_from_chunk(self, chunk: Any, calls: PartAssembler, phase: str) -> Iterable[Part]:
        """Parts of one response chunk (or a whole response).

        A `STOP` finish of a response that made calls becomes `tool_calls` when
        `calls.fix` filters the parts (as `stream_parts` does). Type checks are inlined
        on the common path; the checked accessors run only to raise the
        `ProtocolError` that names the offending field. The parts are built in a list;
        a chunk that fails part-way returns them followed by its error (`flushed`), so
        what it reported before the failure (its usage first) still counts.
        """
        out: list[Part] = []
        try:
            self._chunk_parts(chunk, calls, phase, out)
        except Exception as exc:
            return flushed(out, exc)
        return out

    def _chunk_parts(self, chunk: Any, calls: PartAssembler, phase: str, out: list[Part]) -> None:
        if type(chunk) is not dict:
            chunk = as_dict(chunk, self.instance_id, "response")
        meta = chunk.get("usageMetadata")
        if meta is not None and type(meta) is not dict:
            meta = opt_dict(meta, self.instance_id, "usageMetadata")
        usage = self.usage_from(meta) if meta else None
        error = chunk.get("error")
        if error is not None:
            if usage is not None:  # flush what the failing frame still reports
                out.append(UsagePart(usage))
            raise self.error_from_payload(error, None, None, phase=phase)
        candidates = chunk.get("candidates")
        if type(candidates) is not list:
            candidates = as_list(candidates, self.instance_id, "candidates")
        if "promptFeedback" in chunk:
            self._check_feedback(chunk, bool(candidates), usage, phase, out)
        if candidates:
            candidate = candidates[0]
            if type(candidate) is not dict:
                candidate = as_dict(candidate, self.instance_id, "candidates[]")
            content = candidate.get("content")
            if content is not None:
                if type(content) is not dict:
                    content = as_dict(content, self.instance_id, "candidates[].content")
                parts = content.get("parts")
                if type(parts) is not list:
                    parts = as_list(parts, self.instance_id, "content.parts")
                for part in parts:
                    if type(part) is not dict:
                        part = as_dict(part, self.instance_id, "parts[]")
                    text = part.get("text")
                    if type(text) is str:
                        if text:
                            out.append(
                                ReasoningPart(text)
                                if part.get("thought") is True
                                else TextPart(text)
                            )
                    else:
                        out.extend(self.parts_from_part(part, calls))
            reason = candidate.get("finishReason")
            if reason is not None:
                reason = opt_str(reason, self.instance_id, "finishReason")
            if reason:
                out.append(FinishPart(self.finish_reason(reason)))
                message = opt_str(candidate.get("finishMessage"), self.instance_id, "finishMessage")
                if message and reason not in ("STOP", "MAX_TOKENS"):
                    out.append(WarningPart(f"gemini finished with {reason}: {message}"))
        if usage is not None:
            out.append(UsagePart(usage))

    def _check_feedback(
        self,
        chunk: dict[str, Any],
        candidates: bool,
        usage: Usage | None,
        phase: str,
        out: list[Part],
    ) -> None:
        """Raise `ContentFilterError` for a blocked prompt (its usage flushed first)."""
        pid = self.instance_id
        feedback = opt_dict(chunk.get("promptFeedback"), pid, "promptFeedback") or {}
        block = opt_str(feedback.get("blockReason"), pid, "promptFeedback.blockReason")
        if block and not candidates:
            if usage is not None:
                out.append(UsagePart(usage))
            detail = opt_str(
                feedback.get("blockReasonMessage"), pid, "promptFeedback.blockReasonMessage"
            )
            raise ContentFilterError(
                f"{pid}: the prompt was blocked ({block}){': ' + detail if detail else ''}",
                provider=pid,
                phase=phase,
            )

    def parts_from_part(self, part: dict[str, Any], calls: PartAssembler) -> Iterator[Part]:
        """Parts of one content part (text, thought, function call)."""
        pid = self.instance_id
        text = part.get("text")
        if text is not None:
            text = as_str(text, pid, "parts[].text")
            if text:
                yield ReasoningPart(text) if part.get("thought") is True else TextPart(text)
            return
        call = opt_dict(part.get("functionCall"), pid, "parts[].functionCall")
        if call is not None:
            args = call.get("args")
            # Whole calls: each opens the next slot (a call after the finish chunk
            # still makes the finish tool_calls: `PartAssembler.fix`).
            yield from calls.call(
                None,
                opt_str(call.get("id"), pid, "functionCall.id") or None,
                opt_str(call.get("name"), pid, "functionCall.name") or None,
                "{}" if args is None else json.dumps(args, ensure_ascii=False),
            )
            return
        for kind in _UNMAPPED_PART_KINDS:
            if kind in part:
                yield from calls.warn_once(
                    f"gemini: the response had {kind} parts, which are kept only in the raw payload"
                )

    @staticmethod
    def finish_reason(reason: str) -> str:
        """The neutral finish reason for a Gemini `finishReason` (unknown ones verbatim;
        `STOP` is `stop`, reconciled with the response's calls by `PartAssembler`)."""
        return _FINISH_MAP.get(reason, reason)

    def usage_from(self, u: dict[str, Any]) -> Usage:
        """Usage from a `usageMetadata` object (see the module documentation)."""
        usage = counts(u)
        if usage is None:
            # A count that is neither an integer nor absent: checked, in `_COUNT_KEYS`
            # order (an integral float passes as its integer, anything else raises).
            pid = self.instance_id
            usage = counts({k: opt_int(u.get(k), pid, f"usageMetadata.{k}") for k in _COUNT_KEYS})
            assert usage is not None  # every count is an int or None now
        return usage

    # --- errors --------------------------------------------------------------------

    def error_message(self, body: bytes) -> tuple[str, str | None]:
        """`(message, code)` of an error body; the code is the most specific of the
        `ErrorInfo` reason and the `status` name."""
        payload = _error_object(body)
        if payload is None:
            return body.decode("utf-8", "replace").strip()[:500], None
        message, status_name, reasons, _ = self.error_fields(payload)
        return message, (reasons[0] if reasons else status_name)

    def error_from_response(
        self, status: int, headers: httpx.Headers, body: bytes, phase: str = "generate"
    ) -> ProviderError:
        """Map an error status and a Gemini error body to a typed error."""
        payload = _error_object(body)
        if payload is None:
            text = body.decode("utf-8", "replace").strip()[:500]
            return self.error_from_parts(
                status, text, None, retry_after=parse_retry_after(headers), phase=phase
            )
        return self.error_from_payload(payload, status, parse_retry_after(headers), phase=phase)

    def error_fields(self, error: Any) -> tuple[str, str | None, list[str], float | None]:
        """`(message, status name, ErrorInfo reasons, RetryInfo delay)` of an error object."""
        if not isinstance(error, dict):
            return str(error)[:500], None, [], None
        message = error.get("message")
        status_name = error.get("status")
        reasons: list[str] = []
        delay: float | None = None
        details = error.get("details")
        for detail in details if isinstance(details, list) else ():
            if not isinstance(detail, dict):
                continue
            reason = detail.get("reason")
            if isinstance(reason, str) and reason:
                reasons.append(reason)
            retry = detail.get("retryDelay")
            if isinstance(retry, str) and (m := _RETRY_DELAY.match(retry)):
                delay = float(m.group(1))
        return (
            str(message) if message is not None else json.dumps(error)[:500],
            str(status_name) if status_name else None,
            reasons,
            delay,
        )

    def error_from_payload(
        self,
        error: Any,
        status: int | None,
        retry_after: float | None,
        *,
        phase: str = "generate",
    ) -> ProviderError:
        """A typed error for a Gemini error object (`{"code", "message", "status", ...}`)."""
        message, status_name, reasons, delay = self.error_fields(error)
        if status is None and isinstance(error, dict):
            code = error.get("code")
            if isinstance(code, int) and not isinstance(code, bool) and 400 <= code <= 599:
                status = code
        code_text = " ".join([*reasons, status_name or ""]).strip() or None
        return self.error_from_parts(
            status,
            message,
            code_text,
            retry_after=retry_after if retry_after is not None else delay,
            phase=phase,
        )

    def error_hint(self, code: str | None, message: str) -> ErrorKind | None:
        """What a Gemini status name or `ErrorInfo` reason (`code`, space-separated, most
        specific first) means: `API_KEY_*` reasons and `STATUS_NAME_KINDS`."""
        generic: ErrorKind | None = None
        for name in (code or "").split():
            kind: ErrorKind | None = (
                "auth" if name.startswith("API_KEY") else STATUS_NAME_KINDS.get(name)
            )
            if kind in ("invalid", "server"):
                generic = generic or kind
            elif kind is not None:
                return kind
        return generic or super().error_hint(code, message)

    # --- embeddings ----------------------------------------------------------------

    embed_max_batch: ClassVar[int] = 100
    """`batchEmbedContents` refuses more than 100 requests ("at most 100 requests can be
    in one batch", HTTP 400 `INVALID_ARGUMENT`)."""

    async def embed(self, request: EmbedRequest) -> EmbedReply:
        """Embed one batch with `:batchEmbedContents` (`anyinfer._embed._wire.gemini_embed`)."""
        from .._embed._wire import gemini_embed

        return await gemini_embed(self, request)

    # --- discovery -----------------------------------------------------------------

    async def models(self) -> Sequence[DiscoveredModel]:
        """List models from `GET /models`, following `nextPageToken` (bounded)."""
        pid = self.instance_id
        found: list[DiscoveredModel] = []
        token: str | None = None
        seen: set[str] = set()
        for _ in range(_MAX_MODEL_PAGES):
            params = {"pageSize": _MODELS_PAGE_SIZE}
            if token:
                params["pageToken"] = token
            page = as_dict(await self.fetch_json("/models", params=params), pid, "models")
            for entry in as_list(page.get("models"), pid, "models.models"):
                model = self.discovered(as_dict(entry, pid, "models.models[]"))
                if model is not None:
                    found.append(model)
            token = opt_str(page.get("nextPageToken"), pid, "models.nextPageToken")
            if not token or token in seen:
                break
            seen.add(token)
        return found

    def discovered(self, entry: dict[str, Any]) -> DiscoveredModel | None:
        """One `models[]` entry as a `DiscoveredModel` (`None` without a name)."""
        pid = self.instance_id
        name = opt_str(entry.get("name"), pid, "models[].name")
        if not name:
            return None
        facts: dict[str, Any] = {}
        methods = entry.get("supportedGenerationMethods")
        if isinstance(methods, list):
            facts["supported_generation_methods"] = tuple(m for m in methods if isinstance(m, str))
        thinking = entry.get("thinking")
        if isinstance(thinking, bool):
            facts["reasoning"] = thinking
        display = entry.get("displayName")
        if isinstance(display, str) and display:
            facts["display_name"] = display
        return DiscoveredModel(
            pid,
            name.removeprefix("models/"),
            context_window=_positive(entry.get("inputTokenLimit")),
            max_output_tokens=_positive(entry.get("outputTokenLimit")),
            facts=facts,
            raw=entry,
        )


# --- helpers -------------------------------------------------------------------------


_COUNT_KEYS = (
    "promptTokenCount",
    "toolUsePromptTokenCount",
    "candidatesTokenCount",
    "thoughtsTokenCount",
    "totalTokenCount",
    "cachedContentTokenCount",
)
"""The `usageMetadata` counts `counts` reads."""


def counts(u: dict[str, Any]) -> Usage | None:
    """The `Usage` of a `usageMetadata` object whose counts (`_COUNT_KEYS`) are each a
    non-negative `int` or absent, else `None` (`GeminiAdapter.usage_from` checks that object).

    Each sum counts what is known, one side alone when the other is absent: the input is
    the prompt plus the tool-use prompt, the output the candidates plus the thoughts.
    """
    get = u.get
    prompt = get("promptTokenCount")
    tool_prompt = get("toolUsePromptTokenCount")
    candidates = get("candidatesTokenCount")
    thoughts = get("thoughtsTokenCount")
    total = get("totalTokenCount")
    cached = get("cachedContentTokenCount")
    # `type(x) is int`: a bool is not a count; nor is a negative number (`opt_int`).
    if not (
        (prompt is None or (type(prompt) is int and prompt >= 0))
        and (tool_prompt is None or (type(tool_prompt) is int and tool_prompt >= 0))
        and (candidates is None or (type(candidates) is int and candidates >= 0))
        and (thoughts is None or (type(thoughts) is int and thoughts >= 0))
        and (total is None or (type(total) is int and total >= 0))
        and (cached is None or (type(cached) is int and cached >= 0))
    ):
        return None
    if tool_prompt is not None:
        prompt = tool_prompt if prompt is None else prompt + tool_prompt
    if thoughts is not None:
        candidates = thoughts if candidates is None else candidates + thoughts
    return Usage(prompt, candidates, total, cached, None, thoughts)


def merge_options(body: dict[str, Any], options: Mapping[str, Any]) -> dict[str, Any]:
    """`body` with `provider_options` merged in last: a mapping value is merged into the
    body's mapping of that name (`{"generationConfig": {"topK": 40}}`), anything else
    replaces the field."""
    for key, value in options.items():
        current = body.get(key)
        if isinstance(current, dict) and isinstance(value, Mapping):
            body[key] = {**current, **value}
        else:
            body[key] = value
    return body


_CHUNK_HOOKS = ("parts_from_chunk", "_chunk_parts", "usage_from")
"""The hooks `plain_text` stands for: a subclass that overrides one keeps the general walk."""


def plain_text(chunk: Any) -> str | None:
    """The text of a stream chunk that is only one candidate's text, else `None`.

    Such a chunk has no `error` or `promptFeedback`, one candidate without a
    `finishReason`, whose content is one part with a string `text` that is not a
    thought, and a `usageMetadata` that is an object or absent: for it,
    `GeminiAdapter.parts_from_chunk` gives a `TextPart` of this text (none for an empty
    one), then the usage's `UsagePart` when the object is not empty.
    """
    if type(chunk) is not dict or "error" in chunk or "promptFeedback" in chunk:
        return None
    candidates = chunk.get("candidates")
    if type(candidates) is not list or len(candidates) != 1:
        return None
    candidate = candidates[0]
    if type(candidate) is not dict or candidate.get("finishReason") is not None:
        return None
    content = candidate.get("content")
    if type(content) is not dict:
        return None
    parts = content.get("parts")
    if type(parts) is not list or len(parts) != 1:
        return None
    part = parts[0]
    if type(part) is not dict or part.get("thought") is True:
        return None
    text = part.get("text")
    meta = chunk.get("usageMetadata")
    if type(text) is not str or (meta is not None and type(meta) is not dict):
        return None
    return text


def _positive(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return None


def _is_event_stream(response: httpx.Response, requested: str) -> bool:
    """Whether a streamed body is server-sent events (else a JSON array or objects)."""
    kind = response.headers.get("content-type", "").lower()
    if "event-stream" in kind:
        return True
    if "json" in kind:
        return False
    return requested == "sse"


def _error_object(body: bytes) -> Any | None:
    """The `error` object of an error body (also when wrapped in a list), or `None`."""
    payload = loads_or_none(body)
    if isinstance(payload, list) and payload:
        payload = payload[0]
    if not isinstance(payload, dict):
        return None
    error = payload.get("error", payload)
    return error if isinstance(error, dict) else {"message": str(error)}


def image_part(image: ImageContent) -> dict[str, Any]:
    """An image as `inlineData` (bytes, `data:` URLs) or `fileData` (other URLs)."""
    inline = image.base64_data()
    if inline is not None:
        media_type, data = inline
        return {"inlineData": {"mimeType": media_type, "data": data}}
    uri = image.as_data_url()
    file_data: dict[str, Any] = {"fileUri": uri}
    mime = image.media_type or mimetypes.guess_type(uri.split("?", 1)[0])[0]
    if mime:
        file_data["mimeType"] = mime
    return {"fileData": file_data}


def media_part(part: DocumentContent | AudioContent) -> dict[str, Any]:
    """A PDF or audio part as `inlineData` (bytes, `data:` URLs) or `fileData` (a URL:
    a Files API URI, or a public or signed `https` URL, which Gemini fetches itself),
    with its MIME type (`application/pdf`, `audio/wav`, ...)."""
    data = part.base64_data()
    mime = str(part.media_type)
    if data is not None:
        return {"inlineData": {"mimeType": mime, "data": data}}
    return {"fileData": {"mimeType": mime, "fileUri": part.url}}


def native_parts(m: Message) -> list[dict[str, Any]] | None:
    """The native parts an assistant message carries in `provider_data`, if any."""
    native = m.provider_data.get(PROVIDER_DATA_KEY)
    if isinstance(native, Mapping):
        parts = native.get("parts")
        if isinstance(parts, list) and all(isinstance(p, dict) for p in parts) and parts:
            return [dict(p) for p in parts]
    return None


def content_parts(raw: Any) -> list[dict[str, Any]]:
    """The model turn's parts, rebuilt from a kept raw payload.

    Args:
        raw: `Generation.raw` of a Gemini result: the list of streamed chunks or the
            whole response.

    Returns:
        Every part of the first candidate, in arrival order, thought signatures
        included; empty text parts without a signature are dropped.
    """
    chunks = raw if isinstance(raw, list) else [raw]
    parts: list[dict[str, Any]] = []
    for chunk in chunks:
        if not isinstance(chunk, Mapping):
            continue
        candidates = chunk.get("candidates")
        if not isinstance(candidates, list) or not candidates:
            continue
        first = candidates[0]
        content = first.get("content") if isinstance(first, Mapping) else None
        found = content.get("parts") if isinstance(content, Mapping) else None
        for part in found if isinstance(found, list) else ():
            if not isinstance(part, Mapping):
                continue
            if set(part) <= {"text", "thought"} and not part.get("text"):
                continue
            parts.append(dict(part))
    return parts


def assistant_message(generation: Generation) -> Message:
    """The assistant turn of `generation`, ready to append to the conversation.

    With the raw payload kept (`retain_raw=True`), the message carries the turn's
    native parts — thought signatures included — in `provider_data`, and the Gemini
    adapter sends them back verbatim, as Gemini 3 requires when a tool-use turn
    continues. Without it, the message holds only the text and the tool calls.

    Args:
        generation: A result from a Gemini target.

    Returns:
        The assistant message.
    """
    return native_turn(generation, PROVIDER_DATA_KEY, "parts", content_parts)
