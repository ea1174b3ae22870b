"""Preflight: the first sampled batch, the one step 1 trains on (no extra sampling), read for what dooms a run.

    rlvr: preflight at step 1: a learning signal in 3 of 4 groups; 0% cut at max_new_tokens=64; 0 unscored;
          reward means: math_accuracy 0.25, boxed_format 0.91

and one line for each sign that the run cannot learn, with the likely fix (the peers' most reported pain: runs
that silently never learn, trl#3857, trl#6966): every group's rewards equal (every advantage 0); nothing
terminates; a reward that pays every completion 0 (or less) alike; a reward that is 0 throughout while the chat
template pre-fills an opening tag (`<think>`) that the reward looks for in the completion. `preflight: warn`
(the default) says so, `strict` stops the run there, `off` says nothing. Read from step 1's metrics, which are
the whole batch's on every rank, so every rank decides alike.
"""

from __future__ import annotations

import re

from tqdm import tqdm

from rlvr.errors import UserError
from rlvr.run.tally import NO_SIGNAL, groups_with_signal

PREFILLED = re.compile(r"<([A-Za-z_][\w-]*)>\s*$")  # an opening tag the prompt ends with


def reward_names(metrics: dict[str, float]) -> list[str]:
    """The reward functions whose means the step's metrics hold (`reward/NAME/mean`)."""
    return [key[len("reward/"):-len("/mean")] for key in metrics
            if key.startswith("reward/") and key.endswith("/mean") and key != "reward/mean"]


def first_batch_line(metrics: dict[str, float], groups: int, max_new_tokens: int) -> str:
    """The first batch in one line: groups with a learning signal, completions cut, unscored, each reward's mean."""
    signal = groups_with_signal(metrics, groups)
    means = ", ".join(f"{name} {metrics[f'reward/{name}/mean']:.2f}" for name in reward_names(metrics))
    return (f"rlvr: preflight at step 1: a learning signal in {signal} of {groups} groups; "
            f"{100 * metrics.get('truncation_rate', 0.0):.0f}% cut at max_new_tokens={max_new_tokens}; "
            f"{int(metrics.get('reward/unscored', 0))} unscored; reward means: {means or 'none'}")


def doomed(metrics: dict[str, float], max_new_tokens: int, prompt_end: str) -> list[str]:
    """Each sign in step 1's metrics that the run cannot learn, in words with the likely fix; [] when none."""
    found = []
    # a reward that paid nothing (0 or less) to every completion alike: never above its minimum, by all signs
    flat = [name for name in reward_names(metrics)
            if metrics.get(f"reward/{name}/std") == 0.0 and metrics[f"reward/{name}/mean"] <= 0.0]
    tag = PREFILLED.search(prompt_end)
    zero = [name for name in flat if metrics.get(f"reward/{name}/mean") == 0.0]
    if tag and zero:
        found.append(f"the chat template pre-fills '<{tag.group(1)}>' at the end of every prompt, so no completion "
                     f"writes it, and {', '.join(zero)} scored 0 throughout: a reward that looks for the tag in the "
                     "completion can never pay; score the pre-filled text with the completion (a reward of your own "
                     "that puts it back), or drop the reward")
    if metrics.get("zero_variance_fraction") == 1.0:
        found.append(NO_SIGNAL)
    if metrics.get("truncation_rate") == 1.0:
        found.append(f"every completion was cut at max_new_tokens={max_new_tokens}: none terminated, so none can "
                     "be complete; raise generation.max_new_tokens, or ask for shorter answers (an example "
                     "exchange, a system prompt)")
    for name in flat:
        if not (tag and name in zero):
            found.append(f"reward {name} gave every completion {metrics[f'reward/{name}/mean']:g}, never more: it "
                         "pays for nothing the model does yet; check that it reads the columns and the completion "
                         "form it expects (samples.jsonl shows what it was given), or that the task is within reach")
    return found


def preflight(mode: str, metrics: dict[str, float], groups: int, max_new_tokens: int, prompt_end: str,
              say: bool) -> None:
    """Check step 1 as `mode` says (warn, strict, off): print the first batch's line and the signs found (when
    `say`: rank 0); in strict, a sign stops the run (every rank raises alike)."""
    if mode == "off":
        return
    found = doomed(metrics, max_new_tokens, prompt_end)
    if say:  # (on stdout, beside the sample groups: what the run found, not what went wrong with it)
        tqdm.write(first_batch_line(metrics, groups, max_new_tokens))
        for sign in found if mode == "warn" else []:
            tqdm.write(f"rlvr: preflight: {sign}")
    if found and mode == "strict":
        raise UserError(f"preflight (strict) stopped the run at step 1: {found[0]} (preflight: warn goes on)")
