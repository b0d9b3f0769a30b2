"""Reasoning content, split from the answer as it streams, by the model's reasoning parser:

- think (Qwen3, DeepSeek-R1 and its distills, QwQ and their kin): the text inside
  `<think>...</think>`. The block may open in the output or already in the prompt (templates that
  end the generation prompt with `<think>`, so the output starts inside the reasoning); a
  `</think>` without an opening tag in the output closes a block the prompt opened. Tag text never
  reaches either part.
- harmony (gpt-oss): the `analysis` channel (`service.tool_formats.harmony.HarmonyChannels`).
"""

from __future__ import annotations

from appliance.service.tool_formats import HarmonyChannels
from appliance.service.tool_formats.scanning import blank_end, held_back, may_become

__all__ = ["REASONING_PARSERS", "ReasoningStream", "reasoning_stream"]

OPEN, CLOSE = "<think>", "</think>"


class ReasoningStream:
    """Feed generated text; get back (reasoning, content) as far as they are known.

    Each piece is looked at once: only a tag's start is held back between pieces, and the blank
    text before the answer's first word (kept apart, as content if no `<think>` follows).
    """

    def __init__(self, *, prompt_tail: str = "") -> None:
        opened_in_prompt = prompt_tail.rstrip().endswith(OPEN)
        self._state = "reasoning" if opened_in_prompt else "start"  # then "after" the block, "content"
        self._held = ""  # the start of a tag, until the next piece tells
        self._blank: list[str] = []  # blank text at the start of the answer

    def feed(self, text: str) -> tuple[str, str]:
        return self._advance(text, final=False)

    def finish(self) -> tuple[str, str]:
        return self._advance("", final=True)

    def _advance(self, text: str, *, final: bool) -> tuple[str, str]:
        text, self._held = self._held + text, ""
        reasoning = ""
        position = 0
        if self._state == "start":
            start = blank_end(text, position)
            self._blank.append(text[position:start])
            if text.startswith(OPEN, start):
                self._state, self._blank, position = "reasoning", [], start + len(OPEN)
            elif not final and may_become(text, start, (OPEN,)):
                self._held = text[start:]
                return "", ""  # may still become <think>
            else:
                self._state, text, position = "content", "".join(self._blank) + text[start:], 0
                self._blank = []
        if self._state == "reasoning":
            end = text.find(CLOSE, position)
            if end < 0:
                keep = 0 if final else held_back(text, (CLOSE,), position)
                self._held = text[len(text) - keep :]
                return text[position : len(text) - keep], ""
            reasoning, position, self._state = text[position:end], end + len(CLOSE), "after"
        if self._state == "after":
            # Models put a blank line between the block and the answer; it belongs to neither.
            position = blank_end(text, position)
            if position == len(text):
                return reasoning, ""
            self._state = "content"
        return reasoning, text[position:]


REASONING_PARSERS = ("think", "harmony")


def reasoning_stream(name: str, *, prompt_tail: str = "") -> ReasoningStream | HarmonyChannels:
    """The splitter of the reasoning parser `name` (one of REASONING_PARSERS), for an answer whose
    prompt ends in `prompt_tail`."""
    if name == "harmony":
        return HarmonyChannels(prompt_tail=prompt_tail)
    return ReasoningStream(prompt_tail=prompt_tail)
