"""`appliance bench` on a speech-to-text graph, without a model: the recording and its upload, the
closed-loop arithmetic of the raw baseline, the order the systems take turns in, the report, and
the flags it refuses."""

from __future__ import annotations

import asyncio
import email
import json
from pathlib import Path

import numpy as np
import pytest

from appliance.cli import main
from appliance.tools.bench.http import HTTPConnection
from appliance.tools.bench.recording import (
    DEFAULT_CLIP,
    GAP_SECONDS,
    SAID,
    SAMPLE_RATE,
    Recording,
    build_recording,
    load_clip,
    multipart_form,
    word_error_rate,
)
from appliance.tools.bench.speech import hear_all, requests_for, run_speech_bench
from appliance.tools.bench.speech_command import _compute_types
from appliance.tools.bench.speech_figures import SpeechLevel, SystemRun, closed_loop_latencies, percentile
from appliance.tools.bench.speech_report import heard_table, report_json, rounds_table, table

TESTS_CLIP = Path(__file__).resolve().parents[1] / "data" / "capital-of-france.wav"


def test_the_packaged_clip_is_the_tests_recording() -> None:
    assert DEFAULT_CLIP.read_bytes() == TESTS_CLIP.read_bytes()


def test_a_recording_repeats_the_clip_with_silent_gaps_to_the_length_asked(tmp_path: Path) -> None:
    clip = load_clip(DEFAULT_CLIP)
    assert len(clip) / SAMPLE_RATE == pytest.approx(2.148, abs=0.001)
    recording = build_recording(clip, 30.0)
    # 2.148 s + n x (0.5 + 2.148) nearest 30 s: n = 11 (31.27 s; 10 would make 28.63 s), so 12 clips
    assert recording.repeats == 12 and recording.seconds == pytest.approx(31.273, abs=0.001)
    assert len(recording.samples) == 12 * len(clip) + 11 * round(GAP_SECONDS * SAMPLE_RATE)
    assert build_recording(clip, 5.0).repeats == 2 and build_recording(clip, 0.1).repeats == 1
    gap_start = len(clip)
    assert not recording.samples[gap_start : gap_start + round(GAP_SECONDS * SAMPLE_RATE)].any()
    np.testing.assert_allclose(recording.samples[: len(clip)], clip, atol=1 / 32768)
    # The server decodes the wav to the very samples the in-process systems get.
    (tmp_path / "recording.wav").write_bytes(recording.wav)
    decoded = load_clip(tmp_path / "recording.wav")
    np.testing.assert_array_equal(decoded, recording.samples)


def test_a_clip_longer_than_asked_is_sent_once() -> None:
    clip = np.full(3 * SAMPLE_RATE, 0.25, dtype=np.float32)
    recording = build_recording(clip, 1.0)
    assert recording.repeats == 1 and recording.seconds == 3.0
    with pytest.raises(ValueError, match="no audio"):
        build_recording(np.zeros(0, dtype=np.float32), 5.0)


def test_a_file_that_is_not_audio_is_refused_naming_it(tmp_path: Path) -> None:
    bad = tmp_path / "notes.txt"
    bad.write_text("not audio")
    with pytest.raises(ValueError, match="--audio .*notes.txt"):
        load_clip(bad)
    with pytest.raises(ValueError, match="missing.wav"):
        load_clip(tmp_path / "missing.wav")


def test_the_upload_is_a_multipart_form_sent_as_is() -> None:
    received: dict[str, bytes] = {}

    async def capture(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        headers = dict(line.split(b": ", 1) for line in head.split(b"\r\n")[1:] if b": " in line)
        received["type"] = headers[b"Content-Type"]
        received["body"] = await reader.readexactly(int(headers[b"Content-Length"]))
        writer.write(b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{"text":""}')
        await writer.drain()
        writer.close()

    async def scenario() -> bytes:
        server = await asyncio.start_server(capture, "127.0.0.1", 0)
        connection = HTTPConnection(f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}")
        body, content_type = multipart_form({"model": "demo-whisper", "response_format": "json"}, b"RIFF...")
        try:
            async with connection.post_body("/v1/audio/transcriptions", body, content_type) as response:
                return await response.read()
        finally:
            await connection.close()
            server.close()

    assert asyncio.run(scenario()) == b'{"text":""}'
    message = email.message_from_bytes(b"Content-Type: " + received["type"] + b"\r\n\r\n" + received["body"])
    parts = {part.get_param("name", header="content-disposition"): part for part in message.get_payload()}
    assert list(parts) == ["model", "response_format", "file"]
    assert parts["model"].get_payload() == "demo-whisper" and parts["response_format"].get_payload() == "json"
    assert parts["file"].get_filename() == "recording.wav" and parts["file"].get_content_type() == "audio/wav"
    assert parts["file"].get_payload(decode=True) == b"RIFF..."


def test_word_error_rate() -> None:
    assert word_error_rate(SAID, " the capital of France is Paris") == 0
    assert word_error_rate(SAID, "The capital of France in Paris.") == pytest.approx(1 / 6)
    assert word_error_rate(SAID, "") == 1


def test_raw_latencies_are_what_n_queued_clients_would_see() -> None:
    # Four back-to-back requests of 1 s each: one client waits 1 s each time; two clients send two
    # at the start, so the second waits 2 s, and each next one is sent when its client's last ended.
    finished = [1.0, 2.0, 3.0, 4.0]
    assert closed_loop_latencies(finished, 1) == [1.0, 1.0, 1.0, 1.0]
    assert closed_loop_latencies(finished, 2) == [1.0, 2.0, 2.0, 2.0]
    assert closed_loop_latencies(finished, 8) == finished
    assert percentile([3.0, 1.0, 2.0, 4.0], 50) == 2.0 and percentile([3.0, 1.0, 2.0, 4.0], 95) == 4.0
    assert percentile([], 50) == 0.0
    assert requests_for(1, None) == 8 and requests_for(8, None) == 24 and requests_for(8, 3) == 3


def test_figures_of_a_run_and_the_ratios() -> None:
    served = SystemRun("served", 2, 4, 30.0, 10.0, [4.0, 5.0, 5.0, 6.0], 100)
    raw = SystemRun("raw", 2, 4, 30.0, 8.0, [3.0, 4.0, 4.0, 4.0], 100)
    assert served.audio_per_second == 12.0 and served.requests_per_second == 0.4 and served.p95 == 6.0
    level = SpeechLevel(2, 4, {"served": served, "raw": raw})
    assert level.served_over("raw") == pytest.approx(12.0 / 15.0)
    assert level.served_over("faster-whisper int8") == 0.0


class FakeSystem:
    def __init__(self, name: str, log: list[str], seconds: float) -> None:
        self.name, self._log, self._seconds = name, log, seconds

    def hear(self, samples: np.ndarray) -> str:
        return {"served": "The capital of France is Paris.", "raw": "the capital of france in paris"}.get(self.name, "")

    def measure(self, concurrency: int, requests: int, recording: Recording) -> SystemRun:
        self._log.append(f"{self.name} c={concurrency}")
        latencies = [self._seconds * concurrency] * requests
        return SystemRun(self.name, concurrency, requests, recording.seconds, self._seconds * requests, latencies, 6)

    def close(self) -> None:
        self._log.append(f"close {self.name}")


def _recording() -> Recording:
    return build_recording(np.full(SAMPLE_RATE, 0.1, dtype=np.float32), 1.0)


def test_in_turns_each_system_runs_its_levels_then_is_unloaded_and_the_order_flips() -> None:
    log: list[str] = []
    systems = [FakeSystem("served", log, 1.0), FakeSystem("raw", log, 0.5)]
    rounds = run_speech_bench(systems, (1, 4), _recording(), requests=2, repeat=2, say=lambda _: None)
    assert log == [
        *["served c=1", "served c=4", "close served", "raw c=1", "raw c=4", "close raw"],
        *["raw c=1", "raw c=4", "close raw", "served c=1", "served c=4", "close served"],
        *["close served", "close raw"],
    ]
    assert len(rounds) == 2 and [level.concurrency for level in rounds[1]] == [1, 4]
    assert rounds[0][0].served_over("raw") == pytest.approx(0.5)


def test_interleaved_each_level_runs_on_every_system_round_after_round() -> None:
    log: list[str] = []
    systems = [FakeSystem("served", log, 1.0), FakeSystem("raw", log, 0.5), FakeSystem("fw", log, 0.25)]
    run_speech_bench(systems, (1, 2), _recording(), requests=2, repeat=2, interleave=True, say=lambda _: None)
    assert log == [
        *["served c=1", "raw c=1", "fw c=1", "fw c=1", "raw c=1", "served c=1"],
        *["served c=2", "raw c=2", "fw c=2", "fw c=2", "raw c=2", "served c=2"],
        *["close served", "close raw", "close fw"],
    ]


def test_the_report_tables_and_json() -> None:
    log: list[str] = []
    systems = [FakeSystem("served", log, 1.0), FakeSystem("raw", log, 0.5), FakeSystem("faster-whisper int8", log, 2.0)]
    recording = _recording()
    heard = hear_all(systems, recording.samples, SAID)
    assert log == [f"close {name}" for name in ("served", "raw", "faster-whisper int8")]  # in turns: each alone
    hear_all(systems, recording.samples, SAID, keep_loaded=True)
    assert len(log) == 3
    assert heard["served"] == ("The capital of France is Paris.", 0.0)
    assert heard["raw"][1] == pytest.approx(1 / 6)
    shown = heard_table(heard, SAID)
    assert "| served | The capital of France is Paris. | 0.00 |" in shown and "| raw | the capital" in shown
    assert "| faster-whisper int8 |  | 1.00 |" in shown
    assert "| raw | x | - |" in heard_table({"raw": ("x", None)}, None)

    rounds = run_speech_bench(systems, (1, 2), recording, requests=2, repeat=3, say=lambda _: None)
    names = [system.name for system in systems]
    rows = [line.split("|")[1:-1] for line in table(rounds[0], names).splitlines()[2:]]
    assert [(row[0].strip(), row[1].strip()) for row in rows] == [
        (str(c), name) for c in (1, 2) for name in names
    ]  # fmt: skip
    served_row, raw_row, fw_row = rows[:3]
    assert float(served_row[3]) == pytest.approx(recording.seconds / 1.0, abs=0.05)  # 2 requests in 2 s
    assert served_row[-1].strip() == "" and float(raw_row[-1]) == 0.5 and float(fw_row[-1]) == 2.0
    ratios = [line.split("|")[1:-1] for line in rounds_table(rounds, names).splitlines()[2:]]
    assert [cell.strip() for cell in ratios[0]] == ["1", "raw", "0.50, 0.50, 0.50", "0.50", "0.00"]
    assert len(ratios) == 4

    report = report_json(
        graph="demo-whisper",
        machine={"cpu_model": "test CPU"},
        recording=recording,
        clip="clip.wav",
        heard=heard,
        systems=names,
        skipped={},
        rounds=rounds,
        interleave=False,
    )
    json.dumps(report)  # all of it serialisable
    assert report["recording"]["repeats"] == recording.repeats and report["repeat"] == 3
    first = report["levels"][0]
    assert first["concurrency"] == 1 and first["requests"] == 2 and list(first["systems"]) == names
    assert len(first["systems"]["served"]["rounds"]) == 3 and "served_over_this" not in first["systems"]["served"]
    assert first["systems"]["raw"]["served_over_this"] == [0.5] * 3
    assert first["systems"]["faster-whisper int8"]["served_over_this_median"] == 2.0
    assert first["systems"]["served"]["median"]["latency_p50_s"] == 1.0


def test_compute_types() -> None:
    assert _compute_types(None) == ("int8", "float32")
    assert _compute_types("none") == () and _compute_types("float32, float32") == ("float32",)
    with pytest.raises(ValueError, match="--faster-whisper 'fp8'"):
        _compute_types("fp8")


def _speech_graph(tmp_path: Path) -> Path:
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"model_type": "whisper", "max_target_positions": 448}))
    (model / "generation_config.json").write_text(json.dumps({"is_multilingual": False}))
    graph = tmp_path / "g.toml"
    graph.write_text('name = "w"\nmodel_path = "model"\n')
    return graph


def test_flags_a_speech_graph_cannot_honour_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    graph = str(_speech_graph(tmp_path))
    assert main(["bench", "--graph", graph, "--rate", "1", "--prompt-tokens", "16", "--plot", "p.png"]) == 2
    assert "--rate, --prompt-tokens, --plot: not measured for a speech-to-text graph" in capsys.readouterr().err
    assert main(["bench", "--graph", graph, "--audio-seconds", "0"]) == 2
    assert "argument --audio-seconds: '0' is not a number above 0" in capsys.readouterr().err
    assert main(["bench", "--graph", graph, "--audio", str(tmp_path / "none.wav")]) == 2
    assert "none.wav" in capsys.readouterr().err


def test_speech_flags_are_refused_on_other_graphs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "model").mkdir()
    graph = tmp_path / "g.toml"
    graph.write_text('name = "e"\nmodel_path = "model"\npipeline = "TEXT_EMBEDDING"\n')
    assert main(["bench", "--graph", str(graph), "--audio-seconds", "5", "--faster-whisper", "none"]) == 2
    assert "--audio-seconds, --faster-whisper: only for a speech-to-text graph" in capsys.readouterr().err
