"""Reading local files: real paths inside the allowed directory only."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from appliance.errors import InvalidRequest
from appliance.media.local import read_local
from appliance.media.policy import build_policy
from appliance.media.sources import parse_source


@pytest.fixture
def layout(tmp_path: Path) -> Path:
    root = tmp_path / "allowed"
    (root / "sub").mkdir(parents=True)
    (root / "a.png").write_bytes(b"inside")
    (root / "sub" / "b.png").write_bytes(b"nested")
    (tmp_path / "allowed-evil").mkdir()
    (tmp_path / "allowed-evil" / "x.png").write_bytes(b"evil")
    (tmp_path / "secret.png").write_bytes(b"secret")
    (root / "link-out.png").symlink_to(tmp_path / "secret.png")
    (root / "dir-out").symlink_to(tmp_path / "allowed-evil")
    (root / "link-in.png").symlink_to(root / "sub" / "b.png")
    (root / "big.png").write_bytes(b"x" * 101)
    os.mkfifo(root / "fifo.png")
    return root


def read(url: str, root: Path, **limits) -> bytes:
    policy = build_policy(allowed_local_media_path=str(root), max_image_bytes=limits.get("max_bytes", 100))
    return read_local(parse_source(url, policy), policy)


def refused(url: str, root: Path) -> str:
    with pytest.raises(InvalidRequest) as info:
        read(url, root)
    assert info.value.status == 400
    return info.value.message


def test_reads_files_inside(layout: Path) -> None:
    assert read(f"{layout}/a.png", layout) == b"inside"
    assert read(f"file://{layout}/sub/b.png", layout) == b"nested"
    assert read(f"{layout}/link-in.png", layout) == b"nested"  # a symlink that stays inside


def test_symlinks_pointing_out_are_refused(layout: Path) -> None:
    assert "not inside" in refused(f"{layout}/link-out.png", layout)
    assert "not inside" in refused(f"{layout}/dir-out/x.png", layout)


def test_prefix_trap_and_missing_files(layout: Path) -> None:
    assert "not inside" in refused(f"{layout}-evil/x.png", layout)
    assert "does not exist" in refused(f"{layout}/missing.png", layout)


def test_non_regular_files_and_size(layout: Path) -> None:
    assert "regular file" in refused(f"{layout}/sub", layout)
    assert "regular file" in refused(f"{layout}/fifo.png", layout)  # and it did not hang
    with pytest.raises(InvalidRequest) as info:
        read(f"{layout}/big.png", layout)
    assert info.value.code == "image_too_large"
    assert read(f"{layout}/big.png", layout, max_bytes=101) == b"x" * 101


def test_allowed_root_given_through_a_symlink(layout: Path, tmp_path: Path) -> None:
    alias = tmp_path / "alias"
    alias.symlink_to(layout)
    assert read(f"{alias}/a.png", alias) == b"inside"
    assert read(f"{layout}/a.png", alias) == b"inside"  # the real path is inside too
