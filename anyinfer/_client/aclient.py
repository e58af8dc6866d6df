"""`AsyncClient`: the real client, on which the sync `Client` facade is built."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from .._adapters.profile import AdapterProfile, UsageConvention
from .._errors import (
    AllTargetsFailedError,
    AnyInferError,
    ConfigError,
    ContentFilterError,
    ContextWindowError,
    PoolExhaustedError,
    ResponseTooLargeError,
    SchemaViolationError,
    ToolLoopError,
)
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
from .._stream.events import AttemptFailed, StreamEnded, StreamEvent, TimingMark, UsageUpdate
from .._stream.generation import AsyncStream
from .._types import AttemptRecord, Generation, ResolvedTarget, Target, Usage
from .credentials import ResolverChain
from .health import Breakers
from .instance import instance_config
from .route import Route
from .validate import check_budget_call, check_request, check_run_tools_call

if TYPE_CHECKING:
    from .._adapters.base import Adapter, DiscoveredModel, Health
    from .._adapters.registry import ProviderRegistry
    from .._knowledge.budget import ContextBudget, TokenEstimator
    from .._knowledge.capabilities import CapabilityStore, ModelCapabilities
    from .._knowledge.catalog import Catalog
    from .._knowledge.pricing import PricingTable
    from .._local.acquire import AcquisitionReport, ProgressSink
    from .._local.catalog import CatalogView, Posture, VariantPrefs
    from .._local.hardware import HardwareProfile
    from .._local.store import ModelStore, RemovalReport, ResolvedModel, StoreEntry
    from .._structured.output import NormalizedSchema, Repair, SchemaSpec, SupportsJSONSchema
    from .._structured.tools import Tool
    from .._telemetry import Observer

__all__ = ["AsyncClient"]

_T = TypeVar("_T")


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
        self._settings: dict[str, ProviderSettings] = {}
        for s in providers or ():
            if not isinstance(s, ProviderSettings):
                raise ConfigError(f"providers must hold ProviderSettings, got {type(s).__name__}")
            if s.instance_id in self._settings:
                raise ConfigError(
                    f"two providers share the instance id {s.instance_id!r}; give one an alias"
                )
            self._settings[s.instance_id] = s
        self._adapters: dict[str, Adapter] = {}
        if route is not None and not isinstance(route, Route):
            raise ConfigError(f"route must be a Route, got {type(route).__name__}")
        self._route = route
        self._resolver = resolver if resolver is not None else ResolverChain()
        self._breakers = Breakers()
        self._retain_raw = retain_raw
        self._repair = repair
        self._catalog_arg = catalog
        self._use_default_catalog = use_default_catalog
        self._pricing_arg = pricing_table
        self._overrides = dict(capability_overrides or {})
        self._estimator = estimator
        self._context_gate = context_gate
        self._caps: CapabilityStore | None = None
        from .._telemetry import Telemetry

        self._telemetry = Telemetry()
        for observer in observers or ():
            self._telemetry.subscribe(observer)
        self._model_dir = model_dir
        self._store: Any | None = None
        self._closed = False
        if self._overrides:
            self._capabilities()  # validate override keys and values now, not mid-request

    @property
    def catalog(self) -> Catalog | None:
        """The alias catalog in force, if any."""
        if self._catalog_arg is None and self._use_default_catalog:
            from .._knowledge.catalog import Catalog

            self._catalog_arg = Catalog.load_default()
        return self._catalog_arg

    @property
    def pricing_table(self) -> PricingTable:
        """The pricing table behind `Usage.cost_usd`."""
        if self._pricing_arg is None:
            from .._knowledge.pricing import PricingTable

            self._pricing_arg = PricingTable.default()
        return self._pricing_arg

    def _capabilities(self) -> CapabilityStore:
        if self._caps is None:
            from .._knowledge.capabilities import CapabilityStore

            self._caps = CapabilityStore(
                catalog=self.catalog, pricing=self.pricing_table, overrides=self._overrides
            )
        return self._caps

    def capabilities(self, target: Target) -> ModelCapabilities:
        """What a target's model can do, assembled from every layer, with provenance.

        Layers, weakest first: the bundled catalog, what the provider's discovery
        endpoint reported (`models()`), probes (what responses showed), and
        `capability_overrides`, which always win. `caps.source("context_window")` says
        which layer supplied a field.

        Args:
            target: A target string or alias.
        """
        rt = self.resolve(target)
        return self._capabilities().get(f"{rt.provider}:{rt.model}", provider_id=rt.provider_id)

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
        check_budget_call(**{k: v for k, v in locals().items() if k not in ("self", "messages")})
        from .._knowledge.budget import compute_budget

        rt = self.resolve(target)
        caps = self._capabilities().get(f"{rt.provider}:{rt.model}", provider_id=rt.provider_id)
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
        self._closed = True
        adapters, self._adapters = list(self._adapters.values()), {}
        for adapter in adapters:
            await adapter.aclose()

    # --- targets and adapters ------------------------------------------------------

    def _profile(self, provider_id: str) -> AdapterProfile:
        """The profile the adapter class registered for an engine id declares."""
        return self._registry.adapter_class(provider_id).profile

    def _settings_for(self, instance: str) -> ProviderSettings:
        settings = self._settings.get(instance)
        if settings is not None:
            return settings
        if instance in self._registry:
            return ProviderSettings.of(instance)
        import difflib

        known = sorted(set(self._settings) | set(self._registry.ids()))
        close = difflib.get_close_matches(instance, known, n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise ConfigError(f"unknown provider {instance!r}{hint}")

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
        if not isinstance(target, str) or not target.strip():
            raise ConfigError(f"target must be a non-empty string, got {target!r}")
        if ":" not in target:
            return self._resolve_alias(target.strip())
        instance, _, model = target.partition(":")
        instance = instance.strip().lower()
        model = model.strip()
        if not model:
            raise ConfigError(f"target {target!r} names no model")
        settings = self._settings_for(instance)
        provider_id = self._registry.canonical(settings.provider_id)
        return ResolvedTarget(settings.instance_id, model, provider_id)

    def _resolve_alias(self, name: str) -> ResolvedTarget:
        catalog = self.catalog
        if catalog is None:
            raise ConfigError(
                f"target {name!r} must look like 'provider:model' (alias resolution is off: "
                "this client has no catalog)"
            )
        order = [
            (iid, self._registry.canonical(s.provider_id)) for iid, s in self._settings.items()
        ]
        if not order:
            # Nothing configured: the providers the catalog lists for this alias, in the
            # catalog's order (the alias's home provider first), with their defaults.
            listed = catalog.aliases.get(name.strip().lower(), {})
            order = [(pid, pid) for pid in listed if pid in self._registry]
            order = order or [(pid, pid) for pid in self._registry.ids()]
        matches = catalog.resolve_alias(name, order)
        if not matches:
            known = [f"{iid}:" for iid, _ in order]
            raise catalog.unknown_target_error(name, known)
        instance, model = matches[0]
        provider_id = dict(order)[instance]
        return ResolvedTarget(instance, model, provider_id, alias=name)

    def _adapter(self, instance: str) -> Adapter:
        adapter = self._adapters.get(instance)
        if adapter is not None:
            return adapter
        if self._closed:
            raise ConfigError("this client is closed")
        settings = self._settings_for(instance)
        cls = self._registry.adapter_class(settings.provider_id)
        resolved, key = settings.with_resolved_key(self._resolver)
        if key is None:
            # ANYINFER_<INSTANCE>_API_KEY, then the provider's usual variable.
            for name in instance_config(settings, cls).key_envs:
                env_key = os.environ.get(name)
                if env_key:
                    register_secret(env_key)
                    resolved = replace(resolved, api_key=env_key)
                    break
        adapter = cls(resolved)
        self._adapters[instance] = adapter
        return adapter

    async def models(self, provider_id: str) -> Sequence[DiscoveredModel]:
        """List a provider's models.

        Args:
            provider_id: A configured instance id or a registered provider id.
        """
        adapter = self._adapter(provider_id.strip().lower())
        found = await adapter.models()
        from .._knowledge.capabilities import capabilities_from_discovery

        store = self._capabilities()
        for model in found:
            store.record(
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
        settings = self._settings_for(instance)
        engine = self._registry.canonical(settings.provider_id)
        cls = self._registry.adapter_class(engine)
        engines = cls.profile.local_engines  # the class declares what it serves
        if not engines:
            ids = self._registry.ids()
            raise ConfigError(
                f"{instance!r} ({engine}) is not a local engine; local engines are "
                + ", ".join(p for p in ids if self._profile(p).local_engines)
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
        from .._local.acquire import acquire
        from .._local.catalog import LocalCatalog
        from .._local.hardware import detect_hardware

        if token:
            register_secret(token)
        model = LocalCatalog.load_default().get(model_id)
        store = self.model_store
        if hardware is None:
            hardware = await _to_thread(detect_hardware, store.root)
        return await acquire(
            store,
            model,
            engine=engine,
            variant_id=variant_id,
            hardware=hardware,
            progress=progress,
            prefs=prefs,
            dry_run=dry_run,
            token=token,
        )

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
            return Route.coerce(target, like=self._route)
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
        check_request(**{k: v for k, v in locals().items() if k not in ("self", "messages")})
        return AsyncStream(
            self._start(
                messages,
                wire_stream=True,
                target=target,
                route=route,
                schema=schema,
                tools=tools,
                tool_choice=tool_choice,
                sampling=sampling,
                reasoning=reasoning,
                timeout_s=timeout_s,
                repair=repair,
                provider_options=provider_options,
                metadata=metadata,
                max_response_bytes=max_response_bytes,
            )
        )

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
    ) -> AsyncIterator[StreamEvent]:
        """Check a call's arguments and return its event stream (nothing is sent yet).

        `stream()`, `generate()` and the `run_tools` rounds all start here; `wire_stream`
        picks the wire request and `retain_raw` overrides the client's setting."""
        msgs = normalize_messages(messages)
        chosen = self._route_for(target, route)
        targets = tuple(self.resolve(t) for t in chosen.targets)
        redirects = tuple(self.resolve(t) for t in chosen.content_policy_targets)
        structured: _Structured | None = None
        if schema is not None:
            from .._structured.output import Repair, normalize_schema

            policy = repair if repair is not None else self._repair
            if policy is not None and not isinstance(policy, Repair):
                raise ConfigError(f"repair must be a Repair, got {type(policy).__name__}")
            structured = _Structured(normalize_schema(schema), policy or Repair(0))
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
        base = GenerationRequest(
            model="",
            messages=msgs,
            stream=wire_stream,
            tools=tool_specs,
            tool_choice=tool_choice,
            sampling=sampling or Sampling(),
            reasoning=reasoning,
            provider_options={},
            retain_raw=self._retain_raw if retain_raw is None else retain_raw,
            metadata=dict(metadata or {}),
            timeout_s=timeout_s,
            max_response_bytes=max_response_bytes,
        )
        return self._run(chosen, targets, redirects, base, provider_options or {}, structured)

    async def _run(
        self,
        route: Route,
        targets: tuple[ResolvedTarget, ...],
        redirects: tuple[ResolvedTarget, ...],
        base: GenerationRequest,
        provider_options: Mapping[str, Mapping[str, Any]],
        structured: _Structured | None = None,
    ) -> AsyncIterator[StreamEvent]:
        """The router: attempts, retries, fallbacks, breaker skips, redirects, the
        context gate, structured output and its repair loop, cost and telemetry."""
        from contextlib import aclosing

        from .._stream.core import AttemptRun
        from .._telemetry import (
            AttemptEnded,
            AttemptStarted,
            FirstToken,
            RequestEnded,
            RequestStarted,
            TelemetryEvent,
            UsageReported,
            new_request_id,
        )

        tel = self._telemetry if self._telemetry.active else None
        request_id = new_request_id() if tel is not None else ""
        meta = base.metadata

        def send(event: TelemetryEvent) -> None:
            if tel is not None:
                tel.emit(lambda: event)

        if tel is not None:
            send(
                RequestStarted(
                    request_id=request_id,
                    metadata=meta,
                    targets=tuple(map(str, targets)),
                    stream=base.stream,
                    messages=base.messages,
                )
            )
        attempts: list[AttemptRecord] = []
        attempt_no = 0
        queue = list(targets)
        redirected = False
        threshold, cooldown = route.breaker_threshold, route.breaker_cooldown_s
        breakers = self._breakers
        last_usage = Usage()

        def ended(target: ResolvedTarget, record: AttemptRecord, usage: Usage) -> None:
            if tel is not None:
                send(
                    AttemptEnded(
                        request_id=request_id,
                        metadata=meta,
                        target=target,
                        outcome=record.outcome,
                        error=record.error,
                        timing=record.timing,
                        usage=usage,
                    )
                )

        try:
            while queue:
                target = queue.pop(0)
                key = str(target)
                if not breakers.allow(key, threshold, cooldown):
                    record = AttemptRecord(target, "skipped_unhealthy")
                    attempts.append(record)
                    ended(target, record, Usage())
                    continue
                options = provider_options.get(target.provider) or provider_options.get(
                    target.provider_id, {}
                )
                request = replace(base, model=target.model, provider_options=dict(options))
                plan = None
                if structured is not None:
                    from .._structured.output import plan_structured

                    caps = self._capabilities().get(
                        f"{target.provider}:{target.model}", provider_id=target.provider_id
                    )
                    from .._knowledge.capabilities import ModelCapabilities

                    plan = plan_structured(
                        structured.schema,
                        caps,
                        target.provider_id,
                        defaults=self._profile(target.provider_id).structured
                        or ModelCapabilities(),
                    )
                    request = replace(
                        request,
                        messages=plan.messages(request.messages),
                        response_format=plan.response_format,
                    )
                retry = 0
                repairs = 0
                while True:
                    attempt_no += 1
                    if tel is not None:
                        number = attempt_no
                        send(
                            AttemptStarted(
                                request_id=request_id, metadata=meta, target=target, attempt=number
                            )
                        )
                    run: AttemptRun | None = None
                    try:
                        try:
                            adapter = self._adapter(target.provider)
                            self._gate(request, target)
                        except AnyInferError:
                            yield TimingMark("attempt_start", 0.0)
                            raise
                        run = AttemptRun(adapter.generate(request), target, streamed=request.stream)
                        async with aclosing(run.events()) as events:
                            if tel is None:
                                async for event in events:
                                    yield event
                            else:
                                async for event in events:
                                    if type(event) is UsageUpdate:
                                        u = event.usage
                                        send(
                                            UsageReported(
                                                request_id=request_id,
                                                metadata=meta,
                                                target=target,
                                                usage=u,
                                            )
                                        )
                                    elif type(event) is TimingMark and event.name == "first_token":
                                        at = event.at_ms
                                        send(
                                            FirstToken(
                                                request_id=request_id,
                                                metadata=meta,
                                                target=target,
                                                at_ms=at,
                                            )
                                        )
                                    yield event
                    except AnyInferError as exc:
                        timing = run.timing() if run is not None else None
                        usage = run.usage if run is not None else Usage()
                        last_usage = usage
                        decision = route.decide(exc)
                        if _counts_against_health(exc, decision):
                            breakers.failure(key, threshold)
                        else:
                            breakers.release(key)
                        if run is not None and run.had_content:
                            # Content was shown: no retry, no fallback. Usage already went
                            # out as events before this exception (failure-path flush).
                            record = AttemptRecord(target, "failed", exc.to_info(), timing)
                            attempts.append(record)
                            ended(target, record, usage)
                            exc.attempts = tuple(attempts)
                            raise
                        delay = None
                        if decision == "retry" and retry < route.retry.max_retries:
                            delay = route.retry.delay(retry + 1, exc)
                        if delay is not None:
                            record = AttemptRecord(target, "retried", exc.to_info(), timing)
                            attempts.append(record)
                            ended(target, record, usage)
                            yield AttemptFailed(record)
                            retry += 1
                            await _sleep(delay)
                            if not breakers.allow(key, threshold, cooldown):
                                break
                            continue
                        record = AttemptRecord(target, "failed", exc.to_info(), timing)
                        attempts.append(record)
                        ended(target, record, usage)
                        yield AttemptFailed(record)
                        if decision == "raise":
                            exc.attempts = tuple(attempts)
                            raise
                        if isinstance(exc, ContentFilterError) and redirects and not redirected:
                            queue, redirected = list(redirects), True
                        break
                    except BaseException:
                        breakers.release(key)  # cancelled: no verdict on the target's health
                        raise
                    breakers.success(key)
                    outcome = run.outcome
                    assert outcome is not None
                    self._probe(target, request, outcome.usage)
                    if outcome.finish_reason == "content_filter" and redirects and not redirected:
                        record = AttemptRecord(target, "redirected", None, outcome.timing)
                        attempts.append(record)
                        ended(target, record, outcome.usage)
                        queue, redirected = list(redirects), True
                        break
                    value: Any = None
                    warnings = outcome.warnings
                    if structured is not None and plan is not None:
                        value, errors = structured.schema.validate(outcome.text)
                        if errors:
                            violation = SchemaViolationError(
                                f"{target}: the response does not satisfy the schema: "
                                + "; ".join(errors[:5]),
                                provider=target.provider,
                                text=outcome.text,
                                errors=errors,
                            )
                            if repairs < structured.repair.max_attempts:
                                from .._structured.output import repair_messages

                                # Re-run inside the same stream: the next segment opens
                                # with a fresh attempt_start and no AttemptFailed.
                                record = AttemptRecord(
                                    target, "retried", violation.to_info(), outcome.timing
                                )
                                attempts.append(record)
                                ended(target, record, outcome.usage)
                                repairs += 1
                                request = replace(
                                    request,
                                    messages=request.messages
                                    + tuple(repair_messages(outcome.text, errors)),
                                )
                                continue
                            record = AttemptRecord(
                                target, "failed", violation.to_info(), outcome.timing
                            )
                            attempts.append(record)
                            ended(target, record, outcome.usage)
                            violation.attempts = tuple(attempts)
                            raise violation
                        warnings = (*plan.warnings, *warnings)
                    usage = outcome.usage
                    cost = self.pricing_table.cost(
                        usage,
                        target.provider_id,
                        target.model,
                        convention=self._profile(target.provider_id).usage or UsageConvention(),
                    )
                    if cost is not None:
                        usage = replace(usage, cost_usd=cost)
                    record = AttemptRecord(target, "ok", None, outcome.timing)
                    attempts.append(record)
                    ended(target, record, usage)
                    result = Generation(
                        text=outcome.text,
                        structured=value,
                        tool_calls=outcome.tool_calls,
                        target=target,
                        finish_reason=outcome.finish_reason,
                        usage=usage,
                        timing=outcome.timing,
                        structured_mechanism=plan.mechanism if plan is not None else None,
                        repair_attempts=repairs,
                        attempts=tuple(attempts),
                        warnings=warnings,
                        raw=outcome.raw,
                        reasoning=outcome.reasoning,
                    )
                    if tel is not None:
                        send(
                            RequestEnded(
                                request_id=request_id,
                                metadata=meta,
                                ok=True,
                                target=target,
                                usage=usage,
                                cost_usd=usage.cost_usd,
                                timing=outcome.timing,
                                finish_reason=outcome.finish_reason,
                                text=outcome.text,
                                tool_calls=outcome.tool_calls,
                            )
                        )
                    yield StreamEnded(result)
                    return
            tried = [a for a in attempts if a.error is not None]
            last = tried[-1].error if tried else None
            if last is not None:
                detail = f": last error {last.type_name}: {last.detail}"
            elif attempts:
                detail = ": every target was skipped as unhealthy"
            else:
                detail = ""
            raise AllTargetsFailedError(
                f"all {len(targets)} target(s) failed{detail}", attempts=attempts
            )
        except AnyInferError as exc:
            if tel is not None:
                info, final_usage = exc.to_info(), last_usage
                send(
                    RequestEnded(
                        request_id=request_id,
                        metadata=meta,
                        ok=False,
                        usage=final_usage,
                        error=info,
                    )
                )
            raise

    def _gate(self, request: GenerationRequest, target: ResolvedTarget) -> None:
        """The context gate: refuse before dispatch when the prompt provably cannot fit.

        Raises:
            ContextWindowError: When a trusted window is exceeded by the estimate's floor.
        """
        if not self._context_gate:
            return
        from .._knowledge.budget import compute_budget, context_gate_error, gate_refuses

        caps = self._capabilities().get(
            f"{target.provider}:{target.model}", provider_id=target.provider_id
        )
        if caps.context_window is None:
            return
        budget = compute_budget(
            request.messages,
            capabilities=caps,
            estimator=self._estimator,
            tools=request.tools,
            schema=_schema_mapping(request.response_format),
            model=target.model,
            sampling_max_output=request.sampling.max_output_tokens,
        )
        if gate_refuses(budget):
            raise context_gate_error(budget, provider=target.provider, model=target.model)

    def _probe(self, target: ResolvedTarget, request: GenerationRequest, usage: Usage) -> None:
        """Record what a successful response showed about the model (probe layer)."""
        if not request.stream:
            return
        from .._knowledge.capabilities import ModelCapabilities

        self._capabilities().record(
            f"{target.provider}:{target.model}",
            ModelCapabilities(streaming_usage=not usage.is_empty()),
            "probe",
        )

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
        check_request(**{k: v for k, v in locals().items() if k not in ("self", "messages")})
        source = self._start(
            messages,
            wire_stream=False,
            target=target,
            route=route,
            schema=schema,
            tools=tools,
            tool_choice=tool_choice,
            sampling=sampling,
            reasoning=reasoning,
            timeout_s=timeout_s,
            repair=repair,
            provider_options=provider_options,
            metadata=metadata,
            max_response_bytes=max_response_bytes,
        )
        return await AsyncStream(source).collect()

    async def _tool_round(self, messages: MessagesInput, **kwargs: Any) -> Generation:
        """One `run_tools` round: `generate()` (same arguments), keeping the raw payload
        for the next turn."""
        source = self._start(messages, wire_stream=False, retain_raw=True, **kwargs)
        return await AsyncStream(source).collect()

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


def _counts_against_health(error: AnyInferError, decision: str) -> bool:
    """Whether a failure says something about the target rather than the request.

    The caller's own limits do not: a full connection pool (`PoolExhaustedError`) or a
    response cut at the caller's `max_response_bytes` (`ResponseTooLargeError`) must not
    open the breaker that every other caller of the target shares.
    """
    if decision == "raise" or isinstance(
        error, ContextWindowError | ContentFilterError | PoolExhaustedError | ResponseTooLargeError
    ):
        return False
    return not isinstance(error, ConfigError)


async def _to_thread(func: Callable[..., _T], /, *args: Any, **kwargs: Any) -> _T:
    """`asyncio.to_thread`, importing asyncio only when first needed."""
    import asyncio

    return await asyncio.to_thread(func, *args, **kwargs)


async def _sleep(seconds: float) -> None:
    import asyncio

    await asyncio.sleep(seconds)


def _budget_schema(schema: Any) -> Mapping[str, Any] | None:
    """The JSON Schema a request will carry, from any accepted `schema=` value."""
    if schema is None:
        return None
    from .._structured.output import normalize_schema

    return normalize_schema(schema).json_schema


def _schema_mapping(schema: Any) -> Mapping[str, Any] | None:
    """A JSON Schema mapping from a mapping, a response format, or a pydantic model."""
    if schema is None:
        return None
    if isinstance(schema, Mapping):
        inner = schema.get("schema") if schema.get("type") == "json_schema" else None
        return inner if isinstance(inner, Mapping) else schema
    to_schema = getattr(schema, "model_json_schema", None)
    if callable(to_schema):
        result = to_schema()
        if isinstance(result, Mapping):
            return result
    raise ConfigError(f"cannot read a JSON Schema from {type(schema).__name__}")


@dataclass(frozen=True, slots=True)
class _Structured:
    """A request's normalized schema and its repair budget."""

    schema: NormalizedSchema
    repair: Repair
