"""Client events (`realtime_client_event.py`): what a client sends, tagged by `type`, unknown fields
accepted. `ClientEvent` is their union, `CLIENT_EVENT_TYPES` their tags.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from msgspec import UNSET, Meta, Struct, UnsetType

from .items import ConversationItem
from .session_config import FunctionTool, MaxOutputTokens, Milliseconds, RealtimeAudio, SessionConfig, ToolChoice

__all__ = [
    "CLIENT_EVENT_TYPES",
    "ClientEvent",
    "ConversationItemCreate",
    "ConversationItemDelete",
    "ConversationItemRetrieve",
    "ConversationItemTruncate",
    "InputAudioBufferAppend",
    "InputAudioBufferClear",
    "InputAudioBufferCommit",
    "OutputAudioBufferClear",
    "ResponseCancel",
    "ResponseCreate",
    "ResponseCreateParams",
    "SessionUpdate",
]


class _ClientEvent(Struct, kw_only=True):
    event_id: str | None = None


class SessionUpdate(_ClientEvent, tag_field="type", tag="session.update", kw_only=True):
    session: SessionConfig


class InputAudioBufferAppend(_ClientEvent, tag_field="type", tag="input_audio_buffer.append", kw_only=True):
    audio: str
    """Base64 audio in the session's input format."""


class InputAudioBufferCommit(_ClientEvent, tag_field="type", tag="input_audio_buffer.commit", kw_only=True):
    pass


class InputAudioBufferClear(_ClientEvent, tag_field="type", tag="input_audio_buffer.clear", kw_only=True):
    pass


class OutputAudioBufferClear(_ClientEvent, tag_field="type", tag="output_audio_buffer.clear", kw_only=True):
    pass


class ConversationItemCreate(_ClientEvent, tag_field="type", tag="conversation.item.create", kw_only=True):
    item: ConversationItem
    previous_item_id: str | None = None


class ConversationItemDelete(_ClientEvent, tag_field="type", tag="conversation.item.delete", kw_only=True):
    item_id: str


class ConversationItemRetrieve(_ClientEvent, tag_field="type", tag="conversation.item.retrieve", kw_only=True):
    item_id: str


class ConversationItemTruncate(_ClientEvent, tag_field="type", tag="conversation.item.truncate", kw_only=True):
    item_id: str
    content_index: Annotated[int, Meta(ge=0)]
    audio_end_ms: Milliseconds


class ResponseCreateParams(Struct, kw_only=True, omit_defaults=True):
    """`response.create`'s overrides of the session for one response."""

    audio: RealtimeAudio | UnsetType = UNSET
    conversation: str | UnsetType = UNSET
    """"auto" (default) or "none" (an out-of-band response)."""
    input: list[ConversationItem] | UnsetType = UNSET
    instructions: str | UnsetType = UNSET
    max_output_tokens: MaxOutputTokens | UnsetType = UNSET
    metadata: dict[str, str] | None | UnsetType = UNSET
    output_modalities: list[Literal["text", "audio"]] | UnsetType = UNSET
    parallel_tool_calls: bool | UnsetType = UNSET
    prompt: Any | UnsetType = UNSET
    reasoning: Any | UnsetType = UNSET
    tool_choice: ToolChoice | UnsetType = UNSET
    tools: list[FunctionTool] | UnsetType = UNSET


class ResponseCreate(_ClientEvent, tag_field="type", tag="response.create", kw_only=True):
    response: ResponseCreateParams | None = None


class ResponseCancel(_ClientEvent, tag_field="type", tag="response.cancel", kw_only=True):
    response_id: str | None = None


ClientEvent = (
    SessionUpdate
    | InputAudioBufferAppend
    | InputAudioBufferCommit
    | InputAudioBufferClear
    | OutputAudioBufferClear
    | ConversationItemCreate
    | ConversationItemDelete
    | ConversationItemRetrieve
    | ConversationItemTruncate
    | ResponseCreate
    | ResponseCancel
)
CLIENT_EVENT_TYPES = frozenset(kind.__struct_config__.tag for kind in ClientEvent.__args__)
