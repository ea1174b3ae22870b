"""What a benchmark measured on, for the first line of every table: the machine (the CPU's model or the GPU's name)
and the precision. Speeds differ several-fold between machines of one kind (an AMD EPYC computes bf16 at ~1
GFLOP/s, an Intel Xeon with AMX at ~1,000), so a number without them cannot be compared.

    from machine import job_precision, machine_line, runs_line   # (bench/ is on the path of a bench script)
    print(machine_line(job_precision(["model.dtype=bfloat16"])))  # an rlvr job's, its --set values given
    print(machine_line("float32"))                                 # a script's own computation
    print(runs_line([summary, ...]))                               # runs measured already: what they recorded
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import torch

from rlvr.models.devices import machine_name, precision, resolve_device


def job_precision(sets: Sequence[str] = (), device: str = "cpu") -> str:
    """The precision an rlvr job with these `--set KEY=VALUE` settings computes in here (model.dtype, `auto` unless
    set), in words (rlvr.models.devices.precision)."""
    dtype = next((s.split("=", 1)[1] for s in reversed(sets) if s.startswith("model.dtype=")), "auto")
    return precision(dtype, resolve_device(device))[1]


def machine_line(precision_said: str, device: str = "cpu") -> str:
    """`machine: AMD EPYC, 2 cores (2 torch threads), torch 2.13.0+cpu; precision: float32 (...)`"""
    return (f"machine: {machine_name(device)} ({torch.get_num_threads()} torch threads), torch {torch.__version__}; "
            f"precision: {precision_said}")


def runs_line(summaries: Iterable[dict[str, Any]]) -> str:
    """For a table of runs made already: the machines and precisions their summary.json recorded (runs from before
    rlvr recorded them say so)."""
    seen = {(s.get("machine", "not recorded"), s.get("precision", "not recorded")) for s in summaries}
    return "measured on: " + "; ".join(f"{m}, precision {p}" for m, p in sorted(seen))
