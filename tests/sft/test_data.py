"""Reading SFT rows: malformed ones name FILE:LINE and the fix; the held-out split is stable; long rows are
cut or dropped."""

import json

import pytest

from rlvr.errors import UserError
from rlvr.models import build_tiny_tokenizer
from rlvr.sft.data import prepare_data, read_rows, split_rows
from rlvr.sft.masking import IGNORE, trained_count

from .conftest import echo_rows, write_rows

GOOD = {"prompt": "p", "completion": "c"}


@pytest.mark.parametrize(
    "bad, message",
    [
        ('["prompt", "completion"]', "expected a JSON object, got list"),
        ('{"prompt": "p"', "not valid JSON"),
        ('{"prompt": "p", "answer": "4"}', "no 'completion' field (fields: 'prompt', 'answer')"),
        ('{"completion": "c"}', "no 'prompt' field"),
        ('{"prompt": "p", "completion": 4}', "field 'completion' must be the assistant's reply as text, got int 4"),
        ('{"prompt": {"text": "p"}, "completion": "c"}', "field 'prompt' must be text or a list of chat messages"),
        ('{"messages": [{"role": "user"}]}', "field 'messages' must be a non-empty list"),
        ('{"messages": []}', "field 'messages' must be a non-empty list"),
        ('{"messages": [{"role": "user", "content": "hi"}]}', "no assistant message"),
        ('{"messages": [{"role": "assistant", "content": "a"}], "prompt": "p"}', "both 'messages' and 'prompt'"),
        ('{"messages": [{"role": "assistant", "content": "yo"}, {"role": "user", "content": "hi"}]}',
         "message 1 is the assistant's with no user's message before it"),
        ('{"messages": [{"role": "user", "content": "hi"}, {"role": "robot", "content": "x"}, '
         '{"role": "assistant", "content": "a"}]}', "message 2 has the role 'robot', not one of system, user"),
        ('{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": " "}]}',
         "no assistant message with text"),
        ('{"prompt": "p", "completion": ""}', "field 'completion' is empty, so nothing to train on"),
        ('{"prompt": [{"role": "bot", "content": "p"}], "completion": "c"}', "field 'prompt': message 1 has the role"),
    ],
)
def test_malformed_row_is_a_one_line_error_naming_its_line(tmp_path, bad, message):
    path = tmp_path / "d.jsonl"
    path.write_text(json.dumps(GOOD) + "\n\n" + bad + "\n")
    with pytest.raises(UserError) as error:
        read_rows(str(path))
    assert str(error.value).startswith(f"{path}:3: ") and message in str(error.value)
    assert "\n" not in str(error.value)


def test_a_folder_not_saved_by_datasets_or_a_file_of_another_kind_is_said_as_sft_data(tmp_path):
    (tmp_path / "adir").mkdir()
    (tmp_path / "rows.json").write_text("[1]")
    for source, what in (("adir", "a folder Dataset.save_to_disk did not write"),
                         ("rows.json", "neither .jsonl nor .parquet")):
        with pytest.raises(UserError, match=f"^SFT data {tmp_path / source} is {what}: give a .jsonl or .parquet"):
            read_rows(str(tmp_path / source))


def test_missing_or_empty_file(tmp_path):
    with pytest.raises(UserError, match="SFT data not found: nope.jsonl"):
        read_rows("nope.jsonl")
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(UserError, match="holds no rows"):
        read_rows(str(tmp_path / "empty.jsonl"))


def test_extra_fields_are_ignored_and_where_is_kept(tmp_path):
    path = write_rows(tmp_path / "d.jsonl",
                      [{**GOOD, "answer": "4"}, {"messages": [{"role": "user", "content": "q"},
                                                              {"role": "assistant", "content": "a"}]}])
    assert [where for where, _ in read_rows(str(path))] == [f"{path}:1", f"{path}:2"]


def test_split_is_seeded_and_independent_of_row_order():
    rows = [(f"d:{i}", row) for i, row in enumerate(echo_rows(40))]
    train, held = split_rows(rows, 0.25, seed=0)
    assert len(train) == 30 and len(held) == 10
    assert {w for w, _ in held} == {w for w, _ in split_rows(rows[::-1], 0.25, seed=0)[1]}
    assert {w for w, _ in held} != {w for w, _ in split_rows(rows, 0.25, seed=1)[1]}
    assert not {w for w, _ in train} & {w for w, _ in held}
    assert split_rows(rows, 0.0, seed=0) == (rows, [])


def test_long_rows_keep_their_start_and_rows_without_completion_are_dropped():
    tok = build_tiny_tokenizer()
    # plain template: "abcd" is 4 prompt tokens, then completion "xyz" + EOS = 4 trained tokens
    rows = [("d:1", {"prompt": "abcd", "completion": "xyz"}), ("d:2", {"prompt": "ab", "completion": "x"}),
            ("d:3", {"prompt": "abcdefgh", "completion": "x"})]
    data = prepare_data(rows, tok, template="plain", system_prompt=None, max_length=6, eval_fraction=0.0, seed=0)
    assert [e.where for e in data.train] == ["d:1", "d:2"]  # d:3's prompt alone fills max_length
    assert data.dropped == 1 and data.truncated == 1
    first = data.train[0]
    assert tok.decode(first.input_ids) == "abcdxy"  # the end of the completion (and its EOS) is cut
    assert first.labels[:4] == [IGNORE] * 4 and trained_count(first.labels) == 2
    with pytest.raises(UserError, match="raise max_length"):
        prepare_data(rows[2:], tok, template="plain", system_prompt=None, max_length=6, eval_fraction=0.0, seed=0)


def test_a_folder_dataset_save_to_disk_wrote_is_sft_data(tmp_path):
    import datasets

    from rlvr.sft.data import read_rows

    datasets.Dataset.from_list([{"prompt": "echo a", "completion": "a!"}] * 3).save_to_disk(str(tmp_path / "ds"))
    rows = read_rows(str(tmp_path / "ds"))
    assert [row for _, row in rows] == [{"prompt": "echo a", "completion": "a!"}] * 3
    assert rows[0][0] == f"{tmp_path / 'ds'} row 0"
