"""Every demo model by name (`RECIPES`), and what makes a built model current (`fingerprint`).

A demo is a `recipe_types.DemoRecipe`: a model spec, its tokenizer and its serving graph. Two kinds of
model: random-weight networks built and exported here (`random_specs`), and trained models shipped
in Python packages on the package registry (`packaged_specs`); tokenizers and chat templates are
`tokenizer_specs`. The demos themselves live by family: `chat_recipes`, `vision_recipes`,
`retrieval_recipes`, `speech_recipes` (speech to text), `tts_recipes` (text to speech) and
`bench_recipes`.

These modules only describe models; building them lives in `export` (heavy imports), `whisper`
(the speech models, with `ct2` reading CTranslate2 files), `tts`, `packaged` (files from installed
packages), `random_gguf` with `gguf_writer` and `gguf_ir` (the GGUF bench model and its IR) and
`builder` (caching and file layout) beside it. Adding a demo model means adding one `DemoRecipe`
to its family's module and to `RECIPES`; a recipe's parameters form its fingerprint, so changing
any of them makes the next `build_demo` rebuild that model.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from .bench_recipes import DEMO_1B, DEMO_1B_IR, DEMO_BENCH
from .chat_recipes import DEMO_CHAT, DEMO_LONG, DEMO_LOOKUP, DEMO_SMOL, DEMO_SPEC
from .random_specs import GGUFToIRSpec
from .recipe_types import BUILDER_VERSION, DemoRecipe
from .retrieval_recipes import DEMO_EMBED, DEMO_RERANK
from .speech_recipes import DEMO_WHISPER, DEMO_WHISPER_MULTI
from .tts_recipes import DEMO_TTS, DEMO_VOICE
from .vision_recipes import DEMO_VISION

RECIPES: dict[str, DemoRecipe] = {
    recipe.name: recipe
    for recipe in (
        DEMO_CHAT,
        DEMO_VISION,
        DEMO_SMOL,
        DEMO_EMBED,
        DEMO_RERANK,
        DEMO_WHISPER,
        DEMO_WHISPER_MULTI,
        DEMO_TTS,
        DEMO_VOICE,
        DEMO_SPEC,
        DEMO_LOOKUP,
        DEMO_BENCH,
        DEMO_1B,
        DEMO_LONG,
        DEMO_1B_IR,
    )
}


def get_recipe(name: str) -> DemoRecipe:
    """The recipe called `name`; ValueError naming the known demos otherwise."""
    try:
        return RECIPES[name]
    except KeyError:
        known = ", ".join(sorted(RECIPES))
        raise ValueError(f"unknown demo model {name!r}; known: {known}") from None


def fingerprint(recipe: DemoRecipe) -> dict[str, Any]:
    """Everything that determines the built model files (not the graph, which is cheap to rewrite);
    a model made from another demo's includes that demo's fingerprint (looked up in `RECIPES`,
    hence a function here rather than a method of `DemoRecipe`)."""
    model = recipe.model
    return {
        "builder": BUILDER_VERSION,
        "name": recipe.name,
        "tokenizer": asdict(recipe.tokenizer) if recipe.tokenizer else None,
        "model": {"kind": type(model).__name__, **asdict(model)} if model else None,
        **({"source": fingerprint(get_recipe(model.source))} if isinstance(model, GGUFToIRSpec) else {}),
    }


__all__ = ["RECIPES", "fingerprint", "get_recipe"]
