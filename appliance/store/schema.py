"""The store's tables as they are now (SQLAlchemy Core), which the queries use.

`migrations` makes a database's tables this shape, one numbered step at a time. Times are Unix
seconds (`time.time()`: they outlive the process, unlike the monotonic clock); `owner` is
`owner_of(api_key)`, a SHA-256 hex digest of the key (the key itself is never stored).
"""

from __future__ import annotations

import hashlib

from sqlalchemy import BigInteger, Boolean, Column, Float, Index, Integer, LargeBinary, MetaData, String, Table

__all__ = [
    "batch_lines",
    "batches",
    "files",
    "metadata",
    "owner_of",
    "response_owners",
    "response_totals",
    "responses",
    "schema_version",
]


def owner_of(api_key: str | None) -> str:
    """Who a stored thing belongs to: a hash of the API key the request carried ("" without one)."""
    return hashlib.sha256(api_key.encode()).hexdigest() if api_key else ""


metadata = MetaData()

schema_version = Table(
    "schema_version",
    metadata,
    Column("version", Integer, nullable=False),
)
"""One row: the number of migration steps applied."""

responses = Table(
    "responses",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("owner", String(64), nullable=False),
    Column("stored_at", Float, nullable=False),
    Column("expires_at", Float, nullable=False),
    Column("size", Integer, nullable=False),
    Column("body", LargeBinary, nullable=False),
    Index("responses_owner", "owner", "stored_at"),
    Index("responses_expiry", "expires_at"),
)
"""Stored responses of the Responses API: `body` is the JSON the dialect wrote (the response and
its conversation), `size` its bytes, the unit of the store's byte bound."""

response_owners = Table(
    "response_owners",
    metadata,
    Column("owner", String(64), primary_key=True),
    Column("responses", Integer, nullable=False),
    Column("bytes", BigInteger, nullable=False),
    Index("response_owners_responses", "responses"),
    Index("response_owners_bytes", "bytes"),
)
"""Each owner's rows in `responses` (expired ones until they are deleted): how many and their
`size` together, kept in step by every write (`store.responses`), so a write finds the owner
holding the largest share by an index instead of counting the table. An owner with none has no
row."""

response_totals = Table(
    "response_totals",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("responses", BigInteger, nullable=False),
    Column("bytes", BigInteger, nullable=False),
)
"""One row (`id` 1): the sums of `response_owners`, what the store's bounds are checked against."""

files = Table(
    "files",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("owner", String(64), nullable=False),
    Column("purpose", String(32), nullable=False),
    Column("filename", String(255), nullable=False),
    Column("bytes", BigInteger, nullable=False),
    Column("lines", Integer, nullable=False),
    Column("created_at", BigInteger, nullable=False),
    Column("expires_at", BigInteger, nullable=True),
    Column("seq", BigInteger, nullable=False),
    Column("content", LargeBinary, nullable=False),
    Index("files_owner", "owner", "seq"),
)
"""Files of `/v1/files` (uploaded, and a batch's output and error files). `seq`: nanoseconds at
creation, the order of a listing (with `id` to break ties); `lines`: its non-empty lines; `content`
last, so a listing's rows do not read it."""

batches = Table(
    "batches",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("owner", String(64), nullable=False),
    Column("status", String(16), nullable=False),
    Column("seq", BigInteger, nullable=False),
    Column("body", LargeBinary, nullable=False),
    Column("lease_owner", String(64), nullable=True),
    Column("lease_until", Float, nullable=True),
    Index("batches_owner", "owner", "seq"),
    Index("batches_status", "status"),
)
"""Batches of `/v1/batches`: `body` is the batch object's JSON (its request counts read from
`batch_lines`), `status` a copy of its status to find the unfinished ones at start, `seq`
nanoseconds at creation (the order of a listing); `lease_owner` the server running it until
`lease_until` (Unix seconds), renewed while it runs, so servers sharing PostgreSQL run each batch
once and take over a dead server's."""

batch_lines = Table(
    "batch_lines",
    metadata,
    Column("batch_id", String(64), primary_key=True),
    Column("line", Integer, primary_key=True),
    Column("ok", Boolean, nullable=False),
    Column("output", LargeBinary, nullable=False),
)
"""Each answered line of a batch, written as it finishes (the primary key: once per line): `line`
its 0-based place in the input file, `ok` whether it goes to the output file (else the error
file), `output` that file's JSON line."""
