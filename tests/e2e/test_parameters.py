"""The sampling/stopping surface, several choices, logprobs and the tokenizer routes, through the
real `openai` client (extensions via `extra_body`) against the real server and demo model."""

from __future__ import annotations

import httpx
import openai
import pytest

MODEL = "demo-chat"
USER = [{"role": "user", "content": "Tell me a story"}]


def create(client: openai.OpenAI, **fields):
    return client.chat.completions.create(model=MODEL, messages=fields.pop("messages", USER), **fields)


def streamed(client: openai.OpenAI, **fields) -> tuple[dict[int, str], dict[int, str], list]:
    """(text per choice, finish_reason per choice, chunks) of a streamed request."""
    chunks = list(create(client, stream=True, **fields))
    texts: dict[int, str] = {}
    reasons: dict[int, str] = {}
    for chunk in chunks:
        for choice in chunk.choices:
            texts[choice.index] = texts.get(choice.index, "") + (choice.delta.content or "")
            if choice.finish_reason:
                reasons[choice.index] = choice.finish_reason
    return texts, reasons, chunks


def test_extensions_through_extra_body(openai_client: openai.OpenAI) -> None:
    reply = create(
        openai_client,
        max_tokens=12,
        seed=3,
        frequency_penalty=0.5,
        presence_penalty=0.5,
        extra_body={
            "top_k": 20,
            "min_p": 0.05,
            "repetition_penalty": 1.3,
            "min_tokens": 12,
            "skip_special_tokens": True,
        },
    )
    # min_tokens = max_tokens: the end-of-sequence token is masked until the limit.
    assert reply.usage.completion_tokens == 12 and reply.choices[0].finish_reason == "length"


def test_penalties_change_the_output(openai_client: openai.OpenAI) -> None:
    plain = create(openai_client, max_tokens=24, temperature=0).choices[0].message.content
    penalised = create(openai_client, max_tokens=24, temperature=0, extra_body={"repetition_penalty": 2.0})
    assert penalised.choices[0].message.content != plain


def test_seeded_sampling_is_reproducible_with_n(openai_client: openai.OpenAI) -> None:
    def sample(seed: int) -> list[str]:
        reply = create(openai_client, max_tokens=16, n=3, seed=seed, temperature=1.0)
        return [choice.message.content for choice in reply.choices]

    first = sample(11)
    assert first == sample(11)
    assert len(set(first)) == 3  # three different samples, not three copies
    assert first != sample(12)


def test_n_choices_stream_and_non_stream(openai_client: openai.OpenAI) -> None:
    whole = create(openai_client, max_tokens=10, n=3, seed=5)
    assert [choice.index for choice in whole.choices] == [0, 1, 2]
    assert 3 <= whole.usage.completion_tokens <= 30
    texts, reasons, chunks = streamed(openai_client, max_tokens=10, n=3, seed=5, stream_options={"include_usage": True})
    assert texts == {choice.index: choice.message.content for choice in whole.choices}
    assert reasons == {choice.index: choice.finish_reason for choice in whole.choices}
    assert chunks[-1].usage.model_dump() == whole.usage.model_dump()
    assert len({chunk.id for chunk in chunks}) == 1


def test_best_of_is_beam_search(openai_client: openai.OpenAI) -> None:
    fields = {"max_tokens": 8, "n": 2, "temperature": 0, "extra_body": {"best_of": 4, "length_penalty": 1.0}}
    reply = create(openai_client, **fields)
    assert [choice.index for choice in reply.choices] == [0, 1]
    assert [c.message.content for c in reply.choices] == [
        c.message.content for c in create(openai_client, **fields).choices
    ]
    texts, _, _ = streamed(openai_client, **fields)
    assert texts == {choice.index: choice.message.content for choice in reply.choices}


def test_logprobs_non_stream_and_stream(openai_client: openai.OpenAI) -> None:
    fields = {
        "max_tokens": 12,
        "temperature": 0,
        "logprobs": True,
        "top_logprobs": 0,
        "extra_body": {"ignore_eos": True},
    }
    reply = create(openai_client, **fields)
    choice = reply.choices[0]
    entries = choice.logprobs.content
    assert len(entries) == reply.usage.completion_tokens == 12
    assert all(entry.logprob < 0 and entry.top_logprobs == [] for entry in entries)
    assert b"".join(bytes(entry.bytes) for entry in entries).decode("utf-8", "replace") == choice.message.content
    streamed_entries = [
        entry
        for chunk in create(openai_client, stream=True, **fields)
        for streamed_choice in chunk.choices
        if streamed_choice.logprobs
        for entry in streamed_choice.logprobs.content
    ]
    assert [(e.token, e.logprob) for e in streamed_entries] == [(e.token, e.logprob) for e in entries]


def test_stop_string_is_cut_at_its_first_character(openai_client: openai.OpenAI) -> None:
    free = create(openai_client, max_tokens=24, temperature=0).choices[0].message.content
    stop = free[9:12]
    assert stop.strip() and free.find(stop) == 9, free
    cut = create(openai_client, max_tokens=24, temperature=0, stop=stop).choices[0]
    assert (cut.message.content, cut.finish_reason) == (free[:9], "stop")
    kept = create(
        openai_client, max_tokens=24, temperature=0, stop=stop, extra_body={"include_stop_str_in_output": True}
    )
    assert kept.choices[0].message.content.startswith(free[:12])
    # Streams include the stop string by default (as OVMS) and refuse excluding it.
    texts, reasons, _ = streamed(openai_client, max_tokens=24, temperature=0, stop=stop)
    assert texts[0].startswith(free[:12]) and reasons[0] == "stop"
    with pytest.raises(openai.BadRequestError) as info:
        create(openai_client, stream=True, stop=stop, extra_body={"include_stop_str_in_output": False})
    assert info.value.param == "include_stop_str_in_output"


def test_stop_token_ids(openai_client: openai.OpenAI, server) -> None:
    free = create(openai_client, max_tokens=16, temperature=0, logprobs=True, extra_body={"ignore_eos": True})
    third = free.choices[0].logprobs.content[2].token
    ids = httpx.post(
        f"{server.url}/v1/tokenize", json={"model": MODEL, "prompt": third, "add_special_tokens": False}
    ).json()
    assert ids["count"] == 1, ids
    stopped = create(openai_client, max_tokens=16, temperature=0, extra_body={"stop_token_ids": ids["tokens"]})
    assert stopped.choices[0].finish_reason == "stop"
    assert stopped.usage.completion_tokens == 3  # the stop token is generated (and counted), not shown
    assert free.choices[0].message.content.startswith(stopped.choices[0].message.content)
    assert not stopped.choices[0].message.content.endswith(third)


def test_max_completion_tokens_and_limit(openai_client: openai.OpenAI) -> None:
    assert create(openai_client, max_completion_tokens=5, extra_body={"ignore_eos": True}).usage.completion_tokens == 5
    with pytest.raises(openai.BadRequestError) as info:
        create(openai_client, max_completion_tokens=5000)
    assert info.value.param == "max_completion_tokens"


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"n": 21}, "n"),
        ({"extra_body": {"best_of": 21}}, "best_of"),
        ({"n": 3, "extra_body": {"best_of": 2}}, "best_of"),
        ({"n": 2, "temperature": 0}, "n"),
        ({"temperature": 0.7, "extra_body": {"best_of": 2}}, "temperature"),
        ({"extra_body": {"length_penalty": 0.5}}, "length_penalty"),
        ({"stop": ["a", "b", "c", "d", "e"]}, "stop"),
        ({"logit_bias": {"42": 5}}, "logit_bias"),
        ({"logprobs": True, "top_logprobs": 3}, "top_logprobs"),
        ({"top_logprobs": 0}, "top_logprobs"),
        ({"temperature": 2.1}, "temperature"),
        ({"top_p": 0}, "top_p"),
        ({"frequency_penalty": -2.5}, "frequency_penalty"),
        ({"presence_penalty": 2.5}, "presence_penalty"),
        ({"extra_body": {"top_k": -3}}, "top_k"),
        ({"extra_body": {"min_p": 2}}, "min_p"),
        ({"extra_body": {"repetition_penalty": 0}}, "repetition_penalty"),
        ({"extra_body": {"min_tokens": -1}}, "min_tokens"),
        ({"max_tokens": 4, "extra_body": {"min_tokens": 8}}, "min_tokens"),
        ({"extra_body": {"stop_token_ids": ["x"]}}, "stop_token_ids[0]"),
        ({"extra_body": {"reasoning_effort": "extreme"}}, "reasoning_effort"),
    ],
)
def test_out_of_range_or_unsupported_is_400_naming_it(openai_client: openai.OpenAI, fields: dict, param: str) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        create(openai_client, max_tokens=fields.pop("max_tokens", 4), **fields)
    assert info.value.param == param


def test_completions_n_logprobs_and_extensions(openai_client: openai.OpenAI) -> None:
    reply = openai_client.completions.create(
        model=MODEL,
        prompt=["The license", "import os"],
        max_tokens=4,
        n=2,
        seed=1,
        logprobs=0,
        extra_body={"top_k": 50, "ignore_eos": True},
    )
    assert [choice.index for choice in reply.choices] == [0, 1, 2, 3]
    assert all(len(choice.logprobs.tokens) == 4 == len(choice.logprobs.token_logprobs) for choice in reply.choices)
    with pytest.raises(openai.BadRequestError) as info:
        openai_client.completions.create(model=MODEL, prompt="x", max_tokens=4, logprobs=2)
    assert info.value.param == "logprobs"


@pytest.mark.parametrize("stream", [False, True])
def test_zero_logprobs(openai_client: openai.OpenAI, stream: bool) -> None:
    """vLLM's test_zero_logprobs: `logprobs: 0` gives the chosen tokens' logprobs, and
    `top_logprobs` one entry a step, the chosen token (OpenAI: "up to logprobs+1 elements")."""
    fields = {"model": MODEL, "prompt": [0, 0, 0, 0, 0], "max_tokens": 5, "temperature": 0.0, "logprobs": 0}
    if stream:
        chunks = [chunk.choices[0].logprobs for chunk in openai_client.completions.create(stream=True, **fields)]
        tokens = [token for part in chunks if part for token in part.tokens]
        values = [value for part in chunks if part for value in part.token_logprobs]
        top = [entry for part in chunks if part for entry in part.top_logprobs]
    else:
        logprobs = openai_client.completions.create(**fields).choices[0].logprobs
        assert logprobs is not None and logprobs.token_logprobs is not None and logprobs.top_logprobs is not None
        assert len(logprobs.top_logprobs[0]) == 1
        tokens, values, top = logprobs.tokens, logprobs.token_logprobs, logprobs.top_logprobs
    assert len(tokens) == 5 and top == [{token: value} for token, value in zip(tokens, values, strict=True)]


def test_tokenize_with_return_token_strs(server, demo_root) -> None:
    """vLLM's test_tokenize_with_return_token_strs: the ids and pieces of the model's Hugging Face
    tokenizer (its `tokenizer.json`, as vLLM's test reads them with `convert_ids_to_tokens`)."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(demo_root / "models" / MODEL / "tokenizer.json"))
    prompt = "This is a token_strs test prompt! vllm1"
    response = httpx.post(
        f"{server.url}/tokenize", json={"prompt": prompt, "model": MODEL, "return_token_strs": True}, timeout=30
    )
    response.raise_for_status()
    expected = tokenizer.encode(prompt, add_special_tokens=True)
    result = response.json()
    assert result["tokens"] == expected.ids
    assert result["count"] == len(expected.ids)
    assert result["token_strs"] == expected.tokens


def test_tokenize_counts_what_chat_completion_counts(server, openai_client: openai.OpenAI) -> None:
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello there"}]
    usage = create(openai_client, messages=messages, max_tokens=1).usage
    for prefix in ("/v1", "/v3", ""):
        body = httpx.post(
            f"{server.url}{prefix}/tokenize", json={"model": MODEL, "messages": messages, "return_token_strs": True}
        ).json()
        assert body["count"] == usage.prompt_tokens == len(body["tokens"]) == len(body["token_strs"])
        assert body["max_model_len"] == 2048
    prompt = httpx.post(f"{server.url}/v3/tokenize", json={"model": MODEL, "prompt": "import os"}).json()
    # As vLLM: token_strs is null unless asked for, and then the vocabulary's pieces.
    assert prompt["token_strs"] is None
    pieces = httpx.post(
        f"{server.url}/v3/tokenize", json={"model": MODEL, "prompt": "import os", "return_token_strs": True}
    ).json()["token_strs"]
    assert "".join(pieces) == "importĠos"
    text = httpx.post(f"{server.url}/v3/detokenize", json={"model": MODEL, "tokens": prompt["tokens"]}).json()
    assert text == {"prompt": "import os"}
    missing = httpx.post(f"{server.url}/v1/tokenize", json={"model": MODEL})
    assert missing.status_code == 400
    unknown = httpx.post(f"{server.url}/v1/detokenize", json={"model": MODEL, "tokens": [1, 999_999]})
    assert unknown.status_code == 400 and unknown.json()["error"]["param"] == "tokens"


def test_chat_template_options(server, openai_client: openai.OpenAI) -> None:
    messages = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Once upon"}]

    from appliance.engine.worker.outputs import _BYTE_ALPHABET

    byte_of = {piece: byte for byte, piece in _BYTE_ALPHABET.items()}

    def rendered(**fields) -> str:
        body = {"model": MODEL, "messages": messages, "return_token_strs": True, **fields}
        pieces = "".join(httpx.post(f"{server.url}/v1/tokenize", json=body).json()["token_strs"])
        # The vocabulary's pieces are written in GPT-2's byte alphabet (as vLLM's), e.g. "Ġupon".
        return bytes(byte_of[char] for char in pieces).decode()

    assert rendered(continue_final_message=True).endswith("Once upon")
    assert rendered().endswith("<|im_start|>assistant\n")
    assert rendered(add_generation_prompt=False).endswith("Once upon<|im_end|>\n")
    reply = create(
        openai_client,
        messages=messages,
        max_tokens=4,
        temperature=0,
        extra_body={
            "continue_final_message": True,
            "add_generation_prompt": False,
            "chat_template_kwargs": {"flavour": 1},
        },
    )
    assert reply.choices[0].finish_reason in ("stop", "length")
    with pytest.raises(openai.BadRequestError) as info:
        create(
            openai_client, messages=messages, extra_body={"continue_final_message": True, "add_generation_prompt": True}
        )
    assert info.value.param == "add_generation_prompt"
