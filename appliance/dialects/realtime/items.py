"""A Realtime conversation's items, kept in order and bounded, and read as chat messages.

Items arrive from the client (`conversation.item.create`: messages, the outputs of function
calls), from the session (a committed user turn: its audio's transcript) and from responses
(assistant messages, function calls). The model reads text: a user's `input_audio` part is its
`transcript`, an assistant's `output_audio` part its transcript (cut to what was heard when the
item was truncated). At most `MAX_ITEMS` holding `MAX_CONVERSATION_CHARS` are kept: the oldest are
dropped (and the client told, `conversation.item.deleted`) as OpenAI's `truncation: "auto"` drops
them when the context fills.

`chat_messages` turns the items into the chat request's messages, each message remembering the
item it came from, so an error the chat plan raises names the item (`item[<id>].content`).
"""

from __future__ import annotations

import copy
import re
import secrets
from collections import OrderedDict
from dataclasses import dataclass, field

from appliance.errors import InvalidRequest
from appliance.protocol.openai import (
    AssistantMessage,
    FunctionCall,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from appliance.protocol.realtime import ContentPart, ConversationItem, FunctionCallItem, FunctionCallOutputItem

__all__ = ["MAX_ITEMS", "ChatMessages", "ConversationItems", "new_id", "snapshot"]

MAX_ITEMS = 256
"""Items one conversation keeps; older ones are dropped (their text would pass the context)."""
MAX_ITEM_CHARS = 64_000
"""Text one item may hold; the chat plan's `max_prompt_chars` bounds the whole prompt."""
MAX_CONVERSATION_CHARS = 400_000
"""Text the items hold together (about 100k tokens, past any context served here); older items
are dropped first beyond it, as beyond `MAX_ITEMS`."""
_MESSAGE_PATH = re.compile(r"^messages\[(\d+)\]")

_PART_TYPES = {
    "system": ("input_text",),
    "user": ("input_text", "input_audio"),
    "assistant": ("output_text", "output_audio", "text", "audio"),
}


def new_id(prefix: str) -> str:
    """An id in OpenAI's style: `item_...`, `resp_...`."""
    return f"{prefix}_{secrets.token_hex(10)}"


def snapshot(item: ConversationItem) -> ConversationItem:
    """`item` as it is now, for an event: events wait in the session's queue while a response goes
    on changing its items (their status, their text), and must show them as they were."""
    return copy.deepcopy(item)


def part_text(part: ContentPart) -> str:
    """The text the model reads of a content part."""
    if part.type in ("input_audio", "output_audio", "audio"):
        return part.transcript or ""
    return part.text or ""


@dataclass
class ChatMessages:
    """The conversation as chat messages, and the item each came from."""

    messages: list[Message] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    """The path a message came from: `instructions` or `item[<id>]`."""

    def add(self, message: Message, source: str) -> None:
        self.messages.append(message)
        self.sources.append(source)

    def field_name(self, param: str) -> str:
        """A chat request's field path as the conversation names it (`service.chat.FieldNames`)."""
        found = _MESSAGE_PATH.match(param)
        if found is not None and int(found[1]) < len(self.sources):
            return self.sources[int(found[1])] + param[found.end() :]
        return {"max_completion_tokens": "max_output_tokens"}.get(param, param)


class ConversationItems:
    """The items of one conversation, in order, each under its id."""

    def __init__(self, limit: int = MAX_ITEMS, max_chars: int = MAX_CONVERSATION_CHARS) -> None:
        self._items: OrderedDict[str, ConversationItem] = OrderedDict()
        self._limit = limit
        self._max_chars = max_chars

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, item_id: str) -> bool:
        return item_id in self._items

    def get(self, item_id: str, param: str = "item_id") -> ConversationItem:
        """The item, or 400 naming `param`."""
        try:
            return self._items[item_id]
        except KeyError:
            raise InvalidRequest(
                f"Item '{item_id}' is not in the conversation.", param=param, code="item_not_found"
            ) from None

    def last_id(self) -> str | None:
        return next(reversed(self._items), None)

    def add(self, item: ConversationItem, previous_item_id: str | None = None) -> tuple[str | None, list[str]]:
        """Add `item` (its id made if it has none) after `previous_item_id` (None: at the end;
        "root": first), checked; returns the id of the item before it and the ids of the oldest
        items dropped to stay within the bound."""
        check_item(item, self)
        if item.id is None:
            item.id = new_id("item")
        elif item.id in self._items:
            raise InvalidRequest(f"Item id '{item.id}' is already in the conversation.", param="item.id")
        if previous_item_id is not None and previous_item_id != "root" and previous_item_id not in self._items:
            raise InvalidRequest(
                f"previous_item_id '{previous_item_id}' is not in the conversation.", param="previous_item_id"
            )
        ids = list(self._items)
        place = (
            len(ids)
            if previous_item_id is None
            else 0
            if previous_item_id == "root"
            else ids.index(previous_item_id) + 1
        )
        before = ids[place - 1] if place else None
        self._items[item.id] = item
        for later in ids[place:]:
            self._items.move_to_end(later)
        dropped = []
        chars = sum(item_chars(kept) for kept in self._items.values())
        while len(self._items) > self._limit or (chars > self._max_chars and len(self._items) > 1):
            oldest, gone = self._items.popitem(last=False)
            chars -= item_chars(gone)
            dropped.append(oldest)
        return before, dropped

    def delete(self, item_id: str) -> None:
        self.get(item_id)
        del self._items[item_id]

    def chat_messages(self, instructions: str | None) -> ChatMessages:
        """The instructions (as the system message) and every item, as chat messages; a model's
        function calls join the assistant message before them, as chat templates expect."""
        chat = ChatMessages()
        if instructions:
            chat.add(SystemMessage(content=instructions), "instructions")
        for item_id, item in self._items.items():
            source = f"item[{item_id}]"
            if isinstance(item, FunctionCallItem):
                call = ToolCall(
                    id=item.call_id or item_id, function=FunctionCall(name=item.name, arguments=item.arguments)
                )
                last = chat.messages[-1] if chat.messages else None
                if isinstance(last, AssistantMessage):
                    last.tool_calls = [*(last.tool_calls or []), call]
                else:
                    chat.add(AssistantMessage(content=None, tool_calls=[call]), source)
            elif isinstance(item, FunctionCallOutputItem):
                chat.add(ToolMessage(content=item.output, tool_call_id=item.call_id), source)
            else:
                text = "".join(part_text(part) for part in item.content)
                if item.role == "system":
                    chat.add(SystemMessage(content=text), source)
                elif item.role == "user":
                    chat.add(UserMessage(content=text), source)
                else:
                    chat.add(AssistantMessage(content=text), source)
        return chat

    def call_ids(self) -> set[str]:
        return {item.call_id or item_id for item_id, item in self._items.items() if isinstance(item, FunctionCallItem)}


def item_chars(item: ConversationItem) -> int:
    """The characters of text an item holds."""
    if isinstance(item, FunctionCallOutputItem):
        return len(item.output)
    if isinstance(item, FunctionCallItem):
        return len(item.arguments) + len(item.name)
    return sum(len(part_text(part)) for part in item.content)


def check_item(item: ConversationItem, items: ConversationItems) -> None:
    """400 for an item the conversation cannot hold, naming its field."""
    if isinstance(item, FunctionCallOutputItem):
        if item.call_id not in items.call_ids():
            raise InvalidRequest(
                f"function_call_output names call_id '{item.call_id}', which no function_call item in the "
                "conversation has.",
                param="item.call_id",
            )
        _check_size(item_chars(item), "item.output")
        return
    if isinstance(item, FunctionCallItem):
        _check_size(item_chars(item), "item.arguments")
        return
    allowed = _PART_TYPES[item.role]
    for index, part in enumerate(item.content):
        if part.type not in allowed:
            raise InvalidRequest(
                f"A {item.role} message holds {', '.join(allowed)} parts, not {part.type}.",
                param=f"item.content[{index}].type",
            )
        if part.type == "input_audio" and part.transcript is None:
            raise InvalidRequest(
                "An input_audio part is read here by its transcript: send the audio with input_audio_buffer.append "
                "(it is transcribed when the turn is committed), or give the part a transcript.",
                param=f"item.content[{index}].transcript",
                code="unsupported_content",
            )
    _check_size(item_chars(item), "item.content")


def _check_size(chars: int, param: str) -> None:
    if chars > MAX_ITEM_CHARS:
        raise InvalidRequest(f"The item holds {chars} characters; at most {MAX_ITEM_CHARS} are kept.", param=param)
