"""Hook specifications the conformance plugin adds to pytest.

Implement them in a `conftest.py` or in a pytest plugin of your own package.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from .registry import ConformanceRegistry

__all__ = ["pytest_anyinfer_configure"]


@pytest.hookspec
def pytest_anyinfer_configure(registry: ConformanceRegistry) -> None:
    """Register adapters and dialects for `pytest --anyinfer-conformance`.

    Called once per session, only when the conformance suite runs, after the built-in
    adapters and the `anyinfer.conformance` entry points have been registered.

    Example::

        def pytest_anyinfer_configure(registry):
            registry.add_dialect(MyDialect())
            registry.add("myprovider", MyAdapter, dialect="my-dialect")

    Args:
        registry: The session's conformance registry.
    """
