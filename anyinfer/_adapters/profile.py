"""What an adapter class declares about its provider, read by the core.

Provider facts the core needs without sending a request (the names a provider answers
to, the conformance dialect its wire speaks, how it counts tokens for costing, what its
engine can enforce for structured output, whether it runs local weights) are declared
once, on the adapter class, as an `AdapterProfile`. The core reads `cls.profile` and
keeps no per-provider tables, so a third-party adapter declares the same facts the
same way a built-in does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from .._values import value_class

if TYPE_CHECKING:
    from .._knowledge.capabilities import ModelCapabilities

__all__ = [
    "INPUT_KINDS",
    "AdapterProfile",
    "InputKind",
    "InputSupport",
    "UsageConvention",
    "input_support",
]

InputKind = Literal["image", "image_url", "document", "document_url", "audio", "audio_url"]
"""A kind of content part as a protocol sees it: inline (bytes or a `data:` URL) or by
an `http(s)` URL (`*_url`)."""

INPUT_KINDS: tuple[InputKind, ...] = (
    "image",
    "image_url",
    "document",
    "document_url",
    "audio",
    "audio_url",
)
"""Every input kind, in the order the core checks them."""


@value_class
class InputSupport:
    """Which content parts a wire protocol can carry in a message.

    What the protocol can carry, not what a model accepts: that is a capability
    (`vision`, `documents`, `audio`), checked after this. The core refuses, before
    dispatch, a part whose kind the target's protocol does not carry.

    Attributes:
        protocol: The protocol's name, for refusal messages.
        kinds: The `InputKind`s the protocol carries.
        audio_formats: The `AudioContent.format`s it carries, or `None` for every one.
        notes: Why a kind is missing, as `(kind, reason)` pairs, for refusal messages.
    """

    protocol: str = ""
    kinds: frozenset[InputKind] = frozenset({"image", "image_url"})
    audio_formats: frozenset[str] | None = None
    notes: tuple[tuple[InputKind, str], ...] = ()

    def note(self, kind: InputKind) -> str | None:
        """Why `kind` is missing, when the protocol says."""
        return next((why for k, why in self.notes if k == kind), None)


@value_class
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


@value_class
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
        inputs: The content parts the protocol carries (see `InputSupport`). `None`
            inherits the nearest parent class's declaration; a class that none of its
            parents declares for carries text and images only (`InputSupport()`), so
            an adapter written before documents and audio existed never drops them
            silently: they are refused before dispatch.
    """

    aliases: tuple[str, ...] = ()
    conformance_dialect: str | None = None
    usage: UsageConvention | None = None
    structured: ModelCapabilities | None = None
    local_engines: tuple[str, ...] = ()
    inputs: InputSupport | None = None


_DEFAULT_INPUTS = InputSupport()


def input_support(cls: type) -> InputSupport:
    """The content parts an adapter class's protocol carries.

    The first `profile.inputs` along the class's MRO that is not `None`; else text and
    images (`InputSupport()`).
    """
    for klass in cls.__mro__:
        profile = klass.__dict__.get("profile")
        if isinstance(profile, AdapterProfile) and profile.inputs is not None:
            return profile.inputs
    return _DEFAULT_INPUTS
