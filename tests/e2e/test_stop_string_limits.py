"""Stop strings are bounded in length and matched in time linear in the text (issue 28).

Four 100,000-character stop strings that the output kept beginning made the engine scan the text
held back once per possible length of it at every step: the request ran 30-70 s instead of 1 s,
and every stream of the model waited on those steps. Such a request is now refused before it
reaches the engine, in every dialect; stop strings up to `limits.max_stop_sequence_chars` are
matched as before, with at most that many characters held back.
"""

from __future__ import annotations

import httpx
import openai
import pytest

from tests.conftest import RunningServer
from tests.e2e.neighbour import Neighbour

MODEL = "demo-chat"
LIMIT = 256
"""`limits.max_stop_sequence_chars`' default (the demo graphs keep it)."""
HOSTILE_CHARS = 100_000
PROMPT = [{"role": "user", "content": "Tell me a story."}]


def _greedy(client: openai.OpenAI, max_tokens: int) -> str:
    reply = client.chat.completions.create(
        model=MODEL, messages=PROMPT, max_tokens=max_tokens, temperature=0, extra_body={"ignore_eos": True}
    )
    return reply.choices[0].message.content


def _hostile_stops(free: str) -> list[str]:
    # The model's own output, padded: the whole text may begin each of them, so all of it was held
    # back and scanned again at every step (the worst case of the old matching).
    return [(free + str(index) * HOSTILE_CHARS)[:HOSTILE_CHARS] for index in range(4)]


def test_four_100k_stop_strings_are_refused_in_every_dialect_while_a_neighbour_streams(
    server: RunningServer, openai_client: openai.OpenAI
) -> None:
    stops = _hostile_stops(_greedy(openai_client, 1000))
    requests = {
        "/v1/chat/completions": ({"model": MODEL, "messages": PROMPT, "stop": stops}, "stop"),
        "/v1/completions": ({"model": MODEL, "prompt": "Once", "stop": stops}, "stop"),
        "/v1/responses": ({"model": MODEL, "input": "Tell me a story.", "stop": stops}, "stop"),
    }
    common = {"max_tokens": 1000, "temperature": 0, "ignore_eos": True}
    with Neighbour(server.url, MODEL) as neighbour:
        for path, (body, param) in requests.items():
            if path == "/v1/responses":
                body = {**body, "max_output_tokens": 1000, "temperature": 0}
            else:
                body = {**body, **common}
            response = httpx.post(f"{server.url}{path}", json=body, timeout=300)
            assert response.status_code == 400, (path, response.status_code, response.text[:300])
            error = response.json()["error"]
            assert error["param"] == param and str(LIMIT) in error["message"], (path, error)
        lmi = {"inputs": "Once", "parameters": {"max_new_tokens": 1000, "stop_sequences": stops}}
        response = httpx.post(f"{server.url}/predictions/{MODEL}", json=lmi, timeout=300)
        assert response.status_code == 400, response.text[:300]
        assert "parameters.stop_sequences" in response.json()["error"], response.text[:300]
    neighbour.assert_unharmed()


def test_stop_strings_at_the_limit_are_matched_exactly_and_one_more_character_is_refused(
    openai_client: openai.OpenAI,
) -> None:
    free = _greedy(openai_client, 200)
    assert len(free) > 2 * LIMIT and "\u2603" not in free, free
    stop = free[40 : 40 + LIMIT]
    position = free.find(stop)
    # Three more the text begins, at its start: held back for LIMIT - 1 characters, then let go.
    begun = [free[start : start + LIMIT - 1] + "\u2603" for start in (0, 1, 2)]
    stops = [*begun, stop]
    assert all(len(each) == LIMIT for each in stops)

    def whole(**extra) -> tuple[str, str, int]:
        reply = openai_client.chat.completions.create(
            model=MODEL,
            messages=PROMPT,
            max_tokens=200,
            temperature=0,
            stop=stops,
            extra_body={"ignore_eos": True, **extra},
        )
        return reply.choices[0].message.content, reply.choices[0].finish_reason, reply.usage.completion_tokens

    cut, reason, tokens = whole()
    assert (cut, reason) == (free[:position], "stop")
    assert whole(include_stop_str_in_output=True) == (free[: position + LIMIT], "stop", tokens)
    text, reason, streamed_tokens = "", None, None
    for chunk in openai_client.chat.completions.create(
        model=MODEL,
        messages=PROMPT,
        max_tokens=200,
        temperature=0,
        stop=stops,
        stream=True,
        stream_options={"include_usage": True},
        extra_body={"ignore_eos": True},
    ):
        for choice in chunk.choices:
            text += choice.delta.content or ""
            reason = choice.finish_reason or reason
        if chunk.usage is not None:
            streamed_tokens = chunk.usage.completion_tokens
    assert (text, reason, streamed_tokens) == (free[: position + LIMIT], "stop", tokens)

    for too_long in ([*begun[:3], stop + "x"], stop + "x"):
        with pytest.raises(openai.BadRequestError) as info:
            openai_client.chat.completions.create(model=MODEL, messages=PROMPT, max_tokens=8, stop=too_long)
        assert info.value.param == "stop", info.value
