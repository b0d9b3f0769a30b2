"""A Realtime response as one chat completion request.

The session's settings (`TalkSettings`: instructions, tools, tool_choice, temperature,
max_output_tokens, output modalities, voice), overridden for one response by `response.create`'s
`response` object, and the conversation's items (`items.ConversationItems`) make the chat request
that answers; the route submits it as every dialect does (`service.chat.open_chat`), so message
limits, the tool plan, grammars, sampling, admission and cancellation are chat's, and an error the
chat plan raises names the Realtime field it came from (`TalkPlan.field_name`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal

from appliance.dialects.realtime.items import ChatMessages, ConversationItems
from appliance.errors import InvalidRequest, unsupported
from appliance.protocol.openai import (
    ChatCompletionRequest,
    FunctionDefinition,
    NamedToolChoice,
    Tool,
)
from appliance.protocol.openai import ToolChoiceFunction as ChatToolChoiceFunction
from appliance.protocol.realtime_conversation import (
    RealtimeFunctionTool,
    ResponseCreateParams,
    ToolChoice,
    ToolChoiceFunction,
)

__all__ = ["TalkPlan", "TalkSettings", "plan_talk"]

Modality = Literal["text", "audio"]


@dataclass(frozen=True)
class TalkSettings:
    """What a conversation session answers with, as `session.update` last set it."""

    model: str
    instructions: str | None = None
    tools: tuple[RealtimeFunctionTool, ...] = ()
    tool_choice: ToolChoice = "auto"
    temperature: float | None = None
    max_output_tokens: int | Literal["inf"] = "inf"
    output_modalities: tuple[Modality, ...] = ("audio",)
    voice: str | None = None
    """One of the voice graph's voices (None: its default)."""
    speed: float = 1.0

    def overridden(self, params: ResponseCreateParams | None) -> TalkSettings:
        """These settings with one response's overrides (`response.create`'s `response`)."""
        if params is None:
            return self
        _refuse_unsupported(params)
        changes: dict[str, object] = {}
        for name in ("instructions", "tool_choice", "temperature", "max_output_tokens"):
            value = getattr(params, name)
            if value is not None:
                changes[name] = value
        if params.tools is not None:
            changes["tools"] = tuple(params.tools)
        if params.output_modalities is not None:
            changes["output_modalities"] = modalities(params.output_modalities, "response.output_modalities")
        voice = ((params.audio or {}).get("output") or {}).get("voice")
        if isinstance(voice, str):
            changes["voice"] = voice
        return replace(self, **changes)


def modalities(value: list[Modality], param: str) -> tuple[Modality, ...]:
    """`["text"]` or `["audio"]` (audio comes with its transcript), as OpenAI takes them."""
    if value not in (["text"], ["audio"]):
        raise InvalidRequest(
            'output_modalities is ["text"] or ["audio"] (audio always comes with its transcript).', param=param
        )
    return tuple(value)


def _refuse_unsupported(params: ResponseCreateParams) -> None:
    if params.conversation not in (None, "auto"):
        raise unsupported(
            "Only responses that join the session's conversation are served (conversation: 'auto').",
            "response.conversation",
        )
    if params.input is not None:
        raise unsupported(
            "A response answers the session's conversation here; `input` (out-of-band context) is not supported.",
            "response.input",
        )


@dataclass(frozen=True)
class TalkPlan:
    """The chat request answering the conversation, with how its fields are named."""

    chat: ChatCompletionRequest
    settings: TalkSettings
    messages: ChatMessages = field(repr=False)

    def field_name(self, param: str) -> str:
        """A chat field path as the Realtime client names it (`item[<id>].content`, `max_output_tokens`)."""
        return self.messages.field_name(param)


def _tools(settings: TalkSettings) -> tuple[list[Tool] | None, object]:
    tools = [
        Tool(function=FunctionDefinition(name=tool.name, description=tool.description, parameters=tool.parameters))
        for tool in settings.tools
    ]
    choice = settings.tool_choice
    if isinstance(choice, ToolChoiceFunction):
        return tools or None, NamedToolChoice(function=ChatToolChoiceFunction(name=choice.name))
    return tools or None, choice if tools or choice != "auto" else None


def plan_talk(settings: TalkSettings, items: ConversationItems) -> TalkPlan:
    """The chat request answering `items` under `settings` (400 naming the field otherwise)."""
    messages = items.chat_messages(settings.instructions)
    if not messages.messages:
        raise InvalidRequest(
            "The conversation is empty: add an item (conversation.item.create) or speak before response.create.",
            param="response",
            code="empty_conversation",
        )
    tools, tool_choice = _tools(settings)
    limit = settings.max_output_tokens
    chat = ChatCompletionRequest(
        messages=messages.messages,
        model=settings.model,
        max_completion_tokens=None if limit == "inf" else limit,
        tools=tools,
        tool_choice=tool_choice,
        parallel_tool_calls=False,
        temperature=settings.temperature,
        stream=True,
    )
    return TalkPlan(chat=chat, settings=settings, messages=messages)
