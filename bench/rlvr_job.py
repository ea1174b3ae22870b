"""rlvr's GRPO on the benchmark job (run by bench/grpo_vs_trl.py in its own process, for a clean peak RSS).

    python bench/rlvr_job.py JOB.json RESULT.json
"""

import json
import resource
import shutil
import sys

from rlvr.config import load_config
from rlvr.grpo.trainer import train_grpo


def job_config(job: dict):
    """The benchmark job as an rlvr TrainConfig."""
    return load_config(None, job_overrides(job), max_steps=job["steps"])


def job_overrides(job: dict) -> list[str]:
    """The benchmark job as `rlvr train --set` settings."""
    g = job["group_size"]
    return [
        f"model.name={job['model']}", f"data.train={job['data']}", "data.few_shot=[]", "data.template=chat",
        "rewards=[{name: math_accuracy}]", f"sampling.group_size={g}",
        f"sampling.batch_size={g * job['prompts_per_step']}",
        f"generation.max_new_tokens={job['max_new_tokens']}", f"generation.temperature={job['temperature']}",
        f"optim.lr={job['lr']}", f"algorithm.beta={job['beta']}", f"seed={job['seed']}", f"threads={job['threads']}",
        "eval_before=false", "eval_after=false", "sample_every=0", f"output_dir={job['output_dir']}",
        # adapters with 384-token micro-batches, rlvr's low-memory setting since 87889c3 (bench/step_memory.py
        # measured 256 tokens before it: peak 2.3 GB, update no slower than with 512 tokens at 3.1 GB; activation
        # checkpointing, TRL's default, costs rlvr the shared-prompt pass: 5.8 GB with 2048 tokens, 2.5 GB with 512)
        *([f"model.lora={{rank: {job['lora']['rank']}, alpha: {job['lora']['alpha']}}}",
           "optim.micro_batch_tokens=384"] if job.get("lora") else []),
        *job.get("overrides", []),  # rlvr-only settings under test, e.g. optim.micro_batch_tokens=512
    ]


def main():
    job = json.load(open(sys.argv[1]))
    shutil.rmtree(job["output_dir"], ignore_errors=True)  # metrics.jsonl must hold this run's steps only
    train_grpo(job_config(job))
    metrics = [json.loads(line) for line in open(f"{job['output_dir']}/metrics.jsonl")]
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    json.dump({"step_seconds": [m["step_seconds"] for m in metrics],
               "mean_lengths": [m["completion_length/mean"] for m in metrics],
               "peak_rss_bytes": peak_kb * 1024}, open(sys.argv[2], "w"))


if __name__ == "__main__":
    main()
