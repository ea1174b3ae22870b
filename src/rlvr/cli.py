"""Command line: `rlvr train | eval | grade | rm | sft | sample | pipeline | report | dashboard | explore …`. User mistakes print one line and exit 2; bugs keep their traceback."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rlvr.errors import UserError
from rlvr.run_options import add_run_options


def _train_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("train", help="run GRPO (no arguments: SmolLM2-135M-Instruct on 1-digit arithmetic, CPU)")
    add_run_options(p, config_help="YAML config file (see configs/)", set_example="generation.temperature=0.7",
                    default_dir="runs/latest", steps_help="number of training steps")


def _print_summary(summary: dict) -> None:
    if "stopped_at" in summary:
        return
    print(f"\nrun directory: {summary.get('run_dir')}")
    for block in ("before", "after"):
        if summary.get(block):
            b = summary[block]
            print(f"  {block:6s} strict {_pct(b['strict'])}   lenient {_pct(b['lenient'])}   (n={b['n']}, 95% intervals)")
    if summary.get("gain"):
        g = summary["gain"]
        print(f"  gain   strict {_pct(g['strict'], signed=True)}   lenient {_pct(g['lenient'], signed=True)}")


def _pct(i: dict, signed: bool = False) -> str:
    fmt = "{:+.1f}" if signed else "{:.1f}"
    return f"{fmt.format(100 * i['mean'])}% [{fmt.format(100 * i['low'])}, {fmt.format(100 * i['high'])}]"


def train(args: argparse.Namespace) -> int:
    # heavy imports only once the arguments are known to be sound
    from rlvr.config import load_config
    from rlvr.train.trainer import Trainer

    cli = {"max_steps": args.max_steps}
    if args.resume:
        if args.config:
            raise UserError("--resume continues a run with its own config.yaml: drop --config (use --set to change a setting)")
        trainer = Trainer.from_run_dir(Path(args.resume), args.overrides, **cli)
    else:
        trainer = Trainer(load_config(args.config, args.overrides, output_dir=args.output_dir, **cli))
    summary = trainer.train()
    summary["run_dir"] = str(trainer.run_dir)
    _print_summary(summary)
    return 0


MODEL_COMMANDS = ("train", "eval", "rm", "sample", "sft", "pipeline")  # the commands that load models


def _quiet_transformers() -> None:
    """No per-file download bars or library warnings: the commands print their own progress."""
    import transformers

    transformers.utils.logging.disable_progress_bar()
    transformers.utils.logging.set_verbosity_error()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="rlvr", description="GRPO with verifiable rewards")
    sub = parser.add_subparsers(dest="command", required=True)
    _train_parser(sub)
    from rlvr.evaluate.cli import add_eval_parser, run_eval_command
    from rlvr.graders.cli import add_grade_parser, run_grade
    from rlvr.reward_models.cli import add_rm_parser, run_rm
    from rlvr.dashboard.cli import add_dashboard_parser, add_explore_parser, add_report_parser, run_dashboard, run_explore, run_report
    from rlvr.pipeline.cli import add_pipeline_parser, run_pipeline_command
    from rlvr.sample.cli import add_sample_parser, run_sample_command
    from rlvr.sft.cli import add_sft_parser, run_sft

    add_grade_parser(sub)
    add_eval_parser(sub)
    add_rm_parser(sub)
    add_sample_parser(sub)
    add_sft_parser(sub)
    add_pipeline_parser(sub)
    add_report_parser(sub)
    add_dashboard_parser(sub)
    add_explore_parser(sub)
    args = parser.parse_args(argv)
    if args.command in MODEL_COMMANDS:
        _quiet_transformers()
    try:
        return {"train": train, "grade": run_grade, "eval": run_eval_command, "rm": run_rm, "sample": run_sample_command, "sft": run_sft, "pipeline": run_pipeline_command, "report": run_report, "dashboard": run_dashboard, "explore": run_explore}[args.command](args)
    except UserError as e:
        print(f"rlvr: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("rlvr: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
