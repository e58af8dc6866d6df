"""One error classifier: the HTTP status class first, the provider's hints within it.

A 5xx whose text mentions authentication, safety or the context length is still a
retryable server error (issue 16, item 7); a 4xx is refined by its code and message.
Every built-in adapter goes through the same classifier, so the matrix runs per adapter
through the fake servers.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from helpers import NO_RETRY

import anyinfer as ai
import anyinfer.fakeservers as fs
from anyinfer._adapters.errormap import (
    CONTEXT_OVERFLOW_PHRASES,
    classify,
    error_fields,
    message_and_code,
    status_from_code,
)
from anyinfer.fakeservers import Fault, Script

ADAPTERS = [
    ("openai", "openai-chat", {}),
    ("openai-responses", "openai-responses", {}),
    ("anthropic", "anthropic-messages", {}),
    ("gemini", "gemini", {}),
    ("ollama", "ollama-chat", {}),
    ("llama.cpp", "llama.cpp", {}),
    ("azure-foundry", "azure-openai", {}),
]

# (status, misleading message, expected type, retryable)
MATRIX = [
    (500, "authentication failed upstream", "ProviderError", True),
    (502, "authentication service unreachable", "ProviderError", True),
    (503, "safety service unavailable", "OverloadedError", True),
    (500, "content_filter backend crashed", "ProviderError", True),
    (502, "context length exceeded", "ProviderError", True),
    (504, "context length exceeded", "ProviderError", True),
    (500, "rate_limit store unavailable", "ProviderError", True),
    (500, "model_not_found cache miss", "ProviderError", True),
    (400, "context length exceeded", "ContextWindowError", False),
    (400, "This model's maximum context length is 8192 tokens", "ContextWindowError", False),
    (413, "prompt is too long: 210000 tokens > 200000 maximum", "ContextWindowError", False),
    (400, "blocked by our safety system", "ContentFilterError", False),
    (400, "invalid authentication credentials", "AuthenticationError", False),
    (400, "the service is overloaded", "ProviderError", False),
    (401, "context length exceeded", "AuthenticationError", False),
    (429, "quota exceeded for requests per minute", "RateLimitError", True),
    (404, "authentication failed", "ModelNotFoundError", False),
    (408, "safety service timed out", "ProviderTimeoutError", True),
]


def _settings(pid: str, transport: fs.FakeTransport, options: dict[str, Any]) -> Any:
    return ai.ProviderSettings(
        pid,
        alias="p",
        api_key="k",
        base_url=f"http://fake.invalid{transport.dialect.base_path}",
        transport=transport,
        options=options,
    )


def _failure(
    pid: str,
    dialect: str,
    options: dict[str, Any],
    scripts: list[Script],
    *,
    retries: int = 0,
    stream: bool = False,
) -> tuple[ai.AllTargetsFailedError, fs.FakeTransport]:
    transport = fs.FakeTransport(dialect, scripts)
    route = ai.Route(
        ["p:m"],
        retry=ai.RetryPolicy(max_retries=retries, backoff_base_s=0.001, jitter=0.0),
        breaker_threshold=0,
    )

    async def go() -> None:
        async with ai.AsyncClient([_settings(pid, transport, options)]) as client:
            if stream:
                async with client.stream("hi", route=route) as st:
                    async for _ in st:
                        pass
            else:
                await client.generate("hi", route=route)

    with pytest.raises(ai.AllTargetsFailedError) as info:
        asyncio.run(go())
    return info.value, transport


@pytest.mark.parametrize(("pid", "dialect", "options"), ADAPTERS, ids=[a[0] for a in ADAPTERS])
@pytest.mark.parametrize(
    ("status", "message", "expected", "retryable"),
    MATRIX,
    ids=[f"{s}-{m[:24]}" for s, m, _, _ in MATRIX],
)
def test_status_class_decides_and_messages_refine_within_it(
    pid: str,
    dialect: str,
    options: dict[str, Any],
    status: int,
    message: str,
    expected: str,
    retryable: bool,
) -> None:
    fault = Script(fault=Fault("status", status=status, message=message))
    error, transport = _failure(pid, dialect, options, [fault])
    info = error.attempts[-1].error
    assert info is not None
    assert (info.type_name, info.retryable, info.http_status) == (expected, retryable, status)
    assert len(transport.requests) == 1


@pytest.mark.parametrize(("pid", "dialect", "options"), ADAPTERS, ids=[a[0] for a in ADAPTERS])
@pytest.mark.parametrize("status", [500, 502, 503, 504])
def test_a_server_error_with_a_misleading_message_is_retried(
    pid: str, dialect: str, options: dict[str, Any], status: int
) -> None:
    fault = Script(fault=Fault("status", status=status, message="authentication safety context"))
    error, transport = _failure(pid, dialect, options, [fault, fault], retries=1)
    assert [a.outcome for a in error.attempts] == ["retried", "failed"]
    assert len(transport.requests) == 2


def test_a_content_policy_lookalike_5xx_is_not_redirected() -> None:
    transport = fs.FakeTransport(
        "openai-chat",
        [Script(fault=Fault("status", status=503, message="safety service unavailable"))],
    )
    safe = fs.FakeTransport("openai-chat", [])
    route = ai.Route(["p:m"], retry=NO_RETRY, content_policy_targets=["safe:m"])

    async def go() -> None:
        async with ai.AsyncClient(
            [
                _settings("openai", transport, {}),
                ai.ProviderSettings(
                    "openai",
                    alias="safe",
                    api_key="k",
                    base_url="http://safe.invalid/v1",
                    transport=safe,
                ),
            ]
        ) as client:
            await client.generate("hi", route=route)

    with pytest.raises(ai.AllTargetsFailedError) as info:
        asyncio.run(go())
    assert [a.outcome for a in info.value.attempts] == ["failed"]
    assert safe.requests == []


def test_429_with_an_insufficient_quota_code_is_not_retryable() -> None:
    fault = Script(fault=Fault("status", status=429, message="quota", code="insufficient_quota"))
    error, _ = _failure("openai", "openai-chat", {}, [fault])
    info = error.attempts[-1].error
    assert info is not None
    assert (info.type_name, info.retryable) == ("RateLimitError", False)


@pytest.mark.parametrize(
    ("code", "expected"),
    [("context_length_exceeded", "ContextWindowError"), ("content_filter", "ContentFilterError")],
)
def test_a_4xx_code_refines_but_a_5xx_code_does_not(code: str, expected: str) -> None:
    for status, want, retryable in ((400, expected, False), (500, "ProviderError", True)):
        fault = Script(fault=Fault("status", status=status, code=code))
        error, _ = _failure("openai", "openai-chat", {}, [fault])
        info = error.attempts[-1].error
        assert info is not None
        assert (info.type_name, info.retryable) == (want, retryable), status


# --- in-stream error frames: no status, the code decides -------------------------------


@pytest.mark.parametrize(
    ("pid", "frame"),
    [
        ("openai", {"error": {"message": "upstream broke", "code": "\u00b2"}}),
        ("openai-responses", {"type": "error", "message": "upstream broke", "code": "\u00b2"}),
    ],
)
def test_an_error_frame_with_a_superscript_code_is_a_typed_error(
    pid: str, frame: dict[str, Any]
) -> None:
    """`"²".isdigit()` is true but `int("²")` fails: it must not escape as `ValueError`."""
    body = b"event: error\ndata: " + json.dumps(frame).encode() + b"\n\ndata: [DONE]\n\n"

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=body, headers={"content-type": "text/event-stream"})

    settings = ai.ProviderSettings(
        pid,
        alias="p",
        api_key="k",
        base_url="http://fake.invalid/v1",
        transport=httpx.MockTransport(handler),
    )

    async def go() -> None:
        async with ai.AsyncClient([settings]) as client:
            async with client.stream("hi", route=ai.Route(["p:m"], retry=NO_RETRY)) as st:
                async for _ in st:
                    pass

    with pytest.raises(ai.AllTargetsFailedError) as info:
        asyncio.run(go())
    err = info.value.attempts[-1].error
    assert err is not None
    assert (err.type_name, err.http_status, err.retryable) == ("ProviderError", None, True)
    assert "\u00b2" in err.detail


@pytest.mark.parametrize("code", ["\u00b2", "\u0663\u0660\u0660", "5O2", "", "12345", "299"])
def test_status_from_code_reads_only_ascii_error_statuses(code: str) -> None:
    assert status_from_code(code) is None


def test_status_from_code_reads_gateway_statuses() -> None:
    assert status_from_code("502") == 502
    assert status_from_code(429) == 429
    assert status_from_code(True) is None


@pytest.mark.parametrize(
    ("code", "message", "expected", "retryable"),
    [
        ("overloaded", "busy", "OverloadedError", True),
        ("server_error", "authentication backend down", "ProviderError", True),
        ("invalid_request_error", "prompt is too long", "ContextWindowError", False),
        ("context_length_exceeded", "too long", "ContextWindowError", False),
        (None, "something broke", "ProviderError", True),
    ],
)
def test_no_status_uses_the_code_then_refines_within_its_class(
    code: str | None, message: str, expected: str, retryable: bool
) -> None:
    from anyinfer._adapters.errormap import CODE_KINDS

    error = classify(None, message, code, hint=CODE_KINDS.get(code or ""), provider="p")
    assert (type(error).__name__, error.retryable, error.http_status) == (
        expected,
        retryable,
        None,
    )


def test_one_extractor_prefers_a_textual_code_and_keeps_the_numeric_one_as_status() -> None:
    fields = error_fields({"message": "m", "code": 400, "type": "exceed_context_size_error"})
    assert fields == ("m", "exceed_context_size_error", 400)
    assert error_fields({"message": "m", "code": "502"}) == ("m", "502", 502)
    assert error_fields({"message": "m", "type": "error", "code": None}) == ("m", None, None)
    assert error_fields({"type": "overloaded_error", "message": "x"}, ("type", "code")) == (
        "x",
        "overloaded_error",
        None,
    )
    assert message_and_code([{"error": {"code": 404, "status": "NOT_FOUND", "message": "x"}}]) == (
        "x",
        "NOT_FOUND",
    )
    assert error_fields("plain text") == ("plain text", None, None)


def test_the_context_overflow_phrases_are_lower_case_and_unique() -> None:
    assert all(p == p.lower() for p in CONTEXT_OVERFLOW_PHRASES)
    assert len(set(CONTEXT_OVERFLOW_PHRASES)) == len(CONTEXT_OVERFLOW_PHRASES)


def test_the_phrase_lists_and_extractors_live_in_one_module() -> None:
    import inspect

    from anyinfer._providers import anthropic, gemini, openai_chat, openai_responses

    for module in (anthropic, gemini, openai_chat, openai_responses):
        source = inspect.getsource(module)
        assert "_CONTEXT_PHRASES" not in source, module.__name__
        assert "def _error_fields" not in source, module.__name__
        assert "def error_from_parts" not in source, module.__name__
