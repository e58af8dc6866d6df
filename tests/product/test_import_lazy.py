"""Names `anyinfer` loads on first use are the same objects, published the same way.

`import anyinfer` leaves some modules unloaded until one of their names is asked for
(`anyinfer.Client`, the local-model and telemetry types, ...): these tests hold the lazy
names to what an eager import would give.
"""

from __future__ import annotations

import importlib
import subprocess
import sys

import anyinfer


def _fresh(code: str) -> None:
    """Run `code` in a new interpreter (nothing of anyinfer loaded yet); fail on error."""
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr


def test_lazy_names_are_their_modules_objects() -> None:
    for name, module in anyinfer._LAZY.items():
        assert name in anyinfer.__all__
        value = getattr(anyinfer, name)
        assert value is getattr(importlib.import_module(module, "anyinfer"), name)


def test_star_import_gives_every_public_name() -> None:
    namespace: dict[str, object] = {}
    exec("from anyinfer import *", namespace)
    for name in anyinfer.__all__:
        assert namespace[name] is getattr(anyinfer, name)


def test_async_code_does_not_load_the_sync_client() -> None:
    _fresh(
        "import sys, anyinfer\n"
        "assert 'anyinfer._client.sync' not in sys.modules\n"
        "anyinfer.AsyncClient\n"
        "assert 'anyinfer._client.sync' not in sys.modules\n"
        "from anyinfer import Client\n"
        "assert Client is sys.modules['anyinfer._client.sync'].Client\n"
    )


def test_client_says_anyinfer_however_it_is_reached() -> None:
    # `anyinfer.testing` builds a `Client` from the private module, before anything may
    # have asked `anyinfer` for the name.
    _fresh(
        "from anyinfer._client.sync import Client\n"
        "assert Client.__module__ == 'anyinfer', Client.__module__\n"
        "assert repr(Client) == \"<class 'anyinfer.Client'>\"\n"
        "import anyinfer\n"
        "assert anyinfer.Client is Client\n"
    )
