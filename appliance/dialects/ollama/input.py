"""Ollama's messages as chat messages, and chat's error paths back in Ollama's terms.

One Ollama message is one chat message, in order (Ollama hands its messages to the template as they
come; so does this). A user message's `images` (base64, no media type) become image parts before
its text, as data URLs: the bytes decide the format, and the chat plan's checks and guards apply
(count, pixels, decoding off the event loop). An assistant message's `tool_calls` (arguments as
objects) become calls with JSON-text arguments and an id (the one sent back, else `call_<i>_<j>`);
its `thinking`, the `reasoning_content` templates that render reasoning show. A tool message
answers the call it names (`tool_call_id`, LangChain's), else the first call of the assistant turn
before it with its `tool_name` not yet answered, else the next unanswered call in order, as Ollama
reads them. Images anywhere but in a user message are refused, naming the field.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from appliance.dialects.field_paths import MESSAGE
from appliance.errors import unsupported
from appliance.protocol.ollama import Message as OllamaMessage
from appliance.protocol.openai import (
    AssistantMessage,
    FunctionCall,
    ImageURL,
    ImageURLPart,
    Message,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolMessage,
    UserMessage,
)

__all__ = ["ChatMessages", "chat_messages", "image_part"]

_PART = re.compile(r"^\.content\[(\d+)\](.*)$")


def image_part(image: str) -> ImageURLPart:
    """A base64 image (Ollama's `images` item) as a chat image part; its bytes decide its format."""
    return ImageURLPart(image_url=ImageURL(url=f"data:image/png;base64,{image}"))


@dataclass
class ChatMessages:
    """The chat messages of an Ollama request, and for each the path it came from and the paths of
    its parts (an image's `images[j]`, its text's `content`)."""

    messages: list[Message] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    parts: list[list[str]] = field(default_factory=list)

    def add(self, message: Message, path: str, parts: list[str] | None = None) -> None:
        self.messages.append(message)
        self.paths.append(path)
        self.parts.append(parts or [])

    def field_name(self, param: str) -> str:
        """A chat request's message path as the Ollama request names it (others unchanged)."""
        found = MESSAGE.match(param)
        if found is None:
            return param
        index, rest = int(found.group(1)), found.group(2)
        if index >= len(self.paths):
            return "messages"
        path, parts = self.paths[index], self.parts[index]
        part = _PART.match(rest)
        if part is not None and int(part.group(1)) < len(parts):
            return parts[int(part.group(1))]  # an image's `images[j]`, or the text's field
        if rest.startswith(".content"):
            return parts[-1] if parts else path  # the last part is the text
        if rest.startswith(".reasoning_content"):
            return f"{path}.thinking"
        return path + rest  # `.tool_calls[m].function.arguments` and the like: the same names


def _user(message: OllamaMessage, path: str, result: ChatMessages) -> None:
    if not message.images:
        result.add(UserMessage(content=message.content), path, [f"{path}.content"])
        return
    parts: list = [image_part(image) for image in message.images]
    names = [f"{path}.images[{index}]" for index in range(len(message.images))]
    parts.append(TextPart(text=message.content))
    result.add(UserMessage(content=parts), path, [*names, f"{path}.content"])


def _assistant(message: OllamaMessage, index: int, path: str) -> AssistantMessage:
    calls = [
        ToolCall(
            id=call.id or f"call_{index}_{number}",
            function=FunctionCall(name=call.function.name, arguments=json.dumps(call.function.arguments)),
        )
        for number, call in enumerate(message.tool_calls or ())
    ]
    return AssistantMessage(
        content=message.content if message.content or not calls else None,
        tool_calls=calls or None,
        reasoning_content=message.thinking or None,
    )


class _Calls:
    """The calls of the latest assistant turn, and which of them tool messages answered."""

    def __init__(self) -> None:
        self.calls: list[ToolCall] = []
        self.answered: set[str] = set()

    def issued(self, calls: list[ToolCall]) -> None:
        self.calls, self.answered = calls, set()

    def answer(self, message: OllamaMessage, index: int) -> str:
        open_calls = [call for call in self.calls if call.id not in self.answered]
        named = [call for call in open_calls if call.function.name == message.tool_name]
        if message.tool_call_id:
            found = message.tool_call_id
        elif named or open_calls:
            found = (named or open_calls)[0].id
        else:
            found = f"call_{index}"  # a result without a call: the template reads it as text
        self.answered.add(found)
        return found


def chat_messages(messages: list[OllamaMessage]) -> ChatMessages:
    """The chat messages of an Ollama chat request's `messages`."""
    result = ChatMessages()
    calls = _Calls()
    for index, message in enumerate(messages):
        path = f"messages[{index}]"
        if message.images and message.role != "user":
            raise unsupported("Images belong in user messages.", f"{path}.images")
        if message.tool_calls and message.role != "assistant":
            raise unsupported("Tool calls belong in assistant messages.", f"{path}.tool_calls")
        if message.role == "user":
            _user(message, path, result)
        elif message.role == "system":
            result.add(SystemMessage(content=message.content), path, [f"{path}.content"])
        elif message.role == "assistant":
            turn = _assistant(message, index, path)
            calls.issued(turn.tool_calls or [])
            result.add(turn, path, [f"{path}.content"])
        else:
            answered = calls.answer(message, index)
            result.add(ToolMessage(content=message.content, tool_call_id=answered), path, [f"{path}.content"])
    return result
