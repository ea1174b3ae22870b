"""The memory plan (rlvr.rl.memory): each part moves with its setting, a run that cannot fit is refused
before its model loads, and the plan lands within 30% of the peak a real run measures (the tiny model and
SmolLM2, each run in its own process: a process's peak only grows)."""

import json
import os
import re
import subprocess
import sys

import pytest
import torch

from rlvr.config import TrainConfig
from rlvr.config.loading import config_from_dict
from rlvr.errors import UserError
from rlvr.models.devices import BF16_UNITS_ENV
from rlvr.models.shapes import Shapes, model_shapes
from rlvr.prepacked import MIN_STEPS, onednn_linear, pays
from rlvr.rl import build
from rlvr.rl.memory import GB, plan_memory, refuse_unless_fits

CPU = torch.device("cpu")
SHAPES = model_shapes("tiny", "~/.cache/rlvr")


def plan(**settings):
    config = config_from_dict(TrainConfig, {"model": {"name": "tiny"}, **settings})
    return plan_memory(config, SHAPES, prompt_tokens=100, runtime=0.5 * GB, device=CPU, dtype=torch.float32)


def test_each_part_moves_with_its_setting():
    base = plan().parts
    assert base["weights"] == base["reference"] == base["gradients"] == SHAPES.parameters * 4
    assert base["optimizer"] == 2 * base["gradients"] and base["runtime"] == 0.5 * GB
    assert plan(algorithm={"beta": 0.0}).parts["reference"] == 0  # no reference to hold
    assert plan(optim={"micro_batch_tokens": 1024}).parts["activations"] == base["activations"] / 2
    assert plan(model={"name": "tiny", "gradient_checkpointing": True}).parts["activations"] < base["activations"]
    lora = plan(model={"name": "tiny", "lora": {"rank": 4}}).parts
    assert lora["reference"] == 0 and lora["optimizer"] < base["optimizer"] / 4  # the adapters alone train
    assert 0 < lora["sampler copy"] < lora["weights"]  # its adapted weights folded for decoding
    assert plan(sampling={"max_staleness": 1}).parts["sampler copy"] == base["weights"]  # a whole copy decodes
    cache = plan(sampling={"batch_size": 2**16, "group_size": 8}).parts  # every completion decoded at once
    assert cache["KV cache"] == 2**16 * (100 + 64) * SHAPES.layers * 2 * SHAPES.kv_width * 4
    assert plan(generation={"max_new_tokens": 36}).parts["KV cache"] == base["KV cache"] * (100 + 36) / (100 + 64)
    # the output layer: a micro-batch's kept softmax and a chunk's two buffers; under checkpointing, three buffers
    tokens, vocab = min(2048, 16 * (100 + 64)), SHAPES.vocab  # (16 completions a batch by default)
    assert base["logits"] == (tokens + 2 * 512) * vocab * 4
    assert plan(model={"name": "tiny", "gradient_checkpointing": True}).parts["logits"] == 3 * 512 * vocab * 4


@pytest.mark.skipif(not onednn_linear(), reason="this torch has no oneDNN linear: nothing is packed")
def test_decoding_on_a_cpu_counts_its_packed_copy_of_the_linear_weights(monkeypatch):
    """In fp32, and in bf16 where the CPU has bf16 units: the copy in the forward dtype, the KV cache in fp32."""
    linear = sum(n_in * n_out for _, n_in, n_out in SHAPES.linears) + SHAPES.vocab * SHAPES.hidden
    assert plan().parts["packed weights"] == linear * 4
    config = config_from_dict(TrainConfig, {"model": {"name": "tiny"}})
    for device, dtype in [(CPU, torch.bfloat16), (torch.device("cuda"), torch.float32)]:  # (bf16: no units here)
        assert "packed weights" not in plan_memory(config, SHAPES, 100, 0.0, device, dtype).parts
    assert plan_memory(config, SHAPES, 100, 0.0, CPU, torch.bfloat16).parts["KV cache"] == plan().parts["KV cache"] / 2
    monkeypatch.setenv(BF16_UNITS_ENV, "avx512_bf16")
    if torch.ops.mkldnn._is_mkldnn_bf16_supported():
        bf16 = plan_memory(config, SHAPES, 100, 0.0, CPU, torch.bfloat16).parts
        assert bf16["packed weights"] == linear * 2 and bf16["KV cache"] == plan().parts["KV cache"]
    assert "packed weights" not in plan(generation={"max_new_tokens": MIN_STEPS - 1}).parts
    assert "packed weights" not in plan(generation={"backend": "vllm"}).parts


def test_under_bf16_the_update_counts_a_bf16_copy_of_the_linear_weights():
    """Kept for the backward pass: autocast's cache of the trained weights, or the frozen ones cast once (LoRA)."""
    linear = sum(n_in * n_out for _, n_in, n_out in SHAPES.linears)
    assert "weight casts" not in plan().parts
    for model in ({"name": "tiny"}, {"name": "tiny", "lora": {"rank": 4}}):
        config = config_from_dict(TrainConfig, {"model": model})
        assert plan_memory(config, SHAPES, 100, 0.0, CPU, torch.bfloat16).parts["weight casts"] == linear * 2


def test_under_bf16_lora_keeps_fp32_activations():
    """The adapted layers hand their sums on in fp32 (rlvr.models.adapters.add_unrounded_sums): the layers keep
    fp32 activations, where a full fine-tune's are bf16."""
    def activations(model, dtype):
        config = config_from_dict(TrainConfig, {"model": model})
        return plan_memory(config, SHAPES, 100, 0.0, CPU, dtype).parts["activations"]

    full, lora = {"name": "tiny"}, {"name": "tiny", "lora": {"rank": 4}}
    assert activations(full, torch.bfloat16) * 2 == activations(full, torch.float32) > 0
    assert activations(lora, torch.bfloat16) == activations(lora, torch.float32) == activations(full, torch.float32)


@pytest.mark.skipif(not onednn_linear(), reason="this torch has no oneDNN linear: nothing is packed")
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_under_lora_a_folded_layers_packed_copy_takes_the_folds_place(dtype, monkeypatch):
    """Packed decoding sets each folded weight aside as it packs it (rlvr.prepacked): the folds (in the forward
    dtype) and the other layers' packed copies are counted, not the folded layers' packed copies as well."""
    monkeypatch.setenv(BF16_UNITS_ENV, "avx512_bf16")  # (bf16 decoding packs where the CPU has bf16 units)
    if dtype == torch.bfloat16 and not pays(CPU, dtype, 256):
        pytest.skip("this CPU has no oneDNN bf16: nothing is packed in bf16")
    act = torch.finfo(dtype).bits // 8
    output = SHAPES.vocab * SHAPES.hidden

    def parts(targets):
        lora = {"name": "tiny", "lora": {"rank": 4, "target_modules": targets}} if targets else {"name": "tiny"}
        config = config_from_dict(TrainConfig, {"model": lora, "generation": {"max_new_tokens": 256}})
        return plan_memory(config, SHAPES, 100, 0.0, CPU, dtype).parts

    every = sum(n_in * n_out for _, n_in, n_out in SHAPES.linears)
    q = sum(n_in * n_out for name, n_in, n_out in SHAPES.linears if name.endswith("q_proj"))
    assert parts(None)["packed weights"] == (every + output) * act  # a full fine-tune folds nothing
    assert parts(["all-linear"])["packed weights"] == output * act
    assert parts(["all-linear"])["sampler copy"] == every * act  # (the folds in the forward dtype)
    assert parts(["q_proj"])["packed weights"] == (every - q + output) * act
    assert parts(["q_proj"])["sampler copy"] == q * act


@pytest.mark.skipif(not onednn_linear(), reason="this torch has no oneDNN linear: nothing is packed")
def test_decodings_blocks_of_32_mb_or_more_are_not_added_to_the_update():
    """glibc maps them apart and unmaps them when freed: the update's parts take their place, up to their size."""
    up, small, vocab, hidden = 4096 * 16384, 1024 * 1024, 32000, 4096  # (an MLP matrix of 268 MB in fp32)
    big = Shapes(up + small + vocab * hidden, hidden=hidden, intermediate=16384, layers=1, kv_width=1024, vocab=vocab,
                 context=4096, linears=(("layers.0.mlp.up_proj", 4096, 16384), ("layers.0.attn.q_proj", 1024, 1024)))

    def big_plan(*, micro=2048, device=CPU, **settings):
        config = config_from_dict(TrainConfig, {"model": {"name": "tiny", "lora": {"rank": 4}},
                                                "optim": {"micro_batch_tokens": micro}, **settings})
        return plan_memory(config, big, 100, 0.0, device, torch.float32)

    assert plan(generation={"max_new_tokens": 256}).reused == 0  # (the tiny model's blocks are all small)
    # under LoRA decoding ends giving all it freed back (malloc_trim), the small blocks too
    lora = plan(model={"name": "tiny", "lora": {"rank": 4}}, generation={"max_new_tokens": 256})
    assert lora.reused == pytest.approx(lora.parts["sampler copy"] + lora.parts["packed weights"])
    plan_ = big_plan(model={"name": "tiny"})  # the packed up_proj and output layer go back; q_proj's stays
    assert plan_.parts["activations"] + plan_.parts["logits"] > 3 * up * 4
    assert plan_.reused == (up + vocab * hidden) * 4
    assert plan_.total == pytest.approx(sum(plan_.parts.values()) - plan_.reused)
    assert "less 0.79 given back by decoding before the update" in plan_.line(None)
    small_update = big_plan(micro=8)  # an update smaller than what decoding gave back: the peak is decoding's
    update = small_update.parts["activations"] + small_update.parts["logits"]
    assert small_update.reused == update
    assert small_update.total == pytest.approx(sum(small_update.parts.values()) - update)
    assert big_plan(sampling={"max_staleness": 1}).reused == 0  # the sampler decodes beside the update
    assert big_plan(device=torch.device("cuda")).reused == 0


def test_the_largest_part_names_the_setting_to_change():
    config = config_from_dict(TrainConfig, {"model": {"name": "tiny"}, "optim": {"micro_batch_tokens": 10**6}})
    big = plan_memory(config, SHAPES, prompt_tokens=100, runtime=0.5 * GB, device=CPU, dtype=torch.float32)
    refuse_unless_fits(big, big.total, config)  # (it fits exactly: no error)
    with pytest.raises(UserError, match=r"largest part is activations .*lower optim.micro_batch_tokens \(now "
                                        r"1000000\) or set model.gradient_checkpointing: true; or set preflight: off"):
        refuse_unless_fits(big, big.total - 1, config)


def test_a_run_that_cannot_fit_is_refused_before_its_model_loads(monkeypatch):
    def load_models(*args):
        raise AssertionError("the model was loaded")

    monkeypatch.setattr(build, "load_models", load_models)
    huge = {"model": {"name": "tiny"}, "sampling": {"batch_size": 2**24, "group_size": 8}}
    with pytest.raises(UserError, match=r"^this run needs about .* GB of RAM and .* GB is available; its largest part "
                                        r"is KV cache .*: lower sampling.batch_size \(now 16777216\)"):
        build.build_parts(config_from_dict(TrainConfig, huge))
    with pytest.raises(AssertionError, match="the model was loaded"):  # preflight: off starts it anyway
        build.build_parts(config_from_dict(TrainConfig, {**huge, "preflight": "off"}))


def test_the_command_line_refuses_it_in_one_line(tmp_path):
    done = subprocess.run([sys.executable, "-m", "rlvr", "train", "--set", "model.name=tiny", "--output-dir",
                           str(tmp_path / "run"), "--set", "sampling.batch_size=16777216"],
                          capture_output=True, text=True, timeout=120, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.splitlines()[-1].startswith("rlvr: error: this run needs about ")


@pytest.mark.parametrize("model", ["tiny", "tiny with LoRA", "smollm2"])
def test_the_plan_is_within_30_percent_of_the_measured_peak(tmp_path, model):
    """Two steps (the second holds AdamW's moments too), the peak as the run logs it (its resident set)."""
    run = tmp_path / "run"
    lora = ["--set", "model.lora.rank=4"] if model.endswith("LoRA") else []
    done = subprocess.run([sys.executable, "-m", "rlvr", "train", "--set", f"model.name={model.split()[0]}", *lora,
                           "--max-steps", "2", "--set", "eval_before=false", "--set", "eval_after=false",
                           "--output-dir", str(run)],
                          capture_output=True, text=True, timeout=600, env={**os.environ, "OMP_NUM_THREADS": "2"})
    assert done.returncode == 0, done.stderr[-2000:]
    planned = float(re.search(r"rlvr: memory plan: ([\d.]+) GB of RAM", done.stderr).group(1))
    peaks = [json.loads(line).get("memory/peak_gb", 0.0) for line in (run / "metrics.jsonl").open()]
    measured = max(peaks)
    assert abs(planned - measured) <= 0.3 * measured, (planned, measured)
