"""rlvr.models.devices and the model.device / model.dtype settings, on the CPU (the GPU side: tests/gpu)."""

import pytest
import torch

from rlvr.errors import UserError
from rlvr.grpo.trainer import Trainer, train_grpo
from rlvr.models.devices import autocast, compute_dtype, peak_memory_gb, resolve_device

from .train.test_step import DIGITS, tiny_config


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message seen without a GPU")
def test_asking_for_a_missing_gpu_is_a_one_line_error():
    with pytest.raises(UserError, match="no CUDA GPU.*model.device=auto or cpu"):
        resolve_device("cuda")
    assert resolve_device("auto") == torch.device("cpu")


def test_unknown_devices_are_refused():
    for name in ("gpu0", "mps:3", "tpu"):
        with pytest.raises(UserError, match="model.device"):
            resolve_device(name)


def test_dtype_choice():
    cpu = torch.device("cpu")
    assert compute_dtype("auto", cpu) == torch.float32
    assert compute_dtype("bfloat16", cpu) == torch.bfloat16
    with autocast(cpu, torch.float32):
        assert not torch.is_autocast_enabled("cpu")
    with autocast(cpu, torch.bfloat16):
        assert (torch.ones(2, 2) @ torch.ones(2, 2)).dtype == torch.bfloat16


def test_bf16_autocast_steps_keep_fp32_master_weights(tmp_path):
    """model.dtype=bfloat16 (what `auto` picks on a GPU), exercised on the CPU: the forward passes
    run in bf16, the reference is stored in bf16, weights and optimizer state stay fp32."""
    trainer = Trainer(tiny_config(tmp_path, DIGITS, "model.dtype=bfloat16", "model.device=cpu"))
    assert {p.dtype for p in trainer.policy.reference.parameters()} == {torch.bfloat16}
    before = {n: p.detach().clone() for n, p in trainer.policy.model.named_parameters()}
    metrics = [trainer.step().metrics, trainer.step().metrics]
    assert {p.dtype for p in trainer.policy.model.parameters()} == {torch.float32}
    assert all(s.dtype == torch.float32
               for state in trainer.optimizer.state.values() for s in state.values() if s.dim() > 0)
    assert all(not torch.equal(before[n], p) for n, p in trainer.policy.model.named_parameters())
    assert all(torch.isfinite(torch.tensor(m["loss"])) for m in metrics)
    assert metrics[1]["kl"] > 0


def test_peak_memory_is_reported(tmp_path):
    trainer = Trainer(tiny_config(tmp_path, DIGITS))
    metrics = trainer.step().metrics
    assert 0.05 < metrics["memory/peak_gb"] == pytest.approx(peak_memory_gb(torch.device("cpu")), rel=0.5)


def test_bf16_reaches_the_rollout_thread(tmp_path, monkeypatch):
    """On an accelerator sampling runs on a worker thread (rewards overlap with decoding; forced here) and
    autocast is per thread: the rollout's own log-probs must come from the bf16 forward, not an fp32 one."""
    import rlvr.rl.rollouts as rollouts_module
    from rlvr.logprobs import completion_logprobs
    from rlvr.rl.sampling import score_while_sampling

    monkeypatch.setattr(rollouts_module, "score_while_sampling",
                        lambda *a, **k: score_while_sampling(*a, **{**k, "concurrent": True}))

    gaps = {}
    for dtype in ("float32", "bfloat16"):
        trainer = Trainer(tiny_config(tmp_path / dtype, DIGITS, f"model.dtype={dtype}"))
        scored, _ = trainer.source.take(0)
        r = scored.rollout
        rows = torch.arange(r.completion_ids.shape[0]) // r.group_size
        with torch.no_grad():
            fp32 = completion_logprobs(trainer.policy.model, r.prompt_ids, r.prompt_mask, rows, r.completion_ids,
                                       r.completion_mask).logprobs
        gaps[dtype] = float((fp32 - r.sampling_logprobs).abs().max())
    assert gaps["float32"] < 1e-4 < 1e-2 < gaps["bfloat16"]


@pytest.mark.parametrize(("units", "expected"), [("amx", torch.bfloat16), ("avx512_bf16", torch.bfloat16),
                                                 (None, torch.float32)])
def test_auto_precision_follows_the_cpus_bf16_units(monkeypatch, units, expected):
    """`auto` on a CPU: bf16 autocast where AMX or AVX512-BF16 makes it faster, fp32 elsewhere, each said in
    words that name the CPU and its units; the flags faked, so that the choice is tested on any machine."""
    import rlvr.models.devices as devices

    monkeypatch.setenv(devices.BF16_UNITS_ENV, units or "none")
    monkeypatch.setattr(devices, "cpu_name", lambda: "Some CPU 9000")
    dtype, said = devices.precision("auto", torch.device("cpu"))
    assert dtype == expected == compute_dtype("auto", torch.device("cpu"))
    assert "model.dtype=auto" in said and "Some CPU 9000" in said
    assert ("has AMX" in said) == (units == "amx") and ("has AVX512-BF16" in said) == (units == "avx512_bf16")
    assert said.startswith("bfloat16" if units else "float32")
    # asked for, bf16 is used anyway, with a warning only where the CPU lacks the units
    dtype, said = devices.precision("bfloat16", torch.device("cpu"))
    assert dtype == torch.bfloat16 and ("slower" in said) == (units is None)
    assert devices.precision("float32", torch.device("cpu")) == (torch.float32, "float32 (model.dtype=float32)")


def test_the_cpus_units_are_read_from_torch(monkeypatch):
    import rlvr.models.devices as devices

    monkeypatch.delenv(devices.BF16_UNITS_ENV)  # (the suite's own setting: none)

    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: False, raising=False)
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: True, raising=False)
    assert devices.cpu_bf16_units() == "avx512_bf16"
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: True, raising=False)
    assert devices.cpu_bf16_units() == "amx"
    monkeypatch.delattr(torch.cpu, "_is_amx_tile_supported")
    monkeypatch.delattr(torch.cpu, "_is_avx512_bf16_supported")
    assert devices.cpu_bf16_units() is None  # (a torch without the checks: fp32)
    assert devices.cpu_name()
    monkeypatch.setenv(devices.BF16_UNITS_ENV, "amx")  # told, as the suite tells it "none"
    assert devices.cpu_bf16_units() == "amx"
    monkeypatch.setenv(devices.BF16_UNITS_ENV, "yes")
    with pytest.raises(UserError, match="RLVR_CPU_BF16_UNITS='yes' must be amx, avx512_bf16 or none"):
        devices.cpu_bf16_units()


def test_a_run_says_its_precision_and_records_it(tmp_path, monkeypatch, capsys):
    """The line at the start, the effective config (auto resolved: a resumed run keeps it) and summary.json; on
    a CPU faked to have AMX, `auto` trains in bf16."""
    import json

    import yaml

    import rlvr.models.devices as devices
    from rlvr.grpo.trainer import train_grpo

    monkeypatch.setenv(devices.BF16_UNITS_ENV, "amx")
    config = tiny_config(tmp_path, DIGITS, "model.dtype=auto", "eval_before=false", steps=1)
    summary = train_grpo(config)
    said = capsys.readouterr().err
    assert "rlvr: precision bfloat16 autocast" in said and "AMX" in said
    assert summary["precision"].startswith("bfloat16") and "AMX" in summary["precision"]
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["precision"] == summary["precision"]
    assert yaml.safe_load((tmp_path / "run" / "config.yaml").read_text())["model"]["dtype"] == "bfloat16"
    assert config.model.dtype == "auto"  # (the caller's config is left as given)


def test_bf16_runs_correct_the_rollout_by_default(tmp_path):
    """Left unset, algorithm.rollout_correction.level is decided by the precision: token-level truncated importance
    weights in bf16 (whose sampler and trainer log-probs differ by ~1e-2 nats a token), none in fp32; a level
    given is kept. The effective config records the choice."""
    import yaml

    bf16 = Trainer(tiny_config(tmp_path / "bf16", DIGITS, "model.dtype=bfloat16"))
    assert bf16.config.algorithm.rollout_correction.level == "token"
    assert "rollout_correction/ratio_mean" in bf16.step().metrics
    fp32 = Trainer(tiny_config(tmp_path / "fp32", DIGITS, "model.dtype=float32"))
    assert fp32.config.algorithm.rollout_correction.level == "none"
    assert "rollout_correction/ratio_mean" not in fp32.step().metrics
    kept = Trainer(tiny_config(tmp_path / "kept", DIGITS, "model.dtype=bfloat16",
                               "algorithm.rollout_correction.level=none"))
    assert kept.config.algorithm.rollout_correction.level == "none"
    summary = train_grpo(tiny_config(tmp_path / "run", DIGITS, "model.dtype=bfloat16", "eval_before=false", steps=1))
    assert summary["precision"].startswith("bfloat16")
    saved = yaml.safe_load((tmp_path / "run" / "run" / "config.yaml").read_text())
    assert saved["algorithm"]["rollout_correction"]["level"] == "token"
