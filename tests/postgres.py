"""A throwaway PostgreSQL server for the store's tests: Debian's binaries (the `postgresql`
package, which .ci/run installs), a cluster in a temporary directory, listening on 127.0.0.1 and
a free port, trusting local connections, fsync off, removed when stopped.

PostgreSQL refuses to run as root: as root the cluster is made and run by the `postgres` user
(the package creates it) through `runuser`. `PostgresServer.start` raises `Unavailable`, saying
why, where it cannot run; the fixtures in tests/conftest.py skip with that reason.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path

from appliance.tools.launch import free_port

__all__ = ["PostgresServer", "Unavailable"]

USER = "appliance"
"""The cluster's superuser, whom the tests connect as."""


class Unavailable(Exception):
    """PostgreSQL cannot be run here; the message says why."""


def _binaries() -> Path:
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda path: int(path.parent.parent.name))
    if found:
        return found[-1].parent
    initdb = shutil.which("initdb")
    if initdb is None:
        raise Unavailable("PostgreSQL is not installed (Debian's postgresql package; .ci/run installs it)")
    return Path(initdb).resolve().parent


def _as_user() -> tuple[list[str], str | None]:
    """The command prefix that runs PostgreSQL's programs unprivileged, and the user it runs them as."""
    if os.geteuid() != 0:
        return [], None
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        raise Unavailable("running as root and there is no `postgres` user to run PostgreSQL as") from None
    runuser = shutil.which("runuser")
    if runuser is None:
        raise Unavailable("running as root and `runuser` is missing, so PostgreSQL cannot drop to `postgres`")
    return [runuser, "-u", "postgres", "--"], "postgres"


@dataclass
class PostgresServer:
    """A running throwaway cluster; `url(database)` connects to one of its databases."""

    root: Path
    port: int
    bin: Path
    prefix: list[str]

    @classmethod
    def start(cls) -> PostgresServer:
        bin_dir = _binaries()
        prefix, user = _as_user()
        root = Path(tempfile.mkdtemp(prefix="appliance-postgres-"))
        if user is not None:
            shutil.chown(root, user)
        server = cls(root=root, port=free_port(), bin=bin_dir, prefix=prefix)
        try:
            server._run("initdb", "-D", str(root / "data"), "-U", USER, "--auth=trust", "-E", "UTF8", "--no-sync")
            options = f"-h 127.0.0.1 -p {server.port} -k {root} -F"
            server._run("pg_ctl", "-D", str(root / "data"), "-o", options, "-l", str(root / "log"), "-w", "start")
        except Unavailable:
            shutil.rmtree(root, ignore_errors=True)
            raise
        return server

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{USER}@127.0.0.1:{self.port}/{database}"

    def new_database(self) -> str:
        """The URL of a new, empty database in the cluster (one per test keeps them apart)."""
        import psycopg

        name = f"t_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.url(), autocommit=True) as connection:
            connection.execute(f"CREATE DATABASE {name}")
        return self.url(name)

    def stop(self) -> None:
        try:
            self._run("pg_ctl", "-D", str(self.root / "data"), "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    def _run(self, program: str, *arguments: str) -> None:
        command = [*self.prefix, str(self.bin / program), *arguments]
        done = subprocess.run(command, capture_output=True, text=True, timeout=60, cwd=self.root, check=False)
        if done.returncode != 0:
            log = (self.root / "log").read_text(errors="replace")[-2000:] if (self.root / "log").exists() else ""
            raise Unavailable(f"{program} failed ({done.returncode}): {done.stderr.strip()[-1000:]} {log}")
