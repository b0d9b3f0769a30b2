"""Anthropic's Messages API (`POST /v1/messages`, `/v1/messages/count_tokens`): the request, the
message it answers with, the stream events and the error envelope.

Wire names follow Anthropic's reference (and the `anthropic` SDK's types under `anthropic/types/`).
Requests refuse unknown fields, as the OpenAI structs do. Fields the appliance cannot honour are
declared so that the dialect can refuse them by name with a reason (`dialects.anthropic.plan`);
what is accepted without effect says so. Content blocks, image sources, tool choices and thinking
settings are tagged by `type`; before decoding, the dialect refuses block and tool types that
belong to Anthropic's server-side features (`dialects.anthropic.plan.prepare_body`).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from msgspec import Meta, Struct

from appliance.protocol.openai import MaxTokens, StopSequence, TopP

__all__ = [
    "AnthropicError",
    "AnthropicErrorBody",
    "Base64Source",
    "ContentBlockDelta",
    "ContentBlockStart",
    "ContentBlockStop",
    "CountTokensRequest",
    "StreamError",
    "ImageBlock",
    "MessageParam",
    "Message",
    "MessageDelta",
    "ModelInfo",
    "ModelInfoList",
    "MessageStart",
    "MessageStop",
    "MessagesRequest",
    "Ping",
    "TextBlock",
    "ThinkingBlock",
    "ToolDefinition",
    "ToolResultBlock",
    "ToolUseBlock",
    "TokenCount",
    "Usage",
]

Temperature = Annotated[float, Meta(ge=0, le=1)]
"""Anthropic's range (OpenAI's goes to 2)."""


class _Request(Struct, kw_only=True, forbid_unknown_fields=True):
    """Unknown fields are refused: a parameter the appliance does not honour must not be ignored."""


class CacheControl(_Request):
    """Accepted on blocks, tools and the request without effect: prefix caching here is automatic.
    Checked as Anthropic checks it, so a typo is a 400 here as it is there."""

    type: Literal["ephemeral"]
    ttl: Literal["5m", "1h"] | None = None


# --- content blocks ----------------------------------------------------------------------------


class TextBlock(_Request, tag_field="type", tag="text"):
    text: str
    cache_control: CacheControl | None = None
    citations: list[dict[str, Any]] | None = None
    """Accepted in history without effect (the model reads the text)."""


class SystemText(TextBlock, tag=False, tag_field=None, kw_only=True):
    """A text block of `system`. msgspec treats the tag of a tagged struct outside a union as
    optional; here `type` is a plain field, so it is required like everywhere else."""

    type: Literal["text"]


class Base64Source(_Request, tag_field="type", tag="base64"):
    media_type: str
    data: str


class URLSource(_Request, tag_field="type", tag="url"):
    url: str
    """An http(s) URL or a local file, under the same policy as chat's image_url."""


class FileSource(_Request, tag_field="type", tag="file"):
    """Refused: there is no Files API here."""

    file_id: str


class ImageBlock(_Request, tag_field="type", tag="image"):
    source: Base64Source | URLSource | FileSource
    cache_control: CacheControl | None = None
    transformations: ImageTransformations | None = None


class ImageTransformations(_Request):
    """Accepted: an image is always scaled down to the size the model reads here (`downsize`);
    `error` is refused (dialects.anthropic.input)."""

    oversized_image: Literal["downsize", "error"] | None = None


class ToolUseBlock(_Request, tag_field="type", tag="tool_use"):
    id: str
    name: str
    input: dict[str, Any]
    cache_control: CacheControl | None = None
    caller: dict[str, Any] | None = None
    """Accepted without effect: who made the call at Anthropic (the model, or its code execution)."""
    toolset_name: str | None = None
    """Accepted without effect: the MCP toolset of the tool at Anthropic."""


class ToolResultBlock(_Request, tag_field="type", tag="tool_result"):
    tool_use_id: str
    content: str | list[TextBlock | ImageBlock] | None = None
    is_error: bool | None = None
    cache_control: CacheControl | None = None
    toolset_name: str | None = None


class ThinkingBlock(_Request, tag_field="type", tag="thinking"):
    thinking: str
    signature: str | None = None


class RedactedThinkingBlock(_Request, tag_field="type", tag="redacted_thinking"):
    data: str


ContentBlock = TextBlock | ImageBlock | ToolUseBlock | ToolResultBlock | ThinkingBlock | RedactedThinkingBlock


class MessageParam(_Request):
    role: Literal["user", "assistant", "system"]
    """A `system` message holds text only (the SDK's `SystemMessageParam`); it keeps its place in the
    conversation (dialects.anthropic.input)."""
    content: str | Annotated[list[ContentBlock], Meta(min_length=1)]


# --- tools, thinking, output -------------------------------------------------------------------


class ToolDefinition(_Request):
    """A client tool (the model writes the call, the client runs it); server tools are refused."""

    name: Annotated[str, Meta(pattern=r"^[a-zA-Z0-9_-]{1,64}$")]
    input_schema: dict[str, Any]
    description: str | None = None
    type: Literal["custom"] | None = None
    cache_control: CacheControl | None = None
    strict: bool | None = None
    """Accepted: a forced call (tool_choice any/tool) always follows the schema here."""
    defer_loading: bool | None = None
    """Honoured: a deferred tool is not shown to the model. At Anthropic only a tool search loads it,
    and there is no tool search here."""
    eager_input_streaming: bool | None = None
    """Accepted without effect: a call's input is streamed whole, once parsed."""
    input_examples: list[dict[str, Any]] | None = None
    """Accepted without effect: the model reads the schema and description."""
    allowed_callers: list[str] | None = None
    """Accepted without effect: the model itself makes every call here (no code execution)."""


class ToolChoiceAuto(_Request, tag_field="type", tag="auto"):
    disable_parallel_tool_use: bool | None = None


class ToolChoiceAny(_Request, tag_field="type", tag="any"):
    disable_parallel_tool_use: bool | None = None


class ToolChoiceTool(_Request, tag_field="type", tag="tool"):
    name: str
    disable_parallel_tool_use: bool | None = None


class ToolChoiceNone(_Request, tag_field="type", tag="none"):
    pass


ToolChoice = ToolChoiceAuto | ToolChoiceAny | ToolChoiceTool | ToolChoiceNone


class ThinkingEnabled(_Request, tag_field="type", tag="enabled"):
    budget_tokens: Annotated[int, Meta(ge=0)]
    """Accepted without a bound of its own: `max_tokens` bounds thinking and text together."""
    display: Literal["summarized", "omitted"] | None = None


class ThinkingAdaptive(_Request, tag_field="type", tag="adaptive"):
    display: Literal["summarized", "omitted"] | None = None


class ThinkingDisabled(_Request, tag_field="type", tag="disabled"):
    pass


class ThinkingBetweenTools(_Request, tag_field="type", tag="between_tools"):
    """As `adaptive` here: the model decides when it thinks."""


Thinking = ThinkingEnabled | ThinkingAdaptive | ThinkingDisabled | ThinkingBetweenTools


class ThinkingTurns(_Request, tag_field="type", tag="thinking_turns"):
    value: Annotated[int, Meta(ge=0)]


class AllThinkingTurns(_Request, tag_field="type", tag="all"):
    pass


class ClearThinkingEdit(_Request, tag_field="type", tag="clear_thinking_20251015"):
    """Honoured: the thinking of all but the last `keep` assistant turns is left out of the prompt
    (Anthropic's default: keep the last one)."""

    keep: ThinkingTurns | AllThinkingTurns | Literal["all"] | None = None


class ClearToolUsesEdit(_Request, tag_field="type", tag="clear_tool_uses_20250919"):
    """Refused (dialects.anthropic.plan): results are never cleared from a conversation here."""

    clear_at_least: dict[str, Any] | None = None
    clear_tool_inputs: bool | list[str] | None = None
    exclude_tools: list[str] | None = None
    keep: dict[str, Any] | None = None
    trigger: dict[str, Any] | None = None


class CompactEdit(_Request, tag_field="type", tag="compact_20260112"):
    """Refused (dialects.anthropic.plan): no conversation is summarised here."""

    instructions: str | None = None
    pause_after_compaction: bool | None = None
    trigger: dict[str, Any] | None = None


class ContextManagement(_Request):
    """Anthropic's edits of the conversation before the model reads it."""

    edits: list[ClearThinkingEdit | ClearToolUsesEdit | CompactEdit] | None = None


class JSONOutputFormat(_Request):
    type: Literal["json_schema"]
    schema: dict[str, Any]


class OutputConfig(_Request):
    effort: Literal["low", "medium", "high", "xhigh", "max"] | None = None
    """Where the graph parses reasoning, handed to the chat template as `reasoning_effort` (xhigh and
    max as high, the highest chat templates know); elsewhere without effect."""
    format: JSONOutputFormat | None = None


class Metadata(_Request):
    user_id: str | None = None


# --- requests ----------------------------------------------------------------------------------


class CountTokensRequest(_Request):
    """`POST /v1/messages/count_tokens`: the prompt part of a messages request."""

    messages: Annotated[list[MessageParam], Meta(min_length=1)]
    model: str
    system: str | list[SystemText] | None = None
    tools: list[ToolDefinition] | None = None
    tool_choice: ToolChoice | None = None
    thinking: Thinking | None = None
    output_config: OutputConfig | None = None
    cache_control: CacheControl | None = None
    context_management: ContextManagement | None = None
    # Accepted without effect: they choose Anthropic's speed or account, not the answer.
    speed: Literal["standard", "fast"] | None = None
    user_profile_id: str | None = None
    workspace_id: str | None = None
    # Refused when set: see dialects/anthropic/plan.py.
    mcp_servers: list[dict[str, Any]] | None = None


class MessagesRequest(CountTokensRequest, kw_only=True):
    """`POST /v1/messages`."""

    max_tokens: MaxTokens
    metadata: Metadata | None = None
    stop_sequences: list[StopSequence] | None = None
    stream: bool = False
    temperature: Temperature | None = None
    top_k: Annotated[int, Meta(ge=0)] | None = None
    top_p: TopP | None = None
    # Accepted without effect: they choose Anthropic's capacity, region or account, not the answer.
    service_tier: Literal["auto", "standard_only"] | None = None
    inference_geo: str | None = None
    diagnostics: dict[str, Any] | None = None
    # Refused when set: see dialects/anthropic/plan.py.
    container: str | dict[str, Any] | None = None


# --- the answer ----------------------------------------------------------------------------------


class _Response(Struct, kw_only=True):
    pass


class TextOut(_Response, tag_field="type", tag="text"):
    text: str


class ThinkingOut(_Response, tag_field="type", tag="thinking"):
    thinking: str
    signature: str = ""
    """Anthropic signs its thinking so that it can verify it when sent back; nothing is signed here."""


class ToolUseOut(_Response, tag_field="type", tag="tool_use"):
    id: str
    name: str
    input: dict[str, Any]


OutputBlock = TextOut | ThinkingOut | ToolUseOut
StopReason = Literal["end_turn", "max_tokens", "stop_sequence", "tool_use"]


class Usage(_Response):
    input_tokens: int
    output_tokens: int
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0


class Message(_Response, tag_field="type", tag="message"):
    id: str
    model: str
    content: list[OutputBlock]
    stop_reason: StopReason | None
    stop_sequence: str | None
    usage: Usage
    role: Literal["assistant"] = "assistant"


class TokenCount(_Response):
    input_tokens: int


class ModelInfo(_Response, tag_field="type", tag="model"):
    """A model as Anthropic's `GET /v1/models` lists it (the SDK's `ModelInfo`)."""

    id: str
    display_name: str
    created_at: str
    """RFC 3339: when the server started."""
    max_input_tokens: int
    """The model's context in tokens."""
    max_tokens: int
    """The most `max_tokens` can ask for: the graph's `max_tokens_limit`, at most the context."""
    lifecycle: Literal["active"] = "active"


class ModelInfoList(_Response):
    data: list[ModelInfo]
    has_more: bool = False
    first_id: str | None = None
    last_id: str | None = None


# --- stream events (`event: <type>` + the JSON) ---------------------------------------------------


class MessageStart(_Response, tag_field="type", tag="message_start"):
    message: Message


class Ping(_Response, tag_field="type", tag="ping"):
    pass


class ContentBlockStart(_Response, tag_field="type", tag="content_block_start"):
    index: int
    content_block: OutputBlock


class TextDelta(_Response, tag_field="type", tag="text_delta"):
    text: str


class ThinkingDelta(_Response, tag_field="type", tag="thinking_delta"):
    thinking: str


class SignatureDelta(_Response, tag_field="type", tag="signature_delta"):
    signature: str


class InputJSONDelta(_Response, tag_field="type", tag="input_json_delta"):
    partial_json: str


class ContentBlockDelta(_Response, tag_field="type", tag="content_block_delta"):
    index: int
    delta: TextDelta | ThinkingDelta | SignatureDelta | InputJSONDelta


class ContentBlockStop(_Response, tag_field="type", tag="content_block_stop"):
    index: int


class StopDelta(_Response):
    stop_reason: StopReason | None
    stop_sequence: str | None


class DeltaUsage(_Response):
    output_tokens: int


class MessageDelta(_Response, tag_field="type", tag="message_delta"):
    delta: StopDelta
    usage: DeltaUsage


class MessageStop(_Response, tag_field="type", tag="message_stop"):
    pass


class AnthropicError(_Response):
    type: str
    """invalid_request_error, authentication_error, permission_error, not_found_error,
    request_too_large, rate_limit_error, api_error, overloaded_error, timeout_error."""
    message: str


class StreamError(_Response, tag_field="type", tag="error"):
    error: AnthropicError


class AnthropicErrorBody(_Response, tag_field="type", tag="error"):
    """The error envelope of every response on the Messages routes."""

    error: AnthropicError
    request_id: str | None = None


StreamEvent = (
    MessageStart | Ping | ContentBlockStart | ContentBlockDelta | ContentBlockStop | MessageDelta | MessageStop
)
