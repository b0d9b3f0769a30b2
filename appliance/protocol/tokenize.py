"""`POST /tokenize` and `/detokenize` (under /v1 and /v3 too), as vLLM serves them.

A tokenize body holds either `prompt` (tokenized as is) or `messages` (rendered with the model's
chat template first, as a chat completion would be: the count is the prompt's token count).
"""

from __future__ import annotations

from typing import Annotated, Any

from msgspec import Meta, Struct

from appliance.protocol.openai import Message, Tool

__all__ = ["DetokenizeRequest", "DetokenizeResponse", "TokenizeRequest", "TokenizeResponse"]


class _Request(Struct, kw_only=True, forbid_unknown_fields=True):
    pass


class TokenizeRequest(_Request):
    model: str
    prompt: str | None = None
    messages: Annotated[list[Message], Meta(min_length=1)] | None = None
    add_special_tokens: bool | None = None
    """Default: true for `prompt`, false for `messages` (the chat template holds them)."""
    add_generation_prompt: bool | None = None
    continue_final_message: bool = False
    chat_template_kwargs: dict[str, Any] | None = None
    tools: list[Tool] | None = None
    return_token_strs: bool = False


class DetokenizeRequest(_Request):
    model: str
    tokens: list[Annotated[int, Meta(ge=0)]]


class TokenizeResponse(Struct, kw_only=True):
    count: int
    max_model_len: int
    tokens: list[int]
    token_strs: list[str] | None = None
    """The vocabulary's pieces (`Ġis`), with `return_token_strs`; null otherwise (as vLLM)."""


class DetokenizeResponse(Struct, kw_only=True):
    prompt: str
