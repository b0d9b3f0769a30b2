"""service.speech_formats and protocol.audio: each response_format, read back by the openai SDK."""

from __future__ import annotations

import json

import msgspec
import pytest
from openai._models import construct_type
from openai.types.audio import (
    Transcription,
    TranscriptionTextDeltaEvent,
    TranscriptionTextDoneEvent,
    TranscriptionVerbose,
    Translation,
    TranslationVerbose,
)

from appliance.errors import InvalidRequest
from appliance.protocol import audio as protocol
from appliance.service.speech_formats import (
    LANGUAGES,
    TimedText,
    Transcript,
    check_granularities,
    language_code,
    render,
    timestamp,
)

TRANSCRIPT = Transcript(
    text=" The capital of France is Paris. It is --> big.",
    language="english",
    duration=8.47,
    segments=[
        TimedText(0.0, 2.5, " The capital of France is Paris.", tokens=(440, 3868)),
        TimedText(2.5, 3661.0425, " It is --> big.", seek=3000),
    ],
    words=[TimedText(0.0, 0.4, " The"), TimedText(0.4, 1.0, " capital")],
    temperature=0.2,
)
NONE: frozenset[str] = frozenset()


def body(response_format, task="transcribe", granularities=NONE, transcript=TRANSCRIPT):
    return render(transcript, response_format, task=task, granularities=granularities)


def test_json_is_text_and_duration_usage_in_whole_seconds_rounded_up():
    data, media_type = body("json")
    assert media_type == "application/json"
    assert json.loads(data) == {
        "text": "The capital of France is Paris. It is --> big.",
        "usage": {"type": "duration", "seconds": 9},
    }
    parsed = construct_type(type_=Transcription, value=json.loads(data))
    assert parsed.text.startswith("The capital") and parsed.usage.type == "duration" and parsed.usage.seconds == 9


def test_a_translation_in_json_is_its_text_only():
    data, _ = body("json", task="translate")
    assert json.loads(data) == {"text": "The capital of France is Paris. It is --> big."}
    assert construct_type(type_=Translation, value=json.loads(data)).text.startswith("The capital")


def test_text_is_the_stripped_text_and_a_newline():
    assert body("text") == (b"The capital of France is Paris. It is --> big.\n", "text/plain; charset=utf-8")


def test_srt_numbers_cues_with_comma_milliseconds_and_hours():
    data, media_type = body("srt")
    assert media_type == "text/plain; charset=utf-8"
    assert data.decode() == (
        "1\n00:00:00,000 --> 00:00:02,500\nThe capital of France is Paris.\n\n"
        "2\n00:00:02,500 --> 01:01:01,042\nIt is -> big.\n\n"
    )


def test_vtt_has_its_header_and_dot_milliseconds():
    data, media_type = body("vtt")
    assert media_type == "text/plain; charset=utf-8"
    assert data.decode() == (
        "WEBVTT\n\n"
        "00:00:00.000 --> 00:00:02.500\nThe capital of France is Paris.\n\n"
        "00:00:02.500 --> 01:01:01.042\nIt is -> big.\n\n"
    )


def test_no_segments_render_as_empty_subtitles():
    silent = Transcript(text="", language="english", duration=1.0, segments=[], words=None)
    assert body("srt", transcript=silent)[0] == b""
    assert body("vtt", transcript=silent)[0] == b"WEBVTT\n\n"
    assert body("text", transcript=silent)[0] == b"\n"


def test_timestamps_round_to_the_millisecond():
    assert timestamp(0.0004, ",") == "00:00:00,000"
    assert timestamp(59.9996, ".") == "00:01:00.000"
    assert timestamp(-0.01, ",") == "00:00:00,000"


def test_verbose_json_has_segments_by_default_and_the_sdk_reads_it():
    data, media_type = body("verbose_json")
    assert media_type == "application/json"
    raw = json.loads(data)
    assert list(raw) == ["task", "language", "duration", "text", "segments", "usage"]
    assert raw["task"] == "transcribe" and raw["usage"] == {"type": "duration", "seconds": 9}
    assert raw["segments"][0] == {
        "id": 0,
        "seek": 0,
        "start": 0.0,
        "end": 2.5,
        "text": " The capital of France is Paris.",
        "tokens": [440, 3868],
        "temperature": 0.2,
    }
    assert raw["segments"][1]["seek"] == 3000 and raw["segments"][1]["tokens"] == []
    parsed = construct_type(type_=TranscriptionVerbose, value=raw)
    assert isinstance(parsed, TranscriptionVerbose)
    assert parsed.language == "english" and parsed.duration == 8.47 and parsed.words is None
    segment = parsed.segments[1]
    assert (segment.id, segment.start, segment.end) == (1, 2.5, 3661.0425)
    # Left out (WhisperPipeline gives no token scores): the SDK reads them as None.
    assert segment.avg_logprob is None and segment.compression_ratio is None and segment.no_speech_prob is None


def test_verbose_json_words_only_when_asked():
    raw = json.loads(body("verbose_json", granularities=frozenset({"word"}))[0])
    assert "segments" not in raw
    assert raw["words"] == [{"word": "The", "start": 0.0, "end": 0.4}, {"word": "capital", "start": 0.4, "end": 1.0}]
    parsed = construct_type(type_=TranscriptionVerbose, value=raw)
    assert [word.word for word in parsed.words] == ["The", "capital"]
    both = json.loads(body("verbose_json", granularities=frozenset({"word", "segment"}))[0])
    assert len(both["words"]) == 2 and len(both["segments"]) == 2


def test_words_asked_for_but_not_computed_is_a_bug_not_an_empty_list():
    no_words = Transcript(text="hi", language="english", duration=1.0, segments=[], words=None)
    with pytest.raises(ValueError, match="word timestamps"):
        body("verbose_json", granularities=frozenset({"word"}), transcript=no_words)


def test_verbose_translation_has_no_usage_and_the_sdk_reads_it():
    raw = json.loads(body("verbose_json", task="translate")[0])
    assert list(raw) == ["task", "language", "duration", "text", "segments"]
    assert raw["task"] == "translate"
    parsed = construct_type(type_=TranslationVerbose, value=raw)
    assert parsed.segments[0].text == " The capital of France is Paris."


@pytest.mark.parametrize(
    ("response_format", "granularities", "task", "message"),
    [
        ("verbose_json", {"sentence"}, "transcribe", "Unknown timestamp granularity 'sentence'"),
        ("json", {"segment"}, "transcribe", "needs response_format 'verbose_json'"),
        ("verbose_json", {"word"}, "translate", "Translations have no word timestamps"),
    ],
)
def test_granularities_a_request_cannot_have_are_refused(response_format, granularities, task, message):
    with pytest.raises(InvalidRequest, match=message) as caught:
        check_granularities(response_format, frozenset(granularities), task=task)
    assert caught.value.param == "timestamp_granularities[]"


def test_granularities_a_request_can_have_pass():
    check_granularities("verbose_json", frozenset({"word", "segment"}), task="transcribe")
    check_granularities("verbose_json", frozenset({"segment"}), task="translate")
    check_granularities("srt", NONE, task="transcribe")


def test_stream_events_are_the_sdks():
    encoder = msgspec.json.Encoder()
    delta = json.loads(encoder.encode(protocol.TranscriptionTextDeltaEvent(delta=" The")))
    assert delta == {"type": "transcript.text.delta", "delta": " The"}
    assert construct_type(type_=TranscriptionTextDeltaEvent, value=delta).delta == " The"
    done = json.loads(encoder.encode(protocol.TranscriptionTextDoneEvent(text="The capital.")))
    assert done == {"type": "transcript.text.done", "text": "The capital."}
    assert construct_type(type_=TranscriptionTextDoneEvent, value=done).text == "The capital."


def test_protocol_structs_round_trip():
    verbose = protocol.TranscriptionVerbose(
        language="english",
        duration=1.5,
        text="hi",
        words=[protocol.TranscriptionWord(word="hi", start=0.0, end=0.5)],
        usage=protocol.UsageDuration(seconds=2),
    )
    data = msgspec.json.encode(verbose)
    assert msgspec.json.decode(data, type=protocol.TranscriptionVerbose) == verbose
    assert b'"segments"' not in data


def test_languages_are_whispers_hundred_in_token_order():
    assert len(LANGUAGES) == 100
    codes = list(LANGUAGES)
    assert codes[:3] == ["en", "zh", "de"] and codes[98:] == ["su", "yue"]
    assert len(set(LANGUAGES.values())) == 100


@pytest.mark.parametrize(
    ("given", "code"),
    [
        ("en", "en"),
        ("EN", "en"),
        ("english", "en"),
        (" French ", "fr"),
        ("haitian creole", "ht"),
        ("castilian", "es"),
        ("mandarin", "zh"),
        ("jv", "jw"),
        ("yue", "yue"),
        ("klingon", None),
        ("", None),
        ("xx", None),
    ],
)
def test_language_code_takes_codes_and_english_names(given, code):
    assert language_code(given) == code
