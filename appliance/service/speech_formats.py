"""A transcript rendered in each of OpenAI's `response_format`s, and Whisper's languages.

Engine-independent: the engine gives a `Transcript` (text, language, duration, timed segments and,
when asked for, timed words); `render` turns it into the body and media type OpenAI answers with:

    json          {"text": ..., "usage": {"type": "duration", "seconds": N}}   (translations: text only)
    text          the text and a newline, as OpenAI sends it
    srt           1\\n00:00:00,000 --> 00:00:02,500\\ntext\\n\\n ...
    vtt           WEBVTT\\n\\n00:00:00.000 --> 00:00:02.500\\ntext\\n\\n ...
    verbose_json  task, language, duration, text, words (granularity "word"), segments (granularity
                  "segment", or none asked), usage (transcriptions only, as the SDK's types)

text, srt and vtt are sent as `text/plain; charset=utf-8`, as OpenAI does: the openai SDKs read any
non-JSON format as a string, and a browser shows text/plain rather than downloading a subtitle file.
Cue text has `-->` replaced (it would end the cue's timing line), as openai/whisper's writers do.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, get_args

import msgspec

from appliance.errors import InvalidRequest
from appliance.protocol.audio import (
    Transcription,
    TranscriptionSegment,
    TranscriptionVerbose,
    TranscriptionWord,
    Translation,
    TranslationVerbose,
    UsageDuration,
)

__all__ = [
    "GRANULARITIES",
    "LANGUAGES",
    "RESPONSE_FORMATS",
    "ResponseFormat",
    "Task",
    "TimedText",
    "Transcript",
    "check_granularities",
    "language_code",
    "render",
    "timestamp",
]

ResponseFormat = Literal["json", "text", "srt", "verbose_json", "vtt"]
RESPONSE_FORMATS: tuple[str, ...] = get_args(ResponseFormat)
Task = Literal["transcribe", "translate"]
GRANULARITIES = frozenset({"segment", "word"})

JSON_TYPE = "application/json"
TEXT_TYPE = "text/plain; charset=utf-8"
_ENCODER = msgspec.json.Encoder()


@dataclass(frozen=True)
class TimedText:
    """A segment or a word and when it is said, in seconds from the start of the audio.

    `seek` and `tokens` matter for segments only: the 10 ms frame at which the 30 s window the
    segment was decoded in starts (openai/whisper's `seek`: 0 in the first window, 3000 in the
    second), and its token ids where the engine gives them (WhisperPipeline's chunks do not).
    """

    start: float
    end: float
    text: str
    seek: int = 0
    tokens: tuple[int, ...] = ()


@dataclass(frozen=True)
class Transcript:
    """What the engine heard (or translated) in one file."""

    text: str
    language: str
    """The language's English name, as OpenAI's verbose_json gives it ("english"; see `LANGUAGES`)."""
    duration: float
    """Seconds of audio."""
    segments: list[TimedText]
    words: list[TimedText] | None
    """None: words were not asked for."""
    temperature: float = 0.0
    """The sampling temperature the text was decoded at (reported on each verbose_json segment)."""


def check_granularities(response_format: ResponseFormat, granularities: frozenset[str], *, task: Task) -> None:
    """InvalidRequest for `timestamp_granularities[]` values this request cannot have: unknown ones,
    any with a format other than verbose_json (as OpenAI), and words for a translation (OpenAI's
    translations take no granularities)."""
    param = "timestamp_granularities[]"
    unknown = sorted(granularities - GRANULARITIES)
    if unknown:
        raise InvalidRequest(
            f"Unknown timestamp granularity {', '.join(map(repr, unknown))}; use 'segment' and/or 'word'.",
            param=param,
        )
    if granularities and response_format != "verbose_json":
        raise InvalidRequest(
            f"timestamp_granularities[] needs response_format 'verbose_json' (got '{response_format}').", param=param
        )
    if task == "translate" and "word" in granularities:
        raise InvalidRequest("Translations have no word timestamps; ask for 'segment' or none.", param=param)


def render(
    transcript: Transcript, response_format: ResponseFormat, *, task: Task, granularities: frozenset[str]
) -> tuple[bytes, str]:
    """The response body and its media type (see the module docstring). `granularities` must have
    passed `check_granularities`; words must be in the transcript when "word" is asked for."""
    text = transcript.text.strip()
    if response_format == "json":
        body = Translation(text=text) if task == "translate" else Transcription(text=text, usage=_usage(transcript))
        return _ENCODER.encode(body), JSON_TYPE
    if response_format == "text":
        return (text + "\n").encode(), TEXT_TYPE
    if response_format == "srt":
        return _srt(transcript.segments).encode(), TEXT_TYPE
    if response_format == "vtt":
        return _vtt(transcript.segments).encode(), TEXT_TYPE
    if response_format == "verbose_json":
        return _ENCODER.encode(_verbose(transcript, text, task, granularities)), JSON_TYPE
    raise ValueError(f"unknown response_format '{response_format}'")


def _usage(transcript: Transcript) -> UsageDuration:
    return UsageDuration(seconds=math.ceil(transcript.duration))


def _verbose(
    transcript: Transcript, text: str, task: Task, granularities: frozenset[str]
) -> TranscriptionVerbose | TranslationVerbose:
    segments = [
        TranscriptionSegment(
            id=index,
            seek=segment.seek,
            start=segment.start,
            end=segment.end,
            text=segment.text,
            tokens=list(segment.tokens),
            temperature=transcript.temperature,
        )
        for index, segment in enumerate(transcript.segments)
    ]
    with_segments = "segment" in granularities or not granularities
    if task == "translate":
        return TranslationVerbose(
            language=transcript.language,
            duration=transcript.duration,
            text=text,
            segments=segments if with_segments else msgspec.UNSET,
        )
    words: list[TranscriptionWord] | msgspec.UnsetType = msgspec.UNSET
    if "word" in granularities:
        if transcript.words is None:
            raise ValueError("word timestamps were asked for but the transcript has none")
        words = [TranscriptionWord(word=word.text.strip(), start=word.start, end=word.end) for word in transcript.words]
    return TranscriptionVerbose(
        language=transcript.language,
        duration=transcript.duration,
        text=text,
        words=words,
        segments=segments if with_segments else msgspec.UNSET,
        usage=_usage(transcript),
    )


def timestamp(seconds: float, decimal_marker: str) -> str:
    """`HH:MM:SS,mmm` (srt, marker ",") or `HH:MM:SS.mmm` (vtt, marker ".")."""
    milliseconds = max(0, round(seconds * 1000))
    hours, milliseconds = divmod(milliseconds, 3_600_000)
    minutes, milliseconds = divmod(milliseconds, 60_000)
    whole, milliseconds = divmod(milliseconds, 1000)
    return f"{hours:02d}:{minutes:02d}:{whole:02d}{decimal_marker}{milliseconds:03d}"


def _cue_text(text: str) -> str:
    return text.strip().replace("-->", "->")


def _srt(segments: list[TimedText]) -> str:
    return "".join(
        f"{number}\n{timestamp(segment.start, ',')} --> {timestamp(segment.end, ',')}\n{_cue_text(segment.text)}\n\n"
        for number, segment in enumerate(segments, start=1)
    )


def _vtt(segments: list[TimedText]) -> str:
    return "WEBVTT\n\n" + "".join(
        f"{timestamp(segment.start, '.')} --> {timestamp(segment.end, '.')}\n{_cue_text(segment.text)}\n\n"
        for segment in segments
    )


# Whisper's languages, in its token order (openai/whisper, whisper/tokenizer.py: `<|en|>` is the
# first language token); the first 99 are every multilingual model's, "yue" was added by large-v3.
LANGUAGES: dict[str, str] = {
    "en": "english",
    "zh": "chinese",
    "de": "german",
    "es": "spanish",
    "ru": "russian",
    "ko": "korean",
    "fr": "french",
    "ja": "japanese",
    "pt": "portuguese",
    "tr": "turkish",
    "pl": "polish",
    "ca": "catalan",
    "nl": "dutch",
    "ar": "arabic",
    "sv": "swedish",
    "it": "italian",
    "id": "indonesian",
    "hi": "hindi",
    "fi": "finnish",
    "vi": "vietnamese",
    "he": "hebrew",
    "uk": "ukrainian",
    "el": "greek",
    "ms": "malay",
    "cs": "czech",
    "ro": "romanian",
    "da": "danish",
    "hu": "hungarian",
    "ta": "tamil",
    "no": "norwegian",
    "th": "thai",
    "ur": "urdu",
    "hr": "croatian",
    "bg": "bulgarian",
    "lt": "lithuanian",
    "la": "latin",
    "mi": "maori",
    "ml": "malayalam",
    "cy": "welsh",
    "sk": "slovak",
    "te": "telugu",
    "fa": "persian",
    "lv": "latvian",
    "bn": "bengali",
    "sr": "serbian",
    "az": "azerbaijani",
    "sl": "slovenian",
    "kn": "kannada",
    "et": "estonian",
    "mk": "macedonian",
    "br": "breton",
    "eu": "basque",
    "is": "icelandic",
    "hy": "armenian",
    "ne": "nepali",
    "mn": "mongolian",
    "bs": "bosnian",
    "kk": "kazakh",
    "sq": "albanian",
    "sw": "swahili",
    "gl": "galician",
    "mr": "marathi",
    "pa": "punjabi",
    "si": "sinhala",
    "km": "khmer",
    "sn": "shona",
    "yo": "yoruba",
    "so": "somali",
    "af": "afrikaans",
    "oc": "occitan",
    "ka": "georgian",
    "be": "belarusian",
    "tg": "tajik",
    "sd": "sindhi",
    "gu": "gujarati",
    "am": "amharic",
    "yi": "yiddish",
    "lo": "lao",
    "uz": "uzbek",
    "fo": "faroese",
    "ht": "haitian creole",
    "ps": "pashto",
    "tk": "turkmen",
    "nn": "nynorsk",
    "mt": "maltese",
    "sa": "sanskrit",
    "lb": "luxembourgish",
    "my": "myanmar",
    "bo": "tibetan",
    "tl": "tagalog",
    "mg": "malagasy",
    "as": "assamese",
    "tt": "tatar",
    "haw": "hawaiian",
    "ln": "lingala",
    "ha": "hausa",
    "ba": "bashkir",
    "jw": "javanese",
    "su": "sundanese",
    "yue": "cantonese",
}

# Other English names Whisper accepts for the same languages (its TO_LANGUAGE_CODE aliases), and
# the ISO 639-1 codes Whisper spells otherwise.
_ALIASES = {
    "burmese": "my",
    "valencian": "ca",
    "flemish": "nl",
    "haitian": "ht",
    "letzeburgesch": "lb",
    "pushto": "ps",
    "panjabi": "pa",
    "moldavian": "ro",
    "moldovan": "ro",
    "sinhalese": "si",
    "castilian": "es",
    "mandarin": "zh",
    # Whisper's code for Javanese is not the ISO 639-1 one.
    "jv": "jw",
}
_CODES_BY_NAME = {name: code for code, name in LANGUAGES.items()} | _ALIASES


def language_code(name_or_code: str) -> str | None:
    """Whisper's code for a language given by code ("en", "EN") or English name ("English",
    "castilian"); None if Whisper does not know it."""
    key = name_or_code.strip().lower()
    if key in LANGUAGES:
        return key
    return _CODES_BY_NAME.get(key)
