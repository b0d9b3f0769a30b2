"""The items of a conversation (`realtime_conversation_item_*.py`): messages with their content
parts, function calls and their outputs.
"""

from __future__ import annotations

from typing import Annotated, Literal

from msgspec import Meta, Struct

__all__ = [
    "ContentPart",
    "ConversationItem",
    "FunctionCallItem",
    "FunctionCallOutputItem",
    "ItemId",
    "ItemStatus",
    "MessageItem",
]

ItemId = Annotated[str, Meta(min_length=1, max_length=64)]


class ContentPart(Struct, kw_only=True, omit_defaults=True):
    """A message's content part: `input_text`, `input_audio` (base64 audio and its transcript),
    `input_image` (user); `output_text`, `output_audio` (assistant); `text`, `audio` in
    `response.content_part.*` events."""

    type: Literal["input_text", "input_audio", "input_image", "output_text", "output_audio", "text", "audio"]
    text: str | None = None
    audio: str | None = None
    transcript: str | None = None
    image_url: str | None = None
    detail: Literal["auto", "low", "high"] | None = None


ItemStatus = Literal["completed", "incomplete", "in_progress"]


class MessageItem(Struct, tag_field="type", tag="message", kw_only=True):
    role: Literal["user", "assistant", "system"]
    content: list[ContentPart]
    id: ItemId | None = None
    object: Literal["realtime.item"] = "realtime.item"
    status: ItemStatus | None = None


class FunctionCallItem(Struct, tag_field="type", tag="function_call", kw_only=True):
    name: str
    arguments: str
    id: ItemId | None = None
    call_id: str | None = None
    object: Literal["realtime.item"] = "realtime.item"
    status: ItemStatus | None = None


class FunctionCallOutputItem(Struct, tag_field="type", tag="function_call_output", kw_only=True):
    call_id: str
    output: str
    id: ItemId | None = None
    object: Literal["realtime.item"] = "realtime.item"
    status: ItemStatus | None = None


ConversationItem = MessageItem | FunctionCallItem | FunctionCallOutputItem
