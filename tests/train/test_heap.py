"""A run keeps the memory a step frees for the next step (rlvr.run.process.keep_freed_memory): no fresh pages,
each a page fault, for what the last step already had."""

import platform
import subprocess
import sys
import textwrap

import pytest

# A step's pattern: many blocks under 32 MB (activations) allocated, written, freed together, then again.
THREE_STEPS = textwrap.dedent("""
    import resource, sys
    import torch
    from rlvr.run.process import keep_freed_memory
    kept = keep_freed_memory() if sys.argv[1] == "keep" else None
    def step():
        blocks = [torch.ones(2 << 20) for _ in range(40)]  # 40 blocks of 8 MB, written
        del blocks
    step()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    step()
    step()
    print(kept, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
""")
PAGES = 40 * (8 << 20) // 4096


def faults_of_later_steps(mode: str) -> tuple[str, int]:
    """(whether keep_freed_memory took, or None when not called; page faults of the second and third steps)."""
    out = subprocess.run([sys.executable, "-c", THREE_STEPS, mode], capture_output=True, text=True, timeout=120,
                         check=True).stdout.split()
    return out[0], int(out[1])


@pytest.mark.skipif(platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="glibc's heap")
def test_a_second_step_reuses_the_first_steps_memory():
    kept, faults = faults_of_later_steps("keep")
    assert kept == "True"
    # (a step's blocks are 81,920 pages; kept, the second step still faulted one or two blocks anew, 8-14 thousand
    # pages, the third none)
    assert faults < PAGES / 4
    # the same process without it: glibc gives the freed blocks back and faults them in again at the second step
    assert faults_of_later_steps("default")[1] > PAGES / 2
