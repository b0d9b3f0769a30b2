"""Graph files: one TOML file per served model (the `graphs/` directory), read and checked.

- `schema.py`: `Graph` and its sections as frozen structs (unknown keys are errors).
- `load.py`: `load_graph` / `load_graphs`, TOML to `Graph`, errors naming the file and field path.
- `checks.py`: `prepare_graphs`, every file checked against what it points at (model folders,
  GGUF files, the device, a draft model's tokenizer), as `serve`, `check` and every reload run it.
- `gguf.py`: a GGUF file's header read with the standard library, and what OpenVINO GenAI's GGUF
  readers load (architectures, quantizations, tokenizer).
- `retrieval.py`: an embedding or rerank model's settings from its sentence-transformers files.
- `tts.py`: a text-to-speech (SpeechT5, hibari) model's facts and the `[tts]` settings (voices, input bound).
- `cpu_properties.py`: the CPU plugin properties a graph may set.
- `facts.py`: `ModelFacts`, what the model's own files say (context, chat template, vector length,
  image rule and markers), read when a graph is built (`Graph.facts`, `Graph.max_context`): every
  bound and plan of the server holds before the model's engine loads.
- `footprint.py`: `Footprint`, the memory a graph's engine will hold (weights, KV cache, the
  engine's overhead), estimated from its files before it loads (`Graph.footprint`).
- `chat_template.py`: the chat template found where OpenVINO GenAI's tokenizer finds it, and what
  it does with tools.
- `model_formats.py`: the tool-call and reasoning formats the template (or the tokenizer's special
  tokens) shows, each with why.
- `vision.py`: a vision model's image size rule, image token count and marker tokens.
- `model_json.py`: a model folder's JSON files, read leniently.
- `numbers.py`: the bounded number types every number of a graph file has (no `nan`, `inf` or
  401-digit integer gets past reading).

Named for the files rather than `graphs` (the top-level directory of graph files) or `models`
(the top-level directory of model folders). Depends only on `appliance.errors` (and
`appliance.memory_budget` for how sizes are written): the device list it
checks against comes from the caller (`appliance.engine.host.devices.available_devices`).
"""

from appliance.graphfiles.load import load_graph, load_graphs
from appliance.graphfiles.schema import (
    DEFAULT_MAX_PROMPT_LEN,
    DEFAULT_MIN_RESPONSE_LEN,
    GGUF_SUFFIX,
    STATEFUL_PROPERTIES,
    VISION_ENCODER_IR,
    GenerationDefaults,
    Graph,
    Limits,
    SchedulerOverrides,
    SchedulerSettings,
    SpeculativeSettings,
    Task,
    is_npu,
)

__all__ = [
    "DEFAULT_MAX_PROMPT_LEN",
    "DEFAULT_MIN_RESPONSE_LEN",
    "GGUF_SUFFIX",
    "STATEFUL_PROPERTIES",
    "VISION_ENCODER_IR",
    "GenerationDefaults",
    "Graph",
    "Limits",
    "SchedulerOverrides",
    "SchedulerSettings",
    "SpeculativeSettings",
    "Task",
    "is_npu",
    "load_graph",
    "load_graphs",
]
