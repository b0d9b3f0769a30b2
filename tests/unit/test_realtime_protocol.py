"""Every server event of `protocol.realtime`, encoded, is read by the openai SDK's own types as the
event it names (the SDK's `RealtimeServerEvent` union, discriminated by `type`), and the SDK's client
events decode into ours: the conversation side builds on these shapes."""

from __future__ import annotations

import typing

import msgspec
import pydantic
from openai.types.realtime import RealtimeServerEvent

from appliance.protocol import realtime as rt

ITEM = rt.MessageItem(
    id="item_1", role="assistant", status="completed", content=[rt.ContentPart(type="output_text", text="hi")]
)
CALL = rt.FunctionCallItem(id="item_2", name="lookup", arguments='{"q": 1}', call_id="call_1", status="completed")
RESPONSE = rt.RealtimeResponse(
    id="resp_1",
    status="completed",
    output=[ITEM, CALL],
    usage=rt.ResponseUsage(total_tokens=5, input_tokens=3, output_tokens=2),
    audio=rt.ResponseAudio(output=rt.ResponseAudioOutput(format=rt.AudioPCM(), voice="heart")),
)
CONTENT = {"response_id": "resp_1", "item_id": "item_1", "output_index": 0, "content_index": 0}
SAMPLES: dict[type, dict] = {
    rt.ErrorEvent: {"error": rt.RealtimeError(message="bad", param="audio", event_id="e1")},
    rt.SessionCreated: {"session": {"type": "transcription", "audio": {"input": {"turn_detection": None}}}},
    rt.SessionUpdated: {"session": {"type": "realtime", "instructions": "be brief"}},
    rt.ConversationCreated: {"conversation": rt.Conversation(id="conv_1")},
    rt.ConversationItemAdded: {"item": ITEM},
    rt.ConversationItemDone: {"item": CALL, "previous_item_id": "item_0"},
    rt.ConversationItemCreated: {"item": rt.FunctionCallOutputItem(call_id="call_1", output="42")},
    rt.ConversationItemRetrieved: {"item": ITEM},
    rt.ConversationItemDeleted: {"item_id": "item_1"},
    rt.ConversationItemTruncated: {"item_id": "item_1", "content_index": 0, "audio_end_ms": 1500},
    rt.InputAudioBufferCommitted: {"item_id": "item_1"},
    rt.InputAudioBufferCleared: {},
    rt.InputAudioBufferSpeechStarted: {"audio_start_ms": 100, "item_id": "item_1"},
    rt.InputAudioBufferSpeechStopped: {"audio_end_ms": 900, "item_id": "item_1"},
    rt.InputAudioBufferTimeoutTriggered: {"audio_start_ms": 0, "audio_end_ms": 5000, "item_id": "item_1"},
    rt.TranscriptionDelta: {"item_id": "item_1", "delta": " The"},
    rt.TranscriptionCompleted: {
        "item_id": "item_1",
        "content_index": 0,
        "transcript": "The capital",
        "usage": rt.DurationUsage(seconds=1.5),
    },
    rt.TranscriptionFailed: {"item_id": "item_1", "content_index": 0, "error": rt.TranscriptionError(message="x")},
    rt.RateLimitsUpdated: {"rate_limits": [rt.RateLimit(name="requests", limit=10, remaining=9, reset_seconds=1.0)]},
    rt.ResponseCreated: {"response": rt.RealtimeResponse(id="resp_1")},
    rt.ResponseDone: {"response": RESPONSE},
    rt.ResponseOutputItemAdded: {"response_id": "resp_1", "output_index": 0, "item": ITEM},
    rt.ResponseOutputItemDone: {"response_id": "resp_1", "output_index": 1, "item": CALL},
    rt.ResponseContentPartAdded: {**CONTENT, "part": rt.ContentPart(type="audio", transcript="")},
    rt.ResponseContentPartDone: {**CONTENT, "part": rt.ContentPart(type="text", text="hi")},
    rt.ResponseOutputTextDelta: {**CONTENT, "delta": "h"},
    rt.ResponseOutputTextDone: {**CONTENT, "text": "hi"},
    rt.ResponseOutputAudioDelta: {**CONTENT, "delta": "AAAA"},
    rt.ResponseOutputAudioDone: CONTENT,
    rt.ResponseOutputAudioTranscriptDelta: {**CONTENT, "delta": "h"},
    rt.ResponseOutputAudioTranscriptDone: {**CONTENT, "transcript": "hi"},
    rt.ResponseFunctionCallArgumentsDelta: {
        "response_id": "resp_1", "item_id": "item_2", "output_index": 1, "call_id": "call_1", "delta": "{"
    },
    rt.ResponseFunctionCallArgumentsDone: {
        "response_id": "resp_1", "item_id": "item_2", "output_index": 1, "call_id": "call_1", "name": "lookup",
        "arguments": '{"q": 1}',
    },
    rt.OutputAudioBufferStarted: {"response_id": "resp_1"},
    rt.OutputAudioBufferStopped: {"response_id": "resp_1"},
    rt.OutputAudioBufferCleared: {"response_id": "resp_1"},
}  # fmt: skip


def test_every_server_event_is_read_by_the_sdk_as_itself() -> None:
    assert set(SAMPLES) == set(typing.get_args(rt.ServerEvent))
    reader = pydantic.TypeAdapter(RealtimeServerEvent)
    for kind, fields in SAMPLES.items():
        wire = rt.encode_event(kind(**fields))
        parsed = reader.validate_json(wire)
        assert parsed.type == kind.__struct_config__.tag, kind
        assert parsed.event_id.startswith("event_")
        # Nothing we sent was dropped or renamed on the SDK's side.
        ours = msgspec.json.decode(wire)
        theirs = parsed.model_dump(mode="json", exclude_none=True)
        assert _keys(ours) <= _keys(theirs) | _keys_of_nulls(ours), kind


def test_the_sdks_client_events_decode_as_ours() -> None:
    from openai.types.realtime import (
        InputAudioBufferAppendEvent,
        ResponseCreateEvent,
        SessionUpdateEvent,
    )

    sent = [
        SessionUpdateEvent(
            type="session.update",
            session={
                "type": "transcription",
                "audio": {"input": {"format": {"type": "audio/pcm", "rate": 24000}, "turn_detection": None}},
            },
        ),
        InputAudioBufferAppendEvent(type="input_audio_buffer.append", audio="AAAA", event_id="e1"),
        ResponseCreateEvent(type="response.create", response={"output_modalities": ["text"], "instructions": "hi"}),
    ]
    decoder = msgspec.json.Decoder(rt.ClientEvent)
    update, append, create = (decoder.decode(event.to_json(exclude_unset=True)) for event in sent)
    assert update.session.audio.input.turn_detection is None
    assert update.session.audio.input.format == rt.AudioPCM()
    assert (append.audio, append.event_id) == ("AAAA", "e1")
    assert create.response.output_modalities == ["text"]


def _keys(value: object, prefix: str = "") -> set[str]:
    if isinstance(value, dict):
        return {f"{prefix}{key}" for key in value} | {
            found for key, inner in value.items() for found in _keys(inner, f"{prefix}{key}.")
        }
    if isinstance(value, list):
        return {found for inner in value for found in _keys(inner, f"{prefix}[].")}
    return set()


def _keys_of_nulls(value: object, prefix: str = "") -> set[str]:
    if isinstance(value, dict):
        return {f"{prefix}{key}" for key, inner in value.items() if inner is None} | {
            found for key, inner in value.items() for found in _keys_of_nulls(inner, f"{prefix}{key}.")
        }
    if isinstance(value, list):
        return {found for inner in value for found in _keys_of_nulls(inner, f"{prefix}[].")}
    return set()
