"""`AsyncClient`: the real client, on which the sync `Client` facade is built."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from .._errors import ConfigError, ToolLoopError
from .._messages import MessagesInput, normalize_messages
from .._redact import register_secret
from .._request import (
    DEFAULT_MAX_ROUNDS,
    GenerationRequest,
    ReasoningEffort,
    Sampling,
    ToolChoice,
    ToolSpec,
)
from .._settings import ProviderSettings
from .._stream.generation import AsyncStream
from .._types import Generation, ResolvedTarget, Target
from .credentials import ResolverChain, check_literal_key
from .health import Breakers
from .instance import instance_config
from .route import Route, options_for
from .targets import Targets
from .validate import check_budget_call, check_request, check_run_tools_call

if TYPE_CHECKING:
    from .._adapters.base import Adapter, DiscoveredModel, Health
    from .._adapters.registry import ProviderRegistry
    from .._embed._types import Embeddings, EmbedEncoding, Reranking
    from .._knowledge.budget import ContextBudget, TokenEstimator
    from .._knowledge.capabilities import CapabilityStore, ModelCapabilities
    from .._knowledge.catalog import Catalog
    from .._knowledge.pricing import PricingTable
    from .._local.acquire import AcquisitionReport, ProgressSink
    from .._local.catalog import CatalogView, Posture, VariantPrefs
    from .._local.hardware import HardwareProfile
    from .._local.store import ModelStore, RemovalReport, ResolvedModel, StoreEntry
    from .._structured.output import Repair, SchemaSpec, SupportsJSONSchema
    from .._structured.tools import Tool
    from .._telemetry import Observer
    from .attempt import Structured
    from .router import Router

__all__ = ["AsyncClient", "call_keywords"]

_T = TypeVar("_T")


_NO_SAMPLING = Sampling()
"""The sampling of a call that passes none (immutable, so shared)."""


class AsyncClient:
    """The asynchronous inference client.

    Args:
        providers: Per-provider settings. The order given is the preference order used
            when resolving catalog aliases.
        registry: Provider registry; defaults to the process-wide one.
        catalog: Alias catalog (arrives with the knowledge layer; stored as given).
        route: Default route applied when a call names no target; a call's bare
            target list inherits its retry, breaker and redirect policies.
        observers: Telemetry observers (arrive with the knowledge layer).
        resolver: Credential resolver chain for `api_key` references; defaults to
            `env://` and `credential://system/`.
        retain_raw: Keep the provider's raw payload on results. Off by default because
            raw payloads carry response text that payload-free telemetry deliberately
            omits.
        repair: Default repair budget for schema violations.
        use_default_catalog: Load the bundled catalog when `catalog` is not supplied.
        estimator: Token counting strategy for budgets and the pre-dispatch gate.
        context_gate: Fail a target before dispatch when the request provably cannot
            fit its known context window.
        pricing_table: Model pricing for `Usage.cost_usd`.
        capability_overrides: Deliberate capability corrections keyed by
            `"provider:model"`.
        model_dir: Where acquired model weights are stored.

    Raises:
        ConfigError: If two provider settings share an instance id.
    """

    def __init__(
        self,
        providers: Sequence[ProviderSettings] | None = None,
        *,
        registry: ProviderRegistry | None = None,
        catalog: Catalog | None = None,
        route: Route | None = None,
        observers: Sequence[Observer] | None = None,
        resolver: ResolverChain | None = None,
        retain_raw: bool = False,
        repair: Repair | None = None,
        use_default_catalog: bool = True,
        estimator: TokenEstimator | None = None,
        context_gate: bool = True,
        pricing_table: PricingTable | None = None,
        capability_overrides: Mapping[str, ModelCapabilities] | None = None,
        model_dir: Path | None = None,
    ) -> None:
        if registry is None:
            from .._adapters.registry import default_registry

            registry = default_registry()
        self._registry = registry
        # Engine ids whose adapter class generates (`_check_generates` fills it once each).
        self._generates: set[str] = set()
        settings: dict[str, ProviderSettings] = {}
        for s in providers or ():
            if not isinstance(s, ProviderSettings):
                raise ConfigError(f"providers must hold ProviderSettings, got {type(s).__name__}")
            if s.instance_id in settings:
                raise ConfigError(
                    f"two providers share the instance id {s.instance_id!r}; give one an alias"
                )
            check_literal_key(s.api_key, provider=s.instance_id)
            settings[s.instance_id] = s
        if route is not None and not isinstance(route, Route):
            raise ConfigError(f"route must be a Route, got {type(route).__name__}")
        self._route = route
        self._target_routes: dict[str, Route] = {}
        overrides = dict(capability_overrides or {})
        self._targets = Targets(
            registry,
            settings,
            resolver if resolver is not None else ResolverChain(),
            catalog=catalog,
            use_default_catalog=use_default_catalog,
            pricing=pricing_table,
            overrides=overrides,
        )
        self._breakers = Breakers()
        self._retain_raw = retain_raw
        self._repair = repair
        self._estimator = estimator
        self._context_gate = context_gate
        from .._observers import Telemetry

        self._telemetry = Telemetry()
        for observer in observers or ():
            self._telemetry.subscribe(observer)
        self._router: Router | None = None
        self._model_dir = model_dir
        self._store: Any | None = None
        if overrides:
            self._capabilities()  # validate override keys and values now, not mid-request

    @property
    def catalog(self) -> Catalog | None:
        """The alias catalog in force, if any."""
        return self._targets.catalog

    @property
    def pricing_table(self) -> PricingTable:
        """The pricing table behind `Usage.cost_usd`."""
        return self._targets.pricing

    def _capabilities(self) -> CapabilityStore:
        return self._targets.store

    def capabilities(self, target: Target) -> ModelCapabilities:
        """What a target's model can do, assembled from every layer, with provenance.

        Layers, weakest first: the bundled catalog, what the provider's discovery
        endpoint reported (`models()`), probes (what responses showed), and
        `capability_overrides`, which always win. `caps.source("context_window")` says
        which layer supplied a field.

        Args:
            target: A target string or alias.
        """
        return self._targets.capabilities(self.resolve(target))

    def subscribe(self, observer: Observer, *, payloads: bool = False) -> None:
        """Register a telemetry observer.

        Args:
            observer: The sink: anything with `on_event(event)`.
            payloads: Opt in to prompt and response text. Off by default, so no observer
                sees payload text it did not explicitly ask for.
        """
        self._telemetry.subscribe(observer, payloads=payloads)

    def unsubscribe(self, observer: Observer) -> None:
        """Remove a telemetry observer."""
        self._telemetry.unsubscribe(observer)

    def budget(
        self,
        messages: MessagesInput,
        *,
        target: Target,
        schema: SchemaSpec | SupportsJSONSchema | Mapping[str, Any] | None = None,
        tools: Sequence[ToolSpec] = (),
        sampling: Sampling | None = None,
        output_reserve_tokens: int | None = None,
    ) -> ContextBudget:
        """Compute the context budget for a request without sending it.

        This is the preflight calculator: apps assembling large prompts read
        `remaining_tokens` to decide how much more material fits, instead of hand-rolling
        window arithmetic per provider. Pure computation — no request is issued, no
        network is touched; capabilities come from the catalog plus whatever discovery
        or probes have already been recorded.

        Args:
            messages: The conversation as assembled so far.
            target: The target to budget against.
            schema: Structured-output schema the real request will carry, if any.
            tools: Tools the real request will offer, if any.
            sampling: Sampling controls; `max_output_tokens` shapes the output reserve.
            output_reserve_tokens: Overrides the derived output reserve.

        Returns:
            The computed `ContextBudget`. When the target's context window is unknown,
            the budget's verdict is `None` — never a guess.
        """
        check_budget_call(**call_keywords(locals(), "messages"))
        from .._knowledge.budget import compute_budget

        rt = self.resolve(target)
        caps = self._targets.capabilities(rt)
        return compute_budget(
            normalize_messages(messages),
            capabilities=caps,
            estimator=self._estimator,
            tools=tuple(tools),
            schema=_budget_schema(schema),
            model=rt.model,
            sampling_max_output=sampling.max_output_tokens if sampling else None,
            output_reserve_tokens=output_reserve_tokens,
        )

    async def __aenter__(self) -> AsyncClient:
        """Enter an async context managing this client's adapters."""
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Close the client on context exit."""
        await self.aclose()

    async def aclose(self) -> None:
        """Close every adapter this client built."""
        await self._targets.aclose()

    # --- targets and adapters ------------------------------------------------------

    def resolve(self, target: Target) -> ResolvedTarget:
        """Resolve a target string without issuing a request.

        Args:
            target: `"provider:model"`, where provider is a configured instance id or a
                registered provider id (everything after the first colon is the model
                name, so `"ollama:qwen3:8b"` names model `qwen3:8b`); or a catalog alias
                such as `"gpt-4o-mini"`, which resolves to the first configured provider
                that serves it, in the order the providers were given.

        Returns:
            The resolved target.

        Raises:
            ConfigError: If the target is malformed, names an unknown provider, or is an
                unknown alias (close matches are named).
        """
        return self._targets.resolve(target)

    def _adapter(self, instance: str) -> Adapter:
        return self._targets.adapter(instance)

    async def models(self, provider_id: str) -> Sequence[DiscoveredModel]:
        """List a provider's models.

        Args:
            provider_id: A configured instance id or a registered provider id.
        """
        adapter = self._adapter(provider_id.strip().lower())
        found = await adapter.models()
        from .._knowledge.capabilities import capabilities_from_discovery

        self._capabilities()
        for model in found:
            self._targets.record(
                f"{adapter.instance_id}:{model.id}", capabilities_from_discovery(model), "discovery"
            )
        return found

    async def health(self, provider_id: str) -> Health:
        """Probe a provider's readiness.

        Args:
            provider_id: A configured instance id or a registered provider id.
        """
        return await self._adapter(provider_id.strip().lower()).health()

    # --- local models --------------------------------------------------------------

    @property
    def model_store(self) -> ModelStore:
        """The store acquired model weights live in."""
        if self._store is None:
            from .._local.store import ModelStore, default_model_dir

            self._store = ModelStore(self._model_dir or default_model_dir())
        return self._store

    def _local_engines(self, provider_id: str | None) -> tuple[tuple[str, ...] | None, bool]:
        """Engines a provider serves, and whether its host is this machine."""
        if provider_id is None:
            return None, True
        instance = provider_id.strip().lower()
        settings = self._targets.settings_for(instance)
        engine = self._registry.canonical(settings.provider_id)
        cls = self._registry.adapter_class(engine)
        engines = cls.profile.local_engines  # the class declares what it serves
        if not engines:
            ids = self._registry.ids()
            raise ConfigError(
                f"{instance!r} ({engine}) is not a local engine; local engines are "
                + ", ".join(p for p in ids if self._targets.profile(p).local_engines)
            )
        return engines, instance_config(settings, cls).is_local

    async def local_catalog(
        self,
        provider_id: str | None = None,
        *,
        hardware: HardwareProfile | None = None,
        best_at: str | None = None,
        posture: Posture = "balanced",
    ) -> CatalogView:
        """Browse the local model catalog, annotated with how each entry fits.

        Performs no network I/O: the catalog is bundled data and hardware detection is
        local and cached.

        Args:
            provider_id: Restrict to models one configured engine can serve. Its locality
                also decides whether this machine is the right one to probe.
            hardware: Specs to judge against, overriding detection. This is how an
                application answers for a remote host after asking the user.
            best_at: One category from the catalog's closed vocabulary.
            posture: How much of the machine to budget.

        Returns:
            The view. `hardware_source == "unavailable"` means the engine runs somewhere
            AnyInfer cannot probe, and the application should collect the host's specs and
            call again.

        Raises:
            ConfigError: If `best_at` names a category no catalog entry uses.
        """
        from .._local.catalog import LocalCatalog
        from .._local.hardware import detect_hardware, unavailable_profile

        engines, local = self._local_engines(provider_id)
        if hardware is None:
            hardware = (
                await _to_thread(detect_hardware, self.model_store.root)
                if local
                else unavailable_profile()
            )
        return LocalCatalog.load_default().view(
            hardware, best_at=best_at, posture=posture, engines=engines
        )

    async def acquire_model(
        self,
        model_id: str,
        *,
        engine: str | None = None,
        variant_id: str | None = None,
        hardware: HardwareProfile | None = None,
        progress: ProgressSink | None = None,
        prefs: VariantPrefs | None = None,
        dry_run: bool = False,
        token: str | None = None,
    ) -> AcquisitionReport:
        """Download a catalog model's weights into this client's model store.

        The quantization is chosen, not assumed: the highest curated rung whose weights
        and KV cache fit this machine's budget. Pass `variant_id` to override that.
        `dry_run=True` resolves everything and reports the exact byte count from the hub
        without writing anything — what an application needs to confirm a large download
        with a user before starting it. Files already in the Hugging Face cache are
        adopted instead of downloaded. Downloads go through `huggingface_hub` (honouring
        `HF_ENDPOINT`), resume a broken connection with a Range request, are checked
        against the SHA-256 the hub reports, and are registered only once verified.

        Args:
            model_id: A catalog model id.
            engine: `"llama.cpp"` or `"vllm"`; defaults to whatever the model offers.
            variant_id: Acquire this exact variant, skipping selection.
            hardware: Specs to select against, overriding detection.
            progress: Aggregate progress sink. See `AcquisitionProgress` for the
                threading contract it must honor.
            prefs: Selection preferences, including the low-quality opt-in.
            dry_run: Plan and report without writing.
            token: A credential for the source, when it needs one. Defaults to
                `HF_TOKEN`.

        Returns:
            The report, naming the registered entry and what it cost.

        Raises:
            ConfigError: If there is no catalog, the model is unknown, or nothing fits.
            LocalRuntimeError: On a transfer failure, digest mismatch, or full disk.
        """
        options = call_keywords(locals(), "model_id")  # acquire() takes the same keywords
        from .._local.acquire import acquire
        from .._local.catalog import LocalCatalog
        from .._local.hardware import detect_hardware

        if token:
            register_secret(token)
        model = LocalCatalog.load_default().get(model_id)
        store = self.model_store
        if hardware is None:
            options["hardware"] = await _to_thread(detect_hardware, store.root)
        return await acquire(store, model, **options)

    async def installed_models(self) -> Sequence[StoreEntry]:
        """Every model acquired into this client's store."""
        return await _to_thread(self.model_store.entries)

    async def locate_model(
        self,
        model_id: str,
        *,
        variant_id: str | None = None,
        engine: str | None = None,
        verify: bool = False,
    ) -> ResolvedModel | None:
        """Find an acquired model on disk, with advisory launch arguments.

        No network I/O. Verification is shallow by default — size and modification time
        against the index — because re-hashing forty gigabytes on every lookup would be
        absurd; `verify=True` forces the full check.
        """
        from .._local.acquire import resolve_entry
        from .._local.catalog import LocalCatalog, fit_model
        from .._local.hardware import detect_hardware

        store = self.model_store
        entry = await _to_thread(store.find, model_id, variant_id=variant_id, engine=engine)
        if entry is None:
            return None
        fit = None
        catalog = LocalCatalog.load_default()
        try:
            model = catalog.get(entry.model_id)
        except ConfigError:
            model = None
        if model is not None:
            hardware = await _to_thread(detect_hardware, store.root)
            variant = next((v for v in model.variants if v.id == entry.variant_id), None)
            if variant is not None:
                sized = replace(model, variants=(replace(variant, size_bytes=entry.size_bytes),))
                fit = fit_model(sized, hardware)
        return await _to_thread(resolve_entry, store, entry, fit, verify=verify)

    async def remove_model(self, entry_id: str) -> RemovalReport:
        """Delete an acquired model's files and unregister it.

        A model adopted from somebody else's cache is only unregistered; its files
        belong to whatever put them there.
        """
        return await _to_thread(self.model_store.remove, entry_id)

    # --- generation ----------------------------------------------------------------

    def _route_for(
        self, target: Target | None, route: Route | Target | Sequence[Target] | None
    ) -> Route:
        if target is not None and route is not None:
            raise ConfigError("pass target= or route=, not both")
        if target is not None:
            if type(target) is not str:
                return Route.coerce(target, like=self._route)
            # A route is immutable and a function of the string and the client's default
            # route (fixed at construction), so one per target string is built once.
            cached = self._target_routes.get(target)
            if cached is None:
                cached = Route.coerce(target, like=self._route)
                if len(self._target_routes) >= 256:
                    self._target_routes.clear()
                self._target_routes[target] = cached
            return cached
        if route is not None:
            return Route.coerce(route, like=self._route)
        if self._route is None:
            raise ConfigError("no target: pass target= or route=, or give the client a route")
        return self._route

    def stream(
        self,
        messages: MessagesInput,
        *,
        target: Target | None = None,
        route: Route | Target | Sequence[Target] | None = None,
        schema: SchemaSpec | SupportsJSONSchema | Mapping[str, Any] | None = None,
        tools: Sequence[ToolSpec] = (),
        tool_choice: ToolChoice = "auto",
        sampling: Sampling | None = None,
        reasoning: ReasoningEffort | None = None,
        timeout_s: float | None = None,
        repair: Repair | None = None,
        provider_options: Mapping[str, Mapping[str, Any]] | None = None,
        metadata: Mapping[str, str] | None = None,
        max_response_bytes: int | None = None,
    ) -> AsyncStream:
        """Start a streaming generation.

        Arguments are checked here, before anything is sent, so a bad call raises at
        once rather than on first iteration.

        Args:
            messages: A prompt, one message, or a conversation.
            target: One target, `"provider:model"`.
            route: A `Route`, one target, or targets in fallback order.
            schema: Structured output schema (not available in this release: passing
                one raises `ConfigError`).
            tools: Tools offered to the model.
            tool_choice: `auto`, `none`, `required`, or a tool name.
            sampling: Sampling controls.
            reasoning: Reasoning effort for models that reason.
            timeout_s: Per-call timeout overriding the provider's.
            repair: Schema-repair budget (with `schema`).
            provider_options: Extra body fields per provider id, merged last.
            metadata: Caller metadata for telemetry.
            max_response_bytes: Abort a response that grows past this many bytes.

        Returns:
            An `AsyncStream`: an async iterator of `StreamEvent`, usable as an async
            context manager, exposing the final result as `AsyncStream.result`.

        Raises:
            ConfigError: For an invalid call.
        """
        call = call_keywords(locals(), "messages")
        check_request(**call)
        return self._start(messages, wire_stream=True, **call)

    def _start(
        self,
        messages: MessagesInput,
        *,
        wire_stream: bool,
        retain_raw: bool | None = None,
        target: Target | None = None,
        route: Route | Target | Sequence[Target] | None = None,
        schema: Any | None = None,
        tools: Sequence[ToolSpec] = (),
        tool_choice: ToolChoice = "auto",
        sampling: Sampling | None = None,
        reasoning: ReasoningEffort | None = None,
        timeout_s: float | None = None,
        repair: Any | None = None,
        provider_options: Mapping[str, Mapping[str, Any]] | None = None,
        metadata: Mapping[str, str] | None = None,
        max_response_bytes: int | None = None,
    ) -> AsyncStream:
        """Check a call's arguments and return its event stream (nothing is sent yet).

        `stream()`, `generate()` and the `run_tools` rounds all start here; `wire_stream`
        picks the wire request and `retain_raw` overrides the client's setting."""
        msgs = normalize_messages(messages)
        chosen = self._route_for(target, route)
        targets = tuple(self.resolve(t) for t in chosen.targets)
        redirects = tuple(self.resolve(t) for t in chosen.content_policy_targets)
        generates, every = self._generates, (*targets, *redirects)
        for t in every:
            if t.provider_id not in generates:
                self._check_generates(every, wire_stream)
                break
        structured: Structured | None = None
        if schema is not None:
            from .._structured.output import Repair, normalize_schema
            from .attempt import Structured

            policy = repair if repair is not None else self._repair
            if policy is not None and not isinstance(policy, Repair):
                raise ConfigError(f"repair must be a Repair, got {type(policy).__name__}")
            structured = Structured(normalize_schema(schema), policy or Repair(0))
        elif repair is not None:
            raise ConfigError("repair= needs schema=: it repairs schema violations")
        tool_specs: tuple[ToolSpec, ...] = ()
        if tools:
            from .._structured.tools import coerce_tools

            specs, _runnable = coerce_tools(tools)
            tool_specs = tuple(specs)
        names = {t.name for t in tool_specs}
        if tool_choice not in ("auto", "none", "required") and tool_choice not in names:
            raise ConfigError(f"tool_choice {tool_choice!r} names no offered tool")
        if timeout_s is not None and timeout_s <= 0:
            raise ConfigError(f"timeout_s must be positive, got {timeout_s!r}")
        if max_response_bytes is not None and max_response_bytes <= 0:
            raise ConfigError(f"max_response_bytes must be positive, got {max_response_bytes!r}")
        router = self._router or self._build_router()
        options = provider_options or {}
        first = targets[0]
        base = GenerationRequest(
            # Built for the first target, which the router then sends as it is.
            model=first.model,
            messages=msgs,
            stream=wire_stream,
            tools=tool_specs,
            tool_choice=tool_choice,
            sampling=sampling or _NO_SAMPLING,
            reasoning=reasoning,
            provider_options=dict(options_for(first, options)),
            retain_raw=self._retain_raw if retain_raw is None else retain_raw,
            metadata=dict(metadata or {}),
            timeout_s=timeout_s,
            max_response_bytes=max_response_bytes,
        )
        return router.run(chosen, targets, redirects, base, options, structured)

    def _check_generates(self, targets: tuple[ResolvedTarget, ...], wire_stream: bool) -> None:
        """Refuse a route holding a target whose adapter does not generate (see
        `refuse_unserved`); remember the engines that do, so later calls skip the check."""
        from .._adapters.base import refuse_unserved

        classes = self._registry.adapter_class
        pairs = [(t, classes(t.provider_id)) for t in targets]
        refuse_unserved("generate", pairs, "stream()" if wire_stream else "generate()")
        self._generates.update(t.provider_id for t in targets)

    def _build_router(self) -> Router:
        """The router and attempt runner, built (and their modules imported) on first use."""
        from .attempt import AttemptRunner
        from .router import Router

        attempts = AttemptRunner(
            self._targets,
            self._breakers,
            estimator=self._estimator,
            context_gate=self._context_gate,
        )
        self._router = Router(attempts, self._breakers, self._telemetry)
        return self._router

    async def generate(
        self,
        messages: MessagesInput,
        *,
        target: Target | None = None,
        route: Route | Target | Sequence[Target] | None = None,
        schema: SchemaSpec | SupportsJSONSchema | Mapping[str, Any] | None = None,
        tools: Sequence[ToolSpec] = (),
        tool_choice: ToolChoice = "auto",
        sampling: Sampling | None = None,
        reasoning: ReasoningEffort | None = None,
        timeout_s: float | None = None,
        repair: Repair | None = None,
        provider_options: Mapping[str, Mapping[str, Any]] | None = None,
        metadata: Mapping[str, str] | None = None,
        max_response_bytes: int | None = None,
    ) -> Generation:
        """Generate a single result, draining the event stream internally.

        The same machinery as `stream()`: only the wire request differs (a
        non-streaming request, where the provider has one). Arguments as for `stream()`.

        Returns:
            The assembled `Generation`.

        Raises:
            AllTargetsFailedError: Every target failed.
            ProviderError: A failure after content was shown (no fallback then).
        """
        call = call_keywords(locals(), "messages")
        check_request(**call)
        return await self._start(messages, wire_stream=False, **call).collect()

    async def embed(
        self,
        inputs: str | Sequence[str],
        *,
        target: Target | None = None,
        route: Route | Target | Sequence[Target] | None = None,
        dimensions: int | None = None,
        input_type: str | None = None,
        encoding: EmbedEncoding = "base64",
        batch_size: int | None = None,
        concurrency: int | None = None,
        same_vector_space: bool = False,
        timeout_s: float | None = None,
        provider_options: Mapping[str, Mapping[str, Any]] | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> Embeddings:
        """Embed texts: one vector per input, in input order.

        Inputs are split into batches the provider takes (the adapter's
        `embed_max_batch`, or `batch_size`), sent `concurrency` at a time, each routed
        like a generation attempt (retries, breakers, fallbacks), and reassembled in
        order with usage summed. Every fallback target must name the first target's
        model: vectors of different models are not comparable, so such a route is
        refused before anything is sent (`same_vector_space=True` declares that
        differently named targets produce identical vectors).

        Args:
            inputs: One text or a sequence of texts.
            target: One target, `"provider:model"`.
            route: A `Route`, one target, or targets in fallback order.
            dimensions: Output dimensions, for models that can shorten their vectors.
            input_type: What the texts are for (`"query"`, `"document"`), where the
                protocol carries it; otherwise a warning on the result.
            encoding: `"base64"` (compact float32, the default) or `"float"` on the wire,
                where the protocol offers the choice; results are the same.
            batch_size: Most inputs per request (at most the adapter's limit).
            concurrency: Batches in flight at once (default 4).
            same_vector_space: Declare that every target of the route embeds into
                the same space, whatever its model name.
            timeout_s: Per-request timeout, for each batch's attempts.
            provider_options: Extra body fields per provider id, merged last.
            metadata: Caller metadata for telemetry (never sent).

        Returns:
            The `Embeddings`.

        Raises:
            ConfigError: For an invalid call, a target that does not embed, a route
                mixing vector spaces, or a call the model's known capabilities say
                cannot succeed (dimensions it does not offer, an input over its token
                limit).
            AllTargetsFailedError: A batch found no target that answered.
        """
        call = call_keywords(locals(), "target", "route")
        from .._embed._runner import EmbedCall, EmbedRunner

        chosen = self._route_for(target, route)
        targets = tuple(self.resolve(t) for t in chosen.targets)
        runner = EmbedRunner(
            self._targets,
            self._breakers,
            self._telemetry,
            estimator=self._estimator,
            context_gate=self._context_gate,
        )
        return await runner.embed(chosen, targets, EmbedCall(**call))

    async def rerank(
        self,
        query: str,
        documents: Sequence[str],
        *,
        target: Target | None = None,
        route: Route | Target | Sequence[Target] | None = None,
        top_n: int | None = None,
        batch_size: int | None = None,
        concurrency: int | None = None,
        same_model: bool = False,
        timeout_s: float | None = None,
        provider_options: Mapping[str, Mapping[str, Any]] | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> Reranking:
        """Rank documents by relevance to a query, best first.

        Documents beyond what one request takes (the adapter's `rerank_max_documents`,
        or `batch_size`) are split into requests sent `concurrency` at a time, each
        routed like a generation attempt (retries, breakers, fallbacks), and merged by
        score, with `top_n` applied after the merge; every `index` in the result points
        into `documents`. Every fallback target must name the first target's model:
        scores of different models are not comparable, so such a route is refused
        before anything is sent (`same_model=True` declares that differently named
        targets are the same model). A failed request fails the call: a partial
        ranking is never returned.

        Args:
            query: The text to rank the documents against.
            documents: The documents, as a sequence of strings.
            target: One target, `"provider:model"` (a reranking model).
            route: A `Route`, one target, or targets in fallback order.
            top_n: Return only the best `top_n` documents (default: all of them).
            batch_size: Most documents per request (at most the adapter's limit).
            concurrency: Requests in flight at once (default 4).
            same_model: Declare that every target of the route is the same model,
                whatever its name, so their scores are comparable.
            timeout_s: Per-request timeout, for each request's attempts.
            provider_options: Extra body fields per provider id, merged last.
            metadata: Caller metadata for telemetry (never sent).

        Returns:
            The `Reranking`.

        Raises:
            ConfigError: For an invalid call, a target that does not rerank, or a route
                mixing models.
            AllTargetsFailedError: A request found no target that answered.
        """
        call = call_keywords(locals(), "target", "route")
        from .._embed._rerank import RerankCall, RerankRunner

        chosen = self._route_for(target, route)
        targets = tuple(self.resolve(t) for t in chosen.targets)
        runner = RerankRunner(self._targets, self._breakers, self._telemetry)
        return await runner.rerank(chosen, targets, RerankCall(**call))

    async def _tool_round(self, messages: MessagesInput, **kwargs: Any) -> Generation:
        """One `run_tools` round: `generate()` (same arguments), keeping the raw payload
        for the next turn."""
        return await self._start(messages, wire_stream=False, retain_raw=True, **kwargs).collect()

    async def run_tools(
        self,
        messages: MessagesInput,
        *,
        tools: Sequence[Tool | Any],
        target: Target | None = None,
        route: Route | Target | Sequence[Target] | None = None,
        max_rounds: int = DEFAULT_MAX_ROUNDS,
        **kwargs: Any,
    ) -> Generation:
        """Generate, dispatching any tools the model calls, until it answers.

        Tools run sequentially, and a tool that raises becomes an error-flagged result
        the model can react to rather than an exception the caller must handle. A forced
        `tool_choice` applies to the first round only, so the model can answer after.

        Args:
            messages: The starting conversation.
            tools: Callables or `tool()`-decorated tools.
            target: A single target, as for `generate()`.
            route: A route, as for `generate()`.
            max_rounds: Maximum tool rounds before giving up.
            **kwargs: Forwarded to `generate()`.

        Returns:
            The final `Generation`, once the model stops calling tools.

        Raises:
            ToolLoopError: If the model calls an unknown tool, or the round budget is
                exhausted.
        """
        from .._structured.tools import coerce_tools, dispatch_all

        check_run_tools_call(tools, max_rounds, {"target": target, "route": route, **kwargs})
        if max_rounds < 0:
            raise ConfigError(f"max_rounds must not be negative, got {max_rounds}")
        specs, runnable = coerce_tools(tools)
        conversation = list(normalize_messages(messages))
        choice = kwargs.pop("tool_choice", "auto")
        for round_no in range(max_rounds + 1):
            # Raw payloads are kept for the rounds (thinking and thought signatures must
            # go back to Anthropic and Gemini), and dropped from the answer unless asked.
            result = await self._tool_round(
                conversation,
                target=target,
                route=route,
                tools=specs,
                tool_choice=choice if round_no == 0 else "auto",
                **kwargs,
            )
            if not result.tool_calls:
                return result if self._retain_raw else replace(result, raw=None)
            if round_no == max_rounds:
                raise ToolLoopError(
                    f"the model still called tools after {max_rounds} round(s) "
                    f"({', '.join(c.name for c in result.tool_calls)}); raise max_rounds"
                )
            adapter = self._adapter(result.target.provider)
            conversation.append(adapter.assistant_message(result))
            conversation.extend(await dispatch_all(result.tool_calls, runnable))
        raise AssertionError("unreachable")  # pragma: no cover


def call_keywords(arguments: dict[str, Any], *leave_out: str) -> dict[str, Any]:
    """A method's arguments, from its `locals()`, as keywords to pass on.

    Called first thing in a method, so `arguments` holds only its parameters: `self`
    and the names in `leave_out` are dropped and a `**kwargs` parameter is spread, so
    the callee receives exactly what the caller passed. The spec'd methods of both
    clients forward this way (`Client` to `AsyncClient`, `stream` and `generate` to the
    argument checks and `_start`), so their restated signatures carry no copies of the
    argument lists in their bodies.
    """
    keywords = dict(arguments)
    del keywords["self"]
    for name in leave_out:
        del keywords[name]
    spread = keywords.pop("kwargs", None)
    if spread:
        keywords.update(spread)
    return keywords


async def _to_thread(func: Callable[..., _T], /, *args: Any, **kwargs: Any) -> _T:
    """`asyncio.to_thread`, importing asyncio only when first needed."""
    import asyncio

    return await asyncio.to_thread(func, *args, **kwargs)


def _budget_schema(schema: Any) -> Mapping[str, Any] | None:
    """The JSON Schema a request will carry, from any accepted `schema=` value."""
    if schema is None:
        return None
    from .._structured.output import normalize_schema

    return normalize_schema(schema).json_schema
