"""The Realtime API's transcription sessions through the openai SDK's own realtime client
(`AsyncOpenAI.realtime.connect`, openai 3.x on websockets), against the real server on demo-whisper
(whisper tiny.en, with its Silero voice-activity model).

The speech is tests/data/capital-of-france.wav (espeak-ng's voice, see test_whisper_model), raised
to the API's 24 kHz pcm16 and sent in 100 ms chunks at real-time pace, then silence, as a
microphone would: server VAD must find the turn and its end with no commit from the client.
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
import shutil
import subprocess
import threading
import time
import wave
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import openai
import pytest
from websockets.asyncio.client import connect as ws_connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from tests.conftest import RunningServer, copy_demo_graphs, running_server
from tests.e2e.test_whisper_model import MAX_WORD_ERROR_RATE, SAID, SPEECH, read_wav, word_error_rate

MODEL = "demo-whisper"
KEY = "realtime-key"
JS = Path(__file__).resolve().parents[1] / "js"
CHUNK_SECONDS = 0.1
IDLE_SECONDS = 4.0


@pytest.fixture(scope="module")
def server(whisper_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    directory = tmp_path_factory.mktemp("realtime")
    (directory / "api-keys").write_text(f"{KEY}\n")
    graphs = copy_demo_graphs(whisper_root, directory / "graphs", [MODEL])
    with running_server(
        graphs,
        directory / "server.log",
        "--api-key-file",
        str(directory / "api-keys"),
        "--realtime-idle-seconds",
        str(IDLE_SECONDS),
        # Shorter than the sessions: the upgrade request's HTTP deadlines must not close them.
        "--header-timeout",
        "2",
        "--body-timeout",
        "2",
    ) as running:
        yield running


def pcm24k(samples: np.ndarray) -> bytes:
    """16 kHz float samples as the API's audio/pcm: 16-bit little-endian at 24 kHz."""
    # Linear interpolation is enough for espeak's voice (all of it under 4 kHz).
    raised = np.interp(np.arange(len(samples) * 3 // 2) * 2 / 3, np.arange(len(samples)), samples)
    return (np.clip(raised, -1, 1) * 32767).astype("<i2").tobytes()


@pytest.fixture(scope="module")
def speech() -> bytes:
    """The utterance, then 1.5 s of silence."""
    return pcm24k(np.concatenate([read_wav(SPEECH), np.zeros(24_000, dtype=np.float32)]))


def chunks(audio: bytes) -> list[str]:
    size = int(24_000 * 2 * CHUNK_SECONDS)
    return [base64.b64encode(audio[i : i + size]).decode() for i in range(0, len(audio), size)]


async def stream(connection, audio: bytes, sent: list[float] | None = None) -> None:
    """`audio` appended in 100 ms chunks at real-time pace; `sent` gets when each chunk was sent."""
    started = time.monotonic()
    for index, chunk in enumerate(chunks(audio)):
        await connection.input_audio_buffer.append(audio=chunk)
        if sent is not None:
            sent.append(time.monotonic())
        await asyncio.sleep(max(0.0, started + (index + 1) * CHUNK_SECONDS - time.monotonic()))


async def events_until(connection, last: str, timeout: float = 60.0) -> list:
    """The server events up to the first of type `last`."""
    seen = []

    async def read() -> None:
        async for event in connection:
            seen.append(event)
            if event.type == last:
                return

    await asyncio.wait_for(read(), timeout)
    return seen


def client(server: RunningServer, key: str = KEY) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=f"{server.url}/v1", api_key=key, max_retries=0)


def test_server_vad_transcribes_streamed_speech_without_a_commit(server: RunningServer, speech: bytes) -> None:
    async def run() -> list:
        async with client(server).realtime.connect(model=MODEL) as connection:
            created = await events_until(connection, "session.created", 10)
            assert created[-1].session.type == "transcription"
            sender = asyncio.create_task(stream(connection, speech))
            seen = await events_until(connection, "conversation.item.input_audio_transcription.completed")
            await sender
            return seen

    seen = asyncio.run(run())
    types = [event.type for event in seen]
    order = [
        "input_audio_buffer.speech_started",
        "input_audio_buffer.speech_stopped",
        "input_audio_buffer.committed",
        "conversation.item.added",
        "conversation.item.input_audio_transcription.completed",
    ]
    assert [kind for kind in types if kind in order] == order, types
    started, stopped, completed = (next(e for e in seen if e.type == kind) for kind in (order[0], order[1], order[-1]))
    assert started.item_id == stopped.item_id == completed.item_id
    # The utterance is 2.3 s long; speech starts in its first half second and stops after it.
    assert 0 <= started.audio_start_ms < 800
    assert 1800 < stopped.audio_end_ms < 3800, stopped.audio_end_ms
    assert word_error_rate(SAID, completed.transcript) <= MAX_WORD_ERROR_RATE, completed.transcript
    deltas = "".join(e.delta for e in seen if e.type == "conversation.item.input_audio_transcription.delta")
    assert deltas.strip() == completed.transcript
    assert completed.usage.type == "duration" and completed.usage.seconds > 1.5


def test_the_openai_javascript_sdk_transcribes_with_server_vad(
    server: RunningServer, speech: bytes, tmp_path: Path
) -> None:
    """The openai JavaScript SDK's `OpenAIRealtimeWebSocket` (Node, the `ws` package as its
    WebSocket; the key as the browsers' subprotocol): the same turn, found by server VAD."""
    if shutil.which("node") is None or not (JS / "node_modules" / "openai" / "realtime").is_dir():
        pytest.skip("Node or tests/js/node_modules is missing (setup.sh runs npm ci there when npm is present)")
    audio = tmp_path / "speech.pcm"
    audio.write_bytes(speech)
    ran = subprocess.run(
        ["node", str(JS / "realtime_transcribe.mjs"), f"{server.url}/v1", MODEL, KEY, str(audio)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ran.returncode == 0, ran.stderr + ran.stdout
    seen = json.loads(ran.stdout.strip().splitlines()[-1])
    order = [
        "session.created",
        "input_audio_buffer.speech_started",
        "input_audio_buffer.speech_stopped",
        "input_audio_buffer.committed",
        "conversation.item.input_audio_transcription.completed",
    ]
    assert [kind for kind in seen["types"] if kind in order] == order, seen
    assert not seen["errors"], seen
    assert word_error_rate(SAID, seen["transcript"]) <= MAX_WORD_ERROR_RATE, seen
    assert seen["deltas"].strip() == seen["transcript"]
    assert seen["usage"]["type"] == "duration" and seen["usage"]["seconds"] > 1.5


def test_manual_commits_and_a_bad_event_keep_the_session(server: RunningServer, speech: bytes) -> None:
    async def run() -> tuple[list, list, list]:
        async with client(server).realtime.connect(model=MODEL) as connection:
            await connection.session.update(
                session={"type": "transcription", "audio": {"input": {"turn_detection": None}}}
            )
            updated = await events_until(connection, "session.updated", 10)
            await connection.send({"type": "input_audio_buffer.append", "audio": "not base64!", "event_id": "bad-1"})
            await connection.send(
                {
                    "type": "session.update",
                    "session": {
                        "type": "transcription",
                        "audio": {"input": {"turn_detection": {"type": "server_vad", "silence_duration_ms": "long"}}},
                    },
                    "event_id": "bad-2",
                }
            )
            errors = await events_until(connection, "error", 10) + await events_until(connection, "error", 10)
            for chunk in chunks(speech):  # as fast as it goes: nothing waits for VAD
                await connection.input_audio_buffer.append(audio=chunk)
            await connection.input_audio_buffer.commit()
            seen = await events_until(connection, "conversation.item.input_audio_transcription.completed")
            return updated, errors, seen

    updated, errors, seen = asyncio.run(run())
    assert updated[-1].session.audio.input.turn_detection is None
    first, second = (event.error for event in errors if event.type == "error")
    assert (first.event_id, first.param) == ("bad-1", "audio")
    assert (second.event_id, second.param) == ("bad-2", "session.audio.input.turn_detection.silence_duration_ms")
    types = [event.type for event in seen]
    assert "input_audio_buffer.speech_started" not in types
    assert "input_audio_buffer.committed" in types
    assert word_error_rate(SAID, seen[-1].transcript) <= MAX_WORD_ERROR_RATE, seen[-1].transcript


def test_an_empty_commit_is_an_error_event(server: RunningServer) -> None:
    async def run() -> list:
        async with client(server).realtime.connect(model=MODEL) as connection:
            await connection.input_audio_buffer.commit(event_id="empty")
            return await events_until(connection, "error", 10)

    error = asyncio.run(run())[-1].error
    assert (error.code, error.event_id) == ("input_audio_buffer_commit_empty", "empty")


def _handshake(server: RunningServer, headers: dict[str, str], subprotocols: list[str] | None = None) -> int:
    """The HTTP status the server answers a websocket handshake with (101: accepted)."""

    async def run() -> int:
        url = server.url.replace("http://", "ws://") + f"/v1/realtime?model={MODEL}"
        try:
            async with ws_connect(url, additional_headers=headers, subprotocols=subprotocols) as socket:
                await socket.recv()  # session.created
                return 101
        except InvalidStatus as refused:
            return refused.response.status_code

    return asyncio.run(run())


def test_websockets_pass_the_gate_as_http_requests_do(server: RunningServer) -> None:
    bearer = {"Authorization": f"Bearer {KEY}"}
    assert _handshake(server, {}) == 401
    assert _handshake(server, {"Authorization": "Bearer wrong"}) == 401
    assert _handshake(server, bearer) == 101
    # A browser cannot set headers on a websocket: the SDKs send the key as a subprotocol.
    assert _handshake(server, {}, ["realtime", f"openai-insecure-api-key.{KEY}"]) == 101
    assert _handshake(server, {**bearer, "Origin": "https://evil.example"}) == 403
    assert _handshake(server, {**bearer, "Origin": server.url}) == 101
    # The SDK surfaces a refused handshake as the websockets error carrying the status.
    with pytest.raises(InvalidStatus) as refused:
        asyncio.run(client(server, "wrong").realtime.connect(model=MODEL).enter())
    assert refused.value.response.status_code == 401
    metrics = httpx.get(f"{server.url}/metrics", headers=bearer).text
    assert 'method="WEBSOCKET",route="/v1/realtime",status="401"' in metrics
    assert 'method="WEBSOCKET",route="/v1/realtime",status="403"' in metrics


def test_unknown_and_unfit_models_are_refused_at_the_handshake(server: RunningServer) -> None:
    async def status(model: str) -> int:
        url = server.url.replace("http://", "ws://") + f"/v1/realtime?model={model}"
        try:
            async with ws_connect(url, additional_headers={"Authorization": f"Bearer {KEY}"}):
                return 101
        except InvalidStatus as refused:
            return refused.response.status_code

    assert asyncio.run(status("nope")) == 404


def _latencies(server: RunningServer, speech: bytes) -> tuple[float, float, float]:
    """When `speech_stopped` came (monotonic), and the seconds from the chunk that completed the
    turn's silence (`audio_end_ms`) to `speech_stopped` and to the final transcript."""

    async def run() -> tuple[float, float, float]:
        async with client(server).realtime.connect(model=MODEL) as connection:
            await events_until(connection, "session.created", 10)
            sent: list[float] = []
            sender = asyncio.create_task(stream(connection, speech, sent))
            stopped = (await events_until(connection, "input_audio_buffer.speech_stopped"))[-1]
            stopped_at = time.monotonic()
            await events_until(connection, "conversation.item.input_audio_transcription.completed")
            completed_at = time.monotonic()
            await sender
            heard_at = sent[min(len(sent) - 1, -(-stopped.audio_end_ms // 100) - 1)]
            return stopped_at, stopped_at - heard_at, completed_at - heard_at

    return asyncio.run(run())


def test_vad_is_not_starved_behind_a_long_transcription(server: RunningServer, speech: bytes) -> None:
    """A four-minute upload keeps Whisper busy for seconds; a live session's turn ends on time
    meanwhile (its VAD runs on the engine's live-voice thread), its transcript after the upload's."""
    _, control, control_transcript = _latencies(server, speech)
    # 4 minutes: tiny.en reads 2 minutes in 3-5 s here (in pieces), so the upload is still in
    # Whisper when the turn ends, about 3 s after it began (2 minutes left too little margin).
    long_audio = np.tile(np.concatenate([read_wav(SPEECH), np.zeros(8000, dtype=np.float32)]), 90)
    wav = io.BytesIO()
    with wave.open(wav, "wb") as out:
        out.setnchannels(1), out.setsampwidth(2), out.setframerate(16000)
        out.writeframes((long_audio * 32767).astype("<i2").tobytes())
    upload_done: list[float] = []

    def upload() -> None:
        answer = _upload(server, "long.wav", wav.getvalue())
        assert answer.status_code == 200, answer.text
        upload_done.append(time.monotonic())

    uploading = threading.Thread(target=upload)
    uploading.start()
    time.sleep(0.5)  # the upload is decoded and in Whisper
    stopped_at, loaded, _ = _latencies(server, speech)
    uploading.join()
    print(
        f"end of speech to speech_stopped: {control:.3f} s alone, {loaded:.3f} s beside a 4-min transcription; "
        f"to the final transcript alone: {control_transcript:.3f} s"
    )
    assert stopped_at < upload_done[0], "the turn's end waited for the long transcription"
    assert loaded < control + 1.0


def _upload(server: RunningServer, name: str, wav: bytes) -> httpx.Response:
    """`wav` transcribed by POST /v1/audio/transcriptions."""
    return httpx.post(
        f"{server.url}/v1/audio/transcriptions",
        headers={"Authorization": f"Bearer {KEY}"},
        files={"file": (name, wav, "audio/wav")},
        data={"model": MODEL},
        timeout=300,
    )


def _transcription_seconds(server: RunningServer) -> float:
    """The seconds a short upload (the 2.3 s utterance) takes to transcribe, its words checked."""
    started = time.monotonic()
    answer = _upload(server, "short.wav", SPEECH.read_bytes())
    seconds = time.monotonic() - started
    assert answer.status_code == 200, answer.text
    assert word_error_rate(SAID, answer.json()["text"]) <= MAX_WORD_ERROR_RATE, answer.text
    return seconds


def _leave_mid_transcription(server: RunningServer, turn: bytes) -> None:
    """Commit `turn` in a session and leave at its first transcription delta (Whisper is reading it)."""

    async def run() -> None:
        async with client(server).realtime.connect(model=MODEL) as connection:
            await connection.session.update(
                session={"type": "transcription", "audio": {"input": {"turn_detection": None}}}
            )
            for chunk in chunks(turn):
                await connection.input_audio_buffer.append(audio=chunk)
            await connection.input_audio_buffer.commit()
            await events_until(connection, "conversation.item.input_audio_transcription.delta", 60)

    asyncio.run(run())


def test_a_session_that_leaves_frees_the_engine_for_the_next_request(server: RunningServer) -> None:
    """75 s of speech keep tiny.en busy for seconds; a session that leaves while Whisper reads them
    must not make the next client wait for them (no request may stall another's), and the next
    transcript holds nothing of them. Before the engine read long recordings in pieces, it stopped
    only at the end of the 30 s window it was reading: the next upload took 4-6x its time."""
    control = min(_transcription_seconds(server) for _ in range(3))  # the same upload, the engine idle
    long_turn = pcm24k(np.tile(read_wav(SPEECH), 35))  # 75 s of speech: the second window is whole
    after = []
    for _ in range(2):
        _leave_mid_transcription(server, long_turn)
        deadline = time.monotonic() + 1.0  # the server abandons the call and tells the engine at once
        while server.model_status(MODEL)["in_flight"]:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        after.append(_transcription_seconds(server))
    print(f"a short transcription: {control:.2f} s on an idle engine, {after} s right after a session left")
    assert min(after) < 2.5 * control, (after, control)
    assert server.wait_idle(MODEL, timeout=30)["running"] == 0


def test_an_idle_session_is_closed(server: RunningServer) -> None:
    async def run() -> tuple[float, int | None]:
        url = server.url.replace("http://", "ws://") + f"/v1/realtime?model={MODEL}"
        async with ws_connect(url, additional_headers={"Authorization": f"Bearer {KEY}"}) as socket:
            opened = time.monotonic()
            try:
                while True:
                    await asyncio.wait_for(socket.recv(), IDLE_SECONDS * 3)
            except ConnectionClosed as closed:
                return time.monotonic() - opened, closed.rcvd.code if closed.rcvd else None

    seconds, code = asyncio.run(run())
    assert IDLE_SECONDS - 0.5 < seconds < IDLE_SECONDS + 2
    assert code == 1000
