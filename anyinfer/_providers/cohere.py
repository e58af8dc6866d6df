"""Cohere API v2: chat (`POST /v2/chat`, streaming and not), embed and rerank.

The wire shapes follow the official `cohere` Python SDK's types (`V2ChatResponse`,
`V2ChatStreamResponse` and the event classes it unions), Cohere's streaming guide, and
real recordings (langchain-ai/langchain-cohere and pydantic/pydantic-ai cassettes, bundled
under `tests/data/wire/`). A stream is a sequence of typed server-sent events, each sent
as `event: <type>` plus `data: <json>` whose `type` repeats the name, then `data: [DONE]`
(what every recorded stream ends with, and what the SDK stops at):

- `message-start` opens the message (`id`, an empty assistant shell);
- `content-start` / `content-delta` / `content-end` build content blocks by `index`:
  `delta.message.content.text` for answer text, `delta.message.content.thinking` for the
  reasoning of reasoning models (`command-a-reasoning-*`);
- `tool-plan-delta` streams `delta.message.tool_plan`, the plan a non-reasoning model
  writes before calling tools;
- `tool-call-start` (`index`, `delta.message.tool_calls` with `id`, `function.name` and
  empty `arguments`), `tool-call-delta` (argument fragments in
  `delta.message.tool_calls.function.arguments`), `tool-call-end`;
- `citation-start` / `citation-end` carry citations of documents or tool results;
- `message-end` carries `delta.finish_reason`, `delta.usage` and, when the generation
  failed, `delta.error`; `debug` events carry a prompt when asked for.

Mapping decisions this adapter documents:

- **Text and reasoning.** `text` content is the answer. `thinking` content is reasoning,
  and so is `tool_plan` (the SDK describes it as "a chain-of-thought style reflection and
  plan that the model generates when working with Tools"); it is neither answer text nor
  dropped.
- **Citations** (`citation-start` events, `message.citations`) are not turned into
  text: they stay in `Generation.raw` with `retain_raw=True`, every event or the whole
  response as Cohere sent it.
- **Tool calls** are correlated by the provider's own `index` of the `tool-call-*`
  events, which is the call's slot (a namespace of its own, apart from the content
  blocks' `index`); a whole response's `tool_calls` take slots 0, 1, ... in order.
- **Finish reasons.** `COMPLETE` and `STOP_SEQUENCE` map to `stop`, `MAX_TOKENS` to
  `length`, `TOOL_CALL` to `tool_calls`. `ERROR` is a failed generation: the attempt
  fails with a typed error carrying `delta.error` (after the usage the same event
  reported). `TIMEOUT` and values unknown here pass through verbatim, so the core
  normalizes them to `other`.
- **Usage.** Cohere reports two measures: `tokens` (what the model read and wrote,
  Cohere's own prompt template included) and `billed_units` (what Cohere charges: in
  the recordings 1 billed input token against 496 model tokens, 4 against 70). This
  adapter reports `tokens`, because `Usage` counts tokens the model processed, as every
  other adapter does, and that is what context windows and throughput are measured in;
  `billed_units` are a pricing unit, not a token count, so they are never substituted
  when `tokens` is missing. `cached_tokens` (prompt tokens that hit the inference cache,
  at most `tokens.input_tokens` in every recording) is `cache_read_tokens`, counted
  inside `input_tokens`. `billed_units` stay in `Generation.raw`.
- **Requests.** `Sampling` maps `temperature`, `top_p` → `p`, `max_output_tokens` →
  `max_tokens`, `stop` → `stop_sequences`, `seed`, `presence_penalty` and
  `frequency_penalty`; `k` and other Cohere fields (`documents`, `citation_options`,
  `safety_mode`, `strict_tools`, `priority`) go through `provider_options`. Tools are
  sent as `{"type": "function", "function": {...}}`. `tool_choice` `required` and `none`
  become `REQUIRED` and `NONE` (Cohere has no other values): a named tool is sent as
  `REQUIRED` with only that tool offered. A `json_object` response format is
  `{"type": "json_object"}`, a `json_schema` one `{"type": "json_object",
  "json_schema": <schema>}`. Reasoning effort becomes `thinking`: `none` sends
  `{"type": "disabled"}`, the others `{"type": "enabled"}` with the `token_budget` in
  `THINKING_BUDGETS` (`high` sends none: the model's own limit).

Embed v2 (`POST /v2/embed`) and rerank v2 (`POST /v2/rerank`) follow the SDK's
`V2Client.embed`/`rerank` parameters and `EmbedByTypeResponse`/`V2RerankResponse`, and
real recordings (pydantic-ai's `test_embeddings/TestCohere.*`, langchain-cohere's
`test_langchain_cohere_rerank_*`):

- **Embed requests** are `{"model", "texts", "input_type", "embedding_types":
  ["float"], "output_dimension"?}`, at most 96 texts each (`embed_max_batch`).
  `input_type` is required by every current Cohere embed model (v3 and later): the
  neutral `query` and `document` become `search_query` and `search_document`, and
  Cohere's own names (`classification`, `clustering`, ...) pass through. **When the call
  gives none, `search_document` is sent** (what a text stored for retrieval is), with a
  warning on the result saying so: refusing would make every generic caller spell out a
  Cohere-only field, and sending nothing is a 400. Embed queries with
  `input_type="query"`. `embedding_types` is always `["float"]`, whatever `encoding`
  says: every Cohere embed model serves floats, and Cohere does not document the byte
  order of its `base64` type. An answer's `embeddings.float` is read first; one asked
  for another type through `provider_options` is read from `base64` (little-endian
  float32, as OpenAI's), `int8` or `uint8` (the quantized values, as floats); packed
  `binary`/`ubinary` vectors are refused before sending (they are bits, not floats).
  Usage is `meta.tokens.input_tokens` where present, else `meta.billed_units.input_tokens`:
  the recorded embed answers carry only `billed_units`, and for embeddings the billed
  input tokens are the tokens embedded (no prompt template is added).
- **Rerank requests** are `{"model", "query", "documents", "top_n"?}` (Cohere advises at
  most 1,000 documents a request: `rerank_max_documents`); `max_tokens_per_doc` and
  `priority` go through `provider_options`. The answer's `results[{index,
  relevance_score}]` come best first; `meta.billed_units.search_units` is the call's
  `search_units` (Cohere bills rerank by search units, not tokens, so its cost is not
  priced from the token table), and `meta.tokens.input_tokens`, when sent, its usage.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from .._adapters.base import HTTPAdapter, PartAssembler
from .._adapters.errormap import ErrorKind
from .._adapters.profile import AdapterProfile, InputSupport
from .._errors import ConfigError, ProtocolError
from .._knowledge.capabilities import ModelCapabilities
from .._messages import ContentPart, ImageContent, Message, TextContent
from .._request import GenerationRequest
from .._stream.parts import END, Part, ReasoningPart, TextPart, ToolCallPart, UsagePart
from .._types import Usage
from ._wire import as_dict, as_list, as_str, flushed, opt_dict, opt_int, opt_str

if TYPE_CHECKING:
    from .._embed._types import EmbedReply, EmbedRequest, RerankReply, RerankRequest

__all__ = [
    "CHAT_PATH",
    "COHERE_INPUTS",
    "DEFAULT_INPUT_TYPE",
    "EMBED_PATH",
    "INPUT_TYPES",
    "embed_input_type",
    "RERANK_PATH",
    "FALLBACK_API_KEY_ENV",
    "FINISH_MAP",
    "THINKING_BUDGETS",
    "CohereAdapter",
]

CHAT_PATH = "/v2/chat"
"""The Chat API v2 endpoint, under the base URL (`https://api.cohere.com`, as the SDK's
`ClientEnvironment.PRODUCTION`)."""

EMBED_PATH = "/v2/embed"
"""The Embed API v2 endpoint."""

RERANK_PATH = "/v2/rerank"
"""The Rerank API v2 endpoint."""

INPUT_TYPES: Mapping[str, str] = {"query": "search_query", "document": "search_document"}
"""Neutral `input_type` values and Cohere's names for them; others pass through."""

DEFAULT_INPUT_TYPE = "search_document"
"""The `input_type` sent when the call gives none (Cohere requires one)."""


def embed_input_type(input_type: str | None, provider: str) -> tuple[str, tuple[str, ...]]:
    """The `input_type` Cohere Embed is sent for a call's (on Cohere's API and on
    Bedrock alike), with the warning to attach when the call gave none.

    `query` and `document` become `search_query` and `search_document` (`INPUT_TYPES`),
    Cohere's own names pass through, and no input type sends `DEFAULT_INPUT_TYPE`:
    every current Cohere embed model requires one.
    """
    if input_type is not None:
        return INPUT_TYPES.get(input_type, input_type), ()
    return DEFAULT_INPUT_TYPE, (
        f"{provider}: Cohere Embed requires an input_type; none was given, so "
        f"{DEFAULT_INPUT_TYPE!r} was sent (pass input_type='query' for queries)",
    )


_EMBED_TYPES = ("float", "base64", "int8", "uint8")
"""The `embeddings` keys read, in order of preference (all decode to float vectors)."""

FALLBACK_API_KEY_ENV = "COHERE_API_KEY"
"""Read for the key when neither the settings nor `CO_API_KEY` give one: the SDK prefers
(and documents) `CO_API_KEY` and also accepts `COHERE_API_KEY`."""

FINISH_MAP: Mapping[str, str] = {
    "COMPLETE": "stop",
    "STOP_SEQUENCE": "stop",
    "MAX_TOKENS": "length",
    "TOOL_CALL": "tool_calls",
}
"""Cohere `finish_reason` values with a neutral meaning; `ERROR` fails the attempt, and
others (`TIMEOUT`, values added later) pass through verbatim."""

THINKING_BUDGETS: Mapping[str, int | None] = {
    "minimal": 512,
    "low": 1024,
    "medium": 4096,
    "high": None,
}
"""`thinking.token_budget` per reasoning effort; `None` sends no budget (the model's own
limit), and `none` disables thinking."""

COHERE_INPUTS = InputSupport(
    protocol="Cohere Chat v2",
    kinds=frozenset({"image", "image_url"}),
    notes=(
        (
            "document",
            "takes documents through the request's `documents` field (retrieval-augmented "
            "generation, via provider_options), not as message parts",
        ),
        ("document_url", "takes no documents as message parts"),
        ("audio", "takes no audio input"),
        ("audio_url", "takes no audio input"),
    ),
)
"""What a Cohere v2 message carries: text and `image_url` parts (a web URL or a base64
`data:` URL)."""

_PROVIDER = "Cohere Chat API v2"
_END: tuple[Part, ...] = (END,)


class CohereAdapter(HTTPAdapter):
    """Adapter for the Cohere Chat API v2 (`cohere`).

    Authenticates with `Authorization: Bearer <key>`; the key comes from the settings,
    `ANYINFER_<INSTANCE>_API_KEY`, `CO_API_KEY`, then `COHERE_API_KEY`. Streams drain to
    `data: [DONE]`, so the finish reason and usage of `message-end` are always read. See
    the module documentation for how requests and responses are mapped.
    """

    provider_id: ClassVar[str] = "cohere"
    finish_reasons: ClassVar[Mapping[str, str]] = FINISH_MAP
    profile: ClassVar[AdapterProfile] = AdapterProfile(
        conformance_dialect="cohere-v2",
        structured=ModelCapabilities(json_mode=True, json_schema=True),
        inputs=COHERE_INPUTS,
    )
    default_base_url: ClassVar[str | None] = "https://api.cohere.com"
    api_key_env: ClassVar[str | None] = "CO_API_KEY"
    fallback_api_key_env: ClassVar[str | None] = FALLBACK_API_KEY_ENV
    embed_max_batch: ClassVar[int] = 96
    rerank_max_documents: ClassVar[int] = 1000
    status_hints: ClassVar[Mapping[int, ErrorKind]] = {498: "auth"}
    """Cohere's error bodies (`{"id", "message"}`) carry no code, so the status decides,
    refined by the shared phrases (`too many tokens: ...` is a context-window error).
    498 (the SDK's `InvalidTokenError`) is an `AuthenticationError`; 499
    (`ClientClosedRequestError`, the request was cancelled) stays a non-retryable
    `ProviderError`."""

    def default_headers(self) -> dict[str, str]:
        """Bearer auth plus the configured headers."""
        return self.with_bearer(super().default_headers())

    # --- embed and rerank -------------------------------------------------------------

    async def embed(self, request: EmbedRequest) -> EmbedReply:
        """`POST /v2/embed`: one batch of texts (see the module documentation)."""
        from .._embed._types import EmbedReply
        from .._embed._wire import _count, _post_json, decode_vector

        pid = self.instance_id
        input_type, warnings = embed_input_type(request.input_type, pid)
        body: dict[str, Any] = {
            "model": request.model,
            "texts": list(request.inputs),
            "input_type": input_type,
            "embedding_types": ["float"],
        }
        if request.dimensions is not None:
            body["output_dimension"] = request.dimensions
        body.update(request.provider_options)
        asked = body.get("embedding_types")
        if isinstance(asked, list) and asked and not any(t in _EMBED_TYPES for t in asked):
            raise ConfigError(
                f"{pid}: embedding_types {asked!r} are packed bits, not float vectors; ask "
                f"for one of {', '.join(_EMBED_TYPES)}",
                provider=pid,
            )
        payload = as_dict(await _post_json(self, EMBED_PATH, body, request=request), pid, "body")
        embeddings = as_dict(payload.get("embeddings"), pid, "embeddings")
        kind = next((k for k in _EMBED_TYPES if embeddings.get(k) is not None), None)
        if kind is None:
            raise ProtocolError(
                f"{pid}: the embed answer has none of the embedding types "
                f"{', '.join(_EMBED_TYPES)}",
                provider=pid,
            )
        rows = as_list(embeddings[kind], pid, f"embeddings.{kind}")
        if len(rows) != len(request.inputs):
            raise _count(pid, len(rows), len(request.inputs))
        vectors = tuple(
            decode_vector(row, pid, f"embeddings.{kind}[{i}]") for i, row in enumerate(rows)
        )
        return EmbedReply(vectors=vectors, usage=self._meta_usage(payload), warnings=warnings)

    async def rerank(self, request: RerankRequest) -> RerankReply:
        """`POST /v2/rerank`: one request's documents, best first."""
        from .._embed._rankwire import ranked_documents, rerank_body
        from .._embed._types import RerankReply
        from .._embed._wire import _post_json

        pid = self.instance_id
        answer = await _post_json(self, RERANK_PATH, rerank_body(request), request=request)
        payload = as_dict(answer, pid, "body")
        ranked = ranked_documents(self, request, payload.get("results"), "results")
        meta = opt_dict(payload.get("meta"), pid, "meta") or {}
        billed = opt_dict(meta.get("billed_units"), pid, "meta.billed_units") or {}
        return RerankReply(
            ranked=ranked,
            usage=self._meta_usage(payload, billed_tokens=False),
            search_units=opt_int(billed.get("search_units"), pid, "meta.billed_units.search_units"),
        )

    def _meta_usage(self, payload: Mapping[str, Any], *, billed_tokens: bool = True) -> Usage:
        """Input tokens from `meta.tokens`, else (for embeddings) `meta.billed_units`."""
        pid = self.instance_id
        meta = opt_dict(payload.get("meta"), pid, "meta") or {}
        tokens = opt_dict(meta.get("tokens"), pid, "meta.tokens") or {}
        count = opt_int(tokens.get("input_tokens"), pid, "meta.tokens.input_tokens")
        if count is None and billed_tokens:
            billed = opt_dict(meta.get("billed_units"), pid, "meta.billed_units") or {}
            count = opt_int(billed.get("input_tokens"), pid, "meta.billed_units.input_tokens")
        return Usage(input_tokens=count, total_tokens=count)

    # --- request -------------------------------------------------------------------

    def build_body(self, request: GenerationRequest) -> tuple[dict[str, Any], list[str]]:
        """The JSON body for one request, and warnings about what could not be sent."""
        warnings: list[str] = []
        body: dict[str, Any] = {
            "model": request.model,
            "messages": [self.message_json(m) for m in request.messages],
        }
        if request.tools:
            forced = request.tool_choice_name()
            tools = [t for t in request.tools if forced is None or t.name == forced]
            if forced is not None and not tools:
                raise ConfigError(
                    f"tool_choice names {forced!r}, which is not among the tools offered",
                    provider=self.instance_id,
                )
            body["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": dict(t.parameters),
                    },
                }
                for t in tools
            ]
            if forced is not None or request.tool_choice == "required":
                body["tool_choice"] = "REQUIRED"
            elif request.tool_choice == "none":
                body["tool_choice"] = "NONE"
        if request.response_format is not None:
            fmt = request.response_format
            out: dict[str, Any] = {"type": "json_object"}
            if fmt.get("type") == "json_schema":
                out["json_schema"] = dict(fmt.get("schema", {}))
            body["response_format"] = out
        fields, dropped = request.sampling.wire_fields(
            {
                "temperature": "temperature",
                "top_p": "p",
                "max_output_tokens": "max_tokens",
                "stop": "stop_sequences",
                "seed": "seed",
                "presence_penalty": "presence_penalty",
                "frequency_penalty": "frequency_penalty",
            }
        )
        body.update(fields)
        if dropped:  # every control has a field today; this guards later additions
            warnings.append(f"{self.instance_id}: {_PROVIDER} has no {', '.join(dropped)}")
        thinking = self.thinking_json(request)
        if thinking is not None:
            body["thinking"] = thinking
        body["stream"] = request.stream
        body.update(request.provider_options)
        return body, warnings

    def thinking_json(self, request: GenerationRequest) -> dict[str, Any] | None:
        """The `thinking` object for the request's reasoning effort, or `None`."""
        effort = request.reasoning
        if effort is None:
            return None
        if effort == "none":
            return {"type": "disabled"}
        if effort not in THINKING_BUDGETS:
            raise ConfigError(
                f"unknown reasoning effort {effort!r}; expected one of "
                f"none, {', '.join(THINKING_BUDGETS)}",
                provider=self.instance_id,
            )
        budget = THINKING_BUDGETS[effort]
        out: dict[str, Any] = {"type": "enabled"}
        if budget is not None:
            out["token_budget"] = budget
        return out

    def message_json(self, m: Message) -> dict[str, Any]:
        """One message in Cohere v2 form (`system`, `user`, `assistant`, `tool`)."""
        if m.role == "tool":
            return {"role": "tool", "tool_call_id": m.tool_call_id, "content": m.text}
        if m.role == "assistant":
            out: dict[str, Any] = {"role": "assistant"}
            if m.text:
                out["content"] = m.text
            if m.tool_calls:
                out["tool_calls"] = [
                    {
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.name, "arguments": json.dumps(dict(c.arguments))},
                    }
                    for c in m.tool_calls
                ]
            return out
        if m.role == "system" or isinstance(m.content, str):
            return {"role": m.role, "content": m.text}
        return {"role": m.role, "content": [self.part_json(p) for p in m.content]}

    def part_json(self, part: ContentPart) -> dict[str, Any]:
        """One content part of a user message: `text` or `image_url`.

        Raises:
            ConfigError: For a document or audio part (the core refuses these before
                dispatch, from `COHERE_INPUTS`; this guards direct use).
        """
        if isinstance(part, TextContent):
            return {"type": "text", "text": part.text}
        if isinstance(part, ImageContent):
            return {"type": "image_url", "image_url": {"url": part.as_data_url()}}
        raise ConfigError(
            f"{self.instance_id}: {_PROVIDER} takes text and images in messages, not {part!r}",
            provider=self.instance_id,
        )

    # --- response ------------------------------------------------------------------

    def generate(self, request: GenerationRequest) -> AsyncIterator[Part]:
        """Send the request and yield its parts (see `Adapter.generate`)."""
        send = self.body_sender(request, CHAT_PATH, self.build_body)

        calls = PartAssembler()

        def decode(payload: Any, name: str | None) -> Iterable[Part]:
            event = (
                payload if type(payload) is dict else as_dict(payload, self.instance_id, "event")
            )
            kind = opt_str(event.get("type"), self.instance_id, "event.type") or name
            return self.parts_from_event(kind, event, calls)

        def whole(payload: Any) -> Iterable[Part]:
            return self.parts_from_response(payload, calls)

        return self.stream_parts(
            request, send, decode, whole=whole, sentinel=b"[DONE]", assembler=calls
        )

    def parts_from_event(
        self, kind: str | None, event: dict[str, Any], calls: PartAssembler
    ) -> Iterable[Part]:
        """Parts of one stream event."""
        pid = self.instance_id
        if kind in ("content-delta", "content-start"):
            content = _delta_message(event, pid, kind).get("content")
            return _content_parts(opt_dict(content, pid, f"{kind}.delta.message.content"), pid)
        if kind == "tool-plan-delta":
            plan = as_str(_delta_message(event, pid, kind).get("tool_plan"), pid, "tool_plan")
            return (ReasoningPart(plan),) if plan else ()
        if kind in ("tool-call-start", "tool-call-delta"):
            index = opt_int(event.get("index"), pid, f"{kind}.index")
            call = opt_dict(_delta_message(event, pid, kind).get("tool_calls"), pid, kind) or {}
            function = opt_dict(call.get("function"), pid, f"{kind}.tool_calls.function") or {}
            fragment = as_str(function.get("arguments"), pid, f"{kind}.function.arguments")
            if kind == "tool-call-delta":
                if not fragment:
                    return ()
                # A delta without an index continues the call opened last.
                slot = index if index is not None else max(calls.calls - 1, 0)
                calls.slot(slot)
                return (ToolCallPart(slot, None, None, fragment),)
            slot = index if index is not None else calls.calls
            calls.slot(slot)
            return (
                ToolCallPart(
                    slot,
                    opt_str(call.get("id"), pid, "tool-call-start.tool_calls.id") or None,
                    opt_str(function.get("name"), pid, "tool-call-start.function.name") or None,
                    fragment,
                ),
            )
        if kind == "message-end":
            delta = opt_dict(event.get("delta"), pid, "message-end.delta") or {}
            return self._end_parts(delta, "message-end.delta")
        # message-start, content-end, tool-call-end, citation-start/-end (kept in the
        # raw payload) and debug carry nothing to report.
        return ()

    def _end_parts(self, obj: dict[str, Any], where: str) -> Iterable[Part]:
        """Usage and finish reason of `message-end` (or a whole response); `ERROR` raises
        after the usage it reported."""
        pid = self.instance_id
        parts: list[Part] = []
        usage = opt_dict(obj.get("usage"), pid, f"{where}.usage")
        if usage:
            parsed = self.usage_from(usage)
            if not parsed.is_empty():
                parts.append(UsagePart(parsed))
        reason = opt_str(obj.get("finish_reason"), pid, f"{where}.finish_reason")
        if reason == "ERROR":
            message = opt_str(obj.get("error"), pid, f"{where}.error")
            error = self.error_from_parts(
                None, message or "the generation failed (finish_reason ERROR)", None, phase="stream"
            )
            return flushed(parts, error)
        parts.extend(self.finish_parts(reason, f"{where}.finish_reason"))
        return parts

    def parts_from_response(self, payload: Any, calls: PartAssembler) -> Iterator[Part]:
        """Parts of a whole (non-streamed) `V2ChatResponse`."""
        pid = self.instance_id
        body = as_dict(payload, pid, "response")
        message = opt_dict(body.get("message"), pid, "response.message") or {}
        for item in as_list(message.get("content"), pid, "message.content"):
            yield from _content_parts(as_dict(item, pid, "message.content[]"), pid)
        plan = as_str(message.get("tool_plan"), pid, "message.tool_plan")
        if plan:
            yield ReasoningPart(plan)
        for call in as_list(message.get("tool_calls"), pid, "message.tool_calls"):
            call = as_dict(call, pid, "message.tool_calls[]")
            function = opt_dict(call.get("function"), pid, "tool_calls[].function") or {}
            yield ToolCallPart(
                calls.slot(),
                opt_str(call.get("id"), pid, "tool_calls[].id") or None,
                opt_str(function.get("name"), pid, "tool_calls[].function.name") or None,
                as_str(function.get("arguments"), pid, "tool_calls[].function.arguments"),
            )
        yield from self._end_parts(body, "response")
        yield END

    def usage_from(self, u: dict[str, Any]) -> Usage:
        """Usage from a Cohere `usage` object: its `tokens` and `cached_tokens` (see the
        module documentation for why not `billed_units`)."""
        pid = self.instance_id
        tokens = opt_dict(u.get("tokens"), pid, "usage.tokens") or {}
        return Usage(
            input_tokens=opt_int(tokens.get("input_tokens"), pid, "usage.tokens.input_tokens"),
            output_tokens=opt_int(tokens.get("output_tokens"), pid, "usage.tokens.output_tokens"),
            cache_read_tokens=opt_int(u.get("cached_tokens"), pid, "usage.cached_tokens"),
        )


def _delta_message(event: dict[str, Any], pid: str, kind: str) -> dict[str, Any]:
    """`event.delta.message` (empty when absent)."""
    delta = opt_dict(event.get("delta"), pid, f"{kind}.delta") or {}
    return opt_dict(delta.get("message"), pid, f"{kind}.delta.message") or {}


def _content_parts(content: dict[str, Any] | None, pid: str) -> tuple[Part, ...]:
    """The text or thinking of one content object (a stream delta or a response item)."""
    if not content:
        return ()
    thinking = content.get("thinking")
    if thinking is not None:
        text = as_str(thinking, pid, "content.thinking")
        if text:
            return (ReasoningPart(text),)
        if content.get("type") == "thinking" or "text" not in content:
            return ()
    text = as_str(content.get("text"), pid, "content.text")
    return (TextPart(text),) if text else ()
