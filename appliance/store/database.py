"""The database the store lives in: SQLite (a file in the state directory) or PostgreSQL.

`open_database(url, state_dir)` opens it (creating the SQLite file and its directory on the first
start), migrates its schema (`migrations`) and returns a `Database`, whose `run(work)` runs
`work(connection)` in one transaction on a thread pool of the database's own, so no query runs
on the event loop. SQLAlchemy 2 Core is the one API over both: its pool, its SQL compiler for
both dialects, psycopg 3 underneath for PostgreSQL.

SQLite runs with a write-ahead log (`journal_mode=WAL`: readers never wait for the writer) and
`synchronous=FULL` (a commit is on disk when it returns: nothing committed is lost to a `kill -9`
nor to a power cut), every transaction `BEGIN IMMEDIATE` (it takes the write lock at once, so a
read-then-write transaction cannot fail half-way on a lock another process holds), one thread
and one connection. PostgreSQL gets `POOL_SIZE` threads and as many pooled connections, checked
before use (a restarted server is reconnected to, not an error).

A database that cannot be reached while serving raises `StoreUnavailable` (503 with
Retry-After); the URL (which may hold a password) is never in an error or a log line.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import sqlalchemy
from sqlalchemy import Connection, Engine, Table, event
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import make_url
from sqlalchemy.pool import StaticPool

from appliance.errors import ApplianceError, ConfigError
from appliance.store.clock import DatabaseClock
from appliance.store.migrations import migrate

__all__ = ["POOL_SIZE", "Database", "StoreUnavailable", "open_database", "sqlite_file"]

log = logging.getLogger("appliance.store")

T = TypeVar("T")

POOL_SIZE = 4
"""PostgreSQL: threads and connections per server (a query takes milliseconds; requests that
touch the store are few beside those that generate)."""
SQLITE_FILE = "appliance.db"
CONNECT_TIMEOUT_SECONDS = 10
BUSY_TIMEOUT_MS = 10_000
"""SQLite: how long a transaction waits for another process's write lock before failing."""


class StoreUnavailable(ApplianceError):
    """The database did not answer (PostgreSQL down, a disk full): 503, try again later."""

    status = 503
    type = "server_error"
    code = "store_unavailable"


def sqlite_file(state_dir: Path) -> Path:
    """Where the SQLite database of `state_dir` lives."""
    return state_dir / SQLITE_FILE


class Database:
    """One database, its schema migrated. `run` is the only way in (off the event loop)."""

    def __init__(self, engine: Engine, *, threads: int, description: str) -> None:
        self.engine = engine
        self.dialect = engine.dialect.name
        """"sqlite" or "postgresql": for the few statements that differ (locks)."""
        self.description = description
        """What the logs may say about it: the SQLite file, or PostgreSQL's host and database."""
        self.clock = DatabaseClock(self.dialect)
        """The database's Unix seconds (`store.clock`): every time the store keeps is of this clock."""
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="store")

    async def run(self, work: Callable[[Connection], T]) -> T:
        """`work(connection)` in one transaction (committed when it returns, rolled back when it
        raises) on the database's threads. A database error is `StoreUnavailable`; an
        `ApplianceError` raised by `work` passes through."""
        return await asyncio.get_running_loop().run_in_executor(self._pool, self.run_now, work)

    def run_now(self, work: Callable[[Connection], T]) -> T:
        """`run` on the calling thread (start-up, tests, tools): never from the event loop."""
        try:
            with self.engine.begin() as connection:
                if self.clock.due():
                    self.clock.sync(connection)
                return work(connection)
        except sqlalchemy.exc.DBAPIError as exc:
            # The driver's own message (its first line): SQLAlchemy's would add the statement and
            # its parameters, which hold what clients stored.
            reason = str(exc.orig).strip().splitlines()[0][:300] if str(exc.orig).strip() else ""
            log.error("store: %s: %s: %s", self.description, type(exc.orig).__name__, reason)
            raise StoreUnavailable(
                "The appliance's store (its database) did not answer; try again later.", retry_after=5
            ) from None

    def advisory_lock(self, connection: Connection, key: int) -> None:
        """Serialize the transactions holding `key` across servers sharing a PostgreSQL store
        (until the transaction ends). SQLite's `BEGIN IMMEDIATE` already serializes writers."""
        if self.dialect == "postgresql":
            connection.execute(sqlalchemy.text("SELECT pg_advisory_xact_lock(:key)"), {"key": key})

    def insert(self, table: Table) -> postgresql.Insert | sqlite.Insert:
        """An INSERT into `table` in the database's dialect, for its `on_conflict_do_nothing` and
        `on_conflict_do_update` (alike in PostgreSQL and SQLite)."""
        return postgresql.insert(table) if self.dialect == "postgresql" else sqlite.insert(table)

    def close(self) -> None:
        """Wait for the calls in flight, then close the connections."""
        self._pool.shutdown(wait=True)
        self.engine.dispose()


def open_database(url: str, state_dir: Path | None) -> Database:
    """The store at `url` (`postgresql://user:password@host/name`), or with no url the SQLite file
    in `state_dir` (created with its directory, mode 0700), or with neither an in-memory SQLite
    database (tests). Migrated before it is returned; ConfigError when it cannot be opened."""
    if url:
        database = _postgresql(url)
    elif state_dir is not None:
        database = _sqlite_file(state_dir)
    else:
        database = _sqlite_memory()
    try:
        version = database.run_now(lambda connection: migrate(connection, database.advisory_lock))
    except StoreUnavailable:
        database.close()
        raise ConfigError(f"store: cannot open {database.description} (see the error above)") from None
    log.info("store: %s, schema version %d", database.description, version)
    return database


def _postgresql(url: str) -> Database:
    try:
        parsed = make_url(url)
    except sqlalchemy.exc.ArgumentError:
        raise ConfigError("store_url: not a database URL (postgresql://user:password@host:port/name)") from None
    if parsed.get_backend_name() not in ("postgresql", "postgres"):
        raise ConfigError(f"store_url: {parsed.get_backend_name()}: only postgresql:// URLs are served")
    parsed = parsed.set(drivername="postgresql+psycopg")
    try:
        engine = sqlalchemy.create_engine(
            parsed,
            pool_size=POOL_SIZE,
            max_overflow=0,
            pool_pre_ping=True,
            connect_args={"connect_timeout": CONNECT_TIMEOUT_SECONDS, "application_name": "appliance"},
        )
    except ImportError:
        raise ConfigError("store_url: PostgreSQL needs psycopg 3 (pip install 'psycopg[binary]')") from None
    where = f"PostgreSQL {parsed.host or 'localhost'}:{parsed.port or 5432}/{parsed.database or ''}"
    return Database(engine, threads=POOL_SIZE, description=where)


def _sqlite_file(state_dir: Path) -> Database:
    try:
        state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"state_dir: cannot create {state_dir}: {exc.strerror}") from None
    path = sqlite_file(state_dir)
    engine = sqlalchemy.create_engine(f"sqlite:///{path}", pool_size=1, max_overflow=0)
    _sqlite_pragmas(engine, wal=True)
    return Database(engine, threads=1, description=f"SQLite {path}")


def _sqlite_memory() -> Database:
    engine = sqlalchemy.create_engine("sqlite://", poolclass=StaticPool, connect_args={"check_same_thread": False})
    _sqlite_pragmas(engine, wal=False)
    return Database(engine, threads=1, description="SQLite in memory")


def _sqlite_pragmas(engine: Engine, *, wal: bool) -> None:
    """Transactions begun by us (`BEGIN IMMEDIATE`), not by the sqlite3 module's guesses (it would
    run DDL outside any transaction), and the journal and durability described above."""

    @event.listens_for(engine, "connect")
    def on_connect(connection: Any, _: Any) -> None:
        connection.isolation_level = None
        cursor = connection.cursor()
        if wal:
            cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=FULL")
        cursor.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def on_begin(connection: Connection) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE")
