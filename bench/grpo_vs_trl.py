"""The same GRPO job with rlvr and with TRL's GRPOTrainer, one after the other, and a table of both.

    .venv/bin/python bench/grpo_vs_trl.py [--steps 15] [--group-size 8] [--prompts-per-step 4]
        [--max-new-tokens 128] [--temperature 1.0] [--lr 1e-5] [--beta 0.04] [--skip-trl] [--rlvr-set KEY=VALUE]
        [--lora [--lora-rank 16]] [--rounds 1]

With --lora, four rows: rlvr and TRL each fine-tuning every weight and training LoRA adapters of the
same rank on every linear layer of the decoder (TRL through a peft LoraConfig; with β > 0 both take
the reference from the base with the adapters off). TRL's GRPOConfig checkpoints activations by default;
rlvr's LoRA row uses 384-token micro-batches instead (optim.micro_batch_tokens), its full row rlvr's defaults.

The job (the TRL speed job): SmolLM2-135M-Instruct (TRL in fp32, rlvr in its `model.dtype: auto`: bf16 on a
CPU with bf16 units, else fp32; the table's first line says which), one-digit sums from rlvr's
arithmetic train split as chat prompts, G completions for each of P prompts per step, the boxed-answer
accuracy reward, β with a reference model. TRL runs from bench/.venv-trl (created on first use:
torch==2.13.0 and trl from PyPI), each job in its own process so its peak RSS is its own.

With --rounds R the engines run R times in alternating order (rlvr then TRL, TRL then rlvr, ...), the machine's
matmul rate measured again before each round: the table gives each engine's medians over the rounds, and a line
the rlvr / TRL ratio of every round (the speed of a shared machine moved by 44% between two runs of the same job:
docs/performance.md).

Columns: median seconds per step, completion tokens per second, peak RSS, steps per hour, the FLOPs of
a step (10·N per prompt+completion token: generate 2N, reference 2N, policy forward 2N + backward 4N)
and the share of this machine's fp32 matmul rate (measured here) that they represent.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch
from machine import job_precision, machine_line

HERE = Path(__file__).resolve().parent
TRL_VENV = HERE / ".venv-trl"
TRL_VERSION = "1.16.0"


def matmul_rate(size: int = 2048, repeats: int = 5) -> float:
    """Measured fp32 FLOP/s of a large square matmul (the machine's best case)."""
    a, b = torch.randn(size, size), torch.randn(size, size)
    a @ b
    start = time.perf_counter()
    for _ in range(repeats):
        a @ b
    return 2 * size**3 * repeats / (time.perf_counter() - start)


def write_data(path: Path, rows: int = 256, model: str = "smollm2") -> tuple[Path, float]:
    """The job's prompts; returns the file and the mean prompt length in tokens under `model`'s chat template."""
    from rlvr.data import load_examples
    from rlvr.models import load_model

    examples = load_examples("arithmetic", limit=rows)
    path.write_text("".join(json.dumps({"prompt": e.prompt, "answer": e.columns["answer"]}) + "\n" for e in examples))
    tokenizer = load_model(model)[1]
    texts = [tokenizer.apply_chat_template([{"role": "user", "content": e.prompt}], add_generation_prompt=True,
                                           tokenize=False) for e in examples]
    lengths = [len(tokenizer(t, add_special_tokens=False).input_ids) for t in texts]
    return path, sum(lengths) / len(lengths)


def trl_python(extra: tuple[str, ...] = ()) -> Path:
    """bench/.venv-trl's python, with TRL, peft (for --lora) and the `extra` packages installed."""
    python = TRL_VENV / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(TRL_VENV)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", "torch==2.13.0", f"trl=={TRL_VERSION}"], check=True)
    for package in ("peft", *extra):
        module = package.replace("-", "_").replace("pyyaml", "yaml")
        if subprocess.run([str(python), "-c", f"import {module}"], capture_output=True).returncode:
            subprocess.run([str(python), "-m", "pip", "install", "-q", package], check=True)
    return python


def run_job(python: Path, script: str, job: dict, out: Path) -> dict:
    job_file, result_file = out / f"{script}.job.json", out / f"{script}.result.json"
    job_file.write_text(json.dumps(job))
    started = time.perf_counter()
    subprocess.run([str(python), str(HERE / f"{script}.py"), str(job_file), str(result_file)], check=True)
    result = json.loads(result_file.read_text())
    result["wall_seconds"] = time.perf_counter() - started
    return result


def row(name: str, r: dict, job: dict, prompt_tokens: float, rate: float) -> dict:
    completions = job["group_size"] * job["prompts_per_step"]
    median = statistics.median(r["step_seconds"])
    mean_len = statistics.mean(r["mean_lengths"]) if r["mean_lengths"] else float("nan")
    flops = 10 * 134.5e6 * completions * (prompt_tokens + mean_len)
    return {"engine": name, "s_per_step": median, "completion_tok_s": completions * mean_len / median,
            "peak_gb": r["peak_rss_bytes"] / 1e9, "steps_per_hour": 3600 / median, "mean_len": mean_len,
            "tflop_per_step": flops / 1e12, "matmul_share": flops / median / rate}


def job_parser(description: str, steps: int) -> argparse.ArgumentParser:
    """The job's settings as command-line options (shared by the benchmarks that run this job)."""
    p = argparse.ArgumentParser(description=description)
    for name, default, kind in [("steps", steps, int), ("group-size", 8, int), ("prompts-per-step", 4, int),
                                ("max-new-tokens", 128, int), ("temperature", 1.0, float), ("lr", 1e-5, float),
                                ("beta", 0.04, float), ("seed", 0, int), ("threads", 0, int)]:
        p.add_argument(f"--{name}", type=kind, default=default)
    p.add_argument("--out", default=str(HERE / "results"))
    p.add_argument("--model", default="smollm2", help="the policy (`tiny`: the random test model, for a smoke run)")
    return p


def make_job(args: argparse.Namespace) -> tuple[dict, Path, float]:
    """(the job, the output folder, the mean prompt length in tokens)."""
    from rlvr.models import resolve_model_path

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    model = getattr(args, "model", "smollm2")
    data, prompt_tokens = write_data(out / "job_prompts.jsonl", model=model)
    job = {"model": resolve_model_path(model), "data": str(data), "steps": args.steps, "group_size": args.group_size,
           "prompts_per_step": args.prompts_per_step, "max_new_tokens": args.max_new_tokens,
           "temperature": args.temperature, "lr": args.lr, "beta": args.beta, "seed": args.seed,
           "threads": args.threads}
    return job, out, prompt_tokens


def main() -> None:
    p = job_parser(__doc__.splitlines()[0], steps=15)
    p.add_argument("--skip-trl", action="store_true")
    p.add_argument("--rlvr-set", action="append", default=[], metavar="KEY=VALUE",
                   help="an rlvr-only setting under test, e.g. optim.micro_batch_tokens=512 (repeatable)")
    p.add_argument("--lora", action="store_true", help="also train LoRA adapters with each engine")
    p.add_argument("--lora-rank", type=int, default=16)
    p.add_argument("--rounds", type=int, default=1,
                   help="run the engines this many times, in alternating order, and give each engine's median over "
                        "the rounds and the rlvr / TRL ratio of every round (a machine's speed moves between runs)")
    args = p.parse_args()
    job, out, prompt_tokens = make_job(args)
    lora = {"rank": args.lora_rank, "alpha": 2 * args.lora_rank}
    runs = [("rlvr", "rlvr_job", Path(sys.executable), {})] + ([("rlvr LoRA", "rlvr_job", Path(sys.executable),
                                                                {"lora": lora})] if args.lora else [])
    if not args.skip_trl:
        runs += [(f"TRL {TRL_VERSION}", "trl_job", trl_python(), {})]
        runs += [("TRL LoRA", "trl_job", trl_python(), {"lora": lora})] if args.lora else []
    rounds, rates = [], []  # per round: {engine: its row}; the fp32 matmul rate measured before each round
    for k in range(args.rounds):
        rates.append(matmul_rate())
        measured = {}
        for name, script, python, extra in runs if k % 2 == 0 else runs[::-1]:  # (A B, then B A, ...)
            tag = name.replace(" ", "_").replace(".", "")
            overrides = args.rlvr_set if script == "rlvr_job" else []
            result = run_job(python, script, {**job, **extra, "overrides": overrides, "output_dir": str(out / tag)},
                             out)
            measured[name] = row(name, result, job, prompt_tokens, rates[-1])
        rounds.append(measured)
    rows = [{key: value if key == "engine" else statistics.median(r[name][key] for r in rounds)
             for key, value in rounds[0][name].items()} for name, *_ in runs]
    rate = statistics.median(rates)
    print(f"\n{args.steps} steps of {args.prompts_per_step} prompts x {args.group_size} completions, "
          f"<= {args.max_new_tokens} tokens, "
          f"T={args.temperature}, lr {args.lr}, beta {args.beta}; fp32 matmul rate here {rate / 1e9:.0f} GFLOP/s")
    print(machine_line(job_precision(args.rlvr_set, "auto"), "auto") + ("" if args.skip_trl else "; TRL: float32"))
    print(f"{'engine':<11} {'s/step':>7} {'compl tok/s':>11} {'mean len':>8} {'peak RSS':>9} {'steps/h':>8} "
          f"{'TFLOP/step':>10} {'of matmul':>9}")
    for r in rows:
        print(f"{r['engine']:<11} {r['s_per_step']:7.1f} {r['completion_tok_s']:11.1f} {r['mean_len']:8.1f} "
              f"{r['peak_gb']:7.2f}GB "
              f"{r['steps_per_hour']:8.0f} {r['tflop_per_step']:10.2f} {100 * r['matmul_share']:8.1f}%")
    trl = {"TRL LoRA" if r["engine"] == "TRL LoRA" else "TRL": r for r in rows if r["engine"].startswith("TRL")}
    for r in rows:
        if r["engine"].startswith("rlvr") and trl:
            peer = trl.get("TRL LoRA" if r["engine"] == "rlvr LoRA" else "TRL") or next(iter(trl.values()))
            print(f"{r['engine'] + ' / ' + peer['engine'][:8]:<11} {r['s_per_step'] / peer['s_per_step']:7.2f} "
                  f"{r['completion_tok_s'] / peer['completion_tok_s']:11.2f} {'':8} "
                  f"{r['peak_gb'] / peer['peak_gb']:8.2f}x "
                  f"{r['steps_per_hour'] / peer['steps_per_hour']:8.2f}")
    if args.rounds > 1:
        matmul = ", ".join(f"{r / 1e9:.0f}" for r in rates)
        print(f"{args.rounds} rounds (medians above), fp32 matmul {matmul} GFLOP/s; rlvr s/step by round: "
              + ", ".join(f"{r['rlvr']['s_per_step']:.1f}" for r in rounds))
        if "TRL" in trl:
            ratios = [r["rlvr"]["steps_per_hour"] / r[trl["TRL"]["engine"]]["steps_per_hour"] for r in rounds]
            print(f"rlvr / TRL steps/hour by round: {', '.join(f'{x:.2f}' for x in ratios)} "
                  f"(median {statistics.median(ratios):.2f}, range {min(ratios):.2f}-{max(ratios):.2f})")
    if args.lora and "TRL" in trl:
        lora_row = next(r for r in rows if r["engine"] == "rlvr LoRA")
        print(f"rlvr LoRA peak RSS / TRL full fine-tune: {lora_row['peak_gb'] / trl['TRL']['peak_gb']:.2f}x")
    (out / "grpo_vs_trl.json").write_text(json.dumps({"job": job, "rows": rows, "rounds": rounds, "rates": rates},
                                                     indent=2))


if __name__ == "__main__":
    main()
