"""The one contract of a user's function (rlvr.deadline.call_user, docs/python.md), against every kind of user
function with the same table of misbehaviours: each ends the run in one line naming the function, within
seconds, with the finished step saved. (NaN is a reward's or an environment's way to say "unscored", not a
misbehaviour: tested in test_environment_faults and test_unscored.)"""

import time
from pathlib import Path

import pytest

from rlvr import paths
from rlvr.errors import UserError
from rlvr.grpo.trainer import Trainer
from rlvr.rewards import RewardSpec
from rlvr.run.loop import run_training

from . import contract_fns
from .test_step import DIGITS, tiny_config

FNS = Path(__file__).with_name("contract_fns.py")
QUIET = ["eval_before=false", "eval_after=false", "threads=1"]
KINDS = {"reward": "reward function 'mine", "environment": "environment Env_", "policy_loss": "algorithm.policy_loss",
         "advantage_fn": "algorithm.advantage_fn"}
TABLE = [(kind, misbehaviour) for kind in KINDS for misbehaviour in
         ["raises", "exits", "interrupts", "hangs", "wrong_type", *(["nan"] if kind in ("policy_loss", "advantage_fn")
                                                                    else [])]]


def trainer_for(tmp_path, kind):
    if kind == "environment":
        return Trainer(tiny_config(tmp_path, f"environment.name='{FNS}:env_raises'", "environment.timeout_s=0.5",
                                   "rewards=[{name: environment_reward}]", "generation.max_new_tokens=6", *QUIET,
                                   steps=3))
    return Trainer(tiny_config(tmp_path, DIGITS, "algorithm.timeout_s=0.5", *QUIET, steps=3))


def swap_in(trainer, kind, misbehaviour):
    if kind == "reward":
        trainer.parts.rewards[0] = RewardSpec("mine", getattr(contract_fns, f"reward_{misbehaviour}"), 1.0, 0.5)
    elif kind == "environment":
        trainer.source.sampler.make_env = getattr(contract_fns, f"env_{misbehaviour}")
    else:
        prefix = "loss" if kind == "policy_loss" else "advantages"
        trainer.config.algorithm.__dict__[kind] = f"{FNS}:{prefix}_{misbehaviour}"


@pytest.mark.parametrize("kind, misbehaviour", TABLE)
def test_every_user_function_misbehaving_ends_the_run_in_one_line_with_the_finished_step_saved(
        tmp_path, kind, misbehaviour):
    if kind == "environment":  # (step 1 must finish: a well-behaved environment first)
        contract_fns.env_ok = type("Env_ok", (contract_fns._Env,), {"step": lambda self, text: __import__(
            "rlvr.envs", fromlist=["Reply"]).Reply(None, done=True, reward=0.5)})
    trainer = trainer_for(tmp_path, kind)
    if kind == "environment":
        trainer.source.sampler.make_env = contract_fns.env_ok

    def misbehave_from_now(step, metrics, stop):
        if step == 1:
            swap_in(trainer, kind, misbehaviour)
    start = time.monotonic()
    with pytest.raises(UserError) as e:
        run_training(trainer, on_step_end=misbehave_from_now)
    assert time.monotonic() - start < 30
    assert "\n" not in str(e.value) and KINDS[kind] in str(e.value), str(e.value)
    assert paths.latest_checkpoint(tmp_path / "run").name == "step-000001"
