"""Deliberately broken OpenAI embedding adapters: each reproduces one real class of bug.

The embedding checks of the conformance suite must catch every one of them and name the
guarantee it breaks (`BROKEN_EMBED` maps provider id -> (class, guarantee)). Their
generation is OpenAI Chat's own, which is correct.
"""

from __future__ import annotations

from array import array
from typing import Any

from anyinfer import ProviderError, Usage
from anyinfer._embed._wire import decode_vector
from anyinfer._providers.openai_chat import OpenAIChatAdapter
from anyinfer.adapters import EmbedReply, EmbedRequest

__all__ = ["BROKEN_EMBED"]


class _PostsEmbeddings(OpenAIChatAdapter):
    async def post(self, request: EmbedRequest) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": request.model,
            "input": list(request.inputs),
            "encoding_format": request.encoding,
        }
        if request.dimensions is not None:
            body["dimensions"] = request.dimensions
        response = await self.send("POST", "/embeddings", json_body=body)
        try:
            payload = await self.read_json(response)
        finally:
            await response.aclose()
        assert isinstance(payload, dict)
        return payload


class DropsIndexOrder(_PostsEmbeddings):
    """Reads `data[]` in the order the wire lists it, ignoring each entry's `index`.

    The bug issue trackers keep reporting (and fixing with a sort by index): it holds
    while the provider answers in input order, and silently pairs vectors with the wrong
    texts once an answer comes back in another order.
    """

    async def embed(self, request: EmbedRequest) -> EmbedReply:
        payload = await self.post(request)
        vectors = tuple(
            decode_vector(item["embedding"], self.instance_id, "data[]") for item in payload["data"]
        )
        usage = payload.get("usage") or {}
        return EmbedReply(vectors=vectors, usage=Usage(input_tokens=usage.get("prompt_tokens")))


class ReportsRunningUsage(_PostsEmbeddings):
    """Reports the adapter's running token total as each batch's usage.

    A counter kept on the adapter instance for "total tokens so far", returned where the
    batch's own count belongs: right for a call of one batch, and over-counted by the
    core's sum as soon as a call splits into several.
    """

    running = 0

    async def embed(self, request: EmbedRequest) -> EmbedReply:
        reply = await OpenAIChatAdapter.embed(self, request)
        if reply.usage.input_tokens is None:
            return reply
        self.running += reply.usage.input_tokens
        return EmbedReply(
            vectors=reply.vectors, usage=Usage(input_tokens=self.running), model=reply.model
        )


class PadsFailedBatch(_PostsEmbeddings):
    """Answers a batch the provider refused with zero vectors instead of raising.

    "Best effort" embedding: the call returns a vector per input, and the failed batch's
    texts are silently indexed as zeros. A failed batch must fail the call.
    """

    async def embed(self, request: EmbedRequest) -> EmbedReply:
        try:
            return await OpenAIChatAdapter.embed(self, request)
        except ProviderError:
            dims = request.dimensions or 16
            zeros = tuple(array("f", [0.0] * dims) for _ in request.inputs)
            return EmbedReply(vectors=zeros, usage=Usage(input_tokens=0))


BROKEN_EMBED: dict[str, tuple[type[OpenAIChatAdapter], str]] = {
    "broken-embed-drops-index": (DropsIndexOrder, "embed-order"),
    "broken-embed-running-usage": (ReportsRunningUsage, "embed-usage"),
    "broken-embed-pads-failed-batch": (PadsFailedBatch, "embed-nothing-lost"),
}
"""Provider id -> (adapter class, the embedding guarantee the suite must report broken)."""
