"""`anyinfer.testing`: scripted providers above the wire, through the real client.

Each test drives a real `Client` (or `AsyncClient`) whose registry holds scripted
providers, and checks what the app would see: results, events, errors, the recorded
requests. The pytest fixtures are tested from an unrelated project in
`test_testing_plugin.py`.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import anyinfer as ai
from anyinfer.conformance.checker import check_concatenation, check_grammar
from anyinfer.testing import (
    FAIL_KINDS,
    Fail,
    Reply,
    ScriptedCall,
    ScriptedProvider,
    ScriptedProviders,
    ScriptExhaustedError,
    UnusedRepliesError,
)

FAST = ai.RetryPolicy(max_retries=1, backoff_base_s=0.0, jitter=0.0)
"""Retries without waiting, so a retried scripted failure costs nothing."""


def fast_route(*targets: str, **kwargs: Any) -> ai.Route:
    return ai.Route(list(targets), retry=FAST, **kwargs)


def stream_events(client: ai.Client, **kwargs: Any) -> tuple[list[ai.StreamEvent], Any]:
    """Every event of one stream, and its result or the exception it raised."""
    events: list[ai.StreamEvent] = []
    try:
        with client.stream("hi", **kwargs) as stream:
            for event in stream:
                events.append(event)
        return events, stream.result
    except Exception as exc:
        return events, exc


# --- replies ---------------------------------------------------------------------------


def test_text_reply_streams_word_by_word_and_generates_whole() -> None:
    usage = ai.Usage(input_tokens=7, output_tokens=3)
    with ScriptedProviders() as scripted:
        scripted.add("p", [Reply("Hello big world", usage=usage)] * 2)
        with scripted.client() as client:
            events, result = stream_events(client, target="p:m")
            whole = client.generate("hi", target="p:m")
    assert [e.text for e in events if isinstance(e, ai.TextDelta)] == ["Hello", " big", " world"]
    assert check_grammar(events, succeeded=True) == []
    assert check_concatenation(events, result) == []
    assert result.text == whole.text == "Hello big world"
    assert result.usage == whole.usage == usage.normalized()
    assert result.finish_reason == whole.finish_reason == "stop"
    assert [c.stream for c in scripted.calls] == [True, False]


def test_pieces_reasoning_and_finish_reason() -> None:
    with ScriptedProviders() as scripted:
        scripted.add("p", Reply(["Hel", "lo"], reasoning="think first", finish_reason="length"))
        with scripted.client() as client:
            events, result = stream_events(client, target="p:m")
    kinds = [type(e).__name__ for e in events]
    assert kinds == [
        "TimingMark",
        "TimingMark",
        "ReasoningDelta",
        "ReasoningDelta",
        "TextDelta",
        "TextDelta",
        "StreamEnded",
    ]
    assert result.reasoning == "think first"
    assert result.text == "Hello"
    assert result.finish_reason == "length"


def test_unknown_finish_reason_becomes_other() -> None:
    with ScriptedProviders() as scripted:
        scripted.add("p", Reply("x", finish_reason="brand_new_reason"))
        with scripted.client() as client:
            assert client.generate("hi", target="p:m").finish_reason == "other"


def test_tool_calls_are_assembled_by_the_core() -> None:
    calls = [("lookup", {"q": "a"}), ai.ToolCall("call_x", "fetch", {"url": "u"})]
    with ScriptedProviders() as scripted:
        scripted.add("p", Reply(tool_calls=calls))
        with scripted.client() as client:
            events, result = stream_events(client, target="p:m")
    assert check_concatenation(events, result) == []
    assert result.finish_reason == "tool_calls"
    assert result.tool_calls == (
        ai.ToolCall("call_0", "lookup", {"q": "a"}),
        ai.ToolCall("call_x", "fetch", {"url": "u"}),
    )


def test_unparseable_tool_arguments_warn_as_for_a_real_provider() -> None:
    with ScriptedProviders() as scripted:
        scripted.add("p", Reply(tool_calls=[("lookup", "{not json")]))
        with scripted.client() as client:
            result = client.generate("hi", target="p:m")
    assert result.tool_calls == (ai.ToolCall("call_0", "lookup", {}),)
    assert any("unparseable arguments" in w for w in result.warnings)


def test_raw_payload_only_when_kept() -> None:
    with ScriptedProviders() as scripted:
        scripted.add("p", [Reply("a", raw={"id": 1}), Reply("b", raw={"id": 2})])
        with scripted.client() as client:
            assert client.generate("hi", target="p:m").raw is None
        with scripted.client(retain_raw=True) as client:
            assert client.generate("hi", target="p:m").raw == {"id": 2}


# --- function-driven replies and recorded calls ----------------------------------------


def test_function_replies_see_the_request() -> None:
    seen: list[ScriptedCall] = []

    def answer(call: ScriptedCall) -> str:
        seen.append(call)
        return call.prompt.upper()

    with ScriptedProviders() as scripted:
        provider = scripted.add("p", answer)
        with scripted.client() as client:
            result = client.generate(
                [ai.Message.system("be brief"), ai.Message.user("shout this")],
                target="p:chosen-model",
                sampling=ai.Sampling(temperature=0.2),
                metadata={"user": "u1"},
            )
    assert result.text == "SHOUT THIS"
    (call,) = seen
    assert provider.calls == [call]
    assert (call.provider, call.instance, call.number, call.model) == ("p", "p", 1, "chosen-model")
    assert call.request.system_text() == "be brief"
    assert call.sampling.temperature == 0.2
    assert call.metadata == {"user": "u1"}
    assert call.tools == () and call.schema is None


def test_async_function_and_async_client() -> None:
    async def answer(call: ScriptedCall) -> Reply:
        await asyncio.sleep(0)
        return Reply(f"round {call.number}")

    async def run(scripted: ScriptedProviders) -> list[str]:
        async with scripted.async_client() as client:
            first = await client.generate("a", target="p:m")
            stream = client.stream("b", target="p:m")
            second = await stream.collect()
        return [first.text, second.text]

    with ScriptedProviders() as scripted:
        scripted.add("p", answer)
        assert asyncio.run(run(scripted)) == ["round 1", "round 2"]


def test_a_function_in_a_list_answers_one_call() -> None:
    with ScriptedProviders() as scripted:
        provider = scripted.add("p", ["first", lambda call: f"second saw {call.number}", "third"])
        with scripted.client() as client:
            texts = [client.generate("x", target="p:m").text for _ in range(3)]
    assert texts == ["first", "second saw 2", "third"]
    assert provider.remaining == 0


def test_instances_share_the_script_and_are_told_apart() -> None:
    with ScriptedProviders() as scripted:
        provider = scripted.add("p", ["one", "two"])
        settings = [provider.settings(), provider.settings(alias="eu")]
        with scripted.client(settings) as client:
            client.generate("x", target="p:m")
            client.generate("x", target="eu:m")
    assert [c.instance for c in provider.calls] == ["p", "eu"]


def test_function_returning_none_is_a_clear_error() -> None:
    with ScriptedProviders() as scripted:
        scripted.add("p", lambda call: None)
        scripted.add("backup", lambda call: "never")
        with scripted.client() as client, pytest.raises(TypeError, match="returned NoneType"):
            client.generate("x", route=fast_route("p:m", "backup:m"))
        assert scripted["backup"].calls == []


def test_an_exception_the_function_raises_reaches_the_caller() -> None:
    def broken(call: ScriptedCall) -> str:
        raise KeyError("bug in the test's reply function")

    with ScriptedProviders() as scripted:
        scripted.add("p", broken)
        scripted.add("backup", lambda call: "never")
        with scripted.client() as client, pytest.raises(KeyError):
            client.generate("x", route=fast_route("p:m", "backup:m"))
        assert scripted["backup"].calls == []


# --- failures, retries, fallbacks ------------------------------------------------------

EXPECTED: dict[str, tuple[type[ai.AnyInferError], bool, int | None]] = {
    "rate_limit": (ai.RateLimitError, True, 429),
    "quota": (ai.RateLimitError, False, 429),
    "overloaded": (ai.OverloadedError, True, 503),
    "server": (ai.ProviderError, True, 500),
    "invalid": (ai.ProviderError, False, 400),
    "auth": (ai.AuthenticationError, False, 401),
    "not_found": (ai.ModelNotFoundError, False, 404),
    "context_window": (ai.ContextWindowError, False, 400),
    "content_filter": (ai.ContentFilterError, False, 400),
    "timeout": (ai.ProviderTimeoutError, True, None),
    "disconnect": (ai.StreamError, True, None),
    "protocol": (ai.ProtocolError, False, None),
}


def test_every_kind_is_listed() -> None:
    assert set(EXPECTED) == set(FAIL_KINDS)


@pytest.mark.parametrize("kind", FAIL_KINDS)
def test_each_kind_is_typed_as_a_real_adapter_types_it(kind: str) -> None:
    cls, retryable, status = EXPECTED[kind]
    error = Fail(kind).error("p")  # type: ignore[arg-type]
    assert type(error) is cls
    assert isinstance(error, ai.AnyInferError)
    assert (error.retryable, error.http_status, error.provider) == (retryable, status, "p")


@pytest.mark.parametrize("kind", FAIL_KINDS)
def test_each_kind_routes_like_a_provider_failure(kind: str) -> None:
    cls, retryable, _status = EXPECTED[kind]
    with ScriptedProviders() as scripted:
        failing = scripted.add("p", [Fail(kind)] * (2 if retryable else 1))  # type: ignore[arg-type]
        scripted.add("backup", "saved")
        with scripted.client() as client:
            events, result = stream_events(client, route=fast_route("p:m", "backup:m"))
    assert result.text == "saved"
    assert check_grammar(events, succeeded=True) == []
    failed = [e.record for e in events if isinstance(e, ai.AttemptFailed)]
    expected_outcomes = ["retried", "failed"] if retryable else ["failed"]
    assert [a.outcome for a in failed] == expected_outcomes
    assert all(a.error is not None and a.error.type_name == cls.__name__ for a in failed)
    assert len(failing.calls) == len(expected_outcomes)


def test_rate_limit_retry_after_is_honoured() -> None:
    with ScriptedProviders() as scripted:
        scripted.add("p", [Fail("rate_limit", retry_after=0), "after the wait"])
        with scripted.client() as client:
            result = client.generate("x", route=ai.Route(["p:m"]))  # the default retry policy
    assert result.text == "after the wait"
    retried = result.attempts[0]
    assert retried.outcome == "retried"
    assert retried.error is not None and retried.error.retry_after == 0


def test_status_override_and_exceptions_as_replies() -> None:
    assert Fail("server", status=502).error("p").http_status == 502
    assert type(Fail("overloaded", status=529).error("p")) is ai.OverloadedError
    with pytest.raises(ai.ConfigError, match="cannot carry"):
        Fail("context_window", status=500)
    custom = ai.RateLimitError("slow down", retry_after=0.0, provider="p")
    with ScriptedProviders() as scripted:
        scripted.add("p", [custom, custom])
        scripted.add("backup", "ok")
        with scripted.client() as client:
            result = client.generate("x", route=fast_route("p:m", "backup:m"))
    assert [a.outcome for a in result.attempts] == ["retried", "failed", "ok"]
    assert result.attempts[0].error is not None
    assert result.attempts[0].error.detail == "slow down"


def test_all_targets_failed_carries_the_trail() -> None:
    with ScriptedProviders() as scripted:
        scripted.add("a", Fail("auth"))
        scripted.add("b", Fail("not_found"))
        with scripted.client() as client, pytest.raises(ai.AllTargetsFailedError) as info:
            client.generate("x", route=fast_route("a:m", "b:m"))
    assert [a.error.type_name for a in info.value.attempts if a.error] == [
        "AuthenticationError",
        "ModelNotFoundError",
    ]


def test_content_filter_finish_is_redirected() -> None:
    with ScriptedProviders() as scripted:
        scripted.add("p", Reply("", finish_reason="content_filter"))
        scripted.add("lenient", "answered")
        route = ai.Route(["p:m"], content_policy_targets=["lenient:m"])
        with scripted.client() as client:
            result = client.generate("x", route=route)
    assert result.text == "answered"
    assert [a.outcome for a in result.attempts] == ["redirected", "ok"]


def test_breaker_skips_a_failing_target_without_calling_it() -> None:
    with ScriptedProviders() as scripted:
        primary = scripted.add("p", [Fail("server")])
        scripted.add("backup", ["one", "two"])
        route = ai.Route(
            ["p:m", "backup:m"], retry=ai.RetryPolicy(max_retries=0), breaker_threshold=1
        )
        with scripted.client() as client:
            client.generate("x", route=route)
            second = client.generate("x", route=route)
    assert len(primary.calls) == 1
    assert [a.outcome for a in second.attempts] == ["skipped_unhealthy", "ok"]


# --- mid-stream cuts and latency -------------------------------------------------------


def test_cut_after_content_flushes_usage_and_raises_without_fallback() -> None:
    usage = ai.Usage(input_tokens=9)
    with ScriptedProviders() as scripted:
        scripted.add("p", Reply("one two three", usage=usage, usage_at="start", cut_after=2))
        backup = scripted.add("backup", "unused", strict=False)
        with scripted.client() as client:
            events, outcome = stream_events(client, route=fast_route("p:m", "backup:m"))
    assert isinstance(outcome, ai.StreamError)
    assert check_grammar(events, succeeded=False) == []
    assert [e.text for e in events if isinstance(e, ai.TextDelta)] == ["one", " two"]
    assert [e.usage for e in events if isinstance(e, ai.UsageUpdate)] == [usage]
    assert not any(isinstance(e, ai.StreamEnded | ai.AttemptFailed) for e in events)
    assert backup.calls == []


def test_cut_error_can_be_any_kind() -> None:
    with ScriptedProviders() as scripted:
        scripted.add("p", Reply("a b", cut_after=1, cut_error="overloaded"))
        with scripted.client() as client:
            _events, outcome = stream_events(client, target="p:m")
    assert type(outcome) is ai.OverloadedError


def test_cut_before_content_falls_back() -> None:
    with ScriptedProviders() as scripted:
        scripted.add("p", [Reply("never shown", cut_after=0)] * 2)
        scripted.add("backup", "fallback")
        with scripted.client() as client:
            events, result = stream_events(client, route=fast_route("p:m", "backup:m"))
    assert result.text == "fallback"
    assert check_grammar(events, succeeded=True) == []


def test_a_cut_whole_response_fails_before_content() -> None:
    with ScriptedProviders() as scripted:
        scripted.add("p", [Reply("a b c", cut_after=2)] * 2)
        scripted.add("backup", "whole")
        with scripted.client() as client:
            result = client.generate("x", route=fast_route("p:m", "backup:m"))
    assert result.text == "whole"
    assert [a.outcome for a in result.attempts] == ["retried", "failed", "ok"]


def test_cut_after_the_finish_reason_succeeds_with_a_warning() -> None:
    early, late = ai.Usage(input_tokens=4), ai.Usage(input_tokens=4, output_tokens=2)
    with ScriptedProviders() as scripted:
        scripted.add(
            "p",
            [
                Reply("done", usage=early, usage_at="start", cut_after="finish"),
                Reply("done", usage=late, cut_after="finish"),
            ],
        )
        with scripted.client() as client:
            _events, first = stream_events(client, target="p:m")
            _events, second = stream_events(client, target="p:m")
    assert first.text == "done" and first.usage == early
    assert second.usage == ai.Usage()  # the trailing usage never came
    for result in (first, second):
        assert any(w.startswith("usage may be incomplete") for w in result.warnings)


def test_delay_past_the_timeout_is_a_timeout() -> None:
    with ScriptedProviders() as scripted:
        scripted.add("p", [Reply("late", delay_s=5.0)])
        scripted.add("backup", "prompt")
        with scripted.client() as client:
            result = client.generate(
                "x", route=ai.Route(["p:m", "backup:m"], retry=ai.RetryPolicy(0)), timeout_s=0.05
            )
    assert result.text == "prompt"
    error = result.attempts[0].error
    assert error is not None and error.type_name == "ProviderTimeoutError"
    assert result.attempts[0].timing is not None
    assert result.attempts[0].timing.total_ms >= 45


def test_latency_is_measured_by_the_core() -> None:
    with ScriptedProviders() as scripted:
        scripted.add("p", Reply("a b c", delay_s=0.03, interval_s=0.01))
        with scripted.client() as client:
            _events, result = stream_events(client, target="p:m")
    assert result.timing.first_token_ms is not None and result.timing.first_token_ms >= 25
    assert result.timing.total_ms >= result.timing.first_token_ms + 15


def test_a_stall_between_pieces_times_out_after_content() -> None:
    with ScriptedProviders() as scripted:
        scripted.add("p", Reply("a b", interval_s=5.0))
        with scripted.client() as client:
            events, outcome = stream_events(client, target="p:m", timeout_s=0.05)
    assert isinstance(outcome, ai.ProviderTimeoutError) and outcome.timeout_kind == "idle"
    assert [e.text for e in events if isinstance(e, ai.TextDelta)] == ["a"]


# --- structured output, tools, pricing, telemetry -------------------------------------

SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
}


def test_structured_output_repair_through_the_script() -> None:
    with ScriptedProviders() as scripted:
        provider = scripted.add("p", ["not json", json.dumps({"city": "Oslo"})])
        with scripted.client() as client:
            result = client.generate("x", target="p:m", schema=SCHEMA, repair=ai.Repair(1))
    assert result.structured == {"city": "Oslo"}
    assert result.repair_attempts == 1
    first, second = provider.calls
    assert first.schema == second.schema == SCHEMA
    assert len(second.messages) > len(first.messages)  # the invalid reply was fed back
    assert "not json" in " ".join(m.text for m in second.messages)


def test_repair_budget_spent_raises_schema_violation() -> None:
    with ScriptedProviders() as scripted:
        scripted.add("p", ['{"town": 1}'] * 2)
        with scripted.client() as client, pytest.raises(ai.SchemaViolationError) as info:
            client.generate("x", target="p:m", schema=SCHEMA, repair=ai.Repair(1))
    assert info.value.text == '{"town": 1}'


def test_tool_loop_feeds_results_back() -> None:
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    with ScriptedProviders() as scripted:
        provider = scripted.add(
            "p",
            [
                Reply(tool_calls=[("add", {"a": 2, "b": 3})]),
                lambda call: f"the sum is {call.tool_results[-1].text}",
            ],
        )
        with scripted.client() as client:
            result = client.run_tools("add 2 and 3", tools=[add], target="p:m")
    assert result.text == "the sum is 5"
    first, second = provider.calls
    assert first.tool_names == ("add",) and first.tools[0].parameters["required"] == ["a", "b"]
    assert [m.role for m in second.messages] == ["user", "assistant", "tool"]
    assert second.tool_results[0].tool_call_id == "call_0"


def test_tool_loop_round_budget() -> None:
    def ping() -> str:
        """Ping."""
        return "pong"

    with ScriptedProviders() as scripted:
        scripted.add("p", lambda call: Reply(tool_calls=[("ping", {})]))
        with scripted.client() as client, pytest.raises(ai.ToolLoopError, match="after 2 round"):
            client.run_tools("x", tools=[ping], target="p:m", max_rounds=2)
        assert len(scripted["p"].calls) == 3


def test_usage_is_priced_when_the_id_names_a_priced_provider() -> None:
    usage = ai.Usage(input_tokens=1000, output_tokens=100)
    with ScriptedProviders() as scripted:
        scripted.add("openai", Reply("hi", usage=usage))
        with scripted.client() as client:
            result = client.generate("x", target="openai:gpt-4o-mini")
    expected = ai.PricingTable.default().cost(usage, "openai", "gpt-4o-mini")
    assert expected is not None and result.usage.cost_usd == expected


def test_telemetry_sees_scripted_attempts() -> None:
    seen: list[Any] = []

    class Observer:
        def on_event(self, event: Any) -> None:
            seen.append(event)

    with ScriptedProviders() as scripted:
        scripted.add(
            "p", Reply("a b", usage=ai.Usage(input_tokens=2), usage_at="start", cut_after=1)
        )
        scripted.add("backup", Reply("ok", usage=ai.Usage(output_tokens=1)))
        with scripted.client(observers=[Observer()]) as client:
            stream_events(client, target="p:m")
            client.generate("x", target="backup:m")
    ended = [e for e in seen if isinstance(e, ai.AttemptEnded)]
    assert [(e.target.provider, e.outcome) for e in ended] == [("p", "failed"), ("backup", "ok")]
    assert ended[0].usage == ai.Usage(input_tokens=2)  # flushed from the failed attempt
    requests = [e for e in seen if isinstance(e, ai.RequestEnded)]
    assert [r.ok for r in requests] == [False, True]


def test_models_and_health() -> None:
    with ScriptedProviders() as scripted:
        scripted.add("p", models=["small", "large"])
        scripted.add("q")
        with scripted.client() as client:
            assert [m.id for m in client.models("p")] == ["small", "large"]
            assert client.health("p").ok and client.health("p").models == 2
            assert not client.health("q").ok


# --- strictness, registration, validation ---------------------------------------------


def test_a_call_past_the_script_fails_the_test_instead_of_falling_back() -> None:
    with ScriptedProviders() as scripted:
        scripted.add("p", ["only one"])
        backup = scripted.add("backup", lambda call: "hidden")
        with scripted.client() as client:
            client.generate("x", target="p:m")
            with pytest.raises(ScriptExhaustedError, match="no reply for call #2"):
                client.generate("x", route=fast_route("p:m", "backup:m"))
    assert backup.calls == []


def test_unused_replies_are_reported() -> None:
    with ScriptedProviders() as scripted:
        scripted.add("p", ["a", Fail("server"), Reply(tool_calls=[("t", {})])])
        scripted.add("lax", ["x"], strict=False)
        with scripted.client() as client:
            client.generate("x", target="p:m")
        with pytest.raises(UnusedRepliesError) as info:
            scripted.assert_all_used()
    message = str(info.value)
    assert "'p' was called 1 time(s) and still has 2 unused replies" in message
    assert "Fail('server')" in message and "Reply(tool_calls: t)" in message
    assert "lax" not in message


def test_register_in_any_registry() -> None:
    registry = ai.ProviderRegistry(builtins=False, entry_points=False)
    provider = ScriptedProvider("mine", ["hello"]).register(registry)
    assert registry.adapter_class("mine") is provider.adapter_class
    with pytest.raises(ai.ConfigError, match="already registered"):
        ScriptedProvider("mine").register(registry)
    with ai.Client(registry=registry) as client:
        assert client.generate("x", target="mine:m").text == "hello"
    provider.assert_all_used()


def test_replacing_a_registered_provider_is_undone_on_close() -> None:
    registry = ai.ProviderRegistry(entry_points=False)
    real = registry.adapter_class("openai")
    with ScriptedProviders(registry=registry) as scripted:
        scripted.add("openai", ["scripted"])
        scripted.add("brand-new", ["x"], strict=False)
        assert registry.adapter_class("openai") is scripted["openai"].adapter_class
        with scripted.client([ai.ProviderSettings("openai", api_key="sk-test")]) as client:
            assert client.generate("x", target="openai:gpt-4o-mini").text == "scripted"
    assert registry.adapter_class("openai") is real
    assert "brand-new" not in registry


def test_a_private_registry_reaches_no_real_provider() -> None:
    with ScriptedProviders() as scripted:
        scripted.add("p")
        with scripted.client() as client, pytest.raises(ai.ConfigError, match="unknown provider"):
            client.generate("x", target="openai:gpt-4o-mini")


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (lambda: Fail("nope"), "unknown failure kind"),
        (lambda: Fail("disconnect", status=500), "has no HTTP status"),
        (lambda: Fail("server", status=200), "error status"),
        (lambda: Fail("server", retry_after=1), "applies to rate limits"),
        (lambda: Fail("rate_limit", retry_after=-1), "non-negative"),
        (lambda: Fail(ValueError("x"), status=500), "set them on the exception"),
        (lambda: Reply(cut_after=-1), "cut_after"),
        (lambda: Reply(cut_after=True), "cut_after"),
        (lambda: Reply(usage={"input_tokens": 1}), "anyinfer.Usage"),
        (lambda: Reply(usage_at="middle"), "usage_at"),
        (lambda: Reply(text=[1, 2]), "sequence of strings"),
        (lambda: Reply(finish_reason=""), "finish_reason"),
        (lambda: Reply(delay_s=float("nan")), "delay_s"),
        (lambda: Reply(cut_error="bogus"), "unknown failure kind"),
        (lambda: Reply(tool_calls=["lookup"]), "ToolCall or a \\(name, arguments\\)"),
        (lambda: Reply(tool_calls=[("lookup", {"x": object()})]), "not JSON"),
        (lambda: Reply(tool_calls=[("", {})]), "tool name"),
        (lambda: ScriptedProvider("a:b"), "without ':'"),
        (lambda: ScriptedProvider("p", [3]), "a reply is a str"),
        (lambda: ScriptedProvider("p", profile="x"), "AdapterProfile"),
        (lambda: ScriptedProvider("p", lambda c: "x").queue("more"), "from a function"),
    ],
)
def test_bad_input_is_a_config_error(build: Any, match: str) -> None:
    with pytest.raises(ai.ConfigError, match=match):
        build()


def test_duplicate_and_closed() -> None:
    scripted = ScriptedProviders()
    scripted.add("p")
    with pytest.raises(ai.ConfigError, match="already registered here"):
        scripted.add("p")
    scripted.close()
    with pytest.raises(ai.ConfigError, match="closed"):
        scripted.add("q")


def test_importing_the_package_and_plugin_is_light() -> None:
    code = (
        "import sys, anyinfer\n"
        "before = set(sys.modules)\n"
        "import anyinfer.testing, anyinfer.testing.pytest_plugin\n"
        "new = {m for m in set(sys.modules) - before if m.startswith(('anyinfer', 'httpx'))}\n"
        "print(sorted(new))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == str(
        sorted(["anyinfer.testing", "anyinfer.testing._scripted", "anyinfer.testing.pytest_plugin"])
    )


# --- the stream grammar holds for any scripted reply -----------------------------------

words = st.text(alphabet="ab é", min_size=1, max_size=4)
replies = st.builds(
    Reply,
    text=st.lists(words, max_size=4),
    reasoning=st.lists(words, max_size=2),
    tool_calls=st.lists(
        st.tuples(
            st.sampled_from(["f", "g"]), st.dictionaries(st.sampled_from("xy"), st.integers())
        ),
        max_size=2,
    ),
    usage=st.none()
    | st.builds(ai.Usage, input_tokens=st.integers(0, 50), output_tokens=st.integers(0, 50)),
    usage_at=st.sampled_from(["start", "end"]),
    cut_after=st.none() | st.integers(0, 8) | st.just("finish"),
)


@pytest.fixture(scope="module")
def one_provider() -> Any:
    """One scripted provider for every example; each example builds its own client, so
    no breaker or health state carries over from an earlier example's failures (with one
    shared client, a run of cut replies opened the breaker and later replies were never
    asked for)."""
    with ScriptedProviders() as scripted:
        yield scripted, scripted.add("p")


NO_RETRY = ai.Route(["p:m"], retry=ai.RetryPolicy(max_retries=0))


@given(reply=replies)
def test_any_reply_follows_the_event_grammar(one_provider: Any, reply: Reply) -> None:
    scripted, provider = one_provider
    provider.queue(reply)
    with scripted.client() as client:
        events, outcome = stream_events(client, route=NO_RETRY)
    provider.assert_all_used()
    pieces = [*reply.reasoning_pieces(), *reply.text_pieces(), *reply.wire_calls()]
    cut = reply.cut_after
    succeeded = cut is None or cut == "finish"
    assert check_grammar(events, succeeded=succeeded) == []
    if isinstance(cut, int):
        shown = min(cut, len(pieces))
        deltas = [
            e for e in events if isinstance(e, ai.TextDelta | ai.ReasoningDelta | ai.ToolCallDelta)
        ]
        assert len(deltas) == shown
        # Before content the attempt fails and the route runs out; after it, it raises.
        assert isinstance(outcome, ai.StreamError if shown else ai.AllTargetsFailedError)
        if reply.usage is not None and reply.usage_at == "start":
            assert [e.usage for e in events if isinstance(e, ai.UsageUpdate)] == [reply.usage]
        return
    assert isinstance(outcome, ai.Generation)
    assert check_concatenation(events, outcome) == []
    assert outcome.text == "".join(reply.text_pieces())
    assert outcome.reasoning == "".join(reply.reasoning_pieces())
    assert [(c.name, dict(c.arguments)) for c in outcome.tool_calls] == [
        (name, dict(args))
        for name, args in reply.tool_calls  # type: ignore[misc]
    ]
    delivered = reply.usage is not None and (cut is None or reply.usage_at == "start")
    assert outcome.usage == (reply.usage.normalized() if delivered else ai.Usage())  # type: ignore[union-attr]
