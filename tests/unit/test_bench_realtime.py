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
