"""Tools beside the serving core: `appliance` subcommands that serving itself does not need.

- `demo/`: the offline demo models (random weights, a local tokenizer, real OpenVINO IR).
- `export/`: a Hugging Face model to OpenVINO IR (or a `.gguf` file as it is) and a graph file, checked.
- `bench/`: the appliance against the graph's own pipeline, over HTTP and in process.
- `soak/`: minutes of mixed traffic against a running server.
- `tune/`: each graph's fastest OpenVINO CPU settings on this box, written into its graph file.
- `launch.py`: start `appliance serve` and wait for /health (bench and the tests use it).

Each tool, like each core command in `appliance.commands`, has `register(subcommands)` and
`run(args) -> int`, and defers its heavy imports to `run`. Dependencies point one way: tools
import the core, the core never imports tools.
"""

from appliance.tools import bench, demo, export, soak, tune

__all__ = ["TOOLS"]

TOOLS = (demo, export, bench, soak, tune)
