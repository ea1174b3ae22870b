"""The Bradley–Terry preference model, as pure tensor functions.

Bradley & Terry (1952): P(chosen ≻ rejected) = σ(r_c − r_r) for scalar scores r. A reward model
maximises the likelihood of the labelled preferences (Ouyang et al. 2022, InstructGPT, eq. 1):

    loss = −E[log σ(r_c − r_r)]
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def bradley_terry_loss(chosen_scores: torch.Tensor, rejected_scores: torch.Tensor) -> torch.Tensor:
    """chosen_scores [B], rejected_scores [B] -> [] the mean of −log σ(r_c − r_r).

    logsigmoid keeps it finite for large margins, where log(sigmoid(x)) would give log(0).

    >>> round(float(bradley_terry_loss(torch.tensor([0.0]), torch.tensor([0.0]))), 4)  # log 2
    0.6931
    >>> float(bradley_terry_loss(torch.tensor([-200.0]), torch.tensor([0.0])))
    200.0
    """
    return -F.logsigmoid(chosen_scores - rejected_scores).mean()


def pairwise_wins(chosen_scores: torch.Tensor, rejected_scores: torch.Tensor) -> torch.Tensor:
    """[B], [B] -> [B]: 1 where the chosen completion scores higher, 0.5 on a tie, 0 otherwise.

    >>> pairwise_wins(torch.tensor([2.0, 1.0, 0.0]), torch.tensor([1.0, 1.0, 3.0])).tolist()
    [1.0, 0.5, 0.0]
    """
    return (chosen_scores > rejected_scores).float() + 0.5 * (chosen_scores == rejected_scores).float()


def pairwise_accuracy(chosen_scores: torch.Tensor, rejected_scores: torch.Tensor) -> float:
    """[B], [B] -> the share of pairs ranked the labeller's way (ties count as half).

    >>> pairwise_accuracy(torch.tensor([2.0, 1.0, 0.0, 5.0]), torch.tensor([1.0, 1.0, 3.0, 4.0]))
    0.625
    """
    return float(pairwise_wins(chosen_scores, rejected_scores).mean())
