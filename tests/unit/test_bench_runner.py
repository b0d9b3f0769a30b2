"""The bench's two schedules, on players that record what they are asked (no model, no server):
systems in turns, each up for its own turn only, or (`--interleave`) all up at once, taking turns
level by level and round by round with the order flipped each round."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from appliance.tools.bench.metrics import RequestResult, summarize
from appliance.tools.bench.report import Level, System, SystemRun
from appliance.tools.bench.runner import _interleaved, _Player, _round
from appliance.tools.bench.workload import Load, Prompt, Workload

LOADS = (Load(requests=1, concurrency=1), Load(requests=1, concurrency=4))
WORKLOAD = Workload(LOADS, prompt_tokens=8, output_tokens=2)


def _run() -> SystemRun:
    result = RequestResult(ok=True, prompt_tokens=8, output_tokens=2, chunk_times=[0.1, 0.2], latency=0.2)
    return SystemRun(summarize([result], concurrency=1, duration_s=1.0, prompt_tokens=8, output_tokens=2))


def _players(
    log: list[str], names: tuple[str, ...] = ("appliance", "raw")
) -> Iterator[contextlib.AbstractContextManager[_Player]]:
    for name in names:

        @contextlib.contextmanager
        def player(name: str = name) -> Iterator[_Player]:
            log.append(f"start {name}")

            def measure(load: Load, prompts: list[Prompt]) -> SystemRun:
                log.append(f"{name} {load.label} {prompts[0].text}")
                return _run()

            yield _Player(System(name, None, "test"), measure)
            log.append(f"stop {name}")

        yield player()


def _prompts(rounds: int) -> list[list[Prompt]]:
    """One list per round and level, in that order, each naming its slot."""
    return [[Prompt(text=f"r{r}l{level}", ids=(1,))] for r in range(rounds) for level in range(len(LOADS))]


def test_rounds_start_each_system_for_its_own_turn() -> None:
    log: list[str] = []
    levels = [Level(load) for load in LOADS]
    slices = _prompts(1)
    systems = _round(_players(log), WORKLOAD, slices, levels)
    assert [system.name for system in systems] == ["appliance", "raw"]
    assert log == [
        "start appliance", "appliance c=1 r0l0", "appliance c=4 r0l1", "stop appliance",
        "start raw", "raw c=1 r0l0", "raw c=4 r0l1", "stop raw",
    ]  # fmt: skip


def test_interleave_takes_turns_per_level_and_flips_the_order_each_round() -> None:
    log: list[str] = []
    levels = [Level(load) for load in LOADS]
    systems = _interleaved(_players(log), WORKLOAD, _prompts(2), levels, repeat=2, say=lambda line: None)
    assert [system.name for system in systems] == ["appliance", "raw"]
    assert log == [
        "start appliance", "start raw",
        "appliance c=1 r0l0", "raw c=1 r0l0", "raw c=1 r1l0", "appliance c=1 r1l0",
        "appliance c=4 r0l1", "raw c=4 r0l1", "raw c=4 r1l1", "appliance c=4 r1l1",
        "stop raw", "stop appliance",
    ]  # fmt: skip
    # Each level holds both rounds of each system, so every round has its ratio.
    assert [len(level.rounds["appliance"]) for level in levels] == [2, 2]
    assert levels[0].round_ratios("appliance") == [1.0, 1.0]
