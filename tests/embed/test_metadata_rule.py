"""Embeddings and reranking check `metadata` with generation's one rule and message."""

from __future__ import annotations

import asyncio

import pytest

import anyinfer as ai
from anyinfer._client.validate import check_metadata


@pytest.mark.parametrize(
    ("metadata", "message"),
    [
        ({"k": 1}, "metadata must map strings to strings, got str 'k' -> int 1"),
        ({2: "v"}, "metadata must map strings to strings, got int 2 -> str 'v'"),
        (["secret-value"], "metadata must be a mapping of strings to strings"),
    ],
)
def test_bad_metadata_names_the_offending_types(metadata: object, message: str) -> None:
    with pytest.raises(ai.ConfigError, match=message) as caught:
        check_metadata(metadata)
    assert "secret-value" not in str(caught.value)  # a container is named, not shown


def test_the_check_copies_and_maps_none_to_empty() -> None:
    given = {"a": "b"}
    got = check_metadata(given)
    assert got == given and got is not given
    assert check_metadata(None) == {}


def test_embed_refuses_bad_metadata_with_that_message() -> None:
    async def main() -> None:
        settings = [ai.ProviderSettings("openai", api_key="sk-test", base_url="http://127.0.0.1:9")]
        async with ai.AsyncClient(settings) as client:
            with pytest.raises(ai.ConfigError, match="got str 'k' -> int 1"):
                await client.embed(["x"], target="openai:m", metadata={"k": 1})  # type: ignore[dict-item]

    asyncio.run(main())
