"""What `appliance tune` tries, and how it picks: pure functions over measured figures.

A lever is one OpenVINO CPU property of the graph's `plugin_config` with the values worth trying on
the CPU at hand (bf16 only where the CPU computes in it), or the format of the model's weights
(`weights`: the model written again as an IR, see `weights.py`), tried first: on the AVX2 EPYC it
moved one-stream speed more than any property. The search is coordinate descent from the
graph as it is: each lever's values are measured on top of the best form so far, and a value is
kept when it beats that form by more than `MIN_GAIN` at one stream without losing more than
`MAX_LOSS` at the busy level, and writes the same greedy tokens (a KV cache of 4 bits changes the
text: such a form is reported, never chosen). The noise of a shared 2-core host is a few per cent
between runs seconds apart, hence the margins.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from appliance.tools.tune.weights import WEIGHT_FORMATS, WEIGHTS

__all__ = ["MAX_LOSS", "MIN_GAIN", "Form", "Lever", "Measured", "better", "levers_for", "perplexity_loss"]

MIN_GAIN = 0.03
"""A form must beat the best so far by this fraction of one-stream tokens/s to replace it."""
MAX_LOSS = 0.05
"""...and may lose at most this fraction of throughput at the busy level."""

PluginValue = str | int | float | bool


@dataclass(frozen=True)
class Lever:
    """One property and the values to try (None: the property left out, OpenVINO's default)."""

    key: str
    values: tuple[PluginValue | None, ...]
    why: str


@dataclass(frozen=True)
class Form:
    """A graph's `plugin_config` to measure: the graph's own with `changes` applied (a None value
    removes the key)."""

    changes: Mapping[str, PluginValue | None] = field(default_factory=dict)

    @property
    def weights(self) -> str | None:
        """The weight format this form serves the model in (None: the model as the graph names it)."""
        value = self.changes.get(WEIGHTS)
        return value if isinstance(value, str) else None

    def plugin_changes(self) -> dict[str, PluginValue | None]:
        return {key: value for key, value in self.changes.items() if key != WEIGHTS}

    def apply(self, plugin_config: Mapping[str, PluginValue]) -> dict[str, PluginValue]:
        config = dict(plugin_config)
        for key, value in self.plugin_changes().items():
            if value is None:
                config.pop(key, None)
            else:
                config[key] = value
        return config

    def with_change(self, key: str, value: PluginValue | None) -> Form:
        return Form({**self.changes, key: value})

    def describe(self) -> str:
        if not self.changes:
            return "the graph as it is"
        return ", ".join(f"{key}={'(default)' if value is None else value}" for key, value in self.changes.items())


@dataclass(frozen=True)
class Measured:
    """A form's figures: output tokens/s at one stream and at the busy level, and the greedy token
    ids it wrote for the check prompt."""

    form: Form
    one_stream: float
    busy: float
    tokens: tuple[int, ...]
    error: str = ""
    perplexity: float | None = None
    """The model's perplexity on `quality.TEXT` in this form's weights (measured for the graph as
    it is and for weight formats only: the other levers leave the weights alone)."""


def levers_for(
    isa: Sequence[str], plugin_config: Mapping[str, PluginValue], *, weights: Sequence[str] = ()
) -> list[Lever]:
    """The levers worth trying on a CPU with these /proc/cpuinfo features, in the order tried;
    `weights`: the weight formats to try first (none: the model stays as it is)."""
    bf16 = "avx512_bf16" in isa or "amx_bf16" in isa
    precisions: tuple[PluginValue | None, ...] = ("f32", "bf16") if bf16 else ("f32",)
    levers = [
        Lever("KV_CACHE_PRECISION", ("u8", "f16", "u4"), "the KV cache's element type: bytes read per token"),
        Lever(
            "DYNAMIC_QUANTIZATION_GROUP_SIZE",
            (0, 32, 64, 128),
            "activations quantized to int8 per group before int8/int4 matmuls (0: off)",
        ),
        Lever("INFERENCE_PRECISION_HINT", precisions, "the precision the CPU plugin computes in"),
        Lever("ENABLE_CPU_PINNING", (True, False), "threads pinned to cores"),
    ]
    if not bf16:
        # An f32 KV cache needs f32 compute, which is all such a CPU has.
        levers[0] = Lever("KV_CACHE_PRECISION", ("u8", "f16", "f32", "u4"), levers[0].why)
    if weights:
        unknown = sorted(set(weights) - set(WEIGHT_FORMATS))
        if unknown:
            raise ValueError(f"unknown weight formats: {', '.join(unknown)} (known: {', '.join(WEIGHT_FORMATS)})")
        why = "the model's weights written again as an IR in this format (how the CPU's kernels read them)"
        levers.insert(0, Lever(WEIGHTS, tuple(weights), why))
    # A value the graph already has is the baseline, not a candidate.
    return [
        Lever(lever.key, tuple(v for v in lever.values if v != plugin_config.get(lever.key)), lever.why)
        for lever in levers
    ]


def better(candidate: Measured, best: Measured, reference: Measured, max_perplexity_loss: float = 0.0) -> bool:
    """Whether `candidate` replaces `best`: faster at one stream by MIN_GAIN, no worse than MAX_LOSS
    at the busy level, and the same greedy tokens as the graph as it was (`reference`), or, given a
    `max_perplexity_loss` (a fraction), other weights whose perplexity rose by no more than that."""
    if candidate.error:
        return False
    if candidate.tokens != reference.tokens and perplexity_loss(candidate, reference) > max_perplexity_loss:
        return False
    return candidate.one_stream > best.one_stream * (1 + MIN_GAIN) and candidate.busy >= best.busy * (1 - MAX_LOSS)


def perplexity_loss(candidate: Measured, reference: Measured) -> float:
    """How much higher the candidate's perplexity is than the graph's as it was (0.05: 5% higher);
    infinite when either was not measured."""
    if candidate.perplexity is None or reference.perplexity is None or reference.perplexity <= 0:
        return math.inf
    return candidate.perplexity / reference.perplexity - 1
