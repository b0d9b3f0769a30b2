"""The engine: OpenVINO GenAI pipelines in their own processes, behind `EngineClient`.

Only this package imports `openvino_genai`, and only in the engine process (`process.main`) and
for device checks (`devices`): the server process imports the package, `EngineClient` and the
messages without OpenVINO.
"""

from appliance.engine.client import EngineClient
from appliance.engine.messages import ChatPrompt, Delta, Finished, SamplingParams, TextPrompt, TokenLogprob, TokenPrompt
from appliance.engine.streams import RequestStream

__all__ = [
    "ChatPrompt",
    "Delta",
    "EngineClient",
    "Finished",
    "RequestStream",
    "SamplingParams",
    "TextPrompt",
    "TokenPrompt",
    "TokenLogprob",
]
