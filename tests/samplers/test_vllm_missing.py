"""Without vLLM installed, generation.backend=vllm stops in one line naming the install, before any work."""

import importlib.util

import pytest

from rlvr.errors import UserError
from rlvr.grpo.trainer import train_grpo

from ..train.test_step import DIGITS, tiny_config


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vLLM is installed here")
def test_the_vllm_backend_without_vllm_names_the_install(tmp_path):
    with pytest.raises(UserError, match=r"generation.backend=vllm needs vLLM: .*install_vllm_cpu.sh"):
        train_grpo(tiny_config(tmp_path, "model.name=tiny-h32", "generation.backend=vllm", DIGITS, steps=1))



@pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="vLLM is not installed here (.venv-vllm has it)")
def test_an_engine_argument_vllm_does_not_have_is_one_line_naming_the_nearest():
    from rlvr.samplers.vllm import known_engine_args

    assert known_engine_args({"max_model_len": 512}) == {"max_model_len": 512}
    with pytest.raises(UserError, match=r"vLLM \S+ has no engine argument 'max_model_length'; did you mean "
                                        r"'max_model_len'\?"):
        known_engine_args({"max_model_len": 512, "max_model_length": 512})
