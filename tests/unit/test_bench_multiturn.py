"""`appliance bench --multi-turn`: the conversations sent, the per-turn summary, the report, the
graph copy with prefix caching switched, and the flags it refuses (no model; the client against
the stdlib fake server in tests/fake_openai_server.py)."""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import re
import shlex
import sys
from pathlib import Path

import pytest

from appliance.tools.bench.client import run_conversations
from appliance.tools.bench.command import register, run
from appliance.tools.bench.local_server import with_prefix_caching
from appliance.tools.bench.metrics import RequestResult, summarize, summarize_turns
from appliance.tools.bench.peers import Peer, PeerProcess
from appliance.tools.bench.report import NO_PREFIX_CACHE, PREFIX_CACHE, Level, Report, System, SystemRun
from appliance.tools.bench.runner import with_systems
from appliance.tools.bench.workload import Load, Prompt, Workload, chat_messages

FAKE = Path(__file__).resolve().parent.parent / "fake_openai_server.py"
FAKE_COMMAND = f"{shlex.quote(sys.executable)} {shlex.quote(str(FAKE))} {{port}}"


def test_each_turn_sends_the_history_and_a_new_user_message() -> None:
    assert chat_messages([" a b"], []) == [{"role": "user", "content": " a b"}]
    assert chat_messages([" a", " c", " e"], [" b", " d"]) == [
        {"role": "user", "content": " a"},
        {"role": "assistant", "content": " b"},
        {"role": "user", "content": " c"},
        {"role": "assistant", "content": " d"},
        {"role": "user", "content": " e"},
    ]
    with pytest.raises(ValueError, match="one answer fewer"):
        chat_messages([" a", " c"], [" b", " d"])


def test_an_agent_session_opens_every_turn_with_its_system_message() -> None:
    first = chat_messages([" a"], [], " rules and tools")
    second = chat_messages([" a", " c"], [" b"], " rules and tools")
    assert first == [{"role": "system", "content": " rules and tools"}, {"role": "user", "content": " a"}]
    # Each turn's messages start with the last turn's: what a prefix cache can reuse.
    assert second[: len(first)] == first and second[2:] == [
        {"role": "assistant", "content": " b"},
        {"role": "user", "content": " c"},
    ]


def test_with_systems_puts_each_conversation_after_its_system_message() -> None:
    users = [Prompt(text=f" u{n}", ids=(n,)) for n in range(4)]
    systems = [Prompt(text=" s0", ids=(10,)), Prompt(text=" s1", ids=(11,))]
    assert [p.text for p in with_systems(users, systems, 2)] == [" s0", " u0", " u1", " s1", " u2", " u3"]
    with pytest.raises(ValueError, match="4 user messages for 2 conversations of 3 turns"):
        with_systems(users, systems, 3)


def _turn(ttft: float, prompt_tokens: int) -> RequestResult:
    return RequestResult(
        ok=True, prompt_tokens=prompt_tokens, output_tokens=2, chunk_times=[ttft, ttft + 0.01], latency=ttft + 0.02
    )


def test_summarize_turns_groups_requests_by_turn_number() -> None:
    conversations = [
        [_turn(0.10, 40), _turn(0.05, 90), _turn(0.06, 140)],
        [_turn(0.12, 42), _turn(0.07, 92), RequestResult(ok=False, error="HTTP 500: boom")],
        [RequestResult(ok=False, error="HTTP 503"), *[RequestResult(ok=False, error="not sent: turn 1 failed")] * 2],
    ]
    turns = summarize_turns(conversations)
    assert [(t.turn, t.completed, t.failed) for t in turns] == [(1, 2, 1), (2, 2, 1), (3, 1, 2)]
    assert [t.prompt_tokens for t in turns] == [41, 91, 140]
    assert turns[0].ttft_ms.mean == pytest.approx(110.0)
    assert turns[2].ttft_ms.median == pytest.approx(60.0)
    assert turns[2].errors == ("HTTP 500: boom", "not sent: turn 1 failed")
    assert math.isnan(summarize_turns([[RequestResult(ok=False)]])[0].prompt_tokens)
    assert summarize_turns([]) == ()
    # Multi-turn prompts have no fixed length: the overall summary counts no mismatches.
    flat = [result for conversation in conversations for result in conversation]
    overall = summarize(flat, concurrency=1, duration_s=1.0, prompt_tokens=None, output_tokens=2)
    assert (overall.completed, overall.failed, overall.prompt_token_mismatches) == (5, 4, 0)


def _report() -> Report:
    def run_of(last_ttft: float) -> SystemRun:
        conversations = [[_turn(0.1, 40), _turn(last_ttft, 90)], [_turn(0.1, 40), _turn(last_ttft, 90)]]
        flat = [result for conversation in conversations for result in conversation]
        metrics = summarize(flat, concurrency=1, duration_s=1.0, prompt_tokens=None, output_tokens=2)
        return SystemRun(metrics, None, 0.01, summarize_turns(conversations))

    workload = Workload((Load(requests=2, concurrency=1),), prompt_tokens=32, output_tokens=2, turns=2)
    level = Level(workload.loads[0], {PREFIX_CACHE: run_of(0.05), NO_PREFIX_CACHE: run_of(0.2)})
    return Report(
        model="m", graph="g.toml",
        systems=[System(PREFIX_CACHE, "http://a", "started"), System(NO_PREFIX_CACHE, "http://b", "started")],
        workload=workload.as_dict(), environment={}, slo={"ttft_ms": 1000, "tpot_ms": 100}, levels=[level],
    )  # fmt: skip


def test_report_has_ttft_per_turn_and_prefix_caching_ratio(tmp_path: Path) -> None:
    report = _report()
    table = report.table()
    assert "closed loop of 2-turn conversations" in table and "/v1/chat/completions" in table
    assert "prefix-cache/no-prefix-cache: last turn TTFT mean 0.25x, median 0.25x" in table
    # level, system (on its first turn), turn, ok/fail, prompt tokens, cached ('-': not reported),
    # TTFT mean / median / p99
    assert re.search(r"c=1  prefix-cache +1 +2/0 +40 +- +100 / 100 / 100\n +2 +2/0 +90 +- +50.0 / 50.0 / 50.0\n", table)
    assert "requests reported a prompt length" not in table
    report.write_json(tmp_path / "out.json")
    data = json.loads((tmp_path / "out.json").read_text())
    assert (data["workload"]["turns"], data["workload"]["mode"]) == (2, "closed loop of 2-turn conversations")
    (level,) = data["levels"]
    assert level["prefix_cache_over_none"] == {"last_turn_ttft_mean": 0.25, "last_turn_ttft_median": 0.25}
    turns = level["systems"][PREFIX_CACHE]["turns"]
    assert [(t["turn"], t["completed"], t["failed"], t["prompt_tokens"]) for t in turns] == [
        (1, 2, 0, 40),
        (2, 2, 0, 90),
    ]
    assert turns[1]["ttft_ms"]["median"] == 50.0
    assert level["systems"][NO_PREFIX_CACHE]["turns"][1]["ttft_ms"]["median"] == 200.0


def test_single_request_runs_have_no_turns_in_their_json() -> None:
    metrics = summarize([_turn(0.1, 8)], concurrency=1, duration_s=1.0, prompt_tokens=8)
    assert "turns" not in SystemRun(metrics).as_dict()
    level = Level(Load(requests=1, concurrency=1), {"appliance": SystemRun(metrics)})
    assert level.prefix_cache_ratios() == {}


def test_conversations_against_a_fake_server_carry_their_history() -> None:
    users = [[Prompt(text=f" u{c}t{t} x y", ids=(1, 2, 3)) for t in range(3)] for c in range(2)]
    with PeerProcess(Peer("fake", command=FAKE_COMMAND), ready_timeout=30) as url:
        results, duration = asyncio.run(run_conversations(url, "fake", users, concurrency=2, output_tokens=4))
    # Nothing listens on port 1: the first turn fails, and the rest of its conversation is not sent.
    failing, _ = asyncio.run(run_conversations("http://127.0.0.1:1", "fake", users[:1], concurrency=1, output_tokens=4))
    assert duration > 0
    for conversation in results:
        assert [(r.ok, r.output_tokens, r.text) for r in conversation] == [(True, 4, " w0 w1 w2 w3")] * 3
        # The fake counts the words of every message: 3 per user message, 4 per answer sent back.
        assert [r.prompt_tokens for r in conversation] == [3, 10, 17]
    assert [r.ok for r in failing[0]] == [False] * 3
    assert failing[0][1].error == "not sent: turn 1 failed"


def test_an_agent_replay_against_a_fake_server_reports_the_cached_tokens() -> None:
    users = [[Prompt(text=f" tool result {c}.{t}", ids=(1, 2, 3)) for t in range(3)] for c in range(2)]
    systems = [Prompt(text=" ".join(["rule"] * 50), ids=(1,) * 50) for _ in range(2)]
    with PeerProcess(Peer("fake", command=FAKE_COMMAND), ready_timeout=30) as url:
        results, _ = asyncio.run(run_conversations(url, "fake", users, concurrency=2, output_tokens=4, systems=systems))
        with pytest.raises(ValueError, match="1 system messages for 2 conversations"):
            asyncio.run(run_conversations(url, "fake", users, concurrency=1, output_tokens=4, systems=systems[:1]))
    for conversation in results:
        # The fake counts words: 50 of the system message, 3 per tool result, 4 per answer sent back;
        # it reports every message but the last as cached.
        assert [(r.ok, r.prompt_tokens, r.cached_tokens) for r in conversation] == [
            (True, 53, 50),
            (True, 60, 57),
            (True, 67, 64),
        ]
    turns = summarize_turns(results)
    assert [(t.prompt_tokens, t.cached_tokens) for t in turns] == [(53, 50), (60, 57), (67, 64)]
    assert [t.as_dict()["cached_tokens"] for t in turns] == [50, 57, 64]
    # A server that does not say: no number.
    assert math.isnan(summarize_turns([[_turn(0.1, 40)]])[0].cached_tokens)
    assert summarize_turns([[_turn(0.1, 40)]])[0].as_dict()["cached_tokens"] is None


def _args(*flags: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    return parser.parse_args(["bench", "--graph", "g.toml", *flags])


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (("--multi-turn", "4", "--rate", "1"), "not --rate"),
        (("--multi-turn", "4", "--plot", "x.png"), "no plot"),
        (
            (
                "--system-tokens",
                "100",
            ),
            "give --multi-turn too",
        ),
    ],
)
def test_multi_turn_flags_that_are_refused(flags: tuple[str, ...], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        run(_args(*flags))


def test_a_conversation_has_at_least_one_turn(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        _args("--multi-turn", "0")
    assert "argument --multi-turn: '0' is not a whole number from 1 to 1000" in capsys.readouterr().err


def test_graph_copy_switches_prefix_caching() -> None:
    source = Path("g.toml")
    graph = 'name = "m"\n\n[scheduler]\ncache_size = 1  # GB\nenable_prefix_caching = true\n\n[limits]\nx = 1\n'
    off = with_prefix_caching(graph, False, source)
    assert off == graph.replace("enable_prefix_caching = true", "enable_prefix_caching = false")
    added = with_prefix_caching('name = "m"\n[scheduler] # ours\ncache_size = 1\n', True, source)
    assert added == 'name = "m"\n[scheduler] # ours\nenable_prefix_caching = true\ncache_size = 1\n'
    assert (
        with_prefix_caching('name = "m"\n', False, source)
        == 'name = "m"\n\n[scheduler]\nenable_prefix_caching = false\n'
    )
    with pytest.raises(ValueError, match="g.toml: could not set"):
        with_prefix_caching('name = "m"\nscheduler = { cache_size = 1 }\n', True, source)
