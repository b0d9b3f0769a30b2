"""Speech-to-text graphs (issue 41): the kind read from a Whisper folder, its facts from the model's
own files, `[speech]` refused elsewhere, generation keys refused on it, and a Transcribe's samples
sent to the engine in a raw frame."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from appliance.errors import ConfigError
from appliance.graphfiles import load_graph

WHISPER = {
    "config.json": {
        "model_type": "whisper",
        "architectures": ["WhisperForConditionalGeneration"],
        "max_target_positions": 448,
    },
    "generation_config.json": {
        "is_multilingual": True,
        "lang_to_id": {"<|en|>": 50259, "<|de|>": 50261, "<|haw|>": 50352},
        "alignment_heads": [[2, 2], [3, 0]],
    },
}


def _graph(tmp_path: Path, files: dict[str, object], extra: str = "") -> Path:
    model = tmp_path / "model"
    model.mkdir(exist_ok=True)
    for name, content in files.items():
        (model / name).write_text(json.dumps(content))
    path = tmp_path / "g.toml"
    path.write_text(f'name = "m"\nmodel_path = "model"\n{extra}')
    return path


def test_a_whisper_folder_is_served_as_speech_to_text(tmp_path: Path) -> None:
    graph = load_graph(_graph(tmp_path, WHISPER))
    assert graph.pipeline_kind == "SPEECH_TO_TEXT" and graph.task == "transcribe"
    facts = graph.speech_facts
    assert facts is not None and facts.multilingual and facts.languages == ("en", "de", "haw")
    assert facts.text_tokens == 448 and facts.alignment_heads
    assert graph.max_context == 448
    assert "3 languages" in facts.describe()


def test_an_english_only_whisper(tmp_path: Path) -> None:
    english = {**WHISPER, "generation_config.json": {"is_multilingual": False, "lang_to_id": {}}}
    facts = load_graph(_graph(tmp_path, english)).speech_facts
    assert facts is not None and not facts.multilingual and facts.languages == () and not facts.alignment_heads


def test_speech_settings_belong_to_speech_graphs(tmp_path: Path) -> None:
    chat = {"config.json": {"model_type": "llama", "max_position_embeddings": 2048}}
    with pytest.raises(ConfigError, match=r"`\[speech\]` applies to speech-to-text graphs"):
        load_graph(_graph(tmp_path, chat, "[speech]\nmax_audio_seconds = 60\n"))
    with pytest.raises(ConfigError, match="`tool_parser` applies to generative graphs"):
        load_graph(_graph(tmp_path, WHISPER, 'tool_parser = "hermes"\n'))
    with pytest.raises(ConfigError, match="max_audio_seconds"):
        load_graph(_graph(tmp_path, WHISPER, "[speech]\nmax_audio_seconds = 0\n"))
    with pytest.raises(ConfigError, match="could never be taken"):
        load_graph(_graph(tmp_path, WHISPER, "[speech]\nmax_audio_seconds = 600\nmax_queued_audio_seconds = 300\n"))


def test_word_timestamps_need_alignment_heads(tmp_path: Path) -> None:
    graph = load_graph(_graph(tmp_path, WHISPER, "[speech]\nword_timestamps = true\n"))
    assert graph.speech.word_timestamps
    headless = {**WHISPER, "generation_config.json": {"is_multilingual": False}}
    with pytest.raises(ConfigError, match="alignment heads"):
        load_graph(_graph(tmp_path, headless, "[speech]\nword_timestamps = true\n"))


def test_the_voice_activity_model_is_a_file_beside_the_graph(tmp_path: Path) -> None:
    assert load_graph(_graph(tmp_path, WHISPER)).vad_model is None
    vad = '[speech]\nvad_model = "vad/silero.onnx"\n'
    with pytest.raises(ConfigError, match=r"`speech.vad_model`: .*silero.onnx is not a file"):
        load_graph(_graph(tmp_path, WHISPER, vad))
    (tmp_path / "vad").mkdir()
    (tmp_path / "vad" / "silero.onnx").write_bytes(b"onnx")
    graph = load_graph(_graph(tmp_path, WHISPER, vad))
    assert graph.vad_model == tmp_path.resolve() / "vad" / "silero.onnx"
    assert (graph.speech.vad_threshold, graph.speech.vad_min_speech_seconds) == (0.5, 0.25)
    for bad in ("vad_threshold = 1.0", "vad_threshold = 0", "vad_min_speech_seconds = -1"):
        with pytest.raises(ConfigError, match=bad.split()[0]):
            load_graph(_graph(tmp_path, WHISPER, f"{vad}{bad}\n"))


def test_samples_travel_in_a_raw_frame() -> None:
    from appliance.engine.messages import Cancel, ToEngineDecoder, Transcribe, TranscribeOptions, encode_to_engine

    samples = np.linspace(-1, 1, 1000, dtype="<f4")
    command = Transcribe(7, TranscribeOptions(language="de", stream=True), memoryview(samples))
    frames = encode_to_engine(command)
    assert len(frames) == 2 and len(frames[0]) < 200  # the samples are not in the message itself
    decoder = ToEngineDecoder()
    assert decoder.feed(bytes(frames[0])) is None
    received = decoder.feed(bytes(frames[1]))
    assert isinstance(received, Transcribe) and received.options == command.options
    assert np.array_equal(np.frombuffer(received.samples, dtype="<f4"), samples)
    assert decoder.feed(encode_to_engine(Cancel(request_id=7))[0]) == Cancel(request_id=7)


def test_a_chat_graph_names_a_speech_graph_to_hear_and_a_voice_graph_to_speak(tmp_path: Path) -> None:
    from appliance.graphfiles import load_graphs

    model = tmp_path / "whisper"
    model.mkdir()
    for name, content in WHISPER.items():
        (model / name).write_text(json.dumps(content))
    (tmp_path / "chat-model").mkdir()
    (tmp_path / "chat-model" / "config.json").write_text(json.dumps({"model_type": "llama"}))
    (tmp_path / "ears.toml").write_text('name = "ears"\nmodel_path = "whisper"\n')
    chat = tmp_path / "chat.toml"
    chat.write_text('name = "chat"\nmodel_path = "chat-model"\nspeech_model = "ears"\nvoice_model = "ears"\n')
    with pytest.raises(
        ConfigError, match="`voice_model` 'ears' is a SPEECH_TO_TEXT graph: name a TEXT_TO_SPEECH graph"
    ):
        load_graphs(tmp_path)
    chat.write_text('name = "chat"\nmodel_path = "chat-model"\nvoice_model = "mouth"\n')
    with pytest.raises(ConfigError, match="`voice_model` 'mouth' is not served here"):
        load_graphs(tmp_path)
    with pytest.raises(ConfigError, match="`voice_model` applies to generative graphs"):
        load_graph(_graph(tmp_path, WHISPER, 'voice_model = "mouth"\n'))
