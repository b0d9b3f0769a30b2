"""A Messages request's system prompt and messages as chat messages, and chat's error paths back in
Messages terms.

Anthropic's turns hold blocks; chat templates take messages. A user turn's `tool_result` blocks
become `tool` messages and its text and image blocks a user message (in the order they came, so a
result comes before the text that follows it); an assistant turn's text, `tool_use` and `thinking`
blocks become one assistant message (its text, its tool calls with the input as JSON text, its
`reasoning_content`, which templates that render reasoning show and others ignore).
`redacted_thinking` is dropped: it is Anthropic's encrypted reasoning, which no model here can
read. A `system` message inside `messages` (Claude Code sends its environment so) stays where it
is, as a system message of its own: moving it into the system prompt would change the prompt's
beginning from one turn to the next, and the prefix cache reuses a prompt only as far as its
beginning is unchanged. Consecutive turns of the same role are combined into one, as Anthropic's API does (many chat
templates refuse two user or two assistant messages in a row). Images keep the chat plan's checks
and guards: a base64 source becomes a data URL, a url source the URL itself (http(s) under the
SSRF policy, or a local file inside the allowed directory). A `tool_result` must answer a
`tool_use` of the assistant turn right before it, as Anthropic's API requires (400 naming its
`tool_use_id` otherwise). An error the chat plan raises about
`messages[k].content[j]` names the block it came from (`messages[i].content[b]`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from appliance.dialects.field_paths import MESSAGE, TOOL_CALL, renamed
from appliance.errors import InvalidRequest, unsupported
from appliance.protocol.anthropic import (
    Base64Source,
    FileSource,
    ImageBlock,
    MessageParam,
    RedactedThinkingBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)
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

__all__ = ["ChatMessages", "chat_messages"]


@dataclass
class _Origin:
    """Where one chat message came from: a request path, and for each of its parts or tool calls
    the path of the block it came from."""

    path: str
    blocks: list[str] = field(default_factory=list)
    calls: list[str] = field(default_factory=list)


@dataclass
class ChatMessages:
    """The chat messages of a Messages request, and where each came from."""

    messages: list[Message] = field(default_factory=list)
    origins: list[_Origin] = field(default_factory=list)

    def add(self, message: Message, origin: _Origin) -> None:
        last = self.messages[-1] if self.messages else None
        if isinstance(message, UserMessage) and isinstance(last, UserMessage):
            first = self.origins[-1]
            parts = _parts(last, first) + _parts(message, origin)
            self.messages[-1] = UserMessage(content=parts)
            self.origins[-1] = _Origin(first.path, first.blocks + origin.blocks)
        elif isinstance(message, AssistantMessage) and isinstance(last, AssistantMessage):
            calls = (last.tool_calls or []) + (message.tool_calls or [])
            texts = [turn.content for turn in (last, message) if turn.content]
            reasoning = [turn.reasoning_content for turn in (last, message) if turn.reasoning_content]
            self.messages[-1] = AssistantMessage(
                content="".join(texts) if texts or not calls else None,
                tool_calls=calls or None,
                reasoning_content="\n".join(reasoning) or None,
            )
            first = self.origins[-1]
            self.origins[-1] = _Origin(first.path, calls=first.calls + origin.calls)
        else:
            self.messages.append(message)
            self.origins.append(origin)

    def field_name(self, param: str) -> str:
        """A chat request's field path, named as the Messages request names it (`chat.FieldNames`)."""
        if (name := renamed(param, _RENAMED)) is not None:
            return name
        found = MESSAGE.match(param)
        if found is None:
            return param
        index, rest = int(found.group(1)), found.group(2)
        if index >= len(self.origins):
            return "messages"
        origin = self.origins[index]
        part = _PART.match(rest)
        if part is not None and origin.blocks:
            number = int(part.group(1))
            block = origin.blocks[number] if number < len(origin.blocks) else f"{origin.path}.content[{number}]"
            return block + _IMAGE_URL.sub(".source", part.group(2))
        call = TOOL_CALL.match(rest)
        if call is not None and int(call.group(1)) < len(origin.calls):
            return origin.calls[int(call.group(1))] + (".input" if call.group(2) else "")
        if isinstance(self.messages[index], ToolMessage | SystemMessage):
            return origin.path  # a tool_result block or the system prompt: its text as a whole
        return origin.path + rest


_PART = re.compile(r"^\.content\[(\d+)\](.*)$")
_IMAGE_URL = re.compile(r"^\.image_url(\.url)?")
_RENAMED = [
    (re.compile(r"^max_completion_tokens"), "max_tokens"),
    (re.compile(r"^stop\b"), "stop_sequences"),
    (re.compile(r"^response_format(\.json_schema)?(\.schema)?"), "output_config.format.schema"),
    (re.compile(r"^tools\[(\d+)\]\.function\.parameters"), r"tools[\1].input_schema"),
    (re.compile(r"^tools\[(\d+)\]\.function"), r"tools[\1]"),
    (re.compile(r"^tool_choice\.function"), "tool_choice"),
    (re.compile(r"^reasoning_effort"), "output_config.effort"),
    (re.compile(r"^chat_template_kwargs"), "thinking"),
    (re.compile(r"^user"), "metadata.user_id"),
]


def _text(blocks: list[TextBlock]) -> str:
    return "\n".join(block.text for block in blocks)


def _image(block: ImageBlock, path: str) -> ImageURLPart:
    if block.transformations is not None and block.transformations.oversized_image == "error":
        raise unsupported(
            "transformations.oversized_image 'error' is not supported: an image is always scaled down here "
            "to the size the model reads ('downsize').",
            f"{path}.transformations.oversized_image",
        )
    source = block.source
    if isinstance(source, FileSource):
        raise unsupported(
            "Images by file_id are not served (there is no Files API here): send a base64 or url source.",
            f"{path}.source",
        )
    url = f"data:{source.media_type};base64,{source.data}" if isinstance(source, Base64Source) else source.url
    return ImageURLPart(image_url=ImageURL(url=url))


def _tool_result(block: ToolResultBlock, path: str) -> ToolMessage:
    content = block.content
    if isinstance(content, list):
        for index, part in enumerate(content):
            if not isinstance(part, TextBlock):
                raise unsupported(
                    "Tool results are text here: no model here reads images in a tool result.",
                    f"{path}.content[{index}]",
                )
        content = _text(content)
    text = content or ""
    # Chat templates have no error flag on a tool message: the model reads that the call failed.
    return ToolMessage(content=f"Error: {text}" if block.is_error else text, tool_call_id=block.tool_use_id)


def _parts(message: UserMessage, origin: _Origin) -> list:
    """A user message's content as parts (a string is one text part), with `origin.blocks` filled
    in for a string (its path names it)."""
    if isinstance(message.content, str):
        origin.blocks[:] = [f"{origin.path}.content"]
        return [TextPart(text=message.content)]
    return list(message.content)


def _user_turn(message: MessageParam, path: str, result: ChatMessages, issued: set[str]) -> None:
    """`issued`: the ids of the tool_use blocks of the assistant turn before this one, the only
    ones its tool_result blocks may answer."""
    if isinstance(message.content, str):
        result.add(UserMessage(content=message.content), _Origin(path))
        return
    parts: list = []
    origin = _Origin(path)
    for index, block in enumerate(message.content):
        where = f"{path}.content[{index}]"
        if isinstance(block, TextBlock):
            parts.append(TextPart(text=block.text))
        elif isinstance(block, ImageBlock):
            parts.append(_image(block, where))
        elif isinstance(block, ToolResultBlock):
            if block.tool_use_id not in issued:
                # Anthropic's rule (and its 400): a result answers a call of the turn right before.
                raise InvalidRequest(
                    "This tool_result answers no tool_use block of the assistant message before it: each "
                    "tool_result's tool_use_id must be the id of a tool_use in the previous assistant message.",
                    param=f"{where}.tool_use_id",
                )
            if parts:
                result.add(UserMessage(content=parts), origin)
                parts, origin = [], _Origin(path)
            result.add(_tool_result(block, where), _Origin(where))
            continue
        else:
            raise InvalidRequest(
                f"A user message holds text, image and tool_result blocks, not '{block.__struct_config__.tag}'.",
                param=f"{where}.type",
            )
        origin.blocks.append(where)
    if parts:
        result.add(UserMessage(content=parts), origin)


def _assistant_turn(message: MessageParam, path: str, result: ChatMessages) -> None:
    if isinstance(message.content, str):
        result.add(AssistantMessage(content=message.content), _Origin(path))
        return
    texts, reasoning, calls = [], [], []
    origin = _Origin(path)
    for index, block in enumerate(message.content):
        where = f"{path}.content[{index}]"
        if isinstance(block, TextBlock):
            texts.append(block.text)
        elif isinstance(block, ToolUseBlock):
            arguments = json.dumps(block.input, ensure_ascii=False)
            calls.append(ToolCall(id=block.id, function=FunctionCall(name=block.name, arguments=arguments)))
            origin.calls.append(where)
        elif isinstance(block, ThinkingBlock):
            reasoning.append(block.thinking)
        elif not isinstance(block, RedactedThinkingBlock):
            raise InvalidRequest(
                f"An assistant message holds text, tool_use and thinking blocks, not '{block.__struct_config__.tag}'.",
                param=f"{where}.type",
            )
    turn = AssistantMessage(
        content="".join(texts) if texts or not calls else None,
        tool_calls=calls or None,
        reasoning_content="\n".join(reasoning) or None,
    )
    result.add(turn, origin)


def _system_turn(message: MessageParam, path: str, result: ChatMessages) -> None:
    """A `system` message where it stands: its text blocks joined as `system` is."""
    content = message.content
    if not isinstance(content, str):
        for index, block in enumerate(content):
            if not isinstance(block, TextBlock):
                raise InvalidRequest(
                    f"A system message holds text blocks, not '{block.__struct_config__.tag}'.",
                    param=f"{path}.content[{index}].type",
                )
        content = _text(content)  # type: ignore[arg-type]
    result.add(SystemMessage(content=content), _Origin(path))


def chat_messages(system: str | list[TextBlock] | None, messages: list[MessageParam]) -> ChatMessages:
    """The chat messages of a Messages request's `system` and `messages`."""
    result = ChatMessages()
    if system:
        result.add(SystemMessage(content=system if isinstance(system, str) else _text(system)), _Origin("system"))
    issued: set[str] = set()
    for index, message in enumerate(messages):
        path = f"messages[{index}]"
        if message.role == "user":
            _user_turn(message, path, result, issued)
        elif message.role == "system":
            _system_turn(message, path, result)
        else:
            if index == 0 or _previous_turn(messages, index) != "assistant":
                issued = set()  # consecutive assistant turns are one message: their calls add up
            issued |= _tool_use_ids(message)
            _assistant_turn(message, path, result)
    return result


def _previous_turn(messages: list[MessageParam], index: int) -> str | None:
    """The role of the last user or assistant message before `index` (system messages sit between
    turns without ending them)."""
    return next((m.role for m in reversed(messages[:index]) if m.role != "system"), None)


def _tool_use_ids(message: MessageParam) -> set[str]:
    if isinstance(message.content, str):
        return set()
    return {block.id for block in message.content if isinstance(block, ToolUseBlock)}
