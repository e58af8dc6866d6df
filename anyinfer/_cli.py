"""The `anyinfer` command line."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
from collections.abc import Sequence
from decimal import Decimal
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    import anyinfer as ai

__all__ = ["main"]


def _jsonable(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_jsonable(v) for v in value]
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    if hasattr(value, "items"):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return str(value)


def _dump(value: Any) -> None:
    from anyinfer._redact import redact

    click.echo(redact(json.dumps(_jsonable(value), indent=2, ensure_ascii=False)))


def _settings(
    provider: str, base_url: str | None, api_key: str | None, timeout: float | None
) -> ai.ProviderSettings:
    """Provider settings from flags, then `ANYINFER_<PROVIDER>_*` variables, then defaults.

    With no key given, the adapter's own variable (e.g. `OPENAI_API_KEY`) applies.
    """
    import anyinfer as ai

    registry = ai.default_registry()
    engine = registry.canonical(provider) if provider in registry else None
    from anyinfer._client.instance import api_key_env, base_url_env

    # The same rule the adapters apply (flag, then ANYINFER_<INSTANCE>_*, then the
    # provider's default): the instance id is the provider name as given, lower-cased.
    base_url = base_url or os.environ.get(base_url_env(provider.lower()))
    api_key = api_key or os.environ.get(api_key_env(provider.lower()))
    kwargs: dict[str, Any] = {"base_url": base_url, "api_key": api_key}
    if timeout is not None:
        kwargs["timeout_s"] = timeout
    if engine is None:
        # An unknown provider name with a base URL is taken as an OpenAI-compatible server.
        if not base_url:
            raise click.UsageError(
                f"unknown provider {provider!r}: pass --base-url for an OpenAI-compatible server"
            )
        return ai.ProviderSettings("openai-compat", alias=provider.lower(), **kwargs)
    if engine != provider.lower():
        return ai.ProviderSettings(engine, alias=provider.lower(), **kwargs)
    return ai.ProviderSettings(engine, **kwargs)


def _fail(exc: BaseException) -> None:
    from anyinfer._redact import redact

    raise click.ClickException(redact(f"{type(exc).__name__}: {exc}"))


_provider_options = [
    click.option("--base-url", help="Endpoint (else ANYINFER_<PROVIDER>_BASE_URL)."),
    click.option(
        "--api-key",
        help="Credential or reference such as env://NAME (else ANYINFER_<PROVIDER>_API_KEY "
        "or the provider's usual variable). Never printed.",
    ),
    click.option("--timeout", type=float, help="Per-request timeout in seconds."),
]


def provider_options(func: Any) -> Any:
    for option in reversed(_provider_options):
        func = option(func)
    return func


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="anyinfer")
def main() -> None:
    """AnyInfer: one typed way to call LLM providers, hosted and local."""


def _human(n: float) -> str:
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1000
    return f"{n:.1f} TB"


@main.command()
@click.argument("target")
@click.argument("prompt", required=False)
@click.option("--system", help="A system prompt.")
@click.option("--max-tokens", type=int, help="Cap on output tokens.")
@click.option("--temperature", type=float)
@click.option("--json", "as_json", is_flag=True, help="Print the final result as JSON.")
@provider_options
def chat(
    target: str,
    prompt: str | None,
    system: str | None,
    max_tokens: int | None,
    temperature: float | None,
    as_json: bool,
    base_url: str | None,
    api_key: str | None,
    timeout: float | None,
) -> None:
    """Stream an answer from TARGET ("provider:model") to the terminal.

    Without PROMPT, chat interactively: each line is a turn; an empty line or EOF ends.
    Time to first token, tokens per second, usage and cost are shown at the end.
    """
    import anyinfer as ai

    provider = target.partition(":")[0]
    settings = _settings(provider, base_url, api_key, timeout)
    sampling = ai.Sampling(max_output_tokens=max_tokens, temperature=temperature)
    history: list[ai.Message] = [ai.Message.system(system)] if system else []
    interactive = prompt is None
    try:
        with ai.Client([settings]) as client:
            while True:
                if interactive:
                    try:
                        line = input("> ")
                    except EOFError:
                        break
                    if not line.strip():
                        break
                    turn = line
                else:
                    turn = str(prompt)
                history.append(ai.Message.user(turn))
                with client.stream(history, target=target, sampling=sampling) as stream:
                    for event in stream:
                        if isinstance(event, ai.TextDelta) and not as_json:
                            click.echo(event.text, nl=False)
                            sys.stdout.flush()
                result = stream.result
                history.append(ai.Message.assistant(result.text, result.tool_calls))
                if as_json:
                    _dump(result)
                else:
                    click.echo()
                    click.echo(_summary(result), err=True)
                if not interactive:
                    break
    except ai.AnyInferError as exc:
        _fail(exc)


def _summary(result: ai.Generation) -> str:
    t, u = result.timing, result.usage
    bits = [f"[{result.target}]"]
    if t.first_token_ms is not None:
        bits.append(f"TTFT {t.first_token_ms:.0f} ms")
    if t.output_tokens_per_s is not None:
        bits.append(f"{t.output_tokens_per_s:.1f} tok/s")
    bits.append(f"total {t.total_ms:.0f} ms")
    usage = f"in {u.input_tokens if u.input_tokens is not None else '?'}"
    usage += f" / out {u.output_tokens if u.output_tokens is not None else '?'} tokens"
    bits.append(usage)
    bits.append(f"cost ${u.cost_usd}" if u.cost_usd is not None else "cost unknown")
    bits.append(f"finish {result.finish_reason}")
    lines = [" · ".join(bits)]
    lines += [f"warning: {w}" for w in result.warnings]
    return "\n".join(lines)


@main.command()
@click.argument("provider")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@provider_options
def models(
    provider: str, as_json: bool, base_url: str | None, api_key: str | None, timeout: float | None
) -> None:
    """List PROVIDER's models."""
    import anyinfer as ai

    settings = _settings(provider, base_url, api_key, timeout)
    try:
        with ai.Client([settings]) as client:
            found = client.models(settings.instance_id)
    except ai.AnyInferError as exc:
        _fail(exc)
    if as_json:
        _dump(
            [
                {
                    "id": m.id,
                    "context_window": m.context_window,
                    "max_output_tokens": m.max_output_tokens,
                    "facts": m.facts,
                }
                for m in found
            ]
        )
        return
    for m in found:
        extra = f"  ctx {m.context_window}" if m.context_window else ""
        click.echo(f"{m.id}{extra}")


@main.command()
@click.argument("provider")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@provider_options
def health(
    provider: str, as_json: bool, base_url: str | None, api_key: str | None, timeout: float | None
) -> None:
    """Probe PROVIDER's readiness (exit status 1 when it is not ready)."""
    import anyinfer as ai

    settings = _settings(provider, base_url, api_key, timeout)
    try:
        with ai.Client([settings]) as client:
            h = client.health(settings.instance_id)
    except ai.AnyInferError as exc:
        _fail(exc)
    if as_json:
        _dump(h)
    else:
        state = "ready" if h.ok else "NOT ready"
        models_part = f", {h.models} models" if h.models is not None else ""
        click.echo(
            f"{h.provider}: {state} in {h.latency_ms:.0f} ms{models_part}"
            + (f" — {h.detail}" if h.detail else "")
        )
    if not h.ok:
        sys.exit(1)


@main.command()
@click.option("--best-at", help="Only models best at this category.")
@click.option(
    "--posture", type=click.Choice(["conservative", "balanced", "aggressive"]), default="balanced"
)
@click.option("--ram-gb", type=float, help="Judge a machine with this much RAM instead.")
@click.option("--gpu", "gpus", multiple=True, help="NAME:VRAM_GB of a GPU (repeatable).")
@click.option(
    "--sort",
    "sort_key",
    default="verdict",
    type=click.Choice(["verdict", "params", "size", "context", "name"]),
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option(
    "--provider",
    help="Only models this local engine serves; a remote one (by --base-url or "
    "ANYINFER_<PROVIDER>_BASE_URL) is not judged against this machine.",
)
@click.option("--base-url", help="The engine's endpoint (else ANYINFER_<PROVIDER>_BASE_URL).")
def catalog(
    best_at: str | None,
    posture: str,
    ram_gb: float | None,
    gpus: Sequence[str],
    sort_key: str,
    as_json: bool,
    provider: str | None,
    base_url: str | None,
) -> None:
    """The local model catalog, with fit verdicts for this machine (or --provider's host)."""
    import anyinfer as ai

    hardware = None
    if ram_gb is not None or gpus:
        parsed = []
        for g in gpus:
            name, _, vram = g.rpartition(":")
            try:
                parsed.append((name or "GPU", float(vram)))
            except ValueError:
                raise click.BadParameter(f"{g!r}: use NAME:VRAM_GB", param_hint="--gpu") from None
        hardware = ai.HardwareProfile.of(ram_gb=ram_gb or 16, gpus=parsed)
    try:
        providers = [_settings(provider, base_url, None, None)] if provider else []
        with ai.Client(providers) as client:
            view = client.local_catalog(
                provider.lower() if provider else None,
                hardware=hardware,
                best_at=best_at,
                posture=posture,  # type: ignore[arg-type]
            ).sorted_by(sort_key)
    except ai.AnyInferError as exc:
        _fail(exc)
    if as_json:
        _dump(
            {
                "hardware": view.hardware,
                "hardware_source": view.hardware_source,
                "posture": view.posture,
                "models": [
                    {
                        "id": f.model.id,
                        "name": f.model.name,
                        "params_b": f.model.params_b,
                        "verdict": f.verdict,
                        "variant": f.variant.id if f.variant else None,
                        "size_bytes": f.weights_bytes,
                        "size_estimated": f.variant.size_estimated if f.variant else None,
                        "context": f.context,
                        "context_reduced": f.context_reduced,
                        "gpu_layers": f.gpu_layers,
                        "notes": f.notes,
                    }
                    for f in view
                ],
            }
        )
    else:
        click.echo(str(view))


class _Bar:
    """Progress lines on stderr: bytes, rate, ETA (rewritten in place on a terminal)."""

    def __init__(self) -> None:
        self.tty = sys.stderr.isatty()
        self.last = 0.0

    def __call__(self, p: ai.AcquisitionProgress) -> None:
        now = time.monotonic()
        final = p.bytes_done >= p.bytes_total
        if not final and now - self.last < (0.1 if self.tty else 0.5):
            return
        self.last = now
        pct = 100.0 * p.bytes_done / p.bytes_total if p.bytes_total else 100.0
        rate = f"{_human(p.rate_bps)}/s" if p.rate_bps else "-"
        eta = f"ETA {p.eta_s:.0f}s" if p.eta_s is not None and not final else ""
        line = (
            f"{pct:5.1f}%  {_human(p.bytes_done)} / {_human(p.bytes_total)}  {rate}  {eta}"
            f"  [{p.files_done}/{p.files_total}]"
        ).rstrip()
        if self.tty:
            click.echo("\r" + line.ljust(70), nl=final, err=True)
        else:
            click.echo(line, err=True)


@main.command()
@click.argument("model")
@click.option("--dry-run", is_flag=True, help="Print the exact size and plan; download nothing.")
@click.option("--variant", help='Exact variant, e.g. "llama.cpp:Q4_K_M".')
@click.option("--engine", type=click.Choice(["llama.cpp", "vllm"]))
@click.option("--allow-low-quality", is_flag=True, help="Consider Q2/Q3 rungs.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def pull(
    model: str,
    dry_run: bool,
    variant: str | None,
    engine: str | None,
    allow_low_quality: bool,
    as_json: bool,
) -> None:
    """Download MODEL's weights into the model store (the best rung that fits)."""
    import anyinfer as ai

    prefs = ai.VariantPrefs(allow_low_quality=allow_low_quality)
    try:
        with ai.Client() as client:
            plan = client.acquire_model(
                model, variant_id=variant, engine=engine, prefs=prefs, dry_run=True
            )
            if not as_json:
                click.echo(
                    f"{model}: {plan.variant.id} from {plan.variant.repo}, "
                    f"{plan.total_bytes} bytes ({_human(plan.total_bytes)}) in "
                    f"{len(plan.files)} file(s)"
                )
            if dry_run:
                if as_json:
                    _dump(plan)
                return
            report = client.acquire_model(
                model, variant_id=plan.variant.id, prefs=prefs, progress=None if as_json else _Bar()
            )
    except ai.AnyInferError as exc:
        _fail(exc)
    if as_json:
        _dump(report)
    else:
        how = "adopted from the Hugging Face cache" if report.adopted else "downloaded"
        entry = report.entry.entry_id if report.entry else "-"
        click.echo(
            f"{how}: {_human(report.downloaded_bytes)} in {report.duration_s:.1f}s; entry {entry}"
        )


@main.command(name="ls")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def list_models(as_json: bool) -> None:
    """Models in the store."""
    import anyinfer as ai

    with ai.Client() as client:
        entries = client.installed_models()
    if as_json:
        _dump(entries)
        return
    if not entries:
        click.echo(f"no models in {client.model_store.root}")
    for e in entries:
        kind = " (adopted)" if e.adopted else ""
        click.echo(f"{e.entry_id}  {e.model_id}  {e.variant_id}  {_human(e.size_bytes)}{kind}")


@main.command(name="rm")
@click.argument("entry")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def remove(entry: str, as_json: bool) -> None:
    """Delete store ENTRY's files (adopted entries are only unregistered)."""
    import anyinfer as ai

    try:
        with ai.Client() as client:
            report = client.remove_model(entry)
    except ai.AnyInferError as exc:
        _fail(exc)
    if as_json:
        _dump(report)
    elif report.unregistered_only:
        click.echo(f"unregistered {entry}; its files belong to the Hugging Face cache")
    else:
        click.echo(f"removed {entry}: freed {_human(report.freed_bytes)}")


@main.command()
@click.argument("model")
@click.option("--variant", help="Exact variant id.")
@click.option("--verify", is_flag=True, help="Re-hash the files instead of a shallow check.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def locate(model: str, variant: str | None, verify: bool, as_json: bool) -> None:
    """Where MODEL is on disk, and how to launch it."""
    import anyinfer as ai

    with ai.Client() as client:
        found = client.locate_model(model, variant_id=variant, verify=verify)
    if found is None:
        raise click.ClickException(f"{model} is not installed (try: anyinfer pull {model})")
    if as_json:
        _dump(
            {
                "path": found.path,
                "verified": found.verified,
                "problems": found.problems,
                "launch": {k: list(v) for k, v in found.launch.items()},
                "entry_id": found.entry.entry_id,
            }
        )
        return
    click.echo(f"{found.path}  ({'verified' if found.verified else 'CHECK FAILED'})")
    for problem in found.problems:
        click.echo(f"  problem: {problem}")
    for engine, argv in found.launch.items():
        click.echo(f"  {engine}: {' '.join(argv)}")


@main.command()
@click.argument("target")
@click.argument("files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@click.option(
    "--system",
    "system_file",
    type=click.Path(exists=True, dir_okay=False),
    help="A file to send as the system prompt.",
)
@click.option("--reserve", type=int, help="Output tokens to set aside (default: derived).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@provider_options
def budget(
    target: str,
    files: Sequence[str],
    system_file: str | None,
    reserve: int | None,
    as_json: bool,
    base_url: str | None,
    api_key: str | None,
    timeout: float | None,
) -> None:
    """How much of TARGET's context window the FILES (as one user prompt) use.

    Pure computation: nothing is sent. The window comes from the bundled catalog (or
    discovery); an unknown window gives no verdict rather than a guess.
    """
    import anyinfer as ai

    parts = [Path(f).read_text("utf-8", errors="replace") for f in files]
    messages = [ai.Message.user("\n\n".join(parts))]
    if system_file:
        messages.insert(0, ai.Message.system(Path(system_file).read_text("utf-8")))
    provider = target.partition(":")[0] if ":" in target else None
    providers = [_settings(provider, base_url, api_key, timeout)] if provider else []
    try:
        with ai.Client(providers) as client:
            b = client.budget(messages, target=target, output_reserve_tokens=reserve)
    except ai.AnyInferError as exc:
        _fail(exc)
    if as_json:
        _dump(b)
        return
    window = f"{b.context_window} ({b.window_provenance})" if b.context_window else "unknown"
    click.echo(
        f"prompt: {b.prompt.floor}-{b.prompt.ceiling} tokens"
        + (" (exact)" if b.prompt.exact else " (estimated)")
    )
    click.echo(f"output reserve: {b.output_reserve_tokens} ({b.reserve_source})")
    click.echo(f"window: {window}")
    if b.remaining_tokens is not None:
        click.echo(f"remaining: {b.remaining_tokens}")
    click.echo(f"verdict: {b.verdict or 'unknown (no known window)'}")
