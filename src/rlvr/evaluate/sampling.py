"""Sample and judge one chunk of problems: greedy + n completions each, verdicts, votes, budgets, scores.

Every completion is judged by both verifiers (strict and lenient extraction). For the
accuracy-vs-thinking-length curve it is also judged cut to each token budget; a completion that
ended within the budget keeps its verdict, so only longer ones are judged again.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from rlvr.config.choices import MODES
from rlvr.evaluate.benchmarks import Benchmark
from rlvr.evaluate.records import ProblemRecord, SampleRecord
from rlvr.records import Example, Rollout
from rlvr.rewards import RewardSpec, compute_rewards
from rlvr.rewards.batch import completion_token_ids, completion_truncated, reward_inputs
from rlvr.rewards.math import gold_answer
from rlvr.rollout import SamplingParams
from rlvr.samplers import Prompt, Sampler, SampleRequest
from rlvr.seeds import seed_of


class Scorer(Protocol):
    """Ranks completions for best-of-N: a reward model or a process reward model."""

    def score(self, prompts: list[Any], completions: list[str]) -> list[float]: ...


@dataclass(frozen=True)
class Plan:
    """What to sample for every problem."""

    samples: int  # n
    params: SamplingParams
    greedy: bool
    budgets: tuple[int, ...]  # ascending token budgets for the thinking-length curve


@torch.no_grad()
def sample_problems(
    sampler: Sampler,
    tokenizer: Any,
    benchmark: Benchmark,
    prompts: list[Prompt],
    plan: Plan,
    seed: int,
    scorer: Scorer | None = None,
) -> list[ProblemRecord]:
    """The records of `prompts`: sampled by `sampler` (sample j of a problem from the seed of (seed, its row,
    j) alone, whatever chunk or rank it is sampled in), judged, and scored by `scorer`."""
    verifiers = _verifier_specs(benchmark)
    greedy: list[SampleRecord | None] = [None] * len(prompts)
    if plan.greedy:
        params = SamplingParams(max_new_tokens=plan.params.max_new_tokens, temperature=0.0)
        out = sampler.sample([SampleRequest(p, (seed_of(seed, p.example.index, 0),)) for p in prompts], params)
        greedy = list(_judge(out, tokenizer, benchmark, verifiers, plan.budgets, None))
    sampled: list[SampleRecord] = []
    n = plan.samples
    if n:  # (0: the greedy completion only)
        out = sampler.sample([SampleRequest(p, tuple(seed_of(seed, p.example.index, 1, j) for j in range(n)))
                              for p in prompts], plan.params)
        sampled = _judge(out, tokenizer, benchmark, verifiers, plan.budgets, scorer)
    return [
        ProblemRecord(id=benchmark.problem_id(p.example), index=p.example.index, prompt=p.text,
                      gold=_gold(p.example), greedy=greedy[i], samples=sampled[i * n:(i + 1) * n])
        for i, p in enumerate(prompts)
    ]


def _judge(out: Rollout, tokenizer: Any, benchmark: Benchmark, verifiers: list[RewardSpec],
           budgets: Sequence[int], scorer: Scorer | None) -> list[SampleRecord]:
    """One SampleRecord per completion of `out`, in row order."""
    rows = [ex for ex in out.examples for _ in range(out.group_size)]
    if out.env_rewards is not None:  # (what each run's environment or agent scored: agent_passed reads it)
        rows = [dataclasses.replace(ex, columns={**ex.columns, "env_reward": r})
                for ex, r in zip(rows, out.env_rewards)]
    ids = completion_token_ids(out)
    verdicts = _verdicts(verifiers, rows, out.completions, ids)
    by_budget = {mode: [[v] * len(budgets) for v in verdicts[mode]] for mode in MODES}
    for j, budget in enumerate(budgets):
        longer = [i for i, tokens in enumerate(ids) if len(tokens) > budget]
        if not longer:
            continue
        cut = [ids[i][:budget] for i in longer]
        texts = tokenizer.batch_decode(cut, skip_special_tokens=True)
        cut_verdicts = _verdicts(verifiers, [rows[i] for i in longer], texts, cut)
        for mode in MODES:
            for i, v in zip(longer, cut_verdicts[mode]):
                by_budget[mode][i][j] = v
    scores = scorer.score([ex.prompt for ex in rows], out.completions) if scorer else [None] * len(rows)
    key = benchmark.vote_key
    return [
        SampleRecord(
            text=text, tokens=len(tokens), truncated=bool(truncated),
            correct={mode: verdicts[mode][i] for mode in MODES},
            answer={mode: key(text, mode) if key else None for mode in MODES},
            budget_correct={mode: by_budget[mode][i] for mode in MODES},
            score=None if (score := scores[i]) is None else float(score),
        )
        for i, (text, tokens, truncated) in enumerate(zip(out.completions, ids, completion_truncated(out)))
    ]


def _verifier_specs(benchmark: Benchmark) -> list[RewardSpec]:
    """The strict and the lenient verifier, named as messages name them (a reward of yours judging: its
    `file.py:function`); one, called once, where one judges both (your reward, a puzzle's check)."""
    names, fns = (benchmark.scoring.strict, benchmark.scoring.lenient), benchmark.verifiers()
    if names[0] == names[1]:
        return [RewardSpec(names[0], fns[0])]
    return [RewardSpec(name, fn) for name, fn in zip(names, fns)]


def _verdicts(verifiers: list[RewardSpec], rows: list[Example], texts: list[str],
              ids: list[list[int]]) -> dict[str, list[float | None]]:
    """mode -> each completion's verdict (1.0 / 0.0 / None)."""
    result = compute_rewards(verifiers, **reward_inputs(rows, 1, texts, ids))
    strict, lenient = verifiers[0].name, verifiers[-1].name  # (one judging both: the same verdicts twice)
    return {mode: result.components[name] for mode, name in zip(MODES, (strict, lenient))}


def _gold(example: Example) -> Any:
    """The reference answer to show in the records (code problems show none: their tests are the gold)."""
    if "answer" in example.columns:
        return gold_answer(example.columns["answer"])  # GSM8K's worked solution -> its final number
    return example.columns.get("target")
