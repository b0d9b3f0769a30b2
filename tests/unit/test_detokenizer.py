"""Incremental detokenization in the engine: every token's text leaves at once, UTF-8 intact."""

from __future__ import annotations

import openvino_genai

from appliance.engine.messages import SamplingParams
from appliance.engine.outputs import RequestOutputs, TokenTexts

TEXT = "naïve café — 東京タワー 😀 emoji\nsecond line: ünïcödé ✓\n\nthird 🚀 line"


def test_streamed_text_equals_whole_decode_with_no_replacement_characters(demo_root) -> None:
    tokenizer = openvino_genai.Tokenizer(str(demo_root / "models" / "demo-chat"))
    ids = [int(i) for i in tokenizer.encode(TEXT, add_special_tokens=False).input_ids.data[0]]
    outputs = RequestOutputs(openvino_genai, tokenizer, SamplingParams(max_new_tokens=len(ids)), TokenTexts(tokenizer), eos_token_id=-1)
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
