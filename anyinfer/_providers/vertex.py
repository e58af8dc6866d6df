"""Google Vertex AI: Gemini (`vertex-gemini`) and Anthropic's Claude (`vertex-anthropic`).

Vertex AI serves Google's Gemini models in the Gemini API's request and response shapes,
and Anthropic's Claude models in the Anthropic Messages shapes, at Google Cloud
project/location URLs and with Google Cloud credentials. The two adapters here are
therefore `GeminiAdapter` and `AnthropicAdapter` with Vertex routing and auth: every
request-mapping and decoding rule is theirs, and only what Vertex changes lives here.

**Endpoints.** The base URL is the API root, `https://{location}-aiplatform.googleapis.com/v1`
(`https://aiplatform.googleapis.com/v1` for the `global` location, and
`https://aiplatform.{us,eu}.rep.googleapis.com/v1` for the `us` and `eu` multi-regions);
`ProviderSettings.api_version` (e.g. `"v1beta1"`) swaps the version. Requests go to

- Gemini: `{base}/projects/{project}/locations/{location}/publishers/google/models/{model}`
  `:generateContent`, or `:streamGenerateContent?alt=sse` for a stream;
- Claude: `{base}/projects/{project}/locations/{location}/publishers/anthropic/models/{model}`
  `:rawPredict`, or `:streamRawPredict` for a stream. The body is Anthropic's, without
  `model` (it is in the URL) and with `anthropic_version: "vertex-2023-10-16"`
  (`VERTEX_ANTHROPIC_VERSION`; a `provider_options` value wins); streams keep
  `"stream": true`.

A model given as a resource name (`publishers/meta/models/...`, or a whole
`projects/.../endpoints/...` name) is used as it is. A configured base URL whose path
already names `/projects/{project}/locations/{location}` (a gateway in front of Vertex) is
used as that location's root: nothing more is added before `/publishers/...`.

**Project and location** follow the one rule in `anyinfer._client.instance`
(`cloud_placement`): `options["project"]`, `ANYINFER_<INSTANCE>_PROJECT`, then
`GOOGLE_CLOUD_PROJECT` (and `ANTHROPIC_VERTEX_PROJECT_ID` for Claude), else the project of
the application default credentials; `options["location"]`, `ANYINFER_<INSTANCE>_LOCATION`,
`GOOGLE_CLOUD_LOCATION`, `CLOUD_ML_REGION`, else `global`.

**Credentials**, the first that applies:

1. `options["access_token"]`: an OAuth2 access token, sent as `Authorization: Bearer`
   (never refreshed);
2. `options["credentials"]`: a `google.auth.credentials.Credentials` object;
3. `options["service_account_file"]`: a service-account key file (JSON), read when the
   adapter is built;
4. `api_key` (`ANYINFER_<INSTANCE>_API_KEY`): for Gemini, a Google Cloud API key, sent as
   `x-goog-api-key`; without a project it is Vertex AI express mode (the global host, no
   project or location in the path). Vertex serves Claude with OAuth2 only, so for
   `vertex-anthropic` the key is taken as an access token;
5. application default credentials (`google.auth.default()`: `GOOGLE_APPLICATION_CREDENTIALS`,
   `gcloud auth application-default login`, the metadata server).

Kinds 2, 3 and 5 need `google-auth` (`pip install 'anyinfer-kit[vertex]'`), imported only
when an adapter that uses them is built. Tokens are fetched and refreshed in a worker
thread (`asyncio.to_thread`), so the event loop never waits on Google's token endpoint;
a token is reused until `REFRESH_MARGIN_S` before it expires, and concurrent requests
that find it stale share one refresh. Every token is registered for redaction.

**Errors.** Vertex's own error bodies are Google's `{"error": {"code", "message",
"status"}}` (sometimes in a list); they go through the one classifier with the Gemini
status-name hints (`STATUS_NAME_KINDS`). For Claude, errors the model server raises keep
Anthropic's shape and hints. A failed token fetch is an `AuthenticationError` (no
credentials found, or the token endpoint refused them) or a retryable `ProviderError`
(the token endpoint could not be reached).

**Embeddings** use Vertex's own endpoints, not the Gemini API's: `:predict`
(`{"instances": [{"content", "task_type"}], "parameters": {"outputDimensionality"}}`, up
to `PREDICT_MAX_INSTANCES` a request, one for `gemini-embedding-001`, which Vertex
documents as taking one instance) answered by `predictions[].embeddings.values` and
`statistics.token_count`; and, for `gemini-embedding-2*`, `:embedContent`, one content a
request (`{"content", "embedContentConfig"}`, as `google-genai` sends it on Vertex),
answered by `embedding.values` and `usageMetadata.promptTokenCount`. One-a-request models
fan a batch out (`anyinfer._embed._fanout`).

Model discovery is not offered (Vertex lists publisher models through Model Garden, a
different API): `models()` raises `ConfigError`, and `health()` reports not-ready.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import os
from array import array
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, ClassVar, Literal
from urllib.parse import quote, urlsplit

from .._adapters.base import Adapter, DiscoveredModel, HTTPAdapter
from .._adapters.errormap import ErrorKind
from .._adapters.profile import AdapterProfile, UsageConvention
from .._client.credentials import check_secret
from .._client.instance import CloudPlacement, cloud_placement, instance_env, resolve_base_url
from .._errors import AuthenticationError, ConfigError, ProtocolError, ProviderError
from .._extras import missing_hint
from .._knowledge.capabilities import ModelCapabilities
from .._request import GenerationRequest
from .._settings import ProviderSettings
from .._types import Usage
from .._values import value_class
from ._wire import as_dict, as_list, opt_dict, opt_int
from .anthropic import AnthropicAdapter
from .gemini import STATUS_NAME_KINDS, GeminiAdapter, merge_options

if TYPE_CHECKING:
    from google.auth.credentials import Credentials

    from .._embed._types import EmbedReply, EmbedRequest

__all__ = [
    "DEFAULT_LOCATION",
    "LOCATION_ENVS",
    "REFRESH_MARGIN_S",
    "SCOPES",
    "VERTEX_ANTHROPIC_VERSION",
    "GoogleAuth",
    "VertexAnthropicAdapter",
    "VertexGeminiAdapter",
    "resource_name",
    "vertex_base_url",
    "vertex_host",
]

VERTEX_ANTHROPIC_VERSION = "vertex-2023-10-16"
"""The `anthropic_version` body field Vertex AI requires for Claude models."""

SCOPES: tuple[str, ...] = ("https://www.googleapis.com/auth/cloud-platform",)
"""The OAuth2 scope Vertex AI calls need."""

DEFAULT_LOCATION = "global"
"""The location used when nothing names one."""

LOCATION_ENVS: tuple[str, ...] = ("GOOGLE_CLOUD_LOCATION", "CLOUD_ML_REGION")
"""Variables read for the location, in order (after `ANYINFER_<INSTANCE>_LOCATION`)."""

DEFAULT_API_VERSION = "v1"
"""The API version in the default base URL (`ProviderSettings.api_version` swaps it)."""

REFRESH_MARGIN_S = 300.0
"""A token is refreshed this many seconds before its expiry."""

AuthKind = Literal["access_token", "credentials", "service_account", "api_key", "adc"]
"""Where an instance's credential comes from (see the module documentation)."""

_MULTI_REGIONS = frozenset({"us", "eu"})


def vertex_host(location: str) -> str:
    """The API host for a location: `aiplatform.googleapis.com` for `global`,
    `aiplatform.{us,eu}.rep.googleapis.com` for the multi-regions, else
    `{location}-aiplatform.googleapis.com`."""
    if location == "global":
        return "aiplatform.googleapis.com"
    if location in _MULTI_REGIONS:
        return f"aiplatform.{location}.rep.googleapis.com"
    return f"{location}-aiplatform.googleapis.com"


def vertex_base_url(location: str, version: str = DEFAULT_API_VERSION) -> str:
    """The API root for a location and API version (`https://{host}/{version}`)."""
    return f"https://{vertex_host(location)}/{version.strip('/')}"


def resource_name(model: str, publisher: str) -> str:
    """A model's resource name: `publishers/{publisher}/models/{model}`, or the model as
    given when it already is one (it contains a `/`)."""
    name = model.strip().strip("/")
    return name if "/" in name else f"publishers/{publisher}/models/{name}"


def _require_google_auth(instance: str) -> None:
    """Import google-auth and requests (its token transport), or raise the one-line hint."""
    absent: list[str] = []
    try:
        import google.auth  # noqa: F401
    except ImportError:
        absent.append("google")
    try:
        import requests  # noqa: F401
    except ImportError:
        absent.append("requests")
    if absent:
        raise ConfigError(
            missing_hint(f"{instance} with Google Cloud credentials", absent), provider=instance
        )


def _now_utc() -> _dt.datetime:
    """Now, as google-auth keeps `Credentials.expiry`: a naive UTC datetime."""
    return _dt.datetime.now(_dt.UTC).replace(tzinfo=None)


class GoogleAuth:
    """Where one Vertex instance's bearer tokens come from, and their cache.

    Built from a static token, a google-auth `Credentials` object, or a loader that
    produces credentials (and perhaps a project) on first use; `api_key` mode sends no
    bearer at all.

    Attributes:
        kind: Which credential the instance uses.
        project: The project the credentials name (application default credentials and
            service-account files carry one), once known.
        refreshes: How many token fetches have run (for tests and diagnostics).
    """

    def __init__(
        self,
        kind: AuthKind,
        *,
        provider: str,
        token: str | None = None,
        credentials: Credentials | None = None,
        loader: Callable[[], tuple[Credentials, str | None]] | None = None,
        project: str | None = None,
    ) -> None:
        self.kind: AuthKind = kind
        self.provider = provider
        self.project = project
        self.refreshes = 0
        self._token = token
        self._credentials = credentials
        self._loader = loader
        self._inflight: asyncio.Future[None] | None = None
        self._session: Any = None

    def _fresh(self) -> str | None:
        """The cached token while it has more than `REFRESH_MARGIN_S` left, else `None`."""
        creds = self._credentials
        if creds is None:
            return None
        token = getattr(creds, "token", None)
        if not isinstance(token, str) or not token:
            return None
        expiry = getattr(creds, "expiry", None)
        if (
            isinstance(expiry, _dt.datetime)
            and (expiry - _now_utc()).total_seconds() <= REFRESH_MARGIN_S
        ):
            return None
        return token

    async def bearer(self, phase: str = "generate") -> str | None:
        """The `Authorization: Bearer` token for the next request (`None` in `api_key` mode).

        Refreshes in a worker thread when the cached token is missing or near its expiry;
        callers that arrive while a refresh runs wait for that one.

        Raises:
            AuthenticationError: No credentials, or the token endpoint refused them.
            ProviderError: The token endpoint could not be reached (retryable).
        """
        if self.kind == "api_key":
            return None
        if self._token is not None:  # a static access token
            return self._token
        token = self._fresh()
        if token is not None:
            return token
        inflight = self._inflight
        if inflight is None or inflight.done():
            inflight = self._inflight = asyncio.ensure_future(asyncio.to_thread(self._refresh))
        try:
            # Shielded: a caller cancelled mid-refresh does not cancel the others' refresh.
            await asyncio.shield(inflight)
        except Exception as exc:
            raise self._typed(exc, phase) from None
        creds = self._credentials
        token = getattr(creds, "token", None) if creds is not None else None
        if not isinstance(token, str) or not token:
            raise AuthenticationError(
                f"{self.provider}: Google credentials refreshed without an access token",
                provider=self.provider,
                phase=phase,
            )
        return token

    def _refresh(self) -> None:
        """Load the credentials if needed and fetch a token (runs in a worker thread)."""
        import google.auth.transport.requests as transport
        import requests

        if self._credentials is None:
            if self._loader is None:  # pragma: no cover - every kind but api_key has one
                raise RuntimeError("no credentials to refresh")
            self._credentials, project = self._loader()
            if project and not self.project:
                self.project = project
        if self._session is None:
            session = requests.Session()
            session.trust_env = False  # like every AnyInfer connection: no proxy variables
            self._session = session
        self._credentials.refresh(transport.Request(self._session))  # type: ignore[no-untyped-call]
        self.refreshes += 1
        token = getattr(self._credentials, "token", None)
        if isinstance(token, str) and token:
            check_secret(token, source="a Google OAuth2 token", provider=self.provider)

    def _typed(self, exc: Exception, phase: str) -> Exception:
        """A refresh failure as the typed error it stands for."""
        from google.auth import exceptions as google_errors

        if isinstance(exc, AuthenticationError | ProviderError | ConfigError):
            return exc
        detail = str(exc) or type(exc).__name__
        if isinstance(exc, google_errors.DefaultCredentialsError):
            return AuthenticationError(
                f"{self.provider}: no Google Cloud credentials found ({detail}); set "
                "options['service_account_file'], options['access_token'] or "
                "GOOGLE_APPLICATION_CREDENTIALS, or run `gcloud auth application-default login`",
                provider=self.provider,
                phase=phase,
            )
        if isinstance(exc, google_errors.TransportError):
            return ProviderError(
                f"{self.provider}: could not reach Google's token endpoint: {detail}",
                provider=self.provider,
                phase=phase,
                retryable=True,
            )
        if isinstance(exc, google_errors.GoogleAuthError):
            retryable = getattr(exc, "retryable", False) is True
            return AuthenticationError(
                f"{self.provider}: Google refused the credentials: {detail}",
                provider=self.provider,
                phase=phase,
                retryable=retryable,
            )
        return exc

    async def aclose(self) -> None:
        """Close the token endpoint's HTTP session."""
        session, self._session = self._session, None
        if session is not None:
            session.close()


def _service_account(path: Any, instance: str) -> Credentials:
    """Credentials from a service-account key file (read now, so a bad file fails early)."""
    from google.auth import exceptions as google_errors
    from google.oauth2 import service_account

    if not isinstance(path, str | os.PathLike) or not str(path):
        raise ConfigError(
            f"{instance}: options['service_account_file'] must be a path, "
            f"got {type(path).__name__}",
            provider=instance,
        )
    try:
        creds: Credentials = service_account.Credentials.from_service_account_file(  # type: ignore[no-untyped-call]
            str(path), scopes=SCOPES
        )
    except (OSError, ValueError, KeyError, google_errors.GoogleAuthError) as exc:
        raise ConfigError(
            f"{instance}: cannot read the service-account file {os.fspath(path)!r}: "
            f"{type(exc).__name__}: {exc}",
            provider=instance,
        ) from None
    return creds


def _default_credentials() -> tuple[Credentials, str | None]:
    import google.auth

    return google.auth.default(scopes=list(SCOPES))


@value_class
class _Plan:
    """How one instance authenticates and where its requests go."""

    auth: GoogleAuth
    placement: CloudPlacement
    api_key: str | None  # sent as x-goog-api-key (Gemini in api-key mode)


class _VertexAdapter(HTTPAdapter):
    """What both Vertex adapters add to their protocol's adapter: routing and auth.

    A mixin in the method resolution order before `GeminiAdapter` or `AnthropicAdapter`
    (`class VertexGeminiAdapter(_VertexAdapter, GeminiAdapter)`); never used alone.
    """

    publisher: ClassVar[str] = ""
    """The `publishers/<publisher>` segment of the model's resource name."""
    project_envs: ClassVar[tuple[str, ...]] = ("GOOGLE_CLOUD_PROJECT",)
    """Variables read for the project (after `ANYINFER_<INSTANCE>_PROJECT`)."""
    api_key_is_token: ClassVar[bool] = False
    """Whether `api_key` is an OAuth2 access token (Claude) rather than an API key."""
    default_base_url: ClassVar[str | None] = None

    @classmethod
    def placement_for(
        cls, settings: ProviderSettings, *, environ: Mapping[str, str] | None = None
    ) -> CloudPlacement:
        """The instance's project and location (the rule in `anyinfer._client.instance`)."""
        return cloud_placement(
            settings,
            project_envs=cls.project_envs,
            location_envs=LOCATION_ENVS,
            default_location=DEFAULT_LOCATION,
            environ=environ,
        )

    @classmethod
    def auth_kind(cls, settings: ProviderSettings) -> AuthKind:
        """Which credential the settings give (see the module documentation)."""
        options = settings.options
        if options.get("access_token"):
            return "access_token"
        if options.get("credentials") is not None:
            return "credentials"
        if options.get("service_account_file"):
            return "service_account"
        if settings.api_key:
            return "access_token" if cls.api_key_is_token else "api_key"
        return "adc"

    @classmethod
    def default_base_url_for(
        cls, settings: ProviderSettings, *, environ: Mapping[str, str] | None = None
    ) -> str | None:
        """The API root for the instance's location (the global host in express mode)."""
        version = (settings.api_version or DEFAULT_API_VERSION).strip("/")
        placement = cls.placement_for(settings, environ=environ)
        env = os.environ if environ is None else environ
        has_key = bool(settings.api_key or env.get(instance_env(settings.instance_id, "API_KEY")))
        if (
            has_key
            and cls.auth_kind(settings) in ("api_key", "adc")
            and not cls.api_key_is_token
            and placement.project is None
        ):
            return vertex_base_url("global", version)  # express mode
        return vertex_base_url(placement.location or DEFAULT_LOCATION, version)

    def _plan(self, settings: ProviderSettings) -> _Plan:
        """Resolve the credential and the placement, before the HTTP client is built."""
        instance = settings.instance_id
        placement = self.placement_for(settings)
        kind = self.auth_kind(settings)
        options = settings.options
        api_key: str | None = None
        if kind == "access_token":
            token = options.get("access_token") or settings.api_key
            if not isinstance(token, str):
                raise ConfigError(
                    f"{instance}: options['access_token'] must be a string",
                    provider=instance,
                )
            check_secret(token, source="options['access_token']", provider=instance)
            auth = GoogleAuth(kind, provider=instance, token=token)
        elif kind == "api_key":
            api_key = settings.api_key
            auth = GoogleAuth(kind, provider=instance)
        else:
            _require_google_auth(instance)
            if kind == "credentials":
                creds = options["credentials"]
                if not callable(getattr(creds, "refresh", None)):
                    raise ConfigError(
                        f"{instance}: options['credentials'] must be a google.auth "
                        f"Credentials object, got {type(creds).__name__}",
                        provider=instance,
                    )
                auth = GoogleAuth(kind, provider=instance, credentials=creds)
            elif kind == "service_account":
                creds = _service_account(options["service_account_file"], instance)
                project = getattr(creds, "project_id", None)
                auth = GoogleAuth(
                    kind,
                    provider=instance,
                    credentials=creds,
                    project=project if isinstance(project, str) else None,
                )
            else:
                auth = GoogleAuth(kind, provider=instance, loader=_default_credentials)
        return _Plan(auth, placement, api_key)

    def _vertex_settings(self, settings: ProviderSettings) -> ProviderSettings:
        """Resolve the credential and placement, and the base URL by the one rule (with
        this class's location-derived default), before the protocol adapter is built."""
        self._adopt(self._plan(settings))
        if resolve_base_url(settings) is None:
            settings = replace(settings, base_url=self.default_base_url_for(settings))
        return settings

    def _adopt(self, plan: _Plan) -> None:
        self.auth = plan.auth
        """The instance's credential and token cache."""
        self.placement = plan.placement
        """The configured project and location."""
        self.vertex_api_key = plan.api_key
        """The API key (Gemini in api-key mode), else `None`."""

    def location_root(self) -> str:
        """`/projects/{project}/locations/{location}` for the request path; empty in
        express mode and when the base URL already names a location.

        Raises:
            ConfigError: If no project is known.
        """
        if "/projects/" in urlsplit(self.base_url).path:
            return ""
        project = self.placement.project or self.auth.project
        if not project:
            if self.vertex_api_key is not None:
                return ""  # express mode: the key's project is implied
            pid = self.instance_id
            raise ConfigError(
                f"{pid} needs a Google Cloud project: set options['project'], "
                f"{instance_env(pid, 'PROJECT')} or "
                f"{' or '.join(self.project_envs)}",
                provider=pid,
            )
        location = self.placement.location or DEFAULT_LOCATION
        return f"/projects/{quote(project, safe='')}/locations/{quote(location, safe='')}"

    def resource_path(self, model: str, method: str) -> str:
        """`/publishers/{publisher}/models/{model}:{method}`, or the resource name as
        given when the model already names one (it contains a `/`)."""
        return f"/{resource_name(model, self.publisher)}:{method}"

    def url_for(self, path: str) -> str:
        """A relative path goes under the instance's location root."""
        if not path.startswith(("http://", "https://", "/projects/")):
            path = self.location_root() + path
        return super().url_for(path)

    async def request_headers(self, phase: str) -> Mapping[str, str]:
        """A fresh bearer token (none in api-key mode)."""
        token = await self.auth.bearer(phase)
        return {} if token is None else {"authorization": f"Bearer {token}"}

    async def models(self) -> Sequence[DiscoveredModel]:
        """Not offered on Vertex AI (see the module documentation).

        Raises:
            ConfigError: Always.
        """
        return await Adapter.models(self)

    async def aclose(self) -> None:
        """Close the HTTP client and the token endpoint's session."""
        try:
            await super().aclose()
        finally:
            await self.auth.aclose()

    def error_hint(self, code: str | None, message: str) -> ErrorKind | None:
        """Google's status names (`STATUS_NAME_KINDS`, as for Gemini), then the protocol's."""
        for name in (code or "").split():
            kind = STATUS_NAME_KINDS.get(name)
            if kind is not None and kind not in ("invalid", "server"):
                return kind
        return super().error_hint(code, message)


PREDICT_MAX_INSTANCES = 250
"""The most texts one `:predict` embedding request takes (Vertex's text embeddings API)."""

ONE_PER_REQUEST: tuple[str, ...] = ("gemini-embedding-001",)
"""Models Vertex documents as taking one `:predict` instance per request."""

EMBED_CONTENT_MODELS: tuple[str, ...] = ("gemini-embedding-2",)
"""Models embedded at `:embedContent`, one content per request (as `google-genai` does)."""


def _token_count(value: Any, provider: str, where: str) -> int | None:
    """`statistics.token_count`: a JSON number (the SDK types it a float), whole."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise ProtocolError(
            f"{provider}: expected a token count at {where}.statistics.token_count, got {value!r}",
            provider=provider,
        )
    if isinstance(value, float) and not value.is_integer():
        raise ProtocolError(
            f"{provider}: expected a whole token count at {where}.statistics.token_count, "
            f"got {value!r}",
            provider=provider,
        )
    return int(value)


class VertexGeminiAdapter(_VertexAdapter, GeminiAdapter):
    """Gemini models on Vertex AI (`vertex-gemini`, aliases `vertex`, `google-vertex`).

    The Gemini adapter with Vertex routing and auth (see the module documentation).
    """

    provider_id: ClassVar[str] = "vertex-gemini"
    profile: ClassVar[AdapterProfile] = AdapterProfile(
        aliases=("vertex", "google-vertex"),
        conformance_dialect="vertex-gemini",
        structured=ModelCapabilities(json_mode=True, json_schema=True),
    )
    publisher: ClassVar[str] = "google"
    api_key_env: ClassVar[str | None] = None
    fallback_api_key_env: ClassVar[str | None] = None

    def __init__(self, settings: ProviderSettings) -> None:
        super().__init__(self._vertex_settings(settings))

    def default_headers(self) -> dict[str, str]:
        """`x-goog-api-key` in api-key mode (bearer tokens go per request), plus the headers."""
        headers = HTTPAdapter.default_headers(self)
        if self.vertex_api_key:
            headers.setdefault("x-goog-api-key", self.vertex_api_key)
        return headers

    @staticmethod
    def model_path(model: str) -> str:
        """`publishers/google/models/<id>`, or the resource name as given."""
        return resource_name(model, "google")

    # --- embeddings ----------------------------------------------------------------

    embed_max_batch: ClassVar[int] = PREDICT_MAX_INSTANCES
    """`:predict` takes at most 250 instances (Vertex's text embeddings reference);
    models that take one a request fan a batch out (`ONE_PER_REQUEST`)."""

    async def embed(self, request: EmbedRequest) -> EmbedReply:
        """Embed one batch with Vertex's own endpoints (not the Gemini API's).

        `gemini-embedding-2*` models take one content a request at `:embedContent`
        (`{"content", "embedContentConfig"}`, as the `google-genai` SDK sends it on
        Vertex); every other model takes `:predict` (`{"instances": [{"content",
        "task_type"}], "parameters": {"outputDimensionality"}}`), all of a batch's texts
        at once, or one a request for `gemini-embedding-001`, which Vertex documents as
        taking one instance per request. One-per-request models fan out
        (`anyinfer._embed._fanout`). `input_type` becomes the task type as on the Gemini
        API; `provider_options` are merged into the body, a mapping into the body's
        mapping of that name (`{"parameters": {"autoTruncate": False}}`).
        """
        from .._embed._fanout import fan_out
        from .._embed._types import EmbedReply
        from .._embed._wire import gemini_task_type, gemini_task_warnings, known_sum

        model_id = request.model.rsplit("/", 1)[-1]
        task = gemini_task_type(request.input_type)
        warnings = gemini_task_warnings(self.instance_id, request.model, task)
        if model_id.startswith(EMBED_CONTENT_MODELS):
            replies = await fan_out(
                lambda text: self._embed_content(request, text, task), request.inputs
            )
        elif model_id.startswith(ONE_PER_REQUEST):
            replies = await fan_out(
                lambda text: self._predict(request, (text,), task), request.inputs
            )
        else:
            replies = [await self._predict(request, request.inputs, task)]
        vectors = tuple(v for vecs, _ in replies for v in vecs)
        tokens = known_sum(n for _, n in replies)
        return EmbedReply(
            vectors=vectors,
            usage=Usage(input_tokens=tokens, total_tokens=tokens),
            warnings=warnings,
        )

    async def _post(
        self, path: str, body: Mapping[str, Any], request: EmbedRequest
    ) -> dict[str, Any]:
        from .._embed._wire import _post_json

        payload = await _post_json(self, path, body, request=request)
        return as_dict(payload, self.instance_id, "body")

    async def _predict(
        self, request: EmbedRequest, texts: Sequence[str], task: str | None
    ) -> tuple[list[array[float]], int | None]:
        """`:predict` for `texts`: their vectors and summed `statistics.token_count`."""
        from .._embed._wire import _count, decode_vector, known_sum

        pid = self.instance_id
        instances = [
            {"content": t} if task is None else {"content": t, "task_type": task} for t in texts
        ]
        body: dict[str, Any] = {"instances": instances}
        if request.dimensions is not None:
            body["parameters"] = {"outputDimensionality": request.dimensions}
        payload = await self._post(
            self.resource_path(request.model, "predict"),
            merge_options(body, request.provider_options),
            request,
        )
        predictions = as_list(payload.get("predictions"), pid, "predictions")
        if len(predictions) != len(texts):
            raise _count(pid, len(predictions), len(texts))
        vectors: list[array[float]] = []
        counts: list[int | None] = []
        for i, item in enumerate(predictions):
            where = f"predictions[{i}].embeddings"
            emb = as_dict(as_dict(item, pid, f"predictions[{i}]").get("embeddings"), pid, where)
            vectors.append(decode_vector(emb.get("values"), pid, f"{where}.values"))
            stats = opt_dict(emb.get("statistics"), pid, f"{where}.statistics")
            counts.append(_token_count(stats.get("token_count") if stats else None, pid, where))
        return vectors, known_sum(counts)

    async def _embed_content(
        self, request: EmbedRequest, text: str, task: str | None
    ) -> tuple[list[array[float]], int | None]:
        """`:embedContent` for one text: its vector and `usageMetadata.promptTokenCount`."""
        from .._embed._wire import decode_vector

        pid = self.instance_id
        body: dict[str, Any] = {"content": {"parts": [{"text": text}]}}
        config: dict[str, Any] = {}
        if task is not None:
            config["taskType"] = task
        if request.dimensions is not None:
            config["outputDimensionality"] = request.dimensions
        if config:
            body["embedContentConfig"] = config
        payload = await self._post(
            self.resource_path(request.model, "embedContent"),
            merge_options(body, request.provider_options),
            request,
        )
        emb = as_dict(payload.get("embedding"), pid, "embedding")
        vector = decode_vector(emb.get("values"), pid, "embedding.values")
        meta = opt_dict(payload.get("usageMetadata"), pid, "usageMetadata")
        count = (
            opt_int(meta.get("promptTokenCount"), pid, "usageMetadata.promptTokenCount")
            if meta
            else None
        )
        return [vector], count


class VertexAnthropicAdapter(_VertexAdapter, AnthropicAdapter):
    """Claude models on Vertex AI (`vertex-anthropic`, alias `vertex-claude`).

    The Anthropic adapter with Vertex routing and auth: `:rawPredict` /
    `:streamRawPredict`, no `model` in the body, `anthropic_version` in the body instead
    of the `anthropic-version` header (see the module documentation).
    """

    provider_id: ClassVar[str] = "vertex-anthropic"
    profile: ClassVar[AdapterProfile] = AdapterProfile(
        aliases=("vertex-claude",),
        conformance_dialect="vertex-anthropic",
        usage=UsageConvention(input_includes_cache=False),
    )
    publisher: ClassVar[str] = "anthropic"
    project_envs: ClassVar[tuple[str, ...]] = (
        "GOOGLE_CLOUD_PROJECT",
        "ANTHROPIC_VERTEX_PROJECT_ID",
    )
    api_key_is_token: ClassVar[bool] = True
    api_key_env: ClassVar[str | None] = None
    error_code_keys: ClassVar[tuple[str, ...]] = ("type", "status", "code")

    def __init__(self, settings: ProviderSettings) -> None:
        super().__init__(self._vertex_settings(settings))

    def default_headers(self) -> dict[str, str]:
        """The configured headers (the token goes per request; the version in the body)."""
        return HTTPAdapter.default_headers(self)

    def messages_path(self, request: GenerationRequest) -> str:
        """`/publishers/anthropic/models/{model}:streamRawPredict` (or `:rawPredict`)."""
        return self.resource_path(
            request.model, "streamRawPredict" if request.stream else "rawPredict"
        )

    def build_body(self, request: GenerationRequest) -> tuple[dict[str, Any], list[str]]:
        """Anthropic's body without `model`, with `anthropic_version`."""
        body, warnings = super().build_body(request)
        body.pop("model", None)
        body.setdefault("anthropic_version", VERTEX_ANTHROPIC_VERSION)
        return body, warnings
