"""Azure OpenAI / Azure AI Foundry chat completions.

OpenAI Chat Completions with Azure's additions, as Azure's documentation and recorded
traffic (`shared/wire`: pydantic-ai's `test_azure_provider_call`) show them: a first
stream chunk with empty `choices`, empty `id`/`model`/`object` and the
`prompt_filter_results` of the prompt; a `content_filter_results` object on every choice
(empty on the role and finish chunks, per-category verdicts on content chunks, a
`filtered: true` verdict when the finish reason is `content_filter`); the same
annotations on a whole `chat.completion` (completion verdicts include
`protected_material_code` / `protected_material_text`, prompt verdicts `jailbreak`);
an `apim-request-id` header; and Azure's error bodies
(`{"error": {"code", "message", "param", "type", "status"}}`, a content-policy refusal
with its `innererror`), with `retry-after` and `retry-after-ms` on 429s. Azure's chunks
have no `service_tier` or `obfuscation` field, and their keys are sorted.

Requests are routed by path: `…/openai/deployments/{name}/chat/completions`,
`…/openai/v1/chat/completions` and `…/models/chat/completions` (Azure AI model
inference) are all generation requests; `…/openai/deployments/{name}/embeddings`,
`…/openai/v1/embeddings` and `…/models/embeddings` embedding requests (OpenAI's shapes,
as Azure's REST reference gives them: at most 2048 inputs, base64 or float vectors);
`…/openai/models` and `…/openai/v1/models` list models. The `api-version` query
parameter is the client's business and not checked.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from .._script import Fault, Frame, Rendered, Script
from ._base import WireProfile, json_bytes
from ._ids import HEX, ScriptIds
from .openai_chat import OpenAIChatDialect

__all__ = ["AzureOpenAIDialect"]

_GENERATION = re.compile(
    r"(?:/openai/deployments/[^/]+|/openai/v1|/models)/chat/completions/?$",
)
_MODELS = re.compile(r"/openai(?:/v1)?/models/?$")
_EMBEDDINGS = re.compile(r"(?:/openai/deployments/[^/]+|/openai/v1|/models)/embeddings/?$")

_SAFE = {"filtered": False, "severity": "safe"}
_CATEGORIES = ("hate", "self_harm", "sexual", "violence")


def _verdicts() -> dict[str, Any]:
    return {c: dict(_SAFE) for c in _CATEGORIES}


def _prompt_filter_results() -> list[dict[str, Any]]:
    results: dict[str, Any] = _verdicts()
    results["jailbreak"] = {"filtered": False, "detected": False}
    return [{"prompt_index": 0, "content_filter_results": results}]


def _completion_verdicts() -> dict[str, Any]:
    results = _verdicts()
    results["protected_material_code"] = {"filtered": False, "detected": False}
    results["protected_material_text"] = {"filtered": False, "detected": False}
    return dict(sorted(results.items()))


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
    checks_content_parts = False  # its content-part schema is not OpenAI's, unverified
    base_path = ""
    profile = WireProfile(
        # Azure OpenAI honours `include_usage` (api-version 2024-10-21 and later); the
        # model-inference route may report none. The usage object is OpenAI's, details
        # included (see the recording).
        usage_placements=("trailing", "none"),
        usage_fields=("input_tokens", "output_tokens", "cache_read_tokens", "reasoning_tokens"),
        reasoning=False,
        keepalives=False,
        # No recording or document shows Azure's error frame inside a stream; the
        # rendered one (OpenAI's) is for the hostile world only.
        in_stream_errors=(),
        line_endings=("lf",),
        text_with_tools=True,
        max_tool_calls=3,
    )

    def refuses(self, script: Script) -> bool:
        """Never: Azure stops a filtered completion with `content_filter` and verdicts."""
        return False

    def envelope(self, script: Script, ids: ScriptIds) -> dict[str, Any]:
        """OpenAI's envelope without `service_tier`."""
        env = super().envelope(script, ids)
        del env["service_tier"]
        return env

    def _chunk(
        self,
        script: Script,
        ids: ScriptIds,
        n: int,
        choices: list[dict[str, Any]],
        usage: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        chunk = super()._chunk(script, ids, n, choices, usage)
        del chunk["obfuscation"]
        return dict(sorted(chunk.items()))

    def headers(self, script: Script, *, stream: bool) -> tuple[tuple[str, str], ...]:
        """The content type and Azure's `apim-request-id`."""
        kind = f"{self.content_type}; charset=utf-8" if stream else "application/json"
        ids = ScriptIds(script, self.name)
        parts = [ids.token(f"apim{n}", size, HEX) for n, size in enumerate((8, 4, 4, 4, 12))]
        return (("content-type", kind), ("apim-request-id", "-".join(parts)))

    @staticmethod
    def _choice(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        if finish_reason == "content_filter":
            results: dict[str, Any] = _filtered_verdicts()
        elif delta and "role" not in delta:
            results = _completion_verdicts()
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
            verdicts = _filtered_verdicts() if filtered else _completion_verdicts()
            choice["content_filter_results"] = verdicts
            choice["message"].pop("annotations", None)  # not in Azure's message
        payload["choices"] = [dict(sorted(c.items())) for c in payload["choices"]]
        payload = dict(sorted(payload.items()))
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

    def is_embedding(self, method: str, path: str) -> bool:
        """`POST …/openai/deployments/{name}/embeddings`, `…/openai/v1/embeddings` or
        `…/models/embeddings` (Azure AI model inference): OpenAI's embeddings body and
        answer (`dialects._embeddings`), refused in Azure's error envelope."""
        return method == "POST" and _EMBEDDINGS.search(path) is not None

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
