"""`rlvr sample`: rejection sampling, the evaluation sampler followed by filters.

    data ─▶ sample_into_store (rlvr eval's: n completions per prompt, judged, DIR/samples.jsonl)
         ─▶ filter_samples (per prompt) ─▶ SFT dataset + DIR/sample_summary.json

Sampling is `rlvr eval`'s own, without the greedy completion (not needed: the n samples are the
candidates), so resuming works the same way: finished prompts are never sampled again. The filters
are not part of the sampling settings, so re-running with other filters re-filters the stored
completions without loading the model.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import torch

from rlvr.config import EvalConfig, SampleConfig
from rlvr.distributed.world import World
from rlvr.errors import UserError
from rlvr.evaluate import runner as evaluation
from rlvr.evaluate.benchmarks import MATH_BENCHMARKS, Benchmark, load_benchmark
from rlvr.evaluate.store import EvalStore
from rlvr.sample.dataset import sft_row, summarise, write_jsonl
from rlvr.sample.filters import filter_samples

HELD_OUT = (*MATH_BENCHMARKS, "humaneval")  # test sets: training on their samples inflates `rlvr eval`


def run_sample(config: SampleConfig, progress: bool = True) -> dict[str, Any]:
    """Sample `config.model` on `config.data`, keep the verified completions that pass the filters, and
    write them as an SFT dataset; returns the summary (also in DIR/sample_summary.json)."""
    check(config)
    if config.threads > 0:
        torch.set_num_threads(config.threads)
    d = config.data
    benchmark = load_benchmark(d.name, data_dir=d.dir, limit=d.limit, seed=config.seed, difficulty=d.difficulty,
                               split="train", instruction=d.instruction, rewards_judge=False)
    if not benchmark.examples:
        raise UserError(f"{d.name} has no prompts to sample (check --limit and the data file)")
    eval_config = as_eval_config(config, benchmark)
    settings = evaluation.eval_settings(eval_config, benchmark)
    store = EvalStore(Path(config.output_dir))
    records = evaluation.sample_into_store(eval_config, benchmark, settings, store, progress=progress)
    if not World.from_env().is_main:  # under torchrun, rank 0 writes the dataset
        return {}

    prompts = {benchmark.problem_id(ex): ex.prompt for ex in benchmark.examples}
    rows: list[dict[str, Any]] = []
    kept: dict[str, int] = {}
    dropped: Counter[str] = Counter()
    for record in records:
        indices, drops = filter_samples(record.samples, config)
        rows += [sft_row(prompts[record.id], record.id, record.samples[i], config.verdict, config.model.name)
                 for i in indices]
        kept[record.id] = len(indices)
        dropped += drops
    output = Path(config.output) if config.output else Path(config.output_dir) / "sft.jsonl"
    write_jsonl(output, rows)
    summary = summarise(records, kept, dropped, config, settings, output)
    store.write("sample_summary.json", json.dumps(summary, indent=2, default=str) + "\n")
    return summary


def check(config: SampleConfig) -> None:
    """One-line errors for settings that cannot work: the config's own checks, then the data's."""
    config.validate()
    name = config.data.name
    test_file = next((b for b, (file, *_) in MATH_BENCHMARKS.items() if Path(name).resolve().as_posix().endswith(
        f"/{file}")), None)  # (the file itself, as ../shared/data holds it)
    if name in HELD_OUT or test_file is not None:
        what = f"{test_file}'s test set" if test_file else "an evaluation benchmark (a test set)"
        raise UserError(f"{name} is {what}: training on its samples would inflate rlvr eval's numbers; give a "
                        "training .jsonl/.parquet file or a built-in task")


def as_eval_config(config: SampleConfig, benchmark: Benchmark) -> EvalConfig:
    """The evaluation that samples what `config` asks for: no greedy completion, no reward model, and a
    single token budget (the full one), so no completion is judged again cut short."""
    return EvalConfig(
        model=config.model, data=config.data, generation=config.generation, samples=config.samples, greedy=False,
        budgets=[config.generation.max_new_tokens or benchmark.max_new_tokens], batch_size=config.batch_size,
        seed=config.seed, output_dir=config.output_dir, threads=config.threads,
    )
