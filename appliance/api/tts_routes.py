"""`POST /v1/audio/speech` (OpenAI), also under /v3 and bare: JSON in, the audio file's bytes out
as they are spoken (chunked), or OpenAI's SSE events with `stream_format: "sse"`."""

from __future__ import annotations

from typing import Any

from litestar import Request, Response, post
from litestar.response import Stream

from appliance.api.handling import unless_disconnected
from appliance.api.profiles import OPERATION, Operation
from appliance.api.sse import HEADERS, data_events
from appliance.entry import Entry, named
from appliance.entry.decoding import decode_body
from appliance.media.audio_encode import MEDIA_TYPES
from appliance.protocol.speech import SpeechRequest
from appliance.service import tts

__all__ = ["routes"]


def _audio_answers(_: dict[str, Any], document: dict[str, Any]) -> None:
    """The answer is the audio file itself, in the media type of its response_format."""
    binary = {"schema": {"type": "string", "format": "binary"}}
    content = document["responses"]["200"].setdefault("content", {})
    content.update({media_type: binary for media_type in dict.fromkeys(MEDIA_TYPES.values())})


@post(
    ["/v1/audio/speech", "/v3/audio/speech", "/audio/speech"],
    status_code=200,
    opt={
        OPERATION: Operation(
            summary="Text to speech (OpenAI): the audio file of the input spoken, sent as it is spoken",
            body=SpeechRequest,
            stream="data: <SpeechAudioDeltaEvent> events (base64 bytes of the file), then data: <SpeechAudioDoneEvent>",
            edit=_audio_answers,
        )
    },
)
async def speech(request: Request, entry: Entry) -> Response:
    body = decode_body(await request.body(), SpeechRequest)
    record = named(body.model, None)
    # Returns with the first piece of audio, so a refusal is still a 4xx; the rest streams.
    call = await unless_disconnected(request, tts.open_speech(entry.engine(body.model), body, entry.media.encoding))
    if record is not None:
        record.streams = [call.answered]
    if body.stream_format == "sse":
        return Stream(data_events(call.events()), media_type="text/event-stream", headers=HEADERS)
    return Stream(call.chunks(), status_code=200, media_type=call.media_type)


routes = [speech]
