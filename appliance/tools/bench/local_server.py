"""A private `appliance serve` for one graph (and the graphs it names, `companions`), for the length
of a benchmark (started by `launch`).

The server gets a private graphs directory holding a copy of the graph file (paths made absolute,
so the copy points at the same model) and an empty settings file, so neither the machine's
/etc/appliance settings nor APPLIANCE_* variables change what is measured. The copy may switch
the scheduler's prefix caching on or off (`prefix_caching`), for the multi-turn comparison.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import tomllib
from pathlib import Path
from types import TracebackType

from appliance.graphfiles import Graph
from appliance.tools.launch import ServerProcess

__all__ = ["LocalServer", "with_prefix_caching"]

_READY_TIMEOUT_S = 900.0  # a large model can take minutes to compile


class LocalServer:
    """`with LocalServer(graph) as url:` serves the graph at `url` and stops it (SIGTERM) on exit;
    `prefix_caching` True or False overrides the graph's `[scheduler] enable_prefix_caching`."""

    def __init__(self, graph: Graph, *, prefix_caching: bool | None = None, companions: tuple[Path, ...] = ()) -> None:
        self.graph = graph
        self.prefix_caching = prefix_caching
        self.companions = companions
        """Other graph files served beside it (a chat graph's speech and voice models)."""
        self._tmp = tempfile.TemporaryDirectory(prefix="appliance-bench-")
        self._server: ServerProcess | None = None
        self.log_path = Path(self._tmp.name) / "server.log"

    def __enter__(self) -> str:
        root = Path(self._tmp.name)
        graphs = root / "graphs"
        graphs.mkdir()
        source = Path(self.graph.source)
        text = _absolute_paths(source)
        if self.prefix_caching is not None:
            text = with_prefix_caching(text, self.prefix_caching, source)
        (graphs / source.name).write_text(text, encoding="utf-8")
        for companion in self.companions:
            (graphs / companion.name).write_text(_absolute_paths(companion), encoding="utf-8")
        settings = root / "settings.toml"
        settings.write_text("", encoding="utf-8")
        env = {key: value for key, value in os.environ.items() if not key.startswith("APPLIANCE_")}
        env.pop("CREDENTIALS_DIRECTORY", None)
        self._server = ServerProcess.start(
            graphs, self.log_path, "--config", str(settings), "--host", "127.0.0.1", "--log-level", "warning", env=env
        )
        try:
            self._server.wait_ready(_READY_TIMEOUT_S, log_lines=20)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self._server.url

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None
    ) -> None:
        if self._server is not None:
            self._server.stop(timeout=60)
        self._tmp.cleanup()


_TABLE_PATHS = (("speech", "vad_model"),)
"""Paths inside a table, relative to the graph file as the top-level `*_path` keys are."""


def _absolute_paths(source: Path) -> str:
    """The graph file's text with every top-level `*_path` value, and each of `_TABLE_PATHS`, made
    absolute (relative to the file)."""
    text = source.read_text(encoding="utf-8")
    graph = tomllib.loads(text)
    found = [(None, key, value) for key, value in graph.items() if key.endswith("_path")]
    for table, key in _TABLE_PATHS:
        values = graph.get(table)
        if isinstance(values, dict) and key in values:
            found.append((table, key, values[key]))
    voices = graph.get("tts", {}).get("voices")  # each voice's file: `[tts.voices]`
    if isinstance(voices, dict):
        found += [("tts.voices", name, value) for name, value in voices.items()]
    for table, key, value in found:
        if isinstance(value, str) and not Path(value).is_absolute():
            # A JSON string is a valid TOML basic string.
            line = f"{key} = {json.dumps(str((source.parent / value).resolve()))}"
            span = _table_span(text, table)
            if span is None:  # written inline (`speech = {...}`): left as it is
                continue
            start, end = span
            body = re.sub(
                rf"^{re.escape(key)}\s*=.*$",
                line.replace("\\", "\\\\"),  # a replacement template: backslashes escaped
                text[start:end],
                count=1,
                flags=re.MULTILINE,
            )
            text = text[:start] + body + text[end:]
    return text


def _table_span(text: str, table: str | None) -> tuple[int, int] | None:
    """Where the lines of `[table]` are in a graph file's text (`table` None: the top level, before
    any table); None when it has no such table."""
    if table is None:
        start = 0
    else:
        header = re.search(rf"^\[{re.escape(table)}\][ \t]*(#.*)?$", text, flags=re.MULTILINE)
        if header is None:
            return None
        start = header.end()
    following = re.search(r"^\[", text[start:], flags=re.MULTILINE)
    return start, start + following.start() if following else len(text)


def with_prefix_caching(text: str, enabled: bool, source: Path) -> str:
    """A graph file's text with `[scheduler] enable_prefix_caching` set to `enabled` (the line
    replaced, added to the table, or the table added); ValueError naming `source` if the result
    does not read back as asked (e.g. the scheduler written as an inline table)."""
    line = f"enable_prefix_caching = {'true' if enabled else 'false'}"
    span = _table_span(text, "scheduler")
    if span is None:
        text = f"{text.rstrip()}\n\n[scheduler]\n{line}\n"
    else:
        start, end = span
        body, found = re.subn(r"^enable_prefix_caching\s*=.*$", line, text[start:end], count=1, flags=re.M)
        text = text[:start] + (body if found else f"\n{line}{body}") + text[end:]
    try:
        scheduler = tomllib.loads(text).get("scheduler")
    except tomllib.TOMLDecodeError:
        scheduler = None
    if not isinstance(scheduler, dict) or scheduler.get("enable_prefix_caching") is not enabled:
        raise ValueError(f"{source}: could not set `[scheduler] enable_prefix_caching` in a copy of the graph file")
    return text
