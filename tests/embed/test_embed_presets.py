"""Which OpenAI-compatible presets embed: each preset's documented `/embeddings` fact.

Every `PRESETS` entry records whether its service's OpenAI-compatible API serves
`POST {base}/embeddings` (`Preset.embeddings`: `True`, `False` or `None` for unknown)
and where that comes from. Only a documented `True` makes the class embed; a `False`
or unknown preset is refused before anything is sent, with a message saying why and
naming the opt-in, `ProviderSettings(options={"embeddings": True})` (which also turns a
documented preset off with `False`). Served by the fake `openai-chat` dialect over
loopback HTTP.
"""

from __future__ import annotations

import asyncio
import dataclasses
from array import array
from typing import Any

import pytest

import anyinfer as ai
from anyinfer._adapters.registry import default_registry
from anyinfer._embed._types import EmbedRequest
from anyinfer._providers.openai_compat import (
    PRESETS,
    OpenAICompatAdapter,
    _hosted,
    preset_adapter,
)
from anyinfer.fakeservers import FakeServer, FakeTransport, Script
from anyinfer.fakeservers.dialects._embeddings import fake_vector

OPT_IN = "options={'embeddings': True}"


def preset(pid: str, base_url: str, **options: Any) -> ai.ProviderSettings:
    return ai.ProviderSettings(pid, api_key="k", base_url=base_url, options=options)


def f32(values: list[float]) -> array[float]:
    return array("f", values)


# --- the fact every preset records ------------------------------------------------------


@pytest.mark.parametrize("pid", list(PRESETS))
def test_every_preset_records_its_embeddings_fact(pid: str) -> None:
    entry = PRESETS[pid]
    assert entry.embeddings is None or type(entry.embeddings) is bool
    grade, _, where = entry.embeddings_source.partition(": ")
    assert grade in {"D", "C", "S", "U"} and where.strip(), entry.embeddings_source
    if entry.embeddings is True:
        assert grade in {"D", "C"}, "only a documented (or corroborated) route embeds"
    if grade == "U":
        assert entry.embeddings is None, "nothing found is unknown, not absent"
    cls = preset_adapter(pid)
    assert cls.serves_embeddings() is (entry.embeddings is True)
    assert ("embed" in cls.operations()) is (entry.embeddings is True)
    if entry.embed_max_batch is not None:
        assert entry.embed_max_batch > 0 and cls.embed_max_batch == entry.embed_max_batch


def test_a_new_hosted_entry_cannot_skip_the_decision() -> None:
    with pytest.raises(TypeError, match="embeddings"):
        _hosted("Acme", "https://acme.test/v1", "ACME_API_KEY", "U/U/U", "nowhere")  # type: ignore[call-arg]


def test_the_generic_adapter_embeds_unless_an_instance_says_no() -> None:
    assert OpenAICompatAdapter.serves_embeddings()
    on = ai.ProviderSettings("openai-compat", base_url="http://127.0.0.1:9/v1")
    off = dataclasses.replace(on, options={"embeddings": False})
    assert OpenAICompatAdapter.embeddings_refusal(on) is None
    assert "turned off" in str(OpenAICompatAdapter.embeddings_refusal(off))


# --- documented presets embed -------------------------------------------------------------


@pytest.mark.loopback
@pytest.mark.parametrize("pid", ["sambanova", "openrouter", "llama.cpp", "vllm"])
def test_a_documented_preset_embeds_over_loopback(pid: str) -> None:
    assert PRESETS[pid].embeddings is True
    with FakeServer("openai-chat", [Script()]) as srv:
        with ai.Client([preset(pid, srv.base_url)]) as client:
            result = client.embed(["cats", "dogs"], target=f"{pid}:embed-model")
        srv.assert_all_used()
    assert [r.path for r in srv.requests] == ["/v1/embeddings"]
    assert srv.requests[0].json["input"] == ["cats", "dogs"]
    assert result.vectors == (f32(fake_vector("cats")), f32(fake_vector("dogs")))


@pytest.mark.loopback
def test_a_documented_batch_limit_splits_requests() -> None:
    # DashScope documents at most 10 inputs per OpenAI-compatible embeddings request.
    texts = [f"text {i}" for i in range(23)]
    with FakeServer("openai-chat", [Script()] * 3) as srv:
        with ai.Client([preset("dashscope", srv.base_url)]) as client:
            result = client.embed(texts, target="dashscope:text-embedding-v4")
        srv.assert_all_used()
    assert sorted(len(r.json["input"]) for r in srv.requests) == [3, 10, 10]
    assert result.vectors == tuple(f32(fake_vector(t)) for t in texts)


# --- refused before anything is sent -------------------------------------------------------


@pytest.mark.loopback
@pytest.mark.parametrize(
    ("pid", "why"),
    [
        ("groq", "does not serve OpenAI's POST /embeddings"),  # documented absent
        ("lmdeploy", "does not serve OpenAI's POST /embeddings"),  # a stub that answers 400
        ("zai", "is unknown to AnyInfer"),  # not found either way
        ("hyperbolic", "is unknown to AnyInfer"),
    ],
)
def test_an_undocumented_or_absent_route_is_refused_before_dispatch(pid: str, why: str) -> None:
    assert PRESETS[pid].embeddings is not True
    with FakeServer("openai-chat", []) as srv:
        with ai.Client([preset(pid, srv.base_url)]) as client:
            with pytest.raises(ai.ConfigError) as info:
                client.embed(["a"], target=f"{pid}:some-model")
            # generation is unaffected: the preset still generates
            assert "generate" in preset_adapter(pid).operations()
        assert srv.requests == []
    message = str(info.value)
    assert f"{pid}:some-model cannot embed" in message and why in message
    assert OPT_IN in message and PRESETS[pid].embeddings_source in message
    assert info.value.provider == pid


@pytest.mark.loopback
def test_a_refused_fallback_refuses_the_whole_route_before_dispatch() -> None:
    with FakeServer("openai-chat", []) as srv:
        providers = [preset("together", srv.base_url), preset("zai", srv.base_url)]
        with ai.Client(providers) as client:
            with pytest.raises(ai.ConfigError, match=r"zai:m cannot embed"):
                client.embed(["a"], route=["together:m", "zai:m"])
        assert srv.requests == []


def test_the_adapter_itself_refuses_without_sending() -> None:
    transport = FakeTransport("openai-chat", [])
    settings = ai.ProviderSettings("zai", api_key="k", transport=transport)
    adapter = preset_adapter("zai")(settings)
    request = EmbedRequest(model="embedding-3", inputs=("a",))
    with pytest.raises(ai.ConfigError, match="is unknown to AnyInfer"):
        asyncio.run(adapter.embed(request))
    assert transport.requests == []


# --- the option: opt in, opt out, and its type ------------------------------------------


@pytest.mark.loopback
@pytest.mark.parametrize("pid", ["zai", "groq"])
def test_an_instance_opts_in(pid: str) -> None:
    with FakeServer("openai-chat", [Script()]) as srv:
        with ai.Client([preset(pid, srv.base_url, embeddings=True)]) as client:
            result = client.embed("one text", target=f"{pid}:embedding-3")
        srv.assert_all_used()
    assert srv.requests[0].path == "/v1/embeddings"
    assert result[0] == f32(fake_vector("one text"))


@pytest.mark.loopback
def test_an_instance_of_a_documented_preset_opts_out() -> None:
    with FakeServer("openai-chat", []) as srv:
        with ai.Client([preset("together", srv.base_url, embeddings=False)]) as client:
            with pytest.raises(ai.ConfigError, match=r"turned off for this instance"):
                client.embed(["a"], target="together:m")
        assert srv.requests == []


@pytest.mark.parametrize("bad", ["yes", "true", 1, 0, 1.0, ["x"], {"on": True}])
def test_an_ill_typed_option_is_refused(bad: object) -> None:
    transport = FakeTransport("openai-chat", [])
    settings = ai.ProviderSettings(
        "zai", api_key="k", transport=transport, options={"embeddings": bad}
    )
    with ai.Client([settings]) as client:
        with pytest.raises(ai.ConfigError, match=r"options\['embeddings'\] must be True or False"):
            client.embed(["a"], target="zai:m")
    # building the adapter (what generation does first) refuses it too
    with pytest.raises(ai.ConfigError, match=r"must be True or False"):
        preset_adapter("zai")(settings)
    assert transport.requests == []


def test_none_means_the_presets_own_answer() -> None:
    together = ai.ProviderSettings("together", api_key="k", options={"embeddings": None})
    zai = ai.ProviderSettings("zai", api_key="k", options={"embeddings": None})
    assert preset_adapter("together").embeddings_refusal(together) is None
    assert "is unknown" in str(preset_adapter("zai").embeddings_refusal(zai))


def test_other_adapters_do_not_take_the_option() -> None:
    # Only the OpenAI-compatible adapter understands options["embeddings"]; another
    # adapter's answer is its class's.
    anthropic = ai.ProviderSettings("anthropic", api_key="k", options={"embeddings": True})
    cls = default_registry().adapter_class("anthropic")
    assert "no embeddings support" in str(cls.embeddings_refusal(anthropic))
