"""`memory_budget`: sizes and percentages parsed with clear errors, the box's memory read from
cgroup files (v2 and v1, the process's own cgroup and its ancestors) or /proc/meminfo, and the
setting checked where settings are loaded."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from appliance.errors import ConfigError
from appliance.memory_budget import (
    BudgetSpec,
    box_memory,
    format_bytes,
    parse_memory_budget,
    parse_size,
    process_rss_bytes,
    resolve_memory_budget,
)
from appliance.settings import load_settings

GIB = 1024**3


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("1073741824", GIB),
        ("12GiB", 12 * GIB),
        ("12 gib", 12 * GIB),
        ("800MB", 800_000_000),
        ("1.5GiB", int(1.5 * GIB)),
        ("64KiB", 65536),
        ("2TB", 2 * 1000**4),
        ("512B", 512),
    ],
)
def test_sizes(text: str, size: int) -> None:
    assert parse_size(text) == size
    assert parse_memory_budget(text) == BudgetSpec(size=size)


@pytest.mark.parametrize("text", ["12G", "twelve", "-1GiB", "12 GiB of RAM", "1e9", "GiB"])
def test_bad_sizes_name_the_text_and_the_forms(text: str) -> None:
    with pytest.raises(ConfigError) as error:
        parse_memory_budget(text)
    assert repr(text) in str(error.value) and "12GiB" in str(error.value) and "80%" in str(error.value)


def test_zero_is_refused_and_empty_is_no_budget() -> None:
    with pytest.raises(ConfigError, match="no memory at all"):
        parse_memory_budget("0")
    assert parse_memory_budget("") is None and parse_memory_budget("  ") is None
    assert resolve_memory_budget("") is None


@pytest.mark.parametrize("text", ["0%", "101%", "250%"])
def test_percentages_are_above_0_and_at_most_100(text: str) -> None:
    with pytest.raises(ConfigError, match="at most 100%"):
        parse_memory_budget(text)


def _box(tmp_path: Path, *, meminfo_kib: int, own: str, limits: dict[str, str]) -> dict[str, Path]:
    """A fake /sys/fs/cgroup (`limits`: file under it -> its content), /proc/self/cgroup, /proc/meminfo."""
    root = tmp_path / "cgroup"
    for relative, content in limits.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(content + "\n")
    root.mkdir(exist_ok=True)
    (tmp_path / "self_cgroup").write_text(own)
    (tmp_path / "meminfo").write_text(f"MemTotal:       {meminfo_kib} kB\nMemFree:        1000 kB\n")
    return {"cgroup_root": root, "own_cgroup": tmp_path / "self_cgroup", "meminfo": tmp_path / "meminfo"}


def test_without_a_cgroup_limit_the_box_is_memtotal(tmp_path: Path) -> None:
    paths = _box(tmp_path, meminfo_kib=16 * 1024 * 1024, own="0::/user.slice\n", limits={"memory.max": "max"})
    assert box_memory(**paths) == (16 * GIB, f"MemTotal in {paths['meminfo']}")
    budget = resolve_memory_budget("50%", **paths)
    assert budget is not None and budget.bytes == 8 * GIB
    assert budget.describe() == f"8.0 GiB (50% of 16.0 GiB, MemTotal in {paths['meminfo']})"


def test_a_systemd_service_limit_is_the_box(tmp_path: Path) -> None:
    service = "system.slice/appliance.service"
    paths = _box(
        tmp_path,
        meminfo_kib=32 * 1024 * 1024,
        own=f"0::/{service}\n",
        limits={f"{service}/memory.max": str(4 * GIB), "system.slice/memory.max": "max", "memory.max": "max"},
    )
    total, where = box_memory(**paths)
    assert total == 4 * GIB and where == f"cgroup {paths['cgroup_root'] / service / 'memory.max'}"
    budget = resolve_memory_budget("80%", **paths)
    assert budget is not None and budget.bytes == int(4 * GIB * 0.8)


def test_a_slice_limit_tighter_than_the_service_wins(tmp_path: Path) -> None:
    paths = _box(
        tmp_path,
        meminfo_kib=32 * 1024 * 1024,
        own="0::/apps.slice/appliance.service\n",
        limits={"apps.slice/appliance.service/memory.max": str(6 * GIB), "apps.slice/memory.max": str(3 * GIB)},
    )
    assert box_memory(**paths)[0] == 3 * GIB


def test_a_container_sees_its_own_limit_at_the_root(tmp_path: Path) -> None:
    paths = _box(tmp_path, meminfo_kib=32 * 1024 * 1024, own="0::/\n", limits={"memory.max": str(2 * GIB)})
    assert box_memory(**paths)[0] == 2 * GIB


def test_cgroup_v1_limit_and_its_no_limit_value(tmp_path: Path) -> None:
    own = "12:memory:/docker/abc\n11:cpu,cpuacct:/docker/abc\n"
    limited = _box(
        tmp_path / "a",
        meminfo_kib=8 * 1024 * 1024,
        own=own,
        limits={"memory/docker/abc/memory.limit_in_bytes": str(GIB)},
    )
    assert box_memory(**limited)[0] == GIB
    unlimited = _box(
        tmp_path / "b",
        meminfo_kib=8 * 1024 * 1024,
        own=own,
        limits={"memory/docker/abc/memory.limit_in_bytes": "9223372036854771712"},
    )
    assert box_memory(**unlimited)[0] == 8 * GIB


def test_a_limit_above_memtotal_is_not_the_box(tmp_path: Path) -> None:
    paths = _box(tmp_path, meminfo_kib=1024 * 1024, own="0::/x\n", limits={"x/memory.max": str(64 * GIB)})
    assert box_memory(**paths)[0] == GIB


def test_a_size_needs_no_box(tmp_path: Path) -> None:
    budget = resolve_memory_budget("800MB", meminfo=tmp_path / "missing")
    assert budget is not None and budget.bytes == 800_000_000 and budget.source == "memory_budget 800MB"
    with pytest.raises(ConfigError, match="MemTotal"):
        resolve_memory_budget("80%", meminfo=tmp_path / "missing", own_cgroup=tmp_path / "none")


def test_the_setting_is_checked_where_settings_load(tmp_path: Path) -> None:
    assert load_settings({"memory_budget": "12GiB"}, environ={}).memory_budget == "12GiB"
    assert load_settings({}, environ={"APPLIANCE_MEMORY_BUDGET": "80%"}).memory_budget == "80%"
    config = tmp_path / "appliance.toml"
    config.write_text('memory_budget = "12 gigs"\n')
    with pytest.raises(ConfigError) as error:
        load_settings({}, config=config, environ={})
    assert str(config) in str(error.value) and "'12 gigs'" in str(error.value)
    with pytest.raises(ConfigError, match="environment: memory_budget: '150%'"):
        load_settings({}, environ={"APPLIANCE_MEMORY_BUDGET": "150%"})


def test_format_and_own_rss() -> None:
    assert format_bytes(512) == "512 B" and format_bytes(1536 * 1024**2) == "1.5 GiB"
    assert process_rss_bytes(os.getpid()) > 10 * 1024 * 1024
    assert process_rss_bytes(None) == 0
