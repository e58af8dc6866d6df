"""Rerank on the wire: the common request body, and answers that list `{index, score}`
entries, best first.

Every rerank protocol answers with entries that each name a document by its position in
the request and give it a score (Voyage AI's `data[{index, relevance_score}]`, Jina AI's
`results[{index, relevance_score}]`, TEI's bare `[{index, score}]`). `ranked_documents`
reads such a list once for all of them: each index must be a distinct position among the
documents sent and each score a finite number, or the answer is a `ProtocolError`; the
document's text is the caller's own (`RerankRequest.documents[index]`), whether or not
the provider echoed it. `is_index` and `is_finite_score` are those two rules, which
`_rerank.check_reply` applies again to every adapter's reply.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeGuard

from .._errors import ProtocolError
from .._providers._wire import as_dict, as_list, opt_dict, opt_int, opt_str
from .._types import Usage
from ._types import RankedDocument, RerankReply, RerankRequest
from ._wire import _post_json

if TYPE_CHECKING:
    from .._adapters.base import HTTPAdapter

__all__ = [
    "is_finite_score",
    "is_index",
    "ranked_documents",
    "ranking_reply",
    "rerank_body",
    "total_tokens_usage",
]


def is_index(value: object) -> TypeGuard[int]:
    """Whether `value` is an integer, not a bool (a document's position)."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_finite_score(value: object) -> TypeGuard[int | float]:
    """Whether `value` is a finite number, not a bool (a relevance score)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def rerank_body(request: RerankRequest, top_key: str = "top_n", **fixed: Any) -> dict[str, Any]:
    """The body of a rerank request in the common shape (Cohere's, Voyage AI's, Jina
    AI's): `{"model", "query", "documents", **fixed}`, `top_n` as `top_key` when set, and
    `provider_options` merged in last."""
    body: dict[str, Any] = {
        "model": request.model,
        "query": request.query,
        "documents": list(request.documents),
        **fixed,
    }
    if request.top_n is not None:
        body[top_key] = request.top_n
    body.update(request.provider_options)
    return body


async def ranking_reply(
    adapter: HTTPAdapter, request: RerankRequest, path: str, body: Mapping[str, Any], where: str
) -> RerankReply:
    """POST `body` to `path` and read an answer `{where: [{index, relevance_score}],
    "model"?, "usage"?: {"total_tokens"}}` (Voyage AI's `data`, Jina AI's `results`).

    Raises:
        ProtocolError: For an answer that breaks that shape (`ranked_documents`,
            `total_tokens_usage`).
    """
    pid = adapter.instance_id
    payload = as_dict(await _post_json(adapter, path, body, request=request), pid, "body")
    return RerankReply(
        ranked=ranked_documents(adapter, request, payload.get(where), where),
        usage=total_tokens_usage(payload, pid),
        model=opt_str(payload.get("model"), pid, "model"),
    )


def ranked_documents(
    adapter: HTTPAdapter,
    request: RerankRequest,
    entries: Any,
    where: str,
    *,
    score_key: str = "relevance_score",
) -> tuple[RankedDocument, ...]:
    """The ranked documents of one answer, in the order the provider listed them.

    Args:
        adapter: The adapter that read the answer (for the error's provider).
        request: The request answered.
        entries: The answer's list of entries (checked to be a list of objects).
        where: Where the list sits in the answer, for error messages (`"data"`).
        score_key: The field holding each entry's score.

    Raises:
        ProtocolError: For anything but a list of objects, each with a distinct `index`
            among the documents sent and a finite numeric score.
    """
    pid = adapter.instance_id
    count = len(request.documents)
    seen: set[int] = set()
    ranked: list[RankedDocument] = []
    for i, item in enumerate(as_list(entries, pid, where)):
        entry = as_dict(item, pid, f"{where}[{i}]")
        index = entry.get("index")
        if not is_index(index) or not 0 <= index < count or index in seen:
            raise ProtocolError(
                f"{pid}: {where}[{i}].index is {index!r}, not a distinct position among the "
                f"{count} document(s) sent",
                provider=pid,
            )
        score = entry.get(score_key)
        if not is_finite_score(score):
            raise ProtocolError(
                f"{pid}: {where}[{i}].{score_key} is {score!r}, not a finite number",
                provider=pid,
            )
        seen.add(index)
        ranked.append(RankedDocument(index, float(score), request.documents[index]))
    return tuple(ranked)


def total_tokens_usage(payload: Mapping[str, Any], provider: str) -> Usage:
    """`usage.total_tokens` of an answer (Voyage AI's and Jina AI's), as input tokens:
    a ranking produces none. An answer without `usage` has unknown usage.

    Raises:
        ProtocolError: For a `usage` that is not an object, or a count that is not an
            integer.
    """
    usage = opt_dict(payload.get("usage"), provider, "usage")
    tokens = None if usage is None else opt_int(usage.get("total_tokens"), provider, "usage")
    return Usage(input_tokens=tokens, total_tokens=tokens)
