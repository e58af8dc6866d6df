"""The documentation site's navigation: every page listed once, and every listed page exists."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]


def _pages(nav: Any) -> list[str]:
    """The page paths in an mkdocs `nav` tree, in order."""
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, list):
        return [page for entry in nav for page in _pages(entry)]
    if isinstance(nav, dict):
        return [page for value in nav.values() for page in _pages(value)]
    return []


def test_nav_lists_each_page_once() -> None:
    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text("utf-8"))["nav"]
    pages = _pages(nav)
    assert pages, "mkdocs.yml has no nav"
    twice = sorted(page for page, n in Counter(pages).items() if n > 1)
    assert not twice, f"pages listed more than once in the mkdocs nav: {twice}"
    missing = sorted(page for page in pages if not (ROOT / "docs" / page).is_file())
    assert not missing, f"nav entries with no page under docs/: {missing}"
