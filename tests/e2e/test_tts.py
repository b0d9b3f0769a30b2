"""Text to speech on a real server (issue 41, item 6): demo-tts (a tiny random-weight SpeechT5, so
its speech is noise) speaks through the official `openai` SDK in every response format, streamed
with `with_streaming_response` too, and as SSE (one delta: SpeechT5 speaks the whole text at once);
what SpeechT5 cannot do, and bad inputs, are 400s."""

from __future__ import annotations

import base64
import io
import json
import wave
from collections.abc import Iterator
from pathlib import Path

import av
import httpx
import numpy as np
import openai
import pytest

from tests.conftest import RunningServer, copy_demo_graphs, running_server

MAX_INPUT_CHARS = 200


@pytest.fixture(scope="module")
def server(demo_root: Path, tts_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    directory = tmp_path_factory.mktemp("tts")
    graphs = copy_demo_graphs(demo_root, directory / "graphs", ["demo-chat"])
    copy_demo_graphs(tts_root, graphs, ["demo-tts"])
    tts = graphs / "demo-tts.toml"
    text = tts.read_text()
    tts.write_text(text.replace("[tts]\n", f"[tts]\nmax_input_chars = {MAX_INPUT_CHARS}\n"))
    # A graph that lets more characters through than the encoder has positions (450): the engine's
    # own count refuses them, rather than the pipeline failing.
    unbounded = text.replace('name = "demo-tts"', 'name = "demo-tts-unbounded"').replace(
        "[tts]\n", "[tts]\nmax_input_chars = 1000\n"
    )
    (graphs / "demo-tts-unbounded.toml").write_text(unbounded)
    with running_server(graphs, directory / "server.log") as running:
        yield running


@pytest.fixture(scope="module")
def client(server: RunningServer) -> openai.OpenAI:
    return server.client(timeout=120)


def decoded_seconds(data: bytes) -> tuple[float, int]:
    """The duration PyAV decodes from an audio file, and its stream's sample rate."""
    with av.open(io.BytesIO(data)) as container:
        stream = container.streams.audio[0]
        samples = sum(frame.samples for frame in container.decode(stream))
        return samples / stream.rate, stream.rate


def test_speech_is_a_wav_of_the_models_rate(client: openai.OpenAI) -> None:
    answer = client.audio.speech.create(model="demo-tts", voice="alloy", input="Hello there.", response_format="wav")
    assert answer.response.headers["content-type"] == "audio/wav"
    with wave.open(io.BytesIO(answer.content)) as reader:
        assert (reader.getnchannels(), reader.getsampwidth(), reader.getframerate()) == (1, 2, 16000)
        frames = np.frombuffer(reader.readframes(reader.getnframes()), dtype="<i2")
    seconds, rate = decoded_seconds(answer.content)
    assert rate == 16000 and seconds > 0.1
    # Noise (random weights), but sound: not silence, and not clipped flat.
    assert 0 < np.abs(frames).max() < 32767 and len(np.unique(frames)) > 100


def test_longer_input_longer_speech_and_voices_differ(client: openai.OpenAI) -> None:
    def wav(voice: str, text: str) -> bytes:
        return client.audio.speech.create(model="demo-tts", voice=voice, input=text, response_format="wav").content

    short, long = wav("alloy", "Hi."), wav("alloy", "Hello there, this is a much longer sentence to say.")
    assert decoded_seconds(long)[0] > decoded_seconds(short)[0]
    assert wav("alloy", "Hello there.") != wav("echo", "Hello there.")
    assert wav("alloy", "Hello there.") == wav("alloy", "Hello there.")  # greedy: the same text, the same audio


@pytest.mark.parametrize("response_format", ["mp3", "opus", "aac", "flac"])
def test_every_encoded_format_decodes(client: openai.OpenAI, response_format: str) -> None:
    answer = client.audio.speech.create(
        model="demo-tts", voice="echo", input="Hello there.", response_format=response_format
    )
    media_types = {"mp3": "audio/mpeg", "opus": "audio/ogg", "aac": "audio/aac", "flac": "audio/flac"}
    assert answer.response.headers["content-type"] == media_types[response_format]
    seconds, _ = decoded_seconds(answer.content)
    wav = client.audio.speech.create(model="demo-tts", voice="echo", input="Hello there.", response_format="wav")
    assert seconds == pytest.approx(decoded_seconds(wav.content)[0], abs=0.1)  # codec padding aside


def test_pcm_is_the_wavs_samples_without_a_header(client: openai.OpenAI) -> None:
    pcm = client.audio.speech.create(model="demo-tts", voice="alloy", input="Hello there.", response_format="pcm")
    assert pcm.response.headers["content-type"] == "audio/pcm"
    wav = client.audio.speech.create(model="demo-tts", voice="alloy", input="Hello there.", response_format="wav")
    with wave.open(io.BytesIO(wav.content)) as reader:
        assert pcm.content == reader.readframes(reader.getnframes())


def test_default_format_is_mp3_and_streaming_response(client: openai.OpenAI, tmp_path: Path) -> None:
    with client.audio.speech.with_streaming_response.create(
        model="demo-tts", voice="alloy", input="Hello there."
    ) as response:
        assert response.headers["content-type"] == "audio/mpeg"
        response.stream_to_file(tmp_path / "hello.mp3")
    seconds, _ = decoded_seconds((tmp_path / "hello.mp3").read_bytes())
    assert seconds > 0.1


def test_raw_http_without_voice_takes_the_default(server: RunningServer) -> None:
    answer = httpx.post(
        f"{server.url}/v3/audio/speech",
        json={"model": "demo-tts", "input": "Hello there.", "response_format": "wav"},
        timeout=60,
    )
    assert answer.status_code == 200
    named = httpx.post(
        f"{server.url}/v1/audio/speech",
        json={"model": "demo-tts", "input": "Hello there.", "voice": "alloy", "response_format": "wav"},
        timeout=60,
    )
    assert answer.content == named.content


@pytest.mark.parametrize(
    ("fields", "param", "says"),
    [
        ({"voice": "nova"}, "voice", "alloy, echo"),
        ({"voice": ""}, "voice", "empty"),
        ({"speed": 1.5}, "speed", "speed 1.0 only"),
        ({"speed": 9.0}, "speed", ""),
        ({"instructions": "Speak cheerfully."}, "instructions", "no instructions"),
        ({"input": ""}, "input", "empty"),
        ({"input": "x" * (MAX_INPUT_CHARS + 1)}, "input", f"at most {MAX_INPUT_CHARS}"),
        ({"response_format": "ogg"}, "response_format", ""),
        ({"model": "demo-chat"}, "model", "/v1/audio/speech"),
        ({"tempo": 2}, "tempo", ""),
    ],
)
def test_bad_requests_are_400s(server: RunningServer, fields: dict, param: str, says: str) -> None:
    body = {"model": "demo-tts", "input": "Hello there.", "voice": "alloy", **fields}
    answer = httpx.post(f"{server.url}/v1/audio/speech", json=body, timeout=60)
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["param"] == param and says in error["message"], error


def test_text_beyond_the_encoders_positions_is_a_400_from_the_engine(server: RunningServer) -> None:
    body = {"model": "demo-tts-unbounded", "input": "x" * 600, "voice": "alloy"}
    answer = httpx.post(f"{server.url}/v1/audio/speech", json=body, timeout=60)
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert (error["param"], error["code"]) == ("input", "input_too_long") and "at most 450" in error["message"]
    assert server.model_status("demo-tts-unbounded")["state"] == "ready"  # refused, not crashed
    body["input"] = "x" * 440
    assert httpx.post(f"{server.url}/v1/audio/speech", json=body, timeout=60).status_code == 200


def test_sse_of_speecht5_is_its_whole_audio_in_one_delta(server: RunningServer) -> None:
    body = {"model": "demo-tts", "input": "Hello there.", "response_format": "wav", "stream_format": "sse"}
    answer = httpx.post(f"{server.url}/v1/audio/speech", json=body, timeout=60)
    assert answer.headers["content-type"].startswith("text/event-stream")
    events = [json.loads(line.removeprefix("data: ")) for line in answer.text.splitlines() if line.startswith("data: ")]
    assert [event["type"] for event in events] == ["speech.audio.delta", "speech.audio.done"]
    whole = httpx.post(f"{server.url}/v1/audio/speech", json={**body, "stream_format": "audio"}, timeout=60)
    assert base64.b64decode(events[0]["audio"]) == whole.content  # one piece: the exact wav
    assert events[1]["usage"]["input_tokens"] > 0


def test_sdk_sees_a_bad_voice_as_bad_request(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError, match="alloy, echo"):
        client.audio.speech.create(model="demo-tts", voice="onyx", input="Hello there.")


def test_metrics_count_the_speech(server: RunningServer, client: openai.OpenAI) -> None:
    client.audio.speech.create(model="demo-tts", voice="alloy", input="Hello there.", response_format="pcm")
    metrics = httpx.get(f"{server.url}/metrics", timeout=10).text
    line = next(
        line for line in metrics.splitlines() if line.startswith('appliance_audio_seconds_total{model="demo-tts"}')
    )
    assert float(line.split()[-1]) > 0
