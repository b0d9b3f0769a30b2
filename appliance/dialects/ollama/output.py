"""The answer's pieces (or a raw generation's engine events) -> Ollama's answer objects.

A stream is one JSON object per line (`api/sse.json_lines`): one per piece as it comes, reasoning
in `thinking`, text in `content` (`response` for generate), each complete tool call in
`tool_calls` (arguments as an object), all with `done: false`; then a last object with `done:
true`, `done_reason` (`stop`, or `length` when the token limit cut the answer; Ollama says `stop`
after tool calls too), the token counts and the durations in nanoseconds. A whole answer is that
last object holding everything. An engine failure mid-stream ends the stream with `{"error": ...}`,
as Ollama's does (the `ollama` libraries raise it).

Durations, from the request's arrival: `load_duration` until the engine accepted it (a model
loading on demand, images decoding), `prompt_eval_duration` until the first token, `eval_duration`
from there to the last, `total_duration` to the end.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime
from typing import Literal

from appliance.dialects.shared import tool_input
from appliance.engine import Finished, RequestStream, TokenLogprob
from appliance.errors import EngineFailure
from appliance.protocol.ollama import (
    AnswerFunction,
    AnswerMessage,
    AnswerToolCall,
    ChatResponse,
    GenerateResponse,
    Logprob,
)
from appliance.service.pieces import AnswerPiece, ContentPiece, FinishPiece, ReasoningPiece, ToolCallPiece, UsagePiece
from appliance.service.streams import finish_reason, merged

__all__ = ["Answer", "created_at", "raw_lines", "raw_whole"]

Shape = Literal["chat", "generate"]
_NS = 1_000_000_000


def created_at() -> str:
    """Now, as Ollama writes `created_at` (RFC 3339, UTC)."""
    return datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def _durations(stream: RequestStream, started: float) -> dict[str, int]:
    now = time.monotonic()
    first = stream.first_token_at or now
    last = stream.last_token_at or now

    def ns(seconds: float) -> int:
        return max(0, round(seconds * _NS))

    return {
        "total_duration": ns(now - started),
        "load_duration": ns(stream.submitted_at - started),
        "prompt_eval_duration": ns(first - stream.submitted_at),
        "eval_duration": ns(last - first),
    }


def _logprobs(entries: Sequence[TokenLogprob]) -> list[Logprob]:
    return [Logprob(token=entry.token, logprob=entry.logprob, bytes=list(entry.bytes)) for entry in entries]


class Answer:
    """One chat or generate answer, built from its pieces; `stream` is the engine's request (its
    timings), `started` when the request arrived (monotonic seconds)."""

    def __init__(self, model: str, shape: Shape, stream: RequestStream, started: float) -> None:
        self._model, self._shape, self._stream, self._started = model, shape, stream, started
        self._texts: list[str] = []
        self._thinking: list[str] = []
        self._calls: list[AnswerToolCall] = []
        self._logprobs: list[Logprob] = []
        self._reason = "stop"
        self._counts = (stream.prompt_tokens, 0)

    async def lines(self, pieces: AsyncIterator[AnswerPiece]) -> AsyncIterator[ChatResponse | GenerateResponse]:
        """An object per piece with something to say, then the last one (an engine failure is
        raised: the framing writes it as the error line)."""
        async for piece in pieces:
            line = self._feed(piece)
            if line is not None:
                yield line
        yield self._last(whole=False)

    async def whole(self, pieces: AsyncIterator[AnswerPiece]) -> ChatResponse | GenerateResponse:
        """The whole answer in one object (non-streaming); an engine failure is raised."""
        async for piece in pieces:
            self._feed(piece)
        return self._last(whole=True)

    def _feed(self, piece: AnswerPiece) -> ChatResponse | GenerateResponse | None:
        if isinstance(piece, ReasoningPiece) and piece.text:
            self._thinking.append(piece.text)
            return self._object(content="", thinking=piece.text)
        if isinstance(piece, ContentPiece) and (piece.text or piece.logprobs):
            self._texts.append(piece.text)
            logprobs = _logprobs(piece.logprobs) if piece.logprobs else None
            self._logprobs += logprobs or []
            return self._object(content=piece.text, logprobs=logprobs)
        if isinstance(piece, ToolCallPiece):
            call = AnswerToolCall(
                id=piece.id,
                function=AnswerFunction(name=piece.name, arguments=tool_input(piece.arguments), index=piece.position),
            )
            self._calls.append(call)
            return self._object(content="", calls=[call])
        if isinstance(piece, FinishPiece):
            self._reason = "length" if piece.reason == "length" else "stop"
        elif isinstance(piece, UsagePiece):
            self._counts = (piece.prompt_tokens, piece.completion_tokens)
        return None

    def _object(
        self,
        *,
        content: str,
        thinking: str | None = None,
        calls: list[AnswerToolCall] | None = None,
        logprobs: list[Logprob] | None = None,
        **final: object,
    ) -> ChatResponse | GenerateResponse:
        common = {"model": self._model, "created_at": created_at(), "logprobs": logprobs, **final}
        if self._shape == "generate":
            return GenerateResponse(response=content, thinking=thinking, done=False, **common)  # type: ignore[arg-type]
        message = AnswerMessage(role="assistant", content=content, thinking=thinking, tool_calls=calls)
        return ChatResponse(message=message, done=False, **common)  # type: ignore[arg-type]

    def _last(self, *, whole: bool) -> ChatResponse | GenerateResponse:
        prompt, generated = self._counts
        answer = self._object(
            content="".join(self._texts) if whole else "",
            thinking="".join(self._thinking) or None if whole else None,
            calls=self._calls or None if whole else None,
            logprobs=self._logprobs or None if whole else None,
        )
        answer.done, answer.done_reason = True, self._reason
        answer.prompt_eval_count, answer.eval_count = prompt, generated
        for name, value in _durations(self._stream, self._started).items():
            setattr(answer, name, value)
        return answer


async def raw_lines(model: str, stream: RequestStream, started: float) -> AsyncIterator[GenerateResponse]:
    """A raw generation (a completion of the prompt as it is): an object per text delta, then the
    last one with the counts; an engine failure is raised."""
    async for _, event in merged([stream]):
        if event.text:
            yield GenerateResponse(model=model, created_at=created_at(), response=event.text, done=False)
        if isinstance(event, Finished):
            reason = finish_reason(event)  # raises for a failed sequence
            answer = GenerateResponse(
                model=model,
                created_at=created_at(),
                response="",
                done=True,
                done_reason="length" if reason == "length" else "stop",
                prompt_eval_count=event.prompt_tokens,
                eval_count=event.completion_tokens,
                **_durations(stream, started),
            )
            yield answer


async def raw_whole(model: str, stream: RequestStream, started: float) -> GenerateResponse:
    """A raw generation in one object."""
    texts: list[str] = []
    last = None
    async for line in raw_lines(model, stream, started):
        texts.append(line.response)
        last = line
    if last is None or not last.done:
        raise EngineFailure("The engine ended the generation without finishing it.")
    last.response = "".join(texts)
    return last
