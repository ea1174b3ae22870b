"""Trackers (logging.report_to): each receives the run's metrics, config, sample tables, evaluations and
summary; read back here from W&B's offline run file, trackio's local store and MLflow's file store."""

import glob
import importlib
import json
import struct
import sys

import pytest

from rlvr.config import load_config
from rlvr.errors import UserError
from rlvr.grpo.trainer import train_grpo
from rlvr.run import trackers

from .train.test_step import REWARD_FNS

wandb = pytest.importorskip("wandb")
pytest.importorskip("trackio")
trackio_storage = pytest.importorskip("trackio.sqlite_storage")
mlflow = pytest.importorskip("mlflow")

TINY = ["model.name=tiny", "data.train_size=16", "data.eval_size=4", "sampling.group_size=4", "sampling.batch_size=8",
        "generation.max_new_tokens=6", "optim.lr=1e-3", "threads=1", "sample_every=1", "eval_every=2"]


@pytest.fixture
def offline(tmp_path, monkeypatch):
    """Every tracker writes under tmp_path and nowhere else."""
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("TRACKIO_DIR", str(tmp_path / "trackio"))
    monkeypatch.setenv("MLFLOW_TRACKING_URI", (tmp_path / "mlruns").as_uri())
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    # trackio reads TRACKIO_DIR once, when imported, into several of its modules
    for name, module in list(sys.modules.items()):
        if name.split(".")[0] == "trackio" and hasattr(module, "TRACKIO_DIR"):
            monkeypatch.setattr(module, "TRACKIO_DIR", tmp_path / "trackio")
    return tmp_path


def run(tmp_path, *extra, steps=2, name="run"):
    config = load_config(None, [*TINY, f"output_dir={tmp_path / name}", *extra], max_steps=steps)
    return config, train_grpo(config)


def wandb_records(run_file):
    """The protobuf records of a W&B run file (a LevelDB-style log: 32 KiB blocks of checksummed chunks)."""
    from wandb.proto import wandb_internal_pb2

    data = run_file.read_bytes()
    assert data[:4] == b":W&B"
    pos, block, payload = 7, 32768, b""
    while pos + 7 <= len(data):
        if block - pos % block < 7:  # a block's tail too short for a header is padding
            pos += block - pos % block
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
        chunk, pos = data[pos + 7:pos + 7 + length], pos + 7 + length
        payload = chunk if kind in (1, 2) else payload + chunk  # full/first start a record, middle/last extend it
        if kind in (1, 4):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(payload)
            yield record


def wandb_run_file(run_dir):
    """The run's file once W&B's service has closed it: what a process's exit does (its atexit hook). Read
    just after run.finish(), the file can still miss records the service had not yet written (seen once in CI)."""
    wandb.teardown()
    return next(iter((run_dir / "wandb").glob("offline-run-*/run-*.wandb")))


def logged_lines(run_dir):
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def sample_lines(run_dir):
    return [json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines()]


def test_wandb_offline_run_holds_metrics_config_samples_and_summary(offline):
    config, summary = run(offline, "logging.report_to=wandb", "logging.project=proj")
    run_dir = offline / "run"
    run_file = wandb_run_file(run_dir)
    history, summaries, configs, kinds = {}, {}, {}, []
    for record in wandb_records(run_file):
        kind = record.WhichOneof("record_type")
        kinds.append(kind)
        if kind == "history":
            items = {i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in record.history.item}
            history.setdefault(items["_step"], {}).update(items)
        elif kind == "summary":
            summaries.update({i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in record.summary.update})
        elif kind == "run":
            configs.update({i.key: json.loads(i.value_json) for i in record.run.config.update})
            assert record.run.project == "proj" and record.run.display_name == "run" and record.run.job_type == "train"
    for line in logged_lines(run_dir):
        assert history.get(line["step"], {}).get("loss") == pytest.approx(line["loss"]), (
            sorted(history), run_file.stat().st_size, kinds)
        assert history[line["step"]]["accuracy"] == pytest.approx(line["accuracy"])
    assert history[0]["eval/strict"] == summary["before"]["strict"]["mean"]  # the "before" evaluation, at step 0
    assert history[2]["eval/strict"] == summary["after"]["strict"]["mean"]
    assert configs["sampling"]["group_size"] == config.sampling.group_size
    assert summaries["after/strict/mean"] == pytest.approx(summary["after"]["strict"]["mean"])
    # the sample table of step 1: one row per completion, as samples.jsonl has them
    table_path = run_file.parent / "files" / history[1]["samples/path"]
    table = json.loads(table_path.read_text())
    groups = [g for g in sample_lines(run_dir) if g["step"] == 1]
    assert table["columns"] == ["step", "prompt", "completion", "reward", "advantage"]
    assert [row[2] for row in table["data"]] == [c for g in groups for c in g["completions"]]
    assert [row[3] for row in table["data"]] == pytest.approx([r for g in groups for r in g["rewards"]])


def test_trackio_local_store_holds_metrics_config_and_samples(offline):
    config, summary = run(offline, "logging.report_to=[trackio]", "logging.project=proj", "logging.run_name=first")
    logs = trackio_storage.SQLiteStorage.get_logs("proj", "first")
    by_step = {}
    for entry in logs:
        by_step.setdefault(entry["step"], {}).update(entry)
    for line in logged_lines(offline / "run"):
        assert by_step[line["step"]]["loss"] == pytest.approx(line["loss"])
    assert by_step[0]["eval/strict"] == summary["before"]["strict"]["mean"]
    assert by_step[2]["summary/gain/strict/mean"] == pytest.approx(summary["gain"]["strict"]["mean"])
    rows = by_step[2]["samples"]["_value"]
    groups = [g for g in sample_lines(offline / "run") if g["step"] == 2]
    assert [row["completion"] for row in rows] == [c for g in groups for c in g["completions"]]
    stored = trackio_storage.SQLiteStorage.get_run_config("proj", "first")
    assert stored["sampling"]["batch_size"] == config.sampling.batch_size


def mlflow_run(tmp_path, experiment="proj"):
    client = mlflow.tracking.MlflowClient((tmp_path / "mlruns").as_uri())
    found = client.search_runs([client.get_experiment_by_name(experiment).experiment_id])
    return client, found


def test_mlflow_file_store_holds_metrics_params_samples_and_summary(offline):
    config, summary = run(offline, "logging.report_to=[mlflow, tensorboard]", "logging.project=proj")
    client, (found,) = mlflow_run(offline)
    run_id = found.info.run_id
    history = {m.step: m.value for m in client.get_metric_history(run_id, "loss")}
    assert history == pytest.approx({line["step"]: line["loss"] for line in logged_lines(offline / "run")})
    strict = {m.step: m.value for m in client.get_metric_history(run_id, "eval/strict")}
    assert strict[0] == summary["before"]["strict"]["mean"] and strict[2] == summary["after"]["strict"]["mean"]
    assert found.data.params["sampling.group_size"] == str(config.sampling.group_size)
    assert found.data.tags["rlvr.job"] == "train" and found.data.tags["mlflow.runName"] == "run"
    folder = client.download_artifacts(run_id, "", str(offline / "artifacts"))
    saved = json.loads((offline / "artifacts" / "summary.json").read_text())
    assert saved["gain"] == summary["gain"]
    table = json.loads((offline / "artifacts" / "samples" / "step_000001.json").read_text())
    groups = [g for g in sample_lines(offline / "run") if g["step"] == 1]
    assert [row[2] for row in table["data"]] == [c for g in groups for c in g["completions"]], folder
    assert list((offline / "run" / "tensorboard").iterdir())  # the other tracker named, still written


def test_every_tracker_takes_unscored_rewards(offline):
    """A reward that returns None for every completion: each tracker's sample table gets nulls, its curves gaps."""
    unscored = f"rewards=[{{name: '{REWARD_FNS}:none_for_all', correctness: true}}]"
    run(offline, unscored, "logging.report_to=[wandb, trackio, mlflow, tensorboard]", "logging.project=proj",
        "logging.run_name=unscored", steps=1)
    client, (found,) = mlflow_run(offline)
    client.download_artifacts(found.info.run_id, "", str(offline / "artifacts"))
    table = json.loads((offline / "artifacts" / "samples" / "step_000001.json").read_text())
    assert table["data"] and all(row[3] is None for row in table["data"])
    assert "reward/mean" not in found.data.metrics  # NaN: no point, not a crash
    logs = trackio_storage.SQLiteStorage.get_logs("proj", "unscored")
    rows = next(entry["samples"]["_value"] for entry in logs if "samples" in entry)
    assert rows and all(row["reward"] is None for row in rows)
    run_file = wandb_run_file(offline / "run")
    assert any(r.WhichOneof("record_type") == "history" for r in wandb_records(run_file))


def test_resume_continues_the_same_tracker_runs(offline):
    run(offline, "logging.report_to=[mlflow, wandb]", "save_every=1", steps=1)
    ids = json.loads((offline / "run" / trackers.IDS).read_text())
    longer = load_config(None, [*TINY, f"output_dir={offline / 'run'}", "logging.report_to=[mlflow, wandb]"],
                         max_steps=2)
    train_grpo(longer, resume=True)
    assert json.loads((offline / "run" / trackers.IDS).read_text()) == ids
    client, found = mlflow_run(offline, experiment="rlvr")  # logging.project's default
    assert [r.info.run_id for r in found] == [ids["mlflow"]]
    assert sorted(m.step for m in client.get_metric_history(ids["mlflow"], "loss")) == [1, 2]
    assert len(glob.glob(str(offline / "run" / "wandb" / f"*-{ids['wandb']}"))) >= 1


def test_a_missing_tracker_package_is_a_one_line_error_naming_the_extra(tmp_path, monkeypatch):
    real = importlib.import_module

    def without_wandb(name, *args):
        if name == "wandb":
            raise ImportError(name)
        return real(name, *args)

    monkeypatch.setattr(importlib, "import_module", without_wandb)
    with pytest.raises(UserError, match=r"pip install 'rlvr\[wandb\]'"):
        run(tmp_path, "logging.report_to=wandb")


def test_a_tracker_that_cannot_start_is_a_one_line_error(tmp_path, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", (tmp_path / "mlruns").as_uri())
    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE", raising=False)  # MLflow refuses the file store without it
    with pytest.raises(UserError, match="^mlflow could not start a run: .*MLFLOW_TRACKING_URI.*drop mlflow from"):
        run(tmp_path, "logging.report_to=mlflow")


@pytest.mark.parametrize(("setting", "message"), [
    ("logging.report_to=[wandb, wandb]", "names a tracker twice"),
    ("logging.report_to=[neptune]", "must be one of"),
])
def test_bad_report_to_is_a_config_error(tmp_path, setting, message):
    with pytest.raises(UserError, match=message):
        load_config(None, [setting])


def test_a_pipeline_logs_one_tracker_run_per_training_stage_grouped_under_the_recipe(offline):
    from pathlib import Path

    import yaml

    from rlvr.pipeline import runner

    recipes = Path(__file__).resolve().parents[1] / "recipes"
    recipe = yaml.safe_load((recipes / "tiny.yaml").read_text())
    recipe["logging"] = {"report_to": ["mlflow"], "project": "proj"}
    (offline / "data").symlink_to(recipes / "data")
    path = offline / "tiny.yaml"
    path.write_text(yaml.safe_dump(recipe))
    runner.run_pipeline(path, str(offline / "pipeline"), progress=False)
    client, found = mlflow_run(offline)
    stages = {r.data.tags["mlflow.runName"]: r for r in found}
    assert {name: r.data.tags["rlvr.job"] for name, r in stages.items()} == {
        "cold_start": "sft", "reasoning": "train", "sft_again": "sft", "preferences": "rm", "all_scenarios": "train"}
    assert {r.data.tags["rlvr.group"] for r in found} == {"tiny"}
    for name, r in stages.items():  # each stage's run holds its own metrics.jsonl
        lines = logged_lines(offline / "pipeline" / name)
        history = {m.step: m.value for m in client.get_metric_history(r.info.run_id, "loss")}
        assert history == pytest.approx({line["step"]: line["loss"] for line in lines}), name
