"""Anthropic's Messages API on the chat plan: a Messages request becomes one chat completion request.

`prepare_body` refuses, before decoding, the block and tool types of Anthropic's server-side
features (web search, code execution, bash, text editor, documents, ...), naming them. `plan_message`
checks what only the Messages API has (its refused fields, `thinking` against the graph's reasoning
parser, `output_config.effort`) and maps the rest onto chat's fields: `system` and `messages`
(`input`), `max_tokens`, `stop_sequences` -> `stop`, `temperature`/`top_p`/`top_k`, tools
(`input_schema` -> `parameters`), `tool_choice` (auto / any -> required / tool -> named / none, and
`disable_parallel_tool_use`), `output_config.format` -> a json_schema `response_format`,
`metadata.user_id` -> `user`, a final assistant message -> `continue_final_message` (Anthropic's
prefill). The route submits that request through `chat.open_chat`, so message limits, images and
their guards, the tool plan, grammars, sampling, admission and cancellation are chat's; an error
the chat plan raises names the Messages field it came from (`MessagePlan.field_name`).

The chat request is never a stream (`stream: false`) even when the Messages request is: both are
rendered from the same answer pieces, and Anthropic's text never holds the stop sequence (a chat
stream keeps it, as OVMS does).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import msgspec

from appliance.dialects.anthropic.input import ChatMessages, chat_messages
from appliance.dialects.field_paths import reindexed
from appliance.dialects.hosted_tools import HostedTools, take_hosted
from appliance.errors import unsupported
from appliance.protocol.anthropic import (
    AllThinkingTurns,
    ClearThinkingEdit,
    CountTokensRequest,
    MessagesRequest,
    ThinkingDisabled,
    ThinkingEnabled,
    ThinkingTurns,
    ToolChoiceAny,
    ToolChoiceNone,
    ToolChoiceTool,
)
from appliance.protocol.openai import (
    AssistantMessage,
    ChatCompletionRequest,
    FunctionDefinition,
    JSONSchema,
    NamedToolChoice,
    ResponseFormatJSONSchema,
    Tool,
    ToolChoiceFunction,
)
from appliance.protocol.tokenize import TokenizeRequest

__all__ = ["MessagePlan", "count_request", "hosted", "plan_message", "prepare_body"]

_BLOCKS = {"text", "image", "tool_use", "tool_result", "thinking", "redacted_thinking"}
_REFUSED = {
    "container": "there are no code-execution containers here",
    "mcp_servers": "this server does not connect to MCP servers; offer their tools as client tools",
}


def hosted(tool: dict[str, Any]) -> bool:
    """Whether a tool of `tools` (plain JSON values) is one of Anthropic's own (server tools such as
    `web_search_20250305`, and the tools it defines such as `bash_20250124`): a `type` other than
    `custom`. Client tools leave `type` out or say `custom`."""
    kind = tool.get("type")
    return isinstance(kind, str) and kind != "custom"


def prepare_body(body: object) -> HostedTools:
    """Make `body` (plain JSON values, edited in place) ready for decoding: Anthropic's own tools
    taken out of `tools` (and returned: `dialects.hosted_tools`); a content block of a feature not
    served here refused (400 naming it)."""
    if not isinstance(body, dict):
        return HostedTools()
    for index, message in enumerate(body.get("messages") if isinstance(body.get("messages"), list) else ()):
        content = message.get("content") if isinstance(message, dict) else None
        for number, block in enumerate(content if isinstance(content, list) else ()):
            kind = block.get("type") if isinstance(block, dict) else None
            if isinstance(kind, str) and kind not in _BLOCKS:
                raise unsupported(
                    f"Content blocks of type '{kind}' are not served here: only text, image, tool_use, "
                    "tool_result and thinking.",
                    f"messages[{index}].content[{number}].type",
                )
    return take_hosted(body, hosted)


@dataclass(frozen=True)
class MessagePlan:
    """A Messages request as the chat request that answers it."""

    chat: ChatCompletionRequest
    messages: ChatMessages
    offered: list[int] = field(default_factory=list)
    """The index in the decoded `tools` of each tool the model is offered (deferred ones are not)."""
    hosted: HostedTools = field(default_factory=HostedTools)
    """Anthropic's own tools, taken out of `tools` before decoding."""

    def field_name(self, param: str) -> str:
        """A chat request's field path as the Messages request names it (`chat.FieldNames`)."""
        name = self.hosted.original_path(reindexed(self.messages.field_name(param), self.offered))
        assert name is not None
        return name


def _check(body: CountTokensRequest, reasoning_parser: str | None) -> None:
    for name, reason in _REFUSED.items():
        if getattr(body, name, None) is not None:
            raise unsupported(f"{name} is not supported: {reason}.", name)
    if isinstance(body.thinking, ThinkingEnabled) and reasoning_parser is None:
        raise unsupported(
            "thinking 'enabled' is not available on this model: its graph has no reasoning_parser, so no "
            "reasoning can be told apart from the answer. Leave thinking out, or send {'type': 'adaptive'} "
            "(thinking where the model can) or {'type': 'disabled'}.",
            "thinking",
        )
    edits = body.context_management.edits if body.context_management is not None else None
    for index, edit in enumerate(edits or ()):
        if not isinstance(edit, ClearThinkingEdit):
            raise unsupported(
                f"The context_management edit '{edit.__struct_config__.tag}' is not supported: only "
                "clear_thinking_20251015 is; tool results are never cleared from a conversation and no "
                "conversation is summarised here. Send the messages you want the model to read.",
                f"context_management.edits[{index}].type",
            )


def _offered(body: CountTokensRequest) -> list[int]:
    """The index of each tool the model is shown: a deferred tool is loaded at Anthropic only by a
    tool search, and there is none here."""
    return [index for index, tool in enumerate(body.tools or ()) if not tool.defer_loading]


def _tools(body: CountTokensRequest) -> list[Tool] | None:
    tools = [(body.tools or [])[index] for index in _offered(body)]
    if not tools:
        return None
    return [
        Tool(
            function=FunctionDefinition(
                name=tool.name, description=tool.description, parameters=tool.input_schema, strict=tool.strict
            )
        )
        for tool in tools
    ]


def _kept_thinking(body: CountTokensRequest) -> int | None:
    """How many of the last assistant turns keep their thinking (None: all), by the request's
    clear_thinking edit. Without one, every turn keeps it (the chat template decides what it shows)."""
    edits = body.context_management.edits if body.context_management is not None else None
    edit = next((edit for edit in edits or () if isinstance(edit, ClearThinkingEdit)), None)
    if edit is None or edit.keep == "all" or isinstance(edit.keep, AllThinkingTurns):
        return None
    return edit.keep.value if isinstance(edit.keep, ThinkingTurns) else 1  # Anthropic's default: 1


def _clear_thinking(messages: ChatMessages, keep: int | None) -> None:
    if keep is None:
        return
    turns = [index for index, message in enumerate(messages.messages) if isinstance(message, AssistantMessage)]
    for index in turns[: max(len(turns) - keep, 0)]:
        turn = messages.messages[index]
        assert isinstance(turn, AssistantMessage)
        if turn.reasoning_content is not None:
            messages.messages[index] = msgspec.structs.replace(turn, reasoning_content=None)


def _effort(body: CountTokensRequest, reasoning_parser: str | None) -> str | None:
    """`output_config.effort` as the chat template's `reasoning_effort`, where the graph reasons."""
    effort = body.output_config.effort if body.output_config is not None else None
    if effort is None or reasoning_parser is None:
        return None
    return "high" if effort in ("xhigh", "max") else effort


def _tool_choice(body: CountTokensRequest) -> tuple[object, bool]:
    """The chat tool_choice and parallel_tool_calls."""
    choice = body.tool_choice
    if choice is None:
        return None, True
    parallel = isinstance(choice, ToolChoiceNone) or not choice.disable_parallel_tool_use
    if isinstance(choice, ToolChoiceTool):
        return NamedToolChoice(function=ToolChoiceFunction(name=choice.name)), parallel
    if isinstance(choice, ToolChoiceAny):
        return "required", parallel
    return ("none" if isinstance(choice, ToolChoiceNone) else "auto"), parallel


def _template_kwargs(body: CountTokensRequest, reasoning_parser: str | None) -> dict[str, object] | None:
    # Reasoning templates (Qwen3 and kin) read `enable_thinking`; only where the graph parses reasoning.
    if body.thinking is None or reasoning_parser is None:
        return None
    return {"enable_thinking": not isinstance(body.thinking, ThinkingDisabled)}


def _count_kwargs(body: CountTokensRequest, reasoning_parser: str | None) -> dict[str, object] | None:
    """The template variables of a count: a create's, and its `reasoning_effort` (which chat hands
    to the template as one; a tokenize request has no field for it)."""
    kwargs = _template_kwargs(body, reasoning_parser)
    effort = _effort(body, reasoning_parser)
    return {**(kwargs or {}), "reasoning_effort": effort} if effort is not None else kwargs


def _prefill(messages: ChatMessages) -> bool:
    last = messages.messages[-1] if messages.messages else None
    return isinstance(last, AssistantMessage) and not last.tool_calls and bool(last.content)


def _messages(body: CountTokensRequest) -> ChatMessages:
    messages = chat_messages(body.system, body.messages)
    _clear_thinking(messages, _kept_thinking(body))
    return messages


def plan_message(
    body: MessagesRequest,
    reasoning_parser: str | None,
    hosted_tools: HostedTools | None = None,
    max_tokens_limit: int | None = None,
) -> MessagePlan:
    """The chat request answering `body` on a graph with `reasoning_parser` and `max_tokens_limit`;
    `hosted_tools`: those `prepare_body` took out of the request's tools.

    `max_tokens` above the graph's limit asks for as many tokens as the model can write: the chat
    request leaves it out (at most the limit, and the context left after the prompt). Anthropic's
    `max_tokens` is a bound ("models may stop before reaching it"), and agents send one sized for
    Anthropic's models (Claude Code: 32,000) whatever the model."""
    _check(body, reasoning_parser)
    messages = _messages(body)
    tool_choice, parallel = _tool_choice(body)
    output = body.output_config
    response_format = None
    if output is not None and output.format is not None:
        response_format = ResponseFormatJSONSchema(json_schema=JSONSchema(name="output", schema=output.format.schema))
    prefill = _prefill(messages)
    chat = ChatCompletionRequest(
        messages=messages.messages,
        model=body.model,
        max_tokens=None if max_tokens_limit is not None and body.max_tokens > max_tokens_limit else body.max_tokens,
        stop=body.stop_sequences or None,
        temperature=body.temperature,
        top_p=body.top_p,
        top_k=body.top_k,
        tools=_tools(body),
        tool_choice=tool_choice,
        parallel_tool_calls=parallel,
        response_format=response_format,
        reasoning_effort=_effort(body, reasoning_parser),
        chat_template_kwargs=_template_kwargs(body, reasoning_parser),
        continue_final_message=prefill,
        user=body.metadata.user_id if body.metadata is not None else None,
        stream=False,
    )
    return MessagePlan(chat=chat, messages=messages, offered=_offered(body), hosted=hosted_tools or HostedTools())


def count_request(
    body: CountTokensRequest, reasoning_parser: str | None, hosted_tools: HostedTools | None = None
) -> tuple[TokenizeRequest, MessagePlan]:
    """The tokenize request counting `body`'s prompt as a create would render it, and the plan
    whose `field_name` renames its errors."""
    _check(body, reasoning_parser)
    messages = _messages(body)
    tool_choice, _ = _tool_choice(body)
    tokenize = TokenizeRequest(
        model=body.model,
        messages=messages.messages,
        tools=None if tool_choice == "none" else _tools(body),
        chat_template_kwargs=_count_kwargs(body, reasoning_parser),
        continue_final_message=_prefill(messages),
    )
    plan = MessagePlan(
        chat=ChatCompletionRequest(messages=messages.messages, model=body.model),
        messages=messages,
        offered=_offered(body),
        hosted=hosted_tools or HostedTools(),
    )
    return tokenize, plan
