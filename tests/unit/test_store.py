"""The store (`appliance.store`) on SQLite and on a real PostgreSQL server (tests/postgres.py;
skipped, saying why, where it cannot run): its schema migrated once and versioned, stored
responses' bounds and ownership, files' bounds, listing and ownership, what survives closing the
database, two servers sharing one PostgreSQL store, and a database that stops answering."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import sqlalchemy
from sqlalchemy import text

from appliance.errors import ConfigError, InvalidRequest, PayloadTooLarge
from appliance.store import FileRows, ResponseRows, Store, StoreLimits, StoreUnavailable, open_store, owner_of
from appliance.store.database import sqlite_file
from appliance.store.migrations import STEPS
from appliance.store.schema import schema_version
from tests.postgres import PostgresServer


def run(coroutine):
    return asyncio.run(coroutine)


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path):
    if request.param == "sqlite":
        opened = open_store("", tmp_path / "state")
    else:
        opened = open_store(request.getfixturevalue("postgres_url"))
    yield opened
    opened.database.close()


def responses_of(store: Store, clock: Callable[[], float] | None = None, **bounds) -> ResponseRows:
    return ResponseRows(store.database, **bounds, **({"clock": clock} if clock else {}))


def test_the_sqlite_file_is_created_in_wal_mode_and_versioned(tmp_path: Path) -> None:
    state = tmp_path / "new" / "state"
    open_store("", state).database.close()
    with sqlite3.connect(sqlite_file(state)) as connection:
        assert connection.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert connection.execute("SELECT version FROM schema_version").fetchall() == [(len(STEPS),)]
    assert (state.stat().st_mode & 0o777) == 0o700
    open_store("", state).database.close()  # migrated once: opening again changes nothing
    with sqlite3.connect(sqlite_file(state)) as connection:
        assert connection.execute("SELECT version FROM schema_version").fetchall() == [(len(STEPS),)]


def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    open_store("", tmp_path).database.close()
    with sqlite3.connect(sqlite_file(tmp_path)) as connection:
        connection.execute("UPDATE schema_version SET version = 99")
    with pytest.raises(ConfigError, match="version 99, newer than this appliance's"):
        open_store("", tmp_path)


def test_a_store_that_cannot_be_opened_stops_start_up(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(ConfigError, match="state_dir: cannot create"):
        open_store("", tmp_path / "file" / "state")
    with pytest.raises(ConfigError, match="cannot open PostgreSQL 127.0.0.1:9/db"):
        open_store("postgresql://user:secret@127.0.0.1:9/db")
    assert "secret" not in caplog.text and "Connection refused" in caplog.text


def test_store_url_must_be_postgresql() -> None:
    with pytest.raises(ConfigError, match="only postgresql:// URLs"):
        open_store("mysql://u@h/db")
    with pytest.raises(ConfigError, match="not a database URL"):
        open_store("not a url")


def test_response_bounds_and_expiry(store: Store) -> None:
    now = [1000.0]
    rows = responses_of(store, lambda: now[0], max_responses=2, max_bytes=100_000, ttl_seconds=10)
    for name in ("a", "b", "c"):
        now[0] += 0.001
        assert run(rows.put("o", name, b"{}"))
    assert run(rows.get("o", "a")) is None and run(rows.get("o", "c")) == b"{}"
    assert run(rows.usage()) == (2, 4)
    assert run(rows.get("other", "c")) is None
    assert not run(rows.delete("other", "c")) and run(rows.get("o", "c")) is not None
    now[0] += 11
    assert run(rows.get("o", "c")) is None and run(rows.usage()) == (0, 0)
    small = responses_of(store, max_bytes=10)
    assert not run(small.put("o", "x", b"x" * 11))


def ticking_clock() -> Callable[[], float]:
    """A clock a millisecond later at each reading: the order of puts is their time's."""
    now = [1000.0]

    def clock() -> float:
        now[0] += 0.001
        return now[0]

    return clock


def test_eviction_takes_from_the_owner_holding_the_largest_share(store: Store) -> None:
    clock = ticking_clock()
    rows = responses_of(store, clock, max_responses=10, max_bytes=1_000_000)
    put = lambda owner, name: run(rows.put(owner, name, b"{}"))  # noqa: E731
    stored = lambda owner, name: run(rows.get(owner, name)) is not None  # noqa: E731
    for index in range(3):
        assert put("quiet", f"q{index}")
    for index in range(100):  # a burst from one key
        assert put("busy", f"b{index}")
    assert all(stored("quiet", f"q{index}") for index in range(3))
    assert run(rows.usage())[0] == 10
    assert [stored("busy", f"b{index}") for index in range(93, 100)] == [True] * 7
    # Two keys storing alike share the store evenly.
    for index in range(20):
        put("quiet", f"q-more{index}")
    assert sum(stored("quiet", f"q-more{i}") for i in range(20)) == 5
    assert sum(stored("busy", f"b{index}") for index in range(100)) == 5


def counters_agree_with_the_rows(store: Store) -> tuple[int, int]:
    """The counters a put reads equal what the table holds; returns the totals."""

    def read(connection):
        owners = connection.execute(text("SELECT owner, responses, bytes FROM response_owners ORDER BY owner")).all()
        counted = connection.execute(
            text("SELECT owner, COUNT(*), SUM(size) FROM responses GROUP BY owner ORDER BY owner")
        ).all()
        totals = connection.execute(text("SELECT responses, bytes FROM response_totals")).all()
        return [tuple(row) for row in owners], [tuple(row) for row in counted], [tuple(row) for row in totals]

    owners, counted, totals = store.database.run_now(read)
    assert owners == counted
    assert totals == [(sum(row[1] for row in counted), sum(row[2] for row in counted))]
    return totals[0]


def test_the_counters_follow_every_write(store: Store) -> None:
    now = [1000.0]
    rows = responses_of(store, lambda: now[0], max_responses=5, max_bytes=100, ttl_seconds=10)
    for index in range(8):
        now[0] += 0.5
        assert run(rows.put(f"o{index % 3}", f"r{index}", b"x" * (index + 1)))
        counters_agree_with_the_rows(store)
    assert run(rows.put("o0", "r7", b"replaced"))  # the same id again: replaced, counted once
    assert run(rows.delete("o1", "r4")) and not run(rows.delete("o1", "r4"))
    assert counters_agree_with_the_rows(store) == run(rows.usage())
    assert run(rows.put("big", "b", b"y" * 95))  # one body that takes nearly all the bytes
    assert counters_agree_with_the_rows(store) == (1, 95)
    now[0] += 20  # everything expired: the next put deletes it and counts that
    assert run(rows.put("o0", "late", b"z"))
    assert counters_agree_with_the_rows(store) == (1, 1)


def test_the_response_just_written_is_never_its_own_victim(store: Store) -> None:
    clock = ticking_clock()
    rows = responses_of(store, clock, max_responses=1, max_bytes=1000)
    for owner in ("b-key", "a-key", "c-key"):  # a tie at one response each: the writer's stays
        assert run(rows.put(owner, f"{owner}-1", b"{}"))
        assert run(rows.get(owner, f"{owner}-1")) == b"{}"
    bytes_bound = responses_of(store, clock, max_responses=100, max_bytes=1000)
    assert run(bytes_bound.put("small", "s", b"x" * 300))
    assert run(bytes_bound.put("large", "l", b"x" * 900))  # its share is the largest, yet it is kept
    assert run(bytes_bound.get("large", "l")) is not None and run(bytes_bound.get("small", "s")) is None


def test_concurrent_writers_keep_the_bound_and_the_counters(store: Store, tmp_path: Path) -> None:
    # A second server on the same database: the same PostgreSQL URL, or the same SQLite file.
    url = store.database.engine.url
    if store.database.dialect == "postgresql":
        other = open_store(url.render_as_string(hide_password=False).replace("+psycopg", ""))
    else:
        other = open_store("", tmp_path / "state")
    bound = 20
    writers = [responses_of(opened, max_responses=bound, max_bytes=10_000) for opened in (store, other)]

    def write(worker: int) -> None:
        rows = writers[worker % 2]
        for index in range(40):
            name = f"w{worker}-{index}"
            assert run(rows.put(f"key{worker % 3}", name, b"x" * (index % 7 + 1)))
            if index % 5 == 0:
                run(rows.delete(f"key{worker % 3}", name))

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(write, range(4)))
    count, size = counters_agree_with_the_rows(store)
    assert 0 < count <= bound and size <= 10_000
    other.database.close()


def test_a_put_costs_the_same_over_a_large_table() -> None:
    """SQLite's virtual-machine steps for one put (its progress handler counts them): alike with
    a hundred responses stored and with twenty thousand, the same owner's and others'."""
    store = open_store()
    rows = responses_of(store, max_responses=1_000_000, max_bytes=1 << 40)
    steps = [0]

    def count_steps(connection) -> None:
        def step() -> int:
            steps[0] += 1
            return 0

        connection.connection.dbapi_connection.set_progress_handler(step, 1)

    def fill(count: int) -> None:
        def insert(connection) -> None:
            connection.execute(
                text(
                    "INSERT INTO responses (id, owner, stored_at, expires_at, size, body) "
                    "VALUES (:id, :owner, :at, :at + 3600, 2, X'7B7D')"
                ),
                [
                    {"id": f"fill-{count}-{index}", "owner": f"key{index % 50}", "at": time.time()}
                    for index in range(count)
                ],
            )
            connection.execute(text("DELETE FROM response_owners"))
            connection.execute(text("DELETE FROM response_totals"))
            connection.execute(
                text("INSERT INTO response_owners SELECT owner, COUNT(*), SUM(size) FROM responses GROUP BY owner")
            )
            connection.execute(text("INSERT INTO response_totals SELECT 1, COUNT(*), SUM(size) FROM responses"))

        store.database.run_now(insert)

    def put_steps(name: str) -> int:
        rows.max_responses = run(rows.usage())[0]  # full: each put evicts one
        steps[0] = 0
        assert run(rows.put("key7", name, b"{}"))
        return steps[0]

    store.database.run_now(count_steps)
    fill(100)
    small = min(put_steps(f"small-{index}") for index in range(3))
    fill(20_000)
    large = min(put_steps(f"large-{index}") for index in range(3))
    assert large < small * 1.5 + 50, (small, large)
    counters_agree_with_the_rows(store)
    store.database.close()


@pytest.mark.parametrize("dialect", ["sqlite", "postgresql"])
def test_a_version_2_store_is_upgraded_in_place(dialect: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """A store written before the counters (schema version 2, stored responses in it) gets them
    counted from its rows at the next start, and its responses stay."""
    if dialect == "sqlite":
        url, open_it = f"sqlite:///{sqlite_file(tmp_path)}", lambda: open_store("", tmp_path)
    else:
        url = request.getfixturevalue("postgres_url")
        open_it = lambda: open_store(url)  # noqa: E731
    engine = sqlalchemy.create_engine(url.replace("postgresql://", "postgresql+psycopg://"))
    with engine.begin() as connection:
        schema_version.create(connection)
        connection.execute(schema_version.insert().values(version=2))
        for step in STEPS[:2]:
            step(connection)
        for index in range(5):
            connection.execute(
                text(
                    "INSERT INTO responses (id, owner, stored_at, expires_at, size, body) "
                    "VALUES (:id, :owner, :at, :at + 3600, :size, :body)"
                ),
                {
                    "id": f"old-{index}",
                    "owner": f"key{index % 2}",
                    "at": time.time(),
                    "size": index,
                    "body": b"x" * index,
                },
            )
    engine.dispose()
    store = open_it()
    assert store.database.run_now(lambda c: c.execute(text("SELECT version FROM schema_version")).scalar()) == 3
    assert counters_agree_with_the_rows(store) == (5, 10)
    assert run(store.responses.get("key1", "old-3")) == b"xxx"
    assert run(store.responses.put("key1", "new", b"{}"))
    assert counters_agree_with_the_rows(store) == (6, 12)
    store.database.close()


def test_responses_survive_closing_the_database(tmp_path: Path) -> None:
    first = open_store("", tmp_path)
    assert run(first.responses.put("o", "resp_1", b'{"kept": true}'))
    first.database.close()
    second = open_store("", tmp_path)
    assert run(second.responses.get("o", "resp_1")) == b'{"kept": true}'
    second.database.close()


def files_of(store: Store, **bounds) -> FileRows:
    limits = {"max_file_bytes": 1000, "max_file_lines": 3, "max_owner_bytes": 2000, **bounds}
    return FileRows(store.database, **limits)


def test_files_are_bounded(store: Store) -> None:
    rows = files_of(store, max_owner_bytes=1050)

    def create(content: bytes, **options):
        return run(rows.create("o", purpose="batch", filename="f.jsonl", content=content, **options))

    with pytest.raises(PayloadTooLarge, match="1001 bytes"):
        create(b"x" * 1001)
    with pytest.raises(InvalidRequest, match="4 lines"):
        create(b"{}\n{}\n{}\n{}")
    with pytest.raises(InvalidRequest, match="not UTF-8") as refused:
        create(b'{"a": "\xff"}\n')
    assert refused.value.param == "file"
    with pytest.raises(InvalidRequest, match="longer than 255"):
        run(rows.create("o", purpose="batch", filename="x" * 256, content=b"{}"))
    assert create(b"{}\n{}\n{}\n").lines == 3
    create(b"x" * 1000)
    with pytest.raises(InvalidRequest, match="1050 bytes an API key may store") as over:
        create(b"x" * 100)
    assert over.value.code == "storage_limit_exceeded"
    output = create(b"{}\n" * 10_000, bounded=False)  # a batch's output: bounded by its batch
    assert output.lines == 10_000
    assert run(files_of(store).create("other", purpose="batch", filename="f", content=b"{}")).bytes == 2


def test_files_are_listed_per_owner_in_pages(store: Store) -> None:
    rows = files_of(store, max_owner_bytes=10**6)
    made = [run(rows.create("o", purpose="batch", filename=f"{i}.jsonl", content=b"{}")) for i in range(5)]
    run(rows.create("o", purpose="batch_output", filename="out.jsonl", content=b"{}"))
    run(rows.create("someone else", purpose="batch", filename="theirs.jsonl", content=b"{}"))
    ids = [record.id for record in made]
    page, more = run(rows.page("o", purpose="batch", limit=2))
    assert [record.id for record in page] == ids[::-1][:2] and more
    page, more = run(rows.page("o", purpose="batch", limit=2, after=page[-1].id))
    assert [record.id for record in page] == ids[::-1][2:4] and more
    page, more = run(rows.page("o", purpose="batch", order="asc", after=ids[2]))
    assert [record.id for record in page] == ids[3:] and not more
    assert len(run(rows.page("o"))[0]) == 6
    assert run(rows.page("o", after="file-unknown")) == ([], False)
    assert run(rows.get("someone else", ids[0])) is None and run(rows.content("someone else", ids[0])) is None
    assert not run(rows.delete("someone else", ids[0]))
    assert run(rows.content("o", ids[0])) == b"{}"
    assert run(rows.delete("o", ids[0])) and run(rows.get("o", ids[0])) is None


def test_an_expired_file_is_gone(store: Store) -> None:
    now = [1000.0]
    rows = FileRows(store.database, max_file_bytes=100, max_file_lines=10, max_owner_bytes=100, clock=lambda: now[0])
    record = run(rows.create("o", purpose="batch", filename="f", content=b"{}", expires_after=3600))
    assert record.expires_at == 4600 and run(rows.get("o", record.id)) is not None
    now[0] = 4600
    assert run(rows.get("o", record.id)) is None and run(rows.page("o")) == ([], False)


def test_limits_reach_the_tables(tmp_path: Path) -> None:
    limits = StoreLimits(max_stored_responses=7, max_file_bytes=5, max_file_lines=6, max_stored_file_bytes=8)
    store = open_store("", tmp_path, limits)
    assert store.responses.max_responses == 7
    assert (store.files.max_file_bytes, store.files.max_file_lines, store.files.max_owner_bytes) == (5, 6, 8)
    store.database.close()


def test_two_servers_share_a_postgresql_store(postgres_url: str) -> None:
    # Both open (and migrate) at once: one migrates, the other finds it done.
    with ThreadPoolExecutor(2) as pool:
        first, second = pool.map(lambda _: open_store(postgres_url), range(2))
    assert run(first.responses.put(owner_of("key"), "resp_1", b"{}"))
    assert run(second.responses.get(owner_of("key"), "resp_1")) == b"{}"
    assert run(second.responses.get(owner_of("other key"), "resp_1")) is None
    made = run(second.files.create("o", purpose="batch", filename="f", content=b"{}"))
    assert run(first.files.content("o", made.id)) == b"{}"
    first.database.close()
    second.database.close()
    again = open_store(postgres_url)
    assert run(again.responses.get(owner_of("key"), "resp_1")) == b"{}"
    again.database.close()


def test_a_database_that_stops_answering_is_a_503(postgres: PostgresServer, postgres_url: str) -> None:
    store = open_store(postgres_url)
    name = postgres_url.rsplit("/", 1)[1]
    import psycopg

    with psycopg.connect(postgres.url(), autocommit=True) as admin:
        admin.execute(f"ALTER DATABASE {name} WITH ALLOW_CONNECTIONS false")
        admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (name,))
    with pytest.raises(StoreUnavailable) as refused:
        run(store.responses.get("o", "resp_1"))
    assert refused.value.status == 503 and refused.value.retry_after
    assert "127.0.0.1" not in refused.value.message and "postgresql://" not in refused.value.message
    store.database.close()
