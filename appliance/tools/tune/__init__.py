"""`appliance tune`: each graph's fastest OpenVINO CPU settings on the box it runs on.

Modules: `levers` (what is tried on which CPU, and the rule that picks), `measure` (one form on the
raw pipeline in a process of its own), `search` (coordinate descent within a time budget, then the
winner confirmed against the graph as it was), `graph_text` (the winner written into the graph
file as a marked, reversible block naming the CPU), `command` (the flags).
"""

from appliance.tools.tune.command import register, run

__all__ = ["register", "run"]
