"""The engine: OpenVINO GenAI pipelines in their own processes, behind `EngineClient`.

Two sides, one per process, and the wire between them:

- `host/`: the server process's side (`EngineClient`, the engine process and its pipe, request
  streams, metrics, tool formats, devices);
- `worker/`: the engine process's side (its entry point `worker.process.main`, the engines and
  their pipelines, prompt preparation, detokenizing);
- `messages`: the frames both sides exchange; `vision`: the image tags both write and check.

Only this package imports `openvino_genai`, and only in the engine process (`worker.process.main`)
and for device checks (`host.devices`): the server process imports the package, `EngineClient`
and the messages without OpenVINO. Neither side imports the other (`tests/unit/test_layers.py`),
except the spawn target the server names.
"""

from appliance.engine.host.client import EngineClient
from appliance.engine.host.streams import RequestStream
from appliance.engine.messages import (
    ChatPrompt,
    Delta,
    Finished,
    SamplingParams,
    TaggedGrammar,
    TextPrompt,
    TokenLogprob,
    TokenPrompt,
    TriggeredGrammar,
)

__all__ = [
    "ChatPrompt",
    "Delta",
    "EngineClient",
    "Finished",
    "RequestStream",
    "SamplingParams",
    "TaggedGrammar",
    "TextPrompt",
    "TokenPrompt",
    "TokenLogprob",
    "TriggeredGrammar",
]
