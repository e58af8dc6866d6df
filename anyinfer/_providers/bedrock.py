"""AWS Bedrock Converse (`POST /model/{modelId}/converse` and `/converse-stream`).

The wire shapes follow the Bedrock Runtime API reference (`Converse`, `ConverseStream`)
and recorded traffic (pydantic-ai's `test_bedrock` cassettes, bundled under
`tests/data/wire/pydantic__pydantic-ai`). A whole response is one JSON object:
`output.message.content[]` (blocks of `text`, `toolUse`, `reasoningContent`),
`stopReason`, `usage` and `metrics`. A streamed response is not server-sent events but
AWS *event-stream* framing (`application/vnd.amazon.eventstream`): binary messages, each
a prelude (total length, headers length, prelude CRC32), typed headers (`:message-type`,
`:event-type` or `:exception-type`, `:content-type`), a JSON payload and a message
CRC32. botocore's `EventStreamBuffer` checks both CRCs and decodes the headers; a frame
that fails either check is a `ProtocolError`, never a botocore exception. The events:

- `messageStart` (`role`), then content blocks keyed by `contentBlockIndex`: a
  `contentBlockStart` opens a `toolUse` block with its `toolUseId` and `name` (text and
  reasoning blocks have no start), `contentBlockDelta` carries `text`, `toolUse.input`
  (argument JSON fragments) or `reasoningContent` (`text`, `signature`,
  `redactedContent`), and `contentBlockStop` closes the block;
- `messageStop` carries `stopReason`;
- `metadata` carries `usage` and `metrics.latencyMs` and ends the stream: it is the
  protocol's sentinel, so the usage, which arrives after the finish reason, is always
  read (the trailing-usage rule); a stream cut between `messageStop` and `metadata`
  succeeds with the usage-may-be-incomplete warning;
- an exception message (`:message-type` `exception`, `:exception-type` such as
  `throttlingException`, `modelStreamErrorException`, `validationException`) fails the
  attempt with the typed error its type stands for (`EXCEPTION_KINDS`).

Every event payload also carries a `"p"` field of random padding, which means nothing.

Mapping decisions this adapter documents:

- **Endpoint.** `ProviderSettings.base_url`, else `ANYINFER_BEDROCK_BASE_URL`, else
  `https://bedrock-runtime.{region}.amazonaws.com`. The region is
  `options["region"]`, else `AWS_REGION` / `AWS_DEFAULT_REGION`, else the region of the
  AWS profile (botocore's configuration files). The model id goes into the path
  percent-encoded (`us.amazon.nova-micro-v1:0` → `us.amazon.nova-micro-v1%3A0`; ARNs of
  inference profiles too).
- **Credentials.** A Bedrock API key (`ProviderSettings.api_key`, else
  `ANYINFER_BEDROCK_API_KEY`, else `AWS_BEARER_TOKEN_BEDROCK`) is sent as `Authorization:
  Bearer`. Without one, each request is signed with SigV4 (botocore's `SigV4Auth`,
  service `bedrock`) using the standard AWS credential chain (environment variables,
  shared credentials and config files, `options["aws_profile"]` or `AWS_PROFILE`, SSO,
  container and instance roles); credentials are looked up off the event loop and
  refreshed by botocore when they expire. botocore is the `bedrock` extra.
- **Messages.** System messages become `system` text blocks; user content becomes
  `text`, `image` and PDF `document` blocks (bytes base64 in JSON, an image's `format`
  from its media type; only inline parts and `data:` URLs: Converse takes no web URLs;
  a document's `name` from its title or filename, see `document_name`); an assistant turn
  becomes `text` and `toolUse` blocks (or, when `Message.provider_data["bedrock"]
  ["content"]` holds native blocks, those, verbatim); tool results become `toolResult`
  blocks of a user message (`status: "error"` for failed tools), consecutive results and
  user turns sharing one message, as Converse wants roles to alternate.
- **Tools** become `toolConfig.tools[].toolSpec` (`name`, `description`,
  `inputSchema.json`); `tool_choice` `auto`, `required` (`any`) and a named tool
  (`tool`) become `toolConfig.toolChoice`. Converse has no `none`: the tools are left
  out, unless the conversation already holds tool calls (Converse then requires the
  tool configuration), in which case they are sent with no `toolChoice` and a warning.
- **Sampling** goes to `inferenceConfig` (`maxTokens`, `temperature`, `topP`,
  `stopSequences`); `seed` and the penalties are left out with a warning, as is a
  response format (Converse has no JSON mode: structured output uses tools or
  instructions).
- **Reasoning.** For Anthropic models (a model id containing `anthropic.`) the effort
  becomes `additionalModelRequestFields.thinking` with the Anthropic adapter's budgets
  (`minimal`/`low` 1024, `medium` 4096, `high` 16384 tokens; `maxTokens` is raised to
  budget + 4096 when the request sets no cap, and the budget shrinks under a cap, as in
  the Anthropic adapter). Other model families name their reasoning switch differently,
  so there the effort is left out with a warning; pass the model's own field through
  `provider_options={"additionalModelRequestFields": {...}}` (provider options are
  merged into the body last).
- **Finish reasons.** `end_turn` and `stop_sequence` map to `stop`; `max_tokens` and
  `model_context_window_exceeded` to `length`; `tool_use` to `tool_calls`;
  `guardrail_intervened` and `content_filtered` to `content_filter`. Other values pass
  through verbatim, so the core normalizes them to `other`.
- **Usage.** `inputTokens` excludes prompt-cache reads and writes
  (`cacheReadInputTokens`, `cacheWriteInputTokens`), which Bedrock counts apart, as
  Anthropic does; Bedrock's own `totalTokens` also adds the cache figures, so it is not
  used: `total_tokens` is input plus output, as everywhere in AnyInfer.
  `metrics.latencyMs` becomes the phase `provider_latency_ms`.
- **Tool calls.** Only client-side `toolUse` blocks are calls; a server-side tool's
  block (`"type": "server_tool_use"`, e.g. Nova's code interpreter) and its `toolResult`
  block run at Bedrock and stay in the raw payload only. A call's slot is its order among
  the client-side `toolUse` blocks, keyed by `contentBlockIndex`.
- **Multi-turn.** With `retain_raw`, `Generation.raw` keeps every event payload (or the
  whole response); `content_blocks(raw)` rebuilds the turn's Converse blocks from either
  (reasoning signatures and `redactedContent` intact), and `assistant_message(generation)`
  carries them in `Message.provider_data["bedrock"]["content"]`, which this adapter sends
  verbatim: a Claude tool-use turn with thinking needs its signed reasoning back.
- **Embeddings** (`embed()`) use InvokeModel, `POST /model/{modelId}/invoke`, signed like
  Converse, with a body the model's family decides (from the id: `amazon.titan-embed-*`,
  `cohere.embed-*`, region prefixes and ARNs ending in one allowed;
  `options["embedding_family"]` for ids that name no model). Titan Text Embeddings take
  `{"inputText", "dimensions"?}`, one text a request, so a batch (up to
  `embed_max_batch`, 96) fans out, `anyinfer._embed._fanout.DEFAULT_FANOUT` requests at
  a time, and fails with the first typed error; the answer's `embedding` and
  `inputTextTokenCount` are read.
  Cohere Embed takes `{"texts", "input_type", "output_dimension"?}` (the input type
  mapped as for Cohere's own API, `search_document` with a warning when none is given:
  Bedrock requires one); its answer is a list of vectors (`embeddings_floats`) or
  `{"float": [...]}` (`embeddings_by_type`), and usage comes from the
  `x-amzn-bedrock-input-token-count` header every recorded answer carries. The
  `x-amzn-bedrock-invocation-latency` header becomes the phase `provider_latency_ms`.
- **Errors.** An HTTP error names its exception in the `x-amzn-errortype` header
  (`ThrottlingException:http://internal.amazon.com/coral/...`) or the body's `__type`;
  the message is the body's `message` (or `Message`). The status decides the error class
  first (`anyinfer._adapters.errormap`), the exception type refines it
  (`EXCEPTION_KINDS`); `Retry-After`, when a proxy sends one, is honoured.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import struct
from array import array
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Callable,
    Generator,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import quote

import httpx

from .._adapters.base import HTTPAdapter, PartAssembler, SSEEvent, parse_retry_after
from .._adapters.errormap import ErrorKind, brief_json
from .._adapters.framing import EventFramer, loads_or_none
from .._adapters.profile import AdapterProfile, InputSupport, UsageConvention
from .._client.instance import resolve_base_url
from .._errors import ConfigError, ProtocolError, ProviderError, ResponseTooLargeError
from .._messages import ContentPart, DocumentContent, Message, TextContent
from .._request import GenerationRequest
from .._settings import ProviderSettings
from .._stream.parts import (
    END,
    Part,
    PhasesPart,
    ReasoningPart,
    TextPart,
    UsagePart,
)
from .._types import Generation, Usage
from ._wire import as_dict, as_list, as_str, native_turn, opt_dict, opt_int, opt_str

if TYPE_CHECKING:
    from .._embed._types import EmbedReply, EmbedRequest

__all__ = [
    "BEDROCK_INPUTS",
    "DEFAULT_SERVICE",
    "EXCEPTION_KINDS",
    "FINISH_MAP",
    "PROVIDER_DATA_KEY",
    "BedrockAdapter",
    "EventStreamFramer",
    "SigV4Auth",
    "StreamState",
    "assistant_message",
    "content_blocks",
    "document_name",
    "embedding_family",
    "endpoint_for",
]

DEFAULT_SERVICE = "bedrock"
"""The SigV4 signing name of the Bedrock Runtime service."""

PROVIDER_DATA_KEY = "bedrock"
"""`Message.provider_data` key under which an assistant turn may carry native blocks."""

FINISH_MAP: Mapping[str, str] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_calls",
    "guardrail_intervened": "content_filter",
    "content_filtered": "content_filter",
}
"""Bedrock `stopReason` values with a neutral meaning; others pass through verbatim."""

EXCEPTION_KINDS: Mapping[str, ErrorKind] = {
    "throttlingexception": "rate_limit",
    "servicequotaexceededexception": "quota",
    "accessdeniedexception": "auth",
    "unrecognizedclientexception": "auth",
    "invalidsignatureexception": "auth",
    "incompletesignatureexception": "auth",
    "missingauthenticationtokenexception": "auth",
    "expiredtokenexception": "auth",
    "resourcenotfoundexception": "not_found",
    "modeltimeoutexception": "timeout",
    "serviceunavailableexception": "overloaded",
    "modelnotreadyexception": "overloaded",
    "internalserverexception": "server",
    "modelerrorexception": "server",
    "modelstreamerrorexception": "server",
    "validationexception": "invalid",
}
"""What each Bedrock exception (lower-cased; the stream spells them `throttlingException`,
HTTP errors `ThrottlingException`) means. The HTTP status still decides the class: the
kind only refines a generic status, and decides alone for an exception inside a stream.
`validationException` is a rejected request, refined further by its message (`Input is
too long for requested model.` is a context-window error)."""

_IMAGE_FORMATS: Mapping[str, str] = {
    "image/png": "png",
    "image/jpeg": "jpeg",
    "image/jpg": "jpeg",
    "image/gif": "gif",
    "image/webp": "webp",
}

INPUT_TOKENS_HEADER = "x-amzn-bedrock-input-token-count"
"""InvokeModel's input token count (in every recorded answer, Cohere's too)."""

INVOCATION_LATENCY_HEADER = "x-amzn-bedrock-invocation-latency"
"""InvokeModel's model latency in milliseconds (the phase `provider_latency_ms`)."""

_TITAN_EMBED = re.compile(r"(?:^|\.)amazon\.titan-embed-")
_COHERE_EMBED = re.compile(r"(?:^|\.)cohere\.embed-")

_PRELUDE = 12
"""Bytes of an event-stream prelude: total length, headers length, prelude CRC32."""
_MIN_MESSAGE = 16
"""The smallest event-stream message: a prelude and the message CRC32."""
_COMPACT = 64 * 1024


def endpoint_for(region: str) -> str:
    """The Bedrock Runtime endpoint of an AWS region."""
    return f"https://bedrock-runtime.{region}.amazonaws.com"


def _need_botocore(instance: str) -> None:
    from .._extras import missing, missing_hint

    if missing(["botocore"]):
        raise ConfigError(missing_hint("the bedrock adapter", ["botocore"]), provider=instance)


# --- event-stream framing ----------------------------------------------------------------


class EventStreamFramer:
    """Splits an AWS event-stream body into messages, in linear time, under a frame cap.

    The framer gathers the bytes of one message in its own buffer (reading the total
    length from the prelude) and hands each whole message to botocore's
    `EventStreamBuffer`, which checks the prelude CRC as soon as the 12 prelude bytes are
    here, then the message CRC, and decodes the headers. Each message comes out as an
    `SSEEvent`: for an event, its `:event-type` and JSON payload; for an exception,
    `exception:<:exception-type>` and its payload; for an error message,
    `error:<:error-code>` and a JSON object holding `:error-message`.

    Args:
        provider: The provider instance, for errors.
        max_frame_bytes: The largest message accepted.

    Raises:
        ProtocolError: From `feed`, for a CRC mismatch, an impossible length or an
            undecodable header.
        ResponseTooLargeError: From `feed`, for a message larger than the cap, as soon as
            the first four bytes of its prelude declare it (before its CRC is checked:
            nothing larger than the cap is ever buffered, whatever the bytes are).
    """

    __slots__ = ("_buf", "_decoder", "_limit", "_pos", "_provider", "_total")

    def __init__(self, provider: str, max_frame_bytes: int) -> None:
        self._provider = provider
        self._limit = max_frame_bytes
        self._buf = bytearray()
        self._pos = 0
        self._total: int | None = None
        self._decoder: Any = None

    @property
    def pending(self) -> int:
        """Bytes of a message not complete yet."""
        return len(self._buf) - self._pos

    def _bad(self, what: str) -> ProtocolError:
        return ProtocolError(
            f"{self._provider}: malformed event-stream frame from the provider: {what}",
            provider=self._provider,
        )

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        """Consume `chunk`; return the messages it completed, as `SSEEvent`s."""
        from botocore.eventstream import (  # type: ignore[import-untyped]
            EventStreamBuffer,
            InvalidHeadersLength,
            InvalidPayloadLength,
            ParserError,
        )

        buf = self._buf
        buf += chunk
        out: list[SSEEvent] = []
        while True:
            start = self._pos
            avail = len(buf) - start
            if self._total is None:
                if avail >= 4:
                    # The frame cap holds at once, before the prelude is even complete
                    # (and whatever its CRC says): nothing larger is ever buffered.
                    (declared,) = struct.unpack(">I", buf[start : start + 4])
                    if declared > self._limit:
                        raise self._too_large(f"a message of {declared} bytes")
                if avail < _PRELUDE:
                    break
                prelude = bytes(buf[start : start + _PRELUDE])
                decoder = EventStreamBuffer()
                decoder.add_data(prelude)
                try:
                    decoder.next()  # checks the prelude CRC and the lengths
                except StopIteration:
                    pass
                except (InvalidHeadersLength, InvalidPayloadLength) as exc:
                    raise self._too_large(str(exc)) from None
                except ParserError as exc:
                    raise self._bad(str(exc)) from None
                total, headers = struct.unpack(">II", prelude[:8])
                if total < _MIN_MESSAGE or headers > total - _MIN_MESSAGE:
                    raise self._bad(f"total length {total} with headers length {headers}")
                self._total = total
                self._decoder = decoder
            total = self._total
            if avail < total:
                break
            decoder = self._decoder
            decoder.add_data(bytes(buf[start + _PRELUDE : start + total]))
            try:
                message = decoder.next()
            except StopIteration:  # pragma: no cover - the whole message is there
                raise self._bad("incomplete message") from None
            except ParserError as exc:
                raise self._bad(str(exc)) from None
            except (ValueError, KeyError, IndexError, struct.error, UnicodeDecodeError) as exc:
                raise self._bad(f"undecodable headers ({exc!r})") from None
            self._pos = start + total
            self._total = None
            self._decoder = None
            out.append(self._event(message.headers, message.payload))
        if self._pos and (self._pos == len(buf) or self._pos >= _COMPACT):
            del buf[: self._pos]
            self._pos = 0
        return out

    def close(self) -> list[SSEEvent]:
        """The end of the body: nothing. A message it cut off is dropped, so the stream
        ends without its sentinel."""
        return []

    def _too_large(self, what: str) -> ResponseTooLargeError:
        return ResponseTooLargeError(
            f"{self._provider}: one event-stream message of the response is larger than "
            f"max_frame_bytes={self._limit} ({what}; raise the provider option "
            "max_frame_bytes to accept larger frames)",
            provider=self._provider,
        )

    def _event(self, headers: Mapping[str, Any], payload: bytes) -> SSEEvent:
        kind = headers.get(":message-type")
        if kind == "event":
            name = headers.get(":event-type")
            if not isinstance(name, str):
                raise self._bad("an event without :event-type")
            return SSEEvent(name, payload or b"{}")
        if kind == "exception":
            name = headers.get(":exception-type")
            return SSEEvent(f"exception:{name if isinstance(name, str) else ''}", payload)
        if kind == "error":
            code = headers.get(":error-code")
            text = headers.get(":error-message")
            body = json.dumps({"message": text if isinstance(text, str) else ""})
            return SSEEvent(f"error:{code if isinstance(code, str) else ''}", body.encode())
        raise self._bad(f"unknown :message-type {kind!r}")


class _JSONAnswerFramer:
    """The framer of a 200 answered in JSON to a stream request (a gateway reporting an
    error its own way): it gathers the body and, at its end, raises the error the body
    reports, as an error frame inside a stream is read (`error_from_parts`).

    Args:
        adapter: The adapter, for its error reading.
        content_type: The answer's content type, for the message.
    """

    __slots__ = ("_adapter", "_chunks", "_content_type")

    def __init__(self, adapter: HTTPAdapter, content_type: str) -> None:
        self._adapter = adapter
        self._content_type = content_type
        self._chunks: list[bytes] = []

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        """Keep `chunk`; no events."""
        self._chunks.append(chunk)
        return []

    def close(self) -> list[SSEEvent]:
        """Raise the error the whole body reports.

        Raises:
            ProviderError: The typed error its message and code stand for.
        """
        adapter = self._adapter
        message, code = adapter.error_message(b"".join(self._chunks))
        raise adapter.error_from_parts(
            None,
            f"a stream request was answered with {self._content_type}, not an event stream: "
            f"{message}",
            code,
            phase="stream",
        )


# --- SigV4 -------------------------------------------------------------------------------


class SigV4Auth(httpx.Auth):
    """Signs each request with AWS Signature Version 4 (botocore's `SigV4Auth`).

    The signature covers the method, the path as sent, the query, the `host`,
    `content-type` and `x-amz-date` headers (and `x-amz-security-token` for temporary
    credentials) and the body's SHA-256. Credentials come from `resolve` (botocore's
    credential chain, which may ask the network: SSO, a container or instance role), called
    in a worker thread on the first request and kept once it finds some; botocore
    refreshes temporary credentials before they expire, also in that thread.

    Args:
        resolve: Returns botocore `Credentials`, or `None` when the chain finds none (the
            request then fails with a `ConfigError` naming what to set, unsent).
        region: The signing region.
        service: The signing name (`bedrock`).
        instance: The provider instance, for errors.
    """

    requires_request_body = True

    def __init__(
        self, resolve: Callable[[], Any], region: str, service: str, instance: str
    ) -> None:
        self.resolve = resolve
        self.credentials: Any = None
        self.region = region
        self.service = service
        self.instance = instance

    def sign(self, request: httpx.Request, frozen: Any) -> None:
        """Add `X-Amz-Date`, `X-Amz-Security-Token` and `Authorization` to `request`.

        Args:
            request: The request, body read.
            frozen: botocore `ReadOnlyCredentials`.
        """
        from botocore.auth import SigV4Auth as BotoSigV4  # type: ignore[import-untyped]
        from botocore.awsrequest import AWSRequest  # type: ignore[import-untyped]

        signed = {"host": request.url.netloc.decode("ascii")}
        content_type = request.headers.get("content-type")
        if content_type is not None:
            signed["content-type"] = content_type
        aws = AWSRequest(
            method=request.method, url=str(request.url), data=request.content, headers=signed
        )
        BotoSigV4(frozen, self.service, self.region).add_auth(aws)
        for name in ("X-Amz-Date", "X-Amz-Security-Token", "Authorization"):
            value = aws.headers.get(name)
            if value is not None:
                request.headers[name] = value

    def _frozen(self) -> Any:
        if self.credentials is None:
            self.credentials = self.resolve()
            if self.credentials is None:
                return None
        return self.credentials.get_frozen_credentials()

    async def async_auth_flow(
        self, request: httpx.Request
    ) -> AsyncGenerator[httpx.Request, httpx.Response]:
        """Sign `request` (credentials read off the loop), then send it."""
        frozen = await asyncio.to_thread(self._frozen)
        if frozen is None:
            raise ConfigError(
                f"{self.instance}: no AWS credentials found for SigV4 signing: set "
                "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, an AWS profile "
                "(AWS_PROFILE or options['aws_profile']), or a Bedrock API key "
                "(AWS_BEARER_TOKEN_BEDROCK)",
                provider=self.instance,
            )
        self.sign(request, frozen)
        yield request

    def sync_auth_flow(
        self, request: httpx.Request
    ) -> Generator[httpx.Request, httpx.Response, None]:
        """Sign `request` on the calling thread, then send it."""
        frozen = self._frozen()
        if frozen is None:
            raise ConfigError(f"{self.instance}: no AWS credentials found", provider=self.instance)
        self.sign(request, frozen)
        yield request


# --- the adapter -------------------------------------------------------------------------


@dataclass(slots=True)
class StreamState:
    """What one stream has opened: client-side tool calls (slots keyed by their
    `contentBlockIndex`) and the blocks of server-side tools, whose deltas are skipped."""

    calls: PartAssembler = field(default_factory=PartAssembler)
    server_blocks: set[int | None] = field(default_factory=set)


_NOT_CARRIED = "Bedrock Converse takes images and documents as bytes (no web URLs) and no audio"

BEDROCK_INPUTS = InputSupport(
    protocol="Bedrock Converse",
    kinds=frozenset({"image", "document"}),
    notes=(
        ("image_url", _NOT_CARRIED),
        ("document_url", _NOT_CARRIED),
        ("audio", _NOT_CARRIED),
        ("audio_url", _NOT_CARRIED),
    ),
)
"""What Converse carries here: image and PDF `document` blocks, by bytes (S3 locations
and other document formats are not mapped)."""

_NAME_CHARS = re.compile(r"[^A-Za-z0-9\s\-()\[\]]+")


def document_name(label: str | None) -> str:
    """A `DocumentBlock.name` Converse accepts, from a document's title or filename.

    Converse allows only letters, digits, single whitespace, hyphens, parentheses and
    square brackets, 1 to 200 characters (a dot, as in `report.pdf`, is refused), so
    other characters become hyphens and the extension is dropped; `document` when
    nothing is left.
    """
    text = (label or "").strip()
    if text.lower().endswith(".pdf"):
        text = text[:-4]
    text = " ".join(_NAME_CHARS.sub("-", text).split())[:200].strip()
    return text or "document"


class BedrockAdapter(HTTPAdapter):
    """Adapter for AWS Bedrock Converse (`bedrock`, aliases `bedrock-converse`,
    `aws-bedrock`).

    Sends `POST /model/{modelId}/converse-stream` (event-stream framing) or `/converse`
    (one JSON object), signed with SigV4 from the AWS credential chain, or with a Bedrock
    API key as a bearer token. See the module documentation for how requests and
    responses are mapped. Needs botocore (the `bedrock` extra).

    Provider options: `region` (the AWS region), `aws_profile` (a profile of the AWS
    configuration files).
    """

    provider_id: ClassVar[str] = "bedrock"
    profile: ClassVar[AdapterProfile] = AdapterProfile(
        aliases=("bedrock-converse", "aws-bedrock"),
        conformance_dialect="bedrock-converse",
        # inputTokens leaves cache reads and writes out; outputTokens includes thinking
        usage=UsageConvention(input_includes_cache=False),
        inputs=BEDROCK_INPUTS,
    )
    default_base_url: ClassVar[str | None] = None
    api_key_env: ClassVar[str | None] = "AWS_BEARER_TOKEN_BEDROCK"
    api_key_required: ClassVar[bool] = False
    """The AWS credential chain can sign without a key, so none is required."""
    finish_reasons: ClassVar[Mapping[str, str]] = FINISH_MAP

    def __init__(self, settings: ProviderSettings) -> None:
        _need_botocore(settings.instance_id)
        self.region = self._region(settings)
        if not resolve_base_url(settings, None):
            if self.region is None:
                raise ConfigError(
                    f"provider {settings.instance_id!r} needs an AWS region: set "
                    "options['region'], AWS_REGION or AWS_DEFAULT_REGION (or base_url)",
                    provider=settings.instance_id,
                )
            settings = replace(settings, base_url=endpoint_for(self.region))
        super().__init__(settings)
        if not settings.api_key:
            if self.region is None:
                raise ConfigError(
                    f"provider {settings.instance_id!r} signs requests with SigV4 and needs "
                    "an AWS region: set options['region'], AWS_REGION or AWS_DEFAULT_REGION",
                    provider=settings.instance_id,
                )
            session = self._session(settings)
            self.http.auth = SigV4Auth(
                session.get_credentials, self.region, DEFAULT_SERVICE, self.instance_id
            )

    @staticmethod
    def _session(settings: ProviderSettings) -> Any:
        import botocore.session  # type: ignore[import-untyped]

        profile = settings.options.get("aws_profile")
        if profile is not None and not isinstance(profile, str):
            raise ConfigError(
                f"options['aws_profile'] must be a string, got {profile!r}",
                provider=settings.instance_id,
            )
        return botocore.session.Session(profile=profile)

    @classmethod
    def _region(cls, settings: ProviderSettings) -> str | None:
        region = settings.options.get("region")
        if region is not None:
            if not isinstance(region, str) or not region:
                raise ConfigError(
                    f"options['region'] must be a region name, got {region!r}",
                    provider=settings.instance_id,
                )
            return region
        for name in ("AWS_REGION", "AWS_DEFAULT_REGION"):
            if os.environ.get(name):
                return os.environ[name]
        found = cls._session(settings).get_config_variable("region")
        return found if isinstance(found, str) and found else None

    def default_headers(self) -> dict[str, str]:
        """`Authorization: Bearer` for a Bedrock API key, and the configured headers."""
        return self.with_bearer(super().default_headers())

    # --- request -------------------------------------------------------------------

    def path_for(self, request: GenerationRequest) -> str:
        """`/model/{modelId}/converse-stream` or `/converse`, the id percent-encoded."""
        action = "converse-stream" if request.stream else "converse"
        return f"/model/{quote(request.model, safe='')}/{action}"

    def build_body(self, request: GenerationRequest) -> tuple[dict[str, Any], list[str]]:
        """The JSON body for one request, and warnings about what could not be sent."""
        warnings: list[str] = []
        pid = self.instance_id
        body: dict[str, Any] = {"messages": self.messages_json(request.messages)}
        system = [{"text": m.text} for m in request.messages if m.role == "system" and m.text]
        if system:
            body["system"] = system
        s = request.sampling
        fields, dropped = s.wire_fields(
            {
                "max_output_tokens": "maxTokens",
                "temperature": "temperature",
                "top_p": "topP",
                "stop": "stopSequences",
            }
        )
        if dropped:
            warnings.append(f"{pid}: Bedrock Converse has no {', '.join(dropped)}; not sent")
        thinking = self.thinking_json(request, s.max_output_tokens, warnings)
        if thinking is not None:
            from .anthropic import DEFAULT_MAX_TOKENS

            if s.max_output_tokens is None:
                fields["maxTokens"] = thinking["budget_tokens"] + DEFAULT_MAX_TOKENS
            body["additionalModelRequestFields"] = {"thinking": thinking}
        if fields:
            body["inferenceConfig"] = fields
        tools = self.tool_config(request, warnings)
        if tools is not None:
            body["toolConfig"] = tools
        if request.response_format is not None:
            warnings.append(
                f"{pid}: Bedrock Converse has no response format (JSON mode or schema); not sent"
            )
        body.update(request.provider_options)
        return body, warnings

    def thinking_json(
        self, request: GenerationRequest, cap: int | None, warnings: list[str]
    ) -> dict[str, Any] | None:
        """Anthropic's `thinking` object for an Anthropic model's reasoning effort."""
        from .anthropic import thinking_budget, thinking_object

        effort = request.reasoning
        if effort is not None and effort != "none" and "anthropic." not in request.model:
            thinking_budget(effort, self.instance_id)  # an unknown effort is still an error
            warnings.append(
                f"{self.instance_id}: reasoning={effort!r} was not sent: only Anthropic "
                "models on Bedrock take a reasoning budget through this adapter; pass the "
                "model's own switch in provider_options['additionalModelRequestFields']"
            )
            return None
        return thinking_object(effort, cap, self.instance_id, warnings)

    def tool_config(self, request: GenerationRequest, warnings: list[str]) -> dict[str, Any] | None:
        """`toolConfig`: the tools and the tool choice (see the module documentation)."""
        if not request.tools:
            return None
        tools = [
            {"toolSpec": self.tool_spec(t.name, t.description, t.parameters)} for t in request.tools
        ]
        if request.tool_choice == "none":
            used = any(m.tool_calls or m.role == "tool" for m in request.messages)
            if not used:
                return None
            warnings.append(
                f"{self.instance_id}: Bedrock Converse has no tool_choice 'none'; the tools "
                "were sent (the conversation holds tool calls) with the model's default"
            )
            return {"tools": tools}
        forced = request.tool_choice_name()
        if forced:
            choice: dict[str, Any] = {"tool": {"name": forced}}
        elif request.tool_choice == "required":
            choice = {"any": {}}
        else:
            choice = {"auto": {}}
        return {"tools": tools, "toolChoice": choice}

    @staticmethod
    def tool_spec(name: str, description: str, parameters: Mapping[str, Any]) -> dict[str, Any]:
        """One `toolSpec`."""
        spec: dict[str, Any] = {"name": name}
        if description:
            spec["description"] = description
        spec["inputSchema"] = {"json": dict(parameters)}
        return spec

    def messages_json(self, messages: Sequence[Message]) -> list[dict[str, Any]]:
        """The conversation as Converse messages, user turns and tool results merged."""
        out: list[dict[str, Any]] = []
        for m in messages:
            if m.role == "system":
                continue
            if m.role == "tool":
                role, blocks = "user", [self.tool_result_json(m)]
            elif m.role == "assistant":
                role, blocks = "assistant", self.assistant_content(m)
            else:
                role, blocks = "user", self.content_json(m.content)
            if out and out[-1]["role"] == role:
                out[-1]["content"].extend(blocks)
            else:
                out.append({"role": role, "content": blocks})
        return out

    def content_json(self, content: str | tuple[ContentPart, ...]) -> list[dict[str, Any]]:
        """Text, image and document blocks (empty text left out: Converse refuses blank
        text; documents of one message get distinct names)."""
        if isinstance(content, str):
            return [{"text": content}] if content else []
        blocks = [b for b in (self.part_json(p) for p in content) if b is not None]
        seen: dict[str, int] = {}
        for block in blocks:
            doc = block.get("document")
            if doc is not None:
                n = seen[doc["name"]] = seen.get(doc["name"], 0) + 1
                if n > 1:
                    doc["name"] = f"{doc['name'][:190]} ({n})"
        return blocks

    def part_json(self, part: ContentPart) -> dict[str, Any] | None:
        """A `text` block, an `image` block with its bytes (base64 in JSON), or a PDF
        `document` block with its bytes and a name Converse accepts."""
        if isinstance(part, TextContent):
            return {"text": part.text} if part.text else None
        if isinstance(part, DocumentContent):
            data = part.base64_data()
            if data is None:  # the input rule refuses document URLs before this
                raise ConfigError(
                    f"{self.instance_id}: Bedrock Converse takes documents as bytes, not URLs",
                    provider=self.instance_id,
                )
            name = document_name(part.title or part.filename)
            return {"document": {"format": "pdf", "name": name, "source": {"bytes": data}}}
        inline = part.base64_data()
        if inline is None:
            raise ConfigError(
                f"{self.instance_id}: Bedrock Converse takes images as bytes "
                "(ImageContent(data=...) or a data: URL), not web URLs",
                provider=self.instance_id,
            )
        media_type, encoded = inline[0], inline[1]
        fmt = _IMAGE_FORMATS.get(media_type.lower())
        if fmt is None:
            raise ConfigError(
                f"{self.instance_id}: Bedrock Converse takes png, jpeg, gif or webp images, "
                f"not {media_type!r}",
                provider=self.instance_id,
            )
        return {"image": {"format": fmt, "source": {"bytes": encoded}}}

    def tool_result_json(self, m: Message) -> dict[str, Any]:
        """A `toolResult` block answering `m.tool_call_id`."""
        block: dict[str, Any] = {
            "toolUseId": m.tool_call_id,
            "content": self.content_json(m.content) or [{"text": "(no output)"}],
        }
        if m.is_error:
            block["status"] = "error"
        return {"toolResult": block}

    def assistant_content(self, m: Message) -> list[dict[str, Any]]:
        """An assistant turn: its native blocks when kept, else text and `toolUse`."""
        native = m.provider_data.get(PROVIDER_DATA_KEY)
        if isinstance(native, Mapping) and isinstance(native.get("content"), list):
            return list(native["content"])
        blocks = self.content_json(m.content)
        for call in m.tool_calls:
            blocks.append(
                {
                    "toolUse": {
                        "toolUseId": call.id,
                        "name": call.name,
                        "input": dict(call.arguments),
                    }
                }
            )
        return blocks

    # --- response ------------------------------------------------------------------

    def generate(self, request: GenerationRequest) -> AsyncIterator[Part]:
        """Send the request and yield its parts (see `Adapter.generate`)."""
        send = self.body_sender(request, self.path_for(request), self.build_body)
        state = StreamState()

        def decode(payload: Any, name: str | None) -> Iterable[Part]:
            return self.parts_from_event(name, payload, state)

        return self.stream_parts(
            request, send, decode, whole=self.parts_from_response, assembler=state.calls
        )

    def event_framer(self, response: httpx.Response, *, bare_json: bool = False) -> EventFramer:
        """Frame the body as AWS event-stream messages (not server-sent events).

        Bedrock streams `application/vnd.amazon.eventstream`; each message comes out as
        an `SSEEvent` named by its type (see `EventStreamFramer`). A message cut off by
        the end of the body is dropped: the stream then ends without its sentinel. A 200
        answer in JSON instead is read as an error body (`_JSONAnswerFramer`).

        Args:
            response: The open response.
            bare_json: Unused (SSE only).
        """
        content_type = response.headers.get("content-type", "").lower()
        if "json" in content_type:
            return _JSONAnswerFramer(self, content_type)
        return EventStreamFramer(self.instance_id, self.max_frame_bytes)

    def parts_from_event(
        self, name: str | None, payload: Any, state: StreamState
    ) -> Iterator[Part]:
        """Parts of one stream event (named by its `:event-type`)."""
        pid = self.instance_id
        event = as_dict(payload, pid, name or "event")
        if name == "contentBlockDelta":
            index = opt_int(event.get("contentBlockIndex"), pid, "contentBlockIndex")
            delta = as_dict(event.get("delta"), pid, "contentBlockDelta.delta")
            yield from self._delta_parts(index, delta, state)
        elif name == "contentBlockStart":
            index = opt_int(event.get("contentBlockIndex"), pid, "contentBlockIndex")
            start = as_dict(event.get("start"), pid, "contentBlockStart.start")
            use = opt_dict(start.get("toolUse"), pid, "contentBlockStart.start.toolUse")
            if use is not None and not _client_side(use, pid):
                state.server_blocks.add(index)
            elif use is not None:
                call_id, tool = self.tool_call_header(use, "toolUse", id_key="toolUseId")
                yield from state.calls.call(index, call_id, tool, "")
        elif name == "messageStop":
            yield from self.finish_parts(event.get("stopReason"), "messageStop.stopReason")
        elif name == "metadata":
            yield from self._metadata_parts(event)
            yield END
        elif name is not None and name.startswith(("exception:", "error:")):
            kind, _, code = name.partition(":")
            message = event.get("message", event.get("Message"))
            text = message if isinstance(message, str) else brief_json(event)
            raise self.error_from_parts(None, text, code or kind, phase="stream")
        # `messageStart`, `contentBlockStop` and unknown events carry nothing to report.

    def _delta_parts(
        self, index: int | None, delta: dict[str, Any], state: StreamState
    ) -> Iterator[Part]:
        pid = self.instance_id
        text = delta.get("text")
        if text is not None:
            text = as_str(text, pid, "delta.text")
            if text:
                yield TextPart(text)
            return
        reasoning = delta.get("reasoningContent")
        if reasoning is not None:
            thought = as_str(
                as_dict(reasoning, pid, "delta.reasoningContent").get("text"),
                pid,
                "delta.reasoningContent.text",
            )
            if thought:
                yield ReasoningPart(thought)
            return  # a signature or redactedContent only matters to the raw payload
        use = delta.get("toolUse")
        if use is not None and index not in state.server_blocks:
            fragment = as_str(as_dict(use, pid, "delta.toolUse").get("input"), pid, "input")
            if state.calls.known(index) is None:
                # A call whose block never opened (no contentBlockStart): a call of its own.
                yield from state.calls.call(index, None, None, fragment)
            elif fragment:
                yield from state.calls.call(index, None, None, fragment)
        # toolResult deltas (server-side tools) and citations carry nothing to report.

    def _metadata_parts(self, event: dict[str, Any]) -> Iterator[Part]:
        pid = self.instance_id
        usage = opt_dict(event.get("usage"), pid, "metadata.usage")
        if usage:
            parsed = self.usage_from(usage)
            if not parsed.is_empty():
                yield UsagePart(parsed)
        metrics = opt_dict(event.get("metrics"), pid, "metadata.metrics") or {}
        latency = opt_int(metrics.get("latencyMs"), pid, "metrics.latencyMs")
        if latency is not None:
            yield PhasesPart({"provider_latency_ms": float(latency)})

    def parts_from_response(self, payload: Any) -> Iterator[Part]:
        """Parts of a whole (non-streamed) Converse response."""
        pid = self.instance_id
        body = as_dict(payload, pid, "response")
        output = as_dict(body.get("output"), pid, "output")
        message = as_dict(output.get("message"), pid, "output.message")
        slot = 0
        for block in as_list(message.get("content"), pid, "output.message.content"):
            block = as_dict(block, pid, "content[]")
            if "text" in block:
                text = as_str(block["text"], pid, "content[].text")
                if text:
                    yield TextPart(text)
            elif "reasoningContent" in block:
                reasoning = as_dict(block["reasoningContent"], pid, "content[].reasoningContent")
                inner = opt_dict(reasoning.get("reasoningText"), pid, "reasoningText") or {}
                thought = as_str(inner.get("text"), pid, "reasoningText.text")
                if thought:
                    yield ReasoningPart(thought)
            elif "toolUse" in block:
                use = as_dict(block["toolUse"], pid, "content[].toolUse")
                if not _client_side(use, pid):
                    continue
                arguments = use.get("input")
                yield self.tool_call_part(slot, use, "toolUse", arguments, id_key="toolUseId")
                slot += 1
        yield from self._metadata_parts(body)
        yield from self.finish_parts(body.get("stopReason"), "stopReason")

    def usage_from(self, u: dict[str, Any]) -> Usage:
        """Usage from a Converse `usage` object (as Bedrock counts; see the module)."""
        pid = self.instance_id

        def count(*names: str) -> int | None:
            for name in names:
                value = opt_int(u.get(name), pid, f"usage.{name}")
                if value is not None:
                    return value
            return None

        return Usage(
            input_tokens=count("inputTokens"),
            output_tokens=count("outputTokens"),
            cache_read_tokens=count("cacheReadInputTokens", "cacheReadInputTokenCount"),
            cache_write_tokens=count("cacheWriteInputTokens", "cacheWriteInputTokenCount"),
        )

    # --- errors --------------------------------------------------------------------

    def error_message(self, body: bytes) -> tuple[str, str | None]:
        """`(message, exception type)` from a Bedrock error body (`message`, `__type`)."""
        payload = loads_or_none(body)
        if not isinstance(payload, dict):
            return body.decode("utf-8", "replace").strip()[:500], None
        message = payload.get("message", payload.get("Message"))
        text = message if isinstance(message, str) else brief_json(payload)
        kind = payload.get("__type")
        code = kind.rsplit("#", 1)[-1] if isinstance(kind, str) and kind else None
        return text, code

    def error_from_response(
        self, status: int, headers: httpx.Headers, body: bytes, phase: str = "generate"
    ) -> ProviderError:
        """Map an error status to a typed error, the exception named by
        `x-amzn-errortype` (or the body's `__type`) refining the status."""
        message, code = self.error_message(body)
        header = headers.get("x-amzn-errortype")
        if header:
            code = header.split(":", 1)[0].strip() or code
        return self.error_from_parts(
            status, message, code, retry_after=parse_retry_after(headers), phase=phase
        )

    def assistant_message(self, generation: Generation) -> Message:
        """The assistant turn with its native Converse blocks (see `assistant_message`)."""
        return assistant_message(generation)

    # --- embeddings (InvokeModel) ----------------------------------------------------

    embed_max_batch: ClassVar[int] = 96
    """Cohere Embed on Bedrock takes at most 96 texts a request (the model parameters
    page); Titan takes one, so a Titan batch fans out into one request per text."""

    async def embed(self, request: EmbedRequest) -> EmbedReply:
        """Embed one batch with `POST /model/{modelId}/invoke`, signed as Converse is.

        Amazon Titan Text Embeddings (`amazon.titan-embed-*`) take one `inputText` a
        request (a batch fans out, `anyinfer._embed._fanout.DEFAULT_FANOUT` requests at
        a time); Cohere Embed (`cohere.embed-*`) takes the batch's `texts`. See the
        module documentation.

        Raises:
            ConfigError: For a model of another family (its InvokeModel body is not
                one this adapter writes).
        """
        family = embedding_family(request.model)
        if family is None:
            family = self.settings.options.get("embedding_family")
            if family is not None and family not in ("titan", "cohere"):
                raise ConfigError(
                    f"options['embedding_family'] must be 'titan' or 'cohere', got {family!r}",
                    provider=self.instance_id,
                )
        if family == "titan":
            return await self._titan_embed(request)
        if family == "cohere":
            return await self._cohere_embed(request)
        raise ConfigError(
            f"{self.instance_id}: embed() on Bedrock serves Amazon Titan Text Embeddings "
            f"(amazon.titan-embed-*) and Cohere Embed (cohere.embed-*) models, not "
            f"{request.model!r}; for an id that does not name its model (an application "
            "inference profile's ARN), set options['embedding_family'] to 'titan' or 'cohere'",
            provider=self.instance_id,
        )

    async def _invoke(
        self, request: EmbedRequest, body: Mapping[str, Any]
    ) -> tuple[dict[str, Any], httpx.Headers]:
        """One InvokeModel call for `request`: the JSON answer and the response headers."""
        from .._embed._wire import _post_json_headers

        path = f"/model/{quote(request.model, safe='')}/invoke"
        accept = {"accept": "application/json"}
        payload, headers = await _post_json_headers(self, path, body, accept, request=request)
        return as_dict(payload, self.instance_id, "body"), headers

    def _header_int(self, headers: httpx.Headers, name: str) -> int | None:
        value = headers.get(name)
        if value is None:
            return None
        try:
            number = int(value.strip())
        except ValueError:
            raise ProtocolError(
                f"{self.instance_id}: expected an integer in the {name} header, got {value!r}",
                provider=self.instance_id,
            ) from None
        return number if number >= 0 else None

    def _latency(self, headers: httpx.Headers) -> dict[str, float]:
        ms = self._header_int(headers, INVOCATION_LATENCY_HEADER)
        return {} if ms is None else {"provider_latency_ms": float(ms)}

    async def _titan_embed(self, request: EmbedRequest) -> EmbedReply:
        from .._embed._fanout import fan_out
        from .._embed._types import EmbedReply
        from .._embed._wire import _no_input_type, decode_vector, known_sum

        pid = self.instance_id
        warnings = _no_input_type(self, request, "Amazon Titan Text Embeddings")

        async def one(text: str) -> tuple[array[float], int | None, dict[str, float]]:
            body: dict[str, Any] = {"inputText": text}
            if request.dimensions is not None:
                body["dimensions"] = request.dimensions
            body.update(request.provider_options)
            payload, headers = await self._invoke(request, body)
            vector = decode_vector(payload.get("embedding"), pid, "embedding")
            tokens = opt_int(payload.get("inputTextTokenCount"), pid, "inputTextTokenCount")
            if tokens is None:
                tokens = self._header_int(headers, INPUT_TOKENS_HEADER)
            return vector, tokens, self._latency(headers)

        results = await fan_out(one, request.inputs)
        known = known_sum(tokens for _, tokens, _ in results)
        phases: dict[str, float] = {}
        for _, _, latency in results:
            for name, ms in latency.items():
                phases[name] = phases.get(name, 0.0) + ms
        return EmbedReply(
            vectors=tuple(v for v, _, _ in results),
            usage=Usage(input_tokens=known, total_tokens=known),
            warnings=warnings,
            phases=phases,
        )

    async def _cohere_embed(self, request: EmbedRequest) -> EmbedReply:
        from .._embed._types import EmbedReply
        from .._embed._wire import _count, decode_vector
        from .cohere import embed_input_type

        pid = self.instance_id
        input_type, warnings = embed_input_type(request.input_type, pid)
        body: dict[str, Any] = {"texts": list(request.inputs), "input_type": input_type}
        if request.dimensions is not None:
            body["output_dimension"] = request.dimensions  # Embed v4; v3 refuses it
        body.update(request.provider_options)
        payload, headers = await self._invoke(request, body)
        embeddings = payload.get("embeddings")
        where = "embeddings"
        if isinstance(embeddings, dict):  # embeddings_by_type (v4, or embedding_types)
            embeddings, where = embeddings.get("float"), "embeddings.float"
            if embeddings is None:
                raise ProtocolError(
                    f"{pid}: the answer has no float embeddings (ask for embedding_types "
                    "['float'] or none)",
                    provider=pid,
                )
        rows = as_list(embeddings, pid, where)
        if len(rows) != len(request.inputs):
            raise _count(pid, len(rows), len(request.inputs))
        vectors = tuple(decode_vector(row, pid, f"{where}[{i}]") for i, row in enumerate(rows))
        tokens = self._header_int(headers, INPUT_TOKENS_HEADER)
        return EmbedReply(
            vectors=vectors,
            usage=Usage(input_tokens=tokens, total_tokens=tokens),
            warnings=warnings,
            phases=self._latency(headers),
        )

    def error_hint(self, code: str | None, message: str) -> ErrorKind | None:
        """The kind a Bedrock exception type stands for (`EXCEPTION_KINDS`)."""
        if code:
            kind = EXCEPTION_KINDS.get(code.lower())
            if kind is not None:
                return None if kind == "invalid" else kind
        return super().error_hint(code, message)


def embedding_family(model: str) -> str | None:
    """`"titan"` or `"cohere"` for a Bedrock embedding model id (a foundation model, an
    inference profile such as `us.cohere.embed-v4:0`, or an ARN ending in one), else
    `None`."""
    name = model.rsplit("/", 1)[-1]
    if _TITAN_EMBED.search(name):
        return "titan"
    if _COHERE_EMBED.search(name):
        return "cohere"
    return None


def _client_side(use: Mapping[str, Any], pid: str) -> bool:
    """Whether a `toolUse` block is a call for the application (not a server tool's)."""
    kind = opt_str(use.get("type"), pid, "toolUse.type")
    return kind in (None, "tool_use")


# --- multi-turn helpers ------------------------------------------------------------------


def content_blocks(raw: Any) -> list[dict[str, Any]]:
    """Rebuild an assistant turn's Converse content blocks from `Generation.raw`.

    Works on both forms `retain_raw` keeps: the list of stream event payloads (each
    block reassembled from its `contentBlockStart` and deltas, by `contentBlockIndex`:
    text, `reasoningContent` with its `reasoningText` text and signature or its
    `redactedContent`, client-side `toolUse` with its input parsed from the fragments)
    and a whole Converse response (its `output.message.content`, as sent).

    Args:
        raw: `Generation.raw` of a Bedrock generation made with `retain_raw=True`.

    Returns:
        The blocks in order, as Converse takes them back in an assistant message. Blocks
        of server-side tools (which ran at Bedrock) are left out of a streamed turn.

    Raises:
        ValueError: If `raw` is neither form.
    """
    if isinstance(raw, Mapping):
        output = raw.get("output")
        message = output.get("message") if isinstance(output, Mapping) else None
        content = message.get("content") if isinstance(message, Mapping) else None
        if not isinstance(content, list):
            raise ValueError("raw is not a Converse response")
        return [dict(b) for b in content if isinstance(b, Mapping)]
    if not isinstance(raw, list):
        raise ValueError("raw is not a Converse response or a list of stream events")
    blocks: dict[int, dict[str, Any]] = {}
    inputs: dict[int, str] = {}
    skipped: set[int] = set()
    for event in raw:
        if not isinstance(event, Mapping) or not isinstance(event.get("contentBlockIndex"), int):
            continue
        index = event["contentBlockIndex"]
        start, delta = event.get("start"), event.get("delta")
        if isinstance(start, Mapping):
            use = start.get("toolUse")
            if isinstance(use, Mapping) and use.get("type") in (None, "tool_use"):
                blocks[index] = {"toolUse": {k: v for k, v in use.items() if k != "type"}}
            else:
                skipped.add(index)
        elif isinstance(delta, Mapping) and index not in skipped:
            _apply_delta(blocks.setdefault(index, {}), inputs, index, delta)
    for index, text in inputs.items():
        use = blocks[index].get("toolUse")
        if isinstance(use, dict):
            try:
                use["input"] = json.loads(text) if text.strip() else {}
            except ValueError:
                use["input"] = {}  # a cut-off stream's fragments may not parse
    for block in blocks.values():
        use = block.get("toolUse")
        if isinstance(use, dict):
            use.setdefault("input", {})
    return [blocks[i] for i in sorted(blocks) if blocks[i] and blocks[i].get("text") != ""]


def _apply_delta(
    block: dict[str, Any], inputs: dict[int, str], index: int, delta: Mapping[str, Any]
) -> None:
    if isinstance(delta.get("text"), str):
        block["text"] = str(block.get("text", "")) + delta["text"]
    elif isinstance(delta.get("reasoningContent"), Mapping):
        part = delta["reasoningContent"]
        reasoning = block.setdefault("reasoningContent", {})
        if isinstance(part.get("redactedContent"), str):
            reasoning["redactedContent"] = part["redactedContent"]
            return
        text = reasoning.setdefault("reasoningText", {"text": ""})
        if isinstance(part.get("text"), str):
            text["text"] = str(text.get("text", "")) + part["text"]
        if isinstance(part.get("signature"), str):
            text["signature"] = str(text.get("signature", "")) + part["signature"]
    elif isinstance(delta.get("toolUse"), Mapping) and "toolUse" in block:
        fragment = delta["toolUse"].get("input")
        if isinstance(fragment, str):
            inputs[index] = inputs.get(index, "") + fragment


def assistant_message(generation: Generation) -> Message:
    """The assistant turn of `generation`, ready to append to the conversation.

    With the raw payload kept (`retain_raw=True`), the message carries the turn's native
    Converse blocks (reasoning with its signature, or redacted, included) in
    `provider_data["bedrock"]["content"]`, which the Bedrock adapter sends verbatim: a
    Claude tool-use turn with thinking needs its reasoning block back. Without it, the
    message holds only the text and the tool calls.

    Args:
        generation: A result from a Bedrock target.

    Returns:
        The assistant message.
    """
    return native_turn(generation, PROVIDER_DATA_KEY, "content", content_blocks)
