"""Finding where a call block ends in a model's text as it streams, in time linear in the text.

Model output is untrusted input: a model can be led to write a 128 KB call name, a call that never
closes, or a closing marker inside an argument's string. A scanner is fed the text of one block
piece by piece and remembers where it got to (its state, and at most a marker's length of text
that may be the start of a marker), so each character is looked at once however small the pieces:
re-searching the whole block at every delta made a 128 KB call cost 26 s of event-loop time.

- `JsonScanner`: the block holds JSON (hermes, phi4_mini, deepseek_r1, harmony): a closing marker
  inside a JSON string is part of the string. Strings are tracked inside brackets only, so a quote
  in a name written before the JSON (`to=functions.NAME`, deepseek's name line) opens none.
- `TagScanner`: the block holds values between tags (qwen3_coder's `<parameter=...>`, glm45's
  `<arg_value>`): a closing marker inside a value is part of the value, which ends at its own tag.

`blank_end`, `held_back` and `may_become` are the small pieces every splitter of streamed text shares.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

__all__ = ["JsonScanner", "Scanner", "TagScanner", "blank_end", "held_back", "may_become"]

_BLANK = re.compile(r"\s*+")

_STRING_BODY = re.compile(r'[^"\\]*+(?:\\[\s\S][^"\\]*+)*+')
"""A JSON string's characters up to its closing quote (or a backslash ending the text)."""


def blank_end(text: str, position: int) -> int:
    """Where the whitespace from `position` in `text` ends."""
    return _BLANK.match(text, position).end()  # type: ignore[union-attr]  # `\s*+` always matches


def held_back(text: str, tokens: Iterable[str], start: int = 0) -> int:
    """Length of the longest end of `text[start:]` that could be the start of one of `tokens`
    (never a whole token): the text a stream holds until the next piece tells."""
    longest = 0
    for token in tokens:
        for length in range(min(len(token) - 1, len(text) - start), longest, -1):
            if text.endswith(token[:length]):
                longest = length
                break
    return longest


def may_become(text: str, start: int, tokens: Iterable[str]) -> bool:
    """`text[start:]` (maybe empty) is the start of one of `tokens`, not yet a whole one."""
    return held_back(text, tokens, start) == len(text) - start


class Scanner:
    """Finds the first end marker of a block fed piece by piece (the block's opening marker
    excluded), skipping the spans the format says hide markers."""

    def __init__(self, ends: tuple[str, ...]) -> None:
        self.ends = ends
        self._carry = ""  # the end of the last piece, when it may be the start of a marker

    def feed(self, text: str, start: int = 0) -> tuple[int, str] | None:
        """(the position in `text` just past the end marker, the marker) when `text[start:]`
        holds the end, else None (the scanner remembers where it got to). The marker may have
        begun in an earlier piece."""
        carry, self._carry = self._carry, ""
        if carry:
            text, offset, start = carry + text[start:], start - len(carry), 0
        else:
            offset = 0
        found = self._scan(text, start)
        return None if found is None else (found[0] + offset, found[1])

    def _scan(self, text: str, position: int) -> tuple[int, str] | None:
        raise NotImplementedError

    def _hold(self, text: str, position: int, tokens: Iterable[str]) -> None:
        keep = held_back(text, tokens, position)
        self._carry = text[len(text) - keep :] if keep else ""


class JsonScanner(Scanner):
    """Ends are found outside JSON strings; a string opens only inside an object or array."""

    def __init__(self, ends: tuple[str, ...]) -> None:
        super().__init__(ends)
        firsts = re.escape("".join(sorted({end[0] for end in ends})))
        self._plain = re.compile(rf'[^"{{}}\[\]{firsts}]*+')
        self._longest = max(len(end) for end in ends)
        self._depth = 0
        self._in_string = False

    def _scan(self, text: str, position: int) -> tuple[int, str] | None:
        size = len(text)
        while position < size:
            if self._in_string:
                position = _STRING_BODY.match(text, position).end()  # type: ignore[union-attr]  # always matches
                if position == size:
                    return None
                if text[position] == '"':
                    self._in_string = False
                    position += 1
                    continue
                self._carry = "\\"  # a backslash ending the piece: what it escapes comes next
                return None
            position = self._plain.match(text, position).end()  # type: ignore[union-attr]  # always matches
            if position == size:
                return None
            char = text[position]
            if char in "{[":
                self._depth += 1
            elif char in "}]":
                self._depth = max(self._depth - 1, 0)
            elif char == '"':
                self._in_string = self._depth > 0
            else:
                for end in self.ends:
                    if text.startswith(end, position):
                        return position + len(end), end
                if size - position < self._longest and any(end.startswith(text[position:]) for end in self.ends):
                    self._carry = text[position:]
                    return None
            position += 1
        return None


class TagScanner(Scanner):
    """Ends are found outside the regions `regions` maps (an opening tag to its closing tag)."""

    def __init__(self, ends: tuple[str, ...], regions: Mapping[str, str]) -> None:
        super().__init__(ends)
        self._regions = regions
        self._outside = re.compile("|".join(re.escape(tag) for tag in (*ends, *regions)))
        self._closing = ""  # the tag that closes the region the scan is in

    def _scan(self, text: str, position: int) -> tuple[int, str] | None:
        while True:
            if self._closing:
                at = text.find(self._closing, position)
                if at < 0:
                    self._hold(text, position, (self._closing,))
                    return None
                position, self._closing = at + len(self._closing), ""
            match = self._outside.search(text, position)
            if match is None:
                self._hold(text, position, (*self.ends, *self._regions))
                return None
            tag = match.group()
            if tag not in self._regions:
                return match.end(), tag
            position, self._closing = match.end(), self._regions[tag]
