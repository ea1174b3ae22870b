"""A learnable synthetic preference set and one tiny reward model trained on it, shared by the tests."""

import json
import random

import pytest

from rlvr.config import RewardModelConfig, config_from_dict
from rlvr.reward_models.train import train_reward_model

MARKER = "!"  # every chosen completion ends with it, no rejected one contains it


def write_pairs(path, n=64, seed=0):
    """n pairs of random lowercase words; the chosen completion carries MARKER, the rejected one does not."""
    rng = random.Random(seed)
    word = lambda k: "".join(rng.choice("abcdefghij") for _ in range(k))  # noqa: E731
    with path.open("w") as f:
        for _ in range(n):
            row = {"prompt": f"say {word(3)}", "chosen": word(rng.randint(4, 8)) + MARKER,
                   "rejected": word(rng.randint(4, 8))}
            f.write(json.dumps(row) + "\n")
    return path


def tiny_rm_config(data, output_dir, **changes):
    # one thread: two OpenMP threads on a busy 2-core machine make each step ~100x slower
    settings = dict(model="tiny", data=str(data), eval_fraction=0.25, lr=1e-3, batch_size=8, max_steps=15,
                    output_dir=str(output_dir), threads=1)
    return config_from_dict(RewardModelConfig, {**settings, **changes})


@pytest.fixture(scope="session")
def pairs_file(tmp_path_factory):
    return write_pairs(tmp_path_factory.mktemp("pairs") / "pairs.jsonl")


@pytest.fixture(scope="session")
def trained(tmp_path_factory, pairs_file):
    """(config, summary) of a reward model trained for 15 steps, checkpointed every 5."""
    config = tiny_rm_config(pairs_file, tmp_path_factory.mktemp("rm") / "run", save_every=5)
    return config, train_reward_model(config)


@pytest.fixture
def make_config(tmp_path, pairs_file):
    return lambda **changes: tiny_rm_config(changes.pop("data", pairs_file), tmp_path / "run", **changes)
