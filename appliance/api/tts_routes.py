"""`POST /v1/audio/speech` (OpenAI), also under /v3 and bare: JSON in, the audio file's bytes out."""

from __future__ import annotations

from typing import Any

from litestar import Request, Response, post

from appliance.api.decoding import decode_body
from appliance.api.handling import record_request, unless_disconnected
from appliance.api.profiles import OPERATION, Operation
from appliance.media import ImageLoader
from appliance.media.audio_encode import MEDIA_TYPES
from appliance.protocol.speech import SpeechRequest
from appliance.runtime.registry import ModelRegistry
from appliance.service import tts

__all__ = ["routes"]


def _audio_answers(_: dict[str, Any], document: dict[str, Any]) -> None:
    """The answer is the audio file itself, in the media type of its response_format."""
    binary = {"schema": {"type": "string", "format": "binary"}}
    document["responses"]["200"]["content"] = {media_type: binary for media_type in dict.fromkeys(MEDIA_TYPES.values())}


@post(
    ["/v1/audio/speech", "/v3/audio/speech", "/audio/speech"],
    status_code=200,
    opt={
        OPERATION: Operation(
            summary="Text to speech (OpenAI): the audio file of the input spoken",
            body=SpeechRequest,
            edit=_audio_answers,
        )
    },
)
async def speech(request: Request, models: ModelRegistry, media: ImageLoader) -> Response:
    body = decode_body(await request.body(), SpeechRequest)
    record = record_request(body.model, None)
    audio, media_type, answered = await unless_disconnected(
        request, tts.speak(models.get(body.model), body, media.encoding)
    )
    if record is not None:
        record.streams = [answered]
    return Response(audio, status_code=200, media_type=media_type)


routes = [speech]
