"""AdamW on SmolLM2's parameters: seconds per step and the peak memory the step adds, per implementation.

    .venv/bin/python bench/optimizer.py          # runs foreach, fused and single-tensor, each in its own process
    .venv/bin/python bench/optimizer.py fused    # one of them, in this process  [--model smollm2]

Gradients are random; three steps after loading the model, best-effort peak RSS from getrusage.
"""

import argparse
import resource
import subprocess
import sys
import time

from machine import machine_line

KINDS = ("foreach", "fused", "single")


def measure(kind: str, model_name: str = "smollm2") -> None:
    import torch

    from rlvr.models import load_model

    model, _ = load_model(model_name)
    for p in model.parameters():
        p.grad = torch.randn_like(p) * 1e-3
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    options = {"fused": True} if kind == "fused" else {"foreach": kind == "foreach"}
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5, **options)
    start = time.perf_counter()
    for _ in range(3):
        optimizer.step()
    seconds = (time.perf_counter() - start) / 3
    added = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1e6
    print(f"{kind:<8} {seconds:6.2f} s/step   +{added:.2f} GB peak during the steps")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("kind", nargs="?", choices=KINDS, help="measure this one only, in this process (default: each "
                   "in its own process)")
    p.add_argument("--model", default="smollm2", help="whose parameters (`tiny`: the random test model)")
    p.add_argument("--row", action="store_true", help=argparse.SUPPRESS)  # (one of the default run's processes)
    args = p.parse_args()
    if not args.row:
        print(machine_line("float32"), flush=True)
    if args.kind:
        measure(args.kind, args.model)
    else:
        for kind in KINDS:
            subprocess.run([sys.executable, __file__, kind, "--model", args.model, "--row"], check=True)


if __name__ == "__main__":
    main()
