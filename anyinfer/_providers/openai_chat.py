"""OpenAI Chat Completions (`/chat/completions`), streaming and not.

A model refusal (structured outputs) arrives as `delta.refusal` text (`message.refusal`
in a whole response) with `finish_reason: "stop"`. Its text is answer text (`TextPart`)
and the finish reason is `content_filter`, as the Responses and Anthropic adapters
report a refusal (`RefusalWatch`).
"""

from __future__ import annotations

import json
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from typing import TYPE_CHECKING, Any, ClassVar

import httpx

from .._adapters.base import DiscoveredModel, HTTPAdapter, PartAssembler, Sender, inherits
from .._adapters.errormap import error_fields
from .._adapters.profile import AdapterProfile, InputSupport
from .._errors import ConfigError
from .._knowledge.capabilities import ModelCapabilities
from .._messages import (
    ContentPart,
    DocumentContent,
    ImageContent,
    Message,
    TextContent,
)
from .._request import GenerationRequest
from .._stream.parts import FinishPart, Part, ReasoningPart, TextPart, ToolCallPart, UsagePart
from .._types import Usage
from ._wire import as_dict, as_list, as_str, flushed, opt_dict, opt_int, opt_str

if TYPE_CHECKING:
    from .._embed._types import EmbedReply, EmbedRequest

__all__ = ["CHAT_INPUTS", "OpenAIChatAdapter", "RefusalWatch", "chat_part"]

CHAT_INPUTS = InputSupport(
    protocol="OpenAI Chat Completions",
    kinds=frozenset({"image", "image_url", "document", "audio"}),
    audio_formats=frozenset({"wav", "mp3"}),
    notes=(
        (
            "document_url",
            "takes documents inline only (a `file` part's `file_data`, no URL); pass the "
            "PDF's bytes, or use the Responses API (`openai-responses`), which takes "
            "`file_url`",
        ),
        (
            "audio_url",
            "takes audio inline only (`input_audio` carries base64 data, no URL); pass "
            "the audio's bytes",
        ),
    ),
)
"""What Chat Completions carries: images (inline or by URL), PDFs inline (`file`),
audio inline as wav or mp3 (`input_audio`). OpenAI-compatible presets inherit it;
whether a model takes a part is its capability (`vision`, `documents`, `audio`)."""

FINISH_MAP: Mapping[str, str] = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "content_filter": "content_filter",
    "eos": "stop",
    "end_turn": "stop",
    "max_tokens": "length",
}


class OpenAIChatAdapter(HTTPAdapter):
    """Adapter for the OpenAI Chat Completions protocol.

    Streams with `stream_options.include_usage` and drains to `data: [DONE]`, so the
    usage-only chunk OpenAI sends after the finish chunk is always counted.
    """

    provider_id: ClassVar[str] = "openai"
    profile: ClassVar[AdapterProfile] = AdapterProfile(
        conformance_dialect="openai-chat",
        structured=ModelCapabilities(json_mode=True, json_schema=True),
        inputs=CHAT_INPUTS,
    )
    default_base_url: ClassVar[str | None] = "https://api.openai.com/v1"
    api_key_env: ClassVar[str | None] = "OPENAI_API_KEY"
    #: Name of the output-token cap field in request bodies. A plain attribute (not a
    #: `ClassVar`) so that subclasses may set it per instance from their settings.
    max_tokens_field: str = "max_completion_tokens"
    #: Whether to ask for a usage chunk in streams (`stream_options.include_usage`).
    stream_usage: bool = True
    #: Delta/message fields read as reasoning text, first non-empty one wins.
    reasoning_fields: tuple[str, ...] = ("reasoning_content", "reasoning")

    def default_headers(self) -> dict[str, str]:
        """Bearer auth plus the configured headers."""
        return self.with_bearer(super().default_headers())

    # --- request -------------------------------------------------------------------

    def build_body(self, request: GenerationRequest) -> dict[str, Any]:
        """The JSON body for one request."""
        body: dict[str, Any] = {
            "model": request.model,
            "messages": [self.message_json(m) for m in request.messages],
        }
        if request.stream:
            body["stream"] = True
            if self.stream_usage:
                body["stream_options"] = {"include_usage": True}
        sampling, _ = request.sampling.wire_fields(
            {
                "temperature": "temperature",
                "top_p": "top_p",
                "max_output_tokens": self.max_tokens_field,
                "stop": "stop",
                "seed": "seed",
                "presence_penalty": "presence_penalty",
                "frequency_penalty": "frequency_penalty",
            }
        )
        body.update(sampling)
        if request.reasoning is not None:
            body["reasoning_effort"] = request.reasoning
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": dict(t.parameters),
                    },
                }
                for t in request.tools
            ]
            forced = request.tool_choice_name()
            body["tool_choice"] = (
                {"type": "function", "function": {"name": forced}}
                if forced
                else request.tool_choice
            )
        if request.response_format is not None:
            body["response_format"] = self.response_format_json(request.response_format)
        body.update(request.provider_options)
        return body

    def response_format_json(self, fmt: Mapping[str, Any]) -> dict[str, Any]:
        """Map the neutral response format to OpenAI's `response_format`."""
        if fmt.get("type") == "json_schema":
            return {"type": "json_schema", "json_schema": json_schema_fields(fmt)}
        return {"type": "json_object"}

    def message_json(self, m: Message) -> dict[str, Any]:
        """One message in Chat Completions form."""
        if m.role == "tool":
            return {"role": "tool", "tool_call_id": m.tool_call_id, "content": m.text}
        out: dict[str, Any] = {"role": m.role}
        if isinstance(m.content, str):
            out["content"] = m.content
        else:
            out["content"] = [chat_part(p, self.instance_id) for p in m.content]
        if m.role == "assistant" and m.tool_calls:
            out["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": json.dumps(dict(c.arguments))},
                }
                for c in m.tool_calls
            ]
            if not m.text:
                out["content"] = None
        return out

    # --- response ------------------------------------------------------------------

    def generate(self, request: GenerationRequest) -> AsyncIterator[Part]:
        """Send the request and yield its parts (see `Adapter.generate`)."""

        def send(_warnings: list[str]) -> Awaitable[httpx.Response]:
            body = self.build_body(request)
            return self.send("POST", "/chat/completions", json_body=body, request=request)

        return self.chat_parts(request, send)

    def chat_parts(
        self,
        request: GenerationRequest,
        send: Sender,
        *,
        prepare: Callable[[Any, str], Any] | None = None,
        assembler: PartAssembler | None = None,
        empty_ok: bool = True,
    ) -> AsyncIterator[Part]:
        """The parts of a Chat Completions response, through `stream_parts`.

        Streams end at `data: [DONE]`; a refusal turns a `stop` finish into
        `content_filter` (`RefusalWatch`).

        Args:
            request: The attempt's request.
            send: Sends the request (see `HTTPAdapter.stream_parts`).
            prepare: Normalizes each chunk (`key` `"delta"`) or whole response
                (`"message"`) before `parts_from_chunk` reads it.
            assembler: The response's assembler.
            empty_ok: Whether an empty 200 is a valid (empty) answer.
        """
        refusal = RefusalWatch()

        def decode(chunk: Any, key: str) -> Iterable[Part]:
            refusal.see(chunk, key)
            if prepare is not None:
                chunk = prepare(chunk, key)
            parts = self.parts_from_chunk(chunk, key)
            return map(refusal.fix, parts) if refusal.refused else parts

        def frame(chunk: Any, _event: str | None) -> Iterable[Part]:
            return decode(chunk, "delta")

        if prepare is None and inherits(type(self), OpenAIChatAdapter, *_CHUNK_HOOKS):

            def frame(chunk: Any, _event: str | None) -> Iterable[Part]:
                # Nearly every chunk is one choice's text: read it without the general
                # walk, which gives the same part (`plain_text`); any other goes there.
                text = plain_text(chunk)
                if text is None:
                    return decode(chunk, "delta")
                return (TextPart(text),) if text else ()

        return self.stream_parts(
            request,
            send,
            frame,
            whole=lambda payload: decode(payload, "message"),
            sentinel=b"[DONE]",
            assembler=assembler,
            empty_ok=empty_ok,
        )

    def parts_from_chunk(self, chunk: Any, key: str) -> Iterable[Part]:
        """Parts of one stream chunk (`key="delta"`) or a whole response (`"message"`).

        Type checks are inlined on the common path; the checked accessors run only to
        raise the `ProtocolError` that names the offending field. The parts are built in
        a list; a chunk that fails part-way returns them followed by its error
        (`flushed`), so its usage still counts.
        """
        out: list[Part] = []
        try:
            self._chunk_parts(chunk, key, out)
        except Exception as exc:
            return flushed(out, exc)
        return out

    def _chunk_parts(self, chunk: Any, key: str, out: list[Part]) -> None:
        if not isinstance(chunk, dict):
            as_dict(chunk, self.instance_id, "chunk")
        usage = self.chunk_usage(chunk)
        error = chunk.get("error")
        if error is not None:
            if usage:  # flush what the failing frame still reports before failing
                out.append(UsagePart(self.usage_from(usage)))
            # Gateways (OpenRouter, Groq) put the upstream HTTP status in the frame.
            message, code, status = error_fields(error, self.error_code_keys)
            raise self.error_from_parts(status, message, code, phase="stream")
        choices = chunk.get("choices")
        if choices is not None and not isinstance(choices, list):
            as_list(choices, self.instance_id, "choices")
        for choice in choices or ():
            if not isinstance(choice, dict):
                as_dict(choice, self.instance_id, "choices[]")
            if choice.get("index", 0) != 0:
                continue  # n > 1 is not supported; only the first choice is read
            delta = choice.get(key)
            if delta is not None and not isinstance(delta, dict):
                as_dict(delta, self.instance_id, "choices[]." + key)
            if delta:
                out.extend(self.parts_from_delta(delta, key))
            reason = choice.get("finish_reason")
            if reason is not None and not isinstance(reason, str):
                opt_str(reason, self.instance_id, "finish_reason")
            if reason:
                out.append(FinishPart(FINISH_MAP.get(reason, reason)))
        if usage:
            out.append(UsagePart(self.usage_from(usage)))

    def chunk_usage(self, chunk: dict[str, Any]) -> dict[str, Any] | None:
        """The OpenAI-shaped usage object a chunk (or whole response) carries, if any.

        Reads `usage`, then Groq's `x_groq.usage` (Groq reports stream usage there when
        `include_usage` is not honoured). Subclasses override this to look elsewhere.
        """
        usage = chunk.get("usage")
        if type(usage) is dict:
            return usage
        if usage is None and "x_groq" not in chunk:
            return None
        pid = self.instance_id
        usage = opt_dict(usage, pid, "usage")
        if usage is None:
            x_groq = opt_dict(chunk.get("x_groq"), pid, "x_groq")
            usage = opt_dict(x_groq.get("usage"), pid, "x_groq.usage") if x_groq else None
        return usage

    def parts_from_delta(self, delta: dict[str, Any], key: str) -> Iterable[Part]:
        """Parts of one `delta` (or `message`) object (built in a list, as
        `parts_from_chunk`'s are)."""
        out: list[Part] = []
        try:
            for field in self.reasoning_fields:
                reasoning = delta.get(field)
                if reasoning and isinstance(reasoning, str):
                    out.append(ReasoningPart(reasoning))
                    break
            content = delta.get("content")
            if content:
                if type(content) is str:
                    out.append(TextPart(content))
                elif isinstance(content, list):
                    out.extend(_content_list_parts(content, self.instance_id, key))
                else:
                    out.append(TextPart(as_str(content, self.instance_id, key + ".content")))
            refusal = delta.get("refusal")
            if refusal:
                out.append(TextPart(as_str(refusal, self.instance_id, key + ".refusal")))
            calls = delta.get("tool_calls")
            if calls is not None:
                out.extend(self._tool_call_parts(calls))
        except Exception as exc:
            return flushed(out, exc)
        return out

    def _tool_call_parts(self, calls: Any) -> Iterator[Part]:
        pid = self.instance_id
        for position, call in enumerate(as_list(calls, pid, "tool_calls")):
            call = as_dict(call, pid, "tool_calls[]")
            fn = opt_dict(call.get("function"), pid, "tool_calls[].function") or {}
            index = opt_int(call.get("index"), pid, "tool_calls[].index")
            args = fn.get("arguments")
            if args is not None and not isinstance(args, str):
                args = json.dumps(args)  # some servers send an object, not a string
            yield ToolCallPart(
                position if index is None else index,
                opt_str(call.get("id"), pid, "tool_calls[].id") or None,
                opt_str(fn.get("name"), pid, "tool_calls[].function.name") or None,
                args or "",
            )

    def usage_from(self, u: dict[str, Any]) -> Usage:
        """Usage from an OpenAI `usage` object, with cache and reasoning details."""
        pid = self.instance_id
        prompt_details = opt_dict(u.get("prompt_tokens_details"), pid, "usage.details") or {}
        out_details = opt_dict(u.get("completion_tokens_details"), pid, "usage.details") or {}
        cache_read = opt_int(prompt_details.get("cached_tokens"), pid, "usage.cached_tokens")
        # DeepSeek, Mistral and Together name cached prompt tokens their own way.
        for name in ("prompt_cache_hit_tokens", "num_cached_tokens", "cached_tokens"):
            if cache_read is not None:
                break
            cache_read = opt_int(u.get(name), pid, f"usage.{name}")
        return Usage(
            input_tokens=opt_int(u.get("prompt_tokens"), pid, "usage.prompt_tokens"),
            output_tokens=opt_int(u.get("completion_tokens"), pid, "usage.completion_tokens"),
            total_tokens=opt_int(u.get("total_tokens"), pid, "usage.total_tokens"),
            cache_read_tokens=cache_read,
            reasoning_tokens=opt_int(
                out_details.get("reasoning_tokens"), pid, "usage.reasoning_tokens"
            ),
        )

    # --- embeddings ----------------------------------------------------------------

    embed_max_batch: ClassVar[int] = 2048
    #: The embeddings endpoint; `None` where the server has none (the base refusal).
    embeddings_path: ClassVar[str | None] = "/embeddings"

    @classmethod
    def serves_embeddings(cls) -> bool:
        """Whether this protocol's server has an embeddings endpoint."""
        return cls.embeddings_path is not None

    async def embed(self, request: EmbedRequest) -> EmbedReply:
        """Embed one batch with `POST /embeddings` (`anyinfer._embed._wire`)."""
        if self.embeddings_path is None:
            return await super().embed(request)
        from .._embed._wire import openai_embed

        return await openai_embed(self, request, self.embeddings_path)

    # --- discovery -----------------------------------------------------------------

    async def models(self) -> Sequence[DiscoveredModel]:
        """List models from `GET /models`."""
        pid = self.instance_id
        body = as_dict(await self.fetch_json("/models"), pid, "models")
        found: list[DiscoveredModel] = []
        for entry in as_list(body.get("data"), pid, "models.data"):
            entry = as_dict(entry, pid, "models.data[]")
            model_id = opt_str(entry.get("id"), pid, "models.data[].id")
            if not model_id:
                continue
            window = None
            for key in ("context_length", "context_window", "max_model_len", "n_ctx_train"):
                if isinstance(entry.get(key), int):
                    window = entry[key]
                    break
            meta = entry.get("meta")
            if (
                window is None
                and isinstance(meta, dict)
                and isinstance(meta.get("n_ctx_train"), int)
            ):
                window = meta["n_ctx_train"]
            found.append(DiscoveredModel(pid, model_id, context_window=window, raw=entry))
        return found


def json_schema_fields(fmt: Mapping[str, Any]) -> dict[str, Any]:
    """The `name`, `schema` and `strict` fields of an OpenAI JSON-schema format, from the
    neutral response format (Chat nests them under `json_schema`, Responses does not)."""
    return {
        "name": fmt.get("name", "output"),
        "schema": fmt.get("schema", {}),
        "strict": bool(fmt.get("strict", False)),
    }


_PLAIN_DELTA_KEYS = frozenset({"content", "role"})
_CHUNK_HOOKS = ("parts_from_chunk", "_chunk_parts", "chunk_usage", "parts_from_delta")
"""The hooks `plain_text` stands for: a subclass that overrides one keeps the general walk."""


def plain_text(chunk: Any) -> str | None:
    """The text of a stream chunk that is only text, else `None`.

    Such a chunk has one choice, index 0, no finish reason, a `delta` holding only
    `content` (a string) and perhaps `role`, and no usage, error or Groq extension: for
    it, `OpenAIChatAdapter.parts_from_chunk` gives exactly one `TextPart` of this text
    (none for an empty one), and a refusal watch has nothing to see.
    """
    if type(chunk) is not dict or chunk.get("usage") is not None:
        return None
    choices = chunk.get("choices")
    if type(choices) is not list or len(choices) != 1 or "error" in chunk or "x_groq" in chunk:
        return None
    choice = choices[0]
    if type(choice) is not dict or choice.get("finish_reason") is not None:
        return None
    delta = choice.get("delta")
    if (
        type(delta) is not dict
        or choice.get("index", 0) != 0
        or not delta.keys() <= _PLAIN_DELTA_KEYS
    ):
        return None
    content = delta.get("content", "")
    return content if type(content) is str else None


class RefusalWatch:
    """Per-response: once the model refused, its `stop` finish is `content_filter`.

    OpenAI ends a refusal with `finish_reason: "stop"`; the neutral result says the
    provider declined, as it does over the Responses API (refusal content) and
    Anthropic (`stop_reason: "refusal"`).

    Attributes:
        refused: Whether a non-empty `refusal` has been seen.
    """

    __slots__ = ("refused",)

    def __init__(self) -> None:
        self.refused = False

    def see(self, chunk: Any, key: str) -> None:
        """Note a refusal in a chunk's (`key="delta"`) or response's (`"message"`) choice 0."""
        if self.refused or not isinstance(chunk, dict):
            return
        choices = chunk.get("choices")
        for choice in choices if isinstance(choices, list) else ():
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            delta = choice.get(key)
            if type(delta) is dict and "refusal" not in delta:
                continue  # the usual delta: nothing to look at
            refusal = delta.get("refusal") if isinstance(delta, dict) else None
            if isinstance(refusal, str) and refusal:
                self.refused = True

    def fix(self, part: Part) -> Part:
        """`part`, with a `stop` finish turned into `content_filter` after a refusal."""
        if self.refused and isinstance(part, FinishPart) and part.reason == "stop":
            return FinishPart("content_filter")
        return part


def _content_list_parts(content: list[Any], pid: str, key: str) -> Iterator[Part]:
    """Parts of a list-shaped `content` (Mistral: text and thinking chunks)."""
    for item in content:
        item = as_dict(item, pid, f"{key}.content[]")
        kind = item.get("type")
        if kind == "text":
            text = as_str(item.get("text"), pid, f"{key}.content[].text")
            if text:
                yield TextPart(text)
        elif kind == "thinking":
            inner = item.get("thinking")
            if isinstance(inner, str):
                if inner:
                    yield ReasoningPart(inner)
                continue
            for sub in as_list(inner, pid, f"{key}.content[].thinking"):
                sub = as_dict(sub, pid, f"{key}.content[].thinking[]")
                text = as_str(sub.get("text"), pid, f"{key}.content[].thinking[].text")
                if text:
                    yield ReasoningPart(text)


def chat_part(part: ContentPart, provider: str) -> dict[str, Any]:
    """One content part in Chat Completions form.

    Text is a `text` part, an image an `image_url` part, a PDF a `file` part with
    `file_data` (a base64 `data:` URL) and a file name, audio an `input_audio` part.

    Raises:
        ConfigError: A document or audio by URL, or audio in a format other than wav
            or mp3 (the core refuses these before dispatch; this guards direct use).
    """
    if isinstance(part, TextContent):
        return {"type": "text", "text": part.text}
    if isinstance(part, ImageContent):
        return {"type": "image_url", "image_url": {"url": part.as_data_url()}}
    if isinstance(part, DocumentContent):
        data_url = part.as_data_url()
        if data_url is None:
            raise ConfigError(
                f"{provider}: OpenAI Chat Completions {CHAT_INPUTS.note('document_url')}",
                provider=provider,
            )
        return {
            "type": "file",
            "file": {"filename": part.filename or "document.pdf", "file_data": data_url},
        }
    data = part.base64_data()
    if data is None or part.format not in ("wav", "mp3"):
        raise ConfigError(
            f"{provider}: OpenAI Chat Completions takes audio inline, as wav or mp3 only "
            f"(got {part.format} {'inline' if data is not None else 'by URL'})",
            provider=provider,
        )
    return {"type": "input_audio", "input_audio": {"data": data, "format": part.format}}
