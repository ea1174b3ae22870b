"""Presets: named sets of independent settings of a GRPO run (`preset: dr_grpo`), applied after the
defaults and before the YAML file (rlvr.config.loading)."""

from __future__ import annotations

from typing import Any

# Presets are sets of independent settings, never branches in the loss.
PRESETS: dict[str, dict[str, Any]] = {
    # DeepSeekMath's GRPO (Shao et al. 2024, Eq. 3 with outcome supervision, §4.1.2): group-normalised
    # advantages with the population std, the per-sequence 1/|o_i| mean, β = 0.04 with k3, ε = 0.2.
    "deepseekmath": {
        "algorithm": {
            "advantage_baseline": "group_mean",
            "advantage_scale": "group_std",
            "std_estimator": "population",
            "loss_aggregation": "sequence_mean",
            "beta": 0.04,
            "kl_estimator": "k3",
            "clip_low": 0.2,
            "clip_high": 0.2,
        }
    },
    # Liu et al. 2025 "Understanding R1-Zero-Like Training": no std division, constant
    # normaliser (length-unbiased), no KL term.
    "dr_grpo": {
        "algorithm": {"advantage_scale": "none", "loss_aggregation": "constant", "beta": 0.0},
    },
    # Yu et al. 2025 DAPO: clip-higher, token-level mean, no KL, overlong completions masked.
    "dapo": {
        "algorithm": {
            "clip_low": 0.2,
            "clip_high": 0.28,
            "loss_aggregation": "token_mean",
            "beta": 0.0,
            "mask_truncated": True,
        },
    },
    # Zheng et al. 2025 GSPO: the sequence-level ratio, clipped per sequence in the paper's narrow range,
    # averaged per sequence, no KL.
    "gspo": {
        "algorithm": {"policy_loss": "gspo", "clip_low": 3e-4, "clip_high": 4e-4, "loss_aggregation": "sequence_mean",
                      "beta": 0.0},
    },
    # MiniMax-M1 2025 CISPO: the importance weight bounded above only (clip_low 1: no lower bound), every
    # token's gradient kept, token-level mean, no KL. The upper bound is ours to tune (the paper gives none).
    "cispo": {
        "algorithm": {"policy_loss": "cispo", "clip_low": 1.0, "clip_high": 4.0, "loss_aggregation": "token_mean",
                      "beta": 0.0},
    },
    # Gao et al. 2025 SAPO: the soft gate with the paper's temperatures, token-level mean, no KL.
    "sapo": {
        "algorithm": {"policy_loss": "sapo", "sapo_tau_pos": 1.0, "sapo_tau_neg": 1.05,
                      "loss_aggregation": "token_mean", "beta": 0.0},
    },
    # Hu et al. 2025 REINFORCE++ (with a baseline): the group mean removed, then normalised over the batch.
    "reinforce_pp": {
        "algorithm": {"advantage_baseline": "group_mean", "advantage_scale": "batch_norm",
                      "loss_aggregation": "token_mean"},
    },
}
PRESET_ALIASES = {"seed": "deepseekmath"}  # the name of earlier versions
