"""The vocabulary's own pieces (`/tokenize` with `return_token_strs`), read from the model's files:
a GGUF file's `tokenizer.ggml.tokens`, an IR folder's `tokenizer.json`; guessed from the bytes only
for a model with neither."""

from __future__ import annotations

import json
from pathlib import Path

from appliance.engine.worker.outputs import TokenTexts
from appliance.engine.worker.vocab_pieces import vocabulary_pieces
from tests.unit.test_gguf import gguf_bytes, llama_metadata


class _Tokenizer:
    """The part of OpenVINO's tokenizer `TokenTexts` reads: each token's bytes, by id."""

    def __init__(self, vocab: dict[bytes, int]) -> None:
        self._vocab = vocab

    def get_vocab(self) -> dict[bytes, int]:
        return self._vocab


def test_a_gguf_files_tokens_are_its_pieces(tmp_path: Path) -> None:
    model = tmp_path / "m.gguf"
    model.write_bytes(gguf_bytes(llama_metadata(**{"tokenizer.ggml.tokens": ["This", "Ġis", "<|im_end|>"]}), []))
    assert vocabulary_pieces(model) == {0: "This", 1: "Ġis", 2: "<|im_end|>"}
    (tmp_path / "broken.gguf").write_bytes(b"GGUF\x03")
    assert vocabulary_pieces(tmp_path / "broken.gguf") is None


def test_tokenizer_json_pieces_for_bpe_wordpiece_and_unigram(tmp_path: Path) -> None:
    bpe = {"model": {"type": "BPE", "vocab": {"This": 0, "Ġis": 1}}, "added_tokens": [{"id": 2, "content": "<s>"}]}
    (tmp_path / "tokenizer.json").write_text(json.dumps(bpe))
    assert vocabulary_pieces(tmp_path) == {0: "This", 1: "Ġis", 2: "<s>"}
    unigram = {"model": {"type": "Unigram", "vocab": [["<unk>", 0.0], ["▁is", -3.5]]}, "added_tokens": []}
    (tmp_path / "tokenizer.json").write_text(json.dumps(unigram))
    assert vocabulary_pieces(tmp_path) == {0: "<unk>", 1: "▁is"}
    (tmp_path / "tokenizer.json").write_text("{not json")
    assert vocabulary_pieces(tmp_path) is None
    assert vocabulary_pieces(tmp_path / "absent") is None


def test_pieces_come_from_the_files_before_any_guess(tmp_path: Path) -> None:
    # SmolLM2's case: byte-level BPE, but not every single byte is a token of its own, so the
    # guess from the bytes alone says SentencePiece.
    vocab = {b"This": 0, b" is": 1, b"a": 2}
    guessed = TokenTexts(_Tokenizer(vocab))
    assert guessed.piece(1) == "\u2581is"
    (tmp_path / "tokenizer.json").write_text(json.dumps({"model": {"vocab": {"This": 0, "Ġis": 1}}}))
    read = TokenTexts(_Tokenizer(vocab), tmp_path)
    assert [read.piece(token) for token in (0, 1)] == ["This", "Ġis"]
    assert read.piece(2) == "a"  # an id the file does not list: guessed as before
