"""The Realtime API's conversation: its items, the response resource, and the events of a
response, in the GA shape of the openai SDK (`openai/types/realtime/`: `conversation_item.py`,
`realtime_response.py`, `response_*_event.py`, `conversation_item_*_event.py`).

Items are what a conversation holds and what clients send in `conversation.item.create`: a
message (system, user or assistant; its content parts told apart by `type`), a `function_call`
the model made, and the client's `function_call_output`. Each server event carries an
`event_id` made here.
"""

from __future__ import annotations

import secrets
from typing import Annotated, Any, Literal

from msgspec import Meta, Struct, field

from appliance.protocol.openai import Identifier

__all__ = [
    "ContentPart",
    "ErrorEvent",
    "ConversationItem",
    "ConversationItemAdded",
    "ConversationItemCreate",
    "ConversationItemDeleted",
    "ConversationItemDone",
    "ConversationItemTruncate",
    "ConversationItemTruncated",
    "FunctionCallItem",
    "FunctionCallOutputItem",
    "MessageItem",
    "RealtimeError",
    "RealtimeFunctionTool",
    "RealtimeResponse",
    "ResponseCancel",
    "ResponseCreate",
    "ResponseCreateParams",
    "ServerEvent",
    "new_id",
]

ItemId = Annotated[str, Meta(min_length=1, max_length=64)]
"""OpenAI's item ids are at most 32 characters; a little room for clients' own schemes."""
ItemStatus = Literal["completed", "incomplete", "in_progress"]


def new_id(prefix: str) -> str:
    """An id in OpenAI's style: `item_...`, `resp_...`, `event_...`, `call_...`."""
    return f"{prefix}_{secrets.token_hex(10)}"


def _event_id() -> str:
    return new_id("event")


class ContentPart(Struct, kw_only=True, omit_defaults=True):
    """A message's content: `input_text` / `input_audio` (user), `output_text` / `output_audio`
    (assistant). An audio part's `transcript` is the text the model reads; its `audio` is never
    echoed back (OpenAI's items hold it; here the samples are not kept)."""

    type: Literal["input_text", "input_audio", "input_image", "output_text", "output_audio", "text", "audio"]
    text: str | None = None
    audio: str | None = None
    transcript: str | None = None


class MessageItem(Struct, tag_field="type", tag="message", kw_only=True):
    role: Literal["system", "user", "assistant"]
    content: list[ContentPart]
    id: ItemId | None = None
    object: Literal["realtime.item"] = "realtime.item"
    status: ItemStatus | None = None


class FunctionCallItem(Struct, tag_field="type", tag="function_call", kw_only=True):
    name: str
    arguments: str
    call_id: str | None = None
    id: ItemId | None = None
    object: Literal["realtime.item"] = "realtime.item"
    status: ItemStatus | None = None


class FunctionCallOutputItem(Struct, tag_field="type", tag="function_call_output", kw_only=True):
    call_id: str
    output: str
    id: ItemId | None = None
    object: Literal["realtime.item"] = "realtime.item"
    status: ItemStatus | None = None


ConversationItem = MessageItem | FunctionCallItem | FunctionCallOutputItem


class RealtimeFunctionTool(Struct, kw_only=True):
    """A function the model may call (flat, as the Responses API's)."""

    name: Identifier
    type: Literal["function"] = "function"
    description: str | None = None
    parameters: dict[str, Any] | None = None


class ToolChoiceFunction(Struct, kw_only=True):
    name: str
    type: Literal["function"] = "function"


ToolChoice = Literal["auto", "none", "required"] | ToolChoiceFunction
MaxOutputTokens = Annotated[int, Meta(ge=1, le=4096)] | Literal["inf"]


# -- client events -------------------------------------------------------------------------


class ConversationItemCreate(Struct, tag_field="type", tag="conversation.item.create", kw_only=True):
    item: ConversationItem
    event_id: str | None = None
    previous_item_id: str | None = None


class ConversationItemTruncate(Struct, tag_field="type", tag="conversation.item.truncate", kw_only=True):
    item_id: str
    content_index: Annotated[int, Meta(ge=0)]
    audio_end_ms: Annotated[int, Meta(ge=0)]
    event_id: str | None = None


class ConversationItemDelete(Struct, tag_field="type", tag="conversation.item.delete", kw_only=True):
    item_id: str
    event_id: str | None = None


class ResponseCreateParams(Struct, kw_only=True):
    """`response.create`'s overrides of the session for one response."""

    instructions: str | None = None
    tools: list[RealtimeFunctionTool] | None = None
    tool_choice: ToolChoice | None = None
    max_output_tokens: MaxOutputTokens | None = None
    output_modalities: list[Literal["text", "audio"]] | None = None
    temperature: Annotated[float, Meta(ge=0, le=2)] | None = None
    metadata: dict[str, str] | None = None
    conversation: str | None = None
    input: list[Any] | None = None
    audio: dict[str, Any] | None = None


class ResponseCreate(Struct, tag_field="type", tag="response.create", kw_only=True):
    response: ResponseCreateParams | None = None
    event_id: str | None = None


class ResponseCancel(Struct, tag_field="type", tag="response.cancel", kw_only=True):
    response_id: str | None = None
    event_id: str | None = None


# -- the response resource -----------------------------------------------------------------


class StatusDetails(Struct, kw_only=True, omit_defaults=True):
    type: Literal["completed", "cancelled", "incomplete", "failed"]
    reason: Literal["turn_detected", "client_cancelled", "max_output_tokens", "content_filter"] | None = None
    error: dict[str, str | None] | None = None


class InputTokenDetails(Struct, kw_only=True):
    text_tokens: int = 0
    audio_tokens: int = 0
    image_tokens: int = 0
    cached_tokens: int = 0


class OutputTokenDetails(Struct, kw_only=True):
    text_tokens: int = 0
    audio_tokens: int = 0


class ResponseUsage(Struct, kw_only=True):
    """Text tokens as the chat model counts them; audio out as the voice's acoustic frames (hibari:
    one per 12.5 ms)."""

    total_tokens: int
    input_tokens: int
    output_tokens: int
    input_token_details: InputTokenDetails
    output_token_details: OutputTokenDetails


class AudioOutputFormat(Struct, kw_only=True):
    type: Literal["audio/pcm"] = "audio/pcm"
    rate: int = 24_000


class AudioOutput(Struct, kw_only=True):
    format: AudioOutputFormat
    voice: str


class ResponseAudio(Struct, kw_only=True):
    output: AudioOutput


class RealtimeResponse(Struct, kw_only=True):
    id: str
    status: Literal["in_progress", "completed", "cancelled", "failed", "incomplete"]
    output: list[ConversationItem]
    output_modalities: list[Literal["text", "audio"]]
    max_output_tokens: int | Literal["inf"]
    object: Literal["realtime.response"] = "realtime.response"
    conversation_id: str | None = None
    status_details: StatusDetails | None = None
    audio: ResponseAudio | None = None
    usage: ResponseUsage | None = None
    metadata: dict[str, str] | None = None


# -- server events -------------------------------------------------------------------------


class _ServerEvent(Struct, kw_only=True):
    event_id: str = field(default_factory=_event_id)


class ConversationItemAdded(_ServerEvent, tag_field="type", tag="conversation.item.added", kw_only=True):
    item: ConversationItem
    previous_item_id: str | None = None


class ConversationItemDone(_ServerEvent, tag_field="type", tag="conversation.item.done", kw_only=True):
    item: ConversationItem
    previous_item_id: str | None = None


class ConversationItemDeleted(_ServerEvent, tag_field="type", tag="conversation.item.deleted", kw_only=True):
    item_id: str


class ConversationItemTruncated(_ServerEvent, tag_field="type", tag="conversation.item.truncated", kw_only=True):
    item_id: str
    content_index: int
    audio_end_ms: int


class ResponseCreated(_ServerEvent, tag_field="type", tag="response.created", kw_only=True):
    response: RealtimeResponse


class ResponseDone(_ServerEvent, tag_field="type", tag="response.done", kw_only=True):
    response: RealtimeResponse


class ResponseOutputItemAdded(_ServerEvent, tag_field="type", tag="response.output_item.added", kw_only=True):
    response_id: str
    output_index: int
    item: ConversationItem


class ResponseOutputItemDone(_ServerEvent, tag_field="type", tag="response.output_item.done", kw_only=True):
    response_id: str
    output_index: int
    item: ConversationItem


class _ContentEvent(_ServerEvent, kw_only=True):
    response_id: str
    item_id: str
    output_index: int
    content_index: int


class ResponseContentPartAdded(_ContentEvent, tag_field="type", tag="response.content_part.added", kw_only=True):
    part: ContentPart


class ResponseContentPartDone(_ContentEvent, tag_field="type", tag="response.content_part.done", kw_only=True):
    part: ContentPart


class ResponseOutputTextDelta(_ContentEvent, tag_field="type", tag="response.output_text.delta", kw_only=True):
    delta: str


class ResponseOutputTextDone(_ContentEvent, tag_field="type", tag="response.output_text.done", kw_only=True):
    text: str


class ResponseOutputAudioTranscriptDelta(
    _ContentEvent, tag_field="type", tag="response.output_audio_transcript.delta", kw_only=True
):
    delta: str


class ResponseOutputAudioTranscriptDone(
    _ContentEvent, tag_field="type", tag="response.output_audio_transcript.done", kw_only=True
):
    transcript: str


class ResponseOutputAudioDelta(_ContentEvent, tag_field="type", tag="response.output_audio.delta", kw_only=True):
    delta: str
    """Base64 of little-endian 16-bit mono samples at the session's output rate."""


class ResponseOutputAudioDone(_ContentEvent, tag_field="type", tag="response.output_audio.done", kw_only=True):
    pass


class _CallEvent(_ServerEvent, kw_only=True):
    response_id: str
    item_id: str
    output_index: int
    call_id: str


class ResponseFunctionCallArgumentsDelta(
    _CallEvent, tag_field="type", tag="response.function_call_arguments.delta", kw_only=True
):
    delta: str


class ResponseFunctionCallArgumentsDone(
    _CallEvent, tag_field="type", tag="response.function_call_arguments.done", kw_only=True
):
    name: str
    arguments: str


ServerEvent = (
    ConversationItemAdded
    | ConversationItemDone
    | ConversationItemDeleted
    | ConversationItemTruncated
    | ResponseCreated
    | ResponseDone
    | ResponseOutputItemAdded
    | ResponseOutputItemDone
    | ResponseContentPartAdded
    | ResponseContentPartDone
    | ResponseOutputTextDelta
    | ResponseOutputTextDone
    | ResponseOutputAudioTranscriptDelta
    | ResponseOutputAudioTranscriptDone
    | ResponseOutputAudioDelta
    | ResponseOutputAudioDone
    | ResponseFunctionCallArgumentsDelta
    | ResponseFunctionCallArgumentsDone
)
"""The events a conversation sends (errors are the session's `error` event)."""


class RealtimeError(Struct, kw_only=True):
    message: str
    type: str
    code: str | None = None
    param: str | None = None
    event_id: str | None = None
    """The client event that caused it."""


class ErrorEvent(_ServerEvent, tag_field="type", tag="error", kw_only=True):
    """A client event refused (the session goes on)."""

    error: RealtimeError
