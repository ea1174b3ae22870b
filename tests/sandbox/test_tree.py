"""Process trees from /proc: both ways of finding descendants agree, and kill spares reused pids."""

import subprocess
import sys
import time

import pytest

from rlvr.sandbox import tree

# A parent with two sleeping children; it prints once they exist.
FAMILY = """
import os, sys, time
for _ in range(2):
    if os.fork() == 0:
        time.sleep(60)
        os._exit(0)
print('ready', flush=True)
time.sleep(60)
"""


@pytest.fixture
def family():
    parent = subprocess.Popen([sys.executable, "-c", FAMILY], stdout=subprocess.PIPE)
    assert parent.stdout is not None and parent.stdout.readline() == b"ready\n"
    yield parent
    tree.kill(tree.descendants(parent.pid))
    parent.kill()
    parent.wait()


def test_children_files_and_scan_agree(family):
    assert tree.HAS_CHILDREN_FILES  # Linux with CONFIG_PROC_CHILDREN, as on the CI machines
    by_files = tree.descendants(family.pid)
    assert len(by_files) == 2
    assert sorted(by_files) == sorted(tree._descendants_by_scan(family.pid))


def test_kill_kills_the_recorded_processes(family):
    children = tree.descendants(family.pid)
    tree.kill(children)
    deadline = time.monotonic() + 2
    while any(tree.is_alive(c) for c in children) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not any(tree.is_alive(c) for c in children)


def test_kill_spares_a_reused_pid(family):
    (pid, start), _ = tree.descendants(family.pid)
    tree.kill([(pid, start - 1)])  # same pid, other start time: another process by now
    time.sleep(0.05)
    assert tree.is_alive((pid, start))
