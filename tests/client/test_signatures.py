"""`Client` and `AsyncClient` have exactly the signatures the spec page gives.

The expected signatures are read from the spec page itself
(`clients-and-streams.md`, rendered API reference), not restated here: each
`name(...) -> Return` block under a class's section is parsed as a Python `def`, and
compared with `inspect.signature` of the class's method — parameter names, kinds,
defaults, annotation strings and the return annotation — plus whether it is `async`.
A typed snippet then checks that mypy sees the keywords: a wrong type must fail.
"""

from __future__ import annotations

import ast
import inspect
import os
import re
import textwrap
from pathlib import Path
from typing import Any, NamedTuple

import pytest

import anyinfer
from anyinfer._client import aclient, sync

# The spec pages sit in `shared/spec`, beside the repository (here and in CI's fresh clone).
_SPEC_DIR = Path(__file__).resolve().parents[3] / "shared" / "spec"
SPEC = Path(os.environ.get("ANYINFER_SPEC_DIR", str(_SPEC_DIR))) / "clients-and-streams.md"

pytestmark = pytest.mark.skipif(not SPEC.exists(), reason=f"spec page {SPEC} not available")


class SpecEntry(NamedTuple):
    name: str
    is_async: bool
    is_property: bool
    node: ast.FunctionDef | None
    annotation: str | None  # a property's type


def _norm(expr: str) -> str:
    """An annotation in one canonical spelling (whitespace and line breaks removed)."""
    return ast.unparse(ast.parse(expr, mode="eval"))


def parse_spec(text: str) -> dict[str, dict[str, SpecEntry]]:
    """`{"Client": {"generate": SpecEntry, ...}, ...}` from the spec page.

    A class section starts at a line `anyinfer.<Class>`. Inside it, a member heading is
    `name`, `name async` or `name property` (mkdocstrings' labels), followed by the
    signature block starting with `name(` — or `name: Type` for a property. The
    constructor's block starts with the class name.
    """
    lines = text.splitlines()
    sections: dict[str, dict[str, SpecEntry]] = {}
    current: dict[str, SpecEntry] | None = None
    cls = ""
    heading: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        m = re.fullmatch(r"anyinfer\.(\w+)(?: .*)?", line)
        if m:
            cls = m.group(1)
            current = sections.setdefault(cls, {})
            heading = [cls]
            i += 1
            continue
        if current is not None and re.fullmatch(r"\w+( async| property)?", line):
            heading = line.split()
            i += 1
            continue
        if current is None or not heading or not line.startswith(heading[0]):
            i += 1
            continue
        name = heading[0]
        labels = heading[1:]
        if "property" in labels and line.startswith(f"{name}:"):
            annotation = line.split(":", 1)[1].strip()
            current[name] = SpecEntry(name, False, True, None, annotation)
            heading = []
            i += 1
            continue
        if not line.startswith(f"{name}("):
            i += 1
            continue
        block = [line]
        while block[-1].count("(") + sum(b.count("(") for b in block[:-1]) > sum(
            b.count(")") for b in block
        ):
            i += 1
            block.append(lines[i])
        i += 1
        source = "\n".join(block)
        member = "__init__" if name == cls else name
        source = f"def {member}{source[len(name) :]}:\n    ..."
        node = ast.parse(source).body[0]
        assert isinstance(node, ast.FunctionDef), source
        current[member] = SpecEntry(member, "async" in labels, False, node, None)
        heading = []
    return sections


SPEC_SECTIONS = parse_spec(SPEC.read_text(encoding="utf-8")) if SPEC.exists() else {}
NAMESPACE: dict[str, Any] = {**vars(aclient), **vars(sync), **vars(anyinfer)}


class Param(NamedTuple):
    name: str
    kind: inspect._ParameterKind
    default: Any
    annotation: str


def _spec_params(node: ast.FunctionDef) -> list[Param]:
    a = node.args
    out: list[Param] = []
    positional = a.posonlyargs + a.args
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(a.defaults))
    defaults += a.defaults
    for arg, default in zip(positional, defaults):
        kind = (
            inspect.Parameter.POSITIONAL_ONLY
            if arg in a.posonlyargs
            else inspect.Parameter.POSITIONAL_OR_KEYWORD
        )
        out.append(_param(arg, kind, default))
    if a.vararg is not None:
        out.append(_param(a.vararg, inspect.Parameter.VAR_POSITIONAL, None))
    for arg, kw_default in zip(a.kwonlyargs, a.kw_defaults):
        out.append(_param(arg, inspect.Parameter.KEYWORD_ONLY, kw_default))
    if a.kwarg is not None:
        out.append(_param(a.kwarg, inspect.Parameter.VAR_KEYWORD, None))
    return out


def _param(arg: ast.arg, kind: inspect._ParameterKind, default: ast.expr | None) -> Param:
    value = (
        inspect.Parameter.empty
        if default is None
        else eval(compile(ast.Expression(default), "<spec>", "eval"), NAMESPACE)
    )
    annotation = _norm(ast.unparse(arg.annotation)) if arg.annotation else ""
    return Param(arg.arg, kind, value, annotation)


def _code_params(func: Any) -> list[Param]:
    params = list(inspect.signature(func).parameters.values())
    assert params and params[0].name == "self"
    return [
        Param(
            p.name,
            p.kind,
            p.default,
            _norm(p.annotation) if p.annotation is not inspect.Parameter.empty else "",
        )
        for p in params[1:]
    ]


CASES = [
    (cls, entry)
    for cls in ("Client", "AsyncClient")
    for entry in SPEC_SECTIONS.get(cls, {}).values()
]


def test_spec_page_lists_the_entry_points() -> None:
    # The parser found what the spec documents, so the parametrized checks below are
    # not vacuous.
    for cls in ("Client", "AsyncClient"):
        names = set(SPEC_SECTIONS.get(cls, {}))
        assert {"__init__", "generate", "stream", "budget", "run_tools"} <= names, cls
        assert {"acquire_model", "locate_model", "local_catalog", "model_store"} <= names
    assert len(CASES) >= 35


@pytest.mark.parametrize(("cls", "entry"), CASES, ids=[f"{c}.{e.name}" for c, e in CASES])
def test_signature_matches_spec(cls: str, entry: SpecEntry) -> None:
    klass = getattr(anyinfer, cls)
    member = inspect.getattr_static(klass, entry.name)
    if entry.is_property:
        assert isinstance(member, property), f"{cls}.{entry.name} should be a property"
        returns = inspect.signature(member.fget).return_annotation  # type: ignore[arg-type]
        assert _norm(returns) == _norm(entry.annotation or "")
        return
    assert entry.node is not None
    func = getattr(klass, entry.name)
    assert inspect.iscoroutinefunction(func) == entry.is_async, (
        f"{cls}.{entry.name}: the spec says {'async' if entry.is_async else 'sync'}"
    )
    assert _code_params(func) == _spec_params(entry.node)
    returns = inspect.signature(func).return_annotation
    # The spec shows a constructor as `Client(...)`, without `-> None`.
    spec_returns = ast.unparse(entry.node.returns) if entry.node.returns else "None"
    assert _norm(returns) == _norm(spec_returns)


def test_client_has_no_kwargs_the_spec_does_not_give() -> None:
    # `**kwargs` stays only where the spec has it (`run_tools`).
    for name, func in inspect.getmembers(anyinfer.Client, inspect.isfunction):
        if name.startswith("_") and name != "__init__":
            continue
        var_kw = [
            p
            for p in inspect.signature(func).parameters.values()
            if p.kind is inspect.Parameter.VAR_KEYWORD
        ]
        spec = SPEC_SECTIONS["Client"].get(name)
        expected = spec is not None and spec.node is not None and spec.node.args.kwarg
        assert bool(var_kw) == bool(expected), name


class _Recorder:
    """Stands in for the `AsyncClient` behind a `Client`, recording each call."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def __getattr__(self, name: str) -> Any:
        real = getattr(anyinfer.AsyncClient, name)

        def method(*args: Any, **kwargs: Any) -> Any:
            bound = inspect.signature(real).bind(self, *args, **kwargs)
            received = {k: v for k, v in bound.arguments.items() if k not in ("self", "kwargs")}
            received.update(bound.arguments.get("kwargs", {}))
            self.calls.append((name, received))

            async def done() -> str:
                return name

            return done() if inspect.iscoroutinefunction(real) else name

        return method


FORWARDED = ["budget", "generate", "acquire_model", "locate_model", "run_tools", "stream"]


@pytest.mark.parametrize("name", FORWARDED)
def test_sync_methods_forward_every_argument(name: str) -> None:
    # A distinct sentinel per parameter must arrive, under the same name, at the
    # async method, and nothing else.
    client = anyinfer.Client(use_default_catalog=False)
    recorder = _Recorder()
    real = client._async
    client._async = recorder  # type: ignore[assignment]
    try:
        params = _code_params(getattr(anyinfer.Client, name))
        sent: dict[str, Any] = {
            p.name: object() for p in params if p.kind is not inspect.Parameter.VAR_KEYWORD
        }
        if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
            sent["extra_keyword"] = object()
        if name == "stream":
            with pytest.raises(TypeError):  # the recorder returns no AsyncStream factory
                getattr(client, name)(**sent).collect()
        else:
            getattr(client, name)(**sent)
        assert recorder.calls == [(name, sent)]
    finally:
        client._async = real
        client.close()


def test_constructor_forwards_every_argument(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, Any] = {}

    class Fake:
        def __init__(self, **kwargs: Any) -> None:
            seen.update(kwargs)

        async def aclose(self) -> None:
            pass

    monkeypatch.setattr(sync, "AsyncClient", Fake)
    params = _code_params(anyinfer.Client.__init__)
    sent = {p.name: object() for p in params}
    anyinfer.Client(**sent).close()
    assert seen == sent


SNIPPET = """
from anyinfer import Client, Sampling

client = Client()
client.generate("hi", target="openai:gpt-4o-mini", timeout_s="slow")
client.stream("hi", target="openai:gpt-4o-mini", max_response_bytes="big")
client.budget("hi", target="openai:gpt-4o-mini", tempreature=0.2)
client.acquire_model("m", dry_run="yes")
client.locate_model("m", verify=1.5)
Client(retain_raw="no")
g = client.generate("hi", target="openai:gpt-4o-mini", sampling=Sampling())
reveal_type(g)
"""


@pytest.mark.typecheck
def test_mypy_sees_the_typed_keywords(tmp_path: Path) -> None:
    api = pytest.importorskip("mypy.api")
    path = tmp_path / "snippet.py"
    path.write_text(textwrap.dedent(SNIPPET), encoding="utf-8")
    root = Path(__file__).resolve().parents[2]
    stdout, stderr, _status = api.run(
        [
            "--strict",
            "--follow-imports=silent",
            "--cache-dir",
            str(root / ".mypy_cache"),
            "--no-error-summary",
            str(path),
        ]
    )
    errors = [line for line in stdout.splitlines() if ": error:" in line]
    lines = sorted({int(line.split(":")[1]) for line in errors})
    # One error per wrong call (lines 5-10 of the snippet), none on the correct one.
    assert lines == [5, 6, 7, 8, 9, 10], stdout + stderr
    assert 'Revealed type is "anyinfer._types.Generation"' in stdout, stdout
