"""Stop strings found in text that arrives piece by piece, in time linear in the text.

Each stop string gets a Knuth-Morris-Pratt automaton whose state, the longest end of the text so
far that begins the stop string, carries over from one piece to the next. So every character is
looked at a bounded number of times however long the text grows, and the states also say how
much text to hold back (it may begin a stop string). The scan this replaces tried every length of
the held-back text at every step, work growing with its square: four 100,000-character stop
strings that the output kept beginning made a request run 30-70 s instead of 1 s, and held up
every stream of the model (issue 28). Their length is bounded too (`limits.max_stop_sequence_chars`).
"""

from __future__ import annotations

__all__ = ["StopStringMatcher"]


def _borders(stop: str) -> list[int]:
    """`borders[k]`: length of the longest proper prefix of `stop[:k]` that also ends it."""
    borders = [0] * (len(stop) + 1)
    length = 0
    for position in range(1, len(stop)):
        while length and stop[position] != stop[length]:
            length = borders[length]
        if stop[position] == stop[length]:
            length += 1
        borders[position + 1] = length
    return borders


class StopStringMatcher:
    """The first stop string to complete in the text fed so far, and how many characters at its
    end may begin one."""

    def __init__(self, stops: tuple[str, ...]) -> None:
        self._stops = stops
        self._borders = [_borders(stop) for stop in stops]
        self._states = [0] * len(stops)
        self.length = 0
        """Characters fed so far."""
        self.match: tuple[int, int] | None = None
        """(start, end) of the stop string that completed first (the longest of those ending
        there), as `str.find` over the whole text would place it; None until one does."""
        self.examined = 0
        """Characters compared or skipped over, for every stop string (a unit test checks that it
        grows linearly with the text)."""

    @property
    def held(self) -> int:
        """Characters at the end of the text that begin a stop string (none has completed yet)."""
        return max(self._states, default=0)

    def feed(self, text: str) -> None:
        if self.match is None:
            ends = []
            for index, stop in enumerate(self._stops):
                end = self._advance(index, text)
                if end is not None:
                    ends.append((end, end - len(stop)))
            if ends:
                end, start = min(ends)
                self.match = start, end
        self.length += len(text)

    def _advance(self, index: int, text: str) -> int | None:
        """Run stop string `index`'s automaton over `text`: where it completes (an offset in the
        whole text), or None."""
        stop, borders, state = self._stops[index], self._borders[index], self._states[index]
        position, examined = 0, 0
        while position < len(text):
            if state == 0:
                # Nothing begun: jump to the stop string's first character (a scan in C).
                found = text.find(stop[0], position)
                examined += (len(text) if found < 0 else found + 1) - position
                if found < 0:
                    break
                state, position = 1, found + 1
            else:
                examined += 1
                if text[position] == stop[state]:
                    state, position = state + 1, position + 1
                else:
                    # The longest shorter beginning still under way; the same character is tried
                    # against it (states only fall as often as they rose: linear overall).
                    state = borders[state]
                    continue
            if state == len(stop):
                self.examined += examined
                self._states[index] = 0
                return self.length + position
        self.examined += examined
        self._states[index] = state
        return None
