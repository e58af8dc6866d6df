"""The official `anthropic` SDK reads what the `anthropic-messages` dialect serves.

Wire-realistic scripts (`realistic_scripts`) are served by one loopback `FakeServer`
per test and read by the SDK's own APIs: the `messages.stream()` helper and its
`get_final_message()`, the raw `messages.create(stream=True)` events, and the
non-streaming `messages.create()`. What the SDK assembles must equal the script: text,
thinking (with a signature), tool calls (ids, names, parsed input), usage (the final
figures, with the provisional `output_tokens` of `message_start` never above them) and
the stop reason the dialect maps the finish reason to. The SDK must not raise. An
in-stream `error` event must raise the SDK's `APIStatusError` with the event's type, as
a real overloaded stream does, and every documented HTTP error status must reach the
SDK as its error class for that status.

The SDK is a test-only dependency (the `test` extra); without it these tests skip.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from wire import ServedScript, check_every_script

from anyinfer.conformance.checker import expected_tool_calls
from anyinfer.conformance.strategies import DOCUMENTED_STATUSES, realistic_scripts
from anyinfer.fakeservers import Fault, Script, get_dialect
from anyinfer.fakeservers.dialects.anthropic import STOP_REASONS

anthropic = pytest.importorskip("anthropic")

pytestmark = pytest.mark.loopback

DIALECT = get_dialect("anthropic-messages")
MODEL = "claude-fake-4"
REQUEST: dict[str, Any] = {
    "model": MODEL,
    "max_tokens": 1024,
    "messages": [{"role": "user", "content": "hi"}],
}
# The active Hypothesis profile decides how many examples; these only relax checks
# that do not fit a loopback round trip per example.
WHOLE_FRAMES = st.just(())
"""One network read per frame: read splits are the stream helper test's business."""
SPLIT_READS = st.one_of(
    st.just(()), st.lists(st.integers(2, 48), min_size=1, max_size=3).map(tuple)
)
"""Reads cut anywhere, multi-byte characters included (byte-by-byte reads of every body
would cost the CI run seconds and find nothing more in the SDK's decoder)."""
RELAXED = settings(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@contextlib.contextmanager
def _sdk() -> Iterator[tuple[ServedScript, Any]]:
    served = ServedScript(DIALECT)
    with served.server as server:
        client = anthropic.Anthropic(
            api_key="sk-ant-fidelity",
            base_url=f"http://127.0.0.1:{server.port}",
            max_retries=0,
            timeout=10.0,
        )
        try:
            yield served, client
        finally:
            client.close()


# --- what the script says the SDK must assemble ------------------------------------------


def _stop_reason(script: Script) -> str | None:
    reason = script.finish_reason
    return None if reason is None else STOP_REASONS.get(reason, reason)


def _expected_calls(script: Script) -> list[tuple[str, str, Any]]:
    calls = expected_tool_calls(script, range(len(script.pieces)))
    return [(c.id, c.name, c.arguments) for c in calls]


def _read_stream(client: Any) -> Any:
    """Read a whole `messages.stream()`; the final message."""
    with client.messages.stream(**REQUEST) as stream:
        for _ in stream:
            pass
        return stream.get_final_message()


def _check_message(message: Any, script: Script) -> None:
    """A final `Message` (streamed and assembled, or whole) agrees with the script."""
    assert message.type == "message" and message.role == "assistant"
    assert message.model == script.model
    assert message.id.startswith("msg_01") and len(message.id) == 28
    blocks = message.content
    text = "".join(b.text for b in blocks if b.type == "text")
    thinking = [b for b in blocks if b.type == "thinking"]
    assert text == script.text
    assert "".join(b.thinking for b in thinking) == script.reasoning
    assert all(b.signature for b in thinking), "a thinking block lost its signature"
    calls = [(b.id, b.name, b.input) for b in blocks if b.type == "tool_use"]
    assert calls == _expected_calls(script)
    assert all(b.id.startswith("toolu_01") for b in blocks if b.type == "tool_use")
    assert message.stop_reason == _stop_reason(script)
    if script.finish_reason == "content_filter":
        assert message.stop_details is not None and message.stop_details.type == "refusal"
    usage = script.usage
    assert usage is not None, "realistic Anthropic scripts always report usage"
    got = message.usage
    assert got is not None, "the SDK assembled a Message without usage"
    assert got.input_tokens == usage.input_tokens
    assert got.output_tokens == usage.output_tokens
    assert got.cache_read_input_tokens == usage.cache_read_tokens
    assert got.cache_creation_input_tokens == usage.cache_write_tokens
    details = got.output_tokens_details
    thinking_tokens = None if details is None else details.thinking_tokens
    assert thinking_tokens == usage.reasoning_tokens


# --- streaming ---------------------------------------------------------------------------------


def test_stream_helper_assembles_every_realistic_script() -> None:
    seen: dict[str, Script] = {}

    def check(client: Any, script: Script) -> None:
        deltas: list[str] = []
        with client.messages.stream(**REQUEST) as stream:
            for event in stream:
                if event.type == "text":
                    deltas.append(event.text)
            message = stream.get_final_message()
        assert "".join(deltas) == script.text
        _check_message(message, script)
        # A message id belongs to one script: two scripts never share one.
        assert seen.setdefault(message.id, replace(script, read_sizes=())) == replace(
            script, read_sizes=()
        )

    check_every_script(
        _sdk(),
        realistic_scripts(DIALECT, fault=st.none(), read_sizes=SPLIT_READS),
        check,
        settings=RELAXED,
    )


def test_raw_stream_events_are_the_real_grammar() -> None:
    def check(client: Any, script: Script) -> None:
        events = list(client.messages.create(**REQUEST, stream=True))
        kinds = [e.type for e in events]
        # ping events are real, and the SDK drops them before they reach here.
        assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
        assert kinds.count("message_start") == kinds.count("message_delta") == 1
        assert kinds.index("message_delta") == len(kinds) - 2
        usage = script.usage
        assert usage is not None and usage.output_tokens is not None
        start = events[0].message.usage
        assert start.input_tokens == usage.input_tokens
        assert start.output_tokens is not None
        assert 0 <= start.output_tokens <= usage.output_tokens  # provisional, then final
        delta = events[-2]
        assert delta.usage.output_tokens == usage.output_tokens
        assert delta.delta.stop_reason == _stop_reason(script)
        if script.usage_placement == "cumulative":
            assert delta.usage.input_tokens == usage.input_tokens
        opened = [e.index for e in events if e.type == "content_block_start"]
        closed = [e.index for e in events if e.type == "content_block_stop"]
        assert opened == closed == list(range(len(opened)))

    check_every_script(
        _sdk(),
        realistic_scripts(DIALECT, fault=st.none(), read_sizes=WHOLE_FRAMES),
        check,
        settings=RELAXED,
    )


def test_in_stream_error_raises_the_sdk_error_with_its_type() -> None:
    errors = DIALECT.profile.in_stream_errors
    assert errors, "the profile states Anthropic's in-stream errors"
    faults = st.builds(
        lambda e, at: Fault(
            "provider_error", at=at, status=e.status, code=e.code, message=e.message
        ),
        st.sampled_from(errors),
        st.integers(0, 24),
    )

    def check(client: Any, script: Script) -> None:
        fault = script.fault
        assert fault is not None
        with pytest.raises(anthropic.APIStatusError) as raised:
            _read_stream(client)
        # The stream had started: the status stays 200, the type says what failed.
        assert raised.value.status_code == 200
        assert raised.value.type == raised.value.body["error"]["type"] == fault.code
        assert raised.value.body["request_id"].startswith("req_011C")
        assert raised.value.body["error"]["message"] == fault.message
        # Not streamed, the same failure is an HTTP error of its status.
        with pytest.raises(anthropic.APIStatusError) as whole:
            client.messages.create(**REQUEST)
        assert whole.value.status_code == fault.status
        assert whole.value.body["error"]["type"] == fault.code

    check_every_script(
        _sdk(),
        realistic_scripts(DIALECT, fault=faults, read_sizes=WHOLE_FRAMES),
        check,
        settings=RELAXED,
    )


# --- whole messages ------------------------------------------------------------------------------


def test_whole_message_agrees_with_every_realistic_script() -> None:
    def check(client: Any, script: Script) -> None:
        raw = client.messages.with_raw_response.create(**REQUEST)
        assert raw.headers["request-id"].startswith("req_011C")
        _check_message(raw.parse(), script)

    check_every_script(
        _sdk(),
        realistic_scripts(DIALECT, fault=st.none(), read_sizes=WHOLE_FRAMES),
        check,
        settings=RELAXED,
    )


# The SDK's error class for each documented status (its `_error_classes` table).
_SDK_ERRORS = {
    400: "BadRequestError",
    401: "AuthenticationError",
    403: "PermissionDeniedError",
    404: "NotFoundError",
    408: "RequestTimeoutError",
    409: "ConflictError",
    413: "ContentTooLargeError",
    422: "UnprocessableEntityError",
    429: "RateLimitError",
    500: "InternalServerError",
    502: "InternalServerError",
    503: "ServiceUnavailableError",
    504: "GatewayTimeoutError",
    529: "OverloadedError",
}


def test_documented_http_errors_reach_the_sdk_as_its_error_classes() -> None:
    assert set(_SDK_ERRORS) == set(DOCUMENTED_STATUSES)
    with _sdk() as (served, client):
        for status in DOCUMENTED_STATUSES:
            fault = Fault("status", status=status, retry_after=2 if status == 429 else None)
            served.serve(Script(fault=fault))
            for stream in (False, True):
                with pytest.raises(anthropic.APIStatusError) as raised:
                    client.messages.create(**REQUEST, stream=stream)
                error = raised.value
                assert type(error).__name__ == _SDK_ERRORS[status], (status, stream)
                assert error.status_code == status
                assert error.request_id is not None and error.request_id.startswith("req_011C")
                assert error.body["type"] == "error" and error.body["error"]["type"]
                if status == 429:
                    assert error.response.headers["retry-after"] == "2"
