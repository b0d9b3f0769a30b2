"""`memory_budget`: bytes of memory the loaded models may hold together, and what the box has.

Written as a size (`"12GiB"`, `"800MB"`, `"1073741824"`: plain bytes) or a share of the box's
memory (`"80%"`). The box's memory is the tightest cgroup memory limit over the server's own cgroup
and its ancestors (cgroup v2 `memory.max`, as systemd's `MemoryMax=` sets it on a service or a
slice; cgroup v1 `memory.limit_in_bytes`), else `MemTotal` from /proc/meminfo: a share of
/proc/meminfo alone would overshoot a service confined to less than the machine has.

Standard library only: `settings` checks the text with `parse_memory_budget`, the server and
`appliance check` turn it into bytes with `resolve_memory_budget`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

from appliance.errors import ConfigError

__all__ = [
    "BudgetSpec",
    "MAX_SIZE",
    "MemoryBudget",
    "box_memory",
    "format_bytes",
    "parse_memory_budget",
    "parse_size",
    "process_rss_bytes",
    "resolve_memory_budget",
]

_UNITS = {
    "": 1,
    "B": 1,
    "KB": 1000,
    "MB": 1000**2,
    "GB": 1000**3,
    "TB": 1000**4,
    "KIB": 1024,
    "MIB": 1024**2,
    "GIB": 1024**3,
    "TIB": 1024**4,
}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*$")
_PERCENT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*%\s*$")
_HOW = 'a size such as "12GiB", "800MB" or 1073741824 (bytes), or a share of the box\'s memory such as "80%"'
MAX_SIZE = 1 << 60
"""The largest budget written as a size (1 EiB): a larger one is a typo."""
_NO_LIMIT_V1 = 1 << 60
"""cgroup v1 writes "no limit" as a page-rounded LONG_MAX: anything this large is no limit."""


def parse_size(text: str) -> int:
    """Bytes in `text`: plain bytes or a number with B, KB, MB, GB, TB (powers of 1000) or KiB, MiB,
    GiB, TiB (powers of 1024), case-insensitive. ConfigError naming the text otherwise."""
    match = _SIZE.match(text)
    unit = match.group(2).upper() if match else ""
    if match is None or unit not in _UNITS:
        raise ConfigError(f"memory_budget: {text!r} is not {_HOW} (units: B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)")
    # Decimal, not float: a float of 401 digits is infinity, and int() of that a traceback.
    size = int(Decimal(match.group(1)) * _UNITS[unit])
    if size <= 0:
        raise ConfigError(f"memory_budget: {text!r} is no memory at all; leave it empty for no budget")
    if size > MAX_SIZE:
        raise ConfigError(f"memory_budget: {_short(text)} is more memory than any machine has (at most 1 EiB)")
    return size


def _short(text: str) -> str:
    return repr(text if len(text) <= 24 else f"{text[:24]}... ({len(text)} characters)")


@dataclass(frozen=True)
class BudgetSpec:
    """The budget as written: bytes, or a share of the box's memory (exactly one is set)."""

    size: int = 0
    percent: float = 0.0


def parse_memory_budget(text: str) -> BudgetSpec | None:
    """The budget `text` asks for; None for an empty text (no budget). ConfigError when it is
    neither a size nor a percentage from above 0 to 100."""
    if not text.strip():
        return None
    match = _PERCENT.match(text)
    if match is None:
        return BudgetSpec(size=parse_size(text))
    percent = float(match.group(1))
    if not 0 < percent <= 100:
        raise ConfigError(f"memory_budget: {_short(text)}: a share of the box's memory is above 0% and at most 100%")
    return BudgetSpec(percent=percent)


@dataclass(frozen=True)
class MemoryBudget:
    """The budget in bytes and how it was reached (for logs and errors)."""

    bytes: int
    source: str

    def describe(self) -> str:
        return f"{format_bytes(self.bytes)} ({self.source})"


def resolve_memory_budget(
    text: str,
    *,
    cgroup_root: Path = Path("/sys/fs/cgroup"),
    own_cgroup: Path = Path("/proc/self/cgroup"),
    meminfo: Path = Path("/proc/meminfo"),
) -> MemoryBudget | None:
    """The budget `text` sets in bytes (None: no budget); a percentage of `box_memory`."""
    spec = parse_memory_budget(text)
    if spec is None:
        return None
    if spec.size:
        return MemoryBudget(spec.size, f"memory_budget {text.strip()}")
    total, where = box_memory(cgroup_root=cgroup_root, own_cgroup=own_cgroup, meminfo=meminfo)
    return MemoryBudget(int(total * spec.percent / 100), f"{spec.percent:g}% of {format_bytes(total)}, {where}")


def box_memory(
    *,
    cgroup_root: Path = Path("/sys/fs/cgroup"),
    own_cgroup: Path = Path("/proc/self/cgroup"),
    meminfo: Path = Path("/proc/meminfo"),
) -> tuple[int, str]:
    """The memory this process may use, in bytes, and where that number came from: the tightest
    cgroup limit when one is set and below MemTotal, else MemTotal."""
    total = _mem_total(meminfo)
    limit = _cgroup_limit(cgroup_root, own_cgroup)
    if limit is not None and limit[0] < total:
        return limit
    return total, f"MemTotal in {meminfo}"


def _mem_total(meminfo: Path) -> int:
    try:
        for line in meminfo.read_text(encoding="ascii").splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    raise ConfigError(f"memory_budget: a percentage needs the box's memory, and {meminfo} gives no MemTotal")


def _cgroup_limit(cgroup_root: Path, own_cgroup: Path) -> tuple[int, str] | None:
    """The smallest memory limit from the process's cgroup up to the root (v2, else v1)."""
    v2, v1 = _own_cgroup_paths(own_cgroup)
    candidates: list[tuple[int, str]] = []
    for relative, base, file in (
        (v2, cgroup_root, "memory.max"),
        (v1, cgroup_root / "memory", "memory.limit_in_bytes"),
    ):
        if relative is None:
            continue
        directory = base / relative.lstrip("/")
        # Ancestors too: systemd may set MemoryMax= on the slice rather than the service. In a
        # container the cgroup namespace makes its own cgroup the root, hence `base` itself last.
        for folder in (directory, *directory.parents):
            value = _limit_in(folder / file)
            if value is not None:
                candidates.append((value, f"cgroup {folder / file}"))
            if folder == base:
                break
    return min(candidates) if candidates else None


def _own_cgroup_paths(own_cgroup: Path) -> tuple[str | None, str | None]:
    """This process's cgroup v2 path (`0::/...`) and v1 memory controller path, from /proc/self/cgroup."""
    v2 = v1 = None
    try:
        lines = own_cgroup.read_text(encoding="utf-8").splitlines()
    except OSError:
        return "/", "/"  # no such file: look at the root's limits alone
    for line in lines:
        hierarchy, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if hierarchy == "0" and not controllers:
            v2 = path
        elif "memory" in controllers.split(","):
            v1 = path
    return v2, v1


def _limit_in(path: Path) -> int | None:
    try:
        text = path.read_text(encoding="ascii").strip()
    except OSError:
        return None
    if not text.isdigit():
        return None  # "max": no limit
    value = int(text)
    return value if 0 < value < _NO_LIMIT_V1 else None


def format_bytes(size: float) -> str:
    """`1288490188` -> `1.2 GiB`: sizes in messages."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(size) < 1024:
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TiB"


def process_rss_bytes(pid: int | None) -> int:
    """A process's resident memory (VmRSS of /proc/PID/status) in bytes; 0 when it cannot be read
    (no pid, or the process is gone)."""
    if pid is None:
        return 0
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0
