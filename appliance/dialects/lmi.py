"""LMI `/invocations` on top of the OpenAI service layer.

An LMI request becomes an equivalent OpenAI completions request, so sampling checks and graph
limits are exactly those of `/v1/completions` (`service.completions.open_completion`). The engine's
events are then shaped as LMI answers: `generated_text`, `details` and token objects.

Two things the OpenAI request is asked for on purpose, whatever the client sent:
- per-token log probabilities (`logprobs=0`): every LMI token object carries id and log_prob
  (null on the stateful pipeline of NPU graphs, which computes none);
- the stop string kept in the text (`include_stop_str_in_output`): it tells `stop_sequence` from
  `eos_token`, and is cut from `generated_text` afterwards unless the client asked to keep it.
"""

from __future__ import annotations

import codecs
import math
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Literal

from msgspec import UNSET

from appliance.engine import EngineClient, Finished, RequestStream, TextPrompt, TokenLogprob
from appliance.errors import ApplianceError, InvalidRequest
from appliance.protocol.lmi import (
    BestOfSequence,
    Details,
    GeneratedText,
    GenerationParameters,
    InvocationRequest,
    StreamLine,
    Token,
)
from appliance.protocol.openai import CompletionRequest
from appliance.runtime.registry import ModelRegistry
from appliance.service import completions
from appliance.service.prompt_limits import check_prompt
from appliance.service.streams import finish_reason, merged

__all__ = [
    "Generation",
    "GenerationError",
    "LmiOptions",
    "error_result",
    "generate",
    "invocation_engine",
    "open_generation",
    "stream_lines",
]

_UNHONOURED = (
    "typical_p",
    "truncate",
    "early_stopping",
    "prompt_logprobs",
    "spaces_between_special_tokens",
    "bad_sequences",
)


@dataclass(frozen=True)
class LmiOptions:
    """Server settings of the LMI routes (see `Settings`)."""

    output_formatter: Literal["jsonlines", "sse"] = "jsonlines"
    tgi_compat: bool = False
    invocations_model: str = ""

    @property
    def stream_format(self) -> Literal["jsonlines", "sse"]:
        # TGI clients read SSE: TGI mode makes it the stream format (as LMI's tgi_compat does).
        return "sse" if self.tgi_compat else self.output_formatter


class GenerationError(ApplianceError):
    """An error about the generation itself (a parameter the engine refuses, a failure while
    generating): LMI answers these with a `finish_reason: "error"` body, not a validation body."""

    def __init__(self, cause: ApplianceError) -> None:
        super().__init__(cause.message, param=cause.param, code=cause.code, retry_after=cause.retry_after)
        self.status = cause.status
        self.type = cause.type


def invocation_engine(models: ModelRegistry, options: LmiOptions, named: str | None) -> EngineClient:
    """The model of `/predictions/{named}`, or of `/invocations`: `invocations_model`, else the
    only model served."""
    if named:
        return models.get(named)
    if options.invocations_model:
        return models.get(options.invocations_model)
    names = models.names()
    if not names:
        raise InvalidRequest(
            "This server serves no models yet: add a graph file and reload.", code="invocations_model_not_set"
        )
    if len(names) != 1:
        raise InvalidRequest(
            f"This server serves {len(names)} models ({', '.join(names)}): choose the one /invocations uses "
            "with `appliance serve --invocations-model NAME` (settings key invocations_model, or "
            "APPLIANCE_INVOCATIONS_MODEL), or call /predictions/{model}.",
            code="invocations_model_not_set",
        )
    return models.get(names[0])


# -- request -> OpenAI completions request --------------------------------------------------


def _completion_request(model: str, request: InvocationRequest) -> CompletionRequest:
    params = request.parameters
    for name in _UNHONOURED:
        if getattr(params, name) is not UNSET:
            raise InvalidRequest(
                f"parameters.{name} is not supported: OpenVINO GenAI has no equivalent. See docs/compatibility.md "
                "for the LMI parameters this server honours.",
                param=f"parameters.{name}",
                code="unsupported_parameter",
            )
    if params.logprobs is not None and params.logprobs > 1:
        raise InvalidRequest(
            "parameters.logprobs above 1 is not supported: the engine reports only the chosen token's "
            "log probability (every token object carries it).",
            param="parameters.logprobs",
            code="unsupported_parameter",
        )
    if request.stream and (params.n > 1 or (params.best_of or 1) > 1 or (params.num_beams or 1) > 1):
        raise InvalidRequest("n, best_of and num_beams above 1 need stream=false (as in LMI).", param="parameters.n")
    if request.stream and not isinstance(request.inputs, str):
        raise InvalidRequest("A list of inputs cannot be streamed; send one input per request.", param="inputs")
    if request.stream and params.decoder_input_details:
        raise InvalidRequest(
            "decoder_input_details needs stream=false (as in TGI).", param="parameters.decoder_input_details"
        )
    # num_beams > 1 is beam search, which this engine selects with best_of.
    best_of = params.num_beams if params.num_beams and params.num_beams > 1 else params.best_of
    return CompletionRequest(
        model=model,
        prompt=request.inputs,
        max_tokens=params.max_new_tokens,
        # do_sample=false (LMI's default) is greedy decoding whatever the temperature says.
        temperature=params.temperature if params.do_sample else 0.0,
        top_p=params.top_p if params.do_sample else None,
        top_k=params.top_k if params.do_sample else None,
        min_p=params.min_p if params.do_sample else None,
        seed=params.seed,
        stop=params.stop_sequences,
        n=params.n,
        best_of=best_of,
        length_penalty=params.length_penalty,
        repetition_penalty=params.repetition_penalty,
        presence_penalty=params.presence_penalty,
        frequency_penalty=params.frequency_penalty,
        min_tokens=params.min_length or 0,
        stop_token_ids=params.stop_token_ids,
        include_stop_str_in_output=True,
        ignore_eos=params.ignore_eos_token,
        skip_special_tokens=params.skip_special_tokens,
        logprobs=0,
        stream=request.stream,
    )


@dataclass
class Generation:
    """An accepted invocation: its engine streams (one per input) and what the answer needs."""

    request: InvocationRequest
    streams: list[RequestStream]
    prefill: list[list[Token]] = field(default_factory=list)

    @property
    def inputs(self) -> list[str]:
        return [self.request.inputs] if isinstance(self.request.inputs, str) else self.request.inputs


async def open_generation(engine: EngineClient, request: InvocationRequest) -> Generation:
    """Validate and submit; any refusal is a `GenerationError` (LMI's error-details answer)."""
    try:
        completion = _completion_request(engine.name, request)
        inputs = [request.inputs] if isinstance(request.inputs, str) else request.inputs
        for index, text in enumerate(inputs):
            param = "inputs" if isinstance(request.inputs, str) else f"inputs[{index}]"
            check_prompt(text, engine.graph, engine.max_context, param)
        prefill = []
        if request.parameters.decoder_input_details:
            # Prompt log probabilities are not computed by the engine: ids and texts only.
            for text in inputs:
                answer = await engine.tokenize(TextPrompt(text=text), add_special_tokens=True)
                prefill.append([Token(id=i, text=t, log_prob=None) for i, t in zip(answer.tokens, answer.token_strs)])
        # The stateful pipeline (NPU) computes no log probabilities: its token objects show null.
        streams = await completions.open_completion(
            engine, completion, logprob_values_optional=True, stop_param="parameters.stop_sequences"
        )
    except ApplianceError as exc:
        raise GenerationError(exc) from exc
    return Generation(request=request, streams=streams, prefill=prefill)


# -- engine events -> LMI answers ------------------------------------------------------------


class _Tokens:
    """Token objects of one sequence. A token's text is its own bytes as UTF-8 (as TGI shows it);
    bytes ending inside a UTF-8 character wait for the token completing it (that one shows the
    character, the first gets ""), and invalid bytes show as U+FFFD, as in the generated text."""

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def add(self, entries: Sequence[TokenLogprob]) -> list[Token]:
        return [
            Token(
                id=entry.id,
                text=self._decoder.decode(bytes(entry.bytes)),
                log_prob=None if math.isnan(entry.logprob) else entry.logprob,
            )
            for entry in entries
        ]


def _special(token: Token) -> Token:
    """The end-of-sequence token, marked as TGI marks it."""
    return Token(id=token.id, text=token.text, log_prob=token.log_prob, special_token=True)


def _finish(event: Finished, text: str, params: GenerationParameters) -> tuple[str, str]:
    """(LMI finish reason, generated text with the stop string cut unless asked to keep it)."""
    reason = finish_reason(event)
    if reason == "length":
        return "length", text
    # The engine ends the text right after the first stop string (kept on purpose, see above).
    found = [(text.find(stop), stop) for stop in params.stop_sequences or () if stop in text]
    if found:
        position, stop = min(found)
        return "stop_sequence", text[: position + (len(stop) if params.include_stop_str_in_output else 0)]
    return "eos_token", text


@dataclass
class _Sequence:
    text: str = ""
    tokens: list[Token] = field(default_factory=list)
    texts: _Tokens = field(default_factory=_Tokens)
    reason: str = "length"
    count: int = 0

    @property
    def score(self) -> float:
        return sum(token.log_prob or 0.0 for token in self.tokens)


async def generate(generation: Generation) -> list[GeneratedText]:
    """One result per input (the best of its sequences first, the others in best_of_sequences)."""
    params = generation.request.parameters
    n = params.n
    sequences = [[_Sequence() for _ in range(n)] for _ in generation.streams]
    try:
        async for stream_index, event in merged(generation.streams):
            sequence = sequences[stream_index][event.index]
            sequence.text += event.text
            sequence.tokens += sequence.texts.add(event.logprobs or [])
            if isinstance(event, Finished):
                sequence.reason, sequence.text = _finish(event, sequence.text, params)
                sequence.count = event.completion_tokens
                if sequence.reason == "eos_token" and sequence.tokens:
                    sequence.tokens[-1] = _special(sequence.tokens[-1])
    except ApplianceError as exc:
        raise GenerationError(exc) from exc
    results = []
    for index, (prompt, found) in enumerate(zip(generation.inputs, sequences)):
        best, *others = sorted(found, key=lambda sequence: sequence.score, reverse=True)
        prefix = prompt if params.return_full_text else ""
        result = GeneratedText(generated_text=prefix + best.text)
        if params.details:
            result.details = Details(
                finish_reason=best.reason, generated_tokens=best.count, inputs=prompt, tokens=best.tokens
            )
            if generation.prefill:
                result.details.prefill = generation.prefill[index]
            if others:
                result.details.best_of_sequences = [
                    BestOfSequence(
                        generated_text=prefix + other.text,
                        finish_reason=other.reason,
                        generated_tokens=other.count,
                        tokens=other.tokens,
                    )
                    for other in others
                ]
        results.append(result)
    return results


def error_result(message: str) -> GeneratedText:
    """LMI's answer to a failed generation (HTTP status from the error)."""
    details = Details(finish_reason="error", generated_tokens=None, inputs=None, tokens=None)
    return GeneratedText(generated_text="", details=details, error=message)


async def stream_lines(generation: Generation) -> AsyncIterator[StreamLine]:
    """One line per token; the last also carries generated_text (and details when asked). A
    failure after the first line becomes LMI's error line (finish_reason "error")."""
    params = generation.request.parameters
    prompt = generation.inputs[0]
    held: Token | None = None
    text, texts = "", _Tokens()
    try:
        async for _, event in merged(generation.streams):
            text += event.text
            for token in texts.add(event.logprobs or []):
                # The previous token goes out once another follows: the last one waits for Finished.
                if held is not None:
                    yield StreamLine(token=held)
                held = token
            if isinstance(event, Finished):
                reason, generated = _finish(event, text, params)
                if reason == "eos_token" and held is not None:
                    held = _special(held)
                line = StreamLine(
                    token=held or Token(id=-1, text="", log_prob=None, special_token=True),
                    generated_text=(prompt if params.return_full_text else "") + generated,
                )
                if params.details:
                    line.details = Details(
                        finish_reason=reason, generated_tokens=event.completion_tokens, inputs=prompt
                    )
                yield line
    except ApplianceError as exc:
        yield StreamLine(
            token=Token(id=-1, text="", log_prob=-1, special_token=True),
            generated_text="",
            details=Details(finish_reason="error", generated_tokens=None, inputs=None),
            error=exc.message,
        )
