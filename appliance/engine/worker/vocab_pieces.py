"""The vocabulary's own pieces, read from the model's files: what Hugging Face's
`convert_ids_to_tokens` gives (and so vLLM's `/tokenize` with `return_token_strs`).

OpenVINO's tokenizer gives each token's bytes (`get_vocab`), not its piece, and the bytes alone do
not tell how the vocabulary writes them: " is" is `Ġis` in a byte-level BPE vocabulary (GPT-2's
byte alphabet), `▁is` in a SentencePiece one, and a WordPiece continuation is `##is`. The pieces
are in the files the tokenizer was made from:

- an OpenVINO IR folder holds the Hugging Face `tokenizer.json` it was exported with (`model.vocab`:
  piece -> id for BPE, WordPiece and WordLevel, [piece, score] by id for Unigram; `added_tokens`);
- a GGUF file holds them as `tokenizer.ggml.tokens`, written by llama.cpp's converter from the same
  vocabulary.

Guessing from the bytes was wrong for SmolLM2: its byte-level vocabulary lacks 21 of the 256 single
bytes (six control characters, 0xC0, 0xC1, 0xF1, 0xF2, 0xF5 to 0xFF: bytes text rarely or never
holds), so the test "every byte is a token" took it for SentencePiece and gave `▁is`.
"""

from __future__ import annotations

import json
from pathlib import Path

from appliance.graphfiles.gguf import GGUFError, read_header

__all__ = ["vocabulary_pieces"]

_GGUF_TOKENS = "tokenizer.ggml.tokens"


def vocabulary_pieces(model: Path) -> dict[int, str] | None:
    """Token id -> piece for the model at `model` (an IR folder or a GGUF file); None when its files
    do not hold them (a folder without `tokenizer.json`, an unreadable file)."""
    if model.is_file():
        try:
            tokens = read_header(model, whole=(_GGUF_TOKENS,)).metadata.get(_GGUF_TOKENS)
        except GGUFError:
            return None
        return dict(enumerate(tokens)) if isinstance(tokens, tuple) else None
    try:
        data = json.loads((model / "tokenizer.json").read_bytes())
    except (OSError, ValueError):
        return None
    return _tokenizer_json_pieces(data) if isinstance(data, dict) else None


def _tokenizer_json_pieces(data: dict) -> dict[int, str] | None:
    model = data.get("model")
    vocab = model.get("vocab") if isinstance(model, dict) else None
    pieces: dict[int, str] = {}
    if isinstance(vocab, dict):
        pieces = {token: piece for piece, token in vocab.items() if isinstance(token, int)}
    elif isinstance(vocab, list):  # Unigram: [piece, score], the id is the place
        pieces = {
            token: entry[0]
            for token, entry in enumerate(vocab)
            if isinstance(entry, list) and entry and isinstance(entry[0], str)
        }
    for added in data.get("added_tokens") or ():
        if isinstance(added, dict) and isinstance(added.get("id"), int) and isinstance(added.get("content"), str):
            pieces[added["id"]] = added["content"]
    return pieces or None
