"""`appliance soak`: minutes of mixed traffic against a running server, then a verdict.

Modules: `command` (the subcommand's flags and report), `traffic` (the requests, their checks,
the process usage read from /proc, and the report).
"""

from appliance.tools.soak.command import register, run

__all__ = ["register", "run"]
