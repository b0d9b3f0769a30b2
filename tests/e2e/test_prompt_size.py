"""One bound on prompt size on every route, and /tokenize admitted like a generation (issue 28,
items 2 and 3).

Found by a hostile-client probe: six concurrent 20 MB `/tokenize` bodies kept demo-chat silent for
92-120 s (its watchdog killed it in 2 of 4 runs); a 30 MB completions prompt, or a 30 MB tool call
name in a chat, paused every stream of demo-smol for 40-56 s. Each request here is far above the
bound (`limits.max_prompt_chars`, by default 32 characters per token of context: 65,536 on
demo-chat, 262,144 on demo-smol) and must be refused by the server, before the engine renders or
tokenizes anything: its message says so ("refused without counting tokens"; the engine's own
refusal counts tokens), and a neighbour stream on the same model is unharmed.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import RunningServer, copy_demo_graphs, start_server, stop_server
from tests.e2e.neighbour import Neighbour

MB = 1 << 20
CHAT_BOUND = 2048 * 32
SMOL_BOUND = 8192 * 32
RUN = "n" * (2 * MB)
"""One long run of a letter: the slowest text measured for the BPE tokenizers (a 30 MB one took 51 s
on demo-smol before the bound), and far above both bounds."""
NARROW = "narrow-chat"
"""demo-chat with room for three requests in flight."""


@pytest.fixture(scope="module")
def server(demo_root: Path, smol_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    directory = tmp_path_factory.mktemp("prompt-size")
    graphs = directory / "graphs"
    graphs.mkdir()
    copy_demo_graphs(demo_root, graphs, ["demo-chat"])
    copy_demo_graphs(smol_root, graphs, ["demo-smol"])
    chat = (graphs / "demo-chat.toml").read_text()
    narrow = chat.replace('name = "demo-chat"', f'name = "{NARROW}"').replace(
        "[limits]\n", "[limits]\nmax_queued_requests = 3\n"
    )
    (graphs / f"{NARROW}.toml").write_text(narrow)
    running = start_server(graphs, directory / "server.log")
    yield running
    pid = running.model_status(NARROW)["pid"]
    if pid:
        os.kill(pid, signal.SIGCONT)
    stop_server(running)


def _assert_refused_by_the_server(response: httpx.Response, param: str) -> None:
    assert response.status_code == 400, response.text[:300]
    error = response.json()["error"]
    assert (error["param"], error["code"]) == (param, "context_length_exceeded"), error
    assert "refused without counting tokens" in error["message"], error["message"]


def _concurrently(requests: list[tuple[str, dict]], url: str) -> list[httpx.Response]:
    answers: list[httpx.Response | Exception] = [RuntimeError("no answer")] * len(requests)

    def send(index: int, path: str, body: dict) -> None:
        try:
            answers[index] = httpx.post(f"{url}{path}", json=body, timeout=300)
        except httpx.HTTPError as exc:
            answers[index] = exc

    threads = [threading.Thread(target=send, args=(i, *request)) for i, request in enumerate(requests)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for answer in answers:
        assert isinstance(answer, httpx.Response), answer
    return answers


class _States:
    """The model's states in /health, polled while a block runs (the probe saw "stalled")."""

    def __init__(self, server: RunningServer, model: str) -> None:
        self.server, self.model = server, model
        self.seen: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self) -> None:
        while not self._stop.wait(0.2):
            try:
                self.seen.add(self.server.model_status(self.model)["state"])
            except httpx.HTTPError as exc:
                self.seen.add(type(exc).__name__)

    def __enter__(self) -> _States:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join()


def test_six_concurrent_big_tokenize_bodies_are_refused_and_six_at_the_bound_served(server: RunningServer) -> None:
    big = "hello world " * (20 * MB // 12 // 8)  # 2.5 MB each: the probe's 20 MB scaled down
    at_bound = "hello world " * (CHAT_BOUND // 12)
    with Neighbour(server.url, "demo-chat") as neighbour, _States(server, "demo-chat") as states:
        started = time.monotonic()
        refused = _concurrently([("/tokenize", {"model": "demo-chat", "prompt": big})] * 6, server.url)
        refused_s = time.monotonic() - started
        started = time.monotonic()
        served = _concurrently([("/tokenize", {"model": "demo-chat", "prompt": at_bound})] * 6, server.url)
        served_s = time.monotonic() - started
    for response in refused:
        _assert_refused_by_the_server(response, "prompt")
    for response in served:
        assert response.status_code == 200, response.text[:300]
        assert response.json()["count"] > 0  # a count: it may pass the context
    print(f"six refused in {refused_s:.2f} s, six at the bound served in {served_s:.2f} s")
    assert states.seen == {"ready"}, states.seen
    neighbour.assert_unharmed()
    assert server.wait_idle("demo-chat", timeout=10)["in_flight"] == 0


@pytest.mark.parametrize(
    ("path", "body", "param"),
    [
        ("/v1/completions", {"model": "demo-smol", "prompt": RUN, "max_tokens": 4}, "prompt"),
        ("/v1/completions", {"model": "demo-smol", "prompt": ["hi", RUN], "max_tokens": 4}, "prompt[1]"),
        ("/tokenize", {"model": "demo-smol", "prompt": RUN}, "prompt"),
        ("/v1/responses", {"model": "demo-smol", "input": RUN, "max_output_tokens": 16}, "input"),
    ],
)
def test_prompts_far_above_the_bound_are_refused_before_the_engine(
    server: RunningServer, path: str, body: dict, param: str
) -> None:
    with Neighbour(server.url, "demo-smol") as neighbour:
        started = time.monotonic()
        response = httpx.post(f"{server.url}{path}", json=body, timeout=300)
        print(f"{path}: {response.status_code} in {time.monotonic() - started:.2f} s")
    _assert_refused_by_the_server(response, param)
    neighbour.assert_unharmed()


def test_invocations_inputs_far_above_the_bound_are_refused_before_the_engine(server: RunningServer) -> None:
    with Neighbour(server.url, "demo-smol") as neighbour:
        response = httpx.post(f"{server.url}/predictions/demo-smol", json={"inputs": ["hi", RUN]}, timeout=300)
    assert response.status_code == 400, response.text[:300]
    # LMI's error answer carries the message only.
    assert "refused without counting tokens" in response.json()["error"]
    neighbour.assert_unharmed()


CALL = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}


@pytest.mark.parametrize(
    "messages",
    [
        [{"role": "user", "content": "hi"}, {"role": "assistant", "tool_calls": [{**CALL, "function": {"name": RUN, "arguments": "{}"}}]}],
        [{"role": "user", "content": "hi"}, {"role": "assistant", "tool_calls": [CALL]}, {"role": "tool", "tool_call_id": RUN, "content": "sunny"}],
        [{"role": "user", "content": "hi", "name": RUN}],
        [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello", "reasoning_content": RUN}, {"role": "user", "content": "and?"}],
    ],
    ids=["tool_call_function_name", "tool_call_id", "name", "reasoning_content"],
)  # fmt: skip
def test_every_chat_text_the_template_renders_is_bounded(server: RunningServer, messages: list) -> None:
    body = {"model": "demo-smol", "messages": messages, "max_tokens": 4}
    with Neighbour(server.url, "demo-smol") as neighbour:
        started = time.monotonic()
        response = httpx.post(f"{server.url}/v1/chat/completions", json=body, timeout=300)
        print(f"{response.status_code} in {time.monotonic() - started:.2f} s")
    _assert_refused_by_the_server(response, "messages")
    neighbour.assert_unharmed()


def test_tokenize_is_admitted_like_a_generation(server: RunningServer) -> None:
    """Counted in in_flight, refused with 503 beyond max_queued_requests, abandoned when its client
    leaves. The engine is paused (SIGSTOP) so the /tokenize requests stay in flight."""
    body = {"model": NARROW, "prompt": "hello world"}
    url = f"{server.url}/tokenize"
    with Neighbour(server.url, NARROW) as neighbour:
        pid = server.model_status(NARROW)["pid"]
        os.kill(pid, signal.SIGSTOP)
        answers: dict[str, object] = {}

        def send(name: str, timeout: float) -> None:
            try:
                answers[name] = httpx.post(url, json=body, timeout=timeout)
            except httpx.HTTPError as exc:
                answers[name] = exc

        leaving = threading.Thread(target=send, args=("leaving", 1.0))
        waiting = threading.Thread(target=send, args=("waiting", 60.0))
        try:
            leaving.start()
            waiting.start()
            deadline = time.monotonic() + 10
            # The neighbour's stream and both /tokenize requests.
            while server.model_status(NARROW)["in_flight"] < 3:
                assert time.monotonic() < deadline, server.model_status(NARROW)
                time.sleep(0.02)
            refused = httpx.post(url, json=body, timeout=10)
            assert refused.status_code == 503, refused.text
            assert refused.json()["error"]["code"] == "overloaded" and refused.headers["retry-after"] == "1"
            leaving.join()
            assert isinstance(answers["leaving"], httpx.ReadTimeout)
            deadline = time.monotonic() + 5
            while server.model_status(NARROW)["in_flight"] > 2:  # its place is given back at once
                assert time.monotonic() < deadline, server.model_status(NARROW)
                time.sleep(0.02)
        finally:
            os.kill(pid, signal.SIGCONT)
        waiting.join()
    served = answers["waiting"]
    assert isinstance(served, httpx.Response) and served.status_code == 200, served
    assert served.json()["count"] > 0
    neighbour.assert_unharmed()
    assert server.wait_idle(NARROW, timeout=10)["in_flight"] == 0
