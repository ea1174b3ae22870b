"""The command-line options every training command shares (`rlvr train`, `rlvr sft`, `rlvr rm`)."""

from __future__ import annotations

import argparse


def add_run_options(p: argparse.ArgumentParser, *, config_help: str, set_example: str, default_dir: str, steps_help: str,
                    resume: bool = True) -> None:
    """--config, --set KEY=VALUE (repeatable), --output-dir, --max-steps and, when `resume`, --resume RUN_DIR."""
    p.add_argument("--config", help=config_help)
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help=f"override one setting, e.g. --set {set_example} (repeatable)")
    p.add_argument("--output-dir", help=f"run directory (default: {default_dir})")
    p.add_argument("--max-steps", type=int, help=steps_help)
    if resume:
        p.add_argument("--resume", metavar="RUN_DIR", help="continue the run in RUN_DIR from its latest checkpoint")
