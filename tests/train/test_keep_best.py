"""keep_best: the checkpoint of the best validation accuracy is kept beside the latest, chosen on a validation
slice apart from the reported held-out prompts, reported in summary.json, loadable, and kept across a resume."""

import json

import pytest
import torch
from safetensors.torch import load_file

from rlvr import paths
from rlvr.config import TrainConfig
from rlvr.errors import UserError
from rlvr.grpo.trainer import Trainer, train_grpo
from rlvr.models.loading import find_model_dir
from rlvr.rl.build import build_parts
from rlvr.run import best as best_kept
from rlvr.run.directory import resume_config

from .test_step import DIGITS, tiny_config

# the validation accuracy measured before training and at steps 2, 4, 6 (the last): step 4 is the best,
# step 6 ties it (a tie keeps the earlier), and the step-0 model is not a candidate (nothing was trained)
SCRIPT = {0: 0.9, 2: 0.25, 4: 0.5, 6: 0.5}
BEST = ["data.validation_size=3", "keep_best=true", "eval_every=2", "keep_checkpoints=0"]


@pytest.fixture
def scripted_validation(monkeypatch):
    """The tiny model answers nothing right: the validation accuracy of each step is set from SCRIPT."""
    real = Trainer.evaluate

    def evaluate(self):
        from rlvr.records import Evaluation
        from rlvr.rl.evaluation import describe, eval_metrics

        result = real(self).result
        result["validation"]["strict"] = {"mean": SCRIPT[self.step_count], "low": 0.0, "high": 1.0}
        return Evaluation(result, eval_metrics(result), describe(result))
    monkeypatch.setattr(Trainer, "evaluate", evaluate)


def test_the_validation_slice_is_apart_from_the_reported_prompts(tmp_path):
    parts = build_parts(tiny_config(tmp_path, "data.train=arithmetic", "data.eval_size=5", "data.validation_size=7"))
    reported, validation = ([str(p.example.prompt) for p in prompts] for prompts in (parts.eval, parts.validation))
    assert len(reported) == 5 and len(validation) == 7 and not set(reported) & set(validation)
    alone = build_parts(tiny_config(tmp_path, "data.train=arithmetic", "data.eval_size=5"))
    assert [str(p.example.prompt) for p in alone.eval] == reported  # the reported prompts do not move


def test_the_best_checkpoint_is_kept_reported_and_loadable(tmp_path, scripted_validation, capsys):
    from rlvr.grpo.cli import _print_summary

    summary = train_grpo(tiny_config(tmp_path, DIGITS, *BEST, steps=6))
    run = tmp_path / "run"
    assert summary["best"]["step"] == 4 and summary["best"]["validation"]["strict"]["mean"] == 0.5
    assert summary["best"]["checkpoint"] == str(run / "best")
    assert set(summary["best"]["heldout"]) >= {"strict", "lenient", "n"} and "strict" in summary["best"]["gain"]
    assert json.loads((run / "summary.json").read_text())["best"] == summary["best"]
    assert summary["after"]["validation"]["strict"]["mean"] == 0.5  # the last is reported as before, beside it
    kept, step_4, last = (load_file(p / "model" / "model.safetensors")
                          for p in (run / "best", paths.step_dir(run, 4), paths.step_dir(run, 6)))
    assert all(torch.equal(kept[k], step_4[k]) for k in kept)
    assert any(not torch.equal(kept[k], last[k]) for k in kept)
    assert find_model_dir(run / "best") == run / "best" / "model"  # what rlvr eval / export take
    capsys.readouterr()
    _print_summary(summary, str(run))
    printed = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in printed if line.startswith("  ") and "strict" in line][:3] == [
        "before", "after", "gain"]
    assert any(line.startswith("  best checkpoint, step 4") for line in printed)
    assert any(line.startswith("  best   strict") for line in printed)
    assert summary["best"]["beats_untrained"] is False  # 0.5 at best, against 0.9 before training: said
    assert "  no trained checkpoint beat the untrained model on the validation slice (90.0% [0.0, 100.0]): " \
        "the model you started from is the better one" in printed
    logged = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert [m["eval/validation/strict"] for m in logged if "eval/validation/strict" in m] == [0.25, 0.5, 0.5]


def test_a_best_above_the_untrained_model_says_nothing_more(tmp_path, scripted_validation, monkeypatch, capsys):
    from rlvr.grpo.cli import _print_summary

    monkeypatch.setitem(SCRIPT, 0, 0.1)
    summary = train_grpo(tiny_config(tmp_path, DIGITS, *BEST, steps=2))
    assert summary["best"]["step"] == 2 and summary["best"]["beats_untrained"] is True  # 0.25 against 0.1
    _print_summary(summary, str(tmp_path / "run"))
    assert "untrained" not in capsys.readouterr().out


def test_a_resumed_run_keeps_the_best_it_had(tmp_path, scripted_validation):
    config = tiny_config(tmp_path, DIGITS, *BEST, steps=6)
    train_grpo(config, on_step_end=lambda step, m, stop: stop.request_stop() if step == 5 else None)
    run = tmp_path / "run"
    assert best_kept.load(run).step == 4
    summary = train_grpo(resume_config(TrainConfig, run), resume=True)
    assert summary["best"]["step"] == 4


def test_a_swap_cut_short_is_finished_on_load(tmp_path):
    (tmp_path / ".best.old").mkdir()
    (tmp_path / ".best.old" / "best.json").write_text(json.dumps({"step": 3, "score": 0.5, "evaluation": {}}))
    assert best_kept.load(tmp_path).step == 3 and (tmp_path / "best" / "best.json").is_file()


@pytest.mark.parametrize("setting, fix", [(["keep_best=true", "eval_every=2"], "data.validation_size"),
                                          (["keep_best=true", "data.validation_size=3"], "eval_every"),
                                          (["data.validation_size=5000"], "lower one of them")])
def test_keep_best_without_what_it_needs_is_one_line(tmp_path, setting, fix):
    with pytest.raises(UserError, match=fix):
        build_parts(tiny_config(tmp_path, "data.train=arithmetic", *setting))
