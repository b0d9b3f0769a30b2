"""Preparing requests in the engine process, for either pipeline: prompts rendered and counted,
context and prompt limits checked, generation configs built, tokenize/detokenize answered.

Everything here runs before a request reaches a pipeline, so a refusal (`Rejected`, a 400 for
the client) never leaves anything behind in the engine.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import msgspec
import numpy as np
import openvino

from appliance.engine.messages import (
    ChatPrompt,
    Detokenize,
    Detokenized,
    EngineEvent,
    Rejected,
    Submit,
    Tokenize,
    Tokenized,
    TokenPrompt,
)
from appliance.engine.worker.control_tokens import ControlTokens, RenderedChat
from appliance.engine.worker.generation import generation_config
from appliance.engine.worker.outputs import TokenTexts
from appliance.engine.worker.prompts import PromptError, render_chat
from appliance.engine.worker.vlm import PreparedRequest, VisionInputError, VisionRequests
from appliance.errors import client_text
from appliance.graphfiles import Graph

__all__ = ["PreparedSubmit", "RequestPreparer", "reason"]


@dataclass
class PreparedSubmit:
    """A request ready for the pipeline."""

    text: str
    """The rendered prompt."""
    prompt_tokens: int
    max_new_tokens: int
    config: Any
    """openvino_genai.GenerationConfig"""
    input_ids: Any = None
    """Text graphs: the prompt's token ids (openvino.Tensor)."""
    vision: PreparedRequest | None = None
    """Vision graphs: the prompt and its images."""
    echo_text: str = ""
    """With `SamplingParams.echo`: the prompt's text, sent back to the client."""


class RequestPreparer:
    """One engine's request preparation (its tokenizer, vision helper and limits)."""

    def __init__(self, graph: Graph, tokenizer: Any) -> None:
        self.graph = graph
        self.tokenizer = tokenizer
        self.max_context = graph.max_context
        """Prompt + output tokens a request may use: the number the server's bounds use too, read
        from the model's files with the graph (`graphfiles.facts`)."""
        self.max_prompt_tokens = graph.max_prompt_len
        """The stateful pipeline's prompt limit (MAX_PROMPT_LEN); None: only the context counts."""
        self.eos_token_id = tokenizer.get_eos_token_id()
        self.token_texts = TokenTexts(tokenizer, graph.model_dir)
        self.vision = VisionRequests(graph, tokenizer) if graph.accepts_images else None
        self.control_tokens = ControlTokens.of(tokenizer) if graph.control_tokens_in_messages == "text" else None
        """Control tokens clients write in chat messages are read as text (None: the graph opts out)."""

    def prepare(self, submit: Submit, *, streamed_stop_strings: bool = False) -> PreparedSubmit | Rejected:
        """The request rendered, counted and checked; `Rejected` when it cannot run.

        `streamed_stop_strings`: leave stop strings out of the pipeline's config (the caller
        matches them itself, see `RequestOutputs`)."""
        request_id = submit.request_id
        prompt_param = "messages" if isinstance(submit.prompt, ChatPrompt) else "prompt"
        unknown = self._unknown_token_ids(submit.params.stop_token_ids)
        if unknown is not None:
            # An id past the logits (2**31-1 with min_tokens) made the pipeline write out of
            # bounds and crashed the engine process, losing every stream of the model.
            return Rejected(request_id=request_id, message=unknown, code="invalid_value", param="stop_token_ids")
        if isinstance(submit.prompt, TokenPrompt):
            refused = self._check_token_prompt(submit.prompt)
            if refused is not None:
                return Rejected(request_id=request_id, message=refused, code="invalid_value", param="prompt")
        input_ids = vision_request = None
        try:
            rendered = self._render(submit.prompt) if isinstance(submit.prompt, ChatPrompt) else None
            text = rendered.text if rendered is not None else getattr(submit.prompt, "text", "")
            if isinstance(submit.prompt, TokenPrompt):
                ids = submit.prompt.ids
                if submit.params.echo:  # decoded only to be echoed: the ids are the prompt, as sent
                    text = self.tokenizer.decode(ids, skip_special_tokens=False)
                input_ids = openvino.Tensor(np.array([ids], dtype=np.int64))
                prompt_tokens = len(ids)
            elif self.vision is not None:
                if rendered is not None:
                    self._refuse_on_vision(rendered)
                images = submit.prompt.images if isinstance(submit.prompt, ChatPrompt) else []
                vision_request = self.vision.prepare(text, images)
                prompt_tokens = vision_request.prompt_tokens
            elif rendered is not None and rendered.client_spans:
                ids = self._chat_ids(rendered, add_special_tokens=False)
                input_ids = openvino.Tensor(np.array([ids], dtype=np.int64))
                prompt_tokens = len(ids)
            else:
                # The chat template already holds any BOS token: do not add special tokens again.
                input_ids = self.tokenizer.encode(text, add_special_tokens=False).input_ids
                prompt_tokens = int(input_ids.get_shape()[-1])
        except VisionInputError as exc:
            return Rejected(
                request_id=request_id,
                message=f"The images cannot be used with this model: {exc}.",
                code="invalid_image",
                param="messages",
            )
        except PromptError as exc:
            return Rejected(request_id=request_id, message=str(exc), code="invalid_prompt", param=exc.param)
        except Exception as exc:
            return Rejected(
                request_id=request_id,
                message=f"The prompt could not be prepared: {exc}",
                code="invalid_prompt",
                param=prompt_param,
            )
        if self.max_prompt_tokens is not None and prompt_tokens > self.max_prompt_tokens:
            return Rejected(
                request_id=request_id,
                message=(
                    f"This model's prompts are limited to {self.max_prompt_tokens} tokens (MAX_PROMPT_LEN "
                    f"of its stateful pipeline). However, your prompt has {prompt_tokens} tokens. "
                    "Please reduce the length of the messages."
                ),
                code="context_length_exceeded",
                param=prompt_param,
            )
        params = submit.params
        max_new_tokens = params.max_new_tokens
        if max_new_tokens is None:
            max_new_tokens = min(self.graph.limits.max_tokens_limit, self.max_context - prompt_tokens)
        if max_new_tokens < 1 or prompt_tokens + max_new_tokens > self.max_context:
            requested = max(max_new_tokens, 1)
            return Rejected(
                request_id=request_id,
                message=(
                    f"This model's maximum context length is {self.max_context} tokens. However, "
                    f"you requested {prompt_tokens + requested} tokens ({prompt_tokens} in the "
                    f"messages, {requested} in the completion). Please reduce the length of the "
                    "messages or completion."
                ),
                code="context_length_exceeded",
                param=prompt_param,
            )
        pipeline_params = params
        if streamed_stop_strings and params.stop:
            pipeline_params = msgspec.structs.replace(params, stop=())
        try:
            config = generation_config(pipeline_params, max_new_tokens, eos_token_id=self.eos_token_id)
            if vision_request is not None:
                # Both pipelines take the rendered prompt string from a VLM request: do not let
                # them apply the chat template a second time.
                config.apply_chat_template = False
        except Exception as exc:  # the pipeline's own validation: refuse before the pipeline sees it
            return Rejected(
                request_id=request_id,
                message=f"The generation parameters are not supported together: {reason(exc)}",
                code="invalid_value",
            )
        return PreparedSubmit(
            text=text,
            prompt_tokens=prompt_tokens,
            max_new_tokens=max_new_tokens,
            config=config,
            input_ids=input_ids,
            vision=vision_request,
            echo_text=text if params.echo else "",
        )

    def tokenize(self, command: Tokenize | Detokenize) -> EngineEvent:
        """The answer to a tokenize or detokenize command (nothing generates)."""
        try:
            if isinstance(command, Detokenize):
                unknown = self._unknown_token_ids(command.tokens)
                if unknown is not None:
                    return Rejected(
                        request_id=command.request_id, message=unknown, code="invalid_value", param="tokens"
                    )
                return Detokenized(request_id=command.request_id, text=self.tokenizer.decode(command.tokens))
            prompt = command.prompt
            rendered = self._render(prompt) if isinstance(prompt, ChatPrompt) else None
            if rendered is not None and rendered.client_spans:
                ids = self._chat_ids(rendered, add_special_tokens=command.add_special_tokens)
            else:
                text = rendered.text if rendered is not None else prompt.text
                ids = list(self.tokenizer.encode(text, add_special_tokens=command.add_special_tokens).input_ids.data[0])
            strs = [self.token_texts.piece(int(token)) for token in ids]
            return Tokenized(request_id=command.request_id, tokens=[int(token) for token in ids], token_strs=strs)
        except PromptError as exc:
            return Rejected(request_id=command.request_id, message=str(exc), code="invalid_prompt", param=exc.param)
        except Exception as exc:
            return Rejected(
                request_id=command.request_id,
                message=f"The tokenizer failed: {reason(exc)}",
                code="invalid_prompt",
                param="tokens" if isinstance(command, Detokenize) else None,
            )

    def _check_token_prompt(self, prompt: TokenPrompt) -> str | None:
        """Why a prompt of token ids cannot run (None when it can): ids outside the vocabulary
        would index past the model's embeddings, and a vision pipeline tokenizes a text prompt
        itself (the service refuses both earlier; this keeps the engine safe on its own)."""
        if self.vision is not None:
            return "This model's vision pipeline takes prompts as text, not token ids."
        if not prompt.ids:
            return "The prompt holds no token ids."
        return self._unknown_token_ids(prompt.ids)

    def _unknown_token_ids(self, token_ids: Sequence[int]) -> str | None:
        """Why some of a client's token ids are not this model's (None when all are): every id a
        client sends is checked here before it reaches a pipeline."""
        unknown = [token for token in token_ids if not self.token_texts.known(token)]
        if not unknown:
            return None
        return (
            f"Token id {unknown[0]} is not in this model's vocabulary "
            f"(its largest id is {self.token_texts.largest_id})."
        )

    def _render(self, prompt: ChatPrompt) -> RenderedChat:
        if self.control_tokens is None:
            return RenderedChat(render_chat(self.tokenizer, prompt), [])
        return self.control_tokens.render(prompt)

    def _chat_ids(self, rendered: RenderedChat, *, add_special_tokens: bool) -> list[int]:
        """Token ids of a chat prompt in which clients wrote control tokens (read as text)."""
        assert self.control_tokens is not None
        self._refuse_on_vision(rendered)
        return self.control_tokens.token_ids(rendered, add_special_tokens=add_special_tokens)

    def _refuse_on_vision(self, rendered: RenderedChat) -> None:
        # The vision pipelines tokenize the prompt string themselves: it cannot be kept text there.
        if self.vision is not None and rendered.client_spans:
            start, end = rendered.client_spans[0]
            raise PromptError(
                f"The messages spell this model's control token '{rendered.text[start:end]}', which its "
                "vision pipeline would read as a control token; remove it from the text.",
                param="messages",
            )


def reason(exc: Exception) -> str:
    """An OpenVINO exception's reason: its messages open with a C++ source location; the reason
    is on the last line. A pybind11 argument error names no reason, only the call's reprs."""
    text = str(exc)
    if isinstance(exc, TypeError) and "incompatible function arguments" in text:
        return "a value is of a type or size the engine does not accept."
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return client_text(lines[-1]) if lines else type(exc).__name__
