"""`rlvr pipeline`: the tiny recipe end to end, the hand-over between stages, skipping finished stages."""

import json
from pathlib import Path

import pytest
import yaml

from rlvr.cli import main
from rlvr.errors import UserError
from rlvr.pipeline import runner
from rlvr.pipeline.recipe import load_recipe

RECIPES = Path(__file__).resolve().parents[2] / "recipes"


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("pipeline") / "tiny"
    summary = runner.run_pipeline(RECIPES / "tiny.yaml", str(out), progress=False)
    return out, summary


def stage_config(out, name):
    return yaml.safe_load((out / name / "stage_config.yaml").read_text())


def test_every_stage_runs_and_hands_its_output_to_the_next(tiny_run):
    out, summary = tiny_run
    names = ["base", "cold_start", "reasoning", "rejection", "sft_again", "preferences", "all_scenarios"]
    assert [row["stage"] for row in summary["stages"]] == names
    for name in names[1:]:
        assert (out / name / "stage.json").is_file(), name
    # the model flows sft -> grpo -> (sample) -> sft -> grpo; the rm stage does not replace it
    assert stage_config(out, "reasoning")["model"]["name"] == str(out / "cold_start")
    assert stage_config(out, "rejection")["model"] == str(out / "reasoning")
    assert stage_config(out, "sft_again")["model"] == str(out / "reasoning")
    assert stage_config(out, "sft_again")["data"] == str(out / "rejection" / "sft.jsonl")
    assert stage_config(out, "all_scenarios")["model"]["name"] == str(out / "sft_again")
    rewards = stage_config(out, "all_scenarios")["rewards"]
    assert rewards[1]["params"]["path"] == str(out / "preferences")  # "@preferences" resolved
    kept = json.loads((out / "rejection" / "sample_summary.json").read_text())["kept"]
    assert kept > 0 and len((out / "rejection" / "sft.jsonl").read_text().splitlines()) == kept


def test_an_evaluation_follows_every_model_stage_and_the_report_compares_them(tiny_run):
    out, summary = tiny_run
    evaluated = [row["stage"] for row in summary["stages"] if "eval" in row]
    assert evaluated == ["base", "cold_start", "reasoning", "sft_again", "all_scenarios"]
    for name in evaluated[1:]:
        assert json.loads((out / name / "eval" / "summary.json").read_text())["settings"]["model"] == str(out / name)
    report = (out / "report.md").read_text()
    assert all(f"| {name} |" in report for name in ["base", "rejection", "preferences"])
    assert json.loads((out / "pipeline_summary.json").read_text()) == json.loads(json.dumps(summary, default=str))


def test_a_rerun_skips_finished_stages(tiny_run, monkeypatch):
    out, summary = tiny_run
    monkeypatch.setattr(runner, "run_stage", lambda *a: pytest.fail("a finished stage ran again"))
    assert runner.run_pipeline(RECIPES / "tiny.yaml", str(out), progress=False)["stages"] == summary["stages"]


def test_an_unfinished_stage_is_the_only_one_run_again(tiny_run, monkeypatch):
    out, _ = tiny_run
    (out / "all_scenarios" / "stage.json").unlink()  # as if it had been interrupted
    ran = []
    real = runner.run_stage
    monkeypatch.setattr(runner, "run_stage",
                        lambda kind, config, path: ran.append(path.name) or real(kind, config, path))
    runner.run_pipeline(RECIPES / "tiny.yaml", str(out), progress=False)
    assert ran == ["all_scenarios"] and (out / "all_scenarios" / "stage.json").is_file()


def _resolve_data_paths(recipe):
    """The recipe's data paths as the first run resolved them (recipes/data), for a copy written elsewhere."""
    for stage in recipe["stages"]:
        for key, value in stage["config"].items():
            if isinstance(value, str) and value.startswith("data/"):
                stage["config"][key] = str(RECIPES / value)
    data = recipe["stages"][5]["config"]["data"]
    data["train"] = str(RECIPES / data["train"])


def test_changed_settings_of_a_finished_stage_are_refused(tiny_run, tmp_path):
    out, _ = tiny_run
    recipe = yaml.safe_load((RECIPES / "tiny.yaml").read_text())
    recipe["stages"][0]["config"]["max_steps"] = 7
    _resolve_data_paths(recipe)
    changed = tmp_path / "changed.yaml"
    changed.write_text(yaml.safe_dump(recipe))
    with pytest.raises(UserError, match="stage 'cold_start' already ran with other settings"):
        runner.run_pipeline(changed, str(out), progress=False)


def test_a_recipe_rewritten_with_the_current_keys_still_matches_its_finished_stages(tiny_run, tmp_path, monkeypatch):
    """tiny.yaml writes the generation settings under `sampling` (the keys of earlier versions): the same
    stages written under `generation` are the same settings, so nothing runs again."""
    out, summary = tiny_run
    recipe = yaml.safe_load((RECIPES / "tiny.yaml").read_text())
    for stage in recipe["stages"]:
        sampling = stage["config"].get("sampling", {})
        moved = {key: sampling.pop(key) for key in ("max_new_tokens", "temperature") if key in sampling}
        if moved:
            stage["config"]["generation"] = moved
    _resolve_data_paths(recipe)
    rewritten = tmp_path / "tiny.yaml"
    rewritten.write_text(yaml.safe_dump(recipe))
    monkeypatch.setattr(runner, "run_stage", lambda *a: pytest.fail("a finished stage ran again"))
    assert runner.run_pipeline(rewritten, str(out), progress=False)["stages"] == summary["stages"]


def test_a_stopped_stage_is_not_marked_complete_and_the_pipeline_stops(tiny_run, monkeypatch):
    out, _ = tiny_run
    (out / "all_scenarios" / "stage.json").unlink()
    monkeypatch.setattr(runner, "run_stage", lambda kind, config, path: runner.StageOutput(
        model=str(path), summary={"stopped_at": 1, "checkpoint": "x", "run_dir": str(path)}))
    summary = runner.run_pipeline(RECIPES / "tiny.yaml", str(out), progress=False)
    assert summary["stopped_in"] == "all_scenarios" and not (out / "all_scenarios" / "stage.json").exists()
    monkeypatch.undo()
    runner.run_pipeline(RECIPES / "tiny.yaml", str(out), progress=False)  # the re-run finishes it
    assert (out / "all_scenarios" / "stage.json").is_file()


@pytest.mark.parametrize("name", ["tiny", "r1", "r1_zero", "distill"])
def test_shipped_recipes_are_valid(name, tmp_path):
    recipe = load_recipe(RECIPES / f"{name}.yaml")
    assert recipe.stages and recipe.eval
    runner._check_stages(recipe, tmp_path, name)  # every stage's settings, as the pipeline checks them first


@pytest.mark.parametrize("text, message", [
    ("stages: [{kind: dpo}]", "kind 'dpo'; use one of sft, grpo, sample, rm"),
    ("stages: [{kind: sft, name: a}, {kind: sft, name: a}]", "two stages are called 'a'"),
    ("stages: [{kind: grpo, config: {rewards: [{name: reward_model, params: {path: '@rm'}}]}}]", "refers to @rm"),
    ("stages: []", "non-empty list"),
    ("model: tiny\nsteps: []", "unknown key 'steps'"),
    ("model: tiny\nstages: [{kind: sft, name: a, config: {data: x.jsonl}}, {kind: grpo, name: b, config: {sampling: "
     "{group_size: abc}}}]", "r.yaml, stage 'b' (grpo): config key 'sampling.group_size' must be int"),
    ("model: tiny\nstages: [{kind: sample, name: s}, {kind: sft, name: t, config: {optim: {lr: 0}}}]",
     "stage 't' (sft): optim.lr must be positive"),
    ("model: tiny\nstages: [{kind: sft, name: a, config: {data: x.jsonl, output_dir: runs/a}}]",
     "stage 'a': output_dir is the pipeline's to choose"),
])
def test_recipe_mistakes_are_one_line(tmp_path, capsys, text, message):
    path = tmp_path / "r.yaml"
    path.write_text(text)
    assert main(["pipeline", str(path), "--output-dir", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err
    assert not (tmp_path / "out").exists()  # refused before any stage ran (the first stage's mistakes too)


def test_an_interrupted_reward_model_stage_with_a_broken_latest_checkpoint_resumes_from_the_intact_one(tmp_path,
                                                                                                      capsys):
    from rlvr import paths
    from rlvr.pipeline.stages import run_stage

    config = {"data": str(RECIPES / "data" / "preferences.jsonl"), "model": "tiny", "max_steps": 4, "save_every": 2,
              "batch_size": 8, "threads": 1, "lr": 1.0e-3, "output_dir": str(tmp_path / "rm")}
    out = tmp_path / "rm"
    run_stage("rm", config, out)
    (paths.latest_checkpoint(out) / paths.TRAINER_STATE).write_bytes(b"not a checkpoint")
    summary = run_stage("rm", config, out).summary
    assert "resuming from step 2" in capsys.readouterr().err and summary is not None
    assert paths.step_of(paths.latest_checkpoint(out)) == 4


def test_a_stage_built_on_one_that_ran_again_with_other_settings_is_refused_and_so_is_a_half_way_change(tmp_path):
    """Stage `a` deleted and run again with other settings (as the refusal of a changed stage says to): `b`, built
    on the old `a`, was kept as complete. A stage stopped half-way and continued from its checkpoint ran the
    settings it started with and was marked complete with the recipe's new ones."""
    import shutil

    def recipe(a_steps=2, b_lr=1e-3):
        stage = {"data": str(RECIPES / "data" / "cold_start.jsonl"), "batch_size": 4, "max_length": 96,
                 "threads": 1, "eval_fraction": 0.0}
        path = tmp_path / "r.yaml"
        path.write_text(yaml.safe_dump({"name": "two", "model": "tiny", "stages": [
            {"name": "a", "kind": "sft", "config": {**stage, "max_steps": a_steps}},
            {"name": "b", "kind": "sft", "config": {**stage, "max_steps": 2, "optim": {"lr": b_lr}}}]}))
        return path

    out = tmp_path / "out"
    runner.run_pipeline(recipe(), str(out), progress=False)
    shutil.rmtree(out / "a")
    with pytest.raises(UserError, match=rf"stage 'b' \({out / 'b'}\) was built on earlier stages that have run "
                                        rf"again with other settings since: delete {out / 'b'} to run it again"):
        runner.run_pipeline(recipe(a_steps=3), str(out), progress=False)
    shutil.rmtree(out / "b")
    runner.run_pipeline(recipe(a_steps=3), str(out), progress=False)
    (out / "b" / "stage.json").unlink()  # stopped after its checkpoint, before its mark
    with pytest.raises(UserError, match=r"stage 'b' was stopped half-way with other settings .*stage_config.yaml\): "
                                        r"put the recipe's back to continue it"):
        runner.run_pipeline(recipe(a_steps=3, b_lr=5e-2), str(out), progress=False)
    runner.run_pipeline(recipe(a_steps=3), str(out), progress=False)  # its own settings: it goes on
    assert json.loads((out / "b" / "stage.json").read_text())["settings"] == runner.settings_digest(
        "sft", stage_config(out, "b"))
