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
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from _server import expected_text

HERE = Path(__file__).resolve().parent
SERVER = HERE / "_server.py"
TARGET = "openai:bench-model"
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


FULL = Plan(
    import_reps=40,
    stream_chunks=2000,
    stream_reps=21,
    seq_requests=200,
    seq_reps=11,
    seq_chunks=100,
    conc_streams=200,
    conc_chunks=100,
    conc_reps=5,
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
)


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

    def base_url(self, chunks: int) -> str:
        return f"http://127.0.0.1:{self.port}/n/{chunks}/v1"

    def stop(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


# --- the two sides -------------------------------------------------------------------


def body(stream: bool) -> dict[str, Any]:
    """The JSON body AnyInfer's OpenAI adapter sends; raw httpx sends the same."""
    doc: dict[str, Any] = {
        "model": "bench-model",
        "messages": [{"role": "user", "content": PROMPT}],
    }
    if stream:
        doc["stream"] = True
        doc["stream_options"] = {"include_usage": True}
    return doc


def make_anyinfer(base_url: str) -> Any:
    import anyinfer as ai

    settings = ai.ProviderSettings("openai", api_key=API_KEY, base_url=base_url)
    return ai.AsyncClient([settings])


def make_raw() -> Any:
    import httpx

    # The same timeout and proxy settings AnyInfer's adapter uses, so only the library
    # layer differs.
    return httpx.AsyncClient(
        timeout=httpx.Timeout(120.0, connect=15.0),
        headers={"authorization": f"Bearer {API_KEY}"},
        trust_env=False,
    )


async def anyinfer_stream(client: Any) -> tuple[str, int | None]:
    """Iterate every event, then read the result."""
    async with client.stream(PROMPT, target=TARGET) as st:
        async for _ in st:
            pass
    result = st.result
    return result.text, result.usage.output_tokens


async def raw_stream(http: Any, url: str, payload: dict[str, Any]) -> tuple[str, int | None]:
    """What a raw httpx user writes: read lines, parse each data line, join content."""
    loads = json.loads
    parts: list[str] = []
    usage: dict[str, Any] | None = None
    async with http.stream("POST", url, json=payload) as response:
        response.raise_for_status()
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


async def anyinfer_generate(client: Any) -> tuple[str, int | None]:
    result = await client.generate(PROMPT, target=TARGET)
    return result.text, result.usage.output_tokens


async def raw_generate(http: Any, url: str, payload: dict[str, Any]) -> tuple[str, int | None]:
    response = await http.post(url, json=payload)
    response.raise_for_status()
    doc = response.json()
    return doc["choices"][0]["message"]["content"], doc["usage"]["completion_tokens"]


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


def bench_imports(plan: Plan) -> list[Row]:
    commands = {
        "pass": "pass",
        "anyinfer": "import anyinfer",
        "httpx": "import httpx",
        # What the first request imports on top (AnyInfer loads httpx lazily).
        "anyinfer_http": "import anyinfer, anyinfer._providers.openai_chat, anyinfer._stream.core",
    }
    for code in commands.values():  # warm the page cache and the bytecode
        time_command(code)
        time_command(code)
    samples: dict[str, list[float]] = {k: [] for k in commands}
    for _ in range(plan.import_reps):
        for key, code in commands.items():  # interleaved, so drift hits all alike
            samples[key].append(time_command(code))
    med = {k: statistics.median(v) * 1000.0 for k, v in samples.items()}
    log(f"  interpreter start (python -c pass): {med['pass']:.1f} ms median")
    return [
        Row(
            "import (net of interpreter start)",
            "ms",
            med["anyinfer"] - med["pass"],
            med["httpx"] - med["pass"],
            1.5,
        ),
        Row(
            "import incl. HTTP stack (first use)",
            "ms",
            med["anyinfer_http"] - med["pass"],
            med["httpx"] - med["pass"],
            None,
        ),
    ]


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


async def bench_streaming(server: Server, plan: Plan) -> list[Row]:
    n = plan.stream_chunks
    base = server.base_url(n)
    url = base + "/chat/completions"
    payload = body(stream=True)
    async with make_anyinfer(base) as client, make_raw() as http:

        async def ours() -> Sample:
            sample, got = await timed(lambda: anyinfer_stream(client), n)
            check(got, n, "anyinfer")
            return sample

        async def raw() -> Sample:
            sample, got = await timed(lambda: raw_stream(http, url, payload), n)
            check(got, n, "raw httpx")
            return sample

        xs, ys = await alternate(plan.stream_reps, ours, raw)
    return rows_from(f"stream, per chunk ({n} chunks)", xs, ys, 1.5)


async def bench_sequential(server: Server, plan: Plan) -> list[Row]:
    n = plan.seq_chunks
    count = plan.seq_requests
    base = server.base_url(n)
    url = base + "/chat/completions"
    payload = body(stream=False)
    async with make_anyinfer(base) as client, make_raw() as http:

        async def ours_loop() -> tuple[str, int | None]:
            for _ in range(count):
                got = await anyinfer_generate(client)
            return got

        async def raw_loop() -> tuple[str, int | None]:
            for _ in range(count):
                got = await raw_generate(http, url, payload)
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
    return rows_from(f"non-streaming, per request ({count} sequential)", xs, ys, 1.3)


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


async def concurrency_worker(side: str, port: int, streams: int, chunks: int) -> dict[str, float]:
    """Run `streams` concurrent streams on one side; report wall time and peak RSS."""
    # Import everything either side needs before the baseline, so the RSS growth is the
    # concurrency's own (AnyInfer loads httpx and its adapter lazily, on first use).
    import httpx  # noqa: F401

    if side == "anyinfer":
        pass

    base = f"http://127.0.0.1:{port}/n/{chunks}/v1"
    url = base + "/chat/completions"
    payload = body(stream=True)
    client = make_anyinfer(base) if side == "anyinfer" else make_raw()
    async with client:

        async def one() -> tuple[str, int | None]:
            if side == "anyinfer":
                return await anyinfer_stream(client)
            return await raw_stream(client, url, payload)

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


def run_worker(side: str, server: Server, plan: Plan) -> dict[str, float]:
    proc = subprocess.run(
        [
            sys.executable,
            str(Path(__file__).resolve()),
            "--worker",
            side,
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


def bench_concurrency(server: Server, plan: Plan) -> list[Row]:
    runs: dict[str, list[dict[str, float]]] = {"anyinfer": [], "raw": []}
    for i in range(plan.conc_reps):
        order = ("anyinfer", "raw") if i % 2 == 0 else ("raw", "anyinfer")
        for side in order:
            runs[side].append(run_worker(side, server, plan))

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

    label = f"{plan.conc_streams} concurrent streams x {plan.conc_chunks} chunks"
    return [
        Row("RSS after imports + one stream", "MiB", med("anyinfer", base), med("raw", base), None),
        Row(f"{label}: wall", "ms", med("anyinfer", wall), med("raw", wall), 1.5),
        Row("  same, client CPU time", "ms", med("anyinfer", cpu), med("raw", cpu), None),
        Row(f"{label}: peak RSS growth", "MiB", med("anyinfer", delta), med("raw", delta), 1.3),
    ]


# --- profiling -----------------------------------------------------------------------


async def profile_streaming(server: Server, chunks: int, reps: int, limit: int) -> None:
    """Print the cProfile top functions of the AnyInfer streaming path."""
    import cProfile
    import pstats

    base = server.base_url(chunks)
    async with make_anyinfer(base) as client:
        check(await anyinfer_stream(client), chunks, "anyinfer")
        profiler = cProfile.Profile()
        profiler.enable()
        for _ in range(reps):
            await anyinfer_stream(client)
        profiler.disable()
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
            "-" if r.target is None else f"<= {r.target:.1f}x",
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


def describe_env(server: Server, plan: Plan, quick: bool) -> str:
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
        f"imports x{plan.import_reps}; stream {plan.stream_chunks} chunks x{plan.stream_reps}; "
        f"sequential {plan.seq_requests} requests x{plan.seq_reps}; "
        f"concurrency {plan.conc_streams}x{plan.conc_chunks} chunks x{plan.conc_reps} per side"
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
        choices=("imports", "stream", "sequential", "concurrency"),
        action="append",
        help="run only these measurements (repeatable)",
    )
    parser.add_argument(
        "--profile", action="store_true", help="cProfile the AnyInfer streaming path instead"
    )
    parser.add_argument("--worker", choices=("anyinfer", "raw"), help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--streams", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--chunks", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.worker:
        result = asyncio.run(concurrency_worker(args.worker, args.port, args.streams, args.chunks))
        print(json.dumps(result))
        return 0

    plan = QUICK if args.quick else FULL
    only = set(args.only or ("imports", "stream", "sequential", "concurrency"))
    server = Server(args.framing)
    try:
        if args.profile:
            asyncio.run(profile_streaming(server, plan.stream_chunks, 5, 30))
            return 0
        header = describe_env(server, plan, args.quick)
        log(header)
        started = time.perf_counter()
        rows: list[Row] = []
        if "imports" in only:
            log("1/4 import time (fresh interpreters)...")
            rows += bench_imports(plan)
        if "stream" in only:
            log("2/4 streaming...")
            rows += asyncio.run(bench_streaming(server, plan))
        if "sequential" in only:
            log("3/4 sequential non-streaming requests...")
            rows += asyncio.run(bench_sequential(server, plan))
        if "concurrency" in only:
            log("4/4 concurrent streams (fresh process per side)...")
            rows += bench_concurrency(server, plan)
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
