"""A checkpoint broken after it was written (cut short, deleted, overwritten): `--resume` falls back to the
newest intact one with one line and sets the broken one aside (never removes it); with none intact it is
one line; `rlvr export` and `rlvr eval` of the run use the newest whole model."""

import json
import shutil
import warnings

import pytest
import torch
from torch.distributed.checkpoint.state_dict_saver import save as dcp_save

from rlvr import paths
from rlvr.cli import main
from rlvr.config import TrainConfig
from rlvr.grpo.trainer import train_grpo
from rlvr.intact import checkpoint_problem
from rlvr.run.directory import resume_config

from .test_step import DIGITS, tiny_config

STEP = "step-{:06d}"


@pytest.fixture(scope="module")
def two_checkpoints(tmp_path_factory):
    """A finished 2-step run with a checkpoint at each step; tests break copies of it."""
    root = tmp_path_factory.mktemp("two")
    train_grpo(tiny_config(root, DIGITS, "save_every=1", "keep_checkpoints=0", "eval_before=false",
                           "eval_after=false", steps=2))
    return root / "run"


@pytest.fixture
def run(two_checkpoints, tmp_path):
    shutil.copytree(two_checkpoints, tmp_path / "run")
    return tmp_path / "run"


def cut_weights(checkpoint):
    weights = checkpoint / "model" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100_000])
    return "model/model.safetensors is cut short (100,000 of "


def delete_weights(checkpoint):
    (checkpoint / "model" / "model.safetensors").unlink()
    return "model/ holds no weights"


def delete_state(checkpoint):
    (checkpoint / "trainer.pt").unlink()
    return "trainer.pt is missing"


def overwrite_state(checkpoint):
    (checkpoint / "trainer.pt").write_bytes(b"not a checkpoint\n" * 100)
    return "trainer.pt is not a file torch.save wrote"


def delete_config(checkpoint):
    (checkpoint / "config.yaml").unlink()
    return "config.yaml is missing"


def cut_config_at_a_line(checkpoint):
    """Cut where a line ends: still YAML, with settings missing (it once read as "kl_estimator ... got None")."""
    config = checkpoint / "config.yaml"
    lines = config.read_text().splitlines(keepends=True)
    config.write_text("".join(lines[: len(lines) // 2]))
    return "config.yaml is "


def cut_model_config(checkpoint):
    path = checkpoint / "model" / "config.json"
    path.write_bytes(path.read_bytes()[:40])
    return "model/config.json is 40 bytes, not the "


def overwrite_tokenizer(checkpoint):
    """The same length, other bytes: only the hash tells."""
    path = checkpoint / "model" / "tokenizer.json"
    path.write_bytes(b"x" * path.stat().st_size)
    return "model/tokenizer.json is not the file saved with it"


def half_a_template(checkpoint):
    path = checkpoint / "model" / "chat_template.jinja"
    path.write_text(path.read_text()[: len(path.read_text()) // 2])
    return "model/chat_template.jinja is "


def delete_tokenizer_config(checkpoint):
    (checkpoint / "model" / "tokenizer_config.json").unlink()
    return "model/tokenizer_config.json is missing (listed in manifest.json)"


BREAKS = [cut_weights, delete_weights, delete_state, overwrite_state, delete_config, cut_config_at_a_line,
          cut_model_config, overwrite_tokenizer, half_a_template, delete_tokenizer_config]


def steps_logged(run):
    return [json.loads(line)["step"] for line in (run / "metrics.jsonl").read_text().splitlines()]


def rlvr_lines(err):  # (besides the lines naming the precision it trains in and its memory plan)
    return [line for line in err.splitlines()
            if line.startswith("rlvr") and not line.startswith(("rlvr: precision", "rlvr: memory plan"))]


@pytest.mark.parametrize("breaking", BREAKS, ids=lambda f: f.__name__)
def test_resume_falls_back_to_the_newest_intact_checkpoint(run, two_checkpoints, capsys, breaking):
    latest = run / "checkpoints" / STEP.format(2)
    problem = breaking(latest)
    broken_files = {p.relative_to(latest): p.read_bytes() for p in latest.rglob("*") if p.is_file()}

    assert main(["train", "--resume", str(run), "--max-steps", "3"]) == 0
    err = capsys.readouterr().err
    assert "Traceback" not in err
    [line] = rlvr_lines(err)
    assert line.startswith(f"rlvr: checkpoint {latest} is broken: {problem}") and line.endswith("resuming from step 1")
    assert steps_logged(run) == [1, 2, 3]  # step 2 trained again from step 1's state, then step 3
    names = sorted(p.name for p in (run / "checkpoints").iterdir())
    assert names == ["broken-step-000002", STEP.format(1), STEP.format(2), STEP.format(3)]
    kept = run / "checkpoints" / "broken-step-000002"  # set aside as it was, not removed
    assert {p.relative_to(kept): p.read_bytes() for p in kept.rglob("*") if p.is_file()} == broken_files
    again, first = (d / "checkpoints" / STEP.format(2) / "model" / "model.safetensors" for d in (run, two_checkpoints))
    assert again.read_bytes() == first.read_bytes()  # step 1's weights, optimizer, data order and RNG: the same step 2


def test_resume_config_reads_the_config_of_the_checkpoint_it_resumes_from(run):
    from rlvr.intact import write_manifest

    delete_config(run / "checkpoints" / STEP.format(2))
    first = run / "checkpoints" / STEP.format(1)
    (first / "config.yaml").write_text((first / "config.yaml").read_text().replace("max_steps: 2", "max_steps: 7"))
    write_manifest(first)  # (as if saved so: an edit by hand is a changed file, test_a_hand_edit_is_named)
    assert resume_config(TrainConfig, run).max_steps == 7


def test_a_hand_edit_of_a_checkpoints_config_is_named_with_the_way_to_change_settings(run):
    latest = run / "checkpoints" / STEP.format(2)
    (latest / "config.yaml").write_text((latest / "config.yaml").read_text().replace("seed: 0", "seed: 1"))
    assert checkpoint_problem(latest) == ("config.yaml is not the file saved with it (its contents changed since; "
                                          "to resume with other settings, give them as --set KEY=VALUE)")


def test_with_no_intact_checkpoint_resume_is_one_line_and_changes_nothing(run, capsys):
    checkpoints = run / "checkpoints"
    overwrite_state(checkpoints / STEP.format(1))
    delete_state(checkpoints / STEP.format(2))
    assert main(["train", "--resume", str(run)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert err.startswith(f"rlvr: error: cannot resume: none of the 2 checkpoints of {run} is intact; the latest, "
                          "step-000002: trainer.pt is missing; restore it from a copy")
    assert sorted(p.name for p in checkpoints.iterdir()) == [STEP.format(1), STEP.format(2)]
    assert steps_logged(run) == [1, 2]


def test_export_of_a_run_takes_the_newest_whole_model(run, tmp_path, capsys):
    cut_weights(run / "checkpoints" / STEP.format(2))
    assert main(["export", str(run), "--output", str(tmp_path / "out")]) == 0
    err = capsys.readouterr().err
    [line] = rlvr_lines(err)
    latest = run / "checkpoints" / STEP.format(2)
    assert line.startswith(f"rlvr: checkpoint {latest} is broken: model/model.safetensors is cut short")
    assert line.endswith("using step-000001")
    written = (tmp_path / "out" / "model.safetensors").read_bytes()
    assert written == (run / "checkpoints" / STEP.format(1) / "model" / "model.safetensors").read_bytes()
    assert main(["export", str(run), "--output", str(tmp_path / "merged"), "--merge"]) == 0  # (no adapters: said)
    assert "(it has no adapters: there was nothing to merge)" in capsys.readouterr().out
    assert latest.is_dir()  # a command that only reads sets nothing aside


def test_eval_and_export_with_no_whole_model_are_one_line(run, tmp_path, capsys):
    for step in (1, 2):
        cut_weights(run / "checkpoints" / STEP.format(step))
    commands = {"export": ["export", str(run), "--output", str(tmp_path / "out")],
                "eval": ["eval", "--model", str(run), "--data", "arithmetic", "--output-dir", str(tmp_path / "e")],
                "a broken checkpoint given itself": ["export", str(run / "checkpoints" / STEP.format(1)), "--output",
                                                     str(tmp_path / "out")]}
    for name, args in commands.items():
        assert main(args) == 2, name
        err = capsys.readouterr().err
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
        assert "model/model.safetensors is cut short" in err, err
    assert not (tmp_path / "out").exists()


def test_the_parts_several_ranks_wrote_are_checked(run):
    """dcp/ (the sharded state, rlvr.run.sharded): its metadata loads and each part is as long as it says;
    rng/rankR.pt: each rank's RNG loads."""
    checkpoint = run / "checkpoints" / STEP.format(1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (DCP in one process says it assumes one process)
        dcp_save({"w": torch.randn(64, 8), "o": {"m": torch.zeros(8)}}, checkpoint_id=str(checkpoint / paths.SHARDS))
    (checkpoint / paths.RANK_RNG).mkdir()
    torch.save({"torch": torch.get_rng_state()}, checkpoint / paths.RANK_RNG / "rank1.pt")
    assert checkpoint_problem(checkpoint) is None

    part = checkpoint / paths.SHARDS / "__0_0.distcp"
    whole = part.read_bytes()
    part.write_bytes(whole[:100])
    assert checkpoint_problem(checkpoint) == f"dcp/__0_0.distcp is cut short (100 of {len(whole):,} bytes)"
    part.write_bytes(whole)
    (checkpoint / paths.SHARDS / ".metadata").unlink()
    assert checkpoint_problem(checkpoint).startswith("dcp/.metadata does not load")
    shutil.rmtree(checkpoint / paths.SHARDS)
    (checkpoint / paths.RANK_RNG / "rank1.pt").write_bytes(b"\0" * 64)
    assert checkpoint_problem(checkpoint) == "rng/rank1.pt is not a file torch.save wrote (cut short or overwritten)"
