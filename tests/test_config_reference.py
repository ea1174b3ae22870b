"""The config reference, generated from the config dataclasses' docstrings (rlvr.config.reference): the page in
docs/ is current, every setting has a meaning, and `--print-config` prints YAML that loads back as the same
config."""

from pathlib import Path

import pytest

from rlvr.cli import main
from rlvr.config import load_config
from rlvr.config.reference import COMMANDS, commented_yaml, markdown, reference_rows

ROOT = Path(__file__).resolve().parents[1]


def test_the_reference_page_is_current():
    """Stale when a setting or its docstring changed: run scripts/config_reference.py."""
    assert (ROOT / "docs" / "config.md").read_text() == markdown()


@pytest.mark.parametrize("command, cls", COMMANDS, ids=[c for c, _ in COMMANDS])
def test_every_setting_says_what_it_means(command, cls):
    undocumented = [key for key, _, _, doc in reference_rows(cls) if not doc.strip()]
    assert not undocumented, f"{command}: no docstring under {undocumented}"


@pytest.mark.parametrize("source", [None, "configs/addition.yaml", "configs/multiply_tool.yaml"])
def test_the_printed_config_loads_back_as_the_same_config(tmp_path, source):
    config = load_config(ROOT / source if source else None, ["model.lora.rank=8", "rewards=[boxed_format]"])
    printed = tmp_path / "printed.yaml"
    printed.write_text(commented_yaml(config))
    assert load_config(printed) == config
    assert "# Peak learning rate of AdamW." in printed.read_text()


def test_print_config_prints_and_trains_nothing(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["train", "--config", str(ROOT / "configs" / "tiny.yaml"), "--output-dir", str(out),
                 "--set", "optim.lr=3e-4", "--print-config"]) == 0
    printed = capsys.readouterr().out
    assert "  lr: 0.0003\n" in printed and f"output_dir: {out}" in printed and not out.exists()
