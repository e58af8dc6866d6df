"""Local models: catalog fit, acquisition through huggingface_hub against a fake hub, store."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

import anyinfer as ai
from anyinfer._local.catalog import LocalCatalog
from anyinfer._local.hardware import HardwareProfile, detect_hardware
from tests.fakehub import FakeHub, HubFile

REPO = "bartowski/SmolLM2-135M-Instruct-GGUF"
NO_GPU = HardwareProfile.of(ram_gb=24, cpu_cores=2)
BIG_GPU = HardwareProfile.of(ram_gb=64, gpus=[("NVIDIA RTX 4090", 24)])


def gguf(tag: str, size: int) -> HubFile:
    return HubFile(data=(b"GGUF" + tag.encode() * (size // max(1, len(tag))))[:size])


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[FakeHub]:
    repos = {
        REPO: {
            "SmolLM2-135M-Instruct-Q4_K_M.gguf": gguf("q4", 300_000),
            "SmolLM2-135M-Instruct-Q8_0.gguf": gguf("q8", 500_000),
            "SmolLM2-135M-Instruct-f16.gguf": gguf("f16", 900_000),
            "SmolLM2-135M-Instruct-F16.gguf": gguf("F16", 900_000),
            "README.md": HubFile(b"# readme", lfs=False),
        }
    }
    with FakeHub(repos) as fake:
        monkeypatch.setenv("HF_ENDPOINT", fake.endpoint)
        monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
        monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
        monkeypatch.delenv("HF_TOKEN", raising=False)
        yield fake


@pytest.fixture
def client(tmp_path: Path) -> Iterator[ai.Client]:
    with ai.Client(model_dir=tmp_path / "store") as c:
        yield c


def test_catalog_on_this_machine_is_cpu_only_and_sensible() -> None:
    view = LocalCatalog.load_default().view(detect_hardware())
    verdicts = {f.model.id: f.verdict for f in view}
    if not detect_hardware().gpus:
        assert set(verdicts.values()) <= {"cpu_only", "too_large"}
    assert verdicts["smollm2-135m"] != "too_large"
    assert verdicts["llama3.3-70b"] == "too_large"  # 70B never fits 24 GiB at a usable rung
    assert "smollm2-135m" in str(view)


def test_a_24gb_gpu_fits_the_same_models_on_gpu_at_higher_rungs() -> None:
    catalog = LocalCatalog.load_default()
    cpu = {f.model.id: f for f in catalog.view(NO_GPU)}
    gpu = {f.model.id: f for f in catalog.view(BIG_GPU)}
    assert gpu["qwen3-8b"].verdict == "gpu"
    assert cpu["qwen3-8b"].verdict == "cpu_only"
    for model_id in ("qwen3-8b", "mistral-7b", "llama3.2-3b"):
        assert gpu[model_id].variant is not None and cpu[model_id].variant is not None
        assert gpu[model_id].variant.bits_per_weight >= cpu[model_id].variant.bits_per_weight


def test_postures_and_low_quality_opt_in() -> None:
    catalog = LocalCatalog.load_default()
    model = catalog.get("llama3.3-70b")
    from anyinfer._local.catalog import VariantPrefs, fit_model

    hw = HardwareProfile.of(ram_gb=40, gpus=[("RTX 3090", 24)])
    strict = fit_model(model, hw, posture="conservative")
    assert strict.verdict == "too_large" and strict.variant is None
    allowed = fit_model(model, hw, posture="aggressive", prefs=VariantPrefs(allow_low_quality=True))
    assert allowed.variant is not None and allowed.variant.low_quality


def test_unknown_best_at_and_model_are_config_errors(client: ai.Client) -> None:
    with pytest.raises(ai.ConfigError, match="best_at"):
        client.local_catalog(best_at="juggling")
    with pytest.raises(ai.ConfigError, match="did you mean"):
        client.acquire_model("qwen3-8", dry_run=True)
    view = client.local_catalog(best_at="coding", hardware=BIG_GPU)
    assert all("coding" in f.model.best_at for f in view)
    assert view.hardware_source == "supplied"


def test_remote_engine_is_unavailable_until_specs_are_supplied() -> None:
    remote = ai.ProviderSettings("ollama", alias="gpu-box", base_url="http://10.1.2.3:11434")
    with ai.Client([remote]) as c:
        view = c.local_catalog("gpu-box")
        assert view.hardware_source == "unavailable"
        assert {f.verdict for f in view} == {"unknown"}
        answered = c.local_catalog("gpu-box", hardware=BIG_GPU)
        assert answered.hardware_source == "supplied"
        with pytest.raises(ai.ConfigError, match="not a local engine"):
            c.local_catalog("openai")


def test_dry_run_reports_exact_bytes_and_writes_nothing(hub: FakeHub, client: ai.Client) -> None:
    report = client.acquire_model("smollm2-135m", variant_id="llama.cpp:Q8_0", dry_run=True)
    assert report.dry_run and report.entry is None
    assert report.total_bytes == 500_000 and not report.variant.size_estimated
    assert [f.name for f in report.files] == ["SmolLM2-135M-Instruct-Q8_0.gguf"]
    assert not client.model_store.root.exists() or not any(client.model_store.root.rglob("*.gguf"))
    assert all(method != "GET" or "/resolve/" not in path for method, path, _ in hub.requests)


def test_acquire_verifies_registers_locates_and_removes(hub: FakeHub, client: ai.Client) -> None:
    seen: list[ai.AcquisitionProgress] = []
    report = client.acquire_model(
        "smollm2-135m", hardware=NO_GPU, progress=seen.append, engine="llama.cpp"
    )
    assert report.entry is not None and not report.adopted
    assert report.variant.id == "llama.cpp:F16"  # a tiny model: full precision fits
    assert report.downloaded_bytes == report.total_bytes == 900_000
    assert seen and seen[-1].bytes_done == seen[-1].bytes_total == 900_000
    assert seen[-1].files_done == 1
    assert [e.entry_id for e in client.installed_models()] == [report.entry.entry_id]

    located = client.locate_model("smollm2-135m", verify=True)
    assert located is not None and located.verified
    assert located.path.name == "SmolLM2-135M-Instruct-F16.gguf" and located.path.is_file()
    argv = located.launch["llama.cpp"]
    assert argv[:3] == ("llama-server", "-m", str(located.path)) and "-c" in argv

    removal = client.remove_model(report.entry.entry_id)
    assert removal.freed_bytes == 900_000 and not removal.unregistered_only
    assert not located.path.exists()
    assert client.installed_models() == []
    assert client.locate_model("smollm2-135m") is None


def test_interrupted_transfer_resumes_with_range(hub: FakeHub, client: ai.Client) -> None:
    # huggingface_hub reads in 10 MiB chunks and resumes from the last whole chunk, so the
    # file must outgrow one chunk for the resume to show as a Range request.
    big = gguf("q4", 12_000_000)
    big.cut_after = 11_000_000
    hub.repos[REPO]["SmolLM2-135M-Instruct-Q4_K_M.gguf"] = big
    report = client.acquire_model("smollm2-135m", variant_id="llama.cpp:Q4_K_M")
    assert report.entry is not None and report.total_bytes == 12_000_000
    ranges = [r for m, p, r in hub.requests if m == "GET" and p.endswith("Q4_K_M.gguf") and r]
    assert ranges, hub.requests
    assert int(ranges[0].removeprefix("bytes=").rstrip("-")) > 0
    assert client.locate_model("smollm2-135m", verify=True).verified  # type: ignore[union-attr]


def test_digest_mismatch_registers_nothing(hub: FakeHub, client: ai.Client) -> None:
    hub.repos[REPO]["SmolLM2-135M-Instruct-Q8_0.gguf"].corrupt = True
    with pytest.raises(ai.LocalRuntimeError, match="sha256"):
        client.acquire_model("smollm2-135m", variant_id="llama.cpp:Q8_0")
    assert client.installed_models() == []
    assert not any(client.model_store.root.rglob("*Q8_0.gguf"))


def test_full_disk_is_refused_before_downloading(hub: FakeHub, client: ai.Client) -> None:
    hub.repos[REPO]["SmolLM2-135M-Instruct-Q8_0.gguf"].claimed_size = 2**60
    with pytest.raises(ai.LocalRuntimeError, match="not enough disk"):
        client.acquire_model("smollm2-135m", variant_id="llama.cpp:Q8_0")
    assert not any(m == "GET" and "/resolve/" in p for m, p, _ in hub.requests)
    assert client.installed_models() == []


def test_transfer_failure_is_a_local_runtime_error(hub: FakeHub, client: ai.Client) -> None:
    del hub.repos[REPO]["SmolLM2-135M-Instruct-Q8_0.gguf"]
    hub.repos[REPO]["SmolLM2-135M-Instruct-Q8_0.gguf.missing"] = gguf("x", 10)
    with pytest.raises((ai.LocalRuntimeError, ai.ConfigError)):
        client.acquire_model("smollm2-135m", variant_id="llama.cpp:Q8_0")
    assert client.installed_models() == []


def test_adoption_from_the_hf_cache_is_never_deleted(hub: FakeHub, client: ai.Client) -> None:
    from huggingface_hub import hf_hub_download

    cached = Path(hf_hub_download(REPO, "SmolLM2-135M-Instruct-Q4_K_M.gguf", endpoint=hub.endpoint))
    gets_before = sum(1 for m, p, _ in hub.requests if m == "GET" and "/resolve/" in p)
    report = client.acquire_model("smollm2-135m", variant_id="llama.cpp:Q4_K_M")
    assert report.adopted and report.downloaded_bytes == 0
    assert sum(1 for m, p, _ in hub.requests if m == "GET" and "/resolve/" in p) == gets_before
    assert report.entry is not None
    removal = client.remove_model(report.entry.entry_id)
    assert removal.unregistered_only and removal.deleted_files == ()
    assert cached.exists()


def test_index_writes_are_atomic_and_shallow_check_notices_changes(
    hub: FakeHub, client: ai.Client
) -> None:
    report = client.acquire_model("smollm2-135m", variant_id="llama.cpp:Q4_K_M")
    store = client.model_store
    data = json.loads(store.index_path.read_text())
    assert data["entries"][0]["entry_id"] == report.entry.entry_id  # type: ignore[union-attr]
    assert not list(store.root.glob(".index.*.tmp"))
    path = client.locate_model("smollm2-135m").path  # type: ignore[union-attr]
    with path.open("r+b") as f:
        f.write(b"XXXX")
    os.utime(path, ns=(1, 1))
    shallow = client.locate_model("smollm2-135m")
    assert shallow is not None and not shallow.verified
    deep = client.locate_model("smollm2-135m", verify=True)
    assert deep is not None and any("sha256" in p for p in deep.problems)


def test_model_dir_env_override(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("ANYINFER_MODEL_DIR", str(tmp_path / "elsewhere"))
    with ai.Client() as c:
        assert c.model_store.root == tmp_path / "elsewhere"


def test_a_second_acquisition_keeps_the_entry_and_fetches_nothing(
    hub: FakeHub, client: ai.Client
) -> None:
    first = client.acquire_model("smollm2-135m", variant_id="llama.cpp:Q8_0")
    assert first.entry is not None and not first.already_installed
    downloads = [p for m, p, _ in hub.requests if m == "GET" and "/resolve/" in p]
    seen: list[ai.AcquisitionProgress] = []
    again = client.acquire_model("smollm2-135m", variant_id="llama.cpp:Q8_0", progress=seen.append)
    assert again.already_installed and again.downloaded_bytes == 0 and seen == []
    assert again.entry == first.entry  # the same entry, id and registration time
    assert [p for m, p, _ in hub.requests if m == "GET" and "/resolve/" in p] == downloads
    dry = client.acquire_model("smollm2-135m", variant_id="llama.cpp:Q8_0", dry_run=True)
    assert dry.already_installed and dry.entry is None
    assert [e.entry_id for e in client.installed_models()] == [first.entry.entry_id]


def test_damaged_files_are_fetched_again_under_the_same_entry(
    hub: FakeHub, client: ai.Client
) -> None:
    first = client.acquire_model("smollm2-135m", variant_id="llama.cpp:Q8_0")
    assert first.entry is not None
    path = Path(first.entry.files[0].path)
    path.unlink()  # a file went missing
    repaired = client.acquire_model("smollm2-135m", variant_id="llama.cpp:Q8_0")
    assert not repaired.already_installed and repaired.downloaded_bytes == 500_000
    with path.open("r+b") as f:  # same size, other bytes: only the shallow check sees it
        f.write(b"XXXX")
    os.utime(path, ns=(1, 1))
    again = client.acquire_model("smollm2-135m", variant_id="llama.cpp:Q8_0")
    assert not again.already_installed and again.downloaded_bytes == 500_000
    assert [e.entry_id for e in client.installed_models()] == [first.entry.entry_id]
    assert client.locate_model("smollm2-135m", verify=True).verified  # type: ignore[union-attr]


def test_the_store_keeps_one_entry_per_model_and_variant(tmp_path: Path) -> None:
    from anyinfer._local.store import ModelStore, StoredFile

    store = ModelStore(tmp_path / "store")
    files = (StoredFile("m.gguf", str(tmp_path / "m.gguf"), 1, 1),)
    common = {"model_id": "m", "engine": "llama.cpp", "repo": "r", "revision": None}
    adopted = store.register(
        store.new_entry(variant_id="llama.cpp:Q8_0", files=files, adopted=True, **common)
    )
    other = store.register(
        store.new_entry(variant_id="llama.cpp:Q4_K_M", files=files, adopted=False, **common)
    )
    downloaded = store.register(
        store.new_entry(variant_id="llama.cpp:Q8_0", files=files, adopted=False, **common)
    )
    assert downloaded.entry_id == adopted.entry_id and not downloaded.adopted
    assert sorted(e.entry_id for e in store.entries()) == sorted([adopted.entry_id, other.entry_id])


def test_a_model_that_fits_nowhere_says_what_it_needs_not_zero() -> None:
    catalog = LocalCatalog.load_default()
    view = catalog.view(HardwareProfile.of(ram_gb=16, cpu_cores=4))
    big = next(f for f in view if f.model.id == "llama3.3-70b")
    assert big.verdict == "too_large" and big.variant is None
    (note,) = big.notes
    assert note.startswith("no variant fits: the smallest (llama.cpp:")
    assert "needs about" in note and "the balanced posture allows 11.2 GiB" in note
    table = str(view)
    row = next(line for line in table.splitlines() if line.startswith("llama3.3-70b"))
    assert "does not fit" in row and "GiB" in row.split("does not fit", 1)[1]
    assert "0.0 GiB" not in table
