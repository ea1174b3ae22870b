"""Users' own objectives named in test configs (algorithm.policy_loss / algorithm.advantage_fn)."""

import torch


def reinforce(logprobs, old_logprobs, advantages, mask):
    """Plain REINFORCE: −Â log π_θ per token."""
    return -advantages * logprobs


def ranked(rewards, components):
    """Each completion's rank in its group, centred (unscored: 0)."""
    scored = torch.nan_to_num(rewards, nan=0.0)
    ranks = scored.argsort(dim=-1).argsort(dim=-1).to(rewards.dtype)
    return torch.where(rewards.isnan(), 0.0, ranks - ranks.mean(dim=-1, keepdim=True))


def detached(logprobs, old_logprobs, advantages, mask):
    return (-advantages * logprobs).detach()


def wrong_shape(rewards, components):
    return rewards.flatten()


def one_column(rewards, components):
    return rewards[:, :1]  # (a shape that sorts before the rewards', as a tuple)


def raises(rewards, components):
    raise KeyError("no such reward")


def huge(rewards, components):
    """Finite, but far beyond any gradient's range."""
    return torch.where(rewards.isnan(), 0.0, 1e30 * (torch.arange(rewards.shape[-1]) % 2 * 2 - 1).float())


def edits_in_place(logprobs, old_logprobs, advantages, mask):
    """REINFORCE that scribbles on what it was given."""
    loss = -advantages * logprobs
    logprobs.mul_(2)
    mask.fill_(False)
    advantages.zero_()
    return loss


def meta(logprobs, old_logprobs, advantages, mask):
    return torch.empty(logprobs.shape, device="meta", requires_grad=True)


def exits(*args):
    raise SystemExit(4)


def interrupts(*args):
    raise KeyboardInterrupt


def hangs(*args):
    import time

    time.sleep(3600)
