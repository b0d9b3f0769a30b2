"""The store's clock: Unix seconds as the database reads them, so servers sharing a PostgreSQL
store agree on every time they keep there (a batch's 24-hour window, its lease, a stored
response's hour, a file's expiry) however far apart their own clocks are.

`DatabaseClock()` is read without a query: on PostgreSQL it is the database's
`clock_timestamp()` at the last `sync`, advanced by this process's monotonic clock (so a step of
the local wall clock moves nothing), re-read at most `RESYNC_SECONDS` apart by `Database.run`
(one query in a transaction it runs anyway). Its error is half a query's round trip plus the
monotonic clock's drift over a minute: milliseconds. On SQLite it is the local clock: the file is
on this machine, and every process writing it shares that clock.
"""

from __future__ import annotations

import time

import sqlalchemy
from sqlalchemy import Connection

__all__ = ["RESYNC_SECONDS", "DatabaseClock"]

RESYNC_SECONDS = 60.0
_POSTGRESQL_NOW = "SELECT EXTRACT(EPOCH FROM clock_timestamp())"


class DatabaseClock:
    """Call it for the database's Unix seconds (a float), as `time.time` is called."""

    def __init__(self, dialect: str) -> None:
        self.shared = dialect == "postgresql"
        """The database's clock is another machine's: read it (else the local clock is its clock)."""
        self._offset = time.time() - time.monotonic()
        """Database seconds less monotonic seconds (the local clock's until the first `sync`)."""
        self._synced_at: float | None = None

    def __call__(self) -> float:
        return time.monotonic() + self._offset if self.shared else time.time()

    def due(self) -> bool:
        """A PostgreSQL clock never read, or read over `RESYNC_SECONDS` ago."""
        return self.shared and (self._synced_at is None or time.monotonic() - self._synced_at > RESYNC_SECONDS)

    def sync(self, connection: Connection) -> None:
        """Read the database's clock on `connection`, as of the middle of the query's round trip."""
        before = time.monotonic()
        seconds = float(connection.execute(sqlalchemy.text(_POSTGRESQL_NOW)).scalar_one())
        after = time.monotonic()
        self._offset = seconds - (before + after) / 2
        self._synced_at = after
