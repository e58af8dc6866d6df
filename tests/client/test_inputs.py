"""Document (PDF) and audio inputs next to images: the types, each protocol's request
shape, the one input rule that refuses before dispatch (with where its "no" came from),
and the privacy paths (telemetry, logs, errors, reprs, cassettes).

Request bodies go through the real client and core to a `FakeTransport`; each part is
also checked against the provider's official SDK request types (pydantic validates the
SDKs' TypedDicts and models), which say what the provider accepts.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Sequence
from typing import Any

import pydantic
import pytest
from helpers import NO_RETRY, run

import anyinfer as ai
from anyinfer._adapters.profile import InputSupport, input_support
from anyinfer._client.inputs import check_inputs
from anyinfer._providers.anthropic import AnthropicAdapter
from anyinfer._providers.openai_chat import OpenAIChatAdapter
from anyinfer._providers.openai_compat import OpenAICompatAdapter, preset_adapter
from anyinfer._providers.openai_responses import OpenAIResponsesAdapter
from anyinfer._types import ResolvedTarget
from anyinfer.fakeservers import FakeServer, FakeTransport, Script, Text

MARKER = b"SECRET-PAGE-CONTENT-7f3a"
PDF = b"%PDF-1.7\n" + MARKER + b"\n" + bytes(range(256)) * 4 + b"\n%%EOF\n"
PDF_B64 = base64.b64encode(PDF).decode()
WAV = b"RIFF\x24\x00\x00\x00WAVEfmt " + MARKER + bytes(64)
WAV_B64 = base64.b64encode(WAV).decode()
PDF_URL = "https://example.com/papers/report.pdf"

DIALECTS = {
    "openai": "openai-chat",
    "openai-responses": "openai-responses",
    "anthropic": "anthropic-messages",
    "gemini": "gemini",
    "ollama": "ollama-chat",
    "groq": "openai-chat",
    "azure-foundry": "azure-openai",
}
KEYS = {"ollama": None}
BASE_URLS = {"azure-foundry": "https://my-resource.openai.azure.com"}


def doc(**kw: Any) -> ai.DocumentContent:
    return ai.DocumentContent(data=PDF, **kw)


def wav() -> ai.AudioContent:
    return ai.AudioContent(data=WAV, format="wav")


def fake(provider: str) -> tuple[ai.ProviderSettings, FakeTransport]:
    transport = FakeTransport(DIALECTS[provider], [Script(pieces=(Text("ok"),))])
    kw: dict[str, Any] = {"transport": transport, "api_key": KEYS.get(provider, "test-key-0")}
    if provider in BASE_URLS:
        kw["base_url"] = BASE_URLS[provider]
    return ai.ProviderSettings(provider, **kw), transport


def send(
    provider: str,
    model: str,
    parts: Sequence[ai.ContentPart],
    **client_kw: Any,
) -> tuple[dict[str, Any], ai.Generation]:
    """Generate once through the real client; the body the provider received."""
    settings, transport = fake(provider)
    with ai.Client([settings], **client_kw) as client:
        result = client.generate(
            ai.Message.user([ai.TextContent("Summarize."), *parts]),
            route=ai.Route(f"{provider}:{model}", retry=NO_RETRY),
        )
    (req,) = [r for r in transport.requests if r.method == "POST"]
    assert isinstance(req.json, dict)
    return req.json, result


def refusal(provider: str, model: str, parts: Sequence[ai.ContentPart], **kw: Any) -> str:
    """The `ConfigError` of a one-target route refused before dispatch, as text."""
    settings, transport = fake(provider)
    with ai.Client([settings], **kw) as client:
        with pytest.raises(ai.AllTargetsFailedError) as info:
            client.generate(
                ai.Message.user(list(parts)), route=ai.Route(f"{provider}:{model}", retry=NO_RETRY)
            )
    assert [r for r in transport.requests if r.method == "POST"] == []  # nothing was sent
    (attempt,) = info.value.attempts
    assert attempt.error is not None and attempt.error.type_name == "ConfigError"
    assert attempt.error.provider == provider
    return attempt.error.detail


def user_content(body: dict[str, Any], key: str = "messages") -> list[Any]:
    return list(body[key][-1]["content"])


# --- the types -------------------------------------------------------------------------


def test_types_are_public() -> None:
    for name in ("DocumentContent", "AudioContent"):
        assert name in ai.__all__
        assert getattr(ai, name).__module__ == "anyinfer"
    message = ai.Message.user([ai.TextContent("read"), doc(), wav()])
    assert message.text == "read"
    assert isinstance(message.content, tuple) and len(message.content) == 3


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({}, "exactly one of url= or data="),
        ({"data": PDF, "url": PDF_URL}, "exactly one of url= or data="),
        ({"data": b""}, "non-empty bytes"),
        ({"data": "not bytes"}, "non-empty bytes"),
        ({"data": b"plain text, no header"}, "not a PDF"),
        ({"data": PDF, "media_type": "text/plain"}, "PDF documents only"),
        ({"url": "ftp://example.com/a.pdf"}, r"http\(s\):// or a base64 data: URL"),
        ({"url": "data:application/pdf,raw"}, "base64 data: URLs only"),
        ({"url": "data:image/png;base64,AAAA"}, "application/pdf data: URL"),
        ({"data": PDF, "filename": ""}, "filename must be a non-empty string"),
    ],
)
def test_document_validation(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ai.ConfigError, match=match):
        ai.DocumentContent(**kwargs)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"format": "wav"}, "exactly one of url= or data="),
        ({"data": WAV}, "needs format="),
        ({"data": WAV, "format": "wma"}, "format must be one of"),
        ({"data": WAV, "format": "wav", "media_type": "audio/mpeg"}, "disagree"),
        ({"data": WAV, "media_type": "video/mp4"}, "unknown audio media type"),
        ({"url": "https://example.com/clip"}, "needs format="),
    ],
)
def test_audio_validation(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ai.ConfigError, match=match):
        ai.AudioContent(**kwargs)


def test_audio_format_and_media_type_fill_each_other() -> None:
    assert ai.AudioContent(data=WAV, media_type="audio/x-wav").format == "wav"
    assert ai.AudioContent(data=WAV, format="MP3").media_type == "audio/mp3"
    assert ai.AudioContent(data=WAV, media_type="audio/mpeg").format == "mp3"
    by_url = ai.AudioContent(url="https://example.com/a/b.flac?sig=1")
    assert (by_url.format, by_url.media_type, by_url.is_inline) == ("flac", "audio/flac", False)
    inline = ai.AudioContent(url=f"data:audio/wav;base64,{WAV_B64}")
    assert inline.format == "wav" and inline.is_inline and inline.base64_data() == WAV_B64


def test_reprs_never_show_the_bytes() -> None:
    parts = [
        doc(filename="r.pdf"),
        wav(),
        ai.ImageContent(data=MARKER, media_type="image/png"),
        ai.DocumentContent(url=f"data:application/pdf;base64,{PDF_B64}"),
    ]
    shown = repr(ai.Message.user(parts))
    assert MARKER.decode() not in shown and PDF_B64[:40] not in shown
    assert f"<{len(PDF)} bytes>" in shown and "filename='r.pdf'" in shown


# --- request bodies per protocol -----------------------------------------------------


def test_openai_chat_file_and_input_audio_parts() -> None:
    chat_types = pytest.importorskip("openai.types.chat")
    body, result = send("openai", "gpt-4o-audio-preview", [doc(filename="r.pdf"), wav()])
    assert result.text == "ok"
    _, file_part, audio_part = user_content(body)
    assert file_part == {
        "type": "file",
        "file": {"filename": "r.pdf", "file_data": f"data:application/pdf;base64,{PDF_B64}"},
    }
    assert audio_part == {"type": "input_audio", "input_audio": {"data": WAV_B64, "format": "wav"}}
    oracle = pydantic.TypeAdapter(chat_types.ChatCompletionContentPartParam)
    for part in (file_part, audio_part):
        oracle.validate_python(part)


def test_openai_chat_names_an_unnamed_document() -> None:
    body, _ = send("openai", "gpt-4o", [doc()])
    assert user_content(body)[1]["file"]["filename"] == "document.pdf"


@pytest.mark.parametrize("provider", ["groq", "azure-foundry"])
def test_compatible_presets_send_what_openai_chat_sends(provider: str) -> None:
    body, _ = send(provider, "some-model", [doc(filename="r.pdf"), wav()])
    _, file_part, audio_part = user_content(body)
    assert file_part["type"] == "file" and file_part["file"]["filename"] == "r.pdf"
    assert audio_part["input_audio"] == {"data": WAV_B64, "format": "wav"}


def test_openai_responses_input_file_by_data_and_by_url() -> None:
    responses_types = pytest.importorskip("openai.types.responses")
    body, _ = send(
        "openai-responses",
        "gpt-4.1",
        [doc(filename="r.pdf"), ai.DocumentContent(url=PDF_URL)],
    )
    _, inline, by_url = user_content(body, "input")
    assert inline == {
        "type": "input_file",
        "filename": "r.pdf",
        "file_data": f"data:application/pdf;base64,{PDF_B64}",
    }
    assert by_url == {"type": "input_file", "file_url": PDF_URL}
    oracle = pydantic.TypeAdapter(responses_types.ResponseInputContentParam)
    for part in (inline, by_url):
        oracle.validate_python(part)


def test_anthropic_document_blocks_base64_and_url() -> None:
    anthropic_types = pytest.importorskip("anthropic.types")
    body, _ = send(
        "anthropic",
        "claude-sonnet-4-5",
        [doc(title="Q3 report"), ai.DocumentContent(url=PDF_URL)],
    )
    _, inline, by_url = user_content(body)
    assert inline == {
        "type": "document",
        "source": {"type": "base64", "media_type": "application/pdf", "data": PDF_B64},
        "title": "Q3 report",
    }
    assert by_url == {"type": "document", "source": {"type": "url", "url": PDF_URL}}
    oracle = pydantic.TypeAdapter(anthropic_types.DocumentBlockParam)
    for part in (inline, by_url):
        oracle.validate_python(part)


def test_gemini_inline_data_and_file_data() -> None:
    genai_types = pytest.importorskip("google.genai.types")
    clip = "https://example.com/audio/clip.mp3"
    body, _ = send(
        "gemini",
        "gemini-2.5-flash",
        [doc(), wav(), ai.DocumentContent(url=PDF_URL), ai.AudioContent(url=clip)],
    )
    _, pdf, audio, pdf_url, audio_url = body["contents"][-1]["parts"]
    assert pdf == {"inlineData": {"mimeType": "application/pdf", "data": PDF_B64}}
    assert audio == {"inlineData": {"mimeType": "audio/wav", "data": WAV_B64}}
    assert pdf_url == {"fileData": {"mimeType": "application/pdf", "fileUri": PDF_URL}}
    assert audio_url == {"fileData": {"mimeType": "audio/mp3", "fileUri": clip}}
    for part in (pdf, audio, pdf_url, audio_url):
        parsed = genai_types.Part.model_validate(part)
        assert parsed.inline_data is not None or parsed.file_data is not None


def test_images_are_mapped_as_before() -> None:
    png = ai.ImageContent(data=b"\x89PNG", media_type="image/png")
    body, _ = send("openai", "gpt-4o", [png])
    assert user_content(body)[1] == {
        "type": "image_url",
        "image_url": {"url": "data:image/png;base64," + base64.b64encode(b"\x89PNG").decode()},
    }


def test_a_real_loopback_fake_server_accepts_the_shapes() -> None:
    """The dialects do not validate request bodies (none of them reads more than
    `stream`), so a body with a 1 MB PDF is served like any other."""
    big = ai.DocumentContent(data=PDF + bytes(1_000_000))
    with FakeServer("anthropic-messages", [Script(pieces=(Text("read it"),))]) as srv:
        settings = ai.ProviderSettings("anthropic", api_key="test-key-0", base_url=srv.base_url)
        with ai.Client([settings]) as client:
            result = client.generate(
                ai.Message.user([big]),
                route=ai.Route("anthropic:claude-sonnet-4-5", retry=NO_RETRY),
            )
    assert result.text == "read it"
    (req,) = [r for r in srv.requests if r.method == "POST"]
    block = req.json["messages"][0]["content"][0]
    assert block["type"] == "document" and len(block["source"]["data"]) > 1_000_000


# --- refusals before dispatch ----------------------------------------------------------


def test_openai_chat_refuses_a_document_url_naming_the_protocol() -> None:
    detail = refusal("openai", "gpt-4o", [ai.DocumentContent(url=PDF_URL)])
    assert "openai:gpt-4o: cannot send 1 DocumentContent part by URL" in detail
    assert "OpenAI Chat Completions protocol takes documents inline only" in detail
    assert "source: protocol" in detail


def test_openai_chat_refuses_audio_it_has_no_format_for() -> None:
    flac = ai.AudioContent(data=WAV, format="flac")
    detail = refusal("openai", "gpt-4o-audio-preview", [flac])
    assert "in format flac" in detail and "takes audio as mp3, wav only" in detail
    assert "source: protocol" in detail


@pytest.mark.parametrize(
    ("provider", "model", "part", "says"),
    [
        ("openai-responses", "gpt-4.1", wav(), "OpenAI Responses protocol has no audio input"),
        ("anthropic", "claude-sonnet-4-5", wav(), "Anthropic Messages protocol has no audio"),
        ("ollama", "gemma3:4b", doc(), "Ollama /api/chat protocol carries text and base64"),
        ("ollama", "gemma3:4b", wav(), "Ollama /api/chat protocol carries text and base64"),
        (
            "ollama",
            "gemma3:4b",
            ai.ImageContent(url="https://example.com/cat.png"),
            "takes inline images only",
        ),
    ],
)
def test_protocols_refuse_what_they_cannot_carry(
    provider: str, model: str, part: ai.ContentPart, says: str
) -> None:
    detail = refusal(provider, model, [part])
    assert says in detail and "source: protocol" in detail


def test_a_catalog_no_is_named_with_its_layer_and_the_fix() -> None:
    detail = refusal("openai", "gpt-4o", [wav()])
    assert "the model does not take audio (audio=False, from the catalog)" in detail
    assert "capability_overrides={'openai:gpt-4o': ModelCapabilities(audio=True)}" in detail
    assert "source: catalog" in detail


def test_an_override_no_is_named_as_an_override() -> None:
    no = {"gemini:gemini-2.5-flash": ai.ModelCapabilities(documents=False)}
    detail = refusal("gemini", "gemini-2.5-flash", [doc()], capability_overrides=no)
    assert "documents=False, from capability_overrides" in detail
    assert "source: override" in detail


def test_images_follow_the_same_rule() -> None:
    png = ai.ImageContent(data=b"\x89PNG", media_type="image/png")
    detail = refusal("ollama", "qwen3:8b", [png])  # the catalog: a text-only model
    assert "the model does not take images (vision=False, from the catalog)" in detail


def test_an_override_yes_wins_over_the_catalog() -> None:
    yes = {"openai:gpt-4o": ai.ModelCapabilities(audio=True)}
    body, _ = send("openai", "gpt-4o", [wav()], capability_overrides=yes)
    assert user_content(body)[1]["type"] == "input_audio"


def test_unknown_never_refuses() -> None:
    body, _ = send("openai", "a-model-nobody-catalogued", [wav(), doc()])
    assert [p["type"] for p in user_content(body)] == ["text", "input_audio", "file"]


def test_a_refused_target_falls_back_to_one_that_takes_the_part() -> None:
    claude, claude_wire = fake("anthropic")
    gemini, gemini_wire = fake("gemini")
    with ai.Client([claude, gemini]) as client:
        result = client.generate(
            ai.Message.user([ai.TextContent("Transcribe."), wav()]),
            route=ai.Route(
                ["anthropic:claude-sonnet-4-5", "gemini:gemini-2.5-flash"], retry=NO_RETRY
            ),
        )
    assert result.text == "ok" and str(result.target) == "gemini:gemini-2.5-flash"
    first = result.attempts[0]
    assert first.outcome == "failed" and first.error is not None
    assert first.error.type_name == "ConfigError" and "no audio" in first.error.detail
    assert claude_wire.requests == [] and len(gemini_wire.requests) == 1


async def drain(st: ai.AsyncStream) -> None:
    async for _ in st:
        pass


def test_async_client_refuses_the_same_way() -> None:
    settings, transport = fake("anthropic")

    async def go() -> ai.AllTargetsFailedError:
        async with ai.AsyncClient([settings]) as client:
            with pytest.raises(ai.AllTargetsFailedError) as info:
                await client.generate(
                    ai.Message.user([wav()]),
                    route=ai.Route("anthropic:claude-sonnet-4-5", retry=NO_RETRY),
                )
            stream = client.stream(ai.Message.user([wav()]), target="anthropic:claude-sonnet-4-5")
            async with stream as st:
                with pytest.raises(ai.AllTargetsFailedError):
                    await drain(st)
            return info.value

    error = run(go())
    assert "Anthropic Messages protocol has no audio" in str(error)
    assert transport.requests == []


def test_async_client_sends_documents() -> None:
    settings, transport = fake("gemini")

    async def go() -> ai.Generation:
        async with ai.AsyncClient([settings]) as client:
            async with client.stream(
                ai.Message.user([doc()]), target="gemini:gemini-2.5-flash"
            ) as st:
                async for _ in st:
                    pass
            return st.result

    assert run(go()).text == "ok"
    (req,) = transport.requests
    assert req.json["contents"][0]["parts"][0]["inlineData"]["mimeType"] == "application/pdf"


def test_adapters_refuse_when_called_directly() -> None:
    """Each request builder refuses what its protocol lacks, should the core be bypassed."""
    from anyinfer._request import GenerationRequest

    def body(adapter: Any, part: ai.ContentPart) -> Any:
        return adapter.build_body(GenerationRequest(model="m", messages=(ai.Message.user([part]),)))

    chat = OpenAIChatAdapter(ai.ProviderSettings("openai", api_key="test-key-0"))
    with pytest.raises(ai.ConfigError, match="inline only"):
        body(chat, ai.DocumentContent(url=PDF_URL))
    with pytest.raises(ai.ConfigError, match="wav or mp3"):
        body(chat, ai.AudioContent(data=WAV, format="ogg"))
    responses = OpenAIResponsesAdapter(ai.ProviderSettings("openai-responses", api_key="k"))
    with pytest.raises(ai.ConfigError, match="no audio input"):
        body(responses, wav())
    claude = AnthropicAdapter(ai.ProviderSettings("anthropic", api_key="test-key-0"))
    with pytest.raises(ai.ConfigError, match="no audio content block"):
        body(claude, wav())
    for adapter in (chat, responses, claude):
        run(adapter.aclose())


def test_input_support_is_inherited_and_defaults_to_images() -> None:
    chat = input_support(OpenAIChatAdapter)
    assert input_support(OpenAICompatAdapter) is chat
    assert input_support(preset_adapter("groq")) is chat

    class Unknown:  # an adapter class that declares nothing
        pass

    default = input_support(Unknown)
    assert default.kinds == {"image", "image_url"}
    target = ResolvedTarget("acme", "m", "acme")
    with pytest.raises(ai.ConfigError, match="declares no 'document' input"):
        check_inputs([ai.Message.user([doc()])], target, default, ai.ModelCapabilities())
    # plain text and images pass the default
    check_inputs([ai.Message.user("hi")], target, InputSupport(), ai.ModelCapabilities())


# --- privacy ----------------------------------------------------------------------------


class Recorder:
    def __init__(self) -> None:
        self.events: list[Any] = []

    def on_event(self, event: Any) -> None:
        self.events.append(event)


def test_telemetry_never_carries_the_bytes(caplog: pytest.LogCaptureFixture) -> None:
    settings, _ = fake("gemini")
    quiet, auditor = Recorder(), Recorder()
    caplog.set_level(logging.DEBUG)
    with ai.Client([settings]) as client:
        client.subscribe(quiet)
        client.subscribe(auditor, payloads=True)
        client.generate(
            ai.Message.user([ai.TextContent("Summarize."), doc(filename="r.pdf"), wav()]),
            target="gemini:gemini-2.5-flash",
        )
    (started,) = [e for e in quiet.events if type(e).__name__ == "RequestStarted"]
    assert started.messages is None  # payload-free by default
    (full,) = [e for e in auditor.events if type(e).__name__ == "RequestStarted"]
    _, pdf, audio = full.messages[0].content
    assert pdf == ai.TextContent(
        f"[DocumentContent application/pdf, {len(PDF)} bytes, filename 'r.pdf']"
    )
    assert audio == ai.TextContent(f"[AudioContent audio/wav, {len(WAV)} bytes]")
    everything = repr(quiet.events) + repr(auditor.events) + caplog.text
    for secret in (MARKER.decode(), PDF_B64[:32], WAV_B64[:32]):
        assert secret not in everything


def test_url_placeholders_drop_the_query() -> None:
    settings, _ = fake("gemini")
    auditor = Recorder()
    signed = "https://bucket.example.com/r.pdf?X-Amz-Signature=abcdef0123456789"
    with ai.Client([settings]) as client:
        client.subscribe(auditor, payloads=True)
        client.generate(ai.Message.user([ai.DocumentContent(url=signed)]), target="gemini:m")
    (full,) = [e for e in auditor.events if type(e).__name__ == "RequestStarted"]
    (placeholder,) = full.messages[0].content
    assert (
        placeholder.text
        == "[DocumentContent application/pdf, url https://bucket.example.com/r.pdf]"
    )


def test_refusals_and_their_records_carry_no_bytes() -> None:
    detail = refusal("anthropic", "claude-sonnet-4-5", [wav(), doc()])
    assert MARKER.decode() not in detail and WAV_B64[:32] not in detail
    detail = refusal(
        "openai",
        "gpt-4o",
        [
            ai.DocumentContent(url=f"data:application/pdf;base64,{PDF_B64}"),
            ai.AudioContent(url="https://example.com/a.wav?sig=secret-signature"),
        ],
    )
    assert "secret-signature" not in detail and PDF_B64[:32] not in detail


def test_cassettes_record_and_replay_documents(tmp_path: Any) -> None:
    """A recorded request body with a PDF in it scrubs, stores and replays: the scrubber's
    key patterns may mask a run of the base64 that looks like a key (this PDF is made to
    hold one), and replay still matches, since both sides are scrubbed alike."""
    pytest.importorskip("vcr")
    from anyinfer.conformance.cassettes import make_vcr

    looks_like_a_key = base64.b64decode("AIza" + "B" * 36)
    pdf = ai.DocumentContent(data=b"%PDF-1.4\n" + looks_like_a_key + bytes(300_000))
    message = ai.Message.user([ai.TextContent("Summarize."), pdf])

    def call(base_url: str) -> str:
        settings = ai.ProviderSettings("anthropic", api_key="test-key-0", base_url=base_url)
        with ai.Client([settings]) as client:
            return client.generate(
                message, route=ai.Route("anthropic:claude-sonnet-4-5", retry=NO_RETRY)
            ).text

    with FakeServer("anthropic-messages", [Script(pieces=(Text("recorded"),))]) as srv:
        base_url = srv.base_url
        with make_vcr(tmp_path, "all").use_cassette("doc.yaml"):
            assert call(base_url) == "recorded"
    stored = (tmp_path / "doc.yaml").read_text()
    assert "AIzaBBBB" not in stored  # masked as a key would be
    with make_vcr(tmp_path, "none").use_cassette("doc.yaml") as cassette:
        assert call(base_url) == "recorded"  # the server is gone: this is the cassette
        assert cassette.play_count == 1


# --- budgets ------------------------------------------------------------------------------


def test_budget_counts_documents_and_audio_toward_the_ceiling_only() -> None:
    from anyinfer._knowledge.budget import IMAGE_TOKENS_CEILING, ByteHeuristicEstimator

    estimator = ByteHeuristicEstimator()
    text = ai.Message.user([ai.TextContent("Summarize.")])
    big = ai.DocumentContent(data=PDF + bytes(50_000))
    base = estimator.estimate([text])
    with_doc = estimator.estimate([ai.Message.user([ai.TextContent("Summarize."), big])])
    with_url = estimator.estimate(
        [ai.Message.user([ai.TextContent("Summarize."), ai.AudioContent(url="https://x/a.wav")])]
    )
    assert with_doc.floor == base.floor == with_url.floor  # the gate reads the floor only
    assert with_doc.ceiling - base.ceiling == len(big.data or b"")
    assert with_url.ceiling - base.ceiling == IMAGE_TOKENS_CEILING
    with ai.Client([fake("gemini")[0]]) as client:
        budget = client.budget(
            [ai.Message.user([ai.TextContent("hi"), wav()])], target="gemini:gemini-2.5-flash"
        )
    assert budget.prompt.floor >= 0 and budget.prompt.ceiling >= IMAGE_TOKENS_CEILING


# --- fake servers: the dialects refuse what the real providers refuse --------------------


def _post(dialect: str, path: str, body: dict[str, Any]) -> tuple[int, Any]:
    import httpx

    with FakeServer(dialect, [Script(pieces=(Text("ok"),))]) as srv:
        response = httpx.post(srv.base_url.rstrip("/") + path, json=body, timeout=10)
        return response.status_code, response.json()


def _chat(*parts: dict[str, Any]) -> dict[str, Any]:
    return {"model": "gpt-4o", "messages": [{"role": "user", "content": list(parts)}]}


@pytest.mark.parametrize(
    ("part", "says"),
    [
        ({"type": "document", "source": {}}, "'document' is not a content part type"),
        ({"type": "input_audio", "input_audio": {"data": "AAAA", "format": "flac"}}, "format"),
        ({"type": "file", "file": {"file_url": PDF_URL}}, "file_data or file_id is required"),
    ],
)
def test_openai_chat_dialect_refuses_parts_openai_refuses(part: dict[str, Any], says: str) -> None:
    status, body = _post("openai-chat", "/chat/completions", _chat(part))
    assert status == 400
    assert body["error"]["type"] == "invalid_request_error"
    assert body["error"]["code"] == "invalid_value" and says in body["error"]["message"]


def test_openai_chat_dialect_serves_what_the_adapter_sends() -> None:
    body, _ = send("openai", "gpt-4o-audio-preview", [doc(), wav()])
    status, _ = _post("openai-chat", "/chat/completions", body)
    assert status == 200


def test_responses_dialect_refuses_audio() -> None:
    audio = {"type": "input_audio", "input_audio": {"data": WAV_B64, "format": "wav"}}
    status, body = _post(
        "openai-responses",
        "/responses",
        {"model": "gpt-4.1", "input": [{"role": "user", "content": [audio]}]},
    )
    assert (
        status == 400 and "'input_audio' is not an input content type" in (body["error"]["message"])
    )


@pytest.mark.parametrize(
    ("block", "says"),
    [
        ({"type": "audio", "source": {"type": "base64", "data": WAV_B64}}, "not a content block"),
        (
            {
                "type": "document",
                "source": {"type": "base64", "media_type": "text/csv", "data": ""},
            },
            "must be a PDF",
        ),
    ],
)
def test_anthropic_dialect_refuses_blocks_anthropic_refuses(
    block: dict[str, Any], says: str
) -> None:
    status, body = _post(
        "anthropic-messages",
        "/v1/messages",
        {"model": "claude-sonnet-4-5", "max_tokens": 8, "messages": [_chat(block)["messages"][0]]},
    )
    assert status == 400 and body["type"] == "error"
    assert body["error"]["type"] == "invalid_request_error" and says in body["error"]["message"]


def test_the_app_test_double_takes_every_part() -> None:
    from anyinfer.testing import Reply, ScriptedProviders

    with ScriptedProviders() as scripted:
        scripted.add("primary", Reply("read"))
        with scripted.client() as client:
            result = client.generate(
                ai.Message.user([doc(), wav(), ai.AudioContent(url="https://x/a.mp3")]),
                target="primary:m",
            )
        (call,) = scripted.calls
    assert result.text == "read"
    parts = call.request.messages[-1].content
    assert [type(p).__name__ for p in parts] == ["DocumentContent", "AudioContent", "AudioContent"]


def test_a_discovery_no_is_named_as_discovery() -> None:
    """Ollama's `/api/show` lists a model's capabilities; one without `vision` is
    recorded `vision=False` at discovery, and an image to it is refused as such."""
    import json

    import httpx

    from anyinfer.fakeservers import OllamaDialect

    inner = FakeTransport("ollama-chat", [], models=("textonly:1b",))
    dialect = inner.dialect
    assert isinstance(dialect, OllamaDialect)

    class Show(httpx.AsyncBaseTransport):
        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            if dialect.is_show(request.method, request.url.path):
                name = json.loads(await request.aread())["model"]
                shown = dialect.show_response(name, capabilities=("completion",))
                return httpx.Response(shown.status, headers=shown.headers, content=shown.body)
            return await inner.handle_async_request(request)

    settings = ai.ProviderSettings("ollama", transport=Show(), options={"show_details": True})
    png = ai.ImageContent(data=b"\x89PNG", media_type="image/png")

    async def go() -> ai.AllTargetsFailedError:
        async with ai.AsyncClient([settings]) as client:
            await client.models("ollama")
            assert client.capabilities("ollama:textonly:1b").source("vision") == "discovery"
            with pytest.raises(ai.AllTargetsFailedError) as info:
                await client.generate(ai.Message.user([png]), target="ollama:textonly:1b")
            return info.value

    error = run(go())
    assert "vision=False, from the provider's model listing (discovery)" in str(error)
    assert [r for r in inner.requests if r.path == "/api/chat"] == []
