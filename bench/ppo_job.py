"""rlvr's PPO baseline on the benchmark job (run by bench/ppo_vs_grpo.py in its own process).

    python bench/ppo_job.py JOB.json RESULT.json
"""

import json
import resource
import sys
import time

from rlvr.ppo.trainer import PPOTrainer
from rlvr.run.process import configure_process

sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
from rlvr_job import job_config


def main():
    job = json.load(open(sys.argv[1]))
    config = job_config(job)
    configure_process(config.threads, config.seed)
    ppo = PPOTrainer(config)
    seconds, lengths = [], []
    for _ in range(job["steps"]):
        start = time.perf_counter()
        lengths.append(ppo.step().metrics["completion_length/mean"])
        seconds.append(time.perf_counter() - start)
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    json.dump({"step_seconds": seconds, "mean_lengths": lengths, "peak_rss_bytes": peak_kb * 1024},
              open(sys.argv[2], "w"))


if __name__ == "__main__":
    main()
