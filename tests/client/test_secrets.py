"""Credentials: the key-validation rule and where registered secrets are masked.

Every test talks to a real loopback server (`fakeservers.FakeServer`, or a small
`http.server` when the response must carry a header the fake dialects do not send).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from urllib.parse import quote

import pytest
from helpers import NO_RETRY, QuietHandler, http_server

import anyinfer as ai
from anyinfer._client.credentials import check_secret
from anyinfer._redact import MASK, redact, redact_chunks
from anyinfer.fakeservers import FakeServer, Script, Text


def _route() -> ai.Route:
    return ai.Route("openai:m", retry=NO_RETRY)


def _attempt_error(exc: ai.AllTargetsFailedError) -> ai.ErrorInfo:
    error = exc.attempts[-1].error
    assert error is not None
    return error


def _all_text(exc: BaseException) -> str:
    """Everything a user or an observer may see of a failure."""
    bits = [str(exc), repr(exc)]
    if isinstance(exc, ai.AnyInferError):
        bits += [repr(exc.to_info())] + [repr(a) for a in exc.attempts]
    return "\n".join(bits)


# --- the key-validation rule -------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "problem"),
    [
        ("sk-newline-key-0123456789\n", "ends with a newline"),
        ("sk-crlf-key-0123456789\r\n", "ends with a newline"),
        ("sk-nonascii-k\u00e9y-0123456789", "non-ASCII"),
    ],
)
def test_an_unsendable_key_is_a_config_error_before_anything_is_sent(
    key: str, problem: str
) -> None:
    # A literal key is refused where it is passed: when the client is built.
    with FakeServer("openai-chat", [Script(pieces=(Text("x"),))]) as srv:
        settings = ai.ProviderSettings("openai", api_key=key, base_url=srv.base_url)
        with pytest.raises(ai.ConfigError) as caught:
            ai.Client([settings])
        with pytest.raises(ai.ConfigError) as caught_async:
            ai.AsyncClient([settings])
        assert srv.served == 0
    for exc in (caught.value, caught_async.value):
        assert problem in str(exc) and "'openai'" in str(exc) and "api_key" in str(exc)
        text = _all_text(exc)
        assert key.strip() not in text and key.strip()[:14] not in text


@pytest.mark.parametrize(
    ("key", "problem"),
    [
        ("sk-newline-key-0123456789\n", "ends with a newline"),
        ("sk-nonascii-k\u00e9y-0123456789", "non-ASCII"),
    ],
)
def test_an_unsendable_referenced_key_fails_its_attempt_before_anything_is_sent(
    key: str, problem: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A reference is resolved when the instance is first used: the attempt fails typed.
    monkeypatch.setenv("SECRETS_TEST_KEY", key)
    with FakeServer("openai-chat", [Script(pieces=(Text("x"),))]) as srv:
        settings = ai.ProviderSettings(
            "openai", api_key="env://SECRETS_TEST_KEY", base_url=srv.base_url
        )
        with ai.Client([settings]) as client:
            with pytest.raises(ai.AllTargetsFailedError) as caught:
                client.generate("hi", route=_route())
            with pytest.raises(ai.ConfigError) as direct:
                client.models("openai")
        assert srv.served == 0
    info = _attempt_error(caught.value)
    assert info.type_name == "ConfigError" and info.retryable is False
    assert problem in info.detail and "'openai'" in info.detail and "api_key" in info.detail
    assert problem in str(direct.value)
    for exc in (caught.value, direct.value):
        text = _all_text(exc)
        assert key.strip() not in text and key.strip()[:14] not in text


def test_a_key_from_an_environment_variable_is_named_by_that_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    key = "sk-env-newline-key-0123456789\n"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    with FakeServer("openai-chat", [Script(pieces=(Text("x"),))]) as srv:
        with ai.Client([ai.ProviderSettings("openai", base_url=srv.base_url)]) as client:
            with pytest.raises(ai.ConfigError) as caught:
                client.models("openai")
        assert srv.served == 0
    assert "environment variable OPENAI_API_KEY" in str(caught.value)
    assert "newline" in str(caught.value) and key.strip() not in _all_text(caught.value)


def test_an_env_reference_is_named_by_its_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    key = "sk-ref-key-0123456789 "
    monkeypatch.setenv("SECRETS_TEST_KEY", key)
    with FakeServer("openai-chat", [Script(pieces=(Text("x"),))]) as srv:
        settings = ai.ProviderSettings(
            "openai", api_key="env://SECRETS_TEST_KEY", base_url=srv.base_url
        )
        with ai.Client([settings]) as client, pytest.raises(ai.ConfigError) as caught:
            client.models("openai")
        assert srv.served == 0
    message = str(caught.value)
    assert "env://SECRETS_TEST_KEY" in message and "whitespace" in message
    assert key.strip() not in message


@pytest.mark.parametrize(
    ("key", "problem"),
    [
        (" sk-leading-space-0123456789", "starts or ends with whitespace"),
        ("sk-inner\nnewline-0123456789", "contains a newline"),
        ("sk-inner space-0123456789", "contains whitespace"),
        ("sk-inner\ttab-0123456789", "contains whitespace"),
        ("sk-bell\x07-0123456789", "control character"),
    ],
)
def test_check_secret_names_the_problem_never_the_key(key: str, problem: str) -> None:
    with pytest.raises(ai.ConfigError) as caught:
        check_secret(key, source="api_key", provider="work")
    message = str(caught.value)
    assert problem in message and "'work'" in message
    assert "sk-" not in message  # neither the key nor a piece of it


def test_a_clean_key_passes_unchanged() -> None:
    key = "sk-proj-Abc_123-xyz.456~+/="
    assert check_secret(key, source="api_key") is key


def test_a_sensitive_header_is_checked_too() -> None:
    value = "Bearer sk-header-newline-0123456789\n"
    with FakeServer("openai-chat", [Script(pieces=(Text("x"),))]) as srv:
        settings = ai.ProviderSettings(
            "openai", base_url=srv.base_url, headers={"Authorization": value}
        )
        with ai.Client([settings]) as client, pytest.raises(ai.ConfigError) as caught:
            client.models("openai")
        assert srv.served == 0
    assert "headers['Authorization']" in str(caught.value) and "newline" in str(caught.value)
    assert "sk-header-newline" not in _all_text(caught.value)


# --- escaped forms -------------------------------------------------------------------


def test_escaped_forms_of_a_registered_key_are_masked() -> None:
    key = "sk-esc/aped+key=0123456789\n"
    ai.register_secret(key)
    forms = [
        f"Illegal header value {('Bearer ' + key).encode()!r}",  # h11's message
        repr(f"LocalProtocolError({('Bearer ' + key).encode()!r})"),  # and its repr
        json.dumps({"authorization": "Bearer " + key}),
        repr(key),
        "https://example.test/v1?key=" + quote(key, safe=""),
        "https://example.test/v1?key=" + quote(key.strip(), safe=""),
    ]
    for text in forms:
        masked = redact(text)
        assert MASK in masked, text
        assert "sk-esc" not in masked and "0123456789" not in masked, masked


def test_escaped_forms_of_a_non_ascii_key_are_masked() -> None:
    key = "sk-\u00fcnicode-key-0123456789"
    ai.register_secret(key)
    for text in (json.dumps(key), repr(key.encode()), quote(key)):
        assert "0123456789" not in redact(text), text


# --- where echoed secrets are masked -------------------------------------------------


def test_repr_of_a_generation_masks_a_key_the_model_echoed() -> None:
    key = "sk-echo-repr-key-0123456789"
    script = Script(pieces=(Text(f"your key is {key}"),))
    with FakeServer("openai-chat", [script]) as srv:
        settings = ai.ProviderSettings("openai", api_key=key, base_url=srv.base_url)
        with ai.Client([settings]) as client:
            result = client.generate("hi", route=_route())
    assert result.text == f"your key is {key}"  # the field keeps what the model said
    assert key not in repr(result) and key not in str(result)
    assert f"your key is {MASK}" in repr(result)


def test_a_key_split_across_two_chunks_is_masked_in_raw() -> None:
    key = "sk-split-raw-key-0123456789"
    script = Script(pieces=(Text("key: " + key[:9]), Text(key[9:] + " end")))
    with FakeServer("openai-chat", [script]) as srv:
        settings = ai.ProviderSettings("openai", api_key=key, base_url=srv.base_url)
        with ai.Client([settings], retain_raw=True) as client:
            with client.stream("hi", route=_route()) as stream:
                list(stream)
            result = stream.result
    assert isinstance(result.raw, list) and len(result.raw) >= 2
    contents = "".join(
        choice.get("delta", {}).get("content") or ""
        for chunk in result.raw
        for choice in chunk.get("choices", [])
    )
    assert contents == f"key: {MASK} end"
    assert key[9:] not in json.dumps(result.raw)


def test_redact_chunks_leaves_unrelated_paths_and_the_input_alone() -> None:
    key = "sk-chunks-unit-key-0123456789"
    ai.register_secret(key)
    chunks = [{"id": "sk-chunks", "t": "a sk-chunks"}, {"id": "-unit-key", "t": "-unit-key-"}]
    chunks.append({"id": "x", "t": "0123456789 b"})
    out = redact_chunks(chunks)
    assert [c["t"] for c in out] == [f"a {MASK}", "", " b"]
    assert chunks[0]["t"] == "a sk-chunks"  # not modified in place
    # The ids join to a different text: only the path that spells the key is touched.
    assert [c["id"] for c in out] == ["sk-chunks", "-unit-key", "x"]


@pytest.fixture
def echo_header_server() -> Iterator[tuple[str, list[str]]]:
    """An OpenAI-style endpoint that echoes the request's key in a response header."""
    seen: list[str] = []

    class Handler(QuietHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["content-length"]))
            key = self.headers.get("authorization", "").removeprefix("Bearer ")
            seen.append(key)
            body = json.dumps(
                {
                    "id": "c1",
                    "object": "chat.completion",
                    "model": "m",
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": "ok"},
                            "finish_reason": "stop",
                        }
                    ],
                }
            ).encode()
            self.reply(200, body, "application/json", x_echo_key=key)

    with http_server(Handler) as url:
        yield f"{url}/v1", seen


def test_httpcore_debug_logs_mask_an_echoed_header(
    echo_header_server: tuple[str, list[str]], caplog: pytest.LogCaptureFixture
) -> None:
    url, seen = echo_header_server
    key = "sk-log-echo-key-0123456789"
    caplog.set_level(logging.DEBUG, logger="httpcore")
    caplog.set_level(logging.DEBUG, logger="httpx")
    settings = ai.ProviderSettings("openai", api_key=key, base_url=url)
    with ai.Client([settings]) as client:
        assert client.generate("hi", route=_route()).text == "ok"
    assert seen == [key]  # the key was sent, and echoed back
    headers = [r for r in caplog.records if "receive_response_headers.complete" in r.getMessage()]
    assert headers, "httpcore logged no response headers"
    assert all(MASK in r.getMessage() for r in headers)
    assert key not in caplog.text


def test_a_key_passed_only_as_a_header_is_registered(
    echo_header_server: tuple[str, list[str]],
) -> None:
    url, seen = echo_header_server
    key = "sk-header-only-key-0123456789"
    settings = ai.ProviderSettings(
        "openai", base_url=url, headers={"Authorization": f"Bearer {key}"}
    )
    with ai.Client([settings]) as client:
        client.generate("hi", route=_route())
    assert seen == [key]
    assert key not in str(ai.ProviderError(f"upstream said {key}"))
    assert key not in redact(f"Bearer {key}") and key not in redact(key)


def test_a_credential_in_provider_options_is_registered() -> None:
    token = "opt-token-value-0123456789"
    with FakeServer("openai-chat", [Script(pieces=(Text("x"),))]) as srv:
        settings = ai.ProviderSettings(
            "openai",
            api_key="sk-options-test-0123456789",
            base_url=srv.base_url,
            options={"headers": {"x-api-key": "opt-header-value-0123456789"}, "token": token},
        )
        with ai.Client([settings]) as client:
            client.generate("hi", route=_route())
    assert redact(f"{token} opt-header-value-0123456789") == f"{MASK} {MASK}"


def test_a_refused_key_moves_the_route_to_its_next_target(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SECRETS_BAD_KEY", "sk-bad-key-0123456789\n")
    with FakeServer("openai-chat", [Script(pieces=(Text("fallback ok"),))]) as srv:
        bad = ai.ProviderSettings("openai", api_key="env://SECRETS_BAD_KEY", base_url=srv.base_url)
        good = ai.ProviderSettings(
            "openai", alias="backup", api_key="sk-good-key-0123456789", base_url=srv.base_url
        )
        route = ai.Route(["openai:m", "backup:m"], retry=NO_RETRY)
        with ai.Client([bad, good]) as client:
            result = client.generate("hi", route=route)
        assert srv.served == 1
    assert result.text == "fallback ok"
    trail = [(a.outcome, a.error.type_name if a.error else None) for a in result.attempts]
    assert trail == [("failed", "ConfigError"), ("ok", None)]
