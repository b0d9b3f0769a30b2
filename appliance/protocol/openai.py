"""OpenAI chat completions, completions and models: request and response structs.

Wire names and field order follow the OpenAI API reference. Request structs declare every field
the appliance honours and refuse any other (OpenAI itself refuses unrecognized arguments), so no
parameter is ever silently ignored.
"""

from __future__ import annotations

from typing import Annotated, Literal

from msgspec import UNSET, Meta, Struct, UnsetType

__all__ = [
    "AssistantMessage",
    "ChatCompletion",
    "ChatCompletionChunk",
    "ChatCompletionMessage",
    "ChatCompletionRequest",
    "Choice",
    "ChoiceDelta",
    "ChunkChoice",
    "Completion",
    "CompletionChoice",
    "CompletionRequest",
    "CompletionUsage",
    "ImageURL",
    "ImageURLPart",
    "Message",
    "Model",
    "ModelList",
    "StreamOptions",
    "SystemMessage",
    "TextPart",
    "UserMessage",
]

MAX_STOP_SEQUENCES = 4

Temperature = Annotated[float, Meta(ge=0, le=2)]
TopP = Annotated[float, Meta(gt=0, le=1)]
MaxTokens = Annotated[int, Meta(ge=1)]
Seed = Annotated[int, Meta(ge=-(2**63), le=2**63 - 1)]
StopSequence = Annotated[str, Meta(min_length=1)]
Stop = StopSequence | Annotated[list[StopSequence], Meta(max_length=MAX_STOP_SEQUENCES)]


class _Request(Struct, kw_only=True, forbid_unknown_fields=True):
    """Unknown fields are refused: a parameter the appliance does not honour must not be ignored."""


# --- message content -------------------------------------------------------------------------


class TextPart(_Request, tag_field="type", tag="text"):
    text: str


class ImageURL(_Request):
    url: str
    detail: Literal["auto", "low", "high"] = "auto"


class ImageURLPart(_Request, tag_field="type", tag="image_url"):
    image_url: ImageURL


ContentPart = TextPart | ImageURLPart


class SystemMessage(_Request, tag_field="role", tag="system"):
    content: str | list[TextPart]
    name: str | UnsetType = UNSET


class DeveloperMessage(_Request, tag_field="role", tag="developer"):
    content: str | list[TextPart]
    name: str | UnsetType = UNSET


class UserMessage(_Request, tag_field="role", tag="user"):
    content: str | list[ContentPart]
    name: str | UnsetType = UNSET


class AssistantMessage(_Request, tag_field="role", tag="assistant"):
    content: str | list[TextPart] | None = None
    name: str | UnsetType = UNSET


Message = SystemMessage | DeveloperMessage | UserMessage | AssistantMessage


# --- requests --------------------------------------------------------------------------------


class StreamOptions(_Request):
    include_usage: bool = False


class ChatCompletionRequest(_Request):
    """`POST /v1/chat/completions` (and `/v3/...`)."""

    messages: Annotated[list[Message], Meta(min_length=1)]
    model: str
    max_completion_tokens: MaxTokens | None = None
    max_tokens: MaxTokens | None = None
    n: Literal[1] = 1
    ignore_eos: bool = False
    """Extension (vLLM/OVMS): keep generating past the end-of-sequence token up to max_tokens."""
    seed: Seed | None = None
    stop: Stop | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    temperature: Temperature | None = None
    top_p: TopP | None = None
    user: str | None = None


class CompletionRequest(_Request):
    """`POST /v1/completions` (and `/v3/...`): a prompt string or a list of prompt strings."""

    model: str
    prompt: str | Annotated[list[str], Meta(min_length=1, max_length=64)]
    max_tokens: MaxTokens | None = 16
    n: Literal[1] = 1
    ignore_eos: bool = False
    seed: Seed | None = None
    stop: Stop | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    temperature: Temperature | None = None
    top_p: TopP | None = None
    user: str | None = None


# --- responses -------------------------------------------------------------------------------

FinishReason = Literal["stop", "length"]


class _Response(Struct, kw_only=True):
    pass


class CompletionUsage(_Response):
    completion_tokens: int
    prompt_tokens: int
    total_tokens: int


class ChatCompletionMessage(_Response):
    role: Literal["assistant"] = "assistant"
    content: str | None = None


class Choice(_Response):
    index: int
    message: ChatCompletionMessage
    finish_reason: FinishReason | None
    logprobs: None = None


class ChatCompletion(_Response):
    id: str
    choices: list[Choice]
    created: int
    model: str
    object: Literal["chat.completion"] = "chat.completion"
    usage: CompletionUsage | None = None


class ChoiceDelta(_Response, omit_defaults=True):
    role: Literal["assistant"] | None = None
    content: str | None = None


class ChunkChoice(_Response):
    index: int
    delta: ChoiceDelta
    finish_reason: FinishReason | None = None
    logprobs: None = None


class ChatCompletionChunk(_Response, omit_defaults=True):
    id: str
    choices: list[ChunkChoice]
    created: int
    model: str
    # No default: omit_defaults would drop it, and clients require it on every chunk.
    object: Literal["chat.completion.chunk"]
    usage: CompletionUsage | None = None


class CompletionChoice(_Response):
    index: int
    text: str
    finish_reason: FinishReason | None
    logprobs: None = None


class Completion(_Response, omit_defaults=True):
    id: str
    choices: list[CompletionChoice]
    created: int
    model: str
    object: Literal["text_completion"]
    usage: CompletionUsage | None = None


class Model(_Response):
    id: str
    created: int
    owned_by: str = "appliance"
    object: Literal["model"] = "model"


class ModelList(_Response):
    data: list[Model]
    object: Literal["list"] = "list"

