"""The broken adapters. Each docstring says what real bug it reproduces."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

from anyinfer import ProviderError, Usage
from anyinfer._providers.openai_chat import FINISH_MAP, OpenAIChatAdapter
from anyinfer.adapters import (
    END,
    FinishPart,
    GenerationRequest,
    Part,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    UsagePart,
)

__all__ = ["BROKEN"]


class StopsAtFinish(OpenAIChatAdapter):
    """Stops reading at `finish_reason` and never reaches `data: [DONE]`.

    The classic undercount: OpenAI's `include_usage` chunk comes *after* the finish
    chunk, so the usage it carries is lost.
    """

    async def generate(self, request: GenerationRequest) -> AsyncIterator[Part]:
        if not request.stream:
            async for part in super().generate(request):
                yield part
            return
        response = await self.send(
            "POST", "/chat/completions", json_body=self.build_body(request), request=request
        )
        try:
            async for sse in self.iter_sse(response, request):
                if sse.data == b"[DONE]":
                    yield END
                    return
                finished = False
                for part in self.parts_from_chunk(self.parse_json(sse.data), "delta"):
                    finished = finished or isinstance(part, FinishPart)
                    yield part
                if finished:
                    yield END  # "we're done" -- but the usage chunk has not arrived yet
                    return
        finally:
            await response.aclose()


class HoldsUsageUntilEnd(OpenAIChatAdapter):
    """Keeps usage back and reports it once, when the stream completes.

    Looks tidy (one usage report) but a stream that breaks after usage arrived loses
    every figure, breaking failure-path flushing.
    """

    async def generate(self, request: GenerationRequest) -> AsyncIterator[Part]:
        held = Usage()
        async for part in super().generate(request):
            if isinstance(part, UsagePart):
                held = held.merge(part.usage)
                continue
            if part is END and not held.is_empty():
                yield UsagePart(held)
            yield part


class MergesParallelToolCalls(OpenAIChatAdapter):
    """Puts every tool-call fragment in slot 0, ignoring `index`.

    Works for one call at a time; parallel calls are glued into one call with
    unparseable arguments.
    """

    def parts_from_delta(self, delta: dict[str, Any], key: str) -> Iterator[Part]:
        for part in super().parts_from_delta(delta, key):
            if isinstance(part, ToolCallPart):
                yield ToolCallPart(0, part.call_id, part.name, part.arguments_fragment)
            else:
                yield part


class ToolSlotsOffByOne(OpenAIChatAdapter):
    """Numbers tool-call slots from 1 instead of 0.

    Invisible while the provider sends call ids; when it omits them the synthesized ids
    come out as `call_1`, `call_2`, ... instead of `call_0`, `call_1`, ...
    """

    def parts_from_delta(self, delta: dict[str, Any], key: str) -> Iterator[Part]:
        for part in super().parts_from_delta(delta, key):
            if isinstance(part, ToolCallPart):
                yield ToolCallPart(part.index + 1, part.call_id, part.name, part.arguments_fragment)
            else:
                yield part


class DropsReasoning(OpenAIChatAdapter):
    """Only knows `delta.reasoning`, not DeepSeek/vLLM's `reasoning_content`."""

    def parts_from_delta(self, delta: dict[str, Any], key: str) -> Iterator[Part]:
        for part in super().parts_from_delta(delta, key):
            if isinstance(part, ReasoningPart) and "reasoning" not in delta:
                continue
            yield part


class CrashesOnUnknownFinish(OpenAIChatAdapter):
    """Looks finish reasons up in a closed table: a new value raises `KeyError`."""

    def parts_from_chunk(self, chunk: Any, key: str) -> Iterator[Part]:
        for part in super().parts_from_chunk(chunk, key):
            if isinstance(part, FinishPart) and part.reason not in FINISH_MAP.values():
                yield FinishPart({v: v for v in FINISH_MAP.values()}[part.reason])
            else:
                yield part


class BareErrorOnMalformed(OpenAIChatAdapter):
    """Parses frames with `json.loads` directly: garbage raises a bare `ValueError`."""

    def parse_json(self, data: bytes | str) -> Any:
        return json.loads(data)


class SwallowsErrorStatus(OpenAIChatAdapter):
    """Treats an HTTP error answer as an empty, successful response."""

    async def generate(self, request: GenerationRequest) -> AsyncIterator[Part]:
        try:
            async for part in super().generate(request):
                yield part
        except ProviderError as exc:
            if exc.http_status is None:
                raise
            yield FinishPart("stop")
            yield END


class HoldsBackContent(OpenAIChatAdapter):
    """Buffers all text and releases it when the stream completes.

    The consumer sees nothing until the end; when the stream breaks midway, text the
    provider already sent is never shown and the failure is reported as if no content
    had arrived.
    """

    async def generate(self, request: GenerationRequest) -> AsyncIterator[Part]:
        text: list[str] = []
        async for part in super().generate(request):
            if isinstance(part, TextPart):
                text.append(part.text)
                continue
            if part is END and text:
                yield TextPart("".join(text))
            yield part


class ForgetsSentinel(OpenAIChatAdapter):
    """Returns at `data: [DONE]` without telling the core (no `EndPart`)."""

    async def generate(self, request: GenerationRequest) -> AsyncIterator[Part]:
        async for part in super().generate(request):
            if part is END and request.stream:
                return
            yield part


class PumpsInBackground(OpenAIChatAdapter):
    """Reads the response in a background task that feeds a queue, and never cancels it.

    A "prefetching" adapter: when the consumer leaves the stream early, the pump keeps
    the provider connection open and reading until the provider finishes or the read
    timeout fires.
    """

    async def generate(self, request: GenerationRequest) -> AsyncIterator[Part]:
        queue: asyncio.Queue[Part | BaseException | None] = asyncio.Queue()
        parts = super().generate(request)

        async def pump() -> None:
            try:
                async for part in parts:
                    await queue.put(part)
                await queue.put(None)
            except BaseException as exc:  # handed to the consumer
                await queue.put(exc)

        pumps: set[asyncio.Task[None]] = self.__dict__.setdefault("pumps", set())
        pumps.add(asyncio.get_running_loop().create_task(pump()))
        while True:
            item = await queue.get()
            if item is None:
                return
            if isinstance(item, BaseException):
                raise item
            yield item


class IgnoresErrorChunk(OpenAIChatAdapter):
    """Reads an in-stream `{"error": ...}` chunk as a chunk with no choices.

    Gateways (OpenRouter, Groq, LiteLLM proxies) report an upstream failure inside a
    200 stream; a reader that only looks at `choices` skips it and reports a cut
    connection instead of the provider's error.
    """

    def parts_from_chunk(self, chunk: Any, key: str) -> Iterator[Part]:
        if isinstance(chunk, dict) and "error" in chunk:
            return iter(())
        return super().parts_from_chunk(chunk, key)


class DropsRetryAfter(OpenAIChatAdapter):
    """Maps a 429 to `RateLimitError` but never reads the `Retry-After` header.

    The router then backs off on its own schedule, and callers cannot honour the delay
    the provider asked for.
    """

    def error_from_response(
        self, status: int, headers: Any, body: bytes, phase: str = "generate"
    ) -> ProviderError:
        message, code = self.error_message(body)
        return self.error_from_parts(status, message, code, phase=phase)


class LineFeedOnlyFraming(OpenAIChatAdapter):
    """Frames server-sent events by splitting on `\\n\\n` only.

    Legal `\\r\\n` line ends (some proxies and servers send them) never end an event, so
    the whole body is read as one unterminated event and dropped.
    """

    async def iter_sse(self, response: Any, request: Any = None) -> AsyncIterator[Any]:
        from anyinfer._adapters.base import SSEEvent

        buf = b""
        async for chunk in self.iter_bytes(response, request):
            buf += chunk
            *events, buf = buf.split(b"\n\n")
            for event in events:
                data = [ln[6:] for ln in event.split(b"\n") if ln.startswith(b"data: ")]
                if data:
                    yield SSEEvent(None, b"\n".join(data))


BROKEN: dict[str, tuple[type[OpenAIChatAdapter], str]] = {
    "broken-stops-at-finish": (StopsAtFinish, "trailing-usage"),
    "broken-holds-usage": (HoldsUsageUntilEnd, "failure-flush"),
    "broken-merges-tool-calls": (MergesParallelToolCalls, "result-agreement"),
    "broken-tool-slots": (ToolSlotsOffByOne, "result-agreement"),
    "broken-drops-reasoning": (DropsReasoning, "result-agreement"),
    "broken-unknown-finish": (CrashesOnUnknownFinish, "error-type"),
    "broken-bare-malformed": (BareErrorOnMalformed, "error-type"),
    "broken-swallows-status": (SwallowsErrorStatus, "error-type"),
    "broken-holds-content": (HoldsBackContent, "failure-flush"),
    "broken-forgets-sentinel": (ForgetsSentinel, "trailing-usage"),
    "broken-pumps-in-background": (PumpsInBackground, "early-exit-cancels"),
    "broken-ignores-error-chunk": (IgnoresErrorChunk, "error-type"),
    "broken-drops-retry-after": (DropsRetryAfter, "error-type"),
    "broken-lf-only-framing": (LineFeedOnlyFraming, "failure-flush"),
}
"""Provider id -> (adapter class, the guarantee the suite must report broken)."""
