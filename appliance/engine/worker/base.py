"""What both engines share: the interface the engine process drives, and the setup around a pipeline.

An engine (`batching.BatchingEngine` for continuous-batching graphs, `stateful.StatefulEngine` for
stateful ones) is built around a loaded pipeline, whose tokenizer prepares every request
(`RequestPreparer`) and decodes every reply (`Detokenizer`); `process.main` then hands it the pipe
to the server and the queue of commands read from it, and `run` serves them until `Shutdown`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from multiprocessing.connection import Connection
from typing import Any

import openvino_genai

from appliance.engine.messages import Accepted, SamplingParams
from appliance.engine.worker.inbox import Inbox
from appliance.engine.worker.outputs import Detokenizer, RequestOutputs
from appliance.engine.worker.preparer import PreparedSubmit, RequestPreparer
from appliance.engine.worker.vocab_decoder import VocabDecoder
from appliance.graphfiles import Graph

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
