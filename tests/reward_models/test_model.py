"""The reward model's input: one conversation per row, right-padded, scored at its last real token."""

import pytest
import torch

from rlvr.models.reward_model import build_tiny_reward_model, conversation_text, encode, load_reward_model, score_texts


@pytest.fixture(scope="module")
def tiny_rm():
    model, tokenizer = build_tiny_reward_model(seed=0)
    return model.eval(), tokenizer


def direct_score(model, tokenizer, text):
    """One unpadded sequence straight through the model: the slow obvious reference."""
    ids = torch.tensor([tokenizer(text, add_special_tokens=False)["input_ids"]])
    with torch.no_grad():
        return model(input_ids=ids).logits[0, 0].item()


def test_tiny_reward_model_shares_the_tiny_policy_backbone():
    from rlvr.models import build_tiny_model

    model, tokenizer = load_reward_model("tiny", seed=3)
    policy, _ = build_tiny_model(seed=3)
    assert model.config.num_labels == 1 and model.config.pad_token_id == tokenizer.pad_token_id
    assert torch.equal(model.model.embed_tokens.weight, policy.model.embed_tokens.weight)
    again, _ = load_reward_model("tiny", seed=3)
    assert torch.equal(model.score.weight, again.score.weight)  # the new head is seeded


def test_chat_prompts_and_plain_tokenizers(tiny_rm):
    _, tokenizer = tiny_rm
    chat = [{"role": "system", "content": "S"}, {"role": "user", "content": "Q"}]
    assert conversation_text(tokenizer, chat, "A") == (
        "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\nA<|im_end|>\n"
    )

    class Plain:  # a base model's tokenizer: no chat template
        chat_template = None

    assert conversation_text(Plain(), "Q: 2+2?\nA:", " 4") == "Q: 2+2?\nA: 4"
    assert conversation_text(Plain(), chat, " A") == "S\n\nQ A"


def test_encode_right_pads_and_keeps_the_end_of_long_conversations(tiny_rm):
    _, tokenizer = tiny_rm
    ids, mask = encode(tokenizer, ["a", "a"], ["x", "xyz"], max_length=1000)
    assert mask.sum(1).tolist() == [mask.shape[1] - 2, mask.shape[1]]
    assert ids[0, -2:].tolist() == [tokenizer.pad_token_id] * 2
    cut, cut_mask = encode(tokenizer, ["a"], ["x" * 50 + "END"], max_length=8)
    assert cut.shape == (1, 8) and bool(cut_mask.all())
    assert tokenizer.decode(cut[0]) == "xxxEND<|im_end|>\n"


def test_batched_scores_equal_one_sequence_at_a_time(tiny_rm):
    model, tokenizer = tiny_rm
    prompts = ["say abc", [{"role": "user", "content": "say d"}], "say efghij"]
    completions = ["a", "bbbbbbbbbbbb!", ""]
    batched = score_texts(model, tokenizer, prompts, completions, max_length=512, batch_size=2)
    direct = [direct_score(model, tokenizer, conversation_text(tokenizer, p, c)) for p, c in zip(prompts, completions)]
    assert batched == pytest.approx(direct, abs=1e-5)
    assert len(set(round(s, 4) for s in direct)) == 3  # the inputs really differ
