"""Routing: retries, fallbacks, breakers, redirects, credentials."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from helpers import generate

import anyinfer as ai

FAST = ai.RetryPolicy(max_retries=2, backoff_base_s=0.001, jitter=0.0)


def ok_body(text: str = "ok", finish: str = "stop") -> dict[str, Any]:
    return {
        "choices": [{"index": 0, "message": {"content": text}, "finish_reason": finish}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1},
    }


class Script:
    """Serves a list of (status, json, headers) answers in order and counts calls."""

    def __init__(self, *answers: tuple[int, dict[str, Any], dict[str, str]]) -> None:
        self.answers = list(answers)
        self.calls = 0
        self.times: list[float] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.calls += 1
        self.times.append(time.monotonic())
        status, body, headers = self.answers[min(self.calls - 1, len(self.answers) - 1)]
        if status == 200 and json.loads(request.content).get("stream"):
            choice = body["choices"][0]
            delta = {
                "index": 0,
                "delta": choice["message"],
                "finish_reason": choice["finish_reason"],
            }
            sse = f"data: {json.dumps({'choices': [delta]})}\n\ndata: [DONE]\n\n"
            return httpx.Response(200, content=sse.encode(), headers=headers)
        return httpx.Response(status, json=body, headers=headers)


def err(
    status: int, message: str = "boom", code: str | None = None, **headers: str
) -> tuple[int, dict[str, Any], dict[str, str]]:
    return status, {"error": {"message": message, "type": "x", "code": code}}, headers


def ok(text: str = "ok", finish: str = "stop") -> tuple[int, dict[str, Any], dict[str, str]]:
    return 200, ok_body(text, finish), {}


def client_for(**handlers: Callable[[httpx.Request], httpx.Response]) -> ai.AsyncClient:
    return ai.AsyncClient(
        [
            ai.ProviderSettings(
                "openai", alias=name, api_key="sk-route", transport=httpx.MockTransport(h)
            )
            for name, h in handlers.items()
        ]
    )


def test_retryable_error_is_retried_then_succeeds() -> None:
    a = Script(err(503), err(500), ok("third time"))
    result = generate(client_for(a=a), route=ai.Route("a:m", retry=FAST))
    assert result.text == "third time" and a.calls == 3
    assert [x.outcome for x in result.attempts] == ["retried", "retried", "ok"]
    assert (
        result.attempts[0].error is not None
        and result.attempts[0].error.type_name == "OverloadedError"
    )


def test_retry_after_is_honoured() -> None:
    a = Script(err(429, **{"retry-after": "0.2"}), ok())
    result = generate(client_for(a=a), route=ai.Route("a:m", retry=FAST))
    assert result.text == "ok"
    assert a.times[1] - a.times[0] >= 0.19


def test_long_retry_after_falls_back_instead_of_waiting() -> None:
    a, b = Script(err(429, **{"retry-after": "120"})), Script(ok("from b"))
    start = time.monotonic()
    result = generate(client_for(a=a, b=b), route=ai.Route(["a:m", "b:m"], retry=FAST))
    assert time.monotonic() - start < 5
    assert result.text == "from b" and a.calls == 1
    assert [x.outcome for x in result.attempts] == ["failed", "ok"]


@pytest.mark.parametrize(
    ("status", "code"), [(401, None), (404, None), (400, "context_length_exceeded")]
)
def test_non_retryable_errors_fall_back_at_once(status: int, code: str | None) -> None:
    a, b = Script(err(status, code=code)), Script(ok("b"))
    result = generate(client_for(a=a, b=b), route=ai.Route(["a:m", "b:m"], retry=FAST))
    assert a.calls == 1 and result.text == "b"


def test_exhausted_route_raises_with_trail() -> None:
    a, b = Script(err(500)), Script(err(401))
    with pytest.raises(ai.AllTargetsFailedError) as info:
        generate(client_for(a=a, b=b), route=ai.Route(["a:m", "b:m"], retry=FAST))
    assert [x.outcome for x in info.value.attempts] == ["retried", "retried", "failed", "failed"]
    assert info.value.attempts[-1].error is not None
    assert info.value.attempts[-1].error.type_name == "AuthenticationError"


def test_custom_decision_raises_the_typed_error() -> None:
    a, b = Script(err(400, "bad request")), Script(ok())

    def decide(e: ai.AnyInferError) -> ai.Decision:
        return "raise" if e.http_status == 400 else ai.default_decision(e)

    with pytest.raises(ai.ProviderError) as info:
        generate(client_for(a=a, b=b), route=ai.Route(["a:m", "b:m"], decide=decide))
    assert not isinstance(info.value, ai.AllTargetsFailedError)
    assert b.calls == 0 and len(info.value.attempts) == 1


def test_content_filter_finish_is_redirected() -> None:
    a, safe = Script(ok("", finish="content_filter")), Script(ok("handled"))
    route = ai.Route("a:m", content_policy_targets=["safe:m"])

    async def go() -> tuple[ai.Generation, list[ai.StreamEvent]]:
        async with client_for(a=a, safe=safe) as client:
            async with client.stream("hi", route=route) as stream:
                events = [e async for e in stream]
        return stream.result, events

    result, events = asyncio.run(go())
    assert result.text == "handled" and result.target.provider == "safe"
    assert [x.outcome for x in result.attempts] == ["redirected", "ok"]
    marks = [e for e in events if isinstance(e, ai.TimingMark) and e.name == "attempt_start"]
    assert len(marks) == 2 and not any(isinstance(e, ai.AttemptFailed) for e in events)


class Seen:
    """A telemetry observer that keeps every event."""

    def __init__(self) -> None:
        self.events: list[Any] = []

    def on_event(self, event: Any) -> None:
        self.events.append(event)


@pytest.mark.parametrize("stream", [True, False])
def test_content_policy_error_is_redirected_without_attempt_failed(stream: bool) -> None:
    refused = err(400, "Your request was rejected by our safety system", "content_policy_violation")
    a, safe = Script(refused), Script(ok("handled"))
    route = ai.Route("a:m", retry=FAST, content_policy_targets=["safe:m"])
    seen = Seen()

    async def go() -> tuple[ai.Generation, list[ai.StreamEvent]]:
        async with client_for(a=a, safe=safe) as client:
            client.subscribe(seen)
            if not stream:
                return await client.generate("hi", route=route), []
            async with client.stream("hi", route=route) as s:
                events = [e async for e in s]
            return s.result, events

    result, events = asyncio.run(go())
    assert result.text == "handled" and result.target.provider == "safe" and a.calls == 1
    assert [x.outcome for x in result.attempts] == ["redirected", "ok"]
    refusal = result.attempts[0].error
    assert refusal is not None and refusal.type_name == "ContentFilterError"
    assert not any(isinstance(e, ai.AttemptFailed) for e in events)
    if stream:
        marks = [e for e in events if isinstance(e, ai.TimingMark) and e.name == "attempt_start"]
        assert len(marks) == 2
    ended = [e.outcome for e in seen.events if isinstance(e, ai.AttemptEnded)]
    assert ended == ["redirected", "ok"]


def test_content_policy_error_redirects_once_then_falls_through() -> None:
    refused = err(400, "blocked by the content_filter", "content_filter")
    a, safe = Script(refused), Script(refused)
    route = ai.Route("a:m", retry=FAST, content_policy_targets=["safe:m"])
    with pytest.raises(ai.AllTargetsFailedError) as info:
        generate(client_for(a=a, safe=safe), route=route)
    assert [x.outcome for x in info.value.attempts] == ["redirected", "failed"]
    assert a.calls == 1 and safe.calls == 1


def test_content_policy_error_the_route_raises_is_not_redirected() -> None:
    refused = err(400, "blocked by the content_filter", "content_filter")
    a, safe = Script(refused), Script(ok("handled"))

    def decide(e: ai.AnyInferError) -> ai.Decision:
        return "raise" if isinstance(e, ai.ContentFilterError) else ai.default_decision(e)

    route = ai.Route("a:m", content_policy_targets=["safe:m"], decide=decide)
    with pytest.raises(ai.ContentFilterError) as info:
        generate(client_for(a=a, safe=safe), route=route)
    assert [x.outcome for x in info.value.attempts] == ["failed"] and safe.calls == 0


def test_content_filter_without_redirect_surfaces() -> None:
    a = Script(ok("", finish="content_filter"))
    result = generate(client_for(a=a), target="a:m")
    assert result.finish_reason == "content_filter"


def test_breaker_opens_skips_and_half_opens() -> None:
    a, b = Script(err(500), err(500), ok("a back")), Script(ok("b"))
    route = ai.Route(
        ["a:m", "b:m"],
        retry=ai.RetryPolicy(max_retries=0),
        breaker_threshold=2,
        breaker_cooldown_s=0.2,
    )

    async def go() -> list[ai.Generation]:
        out = []
        async with client_for(a=a, b=b) as client:
            for _ in range(3):
                out.append(await client.generate("hi", route=route))
            await asyncio.sleep(0.25)
            out.append(await client.generate("hi", route=route))  # half-open probe succeeds
            out.append(await client.generate("hi", route=route))
        return out

    results = asyncio.run(go())
    assert [r.attempts[0].outcome for r in results] == [
        "failed",
        "failed",
        "skipped_unhealthy",
        "ok",
        "ok",
    ]
    assert a.calls == 4
    assert results[2].text == "b"


def test_every_target_unhealthy_raises() -> None:
    a = Script(err(500))
    route = ai.Route("a:m", retry=ai.RetryPolicy(max_retries=0), breaker_threshold=1)

    async def go() -> None:
        async with client_for(a=a) as client:
            with pytest.raises(ai.AllTargetsFailedError):
                await client.generate("hi", route=route)
            with pytest.raises(ai.AllTargetsFailedError, match="unhealthy"):
                await client.generate("hi", route=route)

    asyncio.run(go())
    assert a.calls == 1


def test_client_default_route_policies_are_inherited() -> None:
    a, b = Script(err(500), ok("a")), Script(ok("b"))
    client = ai.AsyncClient(
        [
            ai.ProviderSettings("openai", alias="a", transport=httpx.MockTransport(a)),
            ai.ProviderSettings("openai", alias="b", transport=httpx.MockTransport(b)),
        ],
        route=ai.Route(["a:m"], retry=ai.RetryPolicy(max_retries=0)),
    )
    result = generate(client, route=["a:m", "b:m"])  # bare list: no retries, like the default
    assert result.text == "b" and a.calls == 1


def test_config_failure_of_one_target_falls_back(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANYINFER_MISSING_KEY", raising=False)
    good = Script(ok("fine"))
    client = ai.AsyncClient(
        [
            ai.ProviderSettings("openai", alias="nokey", api_key="env://ANYINFER_MISSING_KEY"),
            ai.ProviderSettings("openai", alias="good", transport=httpx.MockTransport(good)),
        ]
    )
    result = generate(client, route=["nokey:m", "good:m"])
    assert result.text == "fine"
    assert (
        result.attempts[0].error is not None and result.attempts[0].error.type_name == "ConfigError"
    )


def test_custom_resolver_chain() -> None:
    seen: list[str] = []

    class Vault:
        def claims(self, reference: str) -> bool:
            return reference.startswith("vault://")

        def resolve(self, reference: str, *, provider: str | None = None) -> str:
            return "vault-secret-" + reference.removeprefix("vault://")

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers["authorization"])
        return httpx.Response(200, json=ok_body())

    chain = ai.ResolverChain([Vault(), *ai.ResolverChain().resolvers])
    client = ai.AsyncClient(
        [
            ai.ProviderSettings(
                "openai", api_key="vault://team-a", transport=httpx.MockTransport(handler)
            )
        ],
        resolver=chain,
    )
    generate(client, target="openai:m")
    assert seen == ["Bearer vault-secret-team-a"]
    assert "vault-secret-team-a" not in str(ai.ProviderError("leak vault-secret-team-a"))
    with pytest.raises(ai.ConfigError, match="no credential resolver"):
        ai.ResolverChain().resolve("nope://x")


def test_keyring_reference_without_keyring_is_a_config_error() -> None:
    try:
        import keyring  # noqa: F401
    except ImportError:
        with pytest.raises(ai.ConfigError, match="keyring"):
            ai.ResolverChain().resolve("credential://system/openai")
    else:  # pragma: no cover - depends on the machine
        pytest.skip("keyring is installed here")


def test_backoff_grows_and_is_capped() -> None:
    import random

    policy = ai.RetryPolicy(backoff_base_s=1.0, backoff_max_s=5.0, jitter=0.0)
    err_ = ai.OverloadedError("x")
    assert [policy.delay(n, err_) for n in (1, 2, 3, 4)] == [1.0, 2.0, 4.0, 5.0]
    jittered = ai.RetryPolicy(backoff_base_s=1.0, jitter=1.0)
    values = {jittered.delay(1, err_, random.Random(i)) for i in range(5)}
    assert len(values) > 1 and all(0 <= v <= 1.0 for v in values)
    with pytest.raises(ai.ConfigError):
        ai.RetryPolicy(jitter=2)


def test_error_body_json_is_parsed_for_messages() -> None:
    a = Script((500, {"error": {"message": "upstream exploded"}}, {}))
    with pytest.raises(ai.AllTargetsFailedError, match="upstream exploded"):
        generate(client_for(a=a), route=ai.Route("a:m", retry=ai.RetryPolicy(max_retries=0)))


def test_a_streamed_route_reads_each_attempt_directly_and_keeps_its_errors() -> None:
    # The router relays each attempt's batches to the stream (no hop through its own
    # generator); what an attempt raises still reaches the router: a retry on `a`, then
    # the fallback exhausted on `b` with its trail.
    a, b = Script(err(500), ok("second")), Script(err(401))

    async def main() -> None:
        async with client_for(a=a, b=b) as client:
            async with client.stream("hi", route=ai.Route(["a:m", "b:m"], retry=FAST)) as st:
                relayed = []
                async for event in st:
                    relayed.append(st._routed is not None and st._routed.relayed is not None)
                    if isinstance(event, ai.TextDelta):
                        break
            assert a.calls == 2 and any(relayed)

            async def drain() -> None:
                async with client.stream("hi", route=ai.Route(["b:m"], retry=FAST)) as st2:
                    async for _ in st2:
                        pass

            with pytest.raises(ai.AllTargetsFailedError) as streamed:
                await drain()
            assert [x.outcome for x in streamed.value.attempts] == ["failed"]

    asyncio.run(main())


# --- the exhausted route's error: one rule for generation, embeddings and reranking ------


def test_an_exhausted_route_says_what_it_last_saw() -> None:
    from anyinfer._client.attempt import exhausted

    target = ai.ResolvedTarget("openai", "m", "openai")
    info = ai.ErrorInfo("ProviderError", "openai", "send", True, 503, "busy")
    failed = ai.AttemptRecord(target, "failed", info)
    skipped = ai.AttemptRecord(target, "skipped_unhealthy")
    assert str(exhausted([], 0)) == "all 0 target(s) failed"
    assert str(exhausted([skipped], 1)) == (
        "all 1 target(s) failed: every target was skipped as unhealthy"
    )
    error = exhausted([failed, skipped], 2, "embed")
    assert str(error) == "embed: all 2 target(s) failed: last error ProviderError: busy"
    assert error.attempts == (failed, skipped)
