"""Transcriptions and translations on a speech-to-text graph, in OpenAI's shapes.

Everything a request asks is checked before its audio is decoded, and the audio before anything
reaches the engine: the model serves speech (a chat model named is a 400 at once), the options
fit the model (a language it knows, translation on a multilingual model, word times where the
graph enables them), the file's bytes (`speech.max_upload_bytes`), then its decoded duration,
channels and sample rate (`speech.max_audio_seconds`, `media.audio`), decoded off the event loop.
The engine then transcribes one request at a time (`engine/worker/speech.py`).
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Literal

from appliance.engine import EngineClient
from appliance.engine.messages import Transcribed, TranscribeOptions
from appliance.errors import InvalidRequest, PayloadTooLarge
from appliance.media.audio import AudioDecoder, AudioLimits
from appliance.protocol.audio import TranscriptionTextDeltaEvent, TranscriptionTextDoneEvent
from appliance.protocol.transcription_form import TranscriptionForm, TranslationForm
from appliance.service.engine_floats import decoding_temperature
from appliance.service.retrieval import Answered
from appliance.service.speech_formats import (
    LANGUAGES,
    TimedText,
    Transcript,
    check_granularities,
    language_code,
    render,
)

__all__ = ["PreparedSpeech", "answer", "hear", "prepare", "stream"]

Task = Literal["transcribe", "translate"]
_CONTROL_TOKEN = re.compile(r"<\|[^|<>]{1,40}\|>")
"""Whisper's control tokens (`<|en|>`, `<|translate|>`, `<|0.00|>`): typed into a prompt, the
tokenizer would read them as the tokens themselves and steer the decoder."""
_PROMPT_CHARS_PER_TOKEN = 4
"""Whisper reads at most half its text window (224 tokens for 448) of prompt; English runs about 4
characters a token."""


@dataclass(frozen=True)
class PreparedSpeech:
    """A request checked, its audio decoded: what the engine is sent, and how to answer."""

    form: TranscriptionForm | TranslationForm
    options: TranscribeOptions
    samples: memoryview
    seconds: float


async def prepare(
    engine: EngineClient, form: TranscriptionForm | TranslationForm, task: Task, audio: AudioDecoder
) -> PreparedSpeech:
    """The request's options checked against the model, then its file decoded (400s naming the
    field, 413 for a file beyond the graph's upload limit)."""
    engine.admit("transcribe")
    graph = engine.graph
    facts = graph.speech_facts
    assert facts is not None  # admitted for "transcribe": a speech graph
    granularities = frozenset(getattr(form, "timestamp_granularities", ()))
    streamed = getattr(form, "stream", False)
    _refuse_unsupported(form)
    check_granularities(form.response_format, granularities, task=task)
    if "word" in granularities and not graph.speech.word_timestamps:
        raise InvalidRequest(
            f"Model '{graph.name}' does not give word timestamps (its graph's speech.word_timestamps is off).",
            param="timestamp_granularities[]",
            code="unsupported_value",
        )
    if streamed and form.response_format not in ("json", "text"):
        raise InvalidRequest(
            f"stream=true gives the text as it is decoded: it takes response_format json or text, not "
            f"{form.response_format}.",
            param="stream",
            code="unsupported_value",
        )
    if task == "translate" and not facts.multilingual:
        raise InvalidRequest(
            f"Model '{graph.name}' is English-only: it cannot translate; use /v1/audio/transcriptions.",
            param="model",
            code="model_not_supported",
        )
    language = _language(engine, getattr(form, "language", None))
    prompt = _prompt(form.prompt or "", facts.text_tokens)
    if len(form.file) > graph.speech.max_upload_bytes:
        raise PayloadTooLarge(
            f"The file holds {len(form.file)} bytes; model '{graph.name}' takes files of at most "
            f"{graph.speech.max_upload_bytes} bytes (speech.max_upload_bytes).",
            param="file",
        )
    decoded = await audio.decode(form.file, AudioLimits(max_seconds=graph.speech.max_audio_seconds))
    options = TranscribeOptions(
        task=task,
        language=language,
        prompt=prompt,
        temperature=decoding_temperature(form.temperature),
        segments=form.response_format in ("verbose_json", "srt", "vtt") and granularities != {"word"},
        words="word" in granularities,
        stream=streamed,
    )
    return PreparedSpeech(form=form, options=options, samples=memoryview(decoded.samples), seconds=decoded.seconds)


async def hear(engine: EngineClient, data: bytes, audio: AudioDecoder, *, param: str) -> str:
    """The text of a recording sent inside another request (a chat message's `input_audio`),
    bounded as an upload to `engine` is; errors name `param`."""
    try:
        engine.admit("transcribe")
        graph = engine.graph
        if len(data) > graph.speech.max_upload_bytes:
            raise PayloadTooLarge(
                f"The audio holds {len(data)} bytes; model '{graph.name}' takes at most "
                f"{graph.speech.max_upload_bytes} bytes (speech.max_upload_bytes)."
            )
        decoded = await audio.decode(data, AudioLimits(max_seconds=graph.speech.max_audio_seconds))
        result = await engine.transcribe(memoryview(decoded.samples), TranscribeOptions())
    except (InvalidRequest, PayloadTooLarge) as exc:
        exc.param = param
        raise
    return result.text.strip()


async def answer(engine: EngineClient, prepared: PreparedSpeech) -> tuple[bytes, str, Answered]:
    """The transcript in the request's response format: body, media type, and what the access
    log reads."""
    submitted = time.monotonic()
    result = await engine.transcribe(prepared.samples, prepared.options)
    transcript = _transcript(prepared, result)
    granularities = frozenset(getattr(prepared.form, "timestamp_granularities", ()))
    body, media_type = render(
        transcript, prepared.form.response_format, task=prepared.options.task, granularities=granularities
    )
    return body, media_type, _answered(result, submitted)


async def stream(engine: EngineClient, prepared: PreparedSpeech) -> AsyncIterator[object]:
    """`transcript.text.delta` events as the engine decodes the text, then `transcript.text.done`.
    The engine stops when the reader leaves (the transcription task is cancelled)."""
    pieces: asyncio.Queue[str] = asyncio.Queue()
    work = asyncio.ensure_future(engine.transcribe(prepared.samples, prepared.options, pieces.put_nowait))
    try:
        while True:
            piece = asyncio.ensure_future(pieces.get())
            await asyncio.wait({piece, work}, return_when=asyncio.FIRST_COMPLETED)
            if piece.done():
                yield TranscriptionTextDeltaEvent(delta=piece.result())
                continue
            piece.cancel()
            break
        while not pieces.empty():  # the engine's last pieces arrive before its answer
            yield TranscriptionTextDeltaEvent(delta=pieces.get_nowait())
        result = work.result()
        yield TranscriptionTextDoneEvent(text=result.text.strip())
    finally:
        work.cancel()


def _refuse_unsupported(form: TranscriptionForm | TranslationForm) -> None:
    if getattr(form, "include", None):
        raise InvalidRequest(
            "include[] (logprobs) is not available: WhisperPipeline gives no token log probabilities here.",
            param="include",
            code="unsupported_value",
        )
    if getattr(form, "chunking_strategy", None) is not None:
        raise InvalidRequest(
            "chunking_strategy is not available: audio longer than Whisper's 30 s window is read in windows "
            "by the engine itself; leave the field out.",
            param="chunking_strategy",
            code="unsupported_value",
        )


def _language(engine: EngineClient, value: str | None) -> str | None:
    """The ISO code of a language the model knows, from a code or an English name (None: detect)."""
    if value is None or not value.strip():
        return None
    facts = engine.graph.speech_facts
    code = language_code(value)
    known = facts.languages if facts.multilingual else ("en",)
    if code is None or code not in known:
        which = f"{len(known)} languages" if facts.multilingual else "English only"
        raise InvalidRequest(
            f"Language '{value}' is not one model '{engine.name}' knows ({which}); give an ISO 639-1 code "
            "such as 'en', or leave it out for the model to detect it.",
            param="language",
            code="unsupported_language",
        )
    # An English-only model takes no language token: English is all it reads.
    return code if facts.multilingual else None


def _prompt(prompt: str, text_tokens: int) -> str:
    limit = text_tokens // 2 * _PROMPT_CHARS_PER_TOKEN
    if len(prompt) > limit:
        raise InvalidRequest(
            f"The prompt holds {len(prompt)} characters; this model reads at most {text_tokens // 2} tokens of "
            f"prompt (about {limit} characters).",
            param="prompt",
            code="string_above_max_length",
        )
    if _CONTROL_TOKEN.search(prompt):
        raise InvalidRequest(
            "The prompt holds a Whisper control token (such as <|en|> or <|translate|>); write plain text.",
            param="prompt",
        )
    return prompt


def _transcript(prepared: PreparedSpeech, result: Transcribed) -> Transcript:
    code = "en" if prepared.options.task == "translate" else result.language or "en"
    language = LANGUAGES.get(code, code)
    return Transcript(
        text=result.text.strip(),
        language=language,
        duration=prepared.seconds,
        segments=[TimedText(start, end, text, seek=_frames(start)) for start, end, text in result.segments],
        words=[TimedText(start, end, text.strip()) for start, end, text in result.words]
        if prepared.options.words
        else None,
        temperature=prepared.options.temperature,
    )


def _frames(seconds: float) -> int:
    """Whisper's `seek`: a time in its 10 ms feature frames."""
    return round(seconds * 100)


def _answered(result: Transcribed, submitted: float) -> Answered:
    return Answered(prompt_tokens=0, completion_tokens=result.tokens, submitted_at=submitted)
