"""What a generation request carries to an adapter."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from typing import Any, Literal

from ._client.validate import need_int, need_number
from ._errors import ConfigError
from ._messages import Message
from ._values import value_class

__all__ = [
    "DEFAULT_MAX_ROUNDS",
    "GenerationRequest",
    "ReasoningEffort",
    "Sampling",
    "ToolChoice",
    "ToolSpec",
]

DEFAULT_MAX_ROUNDS = 8
"""Tool rounds `run_tools` allows before raising `ToolLoopError`: enough for multi-step
tool use, small enough that a model stuck calling tools fails fast and cheaply."""

ReasoningEffort = Literal["none", "minimal", "low", "medium", "high"]
"""How much hidden reasoning to ask for, on models that reason."""

ToolChoice = Literal["auto", "none", "required"] | str
"""`auto`, `none`, `required`, or the name of one tool the model must call."""


@value_class
class Sampling:
    """Sampling controls, mapped to each protocol's own names.

    Attributes:
        temperature: Sampling temperature.
        top_p: Nucleus sampling mass.
        max_output_tokens: Cap on generated tokens.
        stop: Stop sequences (a bare string is one sequence).
        seed: Seed, where the provider supports one.
        presence_penalty: Presence penalty, where supported.
        frequency_penalty: Frequency penalty, where supported.
    """

    temperature: float | None = None
    top_p: float | None = None
    max_output_tokens: int | None = None
    stop: tuple[str, ...] = ()
    seed: int | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None

    def __post_init__(self) -> None:
        for name in ("temperature", "top_p", "presence_penalty", "frequency_penalty"):
            value = getattr(self, name)
            if value is not None:
                need_number(value, f"Sampling.{name}")
        if self.seed is not None:
            need_int(self.seed, "Sampling.seed")
        if self.max_output_tokens is not None:
            need_int(self.max_output_tokens, "Sampling.max_output_tokens", minimum=1)
        if self.temperature is not None and self.temperature < 0:
            raise ConfigError(f"temperature must not be negative, got {self.temperature}")
        stop = (self.stop,) if isinstance(self.stop, str) else self.stop
        if not isinstance(stop, tuple | list) or not all(isinstance(s, str) for s in stop):
            raise ConfigError(
                f"Sampling.stop must be a string or a sequence of strings, got {stop!r}"
            )
        object.__setattr__(self, "stop", tuple(stop))

    def wire_fields(self, names: Mapping[str, str | None]) -> tuple[dict[str, Any], list[str]]:
        """The controls that are set, under a protocol's own field names.

        Args:
            names: Control name (`temperature`, `top_p`, `max_output_tokens`, `stop`,
                `seed`, `presence_penalty`, `frequency_penalty`) to the protocol's field;
                `None` for a control the adapter handles itself. Controls left out are
                ones the protocol has no field for.

        Returns:
            The fields to send (stop sequences as a list), and the names of set controls
            the protocol cannot carry, for a warning.
        """
        fields: dict[str, Any] = {}
        unsupported: list[str] = []
        for control in _CONTROLS:
            value = getattr(self, control)
            if value is None or value == ():
                continue
            if control not in names:
                unsupported.append(control)
            elif (field_name := names[control]) is not None:
                fields[field_name] = list(value) if control == "stop" else value
        return fields, unsupported


_CONTROLS = (
    "temperature",
    "top_p",
    "max_output_tokens",
    "stop",
    "seed",
    "presence_penalty",
    "frequency_penalty",
)


@value_class
class ToolSpec:
    """A tool declaration advertised to the model.

    Attributes:
        name: The tool's name.
        description: What the tool does, for the model.
        parameters: JSON Schema of the tool's arguments (an object schema).
    """

    name: str
    description: str = ""
    parameters: Mapping[str, Any] = field(
        default_factory=lambda: {"type": "object", "properties": {}}
    )


@value_class
class GenerationRequest:
    """One attempt's request, as an adapter sees it.

    Attributes:
        model: The provider's model name.
        messages: The normalized conversation.
        stream: Whether to ask the provider for a streamed response.
        tools: Tools offered to the model.
        tool_choice: How the model may use the tools.
        sampling: Sampling controls.
        reasoning: Reasoning effort, when asked for.
        response_format: A structured-output instruction the adapter maps to its
            protocol: `{"type": "json_object"}` or `{"type": "json_schema", "name": ...,
            "schema": {...}, "strict": bool}`; `None` for free text.
        provider_options: Extra body fields for this provider, merged last.
        retain_raw: Whether the adapter should yield `RawPart`s.
        metadata: Caller metadata (for telemetry; adapters do not send it).
        timeout_s: Per-call timeout overriding the provider's default, in seconds.
        max_response_bytes: Abort the response once it grows past this many bytes.
    """

    model: str
    messages: tuple[Message, ...]
    stream: bool = True
    tools: tuple[ToolSpec, ...] = ()
    tool_choice: ToolChoice = "auto"
    sampling: Sampling = field(default_factory=Sampling)
    reasoning: ReasoningEffort | None = None
    response_format: Mapping[str, Any] | None = None
    provider_options: Mapping[str, Any] = field(default_factory=dict)
    retain_raw: bool = False
    metadata: Mapping[str, str] = field(default_factory=dict)
    timeout_s: float | None = None
    max_response_bytes: int | None = None

    def tool_choice_name(self) -> str | None:
        """The forced tool's name, when `tool_choice` names one."""
        if self.tool_choice in ("auto", "none", "required"):
            return None
        return self.tool_choice

    def system_text(self) -> str:
        """All system messages' text joined by blank lines."""
        return "\n\n".join(m.text for m in self.messages if m.role == "system")
