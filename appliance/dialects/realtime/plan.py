"""A Realtime response as one chat completion request.

The session's settings (`TalkSettings`: instructions, tools, tool_choice, max_output_tokens, output
modalities, voice), overridden for one response by `response.create`'s
`response` object, and the conversation's items (`items.ConversationItems`) make the chat request
that answers; the route submits it as every dialect does (`service.chat.open_chat`), so message
limits, the tool plan, grammars, sampling, admission and cancellation are chat's, and an error the
chat plan raises names the Realtime field it came from (`TalkPlan.field_name`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Literal

from appliance.dialects.realtime.items import ChatMessages, ConversationItems
from appliance.errors import InvalidRequest, unsupported
from appliance.protocol.openai import (
    ChatCompletionRequest,
    FunctionDefinition,
    NamedToolChoice,
    Tool,
    ToolChoiceFunction,
)
from appliance.protocol.realtime import (
    UNSET,
    AudioPCM,
    FunctionTool,
    FunctionToolChoice,
    RealtimeAudio,
    RealtimeSession,
    ResponseCreateParams,
    ToolChoice,
)

__all__ = ["TalkPlan", "TalkSettings", "plan_talk"]

Modality = Literal["text", "audio"]
_FUNCTION_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


@dataclass(frozen=True)
class TalkSettings:
    """What a conversation session answers with, as `session.update` last set it."""

    model: str
    instructions: str | None = None
    tools: tuple[FunctionTool, ...] = ()
    tool_choice: ToolChoice = "auto"
    max_output_tokens: int | Literal["inf"] = "inf"
    output_modalities: tuple[Modality, ...] | None = None
    """None: audio when the chat graph names a voice, else text (`Conversation.checked`)."""
    voice: str | None = None
    """One of the voice graph's voices (None: its default)."""
    speed: float = 1.0

    @classmethod
    def of(cls, model: str, config: RealtimeSession) -> TalkSettings:
        """The settings a session's configuration (every field `session.update` set) gives."""
        return cls(model=model).overridden(config, "session")

    def overridden(self, given: ResponseCreateParams | RealtimeSession | None, where: str = "response") -> TalkSettings:
        """These settings with the fields `given` sets (`response.create`'s `response`: one
        response's overrides; a session's configuration); 400 naming a field not served."""
        if given is None:
            return self
        if isinstance(given, ResponseCreateParams):
            _refuse_unsupported(given)
        changes: dict[str, object] = {}
        for name in ("instructions", "tool_choice", "max_output_tokens"):
            value = getattr(given, name)
            if value is not UNSET:
                changes[name] = value
        if given.tools is not UNSET:
            changes["tools"] = tuple(_checked_tools(given.tools, f"{where}.tools"))
        if given.output_modalities is not UNSET:
            changes["output_modalities"] = modalities(given.output_modalities, f"{where}.output_modalities")
        changes.update(_audio_output(given.audio, where))
        return replace(self, **changes)


def _audio_output(audio: RealtimeAudio | object, where: str) -> dict[str, object]:
    output = UNSET if audio is UNSET else audio.output
    if output is UNSET:
        return {}
    if output.format is not UNSET and not isinstance(output.format, AudioPCM):
        raise unsupported("Answers are spoken as audio/pcm (16-bit, 24 kHz) only.", f"{where}.audio.output.format.type")
    changes: dict[str, object] = {}
    if output.voice is not UNSET:
        changes["voice"] = output.voice
    if output.speed is not UNSET:
        changes["speed"] = output.speed
    return changes


def _checked_tools(tools: list[FunctionTool], param: str) -> list[FunctionTool]:
    for index, tool in enumerate(tools):
        if tool.name is None or not _FUNCTION_NAME.match(tool.name):
            raise InvalidRequest(
                "A function tool needs a name of 1 to 64 letters, digits, '_' or '-'.", param=f"{param}[{index}].name"
            )
    return tools


def modalities(value: list[Modality] | tuple[Modality, ...], param: str) -> tuple[Modality, ...]:
    """`["text"]` or `["audio"]` (audio comes with its transcript), as OpenAI takes them."""
    if list(value) not in (["text"], ["audio"]):
        raise InvalidRequest(
            'output_modalities is ["text"] or ["audio"] (audio always comes with its transcript).', param=param
        )
    return tuple(value)


def _refuse_unsupported(params: ResponseCreateParams) -> None:
    if params.conversation not in (UNSET, "auto"):
        raise unsupported(
            "Only responses that join the session's conversation are served (conversation: 'auto').",
            "response.conversation",
        )
    if params.input is not UNSET:
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
    if isinstance(choice, FunctionToolChoice):
        return tools or None, NamedToolChoice(function=ToolChoiceFunction(name=choice.name))
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
        stream=True,
    )
    return TalkPlan(chat=chat, settings=settings, messages=messages)
