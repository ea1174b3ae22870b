"""The optimizer: fused AdamW where the kernel exists, the same update as the reference implementation."""

import torch

from rlvr.config import OptimConfig
from rlvr.models import build_tiny_model
from rlvr.optim import build_optimizer


def test_fused_adamw_takes_the_same_step_as_the_plain_one():
    model, _ = build_tiny_model(seed=0)
    reference = build_tiny_model(seed=0)[0]
    optimizer, _ = build_optimizer(model, OptimConfig(lr=1e-3, weight_decay=0.1), total_steps=10)
    assert optimizer.defaults["fused"]
    plain = torch.optim.AdamW(reference.parameters(), lr=1e-3, betas=OptimConfig().betas, weight_decay=0.1,
                              foreach=False)
    for step in range(3):
        for p, q in zip(model.parameters(), reference.parameters()):
            p.grad = torch.randn(p.shape, generator=torch.Generator().manual_seed(step)) * 0.01
            q.grad = p.grad.clone()
        optimizer.step()
        plain.step()
    for p, q in zip(model.parameters(), reference.parameters()):
        assert torch.allclose(p, q, atol=1e-6)
