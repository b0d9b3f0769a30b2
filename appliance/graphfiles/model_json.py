"""A model folder's JSON files (config.json, tokenizer_config.json, preprocessor_config.json, ...),
read leniently: what the folder does not have, or cannot be read, is the model's own default."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["json_object"]


def json_object(path: Path) -> dict[str, Any]:
    """The JSON object in `path`; {} when the file is missing, unreadable or not an object."""
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}
