"""``rlvr train [--config Y] [--set k=v] [--output-dir D] [--max-steps N] [--resume RUN_DIR] [--control random]``:
GRPO."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rlvr.config.choices import CONTROLS
from rlvr.distributed.launcher import is_main_rank
from rlvr.run.options import add_run_options, named_paths_exist, printed, run_config
from rlvr.run.stop import exit_code


def add_train_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    """Add ``train`` to the ``rlvr`` command's subparsers; run it with `run_train`."""
    p = subparsers.add_parser("train", help="run GRPO (no arguments: SmolLM2-135M-Instruct on 1-digit arithmetic, CPU)")
    add_run_options(p, config_help="YAML config file (see configs/)", set_example="generation.temperature=0.7",
                    default_dir="runs/latest", steps_help="number of training steps")
    p.add_argument("--control", choices=[c for c in CONTROLS if c != "none"],
                   help="a control run: the same job trained on coins at each reward's rate per group (random) or on "
                        "the format rewards alone (format); `rlvr compare RUN CONTROL` gives the gain over it")
    return p


def run_train(args: argparse.Namespace) -> int:
    from rlvr.config import TrainConfig

    config = run_config(TrainConfig, args, control=args.control)

    if printed(config, args):
        return 0
    # (resumed, a run loads its checkpoint: its starting model may have moved since)
    named_paths_exist(None if args.resume else config.model.name, [config.data.train, config.data.eval],
                      Path(args.resume) if args.resume else None)
    from rlvr.grpo.trainer import train_grpo  # torch and the models only once the config is known to be sound

    summary = train_grpo(config, resume=bool(args.resume), overwrite=args.overwrite)
    _print_summary(summary, config.output_dir)
    return exit_code(summary)


def _print_summary(summary: dict[str, Any], run_dir: str) -> None:
    if "stopped_at" in summary or not is_main_rank():
        return
    print(f"\nrun directory: {run_dir}")
    if summary.get("control"):
        print(f"  a control run, trained on {summary['control']['trained_on']}; the real run's gain over it: "
              f"rlvr compare RUN {run_dir}")
    if summary.get("heldout_skipped"):
        print(f"  no held-out evaluation: {summary['heldout_skipped']}")
    _print_accuracy({k: summary.get(k) for k in ("before", "after")}, summary.get("gain"), counted=True)
    before, after = summary.get("before") or {}, summary.get("after") or {}
    if before.get("alone") and after.get("alone"):
        print("  the question alone, without the example exchange:")
        _print_accuracy({"before": before["alone"], "after": after["alone"]}, summary["gain"]["alone"], counted=False)
    best = summary.get("best")
    if best:  # (keep_best: chosen on the validation slice, measured on the held-out prompts above)
        print(f"  best checkpoint, step {best['step']} ({best['checkpoint']}), chosen by validation strict "
              f"{_pct(best['validation']['strict'])}:")
        _print_accuracy({"best": best["heldout"]}, best.get("gain"), counted=False)
        if best.get("beats_untrained") is False:
            print(f"  no trained checkpoint beat the untrained model on the validation slice "
                  f"({_pct(before['validation']['strict'])}): the model you started from is the better one")


def _print_accuracy(blocks: dict[str, Any], gain: dict[str, Any] | None, counted: bool) -> None:
    """A line for each block (before, after, best: with the problem count when `counted`) and the paired gain."""
    for block, b in blocks.items():
        if b:
            count = f"   (n={b['n']}, 95% intervals)" if counted else ""
            print(f"  {block:6s} strict {_pct(b['strict'])}   lenient {_pct(b['lenient'])}{count}")
    if gain:
        print(f"  gain   strict {_pts(gain['strict'])}   lenient {_pts(gain['lenient'])}   (points, paired)")


def _pct(i: dict[str, float]) -> str:
    return f"{100 * i['mean']:.1f}% [{100 * i['low']:.1f}, {100 * i['high']:.1f}]"


def _pts(i: dict[str, float]) -> str:
    return f"{100 * i['mean']:+.1f} [{100 * i['low']:+.1f}, {100 * i['high']:+.1f}]"
