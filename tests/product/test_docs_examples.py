"""Every Python example in README.md and docs/ runs, against fake servers.

Each page's ```python blocks run in order in one namespace, like a notebook. The
namespace starts with what the prose assumes: `ai`, a `client` whose providers point at
fake servers (through the documented `ANYINFER_<INSTANCE>_BASE_URL` variables), and small
stand-ins for application code the examples call (`messages`, `screen`, `confirm`, …).
Blocks with top-level `await` / `async with` run in an event loop with `client` bound to
an `AsyncClient`. A block that shows something that cannot run here (a pip command, a
shell session) is fenced as ```bash or ```text, not ```python.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import inspect
import json
import re
import sys
import types
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from helpers import QuietHandler, http_server

import anyinfer as ai
from anyinfer.fakeservers import FakeServer, Script, ScriptUsage, Text
from tests.fakehub import FakeHub, HubFile

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def blocks(page: Path) -> list[str]:
    return [m.group(1) for m in FENCE.finditer(page.read_text("utf-8"))]


def _reply(_request: Any) -> Script:
    return Script(pieces=(Text("Hello"), Text(" from the docs")), usage=ScriptUsage(12, 4))


class Screen:
    def __init__(self) -> None:
        self.text = ""

    def clear(self) -> None:
        self.text = ""

    def write(self, text: str) -> None:
        self.text += text


def _hub_repos() -> dict[str, dict[str, HubFile]]:
    """Tiny stand-ins for every GGUF rung of the models the docs acquire."""
    from anyinfer._local.catalog import LocalCatalog

    repos: dict[str, dict[str, HubFile]] = {}
    for model_id in ("qwen3-8b", "smollm2-135m"):
        for v in LocalCatalog.load_default().get(model_id).variants:
            if v.engine == "llama.cpp":
                name = f"{model_id}-{v.rung}.gguf"
                repos.setdefault(v.repo, {})[name] = HubFile(b"GGUF" + v.rung.encode() * 64)
    return repos


@contextmanager
def pricing_mirror() -> Iterator[str]:
    """Serve the bundled pricing table over loopback, as a pricing mirror would."""
    body = json.dumps(ai.PricingTable.default().to_json()).encode()

    class Handler(QuietHandler):
        def do_GET(self) -> None:
            self.reply(200, body, "application/json")

    with http_server(Handler) as url:
        yield f"{url}/pricing.json"


@pytest.fixture
def docs_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    with (
        FakeServer("openai-chat", _reply) as openai,
        FakeServer("openai-chat", _reply) as local,
        FakeHub(_hub_repos()) as hub,
        pricing_mirror() as pricing_url,
    ):
        for name, srv in (("OPENAI", openai), ("LOCAL", local)):
            monkeypatch.setenv(f"ANYINFER_{name}_BASE_URL", srv.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-docs-example-key")
        monkeypatch.setenv("ANYINFER_PRICING_URL", pricing_url)
        monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)
        monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
        monkeypatch.setenv("ANYINFER_MODEL_DIR", str(tmp_path / "models"))
        monkeypatch.chdir(tmp_path)
        yield


def namespace() -> dict[str, Any]:
    """A real module's globals, so pydantic can resolve the examples' annotations."""
    module = types.ModuleType("docs_example")
    sys.modules[module.__name__] = module
    ns = module.__dict__
    providers = [
        ai.ProviderSettings("openai", api_key="env://OPENAI_API_KEY"),
        ai.ProviderSettings("openai", alias="local"),
    ]
    ns.update(
        {
            "ai": ai,
            "settings": providers[0],
            "client": ai.Client(providers),
            "messages": "Hello",
            "prompt": "Hello",
            "target": "openai:gpt-4o-mini",
            "screen": Screen(),
            "record_ttft": lambda ms: None,
            "record": lambda *args: None,
            "enough": lambda event: isinstance(event, ai.TextDelta),
            "confirm": lambda n: True,
            "read_from_vault": lambda ref: "sk-from-vault",
        }
    )
    return ns


def run_block(code: str, ns: dict[str, Any]) -> None:
    compiled = compile(code, "<docs>", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    if not compiled.co_flags & inspect.CO_COROUTINE:
        exec(compiled, ns)
        return
    sync_client = ns["client"]

    async def go() -> None:
        async with ai.AsyncClient(
            [ai.ProviderSettings("openai"), ai.ProviderSettings("openai", alias="local")]
        ) as async_client:
            ns["client"] = async_client
            try:
                coro = eval(compiled, ns)
                await coro
            finally:
                ns["client"] = sync_client

    asyncio.run(go())


@contextmanager
def hypothesis_profiles_kept() -> Iterator[None]:
    """Undo what an example does to Hypothesis profiles (the adapter guide registers and
    loads a `ci` profile, as a project's conftest would), so this session keeps its own."""
    from hypothesis import settings
    from hypothesis.errors import InvalidArgument

    current = settings.get_current_profile_name()
    kept = {}
    for name in {"default", "ci", "dev", "deep", current}:
        with contextlib.suppress(InvalidArgument):
            kept[name] = settings.get_profile(name)
    try:
        yield
    finally:
        for name, profile in kept.items():
            if settings.get_profile(name) is not profile:
                settings.register_profile(name, profile)
        settings.load_profile(current)


@pytest.mark.parametrize(
    "page", [p for p in PAGES if blocks(p)], ids=lambda p: str(p.relative_to(ROOT))
)
@pytest.mark.usefixtures("docs_env")
def test_page_examples_run(page: Path) -> None:
    ns = namespace()
    try:
        with hypothesis_profiles_kept():
            for number, code in enumerate(blocks(page), 1):
                try:
                    run_block(code, ns)
                except Exception as exc:
                    raise AssertionError(f"{page.name} example #{number} failed:\n{code}") from exc
    finally:
        for value in list(ns.values()):
            if isinstance(value, ai.Client):
                value.close()


SCRIPT_PAGES = [ROOT / "README.md", ROOT / "docs" / "getting-started.md"]
"""Pages whose examples a reader copies into a file: they must run as one plain script."""


@pytest.mark.parametrize("page", SCRIPT_PAGES, ids=lambda p: str(p.relative_to(ROOT)))
@pytest.mark.usefixtures("docs_env")
def test_page_runs_as_a_script(page: Path) -> None:
    """The page's examples, joined, are a script: no top-level `await` (compiled without
    the flag that allows it, so one is a SyntaxError) and no name the test supplies."""
    script = compile("\n".join(blocks(page)), str(page), "exec")
    module = types.ModuleType("docs_script")
    sys.modules[module.__name__] = module
    try:
        exec(script, module.__dict__)
    finally:
        del sys.modules[module.__name__]
        for value in list(module.__dict__.values()):
            if isinstance(value, ai.Client):
                value.close()


def test_every_page_with_python_is_covered() -> None:
    assert any(blocks(p) for p in PAGES)
