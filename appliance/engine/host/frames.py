"""Frames from an engine's pipe, read on the event loop without ever blocking it.

The engine writes with `multiprocessing.Connection.send_bytes`: each frame is a 4-byte big-endian
signed length (-1, then an 8-byte length, for frames of 2 GiB and more) and the bytes. Reading
them with `Connection.poll()` and `recv_bytes()` cost the server about a quarter of its CPU per
streamed token (measured with py-spy on a one-stream run): `poll()` builds a new selector on every
call, and `recv_bytes()` reads the header and the body in separate system calls (and blocks until
a frame that has only begun to arrive is whole). Here the socket is read in large non-blocking
chunks (`MSG_DONTWAIT`, which leaves the socket's flags alone: the writer thread's `send_bytes`
on the same socket still blocks while the pipe is full) and the frames are cut out of a buffer.
"""

from __future__ import annotations

import os
import socket

__all__ = ["FrameReader"]

_CHUNK = 1 << 20
_MAX_PER_CALL = 16 << 20
"""Bytes read in one `read()` at most: a huge frame still arriving leaves the loop free between
calls (the loop calls again while the socket is readable)."""


class FrameReader:
    """Whole frames from a `multiprocessing` connection's socket, as they become available."""

    def __init__(self, fileno: int) -> None:
        self._socket = socket.socket(fileno=os.dup(fileno))
        self._buffer = bytearray()
        self._chunk = memoryview(bytearray(_CHUNK))
        """Reused for every read: a fresh 1 MiB bytes per read is an mmap and munmap each time."""

    def read(self) -> list[bytes]:
        """The frames that are complete now (maybe none); EOFError once the other end has closed
        and every whole frame has been returned."""
        closed = False
        received = 0
        while received < _MAX_PER_CALL:
            try:
                size = self._socket.recv_into(self._chunk, _CHUNK, socket.MSG_DONTWAIT)
            except (BlockingIOError, InterruptedError):
                break
            if not size:
                closed = True
                break
            self._buffer += self._chunk[:size]
            received += size
            if size < _CHUNK:
                break  # drained (a larger read would only say so)
        frames = self._frames()
        if closed and not frames:
            raise EOFError
        return frames

    def close(self) -> None:
        self._socket.close()

    def _frames(self) -> list[bytes]:
        buffer, start, frames = self._buffer, 0, []
        while len(buffer) - start >= 4:
            size = int.from_bytes(buffer[start : start + 4], "big", signed=True)
            header = 4
            if size == -1:
                if len(buffer) - start < 12:
                    break
                size, header = int.from_bytes(buffer[start + 4 : start + 12], "big"), 12
            if len(buffer) - start - header < size:
                break
            frames.append(bytes(buffer[start + header : start + header + size]))
            start += header + size
        del buffer[:start]
        return frames
