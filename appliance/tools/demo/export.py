"""Build a demo model's files: train a tokenizer, make random weights, export to OpenVINO IR.

torch / transformers / optimum-intel take seconds to load and are only installed with the `export`
extra, so they are imported inside the functions that use them, never at module import.
"""

from __future__ import annotations

import contextlib
import glob
import io
import json
import logging
import os
import sys
import sysconfig
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from . import packaged
from .packaged_specs import PackagedEncoderSpec, PackagedGGUFSpec, PackagedVoiceSpec, PackagedWhisperSpec
from .random_specs import CausalLMSpec, GGUFToIRSpec, QwenVLSpec, RandomGGUFSpec, SpeechT5Spec
from .recipe_types import DemoRecipe, ModelSpec
from .tokenizer_specs import TokenizerSpec

Log = Callable[[str], None]

# Files a served causal LM directory must hold; also what makes a cached build count as present.
CAUSAL_LM_FILES = (
    "openvino_model.xml",
    "openvino_model.bin",
    "openvino_tokenizer.xml",
    "openvino_tokenizer.bin",
    "openvino_detokenizer.xml",
    "openvino_detokenizer.bin",
    "config.json",
    "generation_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
)

# Files a served vision-language model directory must hold (optimum-intel's image-text-to-text layout).
VLM_FILES = (
    "openvino_language_model.xml",
    "openvino_language_model.bin",
    "openvino_text_embeddings_model.xml",
    "openvino_text_embeddings_model.bin",
    "openvino_vision_embeddings_model.xml",
    "openvino_vision_embeddings_model.bin",
    "openvino_vision_embeddings_merger_model.xml",
    "openvino_vision_embeddings_merger_model.bin",
    "openvino_tokenizer.xml",
    "openvino_tokenizer.bin",
    "openvino_detokenizer.xml",
    "openvino_detokenizer.bin",
    "config.json",
    "generation_config.json",
    "preprocessor_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
)

# Files a served embedding or rerank model directory must hold (optimum-intel's feature-extraction /
# text-classification layout).
ENCODER_FILES = (
    "openvino_model.xml",
    "openvino_model.bin",
    "openvino_tokenizer.xml",
    "openvino_tokenizer.bin",
    "config.json",
)
# sentence-transformers' own description of the model (pooling, normalization, length, prompts):
# the graph's defaults are read from them (`graphfiles.retrieval`), so they travel with the IR.
SENTENCE_TRANSFORMERS_FILES = (
    "modules.json",
    "sentence_bert_config.json",
    "config_sentence_transformers.json",
    "1_Pooling/config.json",
)

# Warning categories the export always emits and that say nothing about our models: torch.jit
# tracing notes (TracerWarning, a subclass of Warning by name only), deprecations inside torch and
# transformers, optimum's implicitly cleaned temporary directories. Anything else is logged.
_EXPECTED_WARNINGS = ("TracerWarning", "DeprecationWarning", "FutureWarning", "ResourceWarning")


def key_files(model: ModelSpec) -> tuple[str, ...]:
    """The files whose presence a finished build of `model` guarantees."""
    if isinstance(model, PackagedGGUFSpec):
        return (model.file,)
    if isinstance(model, CausalLMSpec):
        return CAUSAL_LM_FILES
    if isinstance(model, QwenVLSpec):
        return VLM_FILES
    if isinstance(model, PackagedEncoderSpec):
        return ENCODER_FILES
    if isinstance(model, PackagedWhisperSpec):
        from .whisper import WHISPER_FILES  # numpy and the CTranslate2 reader: not at CLI start-up

        return WHISPER_FILES if model.vad is None else (*WHISPER_FILES, model.vad.name)
    if isinstance(model, SpeechT5Spec):
        from .tts import TTS_FILES

        return TTS_FILES
    if isinstance(model, RandomGGUFSpec):
        return (model.file,)
    if isinstance(model, PackagedVoiceSpec):
        return (model.file, "config.json")
    if isinstance(model, GGUFToIRSpec):
        from .gguf_ir import IR_FILES

        return IR_FILES
    raise TypeError(f"no builder for {type(model).__name__}")


def build_model(recipe: DemoRecipe, out_dir: Path, scratch_dir: Path, log: Log) -> None:
    """Write the served model directory of `recipe` into the (empty) `out_dir`.

    `scratch_dir` receives the intermediate Hugging Face checkpoint; the caller deletes it.
    """
    if isinstance(recipe.model, PackagedEncoderSpec):
        with _quiet_libraries(recipe.name, log) as log:
            _build_encoder(recipe.name, recipe.model, out_dir, scratch_dir, log)
        return
    if isinstance(recipe.model, PackagedWhisperSpec):
        from .whisper import build_whisper

        with _quiet_libraries(recipe.name, log) as log:
            build_whisper(recipe.name, recipe.model, out_dir, scratch_dir, log)
        return
    if isinstance(recipe.model, SpeechT5Spec):
        from .tts import build_tts

        with _quiet_libraries(recipe.name, log) as log:
            build_tts(recipe.name, recipe.model, out_dir, scratch_dir, log)
        return
    if recipe.model is None or recipe.tokenizer is None:
        raise ValueError(f"{recipe.name}: recipe has no model to build")
    with _quiet_libraries(recipe.name, log) as log:
        if isinstance(recipe.model, CausalLMSpec):
            _build_causal_lm(recipe.name, recipe.tokenizer, recipe.model, out_dir, scratch_dir, log)
        elif isinstance(recipe.model, QwenVLSpec):
            _build_qwen_vl(recipe.name, recipe.tokenizer, recipe.model, out_dir, scratch_dir, log)
        else:  # pragma: no cover - a new ModelSpec kind without its branch here
            raise TypeError(f"no builder for {type(recipe.model).__name__}")


def _build_causal_lm(
    name: str, tok_spec: TokenizerSpec, spec: CausalLMSpec, out_dir: Path, scratch_dir: Path, log: Log
) -> None:
    log(f"{name}: training tokenizer ({tok_spec.vocab_size} tokens)")
    tokenizer = train_tokenizer(tok_spec)

    model = make_causal_lm(spec, tokenizer)
    n_params = sum(p.numel() for p in model.parameters())
    log(f"{name}: random {type(model).__name__} with {n_params / 1e6:.1f} M parameters (seed {spec.seed})")
    hf_dir = scratch_dir / "hf"
    model.save_pretrained(hf_dir)
    tokenizer.save_pretrained(hf_dir)
    del model  # the demo-bench weights are 1.5 GB in float32

    log(f"{name}: exporting to OpenVINO IR ({spec.weight_format})")
    export_causal_lm(hf_dir, out_dir, tokenizer, spec.weight_format)
    _verify_causal_lm(name, out_dir, spec.weight_format)


def _build_qwen_vl(
    name: str, tok_spec: TokenizerSpec, spec: QwenVLSpec, out_dir: Path, scratch_dir: Path, log: Log
) -> None:
    log(f"{name}: training tokenizer ({tok_spec.vocab_size} tokens)")
    tokenizer = train_tokenizer(tok_spec)

    model, image_processor = make_qwen_vl(spec, tokenizer)
    n_params = sum(p.numel() for p in model.parameters())
    log(f"{name}: random {type(model).__name__} with {n_params / 1e6:.2f} M parameters (seed {spec.seed})")
    hf_dir = scratch_dir / "hf"
    model.save_pretrained(hf_dir)
    tokenizer.save_pretrained(hf_dir)
    image_processor.save_pretrained(hf_dir)
    del model

    log(f"{name}: exporting to OpenVINO IR ({spec.weight_format})")
    export_vlm(hf_dir, out_dir, image_processor)
    _verify_vlm(name, out_dir, spec)


def _build_encoder(name: str, spec: PackagedEncoderSpec, out_dir: Path, scratch_dir: Path, log: Log) -> None:
    """Export a packaged sentence-transformers model (or a random cross-encoder on its tokenizer)."""
    import shutil

    from optimum.exporters.openvino.convert import export_tokenizer
    from optimum.intel import OVModelForFeatureExtraction, OVModelForSequenceClassification
    from transformers import AutoTokenizer

    source = packaged.locate(name, spec).parent
    tokenizer = AutoTokenizer.from_pretrained(source)
    if spec.random_layers:
        source = scratch_dir / "hf"
        model = make_cross_encoder(spec, tokenizer)
        log(f"{name}: random {type(model).__name__}, {spec.random_layers} layers (seed {spec.seed})")
        model.save_pretrained(source)
        tokenizer.save_pretrained(source)
    log(f"{name}: exporting {source} to OpenVINO IR ({spec.task})")
    model_cls = OVModelForFeatureExtraction if spec.task == "feature-extraction" else OVModelForSequenceClassification
    ov_model = model_cls.from_pretrained(source, export=True, compile=False)
    try:
        ov_model.save_pretrained(out_dir)
    finally:
        _drop_export_tempdir(ov_model)
    tokenizer.save_pretrained(out_dir)
    export_tokenizer(tokenizer, out_dir, task=spec.task)
    for file in SENTENCE_TRANSFORMERS_FILES:
        if (source / file).is_file():
            (out_dir / file).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source / file, out_dir / file)
    missing = [f for f in ENCODER_FILES if not (out_dir / f).is_file()]
    if missing:
        raise RuntimeError(f"{name}: export did not write {', '.join(missing)}")


def make_cross_encoder(spec: PackagedEncoderSpec, tokenizer: Any) -> Any:
    """A randomly initialised BERT cross-encoder (one relevance logit) matching `tokenizer`."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    config = BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=spec.hidden_size,
        num_hidden_layers=spec.random_layers,
        num_attention_heads=4,
        intermediate_size=spec.hidden_size * 2,
        max_position_embeddings=512,
        num_labels=1,
        pad_token_id=tokenizer.pad_token_id,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(spec.seed)
        model = BertForSequenceClassification(config)
    return model.eval()


# --- tokenizer ----------------------------------------------------------------------------------


def corpus_files(stdlib_files: int) -> list[str]:
    """Local training text, in a fixed order so training is deterministic.

    Licence texts are English prose; stdlib modules add code and identifiers. Both exist on any
    machine with Python, so nothing is downloaded.
    """
    files = sorted(glob.glob("/usr/share/common-licenses/*"))
    stdlib = sysconfig.get_paths()["stdlib"]
    files += sorted(glob.glob(os.path.join(stdlib, "*.py")))[:stdlib_files]
    files = [f for f in files if os.path.isfile(f)]
    if not files:
        raise RuntimeError("no local text to train a tokenizer on (no licences, no stdlib sources)")
    return files


def train_tokenizer(spec: TokenizerSpec) -> Any:
    """A byte-level BPE trained on local text, wrapped as a transformers fast tokenizer.

    Byte-level BPE encodes any input without unknown tokens, like the tokenizers of real chat models,
    and openvino_tokenizers converts it. The chat template and special-token ids end up in the
    rt_info of openvino_tokenizer.xml, where openvino_genai reads them.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    specials = [spec.pad_token, spec.bos_token, spec.eos_token, *spec.extra_special_tokens]
    tok = Tokenizer(models.BPE(unk_token=None, byte_fallback=False))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    # No template post-processor: bos comes from the chat template, so encoding a rendered chat with
    # special tokens enabled does not add a second one.
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=spec.vocab_size,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train(corpus_files(spec.stdlib_files), trainer)

    hf = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=spec.bos_token,
        eos_token=spec.eos_token,
        pad_token=spec.pad_token,
        additional_special_tokens=list(spec.extra_special_tokens),
        model_max_length=spec.model_max_length,
        padding_side="left",  # decoder-only convention; optimum's CLI export sets the same
    )
    hf.chat_template = spec.chat_template
    return hf


# --- random model -------------------------------------------------------------------------------


def make_causal_lm(spec: CausalLMSpec, tokenizer: Any) -> Any:
    """A randomly initialised causal LM whose vocabulary and special ids match `tokenizer`."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

    config_cls, model_cls = {
        "llama": (LlamaConfig, LlamaForCausalLM),
        "qwen2": (Qwen2Config, Qwen2ForCausalLM),
    }[spec.architecture]
    special_ids = {
        "bos_token_id": tokenizer.bos_token_id,
        "eos_token_id": tokenizer.eos_token_id,
        "pad_token_id": tokenizer.pad_token_id,
    }
    config = config_cls(
        vocab_size=len(tokenizer),
        hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.num_hidden_layers,
        num_attention_heads=spec.num_attention_heads,
        num_key_value_heads=spec.num_key_value_heads,
        max_position_embeddings=spec.max_position_embeddings,
        tie_word_embeddings=spec.tie_word_embeddings,
        dtype="float32",
        **special_ids,
    )
    # Seed a private RNG state: the weights are reproducible and the caller's torch RNG is untouched.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(spec.seed)
        model = model_cls(config)
    # openvino_genai takes its stop token from generation_config.json: without eos there it would
    # not stop at <|im_end|>.
    for key, value in special_ids.items():
        setattr(model.generation_config, key, value)
    return model.eval()


def make_qwen_vl(spec: QwenVLSpec, tokenizer: Any) -> tuple[Any, Any]:
    """A randomly initialised Qwen2-VL matching `tokenizer`, and its image processor."""
    import torch
    import transformers
    import transformers.models.qwen2_vl as qwen2_vl
    from transformers import Qwen2VLConfig, Qwen2VLForConditionalGeneration

    def token_id(token: str) -> int:
        return int(tokenizer.convert_tokens_to_ids(token))

    special_ids = {
        "bos_token_id": tokenizer.bos_token_id,
        "eos_token_id": tokenizer.eos_token_id,
        "pad_token_id": tokenizer.pad_token_id,
    }
    text = dict(
        vocab_size=len(tokenizer),
        hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.num_hidden_layers,
        num_attention_heads=spec.num_attention_heads,
        num_key_value_heads=spec.num_key_value_heads,
        max_position_embeddings=spec.max_position_embeddings,
        **special_ids,
    )
    rope = {"mrope_section": list(spec.mrope_section), "rope_theta": 1000000.0}
    if int(transformers.__version__.split(".")[0]) >= 5:
        text["rope_parameters"] = {"rope_type": "default", **rope}
    else:  # pragma: no cover - transformers 4.x spelling
        text["rope_scaling"] = {"type": "mrope", "mrope_section": rope["mrope_section"]}
        text["rope_theta"] = rope["rope_theta"]
    vision = dict(
        depth=spec.vision_depth,
        embed_dim=spec.vision_embed_dim,
        hidden_size=spec.hidden_size,  # the merger projects image patches into the text model's width
        num_heads=spec.vision_num_heads,
        in_channels=3,
        patch_size=spec.patch_size,
        spatial_merge_size=spec.spatial_merge_size,
        temporal_patch_size=spec.temporal_patch_size,
    )
    config = Qwen2VLConfig(
        text_config=text,
        vision_config=vision,
        image_token_id=token_id("<|image_pad|>"),
        video_token_id=token_id("<|video_pad|>"),
        vision_start_token_id=token_id("<|vision_start|>"),
        vision_end_token_id=token_id("<|vision_end|>"),
        tie_word_embeddings=False,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(spec.seed)
        model = Qwen2VLForConditionalGeneration(config)
    for key, value in special_ids.items():
        setattr(model.generation_config, key, value)
    # The PIL-based processor needs no torchvision (the fast one does, and it is not installed).
    processor_cls = getattr(qwen2_vl, "Qwen2VLImageProcessorPil", None) or qwen2_vl.Qwen2VLImageProcessor
    image_processor = processor_cls(
        min_pixels=spec.min_pixels,
        max_pixels=spec.max_pixels,
        patch_size=spec.patch_size,
        merge_size=spec.spatial_merge_size,
        temporal_patch_size=spec.temporal_patch_size,
    )
    return model.eval(), image_processor


# --- export -------------------------------------------------------------------------------------


def _quantization_config(weight_format: str) -> Any:
    from optimum.intel import OVWeightQuantizationConfig

    if weight_format == "int8":
        return OVWeightQuantizationConfig(bits=8, sym=False)
    raise ValueError(f"unsupported weight format {weight_format!r}")


def export_causal_lm(hf_dir: Path, out_dir: Path, tokenizer: Any, weight_format: str) -> None:
    """Export a saved HF causal LM to OpenVINO IR with compressed weights, plus both tokenizer IRs.

    `main_export(ov_config=OVConfig(quantization_config=...))` silently leaves the weights in float,
    so the model goes through `OVModelForCausalLM(export=True, quantization_config=...)` and the
    tokenizer through `export_tokenizer`, the two steps `optimum-cli export openvino` performs.
    """
    from optimum.exporters.openvino.convert import export_tokenizer
    from optimum.intel import OVModelForCausalLM

    ov_model = OVModelForCausalLM.from_pretrained(
        hf_dir, export=True, compile=False, quantization_config=_quantization_config(weight_format)
    )
    try:
        ov_model.save_pretrained(out_dir)
    finally:
        _drop_export_tempdir(ov_model)
    tokenizer.save_pretrained(out_dir)
    # NB: export_tokenizer logs and swallows conversion errors; _verify_causal_lm catches those.
    export_tokenizer(tokenizer, out_dir, task="text-generation-with-past")


def export_vlm(hf_dir: Path, out_dir: Path, image_processor: Any) -> None:
    """Export a saved HF vision-language model to OpenVINO IR (one IR per part) plus tokenizers.

    `main_export` leaves the tokenizer out unless asked (`convert_tokenizer=True`), and without
    torchvision it silently skips the image processor: its preprocessor_config.json is written here,
    as without it the pipeline ignores the pixel limits.
    """
    from optimum.exporters.openvino import main_export

    main_export(model_name_or_path=str(hf_dir), output=out_dir, task="image-text-to-text", convert_tokenizer=True)
    image_processor.save_pretrained(out_dir)


def _drop_export_tempdir(ov_model: Any) -> None:
    """Delete the float32 copy optimum exported into a temporary directory.

    optimum keeps that directory alive through a CLASS attribute, so it would otherwise stay on disk
    (1.5 GB for demo-bench) until the next export or the end of the process, and then be removed by
    a finalizer that emits a ResourceWarning at an unpredictable point.
    """
    tmp = getattr(type(ov_model), "_model_save_dir_tempdirectory_instance", None)
    if tmp is not None and hasattr(tmp, "cleanup"):
        tmp.cleanup()


def _verify_causal_lm(name: str, out_dir: Path, weight_format: str) -> None:
    """Fail loudly on the silent failure modes of the export rather than serve a broken model."""
    missing = [f for f in CAUSAL_LM_FILES if not (out_dir / f).is_file()]
    if missing:
        raise RuntimeError(f"{name}: export did not write {', '.join(missing)}")
    if weight_format == "int8" and 'element_type="u8"' not in (out_dir / "openvino_model.xml").read_text():
        raise RuntimeError(f"{name}: export left the weights uncompressed (no u8 constants in the IR)")
    tokenizer_config = json.loads((out_dir / "tokenizer_config.json").read_text())
    vocab = json.loads((out_dir / "tokenizer.json").read_text())["added_tokens"]
    eos_id = next(t["id"] for t in vocab if t["content"] == tokenizer_config["eos_token"])
    for file in ("config.json", "generation_config.json"):
        if json.loads((out_dir / file).read_text()).get("eos_token_id") != eos_id:
            raise RuntimeError(f"{name}: {file} lacks eos_token_id={eos_id}; generation would not stop")


def _verify_vlm(name: str, out_dir: Path, spec: QwenVLSpec) -> None:
    missing = [f for f in VLM_FILES if not (out_dir / f).is_file()]
    if missing:
        raise RuntimeError(f"{name}: export did not write {', '.join(missing)}")
    processor = json.loads((out_dir / "preprocessor_config.json").read_text())
    if processor.get("max_pixels") != spec.max_pixels:
        raise RuntimeError(f"{name}: preprocessor_config.json lacks max_pixels={spec.max_pixels}")
    tokenizer_config = json.loads((out_dir / "tokenizer_config.json").read_text())
    vocab = json.loads((out_dir / "tokenizer.json").read_text())["added_tokens"]
    eos_id = next(t["id"] for t in vocab if t["content"] == tokenizer_config["eos_token"])
    if json.loads((out_dir / "generation_config.json").read_text()).get("eos_token_id") != eos_id:
        raise RuntimeError(f"{name}: generation_config.json lacks eos_token_id={eos_id}; generation would not stop")


# --- keeping the libraries quiet ----------------------------------------------------------------


@contextlib.contextmanager
def _quiet_libraries(name: str, log: Log) -> Iterator[Log]:
    """Silence the progress bars, info logs and known warnings of the export stack.

    Errors still propagate as exceptions; unexpected warnings are passed to `log`; stdout noise
    (nncf's statistics table and progress bar) is replayed through `log` if the build fails.
    Settings are restored afterwards, as this may run inside a longer-lived process.
    Yields a version of `log` that writes to the real stdout (for `log=print`) despite the capture.
    """
    # Nothing may be downloaded: every input is local. Must be set before transformers is imported.
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    stdout, real_stdout = io.StringIO(), sys.stdout

    def passthrough(line: str) -> None:
        with contextlib.redirect_stdout(real_stdout):
            log(line)

    with warnings.catch_warnings(record=True) as caught:
        # Record rather than raise, even under `-W error` (pytest's filterwarnings): a warning raised
        # as an exception in the middle of torch.jit tracing would abort the export.
        warnings.simplefilter("always")
        try:
            import nncf
            from nncf.common.logging import nncf_logger
            from transformers.utils import logging as hf_logging

            hf_verbosity = hf_logging.get_verbosity()
            hf_bars = hf_logging.is_progress_bar_enabled()
            nncf_level = nncf_logger.level
            hf_logging.set_verbosity_error()
            hf_logging.disable_progress_bar()
            nncf.set_log_level(logging.WARNING)
            try:
                with contextlib.redirect_stdout(stdout):
                    yield passthrough
            except BaseException:
                for line in stdout.getvalue().splitlines():
                    passthrough(f"{name}: (output) {line}")
                raise
            finally:
                hf_logging.set_verbosity(hf_verbosity)
                if hf_bars:
                    hf_logging.enable_progress_bar()
                nncf.set_log_level(nncf_level)
        finally:
            _report_warnings(name, caught, passthrough)


def _report_warnings(name: str, caught: list[warnings.WarningMessage], log: Log) -> None:
    seen: set[str] = set()
    for w in caught:
        if w.category.__name__ in _EXPECTED_WARNINGS:
            continue
        text = f"{name}: warning: {w.category.__name__}: {w.message}"
        if text not in seen:
            seen.add(text)
            log(text)
