"""Where the speech engine cuts a recording longer than Whisper's window (`speech_pieces`)."""

from __future__ import annotations

import numpy as np

from appliance.engine.worker.speech_pieces import PIECE_SAMPLES, SEARCH_SECONDS, WHOLE_SAMPLES, cut_points, joined

RATE = 16_000


def _tone(seconds: float) -> np.ndarray:
    return (0.5 * np.sin(np.arange(int(seconds * RATE)) * 0.05)).astype(np.float32)


def _pause(seconds: float) -> np.ndarray:
    return np.zeros(int(seconds * RATE), dtype=np.float32)


def _covers(pieces: list[tuple[int, int]], total: int) -> None:
    assert pieces[0][0] == 0 and pieces[-1][1] == total
    assert all(end == start for (_, end), (start, _) in zip(pieces, pieces[1:], strict=False))
    assert all(0 < end - start <= PIECE_SAMPLES for start, end in pieces)


def test_a_recording_within_one_window_is_read_whole() -> None:
    assert cut_points(_tone(5)) == [(0, 5 * RATE)]
    assert cut_points(_tone(29)) == [(0, WHOLE_SAMPLES)]
    assert cut_points(np.zeros(0, dtype=np.float32)) == [(0, 0)]


def test_a_cut_falls_in_the_pause() -> None:
    # 12 s of sound, a 300 ms pause, 20 s more: the first cut is inside the pause.
    audio = np.concatenate([_tone(12), _pause(0.3), _tone(20)])
    pieces = cut_points(audio)
    _covers(pieces, len(audio))
    assert 12 * RATE < pieces[0][1] < 12.3 * RATE


def test_of_equal_pauses_the_earliest_in_reach() -> None:
    audio = np.concatenate([_tone(5), _pause(0.5), _tone(6), _pause(0.5), _tone(2), _pause(0.5), _tone(30)])
    pieces = cut_points(audio)
    _covers(pieces, len(audio))
    # The pause at 5 s is before the reach (the last SEARCH_SECONDS before a piece's longest
    # end); those at 11.5 s and 14 s are in it.
    assert PIECE_SAMPLES - SEARCH_SECONDS * RATE < pieces[0][1] < 12 * RATE


def test_sound_without_a_pause_is_cut_within_the_longest_piece() -> None:
    audio = np.random.default_rng(7).normal(0, 0.2, 95 * RATE).astype(np.float32)
    pieces = cut_points(audio)
    _covers(pieces, len(audio))
    assert 7 <= len(pieces) <= 10
    # The last piece is never a sliver WhisperPipeline would refuse (it takes 201 samples or more).
    assert pieces[-1][1] - pieces[-1][0] > 1000


def test_the_pieces_texts_join_with_one_space() -> None:
    assert joined([" The capital.", " Of France.", "is Paris."]) == " The capital. Of France. is Paris."
    assert joined(["", " one", ""]) == " one"
    assert joined([]) == ""
