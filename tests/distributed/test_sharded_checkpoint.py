"""The checkpoint layout of several ranks (rlvr.run.sharded), exercised in one process (DCP needs no
process group there): its parts and files, and a full disk while the parts are written."""

import errno
import json

import pytest
import torch

from rlvr.config import TrainConfig
from rlvr.distributed.world import SINGLE
from rlvr.errors import UserError
from rlvr.run import sharded


def save(run, step, shards):
    return sharded.save_sharded_checkpoint(run, step, write=lambda folder: (folder / "model").mkdir(),
                                           state={"step": step}, config=TrainConfig(), shards=shards, world=SINGLE)


def test_the_parts_the_rng_and_rank_0s_files_land_in_one_atomic_folder(tmp_path):
    final = save(tmp_path, 1, {"model": {"w": torch.arange(6.0)}})
    assert sorted(p.name for p in final.iterdir()) == ["config.yaml", "dcp", "manifest.json", "model", "rng",
                                                       "trainer.pt"]
    listed = json.loads((final / "manifest.json").read_text())["files"]  # every rank's part and rank 0's files
    assert {"dcp/.metadata", "rng/rank0.pt", "trainer.pt", "config.yaml"} <= set(listed)
    assert [p.name for p in (final / "rng").iterdir()] == ["rank0.pt"]
    template = {"model": {"w": torch.zeros(6)}}
    assert torch.equal(sharded.load_shards(final, template)["model"]["w"], torch.arange(6.0))
    assert [p.name for p in final.parent.iterdir()] == ["step-000001"]  # no temporary folder left


def test_a_full_disk_while_the_parts_are_written_is_one_line_and_keeps_the_earlier_checkpoint(tmp_path, monkeypatch):
    save(tmp_path, 1, {"model": {"w": torch.ones(2)}})

    def fill_the_disk(state, checkpoint_id):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(sharded, "dcp_save", fill_the_disk)
    with pytest.raises(UserError) as e:
        save(tmp_path, 2, {"model": {"w": torch.ones(2)}})
    message = str(e.value)
    assert message.startswith(f"no space left on the disk of {tmp_path} to save step 2") and "\n" not in message
    assert [p.name for p in (tmp_path / "checkpoints").iterdir()] == ["step-000001"]


@pytest.mark.parametrize("failing", [1, 2])
def test_a_rank_lost_at_either_barrier_leaves_no_half_written_folder(tmp_path, monkeypatch, failing):
    """Another rank dies while this one waits for it (before or after the parts are written): the
    collective fails here, the temporary folder goes, the earlier checkpoint stands."""
    save(tmp_path, 1, {"model": {"w": torch.ones(2)}})
    calls = []

    def another_rank_is_gone(world):
        calls.append(world)
        if len(calls) == failing:
            raise RuntimeError("Connection closed by peer")

    monkeypatch.setattr(sharded, "barrier", another_rank_is_gone)
    with pytest.raises(RuntimeError, match="closed by peer"):
        save(tmp_path, 2, {"model": {"w": torch.ones(2)}})
    assert [p.name for p in (tmp_path / "checkpoints").iterdir()] == ["step-000001"]
