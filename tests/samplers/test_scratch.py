"""The vLLM engine's scratch folders: what a process killed with -9 left is removed by the next one."""

import os
import subprocess
import sys

from rlvr.samplers.scratch import scratch_dir


def test_folders_of_a_process_that_is_gone_are_removed_at_the_next_start(tmp_path):
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead = int(gone.stdout)  # (a process that has exited: its pid runs nothing now, or something else's)
    left = tmp_path / f"rlvr-weights-{dead}-abc123"
    (left / "part").mkdir(parents=True)
    ours = tmp_path / f"rlvr-weights-{os.getpid()}-live"
    ours.mkdir()
    other_form = tmp_path / "rlvr-weights-server.log"
    other_form.write_text("kept")
    made = scratch_dir("rlvr-weights-", str(tmp_path))
    assert made.is_dir() and made.name.startswith(f"rlvr-weights-{os.getpid()}-")
    running = os.path.exists(f"/proc/{dead}")  # (the pid reused meanwhile: then the folder must stay)
    assert left.exists() == running and ours.is_dir() and other_form.read_text() == "kept"
