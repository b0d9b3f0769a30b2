"""`image_fit`: how far an image may be scaled down before the pipeline, per model family, read
from the model folder (Qwen2-VL: the pipeline's own rule, so the tokens do not change)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from appliance.graphfiles.vision import image_fit, image_tokens

DEMO_PROCESSOR = {"min_pixels": 3136, "max_pixels": 50176, "patch_size": 14, "merge_size": 2}


def model_dir(tmp_path: Path, model_type: str, processor: dict | None) -> Path:
    (tmp_path / "config.json").write_text(json.dumps({"model_type": model_type}))
    if processor is not None:
        (tmp_path / "preprocessor_config.json").write_text(json.dumps(processor))
    return tmp_path


def test_qwen2_vl_scales_to_the_pipelines_size_and_keeps_the_token_count(tmp_path: Path) -> None:
    folder = model_dir(tmp_path, "qwen2_vl", DEMO_PROCESSOR)
    fit, tokens = image_fit(folder), image_tokens(folder)
    assert fit is not None and tokens is not None
    assert fit(4096, 4096) == (224, 224)
    assert fit(900, 1200) == (168, 252)
    # Within the limit (however the pipeline rounds it), or below min_pixels: as it is.
    for size in ((20, 30), (250, 200), (224, 224)):
        assert fit(*size) == size
    rng = random.Random(0)
    for _ in range(20_000):
        height, width = rng.randint(1, 5000), rng.randint(1, 5000)
        try:
            fitted = fit(height, width)
        except ValueError:
            continue
        assert fitted[0] <= height and fitted[1] <= width
        assert tokens(*fitted) == tokens(height, width), (height, width, fitted)
        if fitted != (height, width):
            assert fitted[0] * fitted[1] <= DEMO_PROCESSOR["max_pixels"]


def test_qwen2_vl_refuses_what_the_pipeline_cannot_take(tmp_path: Path) -> None:
    fit = image_fit(model_dir(tmp_path, "qwen2_5_vl", DEMO_PROCESSOR))
    assert fit is not None
    with pytest.raises(ValueError, match="elongated"):
        fit(10, 3000)
    # A size the rule does not keep as it is (a second pass would shrink it further): unscaled.
    assert fit(1788, 36) == (1788, 36)


def test_qwen2_vl_defaults_without_a_processor_file(tmp_path: Path) -> None:
    fit = image_fit(model_dir(tmp_path, "qwen2_vl", None))
    assert fit is not None
    height, width = fit(4096, 4096)
    assert height * width <= 28 * 28 * 1280 < 4096 * 4096


def test_llava_scales_the_shorter_side_to_its_edge(tmp_path: Path) -> None:
    fit = image_fit(model_dir(tmp_path, "llava", {"size": {"shortest_edge": 336}, "crop_size": 336}))
    assert fit is not None
    assert fit(4096, 2048) == (672, 336)
    assert fit(300, 5000) == (300, 5000)


def test_gemma3_clamps_each_side_to_its_fixed_size(tmp_path: Path) -> None:
    fit = image_fit(model_dir(tmp_path, "gemma3", {"size": {"height": 896, "width": 896}}))
    assert fit is not None
    assert fit(4096, 600) == (896, 600)
    assert fit(500, 400) == (500, 400)
    # Pan and scan crops the full image into several: nothing may be scaled away beforehand.
    assert image_fit(model_dir(tmp_path, "gemma3", {"do_pan_and_scan": True})) is None


def test_unknown_families_and_missing_folders_scale_nothing(tmp_path: Path) -> None:
    assert image_fit(model_dir(tmp_path, "llava_next", {"size": {"shortest_edge": 336}})) is None
    assert image_fit(tmp_path / "missing") is None
