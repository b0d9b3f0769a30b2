"""Demo models built offline: random weights, a locally trained tokenizer, real OpenVINO IR.

`build_demo(root)` writes `root/models/<name>/` and `root/graphs/<name>.toml` for each demo so the
appliance can be tried and tested without downloading anything. The models are served like real
ones but their outputs are gibberish. `appliance demo` (`command`) calls it.

Importing this package is cheap; torch, transformers and optimum-intel (the `export` extra) are
imported only when a model is actually built.
"""

from .builder import DEFAULT_DEMOS, build_demo
from .command import register, run
from .recipes import RECIPES

__all__ = ["DEFAULT_DEMOS", "RECIPES", "build_demo", "register", "run"]
