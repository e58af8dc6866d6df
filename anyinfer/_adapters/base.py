"""The adapter contract and the HTTP plumbing every HTTP adapter shares.

An adapter translates: it builds the provider's HTTP request from a
`GenerationRequest` and turns the response bytes into provider-neutral parts
(`anyinfer._stream.parts`). It never times, orders or assembles anything — the core does that
once for every adapter. What it must do:

- drain the response to the protocol's terminal sentinel and then yield `EndPart`;
  never stop at the finish reason (usage often trails it);
- yield each usage report as a `UsagePart` the moment the wire carries it, so that a
  failure later in the stream cannot lose it;
- raise typed `AnyInferError`s (never a bare `KeyError`) for error statuses, error
  frames and malformed bytes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import json
import logging
import time
import zlib
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from dataclasses import field
from typing import TYPE_CHECKING, Any, ClassVar, Literal, NoReturn, Protocol

import httpx

from .._client.instance import base_url_env, resolve_base_url
from .._errors import (
    AnyInferError,
    ConfigError,
    PoolExhaustedError,
    ProtocolError,
    ProviderError,
    ProviderTimeoutError,
    ResponseTooLargeError,
    StreamError,
)
from .._providers._wire import opt_str
from .._redact import redact
from .._stream.parts import (
    END,
    Batches,
    EndPart,
    FinishPart,
    Part,
    PhasesPart,
    RawPart,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    UsagePart,
    WarningPart,
)
from .._values import value_class
from .assembler import PartAssembler
from .errormap import CODE_KINDS, ErrorKind, classify, message_and_code
from .framing import (
    DEFAULT_MAX_FRAME_BYTES,
    EventFramer,
    JSONArrayFramer,
    NDJSONFramer,
    SSEEvent,
    SSEFramer,
    decode_json,
    loads_or_none,
)
from .limits import response_limits
from .orphans import is_full, pool_of, reclaim
from .profile import AdapterProfile
from .shielded import finish_uncancelled
from .tls import LazyTrustContext

if TYPE_CHECKING:
    from .._embed._types import EmbedReply, EmbedRequest, RerankReply, RerankRequest
    from .._messages import Message
    from .._types import Generation, ResolvedTarget
from .._request import GenerationRequest
from .._settings import ProviderSettings

__all__ = [
    "ARRAY_CLOSED",
    "OPERATIONS",
    "Adapter",
    "DiscoveredModel",
    "Health",
    "Framing",
    "HTTPAdapter",
    "Operation",
    "PartAssembler",
    "SSEEvent",
    "Sender",
    "inherits",
    "refuse_unserved",
]

_ERROR_BODY_LIMIT = 64 * 1024
_DECODE_PIECE = 64 * 1024
"""Most decoded bytes one decompression step yields, so a compressed body's size is
checked against `max_response_bytes` as it expands, not after (a decompression bomb)."""
_ACCEPT_ENCODING = "gzip, deflate"
"""The encodings the adapters ask for: the ones `HTTPAdapter` decodes incrementally."""
DEFAULT_MAX_CONNECTIONS = 100
"""Connections one provider instance's pool holds by default (the provider option
`max_connections` overrides it)."""
POOL_OPTIONS = frozenset({"max_connections", "max_frame_bytes"})
"""`ProviderSettings.options` keys every HTTP adapter understands: `max_connections` and
`max_frame_bytes` (the largest line, event or array element a stream may send;
`DEFAULT_MAX_FRAME_BYTES` by default)."""

Sender = Callable[[list[str]], Awaitable[httpx.Response]]
"""Sends one request and returns the open response (see `HTTPAdapter.stream_parts`);
it may append warnings about the request to the list it is given."""

Framing = Literal["sse", "sse+json", "ndjson", "json-array"]
"""How `HTTPAdapter.stream_parts` frames a streamed body."""

ARRAY_CLOSED: Any = object()
"""What `HTTPAdapter.iter_frames` yields when a streamed JSON array's `]` arrives."""


Operation = Literal["generate", "embed", "rerank"]
"""An operation a provider may serve: generation (`stream`/`generate`), embeddings
(`embed`), reranking (`rerank`)."""

OPERATIONS: tuple[Operation, ...] = ("generate", "embed", "rerank")
"""Every operation, in the order `Adapter.operations()` lists them."""

_SERVES: Mapping[Operation, str] = {
    "generate": "serves_generation",
    "embed": "serves_embeddings",
    "rerank": "serves_rerank",
}
"""Each operation's `Adapter` classmethod saying whether a class serves it."""

_OPERATION_WORDS: Mapping[Operation, str] = {
    "generate": "generation",
    "embed": "embeddings",
    "rerank": "reranking",
}


class Bounded(Protocol):
    """A request whose `timeout_s` bounds its I/O: a `GenerationRequest`, `EmbedRequest`
    or `RerankRequest` (`HTTPAdapter.timeout_for`)."""

    @property
    def timeout_s(self) -> float | None: ...


@value_class
class DiscoveredModel:
    """A model a provider reports through its discovery endpoint.

    Attributes:
        provider: The provider instance that reported it.
        id: The model name to use in a target.
        context_window: Context length, when the provider reports it.
        max_output_tokens: Output cap, when reported.
        facts: Other capability facts the provider reported (`vision`, `tools`, …).
        raw: The provider's entry as received.
    """

    provider: str
    id: str
    context_window: int | None = None
    max_output_tokens: int | None = None
    facts: Mapping[str, Any] = field(default_factory=dict)
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False)


@value_class
class Health:
    """A provider's readiness, as probed.

    Attributes:
        provider: The provider instance probed.
        ok: Whether it answered as ready.
        latency_ms: How long the probe took.
        detail: What went wrong, or a short note; redacted.
        models: How many models it listed, when the probe lists models.
    """

    provider: str
    ok: bool
    latency_ms: float
    detail: str = ""
    models: int | None = None


class Adapter:
    """Base class of every provider adapter.

    Subclasses set `provider_id` (and optionally `profile`, `default_base_url`,
    `api_key_env`, `fallback_api_key_env`) and implement the operations their provider
    serves: `generate`, `embed`, `rerank`. Register third-party adapters under the
    `anyinfer.adapters` entry-point group, or with `ProviderRegistry.register`.

    An adapter serves an operation when its class overrides that operation's method
    (`serves_generation`, `serves_embeddings`, `serves_rerank`; all three in
    `operations()`). That one rule decides what the core offers it: a target whose class
    does not serve an operation is refused before dispatch with a `ConfigError`, the
    conformance suite's generation matrix runs only classes that generate, and listings
    name what each provider serves. A provider that only embeds and reranks (Voyage AI,
    Jina AI, Hugging Face TEI) overrides `embed` and `rerank` and leaves `generate` alone.

    `profile` (an `AdapterProfile`) declares the provider facts the core reads
    without sending a request: aliases, conformance dialect, usage convention,
    structured-output defaults and local engines. A subclass that sets none inherits
    its parent's without the aliases. The older class attributes `aliases` and
    `conformance_dialect`, when a class body sets them, are folded into its profile.

    Attributes:
        settings: The instance's settings, with the credential already resolved.
    """

    provider_id: ClassVar[str] = ""
    profile: ClassVar[AdapterProfile] = AdapterProfile()
    default_base_url: ClassVar[str | None] = None
    api_key_env: ClassVar[str | None] = None
    fallback_api_key_env: ClassVar[str | None] = None
    """A second variable read for the key when `api_key_env` is unset too (Gemini's
    `GOOGLE_API_KEY`); part of the instance's key variables (`instance_config`)."""
    bounds_calls: ClassVar[bool] = False
    """Whether the adapter applies an `embed`/`rerank` request's `timeout_s` to its own
    I/O, as `HTTPAdapter.send` does. When it does not, the core bounds the whole call
    (a `ProviderTimeoutError` with `timeout_kind="total"` once `timeout_s` has passed)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        own = vars(cls)
        profile = own.get("profile")
        if not isinstance(profile, AdapterProfile):
            profile = dataclasses.replace(cls.profile, aliases=())
        legacy: dict[str, Any] = {}
        if "aliases" in own:
            legacy["aliases"] = tuple(own["aliases"])
        if "conformance_dialect" in own:
            legacy["conformance_dialect"] = own["conformance_dialect"] or None
        cls.profile = dataclasses.replace(profile, **legacy) if legacy else profile

    def __init__(self, settings: ProviderSettings) -> None:
        self.settings = settings

    @property
    def instance_id(self) -> str:
        """The provider instance this adapter serves."""
        return self.settings.instance_id

    def generate(self, request: GenerationRequest) -> AsyncIterator[Part]:
        """Send one request and yield its parts, ending with `EndPart`.

        Adapters whose provider generates override this; the core never calls it on a
        class that does not (`serves_generation`).

        Args:
            request: The attempt's request.

        Returns:
            An async iterator of parts.

        Raises:
            ConfigError: If this adapter's provider does not generate.
        """
        raise ConfigError(
            _not_served(self.instance_id, type(self), "generate"), provider=self.instance_id
        )

    @classmethod
    def serves_generation(cls) -> bool:
        """Whether `generate()` is implemented (checked before a generation is sent)."""
        return cls.generate is not Adapter.generate

    @classmethod
    def operations(cls) -> tuple[Operation, ...]:
        """The operations this class serves, in `OPERATIONS` order: each one whose method
        it implements (`serves_generation`, `serves_embeddings`, `serves_rerank`)."""
        served = (cls.serves_generation(), cls.serves_embeddings(), cls.serves_rerank())
        return tuple(op for op, yes in zip(OPERATIONS, served, strict=True) if yes)

    def assistant_message(self, generation: Generation) -> Message:
        """The assistant turn of `generation`, to continue the conversation with.

        Protocols that need their native content sent back (Anthropic thinking
        signatures, Gemini thought signatures) override this to carry it, from
        `generation.raw`, in `Message.provider_data`.
        """
        from .._messages import Message

        return Message.assistant(generation.text, generation.tool_calls)

    embed_max_batch: ClassVar[int] = 256
    """The most inputs one embedding request may carry; `embed()` splits larger calls
    into batches of at most this many (a per-call `batch_size` may lower it)."""

    @classmethod
    def serves_embeddings(cls) -> bool:
        """Whether `embed()` is implemented (checked before an embedding call is sent)."""
        return cls.embed is not Adapter.embed

    @classmethod
    def embeddings_refusal(cls, settings: ProviderSettings) -> str | None:
        """Why an instance configured by `settings` does not embed, or `None` when it
        does: what the embed runner asks of every target before anything is sent.

        By default the class's answer (`serves_embeddings`); a class whose instances may
        say otherwise in their options (the OpenAI-compatible presets) overrides this.

        Raises:
            ConfigError: For an option the override refuses.
        """
        if cls.serves_embeddings():
            return None
        provider = cls.provider_id or settings.provider_id
        return f"its provider ({provider}) has no embeddings support in AnyInfer"

    async def embed(self, request: EmbedRequest) -> EmbedReply:
        """Embed one batch of texts: one vector per input, in input order.

        Adapters whose provider embeds override this.

        Raises:
            ConfigError: If this adapter's provider does not serve embeddings.
        """
        raise ConfigError(
            _not_served(self.instance_id, type(self), "embed"), provider=self.instance_id
        )

    rerank_max_documents: ClassVar[int] = 1000
    """The most documents one rerank request may carry; `rerank()` splits larger calls
    into requests of at most this many and merges their rankings."""

    @classmethod
    def serves_rerank(cls) -> bool:
        """Whether `rerank()` is implemented (checked before a rerank call is sent)."""
        return cls.rerank is not Adapter.rerank

    async def rerank(self, request: RerankRequest) -> RerankReply:
        """Rank one request's documents by relevance to its query, best first.

        Adapters whose provider reranks override this.

        Raises:
            ConfigError: If this adapter's provider does not rerank.
        """
        raise ConfigError(
            _not_served(self.instance_id, type(self), "rerank"), provider=self.instance_id
        )

    async def models(self) -> Sequence[DiscoveredModel]:
        """List the provider's models.

        Raises:
            ConfigError: If this adapter has no discovery endpoint.
        """
        raise ConfigError(f"{self.instance_id} has no model discovery", provider=self.instance_id)

    async def health(self) -> Health:
        """Probe readiness by listing models; never raises for a provider failure."""
        start = time.monotonic()
        try:
            found = await self.models()
        except AnyInferError as exc:
            return Health(self.instance_id, False, _ms_since(start), exc.message)
        return Health(self.instance_id, True, _ms_since(start), "", len(found))

    async def aclose(self) -> None:
        """Release connections."""


def _not_served(instance: str, cls: type[Adapter], operation: Operation) -> str:
    """Why `instance` refuses `operation`: the one wording of every refusal."""
    served = cls.operations()
    what = ", ".join(_OPERATION_WORDS[op] for op in served) or "nothing"
    return (
        f"{instance} ({cls.provider_id or cls.__name__}) does not serve "
        f"{_OPERATION_WORDS[operation]} through AnyInfer; it serves {what}"
    )


def refuse_unserved(
    operation: Operation,
    targets: Iterable[tuple[ResolvedTarget, type[Adapter]]],
    what: str,
) -> None:
    """Refuse, before dispatch, a call whose targets include one that does not serve
    `operation` (its adapter class does not implement that operation's method).

    Args:
        operation: The operation asked for.
        targets: Each target with the adapter class serving it.
        what: The call, for the message (`"generate()"`).

    Raises:
        ConfigError: Naming the first such target and what its provider serves.
    """
    serves = _SERVES[operation]
    for target, cls in targets:
        if not getattr(cls, serves)():
            raise ConfigError(
                f"{what}: target {target}: " + _not_served(target.provider, cls, operation),
                provider=target.provider,
            )


def _positive_option(settings: ProviderSettings, name: str, default: int) -> int:
    value = settings.options.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(
            f"provider {settings.instance_id!r}: options[{name!r}] must be a "
            f"positive integer, got {value!r}",
            provider=settings.instance_id,
        )
    return value


def _max_connections(settings: ProviderSettings) -> int:
    return _positive_option(settings, "max_connections", DEFAULT_MAX_CONNECTIONS)


class _ClosingStream(httpx.AsyncByteStream):
    """A response body whose `aclose` always runs to completion (`finish_uncancelled`)."""

    __slots__ = ("_inner",)

    def __init__(self, inner: httpx.AsyncByteStream) -> None:
        self._inner = inner

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self._inner.__aiter__()

    async def aclose(self) -> None:
        await finish_uncancelled(self._inner.aclose())


class _ClosingTransport(httpx.AsyncBaseTransport):
    """Wraps an adapter's transport so that releasing a response cannot be cut short,
    and no connection is left in the pool that nobody owns and the pool would keep
    forever (`orphans.reclaim`): after a request that raised (a cancellation, mostly),
    and before a request to a full pool (a response whose close a cancellation cut
    short inside httpcore)."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner = inner
        self._pool = pool_of(inner)  # None: not httpcore 1.0's pool, nothing to reclaim

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        pool = self._pool
        if pool is not None and is_full(pool):
            await finish_uncancelled(reclaim(pool))
        try:
            response = await self.inner.handle_async_request(request)
        except BaseException:
            if pool is not None:
                await finish_uncancelled(reclaim(pool))
            raise
        if isinstance(response.stream, httpx.AsyncByteStream):
            response.stream = _ClosingStream(response.stream)
        return response

    async def aclose(self) -> None:
        await finish_uncancelled(self.inner.aclose())


class _Inflate:
    """One `gzip` or `deflate` layer of a body, expanding at most `_DECODE_PIECE` bytes
    per step."""

    __slots__ = ("_d", "_done", "_gzip", "_rest", "_sniff")

    def __init__(self, encoding: str) -> None:
        self._gzip = encoding != "deflate"
        self._d = zlib.decompressobj(zlib.MAX_WBITS | 16)
        # `deflate` is zlib-wrapped by the RFC but raw from some servers: its first two
        # bytes decide, once they are here.
        self._sniff = not self._gzip
        self._done = False
        self._rest = b""

    def feed(self, data: bytes) -> Iterator[bytes]:
        if self._sniff:
            data, self._rest = self._rest + data, b""
            if len(data) < 2:
                self._rest = data
                return
            self._sniff = False
            cmf, flg = data[0], data[1]
            zlib_wrapped = cmf & 0x0F == 8 and (cmf * 256 + flg) % 31 == 0
            self._d = zlib.decompressobj(zlib.MAX_WBITS if zlib_wrapped else -zlib.MAX_WBITS)
        while not self._done:
            d = self._d
            if d.eof:
                # Past the end: another gzip member may follow; anything else is
                # trailing bytes, dropped (never piled up).
                data, self._rest = self._rest + data, b""
                if len(data) < 2 and b"\x1f\x8b".startswith(data):
                    self._rest = data  # too little to tell yet
                    return
                if not (self._gzip and data[:2] == b"\x1f\x8b"):
                    self._done = True
                    return
                self._d = d = zlib.decompressobj(zlib.MAX_WBITS | 16)
            out = d.decompress(data, _DECODE_PIECE)
            data = d.unconsumed_tail
            if out:
                yield out
            if d.eof:
                self._rest = d.unused_data
            elif not data and len(out) < _DECODE_PIECE:
                return

    def flush(self) -> bytes:
        if self._sniff and self._rest:
            raise zlib.error("the deflate body ended after one byte")
        return b"" if self._done or self._d.eof else self._d.flush()


def _through(layers: list[_Inflate], data: bytes) -> Iterator[bytes]:
    if not layers:
        yield data
        return
    first, rest = layers[0], layers[1:]
    for piece in first.feed(data):
        yield from _through(rest, piece)


async def decoded_body(response: httpx.Response) -> AsyncIterator[bytes]:
    """The body's bytes, decoded from its `Content-Encoding` in bounded steps.

    httpx decodes one network read at a time, whatever it expands to: a 2 KB read of a
    `gzip, gzip` body can become gigabytes before anyone counts them. Here `gzip` and
    `deflate` (in any number of layers) are inflated `_DECODE_PIECE` bytes at a time,
    so a byte limit applied to what this yields bounds memory near that limit. Bodies
    in other encodings (which AnyInfer does not ask for) are left to httpx.

    Raises:
        zlib.error: If the body does not decode.
    """
    try:
        content = response.content  # already read (an `httpx.Response(content=...)`)
    except httpx.ResponseNotRead:
        pass
    else:
        if content:
            yield content
        return
    names = [
        v.strip().lower()
        for v in response.headers.get_list("content-encoding", split_commas=True)
        if v.strip() and v.strip().lower() != "identity"
    ]
    if not names:
        async for chunk in response.aiter_raw():
            yield chunk
        return
    if any(n not in ("gzip", "x-gzip", "deflate") for n in names):
        async for chunk in response.aiter_bytes():
            yield chunk
        return
    # The last encoding listed was applied last: it comes off first.
    layers = [_Inflate(n) for n in reversed(names)]
    async for chunk in response.aiter_raw():
        for piece in _through(layers, chunk):
            yield piece
    for i, layer in enumerate(layers):
        tail = layer.flush()
        if tail:
            for piece in _through(layers[i + 1 :], tail):
                yield piece


class _ReadBudget:
    """The byte limit and the deadline of one body's reads (`HTTPAdapter.iter_bytes`)."""

    __slots__ = ("_adapter", "_deadline", "_limit", "_seen")

    def __init__(self, adapter: HTTPAdapter, request: GenerationRequest | None) -> None:
        limits = adapter.response_limits
        limit = request.max_response_bytes if request is not None else None
        self._adapter = adapter
        self._limit = limits.max_response_bytes if limit is None else limit
        self._deadline = None if limits.deadline_s is None else time.monotonic() + limits.deadline_s
        self._seen = 0

    def take(self, chunk: bytes) -> None:
        """Count one read.

        Raises:
            ProviderTimeoutError: The body ran past the provider's deadline.
            ResponseTooLargeError: The body outgrew the byte limit.
        """
        if self._deadline is not None and time.monotonic() > self._deadline:
            pid = self._adapter.instance_id
            raise ProviderTimeoutError(
                f"{pid}: the response ran past its deadline of "
                f"{self._adapter.response_limits.deadline_s:g} s (provider option deadline_s)",
                timeout_kind="total",
                provider=pid,
                phase="stream",
            )
        if self._limit is not None:
            self._seen += len(chunk)
            if self._seen > self._limit:
                pid = self._adapter.instance_id
                raise ResponseTooLargeError(
                    f"{pid}: response exceeded max_response_bytes={self._limit}", provider=pid
                )


def inherits(cls: type, base: type, *methods: str) -> bool:
    """Whether `cls` takes each of `base`'s plain methods named in `methods` as it is.

    A decoder's shortcut for the usual frame is only right while the hooks it stands for
    are the module's own: a subclass that overrides one is read the general way. Asked
    once per response, so the answer per class is kept (a class's methods are fixed once
    it is made).
    """
    key = (cls, base, methods)
    known = _inherited.get(key)
    if known is None:
        if len(_inherited) >= 256:
            _inherited.clear()  # classes made at run time (tests) do not pile up
        known = _inherited[key] = all(getattr(cls, n) is getattr(base, n) for n in methods)
    return known


_inherited: dict[tuple[type, type, tuple[str, ...]], bool] = {}


def body_reads(response: httpx.Response) -> AsyncIterator[bytes]:
    """The body's reads: httpx's own when it is not encoded, else `decoded_body`'s."""
    if "content-encoding" in response.headers or response.is_stream_consumed:
        # Encoded, or read already (an `httpx.Response(content=...)`): `decoded_body`
        # serves both. Asked of the flag, not of `response.content`, whose refusal
        # builds and raises an exception on every streamed response.
        return decoded_body(response)
    return response.aiter_raw()


_PLAIN = frozenset({TextPart, ReasoningPart, UsagePart, RawPart, PhasesPart})
"""The part types the assembler passes through unchanged."""


def _one(frame: Any) -> tuple[Any]:
    return (frame,)


def _take(parts: Iterable[Part], fix: Callable[[Part, list[Part]], None], out: list[Part]) -> bool:
    """Append `parts` to `out` through the assembler; whether `END` was among them."""
    for part in parts:
        cls = type(part)
        if cls in _PLAIN:
            out.append(part)
        elif cls is EndPart:
            out.append(END)
            return True
        else:
            fix(part, out)
    return False


def _take_frames(
    frames: Iterable[Any],
    decode: Callable[[Any, str | None], Iterable[Part]],
    parse: Callable[[Any], Any] | None,
    pid: str,
    sentinel: bytes | None,
    parsed: bool,
    retain: bool,
    fix: Callable[[Part, list[Part]], None],
    out: list[Part],
) -> bool:
    """Append the parts of one read's frames to `out`; whether the end marker came."""
    for frame in frames:
        if type(frame) is SSEEvent:
            data, name = frame.data, frame.event
        elif frame is ARRAY_CLOSED:
            out.append(END)
            return True
        else:
            data, name = frame, None
        if sentinel is not None and data == sentinel:
            out.append(END)
            return True
        if parsed:
            payload = data
        elif parse is None:
            payload = decode_json(data, pid)
        else:
            payload = parse(data)
        if retain:
            out.append(RawPart(payload))
        if _take(decode(payload, name), fix, out):
            return True
    return False


_HTTPX_LOG = logging.getLogger("httpx")
"""httpx's logger: `HTTPAdapter._dispatch` writes the line httpx's client writes per request."""


def _ms_since(start: float) -> float:
    return (time.monotonic() - start) * 1000.0


class HTTPAdapter(Adapter):
    """An adapter speaking HTTP through one `httpx.AsyncClient`.

    Provides sending with typed error mapping, byte-limited streaming reads,
    server-sent-event and NDJSON framing, and a default error-body reader.

    `send` applies a call's `timeout_s` to connecting, the wait for a pooled connection,
    the first byte and every gap between reads, for every kind of call
    (`bounds_calls`): pass the request to it.
    """

    bounds_calls: ClassVar[bool] = True

    def __init__(self, settings: ProviderSettings) -> None:
        super().__init__(settings)
        base_url = resolve_base_url(settings, self.default_base_url)
        if not base_url:
            raise ConfigError(
                f"provider {settings.instance_id!r} needs base_url (or "
                f"{base_url_env(settings.instance_id)})",
                provider=settings.instance_id,
            )
        self.base_url = base_url.rstrip("/")
        timeout = httpx.Timeout(settings.timeout_s, connect=min(settings.timeout_s, 15.0))
        self.max_connections = _max_connections(settings)
        self.response_limits = response_limits(settings)
        """The overall deadline and default response cap (see `limits.py`)."""
        self.max_frame_bytes = _positive_option(
            settings, "max_frame_bytes", DEFAULT_MAX_FRAME_BYTES
        )
        """The largest line, event or array element a stream may send (the provider
        option `max_frame_bytes`)."""
        inner = settings.transport
        if inner is None:
            inner = httpx.AsyncHTTPTransport(
                verify=LazyTrustContext(),  # the CA bundle loads at the first handshake
                limits=httpx.Limits(
                    max_connections=self.max_connections,
                    max_keepalive_connections=min(20, self.max_connections),
                ),
                trust_env=False,
            )
        self._fresh_headers = type(self).request_headers is not HTTPAdapter.request_headers
        self._transport = _ClosingTransport(inner)
        self.http = httpx.AsyncClient(
            transport=self._transport,
            timeout=timeout,
            headers={"accept-encoding": _ACCEPT_ENCODING, **self.default_headers()},
            follow_redirects=False,
            trust_env=False,
        )
        self._built_http = self.http

    def default_headers(self) -> dict[str, str]:
        """Headers sent on every request: auth plus `ProviderSettings.headers`."""
        return dict(self.settings.headers)

    def with_bearer(self, headers: dict[str, str]) -> dict[str, str]:
        """`headers` with `Authorization: Bearer <api key>` added when a key is set and no
        `authorization` header (in any case) is configured; for `default_headers`."""
        if self.settings.api_key and "authorization" not in {h.lower() for h in headers}:
            headers["authorization"] = f"Bearer {self.settings.api_key}"
        return headers

    async def aclose(self) -> None:
        """Close the HTTP client and its connections."""
        await self.http.aclose()

    # --- sending -------------------------------------------------------------------

    def timeout_for(self, request: Bounded | None) -> httpx.Timeout | None:
        """The httpx timeout for a call (a generation, embedding or rerank request),
        when it overrides the provider default."""
        if request is None or request.timeout_s is None:
            return None
        t = request.timeout_s
        return httpx.Timeout(t, connect=min(t, 15.0))

    def url_for(self, path: str) -> str:
        """The URL `send` requests for `path`: an absolute URL as it is, else the base
        URL followed by the path. Override to route paths under a prefix of the
        adapter's own (Vertex AI's `/projects/.../locations/...`). Called after
        `request_headers`, so a credential fetched there may decide the URL."""
        return path if path.startswith(("http://", "https://")) else self.base_url + path

    async def request_headers(self, phase: str) -> Mapping[str, str]:
        """Headers computed for each request, such as a bearer token that expires
        (Vertex AI's OAuth2 token); none by default. `send` calls it only when a
        subclass overrides it.

        Args:
            phase: Lifecycle phase, for the errors fetching a credential raises.
        """
        return {}

    async def send(
        self,
        method: str,
        path: str,
        *,
        json_body: Any = None,
        params: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
        request: Bounded | None = None,
        phase: str = "generate",
    ) -> httpx.Response:
        """Send a request and return the streamed response once its status is OK.

        Args:
            method: HTTP method.
            path: Path appended to the base URL (or an absolute URL).
            json_body: Body, serialized as JSON.
            params: Query parameters.
            headers: Extra headers for this request.
            request: The request (generation, embedding or rerank), for its `timeout_s`.
            phase: Lifecycle phase for errors.

        Returns:
            The open response; the caller must close it.

        Raises:
            ProviderError: A typed subclass for an error status or a transport failure.
        """
        hdrs = dict(headers or {})
        if self._fresh_headers:
            hdrs.update(await self.request_headers(phase))
        url = self.url_for(path)  # after the headers: a credential may name the project
        content = None if json_body is None else json.dumps(json_body).encode()
        if content is not None:
            hdrs["content-type"] = "application/json"
        timeout = self.timeout_for(request)
        req = self.http.build_request(
            method,
            url,
            content=content,
            params=params,
            headers=hdrs,
            timeout=timeout if timeout is not None else httpx.USE_CLIENT_DEFAULT,
        )
        try:
            response = await self._dispatch(req)
        except httpx.TransportError as exc:
            raise self._transport_error(exc, phase) from None
        if response.status_code >= 400:
            try:
                body = await self._read_limited(response, _ERROR_BODY_LIMIT)
            finally:
                await response.aclose()
            raise self.error_from_response(response.status_code, response.headers, body, phase)
        if 300 <= response.status_code < 400:
            await response.aclose()
            raise self.redirect_error(response, phase)
        return response

    async def _dispatch(self, request: httpx.Request) -> httpx.Response:
        """Send a built request and return its response, unread (`send`'s one call out).

        `httpx.AsyncClient.send` runs an auth flow, a redirect loop, a transport lookup,
        a timing wrapper around the body and a cookie-jar pass on every request, which
        together cost about as much CPU as all of AnyInfer's own work on a request
        (measured in-process on replayed bytes: 146 us more than the transport alone).
        For the client this class builds (no auth, no mounts, no proxies, no event
        hooks, redirects refused) none of that changes the request or the response, so
        the request goes to the transport directly, keeping what the client's `send`
        would have done that anyone can see: the closed-client error,
        `response.request`, the cookie jar (when the response sets a cookie) and
        httpx's own log line. Anything else goes through the client's `send`, as
        before: a client that is not the one built here (a subclass's own), one given
        an `auth` (Bedrock's SigV4), event hooks or redirects, and a URL carrying
        credentials (Basic auth from its userinfo). `response.elapsed` is not set on
        the direct path.
        """
        http = self.http
        hooks = http.event_hooks
        if (
            http is not self._built_http
            or http.auth is not None
            or http.follow_redirects
            or hooks["request"]
            or hooks["response"]
            or request.url.userinfo
        ):
            return await http.send(request, stream=True)
        if http.is_closed:
            raise RuntimeError("Cannot send a request, as the client has been closed.")
        response = await self._transport.handle_async_request(request)
        response.request = request
        if "set-cookie" in response.headers:
            http.cookies.extract_cookies(response)
        if _HTTPX_LOG.isEnabledFor(logging.INFO):
            _HTTPX_LOG.info(
                'HTTP Request: %s %s "%s %d %s"',
                request.method,
                request.url,
                response.http_version,
                response.status_code,
                response.reason_phrase,
            )
        return response

    def redirect_error(self, response: httpx.Response, phase: str) -> ProviderError:
        """The error for a 3xx answer: AnyInfer never follows redirects.

        A redirect would send the credential to wherever `Location` points, so it is a
        configuration problem to fix (the base URL), reported with the status and the
        `Location` (its query and credentials left out, secrets redacted).
        """
        status = response.status_code
        location = response.headers.get("location")
        where = f" to {_redacted_location(location)}" if location else " without a Location"
        return ProviderError(
            f"{self.instance_id}: the provider answered HTTP {status}, a redirect{where}; "
            "AnyInfer does not follow redirects (set base_url to the final address)",
            provider=self.instance_id,
            phase=phase,
            http_status=status,
            retryable=False,
        )

    async def _read_limited(self, response: httpx.Response, limit: int) -> bytes:
        chunks: list[bytes] = []
        size = 0
        try:
            async for chunk in decoded_body(response):
                chunks.append(chunk)
                size += len(chunk)
                if size >= limit:
                    break
        except (httpx.HTTPError, zlib.error):
            pass  # an error body that breaks off is still worth what arrived
        return b"".join(chunks)[:limit]

    # --- reading -------------------------------------------------------------------

    async def iter_bytes(
        self, response: httpx.Response, request: GenerationRequest | None = None
    ) -> AsyncIterator[bytes]:
        """Yield the body's bytes, enforcing `max_response_bytes`, mapping failures.

        Raises:
            ResponseTooLargeError: If the body outgrows the request's byte limit (or
                the provider's default cap, option `max_response_bytes`).
            ProviderTimeoutError: If the provider goes quiet past the read timeout, or
                the body runs past the provider's deadline (option `deadline_s`).
            StreamError: If the connection breaks.
        """
        budget = _ReadBudget(self, request)
        try:
            async for chunk in decoded_body(response):
                budget.take(chunk)
                yield chunk
        except Exception as exc:
            self._raise_read_failure(exc, response)

    def _raise_read_failure(self, exc: Exception, response: httpx.Response) -> NoReturn:
        """Re-raise `exc` from reading the body as its typed error (`_read_failure`), or
        unchanged when it is already typed or is not a read failure."""
        failure = None if isinstance(exc, AnyInferError) else self._read_failure(exc, response)
        if failure is None:
            raise exc
        raise failure from None

    def _read_failure(self, exc: Exception, response: httpx.Response) -> AnyInferError | None:
        """The typed error for a failure reading the body, or `None` if `exc` is not one."""
        if isinstance(exc, httpx.DecodingError | zlib.error):
            return ProtocolError(
                f"{self.instance_id}: the body does not decode as its Content-Encoding "
                f"{response.headers.get('content-encoding')!r} says: {exc}",
                provider=self.instance_id,
            )
        if isinstance(exc, httpx.TransportError):
            return self._transport_error(exc, "stream", mid_response=True)
        return None

    def _transport_error(
        self, exc: httpx.TransportError, phase: str, *, mid_response: bool = False
    ) -> AnyInferError:
        """The typed error for httpx's transport failure `exc`: the one mapping of
        `send` (before the response, `mid_response` false) and of reading the body.

        Before the response, no free pooled connection in time is a `PoolExhaustedError`
        (not retryable), a connect or first-byte timeout a `ProviderTimeoutError` of that
        kind, a refused or failed connection a retryable `ProviderError`. While reading
        the body any timeout is the `idle` kind. Any other failure is a `StreamError`.

        Args:
            exc: What httpx raised.
            phase: Lifecycle phase for the error (`stream` mid-response).
            mid_response: Whether the response had begun (its body was being read).
        """
        pid = self.instance_id
        if isinstance(exc, httpx.PoolTimeout) and not mid_response:
            size = self.max_connections
            return PoolExhaustedError(
                f"{pid}: the connection pool is exhausted: all {size} connections stayed busy "
                "until the timeout (raise the provider option max_connections, or send fewer "
                "requests at once)",
                max_connections=size,
                provider=pid,
                phase=phase,
            )
        if isinstance(exc, httpx.TimeoutException):
            if mid_response:
                kind, what = "idle", "the stream went idle past the read timeout"
            else:
                kind = "connect" if isinstance(exc, httpx.ConnectTimeout) else "first_byte"
                what = f"{kind} timeout"
            return ProviderTimeoutError(
                f"{pid}: {what}", timeout_kind=kind, provider=pid, phase=phase
            )
        if isinstance(exc, httpx.ConnectError) and not mid_response:
            return ProviderError(
                f"{pid}: cannot connect to {self.base_url}: {exc}",
                provider=pid,
                phase=phase,
                retryable=True,
            )
        if mid_response:
            what = f"connection lost mid-response: {exc}"
        else:
            what = f"connection failed before the response: {exc!r}"
        return StreamError(f"{pid}: {what}", provider=pid, phase=phase)

    async def drain(self, frames: AsyncIterator[Any], seconds: float = 0.05) -> None:
        """Read what follows the protocol's end marker, for a moment, before closing.

        A response closed before the end of its body makes httpx drop the connection
        instead of returning it to the pool, so every stream would pay a new TCP (and
        TLS) handshake. After the end marker the body's last bytes normally follow at
        once; the wait is bounded, and nothing read here is used.

        Args:
            frames: The iterator that produced the end marker: the body's reads, or the
                framing iterator (`iter_sse`, `iter_ndjson`) reading them.
            seconds: The longest wait.
        """

        async def read_rest() -> None:
            with contextlib.suppress(AnyInferError, httpx.HTTPError, zlib.error):
                async for _ in frames:
                    pass

        # Uncancelled, with the deadline kept by `finish_uncancelled`: a cancellation of
        # the consumer (leaving) must not land inside httpx's release of the connection,
        # which would keep its pool slot for good. The consumer's cancellation waits
        # `seconds` at most.
        await finish_uncancelled(read_rest(), timeout=seconds)

    async def read_body(
        self, response: httpx.Response, request: GenerationRequest | None = None
    ) -> bytes:
        """Read a whole (non-streamed) body under the same limits as `iter_bytes`."""
        if type(self).iter_bytes is not HTTPAdapter.iter_bytes or (
            "content-encoding" in response.headers
        ):
            chunks = [chunk async for chunk in self.iter_bytes(response, request)]
            return b"".join(chunks)
        # `iter_bytes` inline, for the usual unencoded body.
        budget = _ReadBudget(self, request)
        chunks = []
        try:
            async for chunk in body_reads(response):
                budget.take(chunk)
                chunks.append(chunk)
        except Exception as exc:
            self._raise_read_failure(exc, response)
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    async def read_json(
        self, response: httpx.Response, request: GenerationRequest | None = None
    ) -> Any:
        """Read and parse a JSON body.

        Raises:
            ProtocolError: If the body is not JSON.
        """
        body = await self.read_body(response, request)
        return self.parse_json(body)

    async def fetch_json(
        self,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        json_body: Any = None,
    ) -> Any:
        """GET `path` (POST it, with a JSON body) for an answer that is one JSON document,
        read it and close the response: model listings and other discovery calls (the
        `discover` phase; the arguments are `send`'s).

        Raises:
            ProviderError: As `send` raises it.
            ProtocolError: If the body is not JSON.
        """
        method = "GET" if json_body is None else "POST"
        response = await self.send(
            method, path, json_body=json_body, params=params, phase="discover"
        )
        try:
            return await self.read_json(response)
        finally:
            await response.aclose()

    def body_sender(
        self,
        request: GenerationRequest,
        path: str,
        build: Callable[[GenerationRequest], tuple[dict[str, Any], list[str]]],
    ) -> Sender:
        """The `stream_parts` sender that POSTs `build(request)`'s body to `path`.

        The body is built when the sender is called (inside the stream, so a refusal
        to build it is the stream's error), and `build`'s notes join the warnings.

        Args:
            request: The generation request.
            path: Where the body is POSTed.
            build: The protocol's body builder: the JSON body and its warnings.
        """

        def send(warnings: list[str]) -> Awaitable[httpx.Response]:
            body, notes = build(request)
            warnings.extend(notes)
            return self.send("POST", path, json_body=body, request=request)

        return send

    def parse_json(self, data: bytes | str) -> Any:
        """Parse one JSON document, raising `ProtocolError` on malformed input.

        Nesting too deep to parse is a `ProtocolError` too (`framing.decode_json`).
        """
        return decode_json(data, self.instance_id)

    async def iter_frames(
        self,
        response: httpx.Response,
        request: GenerationRequest | None,
        framer: EventFramer | NDJSONFramer | JSONArrayFramer,
    ) -> AsyncIterator[Any]:
        """Feed the body to `framer` and yield its frames, then what its end releases."""
        feed = framer.feed
        array = isinstance(framer, JSONArrayFramer)
        async for chunk in self.iter_bytes(response, request):
            for frame in feed(chunk):
                yield frame
            if array and framer.closed:  # type: ignore[union-attr]
                # The closing `]`; reading on (nothing more is framed) drains the body.
                array = False
                yield ARRAY_CLOSED
        if not isinstance(framer, JSONArrayFramer):
            for frame in framer.close():
                yield frame

    def event_framer(self, response: httpx.Response, *, bare_json: bool = False) -> EventFramer:
        """The framer of a body streamed as events (framing `"sse"` or `"sse+json"`),
        asked once per response by `iter_sse` and by `stream_parts`' own read.

        Server-sent events (`framing.SSEFramer`) by default. Override for a protocol
        whose events come in another framing (Bedrock's AWS event stream): its framer
        returns the same `SSEEvent`s, and the template reads it inline as it reads SSE.

        Args:
            response: The open response (its headers may decide the framing).
            bare_json: Also read JSON objects sent bare between events (Gemini's
                mid-stream errors).
        """
        return SSEFramer(self.instance_id, self.max_frame_bytes, bare_json=bare_json)

    async def iter_sse(
        self,
        response: httpx.Response,
        request: GenerationRequest | None = None,
        *,
        bare_json: bool = False,
    ) -> AsyncIterator[SSEEvent]:
        """Frame the body as server-sent events (`event_framer`: `framing.SSEFramer`).

        Framing works on bytes (a multi-byte UTF-8 character split across network reads
        is reassembled before decoding), accepts `\\n`, `\\r\\n` and `\\r` line ends,
        skips comment lines (`: keep-alive`), and drops an unterminated event at the end.
        A line or an event larger than `max_frame_bytes` raises `ResponseTooLargeError`.

        Args:
            response: The open response.
            request: The generation request, for its byte limit.
            bare_json: Also read JSON objects sent bare between events (Gemini's
                mid-stream errors).
        """
        framer = self.event_framer(response, bare_json=bare_json)
        async for event in self.iter_frames(response, request, framer):
            yield event

    async def iter_ndjson(
        self, response: httpx.Response, request: GenerationRequest | None = None
    ) -> AsyncIterator[Any]:
        """Frame the body as newline-delimited JSON, yielding parsed objects.

        Lines end at `\\n`, `\\r\\n` or a bare `\\r` (JSON text cannot hold a raw CR, so
        any CR ends a line). Blank lines are skipped; a final line without a newline is
        still parsed (some servers omit it). A line larger than `max_frame_bytes` raises
        `ResponseTooLargeError`.
        """
        framer = NDJSONFramer(self.instance_id, self.max_frame_bytes)
        async for line in self.iter_frames(response, request, framer):
            yield self.parse_json(line)

    # --- the stream template ---------------------------------------------------------

    def stream_parts(
        self,
        request: GenerationRequest,
        send: Sender,
        decode: Callable[[Any, str | None], Iterable[Part]],
        *,
        whole: Callable[[Any], Iterable[Part]] | None = None,
        framing: Framing | Callable[[httpx.Response], Framing] = "sse",
        sentinel: bytes | None = None,
        at_end: Callable[[], Iterable[Part]] | None = None,
        assembler: PartAssembler | None = None,
        empty_ok: bool = True,
    ) -> Batches[Part]:
        """The parts of one request, from sending it to closing its response.

        The template every built-in adapter's `generate` returns, owning what is the
        same for every protocol: sending (`send`, awaited when the stream is first
        read, so that nothing happens before the core's attempt has begun); the
        warnings `send` collected; the whole body (a non-streamed request)
        or the body framed as `framing` (`"sse"`, `"sse+json"` for SSE with bare JSON
        objects between events, `"ndjson"`, `"json-array"`); each frame parsed as JSON
        (`parse_json`) and, with `retain_raw`, kept as a `RawPart`; the frame decoded by
        `decode`; `END` when the protocol's sentinel arrives, then the body drained so
        the connection goes back to the pool; and the response closed, however the
        stream ends. Every part passes through the assembler (finish reconciliation,
        warning dedupe; see `PartAssembler.fix`).

        The parts come out as `Batches`: everything one network read completes (its
        frames, parsed and decoded) is one batch, so the core and the layers above it
        pay one async hop per read, not one per part. Iterated directly, it yields one
        part at a time like any async iterator. When the body reads through this
        class's own `iter_bytes`, `iter_frames`, `iter_sse` and `iter_ndjson`, those
        are done inline; a subclass that overrides one of them is read through its
        override, one frame per batch.

        Args:
            request: The attempt's request.
            send: Called with a list for warnings about the request, returns the
                awaitable open response (`HTTPAdapter.send`). Warnings it appends when
                called are yielded before the request goes out, those it appends while
                awaited after.
            decode: The parts of one parsed frame and its SSE `event:` name (`None`
                in other framings). Yielding `END` marks the protocol's sentinel.
            whole: The parts of a non-streamed body (default: `decode(payload, None)`);
                `END` follows unless it yielded one.
            framing: How the streamed body is framed, or a function choosing it from
                the response (its content type).
            sentinel: An SSE `data:` value that is the sentinel itself, not JSON
                (`b"[DONE]"`).
            at_end: Called when the body ends without a sentinel; yields `END` when
                the protocol counts that clean end as complete (Gemini).
            assembler: The response's `PartAssembler` (default: one that changes
                nothing).
            empty_ok: When false, an empty 200 (a blank body or a stream without a
                single frame) is a `StreamError`: a server that failed without saying so.

        Returns:
            The response's parts, in batches.

        Raises:
            StreamError: For an empty 200 when `empty_ok` is false.
        """
        return Batches(
            self._part_batches(
                request,
                send,
                decode,
                whole,
                framing,
                sentinel,
                at_end,
                assembler or PartAssembler(),
                empty_ok,
            )
        )

    def _parser(self) -> Callable[[Any], Any] | None:
        """`parse_json` when a subclass overrides it, else `None` (`decode_json` inline)."""
        return None if type(self).parse_json is HTTPAdapter.parse_json else self.parse_json

    async def _part_batches(
        self,
        request: GenerationRequest,
        send: Sender,
        decode: Callable[[Any, str | None], Iterable[Part]],
        whole: Callable[[Any], Iterable[Part]] | None,
        framing: Framing | Callable[[httpx.Response], Framing],
        sentinel: bytes | None,
        at_end: Callable[[], Iterable[Part]] | None,
        assembler: PartAssembler,
        empty_ok: bool,
    ) -> AsyncGenerator[list[Part], None]:
        """`stream_parts`' batches: one per network read (see there)."""
        pid = self.instance_id
        fix = assembler.fix_into
        warnings: list[str] = []
        opening = send(warnings)
        try:
            # Warnings known before sending go out first; then those sending found.
            if warnings:
                yield [WarningPart(text) for text in warnings]
            known = len(warnings)
        except BaseException:
            if inspect.iscoroutine(opening):
                opening.close()
            raise
        response = await opening
        unread: AsyncIterator[Any] | None = None  # what follows the end marker
        try:
            if len(warnings) > known:
                yield [WarningPart(text) for text in warnings[known:]]
            parse = self._parser()
            retain = request.retain_raw
            out: list[Part] = []
            if not request.stream:
                body = await self.read_body(response, request)
                if not empty_ok and not body.strip():
                    raise StreamError(
                        f"{pid}: the server answered 200 with an empty body", provider=pid
                    )
                payload = decode_json(body, pid) if parse is None else parse(body)
                if retain:
                    out.append(RawPart(payload))
                try:
                    ended = _take(
                        whole(payload) if whole is not None else decode(payload, None), fix, out
                    )
                except Exception:
                    if out:
                        yield out  # what the failing response still reported
                    raise
                if not ended:
                    out.append(END)
                yield out
                return
            kind = framing if isinstance(framing, str) else framing(response)
            cls = type(self)
            framer: EventFramer | NDJSONFramer | JSONArrayFramer | None = None
            array: JSONArrayFramer | None = None
            parsed = False
            reads: AsyncIterator[Any]
            feed: Callable[[Any], Sequence[Any]]
            if cls.iter_bytes is not HTTPAdapter.iter_bytes or (
                cls.iter_frames is not HTTPAdapter.iter_frames
            ):
                framer = None
            elif kind == "ndjson":
                if cls.iter_ndjson is HTTPAdapter.iter_ndjson:
                    framer = NDJSONFramer(pid, self.max_frame_bytes)
            elif kind == "json-array":
                framer = array = JSONArrayFramer(pid, self.max_frame_bytes)
            elif cls.iter_sse is HTTPAdapter.iter_sse:
                framer = self.event_framer(response, bare_json=kind == "sse+json")
            if framer is not None:
                # Inline: the body's bytes, checked and framed here, one read at a time.
                reads = body_reads(response)
                feed = framer.feed
                take = _ReadBudget(self, request).take
            else:
                # Through the subclass's own framing: one frame per batch.
                if kind == "ndjson":
                    reads = self.iter_ndjson(response, request)
                    parsed = True
                elif kind == "json-array":
                    array = JSONArrayFramer(pid, self.max_frame_bytes)
                    reads = self.iter_frames(response, request, array)
                elif kind == "sse+json":
                    reads = self.iter_sse(response, request, bare_json=True)
                else:
                    reads = self.iter_sse(response, request)
                feed = _one
                take = None
            count = 0
            ended = False
            read: Any
            try:
                async for read in reads:
                    if take is not None:
                        take(read)
                    frames = feed(read)
                    if not frames and (array is None or not array.closed):
                        continue
                    count += len(frames)
                    try:
                        ended = _take_frames(
                            frames, decode, parse, pid, sentinel, parsed, retain, fix, out
                        )
                    except Exception:
                        if out:
                            yield out  # what the failing read still reported
                        raise
                    if not ended and array is not None and array.closed and framer is not None:
                        ended = True  # the closing `]`; reading on drains the body
                        out.append(END)
                    if ended:
                        # Set before the last batch goes out: the core closes this
                        # generator once it has `END`, and closing drains `unread`.
                        unread = reads
                        yield out
                        return
                    if out:
                        yield out
                        out = []
            except Exception as exc:
                self._raise_read_failure(exc, response)
            if framer is not None and array is None:
                tail = framer.close()  # type: ignore[union-attr]
                count += len(tail)
                try:
                    ended = _take_frames(
                        tail, decode, parse, pid, sentinel, False, retain, fix, out
                    )
                except Exception:
                    if out:
                        yield out
                    raise
                if out:
                    yield out
                    out = []
                if ended:
                    return
            if array is not None and (array.array or array.partial):
                return  # cut inside the array (or an object): no sentinel
            if not empty_ok and count == 0:
                raise StreamError(
                    f"{pid}: the stream ended without sending anything (an empty 200: the "
                    "server failed without an error status)",
                    provider=pid,
                    phase="stream",
                )
            if at_end is not None:
                try:
                    _take(at_end(), fix, out)
                except Exception:
                    if out:
                        yield out
                    raise
                if out:
                    yield out
        finally:
            if unread is not None:
                await self.drain(unread)  # lets httpx keep the connection alive
            await response.aclose()

    # --- finish reasons --------------------------------------------------------------

    finish_reasons: ClassVar[Mapping[str, str]] = {}
    """The protocol's finish reasons that have a neutral meaning (`stop`, `length`,
    `tool_calls`, `content_filter`), as `finish_parts` maps them; others pass through
    verbatim."""

    def finish_parts(self, value: Any, where: str) -> tuple[FinishPart, ...]:
        """The `FinishPart` of the finish reason a payload carries, mapped through
        `finish_reasons`; none when the payload has none (absent or empty).

        Args:
            value: The reason as the payload holds it.
            where: Its place in the payload, for the error.

        Raises:
            ProtocolError: If `value` is neither a string nor absent.
        """
        reason = opt_str(value, self.instance_id, where)
        return (FinishPart(self.finish_reasons.get(reason, reason)),) if reason else ()

    # --- tool calls ------------------------------------------------------------------

    def tool_call_part(
        self,
        slot: int,
        call: Mapping[str, Any],
        where: str,
        arguments: Any = None,
        *,
        id_key: str = "id",
    ) -> ToolCallPart:
        """The `ToolCallPart` of a tool-use block whose arguments come as a JSON value,
        not as text (Anthropic's `tool_use`, Bedrock's `toolUse`): the block's id and
        `name` read as optional strings (an empty one is none), the arguments as their
        JSON text (`""` when absent: a block whose arguments follow in fragments).

        Args:
            slot: The call's slot (`PartAssembler.slot`, or the count of calls so far).
            call: The block holding the id and name.
            where: The block's place in the payload, for the errors (`content[]` names
                `content[].id` and `content[].name`).
            arguments: The arguments as the payload holds them.
            id_key: The id's field name (Bedrock's `toolUseId`).

        Raises:
            ProtocolError: If the id or the name is neither a string nor absent.
        """
        call_id, name = self.tool_call_header(call, where, id_key=id_key)
        return ToolCallPart(
            slot, call_id, name, json.dumps(arguments) if arguments is not None else ""
        )

    def tool_call_header(
        self, call: Mapping[str, Any], where: str, *, id_key: str = "id"
    ) -> tuple[str | None, str | None]:
        """A tool-use block's id and `name` (`tool_call_part`'s reading), for a stream
        that opens the call through its `PartAssembler` (`PartAssembler.call`).

        Raises:
            ProtocolError: If the id or the name is neither a string nor absent.
        """
        pid = self.instance_id
        return (
            opt_str(call.get(id_key), pid, f"{where}.{id_key}") or None,
            opt_str(call.get("name"), pid, f"{where}.name") or None,
        )

    # --- errors --------------------------------------------------------------------

    error_code_keys: ClassVar[tuple[str, ...]] = ("code", "type", "status")
    """Where this protocol's error objects keep their code, in order of preference (read
    by `anyinfer._adapters.errormap.error_fields`)."""

    def error_message(self, body: bytes) -> tuple[str, str | None]:
        """Extract `(message, code)` from an error body; override per protocol."""
        payload = loads_or_none(body)
        if payload is None:
            return body.decode("utf-8", "replace").strip()[:500], None
        return message_and_code(payload, self.error_code_keys)

    status_hints: ClassVar[Mapping[int, ErrorKind]] = {}
    """Statuses of the provider's own that the status class alone misreads (Cohere's 498,
    an invalid token: `auth`); read before `error_hint`."""

    cross_class_hints: ClassVar[frozenset[ErrorKind]] = frozenset()
    """Kinds `error_hint` may report across the status class, for a server known to send
    them under a generic status of the other class (Ollama answers 500 for a missing
    model). Empty by default: a 5xx stays a retryable server error."""

    def error_hint(self, code: str | None, message: str) -> ErrorKind | None:
        """What the provider's error code or type means (`None`: it does not say).

        The protocol's own hints; the classifier refines the status class with them
        (and with keywords in the message) but never leaves it. Override to add a
        protocol's codes, falling back to `super()` (the OpenAI-family `CODE_KINDS`).
        """
        return CODE_KINDS.get(code) if code else None

    def error_from_response(
        self, status: int, headers: httpx.Headers, body: bytes, phase: str = "generate"
    ) -> ProviderError:
        """Map an error status and body to a typed error."""
        message, code = self.error_message(body)
        return self.error_from_parts(
            status, message, code, retry_after=parse_retry_after(headers), phase=phase
        )

    def error_from_parts(
        self,
        status: int | None,
        message: str,
        code: str | None,
        *,
        retry_after: float | None = None,
        phase: str = "generate",
    ) -> ProviderError:
        """Map a status and a provider error code/message to a typed error.

        Shared by error statuses and error frames inside a stream (`status=None`): the
        status class first, then `error_hint` and message keywords within it
        (`anyinfer._adapters.errormap.classify`); a status in `status_hints` says what it
        means before the hints do.
        """
        hint = self.status_hints.get(status) if status is not None else None
        return classify(
            status,
            message,
            code,
            hint=hint if hint is not None else self.error_hint(code, message),
            provider=self.instance_id,
            cross_class=self.cross_class_hints,
            retry_after=retry_after,
            phase=phase,
        )


def parse_retry_after(headers: httpx.Headers) -> float | None:
    """Seconds to wait from `retry-after-ms` or `Retry-After` (seconds or HTTP date)."""
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    import email.utils

    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _redacted_location(location: str) -> str:
    """A `Location` value without its query, fragment and credentials, redacted."""
    try:
        url = httpx.URL(location)
    except (httpx.InvalidURL, ValueError, TypeError):
        return "an unparsable address"
    shown = url.copy_with(query=None, fragment=None, username=None, password=None)
    text = str(shown)
    if url.query:
        text += "?…"
    return redact(text[:300])
