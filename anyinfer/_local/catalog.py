"""The bundled local-model catalog, and how each entry fits a machine."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from .._bundled import read_data
from .._errors import ConfigError
from .._values import value_class
from .hardware import HardwareProfile, HardwareSource

__all__ = [
    "CatalogView",
    "Fit",
    "FitVerdict",
    "LocalCatalog",
    "LocalModel",
    "Posture",
    "Variant",
    "VariantPrefs",
    "fit_model",
]

Posture = Literal["conservative", "balanced", "aggressive"]
"""How much of the machine a model may use: 50 %, 70 % or 90 % of memory."""

POSTURE_SHARE: dict[str, float] = {"conservative": 0.5, "balanced": 0.7, "aggressive": 0.9}

FitVerdict = Literal["gpu", "partial_offload", "cpu_only", "too_large", "unknown"]
"""Whether weights plus KV cache fit: wholly in GPU memory, split between GPU and system
memory (llama.cpp layer offload), in system memory only, or not at all; `unknown` when the
engine's host cannot be probed and no specs were supplied."""

_VERDICT_RANK = {"gpu": 0, "partial_offload": 1, "cpu_only": 2, "too_large": 3, "unknown": 4}
_RUNTIME_OVERHEAD = 512 * 1024**2
_MIN_CONTEXT = 4096
ENGINES = ("llama.cpp", "vllm")


@value_class
class Variant:
    """One downloadable form of a model for one engine.

    Attributes:
        id: `"engine:rung"`, e.g. `"llama.cpp:Q4_K_M"` or `"vllm:awq-int4"`.
        engine: `llama.cpp` or `vllm`.
        rung: The quantization rung (`Q4_K_M`, `bf16`, `awq-int4`, …).
        repo: Hugging Face repository.
        patterns: File patterns to fetch from the repository.
        bits_per_weight: Average bits per weight of this rung.
        size_bytes: Download size.
        size_estimated: Whether `size_bytes` is an estimate (parameters x bits) rather
            than the hub's figure; acquisition replaces estimates with exact sizes.
        low_quality: Whether this rung loses enough quality that selection skips it
            unless `VariantPrefs.allow_low_quality`.
        quality: Rank within the model: higher is closer to full precision.
    """

    id: str
    engine: str
    rung: str
    repo: str
    patterns: tuple[str, ...]
    bits_per_weight: float
    size_bytes: int
    size_estimated: bool = True
    low_quality: bool = False
    quality: int = 0


@value_class
class LocalModel:
    """A catalog model: architecture facts and its variants.

    Attributes:
        id: Catalog id, e.g. `"qwen3-8b"`.
        name: Display name.
        family: Model family.
        params_b: Total parameters, in billions.
        active_params_b: Active parameters per token for mixture-of-experts models.
        context_length: Trained context window, in tokens.
        n_layers: Transformer layers (for KV-cache sizing and layer offload).
        n_kv_heads: Key/value heads.
        head_dim: Dimension per head.
        best_at: Categories from the catalog's closed vocabulary.
        license: The weights' license id.
        variants: Downloadable variants, per engine, lowest quality first.
    """

    id: str
    name: str
    family: str
    params_b: float
    active_params_b: float | None
    context_length: int
    n_layers: int
    n_kv_heads: int
    head_dim: int
    best_at: tuple[str, ...]
    license: str | None
    variants: tuple[Variant, ...]

    def kv_cache_bytes(self, context: int, bytes_per_element: int = 2) -> int:
        """KV-cache size at `context` tokens with an f16 cache."""
        return 2 * self.n_layers * self.n_kv_heads * self.head_dim * context * bytes_per_element

    def variant(self, variant_id: str) -> Variant:
        """The variant with this id.

        Raises:
            ConfigError: If the model has no such variant.
        """
        for v in self.variants:
            if v.id == variant_id:
                return v
        known = ", ".join(v.id for v in self.variants)
        raise ConfigError(f"model {self.id!r} has no variant {variant_id!r}; it has: {known}")


@value_class
class VariantPrefs:
    """Preferences for variant selection.

    Attributes:
        allow_low_quality: Consider low-quality rungs (Q2/Q3) too.
        max_download_bytes: Skip variants larger than this.
        min_context: Never reduce the context below this many tokens to make a model fit.
    """

    allow_low_quality: bool = False
    max_download_bytes: int | None = None
    min_context: int = _MIN_CONTEXT


@value_class
class Fit:
    """How one model (with its chosen variant) fits a machine.

    Attributes:
        model: The catalog model.
        variant: The chosen variant, or `None` when nothing fits.
        verdict: `gpu`, `partial_offload`, `cpu_only` or `too_large`.
        context: The context the verdict assumes.
        context_reduced: Whether `context` is below the model's trained window to fit.
        weights_bytes: Weight size of the chosen variant.
        kv_bytes: KV-cache size at `context`.
        budget_bytes: Memory the posture allows (GPU plus system memory for offload).
        gpu_layers: Layers to offload to the GPU (llama.cpp), when a GPU is used.
        notes: Why, in words.
    """

    model: LocalModel
    variant: Variant | None
    verdict: FitVerdict
    context: int
    context_reduced: bool
    weights_bytes: int
    kv_bytes: int
    budget_bytes: int
    gpu_layers: int | None = None
    notes: tuple[str, ...] = ()

    @property
    def needed_bytes(self) -> int:
        """Weights plus KV cache plus runtime overhead."""
        return self.weights_bytes + self.kv_bytes + _RUNTIME_OVERHEAD


def _gib(n: int) -> str:
    return f"{n / 1024**3:.1f} GiB"


def fit_model(
    model: LocalModel,
    hardware: HardwareProfile,
    *,
    posture: Posture = "balanced",
    engine: str | None = None,
    prefs: VariantPrefs | None = None,
) -> Fit:
    """Choose the best variant of `model` for `hardware` and say how it fits.

    Variants are judged by verdict first (all on GPU beats offload beats CPU only), then
    by context, then by quality: the highest rung whose weights and KV cache fit the
    posture's share of memory wins. When the full context does not fit, the context is
    halved down to `prefs.min_context` before giving up, and the result says so. The KV
    cache is sized for an f16 cache over every layer at the full context, which
    overstates models with sliding-window layers (Gemma): the verdict errs on the safe
    side.

    Args:
        model: The catalog model.
        hardware: The machine.
        posture: Memory share to budget.
        engine: Restrict to one engine's variants.
        prefs: Selection preferences.
    """
    prefs = prefs or VariantPrefs()
    share = POSTURE_SHARE[posture]
    best: Fit | None = None
    rejected: list[Fit] = []
    for variant in model.variants:
        if engine is not None and variant.engine != engine:
            continue
        if variant.low_quality and not prefs.allow_low_quality:
            continue
        if prefs.max_download_bytes is not None and variant.size_bytes > prefs.max_download_bytes:
            continue
        fit = _fit_variant(model, variant, hardware, share, prefs.min_context)
        if fit.verdict == "too_large":
            rejected.append(fit)
            continue
        if best is None or _preference(fit) < _preference(best):
            best = fit
    if best is not None:
        return best
    gpu_budget, ram_budget = _budgets(hardware, share)
    return Fit(
        model,
        None,
        "too_large",
        model.context_length,
        False,
        0,
        model.kv_cache_bytes(model.context_length),
        gpu_budget + ram_budget,
        notes=(_why_none_fits(model, rejected, gpu_budget + ram_budget, posture, prefs),),
    )


def _why_none_fits(
    model: LocalModel, rejected: Sequence[Fit], budget: int, posture: Posture, prefs: VariantPrefs
) -> str:
    """Why no variant fits, with the smallest one's need against the posture's budget."""
    sized = [
        (f.weights_bytes, f.variant.id)
        for f in rejected
        if f.variant is not None and "vLLM needs a GPU" not in f.notes
    ]
    if not sized:
        if rejected:
            return "no variant fits: vLLM needs a GPU"
        return "no variant fits these preferences (low-quality rungs are skipped by default)"
    weights, variant_id = min(sized)
    context = _contexts(model, prefs.min_context)[-1]
    need = weights + model.kv_cache_bytes(context) + _RUNTIME_OVERHEAD
    return (
        f"no variant fits: the smallest ({variant_id}) needs about {_gib(need)} "
        f"at a {context}-token context; the {posture} posture allows {_gib(budget)}"
    )


def _preference(fit: Fit) -> tuple[int, int, int]:
    """Sort key: better verdict, then more context, then higher quality."""
    quality = fit.variant.quality if fit.variant else -1
    return (_VERDICT_RANK[fit.verdict], -fit.context, -quality)


def _budgets(hardware: HardwareProfile, share: float) -> tuple[int, int]:
    if hardware.unified_memory:
        return int(hardware.ram_bytes * share), 0
    return int(hardware.vram_bytes * share), int(hardware.ram_bytes * share)


def _contexts(model: LocalModel, min_context: int) -> list[int]:
    floor = min(min_context, model.context_length)
    contexts = [model.context_length]
    while contexts[-1] // 2 >= floor:
        contexts.append(contexts[-1] // 2)
    return contexts


def _fit_variant(
    model: LocalModel, variant: Variant, hw: HardwareProfile, share: float, min_context: int
) -> Fit:
    """The best verdict this variant reaches, at the largest context that reaches it."""
    gpu_budget, ram_budget = _budgets(hw, share)
    weights = variant.size_bytes
    llama = variant.engine == "llama.cpp"
    found: dict[str, Fit] = {}
    for context in _contexts(model, min_context):
        kv = model.kv_cache_bytes(context)
        need = weights + kv + _RUNTIME_OVERHEAD
        reduced = context < model.context_length
        notes = (f"context reduced to {context} tokens to fit",) if reduced else ()
        if "gpu" not in found and gpu_budget and need <= gpu_budget:
            found["gpu"] = Fit(
                model,
                variant,
                "gpu",
                context,
                reduced,
                weights,
                kv,
                gpu_budget,
                gpu_layers=model.n_layers,
                notes=notes,
            )
            break  # nothing beats the GPU, and larger contexts were tried first
        if (
            llama
            and "partial_offload" not in found
            and gpu_budget
            and (need <= gpu_budget + ram_budget)
        ):
            spare = gpu_budget - kv - _RUNTIME_OVERHEAD
            layers = max(0, min(model.n_layers, int(model.n_layers * spare / weights)))
            if layers > 0:
                found["partial_offload"] = Fit(
                    model,
                    variant,
                    "partial_offload",
                    context,
                    reduced,
                    weights,
                    kv,
                    gpu_budget + ram_budget,
                    gpu_layers=layers,
                    notes=(*notes, f"{layers} of {model.n_layers} layers on the GPU"),
                )
        if llama and "cpu_only" not in found and need <= ram_budget:
            extra = ("too large for the GPU; runs on the CPU",) if gpu_budget else ()
            found["cpu_only"] = Fit(
                model,
                variant,
                "cpu_only",
                context,
                reduced,
                weights,
                kv,
                ram_budget,
                gpu_layers=0,
                notes=(*notes, *extra),
            )
    for verdict in ("gpu", "partial_offload", "cpu_only"):
        if verdict in found:
            return found[verdict]
    why = "vLLM needs a GPU" if not llama and not gpu_budget else "does not fit"
    return Fit(
        model,
        variant,
        "too_large",
        model.context_length,
        False,
        weights,
        model.kv_cache_bytes(model.context_length),
        gpu_budget + ram_budget,
        notes=(why,),
    )


@dataclass(frozen=True)
class CatalogView:
    """The local catalog judged against one machine: one `Fit` per model.

    Iterate it, `sorted_by()` it, or `print()` it for a table.

    Attributes:
        fits: One fit per model.
        hardware: The profile judged against.
        hardware_source: `detected`, `supplied`, or `unavailable` — the engine runs
            somewhere AnyInfer cannot probe, so verdicts are `too_large`-free guesses
            withheld: ask the user for the host's specs and call again with `hardware=`.
        posture: The posture used.
    """

    fits: tuple[Fit, ...]
    hardware: HardwareProfile
    hardware_source: HardwareSource
    posture: Posture
    notes: tuple[str, ...] = field(default=())

    def __iter__(self) -> Iterator[Fit]:
        return iter(self.fits)

    def __len__(self) -> int:
        return len(self.fits)

    def sorted_by(
        self, key: str | Callable[[Fit], Any] = "verdict", *, reverse: bool = False
    ) -> CatalogView:
        """A copy sorted by `verdict`, `params`, `size`, `context`, `name`, or a function."""
        keys: dict[str, Callable[[Fit], Any]] = {
            "verdict": lambda f: (_VERDICT_RANK[f.verdict], -f.model.params_b),
            "params": lambda f: f.model.params_b,
            "size": lambda f: f.weights_bytes,
            "context": lambda f: f.context,
            "name": lambda f: f.model.name.lower(),
        }
        if isinstance(key, str):
            if key not in keys:
                raise ConfigError(f"cannot sort by {key!r}; use one of {', '.join(keys)}")
            func = keys[key]
        else:
            func = key
        return replace(self, fits=tuple(sorted(self.fits, key=func, reverse=reverse)))

    def __str__(self) -> str:
        rows = [("model", "params", "variant", "verdict", "context", "size", "notes")]
        for f in self.fits:
            params = f"{f.model.params_b:g}B"
            if f.model.active_params_b:
                params += f" ({f.model.active_params_b:g}B active)"
            cells: tuple[str, str, str, str]
            if f.variant is None:
                # Nothing chosen: no variant, context or size to show (never "0.0 GiB").
                verdict = "does not fit" if f.verdict == "too_large" else f.verdict
                cells = ("-", verdict, "-", "-")
            else:
                size = ("~" if f.variant.size_estimated else "") + _gib(f.weights_bytes)
                context = f"{f.context}{'*' if f.context_reduced else ''}"
                cells = (f.variant.id, f.verdict, context, size)
            rows.append((f.model.id, params, *cells, "; ".join(f.notes)))
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        lines = [f"{self.hardware.describe()} — posture {self.posture}"]
        lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
        lines += list(self.notes)
        return "\n".join(lines)


class LocalCatalog:
    """The bundled catalog of open-weight chat models."""

    def __init__(self, models: Sequence[LocalModel], best_at: Sequence[str]) -> None:
        self.models = tuple(models)
        self.best_at_vocabulary = tuple(best_at)
        self._by_id = {m.id: m for m in self.models}

    @classmethod
    @functools.cache
    def load_default(cls) -> LocalCatalog:
        """The catalog bundled with this release (loaded once)."""
        return cls.from_json(json.loads(read_data("local_catalog.json")))

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LocalCatalog:
        """Build a catalog from the bundled JSON shape."""
        bits: dict[str, float] = data["gguf_bits"]
        low = set(data.get("low_quality", ()))
        order = list(bits)
        models = []
        for m in data["models"]:
            params = float(m["params_b"]) * 1e9
            variants: list[Variant] = []
            gguf = m.get("gguf")
            if gguf:
                for rung in gguf["rungs"]:
                    variants.append(
                        Variant(
                            id=f"llama.cpp:{rung}",
                            engine="llama.cpp",
                            rung=rung,
                            repo=gguf["repo"],
                            patterns=(f"*{rung}.gguf",),
                            bits_per_weight=bits[rung],
                            size_bytes=int(params * bits[rung] / 8),
                            low_quality=rung in low,
                            quality=order.index(rung),
                        )
                    )
            for v in m.get("vllm", ()):
                variants.append(
                    Variant(
                        id=f"vllm:{v['id']}",
                        engine="vllm",
                        rung=v["id"],
                        repo=v["repo"],
                        patterns=("*.safetensors", "*.json", "tokenizer*"),
                        bits_per_weight=v["bits"],
                        size_bytes=int(params * v["bits"] / 8),
                        quality=int(v["bits"]),
                    )
                )
            models.append(
                LocalModel(
                    id=m["id"],
                    name=m["name"],
                    family=m["family"],
                    params_b=float(m["params_b"]),
                    active_params_b=m.get("active_params_b"),
                    context_length=int(m["context_length"]),
                    n_layers=int(m["n_layers"]),
                    n_kv_heads=int(m["n_kv_heads"]),
                    head_dim=int(m["head_dim"]),
                    best_at=tuple(m["best_at"]),
                    license=m.get("license"),
                    variants=tuple(variants),
                )
            )
        return cls(models, data["best_at"])

    def get(self, model_id: str) -> LocalModel:
        """A model by id.

        Raises:
            ConfigError: If the catalog has no such model (close matches are named).
        """
        model = self._by_id.get(model_id)
        if model is None:
            import difflib

            close = difflib.get_close_matches(model_id, list(self._by_id), n=3)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise ConfigError(f"no local catalog model {model_id!r}{hint}")
        return model

    def view(
        self,
        hardware: HardwareProfile,
        *,
        best_at: str | None = None,
        posture: Posture = "balanced",
        engines: Sequence[str] | None = None,
        prefs: VariantPrefs | None = None,
    ) -> CatalogView:
        """Judge every model (or those `best_at` a category) against `hardware`.

        Raises:
            ConfigError: If `best_at` is not in the closed vocabulary, or the posture is
                unknown.
        """
        if posture not in POSTURE_SHARE:
            raise ConfigError(f"posture must be one of {', '.join(POSTURE_SHARE)}, got {posture!r}")
        if best_at is not None and best_at not in self.best_at_vocabulary:
            raise ConfigError(
                f"unknown best_at category {best_at!r}; use one of "
                + ", ".join(self.best_at_vocabulary)
            )
        fits = []
        for model in self.models:
            if best_at is not None and best_at not in model.best_at:
                continue
            if hardware.source == "unavailable":
                fits.append(
                    Fit(
                        model,
                        None,
                        "unknown",
                        model.context_length,
                        False,
                        0,
                        0,
                        0,
                        notes=("the engine's host cannot be probed: supply hardware=",),
                    )
                )
                continue
            candidates = [
                fit_model(model, hardware, posture=posture, engine=e, prefs=prefs)
                for e in (engines or ENGINES)
            ]
            fits.append(min(candidates, key=_preference))
        notes: tuple[str, ...] = ()
        if hardware.source == "unavailable":
            notes = (
                "The engine runs on a host AnyInfer cannot probe: ask for its specs and "
                "call again with hardware=HardwareProfile.of(...).",
            )
        return CatalogView(tuple(fits), hardware, hardware.source, posture, notes)
