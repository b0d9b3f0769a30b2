"""Server events about the session, the conversation's items, the input audio buffer, input
transcription and rate limits (`realtime_server_event.py`); the answer's `response.*` events are
`response_events`. Each carries a server-made `event_id` (`event_id()`, on `ServerEventBase`).
"""

from __future__ import annotations

import uuid
from typing import Any, Literal

import msgspec
from msgspec import Struct

from .items import ConversationItem

__all__ = [
    "Conversation",
    "ConversationCreated",
    "ConversationItemAdded",
    "ConversationItemCreated",
    "ConversationItemDeleted",
    "ConversationItemDone",
    "ConversationItemRetrieved",
    "ConversationItemTruncated",
    "DurationUsage",
    "ErrorEvent",
    "InputAudioBufferCleared",
    "InputAudioBufferCommitted",
    "InputAudioBufferSpeechStarted",
    "InputAudioBufferSpeechStopped",
    "InputAudioBufferTimeoutTriggered",
    "LogProb",
    "RateLimit",
    "RateLimitsUpdated",
    "RealtimeError",
    "ServerEventBase",
    "SessionCreated",
    "SessionUpdated",
    "TranscriptionCompleted",
    "TranscriptionDelta",
    "TranscriptionError",
    "TranscriptionFailed",
    "event_id",
]


def event_id() -> str:
    """A new server event id."""
    return "event_" + uuid.uuid4().hex[:20]


class ServerEventBase(Struct, kw_only=True):
    """Every server event: a server-made `event_id`."""

    event_id: str = msgspec.field(default_factory=event_id)


class RealtimeError(Struct, kw_only=True):
    """What went wrong: `event_id` is the client event's that caused it."""

    message: str
    type: str = "invalid_request_error"
    code: str | None = None
    param: str | None = None
    event_id: str | None = None


class ErrorEvent(ServerEventBase, tag_field="type", tag="error", kw_only=True):
    error: RealtimeError


class SessionCreated(ServerEventBase, tag_field="type", tag="session.created", kw_only=True):
    session: dict[str, Any]
    """The session's whole effective configuration (`RealtimeSession` or `TranscriptionSession`
    as a dict, with `id` and `object`)."""


class SessionUpdated(ServerEventBase, tag_field="type", tag="session.updated", kw_only=True):
    session: dict[str, Any]


class Conversation(Struct, kw_only=True):
    id: str
    object: Literal["realtime.conversation"] = "realtime.conversation"


class ConversationCreated(ServerEventBase, tag_field="type", tag="conversation.created", kw_only=True):
    conversation: Conversation


class ConversationItemAdded(ServerEventBase, tag_field="type", tag="conversation.item.added", kw_only=True):
    item: ConversationItem
    previous_item_id: str | None = None


class ConversationItemDone(ServerEventBase, tag_field="type", tag="conversation.item.done", kw_only=True):
    item: ConversationItem
    previous_item_id: str | None = None


class ConversationItemCreated(ServerEventBase, tag_field="type", tag="conversation.item.created", kw_only=True):
    item: ConversationItem
    previous_item_id: str | None = None


class ConversationItemRetrieved(ServerEventBase, tag_field="type", tag="conversation.item.retrieved", kw_only=True):
    item: ConversationItem


class ConversationItemDeleted(ServerEventBase, tag_field="type", tag="conversation.item.deleted", kw_only=True):
    item_id: str


class ConversationItemTruncated(ServerEventBase, tag_field="type", tag="conversation.item.truncated", kw_only=True):
    item_id: str
    content_index: int
    audio_end_ms: int


class InputAudioBufferCommitted(ServerEventBase, tag_field="type", tag="input_audio_buffer.committed", kw_only=True):
    item_id: str
    previous_item_id: str | None = None


class InputAudioBufferCleared(ServerEventBase, tag_field="type", tag="input_audio_buffer.cleared", kw_only=True):
    pass


class InputAudioBufferSpeechStarted(
    ServerEventBase, tag_field="type", tag="input_audio_buffer.speech_started", kw_only=True
):
    audio_start_ms: int
    """Where speech began in the session's audio, less `prefix_padding_ms`."""
    item_id: str


class InputAudioBufferSpeechStopped(
    ServerEventBase, tag_field="type", tag="input_audio_buffer.speech_stopped", kw_only=True
):
    audio_end_ms: int
    item_id: str


class InputAudioBufferTimeoutTriggered(
    ServerEventBase, tag_field="type", tag="input_audio_buffer.timeout_triggered", kw_only=True
):
    audio_start_ms: int
    audio_end_ms: int
    item_id: str


class LogProb(Struct, kw_only=True):
    token: str
    logprob: float
    bytes: list[int]


class TranscriptionDelta(
    ServerEventBase, tag_field="type", tag="conversation.item.input_audio_transcription.delta", kw_only=True
):
    item_id: str
    content_index: int = 0
    delta: str = ""
    logprobs: list[LogProb] | None = None


class DurationUsage(Struct, tag_field="type", tag="duration", kw_only=True):
    seconds: float


class TranscriptionCompleted(
    ServerEventBase, tag_field="type", tag="conversation.item.input_audio_transcription.completed", kw_only=True
):
    item_id: str
    content_index: int
    transcript: str
    usage: DurationUsage
    logprobs: list[LogProb] | None = None


class TranscriptionError(Struct, kw_only=True):
    message: str
    type: str = "transcription_error"
    code: str | None = None
    param: str | None = None


class TranscriptionFailed(
    ServerEventBase, tag_field="type", tag="conversation.item.input_audio_transcription.failed", kw_only=True
):
    item_id: str
    content_index: int
    error: TranscriptionError


class RateLimit(Struct, kw_only=True):
    name: Literal["requests", "tokens"]
    limit: int
    remaining: int
    reset_seconds: float


class RateLimitsUpdated(ServerEventBase, tag_field="type", tag="rate_limits.updated", kw_only=True):
    rate_limits: list[RateLimit]
