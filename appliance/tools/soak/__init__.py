"""`appliance soak`: minutes of mixed traffic against a running server, then a verdict.

Modules: `traffic` (the requests, their checks and the report).
"""
