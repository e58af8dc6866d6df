"""Token estimates, context budgets and the pre-dispatch context gate.

An estimator answers "how many tokens is this prompt?" with a floor and a ceiling. The
default `ByteHeuristicEstimator` needs no tokenizer and no network:

- **ceiling** — one token per UTF-8 byte of everything the request carries (message text,
  tool-call arguments, tool declarations, the structured-output schema), plus fixed
  allowances for chat-template framing. Byte-level BPE tokenizers (GPT, Llama 3, Qwen)
  and SentencePiece with byte fallback (Gemma, Mistral) never produce more than one
  token per byte, so this bounds the content; the allowances cover the framing.
- **floor** — bytes / 8. Current tokenizers average three to five bytes per token on
  English prose and code, and fewer on most other scripts; a whole prompt averaging more
  than eight would have to consist mostly of long runs of repeated characters. The floor
  is a lower bound for natural language, not for arbitrary bytes.
- **images** — a fixed allowance: `IMAGE_TOKENS_CEILING` toward the ceiling (above what
  OpenAI, Anthropic or Gemini charge for one image at their default detail), nothing
  toward the floor.
- **documents and audio** — nothing toward the floor; toward the ceiling, one token per
  byte of inline data (far above what any provider charges for audio; a PDF's pages
  are charged as text plus page images, which its bytes do not bound in every case),
  and at least the image allowance. A part given by URL has no size here, so it adds
  the image allowance only: with documents or audio by URL the ceiling is a guess,
  not a bound. Neither ever makes the context gate refuse, which reads the floor.

`compute_budget` turns an estimate and a model's capabilities into a `ContextBudget`;
`gate_refuses` is the context gate: it refuses a target only when the window is known,
its provenance is trusted, and even the *floor* does not fit — so a heuristic never
refuses a request that might have fitted.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from .._errors import ConfigError, ContextWindowError
from .._messages import AudioContent, DocumentContent, ImageContent, Message
from .._values import value_class
from .capabilities import ModelCapabilities, Provenance, is_trusted

if TYPE_CHECKING:
    from .._request import ToolSpec

__all__ = [
    "DEFAULT_OUTPUT_RESERVE",
    "IMAGE_TOKENS_CEILING",
    "RESERVE_WINDOW_FRACTION",
    "ByteHeuristicEstimator",
    "ContextBudget",
    "ReserveSource",
    "TiktokenEstimator",
    "TokenEstimate",
    "TokenEstimator",
    "Verdict",
    "compute_budget",
    "context_gate_error",
    "gate_refuses",
]

IMAGE_TOKENS_CEILING = 2_560
"""Tokens one image may add to the ceiling estimate."""

DEFAULT_OUTPUT_RESERVE = 1_024
"""Output reserve when neither the caller nor the model's capabilities say otherwise."""

RESERVE_WINDOW_FRACTION = 4
"""A model's `max_output_tokens` reserves at most 1/4 of its context window."""

Verdict = Literal["fits", "may_not_fit", "exceeds"]
"""Whether a prompt fits: surely (ceiling + reserve fit), maybe, or surely not (floor
alone overflows the window)."""

ReserveSource = Literal["explicit", "sampling", "capabilities", "default"]
"""Where the output reserve came from."""


@value_class
class TokenEstimate:
    """How many tokens a prompt takes, as bounds.

    Attributes:
        floor: The prompt takes at least this many tokens.
        ceiling: The prompt takes at most this many tokens.
        exact: Whether the count is exact (then `floor == ceiling`).
    """

    floor: int
    ceiling: int
    exact: bool = False

    def __post_init__(self) -> None:
        if self.floor < 0 or self.ceiling < self.floor:
            raise ConfigError(f"bad token estimate: floor={self.floor}, ceiling={self.ceiling}")
        if self.exact and self.floor != self.ceiling:
            raise ConfigError("an exact token estimate needs floor == ceiling")


@runtime_checkable
class TokenEstimator(Protocol):
    """A token counting strategy for budgets and the context gate."""

    def estimate(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        schema: Mapping[str, Any] | None = None,
        model: str | None = None,
    ) -> TokenEstimate:
        """Estimate the prompt tokens of a request.

        Args:
            messages: The conversation.
            tools: Tools the request offers.
            schema: The structured-output JSON Schema it carries, if any.
            model: The provider's model name, for estimators that care.
        """
        ...


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)


def _request_texts(
    messages: Sequence[Message], tools: Sequence[ToolSpec], schema: Mapping[str, Any] | None
) -> tuple[list[str], int]:
    """Every text the request carries, and how many attachments (images, documents,
    audio) it holds."""
    texts: list[str] = []
    images = 0
    for message in messages:
        if isinstance(message.content, str):
            texts.append(message.content)
        else:
            for part in message.content:
                if isinstance(part, ImageContent | DocumentContent | AudioContent):
                    images += 1
                else:
                    texts.append(part.text)
        for call in message.tool_calls:
            texts.append(call.id)
            texts.append(call.name)
            texts.append(_compact(dict(call.arguments)))
        if message.tool_call_id:
            texts.append(message.tool_call_id)
        if message.name:
            texts.append(message.name)
    for tool in tools:
        texts.append(tool.name)
        texts.append(tool.description)
        texts.append(_compact(dict(tool.parameters)))
    if schema is not None:
        texts.append(_compact(dict(schema)))
    return texts, images


def _media_excess(messages: Sequence[Message], allowance: int) -> int:
    """What inline documents and audio add to the ceiling beyond the per-part allowance:
    one token per byte of their data, less the allowance already counted."""
    extra = 0
    for message in messages:
        if isinstance(message.content, str):
            continue
        for part in message.content:
            if isinstance(part, DocumentContent | AudioContent):
                if part.data is not None:
                    size = len(part.data)
                elif part.url is not None and part.url.startswith("data:"):
                    size = len(part.url) * 3 // 4  # base64: 4 characters per 3 bytes
                else:
                    continue
                extra += max(0, size - allowance)
    return extra


@dataclass(kw_only=True, eq=False, repr=False)
class ByteHeuristicEstimator:
    """The default estimator: UTF-8 byte counts, no tokenizer needed.

    Args:
        floor_bytes_per_token: Bytes per token assumed for the floor.
        per_message_tokens: Ceiling allowance per message for role markers and
            separators (chat templates spend about five).
        per_request_tokens: Ceiling allowance per request (priming, BOS/EOS).
        tools_tokens: Ceiling allowance when tools are offered, for the tool-use
            instructions some providers and chat templates inject.
        image_tokens: Ceiling allowance per image.
    """

    floor_bytes_per_token: int = 8
    per_message_tokens: int = 8
    per_request_tokens: int = 16
    tools_tokens: int = 512
    image_tokens: int = IMAGE_TOKENS_CEILING

    def __post_init__(self) -> None:
        if self.floor_bytes_per_token < 1:
            raise ConfigError("floor_bytes_per_token must be at least 1")
        allowances = (
            self.per_message_tokens,
            self.per_request_tokens,
            self.tools_tokens,
            self.image_tokens,
        )
        if min(allowances) < 0:
            raise ConfigError("token allowances must not be negative")

    def estimate(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        schema: Mapping[str, Any] | None = None,
        model: str | None = None,
    ) -> TokenEstimate:
        """Estimate by bytes; see the module docstring for the bounds."""
        texts, images = _request_texts(messages, tools, schema)
        size = sum(len(t.encode("utf-8")) for t in texts)
        ceiling = (
            size
            + self.per_message_tokens * len(messages)
            + self.per_request_tokens
            + (self.tools_tokens if tools else 0)
            + self.image_tokens * images
            + _media_excess(messages, self.image_tokens)
        )
        return TokenEstimate(floor=size // self.floor_bytes_per_token, ceiling=ceiling)

    def __repr__(self) -> str:
        return f"ByteHeuristicEstimator(floor_bytes_per_token={self.floor_bytes_per_token})"


class TiktokenEstimator:
    """Exact counts for OpenAI models, with `tiktoken` (an optional dependency).

    Text-only conversations to a model tiktoken knows are counted exactly, using
    OpenAI's published chat framing (3 tokens per message, 1 more per `name`, 3 to prime
    the reply). Tools, tool calls and results, schemas and images are rendered by the
    provider in ways it does not publish, so with any of them the estimate becomes
    bounds: the message count as the floor and the byte heuristic's ceiling for the
    whole request as the ceiling. Models tiktoken does
    not know (other vendors' tokenizers) fall back to `ByteHeuristicEstimator` entirely,
    since counting them with an OpenAI vocabulary would be neither exact nor a bound.

    Args:
        encoding: Force one tiktoken encoding (e.g. `"o200k_base"`) for every model.
        fallback: The estimator for models tiktoken does not know.

    Raises:
        ConfigError: If `tiktoken` is not installed.
    """

    _PER_MESSAGE = 3
    _PER_NAME = 1
    _PRIMING = 3

    def __init__(
        self, encoding: str | None = None, *, fallback: TokenEstimator | None = None
    ) -> None:
        try:
            tiktoken = importlib.import_module("tiktoken")
        except ImportError:
            from .._extras import missing_hint

            raise ConfigError(missing_hint("TiktokenEstimator", ["tiktoken"])) from None
        self._tiktoken: Any = tiktoken
        self._forced = encoding
        self._fallback = fallback or ByteHeuristicEstimator()
        self._bytes = ByteHeuristicEstimator()
        self._cache: dict[str, Any] = {}

    def _encoding(self, model: str | None) -> Any | None:
        key = self._forced or model or ""
        if key in self._cache:
            return self._cache[key]
        try:
            if self._forced:
                enc = self._tiktoken.get_encoding(self._forced)
            elif model:
                enc = self._tiktoken.encoding_for_model(model)
            else:
                enc = None
        except KeyError:
            enc = None
        self._cache[key] = enc
        return enc

    def estimate(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        schema: Mapping[str, Any] | None = None,
        model: str | None = None,
    ) -> TokenEstimate:
        """Count with tiktoken where that is exact; bound or fall back where not."""
        enc = self._encoding(model)
        if enc is None:
            return self._fallback.estimate(messages, tools=tools, schema=schema, model=model)
        count = self._PRIMING
        images = 0
        for message in messages:
            count += self._PER_MESSAGE + len(enc.encode(message.role))
            texts, n_images = _request_texts([message], (), None)
            images += n_images
            count += sum(len(enc.encode(t)) for t in texts)
            if message.name:
                count += self._PER_NAME
        plain = all(not m.tool_calls and not m.tool_call_id for m in messages)
        if plain and not tools and schema is None and not images:
            return TokenEstimate(count, count, exact=True)
        bound = self._bytes.estimate(messages, tools=tools, schema=schema)
        return TokenEstimate(floor=count, ceiling=max(count, bound.ceiling))

    def __repr__(self) -> str:
        return f"TiktokenEstimator(encoding={self._forced!r})"


@value_class
class ContextBudget:
    """How a request sits against its target's context window.

    Attributes:
        prompt: The prompt estimate.
        output_reserve_tokens: Tokens set aside for the response.
        reserve_source: Where the reserve came from: the caller (`explicit`),
            `sampling.max_output_tokens` (`sampling`), the model's output cap
            (`capabilities`), or `DEFAULT_OUTPUT_RESERVE` (`default`).
        context_window: The target's window; `None` when unknown.
        window_provenance: Which capability layer supplied the window.
        remaining_tokens: `context_window - prompt.ceiling - output_reserve_tokens`:
            room left for more material even in the worst case; negative when the worst
            case overflows; `None` when the window is unknown.
        verdict: `fits` (ceiling plus reserve fit), `exceeds` (the floor alone overflows
            the window), else `may_not_fit`; `None` when the window is unknown — never a
            guess.
    """

    prompt: TokenEstimate
    output_reserve_tokens: int
    reserve_source: ReserveSource
    context_window: int | None
    window_provenance: Provenance | None
    remaining_tokens: int | None
    verdict: Verdict | None


def compute_budget(
    messages: Sequence[Message],
    *,
    capabilities: ModelCapabilities,
    estimator: TokenEstimator | None = None,
    tools: Sequence[ToolSpec] = (),
    schema: Mapping[str, Any] | None = None,
    model: str | None = None,
    sampling_max_output: int | None = None,
    output_reserve_tokens: int | None = None,
) -> ContextBudget:
    """Budget a request against a model's context window. Pure computation.

    The output reserve is, in order of precedence: `output_reserve_tokens`;
    `sampling_max_output` (the request's own cap); the model's `max_output_tokens`,
    limited to a quarter of a known window (reasoning models advertise caps of half
    their window, which would swamp the budget); else `DEFAULT_OUTPUT_RESERVE`.

    Args:
        messages: The conversation.
        capabilities: The target model's assembled capabilities.
        estimator: Token estimator; the byte heuristic by default.
        tools: Tools the request offers.
        schema: The structured-output JSON Schema, if any.
        model: The provider's model name, passed to the estimator.
        sampling_max_output: `Sampling.max_output_tokens`, if set.
        output_reserve_tokens: An explicit reserve.

    Returns:
        The budget.

    Raises:
        ConfigError: On a negative reserve.
    """
    est = estimator or ByteHeuristicEstimator()
    prompt = est.estimate(messages, tools=tools, schema=schema, model=model)
    window = capabilities.context_window
    reserve: int
    source: ReserveSource
    if output_reserve_tokens is not None:
        if output_reserve_tokens < 0:
            raise ConfigError("output_reserve_tokens must not be negative")
        reserve, source = output_reserve_tokens, "explicit"
    elif sampling_max_output is not None:
        reserve, source = sampling_max_output, "sampling"
    elif capabilities.max_output_tokens is not None:
        reserve, source = capabilities.max_output_tokens, "capabilities"
        if window is not None:
            reserve = min(reserve, window // RESERVE_WINDOW_FRACTION)
    else:
        reserve, source = DEFAULT_OUTPUT_RESERVE, "default"
    if window is None:
        return ContextBudget(prompt, reserve, source, None, None, None, None)
    remaining = window - prompt.ceiling - reserve
    verdict: Verdict
    if prompt.floor > window:
        verdict = "exceeds"
    elif remaining >= 0:
        verdict = "fits"
    else:
        verdict = "may_not_fit"
    return ContextBudget(
        prompt, reserve, source, window, capabilities.source("context_window"), remaining, verdict
    )


def gate_refuses(budget: ContextBudget) -> bool:
    """The context gate: whether to fail this target before dispatch.

    Refuses only when the window is known, its provenance is trusted (`is_trusted`),
    and the prompt's *floor* alone exceeds it. The output reserve never counts toward a
    refusal: a provider may accept a prompt that leaves less room than asked, and the
    reserve is a planning figure, not a measured one.
    """
    window = budget.context_window
    return (
        window is not None and is_trusted(budget.window_provenance) and budget.prompt.floor > window
    )


def context_gate_error(budget: ContextBudget, *, provider: str, model: str) -> ContextWindowError:
    """The error a refused target records in the routing trail.

    Not retryable: the same prompt never fits that window. Routing still moves on to the
    next target, whose window may be larger.
    """
    return ContextWindowError(
        f"prompt needs at least {budget.prompt.floor} tokens but {provider}:{model} has a "
        f"{budget.context_window}-token context window ({budget.window_provenance}); "
        "refused before sending",
        provider=provider,
        retryable=False,
    )
