"""`appliance bench --realtime` without a server: the report's arithmetic, the companion graphs
found beside the chat graph, and the graphs it refuses."""

from __future__ import annotations

from pathlib import Path

import pytest

from appliance.cli import main
from appliance.tools.bench.realtime import TurnTimes, companion_graphs, report


def test_the_report_gives_each_stage_from_the_end_of_speech() -> None:
    turns = [
        TurnTimes({"transcript": 0.9, "first_text": 1.0, "first_audio": 1.5, "done": 2.0}, "hi", "hello"),
        TurnTimes({"transcript": 1.1, "first_text": 1.2, "first_audio": 1.7, "done": 2.4}, "hi", "hello"),
        TurnTimes({"transcript": 1.0, "first_text": 1.1, "first_audio": 1.6, "done": 2.2}, "hi", "hello"),
    ]
    table, summary = report(turns, "header")
    assert summary["stages"]["first_audio"] == pytest.approx({"median_ms": 1600, "min_ms": 1500, "max_ms": 1700})
    assert "| first text | 1100 | 1000 | 1200 |" in table and table.startswith("header")


def test_the_speech_and_voice_graphs_are_found_beside_the_chat_graph(tmp_path: Path) -> None:
    chat = tmp_path / "chat.toml"
    chat.write_text('name = "chat"\nspeech_model = "ears"\nvoice_model = "mouth"\n')
    (tmp_path / "whisper.toml").write_text('name = "whisper"\naliases = ["ears"]\n')
    (tmp_path / "voice.toml").write_text('name = "mouth"\n')
    assert companion_graphs(chat, ["ears", "mouth"]) == [tmp_path / "whisper.toml", tmp_path / "voice.toml"]
    with pytest.raises(ValueError, match="nose"):
        companion_graphs(chat, ["nose"])


def test_a_graph_that_cannot_talk_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "model").mkdir()
    graph = tmp_path / "chat.toml"
    graph.write_text('name = "chat"\nmodel_path = "model"\n')
    assert main(["bench", "--graph", str(graph), "--realtime"]) == 2
    assert "speech_model and a voice_model" in capsys.readouterr().err
    assert main(["bench", "--graph", str(graph), "--realtime", "--rate", "1"]) == 2
    assert "--rate" in capsys.readouterr().err
    assert main(["bench", "--graph", str(graph), "--realtime", "--concurrency", "4"]) == 2


def test_the_neighbours_gaps_are_summed_up() -> None:
    from appliance.tools.bench.realtime_neighbour import gap_summary

    assert gap_summary([0.05, 0.2, 0.08]) == pytest.approx({"streams": 3, "median_ms": 80, "max_ms": 200})
    assert gap_summary([]) == {"streams": 0}


def test_a_raw_turns_stages_add_up_from_the_end_of_speech() -> None:
    from appliance.tools.bench.realtime_raw import RawTurn

    turn = RawTurn(transcribe=0.5, first_token=0.05, first_sentence=0.25, first_audio=0.1)
    assert turn.stages == pytest.approx(
        {"transcript": 0.5, "first_text": 0.55, "first_sentence": 0.75, "first_audio": 0.85}
    )


def test_served_is_set_against_raw_less_the_vad_wait() -> None:
    from appliance.tools.bench.realtime_figures import served_against_raw
    from appliance.tools.bench.realtime_raw import RawTurn

    served = [
        TurnTimes({"transcript": 1.0, "first_text": 1.2, "first_audio": 1.6, "vad_wait": 0.4}),
        TurnTimes({"transcript": 1.2, "first_text": 1.4, "first_audio": 2.0, "last_text": 1.6}),
        TurnTimes({"transcript": 1.1, "first_text": 1.3, "first_audio": 1.8, "first_sentence": 1.4, "vad_wait": 0.5}),
    ]
    raw = [RawTurn(0.3, 0.1, 0.3, 0.1, "hi", "hello"), RawTurn(0.3, 0.1, 0.3, 0.1, "hi", "hello")]
    table, figures = served_against_raw(served, raw, silence_duration_ms=500)
    # The measured waits 400 and 500 ms, the configured 500 for the turn without one: median 500.
    assert figures["vad_wait"] == {"median_ms": 500, "silence_duration_ms": 500}
    # transcript: median 1100 ms served, 600 less the 500 ms wait, against 300 raw.
    assert figures["transcript"] == pytest.approx(
        {"served_median_ms": 1100, "served_less_wait_ms": 600, "raw_median_ms": 300, "served_over_raw": 2.0}
    )
    assert figures["first_audio"]["served_over_raw"] == pytest.approx((1800 - 500) / 700, abs=1e-3)
    # A one-sentence answer's first sentence ends with its text; a turn with neither is left out.
    assert figures["first_sentence"]["served_median_ms"] == pytest.approx(1500)
    assert "| first audio (end to end) | 1800 | 1300 | 700 | 1.86 |" in table
    assert "median 500 ms past the end of the recording" in table and "raw said: 'hello'" in table


def test_the_time_before_the_transcript_is_split_at_speech_stopped() -> None:
    from appliance.tools.bench.realtime_figures import served_against_raw
    from appliance.tools.bench.realtime_raw import RawTurn

    served = [
        TurnTimes({"speech_stopped": 0.30, "transcript": 0.50, "vad_wait": 0.22}),
        TurnTimes({"speech_stopped": 0.34, "transcript": 0.60, "vad_wait": 0.22}),
        TurnTimes({"transcript": 0.70, "vad_wait": 0.22}),  # no speech_stopped seen: left out of the split
    ]
    raw = [RawTurn(0.15, 0.1, 0.3, 0.1, "hi", "hello")]
    table, figures = served_against_raw(served, raw, silence_duration_ms=500)
    assert figures["transcript_split"] == pytest.approx(
        {"speech_stopped_ms": 320, "detection_ms": 100, "transcription_ms": 230, "raw_transcript_ms": 150}
    )
    assert "speech_stopped arrived 320 ms after the end of speech (100 ms past VAD's wait" in table
    assert "the transcript 230 ms later against Whisper's 150 ms raw" in table
