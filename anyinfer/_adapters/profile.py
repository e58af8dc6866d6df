"""What an adapter class declares about its provider, read by the core.

Provider facts the core needs without sending a request (the names a provider answers
to, the conformance dialect its wire speaks, how it counts tokens for costing, what its
engine can enforce for structured output, whether it runs local weights) are declared
once, on the adapter class, as an `AdapterProfile`. The core reads `cls.profile` and
keeps no per-provider tables, so a third-party adapter declares the same facts the
same way a built-in does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .._knowledge.capabilities import ModelCapabilities

__all__ = ["AdapterProfile", "UsageConvention"]


@dataclass(frozen=True, slots=True)
class UsageConvention:
    """How one engine's adapter counts tokens in `Usage`, for costing.

    Adapters report usage as their provider counts it, and providers disagree:

    | engine | `input_tokens` | `output_tokens` |
    |---|---|---|
    | OpenAI Chat and Responses, Azure, OpenAI-compatible | includes cache reads | includes it |
    | gemini (the adapter adds thoughts to candidates) | includes cached content | includes it |
    | anthropic | excludes cache reads and writes | includes thinking |

    An adapter declares its convention in `AdapterProfile.usage`.

    Attributes:
        input_includes_cache: `input_tokens` already counts cache reads and writes.
        output_includes_reasoning: `output_tokens` already counts reasoning tokens.
    """

    input_includes_cache: bool = True
    output_includes_reasoning: bool = True


@dataclass(frozen=True, slots=True)
class AdapterProfile:
    """Provider facts an adapter class declares in its `profile` class attribute.

    A subclass that does not set `profile` inherits its parent's, except `aliases`
    (two classes never answer to the same alias by inheritance).

    Attributes:
        aliases: Other names the provider id answers to (`"claude"` for
            `"anthropic"`), registered with the class.
        conformance_dialect: The `fakeservers` dialect the conformance suite serves
            this adapter with; `None` keeps the adapter out of the suite unless it is
            registered there explicitly.
        usage: How the adapter counts tokens, for costing; `None` counts the OpenAI
            way (see `UsageConvention`).
        structured: What the engine enforces for any model it serves (`json_mode`,
            `json_schema`, `grammar`); these fill only capability fields nobody knows,
            so a catalog entry, discovery, a probe or an override that says otherwise
            wins. `None` means nothing is known for the engine as a whole.
        local_engines: The catalog engines (`"llama.cpp"`, `"vllm"`) this provider
            serves local weights with; empty when it is not a local runtime. Only
            providers with local engines take the local-model methods
            (`local_catalog`, `acquire_model`, ...).
    """

    aliases: tuple[str, ...] = ()
    conformance_dialect: str | None = None
    usage: UsageConvention | None = None
    structured: ModelCapabilities | None = None
    local_engines: tuple[str, ...] = ()
