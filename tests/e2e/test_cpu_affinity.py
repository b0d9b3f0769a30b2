"""`server_cpus` on the real server: its threads on the last CPU (auto), every engine thread on all."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from appliance.cpu_affinity import parse_server_cpus
from appliance.tools.launch import ServerProcess
from tests.conftest import copy_demo_graphs, running_server
from tests.images import data_url, encode, noise


def _allowed(pid: int) -> list[frozenset[int]]:
    """Each thread's CPUs, as the kernel has them."""
    masks = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            masks.append(frozenset(os.sched_getaffinity(int(task.name))))
        except ProcessLookupError:
            continue  # a thread that has just ended
    return masks


def test_server_threads_on_one_cpu_and_engines_on_every_cpu(server) -> None:
    allowed = frozenset(os.sched_getaffinity(0))
    expected = parse_server_cpus("auto", allowed) or allowed
    pid = server.process.pid
    assert frozenset(os.sched_getaffinity(pid)) == expected  # the event loop's thread
    # The rest: the engine pipes' writers (pinned), and the loop's workers once used (image
    # decoding: every CPU).
    image = {"type": "image_url", "image_url": {"url": data_url(encode(noise(64, 64)))}}
    reply = server.client().chat.completions.create(
        model="demo-vision", messages=[{"role": "user", "content": [image]}], max_tokens=2
    )
    assert reply.choices[0].finish_reason in ("stop", "length")
    server_threads = _allowed(pid)
    assert set(server_threads) <= {expected, allowed}
    assert server_threads.count(expected) >= 2
    if expected != allowed:
        assert allowed in server_threads  # the worker that decoded the image
    engines = {name: status["pid"] for name, status in server.health()["models"].items() if status["pid"]}
    assert engines
    for name, pid in engines.items():
        threads = _allowed(pid)
        assert len(threads) >= 2, name  # OpenVINO's pool is running
        assert set(threads) == {allowed}, name
    if len(allowed) >= 2:
        assert expected != allowed and "server threads on CPU" in server.log_path.read_text()


def test_server_cpus_all_leaves_the_server_unpinned(demo_root: Path, tmp_path: Path) -> None:
    allowed = frozenset(os.sched_getaffinity(0))
    graphs = copy_demo_graphs(demo_root, tmp_path / "graphs", ["demo-chat"])
    with running_server(graphs, tmp_path / "server.log", "--server-cpus", "all") as server:
        assert set(_allowed(server.process.pid)) == {allowed}
        assert "server threads on CPU" not in server.log_path.read_text()


def test_a_cpu_the_server_may_not_use_is_a_clear_start_up_error(demo_root: Path, tmp_path: Path) -> None:
    graphs = copy_demo_graphs(demo_root, tmp_path / "graphs", ["demo-chat"])
    beyond = max(os.sched_getaffinity(0)) + 1
    process = ServerProcess.start(graphs, tmp_path / "server.log", "--server-cpus", str(beyond))
    code = process.process.wait(60)
    output = process.log_path.read_text()
    assert code != 0
    assert f"server_cpus: CPU {beyond} is not one this process may run on" in output
    assert "Traceback" not in output


_OPENVINO_PROBE = """
import multiprocessing, os


def engine(cpus):
    from appliance.engine.worker.process import restore_engine_cpus  # what the engine's main() calls first

    restore_engine_cpus(cpus)
    import numpy as np
    import openvino as ov
    from openvino import opset13 as ops

    parameter = ops.parameter([1, 8], np.float32)
    compiled = ov.Core().compile_model(ov.Model([ops.relu(parameter)], [parameter]), "CPU")
    print(compiled.get_property("INFERENCE_NUM_THREADS"), flush=True)


if __name__ == "__main__":
    from appliance.cpu_affinity import engine_cpus, pin_server

    pin_server("auto")
    context = multiprocessing.get_context("spawn")
    for cpus in (engine_cpus(), None):
        process = context.Process(target=engine, args=(cpus,))
        process.start()
        process.join()
"""


def test_openvino_in_an_engine_process_sizes_its_pool_for_every_cpu(tmp_path: Path) -> None:
    # OpenVINO takes its thread count from the mask it starts with: an engine that kept the
    # server's one CPU would compute on one thread (the second line shows that it would).
    allowed = os.sched_getaffinity(0)
    script = tmp_path / "probe.py"
    script.write_text(_OPENVINO_PROBE)
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, check=True, timeout=120)
    restored, kept = (int(line) for line in run.stdout.split())
    assert restored == len(allowed)
    if len(allowed) >= 2:
        assert kept == 1
