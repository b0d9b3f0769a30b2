"""OpenAI chat completions, completions and models: request and response structs.

Wire names and field order follow the OpenAI API reference. Request structs declare every field
the appliance honours, and the OpenAI fields it accepts without effect or refuses with a reason
(`service.field_policy`); any other is refused (OpenAI itself refuses unrecognized arguments), so
no parameter that could change the output is ever silently ignored. Extensions (vLLM/OVMS names, sent with the SDK's `extra_body`)
follow the OpenAI fields. Ranges are the reference's; limits that depend on the model's graph
(max_tokens_limit, best_of_limit, max_stop_sequences, max_stop_sequence_chars) are checked by the
service.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from msgspec import UNSET, Meta, Struct, UnsetType

__all__ = [
    "AssistantMessage",
    "ChatCompletion",
    "ChatCompletionTokenLogprob",
    "ChatCompletionChunk",
    "ChatCompletionMessage",
    "ChatCompletionRequest",
    "Choice",
    "ChoiceDelta",
    "ChoiceDeltaToolCall",
    "ChoiceLogprobs",
    "ChunkChoice",
    "Completion",
    "CompletionChoice",
    "CompletionRequest",
    "CompletionUsage",
    "FunctionDefinition",
    "ImageURL",
    "ImageURLPart",
    "InputAudio",
    "InputAudioPart",
    "Message",
    "Model",
    "ModelList",
    "NamedToolChoice",
    "ResponseFormat",
    "StreamOptions",
    "StructuredOutputs",
    "SystemMessage",
    "TextPart",
    "Tool",
    "ToolCall",
    "ToolMessage",
    "UserMessage",
]

MAX_STOP_SEQUENCES = 64
"""A sanity cap; each graph's `limits.max_stop_sequences` (default 4, as OpenAI) applies first."""

Temperature = Annotated[float, Meta(ge=0, le=2)]
TopP = Annotated[float, Meta(gt=0, le=1)]
MaxTokens = Annotated[int, Meta(ge=1)]
Seed = Annotated[int, Meta(ge=-(2**63), le=2**63 - 1)]
StopSequence = Annotated[str, Meta(min_length=1)]
Stop = StopSequence | Annotated[list[StopSequence], Meta(max_length=MAX_STOP_SEQUENCES)]
Penalty = Annotated[float, Meta(ge=-2, le=2)]
Choices = Annotated[int, Meta(ge=1, le=128)]
TokenId = Annotated[int, Meta(ge=0, le=2**31 - 1)]
"""Vocabularies are far smaller; the bound keeps 2**64-1 from reaching OpenVINO's int64 fields."""
Identifier = Annotated[str, Meta(pattern=r"^[a-zA-Z0-9_-]{1,64}$")]
Metadata = Annotated[
    dict[Annotated[str, Meta(max_length=64)], Annotated[str, Meta(max_length=512)]], Meta(max_length=16)
]
"""OpenAI's metadata: up to 16 pairs, keys up to 64 characters, values up to 512."""


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


class InputAudio(_Request):
    data: str
    """The recording, base64-encoded."""
    format: Literal["wav", "mp3", "flac", "ogg", "m4a", "mp4", "mpeg", "mpga", "webm"]
    """What the client says it is (OpenAI takes wav and mp3); the decoder reads the data itself."""


class InputAudioPart(_Request, tag_field="type", tag="input_audio"):
    """Speech in a user message: transcribed by the chat graph's `speech_model`, and read by the
    model as the text heard (`service.voice`)."""

    input_audio: InputAudio


ContentPart = TextPart | ImageURLPart | InputAudioPart


class TextOnlyPart(TextPart, tag=False, tag_field=None):
    """A part of content that can only be text. msgspec treats the tag of a tagged struct outside a
    union as optional; here `type` is a plain field, so it is required like everywhere else."""

    type: Literal["text"]


TextContent = str | list[TextOnlyPart]


class SystemMessage(_Request, tag_field="role", tag="system"):
    content: TextContent
    name: str | UnsetType = UNSET


class DeveloperMessage(_Request, tag_field="role", tag="developer"):
    content: TextContent
    name: str | UnsetType = UNSET


class UserMessage(_Request, tag_field="role", tag="user"):
    content: str | list[ContentPart]
    name: str | UnsetType = UNSET


class FunctionCall(_Request):
    name: str
    arguments: str
    """JSON text, as the model wrote it."""


class ToolCall(_Request):
    id: str
    function: FunctionCall
    type: Literal["function"] = "function"


class AssistantMessage(_Request, tag_field="role", tag="assistant"):
    content: TextContent | None = None
    name: str | UnsetType = UNSET
    tool_calls: list[ToolCall] | None = None
    refusal: None = None
    """Sent back by clients that return the SDK's message object as is; always null here."""
    reasoning_content: str | None = None
    """Extension: the reasoning a previous answer returned, for templates that render it."""


class ToolMessage(_Request, tag_field="role", tag="tool"):
    content: TextContent
    tool_call_id: str


Message = SystemMessage | DeveloperMessage | UserMessage | AssistantMessage | ToolMessage


# --- tools and output formats ----------------------------------------------------------------


class FunctionDefinition(_Request):
    name: Identifier
    description: str | None = None
    parameters: dict[str, Any] | None = None
    """A JSON schema of the arguments (an object); absent: no arguments."""
    strict: bool | None = None
    """Accepted for compatibility: forced calls (tool_choice required/named) always follow the schema."""


class Tool(_Request):
    function: FunctionDefinition
    type: Literal["function"] = "function"


class ToolChoiceFunction(_Request):
    name: str


class NamedToolChoice(_Request):
    function: ToolChoiceFunction
    type: Literal["function"] = "function"


ToolChoice = Literal["none", "auto", "required"] | NamedToolChoice


class JSONSchema(_Request):
    name: Identifier
    description: str | None = None
    schema: dict[str, Any] | bool | None = None
    """Absent: any JSON object."""
    strict: bool | None = None
    """Accepted for compatibility: the schema is always enforced."""


class ResponseFormatText(_Request, tag_field="type", tag="text"):
    pass


class ResponseFormatJSONObject(_Request, tag_field="type", tag="json_object"):
    value: dict[str, Any] | bool | None = None
    """Extension (TGI's grammar, as Hugging Face's InferenceClient sends a json_schema format): a
    JSON schema the object follows."""


class ResponseFormatJSONSchema(_Request, tag_field="type", tag="json_schema"):
    json_schema: JSONSchema


ResponseFormat = ResponseFormatText | ResponseFormatJSONObject | ResponseFormatJSONSchema


class StructuredOutputs(_Request):
    """Extension (vLLM's `structured_outputs`): exactly one constraint on the generated text."""

    json: dict[str, Any] | bool | None = None
    """A JSON schema."""
    regex: str | None = None
    """The whole output matches this (Python syntax) regular expression."""
    choice: Annotated[list[str], Meta(min_length=1)] | None = None
    """The output is exactly one of these strings."""
    grammar: str | None = None
    """An EBNF grammar (xgrammar/GBNF syntax, start rule `root`)."""


# --- requests --------------------------------------------------------------------------------


class StreamOptions(_Request):
    include_usage: bool = False
    include_obfuscation: bool | None = None
    """Accepted without effect: no obfuscation padding is written here."""


class _Sampling(_Request, kw_only=True):
    """Parameters shared by chat and text completions, OpenAI's first, then extensions."""

    frequency_penalty: Penalty | None = None
    logit_bias: dict[str, float] | None = None
    """Refused unless empty: the engine has no way to bias logits."""
    n: Choices = 1
    presence_penalty: Penalty | None = None
    seed: Seed | None = None
    stop: Stop | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    temperature: Temperature | None = None
    top_p: TopP | None = None
    user: str | None = None
    # Extensions (vLLM / OVMS names).
    top_k: Annotated[int, Meta(ge=-1)] | None = None
    """-1 or 0: all tokens."""
    min_p: Annotated[float, Meta(ge=0, le=1)] | None = None
    repetition_penalty: Annotated[float, Meta(gt=0, le=10)] | None = None
    ignore_eos: bool = False
    """Keep generating past the end-of-sequence token up to max_tokens."""
    min_tokens: Annotated[int, Meta(ge=0)] = 0
    stop_token_ids: Annotated[list[TokenId], Meta(max_length=MAX_STOP_SEQUENCES)] | None = None
    include_stop_str_in_output: bool | None = None
    """Default: false without streaming, true with it (as OVMS; false with streaming is refused)."""
    skip_special_tokens: bool | None = None
    """Default true, except when tool calls are parsed (their markers may be special tokens)."""
    best_of: Choices | None = None
    """Above 1: beam search with this many beams; the best `n` are returned."""
    length_penalty: float | None = None
    """Beam search: exponent on the length the score is divided by."""
    structured_outputs: StructuredOutputs | None = None
    # Speculative decoding / prompt lookup (OVMS names; graphs with a draft model or prompt_lookup).
    num_assistant_tokens: Annotated[int, Meta(ge=1, le=16)] | None = None
    """Candidate tokens proposed per step."""
    assistant_confidence_threshold: Annotated[float, Meta(gt=0, lt=1)] | None = None
    """Draft graphs: propose while the draft's confidence stays above this."""
    max_ngram_size: Annotated[int, Meta(ge=1, le=16)] | None = None
    """Prompt lookup: longest n-gram matched against the prompt."""


class ChatCompletionRequest(_Sampling, kw_only=True):
    """`POST /v1/chat/completions` (and `/v3/...`)."""

    messages: Annotated[list[Message], Meta(min_length=1)]
    model: str
    logprobs: bool = False
    top_logprobs: Annotated[int, Meta(ge=0, le=20)] | None = None
    """Only 0 is served: the engine computes no alternatives to the chosen token."""
    max_completion_tokens: MaxTokens | None = None
    max_tokens: MaxTokens | None = None
    parallel_tool_calls: bool = True
    response_format: ResponseFormat | None = None
    tool_choice: ToolChoice | None = None
    tools: list[Tool] | None = None
    reasoning_effort: Literal["none", "minimal", "low", "medium", "high"] | None = None
    """Handed to the chat template as its `reasoning_effort` variable (templates such as gpt-oss's
    read it; others ignore it). Elasticsearch sends it."""
    # Extensions (vLLM names).
    chat_template_kwargs: dict[str, Any] | None = None
    add_generation_prompt: bool | None = None
    """Default true (false with continue_final_message)."""
    continue_final_message: bool = False
    # Accepted without effect, or refused unless neutral: see service/field_policy.py (CHAT).
    store: bool | None = None
    metadata: Metadata | None = None
    service_tier: str | None = None
    prompt_cache_key: str | None = None
    prompt_cache_retention: str | None = None
    prompt_cache_options: dict[str, Any] | None = None
    safety_identifier: str | None = None
    prediction: dict[str, Any] | None = None
    audio: dict[str, Any] | None = None
    modalities: list[str] | None = None
    verbosity: Literal["low", "medium", "high"] | None = None
    web_search_options: dict[str, Any] | None = None
    functions: list[dict[str, Any]] | None = None
    function_call: str | dict[str, Any] | None = None
    moderation: dict[str, Any] | None = None


class CompletionRequest(_Sampling, kw_only=True):
    """`POST /v1/completions` (and `/v3/...`): a prompt as a string or as token ids, or a list of
    such prompts (a list may mix both, as llama.cpp's server allows)."""

    model: str
    prompt: str | Annotated[list[str | TokenId | list[TokenId]], Meta(min_length=1)]
    """A list of integers is one prompt of token ids; any other list holds prompts (at most
    `MAX_PROMPTS`, each checked in `service.completions`)."""
    logprobs: Annotated[int, Meta(ge=0, le=5)] | None = None
    """Only 0 is served (the chosen tokens' logprobs): the engine computes no alternatives."""
    max_tokens: MaxTokens | None = 16
    echo: bool | None = None
    """The prompt's text before each choice's text (not together with `logprobs`)."""
    # Refused unless neutral: see service/field_policy.py (COMPLETIONS).
    suffix: str | None = None


# --- responses -------------------------------------------------------------------------------

FinishReason = Literal["stop", "length", "tool_calls"]


class _Response(Struct, kw_only=True):
    pass


class CompletionUsage(_Response):
    completion_tokens: int
    prompt_tokens: int
    total_tokens: int


class Function(_Response):
    name: str
    arguments: str


class ChatCompletionMessageToolCall(_Response):
    id: str
    function: Function
    type: Literal["function"] = "function"


class ChatCompletionMessage(_Response, omit_defaults=True):
    # role and content carry no default so that omit_defaults always writes them.
    role: Literal["assistant"]
    content: str | None
    reasoning_content: str | None = None
    """Extension (graphs with a reasoning parser): the text the model wrote inside <think>."""
    tool_calls: list[ChatCompletionMessageToolCall] | None = None


class TopLogprob(_Response):
    token: str
    logprob: float
    bytes: list[int] | None


class ChatCompletionTokenLogprob(_Response):
    token: str
    logprob: float
    bytes: list[int] | None
    top_logprobs: list[TopLogprob] = []
    """Always empty: the engine computes no alternatives (top_logprobs > 0 is refused)."""


class ChoiceLogprobs(_Response):
    content: list[ChatCompletionTokenLogprob] | None


class Choice(_Response):
    index: int
    message: ChatCompletionMessage
    finish_reason: FinishReason | None
    logprobs: ChoiceLogprobs | None = None


class ChatCompletion(_Response):
    id: str
    choices: list[Choice]
    created: int
    model: str
    object: Literal["chat.completion"] = "chat.completion"
    usage: CompletionUsage | None = None


class ChoiceDeltaFunction(_Response, omit_defaults=True):
    name: str | None = None
    arguments: str | None = None


class ChoiceDeltaToolCall(_Response, omit_defaults=True):
    index: int
    id: str | None = None
    type: Literal["function"] | None = None
    function: ChoiceDeltaFunction | None = None


class ChoiceDelta(_Response, omit_defaults=True):
    role: Literal["assistant"] | None = None
    content: str | None = None
    reasoning_content: str | None = None
    tool_calls: list[ChoiceDeltaToolCall] | None = None


class ChunkChoice(_Response):
    index: int
    delta: ChoiceDelta
    finish_reason: FinishReason | None = None
    logprobs: ChoiceLogprobs | None = None


class ChatCompletionChunk(_Response, omit_defaults=True):
    id: str
    choices: list[ChunkChoice]
    created: int
    model: str
    # No default: omit_defaults would drop it, and clients require it on every chunk.
    object: Literal["chat.completion.chunk"]
    usage: CompletionUsage | None = None


class CompletionLogprobs(_Response):
    """The legacy completions shape. `top_logprobs[i]` holds `logprobs` alternatives and always the
    chosen token (OpenAI: "up to logprobs+1 elements"); with `logprobs: 0`, the only value served,
    just the chosen token, `{token: logprob}`, as vLLM gives it."""

    tokens: list[str]
    token_logprobs: list[float]
    text_offset: list[int]
    top_logprobs: list[dict[str, float]]


class CompletionChoice(_Response):
    index: int
    text: str
    finish_reason: FinishReason | None
    logprobs: CompletionLogprobs | None = None


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
    state: str = "ready"
    """The appliance's own: loaded (`ready`), `loading`, `unloaded` (loads on its first request), ..."""
    max_model_len: int | None = None
    """The model's context in tokens, prompt and answer together (vLLM's name; embedding and rerank
    models: tokens of one text)."""


class ModelList(_Response):
    data: list[Model]
    object: Literal["list"] = "list"
