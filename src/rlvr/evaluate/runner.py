"""`rlvr eval`: sample n completions per problem, judge them, and write the results (see store.py).

Problems are taken in fixed chunks of batch_size // samples, sampled through the configured sampler
(rlvr.samplers: rlvr's own engine or vLLM): sample j of a problem draws from the seed of (seed, the
problem's row, j) alone (rlvr.seeds). A chunk's records are on disk before the next starts, so an
interrupted evaluation resumes where it stopped and gives the same numbers as one that never stopped.

Under torchrun the ranks take turns: rank r samples chunks r, r + N, ... and rank 0 writes every
chunk's records, in order. A chunk's numbers do not depend on which rank sampled it.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import sys
import time
from pathlib import Path
from typing import Any

import torch

from rlvr.config import EvalConfig, ProblemsConfig
from rlvr.console import progress as progress_bar
from rlvr.data import find_task, render_prompt, with_few_shot
from rlvr.data.lengths import budget_words, prompt_limit, refuse_too_long
from rlvr.distributed.world import World, barrier, gather_across, join
from rlvr.envs.loading import load_agent
from rlvr.errors import UserError
from rlvr.evaluate.benchmarks import Benchmark, describe, load_benchmark
from rlvr.evaluate.judge import judged_by
from rlvr.evaluate.records import ProblemRecord
from rlvr.evaluate.report import write_report
from rlvr.evaluate.sampling import Plan, Scorer, sample_problems
from rlvr.evaluate.store import EvalStore
from rlvr.evaluate.summary import summarise
from rlvr.harness.sampler import over_episodes
from rlvr.models import load_configured
from rlvr.models.devices import autocast, compute_dtype, precision, resolve_device
from rlvr.models.identity import model_identity
from rlvr.rollout import SamplingParams
from rlvr.run.samplers import push_weights, rank_sampler
from rlvr.samplers import Prompt, Sampler

DEFAULT_K = (1, 4, 16, 64)


def run_eval(config: EvalConfig, scorer: Scorer | None = None, progress: bool = True) -> dict[str, Any]:
    """Evaluate `config.model` on `config.data`; returns the summary (also in DIR/summary.json).

    `scorer` overrides the one the config names (for programmatic use and tests).
    """
    config.validate()
    if config.threads > 0:
        torch.set_num_threads(config.threads)
    d = config.data
    benchmark = load_benchmark(d.name, data_dir=d.dir, limit=d.limit, seed=config.seed, difficulty=d.difficulty,
                               instruction=d.instruction, judged=config.reward is not None)
    if config.reward is not None:  # a reward of yours judges the answers (rlvr.evaluate.judge)
        benchmark = judged_by(benchmark, config.reward, chat=(d.template or benchmark.template) == "chat")
    if not benchmark.examples:
        raise UserError(f"{d.name} has no problems to evaluate (check --limit and the data file)")
    settings = eval_settings(config, benchmark)
    store = EvalStore(Path(config.output_dir))
    records = sample_into_store(config, benchmark, settings, store, scorer, progress)
    summary = summarise(records, settings)
    if World.from_env().is_main:
        write_report(store, summary, records)
    completions = [s for r in records for s in [*r.samples, r.greedy] if s is not None]
    if config.reward is not None and all(s.correct["strict"] is None for s in completions):
        raise UserError(f"the reward {config.reward.name} judged none of the {len(completions)} completions (it "
                        "returned None or NaN for every one), so there is no accuracy to give: fix it, or check the "
                        f"columns it reads (samples.jsonl in {config.output_dir} shows what it was given)")
    return summary


def sample_into_store(config: EvalConfig, benchmark: Benchmark, settings: dict[str, Any], store: EvalStore,
                      scorer: Scorer | None = None, progress: bool = True) -> list[ProblemRecord]:
    """Every problem's record, in `benchmark` order: those `store` holds (sampled under the same
    `settings`, else a UserError) as stored, the others sampled now and appended chunk by chunk.

    Shared by `rlvr eval` and `rlvr sample` (rejection sampling), so both resume the same way.
    Under torchrun, every rank of the world its environment describes samples a share of the chunks.
    """
    world = World.from_env()
    join(world, resolve_device(config.model.device))
    done = gather_across(store.open(settings) if world.is_main else None, world)[0]  # rank 0's store
    assert done is not None  # rank 0 is the main rank, which opened it
    ids = [benchmark.problem_id(ex) for ex in benchmark.examples]
    if any(i not in done for i in ids):
        _sample_missing(config, benchmark, settings, store, done, ids, scorer, progress, world)
    barrier(world)
    finished = {r.id: r for r in store.read()}
    return [finished[i] for i in ids]


def eval_settings(config: EvalConfig, benchmark: Benchmark) -> dict[str, Any]:
    """Everything that decides the numbers, recorded with them (template and extraction move scores by tens
    of points)."""
    d, gen = config.data, config.generation
    max_tokens = gen.max_new_tokens or benchmark.max_new_tokens
    halvings = [max_tokens >> i for i in range(6)]  # default: the budget and five halvings of it
    budgets = sorted({b for b in (config.budgets or halvings) if 0 < b <= max_tokens} | {max_tokens})
    if config.environment.name:  # a transcript holds the environment's tokens too: no thinking-length curve
        budgets = [config.environment.max_tokens]
    return {
        "model": config.model.name,
        "model_files": model_identity(config.model.name, config.model.cache_dir),  # (a run folder's weights move)
        **describe(benchmark),
        "limit": d.limit,
        **({"instruction": d.instruction} if d.instruction is not None else {}),  # (older results lack the key)
        "template": d.template or benchmark.template,
        "system_prompt": d.system_prompt,
        "few_shot": [list(shot) for shot in _few_shot(benchmark, d)],
        "max_new_tokens": max_tokens,
        "temperature": gen.temperature,
        "top_p": gen.top_p,
        **({"top_k": gen.top_k} if gen.top_k else {}),  # recorded only when set: older results lack the key
        **_precision(config),
        "samples": config.samples,
        "k": (list(config.k) if config.k is not None
              else sorted({k for k in DEFAULT_K if k <= config.samples} | {config.samples}) if config.samples
              else []),
        "greedy": config.greedy,
        "seed": config.seed,
        "difficulty": d.difficulty if find_task(benchmark.name) is not None else None,
        "batch_size": config.batch_size,
        "budgets": budgets,
        "voting": benchmark.vote_key is not None,
        # recorded only when set: older results lack the key
        **({"reward_params": config.reward.params} if config.reward is not None and config.reward.params else {}),
        "reward_model": config.reward_model,
        "process_reward_model": config.process_reward_model,
        # recorded only when set: older results lack the key
        **({"environment": dataclasses.asdict(config.environment)} if config.environment.name else {}),
        "verifier_version": verifier_version(),
    }


def _precision(config: EvalConfig) -> dict[str, str]:
    """Where and in what precision the model samples, when that is not the CPU in fp32 (older results,
    all sampled there, lack the keys): a resumed evaluation never mixes the two."""
    device = resolve_device(config.model.device)
    dtype = compute_dtype(config.model.dtype, device)
    return {} if device.type == "cpu" and dtype == torch.float32 else {"device": device.type, "dtype": str(dtype)}


def verifier_version() -> str:
    """The code that judged the answers: rlvr's and math-verify's versions."""
    try:
        math_verify = importlib.metadata.version("math-verify")
    except importlib.metadata.PackageNotFoundError:
        math_verify = "absent"
    return f"rlvr {importlib.metadata.version('rlvr')}; math-verify {math_verify}"


def _few_shot(benchmark: Benchmark, d: ProblemsConfig) -> tuple[tuple[str, str], ...]:
    """The examples given (`data.examples`), else a built-in task's own (benchmarks are zero-shot); none
    when told not to (`data.few_shot: false`)."""
    if not d.few_shot:
        return ()
    if d.examples is not None:
        return tuple((turn.prompt, turn.completion) for turn in d.examples)
    task = find_task(benchmark.name)
    return task.few_shot if task is not None else ()


def _sample_missing(config: EvalConfig, benchmark: Benchmark, settings: dict[str, Any], store: EvalStore,
                    done: dict[str, ProblemRecord], ids: list[str], scorer: Scorer | None, progress: bool,
                    world: World) -> None:
    model, tokenizer, device, dtype = load_configured(config.model, config.seed)
    model.eval()
    scorer = scorer or _configured_scorer(config)
    prompts = _prompts(config, benchmark, settings, tokenizer)
    specials = settings["template"] != "chat"  # the chat template writes its own special tokens
    budget = settings["max_new_tokens"]
    chosen = None if config.generation.max_new_tokens else f"the default for {benchmark.name}"
    refuse_too_long([p.text for p in prompts], [f"problem {i}" for i in ids], tokenizer, prompt_limit(model, budget),
                    add_special_tokens=specials, why=budget_words(model, budget, chosen),
                    fix="lower the completion budget with --max-new-tokens (generation.max_new_tokens)")
    plan = Plan(samples=config.samples, greedy=config.greedy, budgets=tuple(settings["budgets"]),
                params=SamplingParams(max_new_tokens=settings["max_new_tokens"],
                                      temperature=config.generation.temperature,
                                      top_p=config.generation.top_p, top_k=config.generation.top_k))
    def decoding(fn: Any) -> Any:  # (in the configured precision; the model is in eval mode already)
        with autocast(device, dtype):
            return fn(model)

    def weights() -> Any:
        return iter(model.state_dict().items())

    env = config.environment
    agent = load_agent(env.name, env.params)
    engine = rank_sampler(config.generation, world, model=model, decoding=decoding, weights=weights,
                          tokenizer=tokenizer, device=device, dtype=dtype, add_special_tokens=specials,
                          seed=config.seed)
    sampler = over_episodes(engine, env, tokenizer, model, agent)
    if world.is_main:  # (once the problems have passed their checks: a mistake is one line)
        print(f"rlvr: precision {precision(config.model.dtype, device)[1]}", file=sys.stderr)
    try:
        push_weights(sampler, weights, 0, world)
        _sample_chunks(config, benchmark, sampler, tokenizer, prompts, plan, store, done, ids, scorer, progress, world)
    finally:
        sampler.close()


def _sample_chunks(config: EvalConfig, benchmark: Benchmark, sampler: Sampler, tokenizer: Any, prompts: list[Prompt],
                   plan: Plan, store: EvalStore, done: dict[str, ProblemRecord], ids: list[str], scorer: Scorer | None,
                   progress: bool, world: World) -> None:
    per_chunk = max(1, config.batch_size // max(1, config.samples))
    chunks = [slice(start, start + per_chunk) for start in range(0, len(ids), per_chunk)]
    todo = [c for c, chunk in enumerate(chunks) if any(i not in done for i in ids[chunk])]
    bar = progress_bar(total=len(ids), initial=sum(i in done for i in ids), desc=f"sample {benchmark.name}",
                       unit="problem", disable=not (progress and world.is_main))
    started = time.perf_counter()
    for turn in range(0, len(todo), world.size):  # one chunk per rank and turn
        records: list[ProblemRecord] = []
        if turn + world.rank < len(todo):
            c = todo[turn + world.rank]
            records = sample_problems(sampler, tokenizer, benchmark, prompts[chunks[c]], plan, config.seed, scorer)
        for part in gather_across(records, world):
            if world.is_main:
                store.append([r for r in part if r.id not in done])
            bar.update(sum(r.id not in done for r in part))
    bar.close()
    if progress and world.is_main:
        print(f"sampled in {time.perf_counter() - started:.0f} s")


def _prompts(config: EvalConfig, benchmark: Benchmark, settings: dict[str, Any], tokenizer: Any) -> list[Prompt]:
    """Each problem as it is asked: its rendered prompt and, with an environment (which converses in chat
    turns, as `rlvr train` samples with one), its chat turns."""
    shots = [tuple(shot) for shot in settings["few_shot"]]
    system = [{"role": "system", "content": config.data.system_prompt}] if config.data.system_prompt else []
    prompts = []
    for ex in benchmark.examples:
        asked = with_few_shot(ex.prompt, shots)
        chat = [*system, *([{"role": "user", "content": asked}] if isinstance(asked, str) else asked)]
        prompts.append(Prompt(ex, render_prompt(asked, template=settings["template"], tokenizer=tokenizer,
                                                system_prompt=config.data.system_prompt),
                              chat if config.environment.name else None))
    return prompts


def _configured_scorer(config: EvalConfig) -> Scorer | None:
    """The reward or process-reward model named by the config, if any."""
    if not (config.reward_model or config.process_reward_model):
        return None
    from rlvr.rewards.reward_model import ProcessRewardScorer, RewardModelScorer

    if config.reward_model:
        return RewardModelScorer.from_path(config.reward_model)
    assert config.process_reward_model is not None  # (the first check: one of the two is set)
    return ProcessRewardScorer(config.process_reward_model)
