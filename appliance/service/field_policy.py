"""OpenAI request fields the appliance does not honour, in two groups, with the reason for each.

Clients send fields written for OpenAI's own service; a request must not fail for one that cannot
change what a local model writes, and must not be silently answered without one that would:

- *informative* fields only tell the service something (storage, tagging, billing, caching, abuse
  tracking): accepted without effect and logged at debug;
- *refused* fields would change the output and cannot be honoured here: a 400 `unsupported_parameter`
  naming the field and why, unless the value is the neutral one (`modalities: ["text"]`,
  `suffix: ""`), which changes nothing.

Every other declared field is honoured (docs/api.md has the table of all three groups; a unit test
keeps it in step with these tables). A field no struct declares keeps its 400 `unknown_parameter`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from msgspec import UNSET

from appliance.errors import InvalidRequest

__all__ = [
    "CHAT",
    "COMPLETIONS",
    "RESPONSES",
    "STREAM_OPTIONS",
    "Informative",
    "Refused",
    "check_fields",
    "check_stream_options",
]

log = logging.getLogger("appliance.requests")


@dataclass(frozen=True)
class Informative:
    """Accepted, without effect here."""

    why: str


@dataclass(frozen=True)
class Refused:
    """Refused with a 400 unless `neutral(value)`."""

    why: str
    neutral: Callable[[object], bool] = lambda _: False


Rule = Informative | Refused

_ONLY_INFORMS_OPENAI = "only informs OpenAI's service"
_CACHE = "prefix caching is the graph's (`scheduler.enable_prefix_caching`), automatic for every request"

_SHARED: dict[str, Rule] = {
    "service_tier": Informative("one tier here: every request is served the same way"),
    "prompt_cache_key": Informative(_CACHE),
    "prompt_cache_retention": Informative(_CACHE),
    "prompt_cache_options": Informative(_CACHE),
    "safety_identifier": Informative(f"{_ONLY_INFORMS_OPENAI}'s abuse detection"),
    "moderation": Refused("no moderation model runs here"),
}

CHAT: Mapping[str, Rule] = {
    **_SHARED,
    "store": Informative("chat completions are never stored here (OpenAI stores them for its dashboard)"),
    "metadata": Informative("tags for OpenAI's dashboard; nothing here reads them"),
    "prediction": Informative("predicted outputs only speed OpenAI's service up; the output is the same without"),
    "audio": Refused("the models served here write text only"),
    "modalities": Refused("the models served here write text only", neutral=lambda value: value == ["text"]),
    "verbosity": Refused(
        "no model here is trained to follow it; 'medium' (OpenAI's default) is accepted",
        neutral=lambda value: value == "medium",
    ),
    "web_search_options": Refused("there is no web search here"),
    "functions": Refused("the deprecated `functions` is not served: send `tools`", neutral=lambda value: value == []),
    "function_call": Refused("the deprecated `function_call` is not served: send `tool_choice`"),
}
"""Chat completions' fields beyond those honoured."""

COMPLETIONS: Mapping[str, Rule] = {
    "suffix": Refused("no model here is served with a fill-in-the-middle template", neutral=lambda value: value == ""),
}
"""Legacy completions' fields beyond those honoured."""

RESPONSES: Mapping[str, Rule] = {
    **_SHARED,
    "max_tool_calls": Informative("it bounds built-in tool calls, and there are none here"),
    "access_programs": Informative(_ONLY_INFORMS_OPENAI),
    "image": Informative("image inputs are always sized by the graph's limits here"),
    "client_metadata": Informative("Codex's ids of its session and turn, for the provider's own records"),
    "background": Refused(
        "responses are not run in the background here: send the request and wait, or stream it",
        neutral=lambda value: value is False,
    ),
    "background_options": Refused("responses are not run in the background here"),
    "conversation": Refused("the Conversations API is not served: use previous_response_id or send the input"),
    "context_management": Refused("context compaction is not available here"),
    "prompt": Refused("prompt templates are stored at OpenAI, not here: send instructions and input"),
    "truncation": Refused(
        "the input is never truncated here; 'disabled' (too long is a 400) is the only mode",
        neutral=lambda value: value == "disabled",
    ),
}
"""The Responses API's top-level fields beyond those honoured (built-in tools, tool choices,
input items and the fields inside `text`, `reasoning`, `include` are checked where they are read)."""


STREAM_OPTIONS: Mapping[str, Rule] = {
    "include_obfuscation": Informative("no obfuscation padding is written here"),
}
"""`stream_options` beyond `include_usage`."""


def check_fields(request: object, rules: Mapping[str, Rule], where: str = "") -> None:
    """Refuse (400 naming the field) a refused field with a value other than its neutral one; log
    the informative ones a request sets, at debug."""
    for name, rule in rules.items():
        value = getattr(request, name, None)
        if value is None or value is UNSET:
            continue
        param = f"{where}.{name}" if where else name
        if isinstance(rule, Refused):
            if not rule.neutral(value):
                raise InvalidRequest(
                    f"{param} is not supported: {rule.why}.", param=param, code="unsupported_parameter"
                )
        else:
            log.debug("%s accepted without effect: %s", param, rule.why)


def check_stream_options(stream: bool | None, stream_options: object | None) -> None:
    """`stream_options` only with `stream: true`: OpenAI and vLLM answer 400 otherwise, and a
    client that sends it expects a stream (its usage chunk) it would not get."""
    if stream_options is not None and not stream:
        raise InvalidRequest(
            "The 'stream_options' parameter is only allowed when 'stream' is enabled.", param="stream_options"
        )
