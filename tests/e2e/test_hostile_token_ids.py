"""Token ids a client sends are checked against the model's vocabulary before the engine sees
them (issue 28, item 1): `stop_token_ids` past the vocabulary with `min_tokens` crashed the engine
process (SIGSEGV in the pipeline's min-tokens logit processor), losing every stream on the model."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import RunningServer, copy_demo_graphs, running_server
from tests.e2e.neighbour import Neighbour


@pytest.fixture(scope="module")
def chat_server(demo_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    directory = tmp_path_factory.mktemp("token-ids")
    graphs = copy_demo_graphs(demo_root, directory / "graphs", ["demo-chat"])
    with running_server(graphs, directory / "server.log") as running:
        yield running


def _vocabulary_size(server: RunningServer) -> int:
    """One past the largest id /detokenize knows (found by bisection: the vocabulary is dense)."""
    low, high = 0, 1 << 20
    while high - low > 1:
        middle = (low + high) // 2
        answer = httpx.post(f"{server.url}/detokenize", json={"model": "demo-chat", "tokens": [middle]}, timeout=10)
        low, high = (middle, high) if answer.status_code == 200 else (low, middle)
    return high


@pytest.mark.parametrize(
    "route, body",
    [
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}]}),
        ("/v1/completions", {"prompt": "hi"}),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "stream": True}),
    ],
)
@pytest.mark.parametrize("token_id", [2147483647, "past"])
def test_stop_token_ids_outside_the_vocabulary_are_refused(
    chat_server: RunningServer, route: str, body: dict, token_id: int | str
) -> None:
    if token_id == "past":
        token_id = _vocabulary_size(chat_server)
    request = {"model": "demo-chat", "max_tokens": 8, "stop_token_ids": [token_id], "min_tokens": 2, **body}
    with Neighbour(chat_server.url) as neighbour:
        for _ in range(2):
            answer = httpx.post(f"{chat_server.url}{route}", json=request, timeout=60)
            assert answer.status_code == 400, answer.text
            error = answer.json()["error"]
            assert error["param"] == "stop_token_ids", error
            assert str(token_id) in error["message"] and "vocabulary" in error["message"], error
    neighbour.assert_unharmed()


def test_stop_token_ids_inside_the_vocabulary_still_work(chat_server: RunningServer) -> None:
    last = _vocabulary_size(chat_server) - 1
    request = {
        "model": "demo-chat",
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 8,
        "stop_token_ids": [0, last],
        "min_tokens": 2,
    }
    answer = httpx.post(f"{chat_server.url}/v1/chat/completions", json=request, timeout=60)
    assert answer.status_code == 200, answer.text


def test_lmi_stop_token_ids_are_checked_too(chat_server: RunningServer) -> None:
    request = {
        "inputs": "hi",
        "parameters": {"max_new_tokens": 8, "stop_token_ids": [2147483647], "min_length": 2},
    }
    with Neighbour(chat_server.url) as neighbour:
        answer = httpx.post(f"{chat_server.url}/invocations", json=request, timeout=60)
    assert answer.status_code == 400, answer.text
    assert "vocabulary" in answer.text
    neighbour.assert_unharmed()
