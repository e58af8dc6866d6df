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

import json
from dataclasses import replace

import httpx
import pytest
from test_replay_openai_chat import (
    _WIRE_DIR,
    _WIRE_WHY,
    CHAT,
    Expected,
    _params,
    _usage_seen,
    expected_from,
)
from wire import (
    Interaction,
    Replay,
    check_events_match_result,
    check_ordering,
    replay_transport,
    run_replay,
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


def _compat_settings(item: Interaction, transport: httpx.AsyncBaseTransport) -> ai.ProviderSettings:
    url = item.request.url
    base = str(url.copy_with(path=url.path[: -len("/chat/completions")] or "/", query=None))
    return ai.ProviderSettings(
        "openai-compat",
        base_url=base.rstrip("/"),
        api_key="sk-replay",
        options={"engine": engine_of(item)},
        transport=transport,
    )


def _azure_settings(item: Interaction, transport: httpx.AsyncBaseTransport) -> ai.ProviderSettings:
    url = item.request.url
    return ai.ProviderSettings(
        "azure-foundry",
        base_url=f"{url.scheme}://{url.host}",
        api_key="azure-replay-key",
        api_version=url.params.get("api-version"),
        transport=transport,
    )


def replay(item: Interaction, *, chunk_size: int | None = None) -> Replay:
    transport = replay_transport([item], chunk_size=chunk_size)
    if _is_azure(item):
        s = _azure_settings(item, transport)
        model = item.request.path.split("/deployments/")[1].split("/")[0]
    else:
        s = _compat_settings(item, transport)
        model = (item.request.json or {}).get("model") or "recorded-model"
    route = ai.Route(f"{s.provider_id}:{model}", retry=ai.RetryPolicy(max_retries=0))
    return run_replay(item, transport, s, route=route)


def check_request(item: Interaction, sent: list[httpx.Request]) -> None:
    (request,) = sent
    assert request.method == "POST"
    assert request.url.path == item.request.path
    body = json.loads(request.content)
    assert body.get("stream", False) is item.request.wants_stream
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
        assert body["model"] == (item.request.json or {}).get("model", body["model"])


def check_success(item: Interaction, exp: Expected, run: Replay) -> None:
    assert run.error is None, f"unexpected {run.error!r}"
    result = run.result
    assert result is not None
    assert result.text == exp.text
    assert result.reasoning == exp.reasoning
    assert list(result.tool_calls) == exp.tool_calls()
    assert result.finish_reason == exp.finish_reason
    # cost_usd comes from the pricing table, not the wire: compare what the wire said.
    assert replace(result.usage, cost_usd=None) == exp.expected_usage()
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
        assert _usage_seen(run.events) == exp.expected_usage()
        check_ordering(run.events, ended=False)
        return
    assert isinstance(error, ai.AllTargetsFailedError), repr(error)
    (attempt,) = error.attempts
    assert attempt.error is not None
    assert attempt.error.type_name == exp.error.type.__name__, attempt.error
    assert attempt.error.http_status == exp.error.http_status
    if exp.error.message:
        assert exp.error.message[:80] in attempt.error.detail


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
    whole, split = replay(item), replay(item, chunk_size=5)
    assert type(split.error) is type(whole.error)
    if whole.result is not None:
        assert split.result is not None
        for name in ("text", "reasoning", "tool_calls", "finish_reason", "usage", "warnings"):
            assert getattr(split.result, name) == getattr(whole.result, name), name


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
