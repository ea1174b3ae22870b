"""A run's rewards, set up before the model loads: loaded, the correctness reward chosen, and what they
read checked against the training rows, so that a mistake costs a second, not a model load and a rollout.

    config.rewards (or the data's own) ─▶ one RewardSpec each ─▶ the correctness reward (logged as `accuracy`)
                                          └─ the columns each needs are the rows' columns; the correctness
                                             reward's gold is filled in

The correctness reward is the one whose mean is logged as `accuracy`, whose pass rate per prompt the
curriculum follows, and which judges the held-out answers when the data has no verifier of its own. It
is the reward marked `correctness: true`; else the first built-in verifier listed
(rlvr.rewards.registry.ANSWER_CHECKS); else the first of your own functions listed, as open-r1 and TRL
scripts list the accuracy reward first (said in one line when there was a choice). Built-ins known to
check no answers (format, length, a reward model) are never chosen. A run whose rewards are all such
built-ins has none: it logs no `accuracy`, and the curriculum refuses to run.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rlvr.config import RewardConfig, TrainConfig
from rlvr.distributed.world import World
from rlvr.errors import UserError
from rlvr.records import Example, Scoring
from rlvr.rewards import RewardSpec, load_reward_function
from rlvr.rewards.control import check_control
from rlvr.rewards.loading import checks_answers
from rlvr.rewards.registry import PASSED_ON, is_builtin, required_columns
from rlvr.rewards.routing import applies_to, only_where
from rlvr.rewards.scores import TRL_KEYWORDS

ENVIRONMENT_COLUMNS = ("env_reward",)  # what a multi-turn rollout adds to the rows (rlvr.rewards.batch)
# What TRL's GRPOTrainer passes a reward besides the rows' columns, and rlvr does not; what rlvr has instead
# (its trainer_state, log_metric and log_extra it passes: rlvr.rewards.trainer_hooks)
TRL_TRAINER_KEYWORDS = {
    "environments": "a multi-turn environment's own reward reaches the rewards as the env_reward column",
}


@dataclass(frozen=True)
class RunRewards:
    specs: list[RewardSpec]
    entries: list[RewardConfig]  # as run, each one's `correctness` decided: what the effective config records
    correctness: str | None  # the correctness reward's name; None: no reward checks answers (no `accuracy`)


def run_rewards(config: TrainConfig, scoring: Scoring, train: list[Example], source: str) -> RunRewards:
    """The configured rewards (or the data's own when none are named), loaded and checked against the
    training rows `train` of `source`; the correctness reward chosen (see the module docstring)."""
    entries = config.rewards or default_rewards(config, scoring)
    specs = reward_specs(entries)  # (first: a misspelt name is told as such)
    check_control(config.control, [spec.name for spec in specs])  # (what a control keeps: rlvr.rewards.control)
    chosen = correctness_entry(entries, say=World.from_env().is_main)
    if chosen is None and config.data.curriculum:
        raise UserError(f"data.curriculum follows the correctness reward, and none of the rewards "
                        f"({', '.join(e.name for e in entries)}) checks answers: mark the one that does with "
                        "correctness: true, or set data.curriculum false")
    rows = [ex.columns for ex in train]
    clash = sorted(set().union(*rows) & set(TRL_KEYWORDS))
    if clash:
        raise UserError(f"the training rows of {source} have a column {clash[0]!r}, a name of the arguments rlvr "
                        "passes every reward itself, as TRL does: rename that column")
    given = set().union(*rows, ENVIRONMENT_COLUMNS if config.environment.name else ())
    for entry, spec in zip(entries, specs):
        default = "" if config.rewards else " (the data's default, as the config names no rewards)"
        _check_trl_keywords(entry.name, spec.fn, given)
        for column in [*(entry.when or {}), *required_columns(spec.fn)]:
            if column not in given:
                have = ", ".join(sorted(set().union(*rows))) or "none"
                raise UserError(f"reward '{entry.name}'{default} needs a column {column!r}, which the training rows "
                                f"of {source} do not have (their columns besides the prompt: {have}); add it to "
                                "the rows, or name rewards they can be scored by")
    if chosen is not None:
        check_gold(chosen, specs[entries.index(chosen)], rows, source)
    decided = [dataclasses.replace(e, correctness=e is chosen) for e in entries]
    return RunRewards(specs, decided, None if chosen is None else chosen.name)


def _check_trl_keywords(name: str, fn: Any, given: set[str]) -> None:
    """The TRL_TRAINER_KEYWORDS reward `fn` takes that the rows do not hold as columns: one it requires is refused,
    one with a default (`environments=None`) is told it keeps it."""
    try:
        parameters = inspect.signature(fn).parameters  # (as required_columns reads it)
    except (TypeError, ValueError):  # (no readable signature)
        return
    for keyword, instead in TRL_TRAINER_KEYWORDS.items():
        p = parameters.get(keyword)
        if p is None or keyword in given or p.kind not in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
            continue
        said = f"reward '{name}' takes {keyword!r}, which TRL's GRPOTrainer passes and rlvr does not ({instead})"
        if p.default is p.empty:
            raise UserError(f"{said}: drop that parameter, or give it a default")
        if World.from_env().is_main:
            print(f"rlvr: {said}: it gets its default", file=sys.stderr)


def default_rewards(config: TrainConfig, scoring: Scoring) -> list[RewardConfig]:
    """The rewards of a config that names none: an agent function's own (agent_reward, rlvr.harness), else the
    data's."""
    from rlvr.envs.loading import load_agent

    if load_agent(config.environment.name, config.environment.params) is not None:
        return [RewardConfig("agent_reward")]
    return [RewardConfig(name, weight) for name, weight in scoring.rewards]


def reward_specs(entries: list[RewardConfig]) -> list[RewardSpec]:
    """Each reward loaded, bound and routed."""
    specs = []
    for r in entries:
        fn = load_reward_function(r.name, **r.params)
        limit = None if is_builtin(fn) or not r.timeout_s else r.timeout_s  # built-ins have their own limits
        specs.append(RewardSpec(r.name, fn if r.when is None else only_where(fn, r.when, r.name), r.weight, limit))
    if len({s.name for s in specs}) != len(specs):
        raise UserError("rewards lists the same reward function twice: "
                        "merge them into one entry with the summed weight")
    return specs


def correctness_entry(entries: list[RewardConfig], say: bool = False) -> RewardConfig | None:
    """The entry that says whether an answer is right: the one marked `correctness: true`; else the first
    built-in verifier listed (not marked false); else the first listed reward of yours (open-r1 and TRL
    scripts list accuracy first); None when every reward is known to check no answers (or is marked
    false). With `say`, a choice made by the order of the list is told in one line, with how to change it.
    (At most one is marked true: TrainConfig.validate.)

    >>> pick = lambda *entries: getattr(correctness_entry(list(entries)), "name", None)
    >>> pick(RewardConfig("boxed_format"), RewardConfig("math_accuracy"))
    'math_accuracy'
    >>> pick(RewardConfig("boxed_format"), RewardConfig("my.py:check", correctness=True))
    'my.py:check'
    >>> print(pick(RewardConfig("reward_model"), RewardConfig("overlong_penalty")))
    None
    >>> pick(RewardConfig("boxed_format"), RewardConfig("my.py:accuracy"), RewardConfig("my.py:format"))
    'my.py:accuracy'
    >>> pick(RewardConfig("my.py:check"), RewardConfig("math_accuracy"))  # a known verifier before yours
    'math_accuracy'
    """
    marked = [e for e in entries if e.correctness]
    if marked:
        if checks_answers(marked[0].name) is False and marked[0].name not in PASSED_ON:
            raise UserError(f"reward '{marked[0].name}' is marked correctness: true, but it does not check whether "
                            "the answer is right (it scores the form, the length, the language or a preference): "
                            "mark the reward that does")
        return marked[0]
    open_ = [e for e in entries if e.correctness is None]
    verifiers = [e for e in open_ if checks_answers(e.name)]
    candidates = verifiers or [e for e in open_ if checks_answers(e.name) is None]
    if not candidates:
        return None
    if say and len([e for e in open_ if checks_answers(e.name) is not False]) > 1:
        print(f"rlvr: `accuracy` follows reward '{candidates[0].name}', the first listed that "
              f"{'is a verifier' if verifiers else 'may check answers'}; to follow another, mark it "
              "correctness: true", file=sys.stderr)
    return candidates[0]


def check_gold(entry: RewardConfig, spec: RewardSpec, rows: Sequence[Mapping[str, Any]], source: str) -> None:
    """The correctness reward's gold (the columns it needs, e.g. math_accuracy's `answer`) filled in: refused
    when it is null or empty in every training row it scores, a warning with the count when in some (those
    rows are unscored for correctness: they learn from the other rewards alone, and count in neither
    `accuracy` nor the curriculum)."""
    gold = required_columns(spec.fn)
    scored = [row for row in rows if applies_to(row, entry.when)]
    empty = sum(any(_empty(row.get(column)) for column in gold) for row in scored)
    if not empty:
        return
    named, which = " or ".join(map(repr, gold)), " it scores" if entry.when else ""
    if empty == len(scored):
        raise UserError(f"the correctness reward '{entry.name}' has nothing to check answers against: {named} is "
                        f"null or empty in all {empty} training rows{which} of {source}; fill it in, or mark "
                        "another reward with correctness: true")
    print(f"rlvr: {empty} of {len(scored)} training rows{which} of {source} have no {named} (null or empty): "
          f"the correctness reward '{entry.name}' leaves them unscored, so they learn from the other rewards "
          "alone and count in neither `accuracy` nor the curriculum", file=sys.stderr)


def _empty(value: Any) -> bool:
    """Whether a gold value holds nothing: null (or NaN), blank text, an empty list or mapping.

    >>> [_empty(v) for v in (None, float("nan"), " ", [], "0", 0, [1])]
    [True, True, True, True, False, False, False]
    """
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return True
    if isinstance(value, str):
        return not value.strip()
    return isinstance(value, (list, tuple, dict)) and not value
