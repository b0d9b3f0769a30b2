"""The store's schema, versioned: `STEPS` in order, each applied once, `schema_version` counting
them.

`migrate` runs at every start in one transaction, under an advisory lock on PostgreSQL (two
servers starting at once on one database: one migrates, the other then finds it done), and
refuses a database written by a newer appliance (more steps than this one knows). PostgreSQL and
SQLite both roll DDL back with the transaction, so a step that fails leaves no half of itself.

To change the schema: append a step (never edit or reorder a released one) and change
`schema.py` to match what the steps now make. A step that creates a table from `schema.py` stays
right only as long as that table's shape is the one it created; when a later step alters it,
write the earlier step's table out in the step itself.
"""

from __future__ import annotations

from collections.abc import Callable

import sqlalchemy
from sqlalchemy import Connection

from appliance.errors import ConfigError
from appliance.store import schema

__all__ = ["STEPS", "migrate"]

_MIGRATION_LOCK = 0x61707073_746F7265  # "appsstore": any constant the servers agree on


def _responses_and_files(connection: Connection) -> None:
    schema.responses.create(connection)
    schema.files.create(connection)


def _batches(connection: Connection) -> None:
    schema.batches.create(connection)
    schema.batch_lines.create(connection)


def _response_counters(connection: Connection) -> None:
    """Each owner's stored responses counted once here, then kept in step by every write."""
    schema.response_owners.create(connection)
    schema.response_totals.create(connection)
    connection.execute(
        sqlalchemy.text(
            "INSERT INTO response_owners (owner, responses, bytes) "
            "SELECT owner, COUNT(*), SUM(size) FROM responses GROUP BY owner"
        )
    )
    connection.execute(
        sqlalchemy.text(
            "INSERT INTO response_totals (id, responses, bytes) SELECT 1, COUNT(*), COALESCE(SUM(size), 0) FROM responses"
        )
    )


STEPS: list[Callable[[Connection], None]] = [
    _responses_and_files,  # 1
    _batches,  # 2
    _response_counters,  # 3
]


def migrate(connection: Connection, lock: Callable[[Connection, int], None]) -> int:
    """Bring the database to `len(STEPS)`; returns that version. `lock(connection, key)` takes the
    servers' shared lock for the rest of the transaction."""
    lock(connection, _MIGRATION_LOCK)
    schema.schema_version.create(connection, checkfirst=True)
    version = connection.execute(sqlalchemy.select(schema.schema_version.c.version)).scalar()
    if version is None:
        version = 0
        connection.execute(schema.schema_version.insert().values(version=0))
    if version > len(STEPS):
        raise ConfigError(
            f"store: the database's schema is version {version}, newer than this appliance's "
            f"{len(STEPS)}: it was written by a newer appliance (upgrade this one, or point it at another store)"
        )
    for step in STEPS[version:]:
        step(connection)
    if version < len(STEPS):
        connection.execute(schema.schema_version.update().values(version=len(STEPS)))
    return len(STEPS)
