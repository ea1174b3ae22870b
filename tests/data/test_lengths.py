"""Prompts that do not fit the model's context: training skips them with a count, evaluation refuses them."""

import json

import pytest
import torch

from rlvr.config import EvalConfig, config_from_dict, load_config
from rlvr.data.lengths import prompt_limit, refuse_too_long, too_long
from rlvr.errors import UserError
from rlvr.evaluate.runner import run_eval
from rlvr.grpo.trainer import Trainer


class CharTokenizer:
    """One token per character; remembers the lengths it was asked to tokenize."""

    def __init__(self):
        self.seen = []

    def __call__(self, text, add_special_tokens=True):
        self.seen.append(len(text))
        return {"input_ids": [0] * (len(text) + (2 if add_special_tokens else 0))}


def test_only_texts_longer_than_the_limit_in_bytes_are_tokenized_and_a_huge_one_only_in_part():
    tok = CharTokenizer()
    texts = ["short", "x" * 11, "y" * 10_000_000]
    assert too_long(texts, tok, 10, add_special_tokens=False) == {1: 11, 2: 16 * 11}
    assert tok.seen == [11, 16 * 11]  # the 10 MB prompt is measured by a prefix already over the limit
    assert too_long(["x" * 9], tok, 10, add_special_tokens=True) == {0: 11}  # BOS and EOS count
    assert too_long(texts, tok, None, add_special_tokens=False) == {}


def test_the_limit_is_the_context_less_the_completion_budget_unless_set():
    model = torch.nn.Linear(1, 1)
    assert prompt_limit(model, 12) is None  # no stated context
    model.config = type("Config", (), {"max_position_embeddings": 1024})()
    assert prompt_limit(model, 12) == 1012 and prompt_limit(model, 12, configured=50) == 50


def test_refusal_names_the_first_row_and_counts_the_rest():
    with pytest.raises(UserError) as e:
        refuse_too_long(["ok", "x" * 30, "y" * 40], ["row 1", "row 2", "row 3"], CharTokenizer(), 20, False)
    message = str(e.value)
    assert message.startswith("the prompt of row 2 has 30+ tokens, over the limit of 20") and "1 more" in message


def _rows(path, prompts):
    path.write_text("".join(json.dumps({"prompt": p, "answer": "5"}) + "\n" for p in prompts))
    return str(path)


TINY = ["model.name=tiny", "data.train_size=8", "data.eval_size=2", "sampling.group_size=2", "sampling.batch_size=4",
        "generation.max_new_tokens=8", "eval_before=false", "eval_after=false", "sample_every=0"]


def test_training_skips_a_prompt_past_the_context_with_a_count_and_runs(tmp_path, capsys):
    prompts = [f"What is {i} + 1?" for i in range(7)]
    prompts.insert(3, "What is 2 + 3? " * 700_000)  # ~10 MB, far past the tiny model's 1024 positions
    data = _rows(tmp_path / "d.jsonl", prompts)
    trainer = Trainer(load_config(None, [*TINY, f"data.train={data}", f"data.eval={data}", "data.eval_size=1",
                                         f"output_dir={tmp_path / 'run'}"], max_steps=1))
    err = capsys.readouterr().err
    assert f"skipped 1 of 8 training prompts longer than 1016 tokens (the first is row 4 of {data}" in err
    assert [p.example.index for p in trainer.parts.train] == [0, 1, 2, 4, 5, 6, 7]
    assert trainer.step().metrics["reward/mean"] is not None


def test_training_refuses_when_no_prompt_fits_and_held_out_prompts_are_never_skipped(tmp_path):
    data = _rows(tmp_path / "d.jsonl", [f"What is {i} + 1?" for i in range(8)])
    with pytest.raises(UserError, match=r"all 8 of 8 training prompts longer than 3 tokens \(the first is row 1"):
        Trainer(load_config(None, [*TINY, f"data.train={data}", "data.max_prompt_tokens=3",
                                   f"output_dir={tmp_path / 'a'}"], max_steps=1))
    held_out = _rows(tmp_path / "h.jsonl", ["What is 1 + 1?", "What is 2 + 3? " * 200])
    with pytest.raises(UserError, match=rf"the prompt of held-out row 2 of {held_out} has \d+\+ tokens, over the "
                                        r"limit of 1016 \(the model's context of 1024 tokens less the completion "
                                        r"budget of 8 new tokens\): .* lower eval_max_new_tokens"):
        Trainer(load_config(None, [*TINY, f"data.train={data}", f"data.eval={held_out}",
                                   f"output_dir={tmp_path / 'b'}"], max_steps=1))
    with pytest.raises(UserError, match=r"over the limit of 100 \(data.max_prompt_tokens=100\): .* raise "
                                        r"data.max_prompt_tokens"):
        Trainer(load_config(None, [*TINY, f"data.train={data}", f"data.eval={held_out}", "data.max_prompt_tokens=100",
                                   f"output_dir={tmp_path / 'c'}"], max_steps=1))


def test_evaluation_refuses_a_problem_past_the_context_before_sampling(tmp_path):
    data = _rows(tmp_path / "e.jsonl", ["What is 1 + 1?", "What is 2 + 3? " * 200])
    config = config_from_dict(EvalConfig, dict(model="tiny", data=data, samples=1, max_new_tokens=8, batch_size=2,
                                               output_dir=str(tmp_path / "e"), threads=1))
    with pytest.raises(UserError, match=r"the prompt of problem e/1 has \d+\+ tokens, over the limit of 1016"):
        run_eval(config, progress=False)
    assert not (tmp_path / "e" / "samples.jsonl").exists()
