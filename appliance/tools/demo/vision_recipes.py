"""The vision-language demo: demo-vision, a tiny random-weight Qwen2-VL (images of up to 224x224 pixels)."""

from __future__ import annotations

from .random_specs import QwenVLSpec
from .recipe_types import LOCAL_NOTE, DemoRecipe, GraphSpec
from .tokenizer_specs import VISION_CHAT_TEMPLATE, VISION_SPECIAL_TOKENS, TokenizerSpec

DEMO_VISION = DemoRecipe(
    name="demo-vision",
    tokenizer=TokenizerSpec(
        vocab_size=4096,
        model_max_length=4096,
        stdlib_files=60,
        extra_special_tokens=("<|im_start|>", "<|endoftext|>", *VISION_SPECIAL_TOKENS),
        chat_template=VISION_CHAT_TEMPLATE,
    ),
    # The smallest Qwen2-VL OpenVINO GenAI runs (~0.85 M parameters); images of up to
    # 224x224 pixels after resizing, so at most 64 tokens each.
    model=QwenVLSpec(
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=128,
        max_position_embeddings=4096,
        mrope_section=(2, 3, 3),
        vision_depth=2,
        vision_embed_dim=64,
        vision_num_heads=4,
        seed=0,
    ),
    graph=GraphSpec(
        description=f"a tiny random-weight vision-language model (Qwen2-VL) {LOCAL_NOTE}",
        cache_size=1,
        max_num_seqs=64,
        max_num_batched_tokens=2048,
        max_tokens_limit=1024,
        pipeline="VLM_CB",
        plugin_config={"INFERENCE_PRECISION_HINT": "f32"},
        limits={"max_images_per_request": 8, "max_image_pixels": 16_777_216},
    ),
)


__all__ = ["DEMO_VISION"]
