"""What `appliance tune` tries, and how it picks: pure functions over measured figures.

A lever is one OpenVINO CPU property of the graph's `plugin_config` with the values worth trying on
the CPU at hand (bf16 only where the CPU computes in it). The search is coordinate descent from the
graph as it is: each lever's values are measured on top of the best form so far, and a value is
kept when it beats that form by more than `MIN_GAIN` at one stream without losing more than
`MAX_LOSS` at the busy level, and writes the same greedy tokens (a KV cache of 4 bits changes the
text: such a form is reported, never chosen). The noise of a shared 2-core host is a few per cent
between runs seconds apart, hence the margins.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

__all__ = ["MAX_LOSS", "MIN_GAIN", "Form", "Lever", "Measured", "better", "levers_for"]

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

    def apply(self, plugin_config: Mapping[str, PluginValue]) -> dict[str, PluginValue]:
        config = dict(plugin_config)
        for key, value in self.changes.items():
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


def levers_for(isa: Sequence[str], plugin_config: Mapping[str, PluginValue]) -> list[Lever]:
    """The levers worth trying on a CPU with these /proc/cpuinfo features, in the order tried."""
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
    # A value the graph already has is the baseline, not a candidate.
    return [
        Lever(lever.key, tuple(v for v in lever.values if v != plugin_config.get(lever.key)), lever.why)
        for lever in levers
    ]


def better(candidate: Measured, best: Measured, reference: Measured) -> bool:
    """Whether `candidate` replaces `best`: faster at one stream by MIN_GAIN, no worse than MAX_LOSS
    at the busy level, and the same greedy tokens as the graph as it was (`reference`)."""
    if candidate.error or candidate.tokens != reference.tokens:
        return False
    return candidate.one_stream > best.one_stream * (1 + MIN_GAIN) and candidate.busy >= best.busy * (1 - MAX_LOSS)
