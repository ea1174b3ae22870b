"""`--nproc N`: the same command on N processes of this machine, started by torchrun.

    rlvr train --nproc 2 ...   ≡   torchrun --standalone --nproc_per_node 2 -m rlvr train ...

with two things set for you: each rank gets its share of the CPU threads (OMP_NUM_THREADS, unless
set), and Ctrl-C or SIGTERM sent to this process reaches every rank, not torchrun, so that the ranks
finish the step, all save the same one and exit 0 (torchrun itself would give them 30 s, then kill
them). No torch here: it only starts torchrun.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
from types import FrameType

LAUNCHED = "RLVR_NPROC"  # set in the ranks' environment: their Ctrl-C is restored (torchrun starts them ignoring it)


def add_nproc_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--nproc", type=int, default=1, metavar="N",
                   help="run on N processes of this machine (data-parallel, started by torchrun; "
                        "for several machines run torchrun yourself, see docs/distributed.md)")


def rank_threads(nproc: int, cpus: int | None = None) -> int:
    """CPU threads per rank: the CPUs this process may use, shared out.

    >>> rank_threads(2, cpus=16), rank_threads(4, cpus=2)
    (8, 1)
    """
    if cpus is None:
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, cpus // nproc)


def torchrun_command(argv: list[str], nproc: int) -> list[str]:
    """The torchrun command line that runs `rlvr argv`, less its --nproc, on `nproc` ranks.

    >>> torchrun_command(["train", "--nproc", "2", "--max-steps", "3"], 2)[3:9]
    ['--standalone', '--nproc_per_node', '2', '--signals-to-handle', 'SIGHUP,SIGQUIT', '-m']
    >>> torchrun_command(["train", "--nproc", "2", "--max-steps", "3"], 2)[9:]
    ['rlvr', 'train', '--max-steps', '3']
    >>> torchrun_command(["eval", "--nproc=4"], 4)[-2:]
    ['rlvr', 'eval']
    """
    rest, skip = [], False
    for arg in argv:
        if skip or arg.startswith("--nproc="):
            skip = False
            continue
        skip = arg == "--nproc"
        if not skip:
            rest.append(arg)
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(nproc),
            "--signals-to-handle", "SIGHUP,SIGQUIT", "-m", "rlvr", *rest]


def relaunch(argv: list[str], nproc: int) -> int:
    """Run `rlvr argv` on `nproc` ranks under torchrun; its exit code (0 when every rank succeeded)."""
    env = {**os.environ, LAUNCHED: str(nproc)}
    env.setdefault("OMP_NUM_THREADS", str(rank_threads(nproc)))
    # torchrun and the ranks start in their own session with Ctrl-C and SIGTERM ignored (torchrun keeps
    # ignoring them; the ranks install their own handlers); this process forwards both to that session
    signals = (signal.SIGINT, signal.SIGTERM)
    previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in signals}
    try:
        proc = subprocess.Popen(torchrun_command(argv, nproc), env=env, start_new_session=True)

        def forward(signum: int, frame: FrameType | None) -> None:
            try:
                os.killpg(proc.pid, signum)
            except ProcessLookupError:  # already gone
                pass

        for sig in signals:
            signal.signal(sig, forward)
        return proc.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def restore_interrupts() -> None:
    """In a rank started by `relaunch`: Ctrl-C interrupts again (it was ignored to keep torchrun out of it)."""
    if os.environ.get(LAUNCHED) and "RANK" in os.environ:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def is_main_rank() -> bool:
    """Whether this process prints a command's result: rank 0 of torchrun's ranks, or the only process."""
    return os.environ.get("RANK", "0") == "0"
