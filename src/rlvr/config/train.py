"""The configuration of a GRPO run (`rlvr train`): what can be set, with a docstring under each field.

A run's effective configuration is built in this order, later entries winning, and written to `config.yaml` in
the run directory (rlvr.config.loading):  dataclass defaults ─▶ preset ─▶ YAML file ─▶ --set KEY=VALUE
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, ClassVar

from rlvr.config.choices import (
    POLICY_LOSSES,
    Aggregation,
    Baseline,
    Control,
    KLEstimator,
    Preflight,
    RewardAggregation,
    Scale,
    StdEstimator,
    TurnAdvantages,
)
from rlvr.config.run import RunSection
from rlvr.config.sections import (
    EnvironmentConfig,
    GenerationConfig,
    ModelConfig,
    OptimConfig,
    PPOConfig,
    RolloutCorrectionConfig,
    check,
    shards,
)
from rlvr.errors import UserError

# Counted by the reflection_rate metric (rlvr/evaluate/emergence.py): words of self-checking.
DEFAULT_REFLECTION_PHRASES = ("wait", "let me reconsider", "let me verify", "let me check", "actually", "hmm")


@dataclass
class FewShotTurn:
    prompt: str = ""
    """A user message shown before the real prompt."""
    completion: str = ""
    """The assistant's reply to it: the format the model should imitate."""


@dataclass
class DataConfig:
    train: str = "arithmetic"
    """A built-in task (`arithmetic`, `countdown`, `game24`, `sudoku`), a reasoning-gym task
    (`reasoning_gym:chain_sum`, its generator's settings after `?`: `reasoning_gym:chain_sum?max_terms=4`),
    a `.jsonl` / `.parquet` file, or `hf:owner/name`."""
    eval: str | None = None
    """Held-out prompts; default: the built-in task's disjoint test split, or none for files."""
    prompt_field: str = "prompt"
    """Column holding the prompt (text or chat messages); every other column reaches the rewards."""
    template: str = "chat"
    """`chat` (the tokenizer's chat template), `plain`, `r1_zero` (DeepSeek-R1's Table 1), or a string
    with `{prompt}`."""
    system_prompt: str | None = None
    """System message for the chat template (None keeps the template's own default)."""
    few_shot: list[FewShotTurn] | None = None
    """Example exchanges placed before every prompt; None = the built-in task's own, [] = none."""
    few_shot_share: float | None = None
    """Share of the training prompts shown with the example exchanges, spread evenly over the rows; the rest
    ask the question alone, so the answer format has to be learned rather than copied. Held-out prompts
    keep them (and are also evaluated without them). None: the built-in task's own share with its own
    examples (0.8 for `arithmetic`), else 1."""
    difficulty: int = 1
    """Difficulty level of a built-in task; of a reasoning-gym task, the level of its curriculum."""
    curriculum: bool = False
    """Sample prompts by difficulty as the current model's pass rate: prompts it half-solves first,
    so training moves to harder prompts as accuracy rises (rl/curriculum.py); false = shuffled epochs.
    A reasoning-gym task's training rows then span its levels 1..data.difficulty evenly."""
    train_size: int = 2000
    """How many prompts to generate (built-in tasks) or keep (files)."""
    eval_size: int = 100
    """How many held-out prompts to evaluate."""
    validation_size: int = 0
    """Held-out prompts after the evaluated ones (disjoint from them), evaluated alongside and logged as
    eval/validation/*: what `keep_best` chooses the best checkpoint by, so that the accuracy reported for it
    is not the one it was chosen on. 0 = none."""
    max_prompt_tokens: int | None = None
    """Training prompts (as rendered: template and few-shot turns included) longer than this are skipped,
    with a count; held-out ones are refused. None = the model's context length less
    generation.max_new_tokens."""

    def validate(self) -> None:
        check([(self.train_size >= 1 and self.eval_size >= 1, "data.train_size and data.eval_size must be >= 1"),
               (self.validation_size >= 0, "data.validation_size must be >= 0 (0 = no validation slice)"),
               (self.few_shot_share is None or 0 <= self.few_shot_share <= 1,
                f"data.few_shot_share={self.few_shot_share} must be in [0, 1]"),
               (self.max_prompt_tokens is None or self.max_prompt_tokens >= 1,
                "data.max_prompt_tokens must be >= 1 (or null for the model's context)")])


@dataclass
class RewardConfig:
    SHORTHAND: ClassVar[str] = "name"  # a reward given as a plain string is its name: `rewards: [boxed_format]`
    CALLABLES: ClassVar[tuple[str, ...]] = ("name",)  # from Python, the function itself (rlvr.user_code)

    name: str = "math_accuracy"
    """A built-in reward, `module:function`, `path/to/file.py:function` (TRL's convention), or a
    grader spec file (`.yaml` / `.json`, rlvr.rewards.graders)."""
    weight: float = 1.0
    """r = Σ weight · reward; e.g. r = r_acc + λ·r_format with λ the format reward's weight."""
    params: dict[str, Any] = field(default_factory=dict)
    """Keyword arguments bound to the function, e.g. {max_tokens: 64, cache_tokens: 16} for overlong_penalty."""
    when: dict[str, Any] | None = None
    """Score only rows whose columns have these values, e.g. {kind: reasoning}; other rows get None
    (R1 stage 4: rule rewards for reasoning prompts, a reward model for general ones). A list value
    matches any of its items."""
    timeout_s: float = 300.0
    """Time limit of one call of your own reward function (one call scores a group, or the batch with
    sampling.overlap_rewards: false); past it the run stops with an error naming the reward, after
    saving. 0 = no limit. Built-in rewards have their own limits (math_accuracy's timeout_s, the sandbox's)."""
    correctness: bool | None = None
    """Whether this reward says if the answer is right: the correctness reward, whose mean is logged as
    `accuracy`, which data.curriculum follows, and which judges the held-out answers of data without a
    verifier of its own. At most one is true. None = by the order of the list: the first built-in verifier
    listed (math_accuracy, countdown, code_tests, ...), else the first of your own functions listed (as
    open-r1 lists accuracy first); built-ins that check no answers (format, length) never are. The
    effective config records the choice."""
    correct_at: float = 1.0
    """As the correctness reward of data without a verifier of its own: the score from which a held-out
    answer counts as correct (greedy accuracy, pass@k)."""


@dataclass
class SamplingConfig:
    group_size: int = 8
    """G: completions sampled per prompt."""
    batch_size: int = 64
    """Completions per step (prompts per step = batch_size / group_size)."""
    overlap_rewards: bool = True
    """Score each group as soon as it finishes decoding (reward functions are then called once per
    group, on the main thread): on an accelerator while the other groups decode, on a CPU between two
    decoding steps (rlvr.rl.sampling says why); false = one call per batch after decoding, as TRL does."""
    dynamic_sampling: bool = False
    """DAPO's dynamic sampling: groups whose rewards are all equal (no gradient) are replaced by
    groups of fresh prompts until the batch is full (rl/dynamic.py)."""
    max_sampling_rounds: int = 3
    """Cap on sampling rounds per step with dynamic_sampling; past it the batch is topped up with
    zero-variance groups."""
    max_staleness: int | None = None
    """Sample ahead (rlvr.rl.ahead): a worker thread samples and scores batch t with the weights of step
    t − k while the trainer trains, half of `threads` each; the ratio's π_old is then the sampler's own
    log-prob of the version that sampled. null = sample each batch with the newest weights, in turn (the
    synchronous loop); 0 = the same, through the worker."""
    worker_timeout_s: float = 900.0
    """With max_staleness: how long the trainer waits for the worker's next batch before it stops the run (a
    stalled sampler; a reward or environment in the worker past its own timeout_s stops it within a second)."""

    def validate(self) -> None:
        g, b = self.group_size, self.batch_size
        check([
            (self.max_staleness is None or self.max_staleness >= 0,
             f"sampling.max_staleness={self.max_staleness} must be >= 0 (or null: no sampling ahead)"),
            (self.worker_timeout_s > 0, "sampling.worker_timeout_s must be > 0"),
            (g >= 2, f"sampling.group_size={g}: a group needs at least 2 completions to have a baseline"),
            (b % g == 0 if g > 0 else False,
             (f"sampling.batch_size={b} is not divisible by sampling.group_size={g}: "
             f"use a multiple such as {max(1, b // max(g, 1)) * max(g, 1)}")),
            (b > 0, "sampling.batch_size must be positive"),
            (self.max_sampling_rounds >= 1,
             "sampling.max_sampling_rounds must be >= 1 (1 = sample once, as without dynamic_sampling)"),
        ])


@dataclass
class AlgorithmConfig:
    CALLABLES: ClassVar[tuple[str, ...]] = ("policy_loss", "advantage_fn")  # from Python, the functions themselves
    advantage_baseline: Baseline = "group_mean"
    """What each reward is compared against: the group mean (GRPO) or the others' mean (RLOO)."""
    advantage_scale: Scale = "group_std"
    """Divide by the group's std (GRPO), the batch's std, or nothing (Dr. GRPO)."""
    std_estimator: StdEstimator = "population"
    """Population std (1/G, as DeepSeekMath's outcome supervision is usually read) or the unbiased 1/(G−1) estimator."""
    advantage_eps: float = 1e-4
    """ε in (r − μ)/(σ + ε)."""
    clip_low: float = 0.2
    """ε_low: the ratio is clipped below at 1 − clip_low."""
    clip_high: float = 0.2
    """ε_high: the ratio is clipped above at 1 + clip_high (DAPO raises it to 0.28)."""
    beta: float = 0.04
    """KL coefficient β; 0 skips the reference model entirely."""
    kl_estimator: KLEstimator = "k3"
    """Per-token KL estimator: k3 = DeepSeekMath's; k3+ = k3 weighted by π_θ/π_old, whose gradient is that
    of KL(π_θ‖π_ref) (k3's is that of KL(π_ref‖π_θ): docs/objectives.md)."""
    policy_loss: str = "clip"
    """The policy-gradient term: `clip` (PPO/GRPO), `gspo` (sequence-level ratio), `cispo` (clipped,
    stop-gradient weight), `sapo` (soft gate), or your own `file.py:function` / `module:function`
    (docs/objectives.md has the signature)."""
    sapo_tau_pos: float = 1.0
    """SAPO's gate temperature where the advantage is positive."""
    sapo_tau_neg: float = 1.05
    """SAPO's gate temperature where the advantage is negative (≥ tau_pos: negative updates fade faster)."""
    reward_aggregation: RewardAggregation = "sum"
    """Several rewards: `sum` = their weighted sum is the reward (GRPO); `normalize_then_sum` = each
    normalised within its group, the weighted sum of those normalised over the batch (GDPO)."""
    top_entropy_quantile: float = 1.0
    """ρ: the policy-gradient term only on the share ρ of the batch's tokens with the highest entropy under
    π_old (Wang et al. 2025, "80/20": 0.2); 1 = every token. The KL term keeps every token."""
    advantage_fn: str | None = None
    """Your own advantages, `file.py:function` / `module:function`, called with the rewards [P, G] and each
    reward's [P, G] (docs/objectives.md); None = the baseline and scale above."""
    timeout_s: float = 0.0
    """Time limit of each call of your own policy_loss or advantage_fn, in seconds (0 = none; Ctrl-C works
    either way): past it the run stops with one line naming the function, the finished steps saved."""
    loss_aggregation: Aggregation = "sequence_mean"
    """How per-token losses become one number (see rlvr.losses)."""
    loss_constant: float | None = None
    """Normaliser for `constant` aggregation; None = generation.max_new_tokens."""
    updates_per_batch: int = 1
    """μ: policy updates per sampled batch, reusing the stored old log-probabilities."""
    mask_truncated: bool = False
    """Drop completions that hit max_new_tokens from the loss (DAPO's overlong filtering)."""
    ref_refresh_steps: int = 0
    """Copy the policy into the reference model every K steps (0 = never)."""
    process_reward_model: str | None = None
    """Process supervision: a process reward model directory (`rlvr rm`) scores every step and the
    advantages become per-token returns of group-normalised step rewards (grpo/process.py);
    None = outcome supervision from the rewards."""
    step_separator: str = "\n\n"
    """What separates the steps of a completion under process supervision."""
    turn_advantages: TurnAdvantages = "return"
    """Multi-turn rollouts whose agent or environment rewards single turns (link.reward, a Reply's reward before
    the end): `return` = those rewards add to the trajectory's reward, one advantage for all its tokens;
    `per_turn` = process supervision over turns: each turn's tokens get the group-normalised rewards from that
    turn on (rlvr.rl.turns)."""
    rollout_correction: RolloutCorrectionConfig = field(default_factory=RolloutCorrectionConfig)
    """Correct for a sampler whose log-probs differ from the trainer's (off by default: rlvr's own sampler's
    are the trainer's, within rounding)."""

    def validate(self) -> None:
        check([
            (0 <= self.clip_low <= 1, f"algorithm.clip_low={self.clip_low} must be in [0, 1] (1: no lower bound)"),
            (self.timeout_s >= 0, f"algorithm.timeout_s={self.timeout_s} must be >= 0 (0: no limit)"),
            (self.policy_loss in POLICY_LOSSES or ":" in self.policy_loss,
             f"algorithm.policy_loss={self.policy_loss!r}: choose from {', '.join(POLICY_LOSSES)} or give your own "
             "as file.py:function"),
            (self.sapo_tau_pos > 0 and self.sapo_tau_neg > 0, "algorithm.sapo_tau_pos and sapo_tau_neg must be > 0"),
            (0 < self.top_entropy_quantile <= 1,
             f"algorithm.top_entropy_quantile={self.top_entropy_quantile} must be in (0, 1] (1 = every token)"),
            (self.advantage_fn is None or ":" in self.advantage_fn,
             f"algorithm.advantage_fn={self.advantage_fn!r} is not file.py:function or module:function"),
            (self.clip_high >= 0, "algorithm.clip_high must be >= 0"),
            (self.beta >= 0, "algorithm.beta must be >= 0"),
            (self.advantage_eps >= 0, "algorithm.advantage_eps must be >= 0"),
            (self.updates_per_batch >= 1, "algorithm.updates_per_batch must be >= 1"),
            (self.loss_constant is None or self.loss_constant > 0,
             "algorithm.loss_constant must be positive (or null = generation.max_new_tokens)"),
            (self.ref_refresh_steps >= 0, "algorithm.ref_refresh_steps must be >= 0"),
            (not (self.ref_refresh_steps and self.beta == 0),
             "algorithm.ref_refresh_steps needs beta > 0 (there is no reference model at beta 0)"),
            (self.turn_advantages == "return" or not (self.process_reward_model or self.advantage_fn),
             "algorithm.turn_advantages: per_turn makes the advantages itself: drop it, or drop "
             "process_reward_model and advantage_fn"),
        ])
        self.rollout_correction.validate()


@dataclass
class TrainConfig(RunSection):
    # Keys of earlier versions, still read: the generation settings once lived under `sampling`.
    ALIASES: ClassVar[dict[str, str]] = {
        f"sampling.{key}": f"generation.{key}" for key in ("max_new_tokens", "temperature", "top_p", "top_k")
    }

    preset: str = "deepseekmath"
    """A named set of settings applied before the file: `deepseekmath` (alias `seed`), `dr_grpo`, `dapo`, `gspo`,
    `cispo`, `sapo`, `reinforce_pp` (docs/objectives.md)."""
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    rewards: list[RewardConfig] | None = None
    """Reward functions and weights (a plain string is a reward's name: `[{name: my.py:check, correctness: true},
    boxed_format]`); None = the task's (or the data's) own."""
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    generation: GenerationConfig = field(default_factory=GenerationConfig)
    algorithm: AlgorithmConfig = field(default_factory=AlgorithmConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    environment: EnvironmentConfig = field(default_factory=EnvironmentConfig)
    ppo: PPOConfig = field(default_factory=PPOConfig)
    """PPO's critic and GAE settings (rlvr.ppo); GRPO ignores them."""
    max_steps: int = 40
    """Training steps (one sampled batch each)."""
    sample_every: int = 4
    """Print a few completions with reward and advantage every N steps (0 = never)."""
    eval_before: bool = True
    """Evaluate the held-out prompts before training."""
    eval_after: bool = True
    """Evaluate the held-out prompts after training."""
    eval_every: int = 0
    """Also evaluate the held-out prompts every N steps, logged as eval/strict and eval/lenient (0 = never)."""
    eval_max_new_tokens: int | None = None
    """Completion budget at evaluation; None = generation.max_new_tokens."""
    eval_alone_every: bool = False
    """When the prompts show example exchanges, the questions alone are evaluated before and after training;
    true also measures them at every eval_every evaluation (a second held-out pass each time)."""
    keep_best: bool = False
    """Also keep the checkpoint with the best validation accuracy (greedy, strict, over the
    data.validation_size prompts) among those evaluated every eval_every steps and at the end, as
    RUN_DIR/best (a checkpoint: `rlvr eval --model RUN_DIR/best`, `rlvr export RUN_DIR/best`); summary.json
    reports it beside the last. Ties keep the earlier."""
    control: Control = "none"
    """Make this run a control (rlvr.rewards.control): `random` trains on a coin per reward at the rate that reward
    paid on the prompt's group, `format` on the format rewards alone; everything else (seeds, data order,
    evaluation) is the run's, so `rlvr compare RUN CONTROL` gives what the rewards themselves taught."""
    preflight: Preflight = "warn"
    """Read step 1's batch for signs the run cannot learn (rlvr.rl.preflight): `warn` says so, `strict` stops;
    a run whose memory plan exceeds the machine's (rlvr.rl.memory) is refused unless `off`."""
    reflection_phrases: list[str] = field(default_factory=lambda: list(DEFAULT_REFLECTION_PHRASES))
    """Phrases counted as reflection in the `reflection_rate` metric (whole words, any case)."""

    def check_ranks(self, ranks: int) -> None:
        """What this config cannot run on `ranks` ranks, refused in one line (before torchrun starts them)."""
        if self.sampling.max_staleness is not None and shards(self.distributed.strategy, ranks):
            raise UserError("sampling.max_staleness on several ranks needs distributed.strategy ddp for now (the "
                            "worker samples with a whole copy of the policy): set it, or sampling.max_staleness null")

    @property
    def max_new_tokens(self) -> int:
        """generation.max_new_tokens, which training requires (validate): the longest completion it samples."""
        assert self.generation.max_new_tokens is not None
        return self.generation.max_new_tokens

    def validate(self) -> None:
        self.validate_run()
        for section in (self.model, self.data, self.sampling, self.generation, self.algorithm, self.optim,
                        self.environment, self.ppo):
            section.validate()
        flagged = [r.name for r in self.rewards or [] if r.correctness]  # the correctness reward, when a config says
        check([
            (self.generation.max_new_tokens is not None, "generation.max_new_tokens must be a number for training"),
            (self.max_steps >= 1, "max_steps must be >= 1"),
            (self.rewards is None or len(self.rewards) > 0,
             "rewards must list at least one reward (or be null for the task's defaults)"),
            (self.sample_every >= 0, "sample_every must be >= 0 (0 = never)"),
            (not self.keep_best or self.data.validation_size > 0,
             "keep_best chooses by validation accuracy: set data.validation_size (e.g. 100), held-out prompts "
             "apart from the data.eval_size that are reported"),
            (not self.keep_best or self.eval_every > 0,
             "keep_best compares the checkpoints evaluated every eval_every steps: set eval_every (e.g. 5)"),
            (self.environment.name is not None or self.algorithm.turn_advantages == "return",
             "algorithm.turn_advantages: per_turn credits the turns of multi-turn rollouts: set environment.name "
             "(an agent or environment that rewards turns), or drop it"),
            (self.environment.name is None or self.data.template == "chat",
             f"environment {self.environment.name!r} talks in chat turns: set data.template to chat"),
            (self.control == "none" or not self.algorithm.process_reward_model,
             f"control={self.control} replaces the outcome rewards, which a process reward model's advantages do "
             "not use: drop algorithm.process_reward_model for the control run"),
            (all(r.timeout_s >= 0 and math.isfinite(r.correct_at * r.weight) for r in self.rewards or []),
             "rewards[].timeout_s must be >= 0 (0 = no limit), and correct_at and weight finite numbers"),
            (len(flagged) <= 1,
             f"rewards {' and '.join(map(repr, flagged[:2]))} both say correctness: true, and `accuracy` can follow "
             "one reward only: keep it on the one that checks answers"),
            # (TRL refuses its sync_ref_model with peft alike)
            (not (self.model.lora and self.algorithm.ref_refresh_steps),
             "algorithm.ref_refresh_steps cannot refresh the reference with model.lora: the reference is the "
             "frozen base (the adapters switched off); set ref_refresh_steps 0, or train without model.lora"),
        ])
