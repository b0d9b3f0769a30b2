"""`appliance tune` (issue 42): the levers tried on each CPU, the choice on fake timings, the
winner written into a graph file as a reversible block, and `appliance check`'s warning when the
CPU differs."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from appliance.commands.check import _tuned_elsewhere
from appliance.cpu_features import isa, tuned_isa
from appliance.graphfiles import Graph
from appliance.graphfiles.tuning import tune_hint
from appliance.tools.tune.graph_text import tuned_text
from appliance.tools.tune.levers import Form, Measured, better, levers_for, perplexity_loss
from appliance.tools.tune.search import search
from appliance.tools.tune.weights import WEIGHTS, build_weights, candidate_dir, remove_candidate

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


def test_weight_formats_come_first_and_stay_out_of_the_plugin_config() -> None:
    levers = levers_for(AVX2, {}, weights=["int8_sym", "int4_sym_g64"])
    assert levers[0].key == WEIGHTS and levers[0].values == ("int8_sym", "int4_sym_g64")
    assert [lever.key for lever in levers_for(AVX2, {})][0] == "KV_CACHE_PRECISION"
    with pytest.raises(ValueError, match="unknown weight formats: int3"):
        levers_for(AVX2, {}, weights=["int3"])
    form = Form({WEIGHTS: "int8_sym", "KV_CACHE_PRECISION": "f16"})
    assert form.weights == "int8_sym" and Form().weights is None
    assert form.apply({"ENABLE_CPU_PINNING": True}) == {"ENABLE_CPU_PINNING": True, "KV_CACHE_PRECISION": "f16"}
    assert form.plugin_changes() == {"KV_CACHE_PRECISION": "f16"}


def test_a_weight_candidate_lives_beside_its_model_or_where_asked(tmp_path: Path) -> None:
    gguf = tmp_path / "m" / "Smol.Q4_1.gguf"
    gguf.parent.mkdir()
    gguf.write_bytes(b"GGUF")
    assert candidate_dir(gguf, "int8_sym") == tmp_path / "m" / "Smol.Q4_1-int8_sym"
    assert candidate_dir(gguf.parent, "int4_sym_g64", tmp_path / "w") == tmp_path / "w" / "m-int4_sym_g64"


def test_a_winner_with_other_weights_points_model_path_at_them_reversibly() -> None:
    gguf_graph = GRAPH.replace('model_path = "model"', 'model_path = "../models/s.gguf"\ngguf_reader = "LEGACY"')
    assert 'model_path = "../models/s.gguf"' in gguf_graph
    tuned = tuned_text(gguf_graph, {}, ["faster"], AVX2, "../models/s-int8_sym")
    parsed = tomllib.loads(tuned)
    assert parsed["model_path"] == "../models/s-int8_sym" and "gguf_reader" not in parsed
    assert '# was: model_path = "../models/s.gguf"' in tuned
    undone = tomllib.loads(tuned_text(tuned, {}, ["again"], AVX2))
    assert undone["model_path"] == "../models/s.gguf" and undone["gguf_reader"] == "LEGACY"


def test_other_greedy_tokens_win_only_within_the_perplexity_loss_allowed() -> None:
    reference = Measured(Form(), 100, 300, TOKENS, perplexity=10.0)
    int4 = Measured(Form({WEIGHTS: "int4_sym_g64"}), 130, 310, (1, 2, 4), perplexity=10.2)
    assert not better(int4, reference, reference)  # the default: the same greedy tokens only
    assert better(int4, reference, reference, max_perplexity_loss=0.03)
    assert not better(int4, reference, reference, max_perplexity_loss=0.01)
    unmeasured = Measured(Form({"KV_CACHE_PRECISION": "u4"}), 130, 310, (1, 2, 4))
    assert not better(unmeasured, reference, reference, max_perplexity_loss=0.5)
    assert perplexity_loss(int4, reference) == pytest.approx(0.02)


def test_tune_never_deletes_a_folder_it_did_not_make(tmp_path: Path) -> None:
    theirs = tmp_path / "model-int8_sym"  # the user's own export, named as tune names a candidate
    theirs.mkdir()
    (theirs / "openvino_model.xml").write_text("<net/>")
    remove_candidate(theirs)
    assert (theirs / "openvino_model.xml").is_file()
    with pytest.raises(RuntimeError, match="not a folder appliance tune made"):
        build_weights(tmp_path / "model", "int8_sym", theirs)
    assert (theirs / "openvino_model.xml").is_file()


def test_a_gguf_never_tuned_on_a_cpu_without_vnni_gets_a_hint(tmp_path: Path) -> None:
    source = tmp_path / "g.toml"
    source.write_text(GRAPH)
    gguf = Graph(name="m", model_path=str(tmp_path / "m.gguf"), pipeline="LM_CB", source=str(source))
    hint = tune_hint(gguf, AVX2)
    assert hint is not None and f"`appliance tune {source}`" in hint and "int8 IR" in hint
    assert tune_hint(gguf, SAPPHIRE) is None  # VNNI, a small (here: absent) file: nothing to gain
    with open(tmp_path / "m.gguf", "wb") as big:  # a 1B model's size (sparse: no disk used)
        big.truncate(656_359_584)
    per_channel = tune_hint(gguf, SAPPHIRE)
    assert per_channel is not None and "--weights int4_sym_channel_all --max-perplexity-loss" in per_channel
    assert "+456% perplexity" in per_channel  # the accuracy cost is said with the speed
    (tmp_path / "m.gguf").unlink()
    assert tune_hint(Graph(name="m", model_path=str(tmp_path), pipeline="LM_CB", source=str(source)), AVX2) is None
    source.write_text(tuned_text(GRAPH, {}, ["x"], AVX2))  # tuned already: nothing to say
    assert tune_hint(gguf, AVX2) is None


def test_perplexity_is_measured_once_per_weight_format_and_given_to_its_other_forms() -> None:
    from appliance.tools.tune.command import _measure_form
    from appliance.tools.tune.measure import Workload

    asked: list[tuple[Form, bool]] = []

    def fake_measure(path, form, workload, timeout, weights_dir):
        asked.append((form, workload.quality))
        perplexity = {None: 10.0, "int8_sym": 10.1}[form.weights] if workload.quality else None
        return Measured(form, 100, 300, TOKENS, perplexity=perplexity)

    known: dict = {}
    workload = Workload(quality=True)
    forms = [Form(), Form(), Form({WEIGHTS: "int8_sym"}), Form({WEIGHTS: "int8_sym", "KV_CACHE_PRECISION": "f16"})]
    measured = [_measure_form(fake_measure, Path("g.toml"), workload, 60, None, known, form) for form in forms]
    assert [quality for _, quality in asked] == [True, False, True, False]
    assert [m.perplexity for m in measured] == [10.0, 10.0, 10.1, 10.1]
    asked.clear()
    _measure_form(fake_measure, Path("g.toml"), Workload(quality=False), 60, None, {}, Form())
    assert asked[0][1] is False  # without weight formats, no perplexity at all
