"""`appliance tune` (issue 42): the levers tried on each CPU, the choice on fake timings, the
winner written into a graph file as a reversible block, and `appliance check`'s warning when the
CPU differs."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from appliance.commands.check import _tuned_elsewhere
from appliance.cpu_features import isa, tuned_isa
from appliance.tools.tune.graph_text import tuned_text
from appliance.tools.tune.levers import Form, Measured, better, levers_for
from appliance.tools.tune.search import search

AVX2 = ["avx2", "f16c"]
SAPPHIRE = ["avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_bf16", "f16c"]
TOKENS = (1, 2, 3)


def test_levers_follow_the_cpu_and_skip_what_the_graph_has() -> None:
    avx2 = {lever.key: lever.values for lever in levers_for(AVX2, {})}
    assert avx2["INFERENCE_PRECISION_HINT"] == ("f32",)
    assert "f32" in avx2["KV_CACHE_PRECISION"]  # f32 compute: an f32 cache is possible
    bf16 = {lever.key: lever.values for lever in levers_for(SAPPHIRE, {"KV_CACHE_PRECISION": "u8"})}
    assert bf16["INFERENCE_PRECISION_HINT"] == ("f32", "bf16")
    assert bf16["KV_CACHE_PRECISION"] == ("f16", "u4")  # u8 is the graph's own: the baseline
    assert 0 in bf16["DYNAMIC_QUANTIZATION_GROUP_SIZE"]


def measured(changes: dict, one: float, busy: float, tokens: tuple[int, ...] = TOKENS) -> Measured:
    return Measured(Form(changes), one, busy, tokens)


def test_a_form_must_be_faster_keep_the_busy_level_and_the_tokens() -> None:
    reference = measured({}, 100, 300)
    assert better(measured({"A": 1}, 104, 300), reference, reference)
    assert not better(measured({"A": 1}, 102, 300), reference, reference)  # within the noise
    assert not better(measured({"A": 1}, 150, 280), reference, reference)  # loses 7% busy
    assert not better(measured({"A": 1}, 150, 300, (1, 2, 4)), reference, reference)  # other greedy tokens
    assert not better(Measured(Form({"A": 1}), 150, 300, TOKENS, error="refused"), reference, reference)


def _fake(timings: dict[tuple, tuple[float, float]], calls: list[Form]):
    """A measure that looks up (one stream, busy) by the form's changes."""

    def measure(form: Form) -> Measured:
        calls.append(form)
        key = tuple(sorted(form.changes.items()))
        one, busy = timings.get(key, (100.0, 300.0))
        tokens = (9, 9) if ("KV_CACHE_PRECISION", "u4") in key else TOKENS
        return Measured(form, one, busy, tokens)

    return measure


def test_search_keeps_the_best_of_each_lever_on_top_of_the_last() -> None:
    timings = {
        (("KV_CACHE_PRECISION", "f16"),): (120.0, 300.0),
        (("KV_CACHE_PRECISION", "u4"),): (200.0, 400.0),  # fastest, but other tokens: never chosen
        (("DYNAMIC_QUANTIZATION_GROUP_SIZE", 64), ("KV_CACHE_PRECISION", "f16")): (130.0, 310.0),
    }
    calls: list[Form] = []
    lines: list[str] = []
    outcome = search(levers_for(AVX2, {}), _fake(timings, calls), budget=60, log=lines.append)
    assert outcome.best.form.changes == {"KV_CACHE_PRECISION": "f16", "DYNAMIC_QUANTIZATION_GROUP_SIZE": 64}
    assert outcome.one_stream_ratio == pytest.approx(1.3) and outcome.busy_ratio == pytest.approx(310 / 300)
    assert any("DIFFERENT greedy tokens" in line for line in lines)
    # Every form of every lever was tried, then the winner and the reference twice more each.
    assert len(outcome.tried) == 1 + sum(len(lever.values) for lever in levers_for(AVX2, {}))
    assert calls[-4:].count(Form()) == 2


def test_a_gain_that_does_not_hold_is_dropped() -> None:
    results = iter([80.0, 100.0, 120.0] + [100.0] * 100)  # a cold first run, the candidate's lucky one

    def measure(form: Form) -> Measured:
        return Measured(form, next(results), 300.0, TOKENS)

    outcome = search(levers_for(AVX2, {})[:1], measure, budget=60, log=lambda _: None)
    assert not outcome.changed and outcome.one_stream_ratio == 1.0


def test_the_budget_stops_the_search() -> None:
    lines: list[str] = []
    outcome = search(levers_for(AVX2, {}), _fake({}, []), budget=0.0, log=lines.append)
    assert outcome.out_of_time and len(outcome.tried) == 1  # the warm-up run is not counted
    assert any("time budget" in line for line in lines)


GRAPH = """# A chat model.
name = "m"
model_path = "model"

[limits]
max_tokens_limit = 64
"""


def test_the_winner_is_written_as_a_reversible_block() -> None:
    summary = ["2026-11-28 on a CPU: 1.20x", "more words"]
    tuned = tuned_text(GRAPH, {"KV_CACHE_PRECISION": "f16", "ENABLE_CPU_PINNING": True}, summary, AVX2)
    parsed = tomllib.loads(tuned)
    assert parsed["plugin_config"] == {"KV_CACHE_PRECISION": "f16", "ENABLE_CPU_PINNING": True}
    assert parsed["limits"] == {"max_tokens_limit": 64}
    assert tuned_isa(tuned) == AVX2 and "# appliance tune 2026-11-28 on a CPU: 1.20x\n# more words\n" in tuned
    # A graph with its own plugin_config: the replaced key stays, commented, and comes back on a re-tune.
    own = GRAPH + '\n[plugin_config]\nKV_CACHE_PRECISION = "u8"  # measured\nINFERENCE_PRECISION_HINT = "f32"\n'
    tuned = tuned_text(own, {"KV_CACHE_PRECISION": "f16", "INFERENCE_PRECISION_HINT": None}, summary, AVX2)
    assert tomllib.loads(tuned)["plugin_config"] == {"KV_CACHE_PRECISION": "f16"}
    assert '# was: KV_CACHE_PRECISION = "u8"  # measured' in tuned
    retuned = tuned_text(tuned, {}, ["again"], SAPPHIRE)
    assert tomllib.loads(retuned)["plugin_config"] == {"KV_CACHE_PRECISION": "u8", "INFERENCE_PRECISION_HINT": "f32"}
    assert retuned.count("# appliance tune") == 1 and tuned_isa(retuned) == SAPPHIRE
    assert tuned_text(retuned, {}, ["x"], AVX2).count("[plugin_config]") == 1


def test_check_warns_about_a_graph_tuned_on_another_cpu(tmp_path: Path) -> None:
    path = tmp_path / "g.toml"
    path.write_text(tuned_text(GRAPH, {}, ["x"], SAPPHIRE))
    assert "tuned on a CPU with avx2 avx512f" in _tuned_elsewhere(str(path), AVX2)
    assert _tuned_elsewhere(str(path), SAPPHIRE) is None
    path.write_text(GRAPH)
    assert _tuned_elsewhere(str(path), AVX2) is None
    assert isinstance(isa(), list)
