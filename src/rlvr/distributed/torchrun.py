"""torchrun, as `--nproc` starts it: the same launcher, with its failure report cut to one line.

When a rank fails, it has printed its own one-line error already (`rlvr: error (rank 1): ...`); torchrun
would add a traceback of its own and a block per rank. Here it says which rank failed first, and how.
Stopped by Ctrl-C or SIGTERM, torchrun has passed the signal on and waited for the ranks to save; it
then raises, which here is a normal end. It ends with the `rlvr` process that started it, and its
ranks end with it (rlvr.lifeline).

    python -m rlvr.distributed.torchrun [torchrun options] -m rlvr train ...
"""

from __future__ import annotations

import os
import signal
import sys

from torch.distributed.elastic.multiprocessing.api import SignalException
from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
from torch.distributed.run import parse_args, run

from rlvr.distributed.launcher import signal_name
from rlvr.lifeline import child_env, end_with_parent

RLVR_EXIT_CODES = (1, 2, 130)  # a rank that exits with one of these printed why (rlvr.cli)
FOLLOWER_CODES = (1, 130)  # a rank that stopped because another did: a failed collective, torchrun's SIGTERM


def main(argv: list[str]) -> int:
    end_with_parent()
    os.environ.update(child_env({}))  # the ranks inherit this environment: they end with this process
    try:
        run(parse_args(argv))  # type: ignore[no-untyped-call]
    except ChildFailedError as failed:
        rank = first_failure({r: (f.exitcode, f.timestamp) for r, f in failed.failures.items()})
        print(f"rlvr: rank {rank} failed first: {how_it_ended(failed.failures[rank].exitcode)}", file=sys.stderr)
        return 1
    except SignalException:  # Ctrl-C or SIGTERM, passed on to the ranks, which saved and said so
        return 0
    return 0


def first_failure(failures: dict[int, tuple[int, int]]) -> int:
    """The rank whose failure caused the others: {rank: (exit code, when seen, in whole seconds)} -> rank.

    torchrun takes the earliest, lowest rank on a tie; but it sees failures in whole seconds, and a rank that
    stops because another failed can end within the same second as the one that failed: exit code 1 ("another
    rank stopped", or it gave up waiting), or 130 (interrupted by the SIGTERM torchrun sends to the ranks still
    running, before it waited for the failed one; also -15, killed by it). So among the earliest: first a rank
    killed by another signal, then one that ended with its own error (any other exit code), then the lowest rank.

    >>> first_failure({0: (1, 100), 1: (-9, 100)}), first_failure({0: (1, 100), 1: (2, 100)})
    (1, 1)
    >>> first_failure({0: (130, 100), 1: (2, 100)}), first_failure({0: (-15, 100), 1: (2, 100)})
    (1, 1)
    >>> first_failure({0: (1, 100), 1: (-15, 100)}), first_failure({0: (1, 100), 1: (-9, 101)})
    (0, 0)
    """
    earliest = min(when for _, when in failures.values())

    def follows(rank: int) -> int:  # 0: died of a signal, 1: its own error, 2: stopped because of another
        code = failures[rank][0]
        return 0 if code < 0 and code != -signal.SIGTERM else 1 if code > 0 and code not in FOLLOWER_CODES else 2

    return min((rank for rank, (_, when) in failures.items() if when == earliest), key=lambda r: (follows(r), r))


def how_it_ended(exitcode: int) -> str:
    """What a failed rank's exit code says, for the line naming it.

    >>> how_it_ended(2)
    'exit code 2; its error is above'
    >>> how_it_ended(-9)
    'killed by signal 9 (SIGKILL), without an error message'
    >>> how_it_ended(3)
    'exited with code 3 without an error message from rlvr'
    """
    if exitcode < 0:
        return f"killed by {signal_name(-exitcode)}, without an error message"
    if exitcode in RLVR_EXIT_CODES:
        return f"exit code {exitcode}; its error is above"
    return f"exited with code {exitcode} without an error message from rlvr"


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
