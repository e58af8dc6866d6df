"""Client and AsyncClient behaviour over httpx transports (no sockets)."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from helpers import settings_for, sse

import anyinfer as ai


def chunk(content: str | None = None, finish: str | None = None) -> dict[str, Any]:
    delta = {} if content is None else {"content": content}
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


USAGE = {"choices": [], "usage": {"prompt_tokens": 4, "completion_tokens": 2, "total_tokens": 6}}


def handler_for(
    body: bytes, status: int = 200, seen: list[Any] | None = None
) -> Callable[[httpx.Request], httpx.Response]:
    def handler(request: httpx.Request) -> httpx.Response:
        if seen is not None:
            seen.append(json.loads(request.content) if request.content else None)
        payload = json.loads(request.content)
        if status != 200:
            return httpx.Response(
                status, json={"error": {"message": "nope", "type": "server_error"}}
            )
        if payload.get("stream"):
            return httpx.Response(200, content=body, headers={"content-type": "text/event-stream"})
        return httpx.Response(
            200,
            json={
                "choices": [{"index": 0, "message": {"content": "whole"}, "finish_reason": "stop"}],
                "usage": USAGE["usage"],
            },
        )

    return handler


settings = settings_for("openai", alias_first=True, api_key="sk-client-test-key")


GOOD = sse(chunk("Hel"), chunk("lo"), chunk(finish="stop"), USAGE)


def test_stream_and_generate_share_the_core() -> None:
    seen: list[Any] = []

    async def go() -> tuple[ai.Generation, ai.Generation, list[ai.StreamEvent]]:
        async with ai.AsyncClient([settings("a", handler_for(GOOD, seen=seen))]) as client:
            events = []
            async with client.stream("hi", target="a:m") as stream:
                async for ev in stream:
                    events.append(ev)
            whole = await client.generate("hi", target="a:m")
            return stream.result, whole, events

    streamed, whole, events = asyncio.run(go())
    assert streamed.text == "Hello" and streamed.usage.total_tokens == 6
    assert "".join(e.text for e in events if isinstance(e, ai.TextDelta)) == streamed.text
    assert isinstance(events[-1], ai.StreamEnded)
    assert whole.text == "whole" and whole.finish_reason == "stop"
    assert seen[0]["stream"] is True and seen[0]["stream_options"] == {"include_usage": True}
    assert "stream" not in seen[1]


def test_fallback_before_content_emits_attempt_failed() -> None:
    async def go() -> tuple[ai.Generation, list[ai.StreamEvent]]:
        client = ai.AsyncClient(
            [settings("bad", handler_for(b"", status=500)), settings("good", handler_for(GOOD))]
        )
        route = ai.Route(
            ["bad:m", "good:m"], retry=ai.RetryPolicy(max_retries=1, backoff_base_s=0.001)
        )
        async with client, client.stream("hi", route=route) as stream:
            events = [ev async for ev in stream]
        return stream.result, events

    result, events = asyncio.run(go())
    assert isinstance(events[0], ai.TimingMark) and events[0].name == "attempt_start"
    assert isinstance(events[1], ai.AttemptFailed)
    assert events[1].record.error is not None and events[1].record.error.http_status == 500
    assert isinstance(events[2], ai.TimingMark) and events[2].name == "attempt_start"
    assert isinstance(events[3], ai.AttemptFailed)
    assert result.target == ai.ResolvedTarget("good", "m", "openai")
    assert [a.outcome for a in result.attempts] == ["retried", "failed", "ok"]


def test_all_targets_failed_carries_trail() -> None:
    async def go() -> None:
        async with ai.AsyncClient([settings("bad", handler_for(b"", status=401))]) as client:
            await client.generate("hi", target="bad:m")

    with pytest.raises(ai.AllTargetsFailedError) as info:
        asyncio.run(go())
    (attempt,) = info.value.attempts
    assert attempt.error is not None and attempt.error.type_name == "AuthenticationError"
    assert "sk-client-test-key" not in repr(info.value.attempts)


def test_failure_after_content_raises_typed_error() -> None:
    body = sse(chunk("partial"), done=False)  # ends with neither finish nor [DONE]

    async def go() -> list[ai.StreamEvent]:
        events: list[ai.StreamEvent] = []
        async with ai.AsyncClient(
            [settings("a", handler_for(body)), settings("b", handler_for(GOOD))]
        ) as c:
            async with c.stream("hi", route=["a:m", "b:m"]) as stream:
                async for ev in stream:
                    events.append(ev)
        return events

    with pytest.raises(ai.StreamError):
        asyncio.run(go())


def test_bad_calls_raise_config_errors_at_once() -> None:
    client = ai.AsyncClient([settings("a", handler_for(GOOD))])
    with pytest.raises(ai.ConfigError, match="provider:model"):
        client.stream("hi", target="nocolon")
    with pytest.raises(ai.ConfigError, match="unknown provider"):
        client.stream("hi", target="nosuch:m")
    with pytest.raises(ai.ConfigError, match="not both"):
        client.stream("hi", target="a:m", route=["a:m"])
    with pytest.raises(ai.ConfigError, match="no target"):
        client.stream("hi")
    with pytest.raises(ai.ConfigError, match="tool_choice"):
        client.stream("hi", target="a:m", tool_choice="missing")
    with pytest.raises(ai.ConfigError):
        ai.AsyncClient([settings("a", handler_for(GOOD)), settings("a", handler_for(GOOD))])


def test_resolve_keeps_colons_in_model_names() -> None:
    client = ai.AsyncClient([settings("local", handler_for(GOOD))])
    assert client.resolve("local:qwen3:8b") == ai.ResolvedTarget("local", "qwen3:8b", "openai")
    assert client.resolve("openai:gpt-4o").provider == "openai"


def test_retain_raw_and_provider_options() -> None:
    seen: list[Any] = []

    async def go() -> ai.Generation:
        async with ai.AsyncClient(
            [settings("a", handler_for(GOOD, seen=seen))], retain_raw=True
        ) as c:
            return await c.generate("hi", target="a:m", provider_options={"a": {"user": "u1"}})

    result = asyncio.run(go())
    assert (
        isinstance(result.raw, dict) and result.raw["choices"][0]["message"]["content"] == "whole"
    )
    assert seen[0]["user"] == "u1"


def test_sync_client_from_eight_threads() -> None:
    with ai.Client([settings("a", handler_for(GOOD))]) as client:

        def work(i: int) -> str:
            if i % 2:
                return client.generate(f"hi {i}", target="a:m").text
            with client.stream(f"hi {i}", target="a:m") as stream:
                return stream.collect().text

        with ThreadPoolExecutor(8) as pool:
            results = list(pool.map(work, range(32)))
    assert results == ["Hello" if i % 2 == 0 else "whole" for i in range(32)]


def test_close_joins_the_loop_thread() -> None:
    before = {t.ident for t in threading.enumerate()}
    client = ai.Client([settings("a", handler_for(GOOD))])
    client.generate("hi", target="a:m")
    client.close()
    client.close()  # idempotent
    assert {t.ident for t in threading.enumerate()} <= before
    with pytest.raises(ai.ConfigError, match="closed"):
        client.generate("hi", target="a:m")


def test_sync_stream_result_before_completion_raises() -> None:
    with ai.Client([settings("a", handler_for(GOOD))]) as client:
        stream = client.stream("hi", target="a:m")
        with pytest.raises(RuntimeError):
            _ = stream.result
        with stream:
            first = next(iter(stream))
        assert isinstance(first, ai.TimingMark)
