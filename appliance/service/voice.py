"""Voice in chat: a user message's `input_audio` parts (OpenAI's shape: base64 data and a format)
transcribed by the chat graph's `speech_model`, and read by the chat model as the text heard.

Each part becomes a text part in place, so every bound on text (`max_prompt_chars`, the context)
applies to what was heard. Transcription is the expensive step (seconds of the speech engine per
recording), so everything that needs no audio is checked before it: `Recordings.of` checks the
parts themselves (the graph names a speech model, at most `MAX_AUDIO_PARTS` parts, each part's
base64 at most the speech graph's `speech.max_upload_bytes`), and `Recordings.unheard` gives the
request with each part as empty text, which `service.chat` plans (every check of the chat plan:
sampling, `n`, tools, response formats, message and image counts) before `Recordings.heard` reads
every part's base64, then decodes each recording, bounds it as an upload to
`/v1/audio/transcriptions` is (`service.speech.hear`) and transcribes it, one after the other. A recording
in which the speech graph's voice-activity check hears no speech is heard as "": the model reads
the message's other parts alone (docs/speech.md, "Silence and noise").
"""

from __future__ import annotations

import binascii
from dataclasses import dataclass
from typing import TYPE_CHECKING

import msgspec

from appliance.engine import EngineClient
from appliance.errors import InvalidRequest, PayloadTooLarge
from appliance.media import ImageLoader
from appliance.protocol.openai import ChatCompletionRequest, InputAudioPart, TextPart, UserMessage
from appliance.service import speech

if TYPE_CHECKING:
    from appliance.media.audio import AudioDecoder

__all__ = ["MAX_AUDIO_PARTS", "Recordings"]

MAX_AUDIO_PARTS = 8
"""Recordings one chat request may carry: each is transcribed before the chat starts."""


@dataclass(frozen=True)
class Recordings:
    """A chat request's `input_audio` parts, checked as far as they can be without decoding them."""

    request: ChatCompletionRequest
    places: tuple[tuple[int, int], ...]
    """(message, part) of each `input_audio` part, in order."""
    listener: EngineClient
    """The speech model that hears them."""

    @classmethod
    def of(cls, engine: EngineClient, request: ChatCompletionRequest) -> Recordings | None:
        """The recordings of `request` to `engine`'s model (None: it holds none); 400 when the
        model takes no audio or the parts are too many, 413 for a part too large."""
        places = tuple(
            (m, p)
            for m, message in enumerate(request.messages)
            if isinstance(message, UserMessage) and isinstance(message.content, list)
            for p, part in enumerate(message.content)
            if isinstance(part, InputAudioPart)
        )
        if not places:
            return None
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
        limit = listener.graph.speech.max_upload_bytes
        for m, p in places:
            data = request.messages[m].content[p].input_audio.data
            if len(data) * 3 // 4 > limit + 2:  # base64: 4 characters a 3 bytes
                raise PayloadTooLarge(
                    f"The audio holds about {len(data) * 3 // 4} bytes; model '{named}' takes at most {limit} bytes.",
                    param=f"messages[{m}].content[{p}].input_audio.data",
                )
        return cls(request=request, places=places, listener=listener)

    def unheard(self) -> ChatCompletionRequest:
        """The request with each recording as an empty text part: planning it runs every check
        that needs no audio (what is heard only adds text, which the plan made afterwards checks)."""
        return self._replaced([""] * len(self.places))

    async def heard(self, media: ImageLoader | None) -> ChatCompletionRequest:
        """The request with each recording replaced by the text the speech model hears in it;
        `media`: the server's loader, whose `audio` decodes the recordings."""
        audio = (media or ImageLoader()).audio
        wheres = [f"messages[{m}].content[{p}].input_audio.data" for m, p in self.places]
        # Every part's base64 is read before the first is transcribed: a bad last part costs no speech.
        recordings = [
            await _base64(audio, self.request.messages[m].content[p].input_audio.data, where)
            for (m, p), where in zip(self.places, wheres, strict=True)
        ]
        texts = [
            await speech.hear(self.listener, recording, audio, param=where)
            for recording, where in zip(recordings, wheres, strict=True)
        ]
        return self._replaced(texts)

    def _replaced(self, texts: list[str]) -> ChatCompletionRequest:
        messages = list(self.request.messages)
        for (m, p), text in zip(self.places, texts, strict=True):
            content = list(messages[m].content)
            content[p] = TextPart(text=text)
            messages[m] = msgspec.structs.replace(messages[m], content=content)
        return msgspec.structs.replace(self.request, messages=messages)


async def _base64(audio: AudioDecoder, data: str, param: str) -> bytes:
    # A few MB of base64 take tens of milliseconds to decode: off the event loop, on the audio pool.
    try:
        return await audio.pool.call(binascii.a2b_base64, data.encode("ascii"), strict_mode=True)
    except (binascii.Error, UnicodeEncodeError):
        raise InvalidRequest("input_audio.data is not valid base64.", param=param) from None
