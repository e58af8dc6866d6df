"""Content parts a provider refuses in a request body, for dialects' `request_fault`.

Each check reads the user messages of a generation request and names the first content
part the real provider refuses for certain: a part type outside its request schema (the
union of content-part types in the provider's official SDK), or a field its schema
constrains (OpenAI's `input_audio.format`, Anthropic's base64 media types). Anything
else is accepted, as the real servers accept it. The status (400) and error envelope are
the provider's (each dialect renders them); the wording is the fake's own.
"""

from __future__ import annotations

from typing import Any

__all__ = ["anthropic_part_problem", "chat_part_problem", "responses_part_problem"]

# openai.types.chat.ChatCompletionContentPartParam
_CHAT_PARTS = frozenset({"text", "image_url", "input_audio", "file"})
_CHAT_AUDIO_FORMATS = ("mp3", "wav")
# openai.types.responses.ResponseInputContentParam
_RESPONSES_PARTS = frozenset({"input_text", "input_image", "input_file"})
# anthropic.types.ContentBlockParam
_ANTHROPIC_BLOCKS = frozenset(
    {
        "bash_code_execution_tool_result",
        "code_execution_tool_result",
        "container_upload",
        "document",
        "image",
        "redacted_thinking",
        "search_result",
        "server_tool_use",
        "text",
        "text_editor_code_execution_tool_result",
        "thinking",
        "tool_result",
        "tool_search_tool_result",
        "tool_use",
        "web_fetch_tool_result",
        "web_search_tool_result",
    }
)
# anthropic.types.document_block_param.Source, Base64PDFSourceParam, Base64ImageSourceParam
_ANTHROPIC_DOCUMENT_SOURCES = frozenset({"base64", "content", "file", "text", "url"})
_ANTHROPIC_IMAGE_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")


def _user_parts(items: Any) -> list[tuple[str, Any]]:
    """`(where, part)` for every part of every user message with list content."""
    found: list[tuple[str, Any]] = []
    if not isinstance(items, list):
        return found
    for i, message in enumerate(items):
        if not isinstance(message, dict) or message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, list):
            found.extend((f"[{i}].content[{j}]", part) for j, part in enumerate(content))
    return found


def _type_of(part: Any) -> Any:
    return part.get("type") if isinstance(part, dict) else None


def chat_part_problem(body: Any) -> str | None:
    """What OpenAI Chat Completions refuses in `messages[].content[]`, if anything."""
    if not isinstance(body, dict):
        return None
    for where, part in _user_parts(body.get("messages")):
        kind = _type_of(part)
        if kind not in _CHAT_PARTS:
            return (
                f"messages{where}.type: {kind!r} is not a content part type; expected "
                f"one of {', '.join(sorted(_CHAT_PARTS))}"
            )
        if kind == "input_audio":
            audio = part.get("input_audio")
            if not isinstance(audio, dict) or not isinstance(audio.get("data"), str):
                return f"messages{where}.input_audio.data: a base64 string is required"
            if audio.get("format") not in _CHAT_AUDIO_FORMATS:
                return (
                    f"messages{where}.input_audio.format: {audio.get('format')!r} is not "
                    f"one of {', '.join(_CHAT_AUDIO_FORMATS)}"
                )
        if kind == "file":
            file = part.get("file")
            if not isinstance(file, dict) or not (
                isinstance(file.get("file_data"), str) or isinstance(file.get("file_id"), str)
            ):
                return f"messages{where}.file: file_data or file_id is required"
    return None


def responses_part_problem(body: Any) -> str | None:
    """What the Responses API refuses in `input[].content[]`, if anything."""
    if not isinstance(body, dict):
        return None
    for where, part in _user_parts(body.get("input")):
        kind = _type_of(part)
        if kind not in _RESPONSES_PARTS:
            return (
                f"input{where}.type: {kind!r} is not an input content type; expected "
                f"one of {', '.join(sorted(_RESPONSES_PARTS))}"
            )
        if kind == "input_file" and not any(
            isinstance(part.get(k), str) for k in ("file_data", "file_id", "file_url")
        ):
            return f"input{where}: input_file needs file_data, file_id or file_url"
    return None


def anthropic_part_problem(body: Any) -> str | None:
    """What the Messages API refuses in `messages[].content[]`, if anything."""
    if not isinstance(body, dict):
        return None
    for where, part in _user_parts(body.get("messages")):
        kind = _type_of(part)
        if kind not in _ANTHROPIC_BLOCKS:
            return f"messages{where}.type: {kind!r} is not a content block type"
        source = part.get("source")
        source_type = source.get("type") if isinstance(source, dict) else None
        if kind == "document":
            if source_type not in _ANTHROPIC_DOCUMENT_SOURCES:
                return f"messages{where}.source.type: {source_type!r} is not a document source"
            if source_type == "base64" and source.get("media_type") != "application/pdf":
                return f"messages{where}.source.media_type: a base64 document must be a PDF"
        if (
            kind == "image"
            and source_type == "base64"
            and source.get("media_type") not in _ANTHROPIC_IMAGE_TYPES
        ):
            return (
                f"messages{where}.source.media_type: must be one of "
                f"{', '.join(_ANTHROPIC_IMAGE_TYPES)}"
            )
    return None
