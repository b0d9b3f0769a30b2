"""Chat messages as the chat template receives them, shared by chat completions and `/tokenize`
(so a tokenized conversation counts exactly the `prompt_tokens` a chat completion would).

Each message becomes the template's dict (`developer` as `system`, text parts joined by newlines,
image parts as the pipeline's tags, earlier tool calls with their arguments as objects); the
request fields beyond the messages become the template options (variables, how the prompt ends).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from appliance.errors import InvalidRequest
from appliance.protocol.openai import (
    AssistantMessage,
    ChatCompletionRequest,
    DeveloperMessage,
    ImageURLPart,
    InputAudioPart,
    Message,
    TextPart,
    ToolMessage,
)
from appliance.protocol.tokenize import TokenizeRequest
from appliance.service.images import ImageParts
from appliance.service.tool_plan import template_tool_calls

__all__ = ["chat_messages", "template_options"]


def _text(content: str | list, where: str, images: ImageParts) -> str:
    if isinstance(content, str):
        return images.check_text(content, f"{where}.content")
    text = ""
    previous = None
    for index, part in enumerate(content):
        if isinstance(part, ImageURLPart):
            text += images.tag(part, f"{where}.content[{index}]")
        elif isinstance(part, InputAudioPart):  # chat completions transcribe them first
            raise InvalidRequest(
                "An input_audio part is heard in chat completions only, not here.", param=f"{where}.content[{index}]"
            )
        else:
            assert isinstance(part, TextPart)
            # Text parts are joined by newlines; an image tag sits right where its part was.
            text += ("\n" if isinstance(previous, TextPart) else "") + images.check_text(
                part.text, f"{where}.content[{index}].text"
            )
        previous = part
    return text


def chat_messages(messages: Sequence[Message], images: ImageParts) -> list[dict[str, Any]]:
    """The messages for the chat template; `images` collects the image parts on the way."""
    rendered = []
    for index, message in enumerate(messages):
        # The OpenAI `developer` role is the newer name of `system`; chat templates know `system`.
        role = "system" if isinstance(message, DeveloperMessage) else type(message).__struct_config__.tag
        if isinstance(message, AssistantMessage) and message.content is None:
            content = ""
        else:
            content = _text(message.content, f"messages[{index}]", images)
        entry: dict[str, Any] = {"role": role, "content": content}
        if isinstance(getattr(message, "name", None), str):
            entry["name"] = message.name
        if isinstance(message, AssistantMessage):
            if message.tool_calls:
                entry["tool_calls"] = template_tool_calls(message.tool_calls, f"messages[{index}]")
            if message.reasoning_content is not None:
                entry["reasoning_content"] = message.reasoning_content
        elif isinstance(message, ToolMessage):
            entry["tool_call_id"] = message.tool_call_id
        rendered.append(entry)
    return rendered


def template_options(request: ChatCompletionRequest | TokenizeRequest) -> dict[str, Any]:
    """ChatPrompt fields beyond the messages and tools: template variables, how the prompt ends."""
    kwargs = request.chat_template_kwargs or {}
    for key in ("messages", "tools", "add_generation_prompt"):
        if key in kwargs:
            raise InvalidRequest(
                f"chat_template_kwargs cannot set '{key}'; use the request field.", param=f"chat_template_kwargs.{key}"
            )
    for key in kwargs:
        # bos_token, eos_token, pad_token, unk_token, additional_special_tokens, ...: the template
        # writes these as the model's control tokens, so a client must not choose their text.
        if key.endswith(("_token", "_tokens")):
            raise InvalidRequest(
                f"chat_template_kwargs cannot set '{key}': the tokenizer's special tokens are not the "
                "request's to change.",
                param=f"chat_template_kwargs.{key}",
            )
    reasoning_effort = getattr(request, "reasoning_effort", None)
    if reasoning_effort is not None:
        # OpenAI's field reaches the model the way vLLM passes it: as a chat template variable.
        kwargs = {**kwargs, "reasoning_effort": reasoning_effort}
    add_generation_prompt = request.add_generation_prompt
    if request.continue_final_message:
        if not isinstance(request.messages[-1], AssistantMessage):
            raise InvalidRequest(
                "continue_final_message needs an assistant message last (the text to continue).",
                param="continue_final_message",
            )
        if add_generation_prompt:
            raise InvalidRequest(
                "add_generation_prompt and continue_final_message cannot both be true.", param="add_generation_prompt"
            )
    return {
        "template_kwargs": kwargs,
        "add_generation_prompt": not request.continue_final_message
        if add_generation_prompt is None
        else add_generation_prompt,
        "continue_final_message": request.continue_final_message,
    }
