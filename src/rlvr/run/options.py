"""The command-line options every training command shares (`rlvr train`, `rlvr sft`, `rlvr rm`)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, TypeVar

from rlvr.config import load_command_config
from rlvr.config.loading import Config
from rlvr.errors import UserError
from rlvr.run.directory import resume_config

C = TypeVar("C", bound=Config)


def add_run_options(p: argparse.ArgumentParser, *, config_help: str, set_example: str, default_dir: str,
                    steps_help: str) -> None:
    """--config, --set KEY=VALUE (repeatable), --output-dir, --max-steps, --resume RUN_DIR, --overwrite and
    --print-config."""
    p.add_argument("--config", help=config_help)
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help=f"override one setting, e.g. --set {set_example} (repeatable)")
    p.add_argument("--output-dir", help=f"run directory (default: {default_dir})")
    p.add_argument("--max-steps", type=int, help=steps_help)
    p.add_argument("--resume", metavar="RUN_DIR", help="continue the run in RUN_DIR from its latest checkpoint")
    p.add_argument("--overwrite", action="store_true",
                   help="start afresh in the run directory, deleting the run it holds (its checkpoints and logs)")
    p.add_argument("--print-config", action="store_true",
                   help="print the effective config (YAML, each key's meaning above it) and exit without running")


def printed(config: Any, args: argparse.Namespace) -> bool:
    """With --print-config: `config` printed as commented YAML (it loads back as --config); True when printed."""
    if not getattr(args, "print_config", False):
        return False
    from rlvr.config.reference import commented_yaml

    print(commented_yaml(config), end="")
    return True


def named_paths_exist(model: str | None, data: list[str | None], resumed: Path | None = None) -> None:
    """The model and data files a command names, checked before torch and the models are imported (seconds): a
    path that does not exist is one line at once; for a run `resumed`, one relative to another folder says so."""
    from rlvr.data.sources import check_source
    from rlvr.models.hub import path_problem

    missing = path_problem(model) if model else None
    if missing:
        raise UserError(missing)
    for source in data:
        if not source:
            continue
        path = Path(source).expanduser()
        if resumed is not None and path.suffix and not path.is_absolute() and not path.exists():
            raise UserError(f"data source {source!r} is not in this folder ({Path.cwd()}): the paths in a run's config "
                            f"are relative to the folder it was started from; resume {resumed} from there")
        check_source(source)


def run_config(cls: type[C], args: argparse.Namespace, **cli: Any) -> C:
    """The config a training command runs with: with --resume, the run's own (from its latest
    checkpoint) with --set and `cli` applied; else defaults ← --config ← --set ← `cli`, in --output-dir.
    `cli` maps config keys to the command's own options (None = not given)."""
    cli = {"max_steps": args.max_steps, **cli}
    if args.resume:
        if args.config or args.output_dir or args.overwrite:
            raise UserError("--resume continues a run with its own config and directory: drop --config/--output-dir/"
                            "--overwrite (use --set to change a setting)")
        return resume_config(cls, Path(args.resume), args.overrides, **cli)
    return load_command_config(cls, args.config, args.overrides, output_dir=args.output_dir, **cli)
