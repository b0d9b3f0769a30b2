"""Benchmark demos, not in the default set: demo-bench (shaped like Qwen2.5-0.5B), demo-1b (shaped like
Llama-3.2-1B, written straight to a GGUF file on SmolLM2's tokenizer) and demo-1b-ir (that GGUF as
OpenVINO IR, written by OpenVINO GenAI's own reader).
"""

from __future__ import annotations

from .chat_recipes import SMOLLM2
from .random_specs import CausalLMSpec, GGUFToIRSpec, RandomGGUFSpec
from .recipe_types import LOCAL_NOTE, DemoRecipe, GraphSpec
from .tokenizer_specs import TokenizerSpec

# Llama-3.2-1B's shape (hidden 2048, 16 layers, 32 heads over 8 KV heads, MLP 8192, tied
# embeddings) on SmolLM2's 49,152-token vocabulary: 1.07 B parameters, a 0.66 GB file. Random Q4_0
# weights scaled so every projection's output has about unit variance: activations stay finite.
BENCH_1B = RandomGGUFSpec(
    file="demo-1b.Q4_0.gguf",
    tokenizer_from=SMOLLM2,
    hidden_size=2048,
    num_hidden_layers=16,
    num_attention_heads=32,
    num_key_value_heads=8,
    intermediate_size=8192,
    context_length=4096,
    rope_theta=500_000.0,
    rms_norm_eps=1e-5,
)
# demo-smol's serving settings (prefix caching too, so the two compare), with 2 GB of KV cache: a
# token takes 64 KiB in f32 here (16 layers x 8 KV heads x 64 x keys and values), 45 KiB in demo-smol.
_BENCH_1B_SCHEDULER = dict(
    cache_size=2, max_num_seqs=16, max_num_batched_tokens=512, max_tokens_limit=1024, enable_prefix_caching=True
)


DEMO_BENCH = DemoRecipe(
    name="demo-bench",
    # A bigger vocabulary wants more text: 150 stdlib files instead of 60.
    tokenizer=TokenizerSpec(vocab_size=8192, model_max_length=4096, stdlib_files=150),
    # Qwen2.5-0.5B's shape (~365 M parameters with this vocabulary): compute-bound like a
    # real small chat model, for benchmarks.
    model=CausalLMSpec(
        architecture="qwen2",
        hidden_size=896,
        num_hidden_layers=24,
        num_attention_heads=14,
        num_key_value_heads=2,
        intermediate_size=4864,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        seed=0,
    ),
    graph=GraphSpec(
        description=("a random-weight model shaped like Qwen2.5-0.5B, for benchmarks; " + LOCAL_NOTE),
        cache_size=2,
        max_num_seqs=64,
        max_num_batched_tokens=256,
        max_tokens_limit=2048,
    ),
)


DEMO_1B = DemoRecipe(
    name="demo-1b",
    model=BENCH_1B,
    graph=GraphSpec(
        description=(
            "a random-weight model shaped like Llama-3.2-1B (GGUF Q4_0, SmolLM2's tokenizer), for "
            "benchmarks against llama.cpp on the same file; " + LOCAL_NOTE
        ),
        **_BENCH_1B_SCHEDULER,
    ),
)


DEMO_1B_IR = DemoRecipe(
    name="demo-1b-ir",
    model=GGUFToIRSpec(source="demo-1b"),
    graph=GraphSpec(
        description=(
            "demo-1b's GGUF as OpenVINO IR, written by OpenVINO GenAI's own GGUF reader (the same "
            "int4 weights), for benchmarks; " + LOCAL_NOTE
        ),
        **_BENCH_1B_SCHEDULER,
    ),
)


__all__ = ["BENCH_1B", "DEMO_1B", "DEMO_1B_IR", "DEMO_BENCH"]
