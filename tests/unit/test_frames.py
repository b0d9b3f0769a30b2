"""FrameReader cuts multiprocessing's frames out of a socket without blocking, whatever the way the
bytes arrive: several frames at once, a frame in pieces, a large frame, the other end closing."""

from __future__ import annotations

import multiprocessing
import os
import threading

import pytest

from appliance.engine.host.frames import FrameReader


@pytest.fixture
def pipe():
    ours, theirs = multiprocessing.get_context("spawn").Pipe(duplex=True)
    reader = FrameReader(ours.fileno())
    yield reader, ours, theirs
    reader.close()
    ours.close()
    theirs.close()


def test_nothing_waiting_returns_no_frame(pipe) -> None:
    reader, _, _ = pipe
    assert reader.read() == []


def test_frames_sent_together_are_all_read_in_order(pipe) -> None:
    reader, _, theirs = pipe
    frames = [b"one", b"", b"three" * 1000, bytes(range(256))]
    for frame in frames:
        theirs.send_bytes(frame)
    assert reader.read() == frames


def test_a_frame_in_pieces_is_returned_once_whole(pipe) -> None:
    reader, _, theirs = pipe
    raw = theirs.fileno()  # write a frame's bytes a few at a time
    frame = b"x" * 10
    header = len(frame).to_bytes(4, "big")
    os.write(raw, header[:2])
    assert reader.read() == []
    os.write(raw, header[2:] + frame[:5])
    assert reader.read() == []
    os.write(raw, frame[5:])
    assert reader.read() == [frame]


def test_a_frame_larger_than_one_read_arrives_whole(pipe) -> None:
    reader, _, theirs = pipe
    large = bytes(range(256)) * (40 << 10)  # 10 MiB: larger than the socket's buffer
    writer = threading.Thread(target=theirs.send_bytes, args=(large,))
    writer.start()
    got: list[bytes] = []
    while not got:
        got = reader.read()
    writer.join()
    assert got == [large]


def test_the_other_end_closing_is_eof_after_the_last_frame(pipe) -> None:
    reader, _, theirs = pipe
    theirs.send_bytes(b"last")
    theirs.close()
    assert reader.read() == [b"last"]
    with pytest.raises(EOFError):
        reader.read()


def test_the_connection_still_reads_what_frame_reader_leaves(pipe) -> None:
    # The server's writer thread sends on the same socket: MSG_DONTWAIT leaves it blocking.
    reader, ours, theirs = pipe
    ours.send_bytes(b"to the engine")
    assert theirs.recv_bytes() == b"to the engine"
    assert reader.read() == []
