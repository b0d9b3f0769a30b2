"""One request's generated sequences, from the pipeline's outputs to `Delta`/`Finished` events.

Engine facts this relies on (openvino_genai 2026.4, measured on the demo model):
- `handle.read()` gives `{sequence_id: GenerationOutput}` with the tokens generated since the last
  read. A single sampled or greedy sequence arrives step by step; with several sequences
  (num_return_sequences > 1) or beam search everything arrives once, when the request finishes.
- Beam search returns every beam (not just num_return_sequences): the best `n` by score are kept.
- The end-of-sequence token and a matched `stop_token_ids` token are part of `generated_ids`.

Stop strings: the text ends right after the first stop string to complete (kept with
`include_stop_str_in_output`) or right before it, never at the end of the token holding it. Where
the pipeline matches them (several sequences on LM_CB, see `batching.py`) it only ends generation;
elsewhere (`match_stop_strings`) they are matched here (`stop_strings`, in time linear in the
text), and tokens generated past the match (a step of speculative decoding makes several) are not
counted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from appliance.engine.messages import Delta, Finished, SamplingParams, TokenLogprob
from appliance.engine.worker.stop_strings import StopStringMatcher
from appliance.engine.worker.vocab_decoder import VocabDecoder
from appliance.engine.worker.vocab_pieces import vocabulary_pieces

__all__ = ["RequestOutputs", "TokenTexts"]


def _byte_alphabet() -> dict[int, str]:
    """GPT-2's printable stand-in for each byte, in which byte-level BPE vocabularies are written."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    alphabet, extra = {}, 0
    for byte in range(256):
        if byte in printable:
            alphabet[byte] = chr(byte)
        else:
            alphabet[byte] = chr(256 + extra)
            extra += 1
    return alphabet


_BYTE_ALPHABET = _byte_alphabet()


class TokenTexts:
    """Token id -> (text, bytes) from the tokenizer's vocabulary, for logprobs; and the piece the
    vocabulary writes, for `/tokenize`."""

    def __init__(self, tokenizer: Any, model: Path | None = None) -> None:
        self._tokenizer = tokenizer
        self._model = model
        """The model's folder or GGUF file, whose files hold the vocabulary's pieces."""
        self._bytes: dict[int, bytes] | None = None
        self._pieces: dict[int, str] | None = None
        self._byte_level: bool | None = None
        """Every single byte is a token of its own (byte-level BPE)."""

    @property
    def _vocab(self) -> dict[int, bytes]:
        if self._bytes is None:
            # get_vocab() maps each token's bytes (decoded, not the BPE alphabet) to its id.
            self._bytes = {token: raw for raw, token in self._tokenizer.get_vocab().items()}
        return self._bytes

    def known(self, token_id: int) -> bool:
        return token_id in self._vocab

    def piece(self, token_id: int) -> str:
        """The token as the vocabulary writes it, as Hugging Face's `convert_ids_to_tokens` (and so
        vLLM's `/tokenize`) gives it: read from the model's files (`vocab_pieces`); for a model
        without them, guessed from its bytes: in the GPT-2 byte alphabet (`Ġis`) when every single
        byte is a token, else with SentencePiece's `▁` for a space."""
        if self._pieces is None and self._model is not None:
            # Read on first use (a 150k vocabulary's tokenizer.json: ~0.2 s), never again.
            self._pieces, self._model = vocabulary_pieces(self._model) or {}, None
        piece = (self._pieces or {}).get(token_id)
        if piece is not None:
            return piece
        raw = self._vocab.get(token_id)
        if raw is None:
            return self.entry(token_id, 0.0).token
        if self._byte_level is None:
            self._byte_level = all(bytes([byte]) in self._known_bytes for byte in range(256))
        if self._byte_level:
            return "".join(_BYTE_ALPHABET[byte] for byte in raw)
        return raw.decode("utf-8", "backslashreplace").replace(" ", "\u2581")

    @property
    def _known_bytes(self) -> set[bytes]:
        return set(self._vocab.values())

    @property
    def largest_id(self) -> int:
        return max(self._vocab, default=-1)

    def entry(self, token_id: int, logprob: float) -> TokenLogprob:
        raw = self._vocab.get(token_id)
        if raw is None:
            raw = self._tokenizer.decode([token_id], skip_special_tokens=False).encode()
        # A token holding part of a UTF-8 character shows its bytes as \xNN (as OpenAI does).
        return TokenLogprob(
            token=raw.decode("utf-8", "backslashreplace"), logprob=logprob, bytes=list(raw), id=token_id
        )


# The detokenizer decodes the ids since the last newline: decoding is prefix-stable for the
# byte-level BPE and SentencePiece tokenizers of chat models, except inside a UTF-8 character
# (held back while the text ends in U+FFFD). Unlike TextStreamer, which holds text back about three
# tokens, every token's text leaves in the step that produced it (measured: demo-bench TTFT p50
# 192 -> ~110 ms at concurrency 1).


class Detokenizer:
    """Decodes the windows of every sequence written to in a step with one `Tokenizer.decode` call
    per skip_special_tokens value: each decode is an OpenVINO inference (~60 us), so one call per
    step instead of one per token and sequence (39% of the engine thread at 16 streams)."""

    def __init__(self, tokenizer: Any, vocab_decoder: VocabDecoder | None = None) -> None:
        self._tokenizer = tokenizer
        self._vocab_decoder = vocab_decoder
        """Decodes in Python where it gives the tokenizer's very text (see `vocab_decoder`)."""
        self._pending: dict[int, tuple[_Sequence, bool, bool]] = {}

    def mark(self, sequence: _Sequence, *, skip_special_tokens: bool, final: bool) -> None:
        previous = self._pending.get(id(sequence))
        self._pending[id(sequence)] = (sequence, skip_special_tokens, final or bool(previous and previous[2]))

    def flush(self) -> None:
        pending, self._pending = list(self._pending.values()), {}
        for skip in (True, False):
            group = [
                (sequence, final)
                for sequence, skip_special, final in pending
                if skip_special is skip and sequence.window
            ]
            if not group:
                continue
            texts = self._decode([sequence.window for sequence, _ in group], skip_special_tokens=skip)
            for (sequence, final), text in zip(group, texts):
                sequence.absorb(text, final=final)

    def _decode(self, windows: list[list[int]], *, skip_special_tokens: bool) -> list[str]:
        if self._vocab_decoder is not None:
            try:
                return self._vocab_decoder.decode(windows, skip_special_tokens=skip_special_tokens)
            except IndexError:  # an id past the vocabulary (a model padded beyond its tokenizer)
                pass
        if skip_special_tokens:
            return self._tokenizer.decode(windows, skip_special_tokens=True)
        # A batch pads its shorter windows with the pad token, whose text stays when special
        # tokens are kept ("<|pad|>" after a short window, measured): decode equal lengths together.
        texts = [""] * len(windows)
        by_length: dict[int, list[int]] = {}
        for position, window in enumerate(windows):
            by_length.setdefault(len(window), []).append(position)
        for positions in by_length.values():
            decoded = self._tokenizer.decode([windows[p] for p in positions], skip_special_tokens=False)
            for position, text in zip(positions, decoded):
                texts[position] = text
        return texts


@dataclass
class _Sequence:
    index: int
    chunks: list[str] = field(default_factory=list)
    window: list[int] = field(default_factory=list)
    """Ids since the last newline (the decode window)."""
    window_chars: int = 0
    """Characters of the window's text already emitted."""
    sent: list[str] = field(default_factory=list)
    sent_chars: int = 0
    logprobs: list[TokenLogprob] = field(default_factory=list)
    ids: list[int] = field(default_factory=list)
    """Every id of the text, kept when the request has stop strings (to count tokens up to one)."""
    generated: int = 0
    reported: int = 0
    finish_reason: str | None = None
    stops: StopStringMatcher | None = None
    """Fed every piece of text, where the appliance matches stop strings itself."""

    def absorb(self, text: str, *, final: bool) -> None:
        """Take the decoded window: emit what is new, unless it ends inside a UTF-8 character."""
        # Tokenizer.decode replaces bytes that are not UTF-8 with U+FFFD (constrained generation
        # can produce them), so any output decodes; a trailing U+FFFD may still be completed.
        if text.endswith("\ufffd") and not final:
            return
        if len(text) > self.window_chars:
            piece = text[self.window_chars :]
            self.chunks.append(piece)
            if self.stops is not None:
                self.stops.feed(piece)
        self.window_chars = len(text)
        if text.endswith("\n"):
            self.window, self.window_chars = [], 0

    def take(self, keep: int = 0) -> str:
        """The text not sent yet, but for its last `keep` characters."""
        pending = "".join(self.chunks)
        text, rest = pending[: len(pending) - keep], pending[len(pending) - keep :]
        self.chunks[:] = [rest] if rest else []
        self.sent.append(text)
        self.sent_chars += len(text)
        return text


class RequestOutputs:
    """The sequences of one request, mapped to choice indices 0..n-1."""

    def __init__(
        self,
        genai: Any,
        tokenizer: Any,
        params: SamplingParams,
        texts: TokenTexts,
        eos_token_id: int,
        detokenizer: Detokenizer | None = None,
        *,
        match_stop_strings: bool = False,
    ) -> None:
        self._genai = genai
        self._tokenizer = tokenizer
        self._detokenizer = detokenizer or Detokenizer(tokenizer)
        self._params = params
        self._texts = texts
        self._eos_token_id = eos_token_id
        self._stop_token_ids = set(params.stop_token_ids)
        self._match_stop_strings = match_stop_strings and bool(params.stop)
        self._by_id: dict[int, _Sequence] = {}
        self._beams: dict[int, Any] = {}

    @property
    def generated(self) -> int:
        return sum(sequence.generated for sequence in self._by_id.values())

    def read(self, outputs: dict[int, Any]) -> bool:
        """Take one `handle.read()`; True once every returned sequence has finished."""
        if self._params.best_of > 1:
            self._beams.update(outputs)
            return False
        for sequence_id in sorted(outputs):
            if sequence_id not in self._by_id and len(self._by_id) < self._params.n:
                self._by_id[sequence_id] = self._new_sequence(len(self._by_id))
            if sequence_id in self._by_id:
                self._consume(self._by_id[sequence_id], outputs[sequence_id])
        return len(self._by_id) == self._params.n and all(s.finish_reason for s in self._by_id.values())

    def deltas(self, request_id: int) -> list[Delta]:
        """New text (and logprobs) of each sequence since the last call.

        A Delta goes out for new tokens even while the detokenizer holds their text back
        (incomplete UTF-8): token counts and timings stay exact.
        """
        self._detokenizer.flush()
        events = []
        for sequence in self._by_id.values():
            if sequence.chunks or sequence.logprobs or sequence.generated > sequence.reported:
                sequence.reported = sequence.generated
                logprobs = self._take_logprobs(sequence)
                events.append(
                    Delta(
                        request_id=request_id,
                        text=sequence.take(keep=self._stop_prefix_chars(sequence)),
                        tokens=sequence.generated,
                        index=sequence.index,
                        logprobs=logprobs,
                    )
                )
        return events

    def stop_string_matched(self) -> bool:
        """With `match_stop_strings` (the pipeline does not match them itself): whether every
        sequence has ended or holds a stop string, so the request can end now. Text that could
        begin one is never sent in a delta, so a match always lies in the text not sent yet, where
        `finish` cuts it."""
        if not self._match_stop_strings or len(self._by_id) < self._params.n:
            return False
        self._detokenizer.flush()
        return all(
            sequence.finish_reason or (sequence.stops is not None and sequence.stops.match is not None)
            for sequence in self._by_id.values()
        )

    def finish(self, request_id: int, prompt_tokens: int, *, failure: str | None, error: str = "") -> list[Finished]:
        """One `Finished` per returned sequence; `failure` ("cancelled"/"error") overrides reasons."""
        if self._beams:
            ranked = sorted(self._beams.items(), key=lambda item: item[1].score, reverse=True)[: self._params.n]
            for index, (sequence_id, output) in enumerate(ranked):
                self._by_id[sequence_id] = self._new_sequence(index)
                self._consume(self._by_id[sequence_id], output)
        sequences = {sequence.index: sequence for sequence in self._by_id.values()}
        for sequence in sequences.values():
            self._write(sequence, [], final=True)
        self._detokenizer.flush()
        events = []
        for index in range(self._params.n):
            sequence = sequences.get(index)
            if sequence is None:
                events.append(
                    Finished(
                        request_id=request_id,
                        finish_reason=failure or "stop",
                        prompt_tokens=prompt_tokens,
                        completion_tokens=0,
                        error=error,
                        index=index,
                    )
                )
                continue
            reason = failure or sequence.finish_reason or "stop"
            stop_string = self._end_at_stop_string(sequence) if failure is None and self._params.stop else None
            if stop_string is not None:
                reason = "stop"
            logprobs = self._take_logprobs(sequence)
            events.append(
                Finished(
                    request_id=request_id,
                    finish_reason=reason,
                    prompt_tokens=prompt_tokens,
                    completion_tokens=sequence.generated,
                    text=sequence.take(),
                    error=error,
                    index=index,
                    logprobs=logprobs,
                    stop_string=stop_string,
                )
            )
        return events

    # -- internals --------------------------------------------------------------------------

    def _new_sequence(self, index: int) -> _Sequence:
        stops = StopStringMatcher(self._params.stop) if self._match_stop_strings else None
        return _Sequence(index=index, stops=stops)

    def _consume(self, sequence: _Sequence, output: Any) -> None:
        reasons = self._genai.GenerationFinishReason
        ids = list(output.generated_ids)
        logprobs = list(output.generated_log_probs)
        sequence.generated += len(ids)
        if output.finish_reason == reasons.LENGTH:
            sequence.finish_reason = "length"
        elif output.finish_reason == reasons.STOP:
            sequence.finish_reason = "stop"
            # The end-of-sequence token ends the text rather than belonging to it, and so does a
            # stop token unless asked for: include_stop_str_in_output (on by default in streams,
            # as OVMS does) is about stop strings and tokens, and the end-of-turn marker written
            # as text (special tokens are kept when tool calls are parsed) would reach `content`.
            # Its logprob stays where the stop is kept (LMI and TGI list the end-of-sequence token,
            # marked special, so their token lists match the generated count).
            final = ids[-1] if ids else None
            kept = self._params.include_stop_str_in_output
            if final == self._eos_token_id or (final in self._stop_token_ids and not kept):
                ids = ids[:-1]
                if not kept:
                    logprobs = logprobs[:-1]
        self._write(sequence, ids, final=False)
        if self._params.logprobs:
            scored = list(output.generated_ids)[: len(logprobs)]
            sequence.logprobs.extend(self._texts.entry(token, float(lp)) for token, lp in zip(scored, logprobs))

    def _write(self, sequence: _Sequence, ids: list[int], *, final: bool) -> None:
        sequence.window += ids
        if self._params.stop:
            sequence.ids += ids
        self._detokenizer.mark(sequence, skip_special_tokens=self._params.skip_special_tokens, final=final)

    def _stop_prefix_chars(self, sequence: _Sequence) -> int:
        # The longest end of the unsent text that a stop string starts with: held back until the
        # next tokens tell whether the stop string follows (all of it once one has completed:
        # `finish` cuts the text there).
        if sequence.stops is None:
            return 0
        pending = sum(map(len, sequence.chunks))
        return pending if sequence.stops.match is not None else min(sequence.stops.held, pending)

    def _take_logprobs(self, sequence: _Sequence) -> list[TokenLogprob] | None:
        if not self._params.logprobs:
            return None
        taken = list(sequence.logprobs)
        sequence.logprobs.clear()
        return taken

    def _end_at_stop_string(self, sequence: _Sequence) -> str | None:
        """Cut the text right after the first stop string (`include_stop_str_in_output`) or right
        before it; the stop string, None if the text holds none."""
        pending = "".join(sequence.chunks)
        text = "".join(sequence.sent) + pending
        match = _first_stop_string(text, self._params.stop)
        if match is None:
            return None
        start, end = match
        # Text that could begin a stop string was held back (or the pipeline held it), so the cut
        # lies in the text not sent yet.
        cut = max((end if self._params.include_stop_str_in_output else start) - sequence.sent_chars, 0)
        sequence.chunks[:] = [pending[:cut]] if cut else []
        kept_tokens, kept_chars = self._tokens_through(sequence, end)
        # Tokens after the one completing the stop string (a step of speculative decoding or prompt
        # lookup makes several; a sequence returned whole ran on) are dropped, as the pipeline
        # drops them where it matches stop strings itself. Tokens already reported stay counted.
        surplus = min(sequence.generated - kept_tokens, sequence.generated - sequence.reported)
        if surplus > 0:
            sequence.generated -= surplus
            del sequence.logprobs[max(len(sequence.logprobs) - (len(sequence.ids) - kept_tokens), 0) :]
        # Drop the logprobs of the kept tokens that lie wholly inside the removed text.
        removed = kept_chars - (end if self._params.include_stop_str_in_output else start)
        while sequence.logprobs and removed >= len(sequence.logprobs[-1].token) > 0:
            removed -= len(sequence.logprobs.pop().token)
        return text[start:end]

    def _tokens_through(self, sequence: _Sequence, end: int) -> tuple[int, int]:
        """(tokens, characters) of the shortest prefix of the text's ids whose text holds a stop
        string ending at or before character `end`: only the tokens not reported yet are tried."""
        ids = sequence.ids
        low = max(len(ids) - (sequence.generated - sequence.reported), 0)
        high = len(ids)
        best = high, len(self._decode(ids))
        # Decoding is prefix-stable (see Detokenizer): whether a prefix holds a stop string is
        # monotonic in its length, so bisect (a sequence returned whole may hold many tokens).
        while low < high:
            middle = (low + high) // 2
            text = self._decode(ids[:middle])
            match = _first_stop_string(text, self._params.stop)
            if match is not None and match[1] <= end:
                high, best = middle, (middle, len(text))
            else:
                low = middle + 1
        return best

    def _decode(self, ids: list[int]) -> str:
        return self._tokenizer.decode(ids, skip_special_tokens=self._params.skip_special_tokens) if ids else ""


def _first_stop_string(text: str, stops: tuple[str, ...]) -> tuple[int, int] | None:
    """(start, end) of the stop string that completes first in `text` (the longest of those
    ending there), None if none occurs."""
    found = [(position + len(stop), position) for stop in stops if (position := text.find(stop)) >= 0]
    if not found:
        return None
    end, start = min(found)
    return start, end
