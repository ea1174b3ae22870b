"""rlvr.trl.GRPOTrainer's own arguments: what it takes, and what it refuses in one line."""

import pytest
import torch
from datasets import Dataset
from safetensors.torch import load_file

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
    ({"tools": "search"}, "tools='search': give a list of functions"), ({"optimizers": (object(), None)}, "optimizers"),
    ({"reward_funcs": "OpenAssistant/reward-model-deberta-v3-large-v2"}, "reward model"),
    ({"eval_dataset": {"a": ROWS, "b": ROWS}}, "dict of datasets"),
    ({"reward_funcs": [reward, torch.nn.Linear(2, 1)]}, "reward_funcs holds a model (Linear)"),
    ({"args": GRPOConfig(per_device_train_batch_size=8, num_generations=3)}, "not divisible by num_generations=3"),
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


def test_every_row_of_the_datasets_is_used_as_trl_uses_them(tmp_path):
    """data.train_size's 2,000 cut a longer dataset without a word, while TRL's epochs were counted over all of it."""
    many = Dataset.from_list([{"prompt": f"Say {i}"} for i in range(2500)])
    t = GRPOTrainer(model="tiny", reward_funcs=reward, train_dataset=many, eval_dataset=ROWS.select(range(3)),
                    args=GRPOConfig(output_dir=str(tmp_path / "run"), num_generations=4, max_completion_length=8))
    assert (t.config.data.train_size, t.config.data.eval_size) == (2500, 3)


def test_tools_are_the_function_tools_environment_and_max_tool_calling_iterations_its_turns(tmp_path, capsys):
    from ..envs.tools import add

    args = GRPOConfig(output_dir=str(tmp_path / "run"), max_steps=1, num_generations=4, max_completion_length=8,
                      max_tool_calling_iterations=2)
    t = trainer(tmp_path, tools=[add], args=args)
    env = t.config.environment
    assert (env.name, env.max_turns, env.params) == ("tools", 3, {"tools": ["tests/envs/tools.py:add"]})  # (named)
    t.train()
    assert "env/turns" in t.state.log_history[0]
    trainer(tmp_path / "b", args=GRPOConfig(output_dir=str(tmp_path / "b"), max_tool_calling_iterations=2))
    assert "max_tool_calling_iterations=2: no effect without tools (nor in TRL)" in capsys.readouterr().err


def test_after_train_the_trainer_has_trls_model_processing_class_and_state_and_a_second_train_is_refused(tmp_path):
    """As TRL's: the model object given holds the trained weights (the run's latest checkpoint), state.global_step
    and log_history are the run's. A second train() would start over the run: refused, the run kept. evaluate()
    without an eval_dataset is refused (TRL's is), not run on the training rows."""
    from rlvr import paths
    from rlvr.models import build_tiny_model

    def odd_sum(completions, **kwargs):  # (rewards that differ within a group: the weights move)
        return [float(sum(map(ord, c)) % 2) for c in completions]

    model, tokenizer = build_tiny_model(seed=0)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    args = GRPOConfig(output_dir=str(tmp_path / "run"), max_steps=1, num_generations=4, max_completion_length=8,
                      learning_rate=1e-2)
    t = trainer(tmp_path, model=model, processing_class=tokenizer, reward_funcs=odd_sum, args=args)
    with pytest.raises(UserError, match="no state before train"):
        _ = t.state
    t.train()
    latest = paths.latest_checkpoint(tmp_path / "run")
    saved = load_file(latest / paths.MODEL / "model.safetensors")
    assert t.model is model and t.processing_class is tokenizer
    assert any(not torch.equal(v, before[k]) for k, v in model.state_dict().items())
    assert all(torch.equal(model.state_dict()[k], v) for k, v in saved.items())
    assert t.state.global_step == 1 and [row["step"] for row in t.state.log_history] == [1]
    with pytest.raises(UserError, match="has trained already, into .*resume_from_checkpoint=True"):
        t.train()
    assert paths.latest_checkpoint(tmp_path / "run") == latest and load_file(
        latest / paths.MODEL / "model.safetensors").keys() == saved.keys()
    with pytest.raises(UserError, match="evaluate\\(\\) has no held-out rows: .*eval_data was not given"):
        t.evaluate()


def test_save_or_evaluate_before_train_says_so(tmp_path):
    t = trainer(tmp_path)
    with pytest.raises(UserError, match="^nothing trained yet: .* holds no checkpoint \\(call train\\(\\) first\\)$"):
        t.save_model(str(tmp_path / "out"))
    with pytest.raises(UserError, match="^nothing trained yet"):
        t.evaluate()


def test_a_train_that_failed_before_its_first_checkpoint_may_be_run_again(tmp_path):
    def broken(completions, **kwargs):
        raise ValueError("not yet written")

    t = trainer(tmp_path, reward_funcs=broken)
    for _ in range(2):  # (the second time the same error, not "has trained already")
        with pytest.raises(UserError, match="reward function .*broken.* raised ValueError: not yet written"):
            t.train()


def test_weights_that_do_not_fit_the_model_object_given_leave_it_and_say_so(tmp_path, capsys, monkeypatch):
    from rlvr.models import build_tiny_model

    model, tokenizer = build_tiny_model(seed=0)
    t = trainer(tmp_path, model=model, processing_class=tokenizer)

    def other_keys(state_dict, *args, **kwargs):
        raise RuntimeError("Error(s) in loading state_dict for LlamaForCausalLM: Missing key(s)")

    monkeypatch.setattr(model, "load_state_dict", other_keys)
    t.train()
    assert "the trained weights do not fit the model object given (Error(s) in loading state_dict" in (
        capsys.readouterr().err)
    assert t.model is not model and t.model.config.vocab_size == model.config.vocab_size
