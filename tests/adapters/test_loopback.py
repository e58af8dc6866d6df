"""End to end over real 127.0.0.1 sockets: the client against a fake OpenAI server."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import psutil
import pytest
from helpers import NO_RETRY, settings_for

import anyinfer as ai
from anyinfer.conformance.registry import AdapterEntry, ConformanceRegistry, load_builtins
from anyinfer.conformance.runner import Harness
from anyinfer.fakeservers import (
    FakeServer,
    Fault,
    Script,
    ScriptUsage,
    Text,
    ToolFragment,
    get_dialect,
)

settings = settings_for("openai", api_key="sk-loopback")  # settings(srv): its base_url


def test_stream_text_equals_result_and_trailing_usage_is_counted() -> None:
    script = Script(
        pieces=(Text("Hel"), Text("lo, "), Text("wörld ✓")),
        usage=ScriptUsage(input_tokens=11, output_tokens=4, cache_read_tokens=3),
        usage_placement="trailing",
        read_sizes=(3,),
    )
    with FakeServer("openai-chat", [script]) as srv, ai.Client([settings(srv)]) as client:
        with client.stream("hi", target="openai:fake-model") as stream:
            events = list(stream)
        result = stream.result
        srv.assert_all_used()
    assert "".join(e.text for e in events if isinstance(e, ai.TextDelta)) == result.text
    assert result.text == "Hello, wörld ✓"
    assert result.usage == ai.Usage(11, 4, 15, cache_read_tokens=3)
    assert result.warnings == ()
    assert (
        result.timing.first_token_ms is not None
        and result.timing.total_ms >= result.timing.first_token_ms
    )


def test_disconnect_after_usage_raises_with_usage_seen_first() -> None:
    # A server that reports usage before finishing (finish_reason null on the usage
    # frame), then dies: the failure must come after that usage was emitted.
    base = Script(
        pieces=(Text("a"), Text("b"), Text("c")),
        finish_reason=None,
        usage=ScriptUsage(input_tokens=9, output_tokens=2),
        usage_placement="finish",
        sentinel=False,
    )
    frames = get_dialect("openai-chat").render(base, stream=True).frames
    after_usage = next(i for i, f in enumerate(frames) if f.usage) + 1
    script = replace(base, fault=Fault("disconnect", at=after_usage))
    seen: list[ai.StreamEvent] = []

    async def go(srv: FakeServer) -> None:
        async with ai.AsyncClient([settings(srv)]) as client:
            async with client.stream("hi", route=ai.Route("openai:m", retry=NO_RETRY)) as stream:
                async for event in stream:
                    seen.append(event)

    with FakeServer("openai-chat", [script]) as srv, pytest.raises(ai.StreamError):
        asyncio.run(go(srv))
    kinds = [type(e).__name__ for e in seen]
    assert "UsageUpdate" in kinds and "StreamEnded" not in kinds
    usage = next(e for e in seen if isinstance(e, ai.UsageUpdate)).usage
    assert (usage.input_tokens, usage.output_tokens) == (9, 2)


def test_usage_reported_before_a_cut_is_observable() -> None:
    script = Script(
        pieces=(Text("done"),),
        usage=ScriptUsage(input_tokens=9, output_tokens=2),
        usage_placement="trailing",
        fault=Fault("disconnect", at=4, partial_bytes=3),  # inside the [DONE] frame
    )
    with FakeServer("openai-chat", [script]) as srv, ai.Client([settings(srv)]) as client:
        with client.stream("hi", target="openai:m") as stream:
            events = list(stream)
    updates = [e for e in events if isinstance(e, ai.UsageUpdate)]
    assert updates and updates[-1].usage.input_tokens == 9
    assert stream.result.usage.output_tokens == 2
    assert any("usage may be incomplete" in w for w in stream.result.warnings)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_early_break_closes_the_server_connection(mode: str) -> None:
    script = Script(pieces=tuple(Text(f"t{i} ") for i in range(200)))
    with FakeServer("openai-chat", [script], write_delay=0.002) as srv:
        if mode == "sync":
            with ai.Client([settings(srv)]) as client:
                with client.stream("hi", target="openai:m") as stream:
                    for event in stream:
                        if isinstance(event, ai.TextDelta):
                            break
                assert srv.wait_client_closed(timeout=5.0)
        else:

            async def go() -> None:
                async with ai.AsyncClient([settings(srv)]) as client:
                    async with client.stream("hi", target="openai:m") as stream:
                        async for event in stream:
                            if isinstance(event, ai.TextDelta):
                                break
                    # Still inside the client: the connection must already be closed.
                    for _ in range(100):
                        if srv.client_closes:
                            break
                        await asyncio.sleep(0.01)
                    assert srv.client_closes >= 1

            asyncio.run(go())


def test_cancelling_the_task_closes_the_connection() -> None:
    script = Script(pieces=tuple(Text(f"t{i} ") for i in range(500)))

    async def go(srv: FakeServer) -> None:
        async with ai.AsyncClient([settings(srv)]) as client:

            async def consume() -> None:
                async with client.stream("hi", target="openai:m") as stream:
                    async for _ in stream:
                        pass

            task = asyncio.create_task(consume())
            await asyncio.sleep(0.05)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            for _ in range(100):
                if srv.client_closes:
                    break
                await asyncio.sleep(0.01)
            assert srv.client_closes >= 1
            assert {t for t in asyncio.all_tasks() if t is not asyncio.current_task()} == set()

    with FakeServer("openai-chat", [script], write_delay=0.002) as srv:
        asyncio.run(go(srv))


def test_client_from_eight_threads_over_sockets() -> None:
    scripts = [Script(pieces=(Text(f"answer {i}"),), usage=ScriptUsage(1, 2)) for i in range(24)]
    with (
        FakeServer("openai-chat", lambda request: scripts[0]) as srv,
        ai.Client([settings(srv)]) as client,
    ):

        def work(i: int) -> str:
            if i % 2:
                return client.generate("hi", target="openai:m").text
            with client.stream("hi", target="openai:m") as stream:
                return stream.collect().text

        with ThreadPoolExecutor(8) as pool:
            texts = list(pool.map(work, range(24)))
    assert texts == ["answer 0"] * 24


def test_tool_calls_over_sockets() -> None:
    script = Script(
        pieces=(
            ToolFragment(0, '{"city": ', id="call_a", name="weather"),
            ToolFragment(1, '{"q": "x"}', id="call_b", name="search"),
            ToolFragment(0, '"Oslo"}'),
        ),
        finish_reason="tool_calls",
        read_sizes=(1,),
    )
    with FakeServer("openai-chat", [script]) as srv, ai.Client([settings(srv)]) as client:
        result = client.stream("hi", target="openai:m").collect()
    assert [(c.id, c.name, dict(c.arguments)) for c in result.tool_calls] == [
        ("call_a", "weather", {"city": "Oslo"}),
        ("call_b", "search", {"q": "x"}),
    ]
    assert result.finish_reason == "tool_calls"


def test_close_leaves_no_thread_or_socket() -> None:
    proc = psutil.Process()
    threads_before = {t.ident for t in threading.enumerate()}
    with FakeServer("openai-chat", lambda request: Script(pieces=(Text("x"),))) as srv:
        port = srv.port
        client = ai.Client([settings(srv)])
        for _ in range(5):
            client.generate("hi", target="openai:m")
            with client.stream("hi", target="openai:m") as stream:
                next(iter(stream))
        client.close()
        conns = [c for c in proc.net_connections(kind="tcp") if c.raddr and c.raddr.port == port]
        assert conns == []
    assert {t.ident for t in threading.enumerate()} <= threads_before


def test_first_byte_and_idle_timeouts_are_told_apart() -> None:
    import socket as _socket

    listener = _socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    held: list[_socket.socket] = []

    def accept() -> None:
        try:
            conn, _ = listener.accept()
            held.append(conn)  # read nothing, answer nothing
        except OSError:
            pass

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    s = ai.ProviderSettings("openai", base_url=f"http://127.0.0.1:{port}/v1", timeout_s=0.3)
    try:
        with ai.Client([s]) as client, pytest.raises(ai.AllTargetsFailedError) as info:
            client.generate("hi", route=ai.Route("openai:m", retry=NO_RETRY))
    finally:
        listener.close()
        for conn in held:
            conn.close()
        thread.join(1)
    error = info.value.attempts[0].error
    assert error is not None and error.type_name == "ProviderTimeoutError"
    assert "first_byte" in error.detail

    stalled = Script(pieces=(Text("a"), Text("b")), fault=Fault("stall", at=2))
    with FakeServer("openai-chat", [stalled]) as srv, ai.Client([settings(srv)]) as client:
        with pytest.raises(ai.ProviderTimeoutError) as idle:
            client.stream("hi", target="openai:m", timeout_s=0.3).collect()
    assert idle.value.timeout_kind == "idle"


def test_connections_are_reused_after_a_drained_stream() -> None:
    with FakeServer("openai-chat", lambda _r: Script(pieces=(Text("x"),))) as srv:
        with ai.Client([settings(srv)]) as client:
            for _ in range(3):
                client.stream("hi", target="openai:m").collect()
                client.generate("hi", target="openai:m")
        assert srv.connections_opened == 1


# --- connection reuse, every built-in adapter, both clients --------------------------------

_BUILTINS = ConformanceRegistry()
load_builtins(_BUILTINS)
_GENERATING = [e for e in _BUILTINS.entries() if e.generates()]
"""The built-in entries whose adapters generate (embed-and-rerank-only ones stream nothing;
`tests/embed/test_retrieval_providers.py` checks their connection reuse)."""


@pytest.mark.parametrize("entry", _GENERATING, ids=[e.name for e in _GENERATING])
@pytest.mark.parametrize("client_kind", ["sync", "async"])
def test_five_sequential_streams_use_one_connection(entry: AdapterEntry, client_kind: str) -> None:
    # The template drains each stream to the end of its body after the sentinel, so the
    # connection goes back to the pool instead of being dropped.
    h = Harness(_BUILTINS, entry)
    script = Script(pieces=(Text("Hel"), Text("lo")), usage=ScriptUsage(4, 2))
    target = f"{entry.name}:m"
    with FakeServer(h.dialect, lambda _r: script) as srv:
        s = replace(h.settings(base_url=srv.base_url), timeout_s=5.0)
        if client_kind == "sync":
            with ai.Client([s], registry=h._providers) as client:
                texts = [client.stream("hi", target=target).collect().text for _ in range(5)]
        else:

            async def go() -> list[str]:
                async with ai.AsyncClient([s], registry=h._providers) as client:
                    return [
                        (await client.stream("hi", target=target).collect()).text for _ in range(5)
                    ]

            texts = asyncio.run(go())
        assert texts == ["Hello"] * 5
        assert srv.connections_opened == 1
