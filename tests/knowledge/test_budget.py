"""Token estimates, context budgets and the context gate."""

from __future__ import annotations

import sys
import types
from collections.abc import Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from anyinfer._errors import ConfigError, ContextWindowError
from anyinfer._knowledge.budget import (
    DEFAULT_OUTPUT_RESERVE,
    IMAGE_TOKENS_CEILING,
    ByteHeuristicEstimator,
    ContextBudget,
    TiktokenEstimator,
    TokenEstimate,
    TokenEstimator,
    compute_budget,
    context_gate_error,
    gate_refuses,
)
from anyinfer._knowledge.capabilities import ModelCapabilities
from anyinfer._messages import ImageContent, Message, TextContent
from anyinfer._request import ToolSpec
from anyinfer._types import ToolCall


def caps(
    window: int | None, max_out: int | None = None, layer: str = "catalog"
) -> ModelCapabilities:
    return ModelCapabilities(context_window=window, max_output_tokens=max_out).at(layer)  # type: ignore[arg-type]


class Fixed:
    """An estimator returning fixed bounds, to test budgets independently of counting."""

    def __init__(self, floor: int, ceiling: int) -> None:
        self.result = TokenEstimate(floor, ceiling)

    def estimate(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        schema: object = None,
        model: str | None = None,
    ) -> TokenEstimate:
        return self.result


HELLO = [Message.user("hello")]


def test_token_estimate_validates() -> None:
    with pytest.raises(ConfigError):
        TokenEstimate(5, 4)
    with pytest.raises(ConfigError):
        TokenEstimate(-1, 4)
    with pytest.raises(ConfigError):
        TokenEstimate(3, 4, exact=True)
    assert TokenEstimate(4, 4, exact=True).exact


def test_byte_heuristic_counts_utf8_bytes() -> None:
    est = ByteHeuristicEstimator()
    text = "héllo wörld — 你好" * 10  # multi-byte characters count by bytes
    size = len(text.encode("utf-8"))
    result = est.estimate([Message.user(text)])
    assert result.floor == size // 8
    assert result.ceiling == size + 8 + 16
    assert not result.exact


def test_byte_heuristic_counts_everything_the_request_carries() -> None:
    est = ByteHeuristicEstimator()
    tool = ToolSpec(
        "lookup", "Find a thing", {"type": "object", "properties": {"q": {"type": "string"}}}
    )
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}}
    call = ToolCall("call_1", "lookup", {"q": "x" * 40})
    messages = [
        Message.system("be brief"),
        Message.assistant("", tool_calls=[call]),
        Message.tool_result("call_1", "result text", name="lookup"),
    ]
    bare = est.estimate(messages)
    full = est.estimate(messages, tools=[tool], schema=schema)
    assert full.floor > bare.floor
    assert full.ceiling >= bare.ceiling + 512  # the tool-use allowance
    assert bare.ceiling >= len("x" * 40)


def test_images_count_toward_the_ceiling_only() -> None:
    est = ByteHeuristicEstimator()
    image = ImageContent(data=b"\x89PNG" * 10_000, media_type="image/png")
    with_image = est.estimate([Message.user([TextContent("look"), image])])
    without = est.estimate([Message.user([TextContent("look")])])
    assert with_image.floor == without.floor  # base64 bytes are not text
    assert with_image.ceiling == without.ceiling + IMAGE_TOKENS_CEILING


@given(st.lists(st.text(max_size=200), min_size=1, max_size=5))
def test_floor_never_exceeds_ceiling(texts: list[str]) -> None:
    messages = [Message.user(t) for t in texts]
    result = ByteHeuristicEstimator().estimate(messages)
    size = sum(len(t.encode()) for t in texts)
    assert result.floor <= size <= result.ceiling


def test_estimators_satisfy_the_protocol() -> None:
    assert isinstance(ByteHeuristicEstimator(), TokenEstimator)
    assert isinstance(Fixed(1, 2), TokenEstimator)
    with pytest.raises(ConfigError):
        ByteHeuristicEstimator(floor_bytes_per_token=0)


# --- budgets -----------------------------------------------------------------------------


def test_unknown_window_has_no_verdict() -> None:
    budget = compute_budget(HELLO, capabilities=ModelCapabilities(), estimator=Fixed(10, 50))
    assert budget.context_window is None and budget.window_provenance is None
    assert budget.verdict is None and budget.remaining_tokens is None
    assert budget.output_reserve_tokens == DEFAULT_OUTPUT_RESERVE
    assert not gate_refuses(budget)


@pytest.mark.parametrize(
    ("floor", "ceiling", "verdict", "remaining"),
    [
        (100, 900, "fits", 1000 - 900 - 100),
        (100, 950, "may_not_fit", 1000 - 950 - 100),
        (1000, 1200, "may_not_fit", 1000 - 1200 - 100),
        (1001, 1200, "exceeds", 1000 - 1200 - 100),
    ],
)
def test_verdicts(floor: int, ceiling: int, verdict: str, remaining: int) -> None:
    budget = compute_budget(
        HELLO, capabilities=caps(1000), estimator=Fixed(floor, ceiling), output_reserve_tokens=100
    )
    assert budget.verdict == verdict
    assert budget.remaining_tokens == remaining
    assert budget.window_provenance == "catalog"
    assert gate_refuses(budget) == (verdict == "exceeds")


def test_reserve_precedence() -> None:
    est = Fixed(1, 1)
    model = caps(100_000, max_out=64_000)
    explicit = compute_budget(
        HELLO, capabilities=model, estimator=est, sampling_max_output=500, output_reserve_tokens=7
    )
    assert (explicit.output_reserve_tokens, explicit.reserve_source) == (7, "explicit")
    sampled = compute_budget(HELLO, capabilities=model, estimator=est, sampling_max_output=500)
    assert (sampled.output_reserve_tokens, sampled.reserve_source) == (500, "sampling")
    capped = compute_budget(HELLO, capabilities=model, estimator=est)
    assert (capped.output_reserve_tokens, capped.reserve_source) == (25_000, "capabilities")
    small = compute_budget(HELLO, capabilities=caps(100_000, max_out=4_096), estimator=est)
    assert small.output_reserve_tokens == 4_096
    no_window = compute_budget(HELLO, capabilities=caps(None, max_out=4_096), estimator=est)
    assert no_window.output_reserve_tokens == 4_096
    default = compute_budget(HELLO, capabilities=caps(100_000), estimator=est)
    assert (default.output_reserve_tokens, default.reserve_source) == (1024, "default")
    with pytest.raises(ConfigError):
        compute_budget(HELLO, capabilities=model, estimator=est, output_reserve_tokens=-1)


def test_gate_only_refuses_on_the_floor_of_a_trusted_known_window() -> None:
    # ceiling far over the window, floor under it: might fit, so never refused
    maybe = compute_budget(HELLO, capabilities=caps(1000), estimator=Fixed(999, 10_000))
    assert maybe.verdict == "may_not_fit" and not gate_refuses(maybe)
    # the output reserve never counts toward refusal
    reserve = compute_budget(
        HELLO, capabilities=caps(1000), estimator=Fixed(999, 999), output_reserve_tokens=5000
    )
    assert not gate_refuses(reserve)
    for layer in ("catalog", "discovery", "probe", "override"):
        over = compute_budget(
            HELLO, capabilities=caps(1000, layer=layer), estimator=Fixed(1001, 2000)
        )
        assert over.window_provenance == layer and gate_refuses(over)
    untrusted = ContextBudget(
        TokenEstimate(2000, 3000), 0, "explicit", 1000, None, -2000, "exceeds"
    )
    assert not gate_refuses(untrusted)


def test_default_estimator_with_real_text() -> None:
    big = [Message.user("word " * 20_000)]  # 100 000 bytes
    budget = compute_budget(big, capabilities=caps(8_192))
    assert budget.prompt.floor == 12_500
    assert budget.verdict == "exceeds" and gate_refuses(budget)
    roomy = compute_budget(big, capabilities=caps(128_000))
    assert roomy.verdict == "fits" and not gate_refuses(roomy)


def test_context_gate_error() -> None:
    budget = compute_budget(HELLO, capabilities=caps(1000), estimator=Fixed(5000, 6000))
    err = context_gate_error(budget, provider="openai", model="gpt-4o-mini")
    assert isinstance(err, ContextWindowError)
    assert not err.retryable and err.provider == "openai"
    assert "5000" in str(err) and "1000" in str(err) and "openai:gpt-4o-mini" in str(err)


# --- tiktoken ----------------------------------------------------------------------------


class _FakeEncoding:
    def encode(self, text: str) -> list[int]:
        return [0] * len(text.split())


def _fake_tiktoken() -> types.ModuleType:
    module = types.ModuleType("tiktoken")

    def encoding_for_model(model: str) -> _FakeEncoding:
        if not model.startswith("gpt-"):
            raise KeyError(model)
        return _FakeEncoding()

    def get_encoding(name: str) -> _FakeEncoding:
        return _FakeEncoding()

    module.encoding_for_model = encoding_for_model  # type: ignore[attr-defined]
    module.get_encoding = get_encoding  # type: ignore[attr-defined]
    return module


def test_tiktoken_missing_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "tiktoken", None)
    with pytest.raises(ConfigError, match=r"pip install 'anyinfer-kit\[tiktoken\]'$"):
        TiktokenEstimator()


def test_tiktoken_counts_exactly_when_it_can(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "tiktoken", _fake_tiktoken())
    est = TiktokenEstimator()
    messages = [Message.system("be very brief"), Message.user("one two three")]
    # priming 3 + per message (3 + role 1 + words)
    result = est.estimate(messages, model="gpt-4o")
    assert result == TokenEstimate(3 + (3 + 1 + 3) + (3 + 1 + 3), 3 + 7 + 7, exact=True)
    # tools make it bounds, with the exact count as floor
    bounded = est.estimate(messages, model="gpt-4o", tools=[ToolSpec("t")])
    assert not bounded.exact and bounded.floor == result.floor and bounded.ceiling > bounded.floor
    # a model tiktoken does not know falls back to the byte heuristic
    other = est.estimate(messages, model="claude-sonnet-4-5")
    assert other == ByteHeuristicEstimator().estimate(messages)
    forced = TiktokenEstimator("o200k_base").estimate(messages, model="claude-sonnet-4-5")
    assert forced.exact
