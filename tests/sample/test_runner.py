"""`rlvr sample` end to end on the scripted model: the kept rows are exactly the verified, filtered
samples of the stored records; re-filtering and resuming never sample again."""

import json
from pathlib import Path

import pytest

from rlvr.config import SampleConfig, config_from_dict
from rlvr.data.sources import load_examples
from rlvr.errors import UserError
from rlvr.evaluate.benchmarks import load_benchmark
from rlvr.evaluate.store import EvalStore
from rlvr.sample.runner import run_sample

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"


def config(data, out, **kw):
    # 8 samples of 5 problems, 2 problems per chunk; 12 tokens cut "  \boxed{3.0}" and "   \boxed{3}" short
    base = dict(model="scripted", data=data, samples=8, temperature=1.0, top_p=1.0, max_new_tokens=12,
                batch_size=16, output_dir=str(out), threads=1)
    return config_from_dict(SampleConfig, {**base, **kw})


def reference(records, c):
    """The filters written out the slow, obvious way."""
    rows = []
    for record in records:
        kept, seen = [], set()
        for s in record.samples:
            if s.truncated or s.correct[c.verdict] != 1.0 or s.tokens < c.min_tokens:
                continue
            if c.max_tokens is not None and s.tokens > c.max_tokens:
                continue
            boxes = s.text.count("\\boxed{")
            if (c.format == "boxed" and boxes != 1) or c.format == "think_answer":  # no think tags in the script
                continue
            key = " ".join(s.text.split())
            if c.dedupe and key in seen:
                continue
            seen.add(key)
            kept.append(s.text)
        rows += [(record.id, text) for text in kept[:c.max_per_prompt]]
    return rows


FILTERS = [
    {},  # strict, dedupe, at most 4
    {"verdict": "lenient", "format": "boxed", "dedupe": False, "max_per_prompt": None},
    {"min_tokens": 11, "max_tokens": 11, "max_per_prompt": 1},
    {"format": "think_answer"},
    {"dedupe": False, "max_per_prompt": 1},
]


def test_kept_rows_are_the_verified_filtered_samples_and_refiltering_reuses_them(scripted, maths_file, tmp_path,
                                                                                 monkeypatch):
    out = tmp_path / "s"
    first = run_sample(config(maths_file, out), progress=False)
    records = EvalStore(out).read()
    stored = (out / "samples.jsonl").read_bytes()
    assert len(records) == 5 and all(len(r.samples) == 8 and r.greedy is None for r in records)

    import rlvr.evaluate.runner as runner

    monkeypatch.setattr(runner, "load_configured", lambda *a, **k: pytest.fail("re-filtering loaded the model"))
    totals = {name: 0 for name in first["dropped"]}
    for filters in FILTERS:
        c = config(maths_file, out, **filters)
        summary = run_sample(c, progress=False)
        assert filters or summary == first  # the same run again: nothing sampled, the same result
        rows = [json.loads(line) for line in (out / "sft.jsonl").read_text().splitlines()]
        assert [(r["id"], r["completion"]) for r in rows] == reference(records, c)
        assert summary["kept"] == len(rows) and summary["samples"] == 40
        assert summary["kept"] + sum(summary["dropped"].values()) == 40
        assert summary["settings"]["filters"]["verdict"] == c.verdict
        totals = {k: totals[k] + summary["dropped"][k] for k in totals}
    assert (out / "samples.jsonl").read_bytes() == stored  # filters are not part of the sampling settings
    assert all(n > 0 for n in totals.values()), totals  # every filter dropped something somewhere


def test_rows_have_the_untemplated_prompt_and_load_as_sft_data(scripted, maths_file, tmp_path):
    out = tmp_path / "s"
    summary = run_sample(config(maths_file, out, output=str(tmp_path / "data" / "sft.jsonl")), progress=False)
    path = tmp_path / "data" / "sft.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert rows and summary["output"] == str(path) and not (out / "sft.jsonl").exists()
    prompts = {f"maths/{ex.index}": ex.prompt for ex in load_benchmark(maths_file).examples}
    for row in rows:
        assert set(row) == {"prompt", "completion", "id", "reward", "source_model"}
        assert row["prompt"] == prompts[row["id"]] and "<|im_start|>" not in row["prompt"]
        assert row["reward"] == 1.0 and row["source_model"] == "scripted"
        assert " ".join(row["completion"].split()) in ("\\boxed{3}", "\\boxed{3.0}")  # the right answer, 3
        assert row["id"] != "maths/4"  # its answer is 7, which the script never boxes
    examples = load_examples(str(path), prompt_field="prompt")
    assert [(ex.prompt, ex.columns["completion"]) for ex in examples] == [(r["prompt"], r["completion"]) for r in rows]
    written = json.loads((out / "sample_summary.json").read_text())
    assert written == summary and written["problems_with_kept"] == len({r["id"] for r in rows})
    verified = sum(s.correct["strict"] == 1.0 for r in EvalStore(out).read() for s in r.samples)
    assert written["pass_rate"] == pytest.approx(verified / 40) and verified > len(rows)


def test_raising_the_limit_resumes_to_the_records_of_an_unbroken_run(scripted, maths_file, tmp_path, monkeypatch):
    run_sample(config(maths_file, tmp_path / "whole"), progress=False)
    whole = EvalStore(tmp_path / "whole").read()
    run_sample(config(maths_file, tmp_path / "grown", limit=2), progress=False)
    import rlvr.evaluate.runner as runner

    real, sampled = runner.sample_problems, []
    monkeypatch.setattr(runner, "sample_problems", lambda *a, **k: sampled.extend(a[3]) or real(*a, **k))
    run_sample(config(maths_file, tmp_path / "grown"), progress=False)
    assert [p.example.index for p in sampled] == [2, 3, 4]  # the two finished problems were not sampled again
    assert EvalStore(tmp_path / "grown").read() == whole
    assert (tmp_path / "grown" / "sft.jsonl").read_text() == (tmp_path / "whole" / "sft.jsonl").read_text()


def test_other_sampling_settings_in_the_same_directory_are_refused(scripted, maths_file, tmp_path):
    run_sample(config(maths_file, tmp_path), progress=False)
    with pytest.raises(UserError, match="other settings"):
        run_sample(config(maths_file, tmp_path, temperature=0.9), progress=False)


@pytest.mark.parametrize("change, message", [
    ({"data": "gsm8k"}, "evaluation benchmark"),
    ({"data": str(DATA / "gsm8k" / "test.jsonl")}, "gsm8k's test set: training on its samples would inflate"),
    ({"max_per_prompt": 0}, "max_per_prompt=0"),
    ({"max_tokens": 3, "min_tokens": 5}, "max_tokens=3"),
    ({"temperature": 0.0}, "temperature"),
    ({"samples": 0}, "samples=0"),
])
def test_impossible_settings_are_user_errors(maths_file, tmp_path, change, message):
    with pytest.raises(UserError, match=message):
        run_sample(config(**{"data": maths_file, "out": tmp_path, **change}), progress=False)


def test_chat_message_prompts_are_written_as_messages(scripted, tmp_path):
    data = tmp_path / "chat.jsonl"
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 1 + 2?"}]
    data.write_text(json.dumps({"prompt": messages, "answer": "3"}) + "\n")
    summary = run_sample(config(str(data), tmp_path / "s", samples=16), progress=False)
    rows = [json.loads(line) for line in (tmp_path / "s" / "sft.jsonl").read_text().splitlines()]
    assert summary["kept"] == len(rows) > 0 and all(row["prompt"] == messages for row in rows)


def test_rows_that_cannot_be_judged_are_told_what_they_need_not_a_flag_sample_lacks(tmp_path):
    """rlvr eval judges such rows with --reward; rlvr sample has no such flag, and its line named it."""
    data = tmp_path / "prompts.jsonl"
    data.write_text(json.dumps({"prompt": "Say hello"}) + "\n")
    with pytest.raises(UserError, match=r"rows need an `answer` column .* to be judged$"):
        run_sample(config(str(data), tmp_path / "out"), progress=False)
