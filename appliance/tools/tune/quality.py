"""What a weight format costs in quality: the model's perplexity on a fixed English text.

Greedy tokens tell whether a form writes the same text; a weight format written again from other
weights (a Q4_1 GGUF as int4 symmetric, say) almost never does, token for token, and may still be as
good a model. The perplexity of the model's own IR on `TEXT` (teacher forcing: every next token's
probability from one pass over the text, OpenVINO's CPU plugin in f32) says how much worse it got,
so `appliance tune --max-perplexity-loss` can accept a form whose loss is stated and bounded.
"""

from __future__ import annotations

import math
from pathlib import Path

__all__ = ["TEXT", "perplexity"]

TEXT = (
    "The harbour town woke slowly. Fishing boats came back before the sun was high, and the market "
    "filled with people who argued about the price of bread, the weather, and the new road to the "
    "north. A teacher opened the school an hour late because the bridge had flooded again; the "
    "children did not mind. In the afternoon the wind turned, clouds came in from the sea, and the "
    "old men who sat by the church moved their chairs inside. Nobody remembered a spring so wet. "
    "When the rain stopped at last, the river was brown and fast, and the mayor promised, as every "
    "mayor before him had promised, that the bridge would be rebuilt in stone before the winter."
)


def perplexity(model_dir: Path, token_ids: list[int]) -> float:
    """exp(mean negative log-likelihood) of `token_ids[1:]` given the tokens before each, from the
    stateful IR in `model_dir` (inputs input_ids, attention_mask, position_ids, beam_idx)."""
    import numpy as np
    import openvino

    if len(token_ids) < 2:
        raise ValueError("perplexity needs at least two tokens")
    core = openvino.Core()
    model = core.read_model(model_dir / "openvino_model.xml")
    compiled = core.compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    request = compiled.create_infer_request()
    names = {port.get_any_name() for port in model.inputs}
    count = len(token_ids)
    inputs = {
        "input_ids": np.array([token_ids], dtype=np.int64),
        "attention_mask": np.ones((1, count), dtype=np.int64),
        "position_ids": np.arange(count, dtype=np.int64)[None],
        "beam_idx": np.zeros(1, dtype=np.int32),
    }
    request.reset_state()
    request.infer({name: value for name, value in inputs.items() if name in names})
    logits = np.asarray(request.get_tensor(compiled.outputs[0]).data, dtype=np.float64)[0]
    if logits.shape[0] != count:
        raise RuntimeError(f"the model gives logits for {logits.shape[0]} of {count} positions")
    logits = logits[:-1]
    top = logits.max(axis=-1, keepdims=True)
    log_norm = top[:, 0] + np.log(np.exp(logits - top).sum(axis=-1))
    chosen = logits[np.arange(count - 1), token_ids[1:]]
    return math.exp(float(np.mean(log_norm - chosen)))
