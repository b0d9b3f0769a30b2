"""A Responses request's input as chat messages, and chat's error paths back in Responses terms.

The Responses API sends a conversation as a list of items: messages, the function calls an earlier
answer made with their outputs, and reasoning. Chat templates take messages: an assistant turn is
one message holding its reasoning, its text and its tool calls, so consecutive reasoning, assistant
message and function call items are merged into one assistant message, and each function call
output becomes a `tool` message. Content parts keep their index (`input_text` -> `text`,
`input_image` -> `image_url`), so the chat plan's checks (limits, image sources and guards) apply
as they are, and an error it raises about `messages[k].content[j]` names the input item it
came from (`input[i].content[j]`).

Before the body is decoded, `prepare_body` gives message items without `type` theirs (the SDK's
"easy" messages leave it out), takes hosted tools (web search, file search, ...) out of `tools` by
the rule of `dialects.hosted_tools`, and refuses the input items and tool choices of hosted tools,
naming them, rather than letting the decoder call a type "invalid".
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from appliance.dialects.field_paths import MESSAGE, TOOL_CALL, renamed
from appliance.dialects.hosted_tools import HostedTools, take_hosted
from appliance.errors import InvalidRequest, unsupported
from appliance.protocol.openai import (
    AssistantMessage,
    DeveloperMessage,
    FunctionCall,
    ImageURL,
    ImageURLPart,
    Message,
    SystemMessage,
    TextOnlyPart,
    TextPart,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from appliance.protocol.responses import (
    FunctionCallItem,
    FunctionCallOutputItem,
    InputFile,
    InputImage,
    InputItem,
    InputMessage,
    InputText,
    ItemReference,
    OutputText,
    ReasoningItem,
    Refusal,
)

__all__ = ["InputMessages", "hosted", "input_messages", "prepare_body"]

_SERVED_ITEMS = {"message", "function_call", "function_call_output", "reasoning", "item_reference"}
_BUILT_IN = {
    "web_search": "web search",
    "web_search_preview": "web search",
    "file_search": "file search",
    "computer": "computer use",
    "computer_use": "computer use",
    "computer_use_preview": "computer use",
    "code_interpreter": "a code interpreter",
    "image_generation": "image generation",
    "mcp": "remote MCP servers",
    "local_shell": "a shell",
    "shell": "a shell",
    "apply_patch": "file patching",
    "tool_search": "tool search",
    "custom": "custom (free-form grammar) tools",
}


def _tool_kind(kind: object) -> str:
    name = str(kind)
    described = next((what for prefix, what in _BUILT_IN.items() if name.startswith(prefix)), None)
    return f"'{name}' ({described})" if described else f"'{name}'"


def hosted(tool: dict[str, Any]) -> bool:
    """Whether a tool of `tools` (plain JSON values) is a hosted one (`dialects.hosted_tools`): a
    `type` other than function and namespace."""
    kind = tool.get("type")
    return isinstance(kind, str) and kind not in ("function", "namespace")


def prepare_body(body: object) -> HostedTools:
    """Make `body` (plain JSON values, edited in place) ready for decoding: message items get their
    `type`; hosted tools are taken out of `tools` (and returned); a hosted tool inside a namespace,
    a tool choice naming a hosted tool and built-in tools' input items are refused (400 naming the
    field)."""
    if not isinstance(body, dict):
        return HostedTools()
    items = body.get("input")
    if isinstance(items, list):
        for index, item in enumerate(items):
            if not isinstance(item, dict):
                continue
            if "type" not in item:
                if "role" in item:
                    item["type"] = "message"
                elif "id" in item:
                    item["type"] = "item_reference"
            kind = item.get("type")
            if isinstance(kind, str) and kind not in _SERVED_ITEMS:
                raise unsupported(
                    f"Input items of type {_tool_kind(kind)} are not served here: only messages, function "
                    "calls with their outputs, and reasoning (no hosted tool runs here).",
                    f"input[{index}].type",
                )
    tools = body.get("tools")
    for index, tool in enumerate(tools if isinstance(tools, list) else ()):
        inner = tool.get("tools") if isinstance(tool, dict) and tool.get("type") == "namespace" else None
        for number, entry in enumerate(inner if isinstance(inner, list) else ()):
            kind = entry.get("type") if isinstance(entry, dict) else None
            if isinstance(kind, str) and kind != "function":
                raise unsupported(
                    f"The tool type {_tool_kind(kind)} is not available inside a namespace: a namespace "
                    "groups function tools.",
                    f"tools[{index}].tools[{number}].type",
                )
    choice = body.get("tool_choice")
    kind = choice.get("type") if isinstance(choice, dict) else None
    if isinstance(kind, str) and kind not in ("function", "allowed_tools"):
        raise unsupported(
            f"tool_choice {_tool_kind(kind)} names a hosted tool, which does not run here: it cannot be forced.",
            "tool_choice.type",
        )
    return take_hosted(body, hosted)


@dataclass
class InputMessages:
    """The chat messages of a Responses request, and where each came from."""

    messages: list[Message] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    """The request field each message came from (`instructions`, `input[3]`, ...)."""
    call_paths: dict[tuple[int, int], str] = field(default_factory=dict)
    """(message, tool call) -> the function_call item it came from."""

    def add(self, message: Message, path: str) -> None:
        self.messages.append(message)
        self.paths.append(path)

    def field_name(self, param: str) -> str:
        """A chat request's field path, named as the Responses request names it."""
        if (name := renamed(param, _RENAMED)) is not None:
            return name
        found = MESSAGE.match(param)
        if found is None:
            return "input" if param == "messages" else param
        index, rest = int(found.group(1)), found.group(2)
        if index >= len(self.paths):
            return "input"
        call = TOOL_CALL.match(rest)
        if call is not None and (index, int(call.group(1))) in self.call_paths:
            return self.call_paths[index, int(call.group(1))] + (".arguments" if call.group(2) else "")
        rest = _IMAGE_URL.sub(r"\1", rest)
        if isinstance(self.messages[index], ToolMessage):
            rest = rest.replace(".content", ".output", 1)
        return self.paths[index] + rest


_IMAGE_URL = re.compile(r"(\.content\[\d+\]\.image_url)\.url$")
_RENAMED = [
    (re.compile(r"^max_completion_tokens"), "max_output_tokens"),
    (re.compile(r"^response_format\.json_schema\.schema"), "text.format.schema"),
    (re.compile(r"^response_format(\.json_schema)?"), "text.format"),
    (re.compile(r"^tools\[(\d+)\]\.function"), r"tools[\1]"),
    (re.compile(r"^tool_choice\.function"), "tool_choice"),
    (re.compile(r"^reasoning_effort"), "reasoning.effort"),
]


def _text_parts(parts: list, path: str, *, outputs: bool = False) -> list[str]:
    texts = []
    for index, part in enumerate(parts):
        if isinstance(part, InputText | OutputText):
            texts.append(part.text)
        elif isinstance(part, Refusal):
            texts.append(part.refusal)
        elif outputs:
            raise unsupported(
                "Function call outputs are text here: images and files are not passed to the model.",
                f"{path}[{index}]",
            )
        else:
            raise InvalidRequest(
                "This message holds text only; send images in a user message.",
                param=f"{path}[{index}]",
                code="invalid_content",
            )
    return texts


def _user_content(content: str | list, path: str) -> str | list:
    if isinstance(content, str):
        return content
    parts: list = []
    for index, part in enumerate(content):
        where = f"{path}.content[{index}]"
        if isinstance(part, InputText | OutputText):
            parts.append(TextPart(text=part.text))
        elif isinstance(part, InputImage):
            if part.file_id is not None:
                raise unsupported(
                    "Images by file_id are not served (there is no Files API here): send image_url, as a "
                    "data URL or a URL this server may fetch.",
                    f"{where}.file_id",
                )
            if part.image_url is None:
                raise InvalidRequest("An input_image needs its image_url.", param=f"{where}.image_url")
            detail = "high" if part.detail == "original" else (part.detail or "auto")
            parts.append(ImageURLPart(image_url=ImageURL(url=part.image_url, detail=detail)))
        elif isinstance(part, InputFile):
            raise unsupported("File inputs are not served: no model here reads files.", where)
        else:
            raise InvalidRequest("User messages hold input_text and input_image parts.", param=f"{where}.type")
    return parts


def input_messages(items: str | list[InputItem], prefix: list[Message] | None = None) -> InputMessages:
    """The chat messages of `items` after `prefix` (a stored conversation), assistant turns merged."""
    result = InputMessages()
    for message in prefix or ():
        result.add(message, "previous_response_id")
    if isinstance(items, str):
        result.add(UserMessage(content=items), "input")
        return result
    turn: AssistantMessage | None = None
    for index, item in enumerate(items):
        path = f"input[{index}]"
        if isinstance(item, ReasoningItem | FunctionCallItem) or (
            isinstance(item, InputMessage) and item.role == "assistant"
        ):
            fresh = turn is None or (
                not isinstance(item, FunctionCallItem) and (turn.content is not None or bool(turn.tool_calls))
            )
            if fresh:
                turn = AssistantMessage(content=None, tool_calls=None)
                result.add(turn, path)
            assert turn is not None
            _extend_turn(turn, item, path, result)
            continue
        turn = None
        if isinstance(item, InputMessage):
            result.add(_message(item, path), path)
        elif isinstance(item, FunctionCallOutputItem):
            output = item.output
            if not isinstance(output, str):
                output = "\n".join(_text_parts(output, f"{path}.output", outputs=True))
            result.add(ToolMessage(content=output, tool_call_id=item.call_id), path)
        else:
            assert isinstance(item, ItemReference)
            raise unsupported(
                "Item references are not served: items are not kept here by id. Send the item itself, or "
                "previous_response_id to continue a stored response.",
                path,
            )
    return result


def _message(item: InputMessage, path: str) -> Message:
    if item.role == "user":
        return UserMessage(content=_user_content(item.content, path))
    content: Any = item.content
    if not isinstance(content, str):
        content = [TextOnlyPart(type="text", text=text) for text in _text_parts(content, f"{path}.content")]
    if item.role == "developer":
        return DeveloperMessage(content=content)
    return SystemMessage(content=content)


def _extend_turn(turn: AssistantMessage, item: InputItem, path: str, result: InputMessages) -> None:
    if isinstance(item, ReasoningItem):
        text = "\n".join(part.text for part in item.content or ()) or "\n".join(part.text for part in item.summary)
        turn.reasoning_content = (turn.reasoning_content or "") + text
    elif isinstance(item, FunctionCallItem):
        call = ToolCall(id=item.call_id, function=FunctionCall(name=item.name, arguments=item.arguments))
        turn.tool_calls = [*(turn.tool_calls or []), call]
        result.call_paths[len(result.messages) - 1, len(turn.tool_calls) - 1] = path
    else:
        assert isinstance(item, InputMessage)
        content = item.content
        turn.content = content if isinstance(content, str) else "".join(_text_parts(content, f"{path}.content"))
