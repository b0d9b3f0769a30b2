"""A model's chat template, found where OpenVINO GenAI's tokenizer finds it, and what it does with tools.

Many chat templates (SmolLM2's among them) never look at `tools`: the model would not learn what it
may call. OpenVINO GenAI then writes its own tool list and a `{"tool_calls": [...]}` syntax into a
system message, a format no tool parser here reads. The service therefore needs to know, per model,
whether the template renders `tools` (and earlier turns' `tool_calls`), and which call format the
template teaches when a graph names no `tool_parser`: read here from the model's files when the
graph is validated, so the first request plans as every later one does.

Where the tokenizer finds the template (openvino.genai `tokenizer_impl.cpp`, `setup_tokenizer`),
each later source replacing an earlier one: an IR folder's `tokenizer_config.json`,
`processor_config.json`, `chat_template.json` (each a `chat_template` key: a string, or a list of
named templates whose "default" is used), `chat_template.jinja`, then the `chat_template` entry of
`openvino_tokenizer.xml`'s rt_info; a GGUF file's `tokenizer.chat_template` metadata. The tokenizer
also swaps a few known templates for simplified ones of its own (`remap_template`), which cannot be
seen from the files: the engine reports the template it loaded, and `EngineClient` logs any
difference (see docs/operations.md).
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ElementTree
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from appliance.graphfiles.model_formats import find_formats
from appliance.graphfiles.model_json import json_object

__all__ = ["NO_TEMPLATE", "ChatTemplate", "TemplateTools", "gguf_chat_template", "read_chat_template", "template_tools"]

_BLOCKS = re.compile(r"\{%-?(.*?)-?%\}|\{\{-?(.*?)-?\}\}", re.S)
_STRINGS = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"", re.S)
_JSON_SOURCES = ("tokenizer_config.json", "processor_config.json", "chat_template.json")
_TOKENIZER_IR = "openvino_tokenizer.xml"


@dataclass(frozen=True)
class TemplateTools:
    renders_tools: bool
    """The template reads the `tools` variable."""
    renders_tool_calls: bool
    """The template reads the messages' `tool_calls`."""
    tool_parser: str | None
    """The call format the template (or the tokenizer's tokens) teaches (None: not recognised)."""
    reasoning_parser: str | None = None
    """The reasoning format the template shows (None: none recognised)."""
    tool_reason: str = ""
    """Why `tool_parser` (`graphfiles.model_formats`)."""
    reasoning_reason: str = ""


@dataclass(frozen=True)
class ChatTemplate:
    """The template text and the file it was read from ("" and "none" when the model has none)."""

    text: str
    source: str


NO_TEMPLATE = ChatTemplate("", "none")


def _key_or_nothing(match: re.Match[str]) -> str:
    # `message['tool_calls']` reads the calls; `'You may call tools'` is only text.
    inner = match.group(0)[1:-1]
    return inner if inner.isidentifier() else '""'


def template_tools(template: str, tokens: frozenset[str] = frozenset()) -> TemplateTools:
    """Whether `template` (Jinja) reads `tools` and `tool_calls` in its code (not in its text), and
    the call and reasoning formats it (or the tokenizer's special `tokens`) shows.

    `tools` counts as read only as the template's variable: Phi-4-mini's template reads a system
    message's own `message['tools']` text (`'tools' in message`), which the appliance does not
    send, so its tools are shown by the appliance's tool prompt."""
    code = " ".join(_STRINGS.sub(_key_or_nothing, first or second) for first, second in _BLOCKS.findall(template))
    found = find_formats(template, tokens)
    return TemplateTools(
        renders_tools=re.search(r"(?<![\[.])\btools\b(?!\s+in\b)", code) is not None,
        renders_tool_calls=re.search(r"\btool_calls\b", code) is not None,
        tool_parser=found.tool_parser,
        reasoning_parser=found.reasoning_parser,
        tool_reason=found.tool_reason,
        reasoning_reason=found.reasoning_reason,
    )


def read_chat_template(model_dir: Path) -> ChatTemplate:
    """The chat template the engine's tokenizer loads from an IR folder, before its own remapping;
    NO_TEMPLATE when the files hold none or cannot be read."""
    found = NO_TEMPLATE
    for name in _JSON_SOURCES:
        text = _json_template(model_dir / name)
        found = ChatTemplate(text, name) if text else found
    try:
        found = ChatTemplate((model_dir / "chat_template.jinja").read_text(encoding="utf-8"), "chat_template.jinja")
    except (OSError, UnicodeDecodeError):
        pass
    text = _rt_info_template(model_dir / _TOKENIZER_IR)
    return ChatTemplate(text, f"{_TOKENIZER_IR} rt_info") if text else found


def gguf_chat_template(metadata: Mapping[str, object]) -> ChatTemplate:
    """The chat template of a GGUF file (its `tokenizer.chat_template`), from its header's metadata."""
    text = metadata.get("tokenizer.chat_template")
    return ChatTemplate(text, "GGUF tokenizer.chat_template") if isinstance(text, str) and text else NO_TEMPLATE


def _json_template(path: Path) -> str:
    value = json_object(path).get("chat_template")
    if isinstance(value, list):  # [{"name": "default", "template": "..."}, ...] (Cohere's models)
        value = next(
            (item.get("template") for item in value if isinstance(item, dict) and item.get("name") == "default"), ""
        )
    return value if isinstance(value, str) else ""


def _rt_info_template(path: Path) -> str:
    """`<rt_info><chat_template value="..."/>` (or `<chat_template><default value="..."/>`)."""
    try:
        entry = ElementTree.parse(path).getroot().find("rt_info/chat_template")
    except (OSError, ElementTree.ParseError):
        return ""
    if entry is None:
        return ""
    default = entry.find("default")
    value = (default if default is not None else entry).get("value")
    return value or ""
