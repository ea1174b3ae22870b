"""load_examples: built-in tasks, JSONL, Parquet, hf: sources, and the errors users see."""

import json
import re
import sys
import types
from pathlib import Path

import pytest

from rlvr.data import load_examples, sources
from rlvr.errors import UserError
from rlvr.records import Example

# ../shared beside the checkout
GSM8K_TEST = Path(__file__).resolve().parents[3] / "shared" / "data" / "gsm8k" / "test.jsonl"


def write_jsonl(path: Path, lines: list[str]) -> str:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


@pytest.fixture
def gsm8k_style(tmp_path) -> str:
    rows = [{"question": f"What is {i} + 1?", "answer": f"{i} + 1 = {i + 1}\n#### {i + 1}"} for i in range(6)]
    lines = [json.dumps(r) for r in rows]
    lines.insert(2, "   ")  # blank lines are skipped
    return write_jsonl(tmp_path / "gsm8k.jsonl", lines)


def test_builtin_task_gives_examples_with_answer_columns():
    examples = load_examples("arithmetic", limit=5, difficulty=2, seed=3)
    assert len(examples) == 5 and all(isinstance(e, Example) for e in examples)
    assert [e.index for e in examples] == [0, 1, 2, 3, 4]
    first = examples[0]
    assert first.prompt.startswith("What is ") and first.columns["difficulty"] == 2
    assert set(first.columns) == {"answer", "difficulty", "task"}


def test_builtin_task_default_size_and_splits():
    assert len(load_examples("countdown")) == 1000
    train = {e.prompt for e in load_examples("arithmetic", split="train", limit=2000)}
    test = {e.prompt for e in load_examples("arithmetic", split="test", limit=2000)}
    assert test and not train & test


def test_jsonl_with_question_as_prompt_field(gsm8k_style):
    examples = load_examples(gsm8k_style, prompt_field="question")
    assert len(examples) == 6
    assert examples[3] == Example(prompt="What is 3 + 1?", columns={"answer": "3 + 1 = 4\n#### 4"}, index=3)


def test_shuffle_is_seeded_keeps_source_index_and_limit_comes_after(gsm8k_style):
    everything = load_examples(gsm8k_style, prompt_field="question", shuffle=True, seed=1)
    assert sorted(e.index for e in everything) == list(range(6))
    assert [e.index for e in everything] != list(range(6))
    limited = load_examples(gsm8k_style, prompt_field="question", shuffle=True, seed=1, limit=3)
    assert limited == everything[:3]
    assert load_examples(gsm8k_style, prompt_field="question", shuffle=True, seed=2) != everything


def test_limit_without_shuffle_stops_reading(tmp_path):
    path = write_jsonl(tmp_path / "d.jsonl", ['{"prompt": "a"}', '{"prompt": "b"}', "not json"])
    assert [e.prompt for e in load_examples(path, limit=2)] == ["a", "b"]
    with pytest.raises(UserError):
        load_examples(path)


def test_malformed_jsonl_line_names_file_and_line(tmp_path):
    path = write_jsonl(tmp_path / "bad.jsonl", ['{"prompt": "a"}', "", '{"prompt": "b",}'])
    with pytest.raises(UserError, match=re.escape(f"{path}:3: not valid JSON")):
        load_examples(path)


def test_row_that_is_not_an_object_names_file_and_line(tmp_path):
    path = write_jsonl(tmp_path / "list.jsonl", ['{"prompt": "a"}', '["prompt", "b"]'])
    with pytest.raises(UserError, match=re.escape(f"{path}:2: expected a JSON object")):
        load_examples(path)


def test_missing_prompt_field_names_the_columns_it_has(gsm8k_style):
    with pytest.raises(UserError) as error:
        load_examples(gsm8k_style)  # prompt_field defaults to "prompt"; GSM8K calls it "question"
    message = str(error.value)
    assert message.startswith(f"{gsm8k_style}:1: no 'prompt' field")
    assert "'question', 'answer'" in message and "prompt_field" in message


@pytest.mark.parametrize("prompt", [7, None, [], [{"role": "user"}], ["hi"], {"content": "hi"}])
def test_prompt_that_is_neither_text_nor_messages_names_file_and_line(tmp_path, prompt):
    path = write_jsonl(tmp_path / "p.jsonl", [json.dumps({"prompt": prompt})])
    with pytest.raises(UserError, match=re.escape(f"{path}:1: field 'prompt' must be text or a list of chat")):
        load_examples(path)


def test_chat_message_prompts_are_kept(tmp_path):
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2 + 2?"}]
    path = write_jsonl(tmp_path / "chat.jsonl", [json.dumps({"prompt": messages, "answer": "4"})])
    assert load_examples(path) == [Example(prompt=messages, columns={"answer": "4"}, index=0)]


def test_parquet_round_trip(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    rows = [
        {"prompt": "Make 10", "numbers": [2, 5], "target": 10},
        {"prompt": "Make 7", "numbers": [3, 4], "target": 7},
    ]
    path = tmp_path / "d.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    examples = load_examples(str(path))
    assert examples == [
        Example(prompt="Make 10", columns={"numbers": [2, 5], "target": 10}, index=0),
        Example(prompt="Make 7", columns={"numbers": [3, 4], "target": 7}, index=1),
    ]


def test_parquet_without_pyarrow_says_how_to_install(tmp_path, monkeypatch):
    path = tmp_path / "d.parquet"
    path.write_bytes(b"PAR1")
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # makes `import pyarrow...` raise ImportError
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    with pytest.raises(UserError, match="pip install pyarrow"):
        load_examples(str(path))


def test_hf_source_without_datasets_says_what_to_do(monkeypatch):
    monkeypatch.setitem(sys.modules, "datasets", None)
    with pytest.raises(UserError, match=r"needs the `datasets` package: pip install datasets, or .* local \.jsonl"):
        load_examples("hf:openai/gsm8k:main", prompt_field="question")


def test_hf_source_passes_name_config_and_split(monkeypatch):
    monkeypatch.setattr(sources, "dataset_problem", lambda name: None)  # (the Hub has it)
    calls = []

    def load_dataset(name, config, split):
        calls.append((name, config, split))
        return [{"question": "q0", "answer": "1"}, {"question": "q1", "answer": "2"}]

    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=load_dataset))
    examples = load_examples("hf:openai/gsm8k:main", split="test", prompt_field="question", limit=1)
    assert examples == [Example(prompt="q0", columns={"answer": "1"}, index=0)]
    load_examples("hf:owner/name", prompt_field="question")
    assert calls == [("openai/gsm8k", "main", "test"), ("owner/name", None, "train")]


def test_hf_source_without_a_name_is_a_user_error():
    with pytest.raises(UserError, match="names no dataset"):
        load_examples("hf:")


def test_missing_path_is_named(tmp_path):
    missing = str(tmp_path / "nope.jsonl")
    with pytest.raises(UserError, match=re.escape(f"data source {missing!r} does not exist")):
        load_examples(missing)


def test_misspelt_task_name_gets_a_suggestion():
    with pytest.raises(UserError, match="did you mean task 'countdown'"):
        load_examples("countdwn")


def test_unknown_extension_lists_what_is_supported(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("prompt\nhi\n")
    with pytest.raises(UserError, match=r"unsupported extension '\.csv'.*\.jsonl or \.parquet file, a folder "
                                        r"written by Dataset.save_to_disk, or hf:owner/name"):
        load_examples(str(path))


def test_negative_limit_is_a_user_error():
    with pytest.raises(UserError, match="limit=-1 is negative"):
        load_examples("arithmetic", limit=-1)


@pytest.mark.skipif(not GSM8K_TEST.exists(), reason="shared GSM8K copy not present")
def test_real_gsm8k_test_file():
    examples = load_examples(str(GSM8K_TEST), prompt_field="question", limit=5)
    assert len(examples) == 5
    assert all(isinstance(e.prompt, str) and "####" in e.columns["answer"] for e in examples)


def test_a_hub_dataset_that_cannot_be_loaded_is_one_line(monkeypatch):
    monkeypatch.setattr(sources, "dataset_problem", lambda name: None)  # (cached, or the Hub has it: datasets fails)
    fake = types.ModuleType("datasets")

    def load_dataset(*args, **kwargs):
        raise ConnectionError("Couldn't reach 'openai/gsm8k' on the Hub (LocalEntryNotFoundError)\nmore detail")

    fake.load_dataset = load_dataset
    monkeypatch.setitem(sys.modules, "datasets", fake)
    with pytest.raises(UserError, match=(r"could not load 'openai/gsm8k' \(split 'test'\)"
                                         r".*ConnectionError: Couldn't reach.*network")) as info:
        load_examples("hf:openai/gsm8k:main", split="test")
    assert "\n" not in str(info.value)


def hub(monkeypatch, tmp_path, *, reachable, has=True):
    """The Hub as `dataset_info` sees it, empty caches under `tmp_path`, and what `load_dataset` was asked."""
    import huggingface_hub
    from huggingface_hub import constants
    from huggingface_hub.errors import RepositoryNotFoundError

    asked, loaded = [], []

    def dataset_info(self, name, timeout=None):
        asked.append(timeout)
        if not reachable:
            raise ConnectionError("Name or service not known")
        if not has:
            missing = RepositoryNotFoundError.__new__(RepositoryNotFoundError)  # (as the Hub's 404 is raised)
            Exception.__init__(missing, "404 Repository Not Found")
            raise missing

    monkeypatch.setattr(huggingface_hub.HfApi, "dataset_info", dataset_info)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    import datasets.config

    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "datasets")
    monkeypatch.setattr(datasets, "load_dataset", lambda *a, **k: loaded.append(a) or [{"question": "q"}])
    for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    return asked, loaded


@pytest.mark.parametrize(("reachable", "has", "said"), [
    (False, True, "it is not in the local cache and the Hub could not be reached (ConnectionError)"),
    (True, False, "the Hub has no such dataset (check the name)"),
])
def test_a_hub_dataset_the_hub_cannot_give_is_one_line_within_two_seconds(monkeypatch, tmp_path, reachable, has,
                                                                          said):
    """Not cached: asked of the Hub once, within 2 s, instead of `datasets`' retries (about 30 s offline)."""
    import time

    from rlvr.evaluate.benchmarks import load_benchmark

    asked, loaded = hub(monkeypatch, tmp_path, reachable=reachable, has=has)
    started = time.perf_counter()
    with pytest.raises(UserError) as e:
        load_examples("hf:openai/gsm8k:main", split="test", prompt_field="question")
    assert time.perf_counter() - started < 2.0 and asked == [2.0] and not loaded
    assert str(e.value) == (f"could not load 'openai/gsm8k' (split 'test') from the Hugging Face Hub: {said}; "
                            "use a local .jsonl/.parquet copy")
    with pytest.raises(UserError) as e:
        load_benchmark("gsm8k")
    assert str(e.value).endswith("; use a local .jsonl/.parquet copy, or --data-dir DIR with a copy at "
                                 "DIR/gsm8k/test.jsonl")


@pytest.mark.parametrize("where", ["hub", "datasets", "offline"])
def test_a_cached_hub_dataset_or_one_offline_is_left_to_datasets(monkeypatch, tmp_path, where):
    asked, loaded = hub(monkeypatch, tmp_path, reachable=False)
    if where == "hub":
        (tmp_path / "hub" / "datasets--openai--gsm8k").mkdir(parents=True)
    elif where == "datasets":
        (tmp_path / "datasets" / "openai___gsm8k").mkdir(parents=True)
    else:
        monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    assert load_examples("hf:openai/gsm8k:main", split="test", prompt_field="question")[0].prompt == "q"
    assert asked == [] and loaded == [("openai/gsm8k", "main")]


def test_a_file_longer_than_the_size_read_from_it_says_so_before_the_model_loads(tmp_path, monkeypatch, capsys):
    """A file of 7,473 rows trained on its first 2,000 (data.train_size's default) and was evaluated on the first
    100 of its held-out rows, without a word."""
    from rlvr.config import TrainConfig
    from rlvr.config.loading import config_from_dict
    from rlvr.data.sources import cut_short
    from rlvr.rl import build

    rows = [{"prompt": f"What is {i} + 1?", "answer": str(i + 1)} for i in range(12)]
    for name, count in (("train.jsonl", 12), ("eval.jsonl", 7)):
        (tmp_path / name).write_text("".join(json.dumps(r) + "\n\n" for r in rows[:count]))  # (blank lines: no rows)

    def load_models(*args):
        raise AssertionError("the model was loaded")

    monkeypatch.setattr(build, "load_models", load_models)
    config = config_from_dict(TrainConfig, {"model": {"name": "tiny"}, "data": {
        "train": str(tmp_path / "train.jsonl"), "eval": str(tmp_path / "eval.jsonl"), "train_size": 10,
        "eval_size": 5}})
    with pytest.raises(AssertionError, match="the model was loaded"):
        build.build_parts(config)
    err = capsys.readouterr().err
    assert (f"rlvr: data.train_size is 10: the first 10 of the 12 rows of {tmp_path / 'train.jsonl'} are read (set "
            "data.train_size higher to read more)") in err
    assert f"rlvr: data.eval_size is 5: the first 5 of the 7 rows of {tmp_path / 'eval.jsonl'} are read" in err
    assert cut_short(str(tmp_path / "train.jsonl"), 12, "data.train_size", 12) is None  # every row read
    assert cut_short("arithmetic", 10, "data.train_size", 10) is None  # (a task: as many as asked for)
