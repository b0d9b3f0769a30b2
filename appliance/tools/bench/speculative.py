"""Speculative decoding speed-up on a main/draft pair whose agreement is controlled by construction.

    python -m appliance.tools.bench.speculative [--root DIR] [--damping 0.02] [--draft-layers 2]

The main model is demo-bench's (Qwen2.5-0.5B's shape, ~365 M parameters, random weights) with one
change: the residual contributions of its layers past the first `--draft-layers` (attention
`o_proj` and MLP `down_proj`) are scaled by `--damping`. The draft is a copy of those first layers,
sharing their weights and the embeddings. The main model still runs all 24 layers (its cost does not
change); its predictions follow the draft's more closely the smaller the damping (1.0: an unrelated
stack of layers on top). Both are built offline (~2 min) and cached under `--root`.

In one run and one process, each concurrency level runs the same greedy `ignore_eos` requests on a
plain pipeline and on a pipeline with the draft, and prints output tokens/s of both, the speed-up and
the acceptance rate (counted as the engine process counts it: candidates validated per step vs
tokens emitted per step).
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import shutil
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

from appliance.commands.numbers import Number, Numbers
from appliance.graphfiles import Graph, SchedulerSettings, SpeculativeSettings

__all__ = ["build_pair", "main", "run_level"]

_ids = itertools.count(1)
PROMPT_SOURCE = Path("/usr/share/common-licenses")


def build_pair(root: Path, *, draft_layers: int, damping: float, log=print) -> tuple[Path, Path]:
    """Build (or reuse) `root/main` and `root/draft`; returns their directories."""
    from appliance.tools.demo.export import export_causal_lm, make_causal_lm, train_tokenizer
    from appliance.tools.demo.recipes import fingerprint, get_recipe

    recipe = get_recipe("demo-bench")
    stamp = {"recipe": str(fingerprint(recipe)), "draft_layers": draft_layers, "damping": damping}
    main_dir, draft_dir, stamp_file = root / "main", root / "draft", root / "stamp.json"
    if stamp_file.is_file() and json.loads(stamp_file.read_text()) == stamp:
        return main_dir, draft_dir
    import torch

    started = time.monotonic()
    tokenizer = train_tokenizer(recipe.tokenizer)
    main_model = make_causal_lm(recipe.model, tokenizer)
    with torch.no_grad():
        for layer in main_model.model.layers[draft_layers:]:
            layer.self_attn.o_proj.weight.mul_(damping)
            layer.mlp.down_proj.weight.mul_(damping)
    draft_model = make_causal_lm(dataclasses.replace(recipe.model, num_hidden_layers=draft_layers), tokenizer)
    missing = draft_model.load_state_dict(main_model.state_dict(), strict=False).missing_keys
    if missing:
        raise RuntimeError(f"draft weights not taken from the main model: {missing[:3]}")
    for name, model, out in (("main", main_model, main_dir), ("draft", draft_model, draft_dir)):
        params = sum(p.numel() for p in model.parameters()) / 1e6
        log(f"{name}: {model.config.num_hidden_layers} layers, {params:.0f} M parameters: exporting (int8)")
        hf_dir = root / f"hf-{name}"
        model.save_pretrained(hf_dir)
        tokenizer.save_pretrained(hf_dir)
        shutil.rmtree(out, ignore_errors=True)
        export_causal_lm(hf_dir, out, tokenizer, "int8")
        shutil.rmtree(hf_dir)
    stamp_file.write_text(json.dumps(stamp))
    log(f"built in {time.monotonic() - started:.0f} s")
    return main_dir, draft_dir


@dataclass
class LevelResult:
    tokens_per_second: float
    drafted: int = 0
    accepted: int = 0

    @property
    def acceptance(self) -> float:
        return self.accepted / self.drafted if self.drafted else 0.0


def run_level(pipe, prompts: list, *, concurrency: int, max_tokens: int, assistant_tokens: int) -> LevelResult:
    """Keep `concurrency` requests in flight until every prompt is served; output tokens/s."""
    from appliance.engine.messages import SamplingParams
    from appliance.engine.worker.generation import generation_config

    params = SamplingParams(
        max_new_tokens=max_tokens, temperature=0.0, ignore_eos=True, num_assistant_tokens=assistant_tokens
    )
    eos = pipe.get_tokenizer().get_eos_token_id()
    queue, active = list(prompts), {}
    tokens = drafted = accepted = 0
    started = time.perf_counter()
    while queue or active:
        while queue and len(active) < concurrency:
            config = generation_config(params, max_tokens, eos_token_id=eos)
            request_id = next(_ids)
            active[request_id] = [pipe.add_request(request_id, queue.pop(), config), 0]
        pipe.step()
        for key in list(active):
            handle, generated = active[key]
            if handle.can_read():
                new = len(handle.read()[0].generated_ids)
                slots = min(assistant_tokens, max_tokens - generated - 1)
                if assistant_tokens and generated and slots > 0 and new:
                    drafted += slots
                    accepted += min(new - 1, slots)
                active[key][1] = generated + new
            if handle.get_status().name != "RUNNING":
                tokens += active.pop(key)[1]
    return LevelResult(tokens / (time.perf_counter() - started), drafted, accepted)


def _prompts(tokenizer, count: int, length: int) -> list:
    words = " ".join(p.read_text(errors="replace") for p in sorted(PROMPT_SOURCE.iterdir())[:4]).split()
    prompts = []
    for i in range(count):
        text = " ".join(words[i * 97 : i * 97 + length])
        ids = tokenizer.encode(text, add_special_tokens=False).input_ids
        prompts.append(ids)
    return prompts


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    parser.add_argument("--root", type=Path, default=Path(".cache/bench-spec"))
    parser.add_argument("--draft-layers", type=Number(int, 1, 64), default=2)
    parser.add_argument("--damping", type=Number(float, 0, 1), default=0.02)
    parser.add_argument(
        "--assistant-tokens", type=Number(int, 1, 16), default=4, help="num_assistant_tokens (default 4)"
    )
    parser.add_argument("--concurrency", type=Numbers(Number(int, 1, 1024)), default="1,4")
    parser.add_argument(
        "--requests", type=Number(int, 0, 1_000_000), default=0, help="per level (default 2 x concurrency, at least 3)"
    )
    parser.add_argument("--max-tokens", type=Number(int, 1, 1_000_000), default=128)
    parser.add_argument("--prompt-words", type=Number(int, 1, 1_000_000), default=100)
    args = parser.parse_args(argv)

    from appliance.engine.worker.pipelines import load_pipeline

    main_dir, draft_dir = build_pair(args.root, draft_layers=args.draft_layers, damping=args.damping)
    scheduler = SchedulerSettings(cache_size=2, max_num_seqs=64, max_num_batched_tokens=256)
    plain_graph = Graph(name="main", model_path=str(main_dir), scheduler=scheduler)
    spec_graph = Graph(
        name="main-spec",
        model_path=str(main_dir),
        scheduler=scheduler,
        draft_model_path=str(draft_dir),
        speculative=SpeculativeSettings(num_assistant_tokens=args.assistant_tokens),
    )
    plain, spec = load_pipeline(plain_graph), load_pipeline(spec_graph)
    tokenizer = plain.get_tokenizer()
    print(
        f"main: {main_dir} (24 layers), draft: {draft_dir} ({args.draft_layers} layers), damping "
        f"{args.damping}, num_assistant_tokens {args.assistant_tokens}, greedy, {args.max_tokens} "
        "output tokens per request"
    )
    print(
        f"{'concurrency':>11} {'requests':>8} {'plain tok/s':>11} {'spec tok/s':>10} {'speed-up':>8} {'acceptance':>10}"
    )
    for level in args.concurrency:
        count = args.requests or max(3, 2 * level)
        prompts = _prompts(tokenizer, count, args.prompt_words)
        # One warm-up request each: the first inference compiles kernels and sizes the KV cache.
        run_level(plain, prompts[:1], concurrency=1, max_tokens=8, assistant_tokens=0)
        run_level(spec, prompts[:1], concurrency=1, max_tokens=8, assistant_tokens=args.assistant_tokens)
        plain_runs, spec_runs = [], []
        for _ in range(2):  # alternate, so a slow phase of the machine hits both
            plain_runs.append(
                run_level(plain, prompts, concurrency=level, max_tokens=args.max_tokens, assistant_tokens=0)
            )
            spec_runs.append(
                run_level(
                    spec, prompts, concurrency=level, max_tokens=args.max_tokens, assistant_tokens=args.assistant_tokens
                )
            )
        plain_tps = statistics.median(r.tokens_per_second for r in plain_runs)
        spec_tps = statistics.median(r.tokens_per_second for r in spec_runs)
        drafted = sum(r.drafted for r in spec_runs)
        acceptance = sum(r.accepted for r in spec_runs) / drafted if drafted else 0.0
        print(
            f"{level:>11} {count:>8} {plain_tps:>11.1f} {spec_tps:>10.1f} {spec_tps / plain_tps:>7.2f}x {acceptance:>10.2f}"
        )


if __name__ == "__main__":
    main()
