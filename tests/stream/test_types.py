"""Public types, errors, redaction, messages and settings."""

from __future__ import annotations

import dataclasses
from decimal import Decimal

import pytest

import anyinfer as ai


def test_usage_merge_later_wins_and_none_never_overwrites() -> None:
    a = ai.Usage(input_tokens=10, output_tokens=1, cost_usd=Decimal("0.1"))
    b = ai.Usage(output_tokens=5, reasoning_tokens=2)
    merged = a.merge(b)
    assert merged == ai.Usage(
        input_tokens=10, output_tokens=5, reasoning_tokens=2, cost_usd=Decimal("0.1")
    )
    assert a.merge(ai.Usage()) == a


def test_usage_normalized_fills_total_only_when_both_known() -> None:
    assert ai.Usage(3, 4).normalized().total_tokens == 7
    assert ai.Usage(3).normalized().total_tokens is None
    assert ai.Usage(3, 4, total_tokens=9).normalized().total_tokens == 9


def test_public_types_are_frozen_and_report_public_module() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        ai.TextDelta("x").text = "y"  # type: ignore[misc]
    for name in ("Generation", "Usage", "TextDelta", "StreamEnded", "Client", "ProviderError"):
        assert getattr(ai, name).__module__ == "anyinfer"
    assert set(ai.__all__) <= set(dir(ai))


def test_error_carries_context_and_info() -> None:
    err = ai.RateLimitError("slow down", provider="openai", http_status=429, retry_after=2.5)
    assert err.retryable and err.retry_after == 2.5
    info = err.to_info()
    assert info == ai.ErrorInfo(
        "RateLimitError", "openai", "generate", True, 429, "slow down", retry_after=2.5
    )
    assert issubclass(ai.ProtocolError, ai.StreamError)
    assert issubclass(ai.StreamError, ai.ProviderError)
    assert not ai.ProtocolError("x").retryable


def test_error_detail_is_capped() -> None:
    info = ai.ProviderError("x" * (ai.DETAIL_MAX_CHARS + 50)).to_info()
    assert len(info.detail) == ai.DETAIL_MAX_CHARS


def test_registered_secret_never_appears() -> None:
    secret = "sk-test-registered-secret-1234"
    ai.register_secret(secret)
    err = ai.AuthenticationError(f"bad key {secret}", provider="openai", http_status=401)
    for text in (str(err), repr(err), err.to_info().detail):
        assert secret not in text and "[secure]" in text


def test_secret_registered_later_is_still_masked() -> None:
    secret = "late-secret-value-9876"
    err = ai.ProviderError(f"echo {secret}")
    ai.register_secret(secret)
    assert secret not in str(err)
    assert secret not in err.to_info().detail


def test_settings_repr_hides_key_and_of_normalizes() -> None:
    s = ai.ProviderSettings.of(" OpenAI ", api_key="sk-literal-abc", alias="Work")
    assert s.provider_id == "openai" and s.alias == "work" and s.instance_id == "work"
    assert "sk-literal-abc" not in repr(s)
    with pytest.raises(ai.ConfigError):
        ai.ProviderSettings("")
    with pytest.raises(ai.ConfigError):
        ai.ProviderSettings("openai", alias="a:b")


def test_env_credential_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANYINFER_TEST_KEY", "env-secret-value-5555")
    resolved, key = ai.ProviderSettings(
        "openai", api_key="env://ANYINFER_TEST_KEY"
    ).with_resolved_key()
    assert key == "env-secret-value-5555" and resolved.api_key == key
    assert "env-secret-value-5555" not in str(ai.ProviderError("x env-secret-value-5555"))
    monkeypatch.delenv("ANYINFER_TEST_KEY")
    with pytest.raises(ai.ConfigError, match="ANYINFER_TEST_KEY"):
        ai.ProviderSettings("openai", api_key="env://ANYINFER_TEST_KEY").with_resolved_key()


def test_messages_normalize_once() -> None:
    from anyinfer._messages import normalize_messages

    assert normalize_messages("hi") == (ai.Message("user", "hi"),)
    m = ai.Message.user(
        [ai.TextContent("look"), ai.ImageContent(data=b"\x89PNG", media_type="image/png")]
    )
    assert normalize_messages(m) == (m,)
    assert normalize_messages([m, ai.Message.assistant("ok")])[1].role == "assistant"
    with pytest.raises(ai.ConfigError):
        normalize_messages([])
    with pytest.raises(ai.ConfigError):
        normalize_messages(["hi"])  # type: ignore[list-item]
    with pytest.raises(ai.ConfigError):
        ai.Message("tool", "result")  # no tool_call_id
    with pytest.raises(ai.ConfigError):
        ai.ImageContent()
    img = ai.ImageContent(data=b"abc", media_type="image/png")
    assert img.as_data_url() == "data:image/png;base64,YWJj"
    assert ai.ImageContent(url="data:image/png;base64,YWJj").base64_data() == ("image/png", "YWJj")


def test_registry_aliases_and_unknown_provider() -> None:
    reg = ai.ProviderRegistry(entry_points=False)
    reg.register("acme", "anyinfer._providers.openai_chat:OpenAIChatAdapter", aliases=("wile",))
    assert reg.canonical("WILE") == "acme"
    assert reg.adapter_class("wile").__name__ == "OpenAIChatAdapter"
    with pytest.raises(ai.ConfigError, match="did you mean"):
        reg.adapter_class("acmee")
    with pytest.raises(ai.ConfigError):
        reg.register("acme", "x:y")


def test_sampling_wire_fields_maps_and_reports_unsupported() -> None:
    s = ai.Sampling(temperature=0.2, max_output_tokens=9, stop=("x",), seed=3)
    fields, unsupported = s.wire_fields(
        {"temperature": "temp", "stop": "stop_sequences", "max_output_tokens": None}
    )
    assert fields == {"temp": 0.2, "stop_sequences": ["x"]}
    assert unsupported == ["seed"]  # set, but the protocol has no field for it
    assert ai.Sampling().wire_fields({}) == ({}, [])
