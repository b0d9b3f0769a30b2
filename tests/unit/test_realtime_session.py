"""A Realtime session without a socket or a model: the input audio buffer, server VAD turns, manual
commits, `session.update`, bounds, the conversation seam and cancellation on close, on a fake
hearing engine whose voice-activity model hears any frame louder than -26 dBFS."""

from __future__ import annotations

import asyncio
import base64
from types import SimpleNamespace

import numpy as np
import pytest

from appliance.dialects.realtime.session import RealtimeLimits, RealtimeSession, Turn
from appliance.dialects.realtime.turns import SpeechStarted, SpeechStopped, TurnDetector, VadSettings
from appliance.engine.messages import Transcribed, VoiceDetected
from appliance.errors import InvalidRequest
from appliance.media.live_audio import LiveAudio
from appliance.protocol import realtime as rt


class FakeHearing:
    """A speech engine: VAD by loudness, a transcript that names the seconds heard."""

    def __init__(self, *, vad: bool = True, hold: bool = False) -> None:
        self.graph = SimpleNamespace(
            name="whisper",
            aliases=(),
            vad_model="vad.onnx" if vad else None,
            speech_facts=SimpleNamespace(languages=("en",)),
        )
        self.hold = hold
        self.transcribing = 0
        self.cancelled = 0
        self.vad_calls = 0

    async def detect_voice(self, samples: bytes, state: bytes = b"") -> VoiceDetected:
        self.vad_calls += 1
        frames = np.frombuffer(samples, dtype="<f4").reshape(-1, 512)
        loud = np.sqrt((frames**2).mean(axis=1)) > 0.05
        return VoiceDetected(request_id=0, probabilities=np.where(loud, 0.95, 0.01).astype("<f4").tobytes(), state=b"s")

    async def transcribe(self, samples: bytes, options, on_text=None) -> Transcribed:
        self.transcribing += 1
        try:
            if self.hold:
                await asyncio.Event().wait()
            seconds = len(samples) / 4 / 16000
            on_text(" heard")
            on_text(f" {seconds:.1f}")
            return Transcribed(request_id=0, text=f" heard {seconds:.1f}")
        except asyncio.CancelledError:
            self.cancelled += 1
            raise


def pcm(seconds: float, loud: bool) -> bytes:
    """audio/pcm (24 kHz pcm16): a 440 Hz tone at -10 dBFS, or silence."""
    t = np.arange(int(24000 * seconds)) / 24000
    wave = 0.3 * np.sin(2 * np.pi * 440 * t) if loud else np.zeros_like(t)
    return (wave * 32767).astype("<i2").tobytes()


def append(audio: bytes) -> list[rt.InputAudioBufferAppend]:
    size = 4800  # 100 ms
    return [
        rt.InputAudioBufferAppend(audio=base64.b64encode(audio[i : i + size]).decode())
        for i in range(0, len(audio), size)
    ]


def drain(session: RealtimeSession) -> list:
    found = []
    while not session.events.empty():
        found.append(session.events.get_nowait())
    return found


async def settle(session: RealtimeSession, until: type | None = None, timeout: float = 2.0) -> list:
    """The events sent once the session's tasks have caught up (or once one of type `until` came)."""
    found: list = []
    deadline = asyncio.get_running_loop().time() + timeout
    while asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.01)
        found += drain(session)
        if until is not None and any(isinstance(event, until) for event in found):
            return found
    return found


def run(coroutine):
    return asyncio.run(coroutine)


def test_server_vad_commits_and_transcribes_a_turn() -> None:
    async def go() -> list:
        session = RealtimeSession(kind="transcription", model="whisper", hearing=FakeHearing())
        session.start()
        for event in append(pcm(0.5, False) + pcm(1.0, True) + pcm(1.0, False)):
            await session.handle(event)
        found = await settle(session, rt.TranscriptionCompleted)
        await session.close()
        return found

    found = run(go())
    kinds = [type(event).__name__ for event in found]
    assert kinds == [
        "SessionCreated",
        "InputAudioBufferSpeechStarted",
        "InputAudioBufferSpeechStopped",
        "InputAudioBufferCommitted",
        "ConversationItemAdded",
        "ConversationItemDone",
        "TranscriptionDelta",
        "TranscriptionDelta",
        "TranscriptionCompleted",
    ]
    started, stopped, committed = found[1], found[2], found[3]
    # Speech from 500 ms, less the 300 ms prefix padding; stopped after 500 ms of silence.
    assert 180 <= started.audio_start_ms <= 220
    assert 1950 <= stopped.audio_end_ms <= 2100
    assert started.item_id == stopped.item_id == committed.item_id == found[-1].item_id
    assert committed.previous_item_id is None
    assert found[-1].transcript == "heard 1.8"  # 200 ms to about 2 s
    assert found[-1].usage.seconds == pytest.approx(1.8, abs=0.1)


def test_manual_commit_clear_and_the_empty_commit() -> None:
    async def go() -> tuple[list, list]:
        session = RealtimeSession(kind="transcription", model="whisper", hearing=FakeHearing(vad=False))
        session.start()
        with pytest.raises(InvalidRequest) as empty:
            await session.handle(rt.InputAudioBufferCommit())
        for event in append(pcm(0.5, True)):
            await session.handle(event)
        await session.handle(rt.InputAudioBufferClear())
        for event in append(pcm(0.3, True)):
            await session.handle(event)
        await session.handle(rt.InputAudioBufferCommit())
        found = await settle(session, rt.TranscriptionCompleted)
        await session.close()
        return [empty.value.code], found

    codes, found = run(go())
    assert codes == ["input_audio_buffer_commit_empty"]
    assert not any(isinstance(event, rt.InputAudioBufferSpeechStarted) for event in found)
    assert any(isinstance(event, rt.InputAudioBufferCleared) for event in found)
    assert found[-1].transcript == "heard 0.3"  # what came before the clear is gone


def test_the_buffer_is_bounded_in_seconds() -> None:
    async def go() -> str:
        limits = RealtimeLimits(max_buffer_seconds=1.0)
        session = RealtimeSession(kind="transcription", model="whisper", hearing=FakeHearing(vad=False), limits=limits)
        events = append(pcm(1.2, True))
        for event in events[:10]:
            await session.handle(event)
        with pytest.raises(InvalidRequest) as full:
            await session.handle(events[10])
        return full.value.code

    assert run(go()) == "input_audio_buffer_full"


def test_session_update_merges_and_refuses_what_it_cannot_honour() -> None:
    async def go() -> tuple[RealtimeSession, list[str]]:
        session = RealtimeSession(kind="transcription", model="whisper", hearing=FakeHearing())
        vad = rt.ServerVad(silence_duration_ms=800)
        update = rt.TranscriptionSession(audio=rt.TranscriptionAudio(input=rt.AudioInput(turn_detection=vad)))
        await session.handle(rt.SessionUpdate(session=update))
        language = rt.AudioInput(transcription=rt.AudioTranscription(language="en"))
        await session.handle(
            rt.SessionUpdate(session=rt.TranscriptionSession(audio=rt.TranscriptionAudio(input=language)))
        )
        refused = []
        for bad in (
            rt.RealtimeSession(),
            rt.TranscriptionSession(
                audio=rt.TranscriptionAudio(input=rt.AudioInput(noise_reduction=rt.NoiseReduction()))
            ),
            rt.TranscriptionSession(
                audio=rt.TranscriptionAudio(input=rt.AudioInput(transcription=rt.AudioTranscription(language="xx")))
            ),
        ):
            with pytest.raises(InvalidRequest) as error:
                await session.handle(rt.SessionUpdate(session=bad))
            refused.append(error.value.param)
        return session, refused

    session, refused = run(go())
    turns = session.settings.turns
    assert (turns.vad.silence_duration_ms, turns.vad.threshold, turns.vad.prefix_padding_ms) == (800, 0.5, 300)
    assert session.settings.transcription.language == "en" and session.settings.transcription.model == "whisper"
    assert refused == [
        "session.type",
        "session.audio.input.noise_reduction",
        "session.audio.input.transcription.language",
    ]
    shown = session.settings.describe(session.id, "whisper")
    assert shown["audio"]["input"]["turn_detection"]["silence_duration_ms"] == 800


@pytest.mark.parametrize(("eagerness", "silence_ms"), [(None, 500), ("auto", 500), ("high", 300), ("low", 1000)])
def test_semantic_vad_is_the_voice_activity_model_with_a_silence_by_eagerness(
    eagerness: str | None, silence_ms: int
) -> None:
    """The openai Agents SDK's default turn detection: served by server VAD, its eagerness the
    silence that ends a turn; shown as asked; create/interrupt_response honoured."""

    async def go() -> RealtimeSession:
        session = RealtimeSession(kind="transcription", model="whisper", hearing=FakeHearing())
        semantic = rt.SemanticVad(eagerness=eagerness, interrupt_response=False)
        update = rt.TranscriptionSession(audio=rt.TranscriptionAudio(input=rt.AudioInput(turn_detection=semantic)))
        await session.handle(rt.SessionUpdate(session=update))
        return session

    session = run(go())
    turns = session.settings.turns
    assert (turns.vad.silence_duration_ms, turns.vad.threshold, turns.vad.prefix_padding_ms) == (silence_ms, 0.5, 300)
    assert (turns.create_response, turns.interrupt_response) == (True, False)
    shown = session.settings.describe(session.id, "whisper")["audio"]["input"]["turn_detection"]
    assert shown == {
        "type": "semantic_vad",
        "eagerness": eagerness or "auto",
        "create_response": True,
        "interrupt_response": False,
    }


def test_server_vad_needs_a_voice_activity_model() -> None:
    async def go() -> tuple[object, str | None]:
        session = RealtimeSession(kind="transcription", model="whisper", hearing=FakeHearing(vad=False))
        vad = rt.TranscriptionSession(audio=rt.TranscriptionAudio(input=rt.AudioInput(turn_detection=rt.ServerVad())))
        with pytest.raises(InvalidRequest) as error:
            await session.handle(rt.SessionUpdate(session=vad))
        return session.settings.turns, error.value.param

    assert run(go()) == (None, "session.audio.input.turn_detection.type")


def test_g711_input_is_heard() -> None:
    async def go() -> list:
        session = RealtimeSession(kind="transcription", model="whisper", hearing=FakeHearing(vad=False))
        session.start()
        ulaw = rt.AudioInput(format=rt.AudioPCMU())
        await session.handle(rt.SessionUpdate(session=rt.TranscriptionSession(audio=rt.TranscriptionAudio(input=ulaw))))
        await session.handle(rt.InputAudioBufferAppend(audio=base64.b64encode(b"\xff" * 4000).decode()))  # 0.5 s
        await session.handle(rt.InputAudioBufferCommit())
        found = await settle(session, rt.TranscriptionCompleted)
        await session.close()
        return found

    found = run(go())
    assert found[1].session["audio"]["input"]["format"] == {"type": "audio/pcmu"}
    assert found[-1].transcript == "heard 0.5"


def test_the_conversation_seam() -> None:
    class Listener:
        def __init__(self, session: RealtimeSession) -> None:
            self.session = session
            self.seen: list = []

        async def on_event(self, event) -> None:
            self.seen.append(type(event).__name__)
            self.session.send(rt.ResponseCreated(response=rt.RealtimeResponse(id="resp_1")))

        async def on_speech_started(self, item_id: str, audio_start_ms: int) -> None:
            self.seen.append(("speech", item_id))

        async def on_turn(self, turn: Turn) -> None:
            self.seen.append(("turn", turn.item_id, turn.transcript, len(turn.samples)))

        async def close(self) -> None:
            self.seen.append("closed")

    async def go() -> tuple[list, list]:
        session = RealtimeSession(kind="realtime", model="chat", hearing=FakeHearing(), conversation=Listener)
        session.start()
        for event in append(pcm(0.2, False) + pcm(0.6, True) + pcm(0.8, False)):
            await session.handle(event)
        await session.handle(rt.ResponseCreate())
        found = await settle(session, rt.TranscriptionCompleted)
        found += await settle(session, timeout=0.1)
        await session.close()
        return session.conversation.seen, found

    seen, found = run(go())
    item_id = next(entry[1] for entry in seen if entry[0] == "speech")
    assert "ResponseCreate" in seen
    turn = next(entry for entry in seen if entry[0] == "turn")
    # From 0 (200 ms of speech start less 300 ms of padding) to 500 ms of silence after it.
    assert turn[:3] == ("turn", item_id, "heard 1.3") and abs(turn[3] - 1.3 * 16000) < 1600
    assert seen[-1] == "closed"
    assert isinstance(found[1], rt.ConversationCreated)
    assert any(isinstance(event, rt.ResponseCreated) for event in found)


def test_closing_cancels_the_engine_work() -> None:
    async def go() -> FakeHearing:
        hearing = FakeHearing(vad=False, hold=True)
        session = RealtimeSession(kind="transcription", model="whisper", hearing=hearing)
        session.start()
        for event in append(pcm(0.5, True)):
            await session.handle(event)
        await session.handle(rt.InputAudioBufferCommit())
        await settle(session, timeout=0.1)
        await session.close()
        return hearing

    hearing = run(go())
    assert (hearing.transcribing, hearing.cancelled) == (1, 1)


def test_a_client_that_does_not_read_closes_its_session() -> None:
    async def go() -> RealtimeSession:
        limits = RealtimeLimits(max_events_queued=3)
        session = RealtimeSession(kind="transcription", model="whisper", hearing=FakeHearing(vad=False), limits=limits)
        for _ in range(5):
            await session.handle(rt.InputAudioBufferClear())
        return session

    session = run(go())
    assert "did not read" in session.closing
    assert session.events.qsize() == 4 and drain(session)[-1] is None


def test_turn_detection_follows_its_settings() -> None:
    detector = TurnDetector(VadSettings(threshold=0.6, prefix_padding_ms=100, silence_duration_ms=200), start_ms=320)
    assert detector.feed([0.7, 0.5, 0.7, 0.7]) == []  # three frames in a row are needed
    assert detector.feed([0.7]) == [SpeechStarted(320 + 2 * 32 - 100)]
    # 0.5 is above threshold - 0.15: still speech; seven frames (224 ms) below end the turn.
    assert detector.feed([0.5] * 10 + [0.1] * 6) == []
    assert detector.feed([0.1]) == [SpeechStopped(detector.now_ms)]


def test_live_audio_chunks_decode_as_the_whole() -> None:
    whole = pcm(1.0, True)
    reference = LiveAudio("audio/pcm").decode(whole)
    stream = LiveAudio("audio/pcm")
    pieces = np.concatenate([stream.decode(whole[i : i + 999]) for i in range(0, len(whole), 999)])
    assert len(reference) == len(pieces) == 16000
    assert np.allclose(reference, pieces, atol=1e-6)
    # The tone comes through at its level (-10 dBFS, 0.3 peak).
    assert abs(np.abs(reference[1000:]).max() - 0.3) < 0.01


def test_audio_sent_faster_than_vad_hears_it_is_refused() -> None:
    class SlowHearing(FakeHearing):
        async def detect_voice(self, samples: bytes, state: bytes = b"") -> VoiceDetected:
            await asyncio.sleep(3600)

    async def go() -> list[str]:
        limits = RealtimeLimits(max_buffer_seconds=1.0)
        session = RealtimeSession(kind="transcription", model="whisper", hearing=SlowHearing(), limits=limits)
        session.start()
        codes = []
        for event in append(pcm(0.3, False) * 5):
            await asyncio.sleep(0)
            try:
                await session.handle(event)
            except InvalidRequest as error:
                codes.append(error.code)
        await session.close()
        return codes

    # 1.5 s sent, the VAD holding its first 100 ms: what passes the 1 s behind it is refused.
    assert run(go()) == ["input_audio_too_fast"] * 4
