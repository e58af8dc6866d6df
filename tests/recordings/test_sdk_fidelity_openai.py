"""The official `openai` SDK reads what the OpenAI-protocol dialects serve.

Wire-realistic scripts (`realistic_scripts`) are served by one loopback `FakeServer`
per test and read by the SDK's own APIs:

- Chat Completions (`openai-chat`, and `azure-openai` through `AzureOpenAI`, and
  `llama.cpp`): the raw `chat.completions.create(stream=True, stream_options=
  {"include_usage": True})` chunks, assembled here; the `chat.completions.stream()`
  helper's `get_final_completion()`; and the non-streaming `chat.completions.create()`.
- Responses (`openai-responses`): the raw `responses.create(stream=True)` events, the
  `responses.stream()` helper's `get_final_response()` (or, for an incomplete response,
  its `response.incomplete` event), and the non-streaming `responses.create()`.

What the SDK assembles must equal the script, mapped the way the dialect says it maps
it: text (or, for a Chat refusal, `refusal` text with finish `stop`), reasoning where the
protocol carries it, tool calls (ids, names, parsed arguments), usage and the finish
reason or terminal status. The SDK must not raise, and every chunk, event and response
must also validate strictly against the SDK's pydantic types (the SDK itself builds its
objects without validating; an invented finish reason is the one field let through, as
the realistic world draws reasons no provider has yet).

An in-stream error (`provider_error`) must be what the SDK knows: over Chat the error
chunk raises the SDK's `APIError`; over Responses a typed `ResponseFailedEvent` arrives
(the SDK does not raise on it, and `get_final_response()` then fails for want of
`response.completed`). Every documented HTTP error status reaches the SDK as its error
class for that status.

The SDK is a test-only dependency (the `test` extra); without it these tests skip.
"""

from __future__ import annotations

import contextlib
import functools
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from wire import ServedScript, check_every_script

from anyinfer.conformance.checker import expected_tool_calls
from anyinfer.conformance.strategies import (
    DOCUMENTED_STATUSES,
    KNOWN_FINISH_REASONS,
    realistic_scripts,
)
from anyinfer.fakeservers import Dialect, Fault, Script, ToolFragment, get_dialect
from anyinfer.fakeservers.dialects import OpenAIChatDialect
from anyinfer.fakeservers.dialects.openai_responses import _terminal

openai = pytest.importorskip("openai")
pydantic = pytest.importorskip("pydantic")

pytestmark = pytest.mark.loopback

MODEL = "fake-model"
MESSAGES = [{"role": "user", "content": "hi"}]
WHOLE_FRAMES = st.just(())
"""One network read per frame: read splits are the raw-stream tests' business."""
SPLIT_READS = st.one_of(
    st.just(()), st.lists(st.integers(2, 48), min_size=1, max_size=3).map(tuple)
)
"""Reads cut anywhere, multi-byte characters included (byte-by-byte reads of every body
would cost the CI run seconds and find nothing more in the SDK's decoder)."""
RELAXED = settings(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

CHAT_DIALECTS = ("openai-chat", "azure-openai", "llama.cpp")
RESPONSES = get_dialect("openai-responses")


# --- one server per test ---------------------------------------------------------------------


@contextlib.contextmanager
def _sdk(dialect: Dialect) -> Iterator[tuple[ServedScript, Any]]:
    served = ServedScript(dialect)
    with served.server as server:
        if dialect.name == "azure-openai":
            client = openai.AzureOpenAI(
                azure_endpoint=server.url,
                api_key="azure-fidelity",
                api_version="2024-10-21",
                max_retries=0,
                timeout=10.0,
            )
        else:
            client = openai.OpenAI(
                api_key="sk-fidelity", base_url=server.base_url, max_retries=0, timeout=10.0
            )
        try:
            yield served, client
        finally:
            client.close()


# --- strict validation against the SDK's types ------------------------------------------------


def _invented(script: Script) -> bool:
    return script.finish_reason is not None and script.finish_reason not in KNOWN_FINISH_REASONS


def _strict(model: Any, value: Any, script: Script) -> None:
    """`value` validates as `model`; only an invented finish reason may be off-type."""
    try:
        pydantic.TypeAdapter(model).validate_python(value)
    except pydantic.ValidationError as exc:
        bad = [
            e
            for e in exc.errors()
            if not (_invented(script) and e["loc"] and e["loc"][-1] in ("finish_reason", "reason"))
        ]
        assert not bad, f"not a valid {getattr(model, '__name__', model)}: {bad[:3]}"


@functools.cache
def _event_models() -> dict[str, Any]:
    """Each Responses stream event type's SDK model (the union's `type` discriminator)."""
    import typing

    from openai.types.responses import ResponseStreamEvent

    (union, *_) = typing.get_args(ResponseStreamEvent)
    models: dict[str, Any] = {}
    for model in typing.get_args(union):
        for kind in typing.get_args(model.model_fields["type"].annotation):
            models[kind] = model
    return models


def _strict_event(event: Any, script: Script) -> None:
    """One stream event validates as the SDK's model for its `type`."""
    models = _event_models()
    assert event.type in models, f"{event.type!r} is not an event type the SDK knows"
    _strict(models[event.type], event.to_dict(), script)


# --- Chat Completions: what the script says the SDK must assemble ----------------------------


def _chat_dialect(name: str) -> OpenAIChatDialect:
    dialect = get_dialect(name)
    assert isinstance(dialect, OpenAIChatDialect)
    return dialect


def _calls(script: Script) -> list[tuple[str, str, Any]]:
    calls = expected_tool_calls(script, range(len(script.pieces)))
    return [(c.id, c.name, c.arguments) for c in calls]


@dataclass(frozen=True)
class _Chat:
    """One chat response as the SDK assembled it."""

    content: str | None
    refusal: str | None
    reasoning: str
    calls: list[tuple[str, str, Any]]
    finish: str | None
    usage: dict[str, int | None] | None


def _usage_dict(usage: Any) -> dict[str, int | None] | None:
    if usage is None:
        return None
    prompt = usage.prompt_tokens_details
    completion = usage.completion_tokens_details
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.total_tokens,
        "cached_tokens": None if prompt is None else prompt.cached_tokens,
        "reasoning_tokens": None if completion is None else completion.reasoning_tokens,
    }


def _expected_chat(dialect: OpenAIChatDialect, script: Script) -> _Chat:
    refuses = dialect.refuses(script)
    usage = script.usage
    expected_usage: dict[str, int | None] | None = None
    placement = script.usage_placement if usage is not None else "none"
    if usage is not None and placement != "none":
        assert usage.input_tokens is not None and usage.output_tokens is not None
        expected_usage = {
            "prompt_tokens": usage.input_tokens,
            "completion_tokens": usage.output_tokens,
            "total_tokens": usage.input_tokens + usage.output_tokens,
            "cached_tokens": usage.cache_read_tokens,
            "reasoning_tokens": usage.reasoning_tokens,
        }
        if dialect.name == "llama.cpp":
            # llama.cpp reports no reasoning count, and without `include_usage` current
            # builds send no usage object (only `timings`).
            expected_usage["reasoning_tokens"] = None
            if placement == "split":
                expected_usage = None
    return _Chat(
        content=None if refuses else script.text or None,
        refusal=script.text if refuses else None,
        reasoning=script.reasoning,
        calls=_calls(script),
        finish="stop" if refuses else script.finish_reason,
        usage=expected_usage,
    )


def _assemble_chunks(chunks: Iterable[Any], script: Script) -> tuple[_Chat, list[Any]]:
    """Assemble raw `ChatCompletionChunk`s as an SDK user does; also return them."""
    from openai.types.chat import ChatCompletionChunk

    seen: list[Any] = []
    content: str | None = None
    refusal: str | None = None
    reasoning = ""
    slots: dict[int, dict[str, Any]] = {}
    finish: str | None = None
    usage = None
    for chunk in chunks:
        seen.append(chunk)
        if chunk.object != "":
            # Azure's prompt-filter chunk has an empty `object` (and `id`, `model`): the
            # SDK knows it (`_is_valid_chat_completion_chunk_weak`) and so do we.
            _strict(ChatCompletionChunk, chunk.to_dict(), script)
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            delta = choice.delta
            if delta.content is not None:
                content = (content or "") + delta.content
            if delta.refusal is not None:
                refusal = (refusal or "") + delta.refusal
            extra = delta.model_extra or {}
            reasoning += extra.get("reasoning_content") or ""
            for call in delta.tool_calls or ():
                slot = slots.setdefault(call.index, {"id": None, "name": None, "args": ""})
                slot["id"] = slot["id"] or call.id
                if call.function is not None:
                    slot["name"] = slot["name"] or call.function.name
                    slot["args"] += call.function.arguments or ""
            if choice.finish_reason is not None:
                finish = choice.finish_reason
    calls = [
        (s["id"], s["name"], json.loads(s["args"]) if s["args"] else {})
        for _, s in sorted(slots.items())
    ]
    got = _Chat(content or None, refusal or None, reasoning, calls, finish, _usage_dict(usage))
    return got, seen


def _message_chat(message: Any, finish: str | None, usage: Any) -> _Chat:
    extra = message.model_extra or {}
    calls = [
        (c.id, c.function.name, json.loads(c.function.arguments) if c.function.arguments else {})
        for c in message.tool_calls or ()
    ]
    return _Chat(
        message.content,
        message.refusal,
        extra.get("reasoning_content") or "",
        calls,
        finish,
        _usage_dict(usage),
    )


def _check_llama_timings(chunks: list[Any], script: Script) -> None:
    """llama.cpp's `timings` (on the last chunk before `[DONE]`) carry the counts."""
    usage = script.usage
    if usage is None:
        return
    timings = [c.model_extra["timings"] for c in chunks if "timings" in (c.model_extra or {})]
    assert len(timings) == 1, "llama.cpp sends `timings` once, on its last chunk"
    got = timings[0]
    assert got["predicted_n"] == usage.output_tokens
    cache = usage.cache_read_tokens
    if cache is not None and usage.input_tokens is not None and cache <= usage.input_tokens:
        assert got["cache_n"] == cache
        assert got["prompt_n"] + got["cache_n"] == usage.input_tokens


def _chat_ids(chunks: list[Any], dialect: OpenAIChatDialect) -> str:
    """Every chunk names one response; Azure's prompt-filter chunk names none."""
    ids = {c.id for c in chunks if c.object == "chat.completion.chunk"}
    assert len(ids) == 1, f"one response, one id; got {ids}"
    (chunk_id,) = ids
    assert chunk_id.startswith("chatcmpl-") and len(chunk_id) >= 38
    fingerprints = {c.system_fingerprint for c in chunks if c.object == "chat.completion.chunk"}
    assert len(fingerprints) == 1
    (fingerprint,) = fingerprints
    assert fingerprint is not None
    assert fingerprint.startswith("b" if dialect.name == "llama.cpp" else "fp_")
    return chunk_id


# --- Chat Completions: streaming -------------------------------------------------------------


@pytest.mark.parametrize("name", CHAT_DIALECTS)
def test_chat_raw_stream_assembles_every_realistic_script(name: str) -> None:
    dialect = _chat_dialect(name)
    owners: dict[str, Script] = {}

    def check(client: Any, script: Script) -> None:
        stream = _create_chat(client, stream=True)
        got, chunks = _assemble_chunks(stream, script)
        assert got == _expected_chat(dialect, script)
        if name == "llama.cpp":
            _check_llama_timings(chunks, script)
        # A response id belongs to one script: two scripts never share one.
        chunk_id = _chat_ids(chunks, dialect)
        base = replace(script, read_sizes=())
        assert owners.setdefault(chunk_id, base) == base

    check_every_script(
        _sdk(dialect),
        realistic_scripts(dialect, fault=st.none(), read_sizes=SPLIT_READS),
        check,
        settings=RELAXED,
    )


@pytest.mark.parametrize("name", CHAT_DIALECTS)
def test_chat_stream_helper_final_completion_agrees(name: str) -> None:
    dialect = _chat_dialect(name)

    def check(client: Any, script: Script) -> None:
        deltas: list[str] = []
        with client.chat.completions.stream(
            model=MODEL, messages=MESSAGES, stream_options={"include_usage": True}
        ) as stream:
            for event in stream:
                if event.type == "content.delta":
                    deltas.append(event.delta)
            try:
                final = stream.get_final_completion()
            except (openai.LengthFinishReasonError, openai.ContentFilterFinishReasonError) as e:
                # The helper's parser refuses these two finish reasons by design; the
                # completion it assembled rides on the error.
                assert script.finish_reason in ("length", "content_filter")
                final = e.completion
        (choice,) = final.choices
        got = _message_chat(choice.message, choice.finish_reason, final.usage)
        want = _expected_chat(dialect, script)
        assert got == want
        assert "".join(deltas) == (want.content or "")

    check_every_script(
        _sdk(dialect),
        realistic_scripts(dialect, fault=st.none(), read_sizes=WHOLE_FRAMES),
        check,
        settings=RELAXED,
    )


def test_chat_refusal_reaches_the_sdk_as_refusal_text() -> None:
    """A refusal (structured outputs) is `refusal` text with finish `stop`, streamed and
    whole; AnyInfer reads it back as `content_filter` (see `RefusalWatch`)."""
    from openai.types.chat import ChatCompletion

    dialect = _chat_dialect("openai-chat")
    refusals = (
        realistic_scripts(dialect, fault=st.none(), read_sizes=SPLIT_READS)
        .map(
            lambda s: replace(
                s,
                pieces=tuple(p for p in s.pieces if not isinstance(p, ToolFragment)),
                finish_reason="content_filter",
            )
        )
        .filter(lambda s: bool(s.text) and dialect.refuses(s))
    )

    def check(client: Any, script: Script) -> None:
        want = _expected_chat(dialect, script)
        assert (want.content, want.refusal, want.finish) == (None, script.text, "stop")
        stream = _create_chat(client, stream=True)
        got, _ = _assemble_chunks(stream, script)
        assert got == want
        completion = _create_chat(client, stream=False)
        _strict(ChatCompletion, completion.to_dict(), script)
        (choice,) = completion.choices
        assert _message_chat(choice.message, choice.finish_reason, completion.usage) == want

    check_every_script(_sdk(dialect), refusals, check, settings=RELAXED)


# --- Chat Completions: whole responses -------------------------------------------------------


@pytest.mark.parametrize("name", CHAT_DIALECTS)
def test_chat_whole_completion_agrees_with_every_realistic_script(name: str) -> None:
    from openai.types.chat import ChatCompletion

    dialect = _chat_dialect(name)

    def check(client: Any, script: Script) -> None:
        completion = _create_chat(client, stream=False)
        _strict(ChatCompletion, completion.to_dict(), script)
        assert completion.object == "chat.completion"
        assert completion.id.startswith("chatcmpl-")
        (choice,) = completion.choices
        got = _message_chat(choice.message, choice.finish_reason, completion.usage)
        want = _expected_chat(dialect, script)
        if name == "llama.cpp" and script.usage_placement == "trailing":
            # Not streamed, llama.cpp always sends its usage object.
            want = replace(want, usage=got.usage)
        assert got == want

    check_every_script(
        _sdk(dialect),
        realistic_scripts(dialect, fault=st.none(), read_sizes=WHOLE_FRAMES),
        check,
        settings=RELAXED,
    )


# --- Chat Completions: errors -------------------------------------------------------------


def _in_stream_faults(dialect: Dialect) -> st.SearchStrategy[Fault]:
    errors = dialect.profile.in_stream_errors
    assert errors, f"the {dialect.name} profile states its in-stream errors"
    return st.builds(
        lambda e, at: Fault(
            "provider_error", at=at, status=e.status, code=e.code, message=e.message
        ),
        st.sampled_from(errors),
        st.integers(0, 24),
    )


@pytest.mark.parametrize("name", ["openai-chat", "llama.cpp"])
def test_chat_in_stream_error_raises_the_sdk_api_error(name: str) -> None:
    dialect = _chat_dialect(name)

    def check(client: Any, script: Script) -> None:
        fault = script.fault
        assert fault is not None
        with pytest.raises(openai.APIError) as raised:
            for _ in _create_chat(client, stream=True):
                pass
        error = raised.value
        assert not isinstance(error, openai.APIStatusError), "the stream had started"
        assert error.message == fault.message
        assert isinstance(error.body, dict)
        if name == "llama.cpp":
            assert error.body["code"] == fault.status
        else:
            assert error.body["type"] == fault.code
        # The stream helper raises the same.
        with (
            pytest.raises(openai.APIError),
            client.chat.completions.stream(model=MODEL, messages=MESSAGES) as helper,
        ):
            helper.until_done()
        # Not streamed, the same failure is an HTTP error of its status.
        with pytest.raises(openai.APIStatusError) as whole:
            _create_chat(client, stream=False)
        assert whole.value.status_code == fault.status

    check_every_script(
        _sdk(dialect),
        realistic_scripts(dialect, fault=_in_stream_faults(dialect), read_sizes=WHOLE_FRAMES),
        check,
        settings=RELAXED,
    )


# The SDK's error class for each documented status (`OpenAI._make_status_error`).
_SDK_ERRORS = {
    400: "BadRequestError",
    401: "AuthenticationError",
    403: "PermissionDeniedError",
    404: "NotFoundError",
    408: "APIStatusError",
    409: "ConflictError",
    413: "APIStatusError",
    422: "UnprocessableEntityError",
    429: "RateLimitError",
    500: "InternalServerError",
    502: "InternalServerError",
    503: "InternalServerError",
    504: "InternalServerError",
    529: "InternalServerError",
}


def _create_chat(client: Any, stream: bool) -> Any:
    """One Chat Completions call the way the SDK's users make it (asking for usage when
    streaming); the completion or the chunk stream."""
    kwargs: dict[str, Any] = {"model": MODEL, "messages": MESSAGES}
    if stream:
        kwargs.update(stream=True, stream_options={"include_usage": True})
    return client.chat.completions.create(**kwargs)


def _create_response(client: Any, stream: bool) -> None:
    client.responses.create(model=MODEL, input="hi", stream=stream)


@pytest.mark.parametrize(
    ("name", "create"),
    [
        ("openai-chat", _create_chat),
        ("azure-openai", _create_chat),
        ("llama.cpp", _create_chat),
        ("openai-responses", _create_response),
    ],
)
def test_documented_http_errors_reach_the_sdk_as_its_error_classes(
    name: str, create: Callable[[Any, bool], None]
) -> None:
    assert set(_SDK_ERRORS) == set(DOCUMENTED_STATUSES)
    with _sdk(get_dialect(name)) as (served, client):
        for status in DOCUMENTED_STATUSES:
            fault = Fault("status", status=status, retry_after=2 if status == 429 else None)
            served.serve(Script(fault=fault))
            for stream in (False, True):
                with pytest.raises(openai.APIStatusError) as raised:
                    create(client, stream)
                error = raised.value
                assert type(error).__name__ == _SDK_ERRORS[status], (status, stream)
                assert error.status_code == status
                assert isinstance(error.body, dict) and error.body.get("message")
                if status == 429:
                    assert error.response.headers["retry-after"] == "2"


# --- Responses: what the script says the SDK must assemble -----------------------------------


@dataclass(frozen=True)
class _Reply:
    """One Responses response as the SDK assembled it."""

    status: str
    incomplete: str | None
    text: str
    reasoning: str
    calls: list[tuple[Any, Any, Any]]
    usage: dict[str, int | None] | None


def _responses_usage(usage: Any) -> dict[str, int | None] | None:
    if usage is None:
        return None
    return {
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "total_tokens": usage.total_tokens,
        "cached_tokens": usage.input_tokens_details.cached_tokens,
        "cache_write_tokens": usage.input_tokens_details.cache_write_tokens,
        "reasoning_tokens": usage.output_tokens_details.reasoning_tokens,
    }


def _expected_reply(script: Script) -> _Reply:
    has_calls = any(isinstance(p, ToolFragment) for p in script.pieces)
    status, reason = _terminal(script.finish_reason, has_calls)
    usage = script.usage
    want_usage = None
    if usage is not None and script.usage_placement != "none":
        assert usage.input_tokens is not None and usage.output_tokens is not None
        want_usage = {
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
            "total_tokens": usage.input_tokens + usage.output_tokens,
            "cached_tokens": usage.cache_read_tokens,
            "cache_write_tokens": usage.cache_write_tokens,
            "reasoning_tokens": usage.reasoning_tokens,
        }
    calls: list[tuple[Any, Any, Any]] = list(_calls(script))
    return _Reply(status, reason, script.text, script.reasoning, calls, want_usage)


def _reply_of(response: Any) -> _Reply:
    """A final `Response` as a `_Reply`."""
    text = "".join(
        part.text
        for item in response.output
        if item.type == "message"
        for part in item.content
        if part.type == "output_text"
    )
    reasoning = "".join(
        part.text for item in response.output if item.type == "reasoning" for part in item.summary
    )
    calls = [
        (item.call_id, item.name, json.loads(item.arguments) if item.arguments else {})
        for item in response.output
        if item.type == "function_call"
    ]
    details = response.incomplete_details
    return _Reply(
        response.status,
        None if details is None else details.reason,
        text,
        reasoning,
        calls,
        _responses_usage(response.usage),
    )


def _check_event_grammar(events: list[Any]) -> None:
    """Numbered from 0, one response id, and one output item open at a time."""
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert events[0].type == "response.created" and events[1].type == "response.in_progress"
    ids = {e.response.id for e in events if hasattr(e, "response")}
    assert len(ids) == 1 and next(iter(ids)).startswith("resp_")
    open_: list[int] = []
    indices: list[int] = []
    for event in events:
        if event.type == "response.output_item.added":
            assert not open_, f"item {event.output_index} opened while {open_} is open"
            open_.append(event.output_index)
            indices.append(event.output_index)
            if event.item.type == "function_call":
                assert event.item.arguments == "", "a call opens with empty arguments"
                assert event.item.call_id and event.item.name
        elif event.type == "response.output_item.done":
            assert open_ == [event.output_index]
            open_.clear()
        elif hasattr(event, "output_index"):
            assert open_ == [event.output_index], f"{event.type} outside its item"
    assert not open_ and indices == list(range(len(indices)))


# --- Responses: streaming ----------------------------------------------------------------------


def test_responses_raw_stream_events_are_real_and_agree() -> None:
    owners: dict[str, Script] = {}

    def check(client: Any, script: Script) -> None:
        events = list(client.responses.create(model=MODEL, input="hi", stream=True))
        for event in events:
            _strict_event(event, script)
        _check_event_grammar(events)
        terminal = events[-1]
        assert terminal.type in ("response.completed", "response.incomplete")
        got = _reply_of(terminal.response)
        want = _expected_reply(script)
        assert got == want
        text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
        assert text == script.text
        base = replace(script, read_sizes=())
        assert owners.setdefault(terminal.response.id, base) == base

    check_every_script(
        _sdk(RESPONSES),
        realistic_scripts(RESPONSES, fault=st.none(), read_sizes=SPLIT_READS),
        check,
        settings=RELAXED,
    )


def test_responses_stream_helper_final_response_agrees() -> None:
    def check(client: Any, script: Script) -> None:
        want = _expected_reply(script)
        deltas: list[str] = []
        with client.responses.stream(model=MODEL, input="hi") as stream:
            events = []
            for event in stream:
                events.append(event)
                if event.type == "response.output_text.delta":
                    deltas.append(event.delta)
            if want.status == "completed":
                final = stream.get_final_response()
                assert final.output_text == script.text
            else:
                # No `response.completed`: the helper's final response is not
                # there, the incomplete event carries the response.
                assert events[-1].type == "response.incomplete"
                final = events[-1].response
        assert _reply_of(final) == want
        assert "".join(deltas) == script.text

    check_every_script(
        _sdk(RESPONSES),
        realistic_scripts(RESPONSES, fault=st.none(), read_sizes=WHOLE_FRAMES),
        check,
        settings=RELAXED,
    )


# --- Responses: whole responses and errors ---------------------------------------------------


def test_responses_whole_response_agrees_with_every_realistic_script() -> None:
    from openai.types.responses import Response

    def check(client: Any, script: Script) -> None:
        response = client.responses.create(model=MODEL, input="hi")
        _strict(Response, response.to_dict(), script)
        assert _reply_of(response) == _expected_reply(script)

    check_every_script(
        _sdk(RESPONSES),
        realistic_scripts(RESPONSES, fault=st.none(), read_sizes=WHOLE_FRAMES),
        check,
        settings=RELAXED,
    )


def test_responses_in_stream_error_is_the_sdk_failed_event() -> None:
    from openai.types.responses import ResponseFailedEvent

    def check(client: Any, script: Script) -> None:
        fault = script.fault
        assert fault is not None
        events = list(client.responses.create(model=MODEL, input="hi", stream=True))
        for event in events:
            _strict_event(event, script)
        assert [e.sequence_number for e in events] == list(range(len(events)))
        failed = events[-1]
        assert isinstance(failed, ResponseFailedEvent)
        assert failed.response.status == "failed"
        assert failed.response.error is not None
        assert failed.response.error.code == fault.code
        assert failed.response.error.message == fault.message
        assert {e.response.id for e in events if hasattr(e, "response")} == {failed.response.id}
        # The helper reads the stream to its end and has no completed response.
        with client.responses.stream(model=MODEL, input="hi") as stream:
            kinds = [e.type for e in stream]
            with pytest.raises(RuntimeError, match=r"response\.completed"):
                stream.get_final_response()
        assert kinds[-1] == "response.failed"
        # Not streamed, the same failure is an HTTP error of its status.
        with pytest.raises(openai.APIStatusError) as whole:
            client.responses.create(model=MODEL, input="hi")
        assert whole.value.status_code == fault.status

    check_every_script(
        _sdk(RESPONSES),
        realistic_scripts(RESPONSES, fault=_in_stream_faults(RESPONSES), read_sizes=WHOLE_FRAMES),
        check,
        settings=RELAXED,
    )
