"""The appliance: an OpenVINO GenAI edge-serving appliance with an OpenAI-compatible HTTP API."""

__version__ = "0.1.0"
