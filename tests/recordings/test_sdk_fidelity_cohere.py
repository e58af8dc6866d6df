"""The official `cohere` SDK reads what the `cohere-v2` dialect serves.

Wire-realistic scripts (`realistic_scripts`) are served by one loopback `FakeServer`
per test and read by the SDK's own v2 client: `ClientV2.chat_stream()` (its typed
`V2ChatStreamResponse` events) and `ClientV2.chat()` (a `V2ChatResponse`). What the SDK
parses must equal the script: text, thinking, tool calls (ids, names, argument text by
the events' `index`), the finish reason the dialect maps the finish reason to, and
usage (`tokens`, `cached_tokens`). Every event must parse as its own SDK class (an
unknown `type` would come back as a bare object), an in-stream failure must reach the
SDK as a `message-end` with `finish_reason` `ERROR` and its `error` text, and every
documented HTTP error status must reach the SDK as its error class for that status where
the SDK has one.

The SDK is a test-only dependency (the `test` extra); without it these tests skip.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from wire import ServedScript, check_every_script

from anyinfer.conformance.checker import expected_tool_calls
from anyinfer.conformance.strategies import DOCUMENTED_STATUSES, realistic_scripts
from anyinfer.fakeservers import Fault, Script, get_dialect
from anyinfer.fakeservers.dialects.cohere_v2 import FINISH_REASONS

cohere = pytest.importorskip("cohere")

pytestmark = [
    pytest.mark.loopback,
    # The SDK's own model code reads pydantic's deprecated `__fields__`.
    pytest.mark.filterwarnings("ignore::DeprecationWarning:cohere.*"),
]

DIALECT = get_dialect("cohere-v2")
REQUEST: dict[str, Any] = {
    "model": "command-a-03-2025",
    "messages": [{"role": "user", "content": "hi"}],
}
RELAXED = settings(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
_EVENT_CLASSES = {
    "message-start": "MessageStartV2ChatStreamResponse",
    "content-start": "ContentStartV2ChatStreamResponse",
    "content-delta": "ContentDeltaV2ChatStreamResponse",
    "content-end": "ContentEndV2ChatStreamResponse",
    "tool-call-start": "ToolCallStartV2ChatStreamResponse",
    "tool-call-delta": "ToolCallDeltaV2ChatStreamResponse",
    "tool-call-end": "ToolCallEndV2ChatStreamResponse",
    "message-end": "MessageEndV2ChatStreamResponse",
}


@contextlib.contextmanager
def _sdk() -> Iterator[tuple[ServedScript, Any]]:
    served = ServedScript(DIALECT)
    with served.server as server, httpx.Client(timeout=10.0) as http:
        client = cohere.ClientV2(
            api_key="co-fidelity",
            base_url=f"http://127.0.0.1:{server.port}",
            httpx_client=http,
            max_retries=0,
        )
        yield served, client


def _finish(script: Script) -> str | None:
    reason = script.finish_reason
    return None if reason is None else FINISH_REASONS.get(reason, reason)


def _expected_calls(script: Script) -> list[tuple[str | None, str | None, Any]]:
    calls = expected_tool_calls(script, range(len(script.pieces)))
    return [(c.id, c.name, c.arguments) for c in calls]


def _check_usage(usage: Any, script: Script) -> None:
    expected = script.usage
    assert expected is not None, "realistic Cohere scripts always report usage"
    assert usage is not None and usage.tokens is not None
    assert usage.tokens.input_tokens == expected.input_tokens
    assert usage.tokens.output_tokens == expected.output_tokens
    assert usage.cached_tokens == expected.cache_read_tokens
    assert usage.billed_units is not None


def test_stream_events_parse_as_the_sdk_types_and_agree_with_every_script() -> None:
    def check(client: Any, script: Script) -> None:
        events = list(client.chat_stream(**REQUEST))
        for e in events:
            assert type(e).__name__ == _EVENT_CLASSES[e.type], e
        kinds = [e.type for e in events]
        assert kinds[0] == "message-start" and kinds[-1] == "message-end"
        assert kinds.count("message-end") == 1
        text = thinking = ""
        calls: dict[int, list[Any]] = {}
        for e in events:
            if e.type == "content-delta":
                content = e.delta.message.content
                text += content.text or ""
                thinking += content.thinking or ""
            elif e.type == "tool-call-start":
                call = e.delta.message.tool_calls
                calls[e.index] = [call.id, call.function.name, call.function.arguments or ""]
            elif e.type == "tool-call-delta":
                calls[e.index][2] += e.delta.message.tool_calls.function.arguments
        assert text == script.text
        assert thinking == script.reasoning
        got = [
            (c[0], c[1], json.loads(c[2]) if c[2].strip() else {}) for _, c in sorted(calls.items())
        ]
        assert got == _expected_calls(script)
        opened = [e.index for e in events if e.type == "content-start"]
        closed = [e.index for e in events if e.type == "content-end"]
        assert opened == closed == list(range(len(opened)))
        end = events[-1].delta
        assert end.finish_reason == _finish(script)
        assert end.error is None
        _check_usage(end.usage, script)

    check_every_script(_sdk(), realistic_scripts(DIALECT, fault=st.none()), check, settings=RELAXED)


def test_whole_response_agrees_with_every_realistic_script() -> None:
    def check(client: Any, script: Script) -> None:
        response = client.chat(**REQUEST)
        message = response.message
        content = message.content or []
        assert "".join(c.text for c in content if c.type == "text") == script.text
        assert "".join(c.thinking for c in content if c.type == "thinking") == script.reasoning
        calls = [
            (c.id, c.function.name, json.loads(c.function.arguments or "{}"))
            for c in message.tool_calls or []
        ]
        assert calls == _expected_calls(script)
        assert response.finish_reason == _finish(script)
        assert len(response.id) == 36  # a UUID, as Cohere's ids are
        _check_usage(response.usage, script)

    check_every_script(_sdk(), realistic_scripts(DIALECT, fault=st.none()), check, settings=RELAXED)


def test_in_stream_error_reaches_the_sdk_as_an_error_finish() -> None:
    (error,) = DIALECT.profile.in_stream_errors
    fault = Fault("provider_error", at=2, status=error.status, message=error.message)
    with _sdk() as (served, client):
        served.serve(Script(pieces=(), fault=fault))
        events = list(client.chat_stream(**REQUEST))
        end = events[-1]
        assert end.type == "message-end"
        assert end.delta.finish_reason == "ERROR"
        assert end.delta.error == error.message


# The SDK's error class for each status it names (`v2/raw_client.py`); others are its
# generic `ApiError`.
_SDK_ERRORS = {
    400: "BadRequestError",
    401: "UnauthorizedError",
    403: "ForbiddenError",
    404: "NotFoundError",
    422: "UnprocessableEntityError",
    429: "TooManyRequestsError",
    500: "InternalServerError",
    503: "ServiceUnavailableError",
    504: "GatewayTimeoutError",
}


def test_documented_http_errors_reach_the_sdk_as_its_error_classes() -> None:
    with _sdk() as (served, client):
        for status in DOCUMENTED_STATUSES:
            fault = Fault("status", status=status, retry_after=2 if status == 429 else None)
            served.serve(Script(fault=fault))
            for call in (client.chat, lambda **kw: list(client.chat_stream(**kw))):
                with pytest.raises(cohere.core.ApiError) as raised:
                    call(**REQUEST)
                err = raised.value
                assert type(err).__name__ == _SDK_ERRORS.get(status, "ApiError"), status
                assert err.status_code == status
                assert err.body["message"] == fault.message and len(err.body["id"]) == 36
                if status == 429:
                    assert err.headers["retry-after"] == "2"
