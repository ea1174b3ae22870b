"""TRL's trainer_state, log_metric and log_extra, as compute_rewards hands them to a reward (a training run's
use of them: tests/train/test_trl_rewards.py)."""

import pytest

from rlvr.errors import UserError
from rlvr.rewards import RewardSpec, compute_rewards
from rlvr.rewards.routing import only_where
from rlvr.rewards.trainer_hooks import StepState

STATE = StepState(global_step=6, max_steps=20, epoch=0.75)


def score(*fns, state=STATE, kind=("a", "b", "a")):
    return compute_rewards([RewardSpec(f"r{i}", fn) for i, fn in enumerate(fns)], prompts=["p"] * 3,
                           completions=["x", "yy", "zzz"], completion_ids=[[1]] * 3,
                           columns={"kind": list(kind)}, state=state)


def test_only_a_reward_naming_a_hook_gets_it():
    got = {}

    def names_them(completions, trainer_state, log_metric, log_extra, **kwargs):
        got.update(state=trainer_state, others=set(kwargs))
        return [1.0] * len(completions)

    def reads_kwargs(completions, **kwargs):
        got["kwargs"] = set(kwargs)
        return [1.0] * len(completions)

    score(names_them, reads_kwargs)
    state = got["state"]
    assert (state.global_step, state.max_steps, state.epoch, state.is_world_process_zero) == (6, 20, 0.75, True)
    assert got["others"] == got["kwargs"] == {"prompts", "completion_ids", "kind"}


def test_outside_training_the_state_is_transformers_empty_one():
    seen = []
    score(lambda completions, trainer_state, **kw: seen.append(trainer_state) or [0.0] * 3, state=None)
    assert seen[0].global_step == 0 and seen[0].max_steps == 0


def test_metrics_keep_every_call_and_columns_one_value_per_completion():
    def logs(completions, log_metric, log_extra, **kwargs):
        log_metric("length", sum(map(len, completions)))
        log_metric("length", 1)
        log_extra("chars", [len(c) for c in completions])
        return [0.0] * len(completions)

    result = score(logs)
    assert result.logged == {"length": [6.0, 1.0]} and result.extra == {"chars": [1, 2, 3]}


def test_a_routed_rewards_column_is_put_back_at_its_rows():
    def logs(completions, log_extra, **kwargs):
        log_extra("why", [f"saw {c}" for c in completions])
        return [1.0] * len(completions)

    result = score(only_where(logs, {"kind": "a"}))
    assert result.extra == {"why": ["saw x", None, "saw zzz"]}


EXTRA = r"called log_extra\('why', \.\.\.\)"


@pytest.mark.parametrize(("call", "said"), [
    (lambda metric, extra: metric("nan", float("nan")),
     r"called log_metric\('nan', nan\): it takes a metric's name and a finite number"),
    (lambda metric, extra: metric(3, 1.0), r"called log_metric\(3, 1.0\)"),
    (lambda metric, extra: extra("why", ["a"]), EXTRA + " with 1 values for 3 completions: log one value per"),
    (lambda metric, extra: extra("why", [object()] * 3), EXTRA + ": its values must be JSON"),
    (lambda metric, extra: [extra("why", [1] * 3) for _ in range(2)], EXTRA + ": the column was already logged"),
])
def test_a_hook_called_wrongly_is_one_line_naming_the_reward(call, said):
    def reward(completions, log_metric, log_extra, **kwargs):
        call(log_metric, log_extra)
        return [0.0] * len(completions)

    with pytest.raises(UserError, match=f"^reward 'r0' {said}"):
        score(reward)
