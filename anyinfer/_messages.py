"""Conversation messages and their normalization."""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ._errors import ConfigError
from ._types import ToolCall

__all__ = [
    "ContentPart",
    "ImageContent",
    "Message",
    "MessagesInput",
    "Role",
    "TextContent",
    "normalize_messages",
]

Role = Literal["system", "user", "assistant", "tool"]
"""Who wrote a message."""


@dataclass(frozen=True, slots=True)
class TextContent:
    """A text content part."""

    text: str


@dataclass(frozen=True, slots=True)
class ImageContent:
    """An image content part, by URL or inline bytes.

    Attributes:
        url: An `http(s)://` or `data:` URL.
        data: Raw image bytes, when not given by URL.
        media_type: The image's MIME type, e.g. `image/png`; needed with `data`.
    """

    url: str | None = None
    data: bytes | None = None
    media_type: str | None = None

    def __post_init__(self) -> None:
        if (self.url is None) == (self.data is None):
            raise ConfigError("ImageContent takes exactly one of url= or data=")
        if self.data is not None and not self.media_type:
            raise ConfigError("ImageContent(data=...) needs media_type, e.g. 'image/png'")

    def as_data_url(self) -> str:
        """The image as a URL: the given one, or a base64 `data:` URL."""
        if self.url is not None:
            return self.url
        assert self.data is not None
        return f"data:{self.media_type};base64,{base64.b64encode(self.data).decode()}"

    def base64_data(self) -> tuple[str, str] | None:
        """`(media_type, base64)` for inline images, also for `data:` URLs; else `None`."""
        if self.data is not None:
            return str(self.media_type), base64.b64encode(self.data).decode()
        if self.url and self.url.startswith("data:") and ";base64," in self.url:
            head, payload = self.url[5:].split(";base64,", 1)
            return head, payload
        return None


ContentPart = TextContent | ImageContent
"""One part of a message's content."""


@dataclass(frozen=True, slots=True)
class Message:
    """One message of a conversation.

    Attributes:
        role: `system`, `user`, `assistant` or `tool`.
        content: Plain text, or a sequence of text and image parts.
        tool_calls: On assistant messages, the tool calls the model made.
        tool_call_id: On tool messages, the call this result answers.
        name: On tool messages, the tool's name (some protocols need it).
        is_error: On tool messages, whether the tool failed.
    """

    role: Role
    content: str | tuple[ContentPart, ...] = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None
    is_error: bool = False
    provider_data: Mapping[str, Any] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        if self.role not in ("system", "user", "assistant", "tool"):
            raise ConfigError(f"unknown message role {self.role!r}")
        if not isinstance(self.content, str):
            parts = tuple(self.content)
            for part in parts:
                if not isinstance(part, TextContent | ImageContent):
                    raise ConfigError(
                        f"message content parts must be TextContent or ImageContent, "
                        f"got {type(part).__name__}"
                    )
            object.__setattr__(self, "content", parts)
        if self.role == "tool" and not self.tool_call_id:
            raise ConfigError("a tool message needs tool_call_id")
        object.__setattr__(self, "tool_calls", tuple(self.tool_calls))

    @classmethod
    def system(cls, text: str) -> Message:
        """A system message."""
        return cls("system", text)

    @classmethod
    def user(cls, content: str | Sequence[ContentPart]) -> Message:
        """A user message with text or parts."""
        return cls("user", content if isinstance(content, str) else tuple(content))

    @classmethod
    def assistant(cls, text: str = "", tool_calls: Sequence[ToolCall] = ()) -> Message:
        """An assistant message, optionally with the tool calls it made."""
        return cls("assistant", text, tool_calls=tuple(tool_calls))

    @classmethod
    def tool_result(
        cls, call_id: str, content: str, *, name: str | None = None, is_error: bool = False
    ) -> Message:
        """The result of a tool call, answering `call_id`."""
        return cls("tool", content, tool_call_id=call_id, name=name, is_error=is_error)

    @property
    def text(self) -> str:
        """The message's text: the content string, or its text parts joined."""
        if isinstance(self.content, str):
            return self.content
        return "".join(p.text for p in self.content if isinstance(p, TextContent))


MessagesInput = str | Message | Sequence[Message]
"""What callers may pass as messages: a bare prompt, one message, or a sequence."""


def normalize_messages(messages: MessagesInput) -> tuple[Message, ...]:
    """Turn any accepted `MessagesInput` into a tuple of messages.

    Args:
        messages: A prompt string, one `Message`, or a sequence of them.

    Returns:
        The messages as a tuple.

    Raises:
        ConfigError: If the input is empty or holds something that is not a `Message`.
    """
    if isinstance(messages, str):
        return (Message("user", messages),)
    if isinstance(messages, Message):
        return (messages,)
    try:
        result = tuple(messages)
    except TypeError:
        raise ConfigError(
            f"messages must be a str, a Message or a sequence of Messages, "
            f"got {type(messages).__name__}"
        ) from None
    if not result:
        raise ConfigError("messages is empty")
    for m in result:
        if not isinstance(m, Message):
            raise ConfigError(f"messages must hold Message objects, got {type(m).__name__}")
    return result
