"""Scorers against direct forwards: outcome scores, normalisation, and the process reward's product."""

import math
from pathlib import Path

import pytest
import torch

from rlvr import paths
from rlvr.rewards.reward_model import ProcessRewardScorer, RewardModelScorer, split_steps, step_prefixes


@pytest.fixture(scope="module")
def scorer(trained):
    config, _ = trained
    return RewardModelScorer.from_path(Path(config.output_dir), batch_size=3, device="cpu")


def direct_score(scorer, prompt, completion):
    """One unpadded conversation through the model, as written out by hand."""
    tokenizer = scorer.tokenizer
    messages = [{"role": "user", "content": prompt}, {"role": "assistant", "content": completion}]
    text = tokenizer.apply_chat_template(messages, tokenize=False)
    ids = torch.tensor([tokenizer(text, add_special_tokens=False)["input_ids"]])
    with torch.no_grad():
        return scorer.model(input_ids=ids).logits[0, 0].item()


PROMPTS = ["say abc", "say abc", "say jji", "say d", "say efg"]
COMPLETIONS = ["hello!", "hello", [{"role": "assistant", "content": "bag!"}], "", "x\n\ny!\n\nz"]


def test_from_path_takes_run_checkpoint_or_model_folder(trained, scorer):
    config, _ = trained
    latest = paths.latest_checkpoint(Path(config.output_dir))
    assert latest.name == "step-000015"
    for path in (latest, latest / "model"):
        assert (RewardModelScorer.from_path(path, device="cpu").score(PROMPTS[:2], COMPLETIONS[:2])
                == scorer.score(PROMPTS[:2], COMPLETIONS[:2]))
    assert not scorer.model.training and not any(p.requires_grad for p in scorer.model.parameters())


def test_scores_equal_a_direct_forward(scorer):
    scores = scorer.score(PROMPTS, COMPLETIONS)  # batches of 3: two forwards, padded differently
    texts = ["hello!", "hello", "bag!", "", "x\n\ny!\n\nz"]
    assert scores == pytest.approx([direct_score(scorer, p, c) for p, c in zip(PROMPTS, texts)], abs=1e-5)
    assert scores[0] > scores[1]  # the trained preference: the marker scores higher


def test_normalised_uses_the_saved_statistics(scorer):
    raw, normalised = scorer.score(PROMPTS, COMPLETIONS), scorer.normalised(PROMPTS, COMPLETIONS)
    mean, std = scorer.stats.mean, scorer.stats.std
    assert normalised == pytest.approx([(r - mean) / (std + 1e-6) for r in raw])


def test_split_steps_and_prefixes():
    assert split_steps("a\n\nb\n\n\n\nc\n\n") == ["a", "b", "c"]
    assert split_steps("a\nb", "\n") == ["a", "b"]
    assert step_prefixes("a\n\n\n\nb") == ["a", "a\n\nb"]  # prefixes are the steps joined by the separator
    with pytest.raises(ValueError):
        split_steps("a", "")


def test_process_reward_is_the_product_of_per_step_sigmoids(scorer):
    prm = ProcessRewardScorer(scorer, step_separator="\n\n")
    prompts, completions = ["say abc", "say d"], ["ab\n\ncd!\n\nef", "one step!"]
    probabilities = prm.step_probabilities(prompts, completions)
    by_hand = [
        [1 / (1 + math.exp(-direct_score(scorer, "say abc", prefix)))
         for prefix in ("ab", "ab\n\ncd!", "ab\n\ncd!\n\nef")],
        [1 / (1 + math.exp(-direct_score(scorer, "say d", "one step!")))],
    ]
    assert (probabilities[0] == pytest.approx(by_hand[0], abs=1e-6)
            and probabilities[1] == pytest.approx(by_hand[1], abs=1e-6))
    assert prm.score(prompts, completions) == pytest.approx([math.prod(by_hand[0]), by_hand[1][0]], abs=1e-6)
    assert all(0 < p < 1 for ps in probabilities for p in ps)


def test_process_reward_scores_an_empty_completion_as_one_empty_step(scorer):
    prm = ProcessRewardScorer(scorer)
    probabilities = prm.step_probabilities(["say d"], ["  "])
    assert probabilities == [[pytest.approx(1 / (1 + math.exp(-direct_score(scorer, "say d", ""))), abs=1e-6)]]


def test_process_scorer_from_a_path(trained):
    config, _ = trained
    prm = ProcessRewardScorer(config.output_dir, step_separator="\n", device="cpu")
    assert prm.step_separator == "\n" and len(prm.step_probabilities(["say a"], ["b\nc!"])[0]) == 2
