"""``rlvr sft --data F.jsonl [--model M] [--config Y] [--set k=v] [--output-dir D] [--max-steps N]
[--resume RUN_DIR]``."""

from __future__ import annotations

import argparse

from rlvr.distributed.launcher import is_main_rank
from rlvr.run.options import add_run_options, printed, run_config
from rlvr.run.stop import exit_code


def add_sft_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    """Add ``sft`` to the ``rlvr`` command's subparsers; run it with `run_sft`."""
    p = subparsers.add_parser("sft", help="supervised fine-tuning on prompt/completion or chat rows "
                                          "(loss on completions only)")
    p.add_argument("--data", help='a .jsonl file: one {"prompt", "completion"} or {"messages": [...]} object per line')
    p.add_argument("--model", help="model to fine-tune: tiny, smollm2, a .gguf file, a model or run directory "
                                   "(default: smollm2)")
    add_run_options(p, config_help="YAML file of SFTConfig settings", set_example="optim.lr=1e-4",
                    default_dir="runs/sft", steps_help="optimizer steps (default: one epoch)")
    return p


def run_sft(args: argparse.Namespace) -> int:
    from rlvr.config import SFTConfig

    config = run_config(SFTConfig, args, **{"data": args.data, "model.name": args.model})

    if printed(config, args):
        return 0
    from rlvr.sft.train import train_sft  # torch and the models only once the config is known to be sound

    summary = train_sft(config, resume=bool(args.resume), overwrite=args.overwrite)
    if "stopped_at" in summary or not is_main_rank():
        return exit_code(summary)
    print(f"\nrun directory: {summary['run_dir']}   "
          f"({summary['steps']} steps, {summary['train_examples']} training examples"
          f", {summary['dropped_too_long']} dropped as too long)")
    for block in ("before", "after"):
        if summary[block]:
            b = summary[block]
            print(f"  {block:6s} held-out loss {b['loss']:.4f}   perplexity {b['perplexity']:.2f}   "
                  f"({b['tokens']} completion tokens)")
    if not summary["before"]:
        print(f"  no held-out rows (eval_fraction {config.eval_fraction} held none of the "
              f"{summary.get('train_examples', summary.get('train_pairs'))} out): loss not measured")
    print(f"  use it: rlvr train --set model.name={summary['run_dir']}   or   rlvr eval --model {summary['run_dir']}")
    return 0
