import os
import signal

import pytest
import torch

from rlvr.models.devices import BF16_UNITS_ENV
from rlvr.sandbox import sandbox_available
from rlvr.sandbox.command import ISOLATION_ENV, UNISOLATED

if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    # A shell without job control starts a background command (`pytest &`) with Ctrl-C ignored, and every
    # process it starts inherits that: the tests that stop runs with Ctrl-C would see it ignored. A terminal's
    # Ctrl-C is what they test, so the suite starts from Python's own handler wherever it was started.
    signal.signal(signal.SIGINT, signal.default_int_handler)

# `model.dtype: auto` would pick bf16 on a CPU with AMX and fp32 elsewhere: the suite decides as on a CPU without
# bf16 units, so that every expectation written in fp32 holds on every machine (child processes inherit it).
# tests/test_devices.py fakes the other CPUs where it tests the choice.
os.environ[BF16_UNITS_ENV] = "none"

if os.environ.get("PYTEST_XDIST_WORKER"):
    # `pytest -n 2` (make test): two workers share the cores, so each computes on one thread, and the processes
    # its tests start inherit that (torch reads OMP_NUM_THREADS when it loads; a run's `threads: 0` is torch's count)
    os.environ["OMP_NUM_THREADS"] = "1"
    torch.set_num_threads(1)

if not sandbox_available():
    # The suite's own test programs are benign: on a machine without bubblewrap, the tests of code rewards
    # and graders run them unisolated (the opt-in a user would give) instead of failing. The attack tests
    # skip; tests/sandbox/test_runner.py checks that without the opt-in everything fails closed.
    os.environ.setdefault(ISOLATION_ENV, UNISOLATED)


@pytest.fixture
def tiny():
    """A fresh random tiny model (eval mode) and its character tokenizer."""
    from rlvr.models import build_tiny_model  # (here: transformers is seconds to import, and few tests need it)

    model, tokenizer = build_tiny_model(seed=0)
    return model.eval(), tokenizer


@pytest.fixture
def small_disk(tmp_path):
    """A 4 MiB tmpfs, where mounting one is allowed (root); skipped elsewhere."""
    import subprocess

    where = tmp_path / "disk"
    where.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(where)], capture_output=True,
                      timeout=10).returncode:
        pytest.skip("cannot mount a tmpfs here")
    yield where
    subprocess.run(["umount", str(where)], timeout=10)


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
