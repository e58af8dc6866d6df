"""Hardware detection: what this machine has to run a local model with."""

from __future__ import annotations

import functools
import json
import os
import platform
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import field, replace
from pathlib import Path
from typing import Literal

from .._values import value_class

__all__ = ["GPU", "HardwareProfile", "HardwareSource", "detect_hardware"]

HardwareSource = Literal["detected", "supplied", "unavailable"]
"""Where a profile came from: probed here, supplied by the application, or not
knowable (the engine runs on a host AnyInfer cannot probe)."""

_GIB = 1024**3


@value_class
class GPU:
    """One accelerator.

    Attributes:
        name: The device name.
        vram_bytes: Its memory, in bytes.
        vendor: `nvidia`, `amd`, `apple` or `other`.
    """

    name: str
    vram_bytes: int
    vendor: str = "other"


@value_class
class HardwareProfile:
    """The machine a local model would run on.

    Build one to answer for a remote host (`source` defaults to `"supplied"`)::

        ai.HardwareProfile.of(ram_gb=64, gpus=[("RTX 4090", 24)])

    Attributes:
        ram_bytes: System memory.
        cpu_cores: Physical CPU cores.
        cpu_flags: SIMD features that matter to inference engines (`avx2`, `avx512f`,
            `neon`, …).
        gpus: Accelerators with their memory.
        unified_memory: Whether GPU and CPU share one memory pool (Apple silicon): the
            GPU budget is then a share of `ram_bytes`.
        free_disk_bytes: Free space where models are stored, when known.
        source: `detected`, `supplied` or `unavailable`.
    """

    ram_bytes: int
    cpu_cores: int
    cpu_flags: tuple[str, ...] = ()
    gpus: tuple[GPU, ...] = ()
    unified_memory: bool = False
    free_disk_bytes: int | None = None
    source: HardwareSource = "supplied"
    notes: tuple[str, ...] = field(default=(), compare=False)

    @classmethod
    def of(
        cls,
        *,
        ram_gb: float,
        cpu_cores: int = 8,
        gpus: Sequence[tuple[str, float]] = (),
        unified_memory: bool = False,
        free_disk_gb: float | None = None,
        cpu_flags: Sequence[str] = (),
    ) -> HardwareProfile:
        """A supplied profile from sizes in GiB.

        Args:
            ram_gb: System memory in GiB.
            cpu_cores: Physical cores.
            gpus: `(name, vram_gb)` pairs.
            unified_memory: Apple-style shared memory.
            free_disk_gb: Free disk in GiB, when known.
            cpu_flags: CPU features.
        """
        return cls(
            ram_bytes=int(ram_gb * _GIB),
            cpu_cores=cpu_cores,
            cpu_flags=tuple(cpu_flags),
            gpus=tuple(GPU(n, int(v * _GIB), _vendor_of(n)) for n, v in gpus),
            unified_memory=unified_memory,
            free_disk_bytes=None if free_disk_gb is None else int(free_disk_gb * _GIB),
            source="supplied",
        )

    @property
    def vram_bytes(self) -> int:
        """Total discrete GPU memory (0 with unified memory or no GPU)."""
        return 0 if self.unified_memory else sum(g.vram_bytes for g in self.gpus)

    def describe(self) -> str:
        """One line: RAM, cores, GPUs."""
        gpus = ", ".join(f"{g.name} {g.vram_bytes / _GIB:.0f} GiB" for g in self.gpus) or "no GPU"
        shared = " (unified memory)" if self.unified_memory else ""
        return (
            f"{self.ram_bytes / _GIB:.1f} GiB RAM, {self.cpu_cores} cores, {gpus}{shared} "
            f"[{self.source}]"
        )


def _vendor_of(name: str) -> str:
    low = name.lower()
    if any(k in low for k in ("nvidia", "geforce", "rtx", "gtx", "tesla", "a100", "h100", "l4")):
        return "nvidia"
    if any(k in low for k in ("amd", "radeon", "instinct", "mi2", "mi3")):
        return "amd"
    if "apple" in low or low.startswith("m1") or low.startswith("m2") or low.startswith("m3"):
        return "apple"
    return "other"


def _run(cmd: Sequence[str], timeout: float = 5.0) -> str | None:
    exe = shutil.which(cmd[0])
    if exe is None:
        return None
    try:
        done = subprocess.run(
            [exe, *cmd[1:]], capture_output=True, text=True, timeout=timeout, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def _nvidia_gpus() -> list[GPU]:
    out = _run(["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader,nounits"])
    gpus: list[GPU] = []
    for line in (out or "").splitlines():
        name, _, mib = line.rpartition(",")
        try:
            gpus.append(GPU(name.strip(), int(float(mib.strip()) * 1024 * 1024), "nvidia"))
        except ValueError:
            continue
    return gpus


def _amd_gpus() -> list[GPU]:
    out = _run(["rocm-smi", "--showmeminfo", "vram", "--showproductname", "--json"])
    if not out:
        return []
    try:
        data = json.loads(out)
    except ValueError:
        return []
    gpus: list[GPU] = []
    for card, info in data.items() if isinstance(data, dict) else ():
        if not isinstance(info, dict):
            continue
        total = info.get("VRAM Total Memory (B)")
        name = info.get("Card series") or info.get("Card model") or card
        try:
            gpus.append(GPU(str(name), int(str(total)), "amd"))
        except (TypeError, ValueError):
            continue
    return gpus


def _cpu_flags() -> tuple[str, ...]:
    wanted = ("avx", "avx2", "avx512f", "avx512_bf16", "avx_vnni", "fma", "f16c", "amx_tile")
    if platform.machine().lower() in ("arm64", "aarch64"):
        return ("neon",)
    try:
        text = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return ()
    for line in text.splitlines():
        if line.startswith("flags"):
            flags = set(line.partition(":")[2].split())
            return tuple(f for f in wanted if f in flags)
    return ()


@functools.lru_cache(maxsize=8)
def _detect(disk_path: str | None) -> HardwareProfile:
    import psutil

    ram = int(psutil.virtual_memory().total)
    cores = psutil.cpu_count(logical=False) or os.cpu_count() or 1
    apple = platform.system() == "Darwin" and platform.machine() == "arm64"
    gpus: list[GPU] = []
    notes: list[str] = []
    if apple:
        gpus.append(GPU("Apple silicon GPU", ram, "apple"))
    else:
        gpus.extend(_nvidia_gpus())
        gpus.extend(_amd_gpus())
    free_disk = None
    if disk_path is not None:
        path = Path(disk_path)
        while not path.exists() and path != path.parent:
            path = path.parent
        try:
            free_disk = shutil.disk_usage(path).free
        except OSError:
            notes.append(f"free disk unknown for {disk_path}")
    return HardwareProfile(
        ram_bytes=ram,
        cpu_cores=int(cores),
        cpu_flags=_cpu_flags(),
        gpus=tuple(gpus),
        unified_memory=apple,
        free_disk_bytes=free_disk,
        source="detected",
        notes=tuple(notes),
    )


def detect_hardware(disk_path: Path | None = None, *, refresh: bool = False) -> HardwareProfile:
    """Probe this machine (cached per process).

    RAM and cores come from psutil; NVIDIA GPUs from `nvidia-smi`, AMD from `rocm-smi`
    when those tools are installed; Apple silicon counts as unified memory; free disk is
    measured where models are stored.

    Args:
        disk_path: Where models are stored, for the free-disk figure.
        refresh: Probe again instead of using the cached profile.
    """
    if refresh:
        _detect.cache_clear()
    return _detect(None if disk_path is None else str(disk_path))


def unavailable_profile() -> HardwareProfile:
    """The profile for an engine on a host AnyInfer cannot probe."""
    return replace(HardwareProfile(ram_bytes=0, cpu_cores=0), source="unavailable")
