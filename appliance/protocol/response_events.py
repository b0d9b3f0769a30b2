"""The Responses API's stream events (`"stream": true` on `POST /v1/responses`), in the order
they come; the SDK's types are under `openai/types/responses/response_*_event.py`. Each is tagged
by its `type`, which the SSE framing also writes as the event's name.
"""

from __future__ import annotations

from msgspec import Struct

from appliance.protocol.responses import Logprob, OutputItem, OutputTextPart, ReasoningTextPart, Response

__all__ = ["ErrorEvent", "ResponseEvent"]


class _Event(Struct, kw_only=True):
    sequence_number: int


class ResponseCreated(_Event, tag_field="type", tag="response.created", kw_only=True):
    response: Response


class ResponseInProgress(_Event, tag_field="type", tag="response.in_progress", kw_only=True):
    response: Response


class ResponseCompleted(_Event, tag_field="type", tag="response.completed", kw_only=True):
    response: Response


class ResponseIncomplete(_Event, tag_field="type", tag="response.incomplete", kw_only=True):
    response: Response


class ResponseFailed(_Event, tag_field="type", tag="response.failed", kw_only=True):
    response: Response


class OutputItemAdded(_Event, tag_field="type", tag="response.output_item.added", kw_only=True):
    output_index: int
    item: OutputItem


class OutputItemDone(_Event, tag_field="type", tag="response.output_item.done", kw_only=True):
    output_index: int
    item: OutputItem


class ContentPartAdded(_Event, tag_field="type", tag="response.content_part.added", kw_only=True):
    item_id: str
    output_index: int
    content_index: int
    part: OutputTextPart | ReasoningTextPart


class ContentPartDone(_Event, tag_field="type", tag="response.content_part.done", kw_only=True):
    item_id: str
    output_index: int
    content_index: int
    part: OutputTextPart | ReasoningTextPart


class OutputTextDelta(_Event, tag_field="type", tag="response.output_text.delta", kw_only=True):
    item_id: str
    output_index: int
    content_index: int
    delta: str
    logprobs: list[Logprob] = []


class OutputTextDone(_Event, tag_field="type", tag="response.output_text.done", kw_only=True):
    item_id: str
    output_index: int
    content_index: int
    text: str
    logprobs: list[Logprob] = []


class ReasoningTextDelta(_Event, tag_field="type", tag="response.reasoning_text.delta", kw_only=True):
    item_id: str
    output_index: int
    content_index: int
    delta: str


class ReasoningTextDone(_Event, tag_field="type", tag="response.reasoning_text.done", kw_only=True):
    item_id: str
    output_index: int
    content_index: int
    text: str


class FunctionCallArgumentsDelta(_Event, tag_field="type", tag="response.function_call_arguments.delta", kw_only=True):
    item_id: str
    output_index: int
    delta: str


class FunctionCallArgumentsDone(_Event, tag_field="type", tag="response.function_call_arguments.done", kw_only=True):
    item_id: str
    output_index: int
    name: str
    arguments: str


class ErrorEvent(_Event, tag_field="type", tag="error", kw_only=True):
    code: str | None
    message: str
    param: str | None


ResponseEvent = (
    ResponseCreated
    | ResponseInProgress
    | OutputItemAdded
    | ContentPartAdded
    | OutputTextDelta
    | ReasoningTextDelta
    | FunctionCallArgumentsDelta
    | OutputTextDone
    | ReasoningTextDone
    | FunctionCallArgumentsDone
    | ContentPartDone
    | OutputItemDone
    | ResponseCompleted
    | ResponseIncomplete
    | ResponseFailed
    | ErrorEvent
)
"""Stream events, in the order they come."""
