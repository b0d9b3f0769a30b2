"""Voice in chat: a user message's `input_audio` parts (OpenAI's shape: base64 data and a format)
transcribed by the chat graph's `speech_model`, and read by the chat model as the text heard.

Each part becomes a text part in place, before the request is planned, so every bound on text
(`max_prompt_chars`, the context) applies to what was heard. Checked first, before any audio is
decoded: the graph names a speech model, at most `MAX_AUDIO_PARTS` parts, each part's base64 at
most the speech graph's `speech.max_upload_bytes`; then each recording is decoded and bounded as an
upload to `/v1/audio/transcriptions` is (`service.speech.hear`), one after the other. A recording
in which the speech graph's voice-activity check hears no speech is heard as "": the model reads
the message's other parts alone (docs/speech.md, "Silence and noise").
"""

from __future__ import annotations

import asyncio
import binascii

import msgspec

from appliance.engine import EngineClient
from appliance.errors import InvalidRequest, PayloadTooLarge
from appliance.media import ImageLoader
from appliance.protocol.openai import ChatCompletionRequest, InputAudioPart, TextPart, UserMessage
from appliance.service import speech

__all__ = ["MAX_AUDIO_PARTS", "hear_audio_parts"]

MAX_AUDIO_PARTS = 8
"""Recordings one chat request may carry: each is transcribed before the chat starts."""


async def hear_audio_parts(
    engine: EngineClient, request: ChatCompletionRequest, media: ImageLoader | None
) -> ChatCompletionRequest:
    """`request` with each `input_audio` part replaced by the text `engine`'s speech model hears
    in it (the request itself when it has none); `media`: the server's loader, whose `audio`
    decodes the recordings."""
    places = [
        (m, p)
        for m, message in enumerate(request.messages)
        if isinstance(message, UserMessage) and isinstance(message.content, list)
        for p, part in enumerate(message.content)
        if isinstance(part, InputAudioPart)
    ]
    if not places:
        return request
    first = f"messages[{places[0][0]}].content[{places[0][1]}]"
    named = engine.graph.speech_model
    if named is None or engine.peer is None:
        raise InvalidRequest(
            f"Model '{engine.name}' takes no audio: its graph names no speech_model to transcribe it with.",
            param=first,
            code="unsupported_content",
        )
    if len(places) > MAX_AUDIO_PARTS:
        raise InvalidRequest(
            f"The request holds {len(places)} input_audio parts; at most {MAX_AUDIO_PARTS} are heard per request.",
            param=first,
        )
    listener = engine.peer(named)
    audio = (media or ImageLoader()).audio
    limit = listener.graph.speech.max_upload_bytes
    for m, p in places:
        data = request.messages[m].content[p].input_audio.data
        if len(data) * 3 // 4 > limit + 2:  # base64: 4 characters a 3 bytes
            raise PayloadTooLarge(
                f"The audio holds about {len(data) * 3 // 4} bytes; model '{named}' takes at most {limit} bytes.",
                param=f"messages[{m}].content[{p}].input_audio.data",
            )
    messages = list(request.messages)
    for m, p in places:
        where = f"messages[{m}].content[{p}].input_audio"
        recording = await _base64(messages[m].content[p].input_audio.data, f"{where}.data")
        heard = await speech.hear(listener, recording, audio, param=f"{where}.data")
        content = list(messages[m].content)
        content[p] = TextPart(text=heard)
        messages[m] = msgspec.structs.replace(messages[m], content=content)
    return msgspec.structs.replace(request, messages=messages)


async def _base64(data: str, param: str) -> bytes:
    # A few MB of base64 take tens of milliseconds to decode: off the event loop.
    try:
        return await asyncio.to_thread(binascii.a2b_base64, data.encode("ascii"), strict_mode=True)
    except (binascii.Error, UnicodeEncodeError):
        raise InvalidRequest("input_audio.data is not valid base64.", param=param) from None
