"""The sync facade under misuse: wrong threads, running loops, Ctrl-C, dropped clients,
and arguments of the wrong type (issue 16)."""

from __future__ import annotations

import asyncio
import gc
import json
import math
import signal
import threading
import time
from typing import Any

import httpx
import psutil
import pytest
from helpers import settings_for, sse

import anyinfer as ai
from anyinfer.fakeservers import FakeServer, Fault, Script, Text

GOOD = sse(
    *({"choices": [{"index": 0, "delta": {"content": t}}]} for t in ("Hel", "lo")),
    {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
)
WHOLE = {"choices": [{"index": 0, "message": {"content": "whole"}, "finish_reason": "stop"}]}


def handler_for(body: bytes, seen: list[Any] | None = None) -> Any:
    """Answer a streamed request with `body` and a whole one with "whole"."""

    def handler(request: httpx.Request) -> httpx.Response:
        payload = json.loads(request.content)
        if seen is not None:
            seen.append(payload)
        if payload.get("stream"):
            return httpx.Response(200, content=body, headers={"content-type": "text/event-stream"})
        return httpx.Response(200, json=WHOLE)

    return handler


settings = settings_for("openai", alias_first=True, api_key="sk-facade-test")


class _StreamingObserver:
    """An observer that (wrongly) iterates a sync stream from inside the loop."""

    def __init__(self) -> None:
        self.client: ai.Client | None = None
        self.outcome: list[BaseException | str] = []

    def on_event(self, event: Any) -> None:
        if self.outcome or self.client is None:
            return
        try:
            next(iter(self.client.stream("again", target="a:m")))
            self.outcome.append("iterated")
        except BaseException as exc:
            self.outcome.append(exc)


def test_iterating_a_sync_stream_on_the_loop_thread_raises_at_once() -> None:
    observer = _StreamingObserver()
    client = ai.Client([settings("a", handler_for(GOOD))], observers=[observer])
    observer.client = client
    worker = threading.Thread(target=lambda: client.generate("hi", target="a:m"), daemon=True)
    worker.start()
    worker.join(10)  # a hang guard only: the old code deadlocked here for good
    assert not worker.is_alive(), "iterating on the loop thread deadlocked the client"
    client.close()
    assert len(observer.outcome) == 1
    error = observer.outcome[0]
    assert isinstance(error, RuntimeError) and "own loop thread" in str(error)


def test_sync_client_inside_a_running_loop_raises_config_error() -> None:
    seen: list[Any] = []
    with ai.Client([settings("a", handler_for(GOOD, seen=seen))]) as client:

        async def misuse() -> None:
            with pytest.raises(ai.ConfigError, match="AsyncClient"):
                client.generate("hi", target="a:m")
            stream = client.stream("hi", target="a:m")
            with pytest.raises(ai.ConfigError, match="AsyncClient"):
                next(iter(stream))
            with pytest.raises(ai.ConfigError, match="AsyncClient"):
                client.models("a")
            stream.close()

        asyncio.run(misuse())
        assert seen == []  # nothing was sent
        assert client.generate("hi", target="a:m").text == "whole"  # still usable outside


def test_close_works_from_inside_a_running_loop() -> None:
    before = {t.ident for t in threading.enumerate()}
    client = ai.Client([settings("a", handler_for(GOOD))])

    async def shutdown() -> None:
        client.close()

    asyncio.run(shutdown())
    assert {t.ident for t in threading.enumerate()} <= before


def test_a_dropped_client_releases_its_thread_and_fds_with_a_resource_warning() -> None:
    proc = psutil.Process()
    gc.collect()
    threads_before = threading.active_count()
    fds_before = proc.num_fds()

    def use_and_drop() -> None:
        for _ in range(10):
            client = ai.Client([settings("a", handler_for(GOOD))])
            assert client.generate("hi", target="a:m").text == "whole"
            del client
        gc.collect()

    with pytest.warns(ResourceWarning, match="without close"):
        use_and_drop()
    assert threading.active_count() <= threads_before
    assert proc.num_fds() <= fds_before


def test_a_stream_keeps_its_temporary_client_alive() -> None:
    # `ai.Client(...).stream(...)`: the client has no other reference, and must not be
    # finalized under its open stream.
    stream = ai.Client([settings("a", handler_for(GOOD))]).stream("hi", target="a:m")
    gc.collect()
    assert stream.collect().text == "Hello"
    with pytest.warns(ResourceWarning):
        stream = None  # the last reference to the stream, and so to its client


def _interrupt_main_once(srv: FakeServer, requests: int) -> threading.Thread:
    """Send SIGINT to the main thread once the server has seen `requests` requests."""
    main = threading.main_thread().ident
    assert main is not None

    def fire() -> None:
        for _ in range(1000):
            if len(srv.requests) >= requests:
                break
            time.sleep(0.01)
        time.sleep(0.05)  # let the client settle into waiting for the body
        signal.pthread_kill(main, signal.SIGINT)

    thread = threading.Thread(target=fire, daemon=True)
    thread.start()
    return thread


def _held_connections(port: int) -> list[Any]:
    proc = psutil.Process()
    return [c for c in proc.net_connections(kind="tcp") if c.raddr and c.raddr.port == port]


@pytest.mark.parametrize("call", ["generate", "stream"])
def test_ctrl_c_during_a_sync_call_releases_the_request_first(call: str) -> None:
    assert threading.current_thread() is threading.main_thread()
    stalled = Script(pieces=(Text("a"),), fault=Fault("stall", at=0))
    good = Script(pieces=(Text("ok"),))
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with FakeServer("openai-chat", [stalled, good]) as srv:
            s = ai.ProviderSettings(
                "openai",
                api_key="sk-loopback",
                base_url=srv.base_url,
                timeout_s=5,
                options={"max_connections": 1},
            )
            with ai.Client([s]) as client:
                route = ai.Route("openai:m", retry=ai.RetryPolicy(max_retries=0))
                firer = _interrupt_main_once(srv, 1)

                def wait() -> None:
                    if call == "generate":
                        client.generate("hi", route=route)
                    else:
                        client.stream("hi", route=route).collect()

                with pytest.raises(KeyboardInterrupt):
                    wait()
                firer.join(10)
                # Released before the interrupt propagated: no socket is held, and the
                # one pool slot is free for the next request at once.
                assert _held_connections(srv.port) == []
                assert client.generate("hi", route=route).text == "ok"
    finally:
        signal.signal(signal.SIGINT, previous)


# --- argument checks ---------------------------------------------------------------------

BAD_CALLS: list[tuple[str, dict[str, Any]]] = [
    ("target", {"target": 123}),
    ("route", {"target": None, "route": object()}),
    ("route", {"target": None, "route": [1, 2]}),
    ("sampling", {"sampling": {}}),
    ("provider_options", {"provider_options": "x"}),
    ("provider_options", {"provider_options": {"openai": 5}}),
    ("timeout_s", {"timeout_s": math.nan}),
    ("timeout_s", {"timeout_s": "5"}),
    ("timeout_s", {"timeout_s": True}),
    ("max_response_bytes", {"max_response_bytes": "5"}),
    ("max_response_bytes", {"max_response_bytes": 1.5}),
    ("reasoning", {"reasoning": "maximum"}),
    ("metadata", {"metadata": {"k": 1}}),
    ("tools", {"tools": 5}),
    ("tool_choice", {"tool_choice": 5}),
    ("properties", {"schema": {"type": "object", "properties": 5}}),
    ("required", {"schema": {"type": "object", "required": "a"}}),
    ("required must be a list of property names", {"schema": {"required": ["a", 1]}}),
    ("/type must be a type name", {"schema": {"type": ["object", 5]}}),
    ("repair", {"schema": {"type": "object"}, "repair": 3}),
    ("parameters", {"tools": [ai.ToolSpec("t", parameters={"properties": 5})]}),
]


def _call(kind: str, kwargs: dict[str, Any], seen: list[Any]) -> None:
    kw = {"target": "a:m", **kwargs}
    if kind.startswith("async"):

        async def go() -> None:
            async with ai.AsyncClient([settings("a", handler_for(GOOD, seen=seen))]) as client:
                if kind == "async-generate":
                    await client.generate("hi", **kw)
                elif kind == "async-stream":
                    client.stream("hi", **kw)
                else:
                    tools = kw.pop("tools", [])
                    await client.run_tools("hi", tools=tools, **kw)

        asyncio.run(go())
        return
    with ai.Client([settings("a", handler_for(GOOD, seen=seen))]) as client:
        if kind == "generate":
            client.generate("hi", **kw)
        elif kind == "stream":
            client.stream("hi", **kw)
        else:
            tools = kw.pop("tools", [])
            client.run_tools("hi", tools=tools, **kw)


@pytest.mark.parametrize(
    "kind", ["generate", "stream", "run_tools", "async-generate", "async-stream", "async-run_tools"]
)
@pytest.mark.parametrize(("names", "kwargs"), BAD_CALLS, ids=[repr(k) for _, k in BAD_CALLS])
def test_bad_argument_types_raise_config_error_naming_the_parameter(
    kind: str, names: str, kwargs: dict[str, Any]
) -> None:
    seen: list[Any] = []
    with pytest.raises(ai.ConfigError, match=names):
        _call(kind, kwargs, seen)
    assert seen == []  # raised before anything was sent


@pytest.mark.parametrize("max_rounds", ["3", 2.0, None])
def test_run_tools_checks_max_rounds_and_forwarded_keywords(max_rounds: Any) -> None:
    with ai.Client([settings("a", handler_for(GOOD))]) as client:
        with pytest.raises(ai.ConfigError, match="max_rounds"):
            client.run_tools("hi", tools=[], target="a:m", max_rounds=max_rounds)
        with pytest.raises(ai.ConfigError, match="unexpected keyword"):
            client.run_tools("hi", tools=[], target="a:m", temprature=0.5)


@pytest.mark.parametrize(
    ("kwargs", "names"),
    [
        ({"target": 5}, "target"),
        ({"target": "a:m", "sampling": {}}, "sampling"),
        ({"target": "a:m", "schema": {"properties": 5}}, "properties"),
        ({"target": "a:m", "output_reserve_tokens": "9"}, "output_reserve_tokens"),
    ],
)
def test_budget_checks_its_arguments_sync_and_async(kwargs: dict[str, Any], names: str) -> None:
    with ai.Client([settings("a", handler_for(GOOD))]) as client:
        with pytest.raises(ai.ConfigError, match=names):
            client.budget("hi", **kwargs)
    with pytest.raises(ai.ConfigError, match=names):
        ai.AsyncClient([settings("a", handler_for(GOOD))]).budget("hi", **kwargs)


@pytest.mark.parametrize(
    ("build", "names"),
    [
        (lambda: ai.Sampling(temperature="0.5"), "temperature"),
        (lambda: ai.Sampling(top_p=math.inf), "top_p"),
        (lambda: ai.Sampling(max_output_tokens=1.5), "max_output_tokens"),
        (lambda: ai.Sampling(seed="1"), "seed"),
        (lambda: ai.Sampling(stop=[1]), "stop"),
        (lambda: ai.RetryPolicy(max_retries="3"), "max_retries"),
        (lambda: ai.RetryPolicy(backoff_base_s=math.nan), "backoff_base_s"),
        (lambda: ai.Route("a:m", breaker_threshold="5"), "breaker_threshold"),
        (lambda: ai.ProviderSettings("openai", api_key=123), "api_key"),
        (lambda: ai.ProviderSettings("openai", timeout_s=math.nan), "timeout_s"),
        (lambda: ai.ProviderSettings("openai", timeout_s="5"), "timeout_s"),
    ],
)
def test_value_types_check_their_fields(build: Any, names: str) -> None:
    with pytest.raises(ai.ConfigError, match=names):
        build()


def test_a_secret_of_the_wrong_type_is_not_echoed() -> None:
    with pytest.raises(ai.ConfigError) as info:
        ai.ProviderSettings("openai", api_key=123456789)
    assert "123456789" not in str(info.value)


def test_a_bare_stop_string_is_one_stop_sequence() -> None:
    assert ai.Sampling(stop="END").stop == ("END",)


def test_good_calls_still_pass_the_checks() -> None:
    seen: list[Any] = []
    with ai.Client([settings("a", handler_for(GOOD, seen=seen))]) as client:
        result = client.generate(
            "hi",
            route=["a:m"],
            sampling=ai.Sampling(temperature=0, max_output_tokens=5, stop=("x",)),
            reasoning="low",
            timeout_s=5,
            provider_options={"a": {"user": "u"}},
            metadata={"k": "v"},
            max_response_bytes=10_000,
            tools=[ai.ToolSpec("t", parameters={"type": "object", "properties": {}})],
        )
    assert result.text == "whole" and len(seen) == 1


def test_a_call_running_when_another_thread_closes_the_client_fails_typed() -> None:
    """`close()` cancels the calls still running: they fail with `ConfigError`, as a
    stream open at that moment does, not with a bare `CancelledError`."""
    stalled = Script(pieces=(Text("a"),), fault=Fault("stall", at=0))
    with FakeServer("openai-chat", lambda request: stalled) as server:
        client = ai.Client([settings("fake", server.base_url)])
        failures: list[BaseException] = []

        def call() -> None:
            try:
                client.generate("hi", target="fake:m", timeout_s=10.0)
            except BaseException as exc:
                failures.append(exc)

        thread = threading.Thread(target=call)
        thread.start()
        deadline = time.monotonic() + 5
        while not server.requests and time.monotonic() < deadline:
            time.sleep(0.01)  # the call is waiting for its answer
        client.close()
        thread.join(10)
    (failure,) = failures
    assert type(failure) is ai.ConfigError
    assert "closed while this call was running" in str(failure)
