"""GRPO: the trainer whose `step()` is the algorithm, run by the run core (rlvr.run) like every recipe.

    rlvr.train.trainer.train_grpo(config)               # a fresh run in config.output_dir
    rlvr.train.trainer.train_grpo(config, resume=True)  # continue it from its latest checkpoint

Under torchrun each rank samples, scores and trains on its own whole groups of every global batch
(data-parallel, rlvr.run.world): the loss normalisers, the batch std and the metrics are reduced over
all ranks, so a step equals the one-process step on the same global batch.

Where this departs from DeepSeekMath's Algorithm 1 (Shao et al. 2024):
- with μ = 1 (the default) π_old is the current policy, so log π_old is the detached log π_θ of the
  same forward pass: the ratio is exactly 1 and no extra forward pass is spent on it;
- all prompts of a step form one batch and one optimizer step (per μ), instead of one step per prompt.
"""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path
from typing import Any

import torch

from rlvr import paths
from rlvr.config import TrainConfig
from rlvr.envs import load_environment
from rlvr.envs.sampling import env_metrics
from rlvr.errors import UserError
from rlvr.evaluate.accuracy import Interval, evaluate_accuracy, paired_gain_interval
from rlvr.optim import build_optimizer
from rlvr.records import Rollout, ScoredRollout
from rlvr.rewards.batch import score_rollout
from rlvr.rewards.reward_model import ProcessRewardScorer
from rlvr.rollout import SamplingParams
from rlvr.run.clock import Stopwatch
from rlvr.run.loop import OnStepEnd, Schedule, StepResult, launch
from rlvr.run.policy import Policy
from rlvr.run.samplers import push_weights, rank_sampler
from rlvr.run.world import SINGLE, World, any_across, gather_across, shard
from rlvr.samplers import Sampler, SampleRequest
from rlvr.seeds import seeds_for
from rlvr.train.ahead import RolloutsAhead, Sampled, refuse_unsupported, start_ahead
from rlvr.train.batch import make_batch, outcome_advantages
from rlvr.train.build import Prompts, build_parts
from rlvr.train.curriculum import CurriculumStream
from rlvr.train.dynamic import FillStats, fill_informative
from rlvr.train.metrics import MetricSources, gather_step, sample_groups, step_metrics, step_record
from rlvr.train.process import process_batch_advantages
from rlvr.train.prompts import PromptStream
from rlvr.train.sampling import GroupDone, score_while_sampling
from rlvr.train.update import policy_update


def train_grpo(config: TrainConfig, *, resume: bool = False, on_step_end: OnStepEnd | None = None) -> dict[str, Any]:
    """Run GRPO as `config` says (`resume`: continue the run in config.output_dir); return its summary."""
    return launch(Trainer, config, resume=resume, on_step_end=on_step_end)


class Trainer:
    resume_hint, label, job = "rlvr train --resume {run_dir}", "GRPO", "train"

    def __init__(self, config: TrainConfig, checkpoint: Path | None = None, world: World = SINGLE):
        """The policy (from `checkpoint` when resuming), reference, prompts, rewards and optimizer of a run,
        on this rank of `world`."""
        self.config, c, s, self.world = config, config, config.sampling, world
        prompts_per_step = s.batch_size // s.group_size
        if prompts_per_step % world.size:
            raise UserError(f"sampling.batch_size={s.batch_size} is {prompts_per_step} prompts a step "
                            f"(group_size {s.group_size}), which {world.size} ranks cannot share whole: make "
                            f"batch_size / group_size a multiple of {world.size}")
        refuse_unsupported(config, world.size)
        self.parts = build_parts(config, checkpoint)
        # the effective config (config.yaml) records the rewards as run: which one is the correctness reward
        self.config = c = dataclasses.replace(config, rewards=self.parts.reward_entries)
        p, self.tokenizer = self.parts, self.parts.tokenizer
        # π_θ as the ranks train it, and π_ref when β > 0: a frozen copy, or with LoRA the policy's own network
        # with its adapters off (rlvr.run.policy)
        self.policy = Policy(p.policy, device=p.device, dtype=p.dtype, world=world, strategy=c.distributed.strategy,
                             reference=p.reference, with_reference=c.algorithm.beta > 0)
        stream = CurriculumStream if c.data.curriculum else PromptStream
        self.prompts = stream(len(self.parts.train), prompts_per_step, c.seed)
        path = c.algorithm.process_reward_model
        self.process_scorer = ProcessRewardScorer(path) if path else None
        env = c.environment  # multi-turn rollouts: each sample a conversation with it (rlvr.envs)
        self.make_env = load_environment(env.name, **env.params) if env.name else None
        # what samples the completions: rlvr's own engine on the policy's weights, or vLLM (rlvr.samplers)
        made = dict(model=p.policy, decoding=self.policy.decoding, weights=self.policy.named_weights,
                    tokenizer=self.tokenizer, device=p.device, dtype=p.dtype, add_special_tokens=p.add_special_tokens,
                    environment=env, make_env=self.make_env, seed=c.seed)
        self.sampler: Sampler = rank_sampler(c.generation, world, **made)
        # sampling ahead (rlvr.train.ahead) with vLLM: the engine is the worker's, and the trainer's own
        # evaluations decode with rlvr's engine on its weights
        self.ahead_sampler: Sampler | None = None
        if c.sampling.max_staleness is not None and c.generation.backend != "local":
            self.ahead_sampler = self.sampler
            self.sampler = rank_sampler(dataclasses.replace(c.generation, backend="local"), world, **made)
        self.optimizer, self.scheduler = build_optimizer(p.policy, c.optim, c.max_steps)
        self.step_count = 0
        self.ahead: RolloutsAhead | None = None  # the worker sampling ahead (sampling.max_staleness), once started
        self.pending: list[Sampled] = []  # batches it sampled before a checkpoint, given back to it on resume
        self.resumed_ahead: dict[str, Any] | None = None  # what the checkpoint resumed from kept of them
        self.schedule = Schedule(c.max_steps, c.save_every, c.eval_every, c.sample_every, c.eval_before, c.eval_after,
                                 c.keep_checkpoints, c.keep_best)
        self.sources = MetricSources(self.parts.correctness, c.reflection_phrases, self.parts.format_check,
                                     self.parts.device)

    # ── the algorithm ────────────────────────────────────────────────────────────────────────
    def step(self) -> StepResult:
        """One GRPO iteration (DeepSeekMath Algorithm 1, inner loop), on typed records."""
        a, o, g = self.config.algorithm, self.config.optim, self.config.generation
        clock = Stopwatch()
        with clock("rollout"):  # 1. sample G completions per prompt, 2. score them with the verifiers
            scored, fill = self.rollouts()
        advantages = self.advantages(scored)  # 3. group-relative advantages, [N, Lc]
        with clock("logprobs"):  # 4. log π_old (μ > 1, or the sampler's of an older version) and log π_ref (β > 0)
            batch = make_batch(scored, advantages, policy=self.policy, algo=a, micro_batch_tokens=o.no_grad_tokens,
                               temperature=g.temperature, stale=scored.rollout.version < self.step_count)
        with clock("update"):  # 5. clipped surrogate + β·KL: μ optimizer steps on the same batch
            updates = [policy_update(self.policy, self.optimizer, self.scheduler, batch, algo=a,
                                     micro_batch_tokens=o.micro_batch_tokens, temperature=g.temperature,
                                     max_grad_norm=o.max_grad_norm, max_new_tokens=g.max_new_tokens)
                       for _ in range(a.updates_per_batch)]
        with clock("weights"):  # 6. the sampler gets the new weights; iterative GRPO: π_ref ← π_θ every K steps
            self.advance()
        record = gather_step(step_record(batch, fill, self.sources.device), self.world)  # the global batch's
        infos = gather_across(batch.rollout.env_info, self.world) if self.make_env is not None else []
        metrics = step_metrics(record, updates, clock.seconds, self.sources) | env_metrics(  # the global batch's
            [info for part in infos for info in part or []])
        if self.sampler.holds_copy:  # its copy was checked against the policy's weights (or the run stopped)
            metrics["sampler/weights_verified"] = 1.0
        if self.ahead is not None:  # (one version samples a whole batch: its mean and max are the same)
            staleness = float(self.step_count - 1 - scored.rollout.version)
            metrics |= {"async/staleness_mean": staleness, "async/staleness_max": staleness}
        return StepResult(metrics, sample_groups(batch))

    def rollouts(self) -> tuple[ScoredRollout, FillStats | None]:
        """Steps 1-2: this step's batch, sampled now with the newest weights, or ahead by the worker."""
        if self.config.sampling.max_staleness is None:
            return self.sample_and_score()
        if self.ahead is None:
            self.ahead = start_ahead(self)
        return self.ahead.take(self.step_count).result  # type: ignore[no-any-return]

    def sample_and_score(self, step: int | None = None, sampler: Sampler | None = None,
                         world: World | None = None) -> tuple[ScoredRollout, FillStats | None]:
        """Steps 1-2 for the P prompts of batch `step` (0-based; default: this step's) with `sampler` (default:
        the run's, with the newest weights), agreeing with the other ranks in `world` (default: the run's; the
        worker sampling ahead has a process group of its own); with dynamic sampling (DAPO), zero-variance
        groups are replaced by fresh ones."""
        s, world = self.config.sampling, world or self.world
        order = copy.deepcopy(self.prompts.state_dict())
        try:
            first = self.score_round(0, step, sampler, world)
            if not s.dynamic_sampling:
                return first, None
            return fill_informative(first, lambda round_: self.score_round(round_, step, sampler, world),
                                    s.max_sampling_rounds, all_done=lambda done: not any_across(not done, world))
        except BaseException:  # a reward failed, or the step was abandoned: it never happened (rlvr.run.loop)
            self.prompts.load_state_dict(order)
            raise

    def score_round(self, round_: int, step: int | None = None, sampler: Sampler | None = None,
                    world: World | None = None) -> ScoredRollout:
        """This rank's share of the next P prompts, sampled and scored; every group's pass rate, from all
        ranks, is shown to the prompt stream (curriculum), so that its state stays the same on every rank."""
        world = world or self.world
        drawn = self.prompts.next_batch()
        slots = shard(range(len(drawn)), world)  # (the prompts' places in the whole batch: their seeds)
        positions = [drawn[i] for i in slots]
        examples, g = [self.parts.train[i].example for i in positions], self.config.sampling.group_size
        if self.config.sampling.overlap_rewards and self.make_env is None:
            scored = score_while_sampling(lambda done: self.sample(positions, done, round_, slots, step, sampler),
                                          examples, g, self.parts.rewards, concurrent=self.parts.device.type != "cpu")
        else:
            scored = score_rollout(self.sample(positions, round_=round_, slots=slots, step=step, sampler=sampler),
                                   self.parts.rewards)
        if self.parts.correctness is not None:  # (without one there is no curriculum: rlvr.train.reward_setup)
            accuracies = scored.reward_components[self.parts.correctness].nanmean(dim=1).tolist()
            for seen, rates in gather_across((positions, accuracies), world):
                self.prompts.observe(seen, rates)
        return scored

    def sample(self, positions: list[int], on_group_done: GroupDone | None = None, round_: int = 0,
               slots: list[int] | None = None, step: int | None = None, sampler: Sampler | None = None) -> Rollout:
        """G completions for each training prompt at `positions` (at `slots` of the step's whole batch; by
        default their order here): completion j of slot s drawn from the seed of (run seed, step, sampling
        round, s, j) alone (rlvr.seeds), whichever rank samples it; by `sampler` (default: the run's, with
        the newest weights) for batch `step` (default: this step's), and tagged with the weights' version."""
        gen, c = self.config.generation, self.config
        step, sampler = self.step_count if step is None else step, sampler or self.synced_sampler()
        params = SamplingParams(gen.max_new_tokens, gen.temperature, gen.top_p, gen.top_k)
        requests = [SampleRequest(self.parts.train[i], tuple(seeds_for(c.seed, step, round_, slot,
                                                                       c.sampling.group_size)))
                    for i, slot in zip(positions, range(len(positions)) if slots is None else slots)]
        return dataclasses.replace(sampler.sample(requests, params, on_group_done), version=sampler.version)

    def advantages(self, scored: ScoredRollout) -> torch.Tensor:
        """[N, Lc] from the rewards (outcome supervision), or from a process reward model's step scores."""
        if self.process_scorer is None:
            weights = {r.name: r.weight for r in self.config.rewards or []}
            return outcome_advantages(scored, self.config.algorithm, self.world, weights)
        return process_batch_advantages(scored, self.process_scorer, self.tokenizer,
                                        self.config.algorithm.step_separator)

    def advance(self) -> None:
        """After a step's updates: the step is counted, the sampler is given the policy's new weights (tagged
        with the step), and π_ref ← π_θ every `ref_refresh_steps` steps (DeepSeekMath Algorithm 1, iterative
        RL), when asked for. Every recipe that updates this policy calls it (PPO too)."""
        self.step_count += 1
        self.push_weights()
        if self.ahead is not None:
            self.publish_weights()
        k = self.config.algorithm.ref_refresh_steps
        if k and self.step_count % k == 0:
            self.policy.refresh_reference()

    def push_weights(self) -> None:
        """The sampler gets the policy's weights, checked when it holds a copy (rlvr.samplers.build)."""
        push_weights(self.sampler, self.policy.named_weights, self.step_count, self.world)

    def publish_weights(self) -> None:
        """The worker sampling ahead gets copies of the policy's weights of this step (the trainer goes on
        updating its own)."""
        assert self.ahead is not None
        self.ahead.publish(self.step_count, [(n, t.detach().clone()) for n, t in self.policy.named_weights()])

    def synced_sampler(self) -> Sampler:
        """The sampler, given the policy's weights first if it has not had them (a new or resumed run)."""
        if self.sampler.version != self.step_count:
            self.push_weights()
        return self.sampler

    def close(self) -> None:
        if self.ahead is not None:
            self.ahead.close()
        for sampler in (self.sampler, self.ahead_sampler):
            if sampler is not None:
                sampler.close()

    # ── what the run core asks of a recipe ───────────────────────────────────────────────────
    def evaluate(self) -> dict[str, Any] | None:
        """Greedy held-out accuracy, strict and lenient, with 95% intervals and each problem's verdict; when the
        prompts show example exchanges, also of the questions alone (`alone`: what was learned, not shown)."""
        if self.parts.eval is None:
            return None
        evaluation = self._accuracy(self.parts.eval)
        ends = self.step_count in (0, self.config.max_steps)  # before and after; between, when asked
        if self.parts.eval_alone is not None and (ends or self.config.eval_alone_every):
            alone = self._accuracy(self.parts.eval_alone)
            evaluation["alone"] = {k: v for k, v in alone.items() if k != "examples"}
        if self.parts.validation is not None:  # what keep_best chooses by, apart from what is reported
            validation = self._accuracy(self.parts.validation)
            evaluation["validation"] = {k: validation[k] for k in ("n", "strict", "lenient")}
        return evaluation

    def _accuracy(self, prompts: Prompts) -> dict[str, Any]:
        """Greedy, through the run's sampler (in conversation with the environment when there is one, the
        environments seeded the same at every evaluation, so before and after are paired)."""
        strict, lenient = self.parts.accuracy_fns
        c = self.config
        result = evaluate_accuracy(self.synced_sampler(), prompts, strict=strict, lenient=lenient, seed=c.seed,
                                   world=self.world,
                                   max_new_tokens=c.eval_max_new_tokens or c.generation.max_new_tokens)
        return {**result.summary(), "strict_correct": result.strict_correct, "lenient_correct": result.lenient_correct,
                "examples": result.completions[:5]}

    def eval_metrics(self, evaluation: dict[str, Any]) -> dict[str, float]:
        # and, when measured, of the questions without the example exchanges and of the validation slice
        return {"eval/strict": evaluation["strict"]["mean"], "eval/lenient": evaluation["lenient"]["mean"],
                **{f"eval/{part}/{mode}": evaluation[part][mode]["mean"] for part in ("alone", "validation")
                   if part in evaluation for mode in ("strict", "lenient")}}

    def describe(self, evaluation: dict[str, Any]) -> str:
        line = (f"strict {Interval(**evaluation['strict'])}   lenient {Interval(**evaluation['lenient'])}   "
                f"(n={evaluation['n']}, held-out, greedy)")
        if "alone" in evaluation:
            a = evaluation["alone"]
            line += f"; the question alone: strict {Interval(**a['strict'])}   lenient {Interval(**a['lenient'])}"
        if "validation" in evaluation:
            v = evaluation["validation"]
            line += f"; validation (n={v['n']}): strict {Interval(**v['strict'])}"
        return line

    def progress(self, metrics: dict[str, float]) -> dict[str, str]:
        return {"reward": f"{metrics['reward/mean']:.2f}", "acc": f"{metrics.get('accuracy', float('nan')):.2f}",
                "len": f"{metrics['completion_length/mean']:.0f}", "s": f"{metrics['step_seconds']:.0f}"}

    def write_checkpoint(self, folder: Path) -> None:
        """model/ (policy and tokenizer, loadable by transformers), and reference/ once it has been refreshed."""
        # (the reference with the tokenizer: resuming loads it as a model directory like any other)
        self.policy.write(folder / paths.MODEL, self.tokenizer,
                          folder / paths.REFERENCE if self.reference_refreshed() else None)

    def reference_refreshed(self) -> bool:
        k = self.config.algorithm.ref_refresh_steps
        return bool(k) and self.step_count >= k

    def state_dict(self) -> dict[str, Any]:
        """Scheduler, prompt stream and (one process) the optimizer keyed by parameter name; sharded, the
        weights are gathered here too, for write_checkpoint (rank 0). Every rank calls this."""
        self.policy.gather(reference=self.reference_refreshed())
        state = {"scheduler": self.scheduler.state_dict(), "prompts": self.prompts.state_dict()}
        if self.ahead is not None:  # the batches sampled ahead (each rank's share), the prompt stream after them
            ahead = self.ahead.state(self.step_count)
            state |= {"prompts": ahead["prompts"], "ahead": {"pending": gather_across(ahead["pending"], self.world),
                                                             "prompts_before": ahead["prompts_before"]}}
        elif self.pending:  # (resumed, not started yet)
            state["ahead"] = self.resumed_ahead
        if not self.world.distributed:  # (several ranks write it in parts: sharded_state)
            state["optimizer"] = self.policy.optimizer_state(self.optimizer)
        return state

    def sharded_state(self) -> dict[str, Any]:
        """The policy and its optimizer as this rank holds them (shards under FSDP), keyed by parameter name,
        for torch.distributed.checkpoint (rlvr.run.sharded)."""
        return self.policy.sharded_state(self.optimizer)

    def load_sharded(self, checkpoint: Path) -> None:
        """The policy and optimizer from the parts several ranks wrote, at this world size."""
        self.policy.load_sharded(checkpoint, self.optimizer)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if "critic" in state:  # a PPO run continued as GRPO would lose its critic (PPOTrainer passes GRPO's part)
            raise UserError("cannot resume: this run is PPO (its checkpoint holds a critic); continue it with "
                            "rlvr.ppo.trainer.train_ppo(resume_config(TrainConfig, RUN_DIR), resume=True)")
        if "optimizer" in state:  # (else in the checkpoint's parts: load_sharded)
            self.policy.load_optimizer_state(self.optimizer, state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.prompts.load_state_dict(state["prompts"])
        self.step_count = state["step"]
        self.resumed_ahead = ahead = state.get("ahead")
        if ahead and len(ahead["pending"]) == self.world.size:  # the batches sampled ahead, this rank's share
            self.pending = ahead["pending"][self.world.rank]
        elif ahead:  # at another world size the shares differ: sampled again, with the checkpoint's weights
            self.prompts.load_state_dict(ahead["prompts_before"])

    def summary(self, before: dict[str, Any] | None, after: dict[str, Any] | None, seconds: float,
                checkpoint: Path) -> dict[str, Any]:
        """summary.json: the held-out accuracy before and after, and the paired gain with its interval."""
        c = self.config
        summary: dict[str, Any] = {
            "steps": self.step_count, "train_seconds": round(seconds, 1), "model": c.model.name, "task": c.data.train,
            "template": c.data.template, "max_new_tokens": c.eval_max_new_tokens or c.generation.max_new_tokens,
            "eval_decoding": "greedy", "seed": c.seed, "before": _headline(before),
        }
        compared = self.compared(before, after)
        skipped = {"heldout_skipped": self.parts.heldout_skipped} if self.parts.heldout_skipped else {}
        return {**summary, "after": compared["heldout"], **({"gain": compared["gain"]} if "gain" in compared else {}),
                **skipped}

    def compared(self, before: dict[str, Any] | None, after: dict[str, Any] | None) -> dict[str, Any]:
        """An evaluation's held-out accuracy, and its paired gain over `before` (also of the questions alone)."""
        compared: dict[str, Any] = {"heldout": _headline(after)}
        if before and after:
            compared["gain"] = _gain(before, after)
            if "alone" in before and "alone" in after:  # the same questions without the example exchanges
                compared["gain"]["alone"] = _gain(before["alone"], after["alone"])
        return compared


def _gain(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """The paired gain, strict and lenient, with its 95% interval."""
    return {mode: paired_gain_interval(before[f"{mode}_correct"], after[f"{mode}_correct"]).__dict__
            for mode in ("strict", "lenient")}


def _headline(evaluation: dict[str, Any] | None) -> dict[str, Any] | None:
    """An evaluation without its per-problem verdicts and examples (its `alone` part likewise)."""
    if evaluation is None:
        return None
    return {k: _headline(v) if k == "alone" else v for k, v in evaluation.items()
            if not k.endswith("_correct") and k != "examples"}
