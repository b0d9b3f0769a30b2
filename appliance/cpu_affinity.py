"""Which CPUs the server's own threads run on (`server_cpus`), and the engines' (all of them).

An engine keeps every core busy while it decodes: OpenVINO's threads wait actively between their
parallel sections, so the engine process uses about two cores of two (docs/bench.md). Each step's
tokens reach the server as a write on the engine's pipe, and Linux wakes the reader of a socket on
the writer's CPU (a "sync" wake-up: it expects the writer to sleep next). The engine's thread does
not sleep, it calls `step()`, and it waited there while the server handled the tokens in its place:
the write that hands tokens over took 0.36 ms where the system call takes microseconds. With the
server held to one CPU (the last one it may use), its work no longer lands on the stepping thread
by design; measured at one stream of demo-smol on two cores, served/raw rose by about 3%
(docs/bench.md, "Where the server runs").

The event loop's worker threads (`asyncio.to_thread`: image decoding and the like, work sized by
a request rather than per token) take every CPU back as they start (`unpin_this_thread`), so an
image-heavy load decodes on all cores as before.

Engine processes are spawned by the server and inherit its mask: `restore_engine_cpus` gives them
back every CPU the server was allowed before it pinned itself, first thing in the engine process,
before OpenVINO sizes its thread pool from the mask.
"""

from __future__ import annotations

import contextlib
import logging
import os

from appliance.errors import ConfigError

__all__ = ["cpu_list", "engine_cpus", "parse_server_cpus", "pin_server", "restore_engine_cpus", "unpin_this_thread"]

log = logging.getLogger("appliance.server")

_engine_cpus: frozenset[int] | None = None
"""The CPUs the server could use before it pinned itself (None: it did not): the engines' CPUs."""


def parse_server_cpus(choice: str, allowed: frozenset[int]) -> frozenset[int] | None:
    """The CPUs `choice` names for the server's threads, or None to leave them unpinned.

    `auto`: the last allowed CPU when there are two or more (one CPU is left as it is); `all`:
    unpinned; else a list of CPUs such as `3`, `2,3` or `6-7`, all of them allowed.
    """
    choice = choice.strip().lower()
    if choice == "all" or (choice == "auto" and len(allowed) < 2):
        return None
    if choice == "auto":
        return frozenset({max(allowed)})
    cpus: set[int] = set()
    for part in (item.strip() for item in choice.split(",")):
        first, _, last = part.partition("-")
        if not (first.isdigit() and (not last or last.isdigit())) or (last and int(last) < int(first)):
            raise ConfigError(
                f"server_cpus: '{part}' is not a CPU number or range; use auto, all, or a list such as 3, 2,3 or 6-7"
            )
        cpus.update(range(int(first), int(last or first) + 1))
    if not cpus <= allowed:
        raise ConfigError(
            f"server_cpus: CPU {cpu_list(frozenset(cpus - allowed))} is not one this process may run on "
            f"({cpu_list(allowed)}: the machine's, narrowed by taskset, systemd's CPUAffinity= or a cgroup)"
        )
    return None if cpus == allowed else frozenset(cpus)


def pin_server(choice: str) -> tuple[frozenset[int], frozenset[int]] | None:
    """Hold every thread of this process (and those it starts later) to the CPUs `choice` names;
    returns (server CPUs, engine CPUs), or None when nothing was pinned. Call it before the
    engines start."""
    global _engine_cpus
    allowed = frozenset(os.sched_getaffinity(0))
    cpus = parse_server_cpus(choice, allowed)
    if cpus is None:
        return None
    # sched_setaffinity applies to one thread: this one first (a refusal then leaves every thread
    # as it was), then the others running; threads started later inherit it from their starter.
    try:
        os.sched_setaffinity(0, cpus)
    except PermissionError:  # a seccomp profile that refuses the call (a container's)
        log.warning("server_cpus = %s: this process may not set its CPUs (EPERM); not pinned", choice)
        return None
    for thread_id in os.listdir("/proc/self/task"):
        with contextlib.suppress(ProcessLookupError):  # a thread that has just ended
            os.sched_setaffinity(int(thread_id), cpus)
    _engine_cpus = allowed
    return cpus, allowed


def engine_cpus() -> frozenset[int] | None:
    """What an engine process must widen its mask to (None: the server is not pinned)."""
    return _engine_cpus


def unpin_this_thread() -> None:
    """Give the calling thread every CPU the server gave up: worker threads (image decoding,
    decompression, /metrics) do work sized by requests, not per token, and keep the whole box
    for it as before."""
    restore_engine_cpus(_engine_cpus)


def restore_engine_cpus(cpus: frozenset[int] | None) -> None:
    """In an engine process: take back the CPUs the server gave up (before OpenVINO starts)."""
    if cpus:
        os.sched_setaffinity(0, cpus)


def cpu_list(cpus: frozenset[int]) -> str:
    """`{0, 1, 2, 5}` -> `0-2,5`, as taskset and /proc write CPU lists."""
    ordered, runs = sorted(cpus), []
    for cpu in ordered:
        if runs and cpu == runs[-1][1] + 1:
            runs[-1][1] = cpu
        else:
            runs.append([cpu, cpu])
    return ",".join(f"{first}-{last}" if last > first else f"{first}" for first, last in runs)
