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

from dataclasses import dataclass

from appliance.dialects.anthropic.input import ChatMessages, chat_messages
from appliance.errors import unsupported
from appliance.protocol.anthropic import (
    CountTokensRequest,
    MessagesRequest,
    ThinkingDisabled,
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

__all__ = ["MessagePlan", "count_request", "plan_message", "prepare_body"]

_BLOCKS = {"text", "image", "tool_use", "tool_result", "thinking", "redacted_thinking"}
_REFUSED = {
    "container": "there are no code-execution containers here",
    "mcp_servers": "this server does not connect to MCP servers; offer their tools as client tools",
    "context_management": "the conversation is not edited here: send the messages you want the model to read",
}


def prepare_body(body: object) -> object:
    """`body` (plain JSON values), refused (400 naming the field) if it holds a server tool or a
    content block of a feature not served here; otherwise unchanged."""
    if not isinstance(body, dict):
        return body
    for index, tool in enumerate(body.get("tools") if isinstance(body.get("tools"), list) else ()):
        kind = tool.get("type") if isinstance(tool, dict) else None
        if isinstance(kind, str) and kind != "custom":
            raise unsupported(
                f"The tool type '{kind}' is one of Anthropic's server tools, which run on Anthropic's side; "
                "only client tools ({name, description, input_schema}) are served here.",
                f"tools[{index}].type",
            )
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
    return body


@dataclass(frozen=True)
class MessagePlan:
    """A Messages request as the chat request that answers it."""

    chat: ChatCompletionRequest
    messages: ChatMessages

    def field_name(self, param: str) -> str:
        """A chat request's field path as the Messages request names it (`chat.FieldNames`)."""
        return self.messages.field_name(param)


def _check(body: CountTokensRequest, reasoning_parser: str | None) -> None:
    for name, reason in _REFUSED.items():
        if getattr(body, name, None) is not None:
            raise unsupported(f"{name} is not supported: {reason}.", name)
    thinking = body.thinking
    if thinking is not None and not isinstance(thinking, ThinkingDisabled) and reasoning_parser is None:
        raise unsupported(
            "thinking is not available on this model: its graph has no reasoning_parser, so no reasoning "
            "can be told apart from the answer. Leave thinking out or send {'type': 'disabled'}.",
            "thinking",
        )
    effort = body.output_config.effort if body.output_config is not None else None
    if effort in ("xhigh", "max"):
        raise unsupported(
            f"output_config.effort '{effort}' is not supported: chat templates know low, medium and high.",
            "output_config.effort",
        )


def _tools(body: CountTokensRequest) -> list[Tool] | None:
    if not body.tools:
        return None
    return [
        Tool(
            function=FunctionDefinition(
                name=tool.name, description=tool.description, parameters=tool.input_schema, strict=tool.strict
            )
        )
        for tool in body.tools
    ]


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


def _prefill(messages: ChatMessages) -> bool:
    last = messages.messages[-1] if messages.messages else None
    return isinstance(last, AssistantMessage) and not last.tool_calls and bool(last.content)


def plan_message(body: MessagesRequest, reasoning_parser: str | None) -> MessagePlan:
    """The chat request answering `body` on a graph with `reasoning_parser`."""
    _check(body, reasoning_parser)
    messages = chat_messages(body.system, body.messages)
    tool_choice, parallel = _tool_choice(body)
    output = body.output_config
    response_format = None
    if output is not None and output.format is not None:
        response_format = ResponseFormatJSONSchema(json_schema=JSONSchema(name="output", schema=output.format.schema))
    prefill = _prefill(messages)
    chat = ChatCompletionRequest(
        messages=messages.messages,
        model=body.model,
        max_tokens=body.max_tokens,
        stop=body.stop_sequences or None,
        temperature=body.temperature,
        top_p=body.top_p,
        top_k=body.top_k,
        tools=_tools(body),
        tool_choice=tool_choice,
        parallel_tool_calls=parallel,
        response_format=response_format,
        reasoning_effort=output.effort if output is not None else None,
        chat_template_kwargs=_template_kwargs(body, reasoning_parser),
        continue_final_message=prefill,
        user=body.metadata.user_id if body.metadata is not None else None,
        stream=False,
    )
    return MessagePlan(chat=chat, messages=messages)


def count_request(body: CountTokensRequest, reasoning_parser: str | None) -> tuple[TokenizeRequest, ChatMessages]:
    """The tokenize request counting `body`'s prompt as a create would render it, and the messages'
    origins (to rename its errors)."""
    _check(body, reasoning_parser)
    messages = chat_messages(body.system, body.messages)
    tool_choice, _ = _tool_choice(body)
    tokenize = TokenizeRequest(
        model=body.model,
        messages=messages.messages,
        tools=None if tool_choice == "none" else _tools(body),
        chat_template_kwargs=_template_kwargs(body, reasoning_parser),
        continue_final_message=_prefill(messages),
    )
    return tokenize, messages
