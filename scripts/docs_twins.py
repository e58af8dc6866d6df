"""A griffe extension for the docs: the `Client` methods signed as `AsyncClient` ones.

`anyinfer/_client/sync.py` builds most `Client` methods from their `AsyncClient`
counterparts (`_blocking`, `_direct`) and gives `__init__` and `stream` their
parameters (`_signed_as`), so the signatures agree by construction. Static analysis
sees the former as plain attributes and the latter as `(*args, **kwargs)`; this
extension documents each as the method it is at run time: the async method's parameters
(and, for a made attribute, its return annotation; not `async`), and the docstring the
running method carries.
"""

from __future__ import annotations

import inspect
from typing import Any

import griffe

_CLIENT = "anyinfer._client.sync.Client"
_ASYNC = "anyinfer._client.aclient.AsyncClient"


class BlockingTwins(griffe.Extension):
    """Document `Client`'s made and signed methods as they run (see the module doc)."""

    def on_package(self, *, pkg: griffe.Module, loader: griffe.GriffeLoader, **kwargs: Any) -> None:
        if pkg.name != "anyinfer":
            return
        import anyinfer

        client = loader.modules_collection.get_member(_CLIENT)
        source = loader.modules_collection.get_member(_ASYNC)
        for name, member in list(client.members.items()):
            running = getattr(anyinfer.Client, name, None)
            if not inspect.isfunction(running) or name not in source.members:
                continue
            made = isinstance(member, griffe.Attribute)
            if not made and not hasattr(running, "__signature__"):
                continue  # a method with its own signature
            original = source.members[name]
            doc = running.__doc__  # not `getdoc`, which would inherit `object.__init__`'s
            twin = griffe.Function(
                name,
                lineno=member.lineno,
                endlineno=member.endlineno,
                parameters=original.parameters,
                returns=original.returns if made else member.returns,
                docstring=griffe.Docstring(inspect.cleandoc(doc), parser="google") if doc else None,
            )
            client.set_member(name, twin)
