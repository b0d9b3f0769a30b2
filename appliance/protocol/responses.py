"""OpenAI's Responses API (`POST /v1/responses`): the request and the response (its stream events
are in `response_events`).

Wire names follow the OpenAI reference (and the `openai` SDK's types under
`openai/types/responses/`). As on chat completions, the request declares every field the appliance
honours, plus the OpenAI fields it accepts without effect or refuses with a reason
(`service.field_policy.RESPONSES`); any other field is refused. Input items and tools are tagged
by `type`; a message item may leave `type` out, as the SDK's "easy" messages do (the service fills
it in before decoding). Extensions (vLLM/OVMS sampling names, sent with the SDK's `extra_body`)
follow the OpenAI fields, as on chat.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from msgspec import Meta, Struct

from appliance.protocol.openai import (
    Identifier,
    MaxTokens,
    Metadata,
    Penalty,
    Seed,
    Stop,
    StructuredOutputs,
    Temperature,
    TokenId,
    TopLogprob,
    TopP,
)

__all__ = [
    "FunctionCallItem",
    "FunctionCallOutputItem",
    "FunctionTool",
    "NamespaceTool",
    "FunctionToolChoice",
    "InputImage",
    "InputItem",
    "InputMessage",
    "InputText",
    "OutputFunctionCall",
    "OutputMessage",
    "OutputReasoning",
    "OutputText",
    "Response",
    "ResponseError",
    "ResponseUsage",
    "ResponsesRequest",
]

ItemStatus = Literal["in_progress", "completed", "incomplete"]
Effort = Literal["none", "minimal", "low", "medium", "high", "xhigh", "max"]


class _Request(Struct, kw_only=True, forbid_unknown_fields=True, omit_defaults=True):
    """Unknown fields are refused; echoed back in a Response, unset fields are left out."""


# --- input content and items -----------------------------------------------------------------


class InputText(_Request, tag_field="type", tag="input_text", kw_only=True):
    text: str
    prompt_cache_breakpoint: dict[str, Any] | None = None
    """Accepted without effect (prefix caching here is automatic)."""


class InputImage(_Request, tag_field="type", tag="input_image", kw_only=True):
    image_url: str | None = None
    """A data URL, an http(s) URL or a local file, under the same policy as chat's image_url."""
    file_id: str | None = None
    """Refused: there is no Files API here."""
    detail: Literal["auto", "low", "high", "original"] | None = None
    prompt_cache_breakpoint: dict[str, Any] | None = None


class InputFile(_Request, tag_field="type", tag="input_file", kw_only=True):
    """Refused: no model here reads files."""

    file_data: str | None = None
    file_id: str | None = None
    file_url: str | None = None
    filename: str | None = None
    detail: str | None = None
    prompt_cache_breakpoint: dict[str, Any] | None = None


class OutputText(_Request, tag_field="type", tag="output_text", kw_only=True):
    """An earlier answer's text, sent back as part of an assistant message."""

    text: str
    annotations: list[Any] = []
    logprobs: list[Any] | None = None


class Refusal(_Request, tag_field="type", tag="refusal", kw_only=True):
    refusal: str


InputContent = InputText | InputImage | InputFile


class InputMessage(_Request, tag_field="type", tag="message", kw_only=True):
    """A message: user, system and developer content is text and images; assistant content (an
    earlier answer sent back) is text or output_text parts."""

    role: Literal["user", "system", "developer", "assistant"]
    content: str | list[InputText | InputImage | InputFile | OutputText | Refusal]
    id: str | None = None
    status: ItemStatus | None = None
    phase: Literal["commentary", "final_answer"] | None = None


class FunctionCallItem(_Request, tag_field="type", tag="function_call", kw_only=True):
    """A call an earlier answer made, sent back with its output."""

    call_id: str
    name: str
    arguments: str
    id: str | None = None
    status: ItemStatus | None = None
    namespace: str | None = None
    caller: dict[str, Any] | None = None


class FunctionCallOutputItem(_Request, tag_field="type", tag="function_call_output", kw_only=True):
    """What the client's function returned."""

    call_id: str
    output: str | list[InputContent]
    id: str | None = None
    status: ItemStatus | None = None
    name: str | None = None
    namespace: str | None = None
    caller: dict[str, Any] | None = None


# Structs decoded outside a union declare `type` as a plain field: msgspec treats a tag as optional
# where there is no union to tell apart (as openai.TextOnlyPart does).


class SummaryText(_Request, kw_only=True):
    type: Literal["summary_text"]
    text: str


class ReasoningText(_Request, kw_only=True):
    type: Literal["reasoning_text"]
    text: str


class ReasoningItem(_Request, tag_field="type", tag="reasoning", kw_only=True):
    """An earlier answer's reasoning, given to chat templates that render it."""

    id: str | None = None
    summary: list[SummaryText] = []
    content: list[ReasoningText] | None = None
    encrypted_content: str | None = None
    status: ItemStatus | None = None


class ItemReference(_Request, tag_field="type", tag="item_reference", kw_only=True):
    """Refused: items are not kept here by id; send the item, or use previous_response_id."""

    id: str


InputItem = InputMessage | FunctionCallItem | FunctionCallOutputItem | ReasoningItem | ItemReference


# --- tools, formats, options -----------------------------------------------------------------


class FunctionTool(_Request, tag_field="type", tag="function", kw_only=True):
    name: Identifier
    parameters: dict[str, Any] | None = None
    strict: bool | None = None
    """Accepted: forced calls (tool_choice required or named) always follow the schema."""
    description: str | None = None
    defer_loading: bool | None = None
    """Refused when true: there is no tool search here."""
    allowed_callers: list[str] | None = None
    output_schema: dict[str, Any] | None = None


class NamespacedFunctionTool(FunctionTool, tag=False, tag_field=None, kw_only=True):
    """A function tool inside a namespace. msgspec treats the tag of a tagged struct outside a
    union as optional; here `type` is a plain field, so it is required as everywhere else."""

    type: Literal["function"]


class NamespaceTool(_Request, tag_field="type", tag="namespace", kw_only=True):
    """Function tools grouped under a name (newer SDKs group tools so): each is offered to the
    model as a function of its own, and its calls carry the namespace."""

    name: Identifier
    description: str | None = None
    tools: Annotated[list[NamespacedFunctionTool], Meta(min_length=1)]


ResponseTool = FunctionTool | NamespaceTool


class FunctionToolChoice(_Request, tag_field="type", tag="function", kw_only=True):
    name: str


class AllowedTools(_Request, tag_field="type", tag="allowed_tools", kw_only=True):
    """Only these tools may be called; `mode` as tool_choice auto or required."""

    mode: Literal["auto", "required"]
    tools: list[dict[str, Any]]


ToolChoice = Literal["none", "auto", "required"] | FunctionToolChoice | AllowedTools


class TextFormatText(_Request, tag_field="type", tag="text", kw_only=True):
    pass


class TextFormatJSONObject(_Request, tag_field="type", tag="json_object", kw_only=True):
    pass


class TextFormatJSONSchema(_Request, tag_field="type", tag="json_schema", kw_only=True):
    name: Identifier
    schema: dict[str, Any]
    description: str | None = None
    strict: bool | None = None
    """Accepted: the schema is always enforced."""


TextFormat = TextFormatText | TextFormatJSONObject | TextFormatJSONSchema


class TextConfig(_Request, kw_only=True):
    format: TextFormat | None = None
    verbosity: Literal["low", "medium", "high"] | None = None
    """Refused unless "medium" (OpenAI's default): no model here is trained to follow it."""


class ReasoningConfig(_Request, kw_only=True):
    effort: Effort | None = None
    """Handed to the chat template as `reasoning_effort`, as chat's field is."""
    summary: Literal["auto", "concise", "detailed"] | None = None
    """Accepted: no summary is written; the reasoning item carries the reasoning itself."""
    generate_summary: Literal["auto", "concise", "detailed"] | None = None
    context: Literal["auto", "current_turn", "all_turns"] | None = None
    """Accepted: the chat template decides which turns' reasoning it renders."""
    mode: str | None = None
    """Refused unless "standard"."""


class ResponseStreamOptions(_Request, kw_only=True):
    include_obfuscation: bool | None = None
    """Accepted without effect."""


class ResponsesRequest(_Request, kw_only=True):
    """`POST /v1/responses` (and `/v3/...`)."""

    model: str
    input: str | Annotated[list[InputItem], Meta(min_length=1)]
    include: list[str] | None = None
    """`message.output_text.logprobs` is honoured; the rest ask for what is never produced here."""
    instructions: str | None = None
    max_output_tokens: MaxTokens | None = None
    max_tool_calls: Annotated[int, Meta(ge=1)] | None = None
    metadata: Metadata | None = None
    parallel_tool_calls: bool | None = None
    previous_response_id: str | None = None
    reasoning: ReasoningConfig | None = None
    store: bool | None = None
    """Default true: the response is kept (in memory, bounded) for GET and previous_response_id."""
    stream: bool | None = None
    stream_options: ResponseStreamOptions | None = None
    temperature: Temperature | None = None
    text: TextConfig | None = None
    tool_choice: ToolChoice | None = None
    tools: list[ResponseTool] | None = None
    top_logprobs: Annotated[int, Meta(ge=0, le=20)] | None = None
    top_p: TopP | None = None
    truncation: Literal["auto", "disabled"] | None = None
    user: str | None = None
    # Accepted without effect, or refused unless neutral: service/field_policy.py (RESPONSES).
    service_tier: str | None = None
    prompt_cache_key: str | None = None
    prompt_cache_retention: str | None = None
    prompt_cache_options: dict[str, Any] | None = None
    safety_identifier: str | None = None
    access_programs: dict[str, Any] | None = None
    image: dict[str, Any] | None = None
    background: bool | None = None
    background_options: dict[str, Any] | None = None
    conversation: str | dict[str, Any] | None = None
    context_management: list[dict[str, Any]] | None = None
    prompt: dict[str, Any] | None = None
    moderation: dict[str, Any] | None = None
    client_metadata: dict[str, Any] | None = None
    """Codex's per-turn metadata (ids of its session and turn): not in OpenAI's reference or SDK, sent
    by Codex to every provider."""
    # Extensions, as on chat completions (vLLM / OVMS names).
    frequency_penalty: Penalty | None = None
    presence_penalty: Penalty | None = None
    seed: Seed | None = None
    stop: Stop | None = None
    top_k: Annotated[int, Meta(ge=-1)] | None = None
    min_p: Annotated[float, Meta(ge=0, le=1)] | None = None
    repetition_penalty: Annotated[float, Meta(gt=0, le=10)] | None = None
    ignore_eos: bool = False
    min_tokens: Annotated[int, Meta(ge=0)] = 0
    stop_token_ids: Annotated[list[TokenId], Meta(max_length=64)] | None = None
    include_stop_str_in_output: bool | None = None
    skip_special_tokens: bool | None = None
    structured_outputs: StructuredOutputs | None = None
    num_assistant_tokens: Annotated[int, Meta(ge=1, le=16)] | None = None
    assistant_confidence_threshold: Annotated[float, Meta(gt=0, lt=1)] | None = None
    max_ngram_size: Annotated[int, Meta(ge=1, le=16)] | None = None
    chat_template_kwargs: dict[str, Any] | None = None


# --- the response ----------------------------------------------------------------------------


class _Response(Struct, kw_only=True):
    pass


class Logprob(_Response, kw_only=True):
    token: str
    bytes: list[int]
    logprob: float
    top_logprobs: list[TopLogprob] = []
    """Always empty: the engine computes no alternatives (top_logprobs > 0 is refused)."""


class OutputTextPart(_Response, tag_field="type", tag="output_text", kw_only=True):
    text: str
    annotations: list[Any] = []
    logprobs: list[Logprob] = []


class ReasoningTextPart(_Response, tag_field="type", tag="reasoning_text", kw_only=True):
    text: str


class OutputMessage(_Response, tag_field="type", tag="message", kw_only=True):
    id: str
    content: list[OutputTextPart]
    role: Literal["assistant"] = "assistant"
    status: ItemStatus


class OutputFunctionCall(_Response, tag_field="type", tag="function_call", kw_only=True, omit_defaults=True):
    arguments: str
    call_id: str
    name: str
    id: str
    status: ItemStatus
    namespace: str | None = None
    """The namespace of a function offered in a `namespace` tool."""


class OutputReasoning(_Response, tag_field="type", tag="reasoning", kw_only=True):
    """The text the model wrote inside its reasoning markup (graphs with a reasoning parser)."""

    id: str
    summary: list[SummaryText] = []
    content: list[ReasoningTextPart] = []
    encrypted_content: None = None
    status: ItemStatus


OutputItem = OutputMessage | OutputFunctionCall | OutputReasoning


class InputTokensDetails(_Response, kw_only=True):
    cached_tokens: int = 0
    cache_write_tokens: int = 0


class OutputTokensDetails(_Response, kw_only=True):
    reasoning_tokens: int = 0
    """Not counted separately here: 0."""


class ResponseUsage(_Response, kw_only=True):
    input_tokens: int
    input_tokens_details: InputTokensDetails
    output_tokens: int
    output_tokens_details: OutputTokensDetails
    total_tokens: int


class ResponseError(_Response, kw_only=True):
    code: str
    message: str


class IncompleteDetails(_Response, kw_only=True):
    reason: Literal["max_output_tokens", "content_filter"]


class Response(_Response, kw_only=True):
    """A model response: the request's settings echoed, the output items, usage."""

    id: str
    object: Literal["response"] = "response"
    created_at: int
    status: Literal["completed", "failed", "in_progress", "incomplete"]
    background: bool = False
    completed_at: int | None = None
    error: ResponseError | None = None
    incomplete_details: IncompleteDetails | None = None
    instructions: str | None = None
    max_output_tokens: int | None = None
    max_tool_calls: int | None = None
    metadata: dict[str, str] = {}
    model: str
    output: list[OutputItem] = []
    parallel_tool_calls: bool = True
    previous_response_id: str | None = None
    prompt_cache_key: str | None = None
    reasoning: ReasoningConfig | None = None
    safety_identifier: str | None = None
    service_tier: str = "default"
    store: bool = True
    temperature: float | None = None
    text: TextConfig | None = None
    tool_choice: ToolChoice = "auto"
    tools: list[Any] = []
    """The request's tools as sent: function and namespace tools, and the hosted tools the model was
    not offered (`dialects.hosted_tools`), as plain JSON."""
    top_logprobs: int = 0
    top_p: float | None = None
    truncation: Literal["disabled"] = "disabled"
    usage: ResponseUsage | None = None
    user: str | None = None


class DeletedResponse(_Response, kw_only=True):
    id: str
    object: Literal["response.deleted"] = "response.deleted"
    deleted: bool = True
