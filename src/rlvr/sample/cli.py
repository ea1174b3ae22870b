"""``rlvr sample --model M --data D [--samples N] [--max-per-prompt K] [--output F] [--output-dir DIR]
[--config Y] [--set k=v]``."""

from __future__ import annotations

import argparse
from pathlib import Path

from rlvr.config.choices import MODES
from rlvr.distributed.launcher import is_main_rank


def add_sample_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    """Add ``sample`` to the ``rlvr`` command's subparsers; run it with `run_sample_command`."""
    p = subparsers.add_parser(
        "sample", help="rejection sampling: n completions per prompt, the verified ones filtered into an SFT dataset "
                       "(with a teacher model: distillation data for rlvr sft)")
    p.add_argument("--model",
                   help="the sampling (teacher) model: tiny, smollm2, a .gguf, a model or run directory, or a hub id")
    p.add_argument("--data",
                   help="a built-in task (train split) or a .jsonl/.parquet file with `answer` or `tests` columns")
    p.add_argument("--config", help="YAML file of SampleConfig settings")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override one setting, e.g. --set dedupe=false (repeatable)")
    p.add_argument("--limit", type=int, help="the first N prompts only")
    p.add_argument("--samples", type=int, help="completions sampled per prompt (default 8)")
    p.add_argument("--temperature", type=float, help="default 0.6, as DeepSeek-R1")
    p.add_argument("--max-new-tokens", type=int, help="completion budget (default: the data's)")
    p.add_argument("--verdict", choices=MODES, help="the verifier that must accept a completion (default strict)")
    p.add_argument("--format",
                   help="also require this format reward: none (default), boxed, think_answer or soft_think_answer")
    p.add_argument("--min-tokens", type=int, help="drop completions shorter than this")
    p.add_argument("--max-tokens", type=int, help="drop completions longer than this")
    p.add_argument("--max-per-prompt", type=int,
                   help="keep at most K completions per prompt, first sampled first (default 4)")
    p.add_argument("--output", help="the SFT dataset .jsonl (default: <output-dir>/sft.jsonl)")
    p.add_argument("--output-dir", help="work directory, resumable (default runs/sample)")
    p.add_argument("--seed", type=int)
    p.add_argument("--threads", type=int, help="CPU threads (0 = all)")
    return p


def run_sample_command(args: argparse.Namespace) -> int:
    from rlvr.config import SampleConfig, load_command_config
    from rlvr.errors import Interrupted, UserError
    from rlvr.evaluate.cli import named_benchmark_exists
    from rlvr.run.directory import refuse_another_commands_config

    refuse_another_commands_config(SampleConfig, args.config, "rlvr sample")
    config = load_command_config(
        SampleConfig, args.config, args.overrides,
        **{"model.name": args.model, "data.name": args.data, "data.limit": args.limit},
        samples=args.samples, temperature=args.temperature, max_new_tokens=args.max_new_tokens, verdict=args.verdict,
        format=args.format, min_tokens=args.min_tokens, max_tokens=args.max_tokens, max_per_prompt=args.max_per_prompt,
        output=args.output, output_dir=args.output_dir, seed=args.seed, threads=args.threads,
    )
    named_benchmark_exists(config.model.name, config.data.name)
    if config.output and Path(config.output).is_dir():  # (before the sampling, not when its dataset is written)
        raise UserError(f"--output {config.output} is a folder: give the SFT dataset's file (a .jsonl)")
    from rlvr.sample.runner import run_sample  # torch and the models only once the config is known to be sound

    try:
        summary = run_sample(config)
    except KeyboardInterrupt:
        raise Interrupted(f"interrupted; finished prompts are saved in {config.output_dir}: "
                        "run the same command to resume") from None
    if not is_main_rank():  # under torchrun, rank 0 reports
        return 0
    print(f"\n{config.model.name} on {config.data.name}: "
          f"{summary['samples']} completions of {summary['problems']} prompts, "
          f"{100 * summary['pass_rate']:.1f}% verified ({config.verdict})")
    print(f"  kept {summary['kept']} from {summary['problems_with_kept']} prompts; dropped: "
          + ", ".join(f"{name} {n}" for name, n in summary["dropped"].items()))
    print(f"SFT dataset: {summary['output']}   (summary: {config.output_dir}/sample_summary.json)")
    return 0
