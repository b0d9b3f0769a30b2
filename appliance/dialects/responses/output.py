"""The chat answer's pieces -> the Responses API's stream events, and the response they add up to.

The pieces (`service.pieces`) hold the answer split into reasoning, text and tool calls (parsed
with the graph's parsers); here they become output items in the order they arrive: a `reasoning`
item, a `message` with one `output_text` part, a `function_call` item per call. Each item is
announced (`response.output_item.added`, `response.content_part.added`), grows by deltas and is
closed (`...done` events) before the next begins, every event numbered by `sequence_number` from 0.
The stream starts with `response.created` and `response.in_progress` and ends with
`response.completed`, or `response.incomplete` when `max_output_tokens` cut it, or `error` and
`response.failed` when the engine failed (see the SDK's `openai/lib/streaming/responses/`).

A non-streamed response is the same events' last response, so both ways give the same output.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field

import msgspec

from appliance.engine import TokenLogprob
from appliance.errors import ApplianceError
from appliance.protocol.response_events import (
    ContentPartAdded,
    ContentPartDone,
    ErrorEvent,
    FunctionCallArgumentsDelta,
    FunctionCallArgumentsDone,
    OutputItemAdded,
    OutputItemDone,
    OutputTextDelta,
    OutputTextDone,
    ReasoningTextDelta,
    ReasoningTextDone,
    ResponseCompleted,
    ResponseCreated,
    ResponseEvent,
    ResponseFailed,
    ResponseIncomplete,
    ResponseInProgress,
)
from appliance.protocol.responses import (
    IncompleteDetails,
    InputTokensDetails,
    Logprob,
    NamespaceTool,
    OutputFunctionCall,
    OutputMessage,
    OutputReasoning,
    OutputTextPart,
    OutputTokensDetails,
    ReasoningTextPart,
    Response,
    ResponseError,
    ResponseUsage,
)
from appliance.service.pieces import (
    AnswerPiece,
    ContentPiece,
    FinishPiece,
    ReasoningPiece,
    ToolCallPiece,
    UsagePiece,
)

__all__ = ["ResponseEvents", "object_id"]


def object_id(prefix: str) -> str:
    """An id as OpenAI writes them in the Responses API: `resp_...`, `msg_...`, `fc_...`."""
    return f"{prefix}_{uuid.uuid4().hex}"


@dataclass
class _OpenItem:
    """The reasoning or message item being written."""

    kind: str
    id: str
    output_index: int
    texts: list[str] = field(default_factory=list)
    logprobs: list[Logprob] = field(default_factory=list)


def _logprobs(entries: list[TokenLogprob] | None) -> list[Logprob]:
    return [Logprob(token=e.token, bytes=e.bytes, logprob=e.logprob) for e in entries or ()]


def _usage(usage: UsagePiece | None) -> ResponseUsage | None:
    if usage is None:
        return None
    return ResponseUsage(
        input_tokens=usage.prompt_tokens,
        input_tokens_details=InputTokensDetails(),
        output_tokens=usage.completion_tokens,
        output_tokens_details=OutputTokensDetails(),
        total_tokens=usage.total_tokens,
    )


class ResponseEvents:
    """One response's events, built from its chat answer's pieces; `response` is the latest state."""

    def __init__(self, response: Response) -> None:
        """`response`: the request's settings, status `in_progress`, no output yet."""
        self.response = response
        self._namespaces = {
            function.name: tool.name
            for tool in response.tools
            if isinstance(tool, NamespaceTool)
            for function in tool.tools
        }
        """Function name -> the namespace it was offered in."""
        self._output: list = []
        self._sequence = 0
        self._open: _OpenItem | None = None
        self._finish_reason: str | None = None
        self._usage: UsagePiece | None = None
        self.failure: ApplianceError | None = None

    async def stream(self, pieces: AsyncIterator[AnswerPiece]) -> AsyncIterator[ResponseEvent]:
        """Every event, from `response.created` to the final one; an engine failure ends the
        stream with `error` and `response.failed` (and is kept in `failure`)."""
        yield ResponseCreated(sequence_number=self._next(), response=self._snapshot())
        yield ResponseInProgress(sequence_number=self._next(), response=self._snapshot())
        try:
            async for piece in pieces:
                for event in self._feed(piece):
                    yield event
        except ApplianceError as exc:
            self.failure = exc
            for event in self._failed(exc):
                yield event
            return
        for event in self._close(incomplete=self._finish_reason == "length"):
            yield event
        yield self._finished()

    async def final(self, pieces: AsyncIterator[AnswerPiece]) -> Response:
        """The whole response (non-streaming); an engine failure is raised."""
        async for _ in self.stream(pieces):
            pass
        if self.failure is not None:
            raise self.failure
        return self.response

    def _next(self) -> int:
        number = self._sequence
        self._sequence += 1
        return number

    def _snapshot(self, **changes: object) -> Response:
        return msgspec.structs.replace(self.response, output=list(self._output), **changes)

    def _feed(self, piece: AnswerPiece) -> Iterator[ResponseEvent]:
        if isinstance(piece, ReasoningPiece):
            yield from self._text("reasoning", piece.text, [])
        elif isinstance(piece, ContentPiece):
            if piece.text:
                yield from self._text("message", piece.text, _logprobs(piece.logprobs))
        elif isinstance(piece, ToolCallPiece):
            yield from self._call(piece)
        elif isinstance(piece, FinishPiece):
            self._finish_reason = piece.reason
        else:
            self._usage = piece

    def _call(self, call: ToolCallPiece) -> Iterator[ResponseEvent]:
        yield from self._close()
        item_id, index = object_id("fc"), len(self._output)
        added = OutputFunctionCall(
            arguments="",
            call_id=call.id,
            name=call.name,
            id=item_id,
            status="in_progress",
            namespace=self._namespaces.get(call.name),
        )
        yield OutputItemAdded(sequence_number=self._next(), output_index=index, item=added)
        yield FunctionCallArgumentsDelta(
            sequence_number=self._next(), item_id=item_id, output_index=index, delta=call.arguments
        )
        yield FunctionCallArgumentsDone(
            sequence_number=self._next(), item_id=item_id, output_index=index, name=call.name, arguments=call.arguments
        )
        done = msgspec.structs.replace(added, arguments=call.arguments, status="completed")
        self._output.append(done)
        yield OutputItemDone(sequence_number=self._next(), output_index=index, item=done)

    def _text(self, kind: str, text: str, logprobs: list[Logprob]) -> Iterator[ResponseEvent]:
        item = self._open
        if item is None or item.kind != kind:
            yield from self._close()
            item = self._open = _OpenItem(
                kind=kind, id=object_id("msg" if kind == "message" else "rs"), output_index=len(self._output)
            )
            if kind == "message":
                added: OutputMessage | OutputReasoning = OutputMessage(id=item.id, content=[], status="in_progress")
                part: OutputTextPart | ReasoningTextPart = OutputTextPart(text="")
            else:
                added, part = OutputReasoning(id=item.id, status="in_progress"), ReasoningTextPart(text="")
            yield OutputItemAdded(sequence_number=self._next(), output_index=item.output_index, item=added)
            yield ContentPartAdded(
                sequence_number=self._next(),
                item_id=item.id,
                output_index=item.output_index,
                content_index=0,
                part=part,
            )
        item.texts.append(text)
        item.logprobs += logprobs
        where = {"item_id": item.id, "output_index": item.output_index, "content_index": 0}
        if kind == "message":
            yield OutputTextDelta(sequence_number=self._next(), delta=text, logprobs=logprobs, **where)
        else:
            yield ReasoningTextDelta(sequence_number=self._next(), delta=text, **where)

    def _close(self, *, incomplete: bool = False) -> Iterator[ResponseEvent]:
        item, self._open = self._open, None
        if item is None:
            return
        text = "".join(item.texts)
        where = {"item_id": item.id, "output_index": item.output_index, "content_index": 0}
        status = "incomplete" if incomplete else "completed"
        if item.kind == "message":
            part: OutputTextPart | ReasoningTextPart = OutputTextPart(text=text, logprobs=item.logprobs)
            yield OutputTextDone(sequence_number=self._next(), text=text, logprobs=item.logprobs, **where)
            done: OutputMessage | OutputReasoning = OutputMessage(id=item.id, content=[part], status=status)
        else:
            part = ReasoningTextPart(text=text)
            yield ReasoningTextDone(sequence_number=self._next(), text=text, **where)
            done = OutputReasoning(id=item.id, content=[part], status=status)
        yield ContentPartDone(sequence_number=self._next(), part=part, **where)
        self._output.append(done)
        yield OutputItemDone(sequence_number=self._next(), output_index=item.output_index, item=done)

    def _finished(self) -> ResponseEvent:
        usage = _usage(self._usage)
        if self._finish_reason == "length":
            self.response = self._snapshot(
                status="incomplete", incomplete_details=IncompleteDetails(reason="max_output_tokens"), usage=usage
            )
            return ResponseIncomplete(sequence_number=self._next(), response=self.response)
        self.response = self._snapshot(status="completed", completed_at=int(time.time()), usage=usage)
        return ResponseCompleted(sequence_number=self._next(), response=self.response)

    def _failed(self, exc: ApplianceError) -> Iterator[ResponseEvent]:
        yield ErrorEvent(sequence_number=self._next(), code=exc.code, message=exc.message, param=exc.param)
        item = self._open
        if item is not None:
            text = "".join(item.texts)
            self._output.append(
                OutputMessage(id=item.id, content=[OutputTextPart(text=text)], status="incomplete")
                if item.kind == "message"
                else OutputReasoning(id=item.id, content=[ReasoningTextPart(text=text)], status="incomplete")
            )
            self._open = None
        code = "server_error" if exc.status >= 500 else (exc.code or "invalid_request")
        self.response = self._snapshot(status="failed", error=ResponseError(code=code, message=exc.message))
        yield ResponseFailed(sequence_number=self._next(), response=self.response)
