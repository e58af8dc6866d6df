"""The `anyinfer` command line.

Every command ends in a few lines. A failure is one line on stderr, `Error: Type: message`
(redacted like every library error), with exit status 1; an unexpected exception is
reported the same way with a hint, and `anyinfer --debug COMMAND` shows its traceback.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from decimal import Decimal
from enum import Enum
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import click

from anyinfer import __version__

if TYPE_CHECKING:
    import anyinfer as ai
    from anyinfer.adapters import Adapter

__all__ = ["main"]

DEBUG_ENV = "ANYINFER_DEBUG"
"""Set to `1` for tracebacks instead of one-line errors (the same as `--debug`)."""


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


# --- errors --------------------------------------------------------------------------


def _one_line(text: str) -> str:
    return " ".join(line.strip() for line in text.splitlines() if line.strip())


def _error_line(exc: BaseException) -> str:
    """`Type: message` on one line, redacted; a single-target failure names its cause."""
    from anyinfer import AllTargetsFailedError, AnyInferError
    from anyinfer._redact import redact

    attempts = exc.attempts if isinstance(exc, AllTargetsFailedError) else ()
    if attempts and len({(a.target.provider, a.target.model) for a in attempts}) == 1:
        info = attempts[-1].error  # one target, retried: its last error says it all
        if info is not None:
            tries = f" (after {len(attempts)} attempts)" if len(attempts) > 1 else ""
            return redact(_one_line(f"{info.type_name}: {info.detail}{tries}"))
    text = redact(_one_line(f"{type(exc).__name__}: {exc}"))
    if not isinstance(exc, AnyInferError):
        text += " (anyinfer --debug shows the traceback)"
    return text


class _Main(click.Group):
    """The command group: turns any exception a command raises into one line."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.exceptions.ClickException, click.exceptions.Abort, click.exceptions.Exit):
            raise
        except KeyboardInterrupt:
            click.echo("\ninterrupted", err=True)
            raise click.exceptions.Exit(130) from None
        except BrokenPipeError:
            # The reader went away (`anyinfer ... | head`): stop quietly.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            raise click.exceptions.Exit(1) from None
        except Exception as exc:
            if ctx.params.get("debug") or os.environ.get(DEBUG_ENV, "") not in ("", "0"):
                raise
            raise click.ClickException(_error_line(exc)) from None


@click.group(cls=_Main, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="anyinfer (anyinfer-kit)")
@click.option("--debug", is_flag=True, help=f"Show tracebacks (or set {DEBUG_ENV}=1).")
def main(debug: bool) -> None:
    """AnyInfer: one typed way to call LLM providers, hosted and local."""


# --- provider settings ---------------------------------------------------------------


def _settings(
    provider: str, base_url: str | None, api_key: str | None, timeout: float | None
) -> ai.ProviderSettings:
    """Provider settings from flags, then `ANYINFER_<PROVIDER>_*` variables, then defaults.

    With no key given, the adapter's own variable (e.g. `OPENAI_API_KEY`) applies.
    """
    import anyinfer as ai
    from anyinfer._client.instance import base_url_env

    registry = ai.default_registry()
    engine = registry.canonical(provider) if provider in registry else None
    # The instance id is the provider name as given, lower-cased, so the library's own
    # rule reads ANYINFER_<INSTANCE>_API_KEY (literally) and then the provider's key
    # variable; only the base URL is read here, to tell an unknown provider's server.
    base_url = base_url or os.environ.get(base_url_env(provider.lower()))
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


def _target_provider(target: str) -> str:
    """The provider of a target: before the `:`, or, for an alias such as `gpt-4o-mini`,
    the provider the bundled catalog lists first for it (as the library resolves it)."""
    provider, colon, _ = target.partition(":")
    if colon:
        return provider
    import anyinfer as ai

    with ai.Client() as probe:
        return probe.resolve(target).provider


def _key_needed(cls: type[Adapter], settings: ai.ProviderSettings) -> bool:
    """Whether the instance needs a key: its adapter says so, or it is a hosted service
    (a remote URL, a key variable, no local engine) whose adapter would send none."""
    from anyinfer._client.instance import instance_config

    declared = getattr(cls, "api_key_required", None)
    if isinstance(declared, bool):
        return declared
    remote = instance_config(settings, cls).locality == "remote"
    return remote and bool(cls.api_key_env) and not cls.profile.local_engines


def _key_variables(settings: ai.ProviderSettings, cls: type[Adapter]) -> tuple[str, ...]:
    from anyinfer._client.instance import instance_config

    return instance_config(settings, cls).key_envs


def _require_key(client: ai.Client, settings: ai.ProviderSettings) -> None:
    """Refuse, before anything is sent, an instance that needs a key and has none.

    Raises:
        click.ClickException: Naming the instance and the variables to set.
    """
    from anyinfer import AnyInferError, default_registry

    if settings.api_key:
        return
    cls = default_registry().adapter_class(settings.provider_id)
    if not _key_needed(cls, settings):
        return
    names = _key_variables(settings, cls)
    if any(os.environ.get(name) for name in names):
        return
    # Building the adapter sends nothing; it applies the provider's own fallbacks (Gemini
    # also reads GOOGLE_API_KEY) and the credential rules.
    with contextlib.suppress(AnyInferError):
        if client._async._adapter(settings.instance_id).settings.api_key:
            return
    usual = [n for n in names if not n.startswith("ANYINFER_")]
    own = [n for n in names if n.startswith("ANYINFER_")]
    first = usual[0] if usual else own[0]
    also = f" (or {' or '.join(n for n in names if n != first)})" if len(names) > 1 else ""
    raise click.ClickException(
        f"{settings.instance_id}: no API key, so nothing was sent. "
        f"Set {first}{also}, or pass --api-key."
    )


_provider_options = [
    click.option("--base-url", help="Endpoint (else ANYINFER_<PROVIDER>_BASE_URL)."),
    click.option(
        "--api-key",
        help="Credential or reference such as env://NAME (else ANYINFER_<PROVIDER>_API_KEY "
        "or the provider's usual variable). Never printed.",
    ),
    click.option("--timeout", type=float, help="Per-request timeout in seconds."),
]


@dataclasses.dataclass(frozen=True)
class _Connection:
    """What a command's provider options say: `--base-url`, `--api-key`, `--timeout`."""

    base_url: str | None = None
    api_key: str | None = None
    timeout: float | None = None

    def settings(self, provider: str) -> ai.ProviderSettings:
        """`provider`'s settings with these options (see `_settings`)."""
        return _settings(provider, self.base_url, self.api_key, self.timeout)


def provider_options(func: Callable[..., None]) -> Callable[..., None]:
    """Give a command `--base-url`, `--api-key` and `--timeout`, which it receives as one
    `connection` (a `_Connection`)."""

    @functools.wraps(func)
    def command(
        *args: Any,
        base_url: str | None,
        api_key: str | None,
        timeout: float | None,
        **kwargs: Any,
    ) -> None:
        func(*args, connection=_Connection(base_url, api_key, timeout), **kwargs)

    for option in reversed(_provider_options):
        command = option(command)
    return command


def _provider_command(func: Callable[[ai.Client, str, bool], None]) -> click.Command:
    """A command about one PROVIDER: `func(client, instance, as_json)` runs with a client
    configured from PROVIDER, `--json` and the provider options (key checked first)."""

    @main.command(name=func.__name__, help=func.__doc__)
    @click.argument("provider")
    @click.option("--json", "as_json", is_flag=True, help="Print JSON.")
    @provider_options
    def command(
        provider: str,
        as_json: bool,
        connection: _Connection,
    ) -> None:
        with _provider_client(provider, connection) as (client, settings):
            func(client, settings.instance_id, as_json)

    return command


@contextlib.contextmanager
def _provider_client(
    provider: str, connection: _Connection
) -> Iterator[tuple[ai.Client, ai.ProviderSettings]]:
    """A client configured for one provider whose key, if it needs one, is present."""
    import anyinfer as ai

    settings = connection.settings(provider)
    with ai.Client([settings]) as client:
        _require_key(client, settings)
        yield client, settings


def _human(n: float) -> str:
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1000
    return f"{n:.1f} TB"


# --- chat, models, health ------------------------------------------------------------


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
    connection: _Connection,
) -> None:
    """Stream an answer from TARGET ("provider:model", or an alias such as gpt-4o-mini).

    Without PROMPT, chat interactively: each line is a turn; an empty line or EOF ends.
    Time to first token, tokens per second, usage and cost are shown at the end.
    """
    import anyinfer as ai

    sampling = ai.Sampling(max_output_tokens=max_tokens, temperature=temperature)
    history: list[ai.Message] = [ai.Message.system(system)] if system else []
    interactive = prompt is None
    with _provider_client(_target_provider(target), connection) as (client, _):
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
    bits.append(_cost(u))
    bits.append(f"finish {result.finish_reason}")
    lines = [" · ".join(bits)]
    lines += [f"warning: {w}" for w in result.warnings]
    return "\n".join(lines)


def _cost(usage: ai.Usage) -> str:
    """A summary's cost: `cost $X`, or `cost unknown`."""
    return f"cost ${usage.cost_usd}" if usage.cost_usd is not None else "cost unknown"


def _args_or_stdin(given: tuple[str, ...], action: str, name: str) -> list[str]:
    """The texts given as arguments, else each non-blank stdin line (one text each).

    Raises:
        click.ClickException: When there are none (`nothing to ACTION: pass NAME ...`).
    """
    items = list(given) or [line.rstrip("\n") for line in sys.stdin if line.strip()]
    if not items:
        raise click.ClickException(f"nothing to {action}: pass {name} or lines on stdin")
    return items


def _batch_options(items: str) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """The options `embed` and `rerank` share: `--batch-size` (the most `items` one
    request carries), `--json` and the provider options."""

    def decorate(func: Callable[..., None]) -> Callable[..., None]:
        func = provider_options(func)
        func = click.option(
            "--json", "as_json", is_flag=True, help="Print the whole result as JSON."
        )(func)
        return click.option(
            "--batch-size", type=click.IntRange(min=1), help=f"Most {items} per request."
        )(func)

    return decorate


def _echo_warnings(warnings: Sequence[str]) -> None:
    """Each warning on stderr, one line each."""
    for w in warnings:
        click.echo(f"warning: {w}", err=True)


@main.command()
@click.argument("target")
@click.argument("texts", nargs=-1)
@click.option("--dimensions", type=click.IntRange(min=1), help="Shorter vectors, if supported.")
@click.option("--input-type", help='What the texts are for ("query", "document").')
@_batch_options("inputs")
def embed(
    target: str,
    texts: tuple[str, ...],
    dimensions: int | None,
    input_type: str | None,
    batch_size: int | None,
    as_json: bool,
    connection: _Connection,
) -> None:
    """Embed TEXTS with TARGET ("provider:model"); without TEXTS, each stdin line is one.

    Prints one JSON array per input, in input order; dimensions, usage and cost go to
    stderr.
    """
    inputs = _args_or_stdin(texts, "embed", "TEXTS")
    with _provider_client(_target_provider(target), connection) as (client, _):
        result = client.embed(
            inputs,
            target=target,
            dimensions=dimensions,
            input_type=input_type,
            batch_size=batch_size,
        )
    if as_json:
        _dump({**_jsonable(result), "vectors": [v.tolist() for v in result.vectors]})
        return
    for vector in result.vectors:
        click.echo(json.dumps(vector.tolist()))
    u = result.usage
    cost = _cost(u)
    tokens = u.input_tokens if u.input_tokens is not None else "?"
    click.echo(
        f"[{result.target}] · {len(result)} vectors of {result.dimensions} dimensions · "
        f"{len(result.batch_targets)} batch(es) · in {tokens} tokens · {cost} · "
        f"total {result.timing.total_ms:.0f} ms",
        err=True,
    )
    _echo_warnings(result.warnings)


@main.command()
@click.argument("query")
@click.argument("documents", nargs=-1)
@click.option("-t", "--target", required=True, help='The reranking model, "provider:model".')
@click.option("--top-n", type=click.IntRange(min=1), help="Print only the best N documents.")
@_batch_options("documents")
def rerank(
    query: str,
    documents: tuple[str, ...],
    target: str,
    top_n: int | None,
    batch_size: int | None,
    as_json: bool,
    connection: _Connection,
) -> None:
    """Rank DOCUMENTS by relevance to QUERY with --target; without DOCUMENTS, each stdin
    line is one.

    Prints one line per document, best first: its index among the documents, its score
    and its text, tab-separated; usage, search units and cost go to stderr.
    """
    docs = _args_or_stdin(documents, "rerank", "DOCUMENTS")
    with _provider_client(_target_provider(target), connection) as (client, _):
        result = client.rerank(query, docs, target=target, top_n=top_n, batch_size=batch_size)
    if as_json:
        _dump(result)
        return
    for item in result:
        click.echo(f"{item.index}\t{item.score:.6g}\t{_one_line(item.document)}")
    u = result.usage
    bits = [f"[{result.target}]", f"{len(result)} of {len(docs)} documents"]
    bits.append(f"{len(result.batch_targets)} request(s)")
    if result.search_units is not None:
        bits.append(f"{result.search_units} search unit(s)")
    if u.input_tokens is not None:
        bits.append(f"in {u.input_tokens} tokens")
    bits.append(_cost(u))
    bits.append(f"total {result.timing.total_ms:.0f} ms")
    click.echo(" · ".join(bits), err=True)
    _echo_warnings(result.warnings)


@_provider_command
def models(client: ai.Client, instance: str, as_json: bool) -> None:
    """List PROVIDER's models."""
    found = client.models(instance)
    if as_json:
        fields = ("id", "context_window", "max_output_tokens", "facts")
        _dump([{name: getattr(m, name) for name in fields} for m in found])
        return
    for m in found:
        extra = f"  ctx {m.context_window}" if m.context_window else ""
        click.echo(f"{m.id}{extra}")


@_provider_command
def health(client: ai.Client, instance: str, as_json: bool) -> None:
    """Probe PROVIDER's readiness (exit status 1 when it is not ready)."""
    h = client.health(instance)
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


# --- local models --------------------------------------------------------------------


def _fits(fit: Any) -> bool:
    """Whether a catalog verdict says the model runs (or cannot be judged here)."""
    return bool(fit.verdict != "too_large")


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
@click.option("--all", "show_all", is_flag=True, help="Also list models that do not fit.")
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
    show_all: bool,
    as_json: bool,
    provider: str | None,
    base_url: str | None,
) -> None:
    """Local catalog models that fit this machine (or --provider's host), best first.

    Models that do not fit at the posture are left out unless --all is given; then they
    show as "does not fit" with what the smallest variant needs.
    """
    import math

    import anyinfer as ai

    hardware = None
    if ram_gb is not None and not (math.isfinite(ram_gb) and ram_gb > 0):
        raise click.BadParameter(f"{ram_gb}: give a positive number of GiB", param_hint="--ram-gb")
    if ram_gb is not None or gpus:
        parsed = []
        for g in gpus:
            name, _, vram = g.rpartition(":")
            try:
                size = float(vram)
            except ValueError:
                size = math.nan
            if not (math.isfinite(size) and size > 0):
                raise click.BadParameter(f"{g!r}: use NAME:VRAM_GB", param_hint="--gpu")
            parsed.append((name or "GPU", size))
        hardware = ai.HardwareProfile.of(ram_gb=ram_gb or 16, gpus=parsed)
    providers = [_settings(provider, base_url, None, None)] if provider else []
    with ai.Client(providers) as client:
        view = client.local_catalog(
            provider.lower() if provider else None,
            hardware=hardware,
            best_at=best_at,
            posture=posture,  # type: ignore[arg-type]
        ).sorted_by(sort_key)
    left_out = [f for f in view if not _fits(f)]
    if not show_all:
        view = dataclasses.replace(view, fits=tuple(f for f in view if _fits(f)))
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
                        "fits": f.verdict in ("gpu", "partial_offload", "cpu_only"),
                        "variant": f.variant.id if f.variant else None,
                        "size_bytes": f.weights_bytes if f.variant else None,
                        "size_estimated": f.variant.size_estimated if f.variant else None,
                        "context": f.context if f.variant else None,
                        "context_reduced": f.context_reduced,
                        "gpu_layers": f.gpu_layers,
                        "notes": f.notes,
                    }
                    for f in view
                ],
                "left_out": [] if show_all else [f.model.id for f in left_out],
            }
        )
        return
    what = f"best at {best_at} " if best_at else ""
    if not view.fits:
        click.echo(
            f"no catalog model {what}fits {view.hardware.describe()} at posture {posture} "
            "(--all lists them with what they need; --posture aggressive allows 90% of memory)"
        )
        return
    click.echo(str(view))
    if left_out and not show_all:
        n = len(left_out)
        verb = "does" if n == 1 else "do"
        click.echo(f"{n} more model(s) {what}{verb} not fit (--all lists them)")


class _Progress:
    """Acquisition progress on stderr (or `stream`).

    On a terminal, one line rewritten in place (bytes, rate, ETA), ended when the
    download ends. Elsewhere (a pipe, a CI log), a few log lines: the start, each file
    finished, and the end — never a line per tick.
    """

    def __init__(self, stream: IO[str] | None = None) -> None:
        self.stream: IO[str] = stream if stream is not None else sys.stderr
        self.tty = bool(self.stream.isatty())
        self.last = 0.0
        self.width = 0
        self.started = False
        self.ended = False
        self.files_done = 0
        self.current: str | None = None

    def _write(self, text: str) -> None:
        self.stream.write(text)
        self.stream.flush()

    def __call__(self, p: ai.AcquisitionProgress) -> None:
        if self.ended:
            return
        final = p.bytes_done >= p.bytes_total and p.files_done >= p.files_total
        if self.tty:
            self._tty(p, final)
        else:
            self._log(p, final)
        self.ended = final
        self.current = p.current_file or self.current

    def _line(self, p: ai.AcquisitionProgress, final: bool) -> str:
        pct = 100.0 * p.bytes_done / p.bytes_total if p.bytes_total else 100.0
        rate = f"{_human(p.rate_bps)}/s" if p.rate_bps else "-"
        eta = f"ETA {p.eta_s:.0f}s" if p.eta_s is not None and not final else ""
        return (
            f"{pct:5.1f}%  {_human(p.bytes_done)} / {_human(p.bytes_total)}  {rate}  {eta}"
            f"  [{p.files_done}/{p.files_total}]"
        ).rstrip()

    def _tty(self, p: ai.AcquisitionProgress, final: bool) -> None:
        now = time.monotonic()
        if not final and now - self.last < 0.1:
            return
        self.last = now
        line = self._line(p, final)
        self._write("\r" + line.ljust(self.width) + ("\n" if final else ""))
        self.width = len(line)

    def _log(self, p: ai.AcquisitionProgress, final: bool) -> None:
        if not self.started:
            self.started = True
            resumed = f" ({_human(p.bytes_done)} already on disk)" if p.bytes_done else ""
            self._write(f"downloading {p.files_total} file(s), {_human(p.bytes_total)}{resumed}\n")
            self.files_done = p.files_done
        finished = range(self.files_done + 1, p.files_done + 1)
        if p.files_total > 1 or not final:  # one file: its line would repeat the end's
            for k in finished:
                # The file that finished was the one in progress at the last tick (when
                # only one finished since then).
                name = f" {self.current}" if self.current and len(finished) == 1 else ""
                self._write(f"  file {k}/{p.files_total} done{name}\n")
        self.files_done = p.files_done
        if final:
            self._write(self._line(p, final) + "\n")


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
    """Download MODEL's weights into the model store (the best rung that fits).

    Pulling a variant the store already holds intact fetches nothing and keeps its entry.
    """
    import anyinfer as ai

    prefs = ai.VariantPrefs(allow_low_quality=allow_low_quality)
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
        if dry_run or plan.already_installed:
            if as_json:
                _dump(plan)
            elif plan.already_installed:
                found = client.locate_model(plan.model_id, variant_id=plan.variant.id)
                entry = found.entry.entry_id if found is not None else "?"
                click.echo(f"already installed: entry {entry} (nothing to download)")
            return
        report = client.acquire_model(
            model,
            variant_id=plan.variant.id,
            prefs=prefs,
            progress=None if as_json else _Progress(),
        )
    if as_json:
        _dump(report)
        return
    entry = report.entry.entry_id if report.entry else "-"
    if report.adopted:
        how = "adopted from the Hugging Face cache"
    elif report.downloaded_bytes < report.total_bytes:
        how = f"downloaded {_human(report.downloaded_bytes)} (the rest was already on disk)"
    else:
        how = f"downloaded {_human(report.downloaded_bytes)}"
    click.echo(f"{how} in {report.duration_s:.1f}s; entry {entry}")


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

    with ai.Client() as client:
        report = client.remove_model(entry)
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


# --- budget --------------------------------------------------------------------------


def _budget_lines(b: ai.ContextBudget) -> list[str]:
    """The budget in words: the prompt's range, explained, and what the verdict means."""
    p = b.prompt
    if p.exact:
        prompt = f"prompt: {p.floor} tokens (exact count)"
    else:
        prompt = (
            f"prompt: {p.floor}-{p.ceiling} tokens (an estimate without the model's "
            "tokenizer: at least 1 token per 8 bytes, at most 1 per byte plus framing)"
        )
    window = f"{b.context_window} ({b.window_provenance})" if b.context_window else "unknown"
    lines = [prompt, f"output reserve: {b.output_reserve_tokens} ({b.reserve_source})"]
    lines.append(f"window: {window}")
    if b.remaining_tokens is not None:
        lines.append(f"remaining: {b.remaining_tokens} (window - {p.ceiling} - reserve)")
    meaning = {
        "fits": f"even {p.ceiling} prompt tokens plus the reserve fit",
        "may_not_fit": f"{p.floor} tokens would fit, {p.ceiling} plus the reserve would not",
        "exceeds": f"even {p.floor} prompt tokens overflow the window",
    }
    verdict = b.verdict
    lines.append(
        f"verdict: {verdict} ({meaning[verdict]})"
        if verdict in meaning
        else "verdict: unknown (no known window)"
    )
    return lines


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
    connection: _Connection,
) -> None:
    """How much of TARGET's context window the FILES (as one user prompt) use.

    Pure computation: nothing is sent. The window comes from the bundled catalog (or
    discovery); an unknown window gives no verdict rather than a guess. Without the
    model's tokenizer the prompt is a range: at least one token per 8 bytes, at most one
    per byte (plus chat-template framing).
    """
    import anyinfer as ai

    parts = [Path(f).read_text("utf-8", errors="replace") for f in files]
    messages = [ai.Message.user("\n\n".join(parts))]
    if system_file:
        messages.insert(0, ai.Message.system(Path(system_file).read_text("utf-8")))
    provider = target.partition(":")[0] if ":" in target else None
    providers = [connection.settings(provider)] if provider else []
    with ai.Client(providers) as client:
        b = client.budget(messages, target=target, output_reserve_tokens=reserve)
    if as_json:
        _dump(b)
        return
    for line in _budget_lines(b):
        click.echo(line)


# --- doctor --------------------------------------------------------------------------


def _key_status(names: Sequence[str]) -> tuple[str | None, str | None]:
    """The first set key variable (its name) and what makes its value unusable, if any."""
    from anyinfer import ConfigError
    from anyinfer._client.credentials import check_secret

    for name in names:
        value = os.environ.get(name)
        if value:
            try:
                check_secret(value, source=f"environment variable {name}")
            except ConfigError as exc:
                problem = exc.message.split(";")[0]
                return name, problem.removeprefix(f"the environment variable {name} ")
            return name, None
    return None, None


def _doctor_hosted(show_all: bool) -> tuple[list[dict[str, Any]], int]:
    """Hosted (remote) providers: configured ones, or every one with `show_all`."""
    import anyinfer as ai
    from anyinfer._client.instance import base_url_env, instance_config

    registry = ai.default_registry()
    rows: list[dict[str, Any]] = []
    hidden = 0
    for pid in registry.ids():
        cls = registry.adapter_class(pid)
        settings = ai.ProviderSettings(pid)
        config = instance_config(settings, cls)
        if config.locality == "local" or not (cls.api_key_env or _key_needed(cls, settings)):
            continue
        key_set, problem = _key_status(config.key_envs)
        configured = key_set is not None or bool(os.environ.get(base_url_env(pid)))
        if not configured and not show_all:
            hidden += 1
            continue
        rows.append(
            {
                "provider": pid,
                "base_url": config.base_url,
                "base_url_source": config.base_url_source,
                "key_variables": list(config.key_envs),
                "key_set": key_set,
                "key_problem": problem,
                "key_needed": _key_needed(cls, settings),
                "serves": list(cls.operations()),
            }
        )
    return rows, hidden


def _serves_note(serves: Sequence[str]) -> str:
    """` (embed, rerank only)` for a provider that does not generate, else nothing."""
    return "" if "generate" in serves else f" ({', '.join(serves) or 'nothing'} only)"


def _doctor_custom() -> list[dict[str, Any]]:
    """`ANYINFER_<NAME>_BASE_URL` variables that name no registered provider."""
    import anyinfer as ai
    from anyinfer._client.instance import base_url_env, locality_of

    known = {base_url_env(pid) for pid in ai.default_registry().ids()}
    rows = []
    for name, value in sorted(os.environ.items()):
        custom = name.startswith("ANYINFER_") and name.endswith("_BASE_URL") and name not in known
        if custom and value:
            rows.append({"variable": name, "base_url": value, "locality": locality_of(value)})
    return rows


async def _probe_all(groups: dict[str, list[str]], timeout: float) -> dict[str, dict[str, Any]]:
    """Health of one instance per base URL, concurrently, each within `timeout` seconds."""
    import asyncio

    import anyinfer as ai

    first = {url: members[0] for url, members in groups.items()}
    settings = [ai.ProviderSettings(pid, timeout_s=timeout) for pid in first.values()]

    async def one(client: ai.AsyncClient, url: str) -> dict[str, Any]:
        start = time.monotonic()
        try:
            async with asyncio.timeout(timeout + 0.5):
                h = await client.health(first[url])
        except TimeoutError:
            return {"ok": False, "detail": f"no answer within {timeout:g} s"}
        except ai.AnyInferError as exc:
            return {"ok": False, "detail": exc.message}
        ms = (time.monotonic() - start) * 1000
        return {"ok": h.ok, "detail": h.detail, "models": h.models, "latency_ms": round(ms)}

    async with ai.AsyncClient(settings) as client:
        results = await asyncio.gather(*(one(client, url) for url in groups))
    return dict(zip(groups, results))


def _short(detail: str) -> str:
    low = detail.lower()
    if "refused" in low:
        return "not answering (connection refused)"
    if "cannot connect" in low or "connecterror" in low:
        return "not answering (cannot connect)"
    return _one_line(detail)[:160]


def _doctor_engines(timeout: float, probe: bool) -> list[dict[str, Any]]:
    """Local engines by base URL (presets that share a port are one row), probed."""
    import asyncio

    import anyinfer as ai
    from anyinfer._client.instance import instance_config

    registry = ai.default_registry()
    groups: dict[str, list[str]] = {}
    serves: dict[str, list[str]] = {}
    keyless: dict[str, tuple[str, ...]] = {}  # needs a key, none set: the variables
    for pid in registry.ids():
        cls = registry.adapter_class(pid)
        settings = ai.ProviderSettings(pid)
        config = instance_config(settings, cls)
        if config.base_url is None or config.locality != "local":
            continue
        groups.setdefault(config.base_url, []).append(pid)
        serves[pid] = list(cls.operations())
        if _key_needed(cls, settings) and _key_status(config.key_envs)[0] is None:
            keyless[pid] = config.key_envs
    for members in groups.values():
        members.sort(key=lambda pid: pid in keyless)  # probe with one that needs no key
    skipped = {url: keyless[m[0]] for url, m in groups.items() if m[0] in keyless}
    probed = {url: m for url, m in groups.items() if url not in skipped}
    results = asyncio.run(_probe_all(probed, timeout)) if probe and probed else {}
    for url, names in skipped.items():
        results[url] = {"ok": False, "detail": f"not probed: needs a key ({' or '.join(names)})"}
    return [
        {
            "base_url": url,
            "providers": members,
            "serves": {pid: serves[pid] for pid in members},
            **results.get(url, {}),
        }
        for url, members in groups.items()
    ]


@main.command()
@click.option("--all", "show_all", is_flag=True, help="List every hosted provider's variables.")
@click.option(
    "--timeout", type=float, default=1.0, show_default=True, help="Seconds per engine probe."
)
@click.option("--no-probe", is_flag=True, help="Do not probe local engines.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def doctor(show_all: bool, timeout: float, no_probe: bool, as_json: bool) -> None:
    """What is configured, which keys resolve, which local engines answer.

    Reads environment variables (never printing a value) and probes only local engines
    (on this machine), each for at most --timeout seconds. Nothing is sent to a hosted
    provider.
    """
    import platform

    import anyinfer as ai
    from anyinfer._extras import DISTRIBUTION, OPTIONAL, missing
    from anyinfer._local.store import MODEL_DIR_ENV

    with ai.Client() as client:
        store = client.model_store
        entries = client.installed_models()
    extras: dict[str, bool] = {}
    for dep in OPTIONAL.values():
        extras[dep.extra] = extras.get(dep.extra, True) and not missing([dep.module])
    hosted, hidden = _doctor_hosted(show_all)
    custom = _doctor_custom()
    engines = _doctor_engines(timeout, probe=not no_probe)
    report = {
        "version": __version__,
        "python": platform.python_version(),
        "model_store": {
            "path": str(store.root),
            "from": MODEL_DIR_ENV if os.environ.get(MODEL_DIR_ENV) else "default",
            "entries": len(entries),
        },
        "extras": extras,
        "hosted": hosted,
        "hosted_not_configured": hidden,
        "custom_instances": custom,
        "local_engines": engines,
    }
    if as_json:
        _dump(report)
        return
    echo = click.echo
    echo(f"{DISTRIBUTION} {__version__}, Python {report['python']}")
    where = f" (from {MODEL_DIR_ENV})" if os.environ.get(MODEL_DIR_ENV) else ""
    echo(f"model store: {store.root}{where}, {len(entries)} model(s)")
    absent = [e for e, ok in extras.items() if not ok]
    echo(
        "extras: "
        + ", ".join(f"{e} {'yes' if ok else 'no'}" for e, ok in extras.items())
        + (f" (pip install '{DISTRIBUTION}[{','.join(absent)}]')" if absent else "")
    )
    if not hosted:
        echo(
            f"hosted providers: none configured (no key variable is set for any of the "
            f"{hidden}; anyinfer doctor --all names them)"
        )
    else:
        echo("hosted providers:")
    for row in hosted:
        if row["key_set"] and row["key_problem"]:
            key = f"{row['key_set']} is set but unusable: {row['key_problem']}"
        elif row["key_set"]:
            key = f"key from {row['key_set']}"
        else:
            names = " or ".join(row["key_variables"])
            key = f"no key: set {names}" if row["key_needed"] else f"no key ({names})"
        echo(
            f"  {row['provider']}: {key}; {row['base_url'] or 'no base URL'}"
            + _serves_note(row["serves"])
        )
    if hidden and hosted:
        echo(f"  {hidden} more without a key set (anyinfer doctor --all names their variables)")
    for row in custom:
        echo(f"custom instance: {row['variable']} = {row['base_url']} ({row['locality']})")
    echo("local engines:" + (" (not probed)" if no_probe else f" (probed, {timeout:g} s each)"))
    for row in engines:
        names = ", ".join(pid + _serves_note(row["serves"][pid]) for pid in row["providers"])
        if "ok" not in row:
            state = "-"
        elif row["ok"]:
            count = f", {row['models']} model(s)" if row.get("models") is not None else ""
            state = f"answering in {row['latency_ms']} ms{count}"
        else:
            state = _short(str(row.get("detail", "")))
        echo(f"  {row['base_url']} ({names}): {state}")


# --- conform -------------------------------------------------------------------------

_CONFORMANCE_NEEDS = ("pytest", "hypothesis", "yaml")


def _conformance_registry() -> Any:
    from anyinfer.conformance.registry import build_registry

    return build_registry(lambda registry: None)


def _package_adapters(registry: Any, package: str) -> list[str]:
    """The conformance entries an installed distribution's entry points registered."""
    from importlib.metadata import PackageNotFoundError, distribution

    from anyinfer import ENTRY_POINT_GROUP
    from anyinfer.conformance.registry import CONFORMANCE_ENTRY_POINT_GROUP

    try:
        dist = distribution(package)
    except PackageNotFoundError:
        raise click.ClickException(f"no installed distribution named {package!r}") from None
    origins = {
        f"entry point {ep.group}:{ep.name}"
        for ep in dist.entry_points
        if ep.group in (ENTRY_POINT_GROUP, CONFORMANCE_ENTRY_POINT_GROUP)
    }
    names = [e.name for e in registry.entries() if e.origin in origins]
    if not names:
        raise click.ClickException(
            f"{package} registers no conformance adapter through {ENTRY_POINT_GROUP} or "
            f"{CONFORMANCE_ENTRY_POINT_GROUP} entry points (name its adapters instead)"
        )
    return names


def _plugin_args() -> list[str]:
    """`-p` for the plugins pytest would not load by itself (an uninstalled checkout)."""
    from importlib.metadata import entry_points

    loaded = {ep.value for ep in entry_points(group="pytest11")}
    wanted = ("anyinfer.conformance.plugin", "anyinfer.conformance.cassette_plugin")
    return [arg for module in wanted if module not in loaded for arg in ("-p", module)]


@main.command()
@click.argument("adapters", nargs=-1)
@click.option(
    "--package",
    "packages",
    multiple=True,
    help="Check the adapters this installed distribution registers (repeatable).",
)
@click.option("--all", "everything", is_flag=True, help="Check every registered adapter.")
@click.option("--list", "list_only", is_flag=True, help="List the registered adapters and stop.")
@click.option("--examples", type=click.IntRange(min=1), help="Hypothesis examples per property.")
@click.option("--resources", is_flag=True, help="Also run the (slower) resources check.")
@click.option("-k", "keyword", help="Only suite tests matching this pytest -k expression.")
def conform(
    adapters: Sequence[str],
    packages: Sequence[str],
    everything: bool,
    list_only: bool,
    examples: int | None,
    resources: bool,
    keyword: str | None,
) -> None:
    """Run the conformance suite for installed adapters and print the guarantee matrix.

    ADAPTERS are provider ids or globs (acme-*). Without them (or --package/--all), the
    adapters third-party packages register through entry points are checked. The suite
    runs in a fresh pytest process from an empty temporary directory: no conftest.py or
    project configuration is needed or read. Exit status 1 when a guarantee fails.
    """
    import subprocess
    import tempfile

    from anyinfer._extras import DISTRIBUTION, missing

    absent = missing(_CONFORMANCE_NEEDS)
    if absent:
        raise click.ClickException(
            f"anyinfer conform needs {', '.join(absent)}, which is not installed: "
            f"pip install '{DISTRIBUTION}[conformance]'"
        )
    from anyinfer.conformance.registry import RegistryError

    try:
        registry = _conformance_registry()
    except RegistryError as exc:
        raise click.ClickException(str(exc)) from None
    if list_only:
        for entry in registry.entries():
            serves = ", ".join(entry.resolve_class().operations())
            click.echo(f"{entry.name}  ({entry.origin or 'built-in'}, {entry.dialect}; {serves})")
        return
    try:
        names = list(adapters)
        for package in packages:
            names += _package_adapters(registry, package)
        if not names and not everything:
            names = [e.name for e in registry.entries() if e.origin.startswith("entry point")]
            if not names:
                raise click.ClickException(
                    "no third-party adapter is installed (no entry points register one); "
                    "name adapters to check (anyinfer conform vllm), or pass --all"
                )
        chosen = [e.name for e in registry.select(names)]
    except RegistryError as exc:
        message = str(exc).split("; registered:")[0]
        raise click.ClickException(
            f"{message} (anyinfer conform --list shows the {len(registry.names())} registered)"
        ) from None
    args = [sys.executable, "-m", "pytest", "--anyinfer-conformance", "-q"]
    args += ["-p", "no:cacheprovider", *_plugin_args()]
    args += [f"--anyinfer-adapter={name}" for name in chosen]
    if examples is not None:
        args.append(f"--anyinfer-examples={examples}")
    if resources:
        args.append("--anyinfer-resources")
    if keyword:
        args += ["-k", keyword]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_ADDOPTS", "PYTEST_PLUGINS")}
    env.pop("PYTEST_DISABLE_PLUGIN_AUTOLOAD", None)  # third-party hooks load as plugins
    with tempfile.TemporaryDirectory(prefix="anyinfer-conform-") as root:
        ini = Path(root, "pytest.ini")
        ini.write_text("[pytest]\n", "utf-8")  # the only configuration this run reads
        args += ["-c", str(ini), "--rootdir", root]
        click.echo(f"checking {len(chosen)} adapter(s): {', '.join(chosen)}", err=True)
        with subprocess.Popen(
            args, cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        ) as proc:
            for line in proc.stdout or ():
                click.echo(line, nl=False)
            status = proc.wait()
    if status == 1:
        raise click.ClickException("a conformance guarantee failed (see the matrix above)")
    if status != 0:
        raise click.ClickException(f"the conformance run did not complete (pytest exit {status})")
