"""Embedding types: the public `Embeddings` result and the adapter-side request/reply."""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Mapping
from dataclasses import field
from decimal import Decimal
from typing import Any, Generic, Literal, TypeVar

from .._types import AttemptRecord, ResolvedTarget, Timing, Usage
from .._values import value_class

__all__ = [
    "EmbedEncoding",
    "EmbedReply",
    "EmbedRequest",
    "Embeddings",
    "RankedDocument",
    "RerankReply",
    "RerankRequest",
    "Reranking",
    "Vector",
]

Vector = array
"""One embedding vector: an `array.array('f')` of float32 values (4 bytes each)."""

EmbedEncoding = Literal["base64", "float"]
"""How the provider is asked to send vectors: base64 of little-endian float32 (compact,
the default where the protocol has it) or a JSON array of numbers."""

_Item = TypeVar("_Item")


class _UnaryResult(Generic[_Item]):
    """What `Embeddings` and `Reranking` share: the call's cost, read from its usage, and
    the sequence protocol over its items (`_items`: the vectors, the ranked documents)."""

    __slots__ = ()

    usage: Usage

    @property
    def _items(self) -> tuple[_Item, ...]:
        """What the result is a sequence of (each subclass names its field)."""
        raise NotImplementedError

    @property
    def cost_usd(self) -> Decimal | None:
        """The call's cost in US dollars (`usage.cost_usd`), when pricing is known."""
        return self.usage.cost_usd

    def __len__(self) -> int:
        return len(self._items)

    def __getitem__(self, index: int) -> _Item:
        return self._items[index]

    def __iter__(self) -> Iterator[_Item]:
        return iter(self._items)


@value_class
class EmbedRequest:
    """One batch's embedding request, as an adapter receives it.

    Attributes:
        model: The provider's model name.
        inputs: The texts of this batch, in order.
        dimensions: Output dimensions asked for, when the caller asked.
        input_type: What the texts are for (`"query"`, `"document"`, ...), for providers
            whose models embed queries and documents differently.
        encoding: How vectors travel on the wire, where the protocol offers a choice.
        timeout_s: Per-call timeout overriding the provider's.
        provider_options: Extra body fields, merged last.
    """

    model: str
    inputs: tuple[str, ...]
    dimensions: int | None = None
    input_type: str | None = None
    encoding: EmbedEncoding = "base64"
    timeout_s: float | None = None
    provider_options: Mapping[str, Any] = field(default_factory=dict)


@value_class
class EmbedReply:
    """An adapter's answer to one `EmbedRequest`.

    Attributes:
        vectors: One vector per input, in input order (the adapter puts them back in
            order by the provider's `index` where the protocol has one).
        usage: Token accounting the provider reported (`input_tokens`).
        model: The model the provider says served the batch, when it says.
        warnings: Non-fatal notices (an `input_type` the protocol cannot carry).
        phases: Provider-reported sub-timings in milliseconds (Ollama's model load).
    """

    vectors: tuple[array[float], ...]
    usage: Usage = field(default_factory=Usage)
    model: str | None = None
    warnings: tuple[str, ...] = ()
    phases: Mapping[str, float] = field(default_factory=dict)


@value_class
class Embeddings(_UnaryResult["array[float]"]):
    """The result of `embed()`: one vector per input, in input order.

    `vectors[i]` is the embedding of `inputs[i]`, whatever batches the inputs were split
    into and in whatever order those batches completed. It is a sequence: `len()`,
    indexing and iteration go over the vectors.

    Attributes:
        vectors: One `array.array('f')` per input, in input order.
        dimensions: The length of every vector (they are checked to agree).
        target: The target that served the first batch.
        usage: Token accounting summed over every batch, with `cost_usd` where the
            target's pricing is known.
        timing: The whole call, first batch sent to last batch received (`total_ms`);
            `phases` sums provider-reported sub-timings.
        attempts: Every attempt of every batch, in the order they ended.
        batch_targets: The target that served each batch, in batch order (they differ
            only when a batch fell back to another target of the same vector space).
        warnings: Non-fatal notices accumulated along the way.
    """

    vectors: tuple[array[float], ...]
    dimensions: int
    target: ResolvedTarget
    usage: Usage
    timing: Timing
    attempts: tuple[AttemptRecord, ...] = ()
    batch_targets: tuple[ResolvedTarget, ...] = ()
    warnings: tuple[str, ...] = ()

    @property
    def _items(self) -> tuple[array[float], ...]:
        return self.vectors

    def __repr__(self) -> str:
        return (
            f"Embeddings(count={len(self.vectors)}, dimensions={self.dimensions}, "
            f"target={self.target!r}, usage={self.usage!r}, batches={len(self.batch_targets)})"
        )


@value_class
class RerankRequest:
    """One rerank request, as an adapter receives it.

    Attributes:
        model: The provider's reranking model.
        query: The text the documents are ranked against.
        documents: The documents of this request, in the caller's order.
        top_n: Return only the best `top_n` documents; `None` returns all of them.
        timeout_s: Per-call timeout overriding the provider's.
        provider_options: Extra body fields, merged last.
    """

    model: str
    query: str
    documents: tuple[str, ...]
    top_n: int | None = None
    timeout_s: float | None = None
    provider_options: Mapping[str, Any] = field(default_factory=dict)


@value_class
class RankedDocument:
    """One document's place in a ranking.

    Attributes:
        index: The document's position in the documents the caller passed.
        score: The provider's relevance score (higher is more relevant). Scores of one
            model are comparable with each other; scores of different models are not.
        document: The document's text.
    """

    index: int
    score: float
    document: str


@value_class
class RerankReply:
    """An adapter's answer to one `RerankRequest`.

    Attributes:
        ranked: The documents the provider returned, best first; `index` points into
            `RerankRequest.documents`.
        usage: Token accounting the provider reported, where it counts tokens.
        search_units: Billed search units, where the provider bills by them (Cohere).
        model: The model the provider says served the request, when it says.
        warnings: Non-fatal notices.
        phases: Provider-reported sub-timings in milliseconds.
    """

    ranked: tuple[RankedDocument, ...]
    usage: Usage = field(default_factory=Usage)
    search_units: int | None = None
    model: str | None = None
    warnings: tuple[str, ...] = ()
    phases: Mapping[str, float] = field(default_factory=dict)


@value_class
class Reranking(_UnaryResult[RankedDocument]):
    """The result of `rerank()`: documents ordered by relevance to the query, best first.

    It is a sequence of `RankedDocument`: `len()`, indexing and iteration go over
    `results`.

    Attributes:
        results: The ranked documents, best first (at most `top_n` of them); each
            `index` points into the documents the caller passed.
        target: The target that served the first request.
        usage: Token accounting summed over every request, with `cost_usd` where the
            target's pricing is known.
        search_units: Billed search units summed over every request, where the provider
            bills by them.
        timing: The whole call (`total_ms`); `phases` sums provider-reported sub-timings.
        attempts: Every attempt of every request, in the order they ended.
        batch_targets: The target that served each request, in request order.
        warnings: Non-fatal notices accumulated along the way.
    """

    results: tuple[RankedDocument, ...]
    target: ResolvedTarget
    usage: Usage
    timing: Timing
    search_units: int | None = None
    attempts: tuple[AttemptRecord, ...] = ()
    batch_targets: tuple[ResolvedTarget, ...] = ()
    warnings: tuple[str, ...] = ()

    @property
    def _items(self) -> tuple[RankedDocument, ...]:
        return self.results

    def __repr__(self) -> str:
        best = f"{self.results[0].index}@{self.results[0].score:.4g}" if self.results else None
        return (
            f"Reranking(count={len(self.results)}, best={best}, target={self.target!r}, "
            f"search_units={self.search_units}, requests={len(self.batch_targets)})"
        )
