"""The text-to-speech demo model: a tiny random-weight SpeechT5 with a tiny random HiFi-GAN
vocoder, exported to OpenVINO IR for `openvino_genai.Text2SpeechPipeline`, and its voices.

Random weights: what it says is noise (a hiss whose length follows the text), not speech. It proves
the plumbing (tokenizer, encoder, stateful decoder, postnet, vocoder, speaker embeddings, the HTTP
route and its encoders); a real SpeechT5 export (`optimum-cli export openvino --task text-to-audio
--model-kwargs '{"vocoder": ...}'`) is served the same way.

SpeechT5's own tokenizer is a SentencePiece character model; `sentencepiece` is not installed here,
so the demo's tokenizer is the same idea written with `tokenizer_specs`: one token per printable ASCII
character, `</s>` appended (what SpeechT5Tokenizer does), unknown characters as `<unk>`.
openvino-tokenizers converts it like any fast tokenizer. The export needs the vocoder as a folder
(`model_kwargs={"vocoder": path}`), written beside the checkpoint first.

Two settings make the random model behave: generation_config.json's `minlenratio` (the least
output length per input token: 4.0 gives 64 ms of audio a character, about speech's pace, where the
random stop head would end most texts after one 32 ms decoder step), and the vocoder's output layer scaled up (random HiFi-GAN weights give samples near 1e-9,
silence once written as 16-bit PCM).

torch, transformers and optimum-intel are imported inside the functions that use them.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from .random_specs import SpeechT5Spec

__all__ = ["TTS_FILES", "build_tts", "voice_embedding"]

Log = Callable[[str], None]

# What a served SpeechT5 directory holds (a finished build guarantees them): optimum-intel's
# text-to-audio layout for SpeechT5, which Text2SpeechPipeline reads, and the demo's voices.
TTS_FILES = (
    "openvino_encoder_model.xml",
    "openvino_encoder_model.bin",
    "openvino_decoder_model.xml",
    "openvino_decoder_model.bin",
    "openvino_postnet.xml",
    "openvino_postnet.bin",
    "openvino_vocoder.xml",
    "openvino_vocoder.bin",
    "openvino_tokenizer.xml",
    "openvino_tokenizer.bin",
    "config.json",
    "generation_config.json",
)
_SPECIALS = ("<s>", "<pad>", "</s>", "<unk>")  # SpeechT5Tokenizer's ids 0-3


def voice_embedding(seed: int, size: int) -> np.ndarray:
    """A demo voice: `size` float32 values drawn from a normal distribution seeded by `seed`
    (x-vectors, what real SpeechT5 voices are, are 512 floats of about that spread)."""
    return np.random.default_rng(seed).standard_normal(size).astype("<f4")


def build_tts(name: str, spec: SpeechT5Spec, out_dir: Path, scratch_dir: Path, log: Log) -> None:
    """Write the checkpoint and vocoder into `scratch_dir`, then the OpenVINO IR and the voices
    into `out_dir`."""
    hf_dir, vocoder_dir = scratch_dir / "hf", scratch_dir / "vocoder"
    tokenizer = make_tokenizer()
    model, vocoder = make_speecht5(spec, len(tokenizer))
    model.save_pretrained(hf_dir)
    tokenizer.save_pretrained(hf_dir)
    vocoder.save_pretrained(vocoder_dir)
    del model, vocoder
    log(f"{name}: random SpeechT5, {spec.layers} layers of {spec.hidden_size}, HiFi-GAN vocoder (seed {spec.seed})")
    export_tts(hf_dir, vocoder_dir, out_dir, tokenizer)
    settings_path = out_dir / "generation_config.json"
    settings = json.loads(settings_path.read_text(encoding="utf-8"))
    settings["minlenratio"] = spec.min_length_ratio
    settings_path.write_text(json.dumps(settings, indent=2) + "\n", encoding="utf-8")
    voices = out_dir / "voices"
    voices.mkdir()
    for seed, voice in enumerate(spec.voices):
        voice_embedding(spec.seed + seed, spec.speaker_embedding_dim).tofile(voices / f"{voice}.bin")
    missing = [f for f in TTS_FILES if not (out_dir / f).is_file()]
    if missing:
        raise RuntimeError(f"{name}: export did not write {', '.join(missing)}")


def make_tokenizer() -> Any:
    """A character tokenizer in SpeechT5Tokenizer's shape (see the module docstring)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {token: i for i, token in enumerate(_SPECIALS)}
    for code in range(32, 127):
        vocab[chr(code)] = len(vocab)
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Split("", behavior="isolated")
    tokenizer.post_processor = processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", 2)])
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, bos_token="<s>", pad_token="<pad>", eos_token="</s>", unk_token="<unk>"
    )


def make_speecht5(spec: SpeechT5Spec, vocab_size: int) -> tuple[Any, Any]:
    """A random SpeechT5ForTextToSpeech of `spec`'s shape and a random HiFi-GAN for its mel bins."""
    import torch
    from transformers import SpeechT5Config, SpeechT5ForTextToSpeech, SpeechT5HifiGan, SpeechT5HifiGanConfig

    config = SpeechT5Config(
        vocab_size=vocab_size,
        hidden_size=spec.hidden_size,
        encoder_layers=spec.layers,
        decoder_layers=spec.layers,
        encoder_attention_heads=spec.attention_heads,
        decoder_attention_heads=spec.attention_heads,
        encoder_ffn_dim=spec.hidden_size * 2,
        decoder_ffn_dim=spec.hidden_size * 2,
        speech_decoder_prenet_units=spec.hidden_size,
        speech_decoder_postnet_units=spec.hidden_size,
        speech_decoder_postnet_layers=2,
        speaker_embedding_dim=spec.speaker_embedding_dim,
        num_mel_bins=80,
        reduction_factor=2,
        pad_token_id=1,
        bos_token_id=0,
        eos_token_id=2,
        decoder_start_token_id=2,
    )
    # SpeechT5's HiFi-GAN layout (80 mel bins, 256 samples per frame at 16 kHz), far narrower.
    vocoder_config = SpeechT5HifiGanConfig(
        model_in_dim=80,
        sampling_rate=16_000,
        upsample_initial_channel=32,
        upsample_rates=[4, 4, 4, 4],
        upsample_kernel_sizes=[8, 8, 8, 8],
        resblock_kernel_sizes=[3],
        resblock_dilation_sizes=[[1, 3]],
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(spec.seed)
        model = SpeechT5ForTextToSpeech(config).eval()
        vocoder = SpeechT5HifiGan(vocoder_config).eval()
        with torch.no_grad():
            vocoder.conv_post.weight.mul_(spec.vocoder_gain)
    return model, vocoder


def export_tts(hf_dir: Path, vocoder_dir: Path, out_dir: Path, tokenizer: Any) -> None:
    """optimum-intel's text-to-audio export of SpeechT5 (encoder, stateful decoder, postnet,
    vocoder), then the tokenizer IR. `main_export` writes no tokenizer here: transformers maps
    SpeechT5 to its SentencePiece tokenizer, which cannot load without `sentencepiece`, so the
    fast tokenizer is converted directly."""
    import openvino as ov
    from openvino_tokenizers import convert_tokenizer
    from optimum.exporters.openvino import main_export

    wrapper_log = logging.getLogger("openvino.frontend.pytorch.utils")
    level = wrapper_log.level
    wrapper_log.setLevel(logging.CRITICAL)
    try:
        main_export(
            model_name_or_path=str(hf_dir),
            output=out_dir,
            task="text-to-audio",
            model_kwargs={"vocoder": str(vocoder_dir)},
            convert_tokenizer=False,
        )
    finally:
        wrapper_log.setLevel(level)
    ov.save_model(convert_tokenizer(tokenizer, with_detokenizer=False), out_dir / "openvino_tokenizer.xml")
