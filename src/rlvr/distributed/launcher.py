"""`--nproc N`: the same command on N processes of this machine, started by torchrun.

    rlvr train --nproc 2 ...   ≡   torchrun --standalone --nproc_per_node 2 -m rlvr train ...

with three things set for you: each rank gets its share of the CPU threads (OMP_NUM_THREADS, unless
set); on Ctrl-C or SIGTERM torchrun passes the signal on to the ranks and gives them SHUTDOWN_S to
finish the step and save before it kills them (plain torchrun gives 30 s); and a failed rank is
reported in one line (rlvr.distributed.torchrun). If this process dies, however it dies, torchrun gets a
SIGTERM, and the ranks get one if torchrun dies (rlvr.lifeline). No torch here: it only starts torchrun.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
from types import FrameType

from rlvr.lifeline import child_env

SHUTDOWN_S = 3600  # how long torchrun waits for the ranks to save after a stop signal


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
    ['--standalone', '--nproc_per_node', '2', '--shutdown-timeout', '3600', '-m']
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
    return [sys.executable, "-m", "rlvr.distributed.torchrun", "--standalone", "--nproc_per_node", str(nproc),
            "--shutdown-timeout", str(SHUTDOWN_S), "-m", "rlvr", *rest]


def relaunch(argv: list[str], nproc: int) -> int:
    """Run `rlvr argv` on `nproc` ranks under torchrun; its exit code (0 when every rank succeeded)."""
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", str(rank_threads(nproc)))
    proc = subprocess.Popen(torchrun_command(argv, nproc), env=child_env(env))  # it ends with this process

    def forward(signum: int, frame: FrameType | None) -> None:  # torchrun passes it on to the ranks
        proc.send_signal(signum)

    # the terminal's Ctrl-C reaches torchrun too (same process group): this process only waits for it
    previous = {signal.SIGINT: signal.signal(signal.SIGINT, signal.SIG_IGN),
                signal.SIGTERM: signal.signal(signal.SIGTERM, forward)}
    try:
        code = proc.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if code < 0:  # killed itself (a SIGTERM or Ctrl-C it gets, it passes on and returns from)
        print(f"rlvr: torchrun was killed by {signal_name(-code)}; its ranks got SIGTERM: each finishes its "
              "step, then they save a checkpoint if every rank gets there", file=sys.stderr)
        return 128 - code
    return code


def signal_name(signum: int) -> str:
    """
    >>> signal_name(9)
    'signal 9 (SIGKILL)'
    """
    try:
        return f"signal {signum} ({signal.Signals(signum).name})"
    except ValueError:
        return f"signal {signum}"


def rank_of_many() -> int | None:
    """This process's rank when torchrun started several, None for a single process (torchrun's
    environment read without torch; rlvr.distributed.world.World.from_env reads the same)."""
    return int(os.environ["RANK"]) if int(os.environ.get("WORLD_SIZE", 1)) > 1 else None


def is_main_rank() -> bool:
    """Whether this process prints a command's result: rank 0 of torchrun's ranks, or the only process."""
    return rank_of_many() in (None, 0)
