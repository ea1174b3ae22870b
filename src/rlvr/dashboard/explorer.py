"""The GRPO explorer: pick G, edit each completion's reward, see μ, σ, every advantage and
which way each completion's probability moves.

The page is a form that resubmits itself on every edit; every number on it comes from
`rlvr.advantages` on the server — the trainer's own functions, not a second implementation in the
browser. Preloaded: a worked example group, eight answers to "What is 23 × 17?" (five right, three wrong).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from html import escape
from typing import Any, get_args

import torch

from rlvr.advantages import group_advantages, group_baseline, reward_std
from rlvr.config.choices import Baseline, Scale, StdEstimator

EXAMPLE_GROUP = {  # completion -> reward: eight answers to "What is 23 × 17?" (391), five of them right
    "23 × 17 = 23 × 10 + 23 × 7 = 230 + 161 = 391": 1.0,
    "23 × 17 = 20 × 17 + 3 × 17 = 340 + 51 = 391": 1.0,
    "23 × 17... let me think... 23 × 20 = 460, minus 23 × 3 = 69... 460 - 69 = 391": 1.0,
    "23 × 17 = 381": 0.0,
    "23 × 17 = 23 + 17 = 40... no wait, multiply. 23 × 17 = 400 - 9 = 391": 1.0,
    "23 × 17 = 23 × 17 = 401": 0.0,
    "23 × 17 = 389": 0.0,
    "23 × 17, hmm, 25 × 17 = 425, minus 2 × 17 = 34, so 425 - 34 = 391": 1.0,
}
STEP = 0.35  # illustrative step size for the "probability after" column: p_i ∝ p_i · exp(STEP · Â_i)


@dataclass(frozen=True)
class Exploration:
    rewards: list[float]
    mean: float
    std: float
    advantages: list[float]
    before: list[float]  # probability of each completion before the update (uniform)
    after: list[float]  # after one illustrative step
    clip: float  # ε: one update moves each ratio π_θ/π_old at most to 1 ± ε


def explore(rewards: list[float], *, baseline: Baseline = "group_mean", scale: Scale = "group_std",
            std_estimator: StdEstimator = "population", eps: float = 1e-4, clip: float = 0.2) -> Exploration:
    """The explorer's numbers for one group.

    >>> e = explore(list(EXAMPLE_GROUP.values()))
    >>> round(e.mean, 3), round(e.std, 3), [round(a, 2) for a in e.advantages[:4]]
    (0.625, 0.484, [0.77, 0.77, 0.77, -1.29])
    """
    r = torch.tensor([rewards], dtype=torch.float32)
    advantages = group_advantages(r, baseline=baseline, scale=scale, std_estimator=std_estimator, eps=eps)[0].tolist()
    g = len(rewards)
    ratios = clipped_step([math.exp(STEP * a) for a in advantages], advantages, clip)
    return Exploration(rewards=rewards, mean=float(r.mean()), std=float(reward_std(r, std_estimator)[0]),
                       advantages=advantages, before=[1 / g] * g, after=[x / g for x in ratios], clip=clip)


def clipped_step(tilt: list[float], advantages: list[float], clip: float) -> list[float]:
    """Each completion's ratio π_new/π_old after the illustrative step, as PPO's clip lets it move: proportional
    to `tilt` but at most 1 + ε where Â > 0 and at least 1 − ε where Â < 0 (the clipped objective stops pushing
    past them), and averaging 1, so the probabilities still sum to 1 (the scale found by bisection). Where every
    Â has one sign (no baseline) nothing in the group can give way: the ratios are scaled to average 1.

    >>> [round(x, 3) for x in clipped_step([2.0, 1.0, 0.5], [1.0, 0.0, -1.0], 0.1)]
    [1.1, 1.0, 0.9]
    >>> [round(x, 3) for x in clipped_step([1.2, 1.0, 0.8], [1.0, 0.0, -1.0], 0.5)]
    [1.2, 1.0, 0.8]
    """
    def ratios(scale: float) -> list[float]:
        return [min(scale * t, 1 + clip) if a > 0 else max(scale * t, 1 - clip) if a < 0 else scale * t
                for t, a in zip(tilt, advantages)]

    low, high = 0.0, len(tilt) / min(tilt) + 1.0  # (the sum at `high` is at least len(tilt))
    for _ in range(100):
        mid = (low + high) / 2
        low, high = (mid, high) if sum(ratios(mid)) < len(tilt) else (low, mid)
    found = ratios((low + high) / 2)
    return [x * len(found) / sum(found) for x in found]  # (every Â of one sign, no room: the probabilities' sum)


def parse(query: dict[str, list[str]]) -> tuple[list[float], dict[str, Any]]:
    """Rewards and options from the form's query string; anything malformed falls back to the example.

    >>> parse({"g": ["3"], "r0": ["1"]})[0], parse({"g": ["2"], "r0": ["x"]})[0][:2]
    ([1.0, 0.0, 0.0], [1.0, 1.0])
    """
    options: dict[str, Any] = {
        "baseline": _choice(query, "baseline", get_args(Baseline)),
        "scale": _choice(query, "scale", get_args(Scale)),
        "std_estimator": _choice(query, "std_estimator", get_args(StdEstimator)),
    }
    try:
        clip = float(query.get("clip", ["0.2"])[0])
    except ValueError:
        clip = 0.2
    options["clip"] = min(0.99, max(0.0, clip)) if math.isfinite(clip) else 0.2
    if "g" not in query:
        return list(EXAMPLE_GROUP.values()), options
    try:
        g = min(16, max(2, int(query["g"][0])))
        rewards = [float(query.get(f"r{i}", ["0"])[0]) for i in range(g)]  # a larger G starts its new rewards at 0
        if not all(math.isfinite(x) for x in rewards):
            raise ValueError
    except ValueError:
        rewards = list(EXAMPLE_GROUP.values())
    return rewards, options


def explorer_page(query: dict[str, list[str]]) -> str:
    rewards, options = parse(query)
    e = explore(rewards, **options)  # every number on the page
    texts = list(EXAMPLE_GROUP)
    rows = "".join(
        f'<tr><td>#{i + 1}</td><td><input name="r{i}" value="{r:g}" size="4"></td>'
        f"<td>{escape(texts[i]) if len(rewards) == 8 else ''}</td>"
        f'<td class="adv" data-index="{i}">{a:+.2f}</td><td>{"↑" if a > 0 else "↓" if a < 0 else "–"}</td>'
        f"<td>{100 * b:.0f}% → {100 * p:.0f}%</td></tr>"
        for i, (r, a, b, p) in enumerate(zip(e.rewards, e.advantages, e.before, e.after))
    )
    selects = "".join(_select(name, get_args(kind), options[name]) for name, kind in
                      (("baseline", Baseline), ("scale", Scale), ("std_estimator", StdEstimator)))
    return (
        '<!DOCTYPE html><html><head><meta charset="utf-8"><title>GRPO explorer</title>'
        "<style>body{font-family:sans-serif;max-width:1000px;margin:auto} td{padding:2px 6px}</style></head><body>"
        "<h1>GRPO explorer</h1><p>What is 23 × 17? (correct: 391). "
        "Edit the rewards, change G or the options, press Update.</p>"
        f'<form method="get" action="/explore">G <input name="g" value="{len(rewards)}" size="3"> {selects}'
        f'clip ε <input name="clip" value="{e.clip:g}" size="4"> '
        "<table><tr><th></th><th>reward</th><th>completion</th><th>advantage</th><th></th>"
        f"<th>probability (illustrative step)</th></tr>{rows}</table>"
        '<button type="submit">Update</button></form><script src="/explore.js"></script>'
        f'<p>μ = <span id="mean">{e.mean:.3f}</span>, σ = <span id="std">{e.std:.3f}</span>; '
        f'baseline {escape(options["baseline"])}: '
        f"{float(group_baseline(torch.tensor([rewards]), options['baseline'])[0, 0]):.3f} for #1. "
        f"Â_i = (r_i − baseline) / (σ + ε). With clipping ε = {e.clip:g}, "
        "one update moves each completion's probability ratio "
        f"to at most {1 + e.clip:.2f}× (Â &gt; 0) or at least {1 - e.clip:.2f}× (Â &lt; 0).</p></body></html>"
    )


def _choice(query: dict[str, list[str]], name: str, allowed: tuple[str, ...]) -> str:
    value = query.get(name, [allowed[0]])[0]
    return value if value in allowed else allowed[0]


def _select(name: str, allowed: tuple[str, ...], chosen: str) -> str:
    options = "".join(f'<option{" selected" if a == chosen else ""}>{escape(a)}</option>' for a in allowed)
    return f'{escape(name)} <select name="{escape(name)}">{options}</select> '
