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

__all__ = ["REASONING_PARSERS", "ReasoningStream", "reasoning_stream"]

OPEN, CLOSE = "<think>", "</think>"


def _held_back(text: str, tag: str) -> int:
    for length in range(min(len(tag) - 1, len(text)), 0, -1):
        if tag.startswith(text[-length:]):
            return length
    return 0


class ReasoningStream:
    """Feed generated text; get back (reasoning, content) as far as they are known."""

    def __init__(self, *, prompt_tail: str = "") -> None:
        opened_in_prompt = prompt_tail.rstrip().endswith(OPEN)
        self._state = "reasoning" if opened_in_prompt else "start"
        self._pending = ""

    def feed(self, text: str) -> tuple[str, str]:
        self._pending += text
        return self._advance(final=False)

    def finish(self) -> tuple[str, str]:
        return self._advance(final=True)

    def _advance(self, *, final: bool) -> tuple[str, str]:
        reasoning = content = ""
        if self._state == "start":
            stripped = self._pending.lstrip()
            if stripped.startswith(OPEN):
                self._state, self._pending = "reasoning", stripped[len(OPEN) :]
            elif not final and OPEN.startswith(stripped):
                return "", ""  # may still become <think>
            else:
                self._state = "content"
        if self._state == "reasoning":
            end = self._pending.find(CLOSE)
            if end < 0:
                keep = 0 if final else _held_back(self._pending, CLOSE)
                reasoning = self._pending[: len(self._pending) - keep]
                self._pending = self._pending[len(self._pending) - keep :]
                return reasoning, ""
            reasoning = self._pending[:end]
            self._pending = self._pending[end + len(CLOSE) :]
            self._state = "after"
        if self._state == "after":
            # Models put a blank line between the block and the answer; it belongs to neither.
            self._pending = self._pending.lstrip()
            if not self._pending:
                return reasoning, ""
            self._state = "content"
        content, self._pending = self._pending, ""
        return reasoning, content


REASONING_PARSERS = ("think", "harmony")


def reasoning_stream(name: str, *, prompt_tail: str = "") -> ReasoningStream | HarmonyChannels:
    """The splitter of the reasoning parser `name` (one of REASONING_PARSERS), for an answer whose
    prompt ends in `prompt_tail`."""
    if name == "harmony":
        return HarmonyChannels(prompt_tail=prompt_tail)
    return ReasoningStream(prompt_tail=prompt_tail)
