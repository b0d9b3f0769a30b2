"""Which tool and reasoning parsers a model gets from its chat template and tokenizer: each
family's template (tests/data/chat_templates, see its README) rendered with tools and an earlier
call, the parser detected, and the rendered call read back by that parser."""

from __future__ import annotations

import json
from pathlib import Path

import jinja2
import pytest

from appliance.engine.host.templates import ToolFormat
from appliance.graphfiles import Graph
from appliance.graphfiles.chat_template import template_tools
from appliance.graphfiles.model_formats import find_formats, special_tokens
from appliance.service.tool_formats import HarmonyChannels
from appliance.service.tool_parsers import ParsedCall, tool_parser
from appliance.service.tool_prompt import shown_tools

TEMPLATES = Path(__file__).parent.parent / "data" / "chat_templates"
SCHEMAS = {"get_weather": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}}
TOOLS = [
    {
        "type": "function",
        "function": {"name": "get_weather", "description": "Weather.", "parameters": SCHEMAS["get_weather"]},
    }
]
PARIS = ParsedCall("get_weather", json.dumps({"city": "Paris", "days": 3}))
MESSAGES = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Weather in Paris?"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 3}},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": '{"sky": "clear"}'},
    {"role": "user", "content": "And tomorrow?"},
]


def render(name: str, **variables: object) -> str:
    """The template rendered as Hugging Face does: `tojson` without HTML escaping."""
    environment = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
    environment.filters["tojson"] = lambda value, indent=None: json.dumps(value, ensure_ascii=False, indent=indent)
    template = environment.from_string((TEMPLATES / name).read_text(encoding="utf-8"))
    return template.render(
        messages=MESSAGES, tools=TOOLS, add_generation_prompt=True, bos_token="<s>", eos_token="</s>", **variables
    )


def phi4_tokens(tmp_path: Path) -> frozenset[str]:
    (tmp_path / "tokenizer_config.json").write_text((TEMPLATES / "phi4_mini_tokenizer_config.json").read_text())
    return special_tokens(tmp_path)


FAMILIES = [
    # (template, tool parser, reasoning parser, renders tools, renders tool calls)
    ("qwen3.jinja", "hermes", "think", True, True),
    ("qwen3_coder.jinja", "qwen3_coder", None, True, True),
    ("glm45.jinja", "glm45", "think", True, True),
    ("phi4_mini.jinja", "phi4_mini", None, False, False),
    ("gpt_oss.jinja", "harmony", "harmony", True, True),
    ("deepseek_r1_distill.jinja", "deepseek_r1", "think", False, True),
    ("llama3_1.jinja", "llama3_json", None, True, True),
    ("mistral.jinja", "mistral", None, True, True),
    ("gemma3.jinja", None, None, False, False),
    ("gemma4.jinja", None, None, True, True),
]


@pytest.mark.parametrize(("name", "tool", "reasoning", "renders_tools", "renders_calls"), FAMILIES)
def test_each_familys_template_chooses_its_parsers(
    tmp_path: Path, name: str, tool: str | None, reasoning: str | None, renders_tools: bool, renders_calls: bool
) -> None:
    tokens = phi4_tokens(tmp_path) if name.startswith("phi4") else frozenset()
    found = template_tools((TEMPLATES / name).read_text(encoding="utf-8"), tokens)
    assert (found.tool_parser, found.reasoning_parser) == (tool, reasoning)
    assert (found.renders_tools, found.renders_tool_calls) == (renders_tools, renders_calls)
    assert found.tool_reason and found.reasoning_reason


def _rendered_call(name: str, parser: str, text: str) -> list[ParsedCall]:
    """The earlier call as the template rendered it, read by `parser`."""
    if parser == "harmony":
        start = text.index("<|start|>assistant to=functions.")
        channels = HarmonyChannels()
        _, content = channels.feed(text[start : text.index("<|call|>", start) + len("<|call|>")])
        text = content + channels.finish()[1]
        return tool_parser(parser).parse_calls(text)[0]
    if parser == "llama3_json":
        turn = text.split("<|start_header_id|>assistant<|end_header_id|>\n\n")[1]
        return tool_parser(parser).parse_calls(turn[: turn.index("<|eot_id|>")])[0]
    marker = tool_parser(parser).marker  # the last one: the system turn may show an example first
    return tool_parser(parser).parse_calls(text[text.rindex(marker) :], SCHEMAS)[0]


@pytest.mark.parametrize(
    "name", [name for name, tool, _, _, renders_calls in FAMILIES if tool is not None and renders_calls]
)
def test_the_call_a_template_renders_reads_back_with_the_parser_it_chose(name: str) -> None:
    parser = template_tools((TEMPLATES / name).read_text(encoding="utf-8")).tool_parser
    assert parser is not None
    text = render(name)
    assert "get_weather" in text
    assert _rendered_call(name, parser, text) == [PARIS]


def test_where_reasoning_opens_is_told_apart() -> None:
    deepseek = find_formats((TEMPLATES / "deepseek_r1_distill.jinja").read_text(encoding="utf-8"))
    assert "opens `<think>` in the generation prompt" in deepseek.reasoning_reason
    assert render("deepseek_r1_distill.jinja").endswith("<｜Assistant｜><think>\n")
    qwen3 = find_formats((TEMPLATES / "qwen3.jinja").read_text(encoding="utf-8"))
    assert "writes `<think>` blocks" in qwen3.reasoning_reason  # its `<think></think>` only switches thinking off
    assert render("qwen3.jinja", enable_thinking=False).endswith("<think>\n\n</think>\n\n")
    # Tokens alone never mean reasoning: Qwen3-Coder's tokenizer holds <think> too.
    assert find_formats("{{ messages }}", frozenset({"<think>", "</think>"})).reasoning_parser is None


def test_gemma4_calls_are_named_but_fall_back_to_the_appliance_prompt() -> None:
    found = find_formats((TEMPLATES / "gemma4.jinja").read_text(encoding="utf-8"))
    assert found.tool_parser is None and "Gemma 4" in found.tool_reason
    gemma3 = find_formats((TEMPLATES / "gemma3.jinja").read_text(encoding="utf-8"))
    assert gemma3.tool_parser is None and "no call format recognised" in gemma3.tool_reason


def folder(tmp_path: Path, template: str, tokenizer_config: dict | None = None) -> Path:
    model = tmp_path / template.removesuffix(".jinja")
    model.mkdir(exist_ok=True)
    (model / "config.json").write_text(json.dumps({"max_position_embeddings": 4096}))
    (model / "chat_template.jinja").write_text((TEMPLATES / template).read_text(encoding="utf-8"), encoding="utf-8")
    if tokenizer_config is not None:
        (model / "tokenizer_config.json").write_text(json.dumps(tokenizer_config))
    return model


def test_the_graph_file_wins_and_the_reason_is_told(tmp_path: Path) -> None:
    """The detected formats reach the model's `ToolFormat` (what requests use, what the start-up
    log and `appliance check` print) with why; a graph file's own choice wins."""
    phi4 = json.loads((TEMPLATES / "phi4_mini_tokenizer_config.json").read_text())
    graph = Graph(name="m", model_path=str(folder(tmp_path, "phi4_mini.jinja", phi4)))
    tools = ToolFormat.of(graph, graph.facts.template)
    assert (tools.parser, tools.source, tools.from_template, tools.reasoning) == (
        "phi4_mini",
        "chat template",
        False,
        None,
    )
    assert "the tokenizer holds `<|tool_call|>`" in tools.describe()
    assert "tool parser phi4_mini (the tokenizer holds" in graph.facts.describe(graph.max_context)

    harmony = Graph(name="m", model_path=str(folder(tmp_path, "gpt_oss.jinja")))
    tools = ToolFormat.of(harmony, harmony.facts.template)
    assert (tools.parser, tools.reasoning, tools.reasoning_source) == ("harmony", "harmony", "chat template")
    assert tools.keeps_special_tokens

    chosen = Graph(
        name="m", model_path=str(folder(tmp_path, "gpt_oss.jinja")), tool_parser="hermes", reasoning_parser="think"
    )
    tools = ToolFormat.of(chosen, chosen.facts.template)
    assert (tools.parser, tools.source, tools.reasoning, tools.reasoning_source) == (
        "hermes",
        "graph file",
        "think",
        "graph file",
    )

    unknown = Graph(name="m", model_path=str(folder(tmp_path, "gemma3.jinja")))
    tools = ToolFormat.of(unknown, unknown.facts.template)
    assert (tools.parser, tools.source, tools.from_template, tools.reasoning) == ("hermes", "generic", False, None)
    assert "generic: no call format recognised" in tools.describe()


def test_a_template_that_does_not_show_tools_gets_the_appliances_prompt_in_its_format() -> None:
    """Phi-4-mini's template reads a system message's own `tools` text, DeepSeek-R1's shows none:
    the appliance's tool prompt teaches each the calls its parser reads."""
    for parser, marker in (
        ("phi4_mini", "<|tool_call|>[{"),
        ("deepseek_r1", "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function"),
    ):
        messages, shown = shown_tools(
            [{"role": "user", "content": "Hi"}],
            TOOLS,
            ToolFormat(parser, from_template=False, calls_from_template=False),
        )
        assert shown is None and messages[0]["role"] == "system" and marker in messages[0]["content"]


def test_the_harmony_tool_parser_brings_its_channel_splitter(tmp_path: Path) -> None:
    graph = Graph(name="m", model_path=str(folder(tmp_path, "qwen3.jinja")), tool_parser="harmony")
    tools = ToolFormat.of(graph, graph.facts.template)
    assert (tools.parser, tools.reasoning, tools.reasoning_source) == ("harmony", "harmony", "tool parser")
    assert tools.keeps_special_tokens and "harmony calls come among its channels" in tools.describe()


def test_special_tokens_come_from_the_tokenizer_files(tmp_path: Path) -> None:
    (tmp_path / "tokenizer.json").write_text(json.dumps({"added_tokens": [{"id": 1, "content": "<|tool_call|>"}]}))
    assert special_tokens(tmp_path) == {"<|tool_call|>"}  # tokenizer_config.json lists none: the big file is read
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"added_tokens_decoder": {"2": {"content": "<s>"}}}))
    assert special_tokens(tmp_path) == {"<s>"}
    assert special_tokens(tmp_path / "missing") == frozenset()


def test_the_engine_reports_the_formats_it_loaded(tmp_path: Path) -> None:
    """The engine's `Ready` carries the formats of the template it loaded: the same as the files'
    change nothing; a different one is taken (and logged)."""
    from appliance.engine.host.client import EngineClient
    from appliance.engine.messages import Ready

    graph = Graph(name="m", model_path=str(folder(tmp_path, "deepseek_r1_distill.jinja")))
    engine = EngineClient(graph, restart_delay=lambda _: 0)
    assert (engine.tools.parser, engine.tools.reasoning) == ("deepseek_r1", "think")
    template = graph.facts.template
    engine._dispatch(
        Ready(
            max_context=4096,
            load_seconds=0.1,
            template_renders_tools=template.renders_tools,
            template_renders_tool_calls=template.renders_tool_calls,
            template_tool_parser="deepseek_r1",
            template_reasoning_parser="think",
        )
    )
    assert (engine.tools.parser, engine.tools.reasoning) == ("deepseek_r1", "think")
    engine._dispatch(Ready(max_context=4096, load_seconds=0.1, template_tool_parser="hermes"))
    assert (engine.tools.parser, engine.tools.source, engine.tools.reasoning) == ("hermes", "chat template", None)


def test_check_prints_the_chosen_parsers_and_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from appliance.cli import main

    monkeypatch.setattr("appliance.engine.host.devices.available_devices", lambda: ["CPU"])
    model = folder(tmp_path, "gpt_oss.jinja")
    for name in ("openvino_model.xml", "openvino_tokenizer.xml", "openvino_detokenizer.xml"):
        (model / name).write_text("<net/>")  # check reads the template and facts, not the IR
    graphs = tmp_path / "graphs"
    graphs.mkdir()
    (graphs / "oss.toml").write_text(f'name = "oss"\nmodel_path = "{model}"\n')
    assert main(["check", str(graphs)]) == 0
    out = capsys.readouterr().out
    assert "tools: harmony calls (chat template: the chat template writes harmony channels" in out
    assert "reasoning harmony (chat template:" in out
