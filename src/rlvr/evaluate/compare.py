"""`rlvr compare RUN CONTROL`: what a run's rewards taught, as its held-out gain over its control run.

    RUN/heldout.json ─┐
                      ├─ the same problems, paired ─▶ after: RUN − CONTROL, with a 95% interval (Newcombe)
    CONTROL/heldout.json

A gain over the untrained model can come from training itself, whatever the rewards say (random rewards lift
some models: rlvr.rewards.control). The run and its control (`rlvr train ... --control random`, the same config
otherwise) are evaluated greedily on the same held-out problems after training; the gain over the control is
the paired difference of their verdicts. Every setting in which the two configs differ besides `control` and
the run directory is named: a control that differs in more is not a like-for-like one.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from rlvr import paths
from rlvr.errors import UserError
from rlvr.evaluate.accuracy import Interval, paired_gain_interval, wilson_interval

MODES = ("strict", "lenient")
_OWN = ("control", "output_dir")  # the settings a control is meant to differ in


def compare_runs(run: Path, control: Path) -> dict[str, Any]:
    """{"n", "control" (what the control trained on), "differs" (other settings that differ), and per mode the
    run's and the control's accuracy after training, the run's gain over the control (paired), and each one's
    gain over the untrained model; "alone" likewise for the questions without the example exchanges}."""
    held = {which: _heldout(path) for which, path in (("run", run), ("control", control))}
    digests = {h.get("problems") for h in held.values()}  # (a run written before the digest has none)
    if held["run"]["rows"] != held["control"]["rows"] or len(digests - {None}) > 1:
        raise UserError(f"{run} and {control} were evaluated on different held-out problems: a control runs the same "
                        "config with --control (the same data, eval_size and seed)")
    summary = _read_json(control / paths.SUMMARY, control) if (control / paths.SUMMARY).is_file() else {}
    own = _read_json(run / paths.SUMMARY, run) if (run / paths.SUMMARY).is_file() else {}
    if own.get("control") and not summary.get("control"):  # (the gain's sign would be turned round)
        raise UserError(f"{run} is a control run and {control} is not: the control comes second, "
                        f"rlvr compare {control} {run}")
    result: dict[str, Any] = {"n": len(held["run"]["rows"]), "control": summary.get("control"),
                              "differs": config_differences(run, control)}
    result |= _compared(held["run"], held["control"])
    if all((h["after"] or {}).get("alone") for h in held.values()):
        alone = {w: {"before": (h["before"] or {}).get("alone"), "after": h["after"]["alone"]} for w, h in held.items()}
        result["alone"] = _compared(alone["run"], alone["control"])
    return result


def _compared(run: dict[str, Any], control: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for mode in MODES:
        r, c = run["after"][mode], control["after"][mode]
        out[mode] = {"run": _interval(r), "control": _interval(c),
                     "gain_over_control": paired_gain_interval(c, r).__dict__}
        for who, h in (("run", run), ("control", control)):
            if h["before"] is not None:
                out[mode][f"{who}_gain"] = paired_gain_interval(h["before"][mode], h["after"][mode]).__dict__
    return out


def _interval(verdicts: list[int]) -> dict[str, float]:
    return wilson_interval(sum(verdicts), len(verdicts)).__dict__


def _heldout(run: Path) -> dict[str, Any]:
    file = run / paths.HELDOUT
    if not (run / paths.CONFIG).is_file():
        raise UserError(f"{run} is not a run directory (give the output_dir of rlvr train)")
    if not file.is_file():
        summary = _read_json(run / paths.SUMMARY, run) if (run / paths.SUMMARY).is_file() else None
        if summary is None:
            raise UserError(f"{run} has no {paths.HELDOUT}: the run has not finished; finish it with rlvr train "
                            f"--resume {run}")
        config = yaml.safe_load((run / paths.CONFIG).read_text(encoding="utf-8")) or {}
        if isinstance(config, dict) and config.get("eval_after") is False:
            raise UserError(f"{run} finished without an evaluation after training (eval_after: false): rlvr train "
                            f"--resume {run} --set eval_after=true evaluates it")
        raise UserError(f"{run} evaluated no held-out set: {summary.get('heldout_skipped') or 'see its summary.json'}")
    held = _read_json(file, run)
    if held.get("after") is None:
        raise UserError(f"{run} was not evaluated after training (eval_after: false): nothing to compare")
    return held


def _read_json(file: Path, run: Path) -> dict[str, Any]:
    try:
        value: dict[str, Any] = json.loads(file.read_text())
    except (OSError, ValueError) as e:
        raise UserError(f"cannot read {file}: {e} (is {run} a finished run?)") from None
    return value


def config_differences(run: Path, control: Path) -> dict[str, list[Any]]:
    """Every setting (dotted key) whose value differs between the two runs' config.yaml, but `control` and the
    run directory: {key: [run's, control's]}."""
    configs = []
    for path in (run, control):
        try:
            configs.append(_flat(yaml.safe_load((path / paths.CONFIG).read_text()) or {}))
        except (OSError, yaml.YAMLError) as e:
            raise UserError(f"cannot read {path / paths.CONFIG}: {e}") from None
    a, b = configs
    return {k: [a.get(k), b.get(k)] for k in sorted(set(a) | set(b)) if k not in _OWN and a.get(k) != b.get(k)}


def _flat(values: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """{"a": {"b": 1}} -> {"a.b": 1}

    >>> _flat({"model": {"name": "tiny", "lora": None}, "seed": 0})
    {'model.name': 'tiny', 'model.lora': None, 'seed': 0}
    """
    out: dict[str, Any] = {}
    for k, v in values.items():
        out |= _flat(v, f"{prefix}{k}.") if isinstance(v, dict) else {f"{prefix}{k}": v}
    return out


def _pct(i: dict[str, float]) -> str:
    return str(Interval(**i))


def _pts(i: dict[str, float]) -> str:
    return f"{100 * i['mean']:+.1f} [{100 * i['low']:+.1f}, {100 * i['high']:+.1f}]"


def describe(result: dict[str, Any], run: Path, control: Path) -> str:
    """What `rlvr compare` prints."""
    trained_on = result["control"]["trained_on"] if result["control"] else "not a control run (no `control` in " \
        "its summary): two runs compared"
    lines = [f"run      {run}", f"control  {control}: {trained_on}",
             f"held-out after training (n={result['n']}, greedy, 95% intervals):"]
    for part, block in (("", result), ("the question alone: ", result.get("alone"))):
        if not block:
            continue
        for mode in MODES:
            b = block[mode]
            own = (f"; over the untrained model: run {_pts(b['run_gain'])}, control {_pts(b['control_gain'])}"
                   if "run_gain" in b and "control_gain" in b else "")
            lines.append(f"  {part}{mode:7s} run {_pct(b['run'])}   control {_pct(b['control'])}   "
                         f"gain over the control {_pts(b['gain_over_control'])} points{own}")
    if result["differs"]:
        named = ", ".join(f"{k} ({a!r} vs {b!r})" for k, (a, b) in list(result["differs"].items())[:6])
        lines.append(f"not like for like: the configs also differ in {named}")
    return "\n".join(lines)
