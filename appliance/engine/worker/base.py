"""What both engines share: the interface the engine process drives, and the setup around a pipeline.

An engine (`batching.BatchingEngine` for continuous-batching graphs, `stateful.StatefulEngine` for
stateful ones) is built around a loaded pipeline, whose tokenizer prepares every request
(`RequestPreparer`) and decodes every reply (`Detokenizer`); `process.main` then hands it the pipe
to the server and the queue of commands read from it, and `run` serves them until `Shutdown`.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from multiprocessing.connection import Connection
from typing import Any

import openvino_genai

from appliance.engine.messages import Accepted, Ready, SamplingParams
from appliance.engine.worker.inbox import Inbox
from appliance.engine.worker.outputs import Detokenizer, RequestOutputs
from appliance.engine.worker.preparer import PreparedSubmit, RequestPreparer
from appliance.engine.worker.vocab_decoder import VocabDecoder
from appliance.graphfiles import Graph
from appliance.graphfiles.chat_template import template_tools
from appliance.graphfiles.model_formats import special_tokens

__all__ = ["STATS_INTERVAL_S", "Engine", "accepted"]

STATS_INTERVAL_S = 0.5
"""An engine sends `Stats` at least this often, idle or not: the server judges hangs from them."""


class Engine(ABC):
    """One model's pipeline serving the commands of the server process."""

    def __init__(self, graph: Graph, pipe: Any) -> None:
        self.graph = graph
        self.pipe = pipe
        self.tokenizer = pipe.get_tokenizer()
        self.requests = RequestPreparer(graph, self.tokenizer)
        self.max_context = self.requests.max_context
        self.detokenizer = Detokenizer(self.tokenizer, VocabDecoder.verified(self.tokenizer))

    @abstractmethod
    def run(self, conn: Connection, inbox: Inbox) -> None:
        """Serve the commands from `inbox`, sending events on `conn`, until `Shutdown`."""

    def ready(self, load_seconds: float) -> Ready:
        """What the server hears once the pipeline is loaded: the context, and what the chat
        template (or the tokenizer's tokens) does with tools and images."""
        graph = self.graph
        vision = self.requests.vision
        tools = template_tools(
            self.tokenizer.chat_template or "", frozenset() if graph.gguf else special_tokens(graph.model_dir)
        )
        return Ready(
            max_context=self.max_context,
            load_seconds=load_seconds,
            vision_tokens=vision.native_tokens if vision is not None else [],
            gguf_reader=os.environ.get("GGUF_READER", "") if graph.gguf else "",
            template_renders_tools=tools.renders_tools,
            template_renders_tool_calls=tools.renders_tool_calls,
            template_tool_parser=tools.tool_parser or "",
            template_tool_reason=tools.tool_reason,
            template_reasoning_parser=tools.reasoning_parser or "",
            template_reasoning_reason=tools.reasoning_reason,
        )

    def request_outputs(self, params: SamplingParams, *, match_stop_strings: bool) -> RequestOutputs:
        """A new request's outputs, decoded with the shared detokenizer."""
        return RequestOutputs(
            openvino_genai,
            self.tokenizer,
            params,
            self.requests.token_texts,
            self.requests.eos_token_id,
            self.detokenizer,
            match_stop_strings=match_stop_strings,
        )


def accepted(request_id: int, prepared: PreparedSubmit) -> Accepted:
    """The answer to a `Submit` the engine took."""
    return Accepted(
        request_id=request_id,
        prompt_tokens=prepared.prompt_tokens,
        prompt_tail=prepared.text[-64:],
        prompt_text=prepared.echo_text,
    )
