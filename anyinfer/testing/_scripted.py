"""Scripted providers: app-level test doubles that sit above the wire.

A `ScriptedProvider` is a provider whose answers a test writes in advance (`Reply`,
`Fail`) or computes from each request (a function of the `ScriptedCall`). It is
registered in a `ProviderRegistry` like any adapter, and its adapter yields the
library's own parts (`anyinfer.adapters.TextPart`, `UsagePart`, ...) instead of HTTP
bytes, so everything above the adapter is the real thing: routing, retries,
fallbacks, circuit breakers, the context gate, structured-output validation and
repair, `run_tools`, usage merging, pricing and telemetry.

This module imports nothing heavy: the adapter class (and with it httpx) is built the
first time a provider is registered. Its public names are `anyinfer.testing`'s (that
package's `__all__` lists them).
"""

from __future__ import annotations

import copy
import inspect
import json
import re
import threading
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, cast, get_args

from .._errors import ConfigError, ProtocolError, ProviderTimeoutError, StreamError
from .._messages import Message
from .._request import GenerationRequest, Sampling, ToolChoice, ToolSpec
from .._types import ToolCall, Usage

if TYPE_CHECKING:
    from .._adapters.base import Adapter, DiscoveredModel
    from .._adapters.profile import AdapterProfile
    from .._adapters.registry import ProviderRegistry
    from .._client.aclient import AsyncClient
    from .._client.sync import Client
    from .._settings import ProviderSettings

FailKind = Literal[
    "rate_limit",
    "quota",
    "overloaded",
    "server",
    "invalid",
    "auth",
    "not_found",
    "context_window",
    "content_filter",
    "timeout",
    "disconnect",
    "protocol",
]
"""What a scripted failure is. The first nine are HTTP errors, typed exactly as a real
adapter types them (the shared classifier): `rate_limit` a retryable `RateLimitError`
(429), `quota` a non-retryable one (429 `insufficient_quota`), `overloaded` an
`OverloadedError` (503), `server` a retryable `ProviderError` (500), `invalid` a
non-retryable `ProviderError` (400), `auth` an `AuthenticationError` (401),
`not_found` a `ModelNotFoundError` (404), `context_window` a `ContextWindowError` (400)
and `content_filter` a `ContentFilterError` (400). The last three have no status:
`timeout` a `ProviderTimeoutError`, `disconnect` a `StreamError` (the connection broke)
and `protocol` a `ProtocolError` (a malformed frame)."""

FAIL_KINDS: tuple[str, ...] = get_args(FailKind)
"""Every `FailKind`, in order."""

_STATUS: Mapping[str, int] = {
    "rate_limit": 429,
    "quota": 429,
    "overloaded": 503,
    "server": 500,
    "invalid": 400,
    "auth": 401,
    "not_found": 404,
    "context_window": 400,
    "content_filter": 400,
}
"""The HTTP status each HTTP failure kind is served with by default."""


class ScriptExhaustedError(AssertionError):
    """A scripted provider was called once more than its replies allow.

    An `AssertionError`, not an `AnyInferError`: routing never falls back past it, so
    the test fails at the call that was not scripted.
    """


class UnusedRepliesError(AssertionError):
    """A strict scripted provider still held replies that no call asked for."""


def _check_delay(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        raise ConfigError(f"{name} must be a non-negative number of seconds, got {value!r}")
    return float(value)


@dataclass(frozen=True, slots=True)
class Fail:
    """A scripted failure before any content: the call raises a typed error.

    Args:
        kind: What fails (a `FailKind`), or the exception to raise itself (any
            exception; an `AnyInferError` routes like a provider's, anything else
            propagates to the caller untouched). Each call raises a copy.
        message: The provider's error message (a short default names the kind).
        status: The HTTP status, for the HTTP kinds (default: the kind's usual one,
            see `FailKind`). It must be one the kind can arrive with: a hint never
            crosses the status class, so `Fail("context_window", status=500)` is
            refused.
        retry_after: Seconds a `rate_limit` asks to wait (its `Retry-After`). Routing
            waits exactly this long before the retry: `0` keeps a test fast. Without
            it the route's backoff applies.
        delay_s: Seconds before the failure arrives (bounded by the request's timeout,
            which turns a long delay into a `ProviderTimeoutError`).

    Raises:
        ConfigError: For an unknown kind or an argument that does not fit the kind.
    """

    kind: FailKind | BaseException = "server"
    message: str | None = None
    status: int | None = None
    retry_after: float | None = None
    delay_s: float = 0.0

    def __post_init__(self) -> None:
        kind = self.kind
        if isinstance(kind, BaseException):
            if self.status is not None or self.retry_after is not None:
                raise ConfigError(
                    "Fail(exception) takes no status= or retry_after=: set them on the exception"
                )
        elif kind not in FAIL_KINDS:
            raise ConfigError(
                f"unknown failure kind {kind!r}; expected an exception or one of "
                f"{', '.join(FAIL_KINDS)}"
            )
        if self.message is not None and not isinstance(self.message, str):
            raise ConfigError(f"Fail.message must be a string, got {self.message!r}")
        if self.status is not None:
            if kind not in _STATUS:
                raise ConfigError(f"a {kind!r} failure has no HTTP status")
            if isinstance(self.status, bool) or not isinstance(self.status, int):
                raise ConfigError(f"Fail.status must be an int, got {self.status!r}")
            if not 400 <= self.status <= 599:
                raise ConfigError(
                    f"Fail.status must be an error status (400-599), got {self.status}"
                )
            wanted = type(self.error("scripted"))
            natural = type(Fail(kind).error("scripted"))
            if wanted is not natural:
                raise ConfigError(
                    f"HTTP {self.status} cannot carry a {kind!r} failure (it would arrive as "
                    f"{wanted.__name__}, not {natural.__name__})"
                )
        if self.retry_after is not None:
            if kind not in ("rate_limit", "quota"):
                raise ConfigError(f"retry_after= applies to rate limits, not to {kind!r}")
            _check_delay(self.retry_after, "Fail.retry_after")
        _check_delay(self.delay_s, "Fail.delay_s")

    def error(self, provider: str) -> BaseException:
        """The exception this failure raises for the instance `provider` (a fresh one)."""
        kind = self.kind
        if isinstance(kind, BaseException):
            try:
                return copy.copy(kind)
            except Exception:  # an exception that does not copy is raised as given
                return kind
        message = self.message or f"scripted {kind.replace('_', ' ')} failure"
        if kind == "timeout":
            return ProviderTimeoutError(
                f"{provider}: {message}", timeout_kind="first_byte", provider=provider
            )
        if kind == "disconnect":
            return StreamError(f"{provider}: {message}", provider=provider)
        if kind == "protocol":
            return ProtocolError(f"{provider}: {message}", provider=provider)
        from .._adapters.errormap import classify

        status = self.status if self.status is not None else _STATUS[kind]
        code = "insufficient_quota" if kind == "quota" else None
        return classify(
            status,
            message,
            code,
            hint=kind,
            provider=provider,
            retry_after=self.retry_after,
        )


ToolCallSpec: TypeAlias = ToolCall | tuple[str, Mapping[str, Any] | str]
"""A scripted tool call: a `ToolCall`, or `(name, arguments)` (the id is then left out,
and the core gives it `call_<index>`). Arguments are a mapping, or a string sent as the
raw argument JSON (to test unparseable arguments)."""

CutPoint: TypeAlias = int | Literal["finish"]


@dataclass(frozen=True, slots=True)
class Reply:
    """A scripted response.

    Streamed (`stream()`), it arrives in pieces: the reasoning, then the text, then
    one piece per tool call, then the finish reason and the usage. A string is
    streamed word by word (`"Hello world"` as `"Hello"`, `" world"`); a sequence of
    strings gives the pieces exactly. Not streamed (`generate()`, `run_tools`), it
    arrives whole, as a real non-streaming response does.

    Args:
        text: The answer text, or its pieces.
        reasoning: Reasoning text, or its pieces (streamed before the text).
        tool_calls: Tool calls the model makes (`ToolCall`s or `(name, arguments)`).
        usage: The usage the provider reports; `None` reports none.
        usage_at: Where a stream reports it: `"end"` after the finish reason (the
            trailing usage chunk of OpenAI-style streams), or `"start"` before any
            content (as Anthropic's `message_start` does), which is what a cut stream
            still delivers.
        finish_reason: The provider's finish reason (default `"tool_calls"` when the
            reply calls tools, else `"stop"`). Any string goes: unknown ones become
            `"other"`, and `"content_filter"` is a refusal a route can redirect.
        delay_s: Seconds before the first piece (time to first token).
        interval_s: Seconds between pieces.
        cut_after: Break the stream after this many content pieces (reasoning, text
            and tool-call pieces, counted in the order they stream), with `cut_error`.
            `"finish"` breaks it after the finish reason, before the trailing usage
            and the end marker: the generation still succeeds, with a "usage may be
            incomplete" warning. A whole (non-streamed) response that is cut anywhere
            fails before any content, as a truncated body does.
        cut_error: What the cut raises: a `FailKind` (default `"disconnect"`, a
            `StreamError`) or an exception.
        raw: A payload the adapter yields as the raw response, when the request keeps
            raw payloads.

    Raises:
        ConfigError: For a value of the wrong type or out of range.
    """

    text: str | Sequence[str] = ""
    reasoning: str | Sequence[str] = ""
    tool_calls: Sequence[ToolCallSpec] = ()
    usage: Usage | None = None
    usage_at: Literal["start", "end"] = "end"
    finish_reason: str | None = None
    delay_s: float = 0.0
    interval_s: float = 0.0
    cut_after: CutPoint | None = None
    cut_error: FailKind | BaseException = "disconnect"
    raw: Any = None
    _calls: tuple[tuple[str | None, str, str], ...] = field(
        init=False, repr=False, compare=False, default=()
    )

    def __post_init__(self) -> None:
        for name in ("text", "reasoning"):
            value = getattr(self, name)
            if not isinstance(value, str):
                pieces = tuple(value) if isinstance(value, Sequence) else None
                if pieces is None or not all(isinstance(p, str) for p in pieces):
                    raise ConfigError(
                        f"Reply.{name} must be a string or a sequence of strings, got {value!r}"
                    )
                object.__setattr__(self, name, pieces)
        if self.usage is not None and not isinstance(self.usage, Usage):
            raise ConfigError(f"Reply.usage must be an anyinfer.Usage, got {self.usage!r}")
        if self.usage_at not in ("start", "end"):
            raise ConfigError(f"Reply.usage_at must be 'start' or 'end', got {self.usage_at!r}")
        if self.finish_reason is not None and (
            not isinstance(self.finish_reason, str) or not self.finish_reason
        ):
            raise ConfigError(
                f"Reply.finish_reason must be a non-empty string, got {self.finish_reason!r}"
            )
        _check_delay(self.delay_s, "Reply.delay_s")
        _check_delay(self.interval_s, "Reply.interval_s")
        cut = self.cut_after
        if (
            cut is not None
            and cut != "finish"
            and (isinstance(cut, bool) or not isinstance(cut, int) or cut < 0)
        ):
            raise ConfigError(
                f"Reply.cut_after must be a non-negative int or 'finish', got {cut!r}"
            )
        Fail(self.cut_error)  # checks the kind
        object.__setattr__(self, "tool_calls", tuple(self.tool_calls))
        object.__setattr__(self, "_calls", tuple(_tool_call(c) for c in self.tool_calls))

    @property
    def reason(self) -> str:
        """The finish reason this reply sends."""
        if self.finish_reason is not None:
            return self.finish_reason
        return "tool_calls" if self._calls else "stop"

    def text_pieces(self) -> tuple[str, ...]:
        """The text as it streams."""
        return _pieces(self.text)

    def reasoning_pieces(self) -> tuple[str, ...]:
        """The reasoning as it streams."""
        return _pieces(self.reasoning)

    def wire_calls(self) -> tuple[tuple[str | None, str, str], ...]:
        """The tool calls as `(id or None, name, argument JSON)`."""
        return self._calls


def _pieces(value: str | Sequence[str]) -> tuple[str, ...]:
    if not isinstance(value, str):
        return tuple(p for p in value if p)
    words = re.findall(r"\s*\S+", value)
    tail = value[sum(map(len, words)) :]
    if tail:
        if words:
            words[-1] += tail
        else:
            words.append(tail)
    return tuple(words)


def _tool_call(spec: Any) -> tuple[str | None, str, str]:
    if isinstance(spec, ToolCall):
        call_id: str | None = spec.id
        name, arguments = spec.name, spec.arguments
    elif isinstance(spec, tuple) and len(spec) == 2:
        call_id = None
        name, arguments = spec
    else:
        raise ConfigError(
            f"a scripted tool call is a ToolCall or a (name, arguments) pair, got {spec!r}"
        )
    if not isinstance(name, str) or not name:
        raise ConfigError(f"a scripted tool call needs a tool name, got {name!r}")
    if isinstance(arguments, str):
        return call_id, name, arguments
    if not isinstance(arguments, Mapping):
        raise ConfigError(
            f"tool call {name!r}: arguments must be a mapping or a JSON string, got {arguments!r}"
        )
    try:
        text = json.dumps(dict(arguments), ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"tool call {name!r}: arguments are not JSON: {exc}") from None
    return call_id, name, text


@dataclass(frozen=True, slots=True)
class ScriptedCall:
    """One call a scripted provider received: the request the app sent.

    Attributes:
        provider: The scripted provider's id.
        instance: The provider instance that served it (its alias, when it has one).
        number: Which call this is for the provider, from 1 (retries, fallbacks, repair
            re-runs and tool rounds each count).
        request: The request as the adapter received it.
    """

    provider: str
    instance: str
    number: int
    request: GenerationRequest

    @property
    def model(self) -> str:
        """The model the target named."""
        return self.request.model

    @property
    def messages(self) -> tuple[Message, ...]:
        """The conversation sent (with the schema instructions or repair turns the
        library added)."""
        return self.request.messages

    @property
    def prompt(self) -> str:
        """The text of the last user message (`""` when there is none)."""
        for message in reversed(self.request.messages):
            if message.role == "user":
                return message.text
        return ""

    @property
    def tools(self) -> tuple[ToolSpec, ...]:
        """The tools offered."""
        return self.request.tools

    @property
    def tool_names(self) -> tuple[str, ...]:
        """The names of the tools offered."""
        return tuple(t.name for t in self.request.tools)

    @property
    def tool_choice(self) -> ToolChoice:
        """How the model may use the tools."""
        return self.request.tool_choice

    @property
    def tool_results(self) -> tuple[Message, ...]:
        """The tool-result messages in the conversation, in order."""
        return tuple(m for m in self.request.messages if m.role == "tool")

    @property
    def schema(self) -> Mapping[str, Any] | None:
        """The JSON Schema the request asks the reply to satisfy, when it carries one
        (the `json_schema` mechanism, which scripted providers declare by default)."""
        fmt = self.request.response_format
        if fmt is None or fmt.get("type") != "json_schema":
            return None
        inner = fmt.get("schema")
        return inner if isinstance(inner, Mapping) else None

    @property
    def stream(self) -> bool:
        """Whether the app streamed (`stream()`) rather than asked for a whole reply."""
        return self.request.stream

    @property
    def sampling(self) -> Sampling:
        """The sampling controls sent."""
        return self.request.sampling

    @property
    def metadata(self) -> Mapping[str, str]:
        """The caller's metadata."""
        return self.request.metadata


ReplyValue: TypeAlias = "str | Reply | Fail | BaseException"
"""One reply: a `Reply`, a string (a text reply), a `Fail`, or an exception to raise."""
ReplyFunction: TypeAlias = "Callable[[ScriptedCall], ReplyValue | Awaitable[ReplyValue]]"
"""A reply computed from the call (the request the app sent); it may be `async`."""
ReplySource: TypeAlias = "ReplyValue | Sequence[ReplyValue | ReplyFunction] | ReplyFunction"
"""What a scripted provider answers with: one reply, a list of replies (one per call, in
order), or a function of each call returning one (it may be `async`). A reply is a
`Reply`, a plain string (a text reply), a `Fail`, or an exception (raised as a `Fail`
of it). A function inside a list answers the one call it comes up for."""


def _coerce(value: Any, where: str) -> Reply | Fail:
    if isinstance(value, Reply | Fail):
        return value
    if isinstance(value, str):
        return Reply(value)
    if isinstance(value, BaseException):
        return Fail(value)
    raise ConfigError(
        f"{where}: a reply is a str, Reply, Fail or exception, got {type(value).__name__}"
    )


def _queued(value: Any, where: str) -> Reply | Fail | Callable[[ScriptedCall], Any]:
    """A reply for the queue: a function there answers the one call it comes up for."""
    if callable(value) and not isinstance(value, BaseException | type):
        return cast("Callable[[ScriptedCall], Any]", value)
    return _coerce(value, where)


def _check_provider_id(provider_id: Any) -> str:
    if not isinstance(provider_id, str) or not provider_id.strip() or ":" in provider_id:
        raise ConfigError(
            f"a scripted provider id must be a non-empty string without ':', got {provider_id!r}"
        )
    return provider_id.strip().lower()


class ScriptedProvider:
    """A provider whose replies a test scripts, registered like any other adapter.

    ```python
    from anyinfer.testing import Fail, ScriptedProvider

    flaky = ScriptedProvider("primary", [Fail("rate_limit", retry_after=0), "Hello"])
    ```

    Register it (`register`, or through `ScriptedProviders`), and a client whose
    registry holds it serves `"primary:<any model>"` from the script. Every call is
    recorded in `calls`, with the request the app sent.

    Args:
        provider_id: The id targets name (`"primary"` serves `"primary:any-model"`).
            Naming a real provider (`"openai"`) in a registry of your own also
            gets that provider's catalog facts and pricing for its models.
        replies: What it answers (see `ReplySource`): a list is used up one reply per
            call, and a call past its end raises `ScriptExhaustedError`; a function
            answers every call.
        profile: The adapter profile it declares (default: no aliases, and the
            `json_schema` structured-output mechanism, so `ScriptedCall.schema` shows a
            request's schema).
        models: Model names its discovery endpoint lists (`client.models(...)`,
            `client.health(...)`); `None` means it has none.
        strict: Whether `ScriptedProviders.assert_all_used` (and so the pytest
            fixtures at teardown) fail when this provider's replies were not all asked
            for. This provider's own `assert_all_used` always checks.

    Raises:
        ConfigError: For a bad id or reply.
    """

    def __init__(
        self,
        provider_id: str = "scripted",
        replies: ReplySource = (),
        *,
        profile: AdapterProfile | None = None,
        models: Sequence[str] | None = None,
        strict: bool = True,
    ) -> None:
        self.provider_id = _check_provider_id(provider_id)
        self._lock = threading.Lock()
        self._queue: list[Reply | Fail | Callable[[ScriptedCall], Any]] = []
        self._function: Callable[[ScriptedCall], Any] | None = None
        self.calls: list[ScriptedCall] = []
        """Every call received, in order."""
        self._log: list[ScriptedCall] | None = None
        self.strict = strict
        self.models = None if models is None else tuple(models)
        if self.models is not None and not all(isinstance(m, str) and m for m in self.models):
            raise ConfigError(f"models must be model names, got {models!r}")
        if profile is not None:
            from .._adapters.profile import AdapterProfile

            if not isinstance(profile, AdapterProfile):
                raise ConfigError(
                    f"profile must be an AdapterProfile, got {type(profile).__name__}"
                )
        self._profile = profile
        self._adapter_class: type[Adapter] | None = None
        if callable(replies) and not isinstance(replies, BaseException):
            self._function = replies
        else:
            self.queue(replies)

    def __repr__(self) -> str:
        mode = "function" if self._function is not None else f"{len(self._queue)} left"
        return f"ScriptedProvider({self.provider_id!r}, calls={len(self.calls)}, {mode})"

    def queue(
        self, *replies: ReplyValue | ReplyFunction | Sequence[ReplyValue | ReplyFunction]
    ) -> ScriptedProvider:
        """Add replies to the end of the script (a list is added reply by reply; a
        function answers the one call it comes up for).

        Raises:
            ConfigError: If the provider answers with a function.
        """
        items: list[Reply | Fail | Callable[[ScriptedCall], Any]] = []
        for value in replies:
            if isinstance(value, Sequence) and not isinstance(value, str):
                items.extend(_queued(v, self.provider_id) for v in value)
            else:
                items.append(_queued(value, self.provider_id))
        if items and self._function is not None:
            raise ConfigError(f"{self.provider_id}: replies come from a function; cannot queue")
        with self._lock:
            self._queue.extend(items)
        return self

    @property
    def remaining(self) -> int:
        """Scripted replies not asked for yet (0 for a function)."""
        return len(self._queue)

    def assert_all_used(self) -> None:
        """Fail when scripted replies were never asked for.

        Raises:
            UnusedRepliesError: Some replies are left.
        """
        left = list(self._queue)  # a snapshot: calls may still be running
        if left:
            shown = ", ".join(_describe(r) for r in left[:5])
            more = f" (and {len(left) - 5} more)" if len(left) > 5 else ""
            raise UnusedRepliesError(
                f"scripted provider {self.provider_id!r} was called {len(self.calls)} time(s) "
                f"and still has {len(left)} unused repl{'y' if len(left) == 1 else 'ies'}: "
                f"{shown}{more}"
            )

    # --- registration ------------------------------------------------------------------

    @property
    def adapter_class(self) -> type[Adapter]:
        """The adapter class serving this script (built on first use)."""
        if self._adapter_class is None:
            from ._adapter import scripted_adapter_class

            self._adapter_class = scripted_adapter_class(self, self._profile)
        return self._adapter_class

    def register(self, registry: ProviderRegistry, *, replace: bool = False) -> ScriptedProvider:
        """Register this provider in `registry` under its id.

        Args:
            registry: The registry (a client's `registry=`).
            replace: Replace what the id names already (a built-in, for one).

        Raises:
            ConfigError: If the id is taken and `replace` is false.
        """
        registry.register(self.provider_id, self.adapter_class, replace=replace)
        return self

    def settings(self, *, alias: str | None = None, **kwargs: Any) -> ProviderSettings:
        """`ProviderSettings` for an instance of this provider (`alias` for a second one)."""
        from .._settings import ProviderSettings

        return ProviderSettings.of(self.provider_id, alias=alias, **kwargs)

    # --- what the adapter calls ------------------------------------------------------

    def _next(self, instance: str, request: GenerationRequest) -> tuple[ScriptedCall, Any]:
        """Record a call; its reply (or, for a function, what the function returned)."""
        with self._lock:
            call = ScriptedCall(self.provider_id, instance, len(self.calls) + 1, request)
            self.calls.append(call)
            if self._log is not None:
                self._log.append(call)
            if self._function is not None:
                function = self._function
            elif self._queue:
                item = self._queue.pop(0)
                if isinstance(item, Reply | Fail):
                    return call, item
                function = item
            else:
                scripted = call.number - 1
                raise ScriptExhaustedError(
                    f"scripted provider {self.provider_id!r} has no reply for call "
                    f"#{call.number} (to {instance}:{request.model}; {scripted} scripted). "
                    "Script one more reply, or answer with a function."
                )
        return call, function(call)

    async def _reply(
        self, instance: str, request: GenerationRequest
    ) -> tuple[ScriptedCall, Reply | Fail]:
        call, value = self._next(instance, request)
        if inspect.isawaitable(value):
            value = await value
        if isinstance(value, str | Reply | Fail | BaseException):
            return call, _coerce(value, self.provider_id)
        # A TypeError, not an AnyInferError: routing must not fall back past a broken
        # script, the test fails at this call.
        raise TypeError(
            f"scripted provider {self.provider_id!r}: the reply function returned "
            f"{type(value).__name__} for call #{call.number}; a reply is a str, Reply, "
            "Fail or exception"
        )

    def _discovered(self, instance: str) -> list[DiscoveredModel]:
        from .._adapters.base import DiscoveredModel

        if self.models is None:
            raise ConfigError(f"{instance} has no model discovery", provider=instance)
        return [DiscoveredModel(instance, m) for m in self.models]


def _describe(reply: Reply | Fail | Callable[[ScriptedCall], Any]) -> str:
    if not isinstance(reply, Reply | Fail):
        return f"a function ({getattr(reply, '__qualname__', type(reply).__name__)})"
    if isinstance(reply, Fail):
        kind = reply.kind
        return f"Fail({type(kind).__name__ if isinstance(kind, BaseException) else kind!r})"
    text = "".join(reply.text_pieces())
    if reply.tool_calls:
        names = ", ".join(name for _id, name, _args in reply.wire_calls())
        return f"Reply(tool_calls: {names})"
    return f"Reply({text[:40]!r})"


class ScriptedProviders:
    """A test's scripted providers: one registry holding them, and clients wired to it.

    ```python
    import anyinfer as ai
    from anyinfer.testing import Fail, ScriptedProviders

    with ScriptedProviders() as scripted:
        scripted.add("primary", Fail("server"))
        scripted.add("backup", "Hello")
        with scripted.client() as client:
            result = client.generate("Hi", route=["primary:m", "backup:m"])
        scripted.assert_all_used()
    ```

    The pytest fixture `anyinfer_scripted` is one of these (and `anyinfer_scripted_client`
    a client from it), closed and checked when the test ends.

    Args:
        registry: The registry to register into. The default is a registry of their
            own that holds nothing else: a target naming any other provider is a
            `ConfigError`, so nothing can reach a real provider. Passing one (even
            `anyinfer.default_registry()`) registers over what it holds, and `close()`
            puts back what was replaced.
        strict: The default `strict` of the providers added.
    """

    def __init__(self, *, registry: ProviderRegistry | None = None, strict: bool = True) -> None:
        if registry is None:
            from .._adapters.registry import ProviderRegistry

            registry = ProviderRegistry(builtins=False, entry_points=False)
        self.registry = registry
        self.strict = strict
        self._providers: dict[str, ScriptedProvider] = {}
        self._replaced: dict[str, type[Adapter] | None] = {}
        self._clients: list[Client] = []
        self.calls: list[ScriptedCall] = []
        """Every call to any of these providers, in order (the fallback order shows here)."""
        self._closed = False

    def add(
        self,
        provider_id: str = "scripted",
        replies: ReplySource = (),
        *,
        profile: AdapterProfile | None = None,
        models: Sequence[str] | None = None,
        strict: bool | None = None,
    ) -> ScriptedProvider:
        """Create a scripted provider and register it (see `ScriptedProvider`).

        Also `scripted(provider_id, replies)`: calling the object adds a provider.

        Raises:
            ConfigError: If this set already has a provider with that id, or is closed.
        """
        if self._closed:
            raise ConfigError("these scripted providers are closed")
        provider = ScriptedProvider(
            provider_id,
            replies,
            profile=profile,
            models=models,
            strict=self.strict if strict is None else strict,
        )
        return self.register(provider)

    __call__ = add

    def register(self, provider: ScriptedProvider) -> ScriptedProvider:
        """Register a provider made elsewhere (its calls join `calls`).

        Raises:
            ConfigError: If this set already has a provider with that id.
        """
        pid = provider.provider_id
        if pid in self._providers:
            raise ConfigError(f"a scripted provider {pid!r} is already registered here")
        registry = self.registry
        if pid not in self._replaced:
            self._replaced[pid] = registry.adapter_class(pid) if pid in registry else None
        provider.register(registry, replace=True)
        provider._log = self.calls
        self._providers[pid] = provider
        return provider

    def __getitem__(self, provider_id: str) -> ScriptedProvider:
        return self._providers[provider_id.strip().lower()]

    def __iter__(self) -> Iterator[ScriptedProvider]:
        return iter(list(self._providers.values()))

    def __len__(self) -> int:
        return len(self._providers)

    def client(self, providers: Sequence[ProviderSettings] | None = None, **kwargs: Any) -> Client:
        """An `anyinfer.Client` on this registry (closed by `close()` if still open).

        Args:
            providers: Provider settings, as for `Client` (default none: every scripted
                provider is then used with its defaults).
            **kwargs: Any other `Client` argument (`route=`, `repair=`, `observers=`, ...).
        """
        from .._client.sync import Client

        client = Client(providers, registry=self.registry, **kwargs)
        self._clients.append(client)
        return client

    def async_client(
        self, providers: Sequence[ProviderSettings] | None = None, **kwargs: Any
    ) -> AsyncClient:
        """An `anyinfer.AsyncClient` on this registry (use it with `async with`)."""
        from .._client.aclient import AsyncClient

        return AsyncClient(providers, registry=self.registry, **kwargs)

    def assert_all_used(self) -> None:
        """Fail when a strict provider still holds replies nobody asked for.

        Raises:
            UnusedRepliesError: Naming each provider with replies left.
        """
        problems: list[str] = []
        for provider in self._providers.values():
            if not provider.strict:
                continue
            try:
                provider.assert_all_used()
            except UnusedRepliesError as exc:
                problems.append(str(exc))
        if problems:
            raise UnusedRepliesError("\n".join(problems))

    def close(self) -> None:
        """Close the sync clients made here, and put back what the registrations replaced."""
        if self._closed:
            return
        self._closed = True
        clients, self._clients = self._clients, []
        for client in clients:
            client.close()
        for pid, previous in self._replaced.items():
            if previous is None:
                self.registry.unregister(pid)
            else:
                self.registry.register(pid, previous, replace=True)

    def __enter__(self) -> ScriptedProviders:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
