"""Training on harness rollouts (`environment.name: file.py:fn`): the rows are the ids the sampler sent and drew,
a trajectory split where its agent rewrote its context shares one advantage and counts once, failures are
unscored or one line, and a run resumes exactly and evaluates with `rlvr eval`."""

import json
import math
from pathlib import Path

import pytest
import torch

from rlvr.config import AlgorithmConfig, RolloutCorrectionConfig
from rlvr.correction import NO_SUMS
from rlvr.distributed.world import SINGLE
from rlvr.errors import UserError
from rlvr.grpo.trainer import Trainer, train_grpo
from rlvr.harness.group import HarnessRollout
from rlvr.harness.rollout import harness_rollout
from rlvr.harness.rows import Segment
from rlvr.records import Example, ScoredRollout, TrainBatch
from rlvr.rl.batch import batch_logprobs, make_batch, micro_batches, outcome_advantages
from rlvr.rl.update import batch_counts, micro_batch_loss
from rlvr.samplers import local as local_sampler

from ..train.resumed import assert_resumes_exactly
from ..train.test_step import tiny_config

AGENTS = Path(__file__).with_name("agents.py")


def agent(name, *extra):
    return [f"environment.name={AGENTS}:{name}", "data.template=chat", "generation.max_new_tokens=6",
            "eval_before=false", "eval_after=false", "sample_every=1", *extra]


@pytest.fixture()
def drawn(monkeypatch):
    """Every completion LocalSampler.complete returns, in order."""
    seen = []
    real = local_sampler.LocalSampler.complete

    def complete(self, jobs, params):
        out = real(self, jobs, params)
        seen.extend(zip(jobs, out))
        return out

    monkeypatch.setattr(local_sampler.LocalSampler, "complete", complete)
    return seen


def rows_of(rollout):
    """Each row's (trajectory, prompt ids, ids after the prompt, model mask, sampler log-probs), padding removed."""
    out = []
    for i, t in enumerate(rollout.trajectory_of_rows.tolist()):
        p = int(rollout.prompt_of_rows[i])
        prompt = rollout.prompt_ids[p][rollout.prompt_mask[p]].tolist()
        mask = rollout.completion_mask[i]
        out.append((t, prompt, rollout.completion_ids[i][mask].tolist(), rollout.model_mask[i][mask].tolist(),
                    rollout.sampling_logprobs[i][mask].tolist()))
    return out


@pytest.mark.parametrize("name, rows", [("keeps_history", 1), ("rewrites_history", 2)])
def test_the_rows_are_the_ids_the_sampler_sent_and_drew(tmp_path, drawn, name, rows):
    trainer = Trainer(tiny_config(tmp_path, *agent(name)))
    source = trainer.source
    rollout = source.sample(source.prompts.next_batch(), 0, source.synced())
    n = rollout.num_prompts * rollout.group_size
    assert rollout.trajectory_of_rows.tolist() == [t for t in range(n) for _ in range(rows)]
    assert len(drawn) == 2 * n  # two turns per trajectory, every one trained
    trained = [(t, ids[k], lp[k]) for t, _, ids, model, lp in rows_of(rollout) for k in range(len(ids)) if model[k]]
    sampled = [tok for _, s in drawn for tok in s.token_ids]
    assert sorted(tok for _, tok, _ in trained) == sorted(sampled)
    for job, s in drawn:  # each turn: its prompt then its draw, inside one row, log-probs as drawn
        whole = [(prompt + ids, lp) for _, prompt, ids, _, lp in rows_of(rollout)]
        hits = [(w, lp) for w, lp in whole if _contains(w, job.ids + s.token_ids)]
        assert hits, "a turn that is in no row"
        w, lp = hits[0]
        start = _find(w, job.ids + s.token_ids) + len(job.ids) - (len(w) - len(lp))
        assert lp[start:start + len(s.token_ids)] == pytest.approx(s.logprobs)
    assert len(rollout.completions) == n and all(info["turns"] == 2 for info in rollout.env_info)


def _find(seq, sub):
    return next(i for i in range(len(seq) - len(sub) + 1) if seq[i:i + len(sub)] == sub)


def _contains(seq, sub):
    return any(seq[i:i + len(sub)] == sub for i in range(len(seq) - len(sub) + 1))


def test_the_trainers_log_probs_of_every_row_equal_the_samplers_split_rows_too(tmp_path):
    trainer = Trainer(tiny_config(tmp_path, *agent("rewrites_history")))
    source = trainer.source
    rollout = source.sample(source.prompts.next_batch(), 0, source.synced())
    ours = batch_logprobs(trainer.policy, rollout, 10_000, trainer.config.generation.temperature)
    mask = rollout.model_mask
    assert mask.sum() > 0
    torch.testing.assert_close(ours[mask], rollout.sampling_logprobs[mask], atol=1e-4, rtol=0)
    # (a micro-batch budget that splits the batch anywhere gives the same)
    small = batch_logprobs(trainer.policy, rollout, 40, trainer.config.generation.temperature)
    torch.testing.assert_close(small[mask], ours[mask], atol=1e-5, rtol=0)
    assert len(micro_batches(rollout, rollout.completion_mask, 40)) > 1


def segment(prompt, parts):
    """A Segment of `parts`: (ids, sampled?) pairs after `prompt`; sampled ids get log-prob -1."""
    s = Segment(prompt_ids=list(prompt))
    for k, (ids, sampled) in enumerate(parts):
        s.ids += ids
        s.turn_of += [k if sampled else -1] * len(ids)
        s.model_mask += [sampled] * len(ids)
        s.logprobs += [-1.0 if sampled else 0.0] * len(ids)
        s.floors += [float("-inf")] * len(ids)
    return s


class Tokens:
    pad_token_id = 0

    def batch_decode(self, rows, skip_special_tokens=True):
        return [" ".join(map(str, r)) for r in rows]

    def decode(self, ids, skip_special_tokens=False):
        return " ".join(map(str, ids))


def split_batch(split):
    """One prompt, G = 2: trajectory 0 has sampled ids [5, 6] then [7, 8, 9] (two rows when `split`, else one
    row with context 3 between), trajectory 1 has [4]; rewards 1 and 0."""
    if split:
        first = [segment([1, 2], [([5, 6], True)]), segment([1, 2, 3], [([7, 8, 9], True)])]
    else:
        first = [segment([1, 2], [([5, 6], True), ([3], False), ([7, 8, 9], True)])]
    runs = [HarnessRollout(first, 1.0), HarnessRollout([segment([1, 2], [([4], True)])], 0.0)]
    rollout = harness_rollout([Example("q")], 2, runs, Tokens())
    rewards = torch.tensor([[1.0, 0.0]])
    return ScoredRollout(rollout, rewards, {"agent_reward": rewards}, {})


def test_a_split_trajectorys_rows_share_its_advantage_and_it_counts_once():
    algo = AlgorithmConfig()
    losses = {}
    for split in (False, True):
        scored = split_batch(split)
        advantages = outcome_advantages(scored, algo)
        rollout = scored.rollout
        assert rollout.completion_ids.shape[0] == (3 if split else 2)
        seen = {}
        for i, t in enumerate(rollout.trajectory_of_rows.tolist()):
            seen.setdefault(t, set()).update(advantages[i][rollout.model_mask[i]].tolist())
        assert {t: len(v) for t, v in seen.items()} == {0: 1, 1: 1}  # one advantage on every row of a trajectory
        assert seen[0].pop() == pytest.approx(1.0, abs=1e-3) and seen[1].pop() == pytest.approx(-1.0, abs=1e-3)
        loss_mask = rollout.model_mask.clone()
        batch = TrainBatch(scored, advantages, None, None, loss_mask)
        counts = batch_counts(batch, SINGLE)
        assert counts == (2, 6)  # two trajectories, six trained tokens: the split adds no sequence
        # log π_θ: each trained token's log-prob is its id / -10 (the same token, the same value in both layouts)
        logprobs = (rollout.completion_ids.float() / -10).requires_grad_()
        total = 0.0
        for mb in micro_batches(rollout, loss_mask, 10_000):
            lp = logprobs[mb.rows, :mb.completion_ids.shape[1]]
            total += float(micro_batch_loss(batch, mb, lp, algo, counts=counts, max_new_tokens=8).loss)
        losses[split] = total
    assert losses[True] == pytest.approx(losses[False], abs=1e-6)


def test_a_trajectory_with_no_trained_token_is_no_sequence_of_the_loss():
    """sequence_mean's count: trajectories with a trained token (one token is enough; none is not)."""
    scored = split_batch(True)
    mask = scored.rollout.model_mask.clone()
    batch = TrainBatch(scored, outcome_advantages(scored, AlgorithmConfig()), None, None, mask)
    assert batch_counts(batch, SINGLE) == (2, 6)  # (trajectory 1 has one token)
    mask[2] = False  # trajectory 1's one row
    assert batch_counts(batch, SINGLE) == (1, 5)


SEQUENCE_LEVEL = {"gspo": AlgorithmConfig(policy_loss="gspo", beta=0.0),
                  "sequence correction": AlgorithmConfig(beta=0.0, rollout_correction=RolloutCorrectionConfig(
                      level="sequence", mode="truncate", threshold=10.0))}


@pytest.mark.parametrize("objective", SEQUENCE_LEVEL)
@pytest.mark.parametrize("budget", [10_000, 1])  # (1: every micro-batch as small as the rows allow)
def test_a_sequence_level_ratio_is_a_split_trajectorys_not_each_rows(objective, budget):
    """GSPO's s_i (the geometric mean of the ratios over a trajectory's tokens) and the sequence-level rollout
    correction's w_i (their product, π_old / π_sampler) are the trajectory's: the same loss, and the same
    correction statistics, whether its tokens are one row or two; its rows never in different micro-batches."""
    algo = SEQUENCE_LEVEL[objective]
    losses, stats = {}, {}
    for split in (False, True):
        scored = split_batch(split)
        rollout, advantages = scored.rollout, outcome_advantages(scored, algo)
        logprobs = (rollout.completion_ids.float() / -10).requires_grad_()  # log π_θ: the token's id / -10
        old = logprobs.detach() + rollout.completion_ids.float() / 100 - 0.05  # (ratios unequal within a row)
        batch = TrainBatch(scored, advantages, old, None, rollout.model_mask.clone())
        counts, sums = batch_counts(batch, SINGLE), dict(NO_SUMS) if objective == "sequence correction" else None
        runs = micro_batches(rollout, batch.loss_mask, budget)
        if split:  # (rows 0 and 1 are trajectory 0's)
            assert [1 in mb.rows.tolist() for mb in runs if 0 in mb.rows.tolist()] == [True]
        losses[split] = sum(float(micro_batch_loss(batch, mb, logprobs[mb.rows, :mb.completion_ids.shape[1]], algo,
                                                   counts=counts, max_new_tokens=8, sums=sums).loss) for mb in runs)
        stats[split] = sums
    assert losses[True] == pytest.approx(losses[False], abs=1e-6) and losses[True] != 0.0
    if objective == "sequence correction":
        assert stats[True] == pytest.approx(stats[False], abs=1e-5) and stats[True]["n"] == 2  # (two trajectories)


def test_mask_truncated_leaves_out_every_row_of_a_trajectory_whose_last_turn_was_cut():
    scored = split_batch(True)
    runs = scored.rollout
    cut = [segment([1, 2], [([5, 6], True)]), segment([1, 2, 3], [([7, 8, 9], True)])]
    cut[-1].truncated = True
    rollout = harness_rollout([Example("q")], 2, [HarnessRollout(cut, 1.0), HarnessRollout(
        [segment([1, 2], [([4], True)])], 0.0)], Tokens())
    assert runs.trajectory_of_rows.tolist() == rollout.trajectory_of_rows.tolist() == [0, 0, 1]
    assert rollout.truncated.tolist() == [False, True, False]  # (only the last row's turn was cut)
    scored = ScoredRollout(rollout, scored.rewards, scored.reward_components, {})
    algo = AlgorithmConfig(mask_truncated=True, beta=0.0)
    batch = make_batch(scored, outcome_advantages(scored, algo), policy=None, algo=algo, micro_batch_tokens=100,
                       temperature=1.0, kl_penalty=False)
    assert batch.loss_mask.any(dim=1).tolist() == [False, False, True]


def test_a_trajectory_with_no_turns_keeps_an_empty_unscored_row():
    runs = [HarnessRollout([segment([1, 2], [([5], True)])], 1.0), HarnessRollout([], None, error="it raised")]
    rollout = harness_rollout([Example("q")], 2, runs, Tokens())
    assert rollout.trajectory_of_rows.tolist() == [0, 1] and rollout.prompt_of_rows.tolist() == [0, 0]
    assert rollout.completion_mask[1].sum() == 0 and rollout.env_rewards == [1.0, None]
    assert rollout.completions == ["5", ""] and rollout.transcripts[1][-1] == {"role": "error", "content": "it raised"}
    assert rollout.transcripts[0][0]["role"] == "prompt" and rollout.transcripts[1][0]["role"] == "error"


def test_a_harness_run_trains_logs_its_agent_and_resumes_exactly(tmp_path):
    assert_resumes_exactly(tmp_path, *agent("keeps_history"))
    lines = [json.loads(x) for x in (tmp_path / "a" / "run" / "metrics.jsonl").read_text().splitlines()]
    assert len(lines) == 3 and all(line["env/turns"] == 2 and line["env/rows"] == 1 and "env/chars" in line
                                   for line in lines)
    assert all("reward/agent_reward/mean" in line and line["reward/std"] > 0 for line in lines)
    assert any(line["grad_norm"] > 0 for line in lines)


def test_an_async_openai_agent_trains_and_resumes_exactly(tmp_path):
    pytest.importorskip("openai")
    assert_resumes_exactly(tmp_path, *agent("with_openai"))


def test_agent_mistakes_are_one_line(tmp_path):
    with pytest.raises(UserError, match=r"cannot be called as fn\(link, row\)"):
        Trainer(tiny_config(tmp_path / "a", *agent("takes_one_argument")))
    with pytest.raises(UserError, match=r"8 of 8 runs of the agent function '.*agents.py:always_raises' failed "
                                        r"\(the first raised RuntimeError: the agent's own bug\): fix the agent"):
        train_grpo(tiny_config(tmp_path / "b", *agent("always_raises")))


def test_a_micro_batch_of_a_failed_runs_empty_row_alone_trains(tmp_path):
    """With a token budget of 1 each row is a micro-batch of its own, the empty rows of failed runs too: their
    backward runs (zero gradients), and the step's sampler statistics read only the answered rows' tokens."""
    step = Trainer(tiny_config(tmp_path, *agent("raises_every_other_time"), "optim.micro_batch_tokens=1")).step()
    assert step.metrics["env/errors"] == 0.5 and step.metrics["reward/unscored"] == 4
    assert step.metrics["update/skipped"] == 0 and 0 < step.metrics["grad_norm"] < math.inf
    assert 0 <= step.metrics["sampler/logp_abs_diff_max"] < 1e-3


def test_sys_exit_in_an_agent_is_one_line_with_the_finished_steps_saved(tmp_path):
    """sys.exit in an agent function ends the step, not the process (its SystemExit crossed the harness's
    future.result() before): one line naming it, and step 1's checkpoint kept."""
    from rlvr import paths

    config = tiny_config(tmp_path / "run", *agent("exits_at_the_second_step"), "max_steps=3")
    with pytest.raises(UserError, match=r"agents.py:exits_at_the_second_step' called sys.exit\(7\) \(a run is stopped"):
        train_grpo(config)
    assert paths.latest_checkpoint(Path(config.output_dir)) == paths.step_dir(Path(config.output_dir), 1)


def test_a_sampler_failing_under_the_agents_is_said_to_be_the_endpoints_not_the_agents(tmp_path, monkeypatch):
    from rlvr.samplers import LocalSampler

    def broken(self, jobs, params):
        raise ValueError("the engine broke")
    monkeypatch.setattr(LocalSampler, "complete", broken)
    with pytest.raises(UserError, match=r"8 of 8 runs of the agent function .* failed while the policy's endpoint "
                                        r"failed under them \(8 requests answered with an error; the first: "
                                        r"ValueError: the engine broke\)$"):
        train_grpo(tiny_config(tmp_path, *agent("keeps_history")))


def test_rlvr_eval_judges_each_runs_last_message(tmp_path, drawn):
    from rlvr.cli import main
    from rlvr.evaluate.store import EvalStore
    from rlvr.models import build_tiny_tokenizer

    args = ["eval", "--model", "tiny", "--data", "arithmetic", "--limit", "2", "--samples", "2", "--max-new-tokens",
            "6", "--set", f"environment.name={AGENTS}:rewrites_history", "--set", "data.template=chat",
            "--output-dir", str(tmp_path / "e")]
    assert main(args) == 0
    assert len(drawn) == 2 * 2 * (1 + 2)  # two turns of the greedy run and of each sample, for two problems
    tokenizer = build_tiny_tokenizer()
    second = [tokenizer.decode(s.token_ids, skip_special_tokens=True) for job, s in drawn
              if "go on" in tokenizer.decode(job.ids)]  # (the second turn's prompt is the agent's summary)
    judged = [x for r in EvalStore(tmp_path / "e").read() for x in [r.greedy, *r.samples]]
    assert len(judged) == 6 and len(second) == 6
    assert sorted(x.text for x in judged) == sorted(second)


def test_an_openai_agent_with_a_tool_trains_resumes_exactly_and_evaluates(tmp_path, calls_the_tool):
    pytest.importorskip("openai")
    from rlvr.cli import main

    assert_resumes_exactly(tmp_path, *agent("calculator"))
    lines = [json.loads(x) for x in (tmp_path / "a" / "run" / "metrics.jsonl").read_text().splitlines()]
    assert all(line["env/calls"] >= 1 and line["env/turns"] >= 2 and line["env/errors"] == 0 for line in lines)
    group = json.loads((tmp_path / "a" / "run" / "samples.jsonl").read_text().splitlines()[0])
    transcript = group["transcripts"]
    assert "<tool_response>" in transcript[0][1]["content"] or "5" in transcript[0][1]["content"]
    # what the agent sent, as the model read it (its chat template's rendering), not the dataset's row
    assert transcript[0][0]["role"] == "prompt" and group["prompt"] == transcript[0][0]["content"]
    assert group["prompt"].startswith("<|im_start|>")
    assert main(["eval", "--model", "tiny", "--data", "arithmetic", "--limit", "2", "--samples", "2",
                 "--max-new-tokens", "6", "--set", f"environment.name={AGENTS}:calculator", "--set",
                 "data.template=chat", "--output-dir", str(tmp_path / "e")]) == 0


def test_dynamic_sampling_keeps_a_split_trajectorys_rows_with_their_group():
    from rlvr.rl.dynamic import concat_scored, take_groups

    runs = [HarnessRollout([segment([1, 2], [([5], True)])], 1.0),
            HarnessRollout([segment([1, 2], [([6], True)])], 0.0),
            HarnessRollout([segment([3], [([7], True)]), segment([3, 4], [([8, 9], True)])], 1.0,
                           turn_rewards={0: 0.5}),
            HarnessRollout([segment([3], [([4], True)])], 0.0)]
    rollout = harness_rollout([Example("p"), Example("q")], 2, runs, Tokens())
    rewards = torch.tensor([[1.0, 0.0], [1.0, 0.0]])
    scored = ScoredRollout(rollout, rewards, {"agent_reward": rewards}, {})
    second = take_groups(scored, [1]).rollout
    assert second.trajectory_of_rows.tolist() == [0, 0, 1] and second.prompt_of_rows.tolist() == [0, 1, 2]
    assert [r[m].tolist() for r, m in zip(second.completion_ids, second.model_mask)] == [[7], [8, 9], [4]]
    again = concat_scored([take_groups(scored, [0]), take_groups(scored, [1])]).rollout
    assert again.trajectory_of_rows.tolist() == rollout.trajectory_of_rows.tolist()
    assert again.completions == rollout.completions
    # (each token's turn, and the rewards reported for turns, travel with their trajectories)
    assert again.row_turns.tolist() == rollout.row_turns.tolist() == [[0, -1], [0, -1], [0, -1], [0, 0], [0, -1]]
    assert second.turn_rewards == [{0: 0.5}, {}] and again.turn_rewards == rollout.turn_rewards


def test_dynamic_sampling_trains_on_harness_rollouts(tmp_path):
    summary = train_grpo(tiny_config(tmp_path, *agent("rewrites_history"), "sampling.dynamic_sampling=true"))
    assert summary["steps"] == 2


@pytest.mark.parametrize("name", ["openai_agents_sdk", "anthropic_tool_loop"])
def test_an_sdk_agent_trains_two_steps_unchanged(tmp_path, calls_then_answers, name):
    """An OpenAI Agents SDK Runner (the Responses API) and an anthropic SDK tool loop (the Messages API), each as
    its docs write it, the rollout's URL and key all rlvr gives: two steps, every run scored, one row each."""
    pytest.importorskip("agents" if name == "openai_agents_sdk" else "anthropic")
    from rlvr.grpo.trainer import train_grpo

    train_grpo(tiny_config(tmp_path, *agent(name, "rewards=[{name: agent_reward}]", "generation.max_new_tokens=64")))
    lines = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert len(lines) == 2 and all(m["env/errors"] == 0 and m["env/rows"] == 1 and m["env/turns"] == 2
                                   for m in lines)
