"""The `azure-foundry` adapter: Azure OpenAI deployments and Azure AI model inference.

Driven through the real client over the `azure-openai` fake dialect (in-process and on a
127.0.0.1 socket) and over `httpx.MockTransport` for Azure bodies the dialect does not
produce (model inference's `/models/info`, `innererror`-only refusals).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

import anyinfer as ai
from anyinfer._providers.azure import DEFAULT_API_VERSIONS, AzureFoundryAdapter, default_api
from anyinfer.fakeservers import (
    FakeServer,
    FakeTransport,
    Fault,
    Script,
    ScriptUsage,
    Text,
    ToolFragment,
)

RESOURCE = "https://my-resource.openai.azure.com"
HUB = "https://my-hub.services.ai.azure.com"


class Capture(FakeTransport):
    """A `FakeTransport` keeping the raw requests (headers and query strings)."""

    def __init__(self, scripts: Any) -> None:
        super().__init__("azure-openai", scripts)
        self.raw: list[httpx.Request] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.raw.append(request)
        return await super().handle_async_request(request)


def azure(transport: httpx.AsyncBaseTransport | None, base_url: str = RESOURCE, **kw: Any):
    kw.setdefault("api_key", "azure-secret-key")
    return ai.ProviderSettings("azure", base_url=base_url, transport=transport, **kw)


def no_retry(target: str) -> ai.Route:
    return ai.Route(target, retry=ai.RetryPolicy(max_retries=0))


def run_stream(s: ai.ProviderSettings, target: str = "azure:my-gpt4o") -> tuple[list[Any], Any]:
    async def go() -> tuple[list[Any], Any]:
        events: list[Any] = []
        async with ai.AsyncClient([s]) as client:
            try:
                async with client.stream("hi", route=no_retry(target)) as st:
                    async for ev in st:
                        events.append(ev)
            except ai.AnyInferError as exc:
                return events, exc
        return events, st.result

    return asyncio.run(go())


def run_generate(s: ai.ProviderSettings, target: str = "azure:my-gpt4o", **kw: Any) -> Any:
    async def go() -> Any:
        async with ai.AsyncClient([s]) as client:
            try:
                return await client.generate("hi", route=no_retry(target), **kw)
            except ai.AnyInferError as exc:
                return exc

    return asyncio.run(go())


def failed_info(outcome: Any) -> ai.ErrorInfo:
    assert isinstance(outcome, ai.AllTargetsFailedError), repr(outcome)
    (attempt,) = outcome.attempts
    assert attempt.error is not None
    return attempt.error


# --- configuration -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("base", "api"),
    [
        ("https://x.openai.azure.com", "openai-deployments"),
        ("https://x.openai.azure.com/openai", "openai-deployments"),
        ("https://x.cognitiveservices.azure.com/", "openai-deployments"),
        ("https://x.services.ai.azure.com/models", "model-inference"),
        ("https://my-endpoint.eastus2.inference.ai.azure.com", "model-inference"),
        ("http://127.0.0.1:8000", "model-inference"),
        ("https://evil-openai.azure.com.example.org", "model-inference"),
    ],
)
def test_the_default_route_follows_the_host(base: str, api: str) -> None:
    assert default_api(base) == api
    adapter = AzureFoundryAdapter(ai.ProviderSettings("azure-foundry", base_url=base))
    assert adapter.api == api
    assert adapter.api_version == DEFAULT_API_VERSIONS[api]
    assert adapter.quirks.engine == (
        "azure-inference" if api == "model-inference" else "azure-openai"
    )


def test_the_endpoint_may_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANYINFER_AZURE_FOUNDRY_BASE_URL", RESOURCE)
    adapter = AzureFoundryAdapter(ai.ProviderSettings("azure-foundry"))
    assert adapter.api == "openai-deployments"
    assert adapter.base_url == RESOURCE


def test_alias_and_registration() -> None:
    assert ai.default_registry().adapter_class("azure") is AzureFoundryAdapter
    assert ai.default_registry().adapter_class("azure-foundry") is AzureFoundryAdapter


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({}, "base_url"),
        ({"base_url": RESOURCE, "options": {"api": "deployments"}}, "options\\['api'\\]"),
        ({"base_url": RESOURCE, "options": {"auth": "entra"}}, "options\\['auth'\\]"),
        ({"base_url": RESOURCE, "options": {"region": "x"}}, "does not understand"),
        ({"options": {"api": "openai-deployments"}}, "base_url"),
    ],
)
def test_bad_settings_are_config_errors(
    kw: dict[str, Any], match: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANYINFER_AZURE_FOUNDRY_BASE_URL", raising=False)
    with pytest.raises(ai.ConfigError, match=match):
        AzureFoundryAdapter(ai.ProviderSettings("azure-foundry", **kw))


# --- request shapes --------------------------------------------------------------------------


def test_deployment_route_query_and_api_key_header() -> None:
    t = Capture([Script(pieces=(Text("ok"),))] * 2)
    run_stream(azure(t, RESOURCE + "/openai/"))
    run_generate(
        azure(t, api_version="2025-01-01-preview"), sampling=ai.Sampling(max_output_tokens=9)
    )
    first, second = t.raw
    assert first.url.path == "/openai/deployments/my-gpt4o/chat/completions"
    assert first.url.params["api-version"] == "2024-10-21"
    assert second.url.params["api-version"] == "2025-01-01-preview"
    for request in (first, second):
        assert request.headers["api-key"] == "azure-secret-key"
        assert "authorization" not in request.headers
    body = json.loads(first.content)
    assert body["model"] == "my-gpt4o"
    assert body["stream_options"] == {"include_usage": True}
    assert json.loads(second.content)["max_completion_tokens"] == 9


def test_bearer_auth_for_entra_tokens() -> None:
    t = Capture([Script(pieces=(Text("ok"),))])
    run_generate(azure(t, api_key="eyJ-entra-token", options={"auth": "bearer"}))
    (request,) = t.raw
    assert request.headers["authorization"] == "Bearer eyJ-entra-token"
    assert "api-key" not in request.headers


def test_model_inference_route_sends_only_what_its_api_accepts() -> None:
    t = Capture([Script(pieces=(Text("ok"),))] * 2)
    run_stream(azure(t, HUB + "/models"), "azure:mistral-large-2407")
    run_generate(
        azure(t, HUB),
        "azure:mistral-large-2407",
        reasoning="low",
        provider_options={"azure": {"safe_prompt": True}},
    )
    first, second = t.raw
    assert first.url.path == "/models/chat/completions"
    assert first.url.params["api-version"] == "2024-05-01-preview"
    assert json.loads(first.content)["model"] == "mistral-large-2407"
    assert "stream_options" not in json.loads(first.content)
    assert "extra-parameters" not in first.headers
    body = json.loads(second.content)
    assert "reasoning_effort" not in body
    assert body["safe_prompt"] is True
    assert second.headers["extra-parameters"] == "pass-through"


def test_openai_v1_route_has_no_api_version() -> None:
    t = Capture([Script(pieces=(Text("ok"),))])
    run_generate(azure(t, RESOURCE + "/openai/v1", options={"api": "openai-v1"}))
    (request,) = t.raw
    assert request.url.path == "/openai/v1/chat/completions"
    assert "api-version" not in request.url.params


# --- responses ---------------------------------------------------------------------------


def test_stream_skips_the_prompt_filter_chunk_and_reads_usage_and_tools() -> None:
    script = Script(
        pieces=(
            Text("Calling"),
            ToolFragment(0, '{"q": ', id="call_1", name="search"),
            ToolFragment(0, '"x"}'),
        ),
        finish_reason="tool_calls",
        usage=ScriptUsage(11, 7, cache_read_tokens=3),
    )
    events, result = run_stream(azure(FakeTransport("azure-openai", [script])))
    assert isinstance(result, ai.Generation), result
    assert result.text == "Calling"
    assert result.tool_calls == (ai.ToolCall("call_1", "search", {"q": "x"}),)
    assert result.usage == ai.Usage(11, 7, 18, cache_read_tokens=3)
    assert result.finish_reason == "tool_calls"
    assert result.warnings == ()  # safe verdicts are not warnings
    assert result.target.provider_id == "azure-foundry"
    assert isinstance(events[-1], ai.StreamEnded)


@pytest.mark.parametrize("streamed", [True, False])
def test_content_filter_finish_reason_and_warning(streamed: bool) -> None:
    script = Script(pieces=(Text("Once upon"),), finish_reason="content_filter")
    s = azure(FakeTransport("azure-openai", [script]))
    result = run_stream(s)[1] if streamed else run_generate(s)
    assert isinstance(result, ai.Generation), result
    assert result.finish_reason == "content_filter"
    assert result.text == "Once upon"
    assert result.warnings == (
        "azure: content filter flagged the completion for violence (severity medium)",
    )


@pytest.mark.parametrize(
    ("fault", "error_type"),
    [
        (
            Fault("status", status=400, code="content_filter", message="The response was filtered"),
            "ContentFilterError",
        ),
        (
            Fault(
                "status",
                status=400,
                code="context_length_exceeded",
                message="This model's maximum context length is 128000 tokens.",
            ),
            "ContextWindowError",
        ),
        (
            Fault("status", status=401, message="Access denied due to invalid subscription key"),
            "AuthenticationError",
        ),
        (
            Fault(
                "status", status=404, message="The API deployment for this resource does not exist."
            ),
            "ModelNotFoundError",
        ),
        (
            Fault("status", status=503, message="The service is temporarily unable to process"),
            "OverloadedError",
        ),
    ],
)
def test_azure_error_bodies_map_to_typed_errors(fault: Fault, error_type: str) -> None:
    info = failed_info(run_generate(azure(FakeTransport("azure-openai", [Script(fault=fault)]))))
    assert info.type_name == error_type
    assert info.http_status == fault.status
    assert fault.message[:40] in info.detail


def test_a_policy_innererror_alone_means_content_filter() -> None:
    body = {
        "error": {
            "message": "The prompt was blocked.",
            "type": None,
            "param": "prompt",
            "code": "BadRequest",
            "status": 400,
            "innererror": {
                "code": "ResponsibleAIPolicyViolation",
                "content_filter_result": {"jailbreak": {"filtered": True, "detected": True}},
            },
        }
    }

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(400, json=body)

    info = failed_info(run_generate(azure(httpx.MockTransport(answer))))
    assert info.type_name == "ContentFilterError"


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [({"retry-after-ms": "1500", "retry-after": "2"}, 1.5), ({"retry-after": "3"}, 3.0)],
)
def test_rate_limits_carry_azure_retry_headers(headers: dict[str, str], seconds: float) -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            429,
            headers=headers,
            json={"error": {"code": "429", "message": "Rate limit is exceeded."}},
        )

    async def go() -> ai.RateLimitError:
        adapter = AzureFoundryAdapter(azure(httpx.MockTransport(answer)))
        from anyinfer._request import GenerationRequest

        try:
            async for _ in adapter.generate(
                GenerationRequest(model="d", messages=(ai.Message.user("x"),))
            ):
                pass
        except ai.RateLimitError as exc:
            return exc
        finally:
            await adapter.aclose()
        raise AssertionError("expected a RateLimitError")

    exc = asyncio.run(go())
    assert exc.retry_after == seconds
    assert exc.retryable


def test_the_dialects_429_round_trips_retry_after_ms() -> None:
    fault = Fault("status", status=429, retry_after=2.5, message="slow down")
    info = failed_info(run_generate(azure(FakeTransport("azure-openai", [Script(fault=fault)]))))
    assert info.type_name == "RateLimitError"


def test_the_api_key_never_shows_in_errors() -> None:
    fault = Fault("status", status=401, message="key azure-secret-key is not valid")
    info = failed_info(run_generate(azure(FakeTransport("azure-openai", [Script(fault=fault)]))))
    assert "azure-secret-key" not in info.detail


# --- discovery and health ---------------------------------------------------------------------


def test_models_lists_the_resources_models_with_capabilities() -> None:
    t = Capture([])
    t.models = ["gpt-4o-2024-11-20", "o3-mini"]

    async def go() -> tuple[Any, Any]:
        async with ai.AsyncClient([azure(t)]) as client:
            return await client.models("azure"), await client.health("azure")

    models, health = asyncio.run(go())
    assert [m.id for m in models] == ["gpt-4o-2024-11-20", "o3-mini"]
    assert models[0].facts["chat_completion"] is True
    assert models[0].facts["lifecycle_status"] == "generally-available"
    assert models[0].facts["deprecation"] == {"inference": 1_800_000_000}
    assert health.ok and health.models == 2
    assert t.raw[0].url.path == "/openai/models"
    assert t.raw[0].url.params["api-version"] == "2024-10-21"


def test_model_inference_discovery_reads_models_info() -> None:
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(
            200,
            json={
                "model_name": "Mistral-large-2407",
                "model_type": "chat-completion",
                "model_provider_name": "Mistral",
            },
        )

    async def go() -> Any:
        async with ai.AsyncClient([azure(httpx.MockTransport(answer), HUB)]) as client:
            return await client.models("azure")

    (model,) = asyncio.run(go())
    assert model.id == "Mistral-large-2407"
    assert model.facts == {"model_type": "chat-completion", "provider": "Mistral"}
    assert seen[0].url.path == "/models/info"


def test_health_is_false_when_the_key_is_refused() -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(401, json={"error": {"code": "401", "message": "Access denied"}})

    async def go() -> ai.Health:
        async with ai.AsyncClient([azure(httpx.MockTransport(answer))]) as client:
            return await client.health("azure")

    health = asyncio.run(go())
    assert not health.ok
    assert "Access denied" in health.detail


# --- over a real socket ---------------------------------------------------------------------


def test_deployments_over_a_loopback_server() -> None:
    script = Script(pieces=(Text("Paris"),), usage=ScriptUsage(14, 9), read_sizes=(5,))
    with FakeServer("azure-openai", [script, script]) as srv:
        s = ai.ProviderSettings(
            "azure-foundry",
            base_url=srv.base_url,
            api_key="k",
            options={"api": "openai-deployments"},
        )
        with ai.Client([s]) as client:
            with client.stream("capital of France?", route=no_retry("azure-foundry:gpt-4o")) as st:
                events = list(st)
            whole = client.generate("capital of France?", route=no_retry("azure-foundry:gpt-4o"))
        srv.assert_all_used()
        paths = [r.path for r in srv.requests]
    assert paths == ["/openai/deployments/gpt-4o/chat/completions"] * 2
    for result in (st.result, whole):
        assert result.text == "Paris"
        assert result.usage == ai.Usage(14, 9, 23)
    assert isinstance(events[-1], ai.StreamEnded)
