"""Numbers on the command line: every numeric flag of every subcommand is read by a `Number` (or a
comma-separated `Numbers`), so `nan`, `inf`, `1e400` and a 401-digit integer are refused while the
flags are read, with argparse's one-line error and exit 2, as every other bad value is, instead of
a traceback or a ZeroDivisionError minutes into a run. `tests/unit/test_numbers.py` walks every
subcommand's numeric flags with such values.

`serve` and `config` build theirs from the bounds of the `Settings` fields (`of_meta`), so a flag,
its environment variable and its settings-file key share one range.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass

__all__ = ["SEED", "Number", "Numbers", "of_meta"]

_SHOWN = 24
"""Characters of a refused value repeated in the error (a 401-digit number is not)."""


@dataclass(frozen=True)
class Number:
    """An argparse `type`: text -> a finite int (`kind=int`) or float from `low` to `high`, each
    bound excluded when `low_open` / `high_open`; argparse.ArgumentTypeError otherwise."""

    kind: type[int] | type[float]
    low: float
    high: float
    low_open: bool = False
    high_open: bool = False

    def __call__(self, text: str) -> int | float:
        return self.read(text, text)

    def read(self, text: str, given: str) -> int | float:
        """`text` as a number in range; errors quote `given` (the whole flag value)."""
        try:
            value = self.kind(text.strip())
        except ValueError:
            value = None  # not a number, or an int of more digits than Python converts
        if value is None or (self.kind is float and not math.isfinite(value)) or not self._within(value):
            where = _quoted(text) if text == given else f"{_quoted(text.strip())} in {_quoted(given)}"
            raise argparse.ArgumentTypeError(f"{where} is not {self.describe()}")
        return value

    def describe(self) -> str:
        """`a whole number from 1 to 1000`, `a number above 0 and at most 3600`."""
        what = "a whole number" if self.kind is int else "a number"
        low, high = self._shown(self.low), self._shown(self.high)
        if not self.low_open and not self.high_open:
            return f"{what} from {low} to {high}"
        low = f"above {low}" if self.low_open else f"at least {low}"
        high = f"below {high}" if self.high_open else f"at most {high}"
        return f"{what} {low} and {high}"

    def _shown(self, bound: float) -> str:
        return str(int(bound)) if self.kind is int or float(bound).is_integer() else f"{bound:g}"

    def _within(self, value: float) -> bool:
        above = value > self.low if self.low_open else value >= self.low
        below = value < self.high if self.high_open else value <= self.high
        return above and below


@dataclass(frozen=True)
class Numbers:
    """An argparse `type`: `1,4,16` -> a tuple of at least one `number` (empty items skipped)."""

    number: Number

    def __call__(self, text: str) -> tuple[int | float, ...]:
        items = [item for item in text.split(",") if item.strip()]
        if not items:
            raise argparse.ArgumentTypeError(
                f"{_quoted(text)}: expected {self.number.describe()} or several, comma-separated"
            )
        return tuple(self.number.read(item, text) for item in items)


SEED = Number(int, -(2**63), 2**64 - 1)
"""A random seed: anything a 64-bit integer holds."""


def of_meta(kind: type[int] | type[float], ge=None, gt=None, le=None, lt=None) -> Number:
    """The Number of a msgspec field's bounds (`Settings`); ValueError for a field without both, so
    no numeric setting goes unbounded."""
    low, high = (ge if gt is None else gt), (le if lt is None else lt)
    if low is None or high is None:
        raise ValueError("a numeric setting needs a lower and an upper bound")
    return Number(kind, low, high, low_open=gt is not None, high_open=lt is not None)


def _quoted(text: str) -> str:
    return repr(text if len(text) <= _SHOWN else f"{text[:_SHOWN]}... ({len(text)} characters)")
