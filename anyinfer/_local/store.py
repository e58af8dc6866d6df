"""The model store: acquired weights on disk, and an index that survives crashes."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import asdict, field, replace
from pathlib import Path
from typing import Any

from .._errors import LocalRuntimeError
from .._values import value_class

__all__ = [
    "MODEL_DIR_ENV",
    "ModelStore",
    "RemovalReport",
    "ResolvedModel",
    "StoreEntry",
    "StoredFile",
    "default_model_dir",
    "sha256_file",
]

MODEL_DIR_ENV = "ANYINFER_MODEL_DIR"
"""Environment variable overriding the default model directory."""

_INDEX = "index.json"
_SCHEMA = 1


def default_model_dir() -> Path:
    """`$ANYINFER_MODEL_DIR`, else the per-OS user data directory's `models` folder."""
    override = os.environ.get(MODEL_DIR_ENV)
    if override:
        return Path(override).expanduser()
    import platformdirs

    return Path(platformdirs.user_data_dir("anyinfer", appauthor=False)) / "models"


def sha256_file(path: Path, chunk: int = 4 * 1024 * 1024) -> str:
    """The SHA-256 hex digest of a file, read in chunks."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(chunk):
            digest.update(block)
    return digest.hexdigest()


@value_class
class StoredFile:
    """One file of a stored model.

    Attributes:
        name: The file's name in its repository.
        path: Where it is on disk (absolute).
        size: Size in bytes when registered.
        mtime_ns: Modification time when registered (for the shallow check).
        sha256: Its SHA-256, when the source reported one (LFS files).
    """

    name: str
    path: str
    size: int
    mtime_ns: int
    sha256: str | None = None


@value_class
class StoreEntry:
    """A registered model in the store.

    Attributes:
        entry_id: Unique id, used by `remove_model`.
        model_id: Catalog model id.
        variant_id: Catalog variant id (`"llama.cpp:Q4_K_M"`).
        engine: `llama.cpp` or `vllm`.
        repo: Source repository.
        revision: Source commit.
        files: The files, with sizes and digests.
        adopted: Whether the files belong to someone else (the Hugging Face cache): removal
            only unregisters them.
        created_at: When it was registered (wall clock, seconds).
        context_length: The model's trained context window.
    """

    entry_id: str
    model_id: str
    variant_id: str
    engine: str
    repo: str
    revision: str | None
    files: tuple[StoredFile, ...]
    adopted: bool = False
    created_at: float = 0.0
    context_length: int | None = None

    @property
    def size_bytes(self) -> int:
        """Total size of the files."""
        return sum(f.size for f in self.files)

    @property
    def primary_path(self) -> Path:
        """What an engine loads: the (first) GGUF file, or the model directory."""
        paths = [Path(f.path) for f in self.files]
        ggufs = sorted(p for p in paths if p.suffix == ".gguf")
        if ggufs:
            return ggufs[0]
        return Path(os.path.commonpath([str(p.parent) for p in paths])) if paths else Path()


@value_class
class ResolvedModel:
    """An acquired model found on disk, with advisory launch commands.

    Attributes:
        entry: The store entry.
        path: What to load: the GGUF file (llama.cpp) or the model directory (vLLM).
        verified: Whether the check (shallow or full) passed.
        problems: What the check found wrong.
        launch: Advisory command lines per engine, e.g. `["llama-server", "-m", …]`.
    """

    entry: StoreEntry
    path: Path
    verified: bool
    problems: tuple[str, ...] = ()
    launch: dict[str, tuple[str, ...]] = field(default_factory=dict)


@value_class
class RemovalReport:
    """What `remove_model` did.

    Attributes:
        entry_id: The removed entry.
        deleted_files: Files deleted from disk.
        freed_bytes: Bytes freed.
        unregistered_only: True for adopted entries: their files were left alone.
    """

    entry_id: str
    deleted_files: tuple[str, ...]
    freed_bytes: int
    unregistered_only: bool


class ModelStore:
    """Acquired models under one directory, indexed in `index.json`.

    Index writes are atomic (a temporary file in the same directory, flushed and fsynced,
    then renamed over the index) and serialized across processes with a file lock, so a
    crash mid-write leaves either the old index or the new one — never a torn file.

    Args:
        root: The store directory (created on first write).
    """

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def __repr__(self) -> str:
        return f"ModelStore({str(self.root)!r})"

    @property
    def index_path(self) -> Path:
        """The index file."""
        return self.root / _INDEX

    def model_dir(self, model_id: str, variant_id: str) -> Path:
        """Where a variant's files are downloaded."""
        safe = variant_id.replace(":", "__").replace("/", "_")
        return self.root / "models" / model_id / safe

    def _lock(self) -> Any:
        from filelock import FileLock

        self.root.mkdir(parents=True, exist_ok=True)
        return FileLock(str(self.root / ".index.lock"), timeout=30)

    def _read(self) -> list[StoreEntry]:
        try:
            data = json.loads(self.index_path.read_text("utf-8"))
        except FileNotFoundError:
            return []
        except (OSError, ValueError) as exc:
            raise LocalRuntimeError(
                f"the model store index {self.index_path} is unreadable: {exc}", phase="cleanup"
            ) from None
        entries = []
        for raw in data.get("entries", []):
            files = tuple(StoredFile(**f) for f in raw.pop("files", []))
            entries.append(StoreEntry(files=files, **raw))
        return entries

    def _write(self, entries: Sequence[StoreEntry]) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        payload = json.dumps(
            {"schema": _SCHEMA, "entries": [asdict(e) for e in entries]}, indent=1
        ).encode()
        fd, tmp = tempfile.mkstemp(dir=self.root, prefix=".index.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(payload)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.index_path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def entries(self) -> list[StoreEntry]:
        """Every registered entry."""
        return self._read()

    def register(self, entry: StoreEntry) -> StoreEntry:
        """Add an entry: one per model and variant.

        An entry already registered for the same model and variant (downloaded or
        adopted) is replaced, and the new one keeps its id, so a second acquisition of
        the same variant never adds an entry or invalidates the id a user was shown.

        Returns:
            The entry as registered (with the replaced entry's id, if any).
        """
        with self._lock():
            kept: list[StoreEntry] = []
            for e in self._read():
                if e.model_id == entry.model_id and e.variant_id == entry.variant_id:
                    entry = replace(entry, entry_id=e.entry_id)
                else:
                    kept.append(e)
            self._write([*kept, entry])
        return entry

    @staticmethod
    def new_entry(**kwargs: Any) -> StoreEntry:
        """A `StoreEntry` with a fresh id and timestamp."""
        return StoreEntry(entry_id=uuid.uuid4().hex[:12], created_at=time.time(), **kwargs)

    def find(
        self, model_id: str, *, variant_id: str | None = None, engine: str | None = None
    ) -> StoreEntry | None:
        """The newest entry matching a model (and variant or engine)."""
        matches = [
            e
            for e in self._read()
            if e.model_id == model_id
            and (variant_id is None or e.variant_id == variant_id)
            and (engine is None or e.engine == engine)
        ]
        return max(matches, key=lambda e: e.created_at) if matches else None

    def check(self, entry: StoreEntry, *, deep: bool = False) -> tuple[str, ...]:
        """Problems with an entry's files: missing, resized, touched, or (deep) re-hashed."""
        problems: list[str] = []
        for f in entry.files:
            path = Path(f.path)
            try:
                st = path.stat()
            except OSError:
                problems.append(f"{f.name}: missing")
                continue
            if st.st_size != f.size:
                problems.append(f"{f.name}: size {st.st_size} != {f.size}")
            elif deep and f.sha256 is not None:
                if sha256_file(path) != f.sha256:
                    problems.append(f"{f.name}: sha256 mismatch")
            elif not deep and st.st_mtime_ns != f.mtime_ns:
                problems.append(f"{f.name}: modified since registration (verify=True to re-hash)")
        return tuple(problems)

    def remove(self, entry_id: str) -> RemovalReport:
        """Delete an entry's files (unless adopted) and unregister it.

        Raises:
            LocalRuntimeError: If no entry has that id.
        """
        with self._lock():
            entries = self._read()
            entry = next((e for e in entries if e.entry_id == entry_id), None)
            if entry is None:
                raise LocalRuntimeError(
                    f"no installed model with entry id {entry_id!r}", phase="cleanup"
                )
            deleted: list[str] = []
            freed = 0
            if not entry.adopted:
                for f in entry.files:
                    path = Path(f.path)
                    try:
                        freed += path.stat().st_size
                        path.unlink()
                        deleted.append(str(path))
                    except FileNotFoundError:
                        continue
                folder = self.model_dir(entry.model_id, entry.variant_id)
                if folder.is_dir() and folder.is_relative_to(self.root):
                    shutil.rmtree(folder, ignore_errors=True)
            self._write([e for e in entries if e.entry_id != entry_id])
        return RemovalReport(entry_id, tuple(deleted), freed, entry.adopted)
