"""The GRPO trainer: owns its loop (no transformers.Trainer), one `step()` per sampled batch.

Where this departs from the seeds' pseudocode (seed 004, ALGORITHM ENTRY 1):
- with μ = 1 (the default) π_old is the current policy, so log π_old is the detached log π_θ of
  the same forward pass: the ratio is exactly 1 and no extra forward pass is spent on it;
- all prompts of a step form one batch and one optimizer step (per μ), instead of one step per prompt.
World size is 1; `self.world` is the one place where data-parallel sharding would slot in.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch

from rlvr.config import TrainConfig
from rlvr.config import load_config
from rlvr.devices import autocast, peak_memory_gb
from rlvr.errors import UserError
from rlvr.evaluate import EvalResult, evaluate_accuracy
from rlvr.optim import build_optimizer
from rlvr.records import Rollout, ScoredRollout, TrainBatch
from rlvr.rewards import load_reward_function
from rlvr.rewards import workers as reward_workers
from rlvr.rollout import SamplingParams, rollout
from rlvr.train import checkpoint as ckpt
from rlvr.train.metrics import emergence_metrics, step_metrics
from rlvr.train.curriculum import CurriculumStream
from rlvr.train.dynamic import FillStats, fill_informative
from rlvr.train.process import process_batch_advantages
from rlvr.train.prompts import PromptStream
from rlvr.train.build import build_parts
from rlvr.train.step import compute_advantages, make_batch, policy_update, sample_and_score, score_rollout


class Stopwatch:
    """`with clock("name"):` adds the block's wall time to clock.seconds["name"]."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextmanager
    def __call__(self, name: str):
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - start


@dataclass(frozen=True)
class World:
    """Process layout. Single-process today; a distributed launcher would fill these in."""

    rank: int = 0
    size: int = 1


class Trainer:
    def __init__(self, config: TrainConfig, *, resume_from: Path | None = None):
        self.config, self.world = config, World()
        torch.set_num_threads(config.threads or torch.get_num_threads())
        torch.manual_seed(config.seed)
        self.run_dir = Path(config.output_dir)
        if resume_from is None:
            ckpt.refuse_existing_run(self.run_dir)
        state = ckpt.load_trainer_state(resume_from) if resume_from else None
        reference_path = resume_from / "reference" if resume_from and (resume_from / "reference").is_dir() else None
        self.parts = build_parts(config, resume_from / "model" if resume_from else None, reference_path)
        self.policy, self.tokenizer, self.reference = self.parts.policy, self.parts.tokenizer, self.parts.reference
        s, size = config.sampling, len(self.parts.train.examples)
        stream = CurriculumStream if config.data.curriculum else PromptStream
        self.prompts = stream(size, s.batch_size // s.group_size, config.seed)
        self.fill_stats: FillStats | None = None
        self.process_scorer = _process_scorer(config.algorithm.process_reward_model)
        self.format_check = load_reward_function("think_answer_format" if config.data.template == "r1_zero" else "boxed_format")
        self.optimizer, self.scheduler = build_optimizer(self.policy, config.optim, config.max_steps)
        self.step_count = 0
        if state:
            self.optimizer.load_state_dict(state["optimizer"])
            self.scheduler.load_state_dict(state["scheduler"])
            self.prompts.load_state_dict(state["prompts"])
            self.step_count = state["step"]
            ckpt.set_rng_state(state["rng"])
        self.stop_requested = False

    @classmethod
    def from_run_dir(cls, run_dir: Path, overrides: list[str] = (), **cli) -> "Trainer":
        """Continue the run in `run_dir` from its latest checkpoint (config overrides allowed, e.g. max_steps)."""
        if not (run_dir / "config.yaml").is_file():
            raise UserError(f"cannot resume: {run_dir} has no config.yaml (is it a run directory made by `rlvr train`?)")
        latest = ckpt.latest_checkpoint(run_dir)
        if latest is None:
            raise UserError(f"cannot resume: {run_dir} has no complete checkpoint yet (start it again without --resume)")
        config = load_config(latest / "config.yaml", list(overrides), output_dir=str(run_dir), **cli)
        return cls(config, resume_from=latest)

    # ── the algorithm ────────────────────────────────────────────────────────────────────────
    def step(self) -> dict[str, float]:
        """One GRPO iteration: the five steps of seed 000."""
        clock = Stopwatch()
        with clock("rollout"):  # 1. sample G completions per prompt, 2. verifiable rewards (overlapped)
            scored = self.collect_batch()
        advantages = self.advantages(scored)  # 3. group-relative advantages
        with clock("logprobs"), self.autocast():
            batch = self.attach_logprobs(scored, advantages)  # 4. log π_old (μ > 1), log π_ref (β > 0)
        with clock("update"):
            updates = [self.update(batch) for _ in range(self.config.algorithm.updates_per_batch)]  # 5. clip + KL
        self.step_count += 1
        self.refresh_reference()
        self.last_batch = batch
        metrics = step_metrics(batch, updates, clock.seconds)
        metrics["memory/peak_gb"] = peak_memory_gb(self.parts.device)
        metrics.update(emergence_metrics(scored, self.config.reflection_phrases, self.format_check))
        verifier = reward_workers.stats()  # cumulative: a rising count means answers that hit the time bound
        metrics["verifier/timeouts"], metrics["verifier/failures"] = verifier.timeouts, verifier.failures
        if self.fill_stats is not None:
            metrics["sampling/rounds"] = self.fill_stats.rounds
            metrics["sampling/dropped_groups"] = self.fill_stats.dropped_groups
            metrics["sampling/padded_groups"] = self.fill_stats.padded_groups
        return metrics

    def collect_batch(self) -> ScoredRollout:
        """Steps 1-2 for P prompts; with dynamic sampling, zero-variance groups are replaced by fresh ones."""
        s = self.config.sampling
        first = self.sample_and_score(self.prompts.next_batch())
        if not s.dynamic_sampling:
            return first
        more = lambda round_: self.sample_and_score(self.prompts.next_batch(), round_)  # noqa: E731
        scored, self.fill_stats = fill_informative(first, more, s.max_sampling_rounds)
        return scored

    def sample_and_score(self, positions: list[int], round_: int = 0) -> ScoredRollout:
        """Steps 1 and 2: each group is scored as soon as it has finished decoding (overlap_rewards),
        or the whole batch once decoding is done. The curriculum learns each group's pass rate."""
        if not self.config.sampling.overlap_rewards:
            scored = score_rollout(self.sample(positions, round_=round_), self.parts.rewards)
        else:
            examples = [self.parts.train.examples[i] for i in positions]
            sample = lambda on_group_done: self.sample(positions, on_group_done, round_)  # noqa: E731
            scored = sample_and_score(sample, examples, self.config.sampling.group_size, self.parts.rewards)
        if isinstance(self.prompts, CurriculumStream):
            accuracy = next(iter(scored.reward_components.values()))  # the first reward is the correctness check
            self.prompts.observe(positions, accuracy.nanmean(dim=1).tolist())
        return scored

    def advantages(self, scored: ScoredRollout) -> torch.Tensor:
        """[N] outcome advantages from the rewards, or [N, Lc] from a process reward model's step scores."""
        a = self.config.algorithm
        if self.process_scorer is None:
            return compute_advantages(scored.rewards, a)
        return process_batch_advantages(scored, self.process_scorer, self.tokenizer, a.step_separator)

    def attach_logprobs(self, scored, advantages) -> TrainBatch:
        c = self.config
        return make_batch(
            scored, advantages, policy=self.policy, reference=self.reference, algo=c.algorithm,
            micro_batch_tokens=c.optim.micro_batch_tokens, temperature=c.generation.temperature,
        )

    def update(self, batch: TrainBatch) -> dict[str, float]:
        """One optimizer step over the whole batch (an epoch of the μ in DeepSeekMath's GRPO)."""
        c = self.config
        return policy_update(
            self.policy, self.optimizer, self.scheduler, batch, algo=c.algorithm,
            micro_batch_tokens=c.optim.micro_batch_tokens, temperature=c.generation.temperature,
            max_grad_norm=c.optim.max_grad_norm, max_new_tokens=c.generation.max_new_tokens,
            autocast=self.autocast,
        )

    def autocast(self):
        """The forward passes' precision context (rlvr/devices.py): nothing in fp32."""
        return autocast(self.parts.device, self.parts.dtype)

    def refresh_reference(self) -> None:
        """Iterative GRPO (seed 004, Algorithm 1 step 3): π_ref ← π_θ every K steps, when asked for."""
        k = self.config.algorithm.ref_refresh_steps
        if self.reference is not None and k and self.step_count % k == 0:
            self.reference.load_state_dict(self.policy.state_dict())

    def sample(self, positions: list[int], on_group_done=None, round_: int = 0) -> Rollout:
        """G completions for each training prompt at `positions`, seeded by (seed, step, sampling round)."""
        s, gen, train = self.config.sampling, self.config.generation, self.parts.train
        generator = torch.Generator().manual_seed(self.config.seed * 1_000_003 + self.step_count + (round_ << 32))
        self.policy.eval()  # no dropout while sampling; the update runs in train mode
        with self.autocast():  # entered here: sampling may run on a worker thread, and autocast is per thread
            out = rollout(
                self.policy, self.tokenizer, [train.examples[i] for i in positions], [train.texts[i] for i in positions], s.group_size,
                SamplingParams(gen.max_new_tokens, gen.temperature, gen.top_p, gen.top_k),
                generator=generator, add_special_tokens=self.parts.add_special_tokens, on_group_done=on_group_done,
            )
        self.policy.train()
        return out

    # ── around the algorithm: evaluation, checkpoints, the loop ───────────────────────────────
    def evaluate(self) -> EvalResult | None:
        if self.parts.eval is None:
            return None
        strict, lenient = self.parts.accuracy_fns
        with self.autocast():
            return evaluate_accuracy(
                self.policy, self.tokenizer, self.parts.eval.examples, self.parts.eval.texts, strict=strict, lenient=lenient,
                max_new_tokens=self.config.eval_max_new_tokens or self.config.generation.max_new_tokens,
                add_special_tokens=self.parts.add_special_tokens,
            )

    def save(self) -> Path:
        state = {
            "step": self.step_count,
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "prompts": self.prompts.state_dict(),
        }
        refreshed = self.reference if self.config.algorithm.ref_refresh_steps and self.step_count >= self.config.algorithm.ref_refresh_steps else None
        return ckpt.save_checkpoint(
            self.run_dir, self.step_count, policy=self.policy, tokenizer=self.tokenizer,
            trainer_state=state, config=self.config, reference=refreshed,
        )

    def request_stop(self) -> None:
        """Finish the current step, save a checkpoint and return from train() (what Ctrl-C does)."""
        self.stop_requested = True

    def train(self, on_step_end=None) -> dict:
        """Run until max_steps (or a stop request); evaluate before and after; write summary.json."""
        from rlvr.train.loop import run_training

        return run_training(self, on_step_end)


def _process_scorer(path: str | None):
    """The process reward model for process supervision, or None (outcome supervision)."""
    if path is None:
        return None
    from rlvr.reward_models.scoring import ProcessRewardScorer

    return ProcessRewardScorer(path)
