"""The engine's queue of commands from the server, which drops those whose client already left.

A command waits here while the engine steps or prepares the ones before it. When its client leaves
meanwhile, the server sends `Cancel` right behind it; the thread reading the pipe notes the
cancelled id as the `Cancel` arrives, so the engine skips the waiting command (a `Submit`,
`Tokenize`, any task's) instead of rendering and tokenizing a prompt for nobody (each can take a large share
of a second, on the thread that steps every stream of the model).
"""

from __future__ import annotations

import queue
import time

from appliance.engine.messages import COMMANDS, Cancel

__all__ = ["Inbox"]


class Inbox:
    """Commands in the order the server sent them, less those cancelled before they were taken."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._cancelled: set[int] = set()
        """Ids of `Cancel`s put and not yet taken (the command each cancels comes before it)."""

    def put(self, command: object) -> None:
        """Add a command (the pipe's reader thread)."""
        if isinstance(command, Cancel):
            self._cancelled.add(command.request_id)
        self._queue.put(command)

    def get(self, timeout: float | None = None) -> object:
        """The next command still wanted; raises queue.Empty after `timeout` seconds without one."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            command = self._queue.get(timeout=remaining)
            if self._wanted(command):
                return command

    def get_nowait(self) -> object:
        """The next command still wanted; raises queue.Empty when none waits."""
        while True:
            command = self._queue.get_nowait()
            if self._wanted(command):
                return command

    def _wanted(self, command: object) -> bool:
        if isinstance(command, Cancel):
            # Every command of this request was taken before it: nothing left to skip.
            self._cancelled.discard(command.request_id)
            return True
        if isinstance(command, COMMANDS):
            return command.request_id not in self._cancelled
        return True
