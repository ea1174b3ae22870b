"""TRL's GRPOTrainer on the benchmark job (run by bench/grpo_vs_trl.py with bench/.venv-trl's python).

    python bench/trl_job.py JOB.json RESULT.json

JOB.json: {"model": dir, "data": jsonl of {prompt (text or chat messages), answer}, "steps", "group_size",
"prompts_per_step", "max_new_tokens", "temperature", "lr", "beta", "seed", "threads", optionally
"lora": {"rank", "alpha"}} and, for bench/learning_vs_trl.py, "output_dir", "save_every" (save the model
every N steps), "rewards": "rlvr" (rlvr's math_accuracy and 0.1 x boxed_format, importable through
PYTHONPATH, instead of the regex below), "loss_type", "epsilon", "adam_betas", "max_grad_norm", "scheduler".
RESULT.json gets the seconds of every step, the mean completion length TRL logged for it, and the
process's peak RSS.
"""

import json
import re
import resource
import sys
import time

import torch
from datasets import load_dataset
from transformers import TrainerCallback
from trl import GRPOConfig, GRPOTrainer

BOXED = re.compile(r"\\boxed\{([^{}]*)\}")


def accuracy(completions, answer, **kwargs):
    """1.0 when the last \\boxed{} holds the gold number (the rule rlvr's math_accuracy applies here)."""
    out = []
    for completion, gold in zip(completions, answer):
        text = completion[-1]["content"] if isinstance(completion, list) else completion
        boxes = BOXED.findall(text)
        out.append(float(bool(boxes) and boxes[-1].strip() == str(gold)))
    return out


def learning_settings(job):
    """GRPOConfig settings beyond the speed job's: checkpoints and the objective's details."""
    settings = {"save_strategy": "steps", "save_steps": job["save_every"], "save_only_model": True,
                "save_total_limit": None} if job.get("save_every") else {"save_strategy": "no"}
    if "rewards" in job:
        settings["reward_weights"] = [1.0, 0.1]
    for key, name in (("loss_type", "loss_type"), ("epsilon", "epsilon"), ("max_grad_norm", "max_grad_norm"),
                      ("scheduler", "lr_scheduler_type")):
        if key in job:
            settings[name] = job[key]
    if "adam_betas" in job:
        settings["adam_beta1"], settings["adam_beta2"] = job["adam_betas"]
    return settings


def reward_functions(job):
    """The regex check above, or rlvr's own verifier and format reward (imported after TRL and torch, so
    rlvr's thread settings do not apply to TRL's process)."""
    if job.get("rewards") != "rlvr":
        return accuracy
    from rlvr.rewards import boxed_format, math_accuracy

    return [math_accuracy, boxed_format]


class Clock(TrainerCallback):
    def __init__(self):
        self.seconds, self.lengths, self.started = [], [], None

    def on_step_begin(self, args, state, control, **kw):
        self.started = time.perf_counter()

    def on_step_end(self, args, state, control, **kw):
        self.seconds.append(time.perf_counter() - self.started)

    def on_log(self, args, state, control, logs=None, **kw):
        if logs and "completions/mean_length" in logs:
            self.lengths.append(logs["completions/mean_length"])


def main():
    job = json.load(open(sys.argv[1]))
    torch.set_num_threads(job["threads"] or torch.get_num_threads())
    data = load_dataset("json", data_files=job["data"], split="train")
    if isinstance(data[0]["prompt"], str):
        data = data.map(lambda row: {"prompt": [{"role": "user", "content": row["prompt"]}]})
    g = job["group_size"]
    config = GRPOConfig(
        output_dir=job["output_dir"], max_steps=job["steps"], learning_rate=job["lr"], beta=job["beta"],
        num_generations=g, per_device_train_batch_size=g * job["prompts_per_step"], gradient_accumulation_steps=1,
        max_completion_length=job["max_new_tokens"], temperature=job["temperature"], seed=job["seed"],
        logging_steps=1, report_to=[], use_cpu=True, bf16=False, fp16=False, dataloader_num_workers=0,
        **learning_settings(job),
    )
    clock = Clock()
    peft_config = None
    if job.get("lora"):  # the same adapters as rlvr's model.lora: every linear layer of the decoder
        from peft import LoraConfig

        peft_config = LoraConfig(r=job["lora"]["rank"], lora_alpha=job["lora"]["alpha"], lora_dropout=0.0,
                                 target_modules="all-linear", task_type="CAUSAL_LM")
    trainer = GRPOTrainer(model=job["model"], reward_funcs=reward_functions(job), args=config, train_dataset=data,
                          callbacks=[clock], peft_config=peft_config)
    trainer.train()
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    json.dump({"step_seconds": clock.seconds, "mean_lengths": clock.lengths, "peak_rss_bytes": peak_kb * 1024,
               "trl_version": __import__("trl").__version__}, open(sys.argv[2], "w"))


if __name__ == "__main__":
    main()
