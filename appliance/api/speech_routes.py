"""`POST /v1/audio/transcriptions` and `/v1/audio/translations` (OpenAI), also under /v3 and bare:
a multipart form with the audio file, answered in the form's `response_format` or streamed."""

from __future__ import annotations

from typing import Any

from litestar import Request, Response, post
from litestar.response import Stream

from appliance.api.forms import MULTIPART, read_form
from appliance.api.handling import unless_disconnected
from appliance.api.profiles import OPERATION, Operation
from appliance.api.sse import HEADERS, event_stream
from appliance.entry import Entry, named
from appliance.entry.decoding import convert_form
from appliance.media.audio import AudioDecoder
from appliance.protocol.audio import Transcription, TranscriptionVerbose, Translation, TranslationVerbose
from appliance.protocol.transcription_form import TranscriptionForm, TranslationForm
from appliance.service import speech

__all__ = ["routes"]

_LISTS = ("timestamp_granularities", "include")
"""Form fields that hold a list: their parts are sent repeated, with brackets or without."""


def _operation(summary: str, body: type, answers: tuple[type, ...]) -> Operation:
    return Operation(
        summary=summary,
        body=body,
        media_types=(MULTIPART,),
        answer=answers,
        stream="data: <TranscriptionTextDeltaEvent> events, then data: <TranscriptionTextDoneEvent> and data: [DONE]",
        errors=(400, 401, 404, 413, 503),
        edit=_text_formats,
    )


def _text_formats(_: dict[str, Any], document: dict[str, Any]) -> None:
    """response_format text, srt and vtt answer plain text."""
    document["responses"]["200"]["content"]["text/plain"] = {"schema": {"type": "string"}}


@post(
    ["/v1/audio/transcriptions", "/v3/audio/transcriptions", "/audio/transcriptions"],
    status_code=200,
    opt={
        OPERATION: _operation(
            "Speech to text in its own language (OpenAI)", TranscriptionForm, (Transcription, TranscriptionVerbose)
        )
    },
)
async def transcriptions(request: Request, entry: Entry, audio: AudioDecoder) -> Response:
    return await _serve(request, entry, audio, TranscriptionForm, "transcribe")


@post(
    ["/v1/audio/translations", "/v3/audio/translations", "/audio/translations"],
    status_code=200,
    opt={
        OPERATION: _operation(
            "Speech in any language to English text (OpenAI)", TranslationForm, (Translation, TranslationVerbose)
        )
    },
)
async def translations(request: Request, entry: Entry, audio: AudioDecoder) -> Response:
    return await _serve(request, entry, audio, TranslationForm, "translate")


async def _serve(request: Request, entry: Entry, audio: AudioDecoder, kind: type, task: speech.Task) -> Response:
    form = convert_form((await read_form(request, _LISTS)).fields, kind)
    record = named(form.model, None)
    engine = entry.engine(form.model)
    prepared = await unless_disconnected(request, speech.prepare(engine, form, task, audio))
    if prepared.options.stream:
        return Stream(event_stream(speech.stream(engine, prepared)), media_type="text/event-stream", headers=HEADERS)
    body, media_type, answered = await unless_disconnected(request, speech.answer(engine, prepared))
    if record is not None:
        record.streams = [answered]
    return Response(body, status_code=200, media_type=media_type)


routes = [transcriptions, translations]
