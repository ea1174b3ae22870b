"""rlvr.trl.GRPOTrainer's own arguments: what it takes, and what it refuses in one line."""

import pytest
from datasets import Dataset

from rlvr.errors import UserError
from rlvr.trl import GRPOConfig, GRPOTrainer

ROWS = Dataset.from_list([{"prompt": f"Say {i}"} for i in range(8)])


def reward(completions, **kwargs):
    return [0.0] * len(completions)


def trainer(tmp_path, **kwargs):
    args = kwargs.pop("args", GRPOConfig(output_dir=str(tmp_path / "run"), max_steps=1, num_generations=4,
                                         max_completion_length=8))
    return GRPOTrainer(**{"model": "tiny", "reward_funcs": reward, "args": args, "train_dataset": ROWS, **kwargs})


@pytest.mark.parametrize("kwargs, named", [
    ({"tools": [print]}, "tools"), ({"optimizers": (object(), None)}, "optimizers"),
    ({"reward_funcs": "OpenAssistant/reward-model-deberta-v3-large-v2"}, "reward model"),
    ({"eval_dataset": {"a": ROWS, "b": ROWS}}, "dict of datasets"),
])
def test_what_rlvr_does_not_run_is_one_line(tmp_path, kwargs, named):
    with pytest.raises(UserError) as e:
        trainer(tmp_path, **kwargs)
    assert "\n" not in str(e.value) and named in str(e.value)


def test_reward_weights_must_match_the_reward_functions(tmp_path):
    args = GRPOConfig(output_dir=str(tmp_path / "run"), max_steps=1, reward_weights=[1.0, 2.0])
    with pytest.raises(UserError, match="reward_weights has 2 weights for 1 reward_funcs"):
        trainer(tmp_path, args=args)
    with pytest.raises(UserError, match="reward_weights='heavy' is not a list"):
        trainer(tmp_path, args=GRPOConfig(output_dir=str(tmp_path / "run"), max_steps=1, reward_weights="heavy"))


def test_peft_settings_rlvr_has_not_are_refused_and_a_trainer_callback_too(tmp_path):
    from peft import LoraConfig
    from transformers import TrainerCallback

    with pytest.raises(UserError, match="peft_config use_rslora=True is not supported"):
        trainer(tmp_path, peft_config=LoraConfig(r=4, use_rslora=True))
    with pytest.raises(UserError, match="TrainerCallback"):
        trainer(tmp_path, callbacks=[TrainerCallback()])


def test_an_unknown_argument_names_trls_nearest_one():
    with pytest.raises(UserError, match="GRPOConfig has no argument 'num_generation' .*did you mean 'num_generations'"):
        GRPOConfig(num_generation=4)


def test_arguments_set_after_construction_count_as_given(tmp_path):
    args = GRPOConfig(output_dir=str(tmp_path / "run"), max_steps=1, num_generations=4, max_completion_length=8)
    args.learning_rate = 3e-6
    assert trainer(tmp_path, args=args).config.optim.lr == 3e-6
