"""Rendering a chat prompt with the model's chat template (runs in the engine process)."""

from __future__ import annotations

from typing import Any

from appliance.engine.messages import ChatPrompt

__all__ = ["PromptError", "render_chat"]


class PromptError(ValueError):
    """The messages cannot be rendered as asked (a 400 naming `param`)."""

    def __init__(self, message: str, param: str) -> None:
        super().__init__(message)
        self.param = param


def render_chat(tokenizer: Any, prompt: ChatPrompt) -> str:
    """The prompt text: messages, tools and template variables through the chat template.

    With `continue_final_message` the last (assistant) message is left open: the text ends right
    after its content, so the model continues it instead of starting a new turn (as vLLM does).
    """
    text = tokenizer.apply_chat_template(
        prompt.messages,
        add_generation_prompt=prompt.add_generation_prompt,
        tools=prompt.tools or None,
        extra_context=dict(prompt.template_kwargs),
    )
    if not prompt.continue_final_message:
        return text
    content = prompt.messages[-1].get("content") or ""
    end = text.rfind(content) if content else -1
    if end < 0:
        raise PromptError(
            "continue_final_message needs the last message's content to appear in the rendered "
            "prompt, and the chat template did not render it.",
            param="messages",
        )
    return text[: end + len(content)]
