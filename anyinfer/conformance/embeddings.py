"""The embedding guarantees: scripted answers in two worlds, the oracle, the harness.

An `EmbedCase` is one `embed()` call: its inputs, the batch size that splits them, the
`dimensions` and encoding asked for, and, for every batch, the answers the fake provider
gives that batch's attempts in turn (each a `fakeservers.Script` whose `embedding` shape
and `fault` say what the answer is). The route is fixed (`ROUTE_TARGETS`, `RETRY`): two
instances of the adapter serving one model, one retry each, no backoff, a `Retry-After`
above 50 ms falling back. So the oracle (`expect_embed`) knows, from the case alone,
which attempt of each batch succeeds, what typed error each failed attempt raises, which
instance serves each batch, and whether the call succeeds; and, because the fake's
vectors and token counts are functions of the inputs
(`fakeservers.dialects._embeddings.fake_vector`, `token_count`), every vector and the
summed usage.

Two worlds, as for generation scripts: `realistic_embed_cases(dialect)` stays inside the
dialect's `EmbeddingProfile` (what the real provider sends: entries out of order where
the protocol has an index, usage where it reports it, documented error statuses, a 429
with `Retry-After`, connections cut mid-body, stalls, bodies dribbled in small reads);
`hostile_embed_cases(dialect)` adds labelled hostile shapes (floats where base64 was
asked, usage left out, a malformed body, a vector a dimension short, an entry missing,
an index repeated). Every case has one right reading, so both worlds are checked in full.

`EmbedHarness.verify(case)` runs a case through `AsyncClient.embed` or `Client.embed`
over a `FakeTransport` or a loopback `FakeServer`, and raises a `ConformanceFailure`
naming the broken guarantees (`EMBED_GUARANTEES`).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import threading
from array import array
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import httpx

import anyinfer as ai
from anyinfer.fakeservers import (
    Dialect,
    EmbeddingProfile,
    EmbedShape,
    Fault,
    Script,
    UnexpectedRequestError,
)
from anyinfer.fakeservers._source import parse_json_body
from anyinfer.fakeservers.dialects._embeddings import fake_vector, token_count

from .checker import STATUS_ERRORS, Violation, _status_error

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy

    from .runner import Harness, Via

__all__ = [
    "EMBED_COUNT",
    "EMBED_DIMENSIONS",
    "EMBED_ERRORS",
    "EMBED_GUARANTEES",
    "EMBED_NOTHING_LOST",
    "EMBED_ORDER",
    "EMBED_ROUTE",
    "EMBED_SHORT_NAMES",
    "EMBED_USAGE",
    "FALLBACK",
    "MODEL",
    "PRIMARY",
    "RETRY",
    "ROUTE_TARGETS",
    "EmbedCase",
    "EmbedExpectation",
    "EmbedHarness",
    "ExpectedAttempt",
    "embed_documented_cases",
    "expect_embed",
    "hostile_embed_cases",
    "realistic_embed_cases",
]

EMBED_ORDER = "embed-order"
"""Vector i is input i's, whatever order the wire listed the entries in."""
EMBED_COUNT = "embed-count"
"""One vector per input, and one served batch per batch."""
EMBED_DIMENSIONS = "embed-dimensions"
"""Every vector has one length: the `dimensions` asked for, else the model's own; a
vector of another length is refused with a typed error, never returned."""
EMBED_USAGE = "embed-usage"
"""Usage is summed over the batches, or `None` when any batch's answer lacks it: never
guessed."""
EMBED_ERRORS = "embed-errors"
"""Every failure is an `AnyInferError` of the documented class (a status's class, a
cut connection's `StreamError`, a stall's `ProviderTimeoutError`, a malformed or broken
body's `ProtocolError`), with its status and `Retry-After`."""
EMBED_NOTHING_LOST = "embed-nothing-lost"
"""A batch that fails on every target fails the call: no result, partial or padded, and
the raised error's attempts trail names that batch's attempts."""
EMBED_ROUTE = "embed-route"
"""Faults are retried or fall back as the route says: each batch's attempts, the
instance that served it and the requests sent are the ones the route implies."""

EMBED_GUARANTEES: tuple[str, ...] = (
    EMBED_ORDER,
    EMBED_COUNT,
    EMBED_DIMENSIONS,
    EMBED_USAGE,
    EMBED_ERRORS,
    EMBED_NOTHING_LOST,
    EMBED_ROUTE,
)
"""Every embedding guarantee id, in report order."""

EMBED_SHORT_NAMES: dict[str, str] = {
    EMBED_ORDER: "order",
    EMBED_COUNT: "count",
    EMBED_DIMENSIONS: "dims",
    EMBED_USAGE: "usage",
    EMBED_ERRORS: "errors",
    EMBED_NOTHING_LOST: "lost",
    EMBED_ROUTE: "route",
}
"""Column labels of the embedding matrix."""

MODEL = "fake-embed"
"""The model every case embeds with."""
PRIMARY = "primary"
FALLBACK = "fallback"
ROUTE_TARGETS: tuple[str, str] = (f"{PRIMARY}:{MODEL}", f"{FALLBACK}:{MODEL}")
"""Two instances of the adapter under test (aliases), serving one model: a fallback of
the same vector space."""
RETRY_AFTER_LIMIT_S = 0.05
RETRY = ai.RetryPolicy(
    max_retries=1,
    backoff_base_s=0.0,
    backoff_max_s=0.0,
    jitter=0.0,
    respect_retry_after=True,
    max_retry_after_s=RETRY_AFTER_LIMIT_S,
)
"""One retry per instance, at once; a `Retry-After` above 50 ms falls back instead."""

RETRYABLE_STATUSES = frozenset({408, 429, 500, 502, 503, 504, 529})
"""Statuses whose typed error is retryable (rate limits, timeouts, overload, 5xx)."""

DEFAULT_TIMEOUT_S = 10.0
TRANSPORT_STALL_TIMEOUT_S = 0.02
SERVER_STALL_TIMEOUT_S = 0.4

SLOW_READS: tuple[int, ...] = (256,)
"""Reads of a slow body: 256 bytes each, with `SLOW_PAUSE` before the third."""
SLOW_PAUSE: tuple[int, float] = (2, 0.01)
"""A slow body's pause: 10 ms before its third write, well inside every read timeout."""

_DOCUMENTED_STATUSES: tuple[int, ...] = tuple(sorted(STATUS_ERRORS))
_WORDS: tuple[str, ...] = (
    "apple",
    "river",
    "stone",
    "café",
    "naïve",
    "中文",
    "日本語",
    "🙂",
    "vector",
    "search",
)

Encoding = Literal["base64", "float"]


# --- cases ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class EmbedCase:
    """One `embed()` call and every answer the fake provider gives it.

    Attributes:
        inputs: The texts, distinct (the fake tells batches apart by their inputs).
        batch_size: The call's `batch_size`: inputs are cut into batches this long.
        answers: For each batch, in batch order, the scripts answering its attempts in
            turn (primary, its retry, fallback, its retry: as many as the route uses).
        dimensions: The call's `dimensions`.
        encoding: The call's `encoding`.
        concurrency: The call's `concurrency`.
    """

    inputs: tuple[str, ...]
    batch_size: int
    answers: tuple[tuple[Script, ...], ...]
    dimensions: int | None = None
    encoding: Encoding = "base64"
    concurrency: int = 4

    @property
    def batches(self) -> list[tuple[str, ...]]:
        """The inputs of each batch, in order."""
        size = self.batch_size
        return [self.inputs[i : i + size] for i in range(0, len(self.inputs), size)]

    @property
    def native_dimensions(self) -> int:
        """The model's own vector length: every answer's shape's (one model).

        Raises:
            ValueError: If the answers' shapes disagree.
        """
        found = {
            (s.embedding or EmbedShape()).native_dimensions for batch in self.answers for s in batch
        }
        if len(found) > 1:
            raise ValueError(f"a case's answers are of one model, with one length: {found}")
        return found.pop() if found else EmbedShape().native_dimensions

    @property
    def stalls(self) -> bool:
        """Whether an answer stalls (the call then runs with a short read timeout)."""
        return any(
            s.fault is not None and s.fault.kind == "stall" for batch in self.answers for s in batch
        )


@dataclass(frozen=True, slots=True)
class ExpectedAttempt:
    """One attempt the route makes, as its `AttemptRecord` must say.

    Attributes:
        provider: The instance (`PRIMARY` or `FALLBACK`).
        outcome: `ok`, `retried` or `failed`.
        type_name: The typed error's class name, for a failed attempt.
        http_status: Its HTTP status, for an error status.
        retry_after: Its `Retry-After` seconds, when the answer sent one.
    """

    provider: str
    outcome: str
    type_name: str | None = None
    http_status: int | None = None
    retry_after: float | None = None


@dataclass(frozen=True, slots=True)
class _Outcome:
    type_name: str
    retryable: bool
    http_status: int | None = None
    retry_after: float | None = None


def answer_outcome(script: Script) -> _Outcome | None:
    """The typed failure an answer must cause, or `None` when it embeds cleanly."""
    fault = script.fault
    if fault is None:
        if script.embedding is not None and script.embedding.broken is not None:
            return _Outcome("ProtocolError", False)
        return None
    if fault.kind == "status":
        after = fault.retry_after if fault.status == 429 else None
        return _Outcome(
            _status_error(fault.status, fault.code),
            fault.status in RETRYABLE_STATUSES,
            fault.status,
            after,
        )
    if fault.kind == "disconnect":
        return _Outcome("StreamError", True)
    if fault.kind == "stall":
        return _Outcome("ProviderTimeoutError", True)
    if fault.kind == "malformed":
        return _Outcome("ProtocolError", False)
    raise ValueError(f"embedding answers take no {fault.kind!r} fault")


def walk_batch(
    next_answer: Callable[[int], Script],
) -> tuple[list[Script], list[ExpectedAttempt], str | None]:
    """The route's walk over one batch's answers (`ROUTE_TARGETS` with `RETRY`).

    Args:
        next_answer: The answer to attempt number `n` (0-based).

    Returns:
        The answers used, the attempts in order, and the instance that served the
        batch (`None` when every instance failed).
    """
    used: list[Script] = []
    attempts: list[ExpectedAttempt] = []
    for provider in (PRIMARY, FALLBACK):
        retries = 0
        while True:
            script = next_answer(len(used))
            used.append(script)
            outcome = answer_outcome(script)
            if outcome is None:
                attempts.append(ExpectedAttempt(provider, "ok"))
                return used, attempts, provider
            delay: float | None = 0.0
            if outcome.retry_after is not None:
                delay = None if outcome.retry_after > RETRY_AFTER_LIMIT_S else outcome.retry_after
            record = (outcome.type_name, outcome.http_status, outcome.retry_after)
            if outcome.retryable and retries < RETRY.max_retries and delay is not None:
                retries += 1
                attempts.append(ExpectedAttempt(provider, "retried", *record))
                continue
            attempts.append(ExpectedAttempt(provider, "failed", *record))
            break
    return used, attempts, None


@dataclass(frozen=True, slots=True)
class EmbedExpectation:
    """What one case must produce.

    Attributes:
        succeeds: Whether the call must return a result.
        attempts: Each batch's attempts, in order.
        served_by: The instance serving each batch (`None` for a batch that fails).
        vectors: The vectors the result must hold, in input order.
        dimensions: Their length.
        input_tokens: The summed usage, or `None` when a batch's answer reports none.
        requests: How many embedding requests the call sends (when it succeeds).
    """

    succeeds: bool
    attempts: tuple[tuple[ExpectedAttempt, ...], ...]
    served_by: tuple[str | None, ...]
    vectors: tuple[array[float], ...]
    dimensions: int
    input_tokens: int | None
    requests: int


def expect_embed(case: EmbedCase) -> EmbedExpectation:
    """Work out, from the case alone, what the call must produce (see the module doc)."""
    dims = case.dimensions or case.native_dimensions
    attempts: list[tuple[ExpectedAttempt, ...]] = []
    served: list[str | None] = []
    tokens: int | None = 0
    requests = 0
    for batch, answers in zip(case.batches, case.answers, strict=True):
        used, tried, by = walk_batch(answers.__getitem__)
        attempts.append(tuple(tried))
        served.append(by)
        requests += len(used)
        shape = used[-1].embedding
        if by is not None and tokens is not None:
            tokens = (
                tokens + sum(token_count(t) for t in batch)
                if shape is None or shape.usage
                else None
            )
    vectors = tuple(array("f", fake_vector(t, dims)) for t in case.inputs)
    return EmbedExpectation(
        succeeds=all(s is not None for s in served),
        attempts=tuple(attempts),
        served_by=tuple(served),
        vectors=vectors,
        dimensions=dims,
        input_tokens=tokens,
        requests=requests,
    )


# --- the two worlds ------------------------------------------------------------------


def _profile(dialect: Dialect) -> EmbeddingProfile:
    if dialect.embedding is None:
        from hypothesis.errors import InvalidArgument

        raise InvalidArgument(
            f"dialect {dialect.name!r} declares no EmbeddingProfile: it scripts no "
            "embedding answers"
        )
    return dialect.embedding


def _cases(dialect: Dialect, *, hostile: bool) -> SearchStrategy[EmbedCase]:
    from hypothesis import strategies as st

    profile = _profile(dialect)
    words = st.lists(st.sampled_from(_WORDS), max_size=3).map(" ".join)
    texts = st.lists(words, min_size=1, max_size=9).map(
        lambda ws: tuple(f"{w} #{i}".strip() for i, w in enumerate(ws))
    )
    dims = st.one_of(st.none(), st.sampled_from((1, 3, 8))) if profile.dimensions else st.none()
    encodings: SearchStrategy[Encoding] = st.sampled_from(("base64", "float"))
    native = st.sampled_from((16, 4, 48))
    seeds = st.one_of(st.none(), st.integers(0, 2**16)) if profile.indexed else st.none()
    if profile.usage == "always":
        usage = st.booleans() if hostile else st.just(True)
    elif profile.usage == "never":
        usage = st.just(False)
    else:
        usage = st.booleans()
    floats = st.booleans() if hostile and "base64" in profile.encodings else st.just(False)
    kinds: list[str] = ["clean", "clean", "status", "disconnect", "stall"]
    if hostile:
        kinds += ["malformed", "broken"]
    retry_afters = st.one_of(st.none(), st.just(0.0), st.integers(1, 120).map(float))
    reads = st.one_of(st.just(()), st.sampled_from(((1,), (7,), (64, 3), SLOW_READS)))

    @st.composite
    def answer(
        draw: st.DrawFn, batch: tuple[str, ...], n: int, case_dims: int | None, native_dims: int
    ) -> Script:
        # A retry or fallback is mostly answered cleanly, so calls mostly succeed.
        pool = kinds if n == 0 else ["clean", "clean", "clean", *kinds[2:]]
        kind = draw(st.sampled_from(pool))
        breaks = [
            b
            for b in profile.breaks
            if b != "wrong_dimensions" or case_dims is not None or len(batch) > 1
        ]
        broken = draw(st.sampled_from(breaks)) if kind == "broken" and breaks else None
        shape = EmbedShape(
            order_seed=draw(seeds),
            native_dimensions=native_dims,
            usage=draw(usage),
            floats=draw(floats),
            broken=broken,
            broken_at=draw(st.integers(0, 8)) if broken else 0,
        )
        fault: Fault | None = None
        if kind == "status":
            status = draw(st.sampled_from(_DOCUMENTED_STATUSES))
            fault = Fault(
                "status",
                status=status,
                retry_after=draw(retry_afters) if status == 429 else None,
            )
        elif kind == "disconnect":
            fault = Fault("disconnect", partial_bytes=draw(st.integers(0, 400)))
        elif kind in ("stall", "malformed"):
            fault = Fault(kind, at=draw(st.integers(0, 1)))  # type: ignore[arg-type]
        return _slow(Script(embedding=shape, fault=fault, read_sizes=draw(reads)))

    @st.composite
    def build(draw: st.DrawFn) -> EmbedCase:
        inputs = draw(texts)
        size = draw(st.integers(1, 4))
        case_dims = draw(dims)
        native_dims = draw(native)
        batches = [inputs[i : i + size] for i in range(0, len(inputs), size)]
        answers: list[tuple[Script, ...]] = []
        for batch in batches:

            def next_answer(n: int, batch: tuple[str, ...] = batch) -> Script:
                return draw(answer(batch, n, case_dims, native_dims))

            used, _attempts, _by = walk_batch(next_answer)
            answers.append(tuple(used))
        return EmbedCase(
            inputs=inputs,
            batch_size=size,
            answers=tuple(answers),
            dimensions=case_dims,
            encoding=draw(encodings),
            concurrency=draw(st.sampled_from((4, 1, 2))),
        )

    return build()


def realistic_embed_cases(dialect: Dialect) -> SearchStrategy[EmbedCase]:
    """Calls whose answers the real provider behind `dialect` could send.

    Inside the dialect's `EmbeddingProfile`: entries shuffled only where they carry an
    index, usage as the provider reports it, every documented error status (429 with
    or without `Retry-After`, which falls back when it is too long to wait), cuts
    mid-body, stalls and bodies dribbled in small reads. Calls split into batches of 1
    to 4 inputs, with or without `dimensions`, asking for base64 or floats.

    Raises:
        InvalidArgument: For a dialect that declares no `EmbeddingProfile`.
    """
    return _cases(dialect, hostile=False)


def hostile_embed_cases(dialect: Dialect) -> SearchStrategy[EmbedCase]:
    """The realistic calls plus labelled hostile answers: floats where base64 was asked,
    usage left out by a provider that always reports it, a malformed body, and the
    broken shapes the protocol can express (`EmbeddingProfile.breaks`: a vector a value
    short, an entry missing, an index repeated), each of which must fail typed.

    Raises:
        InvalidArgument: For a dialect that declares no `EmbeddingProfile`.
    """
    return _cases(dialect, hostile=True)


def embed_documented_cases(dialect: Dialect) -> list[tuple[str, EmbedCase]]:
    """One case per documented answer, at any sampling depth: every documented error
    status on a batch's first attempt, a 429 whose `Retry-After` is waited for and one
    that falls back, a cut, a stall, a malformed body, every broken shape, usage left
    out, floats where base64 was asked, a shuffled order, `dimensions` (where the
    profile lets a request ask for them), and a batch failing on both instances. Each
    call embeds three inputs in batches of two.
    """
    profile = _profile(dialect)
    inputs = ("apple river #0", "café 中文 #1", "🙂 #2")
    plain = EmbedShape(order_seed=7 if profile.indexed else None, usage=profile.usage != "never")
    clean = Script(embedding=plain)

    def one(
        label: str, first: Script, *, dims: int | None = None, enc: Encoding = "base64"
    ) -> tuple[str, EmbedCase]:
        def walk(script: Script) -> tuple[Script, ...]:
            answers = [script]
            used, _a, _b = walk_batch(lambda n: answers[n] if n < len(answers) else clean)
            return tuple(used)

        return label, EmbedCase(
            inputs, 2, (walk(first), walk(clean)), dimensions=dims, encoding=enc
        )

    cases = [
        one(f"status {s}", replace_fault(clean, Fault("status", status=s)))
        for s in _DOCUMENTED_STATUSES
    ]
    cases += [
        one(
            "429, Retry-After 0 (retried)",
            replace_fault(clean, Fault("status", status=429, retry_after=0.0)),
        ),
        one(
            "429, Retry-After 7 (falls back)",
            replace_fault(clean, Fault("status", status=429, retry_after=7.0)),
        ),
        one("a cut mid-body", replace_fault(clean, Fault("disconnect", partial_bytes=20))),
        one("a stall", replace_fault(clean, Fault("stall"))),
        one("a malformed body", replace_fault(clean, Fault("malformed", at=1))),
        one("a body read byte by byte", dataclasses.replace(clean, read_sizes=(1,))),
        one("a slow body", _slow(dataclasses.replace(clean, read_sizes=SLOW_READS))),
        one(
            "floats where base64 was asked",
            dataclasses.replace(clean, embedding=dataclasses.replace(plain, floats=True)),
        ),
    ]
    if profile.usage != "never":
        silent = dataclasses.replace(plain, usage=False)
        cases.append(one("no usage", dataclasses.replace(clean, embedding=silent)))
    if profile.dimensions:
        cases.append(one("dimensions asked", clean, dims=3, enc="float"))
    for broken in profile.breaks:
        shape = dataclasses.replace(plain, broken=broken, broken_at=1)
        cases.append(one(f"broken: {broken}", dataclasses.replace(clean, embedding=shape)))
    dead = replace_fault(clean, Fault("status", status=401))
    cases.append(
        ("a batch failing on both instances", EmbedCase(inputs, 2, ((dead, dead), (clean,))))
    )
    return cases


def _slow(script: Script, reads: tuple[int, ...] = SLOW_READS) -> Script:
    """`script`, paused mid-body (`SLOW_PAUSE`) when its reads are a slow body's."""
    return dataclasses.replace(script, pause=SLOW_PAUSE) if script.read_sizes == reads else script


def replace_fault(script: Script, fault: Fault) -> Script:
    """`script` with `fault`."""
    return dataclasses.replace(script, fault=fault)


# --- running and judging -------------------------------------------------------------


@dataclass(slots=True)
class EmbedObservation:
    """What one run produced.

    Attributes:
        result: The `Embeddings`, on success.
        error: The exception, on failure.
        requests: The embedding requests the fake provider received.
        unexpected: Requests no scripted answer was left for.
    """

    result: ai.Embeddings | None
    error: BaseException | None
    requests: int = 0
    unexpected: list[str] = field(default_factory=list)


class _Answers:
    """Serves each batch's scripted answers in turn, telling batches apart by inputs."""

    def __init__(self, dialect: Dialect, case: EmbedCase) -> None:
        self._dialect = dialect
        self._queues = {
            batch: list(answers) for batch, answers in zip(case.batches, case.answers, strict=True)
        }
        self._lock = threading.Lock()
        self.requests = 0
        self.unexpected: list[str] = []

    def __call__(self, request: httpx.Request) -> Script:
        payload = parse_json_body(request.content)
        texts = self._dialect.embedding_inputs(payload)
        key = tuple(texts) if texts is not None else None
        with self._lock:
            self.requests += 1
            queue = self._queues.get(key) if key is not None else None
            if queue:
                return queue.pop(0)
            why = f"{request.method} {request.url.path} with inputs {texts!r}: " + (
                "no batch has these inputs" if queue is None else "no answer left for it"
            )
            self.unexpected.append(why)
        raise UnexpectedRequestError(f"fakeservers: unexpected embedding request {why}")


def _key(provider: str, outcome: str, info: ai.ErrorInfo | None) -> ExpectedAttempt:
    if info is None:
        return ExpectedAttempt(provider, outcome)
    return ExpectedAttempt(provider, outcome, info.type_name, info.http_status, info.retry_after)


def _attempts_text(attempts: Sequence[ExpectedAttempt]) -> str:
    def one(a: ExpectedAttempt) -> str:
        bits = [a.provider, a.outcome]
        if a.type_name:
            bits.append(a.type_name)
        if a.http_status is not None:
            bits.append(str(a.http_status))
        if a.retry_after is not None:
            bits.append(f"Retry-After {a.retry_after:g}")
        return " ".join(bits)

    return "[" + "; ".join(one(a) for a in attempts) + "]"


def _failed_call_guarantee(detail: str) -> str:
    text = detail.lower()
    if "dimension" in text:
        return EMBED_DIMENSIONS
    if "embedding(s) for" in text or "input(s)" in text:
        return EMBED_COUNT
    if "index" in text:
        return EMBED_ORDER
    return EMBED_ERRORS


def check_embed(case: EmbedCase, obs: EmbedObservation) -> list[Violation]:
    """Every embedding guarantee `obs` broke for `case`."""
    exp = expect_embed(case)
    out: list[Violation] = []
    for why in obs.unexpected:
        out.append(Violation(EMBED_ROUTE, f"a request the route does not make: {why}"))
    error, result = obs.error, obs.result
    if error is not None and not isinstance(error, ai.AnyInferError):
        if not isinstance(error, UnexpectedRequestError):
            out.append(
                Violation(
                    EMBED_ERRORS,
                    f"an untyped {type(error).__name__}: {error!r} escaped; adapters must "
                    "raise AnyInferError subclasses",
                )
            )
        return _sorted(out)
    wanted = Counter(a for batch in exp.attempts for a in batch)
    if exp.succeeds:
        if result is None:
            assert error is not None
            detail = str(error)
            if isinstance(error, ai.AllTargetsFailedError) and error.attempts:
                last = error.attempts[-1].error
                detail = f"{last.type_name}: {last.detail}" if last else detail
            out.append(
                Violation(
                    _failed_call_guarantee(detail),
                    f"every batch has an answer that embeds cleanly, yet embed() failed: "
                    f"{type(error).__name__}: {detail}",
                )
            )
            return _sorted(out)
        out += _check_result(case, exp, result)
        got = Counter(_key(a.target.provider, a.outcome, a.error) for a in result.attempts)
        if got != wanted:
            out.append(_trail_violation(wanted, got, "the call's attempts"))
            refused = Counter(a for a in wanted.elements() if a.type_name == "ProtocolError")
            if refused - got:
                # A broken answer the adapter should have refused was taken as good.
                out += [
                    Violation(
                        _BREAK_GUARANTEES[broken],
                        f"an answer with {broken.replace('_', ' ')} must be refused "
                        "(ProtocolError); the adapter took it",
                    )
                    for broken in _breaks_used(case)
                ]
        if obs.requests != exp.requests:
            out.append(
                Violation(
                    EMBED_ROUTE,
                    f"the route makes {exp.requests} embedding request(s); the adapter sent "
                    f"{obs.requests}",
                )
            )
        return _sorted(out)
    failing = [i for i, by in enumerate(exp.served_by) if by is None]
    if result is not None:
        out.append(
            Violation(
                EMBED_NOTHING_LOST,
                f"batch {failing[0]} failed on every instance "
                f"{_attempts_text(exp.attempts[failing[0]])}, yet embed() returned "
                f"{len(result.vectors)} vector(s): a failed batch must fail the call",
            )
        )
        return _sorted(out)
    assert error is not None
    if not isinstance(error, ai.AllTargetsFailedError):
        out.append(
            Violation(
                EMBED_NOTHING_LOST,
                f"a batch failed on every instance; embed() must raise AllTargetsFailedError "
                f"with the trail, not {type(error).__name__}: {error}",
            )
        )
        return _sorted(out)
    got = Counter(_key(a.target.provider, a.outcome, a.error) for a in error.attempts)
    if not any(Counter(exp.attempts[i]) <= got for i in failing):
        out.append(
            Violation(
                EMBED_NOTHING_LOST,
                f"the error's trail {_attempts_text(list(got.elements()))} does not name the "
                f"failed batch's attempts {_attempts_text(exp.attempts[failing[0]])}",
            )
        )
    if not got <= wanted:
        out.append(_trail_violation(wanted, got, "the error's trail"))
    return _sorted(out)


_BREAK_GUARANTEES: dict[str, str] = {
    "wrong_dimensions": EMBED_DIMENSIONS,
    "missing_entry": EMBED_COUNT,
    "duplicate_index": EMBED_ORDER,
}
"""The guarantee an adapter that accepts each broken shape breaks."""


def _breaks_used(case: EmbedCase) -> list[str]:
    """The broken shapes among the answers the route uses, each once."""
    found: list[str] = []
    for answers in case.answers:
        for script in answers:
            broken = script.embedding.broken if script.embedding is not None else None
            if broken is not None and broken not in found:
                found.append(broken)
    return found


def _trail_violation(
    wanted: Counter[ExpectedAttempt], got: Counter[ExpectedAttempt], what: str
) -> Violation:
    shape = Counter((a.provider, a.outcome) for a in got.elements())
    same_walk = shape == Counter((a.provider, a.outcome) for a in wanted.elements())
    extra = got - wanted
    missing = wanted - got
    message = (
        f"{what} {_attempts_text(list(got.elements()))} differ from the route's "
        f"{_attempts_text(list(wanted.elements()))}"
        + (f"; unexpected {_attempts_text(list(extra.elements()))}" if extra else "")
        + (f"; missing {_attempts_text(list(missing.elements()))}" if missing else "")
    )
    return Violation(EMBED_ERRORS if same_walk else EMBED_ROUTE, message)


def _check_result(case: EmbedCase, exp: EmbedExpectation, result: ai.Embeddings) -> list[Violation]:
    out: list[Violation] = []
    n = len(case.inputs)
    if len(result.vectors) != n:
        out.append(Violation(EMBED_COUNT, f"{len(result.vectors)} vector(s) for {n} input(s)"))
    if len(result.batch_targets) != len(case.batches):
        out.append(
            Violation(
                EMBED_COUNT,
                f"{len(result.batch_targets)} served batch(es) for {len(case.batches)} batch(es)",
            )
        )
    served = tuple(t.provider for t in result.batch_targets)
    if len(served) == len(exp.served_by) and served != exp.served_by:
        out.append(
            Violation(
                EMBED_ROUTE,
                f"the batches were served by {list(served)}; the route has them served by "
                f"{list(exp.served_by)}",
            )
        )
    if result.dimensions != exp.dimensions:
        out.append(
            Violation(
                EMBED_DIMENSIONS,
                f"result.dimensions is {result.dimensions}, expected {exp.dimensions}",
            )
        )
    misplaced: list[str] = []
    for i, (vec, want) in enumerate(zip(result.vectors, exp.vectors, strict=False)):
        if len(vec) != len(want):
            out.append(
                Violation(
                    EMBED_DIMENSIONS,
                    f"vector {i} has {len(vec)} dimensions, expected {len(want)}",
                )
            )
        elif vec != want:
            owner = next((j for j, w in enumerate(exp.vectors) if w == vec), None)
            misplaced.append(
                f"vector {i} is " + (f"input {owner}'s" if owner is not None else "no input's")
            )
    if misplaced:
        out.append(
            Violation(
                EMBED_ORDER,
                "vectors are not in input order: "
                + ", ".join(misplaced[:6])
                + (f" (and {len(misplaced) - 6} more)" if len(misplaced) > 6 else ""),
            )
        )
    usage = result.usage
    want_tokens = exp.input_tokens
    if usage.input_tokens != want_tokens or usage.total_tokens != want_tokens:
        how = (
            "some batch's answer reported no usage, so it must be None (never guessed)"
            if want_tokens is None
            else "the batches' answers report that much in all"
        )
        out.append(
            Violation(
                EMBED_USAGE,
                f"result.usage has input_tokens={usage.input_tokens!r}, "
                f"total_tokens={usage.total_tokens!r}; expected {want_tokens!r}: {how}",
            )
        )
    return out


def _sorted(found: list[Violation]) -> list[Violation]:
    order = {g: i for i, g in enumerate(EMBED_GUARANTEES)}
    return sorted(found, key=lambda v: order.get(v.guarantee, len(order)))


def case_repr(case: EmbedCase) -> str:
    """The case as Python source, omitting defaults (paste it into a regression test)."""
    from .runner import _compact

    return _compact(case)


# --- what the embedding and rerank harnesses share -------------------------------------


def _route_settings(
    stack: contextlib.ExitStack[Any],
    harness: Harness,
    answers: Callable[[httpx.Request], Script],
    *,
    stalls: bool,
    via: Via,
) -> list[ai.ProviderSettings]:
    """The route's two instances (`PRIMARY`, `FALLBACK`) of the adapter under test, both
    answered by `answers` over a loopback `FakeServer` (entered on `stack`) or an
    in-process `FakeTransport`, with the timeout a stalling case needs on that path."""
    timeout = DEFAULT_TIMEOUT_S
    if stalls:
        timeout = TRANSPORT_STALL_TIMEOUT_S if via == "transport" else SERVER_STALL_TIMEOUT_S
    if via == "server":
        server = stack.enter_context(harness._server_factory(harness.dialect, answers))
        base = harness.settings(base_url=server.base_url)
    else:
        base = harness.settings(transport=harness._transport_factory(harness.dialect, answers))
    base = dataclasses.replace(base, timeout_s=timeout)
    return [dataclasses.replace(base, alias=PRIMARY), dataclasses.replace(base, alias=FALLBACK)]


def _call_client(
    settings: list[ai.ProviderSettings],
    registry: Any,
    method: str,
    args: tuple[Any, ...],
    call: dict[str, Any],
    *,
    sync: bool,
    runner: asyncio.Runner | None,
) -> tuple[Any, BaseException | None]:
    """One `method` call (`"embed"`, `"rerank"`) through `Client` (`sync`) or
    `AsyncClient` (on `runner`, else a fresh event loop): its result, or what it raised."""
    if sync:
        with ai.Client(settings, registry=registry) as client:
            try:
                return getattr(client, method)(*args, **call), None
            except Exception as exc:
                return None, exc

    async def go() -> Any:
        async with ai.AsyncClient(settings, registry=registry) as client:
            return await getattr(client, method)(*args, **call)

    try:
        return (runner.run(go()) if runner is not None else asyncio.run(go())), None
    except Exception as exc:
        return None, exc


def _report_head(
    harness: Harness,
    path: str,
    via: Via,
    route: list[str],
    found: Sequence[Violation],
    error: BaseException | None,
) -> list[str]:
    """A failure report's first lines: what broke, on which path and route, and the
    exception the call raised, if it raised."""
    where = "FakeTransport (httpx, in-process)" if via == "transport" else "FakeServer (loopback)"
    guarantees = ", ".join(dict.fromkeys(v.guarantee for v in found))
    lines = [
        f"anyinfer conformance: adapter {harness.entry.describe()} broke {guarantees}",
        f"  path: {path} over {where}, route {route} (one retry each)",
        "  violations:",
        *(f"    - {v}" for v in found),
    ]
    if error is not None:
        lines.append(f"  outcome: raised {type(error).__name__}: {error}")
    return lines


def _verify_each(verify: Callable[..., object], cases: Sequence[tuple[str, Any]]) -> None:
    """`verify` every labelled case, alternating the async and sync paths on one event
    loop.

    Raises:
        ConformanceFailure: The first distinct failure (a note lists every case that
            failed).
    """
    from .runner import ConformanceFailure

    failures: list[tuple[str, ConformanceFailure]] = []
    with asyncio.Runner() as runner:
        for number, (label, case) in enumerate(cases):
            try:
                verify(case, sync=bool(number % 2), runner=runner)
            except ConformanceFailure as failure:
                failures.append((label, failure))
    if failures:
        from ._suite import _grouped

        raise _grouped(failures)


class EmbedHarness:
    """Serves `EmbedCase`s to one adapter and checks the outcomes.

    Args:
        harness: The adapter's conformance `Harness` (its entry, dialect, settings and
            providers registry).
    """

    def __init__(self, harness: Harness) -> None:
        self.harness = harness
        self.entry = harness.entry
        self.dialect = harness.dialect

    @property
    def targets(self) -> list[str]:
        """`ROUTE_TARGETS`, with the dialect's own model when its profile names one."""
        profile = self.dialect.embedding
        model = MODEL if profile is None else profile.model
        return [f"{PRIMARY}:{model}", f"{FALLBACK}:{model}"]

    def _call(self, case: EmbedCase) -> dict[str, Any]:
        return {
            "route": ai.Route(self.targets, retry=RETRY, breaker_threshold=0),
            "dimensions": case.dimensions,
            "encoding": case.encoding,
            "batch_size": case.batch_size,
            "concurrency": case.concurrency,
        }

    def run(
        self,
        case: EmbedCase,
        *,
        sync: bool = False,
        via: Via = "transport",
        runner: asyncio.Runner | None = None,
    ) -> EmbedObservation:
        """Run `case` through `Client.embed` (`sync`) or `AsyncClient.embed`."""
        answers = _Answers(self.dialect, case)
        with contextlib.ExitStack() as stack:
            settings = _route_settings(stack, self.harness, answers, stalls=case.stalls, via=via)
            args = (list(case.inputs),)
            result, error = _call_client(
                settings,
                self.harness._providers,
                "embed",
                args,
                self._call(case),
                sync=sync,
                runner=runner,
            )
        return EmbedObservation(result, error, answers.requests, answers.unexpected)

    def verify(
        self,
        case: EmbedCase,
        *,
        sync: bool = False,
        via: Via = "transport",
        runner: asyncio.Runner | None = None,
    ) -> EmbedObservation:
        """Run `case` and raise if any embedding guarantee broke.

        Raises:
            ConformanceFailure: A subclass named after the first broken guarantee.
        """
        obs = self.run(case, sync=sync, via=via, runner=runner)
        found = check_embed(case, obs)
        if found:
            raise self.failure(case, obs, found, sync=sync, via=via)
        return obs

    def failure(
        self,
        case: EmbedCase,
        obs: EmbedObservation,
        found: Sequence[Violation],
        *,
        sync: bool,
        via: Via,
    ) -> Exception:
        """The `ConformanceFailure` reporting `found`."""
        from .runner import _SCRIPT_ORIGIN, failure_class

        exp = expect_embed(case)
        path = "Client.embed()" if sync else "AsyncClient.embed()"
        lines = _report_head(self.harness, path, via, self.targets, found, obs.error)
        if obs.error is None and obs.result is not None:
            r = obs.result
            lines.append(
                f"  outcome: {len(r.vectors)} vector(s) of {r.dimensions} dimensions, usage "
                f"input_tokens={r.usage.input_tokens!r}, batches served by "
                f"{[t.provider for t in r.batch_targets]}"
            )
        lines.append(
            f"  expected: {'success' if exp.succeeds else 'failure'}; batches served by "
            f"{list(exp.served_by)}; attempts per batch "
            + ", ".join(_attempts_text(a) for a in exp.attempts)
            + (f"; usage {exp.input_tokens!r}; {exp.requests} request(s)" if exp.succeeds else "")
        )
        lines.append(f"  case{_SCRIPT_ORIGIN[self.harness._shrinking]}:")
        lines.append(f"    {case_repr(case)}")
        lines.append(
            "  reproduce: anyinfer.conformance.embeddings.EmbedHarness(Harness(registry, "
            f"entry)).verify(case, sync={sync!r}, via={via!r})"
        )
        kind = failure_class(found[0].guarantee)
        return kind("\n".join(lines), adapter=self.entry.name, mode=path, via=via, violations=found)

    def check_property(
        self,
        strategy: SearchStrategy[EmbedCase],
        *,
        via: Via = "transport",
        max_examples: int,
        key: str | None = None,
    ) -> None:
        """Every drawn case, through a drawn path (async or sync), conforms.

        Raises:
            ConformanceFailure: For the minimal failing case (or a group of them, one
                per distinct broken guarantee).
        """
        from hypothesis import HealthCheck, given, settings
        from hypothesis import strategies as st

        with asyncio.Runner() as runner:

            @settings(
                max_examples=max_examples,
                deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
            )
            @given(case=strategy, sync=st.booleans())
            def embedding_property(case: EmbedCase, sync: bool) -> None:
                self.verify(case, sync=sync, via=via, runner=runner)

            self.harness._run_property(embedding_property, key)

    def verify_documented(self) -> None:
        """Every `embed_documented_cases` case, alternating the async and sync paths.

        Raises:
            ConformanceFailure: The first distinct failure (a note lists every case
                that failed).
        """
        _verify_each(self.verify, embed_documented_cases(self.dialect))
