"""LMI serving containers' `/invocations` and `/predictions/<model>` schema (v0.28): request and
response structs.

Rolling-batch schema: `inputs` + `parameters` + `stream`, answered with `generated_text` and,
when asked, `details`; streamed as one `Token` object per line. A list of `inputs` is the
dynamic-batch schema (one result per input). A body with `messages` is not this schema but a chat
completions request (see `appliance.protocol.openai`).

`parameters` refuses fields it does not know, so a typo is an error rather than a silently
ignored setting; the vLLM/LMI-dist parameters the engine cannot honour are declared so the service
can refuse them with a reason.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from msgspec import UNSET, Meta, Struct, UnsetType, field

from appliance.protocol.openai import (
    MAX_STOP_SEQUENCES,
    Choices,
    MaxTokens,
    Penalty,
    Seed,
    StopSequence,
    Temperature,
    TokenId,
    TopP,
)

__all__ = [
    "BestOfSequence",
    "Details",
    "GeneratedText",
    "GenerationParameters",
    "InvocationRequest",
    "StreamLine",
    "Token",
    "ValidationError",
]

FinishReason = Literal["length", "eos_token", "stop_sequence", "error"]


class GenerationParameters(Struct, kw_only=True, forbid_unknown_fields=True):
    """`parameters`: the common rolling-batch fields, then the vLLM / LMI-dist extras."""

    do_sample: bool = False
    seed: Seed | None = None
    temperature: Temperature | None = None
    repetition_penalty: Annotated[float, Meta(gt=0, le=10)] | None = None
    top_k: Annotated[int, Meta(ge=-1)] | None = None
    top_p: TopP | None = None
    # LMI's documented default: 30 new tokens.
    max_new_tokens: MaxTokens = 30
    details: bool = False
    return_full_text: bool = False
    stop_sequences: Annotated[list[StopSequence], Meta(max_length=MAX_STOP_SEQUENCES)] | None = None
    decoder_input_details: bool = False
    # vLLM / LMI-dist extras the engine honours.
    min_p: Annotated[float, Meta(ge=0, le=1)] | None = None
    presence_penalty: Penalty | None = None
    frequency_penalty: Penalty | None = None
    n: Choices = 1
    best_of: Choices | None = None
    num_beams: Choices | None = None
    length_penalty: float | None = None
    stop_token_ids: Annotated[list[TokenId], Meta(max_length=MAX_STOP_SEQUENCES)] | None = None
    include_stop_str_in_output: bool = False
    ignore_eos_token: bool = False
    logprobs: Annotated[int, Meta(ge=0, le=20)] | None = None
    skip_special_tokens: bool = True
    min_length: Annotated[int, Meta(ge=0)] | None = None
    # Documented by LMI but not honoured by OpenVINO GenAI: declared to be refused by name.
    typical_p: Any = UNSET
    truncate: Any = UNSET
    early_stopping: Any = UNSET
    prompt_logprobs: Any = UNSET
    spaces_between_special_tokens: Any = UNSET
    bad_sequences: Any = UNSET


class InvocationRequest(Struct, kw_only=True, forbid_unknown_fields=True):
    """The rolling-batch request (`inputs` a string) or dynamic-batch request (a list of them)."""

    inputs: str | Annotated[list[str], Meta(min_length=1, max_length=64)]
    parameters: GenerationParameters = field(default_factory=GenerationParameters)
    stream: bool = False


class _Response(Struct, kw_only=True, omit_defaults=True):
    pass


class Token(_Response):
    """One token: id, text and log probability (null for prompt tokens: none are computed)."""

    id: int
    text: str
    log_prob: float | None
    special_token: bool | UnsetType = UNSET


class BestOfSequence(_Response):
    generated_text: str
    finish_reason: FinishReason
    generated_tokens: int
    tokens: list[Token]


class Details(_Response):
    """`details`; UNSET fields are left out, None ones are sent as null (the error shape)."""

    finish_reason: FinishReason
    generated_tokens: int | None
    inputs: str | None
    tokens: list[Token] | None | UnsetType = UNSET
    prefill: list[Token] | UnsetType = UNSET
    best_of_sequences: list[BestOfSequence] | UnsetType = UNSET


class GeneratedText(_Response):
    """A non-streaming result. `error` (an appliance addition) says why generation failed."""

    generated_text: str
    details: Details | UnsetType = UNSET
    error: str | UnsetType = UNSET


class StreamLine(_Response):
    """One line of a stream; the last also carries `generated_text` (and `details` when asked)."""

    token: Token
    generated_text: str | UnsetType = UNSET
    details: Details | UnsetType = UNSET
    error: str | UnsetType = UNSET


class ValidationError(_Response):
    """A request refused before generation: `{"error": "<details>", "code": <HTTP status>}`."""

    error: str
    code: int
