"""`appliance bench` peers: the flags, a peer command's lifecycle, and the HTTP client in both loops,
against the stdlib fake OpenAI-compatible server in tests/fake_openai_server.py (no model)."""

from __future__ import annotations

import asyncio
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from appliance.tools.bench.client import run_level
from appliance.tools.bench.metrics import summarize
from appliance.tools.bench.peers import Peer, PeerProcess, parse_peers, peer_ready
from appliance.tools.bench.workload import Prompt, arrival_times

FAKE = Path(__file__).resolve().parent.parent / "fake_openai_server.py"
FAKE_COMMAND = f"{shlex.quote(sys.executable)} {shlex.quote(str(FAKE))} {{port}}"
PROMPTS = [Prompt(text=f" alpha beta w{index}", ids=(1, 2, 3)) for index in range(5)]


def test_parse_peers_by_url_and_by_command() -> None:
    peers = parse_peers(
        urls=["vllm=http://10.0.0.2:8000"],
        commands=["llama=llama-server -m m.gguf --port {port}", "other=serve --port 9001"],
        command_urls=["other=http://127.0.0.1:9001"],
        models=["llama=smol", "vllm=HuggingFaceTB/SmolLM2-135M-Instruct"],
    )
    assert peers == [
        Peer("vllm", url="http://10.0.0.2:8000", model="HuggingFaceTB/SmolLM2-135M-Instruct"),
        Peer("llama", command="llama-server -m m.gguf --port {port}", model="smol"),
        Peer("other", url="http://127.0.0.1:9001", command="serve --port 9001"),
    ]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"urls": ["x"]}, "expected NAME=VALUE"),
        ({"urls": ["raw=http://h"]}, "names a system the bench measures"),
        ({"urls": ["a=http://h", "a=http://i"]}, "given twice"),
        ({"urls": ["a=https://h"]}, "only http://"),
        ({"commands": ["a=serve"]}, "put {port} in the command"),
        ({"urls": ["a=http://h"], "commands": ["a=serve {port}"]}, "both by --peer and by --peer-command"),
        ({"models": ["b=m"]}, "no --peer or --peer-command named 'b'"),
        ({"urls": ["a=http://h"], "command_urls": ["a=http://h"]}, "is a --peer"),
    ],
)
def test_parse_peers_refuses_bad_flags(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_peers(**kwargs)


def test_peer_command_starts_answers_and_stops() -> None:
    # Run by a shell: an environment assignment before the program works, as for llama-server's
    # LD_LIBRARY_PATH.
    process = PeerProcess(Peer("fake", command=f"BENCH_FAKE=1 {FAKE_COMMAND}"), ready_timeout=30)
    assert "{port}" not in process.command and process.url is not None
    with process as url:
        assert url == process.url
        assert peer_ready(url) is None
        assert process.process is not None and process.process.poll() is None
    assert process.process.poll() is not None  # stopped on exit
    assert peer_ready(url) is not None  # nothing listens any more


def test_peer_listing_models_while_it_loads_is_ready_once_health_says_so() -> None:
    # The appliance and vLLM answer /v1/models while loading, and 503 on /health until they can
    # generate: warming up then would fail.
    process = PeerProcess(Peer("loading", command=f"{FAKE_COMMAND} --loading-seconds 1.5"), ready_timeout=30)
    with process as url:
        assert httpx.get(f"{url}/health").status_code == 200
        assert peer_ready(url) is None
    slow = PeerProcess(Peer("slow", command=f"{FAKE_COMMAND} --loading-seconds 60"), ready_timeout=1)
    with pytest.raises(RuntimeError, match=r"did not answer 200 within 1 s \(last: HTTP 503 from /health\)"):
        with slow:
            pass


def test_peer_command_that_exits_is_a_clear_error() -> None:
    peer = Peer("broken", command=f"{FAKE_COMMAND} --fail-start")
    with pytest.raises(RuntimeError, match=r"peer 'broken': .* exited with code 3 .*\n.*refusing to start"):
        with PeerProcess(peer, ready_timeout=30):
            pass


def test_peer_command_never_ready_is_stopped_after_the_timeout() -> None:
    process = PeerProcess(Peer("silent", command="sleep 60 # {port}"), ready_timeout=0.5)
    with pytest.raises(RuntimeError, match=r"peer 'silent': http://127.0.0.1:\d+/v1/models did not answer 200"):
        with process:
            pass
    assert process.process is not None and process.process.returncode is not None


@pytest.fixture(scope="module")
def fake_url() -> Iterator[str]:
    with PeerProcess(Peer("fake", command=FAKE_COMMAND), ready_timeout=30) as url:
        yield url


def test_closed_and_open_loop_against_a_peer(fake_url: str) -> None:
    results, duration = asyncio.run(run_level(fake_url, "fake", PROMPTS, concurrency=2, output_tokens=4))
    assert [(r.ok, r.output_tokens, r.prompt_tokens, len(r.chunk_times)) for r in results] == [(True, 4, 3, 4)] * 5
    arrivals = arrival_times(len(PROMPTS), 50.0, seed=3)
    results, duration = asyncio.run(
        run_level(fake_url, "fake", PROMPTS, concurrency=None, output_tokens=4, arrivals=arrivals)
    )
    assert all(r.ok and r.output_tokens == 4 for r in results), [r.error for r in results]
    assert duration >= arrivals[-1]  # the last request was not sent before its time
    metrics = summarize(results, concurrency=None, duration_s=duration, prompt_tokens=3, output_tokens=4)
    assert (metrics.completed, metrics.failed, metrics.output_token_mismatches) == (5, 0, 0)


def test_a_peer_generating_other_token_counts_is_reported_not_compared() -> None:
    with PeerProcess(Peer("long", command=f"{FAKE_COMMAND} --tokens-off-by 2"), ready_timeout=30) as url:
        results, duration = asyncio.run(run_level(url, "fake", PROMPTS[:2], concurrency=1, output_tokens=4))
    assert [r.error for r in results] == ["6 completion tokens instead of 4"] * 2
    metrics = summarize(results, concurrency=1, duration_s=duration, prompt_tokens=3, output_tokens=4)
    assert (metrics.completed, metrics.failed, metrics.output_token_mismatches) == (0, 2, 2)


def test_fake_server_models_route(fake_url: str) -> None:
    assert httpx.get(f"{fake_url}/v1/models").json()["data"][0]["id"] == "fake"
