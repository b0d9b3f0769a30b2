"""Live voice conversations (issue 53) through the official openai SDK's realtime client, on real
models: demo-smol (SmolLM2-135M) answers, demo-whisper (whisper tiny.en) hears, demo-voice
(hibari) speaks. A turn's answer audio is heard back by demo-whisper as the answer's own
transcript; speech in (espeak-ng's recording, streamed at real-time pace in 100 ms chunks, then
silence) is answered with no commit; a function call and its output in a voice session; barge-in
cancels the answer in the engines; bad conversation events are `error` events naming them."""

from __future__ import annotations

import asyncio
import base64
import io
import json
import subprocess
import sys
import time
import wave
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import openai
import pytest

from appliance.dialects.realtime.speaking import pcm16
from appliance.tools.bench.recording import word_error_rate
from tests.conftest import RunningServer, copy_demo_graphs, running_server

SPEECH = Path(__file__).resolve().parent.parent / "data" / "capital-of-france.wav"
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "The weather now in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


@pytest.fixture(scope="module")
def server(
    smol_root: Path, whisper_root: Path, voice_root: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningServer]:
    directory = tmp_path_factory.mktemp("talk")
    graphs = copy_demo_graphs(smol_root, directory / "graphs", ["demo-smol"])
    copy_demo_graphs(whisper_root, graphs, ["demo-whisper"])
    # The openai Agents SDK names OpenAI's transcription model: the operator's alias maps it.
    whisper = graphs / "demo-whisper.toml"
    whisper.write_text(
        whisper.read_text().replace(
            'name = "demo-whisper"\n', 'name = "demo-whisper"\naliases = ["gpt-4o-mini-transcribe"]\n'
        )
    )
    copy_demo_graphs(voice_root, graphs, ["demo-voice"])
    smol = graphs / "demo-smol.toml"
    smol.write_text(
        smol.read_text().replace(
            'name = "demo-smol"\n', 'name = "demo-smol"\nspeech_model = "demo-whisper"\nvoice_model = "demo-voice"\n'
        )
    )
    # Greedy answers: SmolLM2-135M sampled at temperature 1 strings made-up words together.
    smol.write_text(smol.read_text() + "\n[defaults]\ntemperature = 0.0\n")
    with running_server(graphs, directory / "server.log") as running:
        yield running


def _client(server: RunningServer) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0)


def _wav(pcm: bytes, rate: int = 24_000) -> bytes:
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(pcm)
    return buffer.getvalue()


def _speech_pcm24() -> bytes:
    """espeak-ng's "The capital of France is Paris." as pcm16 at 24 kHz (the API's input format)."""
    with wave.open(str(SPEECH)) as reader:
        rate = reader.getframerate()
        samples = np.frombuffer(reader.readframes(reader.getnframes()), dtype="<i2").astype(np.float32) / 32768
    return pcm16(samples, rate)


async def _stream_audio(connection, pcm: bytes, silence_seconds: float = 1.5) -> None:
    """`pcm` (24 kHz) in 100 ms chunks at real-time pace, then silence the same way."""
    chunk = 2 * 2400
    whole = pcm + bytes(int(2 * 24_000 * silence_seconds))
    for start in range(0, len(whole), chunk):
        await connection.input_audio_buffer.append(audio=base64.b64encode(whole[start : start + chunk]).decode())
        await asyncio.sleep(0.1)


async def _until_done(connection, timeout: float = 240.0) -> list:
    """The server's events up to the first `response.done` (errors fail the test)."""
    events = []
    deadline = time.monotonic() + timeout
    async for event in connection:
        assert event.type != "error", event
        events.append(event)
        if event.type == "response.done":
            return events
        assert time.monotonic() < deadline, [e.type for e in events]
    raise AssertionError("the connection closed before response.done")


def _of(events: list, kind: str) -> list:
    return [event for event in events if event.type == kind]


def _heard(server: RunningServer, audio: bytes) -> str:
    client = server.client(timeout=120)
    return client.audio.transcriptions.create(
        model="demo-whisper", file=("answer.wav", _wav(audio)), response_format="text"
    )


def test_a_turn_is_answered_in_speech_that_whisper_hears_as_its_transcript(server: RunningServer) -> None:
    async def talk() -> list:
        async with _client(server).realtime.connect(model="demo-smol") as connection:
            await connection.session.update(
                session={"type": "realtime", "instructions": "Answer in two short sentences.", "max_output_tokens": 60}
            )
            item = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "What is a cat?"}]}
            await connection.conversation.item.create(item=item)
            await connection.response.create()
            return await _until_done(connection)

    events = asyncio.run(talk())
    done = events[-1].response
    assert done.status in ("completed", "incomplete"), done
    transcript = "".join(e.delta for e in _of(events, "response.output_audio_transcript.delta"))
    assert transcript.strip() and _of(events, "response.output_audio_transcript.done")[0].transcript.strip()
    audio = b"".join(base64.b64decode(e.delta) for e in _of(events, "response.output_audio.delta"))
    assert len(audio) > 2 * 24_000  # over a second of speech
    heard = _heard(server, audio)
    spoken = done.output[0].content[0].transcript
    error = word_error_rate(spoken, heard)
    print(f"said {spoken!r}, heard {heard.strip()!r}: word error rate {error:.3f}")
    assert error <= 0.35
    assert done.usage.output_token_details.audio_tokens > 0 and done.usage.input_tokens > 0


def test_speech_in_is_answered_with_no_commit(server: RunningServer) -> None:
    async def talk() -> tuple[list, float]:
        async with _client(server).realtime.connect(model="demo-smol") as connection:
            await connection.session.update(session={"type": "realtime", "max_output_tokens": 40})
            await _stream_audio(connection, _speech_pcm24())
            return await _until_done(connection)

    events = asyncio.run(talk())
    types = [event.type for event in events]
    assert types.index("input_audio_buffer.speech_started") < types.index("input_audio_buffer.committed")
    heard = _of(events, "conversation.item.input_audio_transcription.completed")[0].transcript
    assert "paris" in heard.lower()
    assert types.index("conversation.item.input_audio_transcription.completed") < types.index("response.created")
    assert events[-1].response.status in ("completed", "incomplete")
    assert _of(events, "response.output_audio.delta")


def test_a_function_call_and_its_output_in_a_voice_session(server: RunningServer) -> None:
    async def talk() -> tuple[list, list]:
        async with _client(server).realtime.connect(model="demo-smol") as connection:
            await connection.session.update(
                session={
                    "type": "realtime",
                    "tools": [WEATHER],
                    "tool_choice": {"type": "function", "name": "get_weather"},
                    "max_output_tokens": 60,
                }
            )
            text = "What is the weather in Paris?"
            item = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}
            await connection.conversation.item.create(item=item)
            await connection.response.create()
            first = await _until_done(connection)
            call = _of(first, "response.function_call_arguments.done")[0]
            output = {"type": "function_call_output", "call_id": call.call_id, "output": '{"sky": "sunny", "c": 21}'}
            await connection.conversation.item.create(item=output)
            await connection.response.create(response={"tool_choice": "none"})
            return first, await _until_done(connection)

    first, second = asyncio.run(talk())
    call = _of(first, "response.function_call_arguments.done")[0]
    assert call.name == "get_weather" and "city" in call.arguments
    assert first[-1].response.output[-1].type == "function_call"
    assert second[-1].response.status in ("completed", "incomplete")
    assert _of(second, "response.output_audio.delta") and not _of(second, "response.function_call_arguments.done")


def test_barge_in_cancels_the_answer_in_the_engines(server: RunningServer) -> None:
    async def talk() -> list:
        async with _client(server).realtime.connect(model="demo-smol") as connection:
            # Speech that ends is committed and transcribed, and not answered: the test looks at the
            # interrupted answer and at idle engines.
            turns = {"type": "server_vad", "create_response": False}
            session = {"type": "realtime", "max_output_tokens": 400, "audio": {"input": {"turn_detection": turns}}}
            await connection.session.update(session=session)
            text = "Tell me a long story about a dragon and a knight."
            item = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}
            await connection.conversation.item.create(item=item)
            await connection.response.create()
            events = []
            async for event in connection:
                events.append(event)
                if event.type == "response.output_audio.delta":
                    break
            speaking = asyncio.ensure_future(_stream_audio(connection, _speech_pcm24(), 0.2))
            events += await _until_done(connection)
            await speaking
            return events

    events = asyncio.run(talk())
    done = events[-1].response
    assert done.status == "cancelled" and done.status_details.reason == "turn_detected"
    message = done.output[0]
    assert message.status == "incomplete"
    said = "".join(e.delta for e in _of(events, "response.output_audio_transcript.delta"))
    assert len(message.content[0].transcript) < len(said) or done.usage.output_tokens < 400
    # The engines are free: no generation nor speech left running.
    assert server.wait_idle("demo-smol")["in_flight"] == 0
    assert server.wait_idle("demo-voice")["in_flight"] == 0


def test_bad_conversation_events_are_error_events_and_the_session_goes_on(server: RunningServer) -> None:
    async def talk() -> tuple[list, list]:
        async with _client(server).realtime.connect(model="demo-smol") as connection:
            await connection.session.update(
                session={"type": "realtime", "output_modalities": ["text"], "max_output_tokens": 200}
            )
            output = {"type": "function_call_output", "call_id": "call_nobody", "output": "{}"}
            await connection.conversation.item.create(item=output, event_id="evt_orphan")
            await connection.response.cancel(event_id="evt_cancel")
            text = "Tell me about the sea."
            item = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}
            await connection.conversation.item.create(item=item)
            await connection.response.create()
            await connection.response.create(event_id="evt_second")
            events = []
            async for event in connection:
                events.append(event)
                if event.type == "response.done":
                    break
            return events

    events = asyncio.run(talk())
    errors = {event.error.event_id: event.error for event in _of(events, "error")}
    assert errors["evt_orphan"].param == "item.call_id"
    assert errors["evt_cancel"].code == "response_cancel_not_active"
    assert errors["evt_second"].code == "conversation_already_has_active_response"
    done = events[-1].response
    assert done.status in ("completed", "incomplete") and done.output[0].content[0].text
    assert _of(events, "response.output_text.delta") and not _of(events, "response.output_audio.delta")


def test_a_voice_the_graph_lacks_is_refused_at_session_update(server: RunningServer) -> None:
    async def talk() -> list:
        async with _client(server).realtime.connect(model="demo-smol") as connection:
            bad = {"type": "realtime", "audio": {"output": {"voice": "alloy"}}}
            await connection.session.update(session=bad, event_id="evt_voice")
            await connection.session.update(session={"type": "realtime", "audio": {"output": {"voice": "heart"}}})
            events = []
            async for event in connection:
                events.append(event)
                if event.type == "session.updated":
                    return events
            return events

    events = asyncio.run(talk())
    error = _of(events, "error")[0].error
    assert (error.event_id, error.param, error.code) == ("evt_voice", "session.audio.output.voice", "invalid_value")
    assert "heart" in error.message  # the voices the graph has
    assert events[-1].session.audio.output.voice == "heart"  # the session went on


def test_the_realtime_bench_measures_a_turn_against_the_server(server: RunningServer, tmp_path: Path) -> None:
    """`appliance bench --realtime --url` (what docs/speech.md's Latency tables come from): one
    turn alone and one beside a neighbour, each stage reached in order, the words heard."""
    graph = server.log_path.parent / "graphs" / "demo-smol.toml"  # the fixture's graphs beside its log
    figures = tmp_path / "realtime.json"
    command = [sys.executable, "-m", "appliance", "bench", "--graph", str(graph), "--url", server.url,
               "--realtime", "--requests", "1", "--no-raw", "--json", str(figures)]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "| speech stopped |" in result.stdout and "| transcript |" in result.stdout
    report = json.loads(figures.read_text())
    for phase in (report["stages"], report["beside_neighbour"]["stages"]):
        order = [phase[stage]["median_ms"] for stage in ("speech_stopped", "transcript", "first_text", "done")]
        assert order == sorted(order) and order[0] > 0, phase
    (turn,) = report["turns"]
    assert word_error_rate("The capital of France is Paris.", turn["heard"]) <= 0.2
    # Server VAD's wait past the recording's end is under its silence_duration_ms (500 ms): the
    # recording ends in quiet that counts towards it.
    assert 0 < turn["seconds"]["vad_wait"] < 0.5


def test_the_agents_sdk_realtime_agent_talks_with_its_default_turn_detection(server: RunningServer) -> None:
    """The openai Agents SDK's `RealtimeRunner` with its own session defaults (semantic VAD,
    gpt-4o-mini-transcribe: an alias of the session's Whisper here), the model and a voice of the
    voice graph named: speech streamed at real-time pace is heard, answered in audio and text."""
    from agents.realtime import RealtimeAgent, RealtimeRunner

    async def talk() -> tuple[list[str], int, list]:
        agent = RealtimeAgent(name="Assistant", instructions="Answer in one short sentence.")
        runner = RealtimeRunner(agent, config={"model_settings": {"model_name": "demo-smol", "voice": "heart"}})
        url = server.url.replace("http://", "ws://") + "/v1/realtime?model=demo-smol"
        session = await runner.run(model_config={"url": url, "api_key": "unused"})
        speech = _speech_pcm24() + bytes(2 * 24_000)  # then a second of silence
        kinds, audio_bytes, history = [], 0, []
        async with session:

            async def speak() -> None:
                for start in range(0, len(speech), 4800):  # 100 ms at a time, at real-time pace
                    await session.send_audio(speech[start : start + 4800])
                    await asyncio.sleep(0.1)

            speaking = asyncio.ensure_future(speak())
            try:
                async with asyncio.timeout(60):
                    async for event in session:
                        kinds.append(event.type)
                        assert event.type != "error", event.error
                        if event.type == "audio":
                            audio_bytes += len(event.audio.data)
                        if event.type == "history_updated":
                            history = event.history
                        # The answer's end, and both items' transcripts (they follow the audio).
                        if (
                            "agent_end" in kinds
                            and _transcribed(history, "user")
                            and _transcribed(history, "assistant")
                        ):
                            break
            finally:
                speaking.cancel()
            return kinds, audio_bytes, history

    kinds, audio_bytes, history = asyncio.run(talk())
    assert kinds.index("agent_start") < kinds.index("audio") < kinds.index("agent_end")
    assert audio_bytes > 24_000  # over half a second of the answer's speech (pcm16 at 24 kHz)
    assert word_error_rate("The capital of France is Paris.", _transcribed(history, "user")) <= 0.2, history


def _transcribed(history: list, role: str) -> str:
    """The transcripts of the Agents SDK history's items of `role`, joined."""
    parts = [part for item in history if getattr(item, "role", None) == role for part in item.content]
    return " ".join(getattr(part, "transcript", None) or "" for part in parts).strip()
