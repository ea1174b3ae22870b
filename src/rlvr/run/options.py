"""The command-line options every training command shares (`rlvr train`, `rlvr sft`, `rlvr rm`)."""

from __future__ import annotations

import argparse

from rlvr.errors import UserError


def add_run_options(p: argparse.ArgumentParser, *, config_help: str, set_example: str, default_dir: str,
                    steps_help: str) -> None:
    """--config, --set KEY=VALUE (repeatable), --output-dir, --max-steps and --resume RUN_DIR."""
    p.add_argument("--config", help=config_help)
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help=f"override one setting, e.g. --set {set_example} (repeatable)")
    p.add_argument("--output-dir", help=f"run directory (default: {default_dir})")
    p.add_argument("--max-steps", type=int, help=steps_help)
    p.add_argument("--resume", metavar="RUN_DIR", help="continue the run in RUN_DIR from its latest checkpoint")


def check_resume_options(args: argparse.Namespace) -> None:
    """--resume continues a run with its own config and directory; --set still changes a setting."""
    if args.resume and (args.config or args.output_dir):
        raise UserError("--resume continues a run with its own config and directory: drop --config/--output-dir "
                        "(use --set to change a setting)")
