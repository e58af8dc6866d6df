"""A program that only generates never loads the embedding and rerank code."""

from __future__ import annotations

import subprocess
import sys

CODE = """
import asyncio, base64, struct, sys
import httpx
import anyinfer as ai

chat = {"id": "c", "object": "chat.completion", "model": "m", "choices": [
    {"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}
gemini = {"candidates": [{"content": {"role": "model", "parts": [{"text": "hi"}]},
    "finishReason": "STOP"}], "usageMetadata": {"promptTokenCount": 1,
    "candidatesTokenCount": 1, "totalTokenCount": 2}}
vector = base64.b64encode(struct.pack("<2f", 0.5, 0.25)).decode()
embedded = {"object": "list", "data": [{"object": "embedding", "index": 0,
    "embedding": vector}], "model": "e", "usage": {"prompt_tokens": 1, "total_tokens": 1}}

def answer(request):
    if request.url.path.endswith("/embeddings"):
        return httpx.Response(200, json=embedded)
    return httpx.Response(200, json=gemini if "generateContent" in request.url.path else chat)

transport = httpx.MockTransport(answer)

async def main():
    settings = [ai.ProviderSettings(p, api_key="k", transport=transport)
                for p in ("openai", "gemini")]
    async with ai.AsyncClient(settings) as client:
        for target in ("openai:m", "gemini:m"):
            assert (await client.generate("hi", target=target)).text == "hi"
        loaded = sorted(m for m in sys.modules if m.startswith("anyinfer._embed"))
        assert not loaded, loaded
        result = await client.embed("hi", target="openai:e")
        assert list(result[0]) == [0.5, 0.25]
asyncio.run(main())
print("ok")
"""


def test_generation_alone_never_loads_the_embedding_modules() -> None:
    out = subprocess.run(
        [sys.executable, "-c", CODE], capture_output=True, text=True, timeout=60, check=False
    )
    assert out.stdout.strip() == "ok", out.stderr


GENERATING_MODULES = (
    "anthropic",
    "azure",
    "bedrock",
    "cohere",
    "gemini",
    "ollama",
    "openai_chat",
    "openai_compat",
    "openai_responses",
    "vertex",
)
"""The provider modules that serve generation (Jina, TEI and Voyage only embed)."""


def test_importing_a_generation_provider_never_loads_the_embedding_modules() -> None:
    code = (
        "import importlib, sys\n"
        f"for name in {GENERATING_MODULES!r}:\n"
        "    importlib.import_module('anyinfer._providers.' + name)\n"
        "    loaded = sorted(m for m in sys.modules if m.startswith('anyinfer._embed'))\n"
        "    assert not loaded, (name, loaded)\n"
        "print('ok')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert out.stdout.strip() == "ok", out.stderr
