"""Preflight (rlvr.rl.preflight): step 1's batch read for signs that the run cannot learn; warn says so in one
line each, strict stops the run, off says nothing."""

from pathlib import Path

import pytest

from rlvr.cli import main
from rlvr.rl.preflight import doomed, first_batch_line

REWARD_FNS = Path(__file__).with_name("reward_fns.py")
HEALTHY = {"zero_variance_fraction": 0.5, "truncation_rate": 0.25, "reward/unscored": 1,
           "reward/math_accuracy/mean": 0.25, "reward/math_accuracy/std": 0.43,
           "reward/boxed_format/mean": 1.0, "reward/boxed_format/std": 0.0}


def test_the_first_batch_in_one_line():
    assert first_batch_line(HEALTHY, 4, 64) == (
        "rlvr: preflight at step 1: a learning signal in 2 of 4 groups; 25% cut at max_new_tokens=64; 1 unscored; "
        "reward means: math_accuracy 0.25, boxed_format 1.00")


def test_a_healthy_batch_shows_no_sign_and_a_reward_always_paid_is_none():
    assert doomed(HEALTHY, 64, "What is 2 + 3?<|im_end|>\n<|im_start|>assistant\n") == []


@pytest.mark.parametrize("changed, sign", [
    ({"zero_variance_fraction": 1.0}, "in every group all completions got the same reward"),
    ({"truncation_rate": 1.0}, "every completion was cut at max_new_tokens=64"),
    ({"reward/math_accuracy/mean": 0.0, "reward/math_accuracy/std": 0.0}, "reward math_accuracy gave every "
                                                                          "completion 0, never more"),
    ({"reward/math_accuracy/mean": -1.0, "reward/math_accuracy/std": 0.0}, "gave every completion -1, never more"),
])
def test_each_sign_that_the_run_cannot_learn_is_named(changed, sign):
    [found] = doomed(HEALTHY | changed, 64, "assistant\n")
    assert sign in found and "\n" not in found


def test_a_format_reward_contradicted_by_the_templates_prefilled_tag_is_named_as_such():
    """trl#6966: the chat template pre-fills <think>, so a reward looking for it in the completion is 0 throughout."""
    metrics = HEALTHY | {"reward/think_answer_format/mean": 0.0, "reward/think_answer_format/std": 0.0}
    [found] = doomed(metrics, 64, "<|im_start|>assistant\n<think>\n")
    assert found.startswith("the chat template pre-fills '<think>' at the end of every prompt")
    assert "think_answer_format scored 0 throughout" in found
    assert doomed(metrics, 64, "<|im_start|>assistant\n")[0].startswith("reward think_answer_format gave every")


@pytest.mark.parametrize("mode", ["warn", "strict", "off"])
def test_a_run_whose_rewards_are_always_zero_is_told_at_step_1_or_stopped(tmp_path, capsys, mode):
    args = ["train", "--config", str(Path(__file__).parents[2] / "configs" / "tiny.yaml"), "--output-dir",
            str(tmp_path / "run"), "--max-steps", "2", "--set", f"rewards=[{{name: '{REWARD_FNS}:always_zero'}}]",
            "--set", "eval_before=false", "--set", "eval_after=false", "--set", "threads=1", "--set",
            f"preflight={mode}"]
    code = main(args)
    out, err = capsys.readouterr()
    signs = [line for line in out.splitlines() if line.startswith("rlvr: preflight: ")]
    if mode == "warn":
        assert code == 0 and "rlvr: preflight at step 1: a learning signal in 0 of" in out
        assert any("in every group all completions got the same reward" in s for s in signs)
        assert any("always_zero gave every completion 0, never more" in s for s in signs)
    elif mode == "strict":
        assert code == 2 and not signs and "Traceback" not in err
        [line] = [line for line in err.splitlines() if line.startswith("rlvr: error")]
        assert "preflight (strict) stopped the run at step 1: " in line
    else:
        assert code == 0 and "preflight" not in out + err
