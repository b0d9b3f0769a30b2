"""Model output is untrusted input: every tool-call parser and reasoning splitter on hostile text.

- Linear time: 128 KB outputs built to hurt each format (unterminated names, calls that never
  close, long runs of spaces, deep nesting, a tag's start at every character, many tiny calls),
  streamed in 3-character deltas as an engine gives them and whole, each in well under a second,
  and twice the text in about twice the time (a re-scan per delta, or a backtracking regex, is 4x).
- Arguments are strict JSON (RFC 8259): `NaN`, `Infinity`, numbers beyond a double and lone
  surrogates make a call malformed, treated as the format treats any malformed call.
- A closing marker inside an argument's JSON string (or inside a tag value) is text of it.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable

import msgspec
import pytest

from appliance.service.tool_formats import FORMATS
from appliance.service.tool_parsers import ParsedCall, tool_parser
from tests.unit.test_tool_formats import DS_BEGIN, DS_END, run, split

SIZE = 128 * 1024
DELTA = 3
GROWTH = 3.0  # linear work doubles; work re-scanned per delta, or backtracked, quadruples
BOUND = 1.0  # CPU seconds for 128 KB: the parsers take 0.001-0.25 s on 2 EPYC cores
# Below this many CPU seconds for 128 KB the ratio is noise (allocation, caches: 35 vs 100 us was
# seen in CI), and no super-linear work can hide there: re-scanning 128 KB per 3-character delta is
# ~3e9 character steps, a backtracking pass ~1e10, both far above a few milliseconds.
FLOOR = 0.002
DS_CALL = "<｜tool▁call▁begin｜>function<｜tool▁sep｜>"
HARMONY_CALL = "<|channel|>commentary to=functions.get_time <|constrain|>json<|message|>"


def fill(unit: str, size: int) -> str:
    return unit * (size // len(unit))


# (label, reasoning parser, tool parser, the hostile text of about `size` characters)
SHAPES: list[tuple[str, str | None, str | None, Callable[[int], str]]] = [
    ("open call", None, "hermes", lambda n: '<tool_call>{"name": "f", "arguments": {"s": "' + fill("a", n)),
    ("not json", None, "hermes", lambda n: "<tool_call>" + fill("a", n)),
    ("nesting", None, "hermes", lambda n: "<tool_call>" + fill("[", n)),
    ("markers in a string", None, "hermes", lambda n: '<tool_call>{"s": "' + fill("</tool_call>", n)),
    ("escapes", None, "hermes", lambda n: '<tool_call>{"s": "' + fill('\\"', n)),
    ("spaces", None, "hermes", lambda n: "<tool_call>" + fill(" ", n) + "{"),
    ("marker starts", None, "hermes", lambda n: fill("<tool_cal", n)),
    ("tiny calls", None, "hermes", lambda n: fill('<tool_call>{"name": "f", "arguments": {}}</tool_call>', n)),
    ("open call", None, "llama3_json", lambda n: '{"name": "f", "parameters": {"s": "' + fill("a", n)),
    ("spaces", None, "llama3_json", lambda n: fill(" ", n) + '{"name": "f"'),
    ("tiny calls", None, "llama3_json", lambda n: fill('{"name": "f", "parameters": {}}; ', n)),
    ("unterminated name", None, "mistral", lambda n: "[TOOL_CALLS]" + fill("a", n)),
    ("nesting", None, "mistral", lambda n: "[TOOL_CALLS][" + fill("[", n)),
    ("tiny calls", None, "mistral", lambda n: "[TOOL_CALLS]" + fill("f[ARGS]{}", n)),
    ("open list", None, "phi4_mini", lambda n: "<|tool_call|>[" + fill('{"name": "f", "arguments": {}}, ', n)),
    ("nesting", None, "phi4_mini", lambda n: "<|tool_call|>" + fill("{", n)),
    ("marker starts", None, "phi4_mini", lambda n: '<|tool_call|>[{"s": 1' + fill("<|/tool_call", n)),
    ("unterminated name", None, "qwen3_coder", lambda n: "<tool_call>\n<function=" + fill("a", n)),
    ("open value", None, "qwen3_coder", lambda n: "<tool_call>\n<function=f>\n<parameter=x>\n" + fill("a", n)),
    ("closing tags", None, "qwen3_coder", lambda n: "<tool_call>\n<function=f>\n" + fill("</function>\n", n)),
    ("open parameters", None, "qwen3_coder", lambda n: "<tool_call>\n<function=f>\n" + fill("<parameter=", n)),
    ("unterminated name", None, "glm45", lambda n: "<tool_call>" + fill("a", n)),
    ("open pairs", None, "glm45", lambda n: "<tool_call>f\n" + fill("<arg_key>k</arg_key><arg_value>", n)),
    ("key ends", None, "glm45", lambda n: "<tool_call>f\n<arg_key>" + fill("k</arg_key>", n)),
    ("unterminated name", None, "deepseek_r1", lambda n: DS_BEGIN + DS_CALL + fill("a", n)),
    ("spaces", None, "deepseek_r1", lambda n: DS_BEGIN + fill(" ", n)),
    (
        "tiny calls",
        None,
        "deepseek_r1",
        lambda n: DS_BEGIN + fill(DS_CALL + "f\n```json\n{}\n```<｜tool▁call▁end｜>\n", n),
    ),
    ("name and spaces", "harmony", "harmony", lambda n: "<|channel|>commentary to=functions.f" + fill(" ", n)),
    ("open call", "harmony", "harmony", lambda n: HARMONY_CALL + '{"zone": "' + fill("a", n)),
    ("open header", "harmony", "harmony", lambda n: "<|channel|>" + fill("a", n)),
    ("tag starts", "harmony", "harmony", lambda n: "<|channel|>analysis<|message|>" + fill("<|en", n)),
    ("tiny messages", "harmony", None, lambda n: fill("<|start|>assistant<|channel|>final<|message|>x<|end|>", n)),
    ("spaces", "harmony", None, lambda n: fill(" ", n) + "x"),
    ("open reasoning", "think", "hermes", lambda n: "<think>" + fill("a", n)),
    ("tag starts", "think", "hermes", lambda n: "<think>" + fill("</thin", n)),
    ("spaces", "think", "hermes", lambda n: fill(" ", n) + "x"),
]


def seconds(work: Callable[[], object], loops: int) -> float:
    """CPU seconds of one run of `work` (the thread's own time: on a shared box, waiting for a
    core is not the parser's cost)."""
    start = time.thread_time()
    for _ in range(loops):
        work()
    return (time.thread_time() - start) / loops


def best_times(small: Callable[[], object], large: Callable[[], object]) -> tuple[float, float]:
    """The least time of `small` and of `large` over up to seven rounds (a shared box is noisy:
    the least is the work itself), stopping once `large` is within GROWTH of `small`. Quick work is
    repeated to last some 20 ms per measure."""
    first = seconds(small, 1)
    loops = max(1, min(200, math.ceil(0.02 / max(first, 1e-6))))
    best_small = first if loops == 1 else seconds(small, loops)
    best_large = seconds(large, loops)
    for _ in range(6):
        if best_large < GROWTH * best_small:
            break
        best_small = min(best_small, seconds(small, loops))
        best_large = min(best_large, seconds(large, loops))
    return best_small, best_large


def assert_linear(small: float, large: float) -> None:
    """Twice the text in about twice the time, and well under BOUND (times in CPU seconds)."""
    assert large < BOUND, f"{large:.2f} s for 128 KB"
    if large < FLOOR:
        return
    assert large < GROWTH * small, f"twice the text took {large / small:.1f}x the time ({small:.4f} s, {large:.4f} s)"


@pytest.mark.parametrize("delta", [DELTA, SIZE], ids=["streamed", "whole"])
@pytest.mark.parametrize(
    ("label", "reasoning", "tools", "make"),
    SHAPES,
    ids=[f"{tools}-{reasoning}-{label.replace(' ', '_')}" for label, reasoning, tools, _ in SHAPES],
)
def test_parsers_are_linear_on_hostile_output(
    label: str, reasoning: str | None, tools: str | None, make: Callable[[int], str], delta: int
) -> None:
    half, whole = make(SIZE // 2), make(SIZE)
    assert len(whole) > SIZE * 0.9
    small, large = best_times(
        lambda: split(half, reasoning, tools, delta), lambda: split(whole, reasoning, tools, delta)
    )
    assert_linear(small, large)


@pytest.mark.parametrize(
    ("label", "parser", "make"),
    [(label, tools, make) for label, _, tools, make in SHAPES if tools],
    ids=[f"{tools}-{label.replace(' ', '_')}" for label, _, tools, _ in SHAPES if tools],
)
def test_reading_calls_from_whole_text_is_linear(label: str, parser: str, make: Callable[[int], str]) -> None:
    """`parse_calls` alone, on the text as it is (a format's reader must not backtrack either:
    glm45's regex took 85 s on an unterminated 128 KB name, harmony's 1 s on 24,000 spaces)."""
    format_ = tool_parser(parser)
    half, whole = make(SIZE // 2), make(SIZE)
    small, large = best_times(lambda: format_.parse_calls(half), lambda: format_.parse_calls(whole))
    assert_linear(small, large)


def test_every_format_is_measured() -> None:
    assert {tools for _, _, tools, _ in SHAPES} - {None} == set(FORMATS)


# Malformed JSON in each format, and where the format leaves a malformed call: a closed block
# stays in content (as a block that is not JSON at all); mistral's calls run to the end of the
# answer and are dropped; llama3_json's answer is then plain content.
NOT_JSON = ["NaN", "Infinity", "-Infinity", "1e999", "-1e400", '"\\ud800"', '"\\udfff x"']


def malformed(parser: str, value: str) -> tuple[str, str]:
    """(the text of a call of get_time whose `zone` is `value`, the content it leaves)."""
    block = {
        "hermes": f'<tool_call>{{"name": "get_time", "arguments": {{"zone": {value}}}}}</tool_call>',
        "llama3_json": f'{{"name": "get_time", "parameters": {{"zone": {value}}}}}',
        "mistral": f'[TOOL_CALLS][{{"name": "get_time", "arguments": {{"zone": {value}}}}}]',
        "phi4_mini": f'<|tool_call|>[{{"name": "get_time", "arguments": {{"zone": {value}}}}}]<|/tool_call|>',
        "deepseek_r1": f'{DS_BEGIN}{DS_CALL}get_time\n```json\n{{"zone": {value}}}\n```<｜tool▁call▁end｜>{DS_END}',
        "harmony": f'{HARMONY_CALL}{{"zone": {value}}}<|call|>',
    }[parser]
    return block, "" if parser == "mistral" else block


@pytest.mark.parametrize("value", NOT_JSON)
@pytest.mark.parametrize("parser", ["hermes", "llama3_json", "mistral", "phi4_mini", "deepseek_r1", "harmony"])
@pytest.mark.parametrize("chunk", [1, 4, 1000])
def test_arguments_that_are_not_strict_json_are_no_call(parser: str, value: str, chunk: int) -> None:
    text, content = malformed(parser, value)
    assert run(parser, text, chunk) == (content, [])
    # Arguments given as JSON text are held to the same rule.
    if parser == "hermes":
        quoted = json.dumps(json.dumps({"zone": "x"}).replace('"x"', value))
        stringly = f'<tool_call>{{"name": "get_time", "arguments": {quoted}}}</tool_call>'
        assert run(parser, stringly, chunk) == (stringly, [])


def test_a_lone_surrogate_in_a_name_is_no_call() -> None:
    text = '<tool_call>{"name": "get_\\ud800", "arguments": {}}</tool_call>'
    assert run("hermes", text, 3) == (text, [])


def test_arguments_too_deep_to_write_back_are_no_call() -> None:
    """Nested just under the decoder's limit: writing them back started deeper in the stack
    and raised RecursionError (a 500) before."""
    for depth in (900, 990, 5000):
        text = '<tool_call>{"name": "f", "arguments": ' + '{"a": ' * depth + "1" + "}" * depth + "}</tool_call>"
        content, calls = run("hermes", text, 1000)
        assert calls == [] or json.loads(calls[0].arguments)
        assert content == ("" if calls else text)


@pytest.mark.parametrize("parser", ["qwen3_coder", "glm45"])
def test_tag_values_that_are_not_strict_json_stay_text(parser: str) -> None:
    """Values typed by the schema: a non-string one that is not strict JSON is kept as the text
    the model wrote (a JSON string), as any value that does not parse."""
    values = {"days": "NaN", "city": "Oslo", "detail": "1e999"}
    written = tool_parser(parser).write_calls([("get_weather", values)])
    assert run(parser, written, 3) == ("", [ParsedCall("get_weather", json.dumps(values))])


def test_numbers_keep_their_value() -> None:
    arguments = '{"big": 123456789012345678901234567890, "small": 5e-324, "max": 1.7976931348623157e308, "neg": -0.0}'
    text = f'<tool_call>{{"name": "f", "arguments": {arguments}}}</tool_call>'
    [parsed] = run("hermes", text, 5)[1]
    assert json.loads(parsed.arguments) == json.loads(arguments)
    assert '"big": 123456789012345678901234567890' in parsed.arguments


# A closing marker inside an argument: (parser, text, the arguments of its one call, the content).
INSIDE = [
    (
        "hermes",
        '<tool_call>{"name": "get_time", "arguments": {"zone": "a</tool_call>b"}}</tool_call> ok',
        "a</tool_call>b",
    ),
    (
        "hermes",
        '<tool_call>{"name": "get_time", "arguments": {"zone": "\\"</tool_call>\\\\"}}</tool_call> ok',
        '"</tool_call>\\',
    ),
    (
        "hermes",
        '<tool_call>{"name": "get_time", "arguments": "{\\"zone\\": \\"</tool_call>\\"}"}</tool_call> ok',
        "</tool_call>",
    ),
    (
        "phi4_mini",
        '<|tool_call|>[{"name": "get_time", "arguments": {"zone": "]<|/tool_call|>"}}]<|/tool_call|> ok',
        "]<|/tool_call|>",
    ),
    (
        "deepseek_r1",
        f'{DS_BEGIN}{DS_CALL}get_time\n```json\n{{"zone": "```<｜tool▁call▁end｜>{DS_END}"}}\n```<｜tool▁call▁end｜>{DS_END} ok',
        f"```<｜tool▁call▁end｜>{DS_END}",
    ),
    ("harmony", f'{HARMONY_CALL}{{"zone": "<|call|>"}}<|call|> ok', "<|call|>"),
    (
        "qwen3_coder",
        "<tool_call>\n<function=get_time>\n<parameter=zone>\nx</function>\n</tool_call>\n</parameter>\n</function>\n</tool_call> ok",
        "x</function>\n</tool_call>",
    ),
    (
        "glm45",
        "<tool_call>get_time\n<arg_key>zone</arg_key>\n<arg_value>x</tool_call></arg_value>\n</tool_call> ok",
        "x</tool_call>",
    ),
]


@pytest.mark.parametrize(("parser", "text", "zone"), INSIDE)
@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 1000])
def test_a_closing_marker_inside_an_argument_is_text(parser: str, text: str, zone: str, chunk: int) -> None:
    assert run(parser, text, chunk) == (" ok", [ParsedCall("get_time", json.dumps({"zone": zone}, ensure_ascii=False))])


@pytest.mark.parametrize("tag", ["<|call|>", "<|end|>", "<|return|>", "<|start|>"])
@pytest.mark.parametrize("chunk", [1, 3, 1000])
def test_harmony_tags_inside_a_call_string_are_text(tag: str, chunk: int) -> None:
    text = (
        "<|channel|>analysis<|message|>Time.<|end|><|start|>assistant<|channel|>commentary to=functions.get_time "
        f'<|constrain|>json<|message|>{{"zone": "{tag}\\"{tag}"}}<|call|>'
    )
    assert split(text, "harmony", "harmony", chunk) == ("Time.", "", [("get_time", {"zone": f'{tag}"{tag}'})])


def test_an_unclosed_string_runs_to_the_end_and_is_dropped() -> None:
    """A block whose JSON leaves a string open never closes: like a call max_tokens cut, its
    markup is dropped (the text before it stays)."""
    assert run("hermes", 'Hi <tool_call>{"name": "f", "arguments": {"a": "x}}</tool_call> more', 3) == ("Hi ", [])


@pytest.mark.parametrize("parser", sorted(FORMATS))
def test_arguments_always_read_back_with_a_strict_parser(parser: str) -> None:
    """Whatever the format read, its arguments are JSON a strict decoder (msgspec's) accepts."""
    values = {"zone": 'Zürich \u2028 </tool_call> <|call|> \\ " \n', "n": [1, -2.5e300, True, None, {"k": {}}]}
    written = tool_parser(parser).write_calls([("get_time", values)])
    [parsed] = run(parser, written, 2)[1]
    assert msgspec.json.decode(parsed.arguments) == json.loads(parsed.arguments)
