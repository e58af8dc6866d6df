"""The AWS Bedrock Converse adapter and its `bedrock-converse` dialect.

Everything goes through the real client, the core and the adapter, against
`fakeservers.FakeTransport` or an `httpx.MockTransport` serving hand-built event-stream
frames (`encode_message`, the dialect's own encoder). SigV4 signatures are recomputed
here from the AWS Signature Version 4 specification with `hmac`/`hashlib` (not with
botocore), from a fixed credential and a fixed clock. The AWS environment is emptied
for every test (no profile, no config files, no instance metadata), so nothing reaches
the network and the developer's own credentials never leak in.
"""

from __future__ import annotations

import asyncio
import datetime
import hashlib
import hmac
import json
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from helpers import NO_RETRY

import anyinfer as ai
import anyinfer.fakeservers as fs
from anyinfer._providers.bedrock import BedrockAdapter, EventStreamFramer
from anyinfer._request import GenerationRequest
from anyinfer._stream.parts import END, FinishPart, TextPart
from anyinfer.fakeservers import Fault, Reasoning, Script, ScriptUsage, Text, ToolFragment
from anyinfer.fakeservers.dialects.bedrock_converse import BedrockConverseDialect, encode_message

DIALECT = BedrockConverseDialect()
MODEL = "us.amazon.nova-micro-v1:0"
CLAUDE = "us.anthropic.claude-sonnet-4-20250514-v1:0"
KEY_ID = "AKIDEXAMPLE"
SECRET = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
TOKEN = "session-token-example"
NOW = datetime.datetime(2025, 1, 2, 3, 4, 5)

_AWS_ENV = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_SECURITY_TOKEN",
    "AWS_PROFILE",
    "AWS_DEFAULT_PROFILE",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_BEARER_TOKEN_BEDROCK",
    "ANYINFER_BEDROCK_API_KEY",
    "ANYINFER_BEDROCK_BASE_URL",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_ROLE_ARN",
)


@pytest.fixture(autouse=True)
def empty_aws_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in _AWS_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def env_credentials(monkeypatch: pytest.MonkeyPatch, *, token: str | None = TOKEN) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", KEY_ID)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    if token is not None:
        monkeypatch.setenv("AWS_SESSION_TOKEN", token)
    monkeypatch.setenv("AWS_REGION", "us-east-1")


def route(model: str = MODEL) -> ai.Route:
    return ai.Route(f"bedrock:{model}", retry=NO_RETRY)


def run_generate(settings: ai.ProviderSettings, messages: Any = "hi", **kw: Any) -> Any:
    async def go() -> Any:
        async with ai.AsyncClient([settings]) as client:
            return await client.generate(messages, route=kw.pop("route", route()), **kw)

    return asyncio.run(go())


def run_stream(
    settings: ai.ProviderSettings, messages: Any = "hi", **kw: Any
) -> tuple[list[ai.StreamEvent], ai.Generation | None, BaseException | None]:
    events: list[ai.StreamEvent] = []

    async def go() -> tuple[ai.Generation | None, BaseException | None]:
        async with ai.AsyncClient([settings]) as client:
            try:
                async with client.stream(messages, route=kw.pop("route", route()), **kw) as st:
                    async for ev in st:
                        events.append(ev)
                return st.result, None
            except ai.AnyInferError as exc:
                return None, exc

    result, error = asyncio.run(go())
    return events, result, error


# --- hand-built event streams --------------------------------------------------------------


def event(event_type: str, payload: dict[str, Any]) -> bytes:
    headers = (
        (":event-type", event_type),
        (":content-type", "application/json"),
        (":message-type", "event"),
    )
    return encode_message(headers, json.dumps(payload).encode())


def exception(kind: str, message: str) -> bytes:
    headers = (
        (":exception-type", kind),
        (":content-type", "application/json"),
        (":message-type", "exception"),
    )
    return encode_message(headers, json.dumps({"message": message}).encode())


def text_stream(*texts: str, usage: dict[str, int] | None = None) -> list[bytes]:
    frames = [event("messageStart", {"p": "abc", "role": "assistant"})]
    for text in texts:
        frames.append(event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": text}}))
    frames.append(event("contentBlockStop", {"contentBlockIndex": 0}))
    frames.append(event("messageStop", {"stopReason": "end_turn"}))
    meta: dict[str, Any] = {"metrics": {"latencyMs": 321}}
    meta["usage"] = usage or {"inputTokens": 5, "outputTokens": 7, "totalTokens": 12}
    frames.append(event("metadata", meta))
    return frames


class _Reads(httpx.AsyncByteStream):
    def __init__(self, reads: Sequence[bytes]) -> None:
        self.reads = list(reads)

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for read in self.reads:
            yield read


def serving(
    reads: Sequence[bytes] | Callable[[httpx.Request], httpx.Response],
    seen: list[httpx.Request] | None = None,
    *,
    status: int = 200,
    headers: Sequence[tuple[str, str]] = (("content-type", "application/vnd.amazon.eventstream"),),
) -> httpx.MockTransport:
    def handle(request: httpx.Request) -> httpx.Response:
        if seen is not None:
            seen.append(request)
        if callable(reads):
            return reads(request)
        return httpx.Response(status, headers=list(headers), stream=_Reads(reads))

    return httpx.MockTransport(handle)


def bearer(transport: Any, **kw: Any) -> ai.ProviderSettings:
    options = {"region": "us-east-1", **kw.pop("options", {})}
    return ai.ProviderSettings(
        "bedrock", api_key="bedrock-api-key-test", transport=transport, options=options, **kw
    )


WHOLE = {
    "metrics": {"latencyMs": 100},
    "output": {"message": {"content": [{"text": "Hello!"}], "role": "assistant"}},
    "stopReason": "end_turn",
    "usage": {"inputTokens": 3, "outputTokens": 2, "totalTokens": 5},
}


def whole_reply(request: httpx.Request) -> httpx.Response:
    return httpx.Response(200, json=WHOLE)


# --- SigV4 ---------------------------------------------------------------------------------


def _hmac(key: bytes, msg: str) -> bytes:
    return hmac.new(key, msg.encode(), hashlib.sha256).digest()


def expected_authorization(request: httpx.Request, *, region: str, token: str | None) -> str:
    """The SigV4 `Authorization` header, computed from the specification."""
    amz_date = request.headers["x-amz-date"]
    day = amz_date[:8]
    # Canonical URI: every path segment URI-encoded once more (all services but S3).
    canonical_uri = "/".join(
        quote(seg, safe="-_.~") for seg in request.url.raw_path.decode().split("/")
    )
    headers = {
        "content-type": request.headers["content-type"],
        "host": request.url.netloc.decode(),
        "x-amz-date": amz_date,
    }
    if token is not None:
        headers["x-amz-security-token"] = token
    signed = ";".join(sorted(headers))
    canonical = "\n".join(
        [
            request.method,
            canonical_uri,
            "",
            "".join(f"{k}:{headers[k]}\n" for k in sorted(headers)),
            signed,
            hashlib.sha256(request.content).hexdigest(),
        ]
    )
    scope = f"{day}/{region}/bedrock/aws4_request"
    to_sign = "\n".join(
        ["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest()]
    )
    key = _hmac(f"AWS4{SECRET}".encode(), day)
    for part in (region, "bedrock", "aws4_request"):
        key = _hmac(key, part)
    signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    return (
        f"AWS4-HMAC-SHA256 Credential={KEY_ID}/{scope}, "
        f"SignedHeaders={signed}, Signature={signature}"
    )


@pytest.fixture
def fixed_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    import botocore.auth

    monkeypatch.setattr(botocore.auth, "get_current_datetime", lambda *a, **k: NOW)


@pytest.mark.usefixtures("fixed_clock")
@pytest.mark.parametrize("token", [TOKEN, None], ids=["session-token", "long-term-key"])
def test_sigv4_signature_is_the_one_the_specification_gives(
    monkeypatch: pytest.MonkeyPatch, token: str | None
) -> None:
    env_credentials(monkeypatch, token=token)
    seen: list[httpx.Request] = []
    settings = ai.ProviderSettings("bedrock", transport=serving(whole_reply, seen))
    result = run_generate(settings, "What is the capital of France?")
    assert result.text == "Hello!"
    (request,) = seen
    assert request.url.host == "bedrock-runtime.us-east-1.amazonaws.com"
    assert request.url.raw_path == b"/model/us.amazon.nova-micro-v1%3A0/converse"
    assert request.headers["x-amz-date"] == "20250102T030405Z"
    if token is None:
        assert "x-amz-security-token" not in request.headers
    else:
        assert request.headers["x-amz-security-token"] == token
    assert request.headers["authorization"] == expected_authorization(
        request, region="us-east-1", token=token
    )
    # A signature over other bytes would not verify: the check is not vacuous.
    tampered = httpx.Request(
        request.method, request.url, headers=request.headers, content=request.content + b" "
    )
    assert request.headers["authorization"] != expected_authorization(
        tampered, region="us-east-1", token=token
    )


@pytest.mark.usefixtures("fixed_clock")
def test_streamed_requests_are_signed_too_and_in_the_configured_region(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    env_credentials(monkeypatch)
    seen: list[httpx.Request] = []
    settings = ai.ProviderSettings(
        "bedrock", transport=serving(text_stream("Hi"), seen), options={"region": "eu-west-3"}
    )
    _, result, error = run_stream(settings)
    assert error is None and result is not None and result.text == "Hi"
    (request,) = seen
    assert request.url.host == "bedrock-runtime.eu-west-3.amazonaws.com"
    assert request.url.raw_path.endswith(b"/converse-stream")
    assert request.headers["authorization"] == expected_authorization(
        request, region="eu-west-3", token=TOKEN
    )


def test_the_credential_chain_reads_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    env_credentials(monkeypatch)
    seen: list[httpx.Request] = []
    run_generate(ai.ProviderSettings("bedrock", transport=serving(whole_reply, seen)))
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDOTHER")
    run_generate(ai.ProviderSettings("bedrock", transport=serving(whole_reply, seen)))
    first, second = (r.headers["authorization"] for r in seen)
    assert f"Credential={KEY_ID}/" in first
    assert "Credential=AKIDOTHER/" in second


def test_the_credential_chain_reads_a_named_profile(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    credentials = tmp_path / "credentials"
    credentials.write_text(
        "[work]\naws_access_key_id = AKIDPROFILE\naws_secret_access_key = s3cret\n"
    )
    config = tmp_path / "config"
    config.write_text("[profile work]\nregion = ap-south-1\n")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(credentials))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    seen: list[httpx.Request] = []
    settings = ai.ProviderSettings(
        "bedrock", transport=serving(whole_reply, seen), options={"aws_profile": "work"}
    )
    run_generate(settings)
    (request,) = seen
    assert request.url.host == "bedrock-runtime.ap-south-1.amazonaws.com"  # the profile's region
    assert "Credential=AKIDPROFILE/" in request.headers["authorization"]
    assert "/ap-south-1/bedrock/aws4_request" in request.headers["authorization"]


def test_no_credentials_is_a_config_error_naming_what_to_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    seen: list[httpx.Request] = []
    with pytest.raises(ai.AnyInferError) as info:
        run_generate(ai.ProviderSettings("bedrock", transport=serving(whole_reply, seen)))
    assert "AWS_ACCESS_KEY_ID" in str(info.value) and "AWS_BEARER_TOKEN_BEDROCK" in str(info.value)
    assert seen == []  # nothing was sent unsigned


def test_a_bedrock_api_key_is_a_bearer_token_and_nothing_is_signed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    env_credentials(monkeypatch)  # present, but the key wins
    monkeypatch.setenv("AWS_BEARER_TOKEN_BEDROCK", "bedrock-key-from-env")
    seen: list[httpx.Request] = []
    run_generate(ai.ProviderSettings("bedrock", transport=serving(whole_reply, seen)))
    (request,) = seen
    assert request.headers["authorization"] == "Bearer bedrock-key-from-env"
    assert "x-amz-date" not in request.headers


def test_no_region_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    env_credentials(monkeypatch)
    monkeypatch.delenv("AWS_REGION")
    with pytest.raises(ai.AllTargetsFailedError) as info:
        run_generate(ai.ProviderSettings("bedrock", transport=serving(whole_reply)))
    last = info.value.attempts[-1].error
    assert last is not None and last.type_name == "ConfigError" and "AWS_REGION" in last.detail


def test_base_url_overrides_the_regional_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[httpx.Request] = []
    settings = bearer(serving(whole_reply, seen), base_url="http://127.0.0.1:9/proxy")
    run_generate(settings, route=route("arn:aws:bedrock:us-east-1:123:inference-profile/x"))
    (request,) = seen
    assert str(request.url) == (
        "http://127.0.0.1:9/proxy/model/"
        "arn%3Aaws%3Abedrock%3Aus-east-1%3A123%3Ainference-profile%2Fx/converse"
    )


def test_missing_botocore_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [m for m in sys.modules if m == "botocore" or m.startswith("botocore.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "botocore", None)
    with pytest.raises(ai.AllTargetsFailedError) as info:
        run_generate(bearer(serving(whole_reply)))
    last = info.value.attempts[-1].error
    assert last is not None and last.type_name == "ConfigError"
    message = last.detail
    assert "\n" not in message
    assert "botocore" in message and "pip install 'anyinfer-kit[bedrock]'" in message
    with pytest.raises(ai.ConfigError, match=r"anyinfer-kit\[bedrock\]"):
        BedrockAdapter(bearer(serving(whole_reply)))


def test_import_anyinfer_does_not_import_botocore() -> None:
    code = "import sys, anyinfer; import anyinfer.fakeservers; assert 'botocore' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


# --- the event-stream framing --------------------------------------------------------------


def _messages(events: list[Any]) -> list[tuple[str | None, bytes]]:
    return [(e.event, e.data) for e in events]


def test_frames_split_at_every_byte_decode_the_same() -> None:
    body = b"".join(text_stream("Hé", "llo ", "wörld"))
    whole = _messages(EventStreamFramer("bedrock", 1 << 20).feed(body))
    assert [name for name, _ in whole] == [
        "messageStart",
        "contentBlockDelta",
        "contentBlockDelta",
        "contentBlockDelta",
        "contentBlockStop",
        "messageStop",
        "metadata",
    ]
    for cut in range(1, len(body)):
        framer = EventStreamFramer("bedrock", 1 << 20)
        got = framer.feed(body[:cut]) + framer.feed(body[cut:])
        assert _messages(got) == whole, cut
        assert framer.pending == 0
    framer = EventStreamFramer("bedrock", 1 << 20)
    one_by_one = [e for i in range(len(body)) for e in framer.feed(body[i : i + 1])]
    assert _messages(one_by_one) == whole


def test_one_byte_reads_through_the_client() -> None:
    body = b"".join(text_stream("Hé", "llo"))
    reads = [body[i : i + 1] for i in range(len(body))]
    _events, result, error = run_stream(bearer(serving(reads)))
    assert error is None and result is not None
    assert result.text == "Héllo"
    assert result.usage.input_tokens == 5 and result.usage.output_tokens == 7
    assert result.usage.total_tokens == 12
    assert result.finish_reason == "stop"
    assert result.timing.phases == {"provider_latency_ms": 321.0}


def test_the_template_reads_the_event_stream_inline_one_batch_per_read() -> None:
    # `event_framer` gives the template Bedrock's framer: the messages one network read
    # completes are decoded together, as SSE reads are, not one message per batch.
    frames = text_stream("a", "b")
    adapter = BedrockAdapter(bearer(serving([b"".join(frames[:3]), b"".join(frames[3:])])))
    request = GenerationRequest(model=MODEL, messages=(ai.Message.user("hi"),))

    async def go() -> list[list[Any]]:
        try:
            return [list(batch) async for batch in adapter.generate(request).source]
        finally:
            await adapter.aclose()

    first, second = asyncio.run(go())
    assert first == [TextPart("a"), TextPart("b")]
    assert second[0] == FinishPart("stop") and second[-1] == END


def test_a_message_cut_off_by_the_end_of_the_body_is_dropped() -> None:
    frames = text_stream("Hi")
    framer = EventStreamFramer("bedrock", 1 << 20)
    assert framer.feed(frames[0][:-3]) == [] and framer.close() == []
    # Cut inside the contentBlockStop: the stream ends without a finish reason, which is
    # the incomplete stream's own error (not a ProtocolError about the half message).
    cut = frames[2][: len(frames[2]) // 2]
    events, result, error = run_stream(bearer(serving([*frames[:2], cut])))
    assert result is None and type(error) is ai.StreamError
    assert "ended before a finish reason" in str(error)
    assert [e.text for e in events if isinstance(e, ai.TextDelta)] == ["Hi"]


@pytest.mark.parametrize("where", ["payload", "prelude", "message-crc"])
def test_a_corrupt_frame_is_a_protocol_error(where: str) -> None:
    frames = text_stream("Hello")
    bad = bytearray(frames[1])
    if where == "payload":
        bad[-6] ^= 0x01  # inside the JSON payload: the message CRC no longer matches
    elif where == "prelude":
        bad[6] ^= 0x01  # headers length: the prelude CRC no longer matches
    else:
        bad[-1] ^= 0x01
    with pytest.raises(ai.ProtocolError):
        EventStreamFramer("bedrock", 1 << 20).feed(bytes(bad))
    # Through the client: before any content the attempt fails typed (not a botocore error).
    events, result, error = run_stream(bearer(serving([frames[0], bytes(bad), *frames[2:]])))
    assert result is None
    assert isinstance(error, ai.AllTargetsFailedError)
    last = error.attempts[-1].error
    assert last is not None and last.type_name == "ProtocolError"
    # After content the ProtocolError itself is raised.
    events, result, error = run_stream(bearer(serving([*frames[:2], bytes(bad), *frames[2:]])))
    assert isinstance(error, ai.ProtocolError)
    assert [e.text for e in events if isinstance(e, ai.TextDelta)] == ["Hello"]


def test_impossible_lengths_and_unknown_message_types_are_protocol_errors() -> None:
    import struct
    import zlib

    prelude = struct.pack(">II", 15, 0)  # shorter than the smallest message
    short = prelude + struct.pack(">I", zlib.crc32(prelude)) + b"\x00\x00\x00"
    with pytest.raises(ai.ProtocolError):
        EventStreamFramer("bedrock", 1 << 20).feed(short)
    odd = encode_message(((":message-type", "gossip"),), b"{}")
    with pytest.raises(ai.ProtocolError, match="gossip"):
        EventStreamFramer("bedrock", 1 << 20).feed(odd)


def test_a_frame_larger_than_the_cap_fails_at_its_prelude() -> None:
    big = event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "x" * 5000}})
    framer = EventStreamFramer("bedrock", 4096)
    with pytest.raises(ai.ResponseTooLargeError):
        framer.feed(big[:4])  # the declared length alone is enough
    _events, _result, error = run_stream(
        bearer(serving([*text_stream()[:1], big]), options={"max_frame_bytes": 4096})
    )
    assert isinstance(error, ai.AllTargetsFailedError)
    last = error.attempts[-1].error
    assert last is not None and last.type_name == "ResponseTooLargeError"


def test_a_cut_after_message_stop_succeeds_with_the_usage_warning() -> None:
    frames = text_stream("Hi")
    _, result, error = run_stream(bearer(serving(frames[:-1])))
    assert error is None and result is not None
    assert result.text == "Hi" and result.finish_reason == "stop"
    assert result.usage.input_tokens is None
    assert any("incomplete" in w for w in result.warnings)
    _events, result, error = run_stream(bearer(serving(frames[:-2])))  # before messageStop
    assert isinstance(error, ai.StreamError)


# --- errors --------------------------------------------------------------------------------


def _error_reply(status: int, kind: str | None, body: dict[str, Any], **headers: str) -> Any:
    def reply(request: httpx.Request) -> httpx.Response:
        h = {"content-type": "application/json", **headers}
        if kind is not None:
            h["x-amzn-errortype"] = f"{kind}:http://internal.amazon.com/coral/com.amazon.bedrock/"
        return httpx.Response(status, headers=h, json=body)

    return reply


@pytest.mark.parametrize(
    ("status", "kind", "message", "expected", "retryable"),
    [
        (
            429,
            "ThrottlingException",
            "Too many requests, please wait before trying again.",
            "RateLimitError",
            True,
        ),
        (
            400,
            "ValidationException",
            "The provided model identifier is invalid.",
            "ProviderError",
            False,
        ),
        (
            400,
            "ValidationException",
            "Input is too long for requested model.",
            "ContextWindowError",
            False,
        ),
        (
            403,
            "AccessDeniedException",
            "You don't have access to the model.",
            "AuthenticationError",
            False,
        ),
        (
            403,
            "UnrecognizedClientException",
            "The security token included in the request is invalid.",
            "AuthenticationError",
            False,
        ),
        (404, "ResourceNotFoundException", "Model not found.", "ModelNotFoundError", False),
        (
            503,
            "ServiceUnavailableException",
            "Bedrock is unable to process your request.",
            "OverloadedError",
            True,
        ),
        (429, "ModelNotReadyException", "Model is not ready.", "RateLimitError", True),
        (408, "ModelTimeoutException", "Model timed out.", "ProviderTimeoutError", True),
        (424, "ModelErrorException", "The model returned an error.", "ProviderError", False),
        (500, "InternalServerException", "Internal error.", "ProviderError", True),
    ],
)
def test_http_errors_map_to_typed_errors(
    status: int, kind: str, message: str, expected: str, retryable: bool
) -> None:
    with pytest.raises(ai.AllTargetsFailedError) as info:
        run_generate(bearer(serving(_error_reply(status, kind, {"message": message}))))
    last = info.value.attempts[-1].error
    assert last is not None
    assert (last.type_name, last.http_status, last.retryable) == (expected, status, retryable)
    assert kind in last.detail and message in last.detail


def test_throttling_carries_retry_after_when_sent() -> None:
    reply = _error_reply(
        429, "ThrottlingException", {"message": "slow down"}, **{"retry-after": "3"}
    )
    with pytest.raises(ai.AllTargetsFailedError) as info:
        run_generate(bearer(serving(reply)))
    last = info.value.attempts[-1].error
    assert last is not None and last.type_name == "RateLimitError" and last.retry_after == 3.0


def test_the_body_type_names_the_exception_when_the_header_is_missing() -> None:
    body = {"__type": "com.amazon.coral.service#UnrecognizedClientException", "Message": "bad key"}
    with pytest.raises(ai.AllTargetsFailedError) as info:
        run_generate(bearer(serving(_error_reply(400, None, body))))
    last = info.value.attempts[-1].error
    assert last is not None and last.type_name == "AuthenticationError"
    assert "bad key" in last.detail


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("throttlingException", ai.RateLimitError),
        ("serviceUnavailableException", ai.OverloadedError),
        ("validationException", ai.ProviderError),
        ("modelStreamErrorException", ai.ProviderError),
        ("internalServerException", ai.ProviderError),
    ],
)
def test_exception_frames_after_content_raise_their_typed_error(
    kind: str, expected: type[ai.ProviderError]
) -> None:
    frames = text_stream("partial")
    reads = [*frames[:2], exception(kind, "it broke")]
    events, _result, error = run_stream(bearer(serving(reads)))
    assert type(error) is expected
    assert isinstance(error, ai.ProviderError) and error.http_status is None
    assert kind in str(error) and "it broke" in str(error)
    assert [e.text for e in events if isinstance(e, ai.TextDelta)] == ["partial"]
    assert not any(isinstance(e, ai.StreamEnded) for e in events)


def test_a_throttling_frame_before_content_fails_the_attempt_retryably() -> None:
    frames = text_stream("never")
    _events, _result, error = run_stream(
        bearer(serving([frames[0], exception("throttlingException", "Too many tokens")]))
    )
    assert isinstance(error, ai.AllTargetsFailedError)
    last = error.attempts[-1].error
    assert last is not None and last.type_name == "RateLimitError" and last.retryable


# --- responses -----------------------------------------------------------------------------


def test_tool_calls_reasoning_and_server_tools_in_a_stream() -> None:
    frames = [
        event("messageStart", {"role": "assistant"}),
        event(
            "contentBlockDelta",
            {"contentBlockIndex": 0, "delta": {"reasoningContent": {"text": "think"}}},
        ),
        event(
            "contentBlockDelta",
            {"contentBlockIndex": 0, "delta": {"reasoningContent": {"signature": "sig"}}},
        ),
        event("contentBlockStop", {"contentBlockIndex": 0}),
        # a server-side tool and its result: Bedrock ran them, not calls for the app
        event(
            "contentBlockStart",
            {
                "contentBlockIndex": 1,
                "start": {
                    "toolUse": {
                        "name": "nova_code_interpreter",
                        "toolUseId": "t0",
                        "type": "server_tool_use",
                    }
                },
            },
        ),
        event("contentBlockDelta", {"contentBlockIndex": 1, "delta": {"toolUse": {"input": "{}"}}}),
        event("contentBlockStop", {"contentBlockIndex": 1}),
        event(
            "contentBlockStart",
            {
                "contentBlockIndex": 2,
                "start": {"toolResult": {"toolUseId": "t0", "status": "success"}},
            },
        ),
        event(
            "contentBlockDelta", {"contentBlockIndex": 2, "delta": {"toolResult": [{"json": {}}]}}
        ),
        event("contentBlockStop", {"contentBlockIndex": 2}),
        event(
            "contentBlockStart",
            {
                "contentBlockIndex": 3,
                "start": {"toolUse": {"name": "weather", "toolUseId": "tooluse_a"}},
            },
        ),
        event(
            "contentBlockDelta",
            {"contentBlockIndex": 3, "delta": {"toolUse": {"input": '{"city":'}}},
        ),
        event(
            "contentBlockDelta",
            {"contentBlockIndex": 3, "delta": {"toolUse": {"input": ' "Paris"}'}}},
        ),
        event("contentBlockStop", {"contentBlockIndex": 3}),
        event(
            "contentBlockStart",
            {
                "contentBlockIndex": 4,
                "start": {"toolUse": {"name": "time", "toolUseId": "tooluse_b"}},
            },
        ),
        event("contentBlockStop", {"contentBlockIndex": 4}),
        event("messageStop", {"stopReason": "tool_use"}),
        event(
            "metadata",
            {
                "usage": {
                    "inputTokens": 10,
                    "outputTokens": 20,
                    "cacheReadInputTokens": 100,
                    "cacheWriteInputTokens": 3,
                    "totalTokens": 133,
                }
            },
        ),
    ]
    _events, result, error = run_stream(bearer(serving(frames)))
    assert error is None and result is not None
    assert result.reasoning == "think"
    assert result.tool_calls == (
        ai.ToolCall("tooluse_a", "weather", {"city": "Paris"}),
        ai.ToolCall("tooluse_b", "time", {}),
    )
    assert result.finish_reason == "tool_calls"
    u = result.usage
    assert (u.input_tokens, u.output_tokens, u.cache_read_tokens, u.cache_write_tokens) == (
        10,
        20,
        100,
        3,
    )
    assert u.total_tokens == 30  # input + output, as AnyInfer counts (Bedrock's adds the cache)


@pytest.mark.parametrize(
    ("stop", "finish"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("max_tokens", "length"),
        ("model_context_window_exceeded", "length"),
        ("tool_use", "tool_calls"),
        ("guardrail_intervened", "content_filter"),
        ("content_filtered", "content_filter"),
        ("something_new", "other"),
    ],
)
def test_stop_reasons(stop: str, finish: str) -> None:
    body = {**WHOLE, "stopReason": stop}
    result = run_generate(bearer(serving(lambda r: httpx.Response(200, json=body))))
    assert result.finish_reason == finish


def test_a_whole_response_with_reasoning_and_tool_use() -> None:
    body = {
        "output": {
            "message": {
                "role": "assistant",
                "content": [
                    {"reasoningContent": {"reasoningText": {"text": "hmm", "signature": "s"}}},
                    {"text": "Let me check."},
                    {
                        "toolUse": {
                            "toolUseId": "tooluse_1",
                            "name": "get_user_country",
                            "input": {},
                        }
                    },
                ],
            }
        },
        "stopReason": "tool_use",
        "usage": {
            "inputTokens": 397,
            "outputTokens": 130,
            "cacheReadInputTokens": 0,
            "totalTokens": 527,
        },
        "metrics": {"latencyMs": 3896},
    }
    result = run_generate(bearer(serving(lambda r: httpx.Response(200, json=body))))
    assert (result.text, result.reasoning) == ("Let me check.", "hmm")
    assert result.tool_calls == (ai.ToolCall("tooluse_1", "get_user_country", {}),)
    assert result.finish_reason == "tool_calls"
    assert result.usage.cache_read_tokens == 0 and result.usage.total_tokens == 527


# --- the request ---------------------------------------------------------------------------


def sent(messages: Any = "hi", *, model: str = MODEL, **kw: Any) -> tuple[dict[str, Any], Any]:
    seen: list[httpx.Request] = []
    result = run_generate(bearer(serving(whole_reply, seen)), messages, route=route(model), **kw)
    (request,) = seen
    return json.loads(request.content), result


def test_the_request_body_maps_the_conversation() -> None:
    png = b"\x89PNG\r\n\x1a\nfake"
    messages = [
        ai.Message.system("Be brief."),
        ai.Message(
            "user",
            (ai.TextContent("What is this?"), ai.ImageContent(data=png, media_type="image/png")),
        ),
        ai.Message.assistant("Checking.", (ai.ToolCall("tooluse_1", "look", {"q": "x"}),)),
        ai.Message("tool", "a logo", tool_call_id="tooluse_1"),
        ai.Message("tool", "boom", tool_call_id="tooluse_2", is_error=True),
        ai.Message.user("Thanks"),
    ]
    tools = [
        ai.ToolSpec(
            "look", "Look something up", {"type": "object", "properties": {"q": {"type": "string"}}}
        )
    ]
    body, result = sent(
        messages,
        tools=tools,
        tool_choice="required",
        sampling=ai.Sampling(temperature=0.5, top_p=0.9, max_output_tokens=100, stop=("END",)),
    )
    import base64

    assert body["system"] == [{"text": "Be brief."}]
    assert body["messages"] == [
        {
            "role": "user",
            "content": [
                {"text": "What is this?"},
                {"image": {"format": "png", "source": {"bytes": base64.b64encode(png).decode()}}},
            ],
        },
        {
            "role": "assistant",
            "content": [
                {"text": "Checking."},
                {"toolUse": {"toolUseId": "tooluse_1", "name": "look", "input": {"q": "x"}}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"toolResult": {"toolUseId": "tooluse_1", "content": [{"text": "a logo"}]}},
                {
                    "toolResult": {
                        "toolUseId": "tooluse_2",
                        "content": [{"text": "boom"}],
                        "status": "error",
                    }
                },
                {"text": "Thanks"},
            ],
        },
    ]
    assert body["inferenceConfig"] == {
        "maxTokens": 100,
        "temperature": 0.5,
        "topP": 0.9,
        "stopSequences": ["END"],
    }
    assert body["toolConfig"] == {
        "tools": [
            {
                "toolSpec": {
                    "name": "look",
                    "description": "Look something up",
                    "inputSchema": {"json": tools[0].parameters},
                }
            }
        ],
        "toolChoice": {"any": {}},
    }
    assert "additionalModelRequestFields" not in body
    assert result.warnings == ()


def test_tool_choice_named_auto_and_none() -> None:
    tools = [ai.ToolSpec("look", "", {"type": "object"})]
    body, _ = sent(tools=tools, tool_choice="look")
    assert body["toolConfig"]["toolChoice"] == {"tool": {"name": "look"}}
    body, _ = sent(tools=tools)
    assert body["toolConfig"]["toolChoice"] == {"auto": {}}
    body, result = sent(tools=tools, tool_choice="none")
    assert "toolConfig" not in body and result.warnings == ()
    # With tool calls in the conversation Converse needs the tools: sent, no toolChoice.
    history = [
        ai.Message.user("hi"),
        ai.Message.assistant("", (ai.ToolCall("tooluse_1", "look", {}),)),
        ai.Message("tool", "done", tool_call_id="tooluse_1"),
    ]
    body, result = sent(history, tools=tools, tool_choice="none")
    assert body["toolConfig"] == {
        "tools": [{"toolSpec": {"name": "look", "inputSchema": {"json": {"type": "object"}}}}]
    }
    assert any("no tool_choice 'none'" in w for w in result.warnings)


def test_reasoning_becomes_anthropic_thinking_only_for_anthropic_models() -> None:
    body, result = sent(model=CLAUDE, reasoning="medium")
    assert body["additionalModelRequestFields"] == {
        "thinking": {"type": "enabled", "budget_tokens": 4096}
    }
    assert body["inferenceConfig"]["maxTokens"] > 4096
    body, result = sent(reasoning="high")
    assert "additionalModelRequestFields" not in body
    assert any("reasoning='high' was not sent" in w for w in result.warnings)
    opts = {"additionalModelRequestFields": {"reasoningConfig": {"type": "enabled"}}}
    body, _ = sent(provider_options={"bedrock": opts})
    assert body["additionalModelRequestFields"] == opts["additionalModelRequestFields"]


def test_unsupported_sampling_is_dropped_with_a_warning() -> None:
    body, result = sent(sampling=ai.Sampling(seed=7))
    assert "seed" not in json.dumps(body)
    assert any("seed" in w for w in result.warnings)


def test_web_image_urls_are_refused_before_sending() -> None:
    message = ai.Message("user", (ai.ImageContent(url="https://example.com/cat.png"),))
    seen: list[httpx.Request] = []
    with pytest.raises(ai.AnyInferError, match="bytes"):
        run_generate(bearer(serving(whole_reply, seen)), [message])
    assert seen == []


# --- the dialect ---------------------------------------------------------------------------


def test_the_dialect_renders_frames_botocore_decodes() -> None:
    from botocore.eventstream import EventStreamBuffer

    script = Script(
        pieces=(Reasoning("r"), Text("a"), ToolFragment(0, '{"x": 1}', id="tooluse_z", name="f")),
        finish_reason="tool_calls",
        usage=ScriptUsage(input_tokens=1, output_tokens=2, cache_read_tokens=4),
    )
    rendered = DIALECT.render(script, stream=True)
    buffer = EventStreamBuffer()
    buffer.add_data(rendered.body)
    decoded = [(m.headers, json.loads(m.payload)) for m in buffer]
    assert [h[":event-type"] for h, _ in decoded] == [
        "messageStart",
        "contentBlockDelta",
        "contentBlockDelta",
        "contentBlockStop",
        "contentBlockDelta",
        "contentBlockStop",
        "contentBlockStart",
        "contentBlockDelta",
        "contentBlockStop",
        "messageStop",
        "metadata",
    ]
    assert all(h[":message-type"] == "event" for h, _ in decoded)
    assert all(isinstance(p.get("p"), str) and p["p"] for _, p in decoded)
    metadata = decoded[-1][1]
    assert metadata["usage"] == {
        "cacheReadInputTokens": 4,
        "inputTokens": 1,
        "outputTokens": 2,
        "totalTokens": 7,
    }
    assert decoded[-2][1]["stopReason"] == "tool_use"
    assert rendered.frames[-1].sentinel and rendered.frames[-2].finish
    assert rendered.headers[0] == ("content-type", "application/vnd.amazon.eventstream")


def test_the_dialect_error_shapes() -> None:
    rendered = DIALECT.render_error(Fault("status", status=429, retry_after=2, message="slow"))
    headers = dict(rendered.headers)
    assert headers["x-amzn-errortype"].startswith("ThrottlingException:")
    assert headers["retry-after"] == "2"
    assert json.loads(rendered.body) == {"message": "slow"}
    from botocore.eventstream import EventStreamBuffer

    buffer = EventStreamBuffer()
    buffer.add_data(DIALECT.error_frame(Fault("provider_error", status=503, message="busy")))
    (message,) = list(buffer)
    assert message.headers[":message-type"] == "exception"
    assert message.headers[":exception-type"] == "serviceUnavailableException"
    assert json.loads(message.payload) == {"message": "busy"}


def test_the_adapter_class_declares_its_profile() -> None:
    assert BedrockAdapter.profile.conformance_dialect == "bedrock-converse"
    assert set(BedrockAdapter.profile.aliases) == {"bedrock-converse", "aws-bedrock"}
    assert ai.default_registry().adapter_class("aws-bedrock") is BedrockAdapter
    assert BedrockAdapter.profile.usage is not None
    assert BedrockAdapter.profile.usage.input_includes_cache is False


def test_fake_transport_round_trip_in_both_forms() -> None:
    script = Script(
        pieces=(Text("Bon"), Text("jour")),
        usage=ScriptUsage(input_tokens=4, output_tokens=2),
        read_sizes=(3,),
    )
    settings = bearer(fs.FakeTransport(DIALECT, [script, script]))
    _, result, error = run_stream(settings)
    assert error is None and result is not None and result.text == "Bonjour"
    whole = run_generate(bearer(fs.FakeTransport(DIALECT, [script])))
    assert whole.text == "Bonjour" and whole.usage.output_tokens == 2


def test_a_json_answer_to_a_stream_request_is_read_as_an_error() -> None:
    def reply(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200, json={"message": "Too many requests", "__type": "ThrottlingException"}
        )

    _, result, error = run_stream(bearer(serving(reply)))
    assert result is None and isinstance(error, ai.AllTargetsFailedError)
    last = error.attempts[-1].error
    assert last is not None and last.type_name == "RateLimitError"
    assert "Too many requests" in last.detail


def test_credentials_are_looked_up_at_the_first_request_not_at_construction(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from anyinfer._request import GenerationRequest
    from anyinfer._stream.parts import TextPart

    monkeypatch.setenv("AWS_REGION", "us-east-1")
    seen: list[httpx.Request] = []
    adapter = BedrockAdapter(ai.ProviderSettings("bedrock", transport=serving(whole_reply, seen)))
    # Set after the adapter exists: the chain is asked when the first request is signed.
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDLATE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    request = GenerationRequest(model=MODEL, messages=(ai.Message.user("hi"),), stream=False)

    async def go() -> list[Any]:
        try:
            return [part async for part in adapter.generate(request)]
        finally:
            await adapter.aclose()

    parts = asyncio.run(go())
    assert TextPart("Hello!") in parts
    assert "Credential=AKIDLATE/" in seen[0].headers["authorization"]


SIGNED_TURN = [
    event("messageStart", {"role": "assistant"}),
    event(
        "contentBlockDelta",
        {"contentBlockIndex": 0, "delta": {"reasoningContent": {"text": "need the weather"}}},
    ),
    event(
        "contentBlockDelta",
        {"contentBlockIndex": 0, "delta": {"reasoningContent": {"signature": "EuSIG=="}}},
    ),
    event("contentBlockStop", {"contentBlockIndex": 0}),
    event("contentBlockDelta", {"contentBlockIndex": 1, "delta": {"text": "Checking."}}),
    event("contentBlockStop", {"contentBlockIndex": 1}),
    event(
        "contentBlockStart",
        {
            "contentBlockIndex": 2,
            "start": {"toolUse": {"name": "weather", "toolUseId": "tooluse_w"}},
        },
    ),
    event(
        "contentBlockDelta",
        {"contentBlockIndex": 2, "delta": {"toolUse": {"input": '{"city":'}}},
    ),
    event(
        "contentBlockDelta",
        {"contentBlockIndex": 2, "delta": {"toolUse": {"input": ' "Oslo"}'}}},
    ),
    event("contentBlockStop", {"contentBlockIndex": 2}),
    event("messageStop", {"stopReason": "tool_use"}),
    event("metadata", {"usage": {"inputTokens": 1, "outputTokens": 1, "totalTokens": 2}}),
]
SIGNED_BLOCKS = [
    {"reasoningContent": {"reasoningText": {"text": "need the weather", "signature": "EuSIG=="}}},
    {"text": "Checking."},
    {"toolUse": {"name": "weather", "toolUseId": "tooluse_w", "input": {"city": "Oslo"}}},
]


def test_a_streamed_turn_is_rebuilt_with_its_signed_reasoning() -> None:
    from anyinfer._providers.bedrock import assistant_message

    events: list[ai.StreamEvent] = []

    async def go() -> ai.Generation:
        async with ai.AsyncClient([bearer(serving(SIGNED_TURN))], retain_raw=True) as client:
            async with client.stream("Weather?", route=route(CLAUDE)) as st:
                async for ev in st:
                    events.append(ev)
            return st.result

    result = asyncio.run(go())
    message = assistant_message(result)
    assert message.provider_data == {"bedrock": {"content": SIGNED_BLOCKS}}
    assert message.tool_calls == (ai.ToolCall("tooluse_w", "weather", {"city": "Oslo"}),)
    # Sent back verbatim in the next request.
    body, _ = sent(
        [
            ai.Message.user("Weather?"),
            message,
            ai.Message("tool", "sunny", tool_call_id="tooluse_w"),
        ]
    )
    assert body["messages"][1] == {"role": "assistant", "content": SIGNED_BLOCKS}


def test_run_tools_sends_the_signed_reasoning_block_back() -> None:
    """A Claude tool turn with thinking continues with its reasoning block, signature
    intact (Bedrock refuses the follow-up without it)."""
    whole_turn = {
        "output": {"message": {"role": "assistant", "content": SIGNED_BLOCKS}},
        "stopReason": "tool_use",
        "usage": {"inputTokens": 1, "outputTokens": 1, "totalTokens": 2},
        "metrics": {"latencyMs": 10},
    }
    replies = [whole_turn, WHOLE]
    seen: list[httpx.Request] = []

    def reply(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=replies[len(seen) - 1])

    def weather(city: str) -> str:
        """The weather in a city."""
        return f"sunny in {city}"

    async def go() -> ai.Generation:
        async with ai.AsyncClient([bearer(serving(reply, seen))]) as client:
            return await client.run_tools(
                "Weather in Oslo?", tools=[weather], route=route(CLAUDE), reasoning="low"
            )

    result = asyncio.run(go())
    assert result.text == "Hello!"
    follow_up = json.loads(seen[1].content)
    assert follow_up["messages"][1] == {"role": "assistant", "content": SIGNED_BLOCKS}
    assert follow_up["messages"][2]["content"][0]["toolResult"]["toolUseId"] == "tooluse_w"
    assert follow_up["additionalModelRequestFields"]["thinking"]["budget_tokens"] == 1024


# --- documents ---------------------------------------------------------------------------

PDF = b"%PDF-1.7\n1 0 obj <<>> endobj\ntrailer <<>>\n%%EOF\n"


def test_pdf_documents_become_named_document_blocks() -> None:
    import base64

    messages = [
        ai.Message(
            "user",
            (
                ai.TextContent("Compare these."),
                ai.DocumentContent(data=PDF, filename="Q3 report.final.pdf"),
                ai.DocumentContent(data=PDF, title="Q3 report final"),
                ai.DocumentContent(data=PDF),
            ),
        )
    ]
    body, _ = sent(messages)
    encoded = base64.b64encode(PDF).decode()
    docs = [b["document"] for b in body["messages"][0]["content"] if "document" in b]
    assert [d["name"] for d in docs] == ["Q3 report-final", "Q3 report final", "document"]
    assert all(d["format"] == "pdf" and d["source"] == {"bytes": encoded} for d in docs)
    assert body["messages"][0]["content"][0] == {"text": "Compare these."}


def test_document_names_keep_only_what_converse_accepts_and_stay_distinct() -> None:
    from anyinfer._providers.bedrock import document_name

    allowed = __import__("re").compile(r"^[A-Za-z0-9\-()\[\]]+( [A-Za-z0-9\-()\[\]]+)*$")
    for label in ("a.b.pdf", "x  y\t z", "naïve/ré:sumé?.pdf", "[draft] (v2)", "..", "", None):
        name = document_name(label)
        assert allowed.match(name) and 1 <= len(name) <= 200, (label, name)
    same = ai.DocumentContent(data=PDF, filename="same.pdf")
    body, _ = sent([ai.Message("user", (ai.TextContent("x"), same, same))])
    names = [b["document"]["name"] for b in body["messages"][0]["content"] if "document" in b]
    assert names == ["same", "same (2)"]


@pytest.mark.parametrize(
    "part",
    [
        ai.DocumentContent(url="https://example.com/a.pdf"),
        ai.AudioContent(data=b"RIFF0000WAVEfmt ", format="wav"),
    ],
    ids=["document-url", "audio"],
)
def test_what_converse_cannot_carry_is_refused_before_sending(part: Any) -> None:
    seen: list[httpx.Request] = []
    with pytest.raises(ai.AllTargetsFailedError) as info:
        run_generate(
            bearer(serving(whole_reply, seen)),
            [ai.Message("user", (ai.TextContent("x"), part))],
            route=route(MODEL),
        )
    assert not seen
    assert "Bedrock Converse" in str(info.value)
