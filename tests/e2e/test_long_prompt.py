"""A coding agent's long prompt on demo-long (issue 50): a 32,768-token context serves a
20,000-token prompt, and the agent's next turn (the same prompt and a tool result after it) too.

OpenVINO GenAI 2026.4.1 does not say how many of a prompt's tokens came from its prefix cache
(neither the GenerationHandle's perf metrics nor the pipeline's metrics carry it), so the usage
reports no cached tokens: checked here, so that a number appearing later is one the engine gave.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import RunningServer, copy_demo_graphs, running_server

MODEL = "demo-long"
PROMPT_TOKENS = 20_000


@pytest.fixture(scope="module")
def long_server(long_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    graphs = copy_demo_graphs(long_root, tmp_path_factory.mktemp("long-prompt") / "graphs", [MODEL])
    with running_server(graphs, graphs.parent / "server.log") as running:
        yield running


def _texts(long_root: Path) -> tuple[str, str]:
    """An agent's system prompt of exactly PROMPT_TOKENS tokens, and a tool result of 200."""
    from appliance.tools.bench.raw import Tokenizer
    from appliance.tools.bench.workload import build_prompts, prompt_words

    tokenizer = Tokenizer(long_root / "models" / MODEL)
    words = prompt_words(tokenizer.vocab(), tokenizer.encode)
    (system,) = build_prompts(1, PROMPT_TOKENS, words=words, encode=tokenizer.encode, seed=50)
    (tool_result,) = build_prompts(1, 200, words=words, encode=tokenizer.encode, seed=51)
    return system.text, tool_result.text


def _chat(server: RunningServer, messages: list[dict[str, str]]) -> dict:
    response = httpx.post(
        f"{server.url}/v1/chat/completions",
        json={"model": MODEL, "messages": messages, "max_tokens": 4, "temperature": 0},
        timeout=300,
    )
    assert response.status_code == 200, response.text
    return response.json()


def test_a_20k_token_prompt_and_the_next_turn(long_server: RunningServer, long_root: Path) -> None:
    system, tool_result = _texts(long_root)
    messages = [{"role": "system", "content": system}, {"role": "user", "content": "Read the file."}]
    first = _chat(long_server, messages)
    usage = first["usage"]
    # The template adds its role markers around the 20,000 tokens of text.
    assert PROMPT_TOKENS < usage["prompt_tokens"] < PROMPT_TOKENS + 50
    assert usage["completion_tokens"] == 4
    answer = first["choices"][0]["message"]["content"] or ""
    turn = [*messages, {"role": "assistant", "content": answer}, {"role": "user", "content": tool_result}]
    second = _chat(long_server, turn)["usage"]
    assert usage["prompt_tokens"] + 200 < second["prompt_tokens"] < usage["prompt_tokens"] + 300
    # No cached-token count the engine did not give.
    assert not (second.get("prompt_tokens_details") or {}).get("cached_tokens")
