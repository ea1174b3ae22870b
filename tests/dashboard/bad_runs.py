"""Run directories whose files hold rows and values of the wrong kind, for the report and the dashboard."""

import json

GOOD_GROUP = {"step": 1, "prompt": "2+2?", "completions": ["four"], "rewards": [1.0], "advantages": [0.5]}
# what the report (and the dashboard) of the run `rows` must name
PROBLEMS = ['metrics.jsonl line 2 has step "x", not a number (skipped)', "metrics.jsonl line 3 has no step (skipped)",
            "metrics.jsonl line 4 is an array, not a JSON object (skipped)",
            "metrics.jsonl line 5 has step NaN, not a number (skipped)",
            "metrics.jsonl line 6 has step null, not a number (skipped)",
            "metrics.jsonl: 1 more line skipped",  # (line 7: the first five are named)
            "samples.jsonl line 1 is a string, not a JSON object (skipped)",
            "samples.jsonl line 2 has rewards that are not a list (skipped)",
            "summary.json holds an array, not a JSON object (ignored)"]


def write_bad_runs(root):
    """{name: run directory}: `rows` (rows that are no steps or groups), `numbers` (values that are no numbers,
    or numbers too large for the charts' usual ticks)."""
    rows, numbers = root / "rows", root / "numbers"
    rows.mkdir()
    (rows / "metrics.jsonl").write_text("\n".join([
        '{"step": 1, "reward/mean": 0.5, "kl": 1e17}', '{"step": "x", "reward/mean": 9}', '{"reward/mean": 9}',
        "[1, 2]", '{"step": NaN, "reward/mean": 9}', '{"step": null, "reward/mean": 9}',
        '{"step": true, "reward/mean": 9}', '{"step": 3, "reward/mean": "high", "kl": 1e17}']) + "\n")
    (rows / "samples.jsonl").write_text("\n".join([
        '"a string"', json.dumps({**GOOD_GROUP, "rewards": 5}), json.dumps(GOOD_GROUP)]) + "\n")
    (rows / "summary.json").write_text("[1, 2]")
    (rows / "config.yaml").write_bytes(b"model:\n  name: caf\xe9\n")
    numbers.mkdir()
    (numbers / "metrics.jsonl").write_text("\n".join([
        '{"step": 1, "reward/mean": 0.5, "kl": -1.7e308, "step_seconds": "slow"}',
        '{"step": 2, "reward/mean": 0.7, "kl": 1.7e308, "step_seconds": 30}']) + "\n")
    (numbers / "samples.jsonl").write_text(json.dumps({**GOOD_GROUP, "rewards": ["1", None], "advantages": [{}],
                                                       "transcripts": [5, [1, {"role": 3}]]}) + "\n")
    (numbers / "summary.json").write_text(json.dumps({"before": {"strict": {"mean": "x", "low": 0.1, "high": "y"}},
                                                      "gain": {"strict": {"mean": "0.1"}}, "seconds": "long"}))
    return {"rows": rows, "numbers": numbers}
