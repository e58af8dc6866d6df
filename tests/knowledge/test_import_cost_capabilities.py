"""`ModelCapabilities.at` builds its copy from the known fields; it equals `replace()`'s.

The catalog stamps every model it loads with `at("catalog")` on the first request's
path, so `at` no longer goes through `dataclasses.replace`; these tests hold it to what
`replace` gave, for the class itself and for a subclass with a field of its own.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

import anyinfer
from anyinfer._knowledge.capabilities import PROVENANCE_ORDER, ModelCapabilities

_CATALOG = Path(anyinfer.__file__).parent / "data" / "catalog.json"

_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "context_window": st.integers(1, 2_000_000),
    "max_output_tokens": st.integers(1, 200_000),
    "embed_dimensions": st.integers(1, 4096),
    "embed_dimension_options": st.lists(st.integers(1, 4096), max_size=3).map(tuple),
    "embed_input_types": st.lists(st.text(min_size=1, max_size=5), max_size=3).map(tuple),
    **dict.fromkeys(
        ("tools", "vision", "json_schema", "embed_dimensions_param", "streaming_usage"),
        st.booleans(),
    ),
}


def _replaced(caps: ModelCapabilities, layer: Any) -> ModelCapabilities:
    return dataclasses.replace(caps, provenance=dict.fromkeys(caps.known(), layer))


@given(st.fixed_dictionaries({}, optional=_VALUES), st.sampled_from(PROVENANCE_ORDER))
def test_at_equals_replace(values: dict[str, Any], layer: Any) -> None:
    caps = ModelCapabilities(**values)
    stamped = caps.at(layer)
    assert type(stamped) is ModelCapabilities
    assert stamped == _replaced(caps, layer)
    assert dict(stamped.provenance) == dict.fromkeys(caps.known(), layer)


def test_at_equals_replace_for_every_bundled_model() -> None:
    for data in json.loads(_CATALOG.read_text("utf-8"))["models"].values():
        caps = ModelCapabilities.from_mapping({k: v for k, v in data.items() if k != "also"})
        assert caps.at("catalog") == _replaced(caps, "catalog")


@dataclasses.dataclass(frozen=True, slots=True)
class _Tagged(ModelCapabilities):
    tag: str = "x"


def test_a_subclass_keeps_its_class_and_fields() -> None:
    stamped = _Tagged(tools=True, tag="mine").at("probe")
    assert type(stamped) is _Tagged and stamped.tag == "mine"
    assert stamped == _replaced(_Tagged(tools=True, tag="mine"), "probe")
