"""Completions prompts given as token ids, and `echo` (issue 31, item 6).

The requests are the ones peers' suites send: vLLM's `prompt=[0, 0, 0, 0, 0]` and `echo=True`
through the `openai` client, llama.cpp's token list, list of token lists and a list mixing token
lists with strings. Every id is checked against the vocabulary and the prompt against the context
before the engine sees it; the hostile requests run beside a neighbour stream.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import RunningServer, copy_demo_graphs, running_server
from tests.e2e.neighbour import Neighbour

MODEL = "demo-chat"
TEXT = "The license grants"


@pytest.fixture(scope="module")
def server(demo_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    directory = tmp_path_factory.mktemp("prompt-tokens")
    graphs = copy_demo_graphs(demo_root, directory / "graphs", [MODEL])
    with running_server(graphs, directory / "server.log") as running:
        yield running


def _ids(server: RunningServer, text: str) -> list[int]:
    answer = httpx.post(
        f"{server.url}/tokenize", json={"model": MODEL, "prompt": text, "add_special_tokens": False}, timeout=30
    )
    assert answer.status_code == 200, answer.text
    return answer.json()["tokens"]


def _complete(server: RunningServer, **body: object) -> httpx.Response:
    request = {"model": MODEL, "max_tokens": 6, "temperature": 0, **body}
    return httpx.post(f"{server.url}/v1/completions", json=request, timeout=120)


def test_token_ids_are_the_same_prompt_as_their_text(server: RunningServer) -> None:
    ids = _ids(server, TEXT)
    client = server.client()
    by_text = client.completions.create(model=MODEL, prompt=TEXT, max_tokens=6, temperature=0)
    by_ids = client.completions.create(model=MODEL, prompt=ids, max_tokens=6, temperature=0)
    assert by_ids.choices[0].text == by_text.choices[0].text
    assert by_ids.usage.prompt_tokens == by_text.usage.prompt_tokens == len(ids)


def test_lists_of_token_ids_and_mixed_lists_are_served(server: RunningServer) -> None:
    ids = _ids(server, TEXT)
    single = _complete(server, prompt=TEXT).json()["choices"][0]["text"]
    several = server.client().completions.create(
        model=MODEL, prompt=[ids, [0, 0, 0, 0, 0]], max_tokens=6, temperature=0
    )
    assert [choice.index for choice in several.choices] == [0, 1]
    assert several.choices[0].text == single
    # llama.cpp's server also takes a list mixing token lists and strings.
    mixed = _complete(server, prompt=[ids, TEXT])
    assert mixed.status_code == 200, mixed.text
    assert [choice["text"] for choice in mixed.json()["choices"]] == [single, single]


def test_echo_prepends_the_prompt(server: RunningServer) -> None:
    client = server.client()
    plain = client.completions.create(model=MODEL, prompt=TEXT, max_tokens=6, temperature=0).choices[0].text
    echoed = client.completions.create(model=MODEL, prompt=TEXT, max_tokens=6, temperature=0, echo=True)
    assert echoed.choices[0].text == TEXT + plain
    by_ids = client.completions.create(model=MODEL, prompt=_ids(server, TEXT), max_tokens=6, temperature=0, echo=True)
    assert by_ids.choices[0].text == TEXT + plain
    streamed = client.completions.create(
        model=MODEL, prompt=[TEXT, TEXT], max_tokens=6, temperature=0, echo=True, stream=True
    )
    texts = ["", ""]
    for chunk in streamed:
        for choice in chunk.choices:
            texts[choice.index] += choice.text
    assert texts == [TEXT + plain, TEXT + plain]


def test_echo_with_logprobs_or_no_tokens_is_refused_naming_the_field(server: RunningServer) -> None:
    answer = _complete(server, prompt=TEXT, echo=True, logprobs=0)
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["param"] == "echo"
    answer = _complete(server, prompt=TEXT, echo=True, max_tokens=0)
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["param"] == "max_tokens"


@pytest.mark.parametrize(
    "prompt, param, words",
    [
        ([2147483647], "prompt", "vocabulary"),
        ([[1, 2], [3, 2147483647]], "prompt[1]", "vocabulary"),
        ([1, "two"], "prompt", "token ids"),
        ([], "prompt", ""),
        ([[]], "prompt[0]", "empty"),
        ([-1], "prompt[0]", ""),
        ([7] * 2049, "prompt", "context"),
        ([[7] * 2049], "prompt[0]", "context"),
    ],
)
def test_bad_token_prompts_are_refused_naming_the_field(
    server: RunningServer, prompt: list, param: str, words: str
) -> None:
    with Neighbour(server.url, MODEL) as neighbour:
        answer = _complete(server, prompt=prompt)
        streamed = _complete(server, prompt=prompt, stream=True)
    print(f"largest neighbour gap: {neighbour.largest_gap:.3f} s")
    for response in (answer, streamed):
        assert response.status_code == 400, response.text
        error = response.json()["error"]
        assert error["param"] == param, error
        assert words in error["message"], error
    neighbour.assert_unharmed()


def test_a_whole_context_of_token_ids_beside_a_stream(server: RunningServer) -> None:
    """The largest token prompt that fits: served, the neighbour unharmed (its gap printed)."""
    ids = (_ids(server, TEXT + " ") * 2048)[:2040]
    with Neighbour(server.url, MODEL) as neighbour:
        for _ in range(4):
            answer = _complete(server, prompt=ids, max_tokens=8, echo=True, stream=True)
            assert answer.status_code == 200, answer.text
            events = [line for line in answer.text.splitlines() if line.startswith("data: ")]
            assert events[-1] == "data: [DONE]"
            first = json.loads(events[0].removeprefix("data: "))
            assert first["choices"][0]["text"].startswith(TEXT)
    print(f"largest neighbour gap: {neighbour.largest_gap:.3f} s")
    neighbour.assert_unharmed()
