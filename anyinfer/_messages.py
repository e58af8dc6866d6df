"""Conversation messages and their normalization."""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from dataclasses import field
from typing import Any, Literal

from ._errors import ConfigError
from ._types import ToolCall
from ._values import value_class

__all__ = [
    "AUDIO_FORMATS",
    "AudioContent",
    "ContentPart",
    "DocumentContent",
    "ImageContent",
    "Message",
    "MessagesInput",
    "Role",
    "TextContent",
    "normalize_messages",
]

Role = Literal["system", "user", "assistant", "tool"]
"""Who wrote a message."""


@value_class
class TextContent:
    """A text content part."""

    text: str


@value_class
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

    def __repr__(self) -> str:
        # Never the bytes, nor a data: URL's payload: reprs reach logs and error messages.
        bits = [
            f"{name}={value if name == 'data' else repr(value)}"
            for name, value in (
                ("url", _url_repr(self.url)),
                ("data", _bytes_repr(self.data)),
                ("media_type", self.media_type),
            )
            if value is not None
        ]
        return f"ImageContent({', '.join(bits)})"

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


def _bytes_repr(data: bytes | None) -> str | None:
    return None if data is None else f"<{len(data)} bytes>"


def _url_repr(url: str | None) -> str | None:
    """A URL for a repr: a `data:` URL shows its media type and size, never its payload."""
    if url is None or not url.startswith("data:"):
        return url
    head = url[5:].split(",", 1)[0]
    return f"data:{head},<{len(url)} characters>"


def _split_data_url(url: str) -> tuple[str, str] | None:
    """`(media_type, base64)` of a base64 `data:` URL, else `None`."""
    if url.startswith("data:") and ";base64," in url:
        head, payload = url[5:].split(";base64,", 1)
        return head.split(";", 1)[0].strip().lower(), payload
    return None


def _need_source(kind: str, url: Any, data: Any) -> None:
    """Exactly one of `url` (a string) and `data` (non-empty bytes)."""
    if (url is None) == (data is None):
        raise ConfigError(f"{kind} takes exactly one of url= or data=")
    if data is not None and (not isinstance(data, bytes | bytearray | memoryview) or not data):
        raise ConfigError(f"{kind}(data=...) must be non-empty bytes, got {type(data).__name__}")
    if url is not None:
        if not isinstance(url, str) or not url.strip():
            raise ConfigError(f"{kind}(url=...) must be a non-empty string")
        if url.startswith("data:"):
            if _split_data_url(url) is None:
                raise ConfigError(
                    f"{kind}(url=...) takes base64 data: URLs only "
                    "('data:<media type>;base64,<payload>')"
                )
        elif not url.lower().startswith(("https://", "http://")):
            raise ConfigError(
                f"{kind}(url=...) must be an http(s):// or a base64 data: URL, got one with "
                f"scheme {url.split(':', 1)[0][:20]!r}"
            )


class _MediaSource:
    """What `DocumentContent` and `AudioContent` share: a source that is either bytes or a
    URL (`http(s)://` or a base64 `data:` URL), and a repr that never shows the payload."""

    __slots__ = ()

    data: bytes | None
    url: str | None

    def _repr_with(self, *more: tuple[str, Any]) -> str:
        sources = (("data", _bytes_repr(self.data)), ("url", _url_repr(self.url)))
        bits = [
            f"{name}={value if name == 'data' else repr(value)}"
            for name, value in (*sources, *more)
            if value is not None
        ]
        return f"{type(self).__name__}({', '.join(bits)})"

    @property
    def is_inline(self) -> bool:
        """Whether the part travels in the request (bytes or a `data:` URL)."""
        return self.data is not None or bool(self.url and self.url.startswith("data:"))

    def base64_data(self) -> str | None:
        """The part's base64 payload when inline (bytes or `data:` URL); else `None`."""
        if self.data is not None:
            return base64.b64encode(self.data).decode()
        inline = _split_data_url(str(self.url))
        return None if inline is None else inline[1]


PDF_MEDIA_TYPE = "application/pdf"

_PDF_MAGIC = b"%PDF-"


@value_class(kw_only=True)
class DocumentContent(_MediaSource):
    """A document content part (a PDF), by inline bytes or URL.

    Which protocols take a document, inline or by URL, is in the inputs guide; a target
    that cannot take it is refused with a `ConfigError` before anything is sent.

    Attributes:
        data: The PDF's bytes, when not given by URL.
        url: An `http(s)://` URL, or a base64 `data:application/pdf` URL.
        media_type: The document's MIME type; only `application/pdf` is supported.
        filename: The file name shown to the model (OpenAI sends one; defaults to
            `document.pdf` there).
        title: A title for the document (Anthropic's `title`).

    Raises:
        ConfigError: Both or neither of `data` and `url`; bytes that are not a PDF; an
            unsupported media type or URL scheme.
    """

    data: bytes | None = None
    url: str | None = None
    media_type: str = PDF_MEDIA_TYPE
    filename: str | None = None
    title: str | None = None

    def __post_init__(self) -> None:
        _need_source("DocumentContent", self.url, self.data)
        if not isinstance(self.media_type, str) or self.media_type.lower() != PDF_MEDIA_TYPE:
            raise ConfigError(
                f"DocumentContent supports PDF documents only (media_type "
                f"{PDF_MEDIA_TYPE!r}), got {self.media_type!r}; send text as TextContent"
            )
        object.__setattr__(self, "media_type", PDF_MEDIA_TYPE)
        for name in ("filename", "title"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value.strip()):
                raise ConfigError(f"DocumentContent.{name} must be a non-empty string or None")
        if self.data is not None:
            data = bytes(self.data)
            # The PDF header may follow up to 1 KiB of leading bytes (ISO 32000-1, 7.5.2).
            if _PDF_MAGIC not in data[:1024]:
                raise ConfigError(
                    "DocumentContent(data=...) is not a PDF: no '%PDF-' header in its "
                    "first 1024 bytes"
                )
            object.__setattr__(self, "data", data)
        elif self.url is not None:
            inline = _split_data_url(self.url)
            if inline is not None and inline[0] != PDF_MEDIA_TYPE:
                raise ConfigError(
                    f"DocumentContent(url='data:...') must be an application/pdf data: URL, "
                    f"got {inline[0]!r}"
                )

    def __repr__(self) -> str:
        return self._repr_with(("filename", self.filename), ("title", self.title))

    def as_data_url(self) -> str | None:
        """The document as a base64 `data:` URL when inline; else `None`."""
        payload = self.base64_data()
        return None if payload is None else f"data:{PDF_MEDIA_TYPE};base64,{payload}"


AUDIO_FORMATS: Mapping[str, str] = {
    "wav": "audio/wav",
    "mp3": "audio/mp3",
    "aiff": "audio/aiff",
    "aac": "audio/aac",
    "ogg": "audio/ogg",
    "flac": "audio/flac",
}
"""Audio formats `AudioContent` knows, and the MIME type each is sent as (Gemini's
documented names). OpenAI Chat takes `wav` and `mp3` only."""

_AUDIO_MEDIA_TYPES: Mapping[str, str] = {
    **{mime: fmt for fmt, mime in AUDIO_FORMATS.items()},
    "audio/mpeg": "mp3",
    "audio/x-wav": "wav",
    "audio/wave": "wav",
    "audio/vnd.wave": "wav",
    "audio/x-aiff": "aiff",
    "audio/x-flac": "flac",
}


@value_class(kw_only=True)
class AudioContent(_MediaSource):
    """An audio content part, by inline bytes or URL.

    Give the format (`"wav"`, `"mp3"`, ... see `AUDIO_FORMATS`) or the MIME type; either
    fills in the other. A URL whose path ends in a known extension needs neither.
    Which protocols take audio, and from where, is in the inputs guide; a target that
    cannot take it is refused with a `ConfigError` before anything is sent.

    Attributes:
        data: The audio bytes, when not given by URL.
        url: An `http(s)://` URL, or a base64 `data:audio/...` URL.
        format: The audio format, a key of `AUDIO_FORMATS`.
        media_type: The audio's MIME type.

    Raises:
        ConfigError: Both or neither of `data` and `url`; an unknown format; a format
            and a media type that disagree; no way to tell the format.
    """

    data: bytes | None = None
    url: str | None = None
    format: str | None = None
    media_type: str | None = None

    def __post_init__(self) -> None:
        _need_source("AudioContent", self.url, self.data)
        if self.data is not None:
            object.__setattr__(self, "data", bytes(self.data))
        fmt = self.format
        if fmt is not None:
            if not isinstance(fmt, str) or fmt.strip().lower() not in AUDIO_FORMATS:
                raise ConfigError(
                    f"AudioContent.format must be one of {', '.join(AUDIO_FORMATS)}, got {fmt!r}"
                )
            fmt = fmt.strip().lower()
        from_mime = self._format_of_media_type()
        if fmt is not None and from_mime is not None and fmt != from_mime:
            raise ConfigError(
                f"AudioContent: format {fmt!r} and media_type {self.media_type!r} disagree"
            )
        fmt = fmt or from_mime or self._format_of_url()
        if fmt is None:
            raise ConfigError(
                "AudioContent needs format= (one of "
                f"{', '.join(AUDIO_FORMATS)}) or media_type=, e.g. format='wav'"
            )
        object.__setattr__(self, "format", fmt)
        object.__setattr__(self, "media_type", AUDIO_FORMATS[fmt])

    def _format_of_media_type(self) -> str | None:
        mime = self.media_type
        if mime is None and self.url is not None:
            inline = _split_data_url(self.url)
            mime = inline[0] if inline is not None else None
        if mime is None:
            return None
        if not isinstance(mime, str) or mime.strip().lower() not in _AUDIO_MEDIA_TYPES:
            raise ConfigError(
                f"AudioContent: unknown audio media type {mime!r}; known: "
                f"{', '.join(sorted(_AUDIO_MEDIA_TYPES))}"
            )
        return _AUDIO_MEDIA_TYPES[mime.strip().lower()]

    def _format_of_url(self) -> str | None:
        if self.url is None or self.url.startswith("data:"):
            return None
        path = self.url.split("?", 1)[0].split("#", 1)[0]
        ext = path.rsplit(".", 1)[-1].lower() if "." in path.rsplit("/", 1)[-1] else ""
        return ext if ext in AUDIO_FORMATS else None

    def __repr__(self) -> str:
        return self._repr_with(("format", self.format))


ContentPart = TextContent | ImageContent | DocumentContent | AudioContent
"""One part of a message's content."""

_PART_TYPES = (TextContent, ImageContent, DocumentContent, AudioContent)


@value_class
class Message:
    """One message of a conversation.

    Attributes:
        role: `system`, `user`, `assistant` or `tool`.
        content: Plain text, or a sequence of content parts (text, images, documents,
            audio).
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
                if not isinstance(part, _PART_TYPES):
                    raise ConfigError(
                        "message content parts must be TextContent, ImageContent, "
                        f"DocumentContent or AudioContent, got {type(part).__name__}"
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
