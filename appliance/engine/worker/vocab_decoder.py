"""Decoding generated ids in Python, for tokenizers whose text is the concatenation of each token's
bytes (byte-level BPE: GPT-2, Llama 3, Qwen, SmolLM, the demo models).

Each `Tokenizer.decode` call is an OpenVINO inference: measured on demo-chat at 16 streams, the one
call a step made took 0.23 ms of a 1.8 ms engine step (the step itself about 1.1 ms). Joining the
tokens' bytes from a table costs a few microseconds a step. The table is used only for a tokenizer
whose own decoder gives the very same text: checked at load, token by token over the whole
vocabulary with and without special tokens, and on random sequences (which cut UTF-8 characters
and put special tokens mid-text). Any difference (SentencePiece's leading space, clean-up of spaces
before punctuation, a token the vocabulary lists without its bytes) keeps OpenVINO's decoder.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

__all__ = ["VocabDecoder"]

_SAMPLES = 128
_SAMPLE_LENGTH = 24


class VocabDecoder:
    """`decode(batch, skip_special_tokens=...)` like `openvino_genai.Tokenizer.decode` on a batch."""

    def __init__(self, token_bytes: Sequence[bytes], special: frozenset[int], errors: str = "replace") -> None:
        self._bytes = list(token_bytes)
        self._plain = [b"" if token in special else raw for token, raw in enumerate(self._bytes)]
        self._errors = errors
        """What becomes of bytes that are not UTF-8: U+FFFD ("replace", the tokenizers converted
        by openvino_tokenizers) or nothing ("ignore", those OpenVINO GenAI builds from a GGUF
        file); the one that gives the tokenizer's text is chosen."""

    @classmethod
    def verified(cls, tokenizer: Any) -> VocabDecoder | None:
        """A decoder giving exactly what `tokenizer.decode` gives, or None if it would not."""
        vocab = tokenizer.get_vocab()
        size = max(vocab.values(), default=-1) + 1
        if size == 0 or len(vocab) != size:
            return None  # ids the vocabulary does not list
        token_bytes = [b""] * size
        for raw, token in vocab.items():
            token_bytes[token] = raw.encode("utf-8") if isinstance(raw, str) else bytes(raw)
        singles = [[token] for token in range(size)]
        with_special = tokenizer.decode(singles, skip_special_tokens=False)
        without_special = tokenizer.decode(singles, skip_special_tokens=True)
        special = frozenset(token for token, text in enumerate(without_special) if text != with_special[token])
        if any(text for token, text in enumerate(without_special) if token in special):
            return None  # a special token that leaves part of its text
        rng = random.Random(0)
        samples = [[rng.randrange(size) for _ in range(_SAMPLE_LENGTH)] for _ in range(_SAMPLES)]
        expected = {skip: tokenizer.decode(samples, skip_special_tokens=skip) for skip in (False, True)}
        for errors in ("replace", "ignore"):
            decoder = cls(token_bytes, special, errors)
            if all(
                decoder.decode(singles, skip_special_tokens=skip) == (without_special if skip else with_special)
                and decoder.decode(samples, skip_special_tokens=skip) == expected[skip]
                for skip in (False, True)
            ):
                return decoder
        return None

    def decode(self, batch: Sequence[Sequence[int]], *, skip_special_tokens: bool) -> list[str]:
        table = self._plain if skip_special_tokens else self._bytes
        errors = self._errors
        return [b"".join([table[token] for token in ids]).decode("utf-8", errors) for ids in batch]
