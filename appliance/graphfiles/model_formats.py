"""Which tool-call and reasoning formats a model writes, found from its chat template and its
tokenizer's special tokens, each with the reason it was chosen (for `appliance check` and the
start-up log).

A template shows the format it teaches where it renders earlier assistant turns' calls (or tells
the model how to call); a format the template does not spell may still be given away by the
tokens the tokenizer reserves for it (Phi-4-mini's template writes only the tool list, its
tokenizer holds `<|tool_call|>`). Rules, first match wins:

| Marker | Tool parser | Reasoning parser |
|---|---|---|
| `<|channel|>` with `<|call|>` or `to=functions.` (gpt-oss) | harmony | harmony |
| `<function=` and `<parameter=` (Qwen3-Coder) | qwen3_coder | |
| `<arg_key>` (GLM-4.5, 4.6, 4.7) | glm45 | |
| `tool▁calls▁begin` (DeepSeek-R1 and its distills) | deepseek_r1 | |
| `<tool_call>` (Hermes, Qwen 2.5/3) | hermes | |
| `[TOOL_CALLS]` (Mistral, Devstral) | mistral | |
| `<|python_tag|>` or `"parameters": dictionary` (Llama 3.x) | llama3_json | |
| special tokens `<|tool_call|>` and `<|/tool_call|>` (Phi-4-mini) | phi4_mini | |
| `<think>` in the template (Qwen3, DeepSeek-R1, QwQ, GLM-4.5) | | think |

Tokens alone never choose `think`: Qwen3-Coder's tokenizer holds `<think>` but the model does not
reason. Gemma 4's `<|tool_call>call:...` calls are recognised and named, but no parser here reads
them: such a model gets the appliance's own tool prompt (hermes), as an unknown template does.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from appliance.graphfiles.model_json import json_object

__all__ = ["FoundFormats", "find_formats", "special_tokens"]


@dataclass(frozen=True)
class FoundFormats:
    tool_parser: str | None
    tool_reason: str
    """Why `tool_parser` (or why none): the marker found, and where."""
    reasoning_parser: str | None
    reasoning_reason: str


_TOOL_RULES: tuple[tuple[str, str, str], ...] = (
    # (parser, regular expression over the template, what it is)
    (
        "harmony",
        r"<\|channel\|>[\s\S]*(<\|call\|>|to=functions\.|to=\" *\+ *\"functions)",
        "harmony channels `<|channel|>`",
    ),
    ("qwen3_coder", r"<function=[\s\S]*<parameter=", "XML calls `<function=...><parameter=...>`"),
    ("glm45", r"<arg_key>", "`<tool_call>NAME<arg_key>...`"),
    ("deepseek_r1", r"tool▁calls▁begin", "`<｜tool▁calls▁begin｜>`"),
    ("hermes", r"<tool_call>", "`<tool_call>`"),
    ("mistral", r"\[TOOL_CALLS\]", "`[TOOL_CALLS]`"),
    ("llama3_json", r"<\|python_tag\|>|\"parameters\": dictionary", "Llama 3 JSON calls (`<|python_tag|>`)"),
)
_PHI4_TOKENS = ("<|tool_call|>", "<|/tool_call|>")
_GEMMA4 = re.compile(r"<\|tool_call>")
# `<think>` left open at the end of the generation prompt (not Qwen3's `<think>\n\n</think>`,
# written there to switch thinking off).
_THINK_OPENED = re.compile(r"add_generation_prompt[\s\S]{0,400}?<think>(?!(?:\\n|\s)*</think>)")


def find_formats(template: str, tokens: frozenset[str] = frozenset()) -> FoundFormats:
    """The formats `template` (Jinja text) and the tokenizer's special `tokens` show, with why."""
    tool, tool_reason = None, "no call format recognised in the chat template"
    for parser, pattern, what in _TOOL_RULES:
        if re.search(pattern, template):
            tool, tool_reason = parser, f"the chat template writes {what}"
            break
    else:
        if all(token in tokens for token in _PHI4_TOKENS):
            tool, tool_reason = "phi4_mini", "the tokenizer holds `<|tool_call|>` and `<|/tool_call|>`"
        elif _GEMMA4.search(template):
            tool_reason = "the chat template writes Gemma 4 calls (`<|tool_call>`), which no parser here reads"
    if tool == "harmony":
        return FoundFormats(tool, tool_reason, "harmony", "the chat template writes harmony channels (`analysis`)")
    if "<think>" in template:
        opened = _THINK_OPENED.search(template) is not None
        where = "opens `<think>` in the generation prompt" if opened else "writes `<think>` blocks"
        return FoundFormats(tool, tool_reason, "think", f"the chat template {where}")
    return FoundFormats(tool, tool_reason, None, "no reasoning markers in the chat template")


def special_tokens(model_dir: Path) -> frozenset[str]:
    """The added tokens an IR folder's tokenizer files list (`tokenizer_config.json`'s
    `added_tokens_decoder`, `tokenizer.json`'s `added_tokens`); empty when they list none."""
    found: set[str] = set()
    decoder = json_object(model_dir / "tokenizer_config.json").get("added_tokens_decoder")
    if isinstance(decoder, dict):
        found.update(_contents(decoder.values()))
    # tokenizer.json runs to megabytes: read only when the small file lists nothing.
    added = json_object(model_dir / "tokenizer.json").get("added_tokens") if not found else None
    if isinstance(added, list):
        found.update(_contents(added))
    return frozenset(found)


def _contents(entries: Iterable[object]) -> list[str]:
    return [entry["content"] for entry in entries if isinstance(entry, dict) and isinstance(entry.get("content"), str)]
