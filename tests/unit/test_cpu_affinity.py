"""`server_cpus`: which CPUs the server's threads take, and the engines' getting every CPU back."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from appliance.cpu_affinity import cpu_list, parse_server_cpus
from appliance.errors import ConfigError
from appliance.settings import load_settings

FOUR = frozenset({0, 1, 2, 3})


@pytest.mark.parametrize(
    ("choice", "allowed", "expected"),
    [
        ("auto", FOUR, {3}),
        ("auto", frozenset({2, 5}), {5}),  # the last CPU allowed, not the machine's last
        ("auto", frozenset({0}), None),  # one CPU: nothing to keep apart
        ("all", FOUR, None),
        (" ALL ", FOUR, None),
        ("3", FOUR, {3}),
        ("2,3", FOUR, {2, 3}),
        ("1-2", FOUR, {1, 2}),
        ("0, 2-3", FOUR, {0, 2, 3}),
        ("0-3", FOUR, None),  # every allowed CPU is no pinning
    ],
)
def test_choices(choice: str, allowed: frozenset[int], expected: set[int] | None) -> None:
    assert parse_server_cpus(choice, allowed) == expected


@pytest.mark.parametrize(
    ("choice", "words"),
    [
        ("4", "CPU 4 is not one this process may run on (0-3"),
        ("2-9", "CPU 4-9 is not one"),
        ("x", "'x' is not a CPU number or range"),
        ("3-1", "'3-1' is not a CPU number or range"),
        ("1,,2", "'' is not a CPU number or range"),
        ("-1", "'-1' is not a CPU number or range"),
    ],
)
def test_bad_choices_name_the_setting(choice: str, words: str) -> None:
    with pytest.raises(ConfigError, match="server_cpus") as error:
        parse_server_cpus(choice, FOUR)
    assert words in str(error.value)


def test_cpu_list_is_written_as_taskset_writes_it() -> None:
    assert cpu_list(frozenset({0, 1, 2, 5, 7, 8})) == "0-2,5,7-8"
    assert cpu_list(frozenset({3})) == "3"


def test_setting_defaults_to_auto_and_comes_from_the_environment() -> None:
    assert load_settings({}, environ={}).server_cpus == "auto"
    assert load_settings({}, environ={"APPLIANCE_SERVER_CPUS": "all"}).server_cpus == "all"


_PROBE = """
import json, os, threading, time
from appliance.cpu_affinity import engine_cpus, pin_server, restore_engine_cpus
started = threading.Event()
before = threading.Thread(target=lambda: (started.set(), time.sleep(1)), daemon=True)
before.start(); started.wait()
pinned = pin_server("auto")
later = {}
after = threading.Thread(target=lambda: later.update(cpus=sorted(os.sched_getaffinity(0))))
after.start(); after.join()
threads = {int(t): sorted(os.sched_getaffinity(int(t))) for t in os.listdir("/proc/self/task")}
widened = {}
def engine():
    restore_engine_cpus(engine_cpus())
    widened["cpus"] = sorted(os.sched_getaffinity(0))
t = threading.Thread(target=engine); t.start(); t.join()
print(json.dumps({"pinned": pinned and [sorted(pinned[0]), sorted(pinned[1])], "threads": sorted(threads.values()),
                  "later": later["cpus"], "engine": widened["cpus"]}))
"""


def test_pinning_holds_every_thread_and_an_engine_takes_every_cpu_back() -> None:
    # In a child process: pinning this test runner would slow the rest of the suite.
    allowed = sorted(os.sched_getaffinity(0))
    result = json.loads(subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, check=True).stdout)
    if len(allowed) < 2:
        assert result["pinned"] is None and result["engine"] == allowed
        return
    assert result["pinned"] == [[allowed[-1]], allowed]
    assert result["threads"] == [[allowed[-1]]] * len(result["threads"])  # the one started before too
    assert len(result["threads"]) >= 2
    assert result["later"] == [allowed[-1]]
    assert result["engine"] == allowed


_WORKER_PROBE = """
import asyncio, json, os
from appliance.connections import event_loop
from appliance.cpu_affinity import pin_server
pinned = pin_server("auto")
loop = event_loop()
main = sorted(os.sched_getaffinity(0))
worker = loop.run_until_complete(asyncio.to_thread(lambda: sorted(os.sched_getaffinity(0))))
print(json.dumps({"main": main, "worker": worker}))
"""


def test_the_loops_worker_threads_take_every_cpu_back() -> None:
    # Image decoding runs in asyncio.to_thread: sized by requests, it keeps the whole box.
    allowed = sorted(os.sched_getaffinity(0))
    result = json.loads(subprocess.run([sys.executable, "-c", _WORKER_PROBE], capture_output=True, check=True).stdout)
    assert result["worker"] == allowed
    assert result["main"] == (allowed[-1:] if len(allowed) >= 2 else allowed)
