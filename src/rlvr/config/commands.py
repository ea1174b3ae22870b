"""The configurations of `rlvr eval`, `rlvr sample`, `rlvr sft` and `rlvr rm`.

Each is built from the shared sections (rlvr.config.sections) plus its own fields, and checks itself
in `validate()`. ALIASES map the flat keys of earlier versions (`temperature`, `cache_dir`, `lr`, ...)
to their place in a section, so every config file written for them still loads and means the same.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import ClassVar

from rlvr.config.choices import FORMAT_NAMES, MODES, ExtractionMode
from rlvr.config.run import RunSection
from rlvr.config.sections import (
    EnvironmentConfig,
    GenerationConfig,
    ModelConfig,
    OptimConfig,
    check,
)
from rlvr.config.train import FewShotTurn, RewardConfig
from rlvr.errors import for_caller

_MOVED = {"cache_dir": "model.cache_dir"}
_SAMPLING_MOVED = {
    **_MOVED,
    **{key: f"generation.{key}" for key in ("temperature", "top_p", "max_new_tokens")},
    "data_dir": "data.dir",
    **{key: f"data.{key}" for key in ("limit", "difficulty", "template", "system_prompt")},
}


def _r1_sampling() -> GenerationConfig:
    """DeepSeek-R1's sampling for evaluation: temperature 0.6, top-p 0.95 (budget: the data's)."""
    return GenerationConfig(max_new_tokens=None, temperature=0.6, top_p=0.95)


@dataclass
class ProblemsConfig:
    """The problems a model is sampled on by `rlvr eval` and `rlvr sample`."""

    SHORTHAND: ClassVar[str] = "name"

    name: str = "gsm8k"
    """A benchmark (gsm8k, math500, aime24, humaneval), a built-in task, a reasoning-gym task
    (`reasoning_gym:chain_sum`), or a .jsonl/.parquet file."""
    dir: str | None = None
    """Folder holding local copies of the benchmarks (<dir>/gsm8k/test.jsonl, ...); None = the public datasets."""
    limit: int | None = None
    """The first N problems only; None = all (100 of a built-in task). Raising it later resumes into the same output."""
    difficulty: int = 1
    """Difficulty level of a built-in task; of a reasoning-gym task, the level of its curriculum."""
    template: str | None = None
    """Prompt template (chat, plain, r1_zero or a string with {prompt}); None = the data's default (chat)."""
    system_prompt: str | None = None
    """Optional system prompt."""
    few_shot: bool = True
    """Show a built-in task's example exchanges before each problem, as training does; false asks the
    question alone (what was learned, not prompted). Benchmarks and files have none unless `examples` says."""
    examples: list[FewShotTurn] | None = None
    """Example exchanges to show instead of the task's own, for any data: those a training config gave as
    data.few_shot, to evaluate its model as it was trained. None = the task's own (`rlvr eval` only)."""
    instruction: str | None = None
    """A line added after every question. None = the data's own: DeepSeek-R1's ("Please reason step by step,
    and put your final answer within \\boxed{}.") for gsm8k, math500 and aime24, the code instruction for
    humaneval, none for built-in tasks and files; "" = none."""

    def validate(self) -> None:
        check([(self.limit is None or self.limit >= 1, f"data.limit={self.limit}: take at least one problem")])


NO_LORA = ("model.lora trains adapters, which rlvr {} does not: drop it (a LoRA run's directory, given as "
           "the model, loads with its adapters)")


@dataclass
class EvalConfig:
    """`rlvr eval`: sample n completions per benchmark problem and score them (rlvr/evaluate/)."""

    ALIASES: ClassVar[dict[str, str]] = _SAMPLING_MOVED

    model: ModelConfig = field(default_factory=ModelConfig)
    data: ProblemsConfig = field(default_factory=ProblemsConfig)
    generation: GenerationConfig = field(default_factory=lambda: _r1_sampling())
    """DeepSeek-R1's evaluation setting: temperature 0.6, top-p 0.95; max_new_tokens None = the benchmark's budget."""
    samples: int = 16
    """n: completions sampled per problem (DeepSeek-R1 reports 64); 0 = the greedy completion only."""
    k: list[int] | None = None
    """k values for pass@k and maj@k; None = those of 1, 4, 16, 64 that are <= samples, and samples itself."""
    greedy: bool = True
    """Also decode one greedy completion per problem (greedy pass@1)."""
    environment: EnvironmentConfig = field(default_factory=EnvironmentConfig)
    """Answer each problem in conversation with an environment (rlvr.envs: python_tool, ...), as `rlvr train`
    with `environment:` samples: pass@k and maj@k are then over trajectories, judged on their final message."""
    reward: RewardConfig | None = None
    """Judge the answers with a reward of yours instead of the data's verifier (`--reward file.py:function`,
    from Python the function): a completion is correct where it scores reward.correct_at (default 1.0) or
    more; for data with no verifier of its own (no `answer` or tests). No majority vote (there is no answer key)."""
    reward_model: str | None = None
    """A trained reward model directory (`rlvr rm`) that picks the best of N."""
    process_reward_model: str | None = None
    """A process reward model directory: a completion's score is the product of its steps' probabilities."""
    budgets: list[int] | None = None
    """Token budgets for the accuracy-vs-thinking-length curve; None = the budget and five halvings of it."""
    batch_size: int = 64
    """Completions decoded together; problems are taken in fixed chunks of batch_size // samples."""
    seed: int = 0
    """Seeds sampling (and the rows of built-in tasks)."""
    output_dir: str = "runs/eval"
    """Where summary.json, samples.jsonl, report.md and curves.png go."""
    threads: int = 0
    """CPU threads for torch (0 = all cores)."""

    def validate(self) -> None:
        for section in (self.model, self.data, self.generation, self.environment):
            section.validate()
        too_big = [k for k in self.k or [] if not 1 <= k <= self.samples]
        check([
            (self.samples >= 0, f"samples={self.samples}: give the completions to sample per problem, or 0 "
                                "for the greedy one only"),
            (self.samples > 0 or self.greedy, "samples=0 with greedy=false evaluates nothing: sample at least "
                                              "one completion per problem, or keep the greedy one"),
            (self.model.lora is None, NO_LORA.format("eval")),
            (not too_big, f"k={too_big[0] if too_big else ''} needs 1 <= k <= samples ({self.samples}): "
                          "raise --samples or drop it from --k"),
            (not (self.reward_model and self.process_reward_model),
             "give either reward_model or process_reward_model for best-of-N, not both"),
            (self.samples > 0 or not (self.reward_model or self.process_reward_model or self.budgets),
             f"{'budgets' if self.budgets else 'a reward model'} needs sampled completions (best-of-N, the accuracy "
             "against the token budget), which samples=0 has none of: sample some, or drop it"),
            (self.batch_size >= 1 and self.threads >= 0, "batch_size must be >= 1 and threads >= 0"),
            (self.reward is None or math.isfinite(self.reward.correct_at),
             f"reward.correct_at={self.reward.correct_at if self.reward else ''} is not a finite number: give the "
             "score from which your reward counts an answer correct (such as 1.0)"),
        ])


@dataclass
class SampleConfig:
    """`rlvr sample`: rejection sampling into an SFT dataset (rlvr/sample/).

    n completions per prompt are sampled and judged exactly as `rlvr eval` does; the verified ones that
    pass the filters become {"prompt", "completion"} rows. With a teacher model this is distillation's
    first half (DeepSeek-R1 §2.4); `rlvr sft` of a student on the output is the second.
    """

    ALIASES: ClassVar[dict[str, str]] = _SAMPLING_MOVED

    model: ModelConfig = field(default_factory=ModelConfig)
    """The model that samples (the teacher)."""
    data: ProblemsConfig = field(default_factory=lambda: ProblemsConfig(name="arithmetic"))
    """A built-in task (its train split) or a .jsonl/.parquet file with `answer` (maths) or `tests`/`test` (code)
    columns. Evaluation benchmarks (gsm8k, math500, aime24, humaneval) are refused: they are test sets."""
    generation: GenerationConfig = field(default_factory=lambda: _r1_sampling())
    """DeepSeek-R1's recommended temperature 0.6 (1.0 adds diversity but also the incoherent or repetitive
    reasoning that a lucky right answer would carry into the SFT data); max_new_tokens None = the data's
    default (1024 for files, 256 for built-in tasks)."""
    samples: int = 8
    """n: completions sampled per prompt."""
    seed: int = 0
    """Seeds sampling (and the rows of built-in tasks)."""
    batch_size: int = 64
    """Completions decoded together; prompts are taken in fixed chunks of batch_size // samples."""
    verdict: ExtractionMode = "strict"
    """Which verifier must give 1.0 for a completion to be kept (the data's strict or lenient extraction)."""
    format: str = "none"
    """Also require this format reward = 1.0: `none`, `boxed` (exactly one non-empty \\boxed{}),
    `think_answer` (<think>…</think><answer>…</answer>) or `soft_think_answer` (its four tags in order)."""
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
    """Work directory: samples.jsonl (every judged completion; re-running resumes), settings.json,
    sample_summary.json."""
    output: str | None = None
    """The SFT dataset (.jsonl); None = <output_dir>/sft.jsonl."""
    threads: int = 0
    """CPU threads for torch (0 = all cores)."""

    def validate(self) -> None:
        for section in (self.model, self.data, self.generation):
            section.validate()
        check([
            (self.samples >= 1, f"samples={self.samples}: sample at least one completion per prompt"),
            (self.model.lora is None, NO_LORA.format("sample")),
            (self.verdict in MODES, f"verdict={self.verdict!r} must be one of {list(MODES)}"),
            (self.format in ("none", *FORMAT_NAMES),
             f"format={self.format!r} must be one of {['none', *FORMAT_NAMES]}"),
            (self.min_tokens >= 0, f"min_tokens={self.min_tokens} must be >= 0"),
            (self.max_tokens is None or self.max_tokens >= max(1, self.min_tokens),
             f"max_tokens={self.max_tokens} must be >= 1 and >= min_tokens ({self.min_tokens})"),
            (self.max_per_prompt is None or self.max_per_prompt >= 1,
             f"max_per_prompt={self.max_per_prompt} must be >= 1 (or null for no cap)"),
            (self.batch_size >= 1 and self.threads >= 0, "batch_size must be >= 1 and threads >= 0"),
        ])


@dataclass
class SFTConfig(RunSection):
    """`rlvr sft`: supervised fine-tuning with the loss on completion tokens only (rlvr/sft/)."""

    ALIASES: ClassVar[dict[str, str]] = _MOVED

    model: ModelConfig = field(default_factory=ModelConfig)
    """The model to fine-tune."""
    data: str = ""
    """A .jsonl file (or .parquet, a folder Dataset.save_to_disk wrote, hf:owner/name) of {"prompt", "completion"}
    or {"messages": [...]} rows."""
    eval_fraction: float = 0.05
    """Share of the rows held out (picked by a seeded hash of their content) to measure the loss on."""
    template: str = "chat"
    """`chat` (the tokenizer's chat template; needed for messages rows), `plain`, `r1_zero`, or a string
    with {prompt}."""
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
    optim: OptimConfig = field(default_factory=lambda: OptimConfig(schedule="cosine"))
    """AdamW, warm-up, schedule, gradient clipping and micro_batch_tokens, as for `rlvr train` (optim.lr, ...)."""
    seed: int = 0
    """Seeds the held-out split and the order of the examples."""
    output_dir: str = "runs/sft"
    """Run directory: config.yaml, metrics.jsonl, tensorboard/, checkpoints/, summary.json."""
    eval_every: int = 0
    """Also measure the held-out loss every N steps, logged as eval_loss (0 = only before and after)."""
    tensorboard: bool = True
    """false drops `tensorboard` from logging.report_to (the switch of earlier versions)."""

    def validate(self) -> None:
        self.validate_run()
        self.model.validate()
        self.optim.validate()
        check([
            (bool(self.data), f"no SFT data: give {for_caller('--data train.jsonl', 'train_data=')} (rows of one "
                              '{"prompt", "completion"} or {"messages": [...]} object each)'),
            (0 <= self.eval_fraction < 1, f"eval_fraction={self.eval_fraction} must be in [0, 1)"),
            (self.max_length >= 2, "max_length must be >= 2 (a prompt token and a completion token)"),
            (self.batch_size >= 1, "batch_size must be >= 1"),
            (self.epochs >= 1, "epochs must be >= 1"),
        ])


@dataclass
class RewardModelConfig(RunSection):
    """`rlvr rm`: a Bradley–Terry reward model trained on preference pairs (rlvr/reward_models/)."""

    ALIASES: ClassVar[dict[str, str]] = {
        **_MOVED, **{key: f"optim.{key}" for key in ("lr", "weight_decay", "max_grad_norm")},
    }

    model: ModelConfig = field(default_factory=ModelConfig)
    """Backbone; a one-output sequence-classification head is put on top (new, unless the checkpoint has one)."""
    data: str = ""
    """A .jsonl file of preference pairs, one {"prompt", "chosen", "rejected"} object per line (or .parquet, or a
    folder Dataset.save_to_disk wrote, of such rows)."""
    eval_fraction: float = 0.1
    """Share of the pairs held out (picked by a seeded hash) to measure pairwise accuracy on."""
    max_length: int = 512
    """Tokens per prompt + completion; longer ones keep their last max_length tokens."""
    batch_size: int = 8
    """Preference pairs per optimizer step (2 · batch_size sequences per forward)."""
    epochs: int = 1
    """Passes over the training pairs (used when max_steps is 0)."""
    optim: OptimConfig = field(default_factory=lambda: OptimConfig(lr=1e-5, betas=(0.9, 0.999)))
    """AdamW as for `rlvr train` (optim.lr, ...); here constant at 1e-5 with torch's default betas.
    (micro_batch_tokens does not apply: a step is one forward of its 2 · batch_size sequences.)"""
    stats_completions: int = 1000
    """Training completions (a seeded sample of chosen and rejected ones) scored at each checkpoint
    for the mean and std that normalise the reward; 0 = all."""
    seed: int = 0
    """Seeds the new head, the held-out split, data order and the stats sample."""
    output_dir: str = "runs/reward_model"
    """Run directory: config.yaml, metrics.jsonl, checkpoints/, summary.json."""
    eval_every: int = 0
    """Also measure the held-out pairwise accuracy every N steps, logged as eval/pairwise_accuracy (0 = only
    before and after)."""

    def validate(self) -> None:
        self.validate_run()
        self.model.validate()
        self.optim.validate()
        check([
            (bool(self.data), "no preference data: give --data pairs.jsonl "
                              '(one {"prompt", "chosen", "rejected"} object per line)'),
            (0 <= self.eval_fraction < 1, f"eval_fraction={self.eval_fraction} must be in [0, 1)"),
            (self.max_length >= 1, "max_length must be >= 1"),
            (self.batch_size >= 1, "batch_size must be >= 1"),
            (self.epochs >= 1, "epochs must be >= 1"),
            (self.stats_completions >= 0, "stats_completions must be >= 0 (0 = all)"),
        ])
