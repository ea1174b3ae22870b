"""rlvr.run.policy.Policy: the weights it hands a sampler, and the views it keeps apart."""

import torch

from rlvr.grpo.trainer import Trainer
from rlvr.models import build_tiny_model

from .test_lora import lora_trainer
from .test_step import DIGITS, tiny_config


def test_named_weights_of_a_plain_policy_are_its_state_dict(tmp_path):
    trainer = Trainer(tiny_config(tmp_path, DIGITS))
    state = trainer.policy.model.state_dict()
    weights = dict(trainer.policy.named_weights())
    assert weights.keys() == state.keys() and all(torch.equal(weights[k], state[k]) for k in state)


def test_named_weights_of_a_lora_policy_are_a_plain_model_with_the_adapters_folded_in(tmp_path):
    """A sampler holding a plain copy of the model loads them and computes what the adapted policy does."""
    trainer = lora_trainer(tmp_path)
    trainer.step()  # the adapters are no longer zero
    weights = dict(trainer.policy.named_weights())
    plain, _ = build_tiny_model(0)
    assert weights.keys() == plain.state_dict().keys()
    plain.load_state_dict(weights)
    ids = torch.randint(0, 50, (2, 9), generator=torch.Generator().manual_seed(0))
    adapted = trainer.policy.model.eval()
    with torch.no_grad():
        assert torch.allclose(plain.eval()(input_ids=ids).logits, adapted(input_ids=ids).logits, atol=1e-5)
        with adapted.disable_adapter():  # and the base weights were given back untouched
            base = adapted(input_ids=ids).logits
    assert not torch.allclose(base, plain(input_ids=ids).logits, atol=1e-4)
