"""Tools beside the serving core: each is an `appliance` subcommand that serving does not need.

- `demo/`: the offline demo models (random weights, a local tokenizer, real OpenVINO IR).
- `export.py` with `probe.py`: a Hugging Face model to OpenVINO IR and a graph file, checked.
- `bench/`: the appliance against the graph's own pipeline, over HTTP and in process.
- `soak/`: minutes of mixed traffic against a running server.

Dependencies point one way: tools import the core (`appliance.config`, ...), the core never
imports tools.
"""
