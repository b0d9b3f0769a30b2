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
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any, Literal

import msgspec
from msgspec import UNSET, Meta, Struct, UnsetType

__all__ = [
    "UNSET",
    "AudioFormat",
    "AudioPCM",
    "AudioPCMA",
    "AudioPCMU",
    "AudioTranscription",
    "ClientEvent",
    "ContentPart",
    "ConversationItem",
    "ErrorEvent",
    "FunctionCallItem",
    "FunctionCallOutputItem",
    "FunctionTool",
    "MessageItem",
    "RealtimeError",
    "RealtimeResponse",
    "RealtimeSession",
    "ResponseCreateParams",
    "ResponseStatusDetails",
    "ResponseUsage",
    "SemanticVad",
    "ServerEvent",
    "ServerVad",
    "SessionConfig",
    "TranscriptionSession",
    "UnsetType",
    "encode_event",
    "event_id",
]

Milliseconds = Annotated[int, Meta(ge=0, le=3_600_000)]
Probability = Annotated[float, Meta(ge=0.0, le=1.0)]
ItemId = Annotated[str, Meta(min_length=1, max_length=64)]

# -- audio formats (realtime_audio_formats.py) ----------------------------------------------


class AudioPCM(Struct, tag_field="type", tag="audio/pcm", kw_only=True):
    """16-bit little-endian mono PCM; OpenAI names 24 kHz only."""

    rate: Literal[24000] = 24000


class AudioPCMU(Struct, tag_field="type", tag="audio/pcmu", kw_only=True):
    """G.711 mu-law, 8 kHz."""


class AudioPCMA(Struct, tag_field="type", tag="audio/pcma", kw_only=True):
    """G.711 A-law, 8 kHz."""


AudioFormat = AudioPCM | AudioPCMU | AudioPCMA

# -- session configuration (realtime_session_create_request.py, ..._transcription_...) --------


class NoiseReduction(Struct, kw_only=True):
    type: Literal["near_field", "far_field"] | None = None
    strength: float | None = None


class AudioTranscription(Struct, kw_only=True, omit_defaults=True):
    """Which model transcribes the input audio, in which language, with which prompt."""

    model: str | None = None
    language: str | None = None
    prompt: str | None = None
    delay: str | None = None
    keywords: list[str] | None = None
    languages: list[str] | None = None


class ServerVad(Struct, tag_field="type", tag="server_vad", kw_only=True):
    """Turn detection on a voice-activity model: speech opens at `threshold`, the turn ends after
    `silence_duration_ms` of quiet, the committed audio begins `prefix_padding_ms` before speech."""

    threshold: Probability | None = None
    prefix_padding_ms: Milliseconds | None = None
    silence_duration_ms: Milliseconds | None = None
    create_response: bool | None = None
    interrupt_response: bool | None = None
    idle_timeout_ms: Milliseconds | None = None


class SemanticVad(Struct, tag_field="type", tag="semantic_vad", kw_only=True):
    eagerness: Literal["low", "medium", "high", "auto"] | None = None
    create_response: bool | None = None
    interrupt_response: bool | None = None


TurnDetection = ServerVad | SemanticVad


class AudioInput(Struct, kw_only=True, omit_defaults=True):
    """`session.audio.input`: each field left out keeps its value; `turn_detection: null` turns
    turn detection off (manual commits), `transcription: null` transcription."""

    format: AudioFormat | UnsetType = UNSET
    noise_reduction: NoiseReduction | None | UnsetType = UNSET
    transcription: AudioTranscription | None | UnsetType = UNSET
    turn_detection: TurnDetection | None | UnsetType = UNSET


class AudioOutput(Struct, kw_only=True, omit_defaults=True):
    format: AudioFormat | UnsetType = UNSET
    speed: Annotated[float, Meta(ge=0.25, le=1.5)] | UnsetType = UNSET
    voice: str | UnsetType = UNSET


class TranscriptionAudio(Struct, kw_only=True, omit_defaults=True):
    input: AudioInput | UnsetType = UNSET


class RealtimeAudio(Struct, kw_only=True, omit_defaults=True):
    input: AudioInput | UnsetType = UNSET
    output: AudioOutput | UnsetType = UNSET


class FunctionTool(Struct, kw_only=True, omit_defaults=True):
    type: Literal["function"] = "function"
    name: str | None = None
    description: str | None = None
    parameters: dict[str, Any] | None = None


class FunctionToolChoice(Struct, kw_only=True):
    type: Literal["function"]
    name: str


ToolChoice = Literal["none", "auto", "required"] | FunctionToolChoice
MaxOutputTokens = Annotated[int, Meta(ge=1)] | Literal["inf"]


class TranscriptionSession(Struct, tag_field="type", tag="transcription", kw_only=True, omit_defaults=True):
    """A session that transcribes its input audio and answers nothing."""

    audio: TranscriptionAudio | UnsetType = UNSET
    include: list[Literal["item.input_audio_transcription.logprobs"]] | UnsetType = UNSET


class RealtimeSession(Struct, tag_field="type", tag="realtime", kw_only=True, omit_defaults=True):
    """A conversation session (speech or text in, text and/or audio out)."""

    audio: RealtimeAudio | UnsetType = UNSET
    include: list[Literal["item.input_audio_transcription.logprobs"]] | UnsetType = UNSET
    instructions: str | UnsetType = UNSET
    max_output_tokens: MaxOutputTokens | UnsetType = UNSET
    model: str | UnsetType = UNSET
    output_modalities: list[Literal["text", "audio"]] | UnsetType = UNSET
    parallel_tool_calls: bool | UnsetType = UNSET
    prompt: Any | UnsetType = UNSET
    reasoning: Any | UnsetType = UNSET
    tool_choice: ToolChoice | UnsetType = UNSET
    tools: list[FunctionTool] | UnsetType = UNSET
    tracing: Any | UnsetType = UNSET
    truncation: Any | UnsetType = UNSET


SessionConfig = RealtimeSession | TranscriptionSession

# -- conversation items (realtime_conversation_item_*.py) ------------------------------------


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

# -- client events (realtime_client_event.py) ------------------------------------------------


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

# -- server events (realtime_server_event.py) -------------------------------------------------


def event_id() -> str:
    """A new server event id."""
    return "event_" + uuid.uuid4().hex[:20]


class _ServerEvent(Struct, kw_only=True):
    event_id: str = msgspec.field(default_factory=event_id)


class RealtimeError(Struct, kw_only=True):
    """What went wrong: `event_id` is the client event's that caused it."""

    message: str
    type: str = "invalid_request_error"
    code: str | None = None
    param: str | None = None
    event_id: str | None = None


class ErrorEvent(_ServerEvent, tag_field="type", tag="error", kw_only=True):
    error: RealtimeError


class SessionCreated(_ServerEvent, tag_field="type", tag="session.created", kw_only=True):
    session: dict[str, Any]
    """The session's whole effective configuration (`RealtimeSession` or `TranscriptionSession`
    as a dict, with `id` and `object`)."""


class SessionUpdated(_ServerEvent, tag_field="type", tag="session.updated", kw_only=True):
    session: dict[str, Any]


class Conversation(Struct, kw_only=True):
    id: str
    object: Literal["realtime.conversation"] = "realtime.conversation"


class ConversationCreated(_ServerEvent, tag_field="type", tag="conversation.created", kw_only=True):
    conversation: Conversation


class ConversationItemAdded(_ServerEvent, tag_field="type", tag="conversation.item.added", kw_only=True):
    item: ConversationItem
    previous_item_id: str | None = None


class ConversationItemDone(_ServerEvent, tag_field="type", tag="conversation.item.done", kw_only=True):
    item: ConversationItem
    previous_item_id: str | None = None


class ConversationItemCreated(_ServerEvent, tag_field="type", tag="conversation.item.created", kw_only=True):
    item: ConversationItem
    previous_item_id: str | None = None


class ConversationItemRetrieved(_ServerEvent, tag_field="type", tag="conversation.item.retrieved", kw_only=True):
    item: ConversationItem


class ConversationItemDeleted(_ServerEvent, tag_field="type", tag="conversation.item.deleted", kw_only=True):
    item_id: str


class ConversationItemTruncated(_ServerEvent, tag_field="type", tag="conversation.item.truncated", kw_only=True):
    item_id: str
    content_index: int
    audio_end_ms: int


class InputAudioBufferCommitted(_ServerEvent, tag_field="type", tag="input_audio_buffer.committed", kw_only=True):
    item_id: str
    previous_item_id: str | None = None


class InputAudioBufferCleared(_ServerEvent, tag_field="type", tag="input_audio_buffer.cleared", kw_only=True):
    pass


class InputAudioBufferSpeechStarted(
    _ServerEvent, tag_field="type", tag="input_audio_buffer.speech_started", kw_only=True
):
    audio_start_ms: int
    """Where speech began in the session's audio, less `prefix_padding_ms`."""
    item_id: str


class InputAudioBufferSpeechStopped(
    _ServerEvent, tag_field="type", tag="input_audio_buffer.speech_stopped", kw_only=True
):
    audio_end_ms: int
    item_id: str


class InputAudioBufferTimeoutTriggered(
    _ServerEvent, tag_field="type", tag="input_audio_buffer.timeout_triggered", kw_only=True
):
    audio_start_ms: int
    audio_end_ms: int
    item_id: str


class LogProb(Struct, kw_only=True):
    token: str
    logprob: float
    bytes: list[int]


class TranscriptionDelta(
    _ServerEvent, tag_field="type", tag="conversation.item.input_audio_transcription.delta", kw_only=True
):
    item_id: str
    content_index: int = 0
    delta: str = ""
    logprobs: list[LogProb] | None = None


class DurationUsage(Struct, tag_field="type", tag="duration", kw_only=True):
    seconds: float


class TranscriptionCompleted(
    _ServerEvent, tag_field="type", tag="conversation.item.input_audio_transcription.completed", kw_only=True
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
    _ServerEvent, tag_field="type", tag="conversation.item.input_audio_transcription.failed", kw_only=True
):
    item_id: str
    content_index: int
    error: TranscriptionError


class RateLimit(Struct, kw_only=True):
    name: Literal["requests", "tokens"]
    limit: int
    remaining: int
    reset_seconds: float


class RateLimitsUpdated(_ServerEvent, tag_field="type", tag="rate_limits.updated", kw_only=True):
    rate_limits: list[RateLimit]


# -- the conversation's answer: response.* events ------------------------------------------


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
    _ServerEvent, tag_field="type", tag="response.function_call_arguments.delta", kw_only=True
):
    response_id: str
    item_id: str
    output_index: int
    call_id: str
    delta: str


class ResponseFunctionCallArgumentsDone(
    _ServerEvent, tag_field="type", tag="response.function_call_arguments.done", kw_only=True
):
    response_id: str
    item_id: str
    output_index: int
    call_id: str
    name: str
    arguments: str


class OutputAudioBufferStarted(_ServerEvent, tag_field="type", tag="output_audio_buffer.started", kw_only=True):
    response_id: str


class OutputAudioBufferStopped(_ServerEvent, tag_field="type", tag="output_audio_buffer.stopped", kw_only=True):
    response_id: str


class OutputAudioBufferCleared(_ServerEvent, tag_field="type", tag="output_audio_buffer.cleared", kw_only=True):
    response_id: str


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
