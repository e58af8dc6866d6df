"""Measure AnyInfer's overhead against raw httpx, on a loopback fake OpenAI server.

Run by hand, not in CI::

    python benchmarks/bench.py            # full run (a few minutes at most)
    python benchmarks/bench.py --quick    # a short run, for a sanity check
    python benchmarks/bench.py --profile  # cProfile the AnyInfer streaming path

One run measures four things, each against the same pre-encoded bytes served by
`benchmarks/_server.py` in a separate process (so the server's CPU does not pollute the
client's timings):

1. import time: ``import anyinfer`` vs ``import httpx`` in fresh interpreters, net of
   ``python -c pass``;
2. streaming: per-chunk time of a 2,000-chunk stream through ``AsyncClient.stream`` vs
   raw ``httpx.AsyncClient.stream`` + ``aiter_lines()`` + ``json.loads``;
3. non-streaming: per-request time of sequential ``AsyncClient.generate`` calls vs raw
   httpx ``post`` + ``.json()``;
4. concurrency: wall time and peak-RSS growth of 200 concurrent 100-chunk streams, each
   side in its own fresh process.

See `benchmarks/README.md` for what each figure means and how to read the table.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from _server import expected_text

HERE = Path(__file__).resolve().parent
SERVER = HERE / "_server.py"
API_KEY = "sk-bench-not-a-secret"
PROMPT = "hi"


@dataclass(frozen=True)
class Plan:
    """How much of each measurement to run."""

    import_reps: int
    stream_chunks: int
    stream_reps: int
    seq_requests: int
    seq_reps: int
    seq_chunks: int
    conc_streams: int
    conc_chunks: int
    conc_reps: int
    replay_reps: int
    first_chunks: int = 100


FULL = Plan(
    import_reps=30,
    stream_chunks=2000,
    stream_reps=21,
    seq_requests=200,
    seq_reps=11,
    seq_chunks=100,
    conc_streams=200,
    conc_chunks=100,
    conc_reps=5,
    replay_reps=9,
)
QUICK = Plan(
    import_reps=8,
    stream_chunks=2000,
    stream_reps=3,
    seq_requests=200,
    seq_reps=2,
    seq_chunks=100,
    conc_streams=200,
    conc_chunks=100,
    conc_reps=1,
    replay_reps=3,
)

TARGETS: dict[str, float] = {
    "chunk": 1.15,  # stream, per chunk
    "request": 1.1,  # non-streaming, per request
    "concurrent": 1.2,  # 200 concurrent streams, wall
    "first": 1.1,  # import + first request, fresh interpreter
    "rss": 1.3,  # 200 concurrent streams, peak RSS growth
}
"""The gated ratios (AnyInfer / raw httpx), per issue 15; the same on every protocol."""


@dataclass(frozen=True)
class Row:
    """One line of the result table."""

    name: str
    unit: str
    anyinfer: float
    raw: float
    target: float | None

    @property
    def ratio(self) -> float:
        return self.anyinfer / self.raw if self.raw > 0 else float("inf")

    @property
    def verdict(self) -> str:
        if self.target is None:
            return "info"
        return "PASS" if self.ratio <= self.target else "FAIL"


def log(message: str) -> None:
    """Progress goes to stderr so stdout stays the table."""
    print(message, file=sys.stderr, flush=True)


def child_env() -> dict[str, str]:
    """The environment for child interpreters: this one's, with the same sys.path reach."""
    env = dict(os.environ)
    env.pop("PYTHONSTARTUP", None)
    return env


# --- the fake server ---------------------------------------------------------------


class Server:
    """The fake server process; it exits when its stdin closes."""

    def __init__(self, framing: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(SERVER), "--port", "0", "--framing", framing],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            cwd=tempfile.gettempdir(),
            env=child_env(),
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().decode().strip()
        if not line.startswith("PORT "):
            self.stop()
            raise RuntimeError(f"the fake server did not start (said {line!r})")
        self.port = int(line.split()[1])
        self.framing = framing

    def stop(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


# --- the protocols and the two sides -------------------------------------------------
#
# Each raw-httpx parser below is what a user writes for that wire without AnyInfer: read
# the body line by line (httpx frames the lines), JSON-decode every event, keep the text
# deltas and the usage. They are plain top-level functions with no helpers, so the
# import-plus-first-request row can paste their source into a fresh interpreter.


async def raw_sse_openai_chat(response: Any) -> tuple[str, int | None]:
    """OpenAI Chat SSE: `data:` chunks with `choices[].delta.content`, then `[DONE]`."""
    loads = json.loads
    parts: list[str] = []
    usage: dict[str, Any] | None = None
    async for line in response.aiter_lines():
        if not line.startswith("data: "):
            continue
        data = line[6:]
        if data == "[DONE]":
            break
        chunk = loads(data)
        for choice in chunk["choices"]:
            content = choice["delta"].get("content")
            if content:
                parts.append(content)
        if chunk.get("usage"):
            usage = chunk["usage"]
    return "".join(parts), (usage or {}).get("completion_tokens")


async def raw_sse_openai_responses(response: Any) -> tuple[str, int | None]:
    """OpenAI Responses SSE: typed events; text deltas, usage in `response.completed`."""
    loads = json.loads
    parts: list[str] = []
    tokens: int | None = None
    async for line in response.aiter_lines():
        if not line.startswith("data: "):
            continue
        event = loads(line[6:])
        kind = event["type"]
        if kind == "response.output_text.delta":
            parts.append(event["delta"])
        elif kind == "response.completed":
            tokens = event["response"]["usage"]["output_tokens"]
            break
    return "".join(parts), tokens


async def raw_sse_anthropic(response: Any) -> tuple[str, int | None]:
    """Anthropic Messages SSE: `content_block_delta` text, usage in `message_delta`."""
    loads = json.loads
    parts: list[str] = []
    tokens: int | None = None
    async for line in response.aiter_lines():
        if not line.startswith("data: "):
            continue
        event = loads(line[6:])
        kind = event["type"]
        if kind == "content_block_delta":
            delta = event["delta"]
            if delta["type"] == "text_delta":
                parts.append(delta["text"])
        elif kind == "message_start":
            tokens = event["message"]["usage"].get("output_tokens")
        elif kind == "message_delta":
            tokens = event["usage"]["output_tokens"]
        elif kind == "message_stop":
            break
    return "".join(parts), tokens


async def raw_sse_gemini(response: Any) -> tuple[str, int | None]:
    """Gemini `alt=sse`: each chunk's candidate parts, running `usageMetadata` counts."""
    loads = json.loads
    parts: list[str] = []
    tokens: int | None = None
    async for line in response.aiter_lines():
        if not line.startswith("data: "):
            continue
        chunk = loads(line[6:])
        for candidate in chunk.get("candidates", ()):
            for part in candidate["content"].get("parts", ()):
                text = part.get("text")
                if text:
                    parts.append(text)
        meta = chunk.get("usageMetadata")
        if meta:
            tokens = meta.get("candidatesTokenCount")
    return "".join(parts), tokens


async def raw_ndjson_ollama(response: Any) -> tuple[str, int | None]:
    """Ollama NDJSON: one object a line, `message.content`, counts on `done: true`."""
    loads = json.loads
    parts: list[str] = []
    tokens: int | None = None
    async for line in response.aiter_lines():
        if not line:
            continue
        obj = loads(line)
        content = obj["message"].get("content")
        if content:
            parts.append(content)
        if obj.get("done"):
            tokens = obj.get("eval_count")
            break
    return "".join(parts), tokens


def raw_whole_openai_chat(doc: Any) -> tuple[str, int | None]:
    return doc["choices"][0]["message"]["content"], doc["usage"]["completion_tokens"]


def raw_whole_openai_responses(doc: Any) -> tuple[str, int | None]:
    text = "".join(
        c["text"]
        for item in doc["output"]
        if item["type"] == "message"
        for c in item["content"]
        if c["type"] == "output_text"
    )
    return text, doc["usage"]["output_tokens"]


def raw_whole_anthropic(doc: Any) -> tuple[str, int | None]:
    text = "".join(b["text"] for b in doc["content"] if b["type"] == "text")
    return text, doc["usage"]["output_tokens"]


def raw_whole_gemini(doc: Any) -> tuple[str, int | None]:
    text = "".join(p.get("text", "") for p in doc["candidates"][0]["content"]["parts"])
    return text, doc["usageMetadata"]["candidatesTokenCount"]


def raw_whole_ollama(doc: Any) -> tuple[str, int | None]:
    return doc["message"]["content"], doc["eval_count"]


@dataclass(frozen=True)
class Protocol:
    """One built-in wire protocol: how each side talks to the fake server.

    The raw side sends the same method, path, query, auth headers and JSON body as
    AnyInfer's adapter does (checked by hand against the adapter's requests).
    """

    name: str
    provider: str
    base: str
    stream_path: str
    generate_path: str
    headers: dict[str, str]
    stream_body: dict[str, Any]
    generate_body: dict[str, Any]
    raw_stream: Callable[[Any], Awaitable[tuple[str, int | None]]]
    raw_whole: Callable[[Any], tuple[str, int | None]]
    stream_params: dict[str, str] | None = None

    @property
    def target(self) -> str:
        return f"{self.provider}:bench-model"

    def base_url(self, port: int, chunks: int) -> str:
        return f"http://127.0.0.1:{port}/n/{chunks}{self.base}"


_CHAT_MESSAGES = [{"role": "user", "content": PROMPT}]

PROTOCOLS: dict[str, Protocol] = {
    p.name: p
    for p in (
        Protocol(
            "openai-chat",
            "openai",
            "/v1",
            "/chat/completions",
            "/chat/completions",
            {"authorization": f"Bearer {API_KEY}"},
            {
                "model": "bench-model",
                "messages": _CHAT_MESSAGES,
                "stream": True,
                "stream_options": {"include_usage": True},
            },
            {"model": "bench-model", "messages": _CHAT_MESSAGES},
            raw_sse_openai_chat,
            raw_whole_openai_chat,
        ),
        Protocol(
            "openai-responses",
            "openai-responses",
            "/v1",
            "/responses",
            "/responses",
            {"authorization": f"Bearer {API_KEY}"},
            {"model": "bench-model", "input": _CHAT_MESSAGES, "stream": True, "store": False},
            {"model": "bench-model", "input": _CHAT_MESSAGES, "store": False},
            raw_sse_openai_responses,
            raw_whole_openai_responses,
        ),
        Protocol(
            "anthropic",
            "anthropic",
            "/v1",
            "/messages",
            "/messages",
            {"x-api-key": API_KEY, "anthropic-version": "2023-06-01"},
            {
                "model": "bench-model",
                "messages": _CHAT_MESSAGES,
                "max_tokens": 4096,
                "stream": True,
            },
            {"model": "bench-model", "messages": _CHAT_MESSAGES, "max_tokens": 4096},
            raw_sse_anthropic,
            raw_whole_anthropic,
        ),
        Protocol(
            "gemini",
            "gemini",
            "/v1beta",
            "/models/bench-model:streamGenerateContent",
            "/models/bench-model:generateContent",
            {"x-goog-api-key": API_KEY},
            {"contents": [{"role": "user", "parts": [{"text": PROMPT}]}]},
            {"contents": [{"role": "user", "parts": [{"text": PROMPT}]}]},
            raw_sse_gemini,
            raw_whole_gemini,
            stream_params={"alt": "sse"},
        ),
        Protocol(
            "ollama",
            "ollama",
            "",
            "/api/chat",
            "/api/chat",
            {"authorization": f"Bearer {API_KEY}"},
            {"model": "bench-model", "messages": _CHAT_MESSAGES, "stream": True},
            {"model": "bench-model", "messages": _CHAT_MESSAGES, "stream": False},
            raw_ndjson_ollama,
            raw_whole_ollama,
        ),
    )
}
"""Every built-in wire protocol. Azure OpenAI and the OpenAI-compatible presets speak
OpenAI Chat's wire through the same adapter code path, so `openai-chat` stands for them."""


def make_anyinfer(proto: Protocol, base_url: str) -> Any:
    import anyinfer as ai

    settings = ai.ProviderSettings(proto.provider, api_key=API_KEY, base_url=base_url)
    return ai.AsyncClient([settings])


def make_raw(proto: Protocol) -> Any:
    import httpx

    # The same timeout and proxy settings AnyInfer's adapter uses, so only the library
    # layer differs.
    return httpx.AsyncClient(
        timeout=httpx.Timeout(120.0, connect=15.0),
        headers=proto.headers,
        trust_env=False,
    )


async def anyinfer_stream(client: Any, proto: Protocol) -> tuple[str, int | None]:
    """Iterate every event, then read the result."""
    async with client.stream(PROMPT, target=proto.target) as st:
        async for _ in st:
            pass
    result = st.result
    return result.text, result.usage.output_tokens


async def raw_stream(http: Any, proto: Protocol, base: str) -> tuple[str, int | None]:
    """What a raw httpx user writes: stream the body through the protocol's parser."""
    async with http.stream(
        "POST", base + proto.stream_path, json=proto.stream_body, params=proto.stream_params
    ) as response:
        response.raise_for_status()
        return await proto.raw_stream(response)


async def anyinfer_generate(client: Any, proto: Protocol) -> tuple[str, int | None]:
    result = await client.generate(PROMPT, target=proto.target)
    return result.text, result.usage.output_tokens


async def raw_generate(http: Any, proto: Protocol, base: str) -> tuple[str, int | None]:
    response = await http.post(base + proto.generate_path, json=proto.generate_body)
    response.raise_for_status()
    return proto.raw_whole(response.json())


def check(got: tuple[str, int | None], chunks: int, side: str) -> None:
    """Both sides must parse the same answer, or the comparison means nothing."""
    text, tokens = got
    if text != expected_text(chunks) or tokens != 2 * chunks:
        raise AssertionError(f"{side} parsed a wrong answer ({len(text)} chars, {tokens} tokens)")


# --- 1. import time ------------------------------------------------------------------


def time_command(code: str) -> float:
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-c", code],
        check=True,
        cwd=tempfile.gettempdir(),  # so "" on sys.path cannot shadow the installed package
        env=child_env(),
    )
    return time.perf_counter() - start


_FIRST_ANYINFER = """
import asyncio
import anyinfer as ai

async def main():
    settings = ai.ProviderSettings({provider!r}, api_key={key!r}, base_url={base!r})
    async with ai.AsyncClient([settings]) as client:
        async with client.stream({prompt!r}, target={target!r}) as st:
            async for _ in st:
                pass
    got = (st.result.text, st.result.usage.output_tokens)
    assert got == {expected!r}, got

asyncio.run(main())
"""

_FIRST_RAW = """
import asyncio
import json
from typing import Any
import httpx

{parser}

async def main():
    async with httpx.AsyncClient(
        timeout=httpx.Timeout(120.0, connect=15.0), headers={headers!r}, trust_env=False
    ) as http:
        async with http.stream(
            "POST", {url!r}, json={body!r}, params={params!r}
        ) as response:
            response.raise_for_status()
            got = await {name}(response)
    assert got == {expected!r}, got

asyncio.run(main())
"""


def first_request_code(proto: Protocol, port: int, chunks: int) -> tuple[str, str]:
    """Programs for a fresh interpreter: import, open a client, run one stream, check it.

    The raw program pastes the very parser the in-process rows use (its source), so both
    sides do the same work as everywhere else in this benchmark.
    """
    import inspect

    base = proto.base_url(port, chunks)
    expected = (expected_text(chunks), 2 * chunks)
    ours = _FIRST_ANYINFER.format(
        provider=proto.provider,
        key=API_KEY,
        base=base,
        prompt=PROMPT,
        target=proto.target,
        expected=expected,
    )
    raw = _FIRST_RAW.format(
        parser=inspect.getsource(proto.raw_stream),
        headers=proto.headers,
        url=base + proto.stream_path,
        body=proto.stream_body,
        params=proto.stream_params,
        name=proto.raw_stream.__name__,
        expected=expected,
    )
    return ours, raw


def compile_bytecode() -> str:
    """Compile the measured `anyinfer`'s bytecode, as installing a wheel does.

    pip writes `__pycache__` for every module it installs, so a user's first import reads
    bytecode; httpx's here was compiled that way. A checkout whose bytecode was never
    written (`PYTHONDONTWRITEBYTECODE`, a read-only tree) would otherwise compile
    AnyInfer's source in every fresh interpreter and charge that to the import rows.

    Returns:
        What the header says about it.
    """
    import compileall

    import anyinfer

    where = Path(anyinfer.__file__).resolve().parent
    ok = compileall.compile_dir(str(where), quiet=1, workers=1)
    return "bytecode compiled" if ok else "bytecode NOT compiled (source compiled per start)"


def bench_imports(plan: Plan, server: Server, protocols: Sequence[Protocol]) -> list[Row]:
    log(f"  anyinfer {compile_bytecode()}")
    commands = {
        "pass": "pass",
        "anyinfer": "import anyinfer",
        "httpx": "import httpx",
    }
    for proto in protocols:
        ours, raw = first_request_code(proto, server.port, plan.first_chunks)
        commands[f"first:{proto.name}"] = ours
        commands[f"raw:{proto.name}"] = raw
    for code in commands.values():  # warm the page cache and the bytecode
        time_command(code)
        time_command(code)
    samples: dict[str, list[float]] = {k: [] for k in commands}
    for _ in range(plan.import_reps):
        for key, code in commands.items():  # interleaved, so drift hits all alike
            samples[key].append(time_command(code))
    med = {k: statistics.median(v) * 1000.0 for k, v in samples.items()}
    log(f"  interpreter start (python -c pass): {med['pass']:.1f} ms median")
    rows = [
        Row(
            "import (net of interpreter start)",
            "ms",
            med["anyinfer"] - med["pass"],
            med["httpx"] - med["pass"],
            1.5,
        )
    ]
    for proto in protocols:
        rows.append(
            Row(
                f"import + first request ({plan.first_chunks}-chunk stream) [{proto.name}]",
                "ms",
                med[f"first:{proto.name}"] - med["pass"],
                med[f"raw:{proto.name}"] - med["pass"],
                TARGETS["first"],
            )
        )
    return rows


# --- 2. and 3. in-process timings ----------------------------------------------------


Sample = tuple[float, float]
"""One timed repetition: (wall seconds, client CPU seconds), already divided per unit."""


async def timed(work: Callable[[], Awaitable[Any]], units: int) -> tuple[Sample, Any]:
    """Run `work`, returning its wall and CPU time per unit, and its last result."""
    cpu = time.process_time()
    wall = time.perf_counter()
    got = await work()
    wall = time.perf_counter() - wall
    cpu = time.process_time() - cpu
    return (wall / units, cpu / units), got


async def alternate(
    reps: int,
    a: Callable[[], Awaitable[Sample]],
    b: Callable[[], Awaitable[Sample]],
) -> tuple[list[Sample], list[Sample]]:
    """Run `a` and `b` alternately (one warm-up each), returning both sample lists."""
    await a()
    await b()
    xs: list[Sample] = []
    ys: list[Sample] = []
    for i in range(reps):
        if i % 2:
            ys.append(await b())
            xs.append(await a())
        else:
            xs.append(await a())
            ys.append(await b())
    return xs, ys


def rows_from(name: str, xs: list[Sample], ys: list[Sample], target: float) -> list[Row]:
    """A gated wall-time row and an informational client-CPU row, in microseconds."""
    us = 1e6

    def med(samples: list[Sample], i: int) -> float:
        return statistics.median(s[i] for s in samples) * us

    return [
        Row(name, "us", med(xs, 0), med(ys, 0), target),
        Row("  same, client CPU time", "us", med(xs, 1), med(ys, 1), None),
    ]


async def bench_streaming(server: Server, plan: Plan, proto: Protocol) -> list[Row]:
    n = plan.stream_chunks
    base = proto.base_url(server.port, n)
    async with make_anyinfer(proto, base) as client, make_raw(proto) as http:

        async def ours() -> Sample:
            sample, got = await timed(lambda: anyinfer_stream(client, proto), n)
            check(got, n, "anyinfer")
            return sample

        async def raw() -> Sample:
            sample, got = await timed(lambda: raw_stream(http, proto, base), n)
            check(got, n, "raw httpx")
            return sample

        xs, ys = await alternate(plan.stream_reps, ours, raw)
    return rows_from(f"stream, per chunk ({n} chunks) [{proto.name}]", xs, ys, TARGETS["chunk"])


async def bench_sequential(server: Server, plan: Plan, proto: Protocol) -> list[Row]:
    n = plan.seq_chunks
    count = plan.seq_requests
    base = proto.base_url(server.port, n)
    async with make_anyinfer(proto, base) as client, make_raw(proto) as http:

        async def ours_loop() -> tuple[str, int | None]:
            for _ in range(count):
                got = await anyinfer_generate(client, proto)
            return got

        async def raw_loop() -> tuple[str, int | None]:
            for _ in range(count):
                got = await raw_generate(http, proto, base)
            return got

        async def ours() -> Sample:
            sample, got = await timed(ours_loop, count)
            check(got, n, "anyinfer")
            return sample

        async def raw() -> Sample:
            sample, got = await timed(raw_loop, count)
            check(got, n, "raw httpx")
            return sample

        xs, ys = await alternate(plan.seq_reps, ours, raw)
    name = f"non-streaming, per request ({count} sequential) [{proto.name}]"
    return rows_from(name, xs, ys, TARGETS["request"])


# --- 4. concurrency, one fresh process per side --------------------------------------


def _proc_status_kib(field: str) -> float | None:
    """A `kB` figure from /proc/self/status (Linux), or `None` elsewhere."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith(field + ":"):
                    return float(line.split()[1])
    except OSError:
        return None
    return None


def start_rss_window() -> float:
    """Reset the peak-RSS mark to the current RSS and return that RSS, in KiB.

    `ru_maxrss` is not usable here: Linux carries the parent's peak into a child across
    fork and exec, so a child's `ru_maxrss` never reads below the benchmark parent's RSS.
    The per-process `VmHWM` mark, reset through /proc/self/clear_refs, has no such floor.
    """
    try:
        with open("/proc/self/clear_refs", "w") as refs:
            refs.write("5")  # 5: reset VmHWM to the current RSS (Linux >= 4.0)
    except OSError:
        pass
    now = _proc_status_kib("VmRSS")
    return now if now is not None else peak_rss_kib()


def peak_rss_kib() -> float:
    """Peak resident set size since `start_rss_window`, in KiB."""
    peak = _proc_status_kib("VmHWM")
    if peak is not None:
        return peak
    ru = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return ru / 1024.0 if sys.platform == "darwin" else float(ru)  # macOS: bytes


async def concurrency_worker(
    side: str, proto: Protocol, port: int, streams: int, chunks: int
) -> dict[str, float]:
    """Run `streams` concurrent streams on one side; report wall time and peak RSS."""
    # Import everything either side needs before the baseline, so the RSS growth is the
    # concurrency's own (AnyInfer loads httpx and its adapter lazily, on first use).
    import httpx  # noqa: F401

    base = proto.base_url(port, chunks)
    client = make_anyinfer(proto, base) if side == "anyinfer" else make_raw(proto)
    async with client:

        async def one() -> tuple[str, int | None]:
            if side == "anyinfer":
                return await anyinfer_stream(client, proto)
            return await raw_stream(client, proto, base)

        check(await one(), chunks, side)  # warm-up: lazy imports, first connection
        gc.collect()
        baseline = start_rss_window()
        cpu = time.process_time()
        start = time.perf_counter()
        results = await asyncio.gather(*(one() for _ in range(streams)))
        wall = time.perf_counter() - start
        cpu = time.process_time() - cpu
        peak = peak_rss_kib()
    for got in results:
        check(got, chunks, side)
    return {"wall_s": wall, "cpu_s": cpu, "baseline_kib": baseline, "peak_kib": peak}


def run_worker(side: str, server: Server, plan: Plan, proto: Protocol) -> dict[str, float]:
    proc = subprocess.run(
        [
            sys.executable,
            str(Path(__file__).resolve()),
            "--worker",
            side,
            "--protocol",
            proto.name,
            "--port",
            str(server.port),
            "--streams",
            str(plan.conc_streams),
            "--chunks",
            str(plan.conc_chunks),
        ],
        check=True,
        capture_output=True,
        text=True,
        cwd=tempfile.gettempdir(),
        env=child_env(),
    )
    return json.loads(proc.stdout)  # type: ignore[no-any-return]


def bench_concurrency(server: Server, plan: Plan, proto: Protocol) -> list[Row]:
    runs: dict[str, list[dict[str, float]]] = {"anyinfer": [], "raw": []}
    for i in range(plan.conc_reps):
        order = ("anyinfer", "raw") if i % 2 == 0 else ("raw", "anyinfer")
        for side in order:
            runs[side].append(run_worker(side, server, plan, proto))

    def med(side: str, key: Callable[[dict[str, float]], float]) -> float:
        return statistics.median(key(r) for r in runs[side])

    def wall(r: dict[str, float]) -> float:
        return r["wall_s"] * 1000.0

    def cpu(r: dict[str, float]) -> float:
        return r["cpu_s"] * 1000.0

    def delta(r: dict[str, float]) -> float:
        return (r["peak_kib"] - r["baseline_kib"]) / 1024.0

    def base(r: dict[str, float]) -> float:
        return r["baseline_kib"] / 1024.0

    label = f"{plan.conc_streams} concurrent streams x {plan.conc_chunks} chunks [{proto.name}]"
    return [
        Row(
            f"RSS after imports + one stream [{proto.name}]",
            "MiB",
            med("anyinfer", base),
            med("raw", base),
            None,
        ),
        Row(f"{label}: wall", "ms", med("anyinfer", wall), med("raw", wall), TARGETS["concurrent"]),
        Row("  same, client CPU time", "ms", med("anyinfer", cpu), med("raw", cpu), None),
        Row(
            "  same, peak RSS growth",
            "MiB",
            med("anyinfer", delta),
            med("raw", delta),
            TARGETS["rss"],
        ),
    ]


# --- profiling -----------------------------------------------------------------------


# --- 5. replayed bytes, in-process (information) --------------------------------------


def replay_transport(reads: list[bytes], headers: list[tuple[str, str]]) -> Any:
    """An httpx transport that serves one recorded response (its reads, in order) to
    every request, in-process: no socket, no server, no event-loop wait between reads."""
    import httpx

    class Reads(httpx.AsyncByteStream):
        async def __aiter__(self) -> AsyncIterator[bytes]:
            for read in reads:
                yield read

    class Replay(httpx.AsyncBaseTransport):
        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            await request.aread()
            return httpx.Response(200, headers=headers, stream=Reads())

    return Replay()


async def capture(proto: Protocol, base: str, stream: bool) -> tuple[list[bytes], list[Any]]:
    """The fake server's answer to the raw side's request, as httpx read it."""
    async with make_raw(proto) as http:
        if stream:
            request = http.build_request(
                "POST", base + proto.stream_path, json=proto.stream_body, params=proto.stream_params
            )
        else:
            request = http.build_request(
                "POST", base + proto.generate_path, json=proto.generate_body
            )
        response = await http.send(request, stream=True)
        reads = [read async for read in response.aiter_raw()]
        await response.aclose()
    framing = ("transfer-encoding", "content-length", "connection")
    return reads, [(k, v) for k, v in response.headers.items() if k.lower() not in framing]


async def bench_replay(server: Server, plan: Plan, proto: Protocol) -> list[Row]:
    """Client CPU time per chunk and per request on the server's recorded bytes, served
    in-process to both sides (the minimum over the repetitions, sides alternating)."""
    return [
        await replay_row(server, plan, proto, True),
        await replay_row(server, plan, proto, False),
    ]


async def replay_row(server: Server, plan: Plan, proto: Protocol, stream: bool) -> Row:
    import httpx

    import anyinfer as ai

    chunks = plan.stream_chunks if stream else plan.seq_chunks
    base = proto.base_url(server.port, chunks)
    transport = replay_transport(*await capture(proto, base, stream))
    settings = ai.ProviderSettings(
        proto.provider, api_key=API_KEY, base_url=base, transport=transport
    )
    count = 3 if stream else plan.seq_requests
    units = count * chunks if stream else count
    async with (
        ai.AsyncClient([settings]) as client,
        httpx.AsyncClient(headers=proto.headers, trust_env=False, transport=transport) as http,
    ):

        async def ours() -> tuple[str, int | None]:
            if stream:
                return await anyinfer_stream(client, proto)
            return await anyinfer_generate(client, proto)

        async def raw() -> tuple[str, int | None]:
            if stream:
                return await raw_stream(http, proto, base)
            return await raw_generate(http, proto, base)

        check(await ours(), chunks, "anyinfer")
        check(await raw(), chunks, "raw httpx")
        best = {"anyinfer": float("inf"), "raw": float("inf")}
        for _ in range(plan.replay_reps):
            for side, work in (("anyinfer", ours), ("raw", raw)):
                cpu = time.process_time()
                for _ in range(count):
                    await work()
                best[side] = min(best[side], (time.process_time() - cpu) / units * 1e6)
    what = f"per chunk ({chunks} chunks)" if stream else "per request"
    name = f"replayed, {what}, client CPU [{proto.name}]"
    return Row(name, "us", best["anyinfer"], best["raw"], None)


async def profile_streaming(
    server: Server, proto: Protocol, chunks: int, reps: int, limit: int
) -> None:
    """Print the cProfile top functions of the AnyInfer streaming path."""
    import cProfile
    import pstats

    base = proto.base_url(server.port, chunks)
    async with make_anyinfer(proto, base) as client:
        check(await anyinfer_stream(client, proto), chunks, "anyinfer")
        profiler = cProfile.Profile()
        profiler.enable()
        for _ in range(reps):
            await anyinfer_stream(client, proto)
        profiler.disable()
    print(f"===== {proto.name}: {reps} streams of {chunks} chunks")
    stats = pstats.Stats(profiler, stream=sys.stdout)
    stats.sort_stats("tottime").print_stats(limit)
    stats.sort_stats("cumulative").print_stats(limit)


# --- report --------------------------------------------------------------------------


def fmt(value: float, unit: str) -> str:
    return f"{value:,.1f} {unit}" if abs(value) < 100 else f"{value:,.0f} {unit}"


def print_table(rows: Sequence[Row]) -> None:
    headers = ("measurement", "anyinfer", "raw httpx", "ratio", "target", "")
    table = [
        (
            r.name,
            fmt(r.anyinfer, r.unit),
            fmt(r.raw, r.unit),
            f"{r.ratio:.2f}x",
            "-" if r.target is None else f"<= {r.target:.2f}x",
            r.verdict,
        )
        for r in rows
    ]
    widths = [max(len(h), *(len(t[i]) for t in table)) for i, h in enumerate(headers)]
    align = ("<", ">", ">", ">", ">", "<")

    def line(cells: Sequence[str]) -> str:
        return "  ".join(f"{c:{a}{w}}" for c, a, w in zip(cells, align, widths)).rstrip()

    print(line(headers))
    print(line(tuple("-" * w for w in widths)))
    for t in table:
        print(line(t))


def describe_env(server: Server, plan: Plan, quick: bool, protocols: Sequence[Protocol]) -> str:
    import httpx

    import anyinfer

    where = Path(anyinfer.__file__).resolve().parent
    load = os.getloadavg()[0]
    cpus = os.cpu_count() or 1
    warning = ""
    if load > 0.5 * cpus:
        warning = (
            f"\nWARNING: load average {load:.2f} on {cpus} cpus: other processes compete for "
            "the CPU, so wall times are noisy (the client-CPU rows suffer less)"
        )
    return (
        f"mode: {'quick' if quick else 'full'} | python {platform.python_version()} | "
        f"httpx {httpx.__version__} | anyinfer from {where} | cpus {cpus} | "
        f"framing {server.framing} | load average {load:.2f}\n"
        f"protocols: {', '.join(p.name for p in protocols)}\n"
        f"imports + first request x{plan.import_reps}; "
        f"stream {plan.stream_chunks} chunks x{plan.stream_reps}; "
        f"sequential {plan.seq_requests} requests x{plan.seq_reps}; "
        f"concurrency {plan.conc_streams}x{plan.conc_chunks} chunks x{plan.conc_reps} per side; "
        f"replayed x{plan.replay_reps}"
        f"{warning}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="AnyInfer vs raw httpx overhead benchmark")
    parser.add_argument("--quick", action="store_true", help="a short run (fewer repetitions)")
    parser.add_argument(
        "--framing",
        choices=("chunked", "length"),
        default="chunked",
        help="stream framing: one HTTP chunk per event (default), or one Content-Length body",
    )
    parser.add_argument("--json", type=Path, help="also write the results to this JSON file")
    parser.add_argument(
        "--only",
        choices=("imports", "stream", "sequential", "concurrency", "replay"),
        action="append",
        help="run only these measurements (repeatable)",
    )
    parser.add_argument(
        "--profile", action="store_true", help="cProfile the AnyInfer streaming path instead"
    )
    parser.add_argument(
        "--protocol",
        choices=tuple(PROTOCOLS),
        action="append",
        help="measure only these wire protocols (repeatable; default: all five)",
    )
    parser.add_argument("--worker", choices=("anyinfer", "raw"), help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--streams", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--chunks", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    protocols = [PROTOCOLS[name] for name in (args.protocol or PROTOCOLS)]

    if args.worker:
        result = asyncio.run(
            concurrency_worker(args.worker, protocols[0], args.port, args.streams, args.chunks)
        )
        print(json.dumps(result))
        return 0

    plan = QUICK if args.quick else FULL
    only = set(args.only or ("imports", "stream", "sequential", "concurrency", "replay"))
    server = Server(args.framing)
    try:
        if args.profile:
            for proto in protocols:
                asyncio.run(profile_streaming(server, proto, plan.stream_chunks, 5, 30))
            return 0
        header = describe_env(server, plan, args.quick, protocols)
        log(header)
        started = time.perf_counter()
        rows: list[Row] = []
        if "imports" in only:
            log("1/5 import time, import + first request (fresh interpreters)...")
            rows += bench_imports(plan, server, protocols)
        if "stream" in only:
            for proto in protocols:
                log(f"2/5 streaming [{proto.name}]...")
                rows += asyncio.run(bench_streaming(server, plan, proto))
        if "sequential" in only:
            for proto in protocols:
                log(f"3/5 sequential non-streaming requests [{proto.name}]...")
                rows += asyncio.run(bench_sequential(server, plan, proto))
        if "concurrency" in only:
            for proto in protocols:
                log(f"4/5 concurrent streams (fresh process per side) [{proto.name}]...")
                rows += bench_concurrency(server, plan, proto)
        if "replay" in only:
            for proto in protocols:
                log(f"5/5 replayed bytes, in-process [{proto.name}]...")
                rows += asyncio.run(bench_replay(server, plan, proto))
        log(f"done in {time.perf_counter() - started:.0f} s\n")
    finally:
        server.stop()
    print(header)
    print()
    print_table(rows)
    if args.json:
        doc = {
            "header": header,
            "rows": [asdict(r) | {"ratio": r.ratio, "verdict": r.verdict} for r in rows],
        }
        args.json.write_text(json.dumps(doc, indent=2) + "\n")
    failed = [r for r in rows if r.verdict == "FAIL"]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
