"""The adapter behind a `ScriptedProvider`: it yields parts, not bytes.

A real adapter turns HTTP bytes into provider-neutral parts; this one turns a scripted
`Reply` into the same parts, so the core (timing, ordering, usage merge, the trailing
usage and failure-flush rules, tool-call assembly) and everything above it run exactly
as they do for a real provider. Imported when the first scripted provider is registered.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncGenerator, Sequence
from typing import TYPE_CHECKING, ClassVar, cast

from .._adapters.base import Adapter, DiscoveredModel
from .._adapters.profile import INPUT_KINDS, AdapterProfile, InputSupport
from .._errors import ProviderTimeoutError
from .._request import GenerationRequest
from .._stream.parts import (
    END,
    Batches,
    FinishPart,
    Part,
    RawPart,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    UsagePart,
)
from ._scripted import Fail

if TYPE_CHECKING:
    from ._scripted import ScriptedProvider

__all__ = ["ScriptedAdapter", "scripted_adapter_class"]


class ScriptedAdapter(Adapter):
    """Serves one `ScriptedProvider`'s replies (one subclass per provider, whose `script`
    is that provider)."""

    provider_id = "scripted"
    # A test double speaks no wire: it takes every content part, so an app's documents
    # and audio reach its script (a profile given to `scripted_adapter_class` inherits
    # this unless it declares `inputs` itself).
    profile = AdapterProfile(
        inputs=InputSupport(protocol="scripted test double", kinds=frozenset(INPUT_KINDS))
    )
    script: ClassVar[ScriptedProvider]

    def generate(self, request: GenerationRequest) -> Batches[Part]:
        """The parts of the next scripted reply (chosen when the stream is first read)."""
        return Batches(self._batches(request))

    async def models(self) -> Sequence[DiscoveredModel]:
        """The scripted `models`.

        Raises:
            ConfigError: When the provider was given none.
        """
        return self.script._discovered(self.instance_id)

    async def _wait(self, seconds: float, timeout: float, kind: str) -> None:
        """Sleep `seconds`, or time out as an HTTP read would when that is longer than
        the request's timeout."""
        if seconds <= 0:
            return
        if seconds > timeout:
            await asyncio.sleep(timeout)
            pid = self.instance_id
            first = kind == "first_byte"
            raise ProviderTimeoutError(
                f"{pid}: first_byte timeout"
                if first
                else f"{pid}: the stream went idle past the read timeout",
                timeout_kind=kind,
                provider=pid,
                phase="generate" if first else "stream",
            )
        await asyncio.sleep(seconds)

    async def _batches(self, request: GenerationRequest) -> AsyncGenerator[list[Part], None]:
        pid = self.instance_id
        _call, reply = await self.script._reply(pid, request)
        timeout = request.timeout_s if request.timeout_s is not None else self.settings.timeout_s
        if isinstance(reply, Fail):
            await self._wait(reply.delay_s, timeout, "first_byte")
            raise reply.error(pid)
        await self._wait(reply.delay_s, timeout, "first_byte")
        cut = reply.cut_after
        raw: list[Part] = (
            [RawPart(reply.raw)] if request.retain_raw and reply.raw is not None else []
        )
        usage: list[Part] = [] if reply.usage is None else [UsagePart(reply.usage)]
        calls: list[Part] = [
            ToolCallPart(i, call_id, name, arguments)
            for i, (call_id, name, arguments) in enumerate(reply.wire_calls())
        ]
        if not request.stream:
            if cut is not None:  # a truncated whole body: nothing of it is read
                raise Fail(reply.cut_error).error(pid)
            whole: list[Part] = list(raw)
            reasoning, text = "".join(reply.reasoning_pieces()), "".join(reply.text_pieces())
            if reasoning:
                whole.append(ReasoningPart(reasoning))
            if text:
                whole.append(TextPart(text))
            yield [*whole, *calls, *usage, FinishPart(reply.reason), END]
            return
        content: list[Part] = [
            *(ReasoningPart(p) for p in reply.reasoning_pieces()),
            *(TextPart(p) for p in reply.text_pieces()),
            *calls,
        ]
        head = [*raw, *(usage if reply.usage_at == "start" else ())]
        if head:
            yield head
        for i, part in enumerate(content):
            if isinstance(cut, int) and i >= cut:
                break
            if i and reply.interval_s:
                await self._wait(reply.interval_s, timeout, "idle")
            yield [part]
        if isinstance(cut, int):  # cut before the finish reason: the attempt fails
            raise Fail(reply.cut_error).error(pid)
        finish: list[Part] = [FinishPart(reply.reason)]
        if cut == "finish":  # cut after it: what came counts, the trailing usage is lost
            yield finish
            raise Fail(reply.cut_error).error(pid)
        if reply.usage_at == "end":
            finish.extend(usage)
        finish.append(END)
        yield finish


def scripted_adapter_class(
    provider: ScriptedProvider, profile: AdapterProfile | None
) -> type[ScriptedAdapter]:
    """A `ScriptedAdapter` subclass serving `provider`, declaring `profile`.

    The default profile declares the `json_schema` structured-output mechanism, so the
    schema of a `schema=` request reaches the script in `response_format` (where
    `ScriptedCall.schema` reads it) rather than in the prompt.
    """
    if profile is None:
        from .._knowledge.capabilities import ModelCapabilities

        profile = AdapterProfile(structured=ModelCapabilities(json_schema=True))
    elif not isinstance(profile, AdapterProfile):
        from .._errors import ConfigError

        raise ConfigError(f"profile must be an AdapterProfile, got {type(profile).__name__}")
    name = "Scripted_" + re.sub(r"\W", "_", provider.provider_id)
    namespace = {
        "provider_id": provider.provider_id,
        "profile": profile,
        "script": provider,
        "__module__": __name__,
        "__qualname__": name,
        "__doc__": f"Serves the scripted provider {provider.provider_id!r}.",
    }
    return cast("type[ScriptedAdapter]", type(name, (ScriptedAdapter,), namespace))
