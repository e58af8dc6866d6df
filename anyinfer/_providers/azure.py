"""Azure AI Foundry: Azure OpenAI deployments and Azure AI model inference endpoints.

Both speak OpenAI Chat Completions with Azure's additions, so `AzureFoundryAdapter` is
an `OpenAICompatAdapter` with Azure routing, auth and error reading:

- routing, chosen by `ProviderSettings.options["api"]`:

  - `"openai-deployments"`: `POST {base}/openai/deployments/{model}/chat/completions
    ?api-version=...`; the target's model is the deployment name.
  - `"model-inference"`: `POST {base}/models/chat/completions?api-version=...`; the
    target's model is sent as `model` in the body.
  - `"openai-v1"`: `POST {base}/openai/v1/chat/completions` (no `api-version`); the
    target's model is the deployment name, sent in the body.

  The default is `"openai-deployments"` when the base URL's host ends with
  `openai.azure.com` or `cognitiveservices.azure.com` (Azure OpenAI resources), and
  `"model-inference"` otherwise (`*.services.ai.azure.com`, serverless endpoints). A
  base URL may be given with or without its `/openai`, `/openai/v1` or `/models` tail.
- `api-version`: `ProviderSettings.api_version`, defaulting to `DEFAULT_API_VERSIONS`
  (`2024-10-21`, a generally available version, for deployments; `2024-05-01-preview` for model
  inference).
- auth: the key goes in the `api-key` header; `options["auth"] = "bearer"` sends it as
  `Authorization: Bearer` instead (a Microsoft Entra ID token).
- responses: the first stream chunk with empty `choices` and `prompt_filter_results`,
  per-choice `content_filter_results` (categories marked `filtered` become result
  warnings), the `content_filter` finish reason, and error bodies whose `code` (or
  `innererror.code == "ResponsibleAIPolicyViolation"`) says `content_filter` become
  `ContentFilterError`; `context_length_exceeded` a `ContextWindowError`; 429s carry
  `retry-after-ms` / `retry-after` as `RateLimitError.retry_after`.
- embeddings (`embed()`): `POST {base}/openai/deployments/{model}/embeddings
  ?api-version=...` (deployments), `POST {base}/openai/v1/embeddings` (v1) or
  `POST {base}/models/embeddings?api-version=...` (model inference, which also takes
  `input_type`), OpenAI's body and answer (base64 or float vectors,
  `usage.prompt_tokens`), at most 2048 inputs a request.
- discovery (`models()`): deployments list `GET {base}/openai/models?api-version=` - the
  models the resource can serve, with their capabilities and lifecycle (listing
  *deployments* needs the Azure management API, which this adapter does not call);
  model inference asks `GET {base}/models/info?api-version=` for the endpoint's model.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Literal
from urllib.parse import quote

import httpx

from .._adapters.base import DiscoveredModel
from .._adapters.profile import AdapterProfile
from .._client.instance import base_url_env
from .._errors import ConfigError
from .._request import GenerationRequest
from .._settings import ProviderSettings
from ._wire import as_dict, as_list, opt_dict, opt_int, opt_str
from .openai_compat import OpenAICompatAdapter, configured_base_url

if TYPE_CHECKING:
    from .._embed._types import EmbedReply, EmbedRequest

__all__ = ["AZURE_APIS", "AzureAPI", "AzureFoundryAdapter", "DEFAULT_API_VERSIONS"]

AzureAPI = Literal["openai-deployments", "model-inference", "openai-v1"]
"""Which Azure route generation requests take (`ProviderSettings.options["api"]`)."""

AZURE_APIS: tuple[AzureAPI, ...] = ("openai-deployments", "model-inference", "openai-v1")

DEFAULT_API_VERSIONS: Mapping[str, str | None] = {
    "openai-deployments": "2024-10-21",
    "model-inference": "2024-05-01-preview",
    "openai-v1": None,
}
"""The `api-version` sent when `ProviderSettings.api_version` is not set."""

_OPENAI_HOSTS = ("openai.azure.com", "cognitiveservices.azure.com")
_ROOT_TAILS = ("/openai/v1", "/openai", "/models")
_AUTH = ("api-key", "bearer")


def default_api(base_url: str) -> AzureAPI:
    """The route a base URL implies: deployments for Azure OpenAI hosts."""
    host = (httpx.URL(base_url).host or "").lower()
    if any(host == h or host.endswith("." + h) for h in _OPENAI_HOSTS):
        return "openai-deployments"
    return "model-inference"


class AzureFoundryAdapter(OpenAICompatAdapter):
    """Azure OpenAI deployments and Azure AI model inference endpoints.

    `base_url` is required: the resource endpoint, e.g.
    `https://my-resource.openai.azure.com` or `https://my-hub.services.ai.azure.com`.
    `ProviderSettings.options` keys: `api` (see `AZURE_APIS`), `auth` (`"api-key"`,
    the default, or `"bearer"`), and the `engine` / `quirks` keys of
    `OpenAICompatAdapter` (the engine defaults to `azure-openai` for the OpenAI routes
    and `azure-inference` for model inference).

    Attributes:
        api: The route in use.
        api_version: The `api-version` query value, or `None` when none is sent.
    """

    provider_id: ClassVar[str] = "azure-foundry"
    profile: ClassVar[AdapterProfile] = AdapterProfile(
        aliases=("azure",), conformance_dialect="azure-openai"
    )
    default_base_url: ClassVar[str | None] = None
    api_key_env: ClassVar[str | None] = "AZURE_OPENAI_API_KEY"
    default_engine: ClassVar[str] = "azure-openai"
    option_keys: ClassVar[frozenset[str]] = frozenset({"engine", "quirks", "api", "auth"})
    embed_max_batch: ClassVar[int] = 2048
    """Azure OpenAI's embeddings take at most 2048 inputs a request (its REST reference)."""

    def __init__(self, settings: ProviderSettings) -> None:
        self.api = _api_of(settings)
        _auth_of(settings)  # fail on a bad value before anything is built
        super().__init__(settings)
        self.base_url = _azure_root(self.base_url)
        self.api_version = settings.api_version or DEFAULT_API_VERSIONS[self.api]

    def engine_for(self, settings: ProviderSettings) -> str:
        """`azure-inference` for model inference, `azure-openai` otherwise."""
        return "azure-inference" if _api_of(settings) == "model-inference" else "azure-openai"

    def default_headers(self) -> dict[str, str]:
        """`api-key` (or `Authorization: Bearer` with `auth="bearer"`) plus the headers."""
        headers = dict(self.settings.headers)
        if _auth_of(self.settings) == "bearer":
            return self.with_bearer(headers)
        key = self.settings.api_key
        if key:
            headers.setdefault("api-key", key)
        return headers

    # --- routing -------------------------------------------------------------------

    def chat_path(self, request: GenerationRequest) -> str:
        """The Azure route for the chosen `api`."""
        if self.api == "openai-deployments":
            return f"/openai/deployments/{quote(request.model, safe='')}/chat/completions"
        if self.api == "openai-v1":
            return "/openai/v1/chat/completions"
        return "/models/chat/completions"

    def chat_params(self) -> Mapping[str, str] | None:
        """`api-version`, when one applies."""
        return {"api-version": self.api_version} if self.api_version else None

    def chat_headers(self, request: GenerationRequest) -> Mapping[str, str] | None:
        """Model inference refuses unknown body fields unless told to pass them on."""
        if self.api == "model-inference" and request.provider_options:
            return {"extra-parameters": "pass-through"}
        return None

    # --- embeddings ----------------------------------------------------------------

    def embeddings_route(self, model: str) -> str:
        """The embeddings path, with its `api-version` query, for the chosen `api`."""
        if self.api == "openai-deployments":
            path = f"/openai/deployments/{quote(model, safe='')}/embeddings"
        elif self.api == "openai-v1":
            path = "/openai/v1/embeddings"
        else:
            path = "/models/embeddings"
        if self.api_version:
            path += f"?api-version={quote(self.api_version, safe='')}"
        return path

    async def embed(self, request: EmbedRequest) -> EmbedReply:
        """Embed one batch at the route's `/embeddings`, with OpenAI's body and answer.

        Azure OpenAI (deployments, v1) reads it as OpenAI does
        (`anyinfer._embed._wire.openai_embed`); the target's model is the deployment
        name, also sent as `model`, as the `openai` SDK sends it. Azure AI model
        inference takes the same body plus `input_type` (`query`, `document`, `text`),
        and `extra-parameters: pass-through` when provider options add fields of their
        own, as for chat.
        """
        from .._embed._wire import _post_json, embed_body, openai_embed, openai_shaped_reply

        path = self.embeddings_route(request.model)
        if self.api != "model-inference":
            return await openai_embed(self, request, path)
        body = embed_body(request, "input", True, input_type_key="input_type")
        headers = {"extra-parameters": "pass-through"} if request.provider_options else None
        payload = await _post_json(self, path, body, headers, request=request)
        return openai_shaped_reply(self, request, payload)

    # --- errors --------------------------------------------------------------------

    def error_message(self, body: bytes) -> tuple[str, str | None]:
        """Azure error bodies, reading a content-policy `innererror` as `content_filter`."""
        message, code = super().error_message(body)
        try:
            payload = json.loads(body)
        except (ValueError, UnicodeDecodeError):
            return message, code
        err = payload.get("error") if isinstance(payload, dict) else None
        inner = err.get("innererror") if isinstance(err, dict) else None
        if isinstance(inner, dict) and (
            inner.get("code") == "ResponsibleAIPolicyViolation"
            or "content_filter_result" in inner
            or "content_filter_results" in inner
        ):
            return message, "content_filter"
        return message, code

    # --- discovery -----------------------------------------------------------------

    async def models(self) -> Sequence[DiscoveredModel]:
        """The resource's models (OpenAI routes) or the endpoint's model (inference)."""
        if self.api == "model-inference":
            return await self._model_info()
        path = "/openai/v1/models" if self.api == "openai-v1" else "/openai/models"
        payload = await self.fetch_json(path, params=self.chat_params())
        pid = self.instance_id
        found: list[DiscoveredModel] = []
        for entry in as_list(as_dict(payload, pid, "models").get("data"), pid, "models.data"):
            entry = as_dict(entry, pid, "models.data[]")
            model_id = opt_str(entry.get("id"), pid, "models.data[].id")
            if not model_id:
                continue
            facts: dict[str, Any] = {}
            caps = opt_dict(entry.get("capabilities"), pid, "models.data[].capabilities")
            for name, value in (caps or {}).items():
                if isinstance(value, bool):
                    facts[name] = value
            for name in ("lifecycle_status", "status"):
                value = entry.get(name)
                if isinstance(value, str):
                    facts[name] = value
            deprecation = opt_dict(entry.get("deprecation"), pid, "models.data[].deprecation")
            if deprecation:
                facts["deprecation"] = dict(deprecation)
            window = opt_int(entry.get("context_window"), pid, "models.data[].context_window")
            found.append(
                DiscoveredModel(pid, model_id, context_window=window, facts=facts, raw=entry)
            )
        return found

    async def _model_info(self) -> list[DiscoveredModel]:
        payload = await self.fetch_json("/models/info", params=self.chat_params())
        pid = self.instance_id
        info = as_dict(payload, pid, "models/info")
        name = opt_str(info.get("model_name"), pid, "model_name")
        if not name:
            return []
        facts: dict[str, Any] = {}
        for key, fact in (("model_type", "model_type"), ("model_provider_name", "provider")):
            value = info.get(key)
            if isinstance(value, str):
                facts[fact] = value
        return [DiscoveredModel(pid, name, facts=facts, raw=info)]


def _api_of(settings: ProviderSettings) -> AzureAPI:
    chosen = settings.options.get("api")
    if chosen is None:
        base = configured_base_url(settings)
        if not base:
            raise ConfigError(
                f"provider {settings.instance_id!r} (azure-foundry) needs base_url (or "
                f"{base_url_env(settings.instance_id)}): the resource endpoint, e.g. "
                "'https://my-resource.openai.azure.com'",
                provider=settings.instance_id,
            )
        return default_api(base)
    for api in AZURE_APIS:
        if chosen == api:
            return api
    raise ConfigError(
        f"options['api'] must be one of {', '.join(AZURE_APIS)}, got {chosen!r}",
        provider=settings.instance_id,
    )


def _auth_of(settings: ProviderSettings) -> str:
    auth = settings.options.get("auth", "api-key")
    if auth not in _AUTH:
        raise ConfigError(
            f"options['auth'] must be 'api-key' or 'bearer', got {auth!r}",
            provider=settings.instance_id,
        )
    return str(auth)


def _azure_root(base_url: str) -> str:
    root = base_url.rstrip("/")
    for tail in _ROOT_TAILS:
        if root.endswith(tail):
            return root[: -len(tail)]
    return root
