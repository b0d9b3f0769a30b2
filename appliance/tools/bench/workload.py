"""The benchmark workload: its levels (closed-loop concurrency or open-loop arrival rates), lengths,
the arrival schedule, and prompts of an exact token count.

Prompts are built from the model's own vocabulary: whole words that are single tokens with their
leading space (" the", " value", ...). A byte-level BPE tokenizer splits text at spaces before
merging, so N such words encode to exactly N tokens; every prompt is re-encoded and checked anyway,
and the raw baseline is given those very ids. Each request gets different words, so a server's
prefix cache cannot turn the benchmark into a cache benchmark.

A multi-turn workload (`turns` > 1) is the exception that measures that cache on purpose: each
conversation's turn k sends the k user messages of that conversation and the k - 1 answers it got
(`chat_messages`), so only the conversation's own history can be served from the cache. With
`system_tokens`, each conversation opens with a system message of its own of that many tokens:
a coding agent's session replayed (its instructions and tool schemas, 15-20k tokens for Claude
Code, sent again unchanged on every turn, then the turns so far and a new tool result), whose
turns differ from the last only at the end.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

__all__ = [
    "Load",
    "Prompt",
    "Workload",
    "arrival_times",
    "build_prompts",
    "chat_messages",
    "default_requests",
    "prompt_words",
]

_WORD = re.compile(r"^ [A-Za-z]{2,12}$")
MIN_WORDS = 16


@dataclass(frozen=True)
class Load:
    """One level of the benchmark: a closed loop of `concurrency` clients (a new request as soon as
    one ends), or an open loop where requests arrive at `rate` per second whatever happens to them."""

    requests: int
    concurrency: int | None = None
    rate: float | None = None
    """Requests per second, Poisson arrivals (open loop); None: closed loop."""

    @property
    def open_loop(self) -> bool:
        return self.rate is not None

    @property
    def label(self) -> str:
        """`c=4` or `2.5/s`, for tables and progress lines."""
        return f"{self.rate:g}/s" if self.rate is not None else f"c={self.concurrency}"

    @property
    def x(self) -> float:
        """Where the level sits on a plot's axis: its rate or its concurrency."""
        return self.rate if self.rate is not None else float(self.concurrency or 1)

    def as_dict(self) -> dict[str, object]:
        return {"requests": self.requests, "concurrency": self.concurrency, "rate": self.rate}


@dataclass(frozen=True)
class Workload:
    """What each level runs: greedy decoding, `ignore_eos`, fixed lengths; for open-loop levels, the
    arrival schedule (the same offsets for every system measured)."""

    loads: tuple[Load, ...]
    prompt_tokens: int
    output_tokens: int
    seed: int = 0
    turns: int = 1
    """Above 1: each of a level's `requests` is a conversation of this many chat turns (closed loop)."""
    system_tokens: int = 0
    """Multi-turn: the tokens of the system message each conversation opens with (0: none)."""

    def arrivals(self, load: Load) -> list[float] | None:
        """The level's send offsets in seconds (open loop), or None (closed loop)."""
        if load.rate is None:
            return None
        return arrival_times(load.requests, load.rate, seed=self.seed + self.loads.index(load))

    @property
    def mode(self) -> str:
        if self.turns > 1 and self.system_tokens:
            return f"closed loop of {self.turns}-turn conversations after a {self.system_tokens}-token system message"
        if self.turns > 1:
            return f"closed loop of {self.turns}-turn conversations"
        return "open loop (Poisson arrivals)" if any(load.open_loop for load in self.loads) else "closed loop"

    def as_dict(self) -> dict[str, object]:
        return {
            "mode": self.mode,
            "turns": self.turns,
            "system_tokens": self.system_tokens,
            "levels": [load.as_dict() for load in self.loads],
            "prompt_tokens": self.prompt_tokens,
            "output_tokens": self.output_tokens,
            "seed": self.seed,
            "sampling": "greedy",
            "ignore_eos": True,
            "stream": True,
        }


def arrival_times(count: int, rate: float, *, seed: int = 0) -> list[float]:
    """Send offsets (seconds from the start) of `count` requests arriving as a Poisson process of
    `rate` per second: exponential gaps from a seeded generator, the first request at 0, so the
    schedule is the same on every run and for every system."""
    if rate <= 0:
        raise ValueError(f"arrival rate {rate}: must be positive")
    rng = random.Random(seed)
    offsets, now = [], 0.0
    for _ in range(count):
        offsets.append(now)
        now += rng.expovariate(rate)
    return offsets


def default_requests(concurrency: int | None = None, rate: float | None = None) -> int:
    """Closed loop: four rounds of the level's concurrency, never fewer than 8 requests. Open loop:
    ten seconds of arrivals, never fewer than 16."""
    if rate is not None:
        return max(16, math.ceil(10 * rate))
    return max(8, 4 * (concurrency or 1))


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


def chat_messages(users: Sequence[str], answers: Sequence[str], system: str | None = None) -> list[dict[str, str]]:
    """A conversation's messages for its next turn: its system message (if any), each user message
    followed by the answer it got, then the new user message (so one user message more than
    answers). Every turn's messages begin with the last turn's, byte for byte."""
    if len(users) != len(answers) + 1:
        raise ValueError(f"{len(users)} user messages and {len(answers)} answers: expected one answer fewer")
    messages = [] if system is None else [{"role": "system", "content": system}]
    for user, answer in zip(users, answers):
        messages += [{"role": "user", "content": user}, {"role": "assistant", "content": answer}]
    return [*messages, {"role": "user", "content": users[-1]}]
