"""tool_choice auto on a real model in every call format: the model's text is free, and each call
it starts is held to the tools' schemas (OpenVINO GenAI's structural tags; llama3_json, whose
calls have no marker, by one grammar of the whole answer).

demo-smol (SmolLM2-135M-Instruct, greedy) served under each `tool_parser`: its chat template
renders neither tools nor calls, so the appliance writes the tool list and the earlier calls in
the graph's format, and the model copies them. The tool has gained a required `days` since those
calls, as an agent's tools do: unconstrained (before this change, on 2 EPYC cores) the model
copied `{"city": "Paris"}`, which its schema refuses; held to the schema, it adds `days`. The
same with prompt lookup, whose candidates (the earlier calls, from the prompt) the grammar
accepts or cuts.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import jsonschema
import pytest

from tests.conftest import RunningServer, copy_demo_graphs, running_server
from tests.e2e.test_agents import FEW_SHOT, WEATHER_WITH_DAYS, streamed_answer

FORMATS = ["qwen3_coder", "glm45", "mistral", "phi4_mini", "deepseek_r1", "llama3_json", "harmony"]
LOOKUP = "demo-smol-lookup"
MARKUP = (
    "<tool_call",
    "<function=",
    "<arg_key>",
    "[TOOL_CALLS]",
    "<|tool_call|>",
    "tool▁call",
    "<|channel|>",
    '"name"',
)


def _model(parser: str) -> str:
    return f"demo-smol-{parser.replace('_', '-')}"


@pytest.fixture(scope="module")
def formats_server(smol_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    base = tmp_path_factory.mktemp("auto-tools")
    graphs = copy_demo_graphs(smol_root, base / "graphs", ["demo-smol"])
    smol = (graphs / "demo-smol.toml").read_text()
    (graphs / "demo-smol.toml").unlink()
    # Loaded one or two at a time (each is a SmolLM2 engine): as each test asks.
    smol = smol.replace("enable_prefix_caching = true", "enable_prefix_caching = false")
    smol = smol.replace('name = "demo-smol"', 'name = "{name}"\nload = "on_demand"').replace(
        "aliases = ", "# aliases = "
    )
    for parser in FORMATS:
        graph = smol.replace("{name}", _model(parser)).replace('tool_parser = "hermes"', f'tool_parser = "{parser}"')
        (graphs / f"{_model(parser)}.toml").write_text(graph)
    (graphs / f"{LOOKUP}.toml").write_text(
        smol.replace("{name}", LOOKUP).replace("[scheduler]", "prompt_lookup = true\n\n[scheduler]")
    )
    with running_server(graphs, base / "server.log", "--max-loaded-models", "2") as running:
        yield running


@pytest.mark.parametrize("model", [*(_model(parser) for parser in FORMATS), LOOKUP])
def test_auto_calls_match_the_schema_in_every_format(formats_server: RunningServer, model: str) -> None:
    client = formats_server.client()
    fields = {"model": model, "messages": FEW_SHOT, "tools": [WEATHER_WITH_DAYS], "temperature": 0, "max_tokens": 100}
    schema = WEATHER_WITH_DAYS["function"]["parameters"]
    answer = client.chat.completions.create(tool_choice="auto", **fields).choices[0]
    assert answer.finish_reason == "tool_calls" and answer.message.tool_calls, answer
    for call in answer.message.tool_calls:
        assert call.function.name == "get_weather"
        jsonschema.validate(json.loads(call.function.arguments), schema)
    assert not any(marker in (answer.message.content or "") for marker in MARKUP)
    content, calls, finish = streamed_answer(client, **fields)
    assert finish == "tool_calls" and calls
    for arguments in calls.values():
        jsonschema.validate(json.loads(arguments), schema)
    assert not any(marker in content for marker in MARKUP)
