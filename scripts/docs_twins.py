"""A griffe extension for the docs: the `Client` methods made from `AsyncClient` ones.

`anyinfer/_client/sync.py` builds most `Client` methods from their `AsyncClient`
counterparts (`_blocking`, `_direct`), so the signatures agree by construction. Static
analysis sees those as plain attributes; this extension documents each as the method it
is at run time: the async method's parameters and return annotation (not `async`), and
the docstring the running method carries.
"""

from __future__ import annotations

import inspect
from typing import Any

import griffe

_CLIENT = "anyinfer._client.sync.Client"
_ASYNC = "anyinfer._client.aclient.AsyncClient"


class BlockingTwins(griffe.Extension):
    """Replace `Client`'s made-up method attributes by functions (see the module doc)."""

    def on_package(self, *, pkg: griffe.Module, loader: griffe.GriffeLoader, **kwargs: Any) -> None:
        if pkg.name != "anyinfer":
            return
        import anyinfer

        client = loader.modules_collection.get_member(_CLIENT)
        source = loader.modules_collection.get_member(_ASYNC)
        for name, member in list(client.members.items()):
            running = getattr(anyinfer.Client, name, None)
            made = isinstance(member, griffe.Attribute) and inspect.isfunction(running)
            if not made or name not in source.members:
                continue
            original = source.members[name]
            twin = griffe.Function(
                name,
                lineno=member.lineno,
                endlineno=member.endlineno,
                parameters=original.parameters,
                returns=original.returns,
                docstring=griffe.Docstring(inspect.getdoc(running) or "", parser="google"),
            )
            client.set_member(name, twin)
