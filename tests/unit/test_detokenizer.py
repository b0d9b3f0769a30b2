"""Incremental detokenization in the engine: every token's text leaves at once, UTF-8 intact; stop
strings end the text at the right character and token."""

from __future__ import annotations

import openvino_genai

from appliance.engine.messages import SamplingParams
from appliance.engine.worker.outputs import Detokenizer, RequestOutputs, TokenTexts
from appliance.engine.worker.vocab_decoder import VocabDecoder

TEXT = "naïve café — 東京タワー 😀 emoji\nsecond line: ünïcödé ✓\n\nthird 🚀 line"


def test_streamed_text_equals_whole_decode_with_no_replacement_characters(demo_root) -> None:
    tokenizer = openvino_genai.Tokenizer(str(demo_root / "models" / "demo-chat"))
    ids = [int(i) for i in tokenizer.encode(TEXT, add_special_tokens=False).input_ids.data[0]]
    outputs = RequestOutputs(
        openvino_genai, tokenizer, SamplingParams(max_new_tokens=len(ids)), TokenTexts(tokenizer), eos_token_id=-1
    )
    sequence = outputs._new_sequence(0)
    pieces = []
    emitted_per_token = 0
    for token in ids:
        outputs._write(sequence, [token], final=False)
        outputs._detokenizer.flush()
        piece = sequence.take()
        emitted_per_token += bool(piece)
        pieces.append(piece)
    outputs._write(sequence, [], final=True)
    outputs._detokenizer.flush()
    pieces.append(sequence.take())
    assert "".join(pieces) == tokenizer.decode(ids) == TEXT
    assert not any("\ufffd" in piece for piece in pieces)
    # Text is not held back beyond incomplete characters: most tokens emit something at once.
    assert emitted_per_token >= len(ids) // 2


def test_matched_stop_strings_never_leak_into_deltas(demo_root) -> None:
    """The stateful engine matches stop strings itself: text that could begin one is held back
    until the next tokens decide, and the match is cut at its first character."""
    tokenizer = openvino_genai.Tokenizer(str(demo_root / "models" / "demo-chat"))
    text = "the license is the license: it says STOP here and more after"
    ids = [int(i) for i in tokenizer.encode(text, add_special_tokens=False).input_ids.data[0]]
    params = SamplingParams(max_new_tokens=len(ids), stop=("STOP", "zzz"))
    outputs = RequestOutputs(
        openvino_genai, tokenizer, params, TokenTexts(tokenizer), eos_token_id=-1, match_stop_strings=True
    )
    running = openvino_genai.GenerationFinishReason.NONE
    sent = ""
    for token in ids:
        outputs.read({0: _Output([token], running)})
        if outputs.stop_string_matched():
            break
        sent += "".join(delta.text for delta in outputs.deltas(1))
    else:
        raise AssertionError("the stop string was not matched")
    assert "S" not in sent and text.startswith(sent)
    outputs.read({0: _Output([], openvino_genai.GenerationFinishReason.STOP)})
    (finished,) = outputs.finish(1, 0, failure=None)
    assert sent + finished.text == "the license is the license: it says "
    assert (finished.finish_reason, finished.stop_string) == ("stop", "STOP")


def test_kept_stop_string_ends_the_text_inside_its_token(demo_root) -> None:
    """The pipeline ends generation on the token holding the stop string (" datetime" for "atet"),
    with the whole token: the text ends right after the stop string, or right before it."""
    tokenizer = openvino_genai.Tokenizer(str(demo_root / "models" / "demo-chat"))
    ids = [int(i) for i in tokenizer.encode("import datetime", add_special_tokens=False).input_ids.data[0]]
    assert len(ids) == 2
    for include, expected in ((True, "import datet"), (False, "import d")):
        params = SamplingParams(max_new_tokens=8, stop=("atet",), include_stop_str_in_output=include)
        outputs = RequestOutputs(openvino_genai, tokenizer, params, TokenTexts(tokenizer), eos_token_id=-1)
        sent = ""
        outputs.read({0: _Output(ids[:1], openvino_genai.GenerationFinishReason.NONE)})
        sent += "".join(delta.text for delta in outputs.deltas(1))
        outputs.read({0: _Output(ids[1:], openvino_genai.GenerationFinishReason.STOP)})
        (finished,) = outputs.finish(1, 0, failure=None)
        assert (sent + finished.text, finished.finish_reason, finished.completion_tokens) == (expected, "stop", 2)
        assert finished.stop_string == "atet"


def test_tokens_after_a_matched_stop_string_are_not_counted(demo_root) -> None:
    """A step of speculative decoding or prompt lookup yields several tokens: those after the one
    completing the stop string are dropped, with their logprobs."""
    tokenizer = openvino_genai.Tokenizer(str(demo_root / "models" / "demo-chat"))
    text = "import datetime as dt, then the license says STOP here and more after"
    ids = [int(i) for i in tokenizer.encode(text, add_special_tokens=False).input_ids.data[0]]
    through_stop = [tokenizer.decode([token]) for token in ids].index(" license") + 1
    cases = [
        ("lic", True, "import datetime as dt, then the lic", through_stop),
        ("lic", False, "import datetime as dt, then the ", through_stop),
        # A token wholly inside the cut stop string loses its logprob with it.
        (" license", False, "import datetime as dt, then the", through_stop - 1),
    ]
    for stop, include, expected, logprobs in cases:
        params = SamplingParams(
            max_new_tokens=32, stop=(stop, "zzz"), include_stop_str_in_output=include, logprobs=True
        )
        outputs = RequestOutputs(
            openvino_genai, tokenizer, params, TokenTexts(tokenizer), eos_token_id=-1, match_stop_strings=True
        )
        running = openvino_genai.GenerationFinishReason.NONE
        outputs.read({0: _Output(ids[:3], running, logprob=-1.0)})
        (delta,) = outputs.deltas(1)
        assert not outputs.stop_string_matched()
        outputs.read({0: _Output(ids[3:], running, logprob=-2.0)})  # one step: 13 tokens
        assert outputs.stop_string_matched()
        (finished,) = outputs.finish(1, 0, failure=None)
        assert (delta.text + finished.text, finished.finish_reason) == (expected, "stop")
        assert finished.completion_tokens == through_stop
        assert len(delta.logprobs) + len(finished.logprobs) == logprobs


def test_the_end_of_sequence_token_leaves_the_text_and_keeps_its_logprob_where_stops_are_kept(demo_root) -> None:
    """The EOS token is never text; its logprob is listed where the stop is kept (LMI and TGI list
    it as a special token, so their token lists match the generated count), dropped otherwise."""
    tokenizer = openvino_genai.Tokenizer(str(demo_root / "models" / "demo-chat"))
    ids = [int(i) for i in tokenizer.encode("hello world", add_special_tokens=False).input_ids.data[0]]
    eos = tokenizer.get_eos_token_id()
    for include, listed in ((True, len(ids) + 1), (False, len(ids))):
        params = SamplingParams(max_new_tokens=8, include_stop_str_in_output=include, logprobs=True)
        outputs = RequestOutputs(openvino_genai, tokenizer, params, TokenTexts(tokenizer), eos_token_id=eos)
        outputs.read({0: _Output([*ids, eos], openvino_genai.GenerationFinishReason.STOP, logprob=-1.0)})
        (finished,) = outputs.finish(1, 0, failure=None)
        assert (finished.text, finished.stop_string) == ("hello world", None)
        assert finished.completion_tokens == len(ids) + 1
        assert len(finished.logprobs) == listed
        if include:
            assert finished.logprobs[-1].id == eos


class _Output:
    def __init__(self, ids: list[int], finish_reason, logprob: float | None = None) -> None:
        self.generated_ids, self.finish_reason = ids, finish_reason
        self.generated_log_probs = [] if logprob is None else [logprob] * len(ids)


def test_the_vocabulary_decoder_gives_the_tokenizers_own_text(demo_root, smol_root) -> None:
    """Byte-level BPE vocabularies (the demo model's, SmolLM2's from its GGUF file) decode in Python
    to exactly what OpenVINO's detokenizer gives: with and without special tokens, across UTF-8
    characters cut between tokens, with special tokens mid-text."""
    (gguf,) = (smol_root / "models" / "demo-smol").glob("*.gguf")  # not silently left out
    for model in (demo_root / "models" / "demo-chat", gguf):
        tokenizer = openvino_genai.Tokenizer(str(model))
        decoder = VocabDecoder.verified(tokenizer)
        assert decoder is not None, model
        ids = [int(i) for i in tokenizer.encode(TEXT, add_special_tokens=False).input_ids.data[0]]
        special = [tokenizer.get_eos_token_id()]
        windows = [ids, ids[:3], ids[1:7], special + ids[:5] + special, []]
        for skip in (True, False):
            one_by_one = [tokenizer.decode(window, skip_special_tokens=skip) if window else "" for window in windows]
            assert decoder.decode(windows, skip_special_tokens=skip) == one_by_one
            # Without the table: OpenVINO's decoder, whose batches pad short windows with a
            # special token that must not show when special tokens are kept.
            assert Detokenizer(tokenizer)._decode(windows, skip_special_tokens=skip) == one_by_one


def test_a_tokenizer_whose_decoder_differs_keeps_its_own() -> None:
    """A vocabulary whose joined bytes are not the decoder's text (SentencePiece's leading space,
    clean-up of spaces) is refused, and an id past the vocabulary falls back to the tokenizer."""

    class SentencePieceLike:
        vocab = {b"\xe2\x96\x81Hello": 0, b"\xe2\x96\x81world": 1, b"</s>": 2}

        def get_vocab(self):
            return dict(self.vocab)

        def decode(self, batch, skip_special_tokens=True):
            words = {0: " Hello", 1: " world", 2: "" if skip_special_tokens else "</s>"}
            return ["".join(words[token] for token in ids).lstrip() for ids in batch]

    assert VocabDecoder.verified(SentencePieceLike()) is None

    class Plain(SentencePieceLike):
        vocab = {b"a": 0, b"b": 1, b"</s>": 2}

        def decode(self, batch, skip_special_tokens=True):
            words = {0: "a", 1: "b", 2: "" if skip_special_tokens else "</s>"}
            return ["".join(words.get(token, "?") for token in ids) for ids in batch]

    tokenizer = Plain()
    decoder = VocabDecoder.verified(tokenizer)
    assert decoder is not None
    assert decoder.decode([[0, 2, 1]], skip_special_tokens=True) == ["ab"]
    assert decoder.decode([[0, 2, 1]], skip_special_tokens=False) == ["a</s>b"]
    detokenizer = Detokenizer(tokenizer, decoder)
    assert detokenizer._decode([[0, 9]], skip_special_tokens=True) == ["a?"]
