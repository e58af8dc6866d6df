"""Replay the real Chat Completions recordings through `openai-compat` and `azure-foundry`.

The same recordings `test_replay_openai_chat.py` serves to the OpenAI adapter (Groq,
OpenRouter, DeepSeek, Mistral, Hugging Face, Ollama's `/v1`, OpenAI itself) go through
the compatible adapter here, each with the engine preset its host calls for; the Azure
deployment recording goes through `azure-foundry`. Expected values come from the
recorded bodies alone (`test_replay_openai_chat.expected_from`); the request checks
follow each engine's quirks (which token field, whether `stream_options` is sent, the
Azure route and `api-version`).
"""

from __future__ import annotations

import httpx
import pytest
from test_replay_openai_chat import (
    _WIRE_DIR,
    _WIRE_WHY,
    CHAT,
    Expected,
    _params,
    expected_from,
)
from wire import (
    Interaction,
    Replay,
    check_attempt_failed,
    check_events_match_result,
    check_generation,
    check_one_post,
    check_ordering,
    check_same_result,
    replay_with,
    usage_seen,
)

import anyinfer as ai

# Host -> engine preset. Anything else is the generic engine.
ENGINES: dict[str, str] = {
    "api.groq.com": "groq",
    "openrouter.ai": "openrouter",
    "api.deepseek.com": "deepseek",
    "api.mistral.ai": "mistral",
    "ollama.com": "ollama",
    "localhost": "ollama",  # pydantic-ai's local Ollama recording
}


def _is_azure(item: Interaction) -> bool:
    return (item.request.url.host or "").endswith(".openai.azure.com")


COMPAT = [i for i in CHAT if not _is_azure(i)]
AZURE = [i for i in CHAT if _is_azure(i)]


def engine_of(item: Interaction) -> str:
    return ENGINES.get(item.request.url.host or "", "openai-compat")


def replay(item: Interaction, *, chunk_size: int | None = None) -> Replay:
    url = item.request.url
    if _is_azure(item):
        deployment = item.request.path.split("/deployments/")[1].split("/")[0]
        return replay_with(
            item,
            "azure-foundry",
            model=deployment,
            chunk_size=chunk_size,
            base_url=f"{url.scheme}://{url.host}",
            api_key="azure-replay-key",
            api_version=url.params.get("api-version"),
        )
    return replay_with(
        item,
        "openai-compat",
        endpoint="/chat/completions",
        chunk_size=chunk_size,
        api_key="sk-replay",
        options={"engine": engine_of(item)},
    )


def check_request(item: Interaction, sent: list[httpx.Request]) -> None:
    body = check_one_post(item, sent)
    (request,) = sent
    if not item.request.wants_stream:
        assert "stream_options" not in body
    else:
        # Judged from the recording, not the adapter's engine table: where the recorded
        # client asked for the usage chunk (OpenAI's `stream_options.include_usage`), the
        # server took it, and the adapter must ask too; where the adapter does not ask,
        # the recorded stream (made without asking) must carry usage anyway, or fail
        # before any could arrive.
        recorded_asked = "stream_options" in (item.request.json or {})
        if recorded_asked:
            assert body.get("stream_options") == {"include_usage": True}
        if "stream_options" not in body:
            exp = expected_from(item)
            assert exp.usage_reports or exp.error is not None, "usage would be lost"
    if _is_azure(item):
        assert request.url.params["api-version"] == item.request.url.params["api-version"]
        assert request.headers["api-key"] == "azure-replay-key"
        assert "authorization" not in request.headers
    else:
        assert request.headers["authorization"] == "Bearer sk-replay"


def check_success(item: Interaction, exp: Expected, run: Replay) -> None:
    result = check_generation(run, exp, reasoning=exp.reasoning)
    assert [a.outcome for a in result.attempts] == ["ok"]
    if item.request.wants_stream:
        check_ordering(run.events, ended=True)
        check_events_match_result(run.events, result)


def check_failure(item: Interaction, exp: Expected, run: Replay) -> None:
    assert exp.error is not None
    error = run.error
    assert run.result is None
    if exp.has_content and item.request.wants_stream:
        assert type(error) is exp.error.type, repr(error)
        assert usage_seen(run.events) == exp.expected_usage()
        check_ordering(run.events, ended=False)
        return
    check_attempt_failed(error, exp.error, "azure-foundry" if _is_azure(item) else "openai-compat")


@pytest.mark.parametrize("item", _params(COMPAT))
def test_compat_replay_matches_recording(item: Interaction) -> None:
    exp = expected_from(item)
    run = replay(item)
    check_request(item, run.requests)
    if exp.error is not None:
        check_failure(item, exp, run)
    else:
        check_success(item, exp, run)


@pytest.mark.parametrize("item", _params([i for i in COMPAT if i.request.wants_stream]))
def test_compat_replay_split_reads_match(item: Interaction) -> None:
    check_same_result(replay(item), replay(item, chunk_size=5))


def test_compat_tool_call_events_announce_id_and_name_once() -> None:
    """Recorded OpenRouter/OpenAI tool streams: headers appear on a slot's first delta only."""
    streamed = [i for i in COMPAT if i.request.wants_stream and expected_from(i).calls]
    if not streamed:
        pytest.skip(_WIRE_WHY if _WIRE_DIR is None else "no streamed tool-call recordings")
    for item in streamed:
        run = replay(item)
        seen: set[int] = set()
        for event in run.events:
            if isinstance(event, ai.ToolCallDelta):
                if event.index in seen:
                    assert event.call_id is None and event.name is None, item.id
                seen.add(event.index)


@pytest.mark.parametrize("item", _params(AZURE))
def test_azure_replay_matches_recording(item: Interaction) -> None:
    exp = expected_from(item)
    run = replay(item)
    check_request(item, run.requests)
    if exp.error is not None:
        check_failure(item, exp, run)
        return
    check_success(item, exp, run)
    assert run.result is not None
    assert run.result.target == ai.ResolvedTarget(
        "azure-foundry", run.result.target.model, "azure-foundry"
    )
    assert run.result.warnings == ()  # every recorded filter verdict is "safe"


def test_the_recordings_cover_the_compat_engines() -> None:
    if _WIRE_DIR is None:
        pytest.skip(_WIRE_WHY)
    engines = {engine_of(i) for i in COMPAT}
    assert {"groq", "openrouter", "deepseek", "mistral", "ollama", "openai-compat"} <= engines
    assert AZURE, "the Azure deployment recording is gone"
