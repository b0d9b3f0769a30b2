"""The engine's own stop-string matching (issue 28): the same matches and hold-back as a scan of the
whole text, with work linear in the text however much of it a stop string keeps beginning."""

from __future__ import annotations

import random

import openvino_genai

from appliance.engine.messages import SamplingParams
from appliance.engine.worker.outputs import RequestOutputs, TokenTexts
from appliance.engine.worker.stop_strings import StopStringMatcher


def _first_match(text: str, stops: tuple[str, ...]) -> tuple[int, int] | None:
    found = [(position + len(stop), position) for stop in stops if (position := text.find(stop)) >= 0]
    return (min(found)[1], min(found)[0]) if found else None


def _held(text: str, stops: tuple[str, ...]) -> int:
    """The longest end of `text` that begins a stop string, by trying every length."""
    return max((size for stop in stops for size in range(1, len(stop)) if text.endswith(stop[:size])), default=0)


def test_matches_and_hold_back_agree_with_a_scan_of_the_whole_text() -> None:
    rng = random.Random(7)
    for trial in range(5000):
        alphabet = "ab" if trial % 2 else "abc"  # few letters: many overlapping partial matches
        stops = tuple("".join(rng.choice(alphabet) for _ in range(rng.randint(1, 7))) for _ in range(rng.randint(1, 4)))
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))
        matcher = StopStringMatcher(stops)
        fed = 0
        while fed < len(text):
            piece = text[fed : fed + rng.randint(1, 5)]
            matcher.feed(piece)
            fed += len(piece)
            expected = _first_match(text[:fed], stops)
            assert matcher.match == expected, (stops, text[:fed])
            if expected is None:
                assert matcher.held == _held(text[:fed], stops), (stops, text[:fed])
        assert matcher.length == len(text)


def test_the_longest_of_the_stop_strings_ending_first_wins() -> None:
    matcher = StopStringMatcher(("cd", "bcd", "abcdef"))
    matcher.feed("xxabc")
    assert (matcher.match, matcher.held) == (None, 3)
    matcher.feed("def")
    assert matcher.match == (3, 6)  # "bcd" ends first, with "cd"; it is the longer


def test_work_stays_linear_while_the_text_keeps_beginning_a_stop_string() -> None:
    # The worst case for the scan this replaced: every end of the text begins every stop string,
    # so each step tried every held-back length (about 4 x 255^2 / 2 characters per step here).
    stops = tuple("a" * 255 + end for end in "bcde")
    for size in (10_000, 100_000):
        matcher = StopStringMatcher(stops)
        for _ in range(size // 4):
            matcher.feed("aaaa")
        assert (matcher.match, matcher.held) == (None, 255)
        # Each character is compared at most twice per stop string (once rising, once falling back).
        assert matcher.examined <= 2 * size * len(stops), (size, matcher.examined)
        print(f"{size} characters: {matcher.examined} examined")
    # Falling back after a long partial match costs what the rise did, not the square of it.
    matcher = StopStringMatcher(("a" * 4095 + "b",))
    matcher.feed(("a" * 4000 + "c") * 25)
    assert matcher.match is None and matcher.examined <= 2 * 4001 * 25


def test_request_outputs_hold_back_at_most_one_less_than_the_longest_stop_string(demo_root) -> None:
    tokenizer = openvino_genai.Tokenizer(str(demo_root / "models" / "demo-chat"))
    text = " ".join(f"word{index}" for index in range(300))
    ids = [int(i) for i in tokenizer.encode(text, add_special_tokens=False).input_ids.data[0]]
    # The text begins the first for 199 characters; the second comes much later.
    stops = (text[:199] + "\u2603", text[1500:1520])
    params = SamplingParams(max_new_tokens=len(ids), stop=stops)
    outputs = RequestOutputs(
        openvino_genai, tokenizer, params, TokenTexts(tokenizer), eos_token_id=-1, match_stop_strings=True
    )
    running = openvino_genai.GenerationFinishReason.NONE
    sent = ""
    largest_held = 0
    for token in ids:
        outputs.read({0: _Output([token], running)})
        if outputs.stop_string_matched():
            break
        sent += "".join(delta.text for delta in outputs.deltas(1))
        (sequence,) = outputs._by_id.values()
        largest_held = max(largest_held, sum(map(len, sequence.chunks)))
    else:
        raise AssertionError("the stop string was not matched")
    assert largest_held == 199 and text.startswith(sent)
    outputs.read({0: _Output([], openvino_genai.GenerationFinishReason.STOP)})
    (finished,) = outputs.finish(1, 0, failure=None)
    assert (sent + finished.text, finished.finish_reason) == (text[:1500], "stop")
    assert sequence.stops is not None and sequence.stops.examined <= 2 * len(text) * len(stops)


class _Output:
    def __init__(self, ids: list[int], finish_reason) -> None:
        self.generated_ids = ids
        self.generated_log_probs = [0.0] * len(ids)
        self.finish_reason = finish_reason
