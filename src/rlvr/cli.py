"""Command line: `rlvr train | eval | grade | rm | sft | sample | export | pipeline | compare | report | dashboard |
serve …`.

User mistakes print one line and exit 2; bugs keep their traceback. Each command's parser and runner
live with its package (`<package>/cli.py`); the runners import the models and the training machinery
only once the arguments are known to be sound.
"""

from __future__ import annotations

import argparse
import math
import os
import signal
import sys
import time
from pathlib import Path

from rlvr import deadline
from rlvr.console import quiet_libraries
from rlvr.dashboard.cli import (
    add_dashboard_parser,
    add_explore_parser,
    add_report_parser,
    run_dashboard,
    run_explore,
    run_report,
)
from rlvr.distributed.launcher import add_nproc_option, rank_of_many, relaunch
from rlvr.errors import FULL_TRACEBACK_ENV, Interrupted, UserError, path_error
from rlvr.evaluate.cli import add_compare_parser, add_eval_parser, run_compare, run_eval_command
from rlvr.grpo.cli import add_train_parser, run_train
from rlvr.lifeline import end_with_parent
from rlvr.pipeline.cli import add_pipeline_parser, run_pipeline_command
from rlvr.reward_models.cli import add_rm_parser, run_rm
from rlvr.rewards.cli import add_grade_parser, run_grade
from rlvr.run.stop import REPEAT_S
from rlvr.sample.cli import add_sample_parser, run_sample_command
from rlvr.sft.cli import add_sft_parser, run_sft
from rlvr.tinker.cli import add_serve_parser, run_serve


def add_export_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    """Add ``export`` to the ``rlvr`` command's subparsers; run it with `run_export`."""
    p = subparsers.add_parser("export", help="write a run's latest model (or LoRA adapters, merged or not) as a "
                                             "folder that transformers, peft and vLLM load without rlvr")
    p.add_argument("source", help="a run directory, one of its checkpoints, or a model/ folder")
    p.add_argument("--output", required=True, help="the folder to write (must not exist yet, or be empty)")
    p.add_argument("--merge", action="store_true",
                   help="fold LoRA adapters into the base weights: one plain transformers checkpoint")
    p.add_argument("--cache-dir", default="~/.cache/rlvr", help="where .gguf bases are converted (default %(default)s)")
    return p


def run_export(args: argparse.Namespace) -> int:
    from rlvr.models.export import export_model  # torch and the models only once the arguments are sound

    written = export_model(Path(args.source), Path(args.output), merge=args.merge, cache_dir=args.cache_dir)
    print(f"exported {written} to {args.output}")
    return 0


COMMANDS = {
    "train": (add_train_parser, run_train),
    "grade": (add_grade_parser, run_grade),
    "eval": (add_eval_parser, run_eval_command),
    "rm": (add_rm_parser, run_rm),
    "sample": (add_sample_parser, run_sample_command),
    "sft": (add_sft_parser, run_sft),
    "export": (add_export_parser, run_export),
    "pipeline": (add_pipeline_parser, run_pipeline_command),
    "compare": (add_compare_parser, run_compare),
    "report": (add_report_parser, run_report),
    "dashboard": (add_dashboard_parser, run_dashboard),
    "explore": (add_explore_parser, run_explore),
    "serve": (add_serve_parser, run_serve),
}
# the commands that load models
MODEL_COMMANDS = ("train", "eval", "rm", "sample", "sft", "export", "pipeline", "serve")
PARALLEL_COMMANDS = ("train", "eval", "rm", "sample", "sft")  # the commands that run on several ranks (--nproc)


_stopping_since = -math.inf  # when the first Ctrl-C or SIGTERM arrived (time.monotonic)
_command_ended = False  # the command has returned or raised: a signal now is let pass (see _run)
_signalled = signal.SIGINT  # the signal that interrupted the command: its exit code is 128 + its number


def _terminate(signum: int, frame: object) -> None:
    """SIGTERM as Ctrl-C: the commands that sample (eval, sample) keep what they finished and stop; the
    training loops replace this with their own handler (finish the step, save). A user's function running
    then (a reward, an environment) that swallows the interruption is interrupted until it ends, and the
    process ends if it does not (rlvr.deadline). A repeat within stop.REPEAT_S is the same request (`timeout`
    signals the command and then its process group; a scheduler, each process of a job): raised again, it
    would land in the first one's cleanup, a traceback."""
    global _stopping_since, _signalled
    now = time.monotonic()
    if _command_ended or now - _stopping_since < REPEAT_S:
        return
    _stopping_since, _signalled = now, signal.Signals(signum)
    call = deadline.running()
    if call is not None:
        deadline.abandon(call, f"{signal.Signals(signum).name} arrived", signum, raises=KeyboardInterrupt)
    raise KeyboardInterrupt


def _leave_process_group() -> None:
    """Under torchrun, wait for every rank and close the process group."""
    if "torch.distributed" not in sys.modules:
        return
    from rlvr.distributed.world import leave

    leave()


def _forget_interrupts() -> None:
    """Clear CPython's record of a KeyboardInterrupt that escaped an eval() or exec() of a string, which it keeps
    even when the interrupt is caught later (sympy parses answers with eval: SIGTERM can arrive there) and
    acts on at exit: `python -m rlvr` then kills itself with SIGINT instead of returning its exit code. Each
    eval of a string resets that record first, so an empty one clears it."""
    exec("")  # (an empty string: nothing runs)


def _collective_failed(error: Exception) -> str | None:
    """What a rank says when a collective failed: it waited too long for the others, or another rank is
    gone (whose own error, if it printed one, says why); None for any other error."""
    if rank_of_many() is None or "torch.distributed" not in sys.modules:
        return None
    import torch.distributed as dist

    from rlvr.distributed.world import waited_too_long

    text = str(error)
    gone = isinstance(error, dist.DistError) or any(
        mark in text for mark in ("Connection closed by peer", "Connection reset by peer", "Broken pipe"))
    stopped = "another rank stopped, so this one stops too, without saving: the latest checkpoint, if any, stands"
    return waited_too_long(error) or (stopped if gone else None)  # (a timeout can be a DistError too)


def _check_ranks(args: argparse.Namespace) -> None:
    """What a training config cannot run on --nproc ranks, said once here, before torchrun starts them."""
    if args.command == "train":
        from rlvr.config import TrainConfig
        from rlvr.run.options import run_config

        run_config(TrainConfig, args).check_ranks(args.nproc)


def main(argv: list[str] | None = None) -> int:
    if "TORCHELASTIC_RUN_ID" in os.environ:  # a rank that torchrun started: it stops if torchrun dies
        end_with_parent()
    parser = argparse.ArgumentParser(prog="rlvr", description="GRPO with verifiable rewards")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (add_parser, _) in COMMANDS.items():
        command = add_parser(sub)
        if name in PARALLEL_COMMANDS:
            add_nproc_option(command)
    args = parser.parse_args(argv)
    if getattr(args, "nproc", 1) < 1:
        parser.error("--nproc must be at least 1")
    if getattr(args, "nproc", 1) > 1 and "RANK" not in os.environ:  # (a rank itself ignores --nproc)
        try:
            _check_ranks(args)
        except UserError as e:
            print(f"rlvr: error: {e}", file=sys.stderr)
            return 2
        return relaunch(sys.argv[1:] if argv is None else argv, args.nproc)
    if args.command in MODEL_COMMANDS:
        quiet_libraries()  # (through the environment: transformers is not imported before the config is checked)
    code = _run(args)
    _forget_interrupts()
    if rank_of_many() is not None and "torch.distributed" in sys.modules:
        from rlvr.distributed.world import end_rank

        end_rank(code)
    return code


def _run(args: argparse.Namespace) -> int:
    """The command, its user errors and interruptions said in one line, with its exit code. A signal that
    arrives once the command has ended (torchrun's SIGTERM to the other ranks as one fails) is let pass: raised
    in the saying or the cleanup, it would be a traceback."""
    global _command_ended, _signalled
    _command_ended, _signalled = False, signal.SIGINT
    previous = {signum: signal.signal(signum, _terminate) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        code = COMMANDS[args.command][1](args)
        _leave_process_group()
    except BaseException as e:
        _command_ended = True
        return _said(e)
    finally:
        _command_ended = True
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return code


def _said(error: BaseException) -> int:
    """How a command that raised ends: a user's error, an interruption or a failed collective in one line and
    its exit code; anything else raised again (a bug: its traceback). An interruption that landed while the
    command was already ending with such an error reports that error: torchrun signals the ranks still
    running when one fails, and one of them can be unwinding from the failed collective when it arrives."""
    ending = error.__context__ if isinstance(error, KeyboardInterrupt) else None
    if isinstance(ending, UserError) or (isinstance(ending, Exception) and _collective_failed(ending)):
        error = ending
    if isinstance(error, UserError):
        rank = rank_of_many()
        print(f"rlvr: error{'' if rank is None else f' (rank {rank})'}: {error}", file=sys.stderr)
        return 128 + _signalled if isinstance(error, Interrupted) else 2
    if isinstance(error, KeyboardInterrupt):
        print("rlvr: interrupted", file=sys.stderr)
        return 128 + _signalled
    if isinstance(error, OSError) and path_error(error) and not os.environ.get(FULL_TRACEBACK_ENV):
        print(f"rlvr: error: {path_error(error)}", file=sys.stderr)
        return 2
    reason = _collective_failed(error) if isinstance(error, Exception) else None
    if reason is None:
        raise error
    print(f"rlvr: error (rank {rank_of_many()}): {reason}", file=sys.stderr)
    return 1

if __name__ == "__main__":
    sys.exit(main())
