"""Coding agents (issue 50): requests shaped as Claude Code 2.1.328 and Codex 0.169.0 send them
(captured from the real binaries against a stand-in server: /work/shared/API-NOTES.md), replayed
on demo-long, whose 32,768-token context holds an agent's whole prompt (demo-smol's 8,192 does not).

The bodies are built here with the captured structure and sizes, and texts of our own: Claude
Code's has 3 system blocks with cache_control, a user message then a `system` message (its
environment), adaptive thinking shown as omitted, a clear_thinking edit, effort, a user_id
holding JSON, 14 tools with long schemas (one deferred), max_tokens 32,000, streamed: about 60 KB.
Codex's has two developer and two user messages, function tools, a namespace, web_search, include,
prompt_cache_key, client_metadata, reasoning.summary, store false, streamed: about 40 KB.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import RunningServer, copy_demo_graphs, running_server

MODEL = "demo-long"
WORDS = "read the file and report what the function returns when the input list is empty".split()


def _text(words: int, seed: int = 0) -> str:
    """Plain English-ish filler: `words` words."""
    return " ".join(WORDS[(seed + n * 7) % len(WORDS)] for n in range(words))


def _schema(index: int) -> dict:
    """A tool's input schema as long as Claude Code's (its Bash and Agent schemas run to 2-4 KB)."""
    properties = {f"option_{n}": {"type": "string", "description": _text(40, index + n)} for n in range(6)} | {
        "timeout": {"type": "number", "description": "Milliseconds, at most 600000."}
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": properties,
        "required": ["option_0"],
        "additionalProperties": False,
    }


def claude_code_body() -> dict:
    tools = [
        {"name": f"Tool{index}", "description": _text(450, index), "input_schema": _schema(index)}
        for index in range(13)
    ]
    tools.insert(10, {
        "name": "DeferredToolPlaceholder",
        "description": "Reserved placeholder that keeps deferred tool loading active; never call this tool.",
        "input_schema": {"type": "object", "properties": {}},
        "defer_loading": True,
    })  # fmt: skip
    user_id = json.dumps({"device_id": "0" * 64, "account_uuid": "", "session_id": "cdb9fda2"})
    return {
        "model": MODEL,
        "max_tokens": 32000,
        "stream": True,
        "thinking": {"type": "adaptive", "display": "omitted"},
        "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
        "output_config": {"effort": "high"},
        "metadata": {"user_id": user_id},
        "system": [
            {"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1.328.f86; cc_entrypoint=sdk-cli;"},
            {"type": "text", "text": "You are an agent.", "cache_control": {"type": "ephemeral"}},
            {"type": "text", "text": _text(1100), "cache_control": {"type": "ephemeral"}},
        ],
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": f"<system-reminder>\n{_text(90)}\n</system-reminder>\n"},
                    {"type": "text", "text": "What is the capital of France?"},
                ],
            },
            {
                "role": "system",
                "content": [{"type": "text", "text": _text(1500, 3), "cache_control": {"type": "ephemeral"}}],
            },
        ],
        "tools": tools,
    }


def codex_body() -> dict:
    def function(name: str, words: int) -> dict:
        schema = {"type": "object", "properties": {"cmd": {"type": "string", "description": _text(30)}}}
        return {"type": "function", "name": name, "description": _text(words), "strict": False, "parameters": schema}

    namespace = {
        "type": "namespace",
        "name": "multi_agent_v1",
        "description": "Tools for spawning and managing sub-agents.",
        "tools": [function(f"agent_{n}", 200) for n in range(5)],
    }
    return {
        "model": MODEL,
        "stream": True,
        "input": [
            {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": _text(5000)}]},
            {
                "type": "message",
                "role": "developer",
                "content": [{"type": "input_text", "text": _text(350, 1)}, {"type": "input_text", "text": _text(50)}],
            },
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": _text(70, 2)}]},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Capital of France?"}]},
        ],
        "tools": [
            function("exec_command", 250),
            function("write_stdin", 120),
            function("request_user_input", 220),
            function("view_image", 60),
            namespace,
            function("get_goal", 40),
            function("create_goal", 120),
            function("update_goal", 350),
            {"type": "web_search", "external_web_access": False},
        ],
        "tool_choice": "auto",
        "parallel_tool_calls": True,
        "reasoning": {"summary": "auto"},
        "store": False,
        "include": ["reasoning.encrypted_content"],
        "prompt_cache_key": "01a22758-9e0a-77b3-8e03-109adcec066a",
        "client_metadata": {"root_turn_id": "01a22758", "x-codex-turn-metadata": json.dumps({"session_id": "s"})},
    }


@pytest.fixture(scope="module")
def long_server(long_root, tmp_path_factory) -> Iterator[RunningServer]:
    graphs = copy_demo_graphs(long_root, tmp_path_factory.mktemp("agents") / "graphs", [MODEL])
    with running_server(graphs, graphs.parent / "server.log") as running:
        yield running


def _events(response: httpx.Response) -> list[dict]:
    return [json.loads(line.removeprefix("data: ")) for line in response.text.splitlines() if line.startswith("data: ")]


def test_claude_code_request(long_server: RunningServer) -> None:
    body = claude_code_body()
    assert len(json.dumps(body)) > 49_000
    headers = {
        "x-api-key": "unused",
        "anthropic-version": "2023-06-01",
        "anthropic-beta": "context-management-2025-06-27",
    }
    response = httpx.post(f"{long_server.url}/v1/messages?beta=true", json=body, headers=headers, timeout=300)
    assert response.status_code == 200, response.text
    events = _events(response)
    assert [event["type"] for event in events][-1] == "message_stop", events[-3:]
    prompt_tokens = events[0]["message"]["usage"]["input_tokens"]
    assert 12_000 < prompt_tokens < 32_768
    count = {key: body[key] for key in ("model", "system", "messages", "tools", "thinking", "output_config")}
    counted = httpx.post(f"{long_server.url}/v1/messages/count_tokens", json=count, headers=headers, timeout=300)
    assert counted.json() == {"input_tokens": prompt_tokens}
    without = {**count, "messages": count["messages"][:1]}  # the system message is in the prompt
    fewer = httpx.post(f"{long_server.url}/v1/messages/count_tokens", json=without, headers=headers, timeout=300)
    assert fewer.json()["input_tokens"] < prompt_tokens - 1000


def test_codex_request(long_server: RunningServer) -> None:
    body = codex_body()
    assert len(json.dumps(body)) > 40_000
    response = httpx.post(
        f"{long_server.url}/v1/responses", json=body, headers={"Authorization": "Bearer unused"}, timeout=300
    )
    assert response.status_code == 200, response.text
    assert response.headers["x-dropped-tools"] == "tools[8]=web_search"
    events = _events(response)
    final = events[-1]
    assert final["type"] in ("response.completed", "response.incomplete"), events[-3:]
    assert final["response"]["tools"][8] == {"type": "web_search", "external_web_access": False}
    assert final["response"]["usage"]["input_tokens"] > 8_192  # more than demo-smol holds


def test_models_state_the_context_in_both_shapes(long_server: RunningServer) -> None:
    import anthropic

    listed = anthropic.Anthropic(base_url=long_server.url, api_key="unused", max_retries=0).models.list()
    info = next(model for model in listed.data if model.id == MODEL)
    assert (info.max_input_tokens, info.max_tokens) == (32_768, 1024)
    model = long_server.client().models.retrieve(MODEL)
    assert model.model_extra["max_model_len"] == 32_768


# --- the real binaries (item 4), pinned in tests/js: npm ci installs them with their platform packages ---

JS = Path(__file__).resolve().parents[1] / "js" / "node_modules"
CLAUDE = JS / "@anthropic-ai" / "claude-code" / "cli-wrapper.cjs"  # runs the platform binary (no postinstall needed)
CODEX = JS / ".bin" / "codex"


@pytest.fixture(scope="module")
def greedy_smol(smol_root, tmp_path_factory) -> Iterator[RunningServer]:
    """demo-smol answering greedily unless told otherwise: neither agent sends a temperature, and
    SmolLM2 at 1.0 rambles until max_tokens."""
    graphs = copy_demo_graphs(smol_root, tmp_path_factory.mktemp("agents-smol") / "graphs", ["demo-smol"])
    graph = graphs / "demo-smol.toml"
    graph.write_text(graph.read_text() + "\n[defaults]\ntemperature = 0.0\n")
    with running_server(graphs, graphs.parent / "server.log") as running:
        yield running


def _agent_env(home: Path, **extra: str) -> dict[str, str]:
    """A clean environment: HOME in a temporary folder, telemetry and updates off."""
    keep = {name: os.environ[name] for name in ("PATH", "LANG", "TMPDIR") if name in os.environ}
    return {**keep, "HOME": str(home), "DISABLE_TELEMETRY": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_AUTOUPDATER": "1", **extra}  # fmt: skip


def test_claude_code_answers(greedy_smol: RunningServer, tmp_path: Path) -> None:
    if shutil.which("node") is None or not CLAUDE.is_file():
        pytest.skip("Node or tests/js/node_modules/@anthropic-ai/claude-code is missing (setup.sh runs npm ci)")
    # demo-smol holds 8,192 tokens: --bare (no environment message, no CLAUDE.md), no tools and a
    # short system prompt make a 315-token prompt; the two variables tell it the window and the output.
    env = _agent_env(
        tmp_path,
        ANTHROPIC_BASE_URL=greedy_smol.url,
        ANTHROPIC_API_KEY="unused",
        CLAUDE_CODE_MAX_CONTEXT_TOKENS="8192",
        CLAUDE_CODE_MAX_OUTPUT_TOKENS="1024",
    )
    command = ["node", str(CLAUDE), "--bare", "-p", "What is the capital of France?", "--model", "demo-smol",
               "--tools", "", "--system-prompt", "You are a helpful assistant. Answer in one sentence.",
               "--strict-mcp-config", "--setting-sources", ""]  # fmt: skip
    done = subprocess.run(command, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "Paris" in done.stdout, done.stdout


def test_codex_answers(greedy_smol: RunningServer, tmp_path: Path) -> None:
    if shutil.which("node") is None or not CODEX.is_file():
        pytest.skip("Node or tests/js/node_modules/@openai/codex is missing (setup.sh runs npm ci)")
    home = tmp_path / "home"
    (home / ".codex").mkdir(parents=True)
    instructions = tmp_path / "instructions.txt"
    instructions.write_text("You are a helpful assistant. Answer in one sentence.")
    # Codex's own instructions (17 KB) do not fit demo-smol: model_instructions_file replaces them. Its
    # tools stay, web_search included (the box drops it: x-dropped-tools).
    (home / ".codex" / "config.toml").write_text(
        f'model = "demo-smol"\nmodel_provider = "appliance"\nmodel_context_window = 8192\n'
        f'model_instructions_file = "{instructions}"\n\n[model_providers.appliance]\nname = "appliance"\n'
        f'base_url = "{greedy_smol.url}/v1"\nwire_api = "responses"\nenv_key = "APPLIANCE_API_KEY"\n'
    )
    env = _agent_env(home, CODEX_HOME=str(home / ".codex"), APPLIANCE_API_KEY="unused")
    command = [str(CODEX), "exec", "--skip-git-repo-check", "What is the capital of France?"]
    done = subprocess.run(
        command, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL
    )
    assert done.returncode == 0, done.stderr
    assert "Paris" in done.stdout, done.stdout
