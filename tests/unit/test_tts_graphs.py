"""Text-to-speech graphs (issue 41, item 6; hibari voices, issue 52): the kind read from a SpeechT5
or hibari folder, its facts, the `[tts]` voices checked at load (files, sizes, the default),
`[tts]` refused elsewhere, the input bound, and the service's refusals before anything reaches an
engine."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import msgspec
import numpy as np
import pytest

from appliance.engine.messages import Batch, Synthesize, Synthesized, decode_from_engine, decode_to_engine, encoder
from appliance.errors import ConfigError, InvalidRequest
from appliance.graphfiles import load_graph
from appliance.protocol.speech import SpeechRequest
from appliance.service import tts

SPEECHT5 = {
    "config.json": {
        "model_type": "speecht5",
        "architectures": ["SpeechT5ForTextToSpeech"],
        "speaker_embedding_dim": 16,
        "max_text_positions": 300,
    }
}


def _graph(tmp_path: Path, files: dict[str, object], extra: str = "", voices: dict[str, int] | None = None) -> Path:
    model = tmp_path / "model"
    model.mkdir(exist_ok=True)
    for name, content in files.items():
        (model / name).write_text(json.dumps(content))
    for voice, floats in (voices or {}).items():
        np.zeros(floats, dtype="<f4").tofile(tmp_path / f"{voice}.bin")
    path = tmp_path / "g.toml"
    path.write_text(f'name = "m"\nmodel_path = "model"\n{extra}')
    return path


def test_a_speecht5_folder_is_served_as_text_to_speech(tmp_path: Path) -> None:
    graph = load_graph(_graph(tmp_path, SPEECHT5))
    assert graph.pipeline_kind == "TEXT_TO_SPEECH" and graph.task == "synthesize"
    assert (graph.tts_facts.speaker_embedding_dim, graph.tts_facts.text_positions) == (16, 300)
    assert graph.max_context == 300
    assert graph.voices == {"default": None} and graph.default_voice == "default"  # no embedding
    assert graph.max_input_chars == 299  # the encoder's positions less the end token


def test_voices_resolve_against_the_graph_file(tmp_path: Path) -> None:
    extra = '[tts]\ndefault_voice = "b"\nmax_input_chars = 120\n[tts.voices]\na = "a.bin"\nb = "b.bin"\n'
    graph = load_graph(_graph(tmp_path, SPEECHT5, extra, voices={"a": 16, "b": 16}))
    assert graph.voices == {"a": tmp_path / "a.bin", "b": tmp_path / "b.bin"}
    assert graph.default_voice == "b" and graph.max_input_chars == 120
    first = load_graph(_graph(tmp_path, SPEECHT5, '[tts.voices]\nz = "b.bin"\na = "a.bin"\n'))
    assert first.default_voice == "z"  # the first one named


def test_openai_bounds_the_input_of_a_long_encoder(tmp_path: Path) -> None:
    long = {"config.json": {**SPEECHT5["config.json"], "max_text_positions": 100_000}}
    assert load_graph(_graph(tmp_path, long)).max_input_chars == 4096


@pytest.mark.parametrize(
    ("extra", "floats", "match"),
    [
        ('[tts]\ndefault_voice = "c"\n[tts.voices]\na = "a.bin"\n', 16, r"`tts.default_voice` 'c' is not one of"),
        ('[tts.voices]\na = "missing.bin"\n', 16, r"`tts.voices.a`: .*missing.bin is not a file"),
        ('[tts.voices]\na = "a.bin"\n', 512, r"`tts.voices.a`: .* holds 2048 bytes; .* 16 float32 values \(64 bytes"),
        ('[tts.voices]\n"a b" = "a.bin"\n', 16, r"tts.voices"),
        ("[tts]\nmax_input_chars = 0\n", 16, r"max_input_chars"),
        ("[tts]\nspeed = 2\n", 16, r"speed"),
    ],
)
def test_bad_tts_settings_name_the_field(tmp_path: Path, extra: str, floats: int, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        load_graph(_graph(tmp_path, SPEECHT5, extra, voices={"a": floats}))


def test_tts_settings_belong_to_text_to_speech_graphs(tmp_path: Path) -> None:
    chat = {"config.json": {"model_type": "llama"}}
    with pytest.raises(ConfigError, match=r"`\[tts\]` applies to text-to-speech graphs"):
        load_graph(_graph(tmp_path, chat, "[tts]\nmax_input_chars = 60\n"))
    with pytest.raises(ConfigError, match=r"scheduler"):
        load_graph(_graph(tmp_path, SPEECHT5, "[scheduler]\ncache_size = 2\n"))


def test_speech_crosses_the_pipe() -> None:
    command = Synthesize(request_id=3, text="Hello there.", voice="alloy")
    assert decode_to_engine(encoder.encode(command)) == command
    samples = np.linspace(-1, 1, 2000, dtype="<f4").tobytes()
    answer = Synthesized(request_id=3, samples=samples, sample_rate=16000, tokens=13)
    assert decode_from_engine(encoder.encode(Batch(events=[answer]))) == Batch(events=[answer])


class _Engine:
    """What `tts.check` reads of an EngineClient: its graph and admission."""

    def __init__(self, graph, task: str = "synthesize") -> None:
        self.graph, self._task = graph, task

    def admit(self, task: str) -> None:
        if task != self._task:
            raise InvalidRequest("not a text-to-speech model", param="model")


@pytest.fixture
def engine(tmp_path: Path) -> _Engine:
    extra = '[tts]\nmax_input_chars = 20\n[tts.voices]\nalloy = "a.bin"\necho = "b.bin"\n'
    return _Engine(load_graph(_graph(tmp_path, SPEECHT5, extra, voices={"a": 16, "b": 16})))


def _request(**fields) -> SpeechRequest:
    return msgspec.convert({"model": "m", "input": "Hello there.", **fields}, SpeechRequest)


def test_the_voice_asked_or_the_default(engine: _Engine) -> None:
    assert tts.check(engine, _request(voice="echo")) == "echo"
    assert tts.check(engine, _request()) == "alloy"


@pytest.mark.parametrize(
    ("fields", "param", "says"),
    [
        ({"voice": "nova"}, "voice", "voices: alloy, echo"),
        ({"voice": ""}, "voice", "`voice` is empty"),
        ({"speed": 0.5}, "speed", "speed 1.0 only"),
        ({"instructions": "Whisper."}, "instructions", "no instructions"),
        ({"input": "   "}, "input", "empty"),
        ({"input": "x" * 21}, "input", "at most 20 (tts.max_input_chars)"),
    ],
)
def test_what_speecht5_cannot_do_is_refused(engine: _Engine, fields: dict, param: str, says: str) -> None:
    with pytest.raises(InvalidRequest, match=r".") as caught:
        tts.check(engine, _request(**fields))
    assert caught.value.param == param and says in str(caught.value)


def test_another_kind_of_model_is_refused_first(engine: _Engine) -> None:
    chat = _Engine(SimpleNamespace(), task="generate")
    with pytest.raises(InvalidRequest, match="not a text-to-speech model"):
        tts.check(chat, _request(voice="nova"))


HIBARI = {"config.json": {"model_type": "hibari", "accent": "en-GB"}}


def _hibari(tmp_path: Path, voices: str = '[tts.voices]\nheart = "model/heart.onnx"\n') -> Path:
    path = _graph(tmp_path, HIBARI, voices)
    (tmp_path / "model" / "heart.onnx").write_bytes(b"onnx")
    return path


def test_a_hibari_folder_is_served_as_text_to_speech(tmp_path: Path) -> None:
    graph = load_graph(_hibari(tmp_path))
    assert graph.pipeline_kind == "TEXT_TO_SPEECH" and graph.task == "synthesize"
    facts = graph.tts_facts
    assert (facts.family, facts.british, facts.streams, facts.text_positions) == ("hibari", True, True, 400)
    assert graph.voices == {"heart": tmp_path / "model" / "heart.onnx"} and graph.default_voice == "heart"
    # Spoken a sentence at a time: OpenAI's bound on the text, not one call's phonemes.
    assert graph.max_input_chars == 4096
    assert "British English" in facts.describe()


@pytest.mark.parametrize(
    ("voices", "says"),
    [
        ("", r"names its voices: `\[tts.voices\]`"),
        ('[tts.voices]\nheart = "model/heart.bin"\n', r"`tts.voices.heart`: a hibari voice is its ONNX model"),
        ('[tts.voices]\nheart = "model/gone.onnx"\n', r"`tts.voices.heart`: .*gone.onnx is not a file"),
    ],
)
def test_a_hibari_graph_names_its_voices_onnx_files(tmp_path: Path, voices: str, says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        load_graph(_hibari(tmp_path, voices))


def test_a_hibari_voice_takes_a_speed_and_refuses_instructions(tmp_path: Path) -> None:
    engine = _Engine(load_graph(_hibari(tmp_path)))
    assert tts.check(engine, _request(speed=0.25, stream_format="sse")) == "heart"
    with pytest.raises(InvalidRequest, match=r"\(hibari\) takes no instructions"):
        tts.check(engine, _request(instructions="Whisper."))
