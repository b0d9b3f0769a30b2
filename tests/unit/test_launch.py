"""The shared launcher (`appliance.tools.launch`): a server that cannot start is reported with its log."""

from __future__ import annotations

from pathlib import Path

import pytest

from appliance.tools.launch import ServerProcess


def test_a_server_that_exits_is_reported_with_its_log(tmp_path: Path) -> None:
    server = ServerProcess.start(
        tmp_path / "no-such-dir", tmp_path / "server.log", "--config", str(tmp_path / "none.toml")
    )
    with pytest.raises(RuntimeError, match="exited with code 2") as info:
        server.wait_ready(60, log_lines=5)
    assert "none.toml" in str(info.value) and len(str(info.value).splitlines()) <= 6
    assert server.stop() == 2
    assert server.url.startswith("http://127.0.0.1:")
