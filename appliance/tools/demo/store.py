"""On-disk bookkeeping for built demo models: stamps, staging directories, locks.

A model directory counts as current only if its stamp holds the recipe's fingerprint and its key
files exist. Builds happen in a hidden staging directory next to the target and the stamp is
written last, just before the staging directory is renamed into place, so an interrupted build
never leaves a directory that looks current.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

try:  # POSIX only; elsewhere concurrent builders of one demo are simply not guarded against.
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]

STAMP_NAME = ".appliance-demo.json"


def read_stamp(model_dir: Path) -> dict[str, Any] | None:
    """The stamp of a built model directory, or None if absent or unreadable."""
    try:
        data = json.loads((model_dir / STAMP_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def is_current(
    model_dir: Path, fingerprint: dict[str, Any], key_files: Iterable[str], sizes: Mapping[str, int] | None = None
) -> bool:
    """Whether `model_dir` was built from this exact fingerprint and still has its key files, of
    the given `sizes` (bytes, by file name) where known."""
    stamp = read_stamp(model_dir)
    if stamp is None or stamp.get("fingerprint") != _normalise(fingerprint):
        return False
    if not all((model_dir / name).is_file() for name in key_files):
        return False
    return all(_size(model_dir / name) == size for name, size in (sizes or {}).items())


def _size(path: Path) -> int | None:
    try:
        return path.stat().st_size
    except OSError:
        return None


def write_stamp(model_dir: Path, fingerprint: dict[str, Any], **details: Any) -> None:
    """Record what `model_dir` was built from (plus informational details such as build time)."""
    stamp = {"fingerprint": fingerprint, "built_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), **details}
    (model_dir / STAMP_NAME).write_text(json.dumps(stamp, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def _normalise(value: Any) -> Any:
    """The value as it reads back from JSON (tuples become lists), for comparison with a stamp."""
    return json.loads(json.dumps(value))


@contextlib.contextmanager
def build_lock(models_dir: Path, name: str) -> Iterator[None]:
    """Hold an exclusive lock on one demo's model directory for the duration of a check + build.

    Two `appliance demo` runs would otherwise build the same model twice and race on the rename,
    or one would delete the other's staging directory as stale.
    """
    models_dir.mkdir(parents=True, exist_ok=True)
    if fcntl is None:  # pragma: no cover
        yield
        return
    with open(models_dir / f".{name}.lock", "a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def remove_leftovers(models_dir: Path, name: str) -> None:
    """Delete staging/old directories left by interrupted builds of `name` (call under its lock)."""
    for pattern in (f".{name}.partial-*", f".{name}.old-*"):
        for path in models_dir.glob(pattern):
            shutil.rmtree(path, ignore_errors=True)


@contextlib.contextmanager
def staging_dir(models_dir: Path, name: str) -> Iterator[Path]:
    """A fresh hidden directory beside the target (same filesystem, so the final rename is cheap).

    It is removed on exit, whether the build failed or its output was already moved into place.
    """
    path = Path(tempfile.mkdtemp(prefix=f".{name}.partial-", dir=models_dir))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def install(built: Path, target: Path) -> None:
    """Move the finished directory `built` to `target`, replacing any previous build.

    A directory cannot be renamed over a non-empty one, so the old build is first renamed aside;
    if the process dies in between, `target` is simply missing and the next run rebuilds it.
    """
    if target.exists():
        old = target.with_name(f".{target.name}.old-{os.getpid()}")
        os.replace(target, old)
        os.replace(built, target)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(built, target)


def directory_size(path: Path) -> int:
    """Total size in bytes of the regular files under `path`."""
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
