"""Hosted tools: the one rule for tools that run on an API provider's side, in every dialect.

A hosted tool is one the request names by a `type` the provider defines, with no schema a model
could call it by: OpenAI's `web_search`, `file_search`, `code_interpreter`, `computer_use_preview`,
`image_generation`, `mcp`, `local_shell`, `apply_patch`, `custom` (grammar) tools...; Anthropic's
`web_search_20250305`, `code_execution_...`, `computer_...`, `bash_...`, `text_editor_...`. A
model here calls functions by their JSON schema, and the box runs no provider's service. Coding
agents offer such tools by default (Codex sends `{"type": "web_search"}` unless told not to), so
refusing them would make the agent unusable, and answering as if they were there would hide that
they are not. The rule, the same for the Responses and Messages APIs:

- a hosted tool is taken out of `tools` before the request is decoded: the model is offered the
  other tools (and is never told about the hosted ones);
- the answer says which were taken out, in the `x-dropped-tools` header: each as
  `tools[i]=<type>` with its index in the request, comma-separated (on streams too: headers come
  before the first event);
- a Responses answer's `tools` echoes the request's tools as sent, the dropped ones included, as
  OpenAI echoes them;
- anything that would force a hosted tool (a `tool_choice` naming one) stays refused: the answer
  could not follow it.

`take_hosted` does the taking out; `HostedTools.original_path` (and `rename`, for an error) names a
kept tool by its index in the request, so that every error, the decoder's included, still points
at the field the client sent.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from appliance.dialects.field_paths import reindexed
from appliance.errors import ApplianceError

__all__ = ["HEADER", "HostedTools", "take_hosted"]

HEADER = "x-dropped-tools"
"""The response header listing the hosted tools the model was not offered."""

_LISTED = 16
"""At most this many are named in the header (a client's tool list must not make it unbounded)."""
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


def _token(kind: object) -> str:
    """A client's `type` as header text: letters, digits, `_.-` only, at most 64 characters."""
    return _UNSAFE.sub("?", str(kind))[:64]


@dataclass(frozen=True)
class HostedTools:
    """The hosted tools taken out of a request's `tools`."""

    dropped: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    """(index in the request, the tool as sent), in request order."""
    kept: list[int] = field(default_factory=list)
    """The request index of each tool left in `tools`, in order."""

    def headers(self) -> dict[str, str]:
        """The answer's header naming the dropped tools (none when nothing was dropped)."""
        if not self.dropped:
            return {}
        named = [f"tools[{index}]={_token(tool.get('type'))}" for index, tool in self.dropped[:_LISTED]]
        if len(self.dropped) > _LISTED:
            named.append(f"and {len(self.dropped) - _LISTED} more")
        return {HEADER: ", ".join(named)}

    def original_path(self, param: str | None) -> str | None:
        """`param` with a leading `tools[k]` (k counting the kept tools) named by its request index."""
        return reindexed(param, self.kept) if self.dropped else param

    def rename(self, exc: ApplianceError) -> ApplianceError:
        """`exc` (a decoder's error about the edited body) naming the field as the request sent it,
        in its `param` and its message."""
        original = self.original_path(exc.param)
        if exc.param is not None and original != exc.param:
            exc.message = exc.message.replace(f"'{exc.param}'", f"'{original}'")
            exc.args = (exc.message,)
            exc.param = original
        return exc

    def echo(self, kept: list[Any]) -> list[Any]:
        """The request's tools in their order: `kept` (as decoded) with the dropped ones put back."""
        tools = list(kept)
        for index, tool in self.dropped:
            tools.insert(index, tool)
        return tools


def take_hosted(body: object, hosted: Callable[[dict[str, Any]], bool]) -> HostedTools:
    """Take every tool of `body["tools"]` (plain JSON values, edited in place) that `hosted` says is
    hosted out of the list; anything that is not a list of objects is left for the decoder."""
    tools = body.get("tools") if isinstance(body, dict) else None
    if not isinstance(tools, list):
        return HostedTools()
    result = HostedTools()
    remaining = []
    for index, tool in enumerate(tools):
        if isinstance(tool, dict) and hosted(tool):
            result.dropped.append((index, tool))
        else:
            result.kept.append(index)
            remaining.append(tool)
    if result.dropped:
        assert isinstance(body, dict)
        body["tools"] = remaining
    return result
