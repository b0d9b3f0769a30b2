"""The store against the real server, through the official `openai` SDK: `/v1/files` on SQLite and
on PostgreSQL (a throwaway server, tests/postgres.py; skipped, saying why, where it cannot run),
each API key seeing only its files; a stored response retrievable and continued after a restart
and after `kill -9` of the server (SQLite's write-ahead log); a response created on one
appliance continued with `previous_response_id` on a second sharing the PostgreSQL store, and a
streamed response found there the moment its `response.completed` arrives.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import openai
import pytest

from tests.conftest import RunningServer, copy_demo_graphs, running_server, start_server

MODEL = "demo-chat"
KEYS = ("key-alice", "key-bob")
BATCH = b"".join(
    b'{"custom_id": "r%d", "method": "POST", "url": "/v1/chat/completions", "body": {"model": "demo-chat", '
    b'"messages": [{"role": "user", "content": "hi"}]}}\n' % index
    for index in range(3)
)


@pytest.fixture(scope="module")
def graphs(demo_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_demo_graphs(demo_root, tmp_path_factory.mktemp("store") / "graphs", [MODEL])


def key_file(directory: Path) -> Path:
    path = directory / "api-keys"
    path.write_text("\n".join(KEYS) + "\n")
    return path


@contextmanager
def appliance(graphs: Path, directory: Path, *store: str) -> Iterator[RunningServer]:
    """A server with two API keys and the store flags `store`, its log in `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    flags = ("--api-key-file", str(key_file(directory)), *store)
    with running_server(graphs, directory / "server.log", *flags) as server:
        yield server


def exercise_files(server: RunningServer) -> None:
    alice, bob = (server.client(api_key=key) for key in KEYS)
    created = alice.files.create(file=("requests.jsonl", BATCH), purpose="batch")
    assert (created.purpose, created.filename, created.bytes, created.status) == (
        "batch",
        "requests.jsonl",
        len(BATCH),
        "processed",
    )
    second = alice.files.create(file=("more.jsonl", BATCH[:10] + b"\n"), purpose="batch")
    listed = alice.files.list(purpose="batch")
    assert [item.id for item in listed.data] == [second.id, created.id]
    page = alice.files.list(limit=1, order="asc")
    assert [item.id for item in page.data] == [created.id] and page.has_more
    assert [item.id for item in page.get_next_page().data] == [second.id]  # the SDK follows `after`
    assert alice.files.retrieve(created.id) == created
    assert alice.files.content(created.id).read() == BATCH
    assert bob.files.list().data == []
    with pytest.raises(openai.NotFoundError):
        bob.files.retrieve(created.id)
    with pytest.raises(openai.NotFoundError):
        bob.files.content(created.id)
    with pytest.raises(openai.BadRequestError, match="purpose"):
        alice.files.create(file=("x.jsonl", b"{}\n"), purpose="fine-tune")
    assert alice.files.delete(created.id).deleted
    with pytest.raises(openai.NotFoundError):
        alice.files.retrieve(created.id)
    assert [item.id for item in alice.files.list().data] == [second.id]


def test_files_on_sqlite(graphs: Path, tmp_path: Path) -> None:
    bounds = ("--max-file-lines", "3", "--max-file-bytes", "4096")
    with appliance(graphs, tmp_path, "--state-dir", str(tmp_path / "state"), *bounds) as server:
        exercise_files(server)
        client = server.client(api_key=KEYS[0])
        with pytest.raises(openai.BadRequestError, match="at most 3 here"):
            client.files.create(file=("four.jsonl", b"{}\n" * 4), purpose="batch")
        with pytest.raises(openai.APIStatusError, match="at most 4096 bytes") as too_big:
            client.files.create(file=("big.jsonl", b"x" * 4097), purpose="batch")
        assert too_big.value.status_code == 413
    assert (tmp_path / "state" / "appliance.db").is_file()


def test_files_on_postgresql(graphs: Path, tmp_path: Path, postgres_url: str) -> None:
    with appliance(graphs, tmp_path, "--store-url", postgres_url) as server:
        exercise_files(server)
        assert "store: PostgreSQL 127.0.0.1" in server.log() and postgres_url not in server.log()


def respond(server: RunningServer, **fields):
    return server.client(api_key=KEYS[0]).responses.create(
        model=MODEL, max_output_tokens=8, temperature=0, **{"input": "Hello there", **fields}
    )


def assert_continued(server: RunningServer, first) -> None:
    """`first` is retrievable on `server`, and a follow-up with its id carries its conversation
    (more input tokens than the same follow-up alone)."""
    client = server.client(api_key=KEYS[0])
    assert client.responses.retrieve(first.id).output_text == first.output_text
    with pytest.raises(openai.NotFoundError):
        server.client(api_key=KEYS[1]).responses.retrieve(first.id)
    follow_up = respond(server, input="And then?", previous_response_id=first.id)
    alone = respond(server, input="And then?", store=False)
    assert follow_up.previous_response_id == first.id
    assert follow_up.usage.input_tokens > alone.usage.input_tokens


def test_a_stored_response_outlives_a_restart_and_a_kill(graphs: Path, tmp_path: Path) -> None:
    state = ("--state-dir", str(tmp_path / "state"))
    with appliance(graphs, tmp_path / "first", *state) as server:
        before_restart = respond(server)
    with appliance(graphs, tmp_path / "second", *state) as server:
        assert_continued(server, before_restart)
    (tmp_path / "third").mkdir()
    killed = start_server(graphs, tmp_path / "third" / "server.log", "--api-key-file", str(key_file(tmp_path)), *state)
    try:
        before_kill = respond(killed)
    finally:
        killed.process.kill()  # SIGKILL: no drain, no close; the answer was committed before it was sent
        killed.process.wait(10)
    with appliance(graphs, tmp_path / "fourth", *state) as server:
        assert_continued(server, before_kill)
        assert_continued(server, before_restart)


def test_previous_response_id_on_a_second_appliance(graphs: Path, tmp_path: Path, postgres_url: str) -> None:
    shared = ("--store-url", postgres_url)
    with appliance(graphs, tmp_path / "a", *shared) as first, appliance(graphs, tmp_path / "b", *shared) as second:
        created = respond(first)
        assert_continued(second, created)
        # and back: B's follow-up continued on A
        follow_up = respond(second, input="More?", previous_response_id=created.id)
        assert first.client(api_key=KEYS[0]).responses.retrieve(follow_up.id).previous_response_id == created.id
        # A stream's response is stored before `response.completed` is sent: a client that asks
        # for it the moment it hears (here, from the other box) finds it.
        stream = second.client(api_key=KEYS[0]).responses.create(
            model=MODEL, input="Hi", max_output_tokens=8, stream=True
        )
        for event in stream:
            if event.type in ("response.completed", "response.incomplete"):
                found = first.client(api_key=KEYS[0]).responses.retrieve(event.response.id)
                assert found.output_text == event.response.output_text
