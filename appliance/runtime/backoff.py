"""How soon a dead engine process is started again: quickly at first, then less often, so that a
model that keeps crashing (a bad driver, memory) does not spin the machine while the others serve."""

from __future__ import annotations

__all__ = ["RESTART_DELAYS_S", "restart_delay"]

RESTART_DELAYS_S = (1.0, 2.0, 5.0, 10.0, 30.0)
"""Seconds before the 1st, 2nd, ... restart in a row; the last one repeats. A restart that reaches
`ready` resets the count."""


def restart_delay(restarts: int) -> float:
    """Seconds to wait before restarting after `restarts` restarts in a row."""
    return RESTART_DELAYS_S[min(restarts, len(RESTART_DELAYS_S) - 1)]
