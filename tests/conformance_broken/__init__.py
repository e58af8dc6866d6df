"""Deliberately broken OpenAI Chat adapters: each reproduces one real class of bug.

The conformance suite must catch every one of them and name the guarantee it breaks
(`BROKEN` maps provider id -> (class, guarantee)). They are registered through the
documented extension point by the pytester tests in `tests/harness/test_conformance_plugin.py`.
"""

from __future__ import annotations

from .adapters import BROKEN

__all__ = ["BROKEN"]
