"""The floats a request hands an engine, which reads them as 32-bit floats (OpenVINO GenAI's
`GenerationConfig` and `WhisperGenerationConfig`): one rule, for every dialect.

A JSON number or form value is a 64-bit float when it is checked against its field's range, then
rounded to 32 bits in the engine, where `temperature: 1e-300` is 0 (the pipeline refuses to sample
at 0: a 500 before this rule), `top_p: 1e-300` is 0 (outside its range) and `1e-40` a denormal.
So, wherever such a value is read (`sampling.sampling_params` for chat, completions and every
dialect built on them; `speech.prepare` for transcriptions and translations):

- a temperature below `GREEDY_BELOW` (vLLM's threshold) means greedy decoding, as 0 does: sampling
  at a smaller one divides the logits beyond float32's range, and greedy is what it tends to;
- any other nonzero float of magnitude below float32's smallest normal number, or above its
  largest, is a 400 naming the field: the engine would read 0, a denormal or infinity, not the
  value sent.
"""

from __future__ import annotations

from appliance.errors import InvalidRequest

__all__ = ["GREEDY_BELOW", "decoding_temperature", "engine_float"]

GREEDY_BELOW = 1e-5
"""A temperature below this is greedy decoding (vLLM's `_SAMPLING_EPS`)."""

_SMALLEST_NORMAL = 1.1754943508222875e-38
"""float32's smallest normal number: below it a float32 is a denormal or 0."""

_LARGEST = 3.4028234663852886e38
"""float32's largest finite number."""


def decoding_temperature(temperature: float) -> float:
    """`temperature` as the engine is to decode at: 0.0 (greedy) below `GREEDY_BELOW`."""
    return 0.0 if temperature < GREEDY_BELOW else temperature


def engine_float(value: float | None, param: str) -> float | None:
    """`value` (None: not sent) if a 32-bit float holds it; InvalidRequest (400) naming `param` when
    the engine would read 0, a denormal or infinity instead."""
    if value is None or value == 0 or _SMALLEST_NORMAL <= abs(value) <= _LARGEST:
        return value
    reads = "0 or a denormal" if abs(value) < _SMALLEST_NORMAL else "not a finite number"
    raise InvalidRequest(
        f"{param} is {value}: the engine reads it as a 32-bit float, where it is {reads} (a 32-bit float "
        f"holds 0 and magnitudes from {_SMALLEST_NORMAL:.4g} to {_LARGEST:.4g}).",
        param=param,
    )
