"""The Batch API against the real server, through the official `openai` SDK: 200 lines over two
chat models on SQLite and on PostgreSQL (tests/postgres.py; skipped, saying why, where it cannot
run), an embeddings batch, a malformed file failing with an error file naming each line, and a
`kill -9` in the middle of a batch: after the restart it resumes and every `custom_id` is answered
exactly once.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.conftest import RunningServer, copy_demo_graphs, running_server, start_server

MODELS = ("demo-chat", "demo-chat-b")
FINAL = ("completed", "failed", "cancelled", "expired")


@pytest.fixture(scope="module")
def graphs(demo_root: Path, retrieval_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """demo-chat, a second chat model (demo-chat under another name) and demo-embed."""
    graphs = copy_demo_graphs(demo_root, tmp_path_factory.mktemp("batches") / "graphs", ["demo-chat"])
    text = (graphs / "demo-chat.toml").read_text()
    (graphs / "demo-chat-b.toml").write_text(text.replace('name = "demo-chat"', 'name = "demo-chat-b"'))
    return copy_demo_graphs(retrieval_root, graphs, ["demo-embed"])


def chat_lines(count: int, max_tokens: int = 4) -> bytes:
    lines = [
        {
            "custom_id": f"request-{index}",
            "method": "POST",
            "url": "/v1/chat/completions",
            "body": {
                "model": MODELS[index % 2],
                "messages": [{"role": "user", "content": f"Count to {index}."}],
                "max_tokens": max_tokens,
                "temperature": 0,
            },
        }
        for index in range(count)
    ]
    return "".join(json.dumps(line) + "\n" for line in lines).encode()


def submit(server: RunningServer, content: bytes, endpoint: str = "/v1/chat/completions"):
    client = server.client()
    uploaded = client.files.create(file=("requests.jsonl", content), purpose="batch")
    return client.batches.create(input_file_id=uploaded.id, endpoint=endpoint, completion_window="24h")


def until_final(server: RunningServer, batch_id: str, timeout: float = 600.0):
    client = server.client()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        batch = client.batches.retrieve(batch_id)
        if batch.status in FINAL:
            return batch
        time.sleep(0.5)
    raise AssertionError(f"batch {batch_id} still {batch.status} after {timeout} s")


def output_lines(server: RunningServer, file_id: str) -> list[dict]:
    return [json.loads(line) for line in server.client().files.content(file_id).text.splitlines()]


def assert_answered_once(server: RunningServer, batch, count: int) -> None:
    assert batch.status == "completed", batch
    assert (batch.request_counts.total, batch.request_counts.completed, batch.request_counts.failed) == (
        count,
        count,
        0,
    )
    assert batch.error_file_id is None
    lines = output_lines(server, batch.output_file_id)
    assert sorted(line["custom_id"] for line in lines) == sorted(f"request-{index}" for index in range(count))
    for line in lines:
        assert line["error"] is None and line["response"]["status_code"] == 200
        body = line["response"]["body"]
        assert body["object"] == "chat.completion" and body["choices"][0]["message"]["content"]
    index = {line["custom_id"]: line["response"]["body"]["model"] for line in lines}
    assert {index[f"request-{i}"] for i in range(0, count, 2)} == {MODELS[0]}
    assert {index[f"request-{i}"] for i in range(1, count, 2)} == {MODELS[1]}


def run_two_hundred(server: RunningServer) -> None:
    batch = submit(server, chat_lines(200))
    assert batch.status == "validating" and batch.endpoint == "/v1/chat/completions"
    done = until_final(server, batch.id)
    assert_answered_once(server, done, 200)
    assert done.in_progress_at and done.finalizing_at and done.completed_at
    assert server.client().batches.list().data[0].id == batch.id
    embedded = submit(
        server,
        b"".join(
            json.dumps(
                {
                    "custom_id": f"e{i}",
                    "method": "POST",
                    "url": "/v1/embeddings",
                    "body": {"model": "demo-embed", "input": f"sentence {i}"},
                }
            ).encode()
            + b"\n"
            for i in range(20)
        ),
        endpoint="/v1/embeddings",
    )
    done = until_final(server, embedded.id)
    assert done.status == "completed" and done.request_counts.completed == 20
    vectors = output_lines(server, done.output_file_id)
    assert all(len(line["response"]["body"]["data"][0]["embedding"]) == 384 for line in vectors)


def test_two_hundred_lines_over_two_models_on_sqlite(graphs: Path, tmp_path: Path) -> None:
    with running_server(graphs, tmp_path / "server.log", "--state-dir", str(tmp_path / "state")) as server:
        run_two_hundred(server)


def test_two_hundred_lines_over_two_models_on_postgresql(graphs: Path, tmp_path: Path, postgres_url: str) -> None:
    with running_server(graphs, tmp_path / "server.log", "--store-url", postgres_url) as server:
        run_two_hundred(server)


def test_a_malformed_file_fails_with_an_error_file_naming_each_line(graphs: Path, tmp_path: Path) -> None:
    good = json.loads(chat_lines(1).decode())
    lines = [
        json.dumps(good),
        "{not json",
        json.dumps(good),  # the custom_id again
        json.dumps({**good, "custom_id": "x", "body": {**good["body"], "model": "no-such-model"}}),
        json.dumps({**good, "custom_id": "y", "body": {**good["body"], "max_tokens": "5"}}),
        json.dumps({**good, "custom_id": "z", "url": "/v1/embeddings"}),
    ]
    with running_server(graphs, tmp_path / "server.log") as server:
        batch = until_final(server, submit(server, ("\n".join(lines) + "\n").encode()).id, timeout=60)
        assert batch.status == "failed" and batch.output_file_id is None
        assert [(error.line, error.code) for error in batch.errors.data] == [
            (2, "invalid_json_line"),
            (3, "duplicate_custom_id"),
            (4, "model_not_found"),
            (5, "invalid_value"),
            (6, "mismatched_endpoint"),
        ]
        named = [line["line"] for line in output_lines(server, batch.error_file_id)]
        assert named == [2, 3, 4, 5, 6]
        assert server.model_status()["in_flight"] == 0


def test_a_batch_killed_mid_way_resumes_and_answers_every_line_once(graphs: Path, tmp_path: Path) -> None:
    state = ("--state-dir", str(tmp_path / "state"))
    (tmp_path / "first").mkdir()
    killed = start_server(graphs, tmp_path / "first" / "server.log", *state)
    try:
        batch = submit(killed, chat_lines(200, max_tokens=16))
        deadline = time.monotonic() + 300
        while killed.client().batches.retrieve(batch.id).request_counts.completed < 30:
            assert time.monotonic() < deadline
            time.sleep(0.2)
    finally:
        killed.process.kill()  # SIGKILL: no drain; each answer was committed as its line finished
        killed.process.wait(10)
    with running_server(graphs, tmp_path / "second.log", *state) as server:
        resumed = server.client().batches.retrieve(batch.id)
        assert resumed.status == "in_progress" and resumed.request_counts.completed >= 30
        done = until_final(server, batch.id)
        assert_answered_once(server, done, 200)
        assert f"batch {batch.id}: resuming" in server.log()


def test_a_second_appliance_takes_over_a_batch_whose_server_died(
    graphs: Path, tmp_path: Path, postgres_url: str
) -> None:
    shared = ("--store-url", postgres_url)
    (tmp_path / "a").mkdir()
    first = start_server(graphs, tmp_path / "a" / "server.log", *shared)
    with running_server(graphs, tmp_path / "b.log", *shared) as second:
        try:
            batch = submit(first, chat_lines(200, max_tokens=16))
            deadline = time.monotonic() + 300
            while second.client().batches.retrieve(batch.id).request_counts.completed < 30:
                assert time.monotonic() < deadline
                time.sleep(0.2)
            assert f"batch {batch.id}: resuming" not in second.log()  # the first server's, while it lives
        finally:
            first.process.kill()
            first.process.wait(10)
        done = until_final(second, batch.id, timeout=300)  # once the lease of the dead server ran out
        assert_answered_once(second, done, 200)
        assert f"batch {batch.id}: resuming" in second.log()
