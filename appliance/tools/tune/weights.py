"""The weight-format lever of `appliance tune`: the graph's model written again as an OpenVINO IR
with its weights compressed another way, for the CPU's kernels to run faster.

Measured on a 2-core AMD EPYC with AVX2 and no VNNI (demo-smol, SmolLM2-135M, from a Q4_1 GGUF):
about 85% of a decoded token's time is in the fully connected layers (`FullyConnectedCompressed`,
`brgemm_avx2_f32`: the weights decompressed to f32 on the fly), so how the weights are stored
decides the speed more than any plugin property. The same weights as int8 symmetric per channel
decoded 1.15-1.2x faster with the same greedy text; int4 symmetric with groups of 64 faster still,
with a different greedy text (so tune reports it and never chooses it).

A candidate is built from the graph's own model, never downloaded: a GGUF file is read by OpenVINO
GenAI, which writes the model it made of it as IR (`enable_save_ov_model`: `source_ir`), an IR
folder is read as it is; then every decompression subgraph is folded back to f32 weights (`ConstantFolding`) and NNCF
compresses them in the candidate's format. The candidate's folder holds the tokenizer IRs, and for a
GGUF a `config.json` with the context the GGUF declares (the IR has no other place for it).
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

__all__ = ["SOURCE", "WEIGHTS", "WEIGHT_FORMATS", "build_weights", "candidate_dir", "remove_candidate", "source_ir"]

WEIGHTS = "weights"
"""The lever's key in a `Form`'s changes (lower case: no OpenVINO property is spelled so)."""

WEIGHT_FORMATS: dict[str, tuple[str, int | None] | tuple[str, int | None, bool]] = {
    "int8_sym": ("INT8_SYM", None),
    "int8_asym": ("INT8_ASYM", None),
    "int4_sym_g64": ("INT4_SYM", 64),
    "int4_sym_g32": ("INT4_SYM", 32),
    "int4_sym_g128": ("INT4_SYM", 128),
    "int4_asym_g64": ("INT4_ASYM", 64),
    "int4_sym_channel": ("INT4_SYM", -1),
    "int4_sym_channel_all": ("INT4_SYM", -1, True),
}
"""Each format tune may try: NNCF's `CompressWeightsMode` and the group size (None: per channel,
NNCF's default for 8 bits; -1: per channel for 4 bits, which NNCF otherwise groups by 128), and
whether the embedding and output layers are compressed alike (`_all`: NNCF's `all_layers`; without
it NNCF keeps them in 8 bits, and a 49,152-token output layer of a 1B model is then a fifth of a
decoded token's time)."""

SOURCE = "source"
"""The candidate name of a GGUF's own IR (its weights as they are), for the reference perplexity."""
_BUILT = ".appliance-tune.json"
"""Written last into a candidate's folder: a folder without it is an interrupted build."""


def candidate_dir(model: Path, fmt: str, under: Path | None = None) -> Path:
    """Where `model` (a GGUF file or an IR folder) in format `fmt` is written: beside it, or in `under`."""
    stem = model.stem if model.is_file() else model.name
    return (under or model.parent) / f"{stem}-{fmt}"


def build_weights(model: Path, fmt: str, out: Path) -> Path:
    """`model` written to `out` with its weights in `fmt`; reused when `out` holds a finished build
    of the same source and format. Heavy: imports OpenVINO and NNCF; run it in a child process."""
    if _built(out, model, fmt):
        return out
    mode, group, *rest = WEIGHT_FORMATS[fmt]
    _fresh(out)
    import nncf
    import openvino
    from openvino import passes

    started = time.monotonic()
    source = source_ir(model, out.parent)
    ov_model = openvino.Core().read_model(source / "openvino_model.xml")
    folding = passes.Manager()
    folding.register_pass(passes.ConstantFolding())
    folding.run_passes(ov_model)  # decompression subgraphs -> f32 constants
    options = {"mode": getattr(nncf.CompressWeightsMode, mode)}
    if group is not None:
        options.update(group_size=group, ratio=1.0)
    if rest and rest[0]:
        options.update(all_layers=True)
    ov_model = nncf.compress_weights(ov_model, **options)
    openvino.save_model(ov_model, out / "openvino_model.xml", compress_to_fp16=False)
    _copy_beside_model(source, out)
    _done(out, model, fmt)
    print(f"  built {out.name} in {time.monotonic() - started:.0f} s", flush=True)
    return out


def source_ir(model: Path, under: Path) -> Path:
    """The IR of `model` as it is: an IR folder itself; for a GGUF file, the IR OpenVINO GenAI makes
    of it (written next to the file it reads: a link to the file in the candidate's folder, so the
    model's own folder is left alone), with a `config.json` of the context the GGUF declares."""
    if not model.is_file():
        return model
    folder = candidate_dir(model, SOURCE, under)
    if _built(folder, model, SOURCE):
        return folder
    import openvino_genai

    _fresh(folder)
    link = folder / model.name
    link.symlink_to(model.resolve())
    openvino_genai.LLMPipeline(str(link), "CPU", ATTENTION_BACKEND="SDPA", enable_save_ov_model=True)
    link.unlink()
    if not (folder / "openvino_model.xml").is_file():
        raise RuntimeError(f"OpenVINO GenAI wrote no IR for {model}")
    _write_config(model, folder)
    _done(folder, model, SOURCE)
    return folder


def remove_candidate(folder: Path) -> None:
    """Delete a candidate's folder: only one tune wrote (a folder of the user's that happens to
    have a candidate's name is never touched)."""
    if (folder / _BUILT).is_file():
        shutil.rmtree(folder, ignore_errors=True)


def _fresh(folder: Path) -> None:
    """`folder` empty and ready for a build: an earlier, unfinished build of tune's is removed; a
    folder tune did not make is refused."""
    if folder.exists() and any(folder.iterdir()) and not (folder / _BUILT).is_file():
        if not (folder / ".appliance-tune-building").is_file():
            raise RuntimeError(
                f"{folder} exists and is not a folder appliance tune made: move it or pass --weights-dir"
            )
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    (folder / ".appliance-tune-building").touch()


def _marker(model: Path, fmt: str) -> dict[str, str]:
    return {"source": str(model.resolve()), "format": fmt}


def _built(folder: Path, model: Path, fmt: str) -> bool:
    marker = folder / _BUILT
    return marker.is_file() and json.loads(marker.read_text()) == _marker(model, fmt)


def _done(folder: Path, model: Path, fmt: str) -> None:
    (folder / _BUILT).write_text(json.dumps(_marker(model, fmt)))
    (folder / ".appliance-tune-building").unlink(missing_ok=True)


def _copy_beside_model(source: Path, out: Path) -> None:
    """The tokenizer IRs and the model's other files (config.json, generation_config.json, ...)."""
    for item in source.iterdir():
        if item.is_file() and not item.name.startswith(("openvino_model.", ".appliance-tune")):
            shutil.copy2(item, out / item.name)


def _write_config(gguf: Path, out: Path) -> None:
    """The context and architecture the GGUF declares, where an IR folder keeps them."""
    from appliance.graphfiles.gguf import read_header

    header = read_header(gguf)
    config = {"model_type": header.architecture, "max_position_embeddings": header.context_length}
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
