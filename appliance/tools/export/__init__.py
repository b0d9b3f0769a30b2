"""`appliance export`: a model made ready to serve, with its graph file.

`ir` exports a Hugging Face model (hub id or local folder, `hub_source` says which and keeps the
download offline-aware) to OpenVINO IR with optimum-intel and checks it loads (`probe`); `gguf`
checks a `.gguf` file and writes a graph pointing at it. `command` holds the flags and picks one.
"""

from .command import register, run
from .ir import WEIGHT_FORMATS, ExportError, export_model

__all__ = ["WEIGHT_FORMATS", "ExportError", "export_model", "register", "run"]
