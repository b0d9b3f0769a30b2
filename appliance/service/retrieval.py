"""Embeddings on their engine, in OpenAI's shape, and the bounds every retrieval request shares
(embeddings here, rerank and score in `relevance`).

Bounds checked here, in the server, before anything is sent: the number of texts
(`limits.max_inputs_per_request`), the characters of each (`limits.max_prompt_chars`, by default
32 per token the model reads) and of all together (`CHARS_PER_REQUEST_TOKEN` per token of
`limits.max_request_tokens`): the engine tokenizes every text before it embeds any, on the thread
that embeds. Token counts are checked by the engine (`engine/worker/retrieval.py`), whose errors name a
text by its place in the engine's command (`input[2]`); `renamed` puts the request's own name back.

An empty string is a text like any other: the model reads its special tokens only (all-MiniLM-L6-v2
gives sentence-transformers' own vector for `""`). OpenAI refuses it (400, "'$.input' is
invalid"); llama.cpp and vLLM embed it, and so does sentence-transformers, the library these
models come from. Embedding it breaks no client written for OpenAI, and a batch of 2,048 chunks
does not fail for one empty chunk (docs/retrieval.md).
"""

from __future__ import annotations

import base64
import re
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from appliance.engine import EngineClient
from appliance.errors import ContextLengthExceeded, InvalidRequest
from appliance.protocol.retrieval import CreateEmbeddingResponse, Embedding, EmbeddingRequest, EmbeddingUsage
from appliance.service.prompt_limits import check_prompt

__all__ = [
    "CHARS_PER_REQUEST_TOKEN",
    "Answered",
    "check_count",
    "check_texts",
    "embed",
    "item_names",
    "renamed",
]

CHARS_PER_REQUEST_TOKEN = 8
"""Characters a request's texts may hold together, per token of `limits.max_request_tokens`
(English text runs about 4 characters a token)."""
_QUERY_TYPES = ("query", "search_query")
_ITEM = re.compile(r"^\w+\[(\d+)\]$")
T = TypeVar("T")


@dataclass
class Answered:
    """What the access log reads of an answered embeddings or rerank request."""

    prompt_tokens: int
    completion_tokens: int = 0
    tokens_seen: int = 0
    first_token_at: float | None = None
    submitted_at: float = 0.0
    finish_reason: str = "stop"


async def embed(engine: EngineClient, request: EmbeddingRequest) -> tuple[CreateEmbeddingResponse, Answered]:
    """`request.input` embedded by `engine`, in OpenAI's shape."""
    engine.require("embed")
    texts, names = _inputs(request.input)
    check_count(engine, len(texts), "input")
    written = [(text, name) for text, name in zip(texts, names, strict=True) if isinstance(text, str)]
    check_texts(engine, [text for text, _ in written], [name for _, name in written], "input")
    dimensions = request.dimensions
    # The vectors' length is read from the model's files with its graph (`Graph.facts`), so it is
    # known before the model loads; only where the files do not say is it checked on the answer.
    size = engine.embedding_size
    if dimensions is not None and size:
        _check_dimensions(engine, dimensions, size)
    answer = await renamed(engine.embed(texts, query=request.input_type in _QUERY_TYPES), names, "input")
    if dimensions is not None and not size:
        _check_dimensions(engine, dimensions, answer.size)
    vectors = np.frombuffer(answer.vectors, dtype="<f4").reshape(-1, answer.size)
    if dimensions is not None and dimensions != answer.size:
        # A Matryoshka model's leading dimensions are a vector of their own, normalized again.
        vectors = vectors[:, :dimensions]
        vectors = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    data = [
        Embedding(embedding=_encoded(vector, request.encoding_format), index=index)
        for index, vector in enumerate(vectors)
    ]
    usage = EmbeddingUsage(prompt_tokens=answer.prompt_tokens, total_tokens=answer.prompt_tokens)
    return CreateEmbeddingResponse(data=data, model=engine.name, usage=usage), Answered(answer.prompt_tokens)


def _check_dimensions(engine: EngineClient, dimensions: int, size: int) -> None:
    """Refuse (400, param `dimensions`) a vector length the model does not give: its own `size`,
    or one of the graph's shorter `embedding.dimensions`."""
    if dimensions != size and dimensions not in engine.graph.embedding.dimensions:
        offered = sorted({size, *engine.graph.embedding.dimensions})
        raise InvalidRequest(
            f"Model '{engine.name}' gives vectors of {' or '.join(map(str, offered))} dimensions, not {dimensions}.",
            param="dimensions",
            code="invalid_value",
        )


def _inputs(value: str | list) -> tuple[list[str | list[int]], list[str]]:
    """The texts of an embeddings `input` (a string, strings, token ids, or lists of token ids),
    each with its name in the request (`input` for one text, else `input[i]`)."""
    if isinstance(value, str):
        return [value], ["input"]
    if not value:
        raise InvalidRequest("`input` is an empty list: send at least one text.", param="input", code="empty_array")
    if all(_is_token(item) for item in value):
        return [value], ["input"]
    kind = str if isinstance(value[0], str) else list
    for index, item in enumerate(value):
        if kind is str and not isinstance(item, str):
            raise InvalidRequest(
                f"`input[{index}]` is not a string; a list of inputs holds strings, or lists of token ids.",
                param=f"input[{index}]",
                code="invalid_type",
            )
        if kind is list and not (isinstance(item, list) and item and all(_is_token(token) for token in item)):
            raise InvalidRequest(
                f"`input[{index}]` is not a non-empty list of token ids (whole numbers from 0).",
                param=f"input[{index}]",
                code="invalid_type",
            )
    return value, item_names("input", value)


def _is_token(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def item_names(field: str, value: str | Sequence[object]) -> list[str]:
    """The request's name of each text of `field`: the field itself for one string, `field[i]`
    for the items of a list."""
    return [field] if isinstance(value, str) else [f"{field}[{index}]" for index in range(len(value))]


def check_count(engine: EngineClient, count: int, param: str) -> None:
    """At most `limits.max_inputs_per_request` texts (or pairs) in one request."""
    limit = engine.graph.limits.max_inputs_per_request
    if count > limit:
        raise InvalidRequest(
            f"`{param}` holds {count} texts; model '{engine.name}' takes at most {limit} per request.",
            param=param,
            code="array_above_max_length",
        )


def check_texts(engine: EngineClient, texts: Sequence[str], names: Sequence[str], whole: str) -> None:
    """Each text within `limits.max_prompt_chars` (naming it), all of them within the request's
    characters (naming `whole`)."""
    for text, name in zip(texts, names, strict=True):
        check_prompt(text, engine.graph, engine.max_context, name)
    _check_total(engine, texts, whole)


async def renamed(answer: Awaitable[T], names: Sequence[str], whole: str) -> T:
    """`answer` from the engine, whose errors name the request's own fields: the engine names the
    texts of its command `input[i]` or `documents[i]` (here `names[i]`, in the message too), and
    all of them `input` or `documents` (here `whole`)."""
    try:
        return await answer
    except InvalidRequest as exc:
        if exc.param is not None:
            item = _ITEM.match(exc.param)
            if item and int(item.group(1)) < len(names):
                name = names[int(item.group(1))]
                exc.message = exc.message.replace(exc.param, name)
                exc.param = name
            else:
                exc.param = whole
        raise


def _check_total(engine: EngineClient, texts: Sequence[str], param: str) -> None:
    limits = engine.graph.limits
    chars = sum(map(len, texts))
    bound = limits.max_request_tokens * CHARS_PER_REQUEST_TOKEN
    if chars > bound:
        raise ContextLengthExceeded(
            f"The request's texts hold {chars} characters; model '{engine.name}' takes at most {bound} "
            f"({limits.max_request_tokens} tokens) per request. Send them in several requests.",
            param=param,
        )


def _encoded(vector: np.ndarray, encoding_format: str) -> list[float] | str:
    if encoding_format == "base64":
        return base64.b64encode(vector.astype("<f4").tobytes()).decode("ascii")
    return vector.tolist()
