"""The conversation's answer: `response.*` events (the response, its output items, their content
parts, text, audio, transcripts and function-call arguments as they stream) and the
`output_audio_buffer.*` events of its audio.
"""

from __future__ import annotations

from typing import Literal

import msgspec
from msgspec import Struct

from .items import ContentPart, ConversationItem
from .server_events import ServerEventBase
from .session_config import AudioFormat

__all__ = [
    "InputTokenDetails",
    "OutputAudioBufferCleared",
    "OutputAudioBufferStarted",
    "OutputAudioBufferStopped",
    "OutputTokenDetails",
    "RealtimeResponse",
    "ResponseAudio",
    "ResponseAudioOutput",
    "ResponseContentPartAdded",
    "ResponseContentPartDone",
    "ResponseCreated",
    "ResponseDone",
    "ResponseFunctionCallArgumentsDelta",
    "ResponseFunctionCallArgumentsDone",
    "ResponseOutputAudioDelta",
    "ResponseOutputAudioDone",
    "ResponseOutputAudioTranscriptDelta",
    "ResponseOutputAudioTranscriptDone",
    "ResponseOutputItemAdded",
    "ResponseOutputItemDone",
    "ResponseOutputTextDelta",
    "ResponseOutputTextDone",
    "ResponseStatusDetails",
    "ResponseStatusError",
    "ResponseUsage",
]


class ResponseStatusError(Struct, kw_only=True):
    type: str | None = None
    code: str | None = None
    message: str | None = None


class ResponseStatusDetails(Struct, kw_only=True, omit_defaults=True):
    type: Literal["completed", "cancelled", "incomplete", "failed"] | None = None
    reason: Literal["turn_detected", "client_cancelled", "max_output_tokens", "content_filter"] | None = None
    error: ResponseStatusError | None = None


class InputTokenDetails(Struct, kw_only=True):
    text_tokens: int = 0
    audio_tokens: int = 0
    cached_tokens: int = 0
    image_tokens: int = 0


class OutputTokenDetails(Struct, kw_only=True):
    text_tokens: int = 0
    audio_tokens: int = 0


class ResponseUsage(Struct, kw_only=True):
    total_tokens: int
    input_tokens: int
    output_tokens: int
    input_token_details: InputTokenDetails = msgspec.field(default_factory=InputTokenDetails)
    output_token_details: OutputTokenDetails = msgspec.field(default_factory=OutputTokenDetails)


class ResponseAudioOutput(Struct, kw_only=True, omit_defaults=True):
    format: AudioFormat | None = None
    voice: str | None = None


class ResponseAudio(Struct, kw_only=True):
    output: ResponseAudioOutput


class RealtimeResponse(Struct, kw_only=True):
    """A response, as `response.created` (in progress, no output) and `response.done` show it."""

    id: str
    object: Literal["realtime.response"] = "realtime.response"
    status: Literal["in_progress", "completed", "cancelled", "incomplete", "failed"] = "in_progress"
    status_details: ResponseStatusDetails | None = None
    output: list[ConversationItem] = []
    conversation_id: str | None = None
    output_modalities: list[Literal["text", "audio"]] = msgspec.field(default_factory=lambda: ["audio"])
    max_output_tokens: int | Literal["inf"] = "inf"
    audio: ResponseAudio | None = None
    usage: ResponseUsage | None = None
    metadata: dict[str, str] | None = None


class ResponseCreated(ServerEventBase, tag_field="type", tag="response.created", kw_only=True):
    response: RealtimeResponse


class ResponseDone(ServerEventBase, tag_field="type", tag="response.done", kw_only=True):
    response: RealtimeResponse


class ResponseOutputItemAdded(ServerEventBase, tag_field="type", tag="response.output_item.added", kw_only=True):
    response_id: str
    output_index: int
    item: ConversationItem


class ResponseOutputItemDone(ServerEventBase, tag_field="type", tag="response.output_item.done", kw_only=True):
    response_id: str
    output_index: int
    item: ConversationItem


class _ContentEvent(ServerEventBase, kw_only=True):
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


class ResponseOutputAudioDelta(_ContentEvent, tag_field="type", tag="response.output_audio.delta", kw_only=True):
    delta: str
    """Base64 audio in the session's output format."""


class ResponseOutputAudioDone(_ContentEvent, tag_field="type", tag="response.output_audio.done", kw_only=True):
    pass


class ResponseOutputAudioTranscriptDelta(
    _ContentEvent, tag_field="type", tag="response.output_audio_transcript.delta", kw_only=True
):
    delta: str


class ResponseOutputAudioTranscriptDone(
    _ContentEvent, tag_field="type", tag="response.output_audio_transcript.done", kw_only=True
):
    transcript: str


class ResponseFunctionCallArgumentsDelta(
    ServerEventBase, tag_field="type", tag="response.function_call_arguments.delta", kw_only=True
):
    response_id: str
    item_id: str
    output_index: int
    call_id: str
    delta: str


class ResponseFunctionCallArgumentsDone(
    ServerEventBase, tag_field="type", tag="response.function_call_arguments.done", kw_only=True
):
    response_id: str
    item_id: str
    output_index: int
    call_id: str
    name: str
    arguments: str


class OutputAudioBufferStarted(ServerEventBase, tag_field="type", tag="output_audio_buffer.started", kw_only=True):
    response_id: str


class OutputAudioBufferStopped(ServerEventBase, tag_field="type", tag="output_audio_buffer.stopped", kw_only=True):
    response_id: str


class OutputAudioBufferCleared(ServerEventBase, tag_field="type", tag="output_audio_buffer.cleared", kw_only=True):
    response_id: str
