"""Optional dependencies: which extra of `anyinfer-kit` installs each one, and the hint.

Every feature that needs a package outside the runtime dependencies imports it lazily and,
when it is missing, says so in one line naming the extra to install::

    TiktokenEstimator needs tiktoken, which is not installed: pip install 'anyinfer-kit[tiktoken]'

`OPTIONAL` is the single table behind those lines; a test checks it against
`[project.optional-dependencies]` in `pyproject.toml`, so a hint never names an extra that
does not install the package. Only the standard library is imported here.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable

from ._values import value_class

__all__ = ["DISTRIBUTION", "OPTIONAL", "OptionalDependency", "missing", "missing_hint"]

DISTRIBUTION = "anyinfer-kit"
"""The name `pip install` knows this project by (the import name is `anyinfer`)."""


@value_class
class OptionalDependency:
    """One optional dependency.

    Attributes:
        module: The top-level import name (`vcr`).
        package: The distribution that provides it (`vcrpy`).
        extra: The `anyinfer-kit` extra that installs it (`conformance`).
    """

    module: str
    package: str
    extra: str


OPTIONAL: dict[str, OptionalDependency] = {
    o.module: o
    for o in (
        OptionalDependency("hypothesis", "hypothesis", "conformance"),
        OptionalDependency("vcr", "vcrpy", "conformance"),
        OptionalDependency("yaml", "pyyaml", "conformance"),
        OptionalDependency("opentelemetry", "opentelemetry-api", "otel"),
        OptionalDependency("tiktoken", "tiktoken", "tiktoken"),
        OptionalDependency("keyring", "keyring", "keyring"),
        OptionalDependency("botocore", "botocore", "bedrock"),
        OptionalDependency("google", "google-auth", "vertex"),
        OptionalDependency("requests", "requests", "vertex"),
    )
}
"""Import name -> the optional dependency it belongs to."""


def missing(modules: Iterable[str]) -> list[str]:
    """The modules in `modules` that cannot be imported, in the order given.

    Looks for each module without importing it (a module set to `None` in `sys.modules`
    counts as missing, as an import would fail).
    """
    out = []
    for module in modules:
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            out.append(module)
    return out


def missing_hint(feature: str, modules: Iterable[str]) -> str:
    """One line: what `feature` needs, that it is not installed, and what to install.

    Args:
        feature: What the user asked for (`pytest --anyinfer-conformance`,
            `TiktokenEstimator`).
        modules: The missing import names; each must be in `OPTIONAL`.

    Returns:
        E.g. `"TiktokenEstimator needs tiktoken, which is not installed: pip install
        'anyinfer-kit[tiktoken]'"` (on one line). Several modules share one line, with
        each extra they need named once.

    Raises:
        KeyError: If a module is not in `OPTIONAL`.
        ValueError: If `modules` is empty.
    """
    deps = [OPTIONAL[m] for m in modules]
    if not deps:
        raise ValueError("missing_hint needs at least one missing module")
    packages = [d.package for d in deps]
    names = packages[0] if len(packages) == 1 else ", ".join(packages[:-1]) + " and " + packages[-1]
    verb = "is" if len(packages) == 1 else "are"
    extras = ",".join(dict.fromkeys(d.extra for d in deps))
    return (
        f"{feature} needs {names}, which {verb} not installed: "
        f"pip install '{DISTRIBUTION}[{extras}]'"
    )
