"""The tool-call formats of the model families the appliance serves, one module per family's way.

- `base`: the parsed call, `CallFormat` (what a format defines: its markers, how it parses and
  writes calls, the grammar of a forced call) and the JSON helpers the formats share.
- `json_calls`: hermes (Hermes, Qwen 2.5/3), llama3_json (Llama 3.1+), mistral, phi4_mini.
- `qwen3_coder`: Qwen3-Coder's XML calls, values typed by the tool's schema.
- `glm45`: GLM-4.5's `<arg_key>`/`<arg_value>` calls, typed the same way.
- `deepseek_r1`: DeepSeek-R1's (and its distills') fenced JSON calls.
- `harmony`: gpt-oss's channels: the call format and the channel splitter (reasoning, content).

`service.tool_parsers` streams text around the calls and writes the grammar forcing them; which
format a model uses comes from its graph file or its chat template (`graphfiles.model_formats`).
"""

from __future__ import annotations

from appliance.service.tool_formats.base import CallFormat, ParsedCall
from appliance.service.tool_formats.deepseek_r1 import DeepSeekR1
from appliance.service.tool_formats.glm45 import Glm45
from appliance.service.tool_formats.harmony import Harmony, HarmonyChannels
from appliance.service.tool_formats.json_calls import Hermes, Llama3Json, Mistral, Phi4Mini
from appliance.service.tool_formats.qwen3_coder import Qwen3Coder

__all__ = ["FORMATS", "CallFormat", "HarmonyChannels", "ParsedCall", "call_format"]

FORMATS: dict[str, CallFormat] = {
    format_.name: format_
    for format_ in (Hermes(), Llama3Json(), Mistral(), Phi4Mini(), Qwen3Coder(), Glm45(), DeepSeekR1(), Harmony())
}
"""Every call format, by the name a graph file's `tool_parser` gives it."""


def call_format(name: str) -> CallFormat:
    """The call format named `name` (one of FORMATS)."""
    return FORMATS[name]
