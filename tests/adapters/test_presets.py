"""The OpenAI-compatible presets table (`openai_compat.PRESETS`): its data, the quirks
the hosted services need, the key rule, and the docs table generated from it.

Each preset is one entry; these tests check that every entry is complete and sourced,
that its class carries what the entry says (URL, key variable, key rule), that the new
quirks (`seed_field`, `tool_choice_required`, `drop_fields`,
`retry_without_reasoning_effort`, `key_header`, `structured_output="tgi_grammar"`) reach
the wire, that OpenRouter's comments and in-stream errors are read as typed errors and
its routing options pass through, that the conformance suite groups the presets by how
they read responses, and that `docs/providers/quirks.md` lists exactly this table.

Regenerate the docs table with `ANYINFER_WRITE_DOCS=1 pytest tests/adapters/test_presets.py`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from helpers import NO_RETRY, sse

import anyinfer as ai
from anyinfer._adapters.profile import AdapterProfile
from anyinfer._adapters.registry import _BUILTINS
from anyinfer._client.instance import locality_of
from anyinfer._providers import openai_compat
from anyinfer._providers.openai_compat import (
    PRESETS,
    OpenAICompatAdapter,
    Preset,
    Quirks,
    preset_adapter,
    quirks_for,
    reading_behaviour,
)
from anyinfer._request import GenerationRequest
from anyinfer.conformance.registry import ConformanceRegistry, load_builtins, standing

DOC = Path(__file__).resolve().parents[2] / "docs" / "providers" / "quirks.md"
START, END = "<!-- presets:start -->", "<!-- presets:end -->"
GRADE = re.compile(r"^[DCSRU-]/[DCSRU-]/[DCSRU-]$")

# --- the table ------------------------------------------------------------------------


def test_at_least_sixty_presets_each_complete_and_sourced() -> None:
    assert len(PRESETS) >= 60
    for pid, preset in PRESETS.items():
        assert pid == pid.strip().lower() and ":" not in pid, pid
        assert preset.title and preset.source, pid
        assert GRADE.match(preset.evidence), (pid, preset.evidence)
        assert (preset.default_base_url is None) == bool(preset.base_url_template), pid
        url = preset.default_base_url or preset.base_url_template
        assert url.startswith(("http://", "https://")) and not url.endswith("/"), pid
        assert preset.profile.conformance_dialect, pid
        local = locality_of(preset.default_base_url) == "local"
        if local:
            # A local port never gets a hosted service's key.
            assert preset.api_key_env is None, pid
            assert preset.evidence.split("/")[1] == "-", pid
        else:
            assert preset.api_key_env and preset.api_key_env.isupper(), pid


def test_retired_services_and_taken_ids_are_not_presets() -> None:
    # GitHub Models (retired 2026-07-30) and Lambda's Inference API (sunset) are gone.
    assert not {"github-models", "lambda"} & set(PRESETS)
    # A preset never shadows a hand-written adapter (ollama, gemini, openai, ...).
    assert not set(PRESETS) & set(_BUILTINS)
    aliases = [a for p in PRESETS.values() for a in p.profile.aliases]
    assert len(aliases) == len(set(aliases))
    assert not set(aliases) & (set(PRESETS) | set(_BUILTINS))


def test_every_preset_class_carries_its_entry() -> None:
    registry = ai.ProviderRegistry(entry_points=False)
    for pid, preset in PRESETS.items():
        cls = registry.adapter_class(pid)
        assert cls is preset_adapter(pid)
        assert issubclass(cls, preset.base) and cls.preset is preset
        assert cls.default_base_url == preset.default_base_url
        assert cls.api_key_env == preset.api_key_env
        assert cls.api_key_required == preset.key_required
        assert cls.profile is preset.profile
        assert quirks_for(pid, {}) == dataclasses.replace(preset.quirks, engine=pid)
        for alias in preset.profile.aliases:
            assert registry.canonical(alias) == pid


def test_the_engines_that_became_presets_keep_their_quirks() -> None:
    groq, mistral = quirks_for("openai-compat", {"engine": "groq"}), quirks_for("mistral", {})
    assert (groq.stream_usage, groq.max_tokens_field) == (False, "max_completion_tokens")
    assert (mistral.stream_usage, mistral.seed_field, mistral.tool_choice_required) == (
        False,
        "random_seed",
        "any",
    )
    assert quirks_for("deepseek", {}).reasoning_fields == ("reasoning_content", "reasoning")
    assert quirks_for("xai", {}).retry_without_reasoning_effort is True
    assert quirks_for("tgi", {}).structured_output == "tgi_grammar"
    assert quirks_for("llamafile", {}) == dataclasses.replace(
        quirks_for("llama.cpp", {}), engine="llamafile"
    )


# --- keys and URLs -----------------------------------------------------------------------


def _send_one(
    s: ai.ProviderSettings, target: str, *, stream: bool = False, **kw: Any
) -> tuple[list[httpx.Request], ai.Generation]:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if json.loads(request.content).get("stream"):
            body = sse(
                {"choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": "stop"}]}
            )
            return httpx.Response(200, content=body, headers={"content-type": "text/event-stream"})
        message = {"role": "assistant", "content": "ok"}
        return httpx.Response(
            200, json={"choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}
        )

    s = dataclasses.replace(s, transport=httpx.MockTransport(handler))

    async def go() -> ai.Generation:
        async with ai.AsyncClient([s]) as client:
            route = ai.Route(target, retry=NO_RETRY)
            if not stream:
                return await client.generate("hi", route=route, **kw)
            async with client.stream("hi", route=route, **kw) as st:
                async for _ in st:
                    pass
            return st.result

    return seen, asyncio.run(go())


def test_a_hosted_preset_reads_its_own_key_variable_and_url(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("ANYINFER_GROQ_API_KEY", raising=False)
    monkeypatch.setenv("GROQ_API_KEY", "gsk-test")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-must-not-be-sent")
    seen, result = _send_one(ai.ProviderSettings("groq"), "groq:llama-3.3-70b")
    assert result.text == "ok"
    (request,) = seen
    assert str(request.url) == "https://api.groq.com/openai/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer gsk-test"
    # The instance's own variable wins over the provider's.
    monkeypatch.setenv("ANYINFER_GROQ_API_KEY", "gsk-instance")
    seen, _ = _send_one(ai.ProviderSettings("groq"), "groq:m")
    assert seen[0].headers["authorization"] == "Bearer gsk-instance"


@pytest.mark.parametrize("pid", ["groq", "openrouter", "jan", "tabbyapi"])
def test_a_preset_that_needs_a_key_says_which_variables_supply_one(
    pid: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    cls = preset_adapter(pid)
    for name in (f"ANYINFER_{pid.upper()}_API_KEY", cls.api_key_env):
        if name:
            monkeypatch.delenv(name, raising=False)
    with pytest.raises(ai.ConfigError, match="needs an API key") as info:
        cls(ai.ProviderSettings(pid))
    assert f"ANYINFER_{pid.upper()}_API_KEY" in str(info.value)
    if cls.api_key_env:
        assert cls.api_key_env in str(info.value)
    # Through the client, nothing is sent and the attempt says why.
    with pytest.raises(ai.AllTargetsFailedError, match="needs an API key"):
        _send_one(ai.ProviderSettings(pid), f"{pid}:m")


def test_local_presets_send_no_key_unless_given_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-must-not-leak")
    monkeypatch.delenv("ANYINFER_SGLANG_API_KEY", raising=False)
    seen, _ = _send_one(ai.ProviderSettings("sglang"), "sglang:m")
    assert str(seen[0].url) == "http://127.0.0.1:30000/v1/chat/completions"
    assert "authorization" not in seen[0].headers
    # OVHcloud's free tier takes no key.
    monkeypatch.delenv("OVHCLOUD_API_KEY", raising=False)
    monkeypatch.delenv("ANYINFER_OVHCLOUD_API_KEY", raising=False)
    seen, _ = _send_one(ai.ProviderSettings("ovhcloud"), "ovhcloud:m")
    assert "authorization" not in seen[0].headers


def test_a_templated_url_must_be_given_and_the_error_shows_its_shape() -> None:
    with pytest.raises(ai.ConfigError, match=r"accounts/\{account_id\}/ai/v1"):
        preset_adapter("cloudflare-workers-ai")(
            ai.ProviderSettings("cloudflare-workers-ai", api_key="k")
        )
    url = "https://api.cloudflare.com/client/v4/accounts/abc123/ai/v1"
    seen, _ = _send_one(
        ai.ProviderSettings("workers-ai", base_url=url, api_key="k"), "workers-ai:@cf/m"
    )
    assert str(seen[0].url) == url + "/chat/completions"


def test_key_header_sends_the_bare_key_in_its_own_header() -> None:
    seen, _ = _send_one(ai.ProviderSettings("sarvam", api_key="sv-1"), "sarvam:sarvam-m")
    assert seen[0].headers["api-subscription-key"] == "sv-1"
    assert "authorization" not in seen[0].headers
    override = {"quirks": {"key_header": "x-api-key"}}
    s = ai.ProviderSettings("tabbyapi", api_key="tb-1", options=override)
    seen, _ = _send_one(s, "tabbyapi:m")
    assert seen[0].headers["x-api-key"] == "tb-1" and "authorization" not in seen[0].headers


def test_preset_summaries_say_what_the_environment_supplies_without_values() -> None:
    env = {"GROQ_API_KEY": "gsk-secret", "ANYINFER_SGLANG_BASE_URL": "http://10.0.0.5:30000/v1"}
    rows = {r.provider_id: r for r in openai_compat.preset_summaries(env)}
    assert list(rows) == list(PRESETS)
    groq = rows["groq"]
    assert (groq.key_set, groq.ready, groq.local) == ("GROQ_API_KEY", True, False)
    assert groq.key_envs == ("ANYINFER_GROQ_API_KEY", "GROQ_API_KEY")
    assert "gsk-secret" not in repr(groq)
    assert (rows["together"].key_set, rows["together"].ready) == (None, False)
    assert rows["sglang"].base_url == "http://10.0.0.5:30000/v1" and not rows["sglang"].local
    assert rows["llama.cpp"].ready and rows["llama.cpp"].local
    cloudflare = rows["cloudflare-workers-ai"]
    assert cloudflare.base_url is None and "{account_id}" in cloudflare.base_url_template
    assert not cloudflare.ready


# --- request quirks ------------------------------------------------------------------------

TOOL = ai.ToolSpec("f", "A tool", {"type": "object", "properties": {}})


def _body(pid: str, **request: Any) -> dict[str, Any]:
    adapter = preset_adapter(pid)(ai.ProviderSettings(pid, api_key="k", base_url="http://x/v1"))
    fields: dict[str, Any] = {"model": "m", "messages": (ai.Message.user("x"),), **request}
    return adapter.build_body(GenerationRequest(**fields))


def test_mistral_sends_random_seed_and_any_for_a_required_tool() -> None:
    body = _body("mistral", sampling=ai.Sampling(seed=7), tools=(TOOL,), tool_choice="required")
    assert body["random_seed"] == 7 and "seed" not in body
    assert body["tool_choice"] == "any"
    # A named tool keeps OpenAI's form; other engines keep `seed` and "required".
    named = _body("mistral", tools=(TOOL,), tool_choice="f")
    assert named["tool_choice"] == {"type": "function", "function": {"name": "f"}}
    plain = _body("together", sampling=ai.Sampling(seed=7), tools=(TOOL,), tool_choice="required")
    assert (plain["seed"], plain["tool_choice"]) == (7, "required")


_REASONING_FIELDS = ("reasoning_effort", "thinking", "enable_thinking", "reasoning")


@pytest.mark.parametrize(
    ("pid", "effort", "expected"),
    [
        # DeepSeek (api-docs.deepseek.com/guides/thinking_mode): thinking.type toggles,
        # reasoning_effort sets the effort.
        ("deepseek", "none", {"thinking": {"type": "disabled"}}),
        ("deepseek", "high", {"thinking": {"type": "enabled"}, "reasoning_effort": "high"}),
        ("moonshot", "none", {"thinking": {"type": "disabled"}}),
        ("moonshot-cn", "low", {"thinking": {"type": "enabled"}, "reasoning_effort": "low"}),
        ("zai", "none", {"thinking": {"type": "disabled"}}),
        ("zhipu", "medium", {"thinking": {"type": "enabled"}, "reasoning_effort": "medium"}),
        # DashScope: enable_thinking true/false.
        ("dashscope", "none", {"enable_thinking": False}),
        ("dashscope", "minimal", {"enable_thinking": True, "reasoning_effort": "minimal"}),
        # OpenRouter's unified reasoning object, `none` included.
        ("openrouter", "high", {"reasoning": {"effort": "high"}}),
        ("openrouter", "none", {"reasoning": {"effort": "none"}}),
        # Everything else: OpenAI's reasoning_effort, `none` included.
        ("groq", "low", {"reasoning_effort": "low"}),
        ("together", "none", {"reasoning_effort": "none"}),
    ],
)
def test_reasoning_goes_in_each_engines_own_switch(
    pid: str, effort: str, expected: dict[str, Any]
) -> None:
    body = _body(pid, reasoning=effort)
    assert {k: body[k] for k in _REASONING_FIELDS if k in body} == expected
    unasked = _body(pid)
    assert not [k for k in _REASONING_FIELDS if k in unasked]


def test_reasoning_switch_is_one_quirk_and_provider_options_still_win() -> None:
    assert quirks_for("deepseek", {}).reasoning_switch == "thinking_type"
    assert quirks_for("dashscope", {}).reasoning_switch == "enable_thinking"
    assert quirks_for("openrouter", {}).reasoning_switch == "reasoning_object"
    assert quirks_for("openai-compat", {}).reasoning_switch == "reasoning_effort"
    # Any instance can pick a switch through options["quirks"].
    s = ai.ProviderSettings(
        "openai-compat",
        base_url="http://x/v1",
        options={"quirks": {"reasoning_switch": "enable_thinking"}},
    )
    request = GenerationRequest("m", (ai.Message.user("x"),), reasoning="none")
    assert OpenAICompatAdapter(s).build_body(request)["enable_thinking"] is False
    with pytest.raises(ai.ConfigError, match="thinking_type"):
        OpenAICompatAdapter(
            dataclasses.replace(s, options={"quirks": {"reasoning_switch": "thinking"}})
        )
    body = _body("deepseek", reasoning="none", provider_options={"thinking": {"type": "enabled"}})
    assert body["thinking"] == {"type": "enabled"}
    # send_reasoning_effort governs the effort fields; the on/off switch still goes.
    quiet = {"quirks": {"send_reasoning_effort": False}}
    for pid, kept in (("deepseek", {"thinking": {"type": "enabled"}}), ("openrouter", {})):
        adapter = preset_adapter(pid)(
            ai.ProviderSettings(pid, api_key="k", base_url="http://x/v1", options=quiet)
        )
        sent = adapter.build_body(GenerationRequest("m", (ai.Message.user("x"),), reasoning="high"))
        assert {k: sent[k] for k in _REASONING_FIELDS if k in sent} == kept


def test_reasoning_none_reaches_deepseek_as_its_switch_through_the_client() -> None:
    seen: list[dict[str, Any]] = []
    s = ai.ProviderSettings("deepseek", api_key="k", transport=_effort_server(seen, reject=False))

    async def go() -> None:
        async with ai.AsyncClient([s]) as client:
            route = ai.Route("deepseek:deepseek-chat", retry=NO_RETRY)
            await client.generate("hi", route=route, reasoning="none")
            await client.generate("hi", route=route, reasoning="high")

    asyncio.run(go())
    assert [(b.get("thinking"), b.get("reasoning_effort")) for b in seen] == [
        ({"type": "disabled"}, None),
        ({"type": "enabled"}, "high"),
    ]


def test_cerebras_drops_the_fields_it_rejects_with_a_warning_but_provider_options_win() -> None:
    sampling = ai.Sampling(temperature=0.5, presence_penalty=0.3, frequency_penalty=0.2)
    body = _body("cerebras", sampling=sampling)
    assert body["temperature"] == 0.5
    assert "presence_penalty" not in body and "frequency_penalty" not in body
    kept = _body("cerebras", sampling=sampling, provider_options={"presence_penalty": 0.1})
    assert kept["presence_penalty"] == 0.1
    seen, result = _send_one(
        ai.ProviderSettings("cerebras", api_key="k"), "cerebras:m", sampling=sampling
    )
    assert "frequency_penalty" not in json.loads(seen[0].content)
    assert any(
        "presence_penalty, frequency_penalty not sent: cerebras rejects them" in w
        for w in result.warnings
    )


def test_tgi_grammar_puts_the_schema_under_value() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    fmt = {"type": "json_schema", "name": "x", "schema": schema, "strict": True}
    assert _body("tgi", response_format=fmt)["response_format"] == {
        "type": "json",
        "value": schema,
    }
    assert _body("tgi", response_format={"type": "json_object"})["response_format"] == {
        "type": "json",
        "value": {"type": "object"},
    }


def _effort_server(seen: list[dict[str, Any]], reject: bool = True) -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        seen.append(body)
        if "reasoning_effort" in body and reject:
            error = {"code": "invalid-argument", "error": "Model does not support parameter "}
            error["error"] += "reasoningEffort."
            return httpx.Response(400, json=error)
        message = {"role": "assistant", "content": "ok"}
        return httpx.Response(
            200, json={"choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}
        )

    return httpx.MockTransport(handler)


def test_xai_retries_once_without_reasoning_effort_and_remembers_the_model() -> None:
    seen: list[dict[str, Any]] = []
    s = ai.ProviderSettings("xai", api_key="k", transport=_effort_server(seen))

    async def go() -> list[ai.Generation]:
        async with ai.AsyncClient([s]) as client:
            out = []
            for model in ("grok-4-1-fast", "grok-4-1-fast", "grok-3-mini"):
                route = ai.Route(f"xai:{model}", retry=NO_RETRY)
                out.append(await client.generate("hi", route=route, reasoning="high"))
            return out

    first, second, other = asyncio.run(go())
    assert [("reasoning_effort" in b, b["model"]) for b in seen] == [
        (True, "grok-4-1-fast"),
        (False, "grok-4-1-fast"),  # the retry, inside the same attempt
        (False, "grok-4-1-fast"),  # remembered for this model
        (True, "grok-3-mini"),  # another model is asked again
        (False, "grok-3-mini"),
    ]
    assert len(first.attempts) == 1 and first.text == "ok"
    assert any("rejected reasoning_effort" in w for w in first.warnings)
    assert not any("reasoning_effort" in w for w in second.warnings)
    assert other.text == "ok"


def test_without_the_quirk_a_reasoning_effort_400_is_an_error() -> None:
    seen: list[dict[str, Any]] = []
    s = ai.ProviderSettings("groq", api_key="k", transport=_effort_server(seen))

    async def go() -> None:
        async with ai.AsyncClient([s]) as client:
            await client.generate("hi", route=ai.Route("groq:m", retry=NO_RETRY), reasoning="low")

    with pytest.raises(ai.AllTargetsFailedError):
        asyncio.run(go())
    assert len(seen) == 1


# --- OpenRouter ------------------------------------------------------------------------------


def test_openrouter_comments_are_skipped_and_an_error_event_after_the_200_is_typed() -> None:
    chunk = {"choices": [{"index": 0, "delta": {"content": "Partial"}, "finish_reason": None}]}
    error = {"id": "gen-1", "error": {"code": 429, "message": "Rate limit exceeded upstream"}}
    body = sse(chunk, error, comments=[b": OPENROUTER PROCESSING\n\n"] * 2)
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, content=body, headers={"content-type": "text/event-stream"})

    s = ai.ProviderSettings("openrouter", api_key="or-1", transport=httpx.MockTransport(handler))
    events: list[ai.StreamEvent] = []

    async def go() -> None:
        async with ai.AsyncClient([s]) as client:
            route = ai.Route("openrouter:anthropic/claude-sonnet-4", retry=NO_RETRY)
            options = {
                "openrouter": {"provider": {"order": ["anthropic"], "allow_fallbacks": False}}
            }
            async with client.stream("hi", route=route, provider_options=options) as st:
                async for event in st:
                    events.append(event)

    with pytest.raises(ai.RateLimitError, match="Rate limit exceeded upstream") as info:
        asyncio.run(go())
    assert info.value.http_status == 429 and info.value.phase == "stream"
    assert "".join(e.text for e in events if isinstance(e, ai.TextDelta)) == "Partial"
    (request,) = seen
    assert str(request.url) == "https://openrouter.ai/api/v1/chat/completions"
    sent = json.loads(request.content)
    # Routing options are top-level body fields, merged last.
    assert sent["provider"] == {"order": ["anthropic"], "allow_fallbacks": False}


def test_openrouter_model_fallbacks_pass_through() -> None:
    body = _body("openrouter", provider_options={"models": ["a/x", "b/y"], "route": "fallback"})
    assert body["models"] == ["a/x", "b/y"] and body["model"] == "m"


# --- quirk overrides and records ----------------------------------------------------------


def test_new_quirks_are_checked_like_the_others() -> None:
    base = ai.ProviderSettings("openai-compat", base_url="http://x/v1")
    ok = {"drop_fields": ["user"], "seed_field": "random_seed", "key_header": "x-api-key"}
    adapter = OpenAICompatAdapter(dataclasses.replace(base, options={"quirks": ok}))
    assert adapter.quirks.drop_fields == ("user",)
    for bad, match in (
        ({"drop_fields": "user"}, "list of non-empty strings"),
        ({"retry_without_reasoning_effort": 1}, "true or false"),
        ({"tool_choice_required": ""}, "non-empty string"),
        ({"structured_output": "tgi"}, "tgi_grammar"),
    ):
        with pytest.raises(ai.ConfigError, match=match):
            OpenAICompatAdapter(dataclasses.replace(base, options={"quirks": bad}))


# --- conformance grouping ----------------------------------------------------------------


def test_conformance_groups_presets_by_how_they_read_responses() -> None:
    registry = ConformanceRegistry()
    load_builtins(registry)
    entries = {e.name: e for e in registry.entries()}
    assert set(PRESETS) <= set(entries)
    assert entries["openai-compat"].stands_on is None
    assert entries["llama.cpp"].stands_on is None
    assert entries["llamafile"].stands_on == "llama.cpp"
    for pid in ("groq", "mistral", "cerebras", "xai", "sarvam", "vllm", "tgi"):
        assert entries[pid].stands_on == "openai-compat", pid
    # Hand-written adapters and settings variants always run in full.
    for name in ("openai", "anthropic", "gemini", "ollama", "azure-foundry", "gemini-json-array"):
        assert entries[name].stands_on is None
    stands = standing(registry.entries())
    assert len(stands) >= 60
    # Naming a preset without its basis checks it in full.
    assert standing([entries["groq"]]) == {}
    assert standing([entries["groq"], entries["openai-compat"]]) == {"groq": "openai-compat"}
    # A basis replaced by a hook is no basis.
    replaced = dataclasses.replace(entries["openai-compat"], origin="pytest_anyinfer_configure")
    assert standing([entries["groq"], replaced]) == {}


def test_a_reading_quirk_makes_its_own_group(monkeypatch: pytest.MonkeyPatch) -> None:
    timed = Preset(
        "http://127.0.0.1:9912/v1",
        AdapterProfile(conformance_dialect="openai-chat"),
        Quirks(timings=True),
        title="Acme",
        evidence="D/-/D",
        source="test",
    )
    asked_only = dataclasses.replace(timed, quirks=Quirks(max_tokens_field="x", stream_usage=False))
    monkeypatch.setattr(
        openai_compat, "PRESETS", {**PRESETS, "acme-timed": timed, "acme-asks": asked_only}
    )
    assert reading_behaviour(preset_adapter("acme-timed")) != reading_behaviour(OpenAICompatAdapter)
    assert reading_behaviour(preset_adapter("acme-asks")) == reading_behaviour(OpenAICompatAdapter)
    from anyinfer._adapters import registry as _registry

    monkeypatch.setattr(_registry, "_default", ai.ProviderRegistry(entry_points=False))
    conformance = ConformanceRegistry()
    load_builtins(conformance)
    assert conformance.get("acme-timed").stands_on is None
    assert conformance.get("acme-asks").stands_on == "openai-compat"


# --- the docs table ------------------------------------------------------------------------


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    return json.dumps(value)


def _quirks_cell(pid: str, preset: Preset) -> str:
    generic = Quirks()
    changed = [
        f"`{f.name}: {_value(getattr(preset.quirks, f.name))}`"
        for f in dataclasses.fields(Quirks)
        if f.name != "engine" and getattr(preset.quirks, f.name) != getattr(generic, f.name)
    ]
    grade = preset.evidence.split("/")[2]
    if changed:
        return ", ".join(changed)
    return "generic, unverified" if grade == "U" else "generic"


def _embeddings_cell(preset: Preset) -> str:
    fact = {True: "yes", False: "no", None: "unknown"}[preset.embeddings]
    grade = preset.embeddings_source.partition(":")[0]
    cap = f", at most {preset.embed_max_batch} a request" if preset.embed_max_batch else ""
    return f"{fact} ({grade}{cap})"


def render_presets() -> str:
    """The docs table of every preset, generated from `PRESETS`."""
    lines = [
        "| id | service or engine | base URL | key variable | key | embeddings | quirks "
        "| evidence | source |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for pid, p in PRESETS.items():
        url = (
            f"`{p.default_base_url}`"
            if p.default_base_url
            else f"`{p.base_url_template}` (give it)"
        )
        key_env = f"`{p.api_key_env}`" if p.api_key_env else "—"
        key = "required" if p.key_required else "optional"
        aliases = ", ".join(f"`{a}`" for a in p.profile.aliases)
        name = p.title + (f" (aliases {aliases})" if aliases else "")
        embeds = _embeddings_cell(p)
        cells = [f"`{pid}`", name, url, key_env, key, embeds, _quirks_cell(pid, p)]
        cells += [p.evidence, p.source]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    lines += ["", "Notes per preset:", ""]
    lines += [f"- `{pid}`: {p.notes}" for pid, p in PRESETS.items() if p.notes]
    lines += ["", "Where each preset's embeddings fact comes from:", ""]
    lines += [f"- `{pid}`: {p.embeddings_source}" for pid, p in PRESETS.items()]
    return "\n".join(lines)


def test_the_docs_table_is_generated_from_the_presets() -> None:
    text = DOC.read_text(encoding="utf-8")
    assert START in text and END in text, f"{DOC} lacks the {START} ... {END} markers"
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    expected = f"{head}{START}\n{render_presets()}\n{END}{tail}"
    if os.environ.get("ANYINFER_WRITE_DOCS") == "1" and expected != text:
        DOC.write_text(expected, encoding="utf-8")
        text = expected
    assert text == expected, (
        "docs/providers/quirks.md's preset table differs from PRESETS; regenerate it with "
        "ANYINFER_WRITE_DOCS=1 pytest tests/adapters/test_presets.py"
    )


# --- the conformance entry check catches a broken preset ----------------------------------


def _entry_check(name: str) -> None:
    from anyinfer.conformance import _suite

    registry = ConformanceRegistry()
    load_builtins(registry)
    _suite.test_preset_entry(registry.get(name), registry)


def test_the_entry_check_passes_a_sound_preset() -> None:
    for name in ("groq", "sarvam", "cerebras", "cloudflare-workers-ai", "llamafile", "jan"):
        _entry_check(name)


@pytest.mark.parametrize(
    ("attr", "broken", "match"),
    [
        ("chat_path", lambda self, request: "/v2/chat/completions", "not under"),
        ("default_headers", lambda self: {}, "key not in authorization"),
        (
            "build_body",
            lambda self, request: {
                k: v
                for k, v in OpenAICompatAdapter.build_body(self, request).items()
                if k != "stream_options"
            },
            "stream_options missing",
        ),
        ("parts_from_delta", lambda self, delta, key: iter(()), "broke"),
    ],
)
def test_the_entry_check_fails_a_broken_preset(
    attr: str, broken: Any, match: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from anyinfer.conformance.runner import ConformanceFailure

    monkeypatch.setattr(preset_adapter("together"), attr, broken)
    with pytest.raises((AssertionError, ConformanceFailure), match=match):
        _entry_check("together")
