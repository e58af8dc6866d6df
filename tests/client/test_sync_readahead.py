"""A sync stream's pump reads ahead of its consumer, but never into a later attempt.

The sync facade's pump runs the async stream on the client's loop and queues its events
for the consuming thread, so it is ahead of a consumer that does work per event. It
must not send a request the consumer no longer wants: a schema repair, a retry or a
fallback starts only once the consumer has read up to it, and a consumer that left
(`close()`, the end of its `with` block, a dropped stream) cancels it before it is sent.
Nor may the wait count in that attempt's timing.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
from helpers import sse

import anyinfer as ai
from anyinfer.fakeservers import FakeServer, Script, Text

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
INVALID = Script(pieces=(Text('{"n": '), Text('"x"}')))
VALID = Script(pieces=(Text('{"n": '), Text("3}")))
ROUTE = ai.Route("openai:fake-model", retry=ai.RetryPolicy(max_retries=0))


def _repairing(server_answers: list[Script]) -> Any:
    def choose(request: httpx.Request) -> Script:
        return server_answers.pop(0)

    return choose


def test_a_consumer_that_left_during_the_first_reply_sends_no_repair() -> None:
    """The consumer reads the invalid first reply's first text, lingers, and leaves:
    the repair (a paid round trip) is never sent, however long it lingered."""
    with FakeServer("openai-chat", _repairing([INVALID, VALID])) as server:
        settings = ai.ProviderSettings("openai", api_key="sk-test", base_url=server.base_url)
        with ai.Client([settings]) as client:
            stream = client.stream("hi", route=ROUTE, schema=SCHEMA, repair=ai.Repair(1))
            with stream:
                for event in stream:
                    if isinstance(event, ai.TextDelta):
                        time.sleep(0.3)  # the pump reads the whole first reply meanwhile
                        break
            time.sleep(0.1)
        assert len(server.requests) == 1


def test_a_consumer_that_reads_on_gets_the_repair() -> None:
    with FakeServer("openai-chat", _repairing([INVALID, VALID])) as server:
        settings = ai.ProviderSettings("openai", api_key="sk-test", base_url=server.base_url)
        with ai.Client([settings]) as client:
            stream = client.stream("hi", route=ROUTE, schema=SCHEMA, repair=ai.Repair(1))
            with stream:
                starts = 0
                for event in stream:
                    if isinstance(event, ai.TimingMark) and event.name == "attempt_start":
                        starts += 1
                        time.sleep(0.05)
            assert stream.result.structured == {"n": 3} and starts == 2
        assert len(server.requests) == 2


BUSY = (503, b'{"error": {"message": "busy", "type": "server_error"}}')
ANSWER = sse(
    {"choices": [{"index": 0, "delta": {"content": "hi"}}]},
    {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
)


def _retried(answers: list[tuple[int, bytes]]) -> ai.ProviderSettings:
    def handler(request: httpx.Request) -> httpx.Response:
        status, body = answers.pop(0)
        kind = "text/event-stream" if status == 200 else "application/json"
        return httpx.Response(status, content=body, headers={"content-type": kind})

    return ai.ProviderSettings("openai", api_key="sk-test", transport=httpx.MockTransport(handler))


RETRY = ai.Route("openai:m", retry=ai.RetryPolicy(max_retries=1, backoff_base_s=0.001, jitter=0.0))


def test_a_sync_consumer_slow_at_a_retry_does_not_slow_the_retry_timing() -> None:
    """The pump waits for a consumer that lingers on the failed attempt; the retry's
    time to first token is the provider's, not that wait."""
    with ai.Client([_retried([BUSY, (200, ANSWER)])]) as client:
        with client.stream("hi", route=RETRY) as stream:
            for event in stream:
                if isinstance(event, ai.AttemptFailed):
                    time.sleep(0.3)
        timing = stream.result.timing
    assert timing.first_token_ms is not None and timing.first_token_ms < 250
    assert timing.total_ms < 250


def test_an_async_consumer_slow_at_an_attempt_start_is_not_the_attempt_time() -> None:
    """The attempt's clock starts when its consumer asks for more after `attempt_start`:
    a consumer's own time with the mark is not the provider's."""

    async def main() -> ai.Generation:
        async with ai.AsyncClient([_retried([(200, ANSWER)])]) as client:
            async with client.stream("hi", route=RETRY) as stream:
                async for event in stream:
                    if isinstance(event, ai.TimingMark) and event.name == "attempt_start":
                        await asyncio.sleep(0.3)
            return stream.result

    timing = asyncio.run(main()).timing
    assert timing.first_token_ms is not None and timing.first_token_ms < 250
