"""The input rule: content parts a target cannot take are refused before dispatch.

One rule for every non-text part (images, documents, audio), run by the attempt runner
before the context gate, so a refused target costs no request and the route falls back
to the next target (a `ConfigError` never counts against a target's health):

1. **protocol** — the target's adapter declares which part kinds its wire protocol
   carries (`AdapterProfile.inputs`, an `InputSupport`): Anthropic's Messages API has no
   audio block, OpenAI Chat takes documents and audio inline only, Ollama takes inline
   images only. A kind the protocol lacks is refused whatever the model could do.
2. **capability** — the model's assembled capabilities (`vision`, `documents`,
   `audio`). Only a known `False` refuses; unknown never does. The refusal names the
   layer the `False` came from (catalog, discovery, probe or override), so a wrong
   catalog fact is corrected with `capability_overrides`.

Messages name parts by type and count, never their bytes or URLs' payloads.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from .._adapters.profile import INPUT_KINDS, InputKind, InputSupport
from .._errors import ConfigError
from .._messages import AudioContent, DocumentContent, ImageContent, Message

if TYPE_CHECKING:
    from .._knowledge.capabilities import ModelCapabilities, Provenance
    from .._types import ResolvedTarget

__all__ = ["check_inputs", "input_kinds"]

_FIELD: dict[str, str] = {"image": "vision", "document": "documents", "audio": "audio"}
_TYPE: dict[str, str] = {
    "image": "ImageContent",
    "document": "DocumentContent",
    "audio": "AudioContent",
}
_WHAT: dict[str, str] = {"image": "images", "document": "PDF documents", "audio": "audio"}
_FROM: dict[str, str] = {
    "catalog": "the catalog",
    "discovery": "the provider's model listing (discovery)",
    "probe": "a probe of the running provider",
    "override": "capability_overrides",
}


def input_kinds(
    messages: Sequence[Message],
) -> dict[InputKind, list[ImageContent | DocumentContent | AudioContent]]:
    """The non-text parts of a conversation, by input kind (empty for plain text)."""
    found: dict[InputKind, list[ImageContent | DocumentContent | AudioContent]] = {}
    for m in messages:
        content = m.content
        if type(content) is str:
            continue
        for part in content:
            kind: InputKind
            if isinstance(part, ImageContent):
                inline = part.data is not None or str(part.url).startswith("data:")
                kind = "image" if inline else "image_url"
            elif isinstance(part, DocumentContent):
                kind = "document" if part.is_inline else "document_url"
            elif isinstance(part, AudioContent):
                kind = "audio" if part.is_inline else "audio_url"
            else:
                continue
            found.setdefault(kind, []).append(part)
    return found


def check_inputs(
    messages: Sequence[Message],
    target: ResolvedTarget,
    support: InputSupport,
    capabilities: ModelCapabilities,
) -> None:
    """Refuse parts `target` cannot take: its protocol's, then its model's word.

    Args:
        messages: The request's conversation.
        target: The target about to be tried.
        support: What the target's protocol carries (`input_support` of its adapter).
        capabilities: The target model's assembled capabilities.

    Raises:
        ConfigError: Naming the part, the target, why, and where the "no" came from.
    """
    for m in messages:
        if type(m.content) is not str:
            break
    else:
        return  # plain text: the hot path pays one type check per message
    found = input_kinds(messages)
    for kind in INPUT_KINDS:
        parts = found.get(kind)
        if not parts:
            continue
        base = kind.removesuffix("_url")
        shown = _shown(base, kind, len(parts))
        if kind not in support.kinds:
            why = support.note(kind) or _default_note(kind)
            raise _refusal(target, shown, f"{_protocol(support, target)} {why}", "protocol")
        if base == "audio" and support.audio_formats is not None:
            odd = sorted(
                {str(p.format) for p in parts if isinstance(p, AudioContent)}
                - support.audio_formats
            )
            if odd:
                accepted = ", ".join(sorted(support.audio_formats))
                raise _refusal(
                    target,
                    f"{shown} in format {', '.join(odd)}",
                    f"{_protocol(support, target)} takes audio as {accepted} only",
                    "protocol",
                )
        field = _FIELD[base]
        if getattr(capabilities, field) is False:
            layer: Provenance | None = capabilities.source(field)
            origin = _FROM.get(layer or "", "an unknown layer")
            raise _refusal(
                target,
                shown,
                f"the model does not take {_WHAT[base]} ({field}=False, from {origin}); "
                f"if it does, correct it with capability_overrides="
                f"{{{str(target)!r}: ModelCapabilities({field}=True)}}",
                layer or "capabilities",
            )


def _shown(base: str, kind: str, count: int) -> str:
    by = " by URL" if kind.endswith("_url") else ""
    plural = "s" if count != 1 else ""
    return f"{count} {_TYPE[base]} part{plural}{by}"


def _protocol(support: InputSupport, target: ResolvedTarget) -> str:
    return (
        f"the {support.protocol} protocol"
        if support.protocol
        else (f"the {target.provider_id} adapter")
    )


def _default_note(kind: str) -> str:
    base = kind.removesuffix("_url")
    if kind.endswith("_url"):
        return f"does not carry {_WHAT[base]} by URL; pass the bytes instead"
    return (
        f"does not carry {_WHAT[base]} (its adapter declares no {kind!r} input in "
        "AdapterProfile.inputs)"
    )


def _refusal(target: ResolvedTarget, shown: str, why: str, source: str) -> ConfigError:
    return ConfigError(
        f"{target}: cannot send {shown}: {why} [refused before dispatch; source: {source}]",
        provider=target.provider,
    )
