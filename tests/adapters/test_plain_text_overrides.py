"""A subclass that overrides a hook a text-chunk shortcut stands for is read through its
override: the shortcut (`plain_text` in the OpenAI Chat, Gemini and Ollama adapters) is
taken only while the module's own hooks are in place (`_adapters.base.inherits`)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

import httpx
import pytest

import anyinfer as ai
from anyinfer._adapters.base import PartAssembler
from anyinfer._providers.gemini import GeminiAdapter
from anyinfer._providers.ollama import OllamaAdapter
from anyinfer._providers.openai_chat import OpenAIChatAdapter
from anyinfer._stream.parts import Part, TextPart
from tests.helpers import run, sse


def shouted(parts: Iterable[Part]) -> list[Part]:
    return [TextPart(p.text.upper()) if type(p) is TextPart else p for p in parts]


class LoudChat(OpenAIChatAdapter):
    def parts_from_delta(self, delta: dict[str, Any], key: str) -> Iterable[Part]:
        return shouted(super().parts_from_delta(delta, key))


class LoudGemini(GeminiAdapter):
    def parts_from_chunk(self, chunk: Any, calls: PartAssembler, phase: str) -> Iterable[Part]:
        return shouted(super().parts_from_chunk(chunk, calls, phase))


class LoudOllama(OllamaAdapter):
    def parts_from_message(self, message: dict[str, Any], calls: PartAssembler) -> Iterator[Part]:
        yield from shouted(super().parts_from_message(message, calls))


def chat_body() -> bytes:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    return sse(
        chunk({"role": "assistant", "content": "hi"}),
        chunk({"content": " there"}),
        chunk({}, "stop"),
    )


def gemini_body() -> bytes:
    def chunk(text: str, finish: str | None = None) -> dict[str, Any]:
        candidate: dict[str, Any] = {"content": {"parts": [{"text": text}], "role": "model"}}
        if finish:
            candidate["finishReason"] = finish
        return {"candidates": [candidate], "usageMetadata": {"promptTokenCount": 1}}

    return sse(chunk("hi"), chunk(" there"), chunk("", "STOP"), done=False)


def ollama_body() -> bytes:
    lines = [
        {"message": {"role": "assistant", "content": "hi"}, "done": False},
        {"message": {"role": "assistant", "content": " there"}, "done": False},
        {"message": {"role": "assistant", "content": ""}, "done": True, "done_reason": "stop"},
    ]
    return b"".join(json.dumps(line).encode() + b"\n" for line in lines)


CASES = {
    "openai": (LoudChat, chat_body, "text/event-stream"),
    "gemini": (LoudGemini, gemini_body, "text/event-stream"),
    "ollama": (LoudOllama, ollama_body, "application/x-ndjson"),
}


@pytest.mark.parametrize("provider", CASES)
def test_an_override_of_a_shortcut_hook_is_honoured(provider: str) -> None:
    cls, body, kind = CASES[provider]

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=body(), headers={"content-type": kind})

    registry = ai.ProviderRegistry(entry_points=False)
    registry.register(provider, cls, replace=True)
    settings = ai.ProviderSettings(
        provider, api_key="k", base_url="http://127.0.0.1:9", transport=httpx.MockTransport(handler)
    )

    async def main() -> str:
        async with ai.AsyncClient([settings], registry=registry) as client:
            async with client.stream("hello", target=f"{provider}:m") as stream:
                async for _ in stream:
                    pass
            return stream.result.text

    assert run(main()) == "HI THERE"
