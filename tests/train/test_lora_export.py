"""A LoRA run's adapters leave rlvr: `rlvr export` copies them (peft loads them on their base) or merges
them into a plain transformers checkpoint with the adapter-on log-probs and greedy output, and
`rlvr eval` / `sample` take the run directory as it is."""

import pytest
import torch
from transformers import AutoModelForCausalLM

from rlvr.cli import main
from rlvr.errors import UserError
from rlvr.grpo.trainer import Trainer
from rlvr.models import build_tiny_model, load_model
from rlvr.models.export import export_model
from rlvr.rl.batch import batch_logprobs
from rlvr.run.loop import run_training

from .test_step import DIGITS, as_policy, tiny_config

# adapters merged into the weights give the adapter-on log-probs up to rounding: each merge rounds W + BA once more.
# Measured over five runs (log-probs of -7 to 0): 5-9e-6 nats apart at most after one merge, 5-7e-6 after two, and
# once 1.05e-5 in `make test` (each run's adapters start elsewhere: a Trainer built here is not seeded as `rlvr train`
# seeds it, rlvr.run.process.configure_process), where a missing adapter moves them by nats
MERGED = 5e-5


@pytest.fixture(scope="module")
def lora_run(tmp_path_factory):
    """A 2-step LoRA run on a tiny base saved as a folder (as a pretrained model is), and its trainer."""
    tmp = tmp_path_factory.mktemp("lora")
    model, tokenizer = build_tiny_model(0)
    model.save_pretrained(tmp / "base")
    tokenizer.save_pretrained(tmp / "base")
    trainer = Trainer(tiny_config(tmp, f"model.name={tmp / 'base'}", "model.lora.rank=4", "optim.lr=2e-2", DIGITS,
                                  "eval_before=false", "eval_after=false"))
    run_training(trainer)
    rollout = trainer.source.sample(trainer.source.prompts.next_batch(), 0, trainer.source.synced())
    return tmp, trainer, rollout


def greedy(model, tokenizer, text="12+7="):
    ids = tokenizer(text, return_tensors="pt").input_ids
    return model.generate(ids, max_new_tokens=8, do_sample=False, pad_token_id=tokenizer.pad_token_id)[0].tolist()


def test_the_merged_export_is_a_plain_checkpoint_with_the_adapted_policy(lora_run, tmp_path):
    tmp, trainer, rollout = lora_run
    assert main(["export", str(tmp / "run"), "--output", str(tmp_path / "merged"), "--merge"]) == 0
    assert not (tmp_path / "merged" / "adapter_config.json").exists()
    merged = AutoModelForCausalLM.from_pretrained(tmp_path / "merged").eval()  # plain transformers, no peft
    trainer.policy.model.eval()
    adapted = batch_logprobs(trainer.policy, rollout, 10_000, 1.0)
    assert float((batch_logprobs(as_policy(merged), rollout, 10_000, 1.0) - adapted).abs().max()) < MERGED
    base = batch_logprobs(as_policy(AutoModelForCausalLM.from_pretrained(tmp / "base")), rollout, 10_000, 1.0)
    assert float((base - adapted).abs().max()) > 1e-3  # the adapters changed the policy, and the export has them
    with torch.no_grad():
        assert greedy(merged, trainer.tokenizer) == greedy(trainer.policy.model, trainer.tokenizer)


def test_the_adapter_export_loads_on_its_base_with_peft(lora_run, tmp_path):
    from peft import PeftModel

    tmp, trainer, rollout = lora_run
    export_model(tmp / "run", tmp_path / "adapters", merge=False)
    assert (tmp_path / "adapters" / "adapter_model.safetensors").is_file()
    assert not (tmp_path / "adapters" / "model.safetensors").exists()  # small: the adapters alone
    loaded = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(tmp / "base"), tmp_path / "adapters")
    trainer.policy.model.eval()
    expected = batch_logprobs(trainer.policy, rollout, 10_000, 1.0)
    assert torch.equal(batch_logprobs(as_policy(loaded.eval()), rollout, 10_000, 1.0), expected)


def test_a_lora_run_directory_is_a_model_for_eval_and_sample(lora_run):
    tmp, trainer, rollout = lora_run
    model, _ = load_model(str(tmp / "run"))  # what `rlvr eval --model RUN_DIR` and `rlvr sample` load
    trainer.policy.model.eval()
    expected = batch_logprobs(trainer.policy, rollout, 10_000, 1.0)
    assert float((batch_logprobs(as_policy(model), rollout, 10_000, 1.0) - expected).abs().max()) < MERGED


def test_export_mistakes_are_one_line(lora_run, tmp_path, capsys):
    tmp, _, _ = lora_run
    assert main(["export", str(tmp_path / "nothing"), "--output", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err.startswith("rlvr: error: no model in")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("")
    with pytest.raises(UserError, match="exists and is not empty"):
        export_model(tmp / "run", tmp_path / "full", merge=True)
    (tmp_path / "a_file").write_text("")
    with pytest.raises(UserError, match="could not write .*a_file/out: .*nothing was left there"):
        export_model(tmp / "run", tmp_path / "a_file" / "out", merge=False)  # (its parent is no folder)
    with pytest.raises(UserError, match="a_file is a file: give a new folder"):  # (it said "is not empty")
        export_model(tmp / "run", tmp_path / "a_file", merge=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_file", "full"]  # nothing half-written left


def test_a_later_stage_puts_new_adapters_on_the_merged_lora_model(lora_run, tmp_path):
    """A pipeline stage (or any new run) whose model is a LoRA run: that run's adapters merged into its
    base are the new base, and the saved adapters name it, so the stage's model loads as a whole."""
    tmp, first, rollout = lora_run
    second = Trainer(tiny_config(tmp_path, f"model.name={tmp / 'run'}", "model.lora.rank=2", "optim.lr=2e-2", DIGITS,
                                 "eval_before=false", "eval_after=false", steps=1))
    assert sum(p.numel() for p in second.policy.model.parameters() if p.requires_grad) < sum(
        p.numel() for p in first.policy.model.parameters() if p.requires_grad)  # rank 2: new adapters, not the old
    second.policy.model.eval()
    start = batch_logprobs(second.policy, rollout, 10_000, 1.0)
    first.policy.model.eval()
    assert float((start - batch_logprobs(first.policy, rollout, 10_000, 1.0)).abs().max()) < MERGED
    run_training(second)
    model, _ = load_model(str(tmp_path / "run"))  # both runs' adapters, merged in turn
    expected = batch_logprobs(second.policy, rollout, 10_000, 1.0)
    assert float((batch_logprobs(as_policy(model), rollout, 10_000, 1.0) - expected).abs().max()) < MERGED
    assert float((expected - start).abs().max()) > 1e-2  # (the second run trained: 4-6 nats measured)


@pytest.fixture
def umask_027():
    import os

    previous = os.umask(0o027)
    yield 0o640  # what open() gives a new file under it
    os.umask(previous)


def test_weights_are_readable_as_the_other_files_are(lora_run, tmp_path, umask_027):
    """safetensors writes weights 0600; a checkpoint's model/ (adapters, or a whole model) and both exports give
    every file the mode open() gives under the umask (0640 under 027), as config.json and the tokenizer have."""
    from rlvr.run.checkpoint import save_pretrained

    tmp, trainer, _ = lora_run
    trainer.write_checkpoint(tmp_path / "checkpoint")
    save_pretrained(tmp_path / "whole", *build_tiny_model(0))
    export_model(tmp / "run", tmp_path / "adapters", merge=False)
    export_model(tmp / "run", tmp_path / "merged", merge=True)
    for folder, weights in (("checkpoint/model", "adapter_model.safetensors"), ("whole", "model.safetensors"),
                            ("adapters", "adapter_model.safetensors"), ("merged", "model.safetensors")):
        modes = {p.name: p.stat().st_mode & 0o777 for p in (tmp_path / folder).rglob("*") if p.is_file()}
        assert weights in modes and {"config.json", "adapter_config.json"} & set(modes), (folder, modes)
        assert set(modes.values()) == {umask_027}, (folder, {name: oct(mode) for name, mode in modes.items()})
