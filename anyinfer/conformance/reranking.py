"""The rerank guarantees: generated calls, the oracle, the harness.

A `RerankCase` is one `rerank()` call: a query, the documents, the `batch_size` that
splits them into requests, `top_n`, and for every request the answers its attempts get
in turn (`fakeservers.Script`s: an error status, a cut, a stall, a malformed body, or
the dialect's own ranking). The route is the embedding checks' (`embeddings.RETRY`: two
instances of one model, one retry each), so the oracle knows from the case which
attempt of each request succeeds and which instance serves it. What each served answer
ranks is read back from the fake's own answer by the dialect
(`Dialect.read_rerank_answer`), without the adapter's code; the result must be those
rankings merged: every document's score as the provider sent it, best first, cut to
`top_n`, each `index` pointing into the caller's documents.

The scripts vary what real providers vary (statuses, 429 with `Retry-After`, cuts,
stalls, bodies in small reads); malformed bodies are the hostile world
(`hostile_rerank_cases`).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import threading
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import httpx

import anyinfer as ai
from anyinfer.fakeservers import Dialect, Fault, Script, UnexpectedRequestError
from anyinfer.fakeservers._source import parse_json_body

from .checker import Violation
from .embeddings import (
    _DOCUMENTED_STATUSES,
    _WORDS,
    FALLBACK,
    PRIMARY,
    RETRY,
    _attempts_text,
    _call_client,
    _key,
    _report_head,
    _route_settings,
    _slow,
    _verify_each,
    walk_batch,
)

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy

    from .runner import Harness, Via

__all__ = [
    "RERANK_ERRORS",
    "RERANK_GUARANTEES",
    "RERANK_PERMUTATION",
    "RERANK_SHORT_NAMES",
    "RERANK_SORTED",
    "RERANK_TOP_N",
    "RerankCase",
    "RerankHarness",
    "hostile_rerank_cases",
    "realistic_rerank_cases",
    "rerank_documented_cases",
    "reranks",
]

RERANK_PERMUTATION = "rerank-permutation"
"""The returned indices are distinct positions of the caller's documents, each result's
`document` is the document at its index, and they are the documents the provider
ranked best."""
RERANK_SORTED = "rerank-sorted"
"""Results are best first (scores never increase), each score as the provider sent it."""
RERANK_TOP_N = "rerank-top-n"
"""`top_n` results when `top_n` is asked for (all of them when there are fewer), every
document otherwise."""
RERANK_ERRORS = "rerank-errors"
"""Every failure is a typed `AnyInferError` of the documented class; a request that fails
on every instance fails the call (no partial ranking) with the attempts in its trail;
faults are retried or fall back as the route says."""

RERANK_GUARANTEES: tuple[str, ...] = (
    RERANK_PERMUTATION,
    RERANK_SORTED,
    RERANK_TOP_N,
    RERANK_ERRORS,
)
"""Every rerank guarantee id, in report order."""

RERANK_SHORT_NAMES: dict[str, str] = {
    RERANK_PERMUTATION: "r-perm",
    RERANK_SORTED: "r-sort",
    RERANK_TOP_N: "r-top",
    RERANK_ERRORS: "r-err",
}
"""Column labels of the rerank columns of the retrieval matrix."""

MODEL = "fake-rerank"
_SLOW_READS = (16,)
"""A rerank answer's slow reads (it is short): 16 bytes each, paused before the third."""
ROUTE_TARGETS: tuple[str, str] = (f"{PRIMARY}:{MODEL}", f"{FALLBACK}:{MODEL}")


def reranks(dialect: Dialect) -> bool:
    """Whether `dialect` answers rerank requests (it implements `render_rerank`)."""
    return type(dialect).render_rerank is not Dialect.render_rerank


@dataclass(frozen=True, slots=True)
class RerankCase:
    """One `rerank()` call and every answer the fake provider gives it.

    Attributes:
        query: The query.
        documents: The documents, distinct (the fake tells requests apart by them).
        batch_size: The call's `batch_size`: documents are cut into requests this long.
        answers: For each request, in order, the scripts answering its attempts in turn.
        top_n: The call's `top_n`.
        concurrency: The call's `concurrency`.
    """

    query: str
    documents: tuple[str, ...]
    batch_size: int
    answers: tuple[tuple[Script, ...], ...]
    top_n: int | None = None
    concurrency: int = 4

    @property
    def requests(self) -> list[tuple[str, ...]]:
        """The documents of each request, in order."""
        size = self.batch_size
        return [self.documents[i : i + size] for i in range(0, len(self.documents), size)]

    @property
    def stalls(self) -> bool:
        """Whether an answer stalls (the call then runs with a short read timeout)."""
        return any(
            s.fault is not None and s.fault.kind == "stall" for batch in self.answers for s in batch
        )


def _cases(dialect: Dialect, *, hostile: bool, limit: int) -> SearchStrategy[RerankCase]:
    from hypothesis import strategies as st

    words = st.lists(st.sampled_from(_WORDS), min_size=1, max_size=3).map(" ".join)
    docs = st.lists(words, min_size=1, max_size=8).map(
        lambda ws: tuple(f"{w} #{i}" for i, w in enumerate(ws))
    )
    kinds = ["clean", "clean", "status", "disconnect", "stall"] + (["malformed"] if hostile else [])
    retry_afters = st.one_of(st.none(), st.just(0.0), st.integers(1, 120).map(float))
    reads = st.one_of(st.just(()), st.sampled_from(((1,), (7,), _SLOW_READS)))

    @st.composite
    def answer(draw: st.DrawFn, n: int) -> Script:
        pool = kinds if n == 0 else ["clean", "clean", "clean", *kinds[2:]]
        kind = draw(st.sampled_from(pool))
        fault: Fault | None = None
        if kind == "status":
            status = draw(st.sampled_from(_DOCUMENTED_STATUSES))
            fault = Fault(
                "status", status=status, retry_after=draw(retry_afters) if status == 429 else None
            )
        elif kind == "disconnect":
            fault = Fault("disconnect", partial_bytes=draw(st.integers(0, 200)))
        elif kind in ("stall", "malformed"):
            fault = Fault(kind, at=draw(st.integers(0, 1)))  # type: ignore[arg-type]
        return _slow(Script(fault=fault, read_sizes=draw(reads)), _SLOW_READS)

    @st.composite
    def build(draw: st.DrawFn) -> RerankCase:
        documents = draw(docs)
        size = draw(st.integers(1, min(4, limit)))
        top = draw(st.one_of(st.none(), st.integers(1, len(documents) + 1)))
        answers = []
        for _request in range(0, len(documents), size):
            used, _attempts, _by = walk_batch(lambda n: draw(answer(n)))
            answers.append(tuple(used))
        return RerankCase(
            query=draw(words),
            documents=documents,
            batch_size=size,
            answers=tuple(answers),
            top_n=top,
            concurrency=draw(st.sampled_from((4, 1, 2))),
        )

    return build()


def realistic_rerank_cases(dialect: Dialect, *, limit: int = 4) -> SearchStrategy[RerankCase]:
    """Calls whose answers the real provider behind `dialect` could send: its ranking,
    every documented error status (429 with or without `Retry-After`), cuts mid-body,
    stalls and bodies in small reads; documents split into requests of 1 to 4 (at most
    `limit`, the adapter's `rerank_max_documents`), with or without `top_n`."""
    return _cases(dialect, hostile=False, limit=limit)


def hostile_rerank_cases(dialect: Dialect, *, limit: int = 4) -> SearchStrategy[RerankCase]:
    """The realistic calls plus malformed bodies, which must fail typed."""
    return _cases(dialect, hostile=True, limit=limit)


def rerank_documented_cases() -> list[tuple[str, RerankCase]]:
    """One case per documented answer, at any sampling depth: every documented status on
    a request's first attempt, a 429 waited for and one that falls back, a cut, a stall,
    a malformed body, `top_n`, and a request failing on both instances. Each call ranks
    three documents in requests of two."""
    docs = ("apple river #0", "café 中文 #1", "🙂 apple #2")
    clean = Script()

    def one(label: str, first: Script, *, top_n: int | None = None) -> tuple[str, RerankCase]:
        answers = [first]
        used, _a, _b = walk_batch(lambda n: answers[n] if n < len(answers) else clean)
        return label, RerankCase("apple", docs, 2, (tuple(used), (clean,)), top_n=top_n)

    cases = [
        one(f"status {s}", Script(fault=Fault("status", status=s))) for s in _DOCUMENTED_STATUSES
    ]
    cases += [
        one(
            "429, Retry-After 0 (retried)",
            Script(fault=Fault("status", status=429, retry_after=0.0)),
        ),
        one(
            "429, Retry-After 7 (falls back)",
            Script(fault=Fault("status", status=429, retry_after=7.0)),
        ),
        one("a cut mid-body", Script(fault=Fault("disconnect", partial_bytes=20))),
        one("a stall", Script(fault=Fault("stall"))),
        one("a malformed body", Script(fault=Fault("malformed", at=1))),
        one("a slow body", _slow(Script(read_sizes=_SLOW_READS), _SLOW_READS)),
        one("top_n 2", clean, top_n=2),
        one("top_n over the count", clean, top_n=9),
    ]
    dead = Script(fault=Fault("status", status=401))
    cases.append(
        (
            "a request failing on both instances",
            RerankCase("apple", docs, 2, ((dead, dead), (clean,))),
        )
    )
    return cases


# --- running and judging -------------------------------------------------------------


@dataclass(slots=True)
class RerankObservation:
    """What one run produced.

    Attributes:
        result: The `Reranking`, on success.
        error: The exception, on failure.
        requests: The rerank requests the fake provider received.
        unexpected: Requests no scripted answer was left for.
        served: The ranking each request's clean answer carried, by request documents.
    """

    result: ai.Reranking | None
    error: BaseException | None
    requests: int = 0
    unexpected: list[str] = field(default_factory=list)
    served: dict[tuple[str, ...], list[tuple[int, float]]] = field(default_factory=dict)


class _Answers:
    """Serves each request's scripted answers in turn, noting what the clean ones rank."""

    def __init__(self, dialect: Dialect, case: RerankCase) -> None:
        self._dialect = dialect
        self._queues = {
            docs: list(answers) for docs, answers in zip(case.requests, case.answers, strict=True)
        }
        self._lock = threading.Lock()
        self.requests = 0
        self.unexpected: list[str] = []
        self.served: dict[tuple[str, ...], list[tuple[int, float]]] = {}

    def __call__(self, request: httpx.Request) -> Script:
        payload = parse_json_body(request.content)
        docs = self._dialect.rerank_documents(payload)
        key = tuple(docs) if docs is not None else None
        with self._lock:
            self.requests += 1
            queue = self._queues.get(key) if key is not None else None
            if queue:
                script = queue.pop(0)
                if script.fault is None and key is not None:
                    # The fake's answer to this very body, read back by the dialect.
                    body = self._dialect.render_rerank(payload).body
                    ranking = self._dialect.read_rerank_answer(json.loads(body))
                    self.served[key] = ranking or []
                return script
            why = f"{request.method} {request.url.path} with documents {docs!r}: " + (
                "no request has these documents" if queue is None else "no answer left"
            )
            self.unexpected.append(why)
        raise UnexpectedRequestError(f"fakeservers: unexpected rerank request {why}")


def check_rerank(case: RerankCase, obs: RerankObservation) -> list[Violation]:
    """Every rerank guarantee `obs` broke for `case`."""
    out: list[Violation] = [
        Violation(RERANK_ERRORS, f"a request the route does not make: {why}")
        for why in obs.unexpected
    ]
    walks = [walk_batch(answers.__getitem__) for answers in case.answers]
    wanted = Counter(a for _used, attempts, _by in walks for a in attempts)
    succeeds = all(by is not None for _u, _a, by in walks)
    error, result = obs.error, obs.result
    if error is not None and not isinstance(error, ai.AnyInferError):
        if not isinstance(error, UnexpectedRequestError):
            out.append(
                Violation(
                    RERANK_ERRORS,
                    f"an untyped {type(error).__name__}: {error!r} escaped; adapters must "
                    "raise AnyInferError subclasses",
                )
            )
        return out
    if not succeeds:
        failing = next(i for i, (_u, _a, by) in enumerate(walks) if by is None)
        tried = _attempts_text(walks[failing][1])
        if result is not None:
            out.append(
                Violation(
                    RERANK_ERRORS,
                    f"request {failing} failed on every instance {tried}, yet rerank() returned "
                    f"{len(result.results)} result(s): a failed request must fail the call",
                )
            )
        elif not isinstance(error, ai.AllTargetsFailedError):
            out.append(
                Violation(
                    RERANK_ERRORS,
                    f"a request failed on every instance {tried}; rerank() must raise "
                    f"AllTargetsFailedError, not {type(error).__name__}: {error}",
                )
            )
        else:
            got = Counter(_key(a.target.provider, a.outcome, a.error) for a in error.attempts)
            failed = [i for i, (_u, _a, by) in enumerate(walks) if by is None]
            if not any(Counter(walks[i][1]) <= got for i in failed) or not got <= wanted:
                out.append(
                    Violation(
                        RERANK_ERRORS,
                        f"the error's trail {_attempts_text(list(got.elements()))} does not "
                        f"match the route's {_attempts_text(list(wanted.elements()))}",
                    )
                )
        return out
    if result is None:
        detail = str(error)
        if isinstance(error, ai.AllTargetsFailedError) and error.attempts:
            last = error.attempts[-1].error
            detail = f"{last.type_name}: {last.detail}" if last else detail
        guarantee = RERANK_PERMUTATION if "index" in detail else RERANK_ERRORS
        out.append(
            Violation(
                guarantee,
                f"every request has an answer that ranks cleanly, yet rerank() failed: "
                f"{type(error).__name__}: {detail}",
            )
        )
        return out
    got = Counter(_key(a.target.provider, a.outcome, a.error) for a in result.attempts)
    if got != wanted:
        out.append(
            Violation(
                RERANK_ERRORS,
                f"the call's attempts {_attempts_text(list(got.elements()))} differ from the "
                f"route's {_attempts_text(list(wanted.elements()))}",
            )
        )
    out += _check_ranking(case, obs, result)
    return out


def _check_ranking(
    case: RerankCase, obs: RerankObservation, result: ai.Reranking
) -> list[Violation]:
    out: list[Violation] = []
    n = len(case.documents)
    merged: list[tuple[int, float]] = []
    offset = 0
    for docs in case.requests:
        merged += [(offset + i, score) for i, score in obs.served.get(docs, [])]
        offset += len(docs)
    merged.sort(key=lambda pair: (-pair[1], pair[0]))
    want_count = n if case.top_n is None else min(case.top_n, n)
    want = merged[:want_count]
    ranked = [(r.index, r.score) for r in result.results]
    if len(ranked) != want_count:
        asked = "every document" if case.top_n is None else f"top_n={case.top_n}"
        out.append(
            Violation(
                RERANK_TOP_N,
                f"{len(ranked)} result(s) for {n} document(s) with {asked}; expected {want_count}",
            )
        )
    indices = [i for i, _s in ranked]
    bad = [i for i in indices if not 0 <= i < n]
    if bad or len(set(indices)) != len(indices):
        out.append(
            Violation(
                RERANK_PERMUTATION,
                f"result indices {indices} are not distinct positions among {n} document(s)",
            )
        )
    else:
        wrong = [r.index for r in result.results if r.document != case.documents[r.index]]
        if wrong:
            out.append(
                Violation(
                    RERANK_PERMUTATION,
                    f"the results at indices {wrong} carry another document's text",
                )
            )
        if set(indices) != {i for i, _s in want}:
            out.append(
                Violation(
                    RERANK_PERMUTATION,
                    f"the results are documents {sorted(indices)}; the provider ranked "
                    f"{sorted(i for i, _s in want)} best",
                )
            )
    scores = [s for _i, s in ranked]
    if any(later > earlier for earlier, later in itertools.pairwise(scores)):
        out.append(Violation(RERANK_SORTED, f"scores {scores} are not best first"))
    sent = dict(merged)
    misread = [(i, s, sent[i]) for i, s in ranked if i in sent and s != sent[i]]
    if misread:
        out.append(
            Violation(
                RERANK_SORTED,
                "scores differ from the provider's: "
                + ", ".join(f"document {i} scored {s!r}, sent {w!r}" for i, s, w in misread[:4]),
            )
        )
    elif not out and ranked != want:
        out.append(Violation(RERANK_SORTED, f"the ranking is {ranked}; expected {want}"))
    return out


class RerankHarness:
    """Serves `RerankCase`s to one adapter and checks the outcomes.

    Args:
        harness: The adapter's conformance `Harness`.
    """

    def __init__(self, harness: Harness) -> None:
        self.harness = harness
        self.entry = harness.entry
        self.dialect = harness.dialect
        self.limit = max(1, int(harness.entry.resolve_class().rerank_max_documents))

    def run(
        self,
        case: RerankCase,
        *,
        sync: bool = False,
        via: Via = "transport",
        runner: asyncio.Runner | None = None,
    ) -> RerankObservation:
        """Run `case` through `Client.rerank` (`sync`) or `AsyncClient.rerank`."""
        answers = _Answers(self.dialect, case)
        with contextlib.ExitStack() as stack:
            settings = _route_settings(stack, self.harness, answers, stalls=case.stalls, via=via)
            call: dict[str, Any] = {
                "route": ai.Route(list(ROUTE_TARGETS), retry=RETRY, breaker_threshold=0),
                "top_n": case.top_n,
                "batch_size": case.batch_size,
                "concurrency": case.concurrency,
            }
            args = (case.query, list(case.documents))
            result, error = _call_client(
                settings, self.harness._providers, "rerank", args, call, sync=sync, runner=runner
            )
        return RerankObservation(
            result, error, answers.requests, answers.unexpected, answers.served
        )

    def verify(
        self,
        case: RerankCase,
        *,
        sync: bool = False,
        via: Via = "transport",
        runner: asyncio.Runner | None = None,
    ) -> RerankObservation:
        """Run `case` and raise if any rerank guarantee broke.

        Raises:
            ConformanceFailure: A subclass named after the first broken guarantee.
        """
        obs = self.run(case, sync=sync, via=via, runner=runner)
        found = check_rerank(case, obs)
        if found:
            raise self.failure(case, obs, found, sync=sync, via=via)
        return obs

    def failure(
        self,
        case: RerankCase,
        obs: RerankObservation,
        found: Sequence[Violation],
        *,
        sync: bool,
        via: Via,
    ) -> Exception:
        """The `ConformanceFailure` reporting `found`."""
        from .runner import _SCRIPT_ORIGIN, _compact, failure_class

        order = {g: i for i, g in enumerate(RERANK_GUARANTEES)}
        found = sorted(found, key=lambda v: order.get(v.guarantee, len(order)))
        path = "Client.rerank()" if sync else "AsyncClient.rerank()"
        lines = _report_head(self.harness, path, via, list(ROUTE_TARGETS), found, obs.error)
        if obs.error is None and obs.result is not None:
            ranked = [(r.index, r.score) for r in obs.result.results]
            lines.append(f"  outcome: ranking {ranked}")
        lines.append(f"  served rankings: {obs.served}")
        lines.append(f"  case{_SCRIPT_ORIGIN[self.harness._shrinking]}:")
        lines.append(f"    {_compact(case)}")
        lines.append(
            "  reproduce: anyinfer.conformance.reranking.RerankHarness(Harness(registry, "
            f"entry)).verify(case, sync={sync!r}, via={via!r})"
        )
        kind = failure_class(found[0].guarantee)
        return kind("\n".join(lines), adapter=self.entry.name, mode=path, via=via, violations=found)

    def check_property(
        self,
        strategy: SearchStrategy[RerankCase],
        *,
        via: Via = "transport",
        max_examples: int,
        key: str | None = None,
    ) -> None:
        """Every drawn case, through a drawn path (async or sync), conforms."""
        from hypothesis import HealthCheck, given, settings
        from hypothesis import strategies as st

        with asyncio.Runner() as runner:

            @settings(
                max_examples=max_examples,
                deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
            )
            @given(case=strategy, sync=st.booleans())
            def rerank_property(case: RerankCase, sync: bool) -> None:
                self.verify(case, sync=sync, via=via, runner=runner)

            self.harness._run_property(rerank_property, key)

    def verify_documented(self) -> None:
        """Every `rerank_documented_cases` case, alternating the async and sync paths."""
        if self.limit < 2:  # the cases split three documents into requests of two
            return
        _verify_each(self.verify, rerank_documented_cases())
