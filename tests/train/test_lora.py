"""GRPO with LoRA adapters (peft): only the adapters train, the reference is the base with them off
(exactly a frozen copy), sampled log-probs are the update's, and a stopped run resumes exactly."""

import json

import pytest
import torch
from safetensors.torch import load_file

from rlvr import paths
from rlvr.config import TrainConfig
from rlvr.errors import UserError
from rlvr.grpo.trainer import Trainer, train_grpo
from rlvr.models import build_tiny_model, frozen_copy
from rlvr.models.adapters import AdaptersOff, has_adapters
from rlvr.rl.batch import batch_logprobs
from rlvr.run.directory import resume_config

from .test_step import DIGITS, as_policy, tiny_config

LORA = ["model.lora.rank=4", "algorithm.beta=0.04", DIGITS]


def lora_trainer(tmp_path, *extra, steps=2):
    return Trainer(tiny_config(tmp_path, *LORA, *extra, steps=steps))


def test_only_the_adapters_train_and_the_base_stays_bitwise(tmp_path, capfd):
    trainer = lora_trainer(tmp_path, "optim.weight_decay=0.1")
    assert has_adapters(trainer.policy.model) and trainer.parts.reference is None  # no copy of the model is held
    assert "trainable parameters: 8,192 of 88,704 (9.24%)" in capfd.readouterr().err
    before = {n: p.detach().clone() for n, p in trainer.policy.model.named_parameters()}
    trainer.step(), trainer.step()
    trained = {id(p) for group in trainer.optimizer.param_groups for p in group["params"]}
    for name, p in trainer.policy.model.named_parameters():
        adapter = "lora_" in name
        assert (id(p) in trained) == adapter == p.requires_grad, name  # optimizer state for the adapters alone
        assert torch.equal(before[name], p) != adapter, name  # every adapter moved, no base weight did
    assert len(trainer.optimizer.state) == len(trained)


def test_the_reference_is_the_base_model_exactly(tmp_path):
    trainer = lora_trainer(tmp_path)
    base = frozen_copy(build_tiny_model(0)[0])  # what the run started from, held apart
    trainer.step(), trainer.step()  # the adapters are no longer zero: the policy has moved away from the base
    rollout = trainer.source.sample(trainer.source.prompts.next_batch(), 0, trainer.source.synced())
    assert isinstance(trainer.policy.reference, AdaptersOff)
    reference = batch_logprobs(trainer.policy, rollout, 10_000, 1.0, reference=True)
    assert torch.equal(reference, batch_logprobs(as_policy(base), rollout, 10_000, 1.0))
    policy = batch_logprobs(trainer.policy, rollout, 10_000, 1.0)
    assert not torch.allclose(policy, reference, atol=1e-4)  # (so the adapters were on there, and off here)


def test_sampled_log_probs_are_the_updates_recomputation(tmp_path):
    trainer = lora_trainer(tmp_path)
    trainer.step()
    rollout = trainer.source.sample(trainer.source.prompts.next_batch(), 0, trainer.source.synced())
    mask = rollout.completion_mask
    for share_prompt_budget in (10_000, 20):  # the shared-prompt pass, and micro-batches of single rows
        again = batch_logprobs(trainer.policy, rollout, share_prompt_budget, trainer.config.generation.temperature)
        assert float((again - rollout.sampling_logprobs)[mask].abs().max()) < 1e-4


def test_gradient_checkpointing_gives_the_adapters_the_same_gradients(tmp_path):
    grads = []
    for checkpointing in (False, True):
        torch.manual_seed(0)  # (peft draws the adapters' A at random)
        trainer = lora_trainer(tmp_path / str(checkpointing), f"model.gradient_checkpointing={checkpointing}",
                               "optim.max_grad_norm=0")
        trainer.step()
        grads.append({n: p.grad.clone() for n, p in trainer.policy.model.named_parameters() if p.requires_grad})
    plain, recomputed = grads
    assert any(float(g.abs().max()) > 0 for g in recomputed.values())
    for name, g in plain.items():  # recomputation sums in another order: fp32 noise, relative to the tensor's scale
        assert float((g - recomputed[name]).abs().max()) <= 1e-5 * float(g.abs().max()), name


def test_a_stopped_lora_run_resumes_exactly(tmp_path):
    steps = ["algorithm.updates_per_batch=2", "eval_before=false", "eval_after=false"]
    train_grpo(tiny_config(tmp_path / "a", *LORA, *steps, steps=4))
    config = tiny_config(tmp_path / "b", *LORA, *steps, steps=4)
    train_grpo(config, on_step_end=lambda step, m, stop: stop.request_stop() if step == 2 else None)
    checkpoint = paths.latest_checkpoint(tmp_path / "b" / "run")
    saved = sorted(p.name for p in (checkpoint / paths.MODEL).iterdir())
    assert "adapter_model.safetensors" in saved and "model.safetensors" not in saved  # the adapters alone
    train_grpo(resume_config(TrainConfig, tmp_path / "b" / "run"), resume=True)
    unbroken, resumed = (load_file(paths.latest_checkpoint(run) / paths.MODEL / "adapter_model.safetensors")
                         for run in (tmp_path / "a" / "run", tmp_path / "b" / "run"))
    assert unbroken.keys() == resumed.keys() and len(unbroken) > 0
    for name, p in unbroken.items():
        assert torch.equal(p, resumed[name]), name
    metrics = [json.loads(x) for x in (tmp_path / "b" / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1, 2, 3, 4]


def test_the_reference_cannot_be_refreshed_under_lora(tmp_path):
    with pytest.raises(UserError, match="ref_refresh_steps cannot refresh the reference with model.lora"):
        tiny_config(tmp_path, *LORA, "algorithm.ref_refresh_steps=2")


def test_unknown_target_modules_are_one_line(tmp_path):
    with pytest.raises(UserError, match=r"model.lora.target_modules=\['nope'\]"):
        lora_trainer(tmp_path, "model.lora.target_modules=[nope]")


def test_decoding_folds_the_adapters_into_copies_and_leaves_the_base_bit_for_bit(tmp_path):
    """Sampling runs W + (α/r)·BA with the adapters off (one matmul per layer), and gives the base
    tensors back untouched: the same objects, the same bits."""
    from peft.tuners.lora import LoraLayer

    from rlvr.models.adapters import folded_for_decoding

    trainer = lora_trainer(tmp_path)
    trainer.step()  # adapters no longer zero
    policy = trainer.policy.model.eval()
    layers = [m for m in policy.modules() if isinstance(m, LoraLayer)]
    bases = [(m.get_base_layer().weight, m.get_base_layer().weight.data.clone()) for m in layers]
    ids = torch.randint(0, 50, (2, 12))
    with torch.no_grad():
        adapted = policy(input_ids=ids).logits
        calls = []
        hooks = [m.lora_A["default"].register_forward_hook(lambda *_: calls.append(1)) for m in layers]
        with folded_for_decoding(policy) as model:
            folded = model(input_ids=ids).logits
            assert any(not torch.equal(w.data, kept) for w, kept in bases)  # folded in, for the block
        for hook in hooks:
            hook.remove()
    assert calls == []  # the adapters did not run
    assert torch.allclose(folded, adapted, atol=1e-5)
    for weight, kept in bases:
        assert torch.equal(weight.data, kept)
    assert [m.get_base_layer().weight for m in layers] == [w for w, _ in bases]


def test_packed_decoding_sets_the_folded_copies_aside_and_samples_the_same(tmp_path, monkeypatch):
    """Where decoding packs its weights (rlvr.prepacked), a folded weight is set aside once packed (the
    adapted layers hold their own tensors while the tokens are decoded: the two copies do not add up) and
    folded again after, to the same bits; the completions and their log-probs are those of keeping the folds."""
    from peft.tuners.lora import LoraLayer

    import rlvr.prepacked as prepacked
    from rlvr.models.adapters import folded_weights
    from rlvr.rollout import SamplingParams, generate

    if not prepacked.onednn_linear():
        pytest.skip("this torch has no oneDNN linear")
    trainer = lora_trainer(tmp_path)
    trainer.step()  # adapters no longer zero
    policy = trainer.policy
    bases = [m.get_base_layer().weight for m in policy.model.modules() if isinstance(m, LoraLayer)]
    own = [w.data_ptr() for w in bases]
    given = [t for name, t in folded_weights(policy.model) if name.endswith("proj.weight")]
    assert len(given) == len(bases)
    seen = []  # for each forward pass: whether every adapted weight held its own tensor
    policy.model.register_forward_pre_hook(lambda *_: seen.append([w.data_ptr() for w in bases] == own))

    def sample(model):
        out = generate(model, [[5, 6, 7], [8, 9]], 2, SamplingParams(max_new_tokens=prepacked.MIN_STEPS),
                       stop_ids=[], pad_id=0, seeds=[1, 2, 3, 4])
        after = [w.detach().clone() for w in bases]  # (the decoding block goes on: folded again)
        return out, after

    out, after = policy.decoding(sample)
    assert seen[0] is False and seen[1:] and all(seen[1:])  # the prompts' pass folded; each decoding step not
    assert all(torch.equal(a, g) for a, g in zip(after, given, strict=True))
    assert [w.data_ptr() for w in bases] == own
    monkeypatch.setattr(prepacked, "set_fold_aside", lambda weight: None)
    seen.clear()
    kept, _ = policy.decoding(sample)
    assert not any(seen)
    assert torch.equal(out.completion_ids, kept.completion_ids) and torch.equal(out.logprobs, kept.logprobs)


def test_an_error_mid_decoding_leaves_the_base_weights_as_they_were(tmp_path):
    """Ctrl-C (or any error) while packed decoding has the folds set aside: the base tensors are back, the same
    objects and bits, and nothing stays recorded as folded (the checkpoint saved next holds the base)."""
    from peft.tuners.lora import LoraLayer

    import rlvr.models.adapters as adapters
    import rlvr.prepacked as prepacked
    from rlvr.rollout import SamplingParams, generate

    if not prepacked.onednn_linear():
        pytest.skip("this torch has no oneDNN linear")
    trainer = lora_trainer(tmp_path)
    trainer.step()
    policy = trainer.policy
    bases = [m.get_base_layer().weight for m in policy.model.modules() if isinstance(m, LoraLayer)]
    before = [(w.data_ptr(), w.detach().clone()) for w in bases]
    calls = []

    def interrupt(*_):
        calls.append(1)
        if len(calls) == 3:  # a decoding step, the folds set aside
            raise KeyboardInterrupt

    hook = policy.model.register_forward_pre_hook(interrupt)
    with pytest.raises(KeyboardInterrupt):
        policy.decoding(lambda model: generate(model, [[5, 6, 7]], 2, SamplingParams(prepacked.MIN_STEPS),
                                               stop_ids=[], pad_id=0, seeds=[1, 2]))
    hook.remove()
    assert len(calls) == 3
    assert all(w.data_ptr() == ptr and torch.equal(w, kept) for w, (ptr, kept) in zip(bases, before, strict=True))
    assert not adapters._folds


@pytest.mark.parametrize("units", ["none", "avx512_bf16"])
def test_a_fold_held_in_bf16_samples_what_autocast_made_of_an_fp32_fold(tmp_path, monkeypatch, units):
    """Under bf16 autocast the fold is held in bf16, rounded once as autocast rounds an fp32 fold at each call:
    the same completions and log-probs, bit for bit, through autocast (no bf16 units) or packed decoding."""
    import rlvr.models.adapters as adapters
    import rlvr.prepacked as prepacked
    from rlvr.models.devices import BF16_UNITS_ENV
    from rlvr.rollout import SamplingParams, generate

    if units != "none" and not (prepacked.onednn_linear() and torch.ops.mkldnn._is_mkldnn_bf16_supported()):
        pytest.skip("this CPU has no oneDNN bf16: nothing is packed in bf16")
    monkeypatch.setenv(BF16_UNITS_ENV, units)
    trainer = lora_trainer(tmp_path, "model.dtype=bfloat16")
    trainer.step()  # adapters no longer zero
    dtypes = []

    def sample(model):
        folds = lambda: {m.weight.dtype for name, m in model.named_modules() if name.endswith("base_layer")}  # noqa: E731
        before = folds()
        out = generate(model, [[5, 6, 7], [8, 9]], 2, SamplingParams(max_new_tokens=prepacked.MIN_STEPS),
                       stop_ids=[], pad_id=0, seeds=[1, 2, 3, 4])
        dtypes.append((before, folds()))  # (packed decoding folds again in the same dtype)
        return out

    held = trainer.policy.decoding(sample)
    monkeypatch.setattr(adapters, "_fold", lambda own, layer, dtype=None: own + adapters._delta(layer))  # (in fp32)
    fp32 = trainer.policy.decoding(sample)
    assert dtypes == [({torch.bfloat16}, {torch.bfloat16}), ({torch.float32}, {torch.float32})]
    assert torch.equal(held.completion_ids, fp32.completion_ids) and torch.equal(held.logprobs, fp32.logprobs)


def test_decoding_under_bf16_autocast_folds_the_same_weights_that_a_sampler_is_given(tmp_path):
    """Decoding under bf16 autocast (a GPU's, a CPU's with bf16 units): the fold W + (α/r)·BA must still be
    computed in fp32 and rounded once, to the bits autocast makes of what `folded_weights` hands a sampler holding
    its own copy (sampling ahead), or the two decode apart. It is held in bf16 (half the memory of fp32)."""
    from peft.tuners.lora import LoraLayer

    from rlvr.models.adapters import folded_for_decoding, folded_weights

    trainer = lora_trainer(tmp_path)
    trainer.step()
    policy = trainer.policy.model
    given = dict(folded_weights(policy))
    names = {id(m.get_base_layer().weight): n for n, m in policy.get_base_model().named_modules()
             if isinstance(m, LoraLayer)}
    assert names
    with torch.autocast(device_type="cpu", dtype=torch.bfloat16), folded_for_decoding(policy) as model:
        folded = {f"{names[id(m.get_base_layer().weight)]}.weight": m.get_base_layer().weight.detach().clone()
                  for m in model.modules() if isinstance(m, LoraLayer)}
    for name, weight in folded.items():
        assert weight.dtype == torch.bfloat16
        assert torch.equal(weight, given[name.replace(".base_layer.", ".")].to(torch.bfloat16)), name
