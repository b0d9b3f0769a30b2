"""The benchmark workload: concurrency levels, lengths, and prompts of an exact token count.

Prompts are built from the model's own vocabulary: whole words that are single tokens with their
leading space (" the", " value", ...). A byte-level BPE tokenizer splits text at spaces before
merging, so N such words encode to exactly N tokens; every prompt is re-encoded and checked anyway,
and the raw baseline is given those very ids. Each request gets different words, so a server's
prefix cache cannot turn the benchmark into a cache benchmark.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

__all__ = ["Prompt", "Workload", "build_prompts", "default_requests", "prompt_words"]

_WORD = re.compile(r"^ [A-Za-z]{2,12}$")
MIN_WORDS = 16


@dataclass(frozen=True)
class Workload:
    """What each concurrency level runs: greedy decoding, `ignore_eos`, fixed lengths."""

    concurrency: tuple[int, ...]
    prompt_tokens: int
    output_tokens: int
    requests: tuple[int, ...]
    """Requests per level, same order as `concurrency`."""

    def as_dict(self) -> dict[str, object]:
        return {
            "concurrency": list(self.concurrency),
            "requests": list(self.requests),
            "prompt_tokens": self.prompt_tokens,
            "output_tokens": self.output_tokens,
            "sampling": "greedy",
            "ignore_eos": True,
            "stream": True,
        }


def default_requests(concurrency: int) -> int:
    """Four rounds of the level's concurrency, and never fewer than 8 requests."""
    return max(8, 4 * concurrency)


@dataclass(frozen=True)
class Prompt:
    """A prompt string and the token ids it encodes to (without special tokens)."""

    text: str
    ids: tuple[int, ...]


def prompt_words(vocab: Mapping[str | bytes, int], encode: Callable[[str], list[int]]) -> list[str]:
    """Vocabulary entries that are a space plus a plain word and encode back to just themselves."""
    words = []
    for piece, token_id in sorted(vocab.items(), key=lambda item: item[1]):
        text = piece.decode("utf-8", "replace") if isinstance(piece, bytes) else piece
        if _WORD.match(text) and encode(text) == [token_id]:
            words.append(text)
    if len(words) < MIN_WORDS:
        raise ValueError(
            f"the tokenizer has only {len(words)} single-token words (need {MIN_WORDS}) to build prompts from"
        )
    return words


def build_prompts(
    count: int, length: int, *, words: list[str], encode: Callable[[str], list[int]], seed: int = 0
) -> list[Prompt]:
    """`count` distinct prompts of exactly `length` tokens; ValueError if the tokenizer disagrees."""
    rng = random.Random(seed)
    prompts = []
    for _ in range(count):
        chosen = rng.choices(words, k=length)
        # Some tokenizers merge across words after all (SentencePiece-style): trim or extend a few
        # times before giving up.
        for _ in range(8):
            text = "".join(chosen)
            ids = encode(text)
            if len(ids) == length:
                break
            chosen = (
                chosen[: length - (len(ids) - length)]
                if len(ids) > length
                else chosen + rng.choices(words, k=length - len(ids))
            )
        else:
            raise ValueError(f"could not build a prompt of exactly {length} tokens with this tokenizer")
        prompts.append(Prompt(text=text, ids=tuple(ids)))
    return prompts
