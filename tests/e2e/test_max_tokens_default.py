"""A request without max_tokens: the graph's defaults.max_tokens, else as many tokens as fit, at
most limits.max_tokens_limit and the context left after the prompt (docs/api.md)."""

from __future__ import annotations

import httpx
import pytest

from tests.conftest import running_server


def graph(demo_root, name: str, extra: str) -> str:
    return (
        f'name = "{name}"\nmodel_path = "{demo_root / "models" / "demo-chat"}"\n'
        "[scheduler]\ncache_size = 1\nmax_num_batched_tokens = 2048\n"
        '[plugin_config]\nINFERENCE_PRECISION_HINT = "f32"\n' + extra
    )


@pytest.fixture(scope="module")
def server(demo_root, tmp_path_factory):
    graphs = tmp_path_factory.mktemp("max-tokens")
    (graphs / "limited.toml").write_text(graph(demo_root, "limited", "[limits]\nmax_tokens_limit = 24\n"))
    (graphs / "defaulted.toml").write_text(graph(demo_root, "defaulted", "[defaults]\nmax_tokens = 7\n"))
    with running_server(graphs, graphs / "server.log") as running:
        yield running


def completion_tokens(server, model: str, **fields) -> tuple[int, str]:
    body = {"model": model, "messages": [{"role": "user", "content": "hi"}], "ignore_eos": True, **fields}
    reply = httpx.post(f"{server.url}/v1/chat/completions", json=body, timeout=120).json()
    return reply["usage"]["completion_tokens"], reply["choices"][0]["finish_reason"]


def test_absent_max_tokens_runs_to_the_limit_or_the_graph_default(server) -> None:
    assert completion_tokens(server, "limited") == (24, "length")
    assert completion_tokens(server, "defaulted") == (7, "length")
    assert completion_tokens(server, "defaulted", max_tokens=3) == (3, "length")


def test_absent_max_tokens_stops_at_the_end_of_the_context(server) -> None:
    # demo-chat's context is 2048 tokens: a prompt filling all but a few leaves only those.
    body = {"model": "limited", "messages": [{"role": "user", "content": "hi"}]}
    prompt_tokens = httpx.post(f"{server.url}/v1/chat/completions", json={**body, "max_tokens": 1}, timeout=60).json()[
        "usage"
    ]["prompt_tokens"]
    filler = " hi" * (2048 - prompt_tokens - 5)
    reply = httpx.post(
        f"{server.url}/v1/chat/completions",
        json={**body, "messages": [{"role": "user", "content": "hi" + filler}], "ignore_eos": True},
        timeout=120,
    ).json()
    assert reply["usage"]["prompt_tokens"] + reply["usage"]["completion_tokens"] <= 2048
    assert reply["usage"]["completion_tokens"] < 24 and reply["choices"][0]["finish_reason"] == "length"
