"""The JSON Schema keywords that hold subschemas, in one place.

Read by the argument checks (`anyinfer._client.validate`) and by the schema
transforms of structured output (`anyinfer._structured.output`), so both walk the
same keywords. `items` is in `ONE` and in `LISTS`: one schema, or (draft 4 to 2019-09)
a list of them.
"""

from __future__ import annotations

__all__ = ["LISTS", "MAPS", "ONE"]

ONE = frozenset(
    {
        "items",
        "additionalProperties",
        "additionalItems",
        "not",
        "if",
        "then",
        "else",
        "contains",
        "propertyNames",
        "unevaluatedItems",
        "unevaluatedProperties",
    }
)
"""Keywords whose value is one subschema."""

LISTS = frozenset({"anyOf", "oneOf", "allOf", "prefixItems", "items"})
"""Keywords whose value is a list of subschemas."""

MAPS = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"})
"""Keywords whose value maps names to subschemas."""
