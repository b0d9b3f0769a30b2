"""gpt-oss's harmony format: the answer is a sequence of messages, each on a channel.

    <|channel|>analysis<|message|>The user wants the weather. Call get_weather.<|end|>
    <|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "Paris"}<|call|>

    <|channel|>analysis<|message|>Easy.<|end|><|start|>assistant<|channel|>final<|message|>It is sunny.<|return|>

(the first message's `<|start|>assistant` is the end of the prompt). `analysis` is the model's
reasoning; `final` is the answer; `commentary` without a recipient is a preamble the user may
see (content); a message addressed `to=functions.NAME` (in the channel part, or in the role part:
`<|start|>assistant to=functions.NAME<|channel|>commentary json<|message|>`, as the chat template
renders earlier calls) is a call, its body the JSON arguments. `<|call|>` and `<|return|>` are
end-of-turn tokens: the engine may stop on them without writing them, so a call whose JSON is
complete when the answer ends is a call (a call cut inside its JSON is not). The model makes one
call per turn: a forced call is one call.

`HarmonyChannels` splits the messages (the reasoning parser `harmony`, also used whenever the
tool parser is harmony): reasoning out, content out, each call passed on as one canonical
`<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{...}<|call|>` for `Harmony`,
the call format, to read. Text that does not start as a harmony message is content, unchanged;
a prompt that ends inside a message's header (`...<|channel|>final<|message|>`) starts the
answer in that message. Header markup never reaches either part.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from appliance.grammar import schema_expression
from appliance.grammar.ebnf import RuleSet, literal
from appliance.service.tool_formats.base import DECODER, NO_SCHEMAS, CallBlock, CallFormat, ParsedCall, json_call
from appliance.service.tool_formats.scanning import JsonScanner, blank_end, held_back, may_become

__all__ = ["Harmony", "HarmonyChannels"]

START, CHANNEL, MESSAGE = "<|start|>", "<|channel|>", "<|message|>"
ENDS = ("<|end|>", "<|call|>", "<|return|>")
BODY_ENDS = ENDS + (START,)
"""What ends a message's body: an end tag, or the next message's start (not consumed)."""
CALL_PREFIX = "<|channel|>commentary to=functions."
# Each run of spaces is bounded by a tag, so no two can trade characters (backtracking over a
# name and 24,000 spaces took a second).
_CALL = re.compile(
    r"\s*+" + re.escape(CALL_PREFIX) + r"([^\s<]++)\s*+(?:<\|constrain\|>\s*+)?(?:json\s*+)?" + re.escape(MESSAGE)
)
_CALL_END = re.compile(r"\s*+<\|call\|>")
_BODY_END = re.compile("|".join(re.escape(tag) for tag in BODY_ENDS))


class Harmony(CallFormat):
    name = "harmony"
    marker = CALL_PREFIX
    end = "<|call|>"

    def parse_calls(self, text: str, schemas: Mapping[str, Any] = NO_SCHEMAS) -> tuple[list[ParsedCall], int]:
        calls: list[ParsedCall] = []
        position = 0
        while head := _CALL.match(text, position):
            try:
                arguments, after = DECODER.raw_decode(text, head.end())
            except (ValueError, RecursionError):
                break
            call = json_call({"name": head.group(1), "arguments": arguments})
            closing = _CALL_END.match(text, after)
            if call is None or (closing is None and text[after:].strip()):
                break
            calls.append(call)
            position = closing.end() if closing else len(text)
        return calls, position

    def write_calls(self, calls: list[tuple[str, dict[str, Any]]]) -> str:
        return "".join(
            f"{CALL_PREFIX}{name} <|constrain|>json{MESSAGE}{json.dumps(arguments, ensure_ascii=False)}<|call|>"
            for name, arguments in calls
        )

    def call_grammar(self, name: str, schema: dict[str, Any], rules: RuleSet, path: str) -> str:
        """The call after its prefix (`CALL_PREFIX`, the marker: written by `forced`, or the
        trigger in auto mode): the name, the header's end and the arguments."""
        return f"{literal(f'{name} <|constrain|>json{MESSAGE}')} {schema_expression(schema, rules, path)}"

    def auto_block(self, call: str, max_calls: int, rules: RuleSet) -> CallBlock:
        # The model makes one call per turn and ends it with <|call|>, an end-of-turn token.
        return CallBlock(CALL_PREFIX, call, last=True)

    def forced(self, call: str, max_calls: int, rules: RuleSet) -> str:
        # One call: the model ends its turn with <|call|>, an end-of-turn token the engine stops on.
        return f"{literal(CALL_PREFIX)} {call}"


class HarmonyChannels:
    """Feed generated text; get back (reasoning, content) as far as they are known, calls kept in
    content as canonical harmony call markup (see the module docstring).

    Text is looked at once as it arrives: only a tag's start is held back between pieces (and
    blank text before a header); a header and a call's body, which are passed on whole, are kept
    in parts, the body's end found by a `JsonScanner` (so `<|call|>` in a JSON string is text).
    """

    def __init__(self, *, prompt_tail: str = "") -> None:
        self._state = "start"  # "start" (of the answer, or after a message), "header", "body", "plain"
        self._held = ""  # the start of a tag, until the next piece tells
        self._blank: list[str] = []  # blank text before what may be a header
        self._parts: list[str] = []  # the header, or a call's body, so far
        self._route = ""  # "reasoning", "content" or "call"
        self._call_name = ""
        self._scanner = JsonScanner(BODY_ENDS)
        if prompt_tail.endswith(MESSAGE):
            # The prompt already opened a message (a template that prefills a channel): the answer
            # starts inside it, routed by the header the prompt wrote.
            header = prompt_tail[: -len(MESSAGE)]
            self._open_body(header[max(header.rfind(START), header.rfind(CHANNEL), 0) :])

    def feed(self, text: str) -> tuple[str, str]:
        return self._advance(text, final=False)

    def finish(self) -> tuple[str, str]:
        return self._advance("", final=True)

    def _advance(self, text: str, *, final: bool) -> tuple[str, str]:
        text, self._held = self._held + text, ""
        reasoning: list[str] = []
        content: list[str] = []
        position: int | None = 0
        while position is not None:
            if self._state == "start":
                position = self._start(text, position, final, content)
            elif self._state == "header":
                position = self._header(text, position, final)
            elif self._state == "body":
                position = self._body(text, position, final, reasoning, content)
            else:  # plain: not harmony (or text after the messages), content as it is
                content.append(text[position:])
                position = None
        return "".join(reasoning), "".join(content)

    def _start(self, text: str, position: int, final: bool, content: list[str]) -> int | None:
        start = blank_end(text, position)
        self._blank.append(text[position:start])
        if text.startswith((START, CHANNEL), start):
            self._state, self._blank, self._parts = "header", [], []
            return start
        if not final and may_become(text, start, (START, CHANNEL)):
            self._held = text[start:]  # may still become a header
            return None
        content.append("".join(self._blank))
        self._state, self._blank = "plain", []
        return start

    def _header(self, text: str, position: int, final: bool) -> int | None:
        end = text.find(MESSAGE, position)
        if end < 0:
            if final:
                self._parts = []  # a header cut off: markup, dropped
                return None
            keep = held_back(text, (MESSAGE,), position)
            self._parts.append(text[position : len(text) - keep])
            self._held = text[len(text) - keep :]
            return None
        self._parts.append(text[position:end])
        self._open_body("".join(self._parts))
        return end + len(MESSAGE)

    def _body(self, text: str, position: int, final: bool, reasoning: list[str], content: list[str]) -> int | None:
        if self._route == "call":
            found = self._scanner.feed(text, position)
            self._parts.append(text[position : found[0] if found else len(text)])
            if found is None and not final:
                return None  # a call is passed on whole
            body = "".join(self._parts)
            closing = ""
            if found is not None:
                body, closing = body[: -len(found[1])], "<|call|>"
            content.append(f"{CALL_PREFIX}{self._call_name} <|constrain|>json{MESSAGE}{body}{closing}")
        else:
            out = reasoning if self._route == "reasoning" else content
            match = _BODY_END.search(text, position)
            if match is None:
                keep = 0 if final else held_back(text, BODY_ENDS, position)
                out.append(text[position : len(text) - keep])
                self._held = text[len(text) - keep :]
                return None
            out.append(text[position : match.start()])
            found = match.end(), match.group()
        if found is None:
            return None
        end, tag = found
        # The next message's start: its header begins with the tag.
        self._state, self._parts = ("header", [START]) if tag == START else ("start", [])
        return end

    def _open_body(self, header: str) -> None:
        recipient = re.search(r"\bto=([^\s<]++)", header)
        channel = re.search(re.escape(CHANNEL) + r"\s*+(\w+)", header)
        name = recipient.group(1) if recipient else ""
        if name.startswith("functions."):
            self._route, self._call_name = "call", name[len("functions.") :]
            self._scanner = JsonScanner(BODY_ENDS)
        elif name or (channel is not None and channel.group(1) == "analysis"):
            self._route = "reasoning"  # analysis, or a built-in tool's call the appliance does not offer
        else:
            self._route = "content"  # final, or a commentary preamble
        self._state, self._parts = "body", []
