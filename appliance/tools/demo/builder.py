"""`build_demo`: build demo models into a root directory, skipping those already current.

Layout under `root`:
    models/<name>/          OpenVINO IR + tokenizer IRs + HF tokenizer/config files + stamp,
                            or a GGUF file (linked from its Python package, or written here) + stamp
    graphs/<name>.toml      serving graph; its model_path is relative to graphs/
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path

from . import packaged, store
from .export import build_model, key_files  # light at import: torch & co. load inside its functions
from .graph import write_graph
from .packaged_specs import (
    PackagedEncoderSpec,
    PackagedFileSpec,
    PackagedGGUFSpec,
    PackagedVoiceSpec,
    PackagedWhisperSpec,
)
from .random_specs import GGUFToIRSpec, RandomGGUFSpec
from .recipe_types import DemoRecipe
from .recipes import fingerprint, get_recipe

DEFAULT_DEMOS = ("demo-chat", "demo-vision", "demo-smol", "demo-embed", "demo-rerank", "demo-whisper", "demo-voice")
"""What `appliance demo DIR` (and so `./run.sh`) builds. The retrieval pair adds about 15 s to a
first build on 2 cores: all-MiniLM-L6-v2 exported from its wheel, a tiny random cross-encoder;
demo-voice nothing measurable (a hard link and a checksum of its 7.9 MB ONNX file)."""


def build_demo(
    root: Path,
    names: Sequence[str] = DEFAULT_DEMOS,
    *,
    force: bool = False,
    log: Callable[[str], None] = print,
) -> list[Path]:
    """Build the named demo models under `root` and write their graphs.

    A model whose stamp matches its recipe (and whose key files exist) is left alone, so re-running
    is cheap; `force=True` rebuilds the named models (not the ones they merely depend on).
    Returns the graph paths of `names` (of those that have a graph), in order. Raises ValueError
    for an unknown name, and `packaged.MissingPackageError` (a ValueError) for a model whose
    package is not installed, before building anything.
    """
    root = Path(root)
    if isinstance(names, str):  # a lone name, not a sequence of one-letter names
        names = (names,)
    requested = [get_recipe(n) for n in dict.fromkeys(names)]
    models_dir, graphs_dir = root / "models", root / "graphs"

    requested_names = {r.name for r in requested}
    plan = [(r, force and r.name in requested_names) for r in _with_dependencies(requested) if r.model is not None]
    # A missing package is said at once, not after minutes of building the other demos.
    for recipe, rebuild in plan:
        if rebuild or not _is_current(recipe, models_dir):
            for source in _package_sources(recipe):
                packaged.locate(recipe.name, source)
    for recipe, rebuild in plan:
        _ensure_model(recipe, models_dir, force=rebuild, log=log)

    paths = []
    for recipe in requested:
        if recipe.graph is None:
            log(f"{recipe.name}: a model only, no graph")
            continue
        path, written = write_graph(recipe, graphs_dir, models_dir)
        if written:
            log(f"{recipe.name}: wrote {path}")
        paths.append(path)
    return paths


def _with_dependencies(recipes: Sequence[DemoRecipe]) -> list[DemoRecipe]:
    """`recipes` preceded by the demos whose models their graphs use, each once."""
    ordered: dict[str, DemoRecipe] = {}

    def visit(recipe: DemoRecipe, path: tuple[str, ...]) -> None:
        if recipe.name in path:
            raise ValueError(f"demo recipes depend on each other in a cycle: {' -> '.join(path)}")
        for dep in recipe.requires():
            visit(get_recipe(dep), (*path, recipe.name))
        ordered.setdefault(recipe.name, recipe)

    for recipe in recipes:
        visit(recipe, ())
    return list(ordered.values())


def _package_sources(
    recipe: DemoRecipe,
) -> tuple[PackagedGGUFSpec | PackagedEncoderSpec | PackagedWhisperSpec | PackagedFileSpec, ...]:
    """The installed packages a build of the recipe's model reads."""
    if isinstance(recipe.model, PackagedWhisperSpec) and recipe.model.vad is not None:
        return (recipe.model, recipe.model.vad)
    if isinstance(recipe.model, PackagedGGUFSpec | PackagedEncoderSpec | PackagedWhisperSpec):
        return (recipe.model,)
    if isinstance(recipe.model, RandomGGUFSpec):
        return (recipe.model.tokenizer_from,)
    if isinstance(recipe.model, PackagedVoiceSpec):
        return (recipe.model.voice,)
    return ()


def _is_current(recipe: DemoRecipe, models_dir: Path) -> bool:
    """Whether `models_dir/<name>` holds a finished build of the recipe (stat calls only)."""
    assert recipe.model is not None
    sizes = {recipe.model.file: recipe.model.size} if isinstance(recipe.model, PackagedGGUFSpec) else None
    if not store.is_current(models_dir / recipe.name, fingerprint(recipe), key_files(recipe.model), sizes):
        return False
    if isinstance(recipe.model, GGUFToIRSpec):  # a GGUF file rebuilt since (`--force`) makes a new IR
        return _newer(models_dir / recipe.name / store.STAMP_NAME, _source_gguf(recipe.model, recipe.name, models_dir))
    return True


def _source_gguf(model: GGUFToIRSpec, name: str, models_dir: Path) -> Path:
    """The GGUF file an IR recipe is made from."""
    source = get_recipe(model.source)
    if not isinstance(source.model, RandomGGUFSpec | PackagedGGUFSpec):
        raise ValueError(f"{name}: {model.source} has no GGUF file to make IR from")
    return models_dir / source.name / source.model.file


def _newer(path: Path, than: Path) -> bool:
    try:
        return path.stat().st_mtime_ns >= than.stat().st_mtime_ns
    except OSError:
        return False


def _ensure_model(recipe: DemoRecipe, models_dir: Path, *, force: bool, log: Callable[[str], None]) -> Path:
    """Make `models_dir/<name>` a current build of the recipe; returns its path."""
    assert recipe.model is not None
    target = models_dir / recipe.name
    with store.build_lock(models_dir, recipe.name):
        if not force and _is_current(recipe, models_dir):
            log(f"{recipe.name}: up to date ({target})")
            return target
        store.remove_leftovers(models_dir, recipe.name)
        if target.exists():
            log(f"{recipe.name}: {'rebuilding (forced)' if force else 'rebuilding (recipe changed or files missing)'}")
        t0 = time.perf_counter()
        with store.staging_dir(models_dir, recipe.name) as staging:
            out = staging / "model"
            out.mkdir()
            _build(recipe, out, staging, models_dir, log)
            seconds = round(time.perf_counter() - t0, 1)
            store.write_stamp(out, fingerprint(recipe), build_seconds=seconds)  # last: marks the build complete
            store.install(out, target)
        size_mb = store.directory_size(target) / 1e6
        log(f"{recipe.name}: built in {seconds:.1f} s, {size_mb:.1f} MB -> {target}")
    return target


def _build(recipe: DemoRecipe, out: Path, staging: Path, models_dir: Path, log: Callable[[str], None]) -> None:
    """Write the recipe's model files into the empty `out` (`staging` takes intermediate files)."""
    model = recipe.model
    if isinstance(model, PackagedGGUFSpec):
        packaged.install(recipe.name, model, out, log)
    elif isinstance(model, PackagedVoiceSpec):
        packaged.install_voice(recipe.name, model, out, log)
    elif isinstance(model, RandomGGUFSpec):
        from . import random_gguf  # numpy: not at CLI start-up

        random_gguf.build(recipe.name, model, out, log)
    elif isinstance(model, GGUFToIRSpec):
        from . import gguf_ir

        gguf_ir.build(recipe.name, _source_gguf(model, recipe.name, models_dir), out, staging, log)
    else:
        build_model(recipe, out, scratch_dir=staging, log=log)
