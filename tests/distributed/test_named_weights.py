"""Under FSDP2, the weights a sampler is given (Policy.named_weights) are gathered one tensor at a time, never
the whole model at once, and are the unsharded policy's, its LoRA adapters folded in."""

from pathlib import Path

import torch

from rlvr.config import LoraConfig
from rlvr.distributed.world import SINGLE
from rlvr.models import build_tiny_model
from rlvr.models.adapters import add_adapters

from .launching import launch, rank_env
from .named_weights_worker import lora_policy

HERE = Path(__file__).parent


def test_a_sharded_policy_hands_out_each_weight_whole_one_at_a_time(tmp_path):
    model, _ = build_tiny_model(0)
    model = add_adapters(model, LoraConfig(rank=4, target_modules=["q_proj", "v_proj"]), "tiny")
    with torch.no_grad():  # adapters as if trained: B A no longer zero
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=torch.Generator().manual_seed(len(name))) * 0.1)
    torch.save(model.state_dict(), tmp_path / "case.pt")
    code, stderr = launch(["--standalone", "--nproc_per_node", "2", str(HERE / "named_weights_worker.py"),
                           str(tmp_path / "case.pt"), str(tmp_path / "out.pt")], rank_env(), timeout=120)
    assert code == 0, stderr[-4000:]
    out = torch.load(tmp_path / "out.pt", weights_only=False)
    assert out["sharded_throughout"] and all(out["sharded_throughout"])
    expected = dict(lora_policy(model.state_dict(), SINGLE, "ddp").named_weights())
    assert out["weights"].keys() == expected.keys() and not any("lora" in name for name in expected)
    for name, tensor in expected.items():
        assert torch.allclose(out["weights"][name], tensor, atol=1e-6, rtol=0), name
    folded = "model.layers.0.self_attn.q_proj.weight"
    base = model.get_base_model().state_dict()[folded.replace(".weight", ".base_layer.weight")]
    assert not torch.allclose(expected[folded], base, atol=1e-3)  # (the adapters were folded in)
