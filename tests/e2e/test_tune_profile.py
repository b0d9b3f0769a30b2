"""`appliance tune --profile` (issue 51): OpenVINO's per-layer counters of a decode step on the real
CPU plugin, and OpenVINO GenAI's own time per token, for demo-chat's model (tiny, random weights)."""

from __future__ import annotations

from pathlib import Path

from appliance.tools.tune.profile import pipeline_tpot, profile, render

VOCABULARY = 4096
"""demo-chat's vocabulary: the width of its output layer."""


def test_a_decode_step_split_by_layer_kind(demo_root: Path, tmp_path: Path) -> None:
    model = demo_root / "models" / "demo-chat"
    served = profile(model, None, {}, work_dir=tmp_path, prompt_tokens=32, steps=8)
    pinned = profile(model, None, {"INFERENCE_NUM_THREADS": 1}, work_dir=tmp_path, prompt_tokens=32, steps=8)
    print("\n".join(render([served, pinned], reference_ms=1.0)))
    for row in (served, pinned):
        assert not row.error, row.error
        assert row.step_ms > 0 and row.counted_ms > 0
        # The output layer (as wide as the vocabulary) is one of the fully connected layers found.
        assert 0 < row.output_layer_ms <= row.fc_ms <= row.counted_ms
        assert row.fc_kernel
    assert pinned.properties == "INFERENCE_NUM_THREADS=1" and served.properties == "defaults"


def test_a_form_the_plugin_refuses_is_a_row_not_a_crash(demo_root: Path, tmp_path: Path) -> None:
    model = demo_root / "models" / "demo-chat"
    refused = profile(model, None, {"KV_CACHE_PRECISION": "no-such-type"}, work_dir=tmp_path, steps=2)
    assert refused.error and refused.step_ms == 0
    assert "failed:" in render([refused])[-1]


def test_genai_time_per_token_of_both_pipelines(demo_root: Path) -> None:
    model = demo_root / "models" / "demo-chat"
    rows = [pipeline_tpot(model, {}, stateful=s, prompt_tokens=32, output_tokens=16) for s in (False, True)]
    assert [row.weights for row in rows] == ["GenAI continuous batching", "GenAI stateful (SDPA)"]
    for row in rows:
        assert not row.error, row.error
        assert row.step_ms > 0
    assert render(rows)[-1].endswith("| - | - | - | - |")
