"""``rlvr rm --data pairs.jsonl [--model tiny|smollm2|DIR] [--config FILE] [--set KEY=VALUE]
[--output-dir DIR] [--resume RUN_DIR]``."""

from __future__ import annotations

import argparse

from rlvr.distributed.launcher import is_main_rank
from rlvr.run.options import add_run_options, printed, run_config
from rlvr.run.stop import exit_code


def add_rm_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    """Add ``rm`` to the ``rlvr`` command's subparsers; run it with `run_rm`."""
    p = subparsers.add_parser("rm",
                              help="train a Bradley–Terry reward model on preference pairs (prompt, chosen, rejected)")
    p.add_argument("--data", help="a .jsonl file, one {\"prompt\", \"chosen\", \"rejected\"} object per line")
    p.add_argument("--model", help="backbone: tiny, smollm2, a .gguf file or a checkpoint directory (default: smollm2)")
    add_run_options(p, config_help="YAML file of RewardModelConfig settings", set_example="optim.lr=1e-4",
                    default_dir="runs/reward_model", steps_help="optimizer steps (default: one epoch)")
    return p


def run_rm(args: argparse.Namespace) -> int:
    from rlvr.config import RewardModelConfig

    config = run_config(RewardModelConfig, args, **{"data": args.data, "model.name": args.model})

    if printed(config, args):
        return 0
    # torch and the models only once the config is known to be sound
    from rlvr.reward_models.train import train_reward_model

    summary = train_reward_model(config, resume=bool(args.resume), overwrite=args.overwrite)
    if "stopped_at" in summary or not is_main_rank():
        return exit_code(summary)
    print(f"\nrun directory: {summary['run_dir']}   "
          f"({summary['steps']} steps, {summary['train_pairs']} training pairs)")
    for block in ("before", "after"):
        if summary[block]:
            a = summary[block]["pairwise_accuracy"]
            print(f"  {block:6s} held-out pairwise accuracy "
                  f"{100 * a['mean']:.1f}% [{100 * a['low']:.1f}, {100 * a['high']:.1f}]"
                  f"   (n={summary[block]['n']}, 95% Wilson interval)")
    if not summary["before"]:
        print(f"  no held-out pairs (eval_fraction {config.eval_fraction} held none of the "
              f"{summary.get('train_examples', summary.get('train_pairs'))} out): accuracy not measured")
    print(f"  use it in GRPO: rewards: [{{name: reward_model, params: {{path: {summary['run_dir']}}}}}]")
    return 0

