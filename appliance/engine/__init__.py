"""The engine: OpenVINO GenAI pipelines in their own processes, behind `EngineClient`.

Only this package imports `openvino_genai` (in the engine process, and for device checks).
"""

from appliance.engine.client import EngineClient, RequestStream
from appliance.engine.messages import ChatPrompt, Delta, Finished, SamplingParams, TextPrompt, TokenLogprob

__all__ = [
    "ChatPrompt",
    "Delta",
    "EngineClient",
    "Finished",
    "RequestStream",
    "SamplingParams",
    "TextPrompt",
    "TokenLogprob",
]
