"""Resource hygiene over one long-lived client: pool slots after early exits and
cancellations, connection reuse after the sentinel, typed pool exhaustion, the shared
breaker, and decompression bombs bounded by `max_response_bytes`.

Every test here goes over real 127.0.0.1 sockets (`FakeServer`), except where a test
says it uses a transport.
"""

from __future__ import annotations

import asyncio
import gc
import gzip
import json
import random
import struct
import threading
import time
import zlib
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from typing import Any

import httpx
import psutil
import pytest
from helpers import NO_RETRY

import anyinfer as ai
from anyinfer._adapters.base import decoded_body
from anyinfer._embed._types import EmbedReply, EmbedRequest
from anyinfer._embed._wire import embed_body, openai_shaped_reply
from anyinfer._providers.openai_chat import OpenAIChatAdapter
from anyinfer._request import GenerationRequest
from anyinfer._stream.parts import END, Part
from anyinfer.conformance.checker import RESOURCES
from anyinfer.conformance.registry import AdapterEntry, ConformanceRegistry, load_builtins
from anyinfer.conformance.runner import ConformanceFailure, Harness
from anyinfer.fakeservers import (
    EmbedShape,
    FakeServer,
    FakeTransport,
    Fault,
    Script,
    ScriptUsage,
    Text,
)
from anyinfer.fakeservers._bomb import BOMB_DECODED_BYTES, BOMB_ENCODING, _crc32_repeated, bomb_body

pytestmark = pytest.mark.loopback

INVALID = "http://x.invalid/v1"
_CONTENT = (ai.TextDelta, ai.ReasoningDelta, ai.ToolCallDelta)
_REGISTRY = ConformanceRegistry()
load_builtins(_REGISTRY)
ENTRIES = _REGISTRY.entries()
GENERATING = [e for e in ENTRIES if e.generates()]
"""The entries whose adapters generate (the stream tests); `ENTRIES` has every one."""


def harness(entry: AdapterEntry) -> Harness:
    return Harness(_REGISTRY, entry)


def harness_settings(
    h: Harness, srv: FakeServer, *, timeout_s: float = 3.0, **options: Any
) -> ai.ProviderSettings:
    base = h.settings(base_url=srv.base_url)
    return replace(base, options={**base.options, **options}, timeout_s=timeout_s)


def client_for(h: Harness, *settings: ai.ProviderSettings) -> ai.Client:
    return ai.Client(list(settings), registry=h._providers)


def short(rnd: random.Random) -> Script:
    return Script(
        pieces=tuple(Text(f"t{i} ") for i in range(rnd.randint(1, 30))), usage=ScriptUsage(3, 5)
    )


def exit_early(stream: ai.SyncStream) -> None:
    with stream:
        for event in stream:
            if isinstance(event, _CONTENT):
                break


class Staged:
    """Serves `script` stalled after its first content frame when `stall` is set."""

    def __init__(self, h: Harness, script: Script) -> None:
        self.h, self.script, self.stall = h, script, False

    def __call__(self, request: httpx.Request) -> Script:
        return self.h.staged(self.script, streamed=True) if self.stall else self.script


def start_together(client: ai.Client, target: str, n: int, timeout_s: float = 3.0) -> float:
    """Open `n` streams at once (each must hold a connection); seconds to all start."""
    streams = [client.stream("hi", route=ai.Route(target, retry=NO_RETRY), timeout_s=timeout_s)]
    streams += [
        client.stream("hi", route=ai.Route(target, retry=NO_RETRY), timeout_s=timeout_s)
        for _ in range(n - 1)
    ]
    start = time.monotonic()
    try:
        for stream in streams:
            for event in stream:
                if isinstance(event, _CONTENT):
                    break
        return time.monotonic() - start
    finally:
        for stream in streams:
            stream.close()


# --- the pool leak ---------------------------------------------------------------------


def test_more_early_exits_than_the_default_pool_leave_no_slot_held() -> None:
    # Issue 16 item 1: the cancel of a sync early exit landed inside httpx's response
    # close and leaked the pool slot; after ~100 exits every request timed out waiting.
    entry = _REGISTRY.get("openai-responses")
    h = harness(entry)
    rnd = random.Random(7)
    with FakeServer(h.dialect, lambda _r: short(rnd)) as srv:
        with client_for(h, harness_settings(h, srv, timeout_s=2.0)) as client:
            route = ai.Route(f"{entry.name}:m", retry=NO_RETRY)
            for _ in range(130):
                exit_early(client.stream("hi", route=route))
            start = time.monotonic()
            assert client.generate("hi", route=route).text
            assert time.monotonic() - start < 1.0


@pytest.mark.parametrize("entry", GENERATING, ids=[e.name for e in GENERATING])
def test_early_exits_and_cancellations_leave_no_slot_held(entry: AdapterEntry) -> None:
    h = harness(entry)
    rnd = random.Random(3)
    served = Staged(h, short(rnd))
    with FakeServer(h.dialect, served) as srv:
        with client_for(h, harness_settings(h, srv, max_connections=2)) as client:
            route = ai.Route(f"{entry.name}:m", retry=NO_RETRY)
            for i in range(16):
                served.script, served.stall = short(rnd), i % 4 == 3
                if i % 2:
                    exit_early(client.stream("hi", route=route))
                else:
                    for event in client.stream("hi", route=route):  # dropped, never closed
                        if isinstance(event, _CONTENT):
                            break
                    gc.collect()
            served.script, served.stall = short(rnd), True
            assert start_together(client, f"{entry.name}:m", 2) < 1.5


@pytest.mark.parametrize("name", ["openai-responses", "anthropic", "ollama"])
def test_async_cancellations_leave_no_slot_held(name: str) -> None:
    entry = _REGISTRY.get(name)
    h = harness(entry)
    served = Staged(h, Script(pieces=tuple(Text(f"w{i} ") for i in range(8))))

    async def go(srv: FakeServer) -> None:
        s = harness_settings(h, srv, max_connections=1)
        async with ai.AsyncClient([s], registry=h._providers) as client:
            route = ai.Route(f"{name}:m", retry=NO_RETRY)
            current = asyncio.current_task()

            async def closing_cancelled(me: list[asyncio.Task[None]]) -> None:
                async with client.stream("hi", route=route) as stream:
                    async for event in stream:
                        if isinstance(event, _CONTENT):
                            # Cancelled while the context manager closes the stream.
                            asyncio.get_running_loop().call_soon(me[0].cancel)
                            break

            async def timed_out() -> None:
                async with asyncio.timeout(0.1), client.stream("hi", route=route) as stream:
                    async for _ in stream:
                        pass

            for i in range(6):
                served.stall = i % 2 == 0
                me: list[asyncio.Task[None]] = []
                me.append(asyncio.create_task(closing_cancelled(me)))
                with pytest.raises(asyncio.CancelledError):
                    await me[0]
                served.stall = True
                with pytest.raises(TimeoutError):
                    await timed_out()
                dropped = client.stream("hi", route=route)
                async for event in dropped:
                    if isinstance(event, _CONTENT):
                        break
                del dropped
                gc.collect()
                for _ in range(5):
                    await asyncio.sleep(0)
            served.stall = False
            start = time.monotonic()
            await client.generate("hi", route=route, timeout_s=2.0)
            assert time.monotonic() - start < 1.0
            for _ in range(100):  # finalizers of collected generators may still be running
                if not {t for t in asyncio.all_tasks() if t is not current}:
                    break
                await asyncio.sleep(0.01)
            assert {t for t in asyncio.all_tasks() if t is not current} == set()

    with FakeServer(h.dialect, served) as srv:
        asyncio.run(go(srv))


def test_a_dropped_sync_stream_cancels_its_request() -> None:
    entry = _REGISTRY.get("openai")
    h = harness(entry)
    served = Staged(h, Script(pieces=(Text("a"), Text("b"))))
    served.stall = True
    with FakeServer(h.dialect, served) as srv:
        with client_for(h, harness_settings(h, srv, timeout_s=30.0)) as client:
            for event in client.stream("hi", target="openai:m"):
                if isinstance(event, _CONTENT):
                    break
            gc.collect()
            assert srv.wait_client_closed(1, timeout=2.0)  # not after the 30 s timeout


# --- the sync stream's edges -----------------------------------------------------------


def test_close_from_another_thread_just_ends_the_iteration() -> None:
    entry = _REGISTRY.get("openai")
    h = harness(entry)
    served = Staged(h, Script(pieces=(Text("a"), Text("b"))))
    served.stall = True
    with FakeServer(h.dialect, served) as srv, client_for(h, harness_settings(h, srv)) as client:
        stream = client.stream("hi", target="openai:m")
        started = threading.Event()
        outcome: list[BaseException | None] = []

        def consume() -> None:
            try:
                for event in stream:
                    if isinstance(event, _CONTENT):
                        started.set()
                outcome.append(None)
            except BaseException as exc:
                outcome.append(exc)

        thread = threading.Thread(target=consume)
        thread.start()
        assert started.wait(3.0)
        stream.close()
        thread.join(3.0)
        assert outcome == [None]
        assert list(stream) == []  # and iterating after close() ends at once


def test_iterating_a_stream_of_a_closed_client_is_a_config_error() -> None:
    with FakeServer("openai-chat", [Script(pieces=(Text("a"),))]) as srv:
        s = ai.ProviderSettings("openai", api_key="sk-test", base_url=srv.base_url)
        client = ai.Client([s])
        stream = client.stream("hi", target="openai:m")
        client.close()
        with pytest.raises(ai.ConfigError, match="closed"):
            next(iter(stream))


def test_closing_the_client_mid_stream_is_a_config_error_not_cancelled_error() -> None:
    entry = _REGISTRY.get("openai")
    h = harness(entry)
    served = Staged(h, Script(pieces=(Text("a"), Text("b"))))
    served.stall = True
    with FakeServer(h.dialect, served) as srv:
        client = client_for(h, harness_settings(h, srv))
        stream = client.stream("hi", target="openai:m")
        it = iter(stream)
        while not isinstance(next(it), _CONTENT):
            pass
        client.close()
        with pytest.raises(ai.ConfigError, match="closed"):
            list(it)


# --- draining after the sentinel ---------------------------------------------------------


@pytest.mark.parametrize("entry", GENERATING, ids=[e.name for e in GENERATING])
def test_sequential_streams_and_generates_reuse_one_connection(entry: AdapterEntry) -> None:
    h = harness(entry)
    script = Script(pieces=(Text("Hel"), Text("lo")), usage=ScriptUsage(4, 2))
    with FakeServer(h.dialect, lambda _r: script) as srv:
        with client_for(h, harness_settings(h, srv)) as client:
            target = f"{entry.name}:m"
            for _ in range(5):
                assert client.stream("hi", target=target).collect().text == "Hello"
            for _ in range(5):
                assert client.generate("hi", target=target).text == "Hello"
        assert srv.connections_opened == 1


# --- pool size and exhaustion ------------------------------------------------------------


@pytest.mark.parametrize("value", [0, -1, "4", True, 2.5])
def test_max_connections_must_be_a_positive_integer(value: object) -> None:
    options = {"max_connections": value}
    s = ai.ProviderSettings("openai", api_key="sk-test", base_url=INVALID, options=options)
    with pytest.raises(ai.ConfigError, match=r"options\['max_connections'\] must be a positive"):
        OpenAIChatAdapter(s)


def test_every_http_adapter_accepts_max_connections() -> None:
    for entry in ENTRIES:
        h = harness(entry)
        s = h.settings(base_url=f"http://x.invalid{h.dialect.base_path}")
        s = replace(s, options={**s.options, "max_connections": 3})
        adapter = h._providers.adapter_class(entry.name)(s.with_resolved_key()[0])
        assert getattr(adapter, "max_connections", 3) == 3


def test_pool_exhaustion_is_typed_and_does_not_open_the_breaker() -> None:
    entry = _REGISTRY.get("openai")
    h = harness(entry)
    served = Staged(h, Script(pieces=(Text("a"), Text("b"))))
    with FakeServer(h.dialect, served) as srv:
        with client_for(h, harness_settings(h, srv, max_connections=1)) as client:
            route = ai.Route("openai:m", retry=NO_RETRY, breaker_threshold=1)
            served.stall = True
            held = client.stream("hi", route=route)
            next(e for e in held if isinstance(e, _CONTENT))
            for _ in range(2):
                with pytest.raises(ai.AllTargetsFailedError) as info:
                    client.generate("hi", route=route, timeout_s=0.3)
                error = info.value.attempts[-1].error
                assert error is not None and error.type_name == "PoolExhaustedError"
                assert "pool" in error.detail and "first_byte" not in error.detail
            held.close()
            served.stall = False
            result = client.generate("hi", route=route)
            assert [a.outcome for a in result.attempts] == ["ok"]


class StagedRetrieval(Staged):
    """`Staged` for generation requests; embedding and rerank requests get a clean
    answer."""

    def __call__(self, request: httpx.Request) -> Script:
        path = request.url.path
        if path.endswith("/rerank"):
            return Script()
        if path.endswith(("/embeddings", "/embed")):
            return Script(embedding=EmbedShape())
        return super().__call__(request)


@pytest.mark.parametrize(("name", "method"), [("openai", "embed"), ("cohere", "rerank")])
def test_a_busy_pool_fails_a_retrieval_call_typed_at_its_timeout(name: str, method: str) -> None:
    # A call's timeout_s bounds its wait for a connection as it does a generation's: a
    # PoolExhaustedError at that timeout, tried once. Before, embed() and rerank() put a
    # deadline of their own around the attempt, which ended the wait first as a provider
    # timeout (retried: three waits).
    from anyinfer.conformance import resources

    h = harness(_REGISTRY.get(name))
    served = StagedRetrieval(h, Script(pieces=(Text("a"), Text("b"))))
    args: tuple[Any, ...] = ("q", ["a", "b"]) if method == "rerank" else (["a", "b"],)
    target = f"{name}:{resources._model(h, method)}"  # type: ignore[arg-type]
    with FakeServer(h.dialect, served) as srv:
        settings = harness_settings(h, srv, timeout_s=30.0, max_connections=1)
        with client_for(h, settings) as client:
            served.stall = True
            held = client.stream("hi", target=f"{name}:m")
            next(e for e in held if isinstance(e, _CONTENT))
            start = time.monotonic()
            with pytest.raises(ai.AllTargetsFailedError) as info:
                getattr(client, method)(*args, target=target, timeout_s=0.3)
            took = time.monotonic() - start
            held.close()
            served.stall = False
            getattr(client, method)(*args, target=target, timeout_s=0.3)  # the slot is free
    assert [a.error.type_name for a in info.value.attempts if a.error] == ["PoolExhaustedError"]
    assert took < 3.0


def test_pool_exhaustion_error_carries_its_kind() -> None:
    error = ai.PoolExhaustedError("full", max_connections=4, provider="openai")
    assert isinstance(error, ai.ProviderTimeoutError)
    assert (error.timeout_kind, error.max_connections, error.retryable) == ("pool", 4, False)


def test_a_small_max_response_bytes_does_not_open_the_breaker() -> None:
    script = Script(pieces=tuple(Text("word ") for _ in range(50)))
    with FakeServer("openai-chat", lambda _r: script) as srv:
        s = ai.ProviderSettings("openai", api_key="sk-test", base_url=srv.base_url)
        with ai.Client([s]) as client:
            route = ai.Route("openai:m", retry=NO_RETRY, breaker_threshold=1)
            for _ in range(2):
                with pytest.raises(ai.AllTargetsFailedError) as info:
                    client.generate("hi", route=route, max_response_bytes=64)
                error = info.value.attempts[-1].error
                assert error is not None and error.type_name == "ResponseTooLargeError"
            result = client.generate("hi", route=route)
            assert [a.outcome for a in result.attempts] == ["ok"]


# --- decompression bombs -----------------------------------------------------------------


class _RSS:
    """Peak resident memory growth while the block runs (sampled on a thread)."""

    def __enter__(self) -> _RSS:
        self._proc = psutil.Process()
        self.start = self.peak = self._proc.memory_info().rss
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(0.002):
            self.peak = max(self.peak, self._proc.memory_info().rss)

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def growth_mb(self) -> float:
        return (self.peak - self.start) / 2**20


LIMIT = 10 * 2**20


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "generate"])
@pytest.mark.parametrize("name", ["openai", "anthropic", "ollama", "gemini", "openai-responses"])
def test_a_decompression_bomb_stays_bounded_by_max_response_bytes(name: str, stream: bool) -> None:
    entry = _REGISTRY.get(name)
    h = harness(entry)
    bomb = Script(pieces=(Text("x"),), fault=Fault("bomb"))
    with FakeServer(h.dialect, lambda _r: bomb) as srv:
        with client_for(h, harness_settings(h, srv)) as client:
            route = ai.Route(f"{name}:m", retry=NO_RETRY)

            def read() -> object:
                if stream:
                    return client.stream("hi", route=route, max_response_bytes=LIMIT).collect()
                return client.generate("hi", route=route, max_response_bytes=LIMIT)

            with _RSS() as rss, pytest.raises(ai.AllTargetsFailedError) as info:
                read()
    error = info.value.attempts[-1].error
    assert error is not None and error.type_name == "ResponseTooLargeError", error
    assert rss.growth_mb < 120, f"RSS grew {rss.growth_mb:.0f} MB for a {LIMIT >> 20} MB cap"


def test_a_bomb_over_the_fake_transport_is_bounded_too() -> None:
    transport = FakeTransport("openai-chat", [Script(fault=Fault("bomb"))])
    s = ai.ProviderSettings("openai", api_key="sk-test", transport=transport)
    with ai.Client([s]) as client, _RSS() as rss:
        with pytest.raises(ai.AllTargetsFailedError) as info:
            client.stream("hi", target="openai:m", max_response_bytes=LIMIT).collect()
    error = info.value.attempts[-1].error
    assert error is not None and error.type_name == "ResponseTooLargeError"
    assert rss.growth_mb < 120


def test_a_bomb_in_an_error_body_is_read_only_up_to_its_limit() -> None:
    class Body(httpx.AsyncByteStream):
        async def __aiter__(self) -> AsyncIterator[bytes]:
            yield bomb_body()

    def answer(request: httpx.Request) -> httpx.Response:
        headers = {"content-encoding": BOMB_ENCODING, "content-type": "application/json"}
        return httpx.Response(500, headers=headers, stream=Body())

    s = ai.ProviderSettings(
        "openai",
        api_key="sk-test",
        base_url="http://x.invalid/v1",
        transport=httpx.MockTransport(answer),
    )
    with ai.Client([s]) as client, _RSS() as rss:
        with pytest.raises(ai.AllTargetsFailedError) as info:
            client.generate("hi", route=ai.Route("openai:m", retry=NO_RETRY))
    error = info.value.attempts[-1].error
    assert error is not None and error.http_status == 500
    assert rss.growth_mb < 60


def test_the_bomb_body_is_small_and_decodes_to_a_gigabyte_of_spaces() -> None:
    body = bomb_body()
    assert len(body) < 4096 and BOMB_ENCODING == "gzip, gzip"
    inner = gzip.decompress(body)
    crc, size = struct.unpack("<II", inner[-8:])
    assert size == BOMB_DECODED_BYTES % 2**32
    assert crc == _crc32_repeated(zlib.crc32(b" " * 2**20), 2**20, BOMB_DECODED_BYTES >> 20)
    d = zlib.decompressobj(zlib.MAX_WBITS | 16)
    assert d.decompress(inner, 16 * 2**20) == b" " * (16 * 2**20)


@pytest.mark.parametrize("count", [1, 2, 3, 7, 12])
def test_the_bomb_crc_is_that_of_the_repeated_block(count: int) -> None:
    block = b"anyinfer "
    assert _crc32_repeated(zlib.crc32(block), len(block), count) == zlib.crc32(block * count)


# --- incremental decoding ----------------------------------------------------------------


def _encoded(data: bytes) -> Iterator[tuple[str, bytes]]:
    raw = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    yield "gzip", gzip.compress(data)
    yield "x-gzip", gzip.compress(data)
    yield "gzip", gzip.compress(data[:1000]) + gzip.compress(data[1000:])  # two members
    yield "gzip", gzip.compress(data) + b"trailing junk"
    yield "gzip, gzip", gzip.compress(gzip.compress(data))
    yield "deflate", zlib.compress(data)
    yield "deflate", raw.compress(data) + raw.flush()  # raw deflate, as some servers send
    yield "deflate, gzip", gzip.compress(zlib.compress(data))
    yield "identity", data
    yield "", data


@pytest.mark.parametrize("cut", [1, 7, 4096])
def test_decoded_body_inflates_every_layer_in_bounded_pieces(cut: int) -> None:
    data = random.Random(1).randbytes(4_000) + b"a" * 300_000  # decodes past 64 KB pieces

    async def decode(encoding: str, body: bytes) -> list[bytes]:
        class Stream(httpx.AsyncByteStream):
            async def __aiter__(self) -> AsyncIterator[bytes]:
                for i in range(0, len(body), cut):
                    yield body[i : i + cut]

        headers = {"content-encoding": encoding} if encoding else {}
        response = httpx.Response(200, headers=headers, stream=Stream())
        return [piece async for piece in decoded_body(response)]

    for encoding, body in _encoded(data):
        pieces = asyncio.run(decode(encoding, body))
        assert b"".join(pieces) == data, encoding
        assert max(map(len, pieces)) <= max(64 * 1024, cut), encoding


def test_a_body_that_does_not_decode_is_a_protocol_error() -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        class Body(httpx.AsyncByteStream):
            async def __aiter__(self) -> AsyncIterator[bytes]:
                yield b"this is not gzip at all"

        return httpx.Response(
            200,
            headers={"content-encoding": "gzip", "content-type": "text/event-stream"},
            stream=Body(),
        )

    s = ai.ProviderSettings(
        "openai",
        api_key="sk-test",
        base_url="http://x.invalid/v1",
        transport=httpx.MockTransport(answer),
    )
    with ai.Client([s]) as client, pytest.raises(ai.AllTargetsFailedError) as info:
        client.stream("hi", route=ai.Route("openai:m", retry=NO_RETRY)).collect()
    error = info.value.attempts[-1].error
    assert error is not None and error.type_name == "ProtocolError"
    assert "Content-Encoding" in error.detail


# --- the conformance check itself --------------------------------------------------------


@pytest.mark.parametrize("sync", [False, True], ids=["async", "sync"])
def test_the_resources_check_passes_for_a_builtin_adapter(sync: bool) -> None:
    harness(_REGISTRY.get("anthropic")).verify_resources(sync=sync)


class LeakyAdapter(OpenAIChatAdapter):
    """Never closes its response, and keeps each body's reader (a "cache"), so an early
    exit leaves the pool slot held."""

    provider_id = "leaky"
    readers: list[Any] = []  # noqa: RUF012 - the bug under test

    async def generate(self, request: GenerationRequest) -> AsyncIterator[Part]:
        if not request.stream:
            async for part in super().generate(request):
                yield part
            return
        response = await self.send(
            "POST", "/chat/completions", json_body=self.build_body(request), request=request
        )
        frames = self.iter_sse(response, request)
        self.readers.append(frames)
        async for sse in frames:
            if sse.data == b"[DONE]":
                yield END
                return
            for part in self.parts_from_chunk(self.parse_json(sse.data), "delta"):
                yield part


def test_the_resources_check_catches_an_adapter_that_holds_its_connections() -> None:
    registry = ConformanceRegistry()
    entry = registry.add("leaky", LeakyAdapter, dialect="openai-chat")
    with pytest.raises(ConformanceFailure) as info:
        Harness(registry, entry).verify_resources(sync=False)
    assert RESOURCES in info.value.guarantees
    assert "pool slot" in str(info.value)


class HoardingAdapter(OpenAIChatAdapter):
    """Keeps every request body it sends (a history without a bound): it holds no
    connection, so only the steady-memory phases can see it."""

    provider_id = "hoarding"
    history: list[Any] = []  # noqa: RUF012 - the bug under test

    def build_body(self, request: GenerationRequest) -> dict[str, Any]:
        body = super().build_body(request)
        self.history.append({"model": request.model, "sent": time.monotonic()})
        return body


@pytest.mark.parametrize("sync", [False, True], ids=["async", "sync"])
def test_the_resources_check_catches_a_client_that_keeps_each_request(sync: bool) -> None:
    registry = ConformanceRegistry()
    entry = registry.add("hoarding", HoardingAdapter, dialect="openai-chat")
    HoardingAdapter.history.clear()
    try:
        with pytest.raises(ConformanceFailure) as info:
            Harness(registry, entry).verify_resources(sync=sync)
    finally:
        HoardingAdapter.history.clear()
    assert RESOURCES in info.value.guarantees
    message = str(info.value)
    assert "memory is not steady" in message
    assert "pool slot" not in message and "connections, not one" not in message


def test_the_steady_phases_are_judged_on_the_better_measured_phase() -> None:
    from anyinfer.conformance import resources

    per_phase = resources.STEADY_ROUNDS * resources.STEADY_REQUESTS
    clean = [1000, 1000 + per_phase, 1000 + per_phase + 5, 1000 + per_phase + 9]
    leaky = [1000, 1000 + per_phase, 1000 + 2 * per_phase, 1000 + 3 * per_phase]
    once = [1000, 1000, 1000 + 10 * per_phase, 1000 + 10 * per_phase + 3]

    def verdict(marks: list[int]) -> list[Any]:
        report = resources._Report()
        run = object.__new__(resources._SyncRun)
        run.report, run.served = report, resources._Served(harness(_REGISTRY.get("openai")))
        run.steady_verdict(marks)
        return report.found

    assert verdict(clean) == []  # the warm-up's own growth does not count
    assert verdict(once) == []  # one jump (a cache filling once) is not a leak
    assert [v.guarantee for v in verdict(leaky)] == [RESOURCES]
    assert verdict([0, 0, 0, 0]) == []  # an interpreter that does not count blocks


def test_a_steady_request_may_fail_only_as_its_script_says() -> None:
    from anyinfer.conformance import resources

    run = object.__new__(resources._SyncRun)
    run.report, run.served = (
        resources._Report(),
        resources._Served(harness(_REGISTRY.get("openai"))),
    )
    run.requests = 0
    plain, cut = (script for _, script in run.steady_round()[:2])
    run.steady_outcome("generate", cut, ai.StreamError("cut", provider="openai"))
    assert run.report.found == []  # what the cut script is for
    run.steady_outcome("generate", plain, ai.StreamError("cut", provider="openai"))
    assert [v.message for v in run.report.found] == ["a steady generate failed: StreamError: cut"]
    with pytest.raises(resources._Abort):  # a held pool slot ends the check
        run.steady_outcome("stream", cut, ai.PoolExhaustedError("full", provider="openai"))


# --- embed() and rerank() ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "method", "sync"),
    [
        ("openai", "embed", False),
        ("jina", "embed", True),
        ("voyage", "rerank", False),
        ("cohere", "rerank", True),
    ],
)
def test_the_retrieval_resources_check_passes_for_a_builtin_adapter(
    name: str, method: Any, sync: bool
) -> None:
    harness(_REGISTRY.get(name)).verify_resources(sync=sync, method=method)


class LeakyEmbedder(OpenAIChatAdapter):
    """Sends its embedding requests itself and raises on an error status without closing
    the answer: each error answer keeps its pool slot."""

    provider_id = "leaky-embed"

    async def embed(self, request: EmbedRequest) -> EmbedReply:
        body = embed_body(request, "input", True)
        sent = self.http.build_request("POST", self.url_for("/embeddings"), json=body)
        response = await self.http.send(sent, stream=True)
        if response.status_code >= 400:  # the bug under test: the response stays open
            raise ai.ProviderError(f"status {response.status_code}", provider=self.provider_id)
        try:
            payload = json.loads(await response.aread())
        finally:
            await response.aclose()
        return openai_shaped_reply(self, request, payload, ())


@pytest.mark.parametrize("sync", [False, True], ids=["async", "sync"])
def test_the_retrieval_resources_check_catches_an_embedder_that_holds_its_connections(
    sync: bool,
) -> None:
    registry = ConformanceRegistry()
    entry = registry.add("leaky-embed", LeakyEmbedder, dialect="openai-chat")
    with pytest.raises(ConformanceFailure) as info:
        Harness(registry, entry).verify_resources(sync=sync, method="embed")
    assert RESOURCES in info.value.guarantees
    message = str(info.value)
    assert "pool slot" in message and "embed()" in message
    assert f"path: {'Client' if sync else 'AsyncClient'}.embed()" in message


class UnboundEmbedder(OpenAIChatAdapter):
    """Sends its embedding requests without the request, so a call's `timeout_s` never
    reaches them: only the provider's timeout bounds a stalled answer."""

    provider_id = "unbound-embed"

    async def embed(self, request: EmbedRequest) -> EmbedReply:
        body = embed_body(request, "input", True)
        response = await self.send("POST", "/embeddings", json_body=body)  # the bug
        try:
            payload = await self.read_json(response)
        finally:
            await response.aclose()
        return openai_shaped_reply(self, request, payload, ())


def test_the_retrieval_resources_check_catches_a_call_timeout_that_is_not_applied() -> None:
    registry = ConformanceRegistry()
    entry = registry.add("unbound-embed", UnboundEmbedder, dialect="openai-chat")
    with pytest.raises(ConformanceFailure) as info:
        Harness(registry, entry).verify_resources(sync=True, method="embed")
    message = str(info.value)
    assert "does not bound its request" in message and "request=request" in message
    assert "pool slot" not in message and "memory is not steady" not in message


class HoardingEmbedder(OpenAIChatAdapter):
    """Keeps a record of every embedding batch (a history without a bound)."""

    provider_id = "hoarding-embed"
    history: list[Any] = []  # noqa: RUF012 - the bug under test

    async def embed(self, request: EmbedRequest) -> EmbedReply:
        self.history.append({"inputs": len(request.inputs), "sent": time.monotonic()})
        return await super().embed(request)


@pytest.mark.parametrize("sync", [False, True], ids=["async", "sync"])
def test_the_retrieval_resources_check_catches_a_client_that_keeps_each_call(sync: bool) -> None:
    registry = ConformanceRegistry()
    entry = registry.add("hoarding-embed", HoardingEmbedder, dialect="openai-chat")
    HoardingEmbedder.history.clear()
    try:
        with pytest.raises(ConformanceFailure) as info:
            Harness(registry, entry).verify_resources(sync=sync, method="embed")
    finally:
        HoardingEmbedder.history.clear()
    message = str(info.value)
    assert "memory is not steady" in message and "embed() calls" in message
    assert "pool slot" not in message and "connections, not one" not in message


def test_a_retrieval_call_cancelled_mid_answer_releases_its_slot() -> None:
    # The async path's cancellation scenario: more cancelled calls than the pool has
    # connections, then a clean one still gets a connection at once.
    from anyinfer.conformance import resources

    h = harness(_REGISTRY.get("openai"))
    scripts = resources._retrieval_scripts(h, "embed")
    served = resources._Served(h)
    with FakeServer(h.dialect, served) as srv:
        settings = harness_settings(h, srv, max_connections=resources.POOL_SIZE)
        route = ai.Route(f"openai:{resources._model(h, 'embed')}", retry=NO_RETRY)
        calls = resources._AsyncCalls(settings, h, "embed", route)
        try:
            served.script = scripts["stall"]
            for _ in range(resources.ROUNDS):
                calls.cancel()
            served.script = scripts["plain"]
            start = time.monotonic()
            calls.call(3.0)
            assert time.monotonic() - start < 1.0
        finally:
            calls.close()
