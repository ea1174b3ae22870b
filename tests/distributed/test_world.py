"""The pure parts of running on several ranks, without starting any: sharing out and putting back,
the torchrun command `--nproc` builds, threads per rank, warnings tagged with their rank, what a rank
says when asked to stop, and a child that finds its parent gone before it could watch it."""

import os
import signal
import subprocess
import sys
import warnings

import pytest

from rlvr.distributed.launcher import rank_threads, torchrun_command
from rlvr.distributed.world import World, shard, tag_warnings, unshard


@pytest.mark.parametrize("size", [1, 2, 3, 5])
@pytest.mark.parametrize("n", [0, 1, 4, 7, 16])
def test_the_shares_cover_every_item_once_and_unshard_restores_the_order(n, size):
    items = [f"item{i}" for i in range(n)]
    shares = [shard(items, World(rank=r, size=size)) for r in range(size)]
    assert sorted(x for s in shares for x in s) == sorted(items)
    assert max(map(len, shares)) - min(map(len, shares)) <= 1  # as even as it gets
    assert unshard(shares) == items


def test_nproc_becomes_torchrun_without_the_option_and_with_a_long_shutdown():
    command = torchrun_command(["sft", "--data", "d.jsonl", "--nproc", "4", "--set", "x=1"], 4)
    assert command[command.index("--nproc_per_node") + 1] == "4"
    assert command[command.index("-m", 3):] == ["-m", "rlvr", "sft", "--data", "d.jsonl", "--set", "x=1"]
    assert int(command[command.index("--shutdown-timeout") + 1]) >= 600


def test_each_rank_gets_its_share_of_the_cpus():
    assert [rank_threads(n, cpus=8) for n in (1, 2, 3, 8, 16)] == [8, 4, 2, 1, 1]


def test_a_ranks_warnings_carry_its_rank(monkeypatch):
    monkeypatch.setattr(warnings, "formatwarning", warnings.formatwarning)
    tag_warnings(World(rank=1, size=2))
    tag_warnings(World(rank=1, size=2))  # once only
    text = warnings.formatwarning("careful", UserWarning, "f.py", 3)
    assert text.startswith("[rank 1] f.py:3: UserWarning: careful")


def test_the_launcher_reads_the_rank_as_world_does(monkeypatch):
    from rlvr.distributed.launcher import is_main_rank, rank_of_many

    for env, rank in (({}, None), ({"RANK": "0", "WORLD_SIZE": "1"}, None), ({"RANK": "1", "WORLD_SIZE": "2"}, 1)):
        for key in ("RANK", "WORLD_SIZE"):
            monkeypatch.delenv(key, raising=False)
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        world = World.from_env()
        assert rank_of_many() == (world.rank if world.distributed else None) == rank
        assert is_main_rank() == world.is_main


def test_a_rank_asked_to_stop_promises_a_checkpoint_only_if_every_rank_gets_there(capsys):
    """A rank killed with SIGKILL leaves the others nobody to save with: their stop line cannot promise one."""
    from rlvr.run.stop import StopFlag, stop_on_signals

    for distributed in (False, True):
        flag = StopFlag()
        with stop_on_signals(flag, distributed=distributed):
            os.kill(os.getpid(), signal.SIGTERM)
        assert flag.stop_requested
    one, rank = capsys.readouterr().out.splitlines()
    assert one == "SIGTERM: finishing this step and saving a checkpoint (SIGTERM again to abort without saving)"
    assert rank == ("SIGTERM: finishing this step, then saving a checkpoint if every rank gets there "
                    "(SIGTERM again to abort without saving)")


def test_a_child_whose_parent_died_before_it_could_watch_it_stops_at_once():
    """end_with_parent asks for SIGTERM when the parent dies, then checks the parent is still the one that
    started it: one that died first (here: a pid that is not its parent) sends no signal any more."""
    code = "from rlvr.lifeline import end_with_parent; end_with_parent(); import time; time.sleep(10)"
    gone = subprocess.run([sys.executable, "-c", code], env={**os.environ, "RLVR_PARENT_PID": "1"}, timeout=30)
    assert gone.returncode == -signal.SIGTERM


def test_once_asked_to_stop_a_rank_is_signalled_by_no_further_parent_death():
    """A dying parent signals once per reparenting (its spawning thread, then its last thread, a loaded
    machine puts seconds between them): after the first, asking the run to stop, the watch is off, so the
    second cannot read as "SIGTERM again: abort without saving"."""
    code = """
import ctypes, os, signal
from rlvr.lifeline import end_with_parent
from rlvr.run.stop import StopFlag, stop_on_signals
libc = ctypes.CDLL(None, use_errno=True)
def watched():
    out = ctypes.c_int(-1)
    libc.prctl(2, ctypes.byref(out), 0, 0, 0)  # PR_GET_PDEATHSIG
    return out.value
end_with_parent()
before = watched()
flag = StopFlag()
with stop_on_signals(flag, distributed=True):
    os.kill(os.getpid(), signal.SIGTERM)
print(before, watched(), flag.stop_requested)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[-1].split() == [str(int(signal.SIGTERM)), "0", "True"]
