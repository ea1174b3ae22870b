import pytest
import torch

from rlvr.models import build_tiny_model


@pytest.fixture
def tiny():
    """A fresh random tiny model (eval mode) and its character tokenizer."""
    model, tokenizer = build_tiny_model(seed=0)
    return model.eval(), tokenizer


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
