"""The appliance's stored state, on a database: SQLite in the state directory by default,
PostgreSQL when `store_url` names one (servers sharing it share the state).

- `database`: `open_database(url, state_dir)` (created, migrated) and `Database.run(work)`, the one
  way to the database: `work(connection)` in one transaction, on the database's own threads.
- `clock`: `DatabaseClock`, `Database.clock`: the database's time, which every time kept in the
  store is of (servers sharing PostgreSQL need not agree on theirs).
- `migrations`: the schema's numbered steps and `schema_version`.
- `schema`: the tables as they are now (SQLAlchemy Core), and `owner_of(api_key)`, the owner every
  row is kept under (a hash of the key).
- `responses`: `ResponseRows`, the Responses API's stored responses as bytes, bounded.
- `files`: `FileRows`, the files of `/v1/files` and of batches, bounded.
- `batches`: `BatchRows`, the batches of `/v1/batches` and each answered line.

`Store` holds them together, as the server opens it and the routes get it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from appliance.store.batches import BatchRows
from appliance.store.database import Database, StoreUnavailable, open_database
from appliance.store.files import FileRecord, FileRows
from appliance.store.responses import ResponseRows
from appliance.store.schema import owner_of

__all__ = [
    "BatchRows",
    "Database",
    "FileRecord",
    "FileRows",
    "ResponseRows",
    "Store",
    "StoreLimits",
    "StoreUnavailable",
    "open_database",
    "open_store",
    "owner_of",
]

_MIB = 1024 * 1024


@dataclass(frozen=True, kw_only=True)
class StoreLimits:
    """The store's bounds (settings of the same names, docs/operations.md)."""

    max_stored_responses: int = 1024
    max_file_bytes: int = 32 * _MIB
    max_file_lines: int = 50_000
    max_stored_file_bytes: int = 1024 * _MIB


@dataclass(frozen=True)
class Store:
    """The database and the tables the server serves from it."""

    database: Database
    responses: ResponseRows
    files: FileRows
    batches: BatchRows


def open_store(url: str = "", state_dir: Path | None = None, limits: StoreLimits | None = None) -> Store:
    """The store at `url`, else in `state_dir`, else in memory (see `open_database`), bounded by
    `limits` (default: the settings' defaults). ConfigError when it cannot be opened."""
    limits = limits or StoreLimits()
    database = open_database(url, state_dir)
    return Store(
        database=database,
        responses=ResponseRows(database, max_responses=limits.max_stored_responses, clock=database.clock),
        files=FileRows(
            database,
            max_file_bytes=limits.max_file_bytes,
            max_file_lines=limits.max_file_lines,
            max_owner_bytes=limits.max_stored_file_bytes,
            clock=database.clock,
        ),
        batches=BatchRows(database),
    )
