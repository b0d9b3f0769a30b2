"""`appliance tune`'s edit of a graph file: the winning `[plugin_config]` keys written into the file's
own text (its comments and layout kept), marked so the change can be read and undone by hand, and
the CPU it was measured on, which `appliance check` compares with the CPU it runs on.

The block, above `[plugin_config]`:

    # appliance tune 2026-11-28 on AMD EPYC, 2 cores: 1.12x one-stream output tokens/s (33.1 -> 37.2),
    # 1.01x at 4 streams, the same greedy tokens. Undo: delete the lines marked "appliance tune" and
    # put back the ones marked "was".
    # tuned-on: avx2 f16c
    [plugin_config]
    KV_CACHE_PRECISION = "u8"  # appliance tune
    # was: DYNAMIC_QUANTIZATION_GROUP_SIZE = 32

A winner with other weights (`weights.py`) also points `model_path` at their folder, the old line
kept as `# was:` (and a GGUF's `gguf_reader` with it: an IR folder has no reader to choose).

Tuning again replaces the block and the lines it marked.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from appliance.cpu_features import TUNED_ON

__all__ = ["MARK", "tuned_text"]

MARK = "# appliance tune"
_TABLE = re.compile(r"^\[plugin_config\]\s*(#.*)?$")
_ANY_TABLE = re.compile(r"^\s*\[")
PluginValue = str | int | float | bool


def toml_value(value: PluginValue) -> str:
    if isinstance(value, bool):  # before int: bool is an int subclass
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    return repr(value)


def tuned_text(
    text: str,
    changes: Mapping[str, PluginValue | None],
    summary: list[str],
    isa: list[str],
    model_path: str | None = None,
) -> str:
    """`text` with `changes` (None: leave the key to OpenVINO) in its `[plugin_config]`, under a
    block saying `summary` (comment lines without their `#`) and the ISA it was tuned on; and with
    `model_path`, when given, in place of the file's own."""
    lines = _untuned(text.splitlines())
    if model_path is not None:
        lines = _with_model_path(lines, model_path)
    block = [f"{MARK} {summary[0]}", *(f"# {line}" for line in summary[1:]), f"{TUNED_ON} {' '.join(isa)}"]
    table = next((i for i, line in enumerate(lines) if _TABLE.match(line)), None)
    if table is None:
        lines += ["", *block, "[plugin_config]"]
        table = len(lines) - 1
    else:
        lines[table:table] = block
        table += len(block)
    end = next((i for i in range(table + 1, len(lines)) if _ANY_TABLE.match(lines[i])), len(lines))
    body = lines[table + 1 : end]
    for key, value in changes.items():
        at = next((i for i, line in enumerate(body) if re.match(rf"^{re.escape(key)}\s*=", line)), None)
        if at is not None:
            body[at] = f"# was: {body[at]}"
        if value is not None:
            body.insert(0, f"{key} = {toml_value(value)}  {MARK}")
    lines[table + 1 : end] = body
    return "\n".join(lines) + "\n"


def _with_model_path(lines: list[str], model_path: str) -> list[str]:
    """The top-level `model_path` replaced (the old one kept as `# was:`), `gguf_reader` put aside."""
    end = next((i for i, line in enumerate(lines) if _ANY_TABLE.match(line)), len(lines))
    top, rest = lines[:end], lines[end:]
    for i, line in enumerate(top):
        if re.match(r"^(model_path|gguf_reader)\s*=", line):
            top[i] = f"# was: {line}"
    at = next((i for i, line in enumerate(top) if line.startswith("# was: model_path")), len(top))
    top.insert(at, f"model_path = {toml_value(model_path)}  {MARK}")
    return top + rest


def _untuned(lines: list[str]) -> list[str]:
    """`lines` as before an earlier tune: its block and keys gone, the keys it replaced back."""
    kept: list[str] = []
    in_block = False
    for line in lines:
        if line.startswith(MARK + " "):
            in_block = True
            continue
        if in_block:
            if line.startswith(TUNED_ON):
                in_block = False
            continue
        if line.rstrip().endswith(MARK):
            continue
        kept.append(line.removeprefix("# was: "))
    return kept
