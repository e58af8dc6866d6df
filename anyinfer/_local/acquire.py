"""Weight acquisition from the Hugging Face Hub, through huggingface_hub itself."""

from __future__ import annotations

import asyncio
import contextlib
import fnmatch
import os
import shutil
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from .._errors import ConfigError, LocalRuntimeError
from .._values import value_class
from .catalog import Fit, LocalModel, Variant, VariantPrefs, fit_model
from .hardware import HardwareProfile
from .store import ModelStore, ResolvedModel, StoredFile, StoreEntry, sha256_file

__all__ = [
    "AcquisitionProgress",
    "AcquisitionReport",
    "PlannedFile",
    "ProgressSink",
    "acquire",
    "launch_commands",
]

_DISK_MARGIN = 256 * 1024**2


@value_class
class AcquisitionProgress:
    """Aggregate progress of one acquisition.

    Threading contract: the sink is called on the event loop that runs the acquisition
    (for the sync `Client`, its background loop thread), never from download worker
    threads, at most about ten times a second plus once at the end. It must return
    quickly and must not call back into the client.

    Attributes:
        bytes_done: Bytes downloaded so far, across all files.
        bytes_total: Bytes to download in all.
        files_done: Files finished.
        files_total: Files in all.
        current_file: The file being downloaded, if any.
        rate_bps: Recent transfer rate, bytes per second.
        eta_s: Estimated seconds left, when the rate is known.
    """

    bytes_done: int
    bytes_total: int
    files_done: int
    files_total: int
    current_file: str | None
    rate_bps: float | None
    eta_s: float | None


ProgressSink = Callable[[AcquisitionProgress], None]
"""A callable receiving `AcquisitionProgress` updates."""


@value_class
class PlannedFile:
    """One file an acquisition fetches: name, exact size and the hub's SHA-256."""

    name: str
    size: int
    sha256: str | None


@value_class
class AcquisitionReport:
    """What an acquisition did (or, with `dry_run`, would do).

    Attributes:
        model_id: The catalog model.
        variant: The variant chosen, with exact sizes from the hub.
        fit: How the chosen variant fits the machine.
        files: The files, with exact sizes.
        total_bytes: Exact bytes of the variant, from the hub.
        downloaded_bytes: Bytes actually transferred (0 for a dry run or an adoption).
        dry_run: Whether nothing was written.
        entry: The registered store entry (`None` for a dry run).
        adopted: Whether the files were adopted from the Hugging Face cache instead of
            downloaded.
        duration_s: Wall time of the acquisition.
        revision: The source commit.
        already_installed: Whether the store already held this variant with these exact
            files, intact (a shallow check): nothing was fetched and `entry` is the
            existing entry. A dry run says so too (its `entry` stays `None`).
    """

    model_id: str
    variant: Variant
    fit: Fit | None
    files: tuple[PlannedFile, ...]
    total_bytes: int
    downloaded_bytes: int
    dry_run: bool
    entry: StoreEntry | None
    adopted: bool
    duration_s: float
    revision: str | None
    already_installed: bool = False


def _endpoint() -> str | None:
    return os.environ.get("HF_ENDPOINT") or None


def choose_variant(
    model: LocalModel,
    *,
    engine: str | None,
    variant_id: str | None,
    hardware: HardwareProfile,
    prefs: VariantPrefs | None,
) -> tuple[Variant, Fit | None]:
    """The variant to acquire: the one asked for, or the best that fits."""
    if variant_id is not None:
        variant = model.variant(variant_id)
        if engine is not None and variant.engine != engine:
            raise ConfigError(f"variant {variant_id!r} is for {variant.engine}, not {engine}")
        return variant, None
    if engine is not None and engine not in {v.engine for v in model.variants}:
        raise ConfigError(f"model {model.id!r} offers no {engine} variant")
    fit = fit_model(model, hardware, engine=engine, prefs=prefs)
    if fit.variant is None:
        raise ConfigError(
            f"no variant of {model.id!r} fits this machine ({hardware.describe()}); "
            "pass variant_id= to force one, or allow low-quality rungs with VariantPrefs"
        )
    return fit.variant, fit


def _plan_files(variant: Variant, token: str | None) -> tuple[list[PlannedFile], str | None]:
    from huggingface_hub import HfApi
    from huggingface_hub.errors import HfHubHTTPError

    api = HfApi(endpoint=_endpoint(), token=token)
    try:
        info = api.model_info(variant.repo, files_metadata=True)
    except HfHubHTTPError as exc:
        raise LocalRuntimeError(f"cannot list {variant.repo} on the hub: {exc}") from None
    except Exception as exc:
        # Unreachable: huggingface_hub 0.x raises requests' errors (OSError), 1.x and 2.x
        # raise httpx's or httpx2's ConnectError/TimeoutException, which are not; every
        # one of them means the listing failed.
        raise LocalRuntimeError(
            f"cannot reach the hub for {variant.repo}: {type(exc).__name__}: {exc}"
        ) from None
    files: list[PlannedFile] = []
    for sibling in info.siblings or ():
        name = sibling.rfilename
        if not any(fnmatch.fnmatch(name, pattern) for pattern in variant.patterns):
            continue
        lfs = sibling.lfs
        size = lfs.size if lfs is not None else sibling.size
        if size is None:
            raise LocalRuntimeError(f"the hub reported no size for {variant.repo}/{name}")
        files.append(PlannedFile(name, int(size), lfs.sha256 if lfs is not None else None))
    if not files:
        raise LocalRuntimeError(
            f"{variant.repo} has no files matching {', '.join(variant.patterns)}"
        )
    return sorted(files, key=lambda f: f.name), info.sha


class _Progress:
    """Aggregates per-file byte counts from download threads; read from the loop."""

    def __init__(self, total: int, files_total: int) -> None:
        self.lock = threading.Lock()
        self.total = total
        self.files_total = files_total
        self.done = 0
        self.files_done = 0
        self.current: str | None = None
        self.samples: list[tuple[float, int]] = [(time.monotonic(), 0)]

    def add(self, n: int) -> None:
        with self.lock:
            self.done += n

    def snapshot(self) -> AcquisitionProgress:
        now = time.monotonic()
        with self.lock:
            done = self.done
            self.samples.append((now, done))
            self.samples = [s for s in self.samples if now - s[0] <= 3.0] or [(now, done)]
            t0, b0 = self.samples[0]
            rate = (done - b0) / (now - t0) if now > t0 else None
            left = max(0, self.total - done)
            eta = left / rate if rate else None
            return AcquisitionProgress(
                min(done, self.total),
                self.total,
                self.files_done,
                self.files_total,
                self.current,
                rate,
                eta,
            )


def _tqdm_class(progress: _Progress) -> type[Any]:
    from tqdm.auto import tqdm

    class Counting(tqdm):  # type: ignore[misc]
        """Silent progress bar that feeds the aggregate counter."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs["disable"] = True
            super().__init__(*args, **kwargs)

        def update(self, n: float | None = 1) -> bool | None:
            if n:
                progress.add(int(n))
            return None

    return Counting


def _from_hf_cache(
    variant: Variant, files: Sequence[PlannedFile], revision: str | None
) -> list[Path] | None:
    from huggingface_hub import try_to_load_from_cache

    paths: list[Path] = []
    for f in files:
        found = try_to_load_from_cache(variant.repo, f.name, revision=revision)
        if not isinstance(found, str):
            return None
        path = Path(found)
        if not path.is_file() or path.stat().st_size != f.size:
            return None
        paths.append(path)
    return paths


def _stored(f: PlannedFile, path: Path) -> StoredFile:
    st = path.stat()
    return StoredFile(f.name, str(path), st.st_size, st.st_mtime_ns, f.sha256)


def _installed(
    store: ModelStore, model: LocalModel, variant: Variant, files: Sequence[PlannedFile]
) -> StoreEntry | None:
    """The store's entry for this variant when it holds exactly `files`, intact.

    A downloaded entry whose files fail the shallow check (missing, resized or modified
    since registration) has those files deleted, so that they are fetched again rather
    than trusted by size.
    """
    entry = store.find(model.id, variant_id=variant.id)
    if entry is None:
        return None
    planned = sorted((f.name, f.size, f.sha256) for f in files)
    if sorted((f.name, f.size, f.sha256) for f in entry.files) != planned:
        return None  # the hub's files changed since: fetch the new ones
    damaged = [f for f in entry.files if store.check(replace(entry, files=(f,)))]
    if not damaged:
        return entry
    if not entry.adopted:
        for f in damaged:
            Path(f.path).unlink(missing_ok=True)
    return None


async def acquire(
    store: ModelStore,
    model: LocalModel,
    *,
    engine: str | None,
    variant_id: str | None,
    hardware: HardwareProfile,
    progress: ProgressSink | None,
    prefs: VariantPrefs | None,
    dry_run: bool,
    token: str | None,
) -> AcquisitionReport:
    """Acquire one model's weights into `store` (see `AsyncClient.acquire_model`)."""
    started = time.monotonic()
    token = token or os.environ.get("HF_TOKEN") or None
    variant, fit = choose_variant(
        model, engine=engine, variant_id=variant_id, hardware=hardware, prefs=prefs
    )
    files, revision = await asyncio.to_thread(_plan_files, variant, token)
    total = sum(f.size for f in files)
    exact = replace(variant, size_bytes=total, size_estimated=False)

    def report(
        entry: StoreEntry | None, downloaded: int, adopted: bool, *, already: bool = False
    ) -> AcquisitionReport:
        return AcquisitionReport(
            model.id,
            exact,
            fit,
            tuple(files),
            total,
            downloaded,
            dry_run,
            entry,
            adopted,
            time.monotonic() - started,
            revision,
            already,
        )

    def register(stored: Sequence[StoredFile], downloaded: int, adopted: bool) -> AcquisitionReport:
        entry = store.new_entry(
            model_id=model.id,
            variant_id=variant.id,
            engine=variant.engine,
            repo=variant.repo,
            revision=revision,
            files=tuple(stored),
            adopted=adopted,
            context_length=model.context_length,
        )
        return report(store.register(entry), downloaded, adopted)

    existing = await asyncio.to_thread(_installed, store, model, variant, files)
    if existing is not None:
        if dry_run:
            return report(None, 0, False, already=True)
        return report(existing, 0, existing.adopted, already=True)
    if dry_run:
        return report(None, 0, False)

    cached = await asyncio.to_thread(_from_hf_cache, variant, files, revision)
    if cached is not None:
        return register([_stored(f, p) for f, p in zip(files, cached)], 0, True)

    dest = store.model_dir(model.id, variant.id)
    dest.mkdir(parents=True, exist_ok=True)
    missing = [f for f in files if not _complete(dest / f.name, f)]
    needed = sum(f.size for f in missing)
    free = shutil.disk_usage(dest).free
    if needed + _DISK_MARGIN > free:
        raise LocalRuntimeError(
            f"not enough disk for {model.id} ({variant.id}): needs {needed} bytes plus a "
            f"{_DISK_MARGIN}-byte margin, {free} free in {dest}"
        )
    tracker = _Progress(total, len(files))
    tracker.done = total - needed
    tracker.files_done = len(files) - len(missing)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()

    async def pump() -> None:
        while not stop.is_set():
            if progress is not None:
                progress(tracker.snapshot())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 0.1)

    pumper = loop.create_task(pump())
    stored: list[StoredFile] = []
    try:
        for f in files:
            path = dest / f.name
            if f in missing:
                tracker.current = f.name
                await asyncio.to_thread(_download, variant, f, dest, revision, token, tracker)
            await asyncio.to_thread(_verify, path, f)
            with tracker.lock:
                tracker.files_done = min(tracker.files_total, tracker.files_done + (f in missing))
            stored.append(_stored(f, path))
        tracker.current = None
    finally:
        stop.set()
        await pumper
    if progress is not None:
        progress(tracker.snapshot())
    return register(stored, needed, False)


def _complete(path: Path, f: PlannedFile) -> bool:
    try:
        return path.stat().st_size == f.size
    except OSError:
        return False


def _download(
    variant: Variant,
    f: PlannedFile,
    dest: Path,
    revision: str | None,
    token: str | None,
    tracker: _Progress,
) -> None:
    from huggingface_hub import hf_hub_download

    try:
        hf_hub_download(
            variant.repo,
            f.name,
            revision=revision,
            local_dir=dest,
            token=token,
            endpoint=_endpoint(),
            tqdm_class=_tqdm_class(tracker),
        )
    except Exception as exc:  # huggingface_hub raises many types; all mean "transfer failed"
        raise LocalRuntimeError(
            f"downloading {variant.repo}/{f.name} failed: {type(exc).__name__}: {exc}"
        ) from None


def _verify(path: Path, f: PlannedFile) -> None:
    try:
        size = path.stat().st_size
    except OSError:
        raise LocalRuntimeError(f"{f.name} is missing after download") from None
    if size != f.size:
        path.unlink(missing_ok=True)
        raise LocalRuntimeError(f"{f.name}: size {size} != {f.size} reported by the hub")
    if f.sha256 is not None and sha256_file(path) != f.sha256:
        path.unlink(missing_ok=True)
        raise LocalRuntimeError(f"{f.name}: sha256 digest mismatch; the file was deleted")


def launch_commands(
    entry: StoreEntry, fit: Fit | None, context: int | None
) -> dict[str, tuple[str, ...]]:
    """Advisory launch command lines for the entry's engine.

    Args:
        entry: The store entry.
        fit: How it fits this machine, when known (for GPU layers and memory share).
        context: The context to launch with.
    """
    ctx = str(context or entry.context_length or 4096)
    path = str(entry.primary_path)
    if entry.engine == "llama.cpp":
        layers = fit.gpu_layers if fit is not None and fit.gpu_layers is not None else 0
        return {
            "llama.cpp": (
                "llama-server",
                "-m",
                path,
                "-c",
                ctx,
                "-ngl",
                str(layers),
                "--host",
                "127.0.0.1",
                "--port",
                "8080",
            )
        }
    # vLLM preallocates this share of GPU memory for weights plus KV cache.
    return {
        "vllm": (
            "vllm",
            "serve",
            path,
            "--max-model-len",
            ctx,
            "--gpu-memory-utilization",
            "0.90",
            "--host",
            "127.0.0.1",
            "--port",
            "8000",
        )
    }


def resolve_entry(
    store: ModelStore, entry: StoreEntry, fit: Fit | None, *, verify: bool
) -> ResolvedModel:
    """A `ResolvedModel` for an entry: path, check result and launch commands."""
    problems = store.check(entry, deep=verify)
    context = fit.context if fit is not None else entry.context_length
    return ResolvedModel(
        entry, entry.primary_path, not problems, problems, launch_commands(entry, fit, context)
    )
