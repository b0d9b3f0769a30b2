"""appliance.grammar: JSON schemas, regexes and user grammars -> EBNF, checked without the engine.

Non-recursive grammars are turned into Python regexes here (literals, classes, groups and
quantifiers map one to one), so what a grammar accepts can be tested directly. The e2e tests run
the same grammars through OpenVINO GenAI.
"""

from __future__ import annotations

import json
import re

import jsonschema
import pytest

from appliance.grammar import (
    GrammarError,
    json_object_grammar,
    json_schema_grammar,
    parse_grammar,
    regex_grammar,
)

_TOKEN = re.compile(r'\s+|"(?:\\.|[^"\\])*"|\[(?:\\.|[^\]\\])*\]|\{\d+(?:,\d*)?\}|[A-Za-z_][A-Za-z0-9_-]*|[()|*+?]')
_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|.)")


def _unescape(text: str) -> str:
    def one(match: re.Match[str]) -> str:
        code = match.group(1)
        if code[0] in "uU" and len(code) > 1:
            return chr(int(code[1:], 16))
        return {"n": "\n", "t": "\t", "r": "\r"}.get(code, code)

    return _ESCAPE.sub(one, text)


def to_regex(grammar: str) -> re.Pattern[str]:
    """A Python regex for a non-recursive grammar written by appliance.grammar."""
    rules = {}
    for line in grammar.strip().splitlines():
        name, body = line.split(" ::= ", 1)
        rules[name] = body

    def expand(name: str, depth: int = 0) -> str:
        assert depth < 50, "recursive grammar"
        out = []
        for token in _TOKEN.findall(rules[name]):
            if token.isspace():
                continue
            if token.startswith('"'):
                out.append(re.escape(_unescape(token[1:-1])))
            elif token.startswith("["):
                out.append(token)  # \uXXXX and \UXXXXXXXX escapes mean the same in Python
            elif token[0].isalpha() or token[0] == "_":
                out.append(f"(?:{expand(token, depth + 1)})")
            elif token == "(":
                out.append("(?:")
            else:
                out.append(token)
        return "".join(out)

    return re.compile(expand("root"), re.S)


# -- regex ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "good", "bad"),
    [
        (r"^\d{3}-[a-z]{2,4}$", ["123-ab", "000-abcd"], ["12-ab", "123-abcde", "123-AB"]),
        (r"colou?r|grey", ["color", "colour", "grey"], ["colr", "gray"]),
        (r"[^\d\s]x.", ["axb", "_x!"], ["1xb", " xb", "ax\n"]),
        (r"(ab)+\.\*", ["ab.*", "abab.*"], ["a.*", "ab.x"]),
    ],
)
def test_regex_grammar_matches_like_the_regex(pattern: str, good: list[str], bad: list[str]) -> None:
    compiled = to_regex(regex_grammar(pattern))
    for text in good:
        assert compiled.fullmatch(text), text
    for text in bad:
        assert not compiled.fullmatch(text), text


@pytest.mark.parametrize(
    ("pattern", "message"),
    [
        ("a(?=b)", "look-ahead"),
        (r"(a)\1", "back-reference"),
        ("a^b", "anchor"),
        ("(?i)ab", "flags"),
        ("a{1,20000}", "Repetition"),
        ("(unclosed", "Invalid regular expression"),
    ],
)
def test_unsupported_regex_is_refused(pattern: str, message: str) -> None:
    with pytest.raises(GrammarError, match=message):
        regex_grammar(pattern)


# -- user grammars ------------------------------------------------------------------------------


def test_user_grammar_is_rewritten_and_keeps_its_language() -> None:
    text = (
        'root ::= greeting (" " name)? # a comment\n  | "bye"\ngreeting ::= "hi" | "hello"\nname ::= [A-Z] [a-z]{1,5}\n'
    )
    compiled = to_regex(parse_grammar(text))
    for good in ("hi", "hello Ann", "bye"):
        assert compiled.fullmatch(good)
    for bad in ("hey", "hi ann", "hi Annabelle"):
        assert not compiled.fullmatch(bad)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("root ::= x", "rule 'x' is used but not defined"),
        ('x ::= "a"', "no `root` rule"),
        ('root ::= "a', "unterminated string"),
        ("root ::= (", "missing ')'"),
        ("root ::= [z-a]", "out of order"),
        ('root ::= "a"{3,1}', "maximum below its minimum"),
        ('root ::= "\\q"', "unknown escape"),
        ('root ::= "a"\nroot ::= "b"', "defined twice"),
        ('root ::= "a" @', "unexpected character"),
    ],
)
def test_bad_user_grammar_names_the_problem(text: str, message: str) -> None:
    with pytest.raises(GrammarError, match=re.escape(message)):
        parse_grammar(text)


def test_negated_classes_are_written_as_valid_characters_only() -> None:
    # xgrammar's [^...] admits bytes that are not UTF-8: never write one.
    written = parse_grammar('root ::= [^"]+')
    assert "[^" not in written
    assert "\\ud7ff\\ue000" in written  # the surrogates are left out


# -- JSON -------------------------------------------------------------------------------------

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 8},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "score": {"type": "number", "exclusiveMinimum": -1.5, "maximum": 2},
        "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 2},
        "kind": {"anyOf": [{"const": "x"}, {"type": "null"}]},
    },
    "required": ["name", "age"],
    "additionalProperties": False,
}


@pytest.mark.parametrize(
    "document",
    [
        {"name": "Ann", "age": 0},
        {"name": "", "age": 120, "score": 2},
        {"name": 'x"y', "age": 7, "score": -0.25, "tags": ["a", "b"], "kind": None},
        {"name": "A", "age": 33, "kind": "x"},
    ],
)
def test_schema_grammar_accepts_compact_valid_documents(document: dict) -> None:
    compiled = to_regex(json_schema_grammar(PERSON))
    for separators in ((",", ":"), (", ", ": ")):
        assert compiled.fullmatch(json.dumps(document, separators=separators)), document


@pytest.mark.parametrize(
    "text",
    [
        '{"name": "Ann"}',  # age missing
        '{"name": "Ann", "age": 121}',
        '{"name": "Ann", "age": -1}',
        '{"name": "Annabelle1", "age": 1}',
        '{"name": "Ann", "age": 1, "score": -1.5}',
        '{"name": "Ann", "age": 1, "score": 2.5}',
        '{"name": "Ann", "age": 1, "tags": ["a", "b", "a"]}',
        '{"name": "Ann", "age": 1, "extra": 1}',
        '{"age": 1, "name": "Ann"}',  # schema order only
        '{"name":  "Ann", "age": 1}',  # at most one space
        '{\n"name": "Ann", "age": 1}',
    ],
)
def test_schema_grammar_refuses_what_the_schema_or_compact_form_refuses(text: str) -> None:
    assert not to_regex(json_schema_grammar(PERSON)).fullmatch(text)


def test_integer_ranges_are_exact() -> None:
    for low, high in ((0, 0), (3, 17), (-25, 7), (95, 1003), (-1000, -999)):
        compiled = to_regex(json_schema_grammar({"type": "integer", "minimum": low, "maximum": high}))
        for value in range(low - 30, high + 30):
            assert bool(compiled.fullmatch(str(value))) == (low <= value <= high), (low, high, value)


def test_every_document_a_grammar_accepts_validates() -> None:
    compiled = to_regex(json_schema_grammar(PERSON))
    candidates = [
        '{"name":"","age":5,"score":1.75}',
        '{"name":"q","age":99,"score":-0.5,"tags":[]}',
        '{"name":"\\u0041","age":1,"kind":null}',
    ]
    for text in candidates:
        assert compiled.fullmatch(text), text
        jsonschema.validate(json.loads(text), PERSON)


def test_refs_and_recursion() -> None:
    schema = {
        "$defs": {
            "node": {
                "type": "object",
                "properties": {"next": {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]}},
                "required": ["next"],
            }
        },
        "$ref": "#/$defs/node",
    }
    grammar = json_schema_grammar(schema)
    assert "node ::=" in grammar  # one rule, referring to itself


def test_json_object_grammar_has_no_free_whitespace() -> None:
    grammar = json_object_grammar()
    assert grammar.startswith("root ::= json-object")
    assert '" "?' in grammar and "[ \\t\\n" not in grammar and "ws" not in grammar


def test_annotations_and_unknown_keywords_are_ignored() -> None:
    plain = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    annotated = {
        "type": "object",
        "strict": True,
        "$comment": "from an MCP server",
        "x-order": 1,
        "properties": {
            "city": {"type": "string", "example": "Paris", "examples": ["Oslo"], "deprecated": False, "readOnly": True}
        },
        "required": ["city"],
        "additionalProperties": False,
    }
    assert json_schema_grammar(annotated) == json_schema_grammar({**plain, "additionalProperties": False})
    assert json_schema_grammar({"$ref": "#/$defs/a", "description": "x", "x-y": 1, "$defs": {"a": {"type": "string"}}})


@pytest.mark.parametrize(
    ("schema", "path", "message"),
    [
        ({"type": "nonsense"}, "type", "`type` must be one of"),
        ({"type": "string", "format": "hostname"}, "format", "not supported"),
        ({"type": "array", "uniqueItems": True}, "uniqueItems", "not supported"),
        ({"not": {"type": "string"}}, "not", "not supported"),
        ({"properties": {"a": {"type": "integer", "multipleOf": 2}}}, "properties.a.multipleOf", "not supported"),
        ({"$ref": "#/$defs/missing"}, "$ref", "does not resolve"),
        ({"type": "integer", "minimum": 5, "maximum": 1}, "", "No integer"),
        ({"allOf": [{"type": "string"}, {"maxLength": 2}]}, "allOf", "more than one"),
        ({"type": "string", "pattern": "a(?=b)"}, "pattern", "look-ahead"),
    ],
)
def test_unsupported_schema_names_the_keyword(schema: dict, path: str, message: str) -> None:
    with pytest.raises(GrammarError, match=re.escape(message)) as info:
        json_schema_grammar(schema)
    assert info.value.path == path
