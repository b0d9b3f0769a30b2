"""The core subcommands of `appliance`: `serve`, `config`, `check`, `devices` and `models`.

Each module here, like each tool in `appliance.tools`, has `register(subcommands)`, which adds its
subcommand to the parser and returns it, and `run(args) -> int`, which does it and returns the exit
code. Imports that take time (the server, OpenVINO) happen in `run`, so that `appliance --help`
and every other command start quickly.
"""

from appliance.commands import check, config, devices, models, serve

__all__ = ["COMMANDS"]

COMMANDS = (serve, config, check, devices, models)
