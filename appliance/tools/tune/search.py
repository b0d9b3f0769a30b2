"""The search of `appliance tune`: the graph as it is, then each lever's values on top of the best
form so far (`levers`), within a time budget; then the winner and the graph as it was measured
again, alternately, so the ratio written into the graph compares runs seconds apart."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from appliance.tools.tune.levers import MAX_LOSS, Form, Lever, Measured, better, perplexity_loss

__all__ = ["Measure", "Outcome", "search"]

Measure = Callable[[Form], Measured]
_CONFIRM_ROUNDS = 2
"""More measurements of the winner and the graph as it was, alternately, after the search."""
_CONFIRMED_GAIN = 0.01
"""The median gain over those rounds below which the graph stays as it was."""


@dataclass
class Outcome:
    reference: Measured
    best: Measured
    tried: list[Measured] = field(default_factory=list)
    one_stream_ratio: float = 1.0
    """The winner's one-stream tokens/s over the graph as it was: median of the alternate rounds."""
    busy_ratio: float = 1.0
    out_of_time: bool = False

    @property
    def changed(self) -> bool:
        return self.best.form != self.reference.form


def search(
    levers: list[Lever],
    measure: Measure,
    *,
    budget: float,
    log: Callable[[str], None],
    max_perplexity_loss: float = 0.0,
) -> Outcome:
    """The best form within `budget` seconds (the confirmation rounds come on top of it);
    `max_perplexity_loss` as `levers.better` takes it."""
    started = time.monotonic()
    total = 1 + sum(len(lever.values) for lever in levers)
    # The first form measured on a box that was idle runs cold (measured on demo-smol, AVX2 EPYC:
    # 30.9 tok/s, then 41-42 for the same settings): a first run of the graph as it is warms it.
    measure(Form())
    reference = measure(Form())
    log(_line(1, total, reference, reference, started, "the graph as it is"))
    if reference.error:
        raise RuntimeError(f"the graph as it is cannot be measured: {reference.error}")
    outcome = Outcome(reference=reference, best=reference, tried=[reference])
    step = 1
    for lever in levers:
        for value in lever.values:
            if time.monotonic() - started > budget:
                outcome.out_of_time = True
                log(f"time budget of {budget:.0f} s spent: {total - step} forms not tried")
                return _confirmed(outcome, measure, log)
            step += 1
            candidate = measure(outcome.best.form.with_change(lever.key, value))
            outcome.tried.append(candidate)
            kept = better(candidate, outcome.best, reference, max_perplexity_loss)
            if kept:
                outcome.best = candidate
            log(_line(step, total, candidate, reference, started, "kept" if kept else ""))
    return _confirmed(outcome, measure, log)


def _confirmed(outcome: Outcome, measure: Measure, log: Callable[[str], None]) -> Outcome:
    """The ratios of the winner to the graph as it was, from alternate rounds (the search's own
    pair counted): a winner whose median gain is gone is dropped."""
    if not outcome.changed:
        return outcome
    pairs = [(outcome.best, outcome.reference)]
    for round_ in range(_CONFIRM_ROUNDS):  # the order flips each round: neither always goes first
        if round_ % 2:
            best = measure(outcome.best.form)
            reference = measure(outcome.reference.form)
        else:
            reference = measure(outcome.reference.form)
            best = measure(outcome.best.form)
        pairs.append((best, reference))
    good = [(best, ref) for best, ref in pairs if not best.error and not ref.error and ref.one_stream and ref.busy]
    outcome.one_stream_ratio = statistics.median(best.one_stream / ref.one_stream for best, ref in good)
    outcome.busy_ratio = statistics.median(best.busy / ref.busy for best, ref in good)
    log(
        f"confirmed over {len(good)} rounds: {outcome.best.form.describe()} gives "
        f"{outcome.one_stream_ratio:.2f}x at one stream, {outcome.busy_ratio:.2f}x busy"
    )
    if outcome.one_stream_ratio < 1 + _CONFIRMED_GAIN or outcome.busy_ratio < 1 - MAX_LOSS:
        log("the gain did not hold: the graph stays as it is")
        outcome.best, outcome.one_stream_ratio, outcome.busy_ratio = outcome.reference, 1.0, 1.0
    return outcome


def _line(step: int, total: int, measured: Measured, reference: Measured, started: float, note: str) -> str:
    elapsed = time.monotonic() - started
    head = f"[{step}/{total}] {elapsed:5.0f} s  {measured.form.describe()}: "
    if measured.error:
        return head + f"failed ({measured.error})"
    ratio = measured.one_stream / reference.one_stream if reference.one_stream else 0.0
    busy = measured.busy / reference.busy if reference.busy else 0.0
    same = "same greedy tokens" if measured.tokens == reference.tokens else "DIFFERENT greedy tokens"
    if measured.perplexity is not None:
        loss = perplexity_loss(measured, reference)
        same += f", perplexity {measured.perplexity:.2f}" + (f" ({loss:+.1%})" if measured is not reference else "")
    return (
        head + f"{measured.one_stream:.1f} tok/s one stream ({ratio:.2f}x), {measured.busy:.1f} busy ({busy:.2f}x), "
        f"{same}" + (f"; {note}" if note else "")
    )
