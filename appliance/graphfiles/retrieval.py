"""Embedding and rerank models: what kind a model folder holds, and its settings from its own files.

A model exported from sentence-transformers keeps that library's description of how token vectors
become one vector: `modules.json` lists the steps (a `Pooling` module, a `Normalize` module),
`1_Pooling/config.json` the pooling mode, `sentence_bert_config.json` the tokens read
(`max_seq_length`), `config_sentence_transformers.json` the query/document prompts. The graph's
`[embedding]` section overrides each; what neither says takes OpenVINO GenAI's default. Standard
library only (read when a graph is loaded).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

import msgspec

from appliance.graphfiles.model_json import json_object
from appliance.graphfiles.numbers import PositiveInt

__all__ = ["RetrievalConfig", "RetrievalSettings", "resolve", "retrieval_kind"]


_POOLING_MODES = (
    ("pooling_mode_mean_tokens", "mean"),
    ("pooling_mode_cls_token", "cls"),
    ("pooling_mode_lasttoken", "last_token"),
)
_DEFAULT_MAX_LENGTH = 512
# Tokenizers without a limit write a huge placeholder (1e30) as model_max_length.
_NO_LIMIT = 1_000_000


class RetrievalSettings(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """`[embedding]`: how an embedding or rerank model's texts become vectors or scores.

    Each key left out comes from the model's own sentence-transformers files where the folder has
    them (`modules.json`, `1_Pooling/config.json`, `sentence_bert_config.json`,
    `config_sentence_transformers.json`), else from OpenVINO GenAI's default; see
    `graphfiles.retrieval.resolve`.
    """

    pooling: Literal["cls", "mean", "last_token"] | None = None
    """How token vectors become one vector (embedding graphs)."""
    normalize: bool | None = None
    """Scale each vector to length 1 (embedding graphs)."""
    query_instruction: str | None = None
    """Text put before a query (an embeddings request with `input_type: "query"`, a rerank query)."""
    document_instruction: str | None = None
    """Text put before every other text embedded."""
    max_length: PositiveInt | None = None
    """Tokens of one text the model reads (see `limits.truncate_inputs` for longer ones)."""
    dimensions: tuple[PositiveInt, ...] = ()
    """Shorter vector sizes a request may ask for with `dimensions` (Matryoshka models: the vector
    is cut and normalized again). Empty: only the model's own size."""
    max_batch_tokens: PositiveInt = 8192
    """Tokens one pipeline call embeds, over the texts of every waiting request (dynamic
    batching); a longer request is embedded in several calls."""


class RetrievalConfig(msgspec.Struct, frozen=True, kw_only=True):
    """The resolved `[embedding]` settings the engine runs with."""

    pooling: Literal["cls", "mean", "last_token"]
    normalize: bool
    query_instruction: str
    document_instruction: str
    max_length: int
    dimensions: tuple[int, ...]
    max_batch_tokens: int


def retrieval_kind(model_dir: Path) -> Literal["TEXT_EMBEDDING", "TEXT_RERANK"] | None:
    """What `pipeline = "AUTO"` serves from this folder when it is not a generative model."""
    if (model_dir / "modules.json").is_file():
        return "TEXT_EMBEDDING"
    architectures = json_object(model_dir / "config.json").get("architectures") or []
    if any(str(name).endswith("ForSequenceClassification") for name in architectures):
        return "TEXT_RERANK"
    return None


def resolve(settings: RetrievalSettings, model_dir: Path) -> RetrievalConfig:
    """`settings` with every key left out filled from the model folder's own files."""
    modules = _json_list(model_dir / "modules.json")
    pooling_dir = next((m.get("path", "") for m in modules if str(m.get("type", "")).endswith(".Pooling")), None)
    pooling_config = json_object(model_dir / pooling_dir / "config.json") if pooling_dir is not None else {}
    model_pooling = next((mode for key, mode in _POOLING_MODES if pooling_config.get(key)), None)
    # Without modules.json nothing says; OpenVINO GenAI's default is to normalize.
    model_normalizes = any(str(m.get("type", "")).endswith(".Normalize") for m in modules) if modules else True
    prompts = json_object(model_dir / "config_sentence_transformers.json").get("prompts") or {}
    return RetrievalConfig(
        pooling=settings.pooling or model_pooling or "cls",
        normalize=model_normalizes if settings.normalize is None else settings.normalize,
        query_instruction=_pick(settings.query_instruction, prompts.get("query")),
        document_instruction=_pick(settings.document_instruction, prompts.get("document") or prompts.get("passage")),
        max_length=settings.max_length or _model_max_length(model_dir),
        dimensions=settings.dimensions,
        max_batch_tokens=settings.max_batch_tokens,
    )


def _pick(setting: str | None, model_value: object) -> str:
    if setting is not None:
        return setting
    return model_value if isinstance(model_value, str) else ""


def _model_max_length(model_dir: Path) -> int:
    for file, key in (
        ("sentence_bert_config.json", "max_seq_length"),
        ("tokenizer_config.json", "model_max_length"),
        ("config.json", "max_position_embeddings"),
    ):
        value = json_object(model_dir / file).get(key)
        if isinstance(value, int | float) and 0 < value < _NO_LIMIT:
            return int(value)
    return _DEFAULT_MAX_LENGTH


def _json_list(path: Path) -> list[dict[str, Any]]:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []
