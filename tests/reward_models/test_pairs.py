"""Preference pairs: every malformed row is one line naming FILE:LINE and the fix; the split is seeded and exact."""

import json

import pytest

from rlvr.errors import UserError
from rlvr.reward_models.pairs import PreferencePair, load_pairs, split_pairs

GOOD = '{"prompt": "2+2?", "chosen": "4", "rejected": "5"}'


def test_text_and_chat_prompts(tmp_path):
    path = tmp_path / "p.jsonl"
    chat = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"}]
    path.write_text(GOOD + "\n\n" + json.dumps({"prompt": chat, "chosen": "4", "rejected": "22", "extra": 1}) + "\n")
    pairs = load_pairs(path)
    assert [p.prompt for p in pairs] == ["2+2?", chat]
    assert [p.rejected for p in pairs] == ["5", "22"]
    assert pairs[1].where == f"{path}:3"  # blank lines are skipped but still counted


@pytest.mark.parametrize(
    "row, message",
    [
        ('{"prompt": "x", "chosen": "a"', "not valid JSON"),
        ('["x", "a", "b"]', "expected a JSON object"),
        ('{"prompt": "x", "chosen": "a"}', "no 'rejected' field (fields: 'prompt', 'chosen')"),
        ('{"question": "x", "chosen": "a", "rejected": "b"}', "no 'prompt' field"),
        ('{"prompt": 3, "chosen": "a", "rejected": "b"}', "field 'prompt' must be text or a list of chat messages"),
        ('{"prompt": [{"role": "user"}], "chosen": "a", "rejected": "b"}', "field 'prompt' must be text"),
        ('{"prompt": "x", "chosen": ["a"], "rejected": "b"}', "field 'chosen' must be the completion's text"),
        ('{"prompt": "x", "chosen": "a", "rejected": null}', "field 'rejected' must be the completion's text"),
        ('{"prompt": "x", "chosen": "", "rejected": "b"}', "field 'chosen' is empty"),
        ('{"prompt": "x", "chosen": "b", "rejected": "b"}', "'chosen' and 'rejected' are the same text"),
        ('{"prompt": [{"role": "robot", "content": "x"}], "chosen": "a", "rejected": "b"}',
         "field 'prompt': message 1 has the role 'robot'"),
    ],
)
def test_malformed_row_names_file_and_line(tmp_path, row, message):
    path = tmp_path / "p.jsonl"
    path.write_text(GOOD + "\n" + row + "\n")
    with pytest.raises(UserError) as error:
        load_pairs(path)
    text = str(error.value)
    assert text.startswith(f"{path}:2: ") and message in text and "\n" not in text


def test_missing_empty_and_wrong_kind_of_file(tmp_path):
    with pytest.raises(UserError, match="not found"):
        load_pairs(tmp_path / "nope.jsonl")
    (tmp_path / "empty.jsonl").write_text("\n\n")
    with pytest.raises(UserError, match="holds no preference pairs"):
        load_pairs(tmp_path / "empty.jsonl")
    (tmp_path / "p.csv").write_text("prompt,chosen,rejected\n")
    with pytest.raises(UserError, match="must be .jsonl"):
        load_pairs(tmp_path / "p.csv")


def _pairs(n):
    return [PreferencePair(f"prompt {i}", f"good {i}", f"bad {i}") for i in range(n)]


def test_split_is_exact_seeded_and_independent_of_order():
    pairs = _pairs(40)
    train, held_out = split_pairs(pairs, 0.25, seed=0)
    assert (len(train), len(held_out)) == (30, 10)
    assert set(map(id, train)).isdisjoint(map(id, held_out)) and len(set(map(id, train + held_out))) == 40
    assert split_pairs(pairs, 0.25, seed=0) == (train, held_out)
    assert sorted(split_pairs(pairs[::-1], 0.25, seed=0)[1], key=pairs.index) == sorted(held_out, key=pairs.index)
    assert split_pairs(pairs, 0.25, seed=1)[1] != held_out


def test_split_edges():
    assert split_pairs(_pairs(5), 0.0, seed=0) == (_pairs(5), [])
    assert [len(part) for part in split_pairs(_pairs(3), 0.01, seed=0)] == [2, 1]  # at least one held out
    assert [len(part) for part in split_pairs(_pairs(1), 0.5, seed=0)] == [1, 0]  # never the only pair
    with pytest.raises(UserError, match="eval_fraction"):
        split_pairs(_pairs(3), 1.0, seed=0)


def test_a_folder_dataset_save_to_disk_wrote_holds_pairs(tmp_path):
    import datasets

    rows = [{"prompt": "2+2?", "chosen": "4", "rejected": "5"}, {"prompt": "1+1?", "chosen": "2", "rejected": "3"}]
    datasets.Dataset.from_list(rows).save_to_disk(str(tmp_path / "pairs"))
    pairs = load_pairs(tmp_path / "pairs")
    assert [(p.prompt, p.chosen, p.rejected) for p in pairs] == [("2+2?", "4", "5"), ("1+1?", "2", "3")]
    datasets.Dataset.from_list([{"prompt": "p", "chosen": "a"}]).save_to_disk(str(tmp_path / "half"))
    with pytest.raises(UserError, match=r"half row 0: no 'rejected' field"):
        load_pairs(tmp_path / "half")
