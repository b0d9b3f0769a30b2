"""The Batch API on the fake engine: every line checked before any runs, answered once in
OpenAI's shapes, yielding to live requests, cancelled, expired and resumed from the store, its
lease and window by the store's clock."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import msgspec
import pytest

from appliance.engine.messages import Batch as EngineBatch
from appliance.engine.messages import Finished, Submit
from appliance.protocol.batches import Batch
from appliance.store import Store, open_store
from tests.apps import app_client
from tests.fakes import FakeEngineClient, fake_graph

FINAL = ("completed", "failed", "cancelled", "expired")


def _line(custom_id: str, content: str = "one two three", *, model: str = "fake", **body: object) -> dict:
    return {
        "custom_id": custom_id,
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": {"model": model, "messages": [{"role": "user", "content": content}], **body},
    }


def _upload(store: Store, lines: list[object]) -> str:
    text = "\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines) + "\n"
    record = asyncio.run(store.files.create("", purpose="batch", filename="in.jsonl", content=text.encode()))
    return record.id


def _content(store: Store, file_id: str) -> list[dict]:
    content = asyncio.run(store.files.content("", file_id))
    assert content is not None
    return [json.loads(line) for line in content.decode().splitlines()]


def _create(client, file_id: str, endpoint: str = "/v1/chat/completions") -> dict:
    answer = client.post(
        "/v1/batches", json={"input_file_id": file_id, "endpoint": endpoint, "completion_window": "24h"}
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["status"] == "validating"
    return answer.json()


def _until_final(client, batch_id: str, timeout: float = 15.0) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        batch = client.get(f"/v1/batches/{batch_id}").json()
        if batch["status"] in FINAL:
            return batch
        time.sleep(0.05)
    raise AssertionError(f"batch still {batch['status']}")


def _chat_submits(engine: FakeEngineClient) -> int:
    return sum(isinstance(command, Submit) for command in engine.submitted)


def test_a_batch_over_two_models_answers_every_line_once_in_openais_shape() -> None:
    store = open_store()
    first, second = FakeEngineClient(), FakeEngineClient(fake_graph("fake2"))
    lines = [_line(f"req-{i}", f"line {i} words", model="fake" if i % 2 else "fake2") for i in range(20)]
    file_id = _upload(store, lines)
    with app_client(first, second, store=store) as client:
        created = _create(client, file_id)
        batch = _until_final(client, created["id"])
        assert batch["status"] == "completed", batch
        assert batch["request_counts"] == {"total": 20, "completed": 20, "failed": 0}
        assert batch["in_progress_at"] and batch["finalizing_at"] and batch["completed_at"]
        assert batch["error_file_id"] is None
        output = _content(store, batch["output_file_id"])
        listed = client.get("/v1/batches").json()
    assert [line["custom_id"] for line in output] == [f"req-{i}" for i in range(20)]
    for i, line in enumerate(output):
        assert line["id"].startswith("batch_req_") and line["error"] is None
        assert line["response"]["status_code"] == 200 and line["response"]["request_id"]
        body = line["response"]["body"]
        assert body["object"] == "chat.completion" and body["model"] == ("fake" if i % 2 else "fake2")
        assert body["choices"][0]["message"]["content"].strip() == f"words {i} line"
    assert _chat_submits(first) == 10 and _chat_submits(second) == 10
    assert listed["data"][0]["id"] == created["id"] and listed["has_more"] is False
    msgspec.convert(batch, Batch)


def test_a_malformed_file_fails_before_any_line_runs_with_an_error_file_naming_each_line() -> None:
    store = open_store()
    engine = FakeEngineClient()
    good = _line("good")
    lines = [
        good,
        "{not json",
        _line("good"),  # the custom_id again
        {**_line("get"), "method": "GET"},
        {**_line("other-url"), "url": "/v1/embeddings"},
        {**_line("unknown-url"), "url": "/v1/moderations"},
        _line("loose-number", max_tokens="5"),  # strict, as the route decodes
        _line("streamed", stream=True),
        _line("unknown-model", model="nope"),
        _line("unknown-field", temperatur=0.5),
        {"custom_id": "no-body", "method": "POST", "url": "/v1/chat/completions"},
        "[1, 2]",
    ]
    file_id = _upload(store, lines)
    with app_client(engine, store=store) as client:
        batch = _until_final(client, _create(client, file_id)["id"])
        error_file = _content(store, batch["error_file_id"])
    assert batch["status"] == "failed" and batch["failed_at"] and batch["output_file_id"] is None
    assert _chat_submits(engine) == 0
    expected = {
        2: ("invalid_json_line", None),
        3: ("duplicate_custom_id", "custom_id"),
        4: ("invalid_method", "method"),
        5: ("mismatched_endpoint", "url"),
        6: ("invalid_url", "url"),
        7: ("invalid_value", "body.max_tokens"),
        8: ("unsupported_parameter", "body.stream"),
        9: ("model_not_found", "body.model"),
        10: ("unknown_parameter", "body.temperatur"),
        11: ("missing_required_parameter", "body"),
        12: ("invalid_json_line", None),
    }
    listed = {error["line"]: (error["code"], error["param"]) for error in batch["errors"]["data"]}
    assert listed == expected
    in_file = {error["line"]: (error["code"], error["param"]) for error in error_file}
    assert in_file == expected


def test_batch_lines_wait_while_a_live_request_is_in_flight() -> None:
    store = open_store()
    engine = FakeEngineClient()
    file_id = _upload(store, [_line(f"r{i}") for i in range(4)])
    with app_client(engine, store=store) as client:
        live = engine.reserve()  # a person's request, admitted and being prepared
        created = _create(client, file_id)
        time.sleep(0.5)
        assert _chat_submits(engine) == 0
        assert client.get(f"/v1/batches/{created['id']}").json()["status"] == "in_progress"
        live.release()
        batch = _until_final(client, created["id"])
    assert batch["status"] == "completed" and _chat_submits(engine) == 4
    assert engine.batch_lane.paused_seconds > 0.2


@pytest.mark.parametrize("width", [1, 3])
def test_batch_lines_per_model_bounds_the_lines_running_at_once(width: int) -> None:
    store = open_store()
    engine = FakeEngineClient(batch_lines=width, batch_grace_seconds=0.0)
    engine.hold = True  # lines run until released: those submitted are those running
    file_id = _upload(store, [_line(f"r{i}") for i in range(6)])
    with app_client(engine, store=store) as client:
        created = _create(client, file_id)
        deadline = time.monotonic() + 5
        while _chat_submits(engine) < width and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.3)  # time for more lines to start, were the lane wider
        running = _chat_submits(engine)
        progress = client.get(f"/v1/batches/{created['id']}").json()["request_counts"]
        engine.hold = False
        engine._loop.call_soon_threadsafe(_finish_held, engine)
        batch = _until_final(client, created["id"])
    assert running == width and progress["completed"] == 0
    assert batch["status"] == "completed" and batch["request_counts"]["completed"] == 6


def test_live_admission_does_not_count_batch_lines() -> None:
    engine = FakeEngineClient(fake_graph(max_queued_requests=1))
    engine.hold = True

    async def scenario() -> None:
        engine.start()
        async with engine.batch_lane.turn() as turn:
            stream = await turn.run(lambda: engine.submit(*_prompt()))  # the batch line's request
            assert engine.in_flight == 1 and engine.live_in_flight == 0
            assert engine.batch_lane.free()  # a second slot, and no person waiting
            live = engine.reserve()  # a person is admitted although the engine's one place is taken
            assert engine.live_in_flight == 1 and not engine.batch_lane.free()
            live.release()
            stream.cancel()

    asyncio.run(scenario())


def _prompt():
    from appliance.engine.messages import SamplingParams, TextPrompt

    return TextPrompt(text="a b c"), SamplingParams(max_new_tokens=2)


def test_a_cancelled_batch_finishes_running_lines_and_reports_the_rest_as_cancelled() -> None:
    store = open_store()
    engine = FakeEngineClient()
    engine.hold = True  # the first lines never finish until cancelled
    file_id = _upload(store, [_line(f"r{i}") for i in range(6)])
    with app_client(engine, store=store) as client:
        created = _create(client, file_id)
        deadline = time.monotonic() + 5
        while _chat_submits(engine) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        cancelling = client.post(f"/v1/batches/{created['id']}/cancel")
        assert cancelling.status_code == 200 and cancelling.json()["status"] == "cancelling"
        engine.hold = False
        engine._loop.call_soon_threadsafe(_finish_held, engine)
        batch = _until_final(client, created["id"])
        again = client.post(f"/v1/batches/{created['id']}/cancel")
        errors = _content(store, batch["error_file_id"])
    assert batch["status"] == "cancelled" and batch["cancelled_at"] and batch["cancelling_at"]
    assert _chat_submits(engine) == 2
    assert batch["request_counts"] == {"total": 6, "completed": 2, "failed": 4}
    assert sorted(line["custom_id"] for line in errors) == [f"r{i}" for i in range(2, 6)]
    assert {line["error"]["code"] for line in errors} == {"batch_cancelled"}
    assert again.status_code == 400 and again.json()["error"]["code"] == "batch_not_cancellable"


def _finish_held(engine: FakeEngineClient) -> None:
    """The held requests end, as the engine would end them."""
    for request_id in list(engine._streams):
        engine._dispatch(
            EngineBatch(
                events=[
                    Finished(request_id=request_id, finish_reason="stop", prompt_tokens=3, completion_tokens=0, index=0)
                ]
            )
        )


def test_a_batch_resumes_from_the_store_skipping_answered_lines_and_expires_on_time() -> None:
    from appliance.batches.book import BatchBook

    store = open_store()
    file_id = _upload(store, [_line(f"r{i}") for i in range(5)])
    now = int(time.time())
    running = Batch(
        id="batch_resumed",
        endpoint="/v1/chat/completions",
        input_file_id=file_id,
        completion_window="24h",
        status="in_progress",
        created_at=now,
        in_progress_at=now,
        expires_at=now + 3600,
    )
    running.request_counts.total = 5
    late = msgspec.structs.replace(running, id="batch_late", expires_at=now - 1)
    book = BatchBook(store.batches)

    async def before_the_crash() -> None:
        await book.create("", running)
        await book.create("", late)
        for line in (0, 3):  # answered before the server went down
            await store.batches.answer("batch_resumed", line, True, json.dumps({"custom_id": f"r{line}"}).encode())

    asyncio.run(before_the_crash())
    engine = FakeEngineClient()
    with app_client(engine, store=store) as client:
        resumed = _until_final(client, "batch_resumed")
        expired = _until_final(client, "batch_late")
        output = _content(store, resumed["output_file_id"])
        expired_lines = _content(store, expired["error_file_id"])
    assert resumed["status"] == "completed" and resumed["request_counts"]["completed"] == 5
    assert [line["custom_id"] for line in output] == [f"r{i}" for i in range(5)]
    assert expired["status"] == "expired" and expired["expired_at"]
    assert {line["error"]["code"] for line in expired_lines} == {"batch_expired"}
    assert _chat_submits(engine) == 3  # r1, r2, r4: the late batch ran none


@pytest.mark.parametrize(
    ("body", "status", "param"),
    [
        ({"endpoint": "/v1/chat/completions", "completion_window": "24h"}, 400, "input_file_id"),
        ({"input_file_id": "file-x", "endpoint": "/v1/moderations", "completion_window": "24h"}, 400, "endpoint"),
        (
            {"input_file_id": "file-x", "endpoint": "/v1/embeddings", "completion_window": "1h"},
            400,
            "completion_window",
        ),
        ({"input_file_id": "file-x", "endpoint": "/v1/embeddings", "completion_window": "24h"}, 404, "input_file_id"),
    ],
)
def test_create_refuses_what_it_cannot_run(body: dict, status: int, param: str) -> None:
    with app_client(FakeEngineClient()) as client:
        answer = client.post("/v1/batches", json=body)
        assert answer.status_code == status and answer.json()["error"]["param"] == param
        assert client.get("/v1/batches/batch_nope").status_code == 404
        assert client.get("/v1/batches?limit=0").status_code == 400


@pytest.fixture(params=["sqlite", "postgresql"])
def database_store(request: pytest.FixtureRequest, tmp_path) -> Store:
    if request.param == "sqlite":
        opened = open_store("", tmp_path / "state")
    else:
        opened = open_store(request.getfixturevalue("postgres_url"))
    yield opened
    opened.database.close()


def test_a_line_is_answered_once_however_often_it_is_written(database_store: Store) -> None:
    rows = database_store.batches

    async def scenario() -> None:
        assert await rows.answer("batch_a", 0, True, b"first")
        assert not await rows.answer("batch_a", 0, False, b"second")  # a second server, or a resume
        assert await rows.answer("batch_a", 1, False, b"other")
        assert await rows.outputs("batch_a") == [(0, True, b"first"), (1, False, b"other")]
        assert await rows.answered("batch_a") == {0, 1}
        counts = await rows.counts(["batch_a"])
        assert (counts["batch_a"].completed, counts["batch_a"].failed) == (1, 1)

    asyncio.run(scenario())


def test_a_person_preempts_the_batch_lines_running_and_they_run_again() -> None:
    from appliance.engine.host.batch_lane import Preempted

    engine = FakeEngineClient()
    engine.hold = True  # the batch line's request runs until cancelled

    async def scenario() -> None:
        engine.start()

        async def line() -> None:
            stream = await engine.submit(*_prompt())
            try:
                async for _ in stream:
                    pass
            finally:
                stream.cancel()  # as the service's readers do when their task ends

        async with engine.batch_lane.turn() as turn:
            running = asyncio.ensure_future(turn.run(line))
            await asyncio.sleep(0.05)
            assert engine.in_flight == 1 and engine.live_in_flight == 0
            live = engine.reserve()  # a person arrives
            with pytest.raises(Preempted):
                await running
        await asyncio.sleep(0.01)  # the Cancel frame reaches the fake engine
        assert engine.cancelled and engine.batch_lane.preemptions == 1
        assert not engine.batch_lane.free()  # the person is served first
        live.release()
        assert not engine.batch_lane.free()  # and the next person may be close behind
        engine.batch_lane.grace = 0.05
        await asyncio.sleep(0.06)
        assert engine.batch_lane.free()

    asyncio.run(scenario())


def test_batch_lines_start_again_only_after_people_left_for_the_grace_period() -> None:
    from appliance.engine.host.batch_lane import BatchLane, in_batch_line

    now, live = [100.0], [0]
    lane = BatchLane(lambda: live[0], grace=0.5, clock=lambda: now[0])
    assert lane.free()  # nobody was ever served: at once
    lane.preempt()  # a person admitted (too short to be seen in flight by a poll)
    now[0] += 0.49
    assert not lane.free()
    now[0] += 0.01
    assert lane.free()
    live[0] = 1  # a person's request in flight for 3 s
    assert not lane.free()
    now[0] += 3.0
    assert not lane.free()
    live[0] = 0
    now[0] += 0.2  # the next person is 0.2 s behind: no batch line started in between
    assert not lane.free()
    now[0] += 0.3
    assert lane.free()
    token = in_batch_line.set(True)  # a batch line's own admission holds nothing back
    try:
        lane.preempt()
    finally:
        in_batch_line.reset(token)
    assert lane.free()


def test_a_batch_is_one_servers_until_its_lease_runs_out(database_store: Store) -> None:
    from appliance.batches.book import BatchBook

    rows = database_store.batches
    batch = _running_batch("batch_l")

    async def scenario() -> None:
        await BatchBook(rows).create("", batch)
        assert await rows.claim("batch_l", "server-a", 0.3)
        assert not await rows.claim("batch_l", "server-b", 30)  # a's lease lasts
        assert await rows.claim("batch_l", "server-a", 0.3)  # renewed
        await asyncio.sleep(0.4)
        assert await rows.claim("batch_l", "server-b", 30)  # a died: b takes over
        assert not await rows.claim("batch_l", "server-a", 30)

    asyncio.run(scenario())


def _running_batch(batch_id: str) -> Batch:
    """A batch row as a server running it writes it (what the lease tests need of one)."""
    return Batch(
        id=batch_id,
        endpoint="/v1/chat/completions",
        input_file_id="f",
        completion_window="24h",
        status="in_progress",
        created_at=0,
    )


def test_servers_sharing_postgresql_keep_the_databases_time_not_their_own(
    postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server whose clock is two hours fast reads the database's time from a shared store: it
    cannot take over a batch whose lease (by the database's time) lasts, and its batches' window
    and stored responses are of the database's clock."""
    from appliance.batches.book import BatchBook
    from appliance.batches.runner import BatchRunner

    honest = open_store(postgres_url)
    real_time = time.time
    monkeypatch.setattr(time, "time", lambda: real_time() + 7200)  # a server two hours fast
    fast = open_store(postgres_url)
    assert abs(fast.database.clock() - real_time()) < 1 and abs(honest.database.clock() - real_time()) < 1
    local = open_store("", tmp_path)  # SQLite: the machine's own clock is the database's
    assert abs(local.database.clock() - real_time() - 7200) < 1
    assert BatchRunner(None, fast).clock is fast.database.clock  # a batch's window: the database's 24 h

    async def leases() -> None:
        await BatchBook(honest.batches).create("", _running_batch("batch_c"))
        assert await honest.batches.claim("batch_c", "honest", 30)
        assert not await fast.batches.claim("batch_c", "fast", 30)  # its clock says the lease ran out: it did not

    asyncio.run(leases())
    assert asyncio.run(fast.responses.put("o", "r", b"{}"))
    assert asyncio.run(honest.responses.get("o", "r")) == b"{}"  # stored for the hour by the database's clock
    for store in (honest, fast, local):
        store.database.close()
