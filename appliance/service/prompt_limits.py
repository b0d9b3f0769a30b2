"""Cheap limits on a chat request's messages, checked before any work grows with them.

The engine renders every message through the chat template and tokenizes the result before it can
count tokens (and refuse a prompt beyond the context), on the thread that steps the pipeline, so
every stream of the model waits meanwhile; the server's own pass over the messages runs on the
event loop. Measured with the demo model on one core: 600,000 one-letter messages (18 MB) took 1.3 s
of event loop and 11 s of engine before their 400; 8 MB of CJK text took 4.3 s to tokenize. The
checks here need only lengths the request already holds:

- messages, and content parts plus tool calls over all messages, each at most `max_messages`;
- characters of text (tool definitions included) at most `CHARS_PER_TOKEN` per token of the
  model's context; at most `MAX_TOOLS` tools.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from appliance.errors import InvalidRequest
from appliance.graphfiles import Graph
from appliance.protocol.openai import AssistantMessage, Message, TextPart, Tool

__all__ = ["CHARS_PER_TOKEN", "MAX_TOOLS", "check_messages"]

MAX_TOOLS = 128
"""Tools per request (OpenAI's own limit)."""

CHARS_PER_TOKEN = 32
"""Text allowed per token of context before counting tokens. Ordinary text runs 3 to 5 characters
per token (CJK 1 to 2); a prompt above 32 on average is made of runs such as long rules of '#' or
spaces, which tokenizers do merge into long tokens (the demo vocabulary has one of 64 '#'), so
such a prompt may fit and still be refused: a bound, not a count. Not counted: reasoning_content,
which chat templates often drop from earlier turns."""


def check_messages(
    messages: Sequence[Message], graph: Graph, max_context: int, tools: Sequence[Tool] | None = None
) -> None:
    """Refuse (400, param "messages" or "tools") a conversation too large to be worth rendering.

    `max_context`: the model's context in tokens (0 while unknown: the text is not bounded).
    `tools` are rendered into the prompt too: at most MAX_TOOLS, their JSON counted as text.
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
    if not max_context:
        return
    chars = sum(_text_length(message) for message in messages) + (len(msgspec.json.encode(tools)) if tools else 0)
    bound = max_context * CHARS_PER_TOKEN
    if chars > bound:
        raise InvalidRequest(
            f"This model's maximum context length is {max_context} tokens, and the messages hold "
            f"{chars} characters of text (tool definitions included): more than {CHARS_PER_TOKEN} per token of that context "
            f"({bound}), which the server refuses without counting tokens. Please reduce the length "
            "of the messages.",
            param="messages",
            code="context_length_exceeded",
        )


def _text_length(message: Message) -> int:
    content = message.content
    if content is None:
        length = 0
    elif isinstance(content, str):
        length = len(content)
    else:
        length = sum(len(part.text) for part in content if isinstance(part, TextPart))
    if isinstance(message, AssistantMessage) and message.tool_calls:
        length += sum(len(call.function.arguments) for call in message.tool_calls)
    return length
