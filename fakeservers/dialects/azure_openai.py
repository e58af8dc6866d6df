"""Azure OpenAI / Azure AI Foundry chat completions.

OpenAI Chat Completions with Azure's additions, as recorded traffic shows them: a first
stream chunk with empty `choices`, empty `id`/`model`/`object` and the
`prompt_filter_results` of the prompt; a `content_filter_results` object on every choice
(empty on the role and finish chunks, per-category verdicts on content chunks, a
`filtered: true` verdict when the finish reason is `content_filter`); the same
annotations on a whole `chat.completion`; and Azure's error bodies
(`{"error": {"code", "message", "param", "type", "status"}}`, a content-policy refusal
with its `innererror`), with `retry-after` and `retry-after-ms` on 429s.

Requests are routed by path: `…/openai/deployments/{name}/chat/completions`,
`…/openai/v1/chat/completions` and `…/models/chat/completions` (Azure AI model
inference) are all generation requests; `…/openai/models` and `…/openai/v1/models` list
models. The `api-version` query parameter is the client's business and not checked.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from .._script import Fault, Frame, Rendered, Script
from ._base import json_bytes
from .openai_chat import OpenAIChatDialect

__all__ = ["AzureOpenAIDialect"]

_GENERATION = re.compile(
    r"(?:/openai/deployments/[^/]+|/openai/v1|/models)/chat/completions/?$",
)
_MODELS = re.compile(r"/openai(?:/v1)?/models/?$")

_SAFE = {"filtered": False, "severity": "safe"}
_CATEGORIES = ("hate", "self_harm", "sexual", "violence")


def _verdicts() -> dict[str, Any]:
    return {c: dict(_SAFE) for c in _CATEGORIES}


def _prompt_filter_results() -> list[dict[str, Any]]:
    results: dict[str, Any] = _verdicts()
    results["jailbreak"] = {"filtered": False, "detected": False}
    return [{"prompt_index": 0, "content_filter_results": results}]


def _filtered_verdicts() -> dict[str, Any]:
    results = _verdicts()
    results["violence"] = {"filtered": True, "severity": "medium"}
    return results


class AzureOpenAIDialect(OpenAIChatDialect):
    """Azure OpenAI deployments and Azure AI model inference chat completions.

    A script whose finish reason is `content_filter` marks the `violence` category
    `filtered` (severity `medium`) on its finish choice, as Azure does when it stops a
    completion.
    """

    name = "azure-openai"
    base_path = ""

    @staticmethod
    def _choice(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        if finish_reason == "content_filter":
            results: dict[str, Any] = _filtered_verdicts()
        elif delta and set(delta) != {"role", "content"}:
            results = _verdicts()
        else:
            results = {}
        return {
            "content_filter_results": results,
            "delta": delta,
            "finish_reason": finish_reason,
            "index": 0,
            "logprobs": None,
        }

    def _render_stream(self, script: Script) -> Rendered:
        inner = super()._render_stream(
            replace(script, keepalives=(), line_ending="lf", multiline_data=False)
        )
        first = {
            "choices": [],
            "created": 0,
            "id": "",
            "model": "",
            "object": "",
            "prompt_filter_results": _prompt_filter_results(),
        }
        frames = (Frame(self._sse(first)), *inner.frames)
        return replace(inner, frames=self.finish_frames(frames, script))

    def _render_whole(self, script: Script) -> Rendered:
        inner = super()._render_whole(script)
        (frame,) = inner.frames
        payload = json.loads(frame.data)
        payload["prompt_filter_results"] = _prompt_filter_results()
        for choice in payload["choices"]:
            filtered = choice.get("finish_reason") == "content_filter"
            choice["content_filter_results"] = _filtered_verdicts() if filtered else _verdicts()
        return replace(inner, frames=(replace(frame, data=json_bytes(payload)),))

    def render_error(self, fault: Fault) -> Rendered:
        """Azure's error body for `fault`, with Azure's retry headers on a 429.

        A `content_filter` code renders the content-policy refusal (400-style body with
        `param: "prompt"` and an `innererror` naming `ResponsibleAIPolicyViolation`);
        a 404 without a code renders `DeploymentNotFound`.

        Args:
            fault: The `status` fault.

        Returns:
            The error response.
        """
        code = fault.code
        if code is None:
            code = "DeploymentNotFound" if fault.status == 404 else str(fault.status)
        error: dict[str, Any] = {
            "code": code,
            "message": fault.message,
            "param": None,
            "type": None,
            "status": fault.status,
        }
        if "content_filter" in code:
            error["param"] = "prompt"
            error["innererror"] = {
                "code": "ResponsibleAIPolicyViolation",
                "content_filter_result": _filtered_verdicts(),
            }
        headers: list[tuple[str, str]] = [("content-type", "application/json")]
        if fault.retry_after is not None:
            headers.append(("retry-after", str(math.ceil(fault.retry_after))))
            headers.append(("retry-after-ms", str(round(fault.retry_after * 1000))))
        return Rendered(fault.status, tuple(headers), (Frame(json_bytes({"error": error})),))

    def is_generation(self, method: str, path: str) -> bool:
        """`POST` to a deployment, the v1 route or the model-inference route."""
        return method == "POST" and _GENERATION.search(path) is not None

    def is_models(self, method: str, path: str) -> bool:
        """`GET …/openai/models` or `GET …/openai/v1/models`."""
        return method == "GET" and _MODELS.search(path) is not None

    def models_response(self, models: Sequence[str]) -> Rendered:
        """Azure OpenAI's model list: capabilities and lifecycle per model.

        Args:
            models: Model names to list.

        Returns:
            A 200 response.
        """
        payload = {
            "object": "list",
            "data": [
                {
                    "id": m,
                    "object": "model",
                    "status": "succeeded",
                    "created_at": 1_700_000_000,
                    "lifecycle_status": "generally-available",
                    "capabilities": {
                        "chat_completion": True,
                        "completion": False,
                        "embeddings": False,
                        "fine_tune": False,
                        "inference": True,
                    },
                    "deprecation": {"inference": 1_800_000_000},
                }
                for m in models
            ],
        }
        return Rendered(
            200,
            (("content-type", "application/json"),),
            (Frame(json_bytes(payload), sentinel=True),),
        )
