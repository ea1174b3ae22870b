"""Every objective of docs/objectives.md trains the tiny model end to end and resumes exactly; a user's
own policy loss or advantage function is called with the documented arguments, and its mistakes are
one line each."""

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from rlvr import paths
from rlvr.config import TrainConfig
from rlvr.errors import UserError
from rlvr.grpo.trainer import Trainer, train_grpo
from rlvr.run.directory import resume_config

from .test_step import DIGITS, tiny_config

FNS = Path(__file__).parent / "objective_fns.py"
REWARD_FNS = Path(__file__).parent / "reward_fns.py"
TWO_REWARDS = (f"rewards=[{{name: '{REWARD_FNS}:digit_share', correctness: true}}, "
               f"{{name: '{REWARD_FNS}:has_digit', weight: 0.5}}]")
OBJECTIVES = {
    "gspo": ["preset=gspo"],
    "cispo": ["preset=cispo"],
    "sapo": ["preset=sapo"],
    "k3+": ["algorithm.kl_estimator=k3+", "algorithm.beta=0.1"],
    "gdpo": ["algorithm.reward_aggregation=normalize_then_sum", TWO_REWARDS],
    "reinforce_pp": ["preset=reinforce_pp"],
    "entropy_top_20": ["algorithm.top_entropy_quantile=0.2"],
    "own_loss": [f"algorithm.policy_loss={FNS}:reinforce"],
    "own_advantages": [f"algorithm.advantage_fn={FNS}:ranked"],
}
RUN = ["algorithm.updates_per_batch=2", "eval_before=false", "eval_after=false", "optim.lr=1e-2"]


def weights(run):
    return load_file(paths.latest_checkpoint(run) / "model" / "model.safetensors")


@pytest.mark.parametrize("name", OBJECTIVES)
def test_each_objective_trains_and_resumes_exactly(tmp_path, name):
    settings = [*OBJECTIVES[name], *RUN]
    if not any(s.startswith("rewards=") for s in settings):
        settings.append(DIGITS)
    train_grpo(tiny_config(tmp_path / "a", *settings, steps=3))
    stopped = train_grpo(tiny_config(tmp_path / "b", *settings, steps=3),
                         on_step_end=lambda step, m, stop: stop.request_stop() if step == 1 else None)
    assert stopped["stopped_at"] == 1
    train_grpo(resume_config(TrainConfig, tmp_path / "b" / "run"), resume=True)
    unbroken, resumed = weights(tmp_path / "a" / "run"), weights(tmp_path / "b" / "run")
    first = Trainer(tiny_config(tmp_path / "c", *settings)).policy.model.state_dict()
    assert any(not torch.equal(unbroken[n], first[n]) for n in unbroken)  # it trained
    assert all(torch.equal(unbroken[n], resumed[n]) for n in unbroken), name  # and resumed exactly
    lines = [json.loads(x) for x in (tmp_path / "a" / "run" / "metrics.jsonl").read_text().splitlines()]
    assert len(lines) == 3 and all(torch.isfinite(torch.tensor(m["loss"])) for m in lines)


def test_the_entropy_mask_keeps_the_share_asked_for(tmp_path, monkeypatch):
    from .test_step import step_with_batch

    trainer = Trainer(tiny_config(tmp_path, DIGITS, "algorithm.top_entropy_quantile=0.2"))
    _, batch = step_with_batch(trainer, monkeypatch)
    kept, trained = int(batch.entropy_mask.sum()), int(batch.loss_mask.sum())
    assert batch.entropy_mask.le(batch.loss_mask).all() and 0 < kept <= 0.2 * trained + 1


@pytest.mark.parametrize("setting,fn,message", [
    ("advantage_fn", "wrong_shape", r"returned \(8,\), not advantages \[P, G\] like the rewards of shape \(2, 4\)"),
    ("advantage_fn", "raises", r"raised KeyError: 'no such reward' \(fix the function\)"),
    ("advantage_fn", "missing", r"has no attribute 'missing'"),
    ("policy_loss", "detached", r"returned a loss without gradients"),
    ("policy_loss", "meta", r"returned a tensor on the meta device"),
    ("policy_loss", "exits", r"algorithm.policy_loss '.*:exits' called sys.exit\(4\)"),
    ("advantage_fn", "exits", r"algorithm.advantage_fn '.*:exits' called sys.exit\(4\)"),
    ("policy_loss", "interrupts", r"raised KeyboardInterrupt itself: a run is stopped by Ctrl-C"),
    ("advantage_fn", "interrupts", r"raised KeyboardInterrupt itself"),
])
def test_a_users_objective_that_goes_wrong_is_one_line(tmp_path, setting, fn, message):
    with pytest.raises(UserError, match=message):
        train_grpo(tiny_config(tmp_path, DIGITS, f"algorithm.{setting}={FNS}:{fn}", *RUN, steps=1))


def test_the_clip_shares_logged_are_the_objectives_own():
    """clip_low/high_fraction: for GSPO the tokens of the sequences it clipped (by the sequence's ratio, not the
    tokens'), for CISPO the tokens whose weight it bounded (whatever Â's sign), for SAPO none (a soft gate)."""
    import dataclasses

    from rlvr.config import AlgorithmConfig
    from rlvr.rl.objective import clip_shares

    old = torch.zeros(2, 2)
    new = torch.tensor([[1.0, -1.0], [0.3, 0.3]])  # log-ratios: sequence means 0 and 0.3
    mask, adv = torch.ones(2, 2, dtype=torch.bool), torch.tensor([[1.0, 1.0], [1.0, 1.0]])
    base = AlgorithmConfig(clip_low=0.2, clip_high=0.2)
    assert clip_shares(dataclasses.replace(base, policy_loss="clip"), new, old, adv, mask) == (0.0, 0.75)
    assert clip_shares(dataclasses.replace(base, policy_loss="gspo"), new, old, adv, mask) == (0.0, 0.5)
    cispo = clip_shares(dataclasses.replace(base, policy_loss="cispo"), new, old, -adv, mask)
    assert cispo == (0.25, 0.75)
    assert clip_shares(dataclasses.replace(base, policy_loss="sapo"), new, old, adv, mask) == (0.0, 0.0)
    assert clip_shares(dataclasses.replace(base, policy_loss=f"{FNS}:reinforce"), new, old, adv, mask) == (0.0, 0.0)


def test_advantages_of_another_shape_are_refused_smaller_ones_too():
    from rlvr.rl.objective import user_advantages

    rewards = torch.ones(2, 4)
    with pytest.raises(UserError, match=r"returned \(2, 1\), not advantages \[P, G\]"):
        user_advantages(f"{FNS}:one_column", rewards, {}, timeout_s=0.0)


def test_the_table_of_policy_losses_cannot_be_edited_through_an_entry():
    import dataclasses

    from rlvr.rl.objective import POLICY_LOSSES

    with pytest.raises(dataclasses.FrozenInstanceError):
        POLICY_LOSSES["clip"].clipped = POLICY_LOSSES["sapo"].clipped  # type: ignore[misc]


def test_a_users_function_is_imported_once_so_its_module_keeps_its_state():
    from rlvr.rl.objective import user_function

    assert user_function(f"{FNS}:reinforce", "policy loss") is user_function(f"{FNS}:reinforce", "policy loss")


def test_a_users_loss_cannot_write_through_to_rlvrs_own_terms(tmp_path):
    """A loss that edits its inputs in place (doubles log π_θ, clears the mask, zeroes Â) trains and logs exactly
    as the same loss that does not: it was handed copies."""
    runs = {}
    for fn in ("reinforce", "edits_in_place"):
        train_grpo(tiny_config(tmp_path / fn, DIGITS, f"algorithm.policy_loss={FNS}:{fn}", "algorithm.beta=0.04",
                               *RUN, steps=2))
        runs[fn] = [json.loads(line) for line in (tmp_path / fn / "run" / "metrics.jsonl").read_text().splitlines()]
    keys = ("loss", "kl", "grad_norm", "entropy")
    assert [[m[k] for k in keys] for m in runs["reinforce"]] == [[m[k] for k in keys] for m in runs["edits_in_place"]]
    assert runs["reinforce"][-1]["kl"] > 0


def test_advantages_too_large_for_a_gradient_are_said(tmp_path, capsys):
    from rlvr.rl import update

    update._said.discard("lost")
    train_grpo(tiny_config(tmp_path, DIGITS, f"algorithm.advantage_fn={FNS}:huge", *RUN, steps=2))
    err = [line for line in capsys.readouterr().err.splitlines() if "the gradient norm is" in line]
    assert len(err) == 1 and "check algorithm.advantage_fn" in err[0]


@pytest.mark.parametrize("setting", ["policy_loss", "advantage_fn"])
def test_ctrl_c_while_a_users_objective_hangs_saves_the_finished_steps(tmp_path, setting):
    """A loss or advantage function that never returns: Ctrl-C gives the step up and the run saves its finished
    steps (the same contract as rewards and environments: rlvr.deadline.call_user)."""
    import os
    import signal
    import threading

    from rlvr.run.loop import run_training

    trainer = Trainer(tiny_config(tmp_path, DIGITS, *RUN, steps=4))

    def hang_from_now(step, metrics, stop):
        if step == 1:
            trainer.config.algorithm.__dict__[setting] = f"{FNS}:hangs"
            threading.Timer(2.0, os.kill, (os.getpid(), signal.SIGINT)).start()
    summary = run_training(trainer, on_step_end=hang_from_now)
    assert summary["stopped_at"] == 1 and paths.latest_checkpoint(tmp_path / "run").name == "step-000001"


@pytest.mark.parametrize("setting", ["policy_loss", "advantage_fn"])
def test_a_users_objective_past_its_time_limit_is_one_line_with_the_finished_steps_saved(tmp_path, setting):
    from rlvr.run.loop import run_training

    trainer = Trainer(tiny_config(tmp_path, DIGITS, *RUN, "algorithm.timeout_s=0.5", steps=4))

    def hang_from_now(step, metrics, stop):
        if step == 1:
            trainer.config.algorithm.__dict__[setting] = f"{FNS}:hangs"
    with pytest.raises(UserError, match=rf"algorithm.{setting} '.*:hangs' did not return within its time limit of "
                                        r"0.5 s \(make it faster, or raise algorithm.timeout_s"):
        run_training(trainer, on_step_end=hang_from_now)
    assert paths.latest_checkpoint(tmp_path / "run").name == "step-000001"
