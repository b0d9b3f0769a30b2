"""The OpenVINO CPU properties a graph's `plugin_config` may tune, with the values the CPU plugin of
OpenVINO 2026.4 accepts (from its own refusals, e.g. "Supported values: u8, u4, u3, bf16, f16,
f32"). Checked when the graph loads, so a wrong value is an error naming the file and the key, not
an engine that fails to compile minutes later; keys not listed here pass to the plugin unchecked.
Other devices' plugins accept other values: only CPU graphs are checked.
"""

from __future__ import annotations

__all__ = ["check_cpu_properties"]

_PRECISIONS = ("u8", "u4", "u3", "bf16", "f16", "f32")
_CHOICES: dict[str, tuple[str, ...]] = {
    "KV_CACHE_PRECISION": _PRECISIONS,
    "KEY_CACHE_PRECISION": _PRECISIONS,
    "VALUE_CACHE_PRECISION": _PRECISIONS,
    "INFERENCE_PRECISION_HINT": ("bf16", "f16", "f32"),
    "PERFORMANCE_HINT": ("LATENCY", "THROUGHPUT", "CUMULATIVE_THROUGHPUT"),
}
_COUNTS = (
    "DYNAMIC_QUANTIZATION_GROUP_SIZE",  # 0 turns dynamic quantization of activations off
    "KEY_CACHE_GROUP_SIZE",
    "VALUE_CACHE_GROUP_SIZE",
    "INFERENCE_NUM_THREADS",  # 0: OpenVINO decides
)
_SWITCHES = ("ENABLE_CPU_PINNING", "ENABLE_HYPER_THREADING")


def check_cpu_properties(config: dict[str, object]) -> str | None:
    """Why `config` cannot run on the CPU plugin (naming the key), None when it can."""
    for key, value in config.items():
        if key in _CHOICES and value not in _CHOICES[key]:
            return f"`plugin_config.{key}` is {value!r}; the CPU takes one of {', '.join(_CHOICES[key])}"
        if key in _COUNTS and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            return f"`plugin_config.{key}` is {value!r}; it takes a whole number, 0 or more"
        if key in _SWITCHES and not isinstance(value, bool):
            return f"`plugin_config.{key}` is {value!r}; it takes true or false"
    # Measured on a bf16 CPU: the paged-attention kernel then computes in bf16 and refuses an f32
    # KV cache at compile time ("expect kvcache type bf16, current: f32").
    if "f32" in (config.get("KV_CACHE_PRECISION"), config.get("KEY_CACHE_PRECISION")) and (
        config.get("INFERENCE_PRECISION_HINT") != "f32"
    ):
        return (
            '`plugin_config.KV_CACHE_PRECISION` "f32" needs `INFERENCE_PRECISION_HINT = "f32"` too: where the '
            "CPU computes in bf16 (its default on CPUs with bf16) the pipeline refuses an f32 KV cache"
        )
    return None
