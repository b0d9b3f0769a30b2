"""One engine process and its pipe, seen from the server's event loop.

The process is spawned (never forked: the server's threads and OpenVINO do not survive a fork) with
the graph; frames to it go through `outbox` and a thread of their own, since `send_bytes` blocks
while the pipe is full and a large prompt must not hold the loop; frames from it are read on the
loop (`loop.add_reader`, `frames.FrameReader`) and handed to `on_message` one decoded message at
a time. When the pipe closes (the process exited or died), `on_exit` is called once. `EngineClient` owns one at a time
and decides what an exit means (a crash to restart after, a failed load, a stop).
"""

from __future__ import annotations

import asyncio
import multiprocessing
import queue
import threading
import time
from collections.abc import Callable

from appliance.cpu_affinity import engine_cpus
from appliance.engine.host.frames import FrameReader
from appliance.engine.messages import Shutdown, decode_from_engine, encoder
from appliance.engine.worker.process import main as run_engine
from appliance.graphfiles import Graph
from appliance.logs import current_logging

__all__ = ["EngineProcess"]


class EngineProcess:
    """A spawned engine process for `graph`, talking over a pipe."""

    def __init__(self, graph: Graph, *, on_message: Callable[[object], None], on_exit: Callable[[], None]) -> None:
        self._loop = asyncio.get_running_loop()
        self._on_message = on_message
        self._on_exit = on_exit
        context = multiprocessing.get_context("spawn")
        parent_conn, child_conn = context.Pipe(duplex=True)
        self._process = context.Process(
            target=run_engine,
            args=(graph, child_conn, current_logging(), engine_cpus()),
            name=f"engine-{graph.name}",
            daemon=True,
        )
        self._process.start()
        child_conn.close()
        self._conn = parent_conn
        self._frames = FrameReader(parent_conn.fileno())
        self.outbox: queue.SimpleQueue[bytes | memoryview | None] = queue.SimpleQueue()
        """Frames for the engine, in order; None ends the writer thread."""
        threading.Thread(
            target=_write_frames, args=(parent_conn, self.outbox), name=f"to-{graph.name}", daemon=True
        ).start()
        self._loop.add_reader(parent_conn.fileno(), self._on_readable)

    @property
    def pid(self) -> int | None:
        return self._process.pid

    def is_alive(self) -> bool:
        return self._process.is_alive()

    def kill(self) -> None:
        """Kill the process (its exit then reaches `on_exit`)."""
        self._process.kill()

    def exit_code(self) -> int | None:
        """The exit code once the process is gone (waits for it at most a second)."""
        self._process.join(1)
        return self._process.exitcode

    def detach(self) -> None:
        """Stop reading from the process: `on_exit` will not be called."""
        if self._conn is not None:
            self._loop.remove_reader(self._conn.fileno())
            self._frames.close()
            self._conn.close()
            self._conn = None

    async def shut_down(self, timeout: float) -> None:
        """Detach, ask the process to exit, kill it if it has not within `timeout`."""
        self.detach()
        self.outbox.put(encoder.encode(Shutdown()))
        self.outbox.put(None)
        deadline = time.monotonic() + timeout
        while self._process.is_alive() and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        if self._process.is_alive():
            self._process.kill()
        self._process.join(1)  # gone or killed by now: returns at once

    def _on_readable(self) -> None:
        try:
            # A message may detach this process (its handler stops or unloads the engine).
            for frame in self._frames.read():
                if self._conn is None:
                    break
                self._on_message(decode_from_engine(frame))
        except (EOFError, OSError):
            if self._conn is not None:
                self.detach()
                self._on_exit()


def _write_frames(conn, outbox: queue.SimpleQueue[bytes | memoryview | None]) -> None:
    # send_bytes blocks (GIL released) when the pipe is full; that wait belongs here, not on the loop.
    try:
        while (frame := outbox.get()) is not None:
            conn.send_bytes(frame)
    except (OSError, ValueError):
        pass
