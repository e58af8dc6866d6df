"""Test doubles for applications built on AnyInfer: scripted providers above the wire.

Test *your* code (its fallback chain, repair budget, tool loop) offline, in a few lines:

```python
import anyinfer as ai
from anyinfer.testing import Fail, Reply, ScriptedProviders

with ScriptedProviders() as scripted:
    scripted.add("primary", Fail("server"))
    scripted.add("backup", Reply("Hello", usage=ai.Usage(input_tokens=5, output_tokens=1)))
    with scripted.client() as client:
        result = client.generate("Hi", route=["primary:m", "backup:m"])
    assert result.target.provider == "backup"
```

A `ScriptedProvider` is registered in a `ProviderRegistry` like any adapter; its adapter
yields the library's parts directly (no HTTP), so routing, retries, fallbacks, breakers,
structured-output repair, `run_tools`, usage, pricing and telemetry are the real ones.
The pytest plugin `anyinfer.testing.pytest_plugin` (loaded automatically where AnyInfer
is installed) offers them as the fixtures `anyinfer_scripted` and
`anyinfer_scripted_client`. To test an adapter against the wire instead, see
`anyinfer.fakeservers` and `anyinfer.conformance`.

Importing this package is cheap: the adapter class (and httpx) loads when the first
scripted provider is registered.
"""

from __future__ import annotations

from ._scripted import (
    FAIL_KINDS,
    Fail,
    FailKind,
    Reply,
    ReplySource,
    ScriptedCall,
    ScriptedProvider,
    ScriptedProviders,
    ScriptExhaustedError,
    UnusedRepliesError,
)

__all__ = [
    "FAIL_KINDS",
    "Fail",
    "FailKind",
    "Reply",
    "ReplySource",
    "ScriptExhaustedError",
    "ScriptedCall",
    "ScriptedProvider",
    "ScriptedProviders",
    "UnusedRepliesError",
]

# Reprs, tracebacks and docs say `anyinfer.testing.Reply`, not the private module path.
for _name in __all__:
    if isinstance(globals()[_name], type):
        globals()[_name].__module__ = __name__
del _name
