"""A small learnable SFT set (echo a word), and configs for the tiny model that run in a second."""

import json
import random

import pytest

from rlvr.config import SFTConfig, config_from_dict


def write_rows(path, rows):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def echo_rows(n=40, seed=0):
    """prompt "echo <word>" -> completion "<word>!": learnable by a 2-layer model in a few dozen steps."""
    rng = random.Random(seed)
    words = ["".join(rng.choice("abcde") for _ in range(rng.randint(3, 6))) for _ in range(n)]
    return [{"prompt": f"echo {w}", "completion": w + "!"} for w in words]


def tiny_sft_config(data, output_dir, **changes):
    # one thread: two OpenMP threads on a busy 2-core machine make each step ~100x slower
    optim = {"lr": 3e-3, "schedule": "constant", **changes.pop("optim", {})}
    settings = dict(model="tiny", data=str(data), eval_fraction=0.25, batch_size=8, max_steps=6,
                    output_dir=str(output_dir), threads=1, tensorboard=False, optim=optim)
    return config_from_dict(SFTConfig, {**settings, **changes})


@pytest.fixture(scope="session")
def echo_file(tmp_path_factory):
    return write_rows(tmp_path_factory.mktemp("sft") / "echo.jsonl", echo_rows())


@pytest.fixture
def make_config(tmp_path, echo_file):
    return lambda name="run", **changes: tiny_sft_config(changes.pop("data", echo_file), tmp_path / name, **changes)


@pytest.fixture(autouse=True)
def one_thread():
    """Tests that call the model directly run on one thread too (train_sft sets it from config.threads)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
