"""A Messages request's turns as chat messages: consecutive turns of one role are combined, as
Anthropic's API does, and errors about the combined message still name the block they came from."""

from __future__ import annotations

import msgspec

from appliance.dialects.anthropic.input import chat_messages
from appliance.protocol.anthropic import MessageParam
from appliance.protocol.openai import AssistantMessage, TextPart, ToolMessage, UserMessage


def _messages(*turns: dict) -> list[MessageParam]:
    return [msgspec.convert(turn, MessageParam) for turn in turns]


def test_consecutive_user_turns_become_one_message() -> None:
    result = chat_messages(
        None,
        _messages(
            {"role": "user", "content": "Hello."},
            {"role": "user", "content": [{"type": "text", "text": "Two"}, {"type": "text", "text": " turns."}]},
        ),
    )
    (message,) = result.messages
    assert isinstance(message, UserMessage)
    assert message.content == [TextPart(text="Hello."), TextPart(text="Two"), TextPart(text=" turns.")]
    assert result.field_name("messages[0].content[0]") == "messages[0].content"
    assert result.field_name("messages[0].content[2].text") == "messages[1].content[1].text"


def test_consecutive_assistant_turns_become_one_message_with_every_call() -> None:
    result = chat_messages(
        "Be brief.",
        _messages(
            {"role": "user", "content": "Weather?"},
            {"role": "assistant", "content": "Let me look."},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t1", "name": "weather", "input": {"city": "Oslo"}}],
            },
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "Rain."}]},
        ),
    )
    system, user, assistant, tool = result.messages
    assert isinstance(assistant, AssistantMessage) and isinstance(tool, ToolMessage)
    assert assistant.content == "Let me look."
    assert [call.function.name for call in assistant.tool_calls] == ["weather"]
    assert result.field_name("messages[2].tool_calls[0].function.arguments") == "messages[2].content[0].input"


def test_alternating_turns_are_left_alone() -> None:
    result = chat_messages(
        None,
        _messages(
            {"role": "user", "content": "a"},
            {"role": "assistant", "content": "b"},
            {"role": "user", "content": "c"},
        ),
    )
    assert [type(message).__name__ for message in result.messages] == ["UserMessage", "AssistantMessage", "UserMessage"]
