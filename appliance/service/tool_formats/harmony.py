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
from appliance.service.tool_formats.base import DECODER, NO_SCHEMAS, CallFormat, ParsedCall, json_call

__all__ = ["Harmony", "HarmonyChannels"]

START, CHANNEL, MESSAGE = "<|start|>", "<|channel|>", "<|message|>"
ENDS = ("<|end|>", "<|call|>", "<|return|>")
CALL_PREFIX = "<|channel|>commentary to=functions."
_CALL = re.compile(
    r"\s*" + re.escape(CALL_PREFIX) + r"([^\s<]+)\s*(?:<\|constrain\|>\s*)?(?:json)?\s*" + re.escape(MESSAGE)
)
_CALL_END = re.compile(r"\s*<\|call\|>")


def _held_back(text: str, tags: tuple[str, ...]) -> int:
    """Length of the longest end of `text` that could be the start of one of `tags`."""
    longest = 0
    for tag in tags:
        for length in range(min(len(tag) - 1, len(text)), longest, -1):
            if tag.startswith(text[-length:]):
                longest = length
                break
    return longest


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
        return f"{literal(f'{CALL_PREFIX}{name} <|constrain|>json{MESSAGE}')} {schema_expression(schema, rules, path)}"

    def forced(self, call: str, max_calls: int, rules: RuleSet) -> str:
        # One call: the model ends its turn with <|call|>, an end-of-turn token the engine stops on.
        return call


class HarmonyChannels:
    """Feed generated text; get back (reasoning, content) as far as they are known, calls kept in
    content as canonical harmony call markup (see the module docstring)."""

    def __init__(self, *, prompt_tail: str = "") -> None:
        self._state = "start"
        self._pending = ""
        self._route = ""  # "reasoning", "content" or "call"
        self._call_name = ""
        if prompt_tail.endswith(MESSAGE):
            # The prompt already opened a message (a template that prefills a channel): the answer
            # starts inside it, routed by the header the prompt wrote.
            header = prompt_tail[: -len(MESSAGE)]
            self._open(header[max(header.rfind(START), header.rfind(CHANNEL), 0) :])
            self._state = "body"

    def feed(self, text: str) -> tuple[str, str]:
        self._pending += text
        return self._advance(final=False)

    def finish(self) -> tuple[str, str]:
        return self._advance(final=True)

    def _advance(self, *, final: bool) -> tuple[str, str]:
        reasoning = content = ""
        while True:
            if self._state in ("start", "between"):
                stripped = self._pending.lstrip()
                if stripped.startswith((START, CHANNEL)):
                    self._state, self._pending = "header", stripped
                elif not final and any(tag.startswith(stripped) for tag in (START, CHANNEL)):
                    return reasoning, content  # may still become a header
                else:
                    # Not harmony (or text after the messages): content as it is.
                    self._state = "plain"
            if self._state == "plain":
                content, self._pending = content + self._pending, ""
                return reasoning, content
            if self._state == "header":
                end = self._pending.find(MESSAGE)
                if end < 0:
                    if final:
                        self._pending = ""  # a header cut off: markup, dropped
                    return reasoning, content
                self._open(self._pending[:end])
                self._pending = self._pending[end + len(MESSAGE) :]
                self._state = "body"
            found = [(self._pending.find(tag), tag) for tag in ENDS + (START,)]
            found = [(at, tag) for at, tag in found if at >= 0]
            if found:
                at, tag = min(found)
                body, self._pending = self._pending[:at], self._pending[at + (0 if tag == START else len(tag)) :]
                self._state = "between"
            elif final:
                body, self._pending = self._pending, ""
            elif self._route == "call":
                return reasoning, content  # a call is passed on whole
            else:
                keep = _held_back(self._pending, ENDS + (START,))
                body = self._pending[: len(self._pending) - keep]
                self._pending = self._pending[len(self._pending) - keep :]
                if self._route == "reasoning":
                    reasoning += body
                else:
                    content += body
                return reasoning, content
            if self._route == "reasoning":
                reasoning += body
            elif self._route == "content":
                content += body
            else:
                closing = "<|call|>" if found else ""
                content += f"{CALL_PREFIX}{self._call_name} <|constrain|>json{MESSAGE}{body}{closing}"
            if final and not self._pending:
                return reasoning, content

    def _open(self, header: str) -> None:
        recipient = re.search(r"\bto=([^\s<]+)", header)
        channel = re.search(re.escape(CHANNEL) + r"\s*(\w+)", header)
        name = recipient.group(1) if recipient else ""
        if name.startswith("functions."):
            self._route, self._call_name = "call", name[len("functions.") :]
        elif name or (channel is not None and channel.group(1) == "analysis"):
            self._route = "reasoning"  # analysis, or a built-in tool's call the appliance does not offer
        else:
            self._route = "content"  # final, or a commentary preamble
