"""Every field of docs/api.md's table of OpenAI fields, sent once through the `openai` SDK to the
real server: honoured ones change what comes back, accepted ones change nothing, refused ones are a
400 naming them. The cases are keyed by the table itself, so a row without a case fails here.

Greedy decoding of the demo model (random words) makes "changes nothing" exact: an accepted field
must give the very text the same request gives without it.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import openai
import pytest

from tests.api_fields import documented_fields

MODEL = "demo-chat"
CHAT = [{"role": "user", "content": "Tell me a story"}]
PROMPT = "The license"
INPUT = "Tell me a story"
TOKENS = 16
TOOL = {
    "name": "get_weather",
    "description": "Weather forecast",
    "parameters": {
        "type": "object",
        "properties": {"city": {"enum": ["Oslo", "Rome"]}},
        "required": ["city"],
        "additionalProperties": False,
    },
}
CHAT_TOOLS = [{"type": "function", "function": TOOL}]
RESPONSE_TOOLS = [{"type": "function", **TOOL}]
SCHEMA = {
    "type": "object",
    "properties": {"rain": {"type": "boolean"}},
    "required": ["rain"],
    "additionalProperties": False,
}


def chat(client: openai.OpenAI, **fields):
    return client.chat.completions.create(
        **{"model": MODEL, "messages": CHAT, "max_tokens": TOKENS, "temperature": 0, **fields}
    )


def complete(client: openai.OpenAI, **fields):
    return client.completions.create(
        **{"model": MODEL, "prompt": PROMPT, "max_tokens": TOKENS, "temperature": 0, **fields}
    )


def respond(client: openai.OpenAI, **fields):
    return client.responses.create(
        **{"model": MODEL, "input": INPUT, "max_output_tokens": TOKENS, "temperature": 0, **fields}
    )


def text_of(reply) -> str:
    """The answer's text, whole or streamed, from any of the three APIs."""
    if isinstance(reply, openai.Stream):
        parts = []
        for event in reply:
            if getattr(event, "type", None) == "response.output_text.delta":
                parts.append(event.delta)
            elif getattr(event, "object", None) == "chat.completion.chunk":
                parts += [choice.delta.content or "" for choice in event.choices]
            elif getattr(event, "object", None) == "text_completion":
                parts += [choice.text for choice in event.choices]
        return "".join(parts)
    if getattr(reply, "object", None) == "response":
        return reply.output_text
    choice = reply.choices[0]
    return choice.text if reply.object == "text_completion" else choice.message.content


CALLS = {"chat": chat, "completions": complete, "responses": respond}


class Accepted:
    """Sent with these fields, the answer is the plain request's."""

    def __init__(self, **fields: object) -> None:
        self.fields = fields


class Refused:
    """A 400 whose `param` names the field."""

    def __init__(self, **fields: object) -> None:
        self.fields = fields


Honoured = Callable[[openai.OpenAI, str], None]
"""Checks the field's effect, given the client and the plain request's text."""


# --- honoured: each field's effect ----------------------------------------------------------


def _differs(call, **fields) -> Honoured:
    return lambda client, plain: _assert(text_of(call(client, **fields)) != plain)


def _same(call, **fields) -> Honoured:
    return lambda client, plain: _assert(text_of(call(client, **fields)) == plain)


def _assert(condition: bool) -> None:
    assert condition


def _usage_tokens(reply) -> int:
    usage = reply.usage
    return usage.output_tokens if hasattr(usage, "output_tokens") else usage.completion_tokens


def _limits(call, name: str) -> Honoured:
    return lambda client, plain: _assert(_usage_tokens(call(client, **{name: 3})) == 3)


def _seeded(call) -> Honoured:
    def check(client: openai.OpenAI, plain: str) -> None:
        first, again, other = (text_of(call(client, temperature=1.0, seed=seed)) for seed in (5, 5, 6))
        assert first == again != other

    return check


def _stops(call) -> Honoured:
    def check(client: openai.OpenAI, plain: str) -> None:
        stop = plain[3:6]
        assert text_of(call(client, stop=[stop])) == plain[: plain.index(stop)]

    return check


def _n(call) -> Honoured:
    return lambda client, plain: _assert(len(call(client, n=2, temperature=1.0, seed=1).choices) == 2)


def _streams(call, **fields) -> Honoured:
    return lambda client, plain: _assert(text_of(call(client, stream=True, **fields)) == plain)


def _usage_in_stream(call) -> Honoured:
    def check(client: openai.OpenAI, plain: str) -> None:
        chunks = list(call(client, stream=True, stream_options={"include_usage": True}))
        assert chunks[-1].usage is not None and chunks[-1].choices == []

    return check


def _chat_logprobs(client: openai.OpenAI, plain: str) -> None:
    reply = chat(client, logprobs=True)
    assert len(reply.choices[0].logprobs.content) == reply.usage.completion_tokens


def _completion_logprobs(client: openai.OpenAI, plain: str) -> None:
    reply = complete(client, logprobs=0)
    assert len(reply.choices[0].logprobs.tokens) == reply.usage.completion_tokens


def _beam_search(client: openai.OpenAI, plain: str) -> None:
    assert len(complete(client, best_of=2).choices) == 1


def _json(call, **fields) -> Honoured:
    limit = "max_output_tokens" if call is respond else "max_tokens"
    return lambda client, plain: _assert(json.loads(text_of(call(client, **{limit: 64}, **fields))) in SCHEMA_VALUES)


SCHEMA_VALUES = [{"rain": True}, {"rain": False}]


def _chat_tools_shown(client: openai.OpenAI, plain: str) -> None:
    # The template renders the tools into the prompt.
    assert chat(client, tools=CHAT_TOOLS).usage.prompt_tokens > chat(client).usage.prompt_tokens


def _chat_forced_call(client: openai.OpenAI, plain: str) -> None:
    reply = chat(client, tools=CHAT_TOOLS, tool_choice="required", max_tokens=100)
    assert reply.choices[0].finish_reason == "tool_calls"


def _chat_one_call(client: openai.OpenAI, plain: str) -> None:
    reply = chat(client, tools=CHAT_TOOLS, tool_choice="required", parallel_tool_calls=False, max_tokens=100)
    assert len(reply.choices[0].message.tool_calls) == 1


def _template_variable(call, name: str, value: object, bad: object) -> Honoured:
    # Handed to the chat template (the demo's ignores it): read and checked, not refused.
    def check(client: openai.OpenAI, plain: str) -> None:
        assert text_of(call(client, **{name: value})) == plain
        with pytest.raises(openai.BadRequestError):
            call(client, **{name: bad})

    return check


def _response_tools_shown(client: openai.OpenAI, plain: str) -> None:
    assert respond(client, tools=RESPONSE_TOOLS).usage.input_tokens > respond(client).usage.input_tokens


def _response_forced_call(client: openai.OpenAI, plain: str) -> None:
    reply = respond(client, tools=RESPONSE_TOOLS, tool_choice="required", max_output_tokens=100)
    assert [item.type for item in reply.output][0] == "function_call"


def _response_one_call(client: openai.OpenAI, plain: str) -> None:
    reply = respond(
        client, tools=RESPONSE_TOOLS, tool_choice="required", parallel_tool_calls=False, max_output_tokens=100
    )
    assert [item.type for item in reply.output] == ["function_call"]


def _instructions(client: openai.OpenAI, plain: str) -> None:
    reply = respond(client, instructions="Answer in French.")
    assert reply.instructions == "Answer in French." and reply.output_text != plain


def _include_logprobs(client: openai.OpenAI, plain: str) -> None:
    reply = respond(client, include=["message.output_text.logprobs"])
    assert len(reply.output[0].content[0].logprobs) == reply.usage.output_tokens


def _stored(client: openai.OpenAI, plain: str) -> None:
    kept = respond(client, store=True)
    assert client.responses.retrieve(kept.id).output_text == plain
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(respond(client, store=False).id)


def _continued(client: openai.OpenAI, plain: str) -> None:
    first = respond(client)
    follow = respond(client, previous_response_id=first.id, input="Go on")
    assert follow.usage.input_tokens > first.usage.input_tokens + first.usage.output_tokens


def _metadata_kept(client: openai.OpenAI, plain: str) -> None:
    reply = respond(client, metadata={"ticket": "16"})
    assert reply.output_text == plain and client.responses.retrieve(reply.id).metadata == {"ticket": "16"}


def _other_model(call, **fields) -> Honoured:
    return lambda client, plain: _assert(call(client, **fields).model == MODEL)


CASES: dict[str, dict[str, Accepted | Refused | Honoured]] = {
    "chat": {
        "model": _other_model(chat),
        "messages": _differs(chat, messages=[{"role": "user", "content": "Something else entirely"}]),
        "max_tokens": _limits(chat, "max_tokens"),
        "max_completion_tokens": _limits(chat, "max_completion_tokens"),
        "temperature": _differs(chat, temperature=1.0, seed=1),
        "top_p": _same(chat, temperature=1.0, seed=1, top_p=1e-6),
        "seed": _seeded(chat),
        "stop": _stops(chat),
        "frequency_penalty": _differs(chat, frequency_penalty=2.0),
        "presence_penalty": _differs(chat, presence_penalty=2.0),
        "n": _n(chat),
        "logprobs": _chat_logprobs,
        "top_logprobs": Refused(logprobs=True, top_logprobs=3),
        "logit_bias": Refused(logit_bias={"42": 5}),
        "response_format": _json(
            chat, response_format={"type": "json_schema", "json_schema": {"name": "r", "schema": SCHEMA}}
        ),
        "verbosity": Refused(verbosity="low"),
        "tools": _chat_tools_shown,
        "tool_choice": _chat_forced_call,
        "parallel_tool_calls": _chat_one_call,
        "reasoning_effort": _template_variable(chat, "reasoning_effort", "low", "extreme"),
        "stream": _streams(chat),
        "stream_options.include_usage": _usage_in_stream(chat),
        "stream_options.include_obfuscation": Accepted(stream=True, stream_options={"include_obfuscation": False}),
        "store": Accepted(store=False),
        "metadata": Accepted(metadata={"ticket": "16"}),
        "user": Accepted(user="someone"),
        "safety_identifier": Accepted(safety_identifier="hash-of-someone"),
        "service_tier": Accepted(service_tier="auto"),
        "prompt_cache_key": Accepted(prompt_cache_key="story"),
        "prompt_cache_retention": Accepted(prompt_cache_retention="24h"),
        "prompt_cache_options": Accepted(prompt_cache_options={"mode": "implicit"}),
        "prediction": Accepted(prediction={"type": "content", "content": "Once upon a time"}),
        "audio": Refused(audio={"voice": "alloy", "format": "wav"}),
        "modalities": Refused(modalities=["text", "audio"]),
        "web_search_options": Refused(web_search_options={}),
        "functions": Refused(functions=[TOOL]),
        "function_call": Refused(function_call="auto"),
        "moderation": Refused(moderation={"model": "omni-moderation-latest"}),
    },
    "completions": {
        "model": _other_model(complete),
        "prompt": _differs(complete, prompt="Something else entirely"),
        "max_tokens": _limits(complete, "max_tokens"),
        "temperature": _differs(complete, temperature=1.0, seed=1),
        "top_p": _same(complete, temperature=1.0, seed=1, top_p=1e-6),
        "seed": _seeded(complete),
        "stop": _stops(complete),
        "frequency_penalty": _differs(complete, frequency_penalty=2.0),
        "presence_penalty": _differs(complete, presence_penalty=2.0),
        "n": _n(complete),
        "best_of": _beam_search,
        "logprobs": _completion_logprobs,
        "logit_bias": Refused(logit_bias={"42": 5}),
        "echo": lambda client, plain: _assert(text_of(complete(client, echo=True)) == PROMPT + plain),
        "suffix": Refused(suffix="The end."),
        "stream": _streams(complete),
        "stream_options.include_usage": _usage_in_stream(complete),
        "stream_options.include_obfuscation": Accepted(stream=True, stream_options={"include_obfuscation": False}),
        "user": Accepted(user="someone"),
    },
    "responses": {
        "model": _other_model(respond),
        "input": _differs(respond, input="Something else entirely"),
        "instructions": _instructions,
        "max_output_tokens": _limits(respond, "max_output_tokens"),
        "temperature": _differs(respond, temperature=1.0, extra_body={"seed": 1}),
        "top_p": _same(respond, temperature=1.0, top_p=1e-6, extra_body={"seed": 1}),
        "include": _include_logprobs,
        "text.format": _json(respond, text={"format": {"type": "json_schema", "name": "r", "schema": SCHEMA}}),
        "text.verbosity": Refused(text={"verbosity": "low"}),
        "tools": _response_tools_shown,
        "tool_choice": _response_forced_call,
        "parallel_tool_calls": _response_one_call,
        "reasoning.effort": _template_variable(respond, "reasoning", {"effort": "low"}, {"effort": "extreme"}),
        "reasoning.summary": Accepted(reasoning={"summary": "auto"}),
        "reasoning.generate_summary": Accepted(reasoning={"generate_summary": "concise"}),
        "reasoning.context": Accepted(reasoning={"context": "all_turns"}),
        "reasoning.mode": Refused(reasoning={"mode": "pro"}),
        "stream": _streams(respond),
        "stream_options.include_obfuscation": Accepted(stream=True, stream_options={"include_obfuscation": False}),
        "store": _stored,
        "previous_response_id": _continued,
        "metadata": _metadata_kept,
        "top_logprobs": Refused(top_logprobs=3),
        "prompt": Refused(prompt={"id": "pmpt_1"}),
        "user": Accepted(user="someone"),
        "safety_identifier": Accepted(safety_identifier="hash-of-someone"),
        "service_tier": Accepted(service_tier="auto"),
        "prompt_cache_key": Accepted(prompt_cache_key="story"),
        "prompt_cache_retention": Accepted(prompt_cache_retention="24h"),
        "prompt_cache_options": Accepted(prompt_cache_options={"mode": "implicit"}),
        "max_tool_calls": Accepted(max_tool_calls=3),
        "access_programs": Accepted(access_programs={"cyber": "standard"}),
        "image": Accepted(image={"context_compression": "auto"}),
        # Not in the SDK (Codex sends it): through extra_body.
        "client_metadata": Accepted(
            extra_body={"client_metadata": {"root_turn_id": "t1", "x-codex-turn-metadata": "{}"}}
        ),
        "truncation": Refused(truncation="auto"),
        "background": Refused(background=True),
        "background_options": Refused(background_options={"completion_window": "2h"}),
        "conversation": Refused(conversation="conv_1"),
        "context_management": Refused(context_management=[{"type": "compaction"}]),
        "moderation": Refused(moderation={"model": "omni-moderation-latest"}),
    },
}

ROWS = [(api, name, group) for name, groups in documented_fields().items() for api, group in groups.items()]


def test_every_row_has_a_case() -> None:
    assert {(api, name) for api, name, _ in ROWS} == {(api, name) for api, cases in CASES.items() for name in cases}


@pytest.fixture(scope="module")
def plain(openai_client: openai.OpenAI) -> dict[str, str]:
    """Each API's answer to the plain request."""
    return {api: text_of(call(openai_client)) for api, call in CALLS.items()}


@pytest.mark.parametrize(("api", "name", "group"), ROWS, ids=[f"{api}:{name}" for api, name, _ in ROWS])
def test_field_does_what_the_table_says(
    openai_client: openai.OpenAI, plain: dict[str, str], api: str, name: str, group: str
) -> None:
    case = CASES[api][name]
    call = CALLS[api]
    if group == "accepted":
        assert isinstance(case, Accepted)
        assert text_of(call(openai_client, **case.fields)) == plain[api]
    elif group == "refused":
        assert isinstance(case, Refused)
        with pytest.raises(openai.BadRequestError) as info:
            call(openai_client, **case.fields)
        assert info.value.param == name and info.value.code == "unsupported_parameter", info.value.body
    else:
        assert group == "honoured" and callable(case)
        case(openai_client, plain[api])
