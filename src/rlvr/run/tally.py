"""What a run's console and summary say about it beyond its metrics: steps in a row without a learning signal (said
in one line as they happen), and, at the end, the count of skipped updates and where the time went.

    watch = SignalWatch(); line = watch.see(metrics)     # a line when 3, 6, 12, ... steps in a row had no signal
    totals = run_totals(run_dir)                          # summary.json's skipped_updates, no_signal_steps, time
    print(time_line(totals["time"]))                      # time: rollout 31.2 min (71%; scoring 0.4 min), ...
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rlvr import paths

FIRST_SAID = 3  # steps in a row without a signal before the console says so (then at 6, 12, 24, ...)
NO_SIGNAL = ("in every group all completions got the same reward, so every advantage is 0 and the rewards move "
             "nothing: check the untrained model's pass@k on the task (rlvr eval), or make the task easier, the reward "
             "partial, the group larger or the temperature higher")  # (said by preflight at step 1 too)
PHASES = {"rollout": "rollout", "logprobs": "log-probs", "update": "update", "weights": "weight sync"}


def groups_with_signal(metrics: dict[str, float], groups: int) -> int:
    """How many of a step's `groups` had rewards that differ (a learning signal), from zero_variance_fraction."""
    return round((1 - metrics.get("zero_variance_fraction", 0.0)) * groups)


def no_signal(metrics: dict[str, float]) -> bool:
    """A step whose rewards taught nothing: every group's completions scored alike (GRPO's advantages all 0), or
    the update was skipped for it."""
    return metrics.get("zero_variance_fraction") == 1.0 or metrics.get("update/skipped") == 1.0


class SignalWatch:
    """Counts the steps in a row without a learning signal; `see` gives the line to print when the streak
    reaches 3, 6, 12, ... steps (None otherwise)."""

    def __init__(self) -> None:
        self.streak, self.next_said = 0, FIRST_SAID

    def see(self, metrics: dict[str, float]) -> str | None:
        if not no_signal(metrics):
            self.streak, self.next_said = 0, FIRST_SAID
            return None
        self.streak += 1
        if self.streak < self.next_said:
            return None
        self.next_said *= 2
        return f"rlvr: no learning signal for {self.streak} steps in a row: {NO_SIGNAL}"


def run_totals(run_dir: Path) -> dict[str, Any]:
    """From the run's metrics.jsonl (every step, resumed or not): skipped_updates, no_signal_steps and the seconds
    spent in each phase of a step (rollout, which includes `scoring` where the rewards report their time)."""
    file = run_dir / paths.METRICS
    rows = [json.loads(line) for line in file.read_text().splitlines()] if file.is_file() else []
    rows = [row for row in rows if "step" in row]
    time = {phase: sum(row.get(f"time/{phase}", 0.0) for row in rows) for phase in PHASES}
    scoring = sum(v for row in rows for k, v in row.items() if k.startswith("reward/") and k.endswith("/seconds"))
    return {"skipped_updates": sum(row.get("update/skipped") == 1.0 for row in rows),
            "no_signal_steps": sum(no_signal(row) for row in rows),
            "time": {**{k: round(v, 1) for k, v in time.items() if v}, **({"scoring": round(scoring, 1)}
                                                                          if scoring else {})}}


def said_at_start(precision: str, memory_plan: str | None) -> str:
    """What a run says once every check has passed (a mistake before is one line alone): its precision and, for a
    recipe that planned its memory before its model loaded (rlvr.rl.memory), the plan.

    >>> said_at_start("float32 (model.dtype=auto)", None)
    'rlvr: precision float32 (model.dtype=auto)'
    """
    return f"rlvr: precision {precision}" + (f"\n{memory_plan}" if memory_plan else "")


def time_line(time: dict[str, float]) -> str:
    """`time` (seconds by phase) in one line: minutes and shares of the steps' time."""
    total = sum(v for k, v in time.items() if k in PHASES)
    if not total:
        return "time: no steps timed"
    parts = []
    for phase, words in PHASES.items():
        if phase in time:
            extra = f"; scoring {time['scoring'] / 60:.1f} min" if phase == "rollout" and "scoring" in time else ""
            parts.append(f"{words} {time[phase] / 60:.1f} min ({100 * time[phase] / total:.0f}%{extra})")
    return f"time: {', '.join(parts)}; {total / 60:.1f} min of steps"
