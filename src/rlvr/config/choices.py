"""The names a setting can take, defined once: config fields are typed with them and the functions
that act on them (rlvr.advantages, rlvr.kl, rlvr.losses, rlvr.rewards) accept exactly them.

Kept free of heavy imports, so `rlvr --help` and the light commands start without torch.
"""

from __future__ import annotations

from typing import Literal, get_args

Baseline = Literal["group_mean", "leave_one_out"]
Scale = Literal["group_std", "batch_std", "batch_norm", "none"]
StdEstimator = Literal["population", "unbiased"]
KLEstimator = Literal["k1", "k2", "k3", "k3+"]
Aggregation = Literal["sequence_mean", "token_mean", "constant"]
PolicyLoss = Literal["clip", "gspo", "cispo", "sapo"]  # or a user's `file.py:function` (rlvr.rl.objective)
RewardAggregation = Literal["sum", "normalize_then_sum"]  # how several rewards make one advantage (GDPO)
TurnAdvantages = Literal["return", "per_turn"]  # how rewards of single turns are credited (rlvr.rl.turns)
CorrectionLevel = Literal["none", "token", "sequence"]  # rollout correction (rlvr.correction)
CorrectionMode = Literal["truncate", "mask"]
Backend = Literal["local", "vllm"]  # what samples the completions (rlvr.samplers)
VLLMMode = Literal["colocated", "server"]
# How a verifier reads a completion's final answer: strict = only in the requested format (a \boxed{}
# or <answer>), lenient = anywhere it can be found (rlvr.rewards.extraction).
ExtractionMode = Literal["strict", "lenient"]
# The layouts a format reward checks (rlvr.rewards.format): one \boxed{} answer, R1-Zero's tags, the tags in order.
FormatName = Literal["boxed", "think_answer", "soft_think_answer"]
# What a control run trains on instead of the verifiers' rewards (rlvr.rewards.control).
Control = Literal["none", "random", "format"]
# What preflight does with the signs in step 1's batch that a run cannot learn (rlvr.rl.preflight).
Preflight = Literal["warn", "strict", "off"]

BASELINES: tuple[Baseline, ...] = get_args(Baseline)
SCALES: tuple[Scale, ...] = get_args(Scale)
STD_ESTIMATORS: tuple[StdEstimator, ...] = get_args(StdEstimator)
KL_ESTIMATORS: tuple[KLEstimator, ...] = get_args(KLEstimator)
AGGREGATIONS: tuple[Aggregation, ...] = get_args(Aggregation)
POLICY_LOSSES: tuple[PolicyLoss, ...] = get_args(PolicyLoss)
REWARD_AGGREGATIONS: tuple[RewardAggregation, ...] = get_args(RewardAggregation)
CORRECTION_LEVELS: tuple[CorrectionLevel, ...] = get_args(CorrectionLevel)
CORRECTION_MODES: tuple[CorrectionMode, ...] = get_args(CorrectionMode)
BACKENDS: tuple[Backend, ...] = get_args(Backend)
VLLM_MODES: tuple[VLLMMode, ...] = get_args(VLLMMode)
MODES: tuple[ExtractionMode, ...] = get_args(ExtractionMode)
FORMAT_NAMES: tuple[FormatName, ...] = get_args(FormatName)
CONTROLS: tuple[Control, ...] = get_args(Control)
