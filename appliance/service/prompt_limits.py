"""The one bound on what a request asks the engine to render or tokenize, checked before any work
grows with it, on every route: chat (and the Responses API and `/invocations` chat bodies built on
it), completions, `/invocations` inputs, `/tokenize` and `/detokenize`.

The engine renders messages through the chat template and tokenizes the result before it can count
tokens (and refuse a prompt beyond the context), on the thread that steps the pipeline, so every
stream of the model waits meanwhile. Measured on one core before these checks: 600,000 one-letter
messages (18 MB) took 1.3 s of event loop and 11 s of engine before their 400; a 30 MB completions
prompt paused every stream of demo-smol for 40-56 s; six concurrent 20 MB `/tokenize` bodies kept
demo-chat silent long enough for its watchdog to kill it. The checks need only lengths the request
already holds:

- messages, and content parts plus tool calls over all messages, each at most `max_messages`;
- at most `MAX_TOOLS` tools;
- characters of text at most `prompt_chars(...)` per prompt: every string the chat template or the
  tokenizer sees (contents, names, tool call ids, function names and arguments, reasoning_content,
  tool definitions and template variables as JSON), or a raw prompt (each of a list on its own, as
  each is its own engine request);
- `/detokenize` and a completions prompt given as token ids: at most one context of token ids;
- completions: at most `MAX_PROMPTS` prompts in a list.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from appliance.errors import ContextLengthExceeded, InvalidRequest
from appliance.graphfiles import Graph
from appliance.protocol.openai import AssistantMessage, Message, TextPart, Tool, ToolMessage

__all__ = [
    "CHARS_PER_TOKEN",
    "MAX_PROMPTS",
    "MAX_TOOLS",
    "check_messages",
    "check_prompt",
    "check_token_ids",
    "prompt_chars",
]

MAX_TOOLS = 128
"""Tools per request (OpenAI's own limit)."""

MAX_PROMPTS = 64
"""Prompts in one completions request (each is an engine request of its own)."""

CHARS_PER_TOKEN = 32
"""Text allowed per token of context before counting tokens, unless the graph sets
`limits.max_prompt_chars`. Ordinary text runs 3 to 5 characters per token (CJK 1 to 2); a prompt
above 32 on average is made of runs such as long rules of '#' or spaces, which tokenizers do merge
into long tokens (the demo vocabulary has one of 64 '#'), so such a prompt may fit and still be
refused: a bound, not a count."""


def prompt_chars(graph: Graph, max_context: int) -> int:
    """Characters of text one prompt may hold: `limits.max_prompt_chars`, else `CHARS_PER_TOKEN`
    per token of `max_context` (the model's context, known from its files before it loads:
    `Graph.facts`; there is no "unknown", so no prompt goes unbounded)."""
    return graph.limits.max_prompt_chars or max_context * CHARS_PER_TOKEN


def check_prompt(text: str, graph: Graph, max_context: int, param: str) -> None:
    """Refuse (400 `context_length_exceeded`, naming `param`) a raw prompt above `prompt_chars`."""
    _check_length(len(text), graph, max_context, param, "the prompt holds")


def check_messages(
    messages: Sequence[Message],
    graph: Graph,
    max_context: int,
    tools: Sequence[Tool] | None = None,
    template_kwargs: Mapping[str, Any] | None = None,
) -> None:
    """Refuse (400, param "messages" or "tools") a conversation too large to be worth rendering.

    `max_context`: the model's context in tokens (`EngineClient.max_context`).
    `tools` and `template_kwargs` are rendered into the prompt too: at most MAX_TOOLS tools, and
    the JSON of both counted as text.
    """
    if tools and len(tools) > MAX_TOOLS:
        raise InvalidRequest(
            f"Too many tools: {len(tools)}; at most {MAX_TOOLS} per request.",
            param="tools",
            code="array_above_max_length",
        )
    limit = graph.limits.max_messages
    if len(messages) > limit:
        raise InvalidRequest(
            f"Too many messages: {len(messages)}; this model accepts at most {limit} per request "
            "(limits.max_messages in its graph file).",
            param="messages",
            code="array_above_max_length",
        )
    parts = 0
    for message in messages:
        content = message.content
        if isinstance(content, list):
            parts += len(content)
        if isinstance(message, AssistantMessage) and message.tool_calls:
            parts += len(message.tool_calls)
    if parts > limit:
        raise InvalidRequest(
            f"Too many content parts and tool calls: {parts} over all messages; this model accepts at "
            f"most {limit} per request (limits.max_messages in its graph file).",
            param="messages",
            code="array_above_max_length",
        )
    chars = sum(_text_length(message) for message in messages)
    chars += _json_length(tools) + _json_length(template_kwargs)
    _check_length(chars, graph, max_context, "messages", "the messages, tools and template variables hold")


def check_token_ids(tokens: Sequence[int], max_context: int, param: str = "tokens") -> None:
    """Refuse (400 naming `param`) more token ids than one context holds: no text the model read
    or wrote is longer, and checking or decoding them runs on the thread that steps the pipeline
    (`/detokenize`, and completions prompts given as token ids)."""
    if len(tokens) > max_context:
        raise InvalidRequest(
            f"Too many tokens: {len(tokens)}; this model's context holds {max_context}.",
            param=param,
            code="array_above_max_length",
        )


def _check_length(chars: int, graph: Graph, max_context: int, param: str, what: str) -> None:
    bound = prompt_chars(graph, max_context)
    if chars > bound:
        raise ContextLengthExceeded(
            f"This model's maximum context length is {max_context} tokens, and {what} {chars} "
            f"characters of text: more than the {bound} it accepts (limits.max_prompt_chars, by default "
            f"{CHARS_PER_TOKEN} per token of context), refused without counting tokens. Please reduce "
            "the length of the prompt.",
            param=param,
        )


def _json_length(value: object) -> int:
    return len(msgspec.json.encode(value)) if value else 0


def _text_length(message: Message) -> int:
    content = message.content
    if content is None:
        length = 0
    elif isinstance(content, str):
        length = len(content)
    else:
        length = sum(len(part.text) for part in content if isinstance(part, TextPart))
    name = getattr(message, "name", None)
    if isinstance(name, str):
        length += len(name)
    if isinstance(message, AssistantMessage):
        for call in message.tool_calls or ():
            length += len(call.id) + len(call.function.name) + len(call.function.arguments)
        length += len(message.reasoning_content or "")
    elif isinstance(message, ToolMessage):
        length += len(message.tool_call_id)
    return length
