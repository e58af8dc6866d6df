"""OpenAI Chat Completions through the official `openai` SDK.

Built on `anyinfer.adapters.Adapter` only: the request is the SDK's
`chat.completions.create(...)`, the response is the SDK's `ChatCompletionChunk` /
`ChatCompletion` objects, and SDK exceptions are mapped to AnyInfer's typed errors.

What the SDK does not do for its caller, a small transport wrapper under its
`httpx.AsyncClient` does (`_Transport`, `_Body`):

- tell `data: [DONE]` from a quiet end of body: the SDK breaks out of its loop on
  `[DONE]` and ends quietly on a clean end of body alike, and the adapter contract
  yields `EndPart` only for the sentinel;
- decode `Content-Encoding` a bounded piece at a time under the request's
  `max_response_bytes` (httpx expands a whole network read at once: a decompression
  bomb would take gigabytes before any limit is checked);
- finish a response's close even when the task is cancelled meanwhile (an httpx
  response whose close is interrupted keeps its pool slot);
- give back a connection that a request cancelled while it opened leaves in httpcore's
  pool (`reclaim_orphans`: httpcore 1.0 keeps it for good).

It sends text messages only (no tools, sampling or response format): enough for the
conformance suite, which checks how responses are read.
"""

from __future__ import annotations

import contextvars
import json
import zlib
from collections.abc import AsyncIterator, Iterator
from typing import Any, ClassVar

import httpx
import openai

from anyinfer import (
    AuthenticationError,
    ContentFilterError,
    ContextWindowError,
    ModelNotFoundError,
    OverloadedError,
    ProtocolError,
    ProviderError,
    ProviderTimeoutError,
    RateLimitError,
    ResponseTooLargeError,
    StreamError,
    Usage,
)
from anyinfer.adapters import (
    END,
    Adapter,
    FinishPart,
    GenerationRequest,
    Part,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    UsagePart,
    finish_uncancelled,
    parse_retry_after,
    reclaim_orphans,
)

__all__ = ["SDKChatAdapter"]

FINISH = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "content_filter": "content_filter",
}
TAP = "conformance_sdk.body"
"""The `httpx.Response.extensions` key of a response's `_Body`."""
_PIECE = 64 * 1024
_LIMIT: contextvars.ContextVar[int | None] = contextvars.ContextVar("limit", default=None)
"""`max_response_bytes` of the request being sent (the transport runs in its task)."""


class _Body(httpx.AsyncByteStream):
    """A response body, decoded here under the request's byte limit, that notes whether
    an SSE `data: [DONE]` line went through.

    httpx would decode `Content-Encoding` a whole network read at a time (2.5 KB of
    `gzip, gzip` can expand to 1 GiB at once), so the adapter takes the header off and
    expands each layer at most `_PIECE` bytes per step, checking `max_response_bytes`
    as it goes.
    """

    def __init__(
        self, inner: httpx.AsyncByteStream, encodings: list[str], limit: int | None, pid: str
    ) -> None:
        self.inner = inner
        self.layers = [zlib.decompressobj(47) for _ in encodings]  # gzip or zlib
        self.limit = limit
        self.pid = pid
        self.done = False
        self._line = b""
        self._seen = 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for raw in self.inner:
            for chunk in self._decoded(raw):
                self._seen += len(chunk)
                if self.limit is not None and self._seen > self.limit:
                    raise ResponseTooLargeError(
                        f"{self.pid}: response exceeded max_response_bytes={self.limit}",
                        provider=self.pid,
                    )
                if not self.done:
                    text = (self._line + chunk).replace(b"\r\n", b"\n").replace(b"\r", b"\n")
                    *lines, self._line = text.split(b"\n")
                    self._line = self._line[-64:]  # only a `data: [DONE]` line matters
                    self.done = any(
                        ln.startswith(b"data:") and ln[5:].strip() == b"[DONE]" for ln in lines
                    )
                yield chunk

    def _decoded(self, raw: bytes) -> Iterator[bytes]:
        if not self.layers:
            yield raw
            return
        try:
            yield from _through(self.layers, raw)
        except zlib.error as exc:
            raise ProtocolError(
                f"{self.pid}: the body does not decode as its Content-Encoding says: {exc}",
                provider=self.pid,
            ) from None

    async def aclose(self) -> None:
        # Run to the end even when the task is cancelled meanwhile: an httpx response
        # whose close is interrupted keeps its pool slot for good.
        await finish_uncancelled(self.inner.aclose())


def _through(layers: list[Any], data: bytes) -> Iterator[bytes]:
    """`data` expanded through every layer, at most `_PIECE` bytes per step."""
    if not layers:
        yield data
        return
    layer = layers[0]
    while True:
        out = layer.decompress(data, _PIECE)
        data = layer.unconsumed_tail
        if out:
            yield from _through(layers[1:], out)
        elif not data:
            return


class _Transport(httpx.AsyncBaseTransport):
    def __init__(self, inner: httpx.AsyncBaseTransport, pid: str) -> None:
        self.inner = inner
        self.pid = pid

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        try:
            response = await self.inner.handle_async_request(request)
        except BaseException:
            # A cancellation while a new connection opens strands it in httpcore's pool.
            await finish_uncancelled(reclaim_orphans(self.inner))
            raise
        if isinstance(response.stream, httpx.AsyncByteStream):
            header = response.headers.get("content-encoding", "")
            encodings = [e.strip() for e in header.split(",") if e.strip() not in ("", "identity")]
            if encodings:
                del response.headers["content-encoding"]
            body = _Body(response.stream, encodings, _LIMIT.get(), self.pid)
            response.stream = body
            response.extensions[TAP] = body
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


class SDKChatAdapter(Adapter):
    """OpenAI Chat Completions, sent and read by `openai.AsyncOpenAI`."""

    provider_id: ClassVar[str] = "openai-sdk"
    default_base_url: ClassVar[str | None] = "https://api.openai.com/v1"
    api_key_env: ClassVar[str | None] = "OPENAI_API_KEY"

    def __init__(self, settings: Any) -> None:
        super().__init__(settings)
        connections = int(settings.options.get("max_connections", 100))
        transport = settings.transport or httpx.AsyncHTTPTransport(
            limits=httpx.Limits(
                max_connections=connections, max_keepalive_connections=min(20, connections)
            ),
            trust_env=False,
        )
        timeout = httpx.Timeout(settings.timeout_s, connect=min(settings.timeout_s, 15.0))
        self.client = openai.AsyncOpenAI(
            api_key=settings.api_key or "unused",
            base_url=settings.base_url or self.default_base_url,
            max_retries=0,
            default_headers=dict(settings.headers),
            http_client=httpx.AsyncClient(  # type: ignore[arg-type]  # legacy httpx is accepted
                transport=_Transport(transport, self.instance_id), timeout=timeout, trust_env=False
            ),
        )

    async def aclose(self) -> None:
        await self.client.close()

    # --- request -------------------------------------------------------------------

    def _kwargs(self, request: GenerationRequest) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "model": request.model,
            "messages": [{"role": m.role, "content": m.text} for m in request.messages],
        }
        if request.timeout_s is not None:
            t = request.timeout_s
            kwargs["timeout"] = httpx.Timeout(t, connect=min(t, 15.0))
        if request.stream:
            kwargs["stream"] = True
            kwargs["stream_options"] = {"include_usage": True}
        return kwargs

    # --- response ------------------------------------------------------------------

    async def generate(self, request: GenerationRequest) -> AsyncIterator[Part]:
        _LIMIT.set(request.max_response_bytes)
        try:
            response = await self.client.chat.completions.create(**self._kwargs(request))
        except openai.OpenAIError as exc:
            raise self._typed(exc, "generate") from None
        except ValueError as exc:  # a non-streamed body that is not JSON
            raise self._malformed(exc) from None
        if not request.stream:
            try:
                parts = list(self._parts(response, whole=True))
            except (ValueError, TypeError, AttributeError) as exc:
                raise self._malformed(exc) from None
            for part in parts:
                yield part
            yield END
            return
        stream = response
        refused = False
        try:
            chunks = stream.__aiter__()
            while True:
                try:
                    chunk = await chunks.__anext__()
                except StopAsyncIteration:
                    break
                except openai.OpenAIError as exc:
                    raise self._typed(exc, "stream") from None
                except ValueError as exc:  # a frame that is not JSON (or not UTF-8)
                    raise self._malformed(exc) from None
                try:
                    parts = list(self._parts(chunk, whole=False))
                except (ValueError, TypeError, AttributeError) as exc:
                    raise self._malformed(exc) from None
                refused = refused or self._refused(chunk)
                for part in parts:
                    if refused and isinstance(part, FinishPart) and part.reason == "stop":
                        part = FinishPart("content_filter")
                    yield part
            watch = stream.response.extensions.get(TAP)
            if watch is not None and watch.done:
                yield END
        finally:
            await stream.close()

    @staticmethod
    def _refused(chunk: Any) -> bool:
        for choice in chunk.choices or ():
            if choice.index == 0 and getattr(choice.delta, "refusal", None):
                return True
        return False

    def _parts(self, obj: Any, *, whole: bool) -> Iterator[Part]:
        refused = False
        for choice in obj.choices or ():
            if getattr(choice, "index", 0) != 0:
                continue  # n > 1 is not supported
            delta = choice.message if whole else choice.delta
            if delta is not None:
                extra = delta.model_extra or {}
                for name in ("reasoning_content", "reasoning"):
                    reasoning = extra.get(name)
                    if isinstance(reasoning, str) and reasoning:
                        yield ReasoningPart(reasoning)
                        break
                if delta.content:
                    yield TextPart(delta.content)
                if getattr(delta, "refusal", None):
                    refused = True
                    yield TextPart(delta.refusal)
                for position, call in enumerate(delta.tool_calls or ()):
                    fn = call.function
                    args = getattr(fn, "arguments", None) if fn is not None else None
                    if args is not None and not isinstance(args, str):
                        args = json.dumps(args)
                    yield ToolCallPart(
                        getattr(call, "index", position) if not whole else position,
                        call.id or None,
                        (getattr(fn, "name", None) if fn is not None else None) or None,
                        args or "",
                    )
            reason = choice.finish_reason
            if reason:
                reason = FINISH.get(reason, reason)
                if refused and whole and reason == "stop":
                    reason = "content_filter"
                yield FinishPart(reason)
        usage = getattr(obj, "usage", None)
        if usage is not None:
            yield UsagePart(self._usage(usage))

    @staticmethod
    def _usage(u: Any) -> Usage:
        prompt = getattr(u, "prompt_tokens_details", None)
        completion = getattr(u, "completion_tokens_details", None)
        return Usage(
            input_tokens=getattr(u, "prompt_tokens", None),
            output_tokens=getattr(u, "completion_tokens", None),
            total_tokens=getattr(u, "total_tokens", None),
            cache_read_tokens=getattr(prompt, "cached_tokens", None) if prompt else None,
            reasoning_tokens=getattr(completion, "reasoning_tokens", None) if completion else None,
        )

    # --- errors --------------------------------------------------------------------

    def _malformed(self, exc: Exception) -> ProtocolError:
        return ProtocolError(
            f"{self.instance_id}: malformed response: {exc}", provider=self.instance_id
        )

    def _typed(self, exc: openai.OpenAIError, phase: str) -> ProviderError:
        pid = self.instance_id
        if isinstance(exc, openai.APITimeoutError):
            kind = "idle" if phase == "stream" else "first_byte"
            if isinstance(exc.__cause__, httpx.ConnectTimeout):
                kind = "connect"
            return ProviderTimeoutError(
                f"{pid}: {kind} timeout", timeout_kind=kind, provider=pid, phase=phase
            )
        if isinstance(exc, openai.APIConnectionError):
            if phase == "generate" and isinstance(exc.__cause__, httpx.ConnectError):
                return ProviderError(
                    f"{pid}: cannot connect: {exc.__cause__}",
                    provider=pid,
                    phase=phase,
                    retryable=True,
                )
            return StreamError(
                f"{pid}: connection lost: {exc.__cause__!r}", provider=pid, phase=phase
            )
        status: int | None = None
        retry_after = None
        if isinstance(exc, openai.APIStatusError):
            status = exc.status_code
            retry_after = parse_retry_after(httpx.Headers(exc.response.headers.multi_items()))
        code = getattr(exc, "code", None) or getattr(exc, "type", None)
        code = str(code) if code is not None else None
        body = getattr(exc, "body", None)
        message = body.get("message") if isinstance(body, dict) else None
        message = str(message or getattr(exc, "message", "") or exc)
        if status is None and code is not None and code.isdigit():
            status = int(code)  # gateways put the upstream status in an error chunk
        return _error(pid, status, message, code, retry_after, phase)


def _error(
    pid: str,
    status: int | None,
    message: str,
    code: str | None,
    retry_after: float | None,
    phase: str,
) -> ProviderError:
    text = f"{pid}: {'HTTP ' + str(status) if status else 'error frame'}: {message}"
    kw: dict[str, Any] = {"provider": pid, "http_status": status, "phase": phase}
    lowered = f"{code or ''} {message}".lower()
    if "context_length_exceeded" in lowered or "maximum context" in lowered:
        return ContextWindowError(text, **kw)
    if "content_filter" in lowered or "content_policy" in lowered:
        return ContentFilterError(text, **kw)
    if status in (401, 403) or "invalid_api_key" in lowered:
        return AuthenticationError(text, **kw)
    if status == 429 or "rate_limit" in lowered:
        quota = "insufficient_quota" in lowered
        return RateLimitError(text, retry_after=retry_after, retryable=not quota, **kw)
    if status in (503, 529) or "overloaded" in lowered:
        return OverloadedError(text, **kw)
    if status == 404 or "model_not_found" in lowered:
        return ModelNotFoundError(text, **kw)
    if status == 408:
        return ProviderTimeoutError(text, timeout_kind="total", **kw)
    return ProviderError(text, retryable=status is None or status >= 500, **kw)
