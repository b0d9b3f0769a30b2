"""OpenAI's Realtime API (GA, `wss://.../v1/realtime`): the session configuration, the items of a
conversation, and every client and server event, as the openai SDK 3.x types them
(`openai/types/realtime/*.py`; wire names and field order as there).

Events are JSON text messages tagged by `type`. Client events (`ClientEvent`) accept unknown
fields (the SDK adds new ones; OpenAI ignores what it does not know); `UNSET` marks a field the
client left out, which `session.update` must tell from an explicit `null` (`turn_detection: null`
turns server VAD off, leaving it out keeps it). Server events carry a server-made `event_id`
(`event_id()`); encode them with `encode_event`.

Which events the appliance serves, and what it answers to the others, is the dialect's business
(`appliance/dialects/realtime/`); these are the shapes only, the conversation's `response.*`
events included.

The package by part: `session_config` (audio formats, turn detection, tools, the two session
kinds), `items` (a conversation's items and content parts), `client_events`, `server_events`
(session, items, input audio, transcription, rate limits) and `response_events` (the answer's
`response.*` and `output_audio_buffer.*` events). This face re-exports them all, and joins the
server events into `ServerEvent`, with `encode_event` to write one.
"""

from __future__ import annotations

import msgspec
from msgspec import UNSET, UnsetType

from .client_events import (
    CLIENT_EVENT_TYPES,
    ClientEvent,
    ConversationItemCreate,
    ConversationItemDelete,
    ConversationItemRetrieve,
    ConversationItemTruncate,
    InputAudioBufferAppend,
    InputAudioBufferClear,
    InputAudioBufferCommit,
    OutputAudioBufferClear,
    ResponseCancel,
    ResponseCreate,
    ResponseCreateParams,
    SessionUpdate,
)
from .items import (
    ContentPart,
    ConversationItem,
    FunctionCallItem,
    FunctionCallOutputItem,
    ItemId,
    ItemStatus,
    MessageItem,
)
from .response_events import (
    InputTokenDetails,
    OutputAudioBufferCleared,
    OutputAudioBufferStarted,
    OutputAudioBufferStopped,
    OutputTokenDetails,
    RealtimeResponse,
    ResponseAudio,
    ResponseAudioOutput,
    ResponseContentPartAdded,
    ResponseContentPartDone,
    ResponseCreated,
    ResponseDone,
    ResponseFunctionCallArgumentsDelta,
    ResponseFunctionCallArgumentsDone,
    ResponseOutputAudioDelta,
    ResponseOutputAudioDone,
    ResponseOutputAudioTranscriptDelta,
    ResponseOutputAudioTranscriptDone,
    ResponseOutputItemAdded,
    ResponseOutputItemDone,
    ResponseOutputTextDelta,
    ResponseOutputTextDone,
    ResponseStatusDetails,
    ResponseStatusError,
    ResponseUsage,
)
from .server_events import (
    Conversation,
    ConversationCreated,
    ConversationItemAdded,
    ConversationItemCreated,
    ConversationItemDeleted,
    ConversationItemDone,
    ConversationItemRetrieved,
    ConversationItemTruncated,
    DurationUsage,
    ErrorEvent,
    InputAudioBufferCleared,
    InputAudioBufferCommitted,
    InputAudioBufferSpeechStarted,
    InputAudioBufferSpeechStopped,
    InputAudioBufferTimeoutTriggered,
    LogProb,
    RateLimit,
    RateLimitsUpdated,
    RealtimeError,
    ServerEventBase,
    SessionCreated,
    SessionUpdated,
    TranscriptionCompleted,
    TranscriptionDelta,
    TranscriptionError,
    TranscriptionFailed,
    event_id,
)
from .session_config import (
    AudioFormat,
    AudioInput,
    AudioOutput,
    AudioPCM,
    AudioPCMA,
    AudioPCMU,
    AudioTranscription,
    FunctionTool,
    FunctionToolChoice,
    MaxOutputTokens,
    Milliseconds,
    NoiseReduction,
    Probability,
    RealtimeAudio,
    RealtimeSession,
    SemanticVad,
    ServerVad,
    SessionConfig,
    ToolChoice,
    TranscriptionAudio,
    TranscriptionSession,
    TurnDetection,
)

__all__ = [
    "AudioFormat",
    "AudioInput",
    "AudioOutput",
    "AudioPCM",
    "AudioPCMA",
    "AudioPCMU",
    "AudioTranscription",
    "CLIENT_EVENT_TYPES",
    "ClientEvent",
    "ContentPart",
    "Conversation",
    "ConversationCreated",
    "ConversationItem",
    "ConversationItemAdded",
    "ConversationItemCreate",
    "ConversationItemCreated",
    "ConversationItemDelete",
    "ConversationItemDeleted",
    "ConversationItemDone",
    "ConversationItemRetrieve",
    "ConversationItemRetrieved",
    "ConversationItemTruncate",
    "ConversationItemTruncated",
    "DurationUsage",
    "ErrorEvent",
    "FunctionCallItem",
    "FunctionCallOutputItem",
    "FunctionTool",
    "FunctionToolChoice",
    "InputAudioBufferAppend",
    "InputAudioBufferClear",
    "InputAudioBufferCleared",
    "InputAudioBufferCommit",
    "InputAudioBufferCommitted",
    "InputAudioBufferSpeechStarted",
    "InputAudioBufferSpeechStopped",
    "InputAudioBufferTimeoutTriggered",
    "InputTokenDetails",
    "ItemId",
    "ItemStatus",
    "LogProb",
    "MaxOutputTokens",
    "MessageItem",
    "Milliseconds",
    "NoiseReduction",
    "OutputAudioBufferClear",
    "OutputAudioBufferCleared",
    "OutputAudioBufferStarted",
    "OutputAudioBufferStopped",
    "OutputTokenDetails",
    "Probability",
    "RateLimit",
    "RateLimitsUpdated",
    "RealtimeAudio",
    "RealtimeError",
    "RealtimeResponse",
    "RealtimeSession",
    "ResponseAudio",
    "ResponseAudioOutput",
    "ResponseCancel",
    "ResponseContentPartAdded",
    "ResponseContentPartDone",
    "ResponseCreate",
    "ResponseCreateParams",
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
    "SemanticVad",
    "ServerEvent",
    "ServerEventBase",
    "ServerVad",
    "SessionConfig",
    "SessionCreated",
    "SessionUpdate",
    "SessionUpdated",
    "ToolChoice",
    "TranscriptionAudio",
    "TranscriptionCompleted",
    "TranscriptionDelta",
    "TranscriptionError",
    "TranscriptionFailed",
    "TranscriptionSession",
    "TurnDetection",
    "UNSET",
    "UnsetType",
    "encode_event",
    "event_id",
]

ServerEvent = (
    ErrorEvent
    | SessionCreated
    | SessionUpdated
    | ConversationCreated
    | ConversationItemAdded
    | ConversationItemDone
    | ConversationItemCreated
    | ConversationItemRetrieved
    | ConversationItemDeleted
    | ConversationItemTruncated
    | InputAudioBufferCommitted
    | InputAudioBufferCleared
    | InputAudioBufferSpeechStarted
    | InputAudioBufferSpeechStopped
    | InputAudioBufferTimeoutTriggered
    | TranscriptionDelta
    | TranscriptionCompleted
    | TranscriptionFailed
    | RateLimitsUpdated
    | ResponseCreated
    | ResponseDone
    | ResponseOutputItemAdded
    | ResponseOutputItemDone
    | ResponseContentPartAdded
    | ResponseContentPartDone
    | ResponseOutputTextDelta
    | ResponseOutputTextDone
    | ResponseOutputAudioDelta
    | ResponseOutputAudioDone
    | ResponseOutputAudioTranscriptDelta
    | ResponseOutputAudioTranscriptDone
    | ResponseFunctionCallArgumentsDelta
    | ResponseFunctionCallArgumentsDone
    | OutputAudioBufferStarted
    | OutputAudioBufferStopped
    | OutputAudioBufferCleared
)

_encoder = msgspec.json.Encoder()


def encode_event(event: ServerEvent) -> str:
    """`event` as the JSON text of one websocket message."""
    return _encoder.encode(event).decode()
