"""The model families' call formats (qwen3_coder, phi4_mini, deepseek_r1, harmony) and reasoning
splitters, on texts as the models write them: whole, and streamed in every chunking."""

from __future__ import annotations

import json

import msgspec
import pytest

from appliance.grammar import GrammarError
from appliance.grammar.ebnf import parse_grammar
from appliance.protocol.openai import ChatCompletionRequest, FunctionDefinition, Tool
from appliance.service.constraints import output_grammar
from appliance.service.pieces import ContentPiece, ReasoningPiece, ToolCallPiece, _ChoiceParsers
from appliance.service.reasoning import reasoning_stream
from appliance.service.tool_parsers import ParsedCall, ToolCallStream, forced_call_grammar, tool_parser
from appliance.service.tool_plan import ToolPlan
from tests.fakes import fake_graph
from tests.unit.test_grammar import to_regex

WEATHER = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "days": {"type": "integer"},
        "units": {"type": "string", "enum": ["metric", "imperial"]},
        "detail": {"type": "object", "properties": {"hourly": {"type": "boolean"}}},
    },
    "required": ["city"],
}
SCHEMAS = {"get_weather": WEATHER, "get_time": {"type": "object", "properties": {"zone": {"type": "string"}}}}
TOOLS = [Tool(function=FunctionDefinition(name=name, parameters=schema)) for name, schema in SCHEMAS.items()]


def run(parser: str, text: str, chunk: int) -> tuple[str, list[ParsedCall]]:
    stream = ToolCallStream(tool_parser(parser), SCHEMAS)
    content, calls = [], []
    for start in range(0, len(text), chunk):
        piece, found = stream.feed(text[start : start + chunk])
        content.append(piece)
        calls += found
    piece, found = stream.finish()
    return "".join(content + [piece]), calls + found


def call(name: str, **arguments: object) -> ParsedCall:
    return ParsedCall(name, json.dumps(arguments, ensure_ascii=False))


PARIS = call("get_weather", city="Paris", days=3)
TOKYO = call("get_time", zone="Asia/Tokyo")

QWEN3_CODER = (
    "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
    "<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>"
)
QWEN3_CODER_TOKYO = (
    "<tool_call>\n<function=get_time>\n<parameter=zone>\nAsia/Tokyo\n</parameter>\n</function>\n</tool_call>"
)
DS_BEGIN, DS_END = "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"
DS_PARIS = '<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{"city": "Paris", "days": 3}\n```<｜tool▁call▁end｜>'
DS_TOKYO = (
    '<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_time\n```json\n{"zone": "Asia/Tokyo"}\n```<｜tool▁call▁end｜>'
)

CASES = [
    # Qwen3-Coder: text before, parallel calls, values typed by the schema.
    ("qwen3_coder", f"Let me check.\n{QWEN3_CODER}\n{QWEN3_CODER_TOKYO}", "Let me check.\n", [PARIS, TOKYO]),
    ("qwen3_coder", f"{QWEN3_CODER}\nDone.", "\nDone.", [PARIS]),
    (
        "qwen3_coder",
        "<tool_call>\n<function=get_weather>\n<parameter=city>\n007\n</parameter>\n<parameter=detail>\n"
        '{"hourly": true}\n</parameter>\n<parameter=note>\n[1, 2]\n</parameter>\n</function>\n</tool_call>',
        "",
        [call("get_weather", city="007", detail={"hourly": True}, note=[1, 2])],
    ),
    (
        "qwen3_coder",
        "<tool_call>\n<function=get_time>\n<parameter=zone>\nA < B\nC\n</parameter>\n</function>\n</tool_call>",
        "",
        [call("get_time", zone="A < B\nC")],
    ),
    # Cut by max_tokens: the complete call counts, the cut one is dropped, no markup in content.
    ("qwen3_coder", f"{QWEN3_CODER}\n<tool_call>\n<function=get_time>\n<parameter=zo", "", [PARIS]),
    (
        "qwen3_coder",
        "a <b> c <tool_call>\n<function=get_time>\nnot a parameter\n</function>\n</tool_call>",
        "a <b> c <tool_call>\n<function=get_time>\nnot a parameter\n</function>\n</tool_call>",
        [],
    ),
    # GLM-4.5: key/value tags, typed by the schema; parallel calls; text around them; a cut call dropped.
    (
        "glm45",
        "Checking.\n<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n"
        "<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n</tool_call>\n"
        "<tool_call>get_time\n<arg_key>zone</arg_key>\n<arg_value>Asia/Tokyo</arg_value>\n</tool_call>",
        "Checking.\n",
        [PARIS, TOKYO],
    ),
    (
        "glm45",
        "<tool_call>get_time <arg_key>zone</arg_key> <arg_value>Asia/Tokyo</arg_value> </tool_call> ok",
        " ok",
        [TOKYO],
    ),
    ("glm45", "<tool_call>get_time\n<arg_key>zone</arg_key>\n<arg_value>Asia/To", "", []),
    ("glm45", '<tool_call>{"name": "get_time"}</tool_call>', '<tool_call>{"name": "get_time"}</tool_call>', []),
    # Phi-4-mini: a list of calls between its tokens; the closing token may be missing.
    (
        "phi4_mini",
        'Sure.<|tool_call|>[{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}, '
        '{"name": "get_time", "arguments": {"zone": "Asia/Tokyo"}}]<|/tool_call|>',
        "Sure.",
        [PARIS, TOKYO],
    ),
    ("phi4_mini", '<|tool_call|>[{"name": "get_time", "arguments": {"zone": "Asia/Tokyo"}}]', "", [TOKYO]),
    (
        "phi4_mini",
        '<|tool_call|>{"name": "get_time", "arguments": {"zone": "Asia/Tokyo"}}<|/tool_call|> ok',
        " ok",
        [TOKYO],
    ),
    (
        "phi4_mini",
        '<|tool_call|>[{"name": "get_time", "arguments": {"zone": "Asia/Tokyo"}}, {"name": "get_wea',
        "",
        [TOKYO],
    ),
    ("phi4_mini", "A <|tool", "A <|tool", []),
    # DeepSeek-R1: fenced JSON calls in one block.
    (
        "deepseek_r1",
        f"I will look it up.{DS_BEGIN}{DS_PARIS}\n{DS_TOKYO}{DS_END}",
        "I will look it up.",
        [PARIS, TOKYO],
    ),
    ("deepseek_r1", f"{DS_BEGIN}{DS_PARIS}{DS_END} Then more.", " Then more.", [PARIS]),
    (
        "deepseek_r1",
        f'{DS_BEGIN}{DS_PARIS}\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_time\n```json\n{{"zo',
        "",
        [PARIS],
    ),
    # harmony (as `HarmonyChannels` passes calls on; the format reads them whole or without <|call|>).
    (
        "harmony",
        '<|channel|>commentary to=functions.get_time <|constrain|>json<|message|>{"zone": "Asia/Tokyo"}<|call|>',
        "",
        [TOKYO],
    ),
    (
        "harmony",
        '<|channel|>commentary to=functions.get_time <|constrain|>json<|message|>{"zone": "Asia/Tokyo"}',
        "",
        [TOKYO],
    ),
    ("harmony", '<|channel|>commentary to=functions.get_time <|constrain|>json<|message|>{"zone": "Asi', "", []),
]


@pytest.mark.parametrize(("parser", "text", "content", "calls"), CASES)
@pytest.mark.parametrize("chunk", [1, 3, 7, 1000])
def test_family_formats_split_content_and_calls(parser: str, text: str, content: str, calls: list, chunk: int) -> None:
    assert run(parser, text, chunk) == (content, calls)


@pytest.mark.parametrize("parser", ["qwen3_coder", "glm45", "phi4_mini", "deepseek_r1", "harmony", "hermes", "mistral"])
def test_written_calls_read_back(parser: str) -> None:
    """What `write_calls` writes (earlier turns' calls, the tool prompt's example) parses as the
    same calls: the appliance teaches each model the format it then reads."""
    calls = [("get_weather", {"city": "Paris", "days": 3}), ("get_time", {"zone": "Asia/Tokyo"})]
    if parser == "harmony":
        calls = calls[:1]
    written = tool_parser(parser).write_calls(calls)
    assert run(parser, written, 5) == ("", [call(name, **arguments) for name, arguments in calls])


def split(text: str, reasoning: str | None, tools: str | None, chunk: int, tail: str = "") -> tuple[str, str, list]:
    """(reasoning, content, calls) of `text` through one choice's parsers, as the answer streams."""
    parsers = _ChoiceParsers(0, reasoning, tools, tail, tuple(TOOLS))
    pieces = []
    for start in range(0, len(text), chunk):
        pieces += parsers.feed(text[start : start + chunk], None, final=False)
    pieces += parsers.feed("", None, final=True)
    return (
        "".join(piece.text for piece in pieces if isinstance(piece, ReasoningPiece)),
        "".join(piece.text for piece in pieces if isinstance(piece, ContentPiece)),
        [(piece.name, json.loads(piece.arguments)) for piece in pieces if isinstance(piece, ToolCallPiece)],
    )


HARMONY_CALL = (
    "<|channel|>analysis<|message|>The user wants Tokyo's time. Use get_time.<|end|>"
    '<|start|>assistant<|channel|>commentary to=functions.get_time <|constrain|>json<|message|>{"zone": "Asia/Tokyo"}<|call|>'
)
HARMONY_ANSWER = (
    "<|channel|>analysis<|message|>Simple: 2+2=4.<|end|><|start|>assistant<|channel|>final<|message|>It is 4.<|return|>"
)


@pytest.mark.parametrize("chunk", [1, 2, 5, 1000])
def test_harmony_channels(chunk: int) -> None:
    tokyo = [("get_time", {"zone": "Asia/Tokyo"})]
    reasoning = "The user wants Tokyo's time. Use get_time."
    assert split(HARMONY_CALL, "harmony", "harmony", chunk) == (reasoning, "", tokyo)
    # The engine stops on <|call|> (an end-of-turn token) without writing it.
    assert split(HARMONY_CALL.removesuffix("<|call|>"), "harmony", "harmony", chunk) == (reasoning, "", tokyo)
    # The tool parser alone still keeps the channels apart.
    assert split(HARMONY_CALL, None, "harmony", chunk) == (reasoning, "", tokyo)
    assert split(HARMONY_ANSWER, "harmony", None, chunk) == ("Simple: 2+2=4.", "It is 4.", [])
    assert split(HARMONY_ANSWER.removesuffix("<|return|>"), "harmony", "harmony", chunk) == (
        "Simple: 2+2=4.",
        "It is 4.",
        [],
    )
    # The call in the role part, as the chat template renders earlier calls; a preamble is content.
    role_form = (
        "<|channel|>commentary<|message|>Checking the clock.<|end|>"
        '<|start|>assistant to=functions.get_time<|channel|>commentary json<|message|>{"zone": "Asia/Tokyo"}<|call|>'
    )
    assert split(role_form, "harmony", "harmony", chunk) == ("", "Checking the clock.", tokyo)
    # Cut by max_tokens inside the call's JSON, or inside a header: no call, no markup.
    assert split(HARMONY_CALL[:-12], "harmony", "harmony", chunk) == (reasoning, "", [])
    assert split("<|channel|>analysis<|message|>Hmm.<|end|><|start|>assistant<|chan", "harmony", "harmony", chunk) == (
        "Hmm.",
        "",
        [],
    )
    # A message the prompt opened: the answer starts inside it.
    assert split(
        "Fine.<|end|><|start|>assistant<|channel|>final<|message|>Yes.",
        "harmony",
        None,
        chunk,
        "<|start|>assistant<|channel|>analysis<|message|>",
    ) == ("Fine.", "Yes.", [])
    # Text that is not harmony (special tokens skipped, another model) is content as it is.
    assert split("analysisHello", "harmony", None, chunk) == ("", "analysisHello", [])


@pytest.mark.parametrize("chunk", [1, 3, 1000])
def test_reasoning_opened_by_the_template_then_calls(chunk: int) -> None:
    """Qwen3 and DeepSeek-R1 distills: the generation prompt ends with `<think>`, so the answer
    starts inside the reasoning; then a call in the model's own format."""
    tail = "<｜Assistant｜><think>\n"
    text = f"Need the weather.\n</think>\n\n{DS_BEGIN}{DS_PARIS}{DS_END}"
    assert split(text, "think", "deepseek_r1", chunk, tail) == (
        "Need the weather.\n",
        "",
        [("get_weather", {"city": "Paris", "days": 3})],
    )
    qwen3 = (
        '<think>\nCall it.\n</think>\n\n<tool_call>\n{"name": "get_time", "arguments": {"zone": "UTC"}}\n</tool_call>'
    )
    assert split(qwen3, "think", "hermes", chunk) == ("\nCall it.\n", "", [("get_time", {"zone": "UTC"})])


def test_reasoning_stream_by_name() -> None:
    think = reasoning_stream("think", prompt_tail="<think>\n")
    assert think.feed("a</think>b") == ("a", "b")
    harmony = reasoning_stream("harmony")
    assert harmony.feed("<|channel|>final<|message|>hi") == ("", "hi")


@pytest.mark.parametrize("parser", ["qwen3_coder", "glm45", "phi4_mini", "deepseek_r1", "harmony"])
def test_forced_call_grammars(parser: str) -> None:
    named = forced_call_grammar(parser, TOOLS, "get_time", max_calls=4)
    assert "get_time" in named and "get_weather" not in named
    parse_grammar(named)  # what we write reads back as a valid grammar
    any_tool = forced_call_grammar(parser, TOOLS, None, max_calls=3)
    assert "get_weather" in any_tool and "get_time" in any_tool
    parse_grammar(any_tool)
    if parser != "harmony":  # harmony: one call per turn
        assert "{0,2}" in any_tool


@pytest.mark.parametrize("parser", ["qwen3_coder", "glm45", "phi4_mini", "deepseek_r1", "harmony", "hermes", "mistral"])
def test_what_the_forced_grammar_allows_is_what_the_parser_reads(parser: str) -> None:
    """The calls as the model writes them match the forced grammar (read as a regex), and a
    string outside the schema does not: the grammar and the parser agree on the format."""
    pattern = to_regex(forced_call_grammar(parser, TOOLS, None, max_calls=2))
    calls = [("get_weather", {"city": "Paris", "days": 3, "units": "metric"}), ("get_time", {"zone": "UTC"})]
    calls = calls[:1] if parser == "harmony" else calls
    written = tool_parser(parser).write_calls(calls).removesuffix("<|call|>")
    assert pattern.fullmatch(written), written
    assert run(parser, written, 4)[1] == [call(name, **arguments) for name, arguments in calls]
    wrong = tool_parser(parser).write_calls([("get_weather", {"city": "Paris", "days": "three"})])
    assert not pattern.fullmatch(wrong.removesuffix("<|call|>"))


def test_qwen3_coder_grammar_types_each_parameter() -> None:
    pattern = to_regex(forced_call_grammar("qwen3_coder", TOOLS, "get_weather", max_calls=1))
    head = "<tool_call>\n<function=get_weather>\n"
    city = "<parameter=city>\nSt. <Paris> a<<b\n</parameter>\n"
    assert pattern.fullmatch(f"{head}{city}</function>\n</tool_call>")
    closing = "<parameter=city>\nSt. </Paris>\n</parameter>\n"
    assert not pattern.fullmatch(f"{head}{closing}</function>\n</tool_call>")  # text values hold no `</`
    assert pattern.fullmatch(f"{head}<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>")
    units = "<parameter=units>\nkelvin\n</parameter>\n"
    assert not pattern.fullmatch(f"{head}<parameter=city>\nParis\n</parameter>\n{units}</function>\n</tool_call>")
    # city is required.
    assert not pattern.fullmatch(f"{head}<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>")


FORMATS = ["hermes", "llama3_json", "mistral", "phi4_mini", "qwen3_coder", "glm45", "deepseek_r1", "harmony"]


@pytest.mark.parametrize("parser", FORMATS)
def test_the_request_grammar_forces_calls_in_every_format(parser: str) -> None:
    """tool_choice required: the whole output is calls in the model's format; tools with a
    response format (tool_choice auto): calls in that format or the JSON answer."""
    body = {
        "model": "fake",
        "messages": [{"role": "user", "content": "hi"}],
        "tools": [
            {"type": "function", "function": {"name": name, "parameters": schema}} for name, schema in SCHEMAS.items()
        ],
    }
    graph = msgspec.structs.replace(fake_graph(), tool_parser=parser)
    required = msgspec.convert({**body, "tool_choice": "required"}, ChatCompletionRequest)
    grammar = output_grammar(required, graph, ToolPlan.of(required, graph, parser))
    written = tool_parser(parser).write_calls([("get_time", {"zone": "UTC"})]).removesuffix("<|call|>")
    assert grammar is not None and to_regex(grammar).fullmatch(written)
    answer = {
        "type": "json_schema",
        "json_schema": {"name": "a", "schema": {"type": "object", "properties": {"x": {"type": "integer"}}}},
    }
    either = msgspec.convert({**body, "response_format": answer}, ChatCompletionRequest)
    grammar = output_grammar(either, graph, ToolPlan.of(either, graph, parser))
    assert grammar is not None
    assert to_regex(grammar).fullmatch(written) and to_regex(grammar).fullmatch('{"x": 1}')
    assert not to_regex(grammar).fullmatch("plain text")


def test_qwen3_coder_grammar_bounds_string_parameters() -> None:
    tool = Tool(
        function=FunctionDefinition(
            name="f",
            parameters={
                "type": "object",
                "properties": {
                    "code": {"type": "string", "maxLength": 3},
                    "id": {"type": "string", "pattern": "^[A-Z][0-9]{2}$"},
                    "kind": {"type": "string", "const": "x"},
                },
                "required": ["code", "id", "kind"],
            },
        )
    )
    pattern = to_regex(forced_call_grammar("qwen3_coder", [tool], "f", max_calls=1))

    def call(code: str, id_: str, kind: str = "x") -> str:
        parameters = "".join(
            f"<parameter={key}>\n{value}\n</parameter>\n"
            for key, value in (("code", code), ("id", id_), ("kind", kind))
        )
        return f"<tool_call>\n<function=f>\n{parameters}</function>\n</tool_call>"

    assert pattern.fullmatch(call("abc", "B12"))
    assert not pattern.fullmatch(call("abcd", "B12"))
    assert not pattern.fullmatch(call("abc", "b12"))
    assert not pattern.fullmatch(call("abc", "B12", "y"))
    with pytest.raises(GrammarError) as info:
        forced_call_grammar(
            "qwen3_coder",
            [
                Tool(
                    function=FunctionDefinition(
                        name="g",
                        parameters={"type": "object", "properties": {"d": {"type": "string", "format": "date"}}},
                    )
                )
            ],
            None,
            1,
        )
    assert info.value.path == "tools[0].function.parameters.properties.d"
