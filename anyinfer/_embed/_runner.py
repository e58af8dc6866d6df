"""The client side of `embed()`: the vector-space rule, batching, and each batch's route.

Generation's `Router` walks an event stream (content shown or not, redirects, repairs);
an embedding batch is one request and one JSON answer, so this runner walks the route
itself, with the same decisions: `Route.decide` says retry, fall back or raise;
`RetryPolicy.delay` says how long to wait (exponential backoff with jitter, or the
provider's `Retry-After`); the client's `Breakers` skip an open target, count failures
that say something about the target (`attempt._counts_against_health`) and close on
success. Every attempt is an `AttemptRecord` in the result's trail, and a route that
runs out raises `AllTargetsFailedError` carrying them.

Before anything is sent, `check_vector_space` refuses a route whose targets cannot be
proven to produce vectors of one space: vectors of different models are not comparable,
so a fallback to another model would silently corrupt an index.

Before anything is sent, too, `check_capabilities` reads the model's known capabilities
(catalog < discovery < probe < overrides, as for generation) and refuses a call they say
cannot succeed: `dimensions` the model does not offer, or an input whose estimated
tokens (the floor of the client's estimator, as the context gate reads it) exceed the
model's per-input limit. What is unknown never refuses.

Inputs are cut into batches of at most the adapter's `embed_max_batch`, the model's known
`embed_max_batch` and the call's `batch_size`, whichever is smallest, sent concurrently
up to `concurrency` at once, and put back in input order; usage is summed over the
batches. A failed batch cancels the others and raises: a partial result is never
returned.

Telemetry (`_observe`): an observed call reports `OperationStarted`, a
`BatchAttemptEnded` per attempt of each batch (with its usage and cost when it
succeeded), and `OperationEnded`; an unobserved call builds none of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import field, replace
from typing import TYPE_CHECKING

from .._client.validate import need_int
from .._errors import ConfigError, ProtocolError
from .._types import ResolvedTarget
from .._values import value_class
from ._route import UnaryCall, UnaryRunner, UnarySpec, adapter_class, refuse_mixed_models, strings
from ._types import Embeddings, EmbedEncoding, EmbedReply, EmbedRequest

if TYPE_CHECKING:
    from collections.abc import Awaitable

    from .._adapters.base import Adapter
    from .._client.health import Breakers
    from .._client.route import Route
    from .._client.targets import Targets
    from .._knowledge.budget import TokenEstimator
    from .._knowledge.capabilities import ModelCapabilities
    from .._observers import Telemetry
    from ._route import Served

__all__ = [
    "EmbedCall",
    "EmbedRunner",
    "check_capabilities",
    "check_vector_space",
    "input_token_floor",
    "split_batches",
]


def check_vector_space(
    targets: Sequence[ResolvedTarget], dimensions: int | None, *, same_space: bool
) -> None:
    """Refuse, before dispatch, a route whose targets may embed into different spaces.

    Every target must name the same model as the first (the dimensions are the call's,
    so they agree by construction). `same_space=True` is the caller's declaration that
    differently named models (an Azure deployment of `text-embedding-3-small`, say)
    produce the same vectors.

    Raises:
        ConfigError: Naming the first target that differs and why it is refused.
    """
    if same_space:
        return
    dims = "" if dimensions is None else f" at {dimensions} dimensions"
    refuse_mixed_models(
        targets,
        what="embed()",
        override="same_vector_space=True",
        why=f"vectors of different models are not comparable{dims}, so serving a batch "
        "from it would silently mix vector spaces",
    )


@value_class(kw_only=True)
class EmbedCall(UnaryCall):
    """One `embed()` call's arguments (see `AsyncClient.embed`), checked when built.

    Attributes:
        inputs: One text or a sequence of texts, as the caller passed them.
        texts: The inputs as a tuple of strings (one string is one input).
        dimensions: Output dimensions, when asked.
        input_type: What the texts are for, when given.
        encoding: How vectors travel on the wire.
        same_vector_space: The caller's declaration that every target of the route
            embeds into one space.

    Raises:
        ConfigError: For inputs that are not one string or a non-empty sequence of
            strings, dimensions that are not a positive integer, an encoding other
            than `"base64"` or `"float"`, an empty or non-string input type, a
            `same_vector_space` that is not a bool, or a keyword `UnaryCall` refuses.
    """

    inputs: str | Sequence[str]
    texts: tuple[str, ...] = field(init=False)
    dimensions: int | None = None
    input_type: str | None = None
    encoding: EmbedEncoding = "base64"
    same_vector_space: bool = False

    def __post_init__(self) -> None:
        texts = strings(self.inputs, call="embed()", name="inputs", noun="input", single=True)
        object.__setattr__(self, "texts", texts)
        self._check_common()
        dimensions = self.dimensions
        if dimensions is not None:
            need_int(dimensions, "dimensions")
            if dimensions <= 0:
                raise ConfigError(f"dimensions must be positive, got {dimensions!r}")
        if self.encoding not in ("base64", "float"):
            raise ConfigError(f"encoding must be 'base64' or 'float', got {self.encoding!r}")
        kind = self.input_type
        if kind is not None and (not isinstance(kind, str) or not kind):
            raise ConfigError(f"input_type must be a non-empty string, got {kind!r}")
        if type(self.same_vector_space) is not bool:
            raise ConfigError(f"same_vector_space must be a bool, got {self.same_vector_space!r}")


def split_batches(count: int, size: int) -> list[range]:
    """`range(count)` cut into consecutive ranges of at most `size` indices."""
    return [range(start, min(start + size, count)) for start in range(0, count, size)]


def input_token_floor(text: str, estimator: TokenEstimator | None, model: str) -> int:
    """At least how many tokens `text` takes as one embedding input: an estimate.

    The estimator is the one the context gate uses (the byte heuristic unless the
    client was given another), asked about the text as one user message; what it adds
    for chat framing (measured on an empty message) is taken off, since an embedding
    input has none. For the byte heuristic that is the UTF-8 length / 8, a floor for
    natural language; an exact estimator (tiktoken for OpenAI models) gives the count.
    """
    from .._knowledge.budget import ByteHeuristicEstimator
    from .._messages import Message

    est = estimator if estimator is not None else ByteHeuristicEstimator()
    whole = est.estimate([Message.user(text)], model=model).floor
    framing = est.estimate([Message.user("")], model=model).floor
    return max(0, whole - framing)


def _named(caps: ModelCapabilities, name: str) -> str:
    """Where a capability fact came from, for an error message."""
    return f"{name}, from the {caps.source(name)} layer"


def check_capabilities(
    target: ResolvedTarget,
    caps: ModelCapabilities,
    *,
    texts: Sequence[str],
    dimensions: int | None,
    estimator: TokenEstimator | None,
    gate_tokens: bool = True,
) -> None:
    """Refuse, before dispatch, an `embed()` call `caps` say cannot succeed on `target`.

    Refused: `dimensions` when the model takes no `dimensions` parameter, is not among
    its `embed_dimension_options`, or exceeds its `embed_max_dimensions`; an input whose
    token floor (`input_token_floor`) exceeds `embed_max_input_tokens`. A capability
    nobody knows never refuses.

    Args:
        target: The target the capabilities are about.
        caps: Its model's assembled capabilities.
        texts: The call's inputs.
        dimensions: The dimensions asked for, if any.
        estimator: The client's token estimator (the byte heuristic when `None`).
        gate_tokens: Whether to check input lengths (the client's `context_gate`).

    Raises:
        ConfigError: Saying what was asked, what the model allows, and where that
            fact came from.
    """
    where = f"embed(): {target}"
    if dimensions is not None:
        if caps.embed_dimensions_param is False:
            native = (
                f" (it always answers with {caps.embed_dimensions})"
                if caps.embed_dimensions is not None
                else ""
            )
            raise ConfigError(
                f"{where} takes no dimensions parameter{native}; dimensions={dimensions} "
                f"was asked ({_named(caps, 'embed_dimensions_param')}). Leave dimensions "
                "unset for this model",
                provider=target.provider,
            )
        options = caps.embed_dimension_options
        if options is not None and dimensions not in options:
            sizes = ", ".join(map(str, options))
            raise ConfigError(
                f"{where} offers dimensions {sizes}, not {dimensions} "
                f"({_named(caps, 'embed_dimension_options')})",
                provider=target.provider,
            )
        top = caps.embed_max_dimensions
        if top is not None and dimensions > top:
            raise ConfigError(
                f"{where} produces at most {top} dimensions, not {dimensions} "
                f"({_named(caps, 'embed_max_dimensions')})",
                provider=target.provider,
            )
    limit = caps.embed_max_input_tokens
    if limit is not None and gate_tokens:
        for i, text in enumerate(texts):
            # a token takes at least one byte, a character at most four: shorter texts
            # cannot overflow, and most never need encoding to tell
            if len(text) * 4 <= limit or len(text.encode("utf-8")) <= limit:
                continue
            floor = input_token_floor(text, estimator, target.model)
            if floor > limit:
                raise ConfigError(
                    f"{where}: inputs[{i}] takes at least {floor} tokens (an estimate: the "
                    f"token estimator's lower bound) but the model takes at most {limit} per "
                    f"input ({_named(caps, 'embed_max_input_tokens')}); refused before "
                    "sending. Split or shorten the input",
                    provider=target.provider,
                )


class EmbedRunner(UnaryRunner):
    """Runs `embed()` calls over the client's adapters and breakers.

    Args:
        targets: Adapters, profiles, pricing and capabilities.
        breakers: The client's circuit breakers (shared with generation).
        telemetry: The client's observer hub (`None`: no telemetry).
        estimator: The client's token estimator, for the per-input token limit.
        context_gate: Whether known token limits may refuse a call (the client's
            `context_gate`).
    """

    __slots__ = ("_context_gate", "_estimator")

    def __init__(
        self,
        targets: Targets,
        breakers: Breakers,
        telemetry: Telemetry | None = None,
        *,
        estimator: TokenEstimator | None = None,
        context_gate: bool = True,
    ) -> None:
        super().__init__(targets, breakers, telemetry)
        self._estimator = estimator
        self._context_gate = context_gate

    async def embed(
        self, route: Route, targets: tuple[ResolvedTarget, ...], call: EmbedCall
    ) -> Embeddings:
        """Run an `embed()` call (see `AsyncClient.embed`; `call` is already checked):
        check it against its route, then embed the inputs in batches, each routed, and
        put the vectors back in input order.

        Raises:
            ConfigError: Before anything is sent, for a target whose adapter does not
                embed, a route mixing vector spaces, or a call the model's known
                capabilities say cannot succeed.
            AllTargetsFailedError: A batch found no target that answered.
            AnyInferError: An error the route's `decide` raises, or a reply that breaks
                the embedding guarantees (`ProtocolError`).
        """
        texts, dimensions = call.texts, call.dimensions
        check_vector_space(targets, dimensions, same_space=call.same_vector_space)
        for t in targets:
            cls = adapter_class(self._targets, t)
            refusal = cls.embeddings_refusal(self._targets.settings_for(t.provider))
            if refusal is not None:
                raise ConfigError(f"embed(): {t} cannot embed: {refusal}", provider=t.provider)
        # Every target embeds into one vector space (one model), so a model fact known
        # for one target holds for the call: any target's known limits may refuse it.
        for t in dict.fromkeys(targets):
            check_capabilities(
                t,
                self._targets.capabilities(t),
                texts=texts,
                dimensions=dimensions,
                estimator=self._estimator,
                gate_tokens=self._context_gate,
            )
        base = EmbedRequest(
            model=targets[0].model,
            inputs=texts,
            dimensions=dimensions,
            input_type=call.input_type,
            encoding=call.encoding,
            timeout_s=call.timeout_s,
        )
        inputs = base.inputs
        size = min(self._max_batch(t) for t in targets)
        if call.batch_size is not None:
            size = min(size, call.batch_size)
        spans = split_batches(len(inputs), size)
        tel = self._instrument(call, "embeddings")
        tel.started(
            targets,
            texts=inputs,
            batch_count=len(spans),
            dimensions=base.dimensions,
            encoding=base.encoding,
            input_type=base.input_type,
        )
        requests = [(span, replace(base, inputs=inputs[span.start : span.stop])) for span in spans]
        with tel:
            served = await self.run_requests(route, targets, _EMBED, requests, call, tel)
            result = _assemble(served, base)
        tel.ended(result, dimensions=result.dimensions)
        return result

    def _max_batch(self, target: ResolvedTarget) -> int:
        """The most inputs one request to `target` may carry: the adapter's limit, and
        the model's known `embed_max_batch` when that is smaller."""
        size = max(1, int(adapter_class(self._targets, target).embed_max_batch))
        known = self._targets.capabilities(target).embed_max_batch
        return size if known is None else min(size, known)


def _assemble(served: Served[EmbedReply], base: EmbedRequest) -> Embeddings:
    """The call's `Embeddings`: the batches' vectors in input order, checked to share
    one length."""
    vectors = [vec for reply in served.replies for vec in reply.vectors]
    dims = len(vectors[0]) if vectors else (base.dimensions or 0)
    for i, vec in enumerate(vectors):
        if len(vec) != dims:
            error = ProtocolError(
                f"embed(): input {i} came back with {len(vec)} dimensions, input 0 with "
                f"{dims}: the batches were not embedded into one vector space",
                provider=served.batch_targets[0].provider,
            )
            error.attempts = served.attempts
            raise error
    first = served.batch_targets[0] if served.batch_targets else ResolvedTarget("", base.model)
    return Embeddings(
        vectors=tuple(vectors),
        dimensions=dims,
        target=first,
        usage=served.usage,
        timing=served.timing,
        attempts=served.attempts,
        batch_targets=served.batch_targets,
        warnings=served.warnings,
    )


def _send(adapter: Adapter, request: EmbedRequest) -> Awaitable[EmbedReply]:
    return adapter.embed(request)


def _check_reply(reply: EmbedReply, request: EmbedRequest, target: ResolvedTarget) -> None:
    """The guarantees every adapter's reply must keep (count, and the dimensions asked)."""
    if len(reply.vectors) != len(request.inputs):
        raise ProtocolError(
            f"{target.provider}: {len(reply.vectors)} embedding(s) for "
            f"{len(request.inputs)} input(s)",
            provider=target.provider,
        )
    want = request.dimensions
    if want is None and reply.vectors:
        want = len(reply.vectors[0])
    for i, vec in enumerate(reply.vectors):
        if len(vec) != want:
            asked = "asked for" if request.dimensions is not None else "in embedding 0"
            raise ProtocolError(
                f"{target.provider}: embedding {i} has {len(vec)} dimensions, {want} "
                f"{'were' if request.dimensions is not None else 'are'} {asked}",
                provider=target.provider,
            )


_EMBED: UnarySpec[EmbedRequest, EmbedReply] = UnarySpec("embed()", "embedding", _send, _check_reply)
"""What `embed()` plugs into the shared request flow (`_route.UnaryRunner.run_requests`)."""
