"""A reward model: a language model with a one-output sequence-classification head, and the score
statistics saved beside its weights.

The score of (prompt, completion) is the head's output at the last real token of the rendered
conversation (transformers' `*ForSequenceClassification` pools the rightmost token that is not
the pad token, so `config.pad_token_id` must be set; sequences here are right-padded).

Raw Bradley–Terry scores have an arbitrary offset and scale (the loss only sees differences), so
each checkpoint records the mean and std of its scores over training completions in
`rlvr_reward_model.json`; a reward is used normalised, (r − mean) / (std + ε), which puts it on the
scale of a 0/1 verifier. Layout written by `rlvr rm`: RUN/checkpoints/step-N/model/{config.json,
model.safetensors, tokenizer files, rlvr_reward_model.json}; `find_reward_model` accepts any of
those three levels.
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, cast

import torch
from transformers import AutoModelForSequenceClassification, LlamaForSequenceClassification, PreTrainedTokenizerBase

from rlvr.data.templates import render_prompt
from rlvr.errors import UserError
from rlvr.models.adapters import is_adapter_dir, load_adapted
from rlvr.models.loading import build_tiny_model, find_model_dir, load_pretrained, resolve_model_path
from rlvr.records import Prompt

STATS_FILE = "rlvr_reward_model.json"
EPS = 1e-6


def load_reward_model(name: str, cache_dir: str = "~/.cache/rlvr", seed: int = 0,
                      attn_implementation: str | None = None, *,
                      trainable_adapters: bool = False) -> tuple[torch.nn.Module, PreTrainedTokenizerBase]:
    """(one-output classifier in fp32, tokenizer) from the names `rlvr.models.load_model` takes.

    A backbone without a classification head gets a new one, initialised under `seed`; a
    checkpoint written by `rlvr rm` keeps its trained head (with LoRA: adapters and head, merged into
    the base, or trainable with `trainable_adapters`, resuming).
    """
    if name == "tiny":
        return build_tiny_reward_model(seed)
    kwargs = {"attn_implementation": attn_implementation} if attn_implementation else {}
    path = resolve_model_path(name, cache_dir)
    if is_adapter_dir(path):  # `rlvr rm` with model.lora: the base its adapters and head belong to
        return load_adapted(Path(path), lambda base: load_reward_model(base, cache_dir, seed, attn_implementation),
                            trainable=trainable_adapters)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model, tokenizer = load_pretrained(path, AutoModelForSequenceClassification, num_labels=1, **kwargs)
    model.config.pad_token_id = tokenizer.pad_token_id  # type: ignore[union-attr]  # (a transformers model)
    return model, tokenizer


def build_tiny_reward_model(seed: int = 0) -> tuple[LlamaForSequenceClassification, PreTrainedTokenizerBase]:
    """The tiny random Llama of `rlvr.models.build_tiny_model(seed)` (same backbone weights) with a
    one-output head: for tests and smoke runs, no download."""
    policy, tokenizer = build_tiny_model(seed)
    config = copy.deepcopy(policy.config)
    config.num_labels = 1
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = LlamaForSequenceClassification(config)  # type: ignore[no-untyped-call]
    model.model.load_state_dict(policy.model.state_dict())
    model.config.pad_token_id = tokenizer.pad_token_id
    return model.float(), tokenizer  # type: ignore[no-untyped-call]


def conversation_text(tokenizer: Any, prompt: Prompt, completion: str) -> str:
    """The text the reward model reads: prompt and completion as a conversation through the
    tokenizer's chat template, or (no template) the prompt's text followed by the completion.

    >>> _, tok = build_tiny_reward_model()
    >>> conversation_text(tok, "2+2?", "4")
    '<|im_start|>user\\n2+2?<|im_end|>\\n<|im_start|>assistant\\n4<|im_end|>\\n'
    """
    if not getattr(tokenizer, "chat_template", None):
        return render_prompt(prompt, template="plain") + completion
    messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else list(prompt)
    return cast(str, tokenizer.apply_chat_template([*messages, {"role": "assistant", "content": completion}],
                                                   tokenize=False))


def encode(
    tokenizer: Any, prompts: Sequence[Prompt], completions: Sequence[str], max_length: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """N conversations -> input_ids [N, T], attention_mask [N, T], right-padded with the pad token.

    A conversation longer than `max_length` keeps its last `max_length` tokens: the end of the
    completion is what the head reads. A chat template writes its own special tokens; plain text
    gets the tokenizer's (a BOS token, for most base models).
    """
    texts = [conversation_text(tokenizer, p, c) for p, c in zip(prompts, completions, strict=True)]
    specials = not getattr(tokenizer, "chat_template", None)
    rows = [ids[-max_length:] for ids in tokenizer(texts, add_special_tokens=specials)["input_ids"]]
    width = max(len(r) for r in rows)
    input_ids = torch.full((len(rows), width), tokenizer.pad_token_id, dtype=torch.long)
    attention_mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, row in enumerate(rows):
        input_ids[i, : len(row)] = torch.tensor(row, dtype=torch.long)
        attention_mask[i, : len(row)] = 1
    return input_ids, attention_mask


def forward_scores(model: torch.nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """input_ids [N, T], attention_mask [N, T] -> scores [N] (with gradients, on the model's device)."""
    device = next(model.parameters()).device
    scores = model(input_ids=input_ids.to(device), attention_mask=attention_mask.to(device)).logits[:, 0]
    return cast(torch.Tensor, scores)


@torch.no_grad()
def score_texts(
    model: torch.nn.Module,
    tokenizer: Any,
    prompts: Sequence[Prompt],
    completions: Sequence[str],
    *,
    max_length: int,
    batch_size: int = 16,
) -> list[float]:
    """The raw score of every (prompt, completion), `batch_size` at a time, in eval mode."""
    if len(prompts) != len(completions):
        raise ValueError(f"{len(prompts)} prompts for {len(completions)} completions")
    was_training = model.training
    model.eval()
    scores: list[float] = []
    try:
        for start in range(0, len(completions), batch_size):
            chunk = slice(start, start + batch_size)
            ids, mask = encode(tokenizer, prompts[chunk], completions[chunk], max_length)
            scores += forward_scores(model, ids, mask).float().cpu().tolist()
    finally:
        model.train(was_training)
    return scores


@dataclass(frozen=True)
class ScoreStats:
    mean: float  # of the raw scores of the training completions measured
    std: float  # population std of the same scores
    count: int  # how many completions were scored
    max_length: int  # tokens per conversation the model was trained with; scoring uses the same

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1)


def score_stats(scores: list[float], max_length: int) -> ScoreStats:
    """Mean and population std of `scores`.

    >>> score_stats([1.0, 3.0], max_length=64)
    ScoreStats(mean=2.0, std=1.0, count=2, max_length=64)
    """
    n = len(scores)
    mean = sum(scores) / n
    std = math.sqrt(sum((s - mean) ** 2 for s in scores) / n)
    return ScoreStats(mean, std, n, max_length)


def normalise(scores: list[float], stats: ScoreStats) -> list[float]:
    """(r − mean) / (std + ε) for each raw score r.

    >>> [round(r, 4) for r in normalise([1.0, 2.0, 3.0], ScoreStats(mean=2.0, std=1.0, count=3, max_length=64))]
    [-1.0, 0.0, 1.0]
    """
    return [(s - stats.mean) / (stats.std + EPS) for s in scores]


def find_reward_model(path: str | Path) -> Path:
    """The model directory holding STATS_FILE, given it, a checkpoint (step-N) or a run directory
    (its latest checkpoint)."""
    path = Path(path).expanduser()
    found = find_model_dir(path, marker=STATS_FILE)
    if found is not None:
        return found
    what = "does not exist" if not path.exists() else f"holds no {STATS_FILE}"
    raise UserError(
        f"reward model {path} {what}: give the run directory of `rlvr rm`, one of its checkpoints/step-N, "
        "or their model/ folder"
    )


def read_stats(model_dir: Path) -> ScoreStats:
    try:
        data = json.loads((model_dir / STATS_FILE).read_text())
        return ScoreStats(float(data["mean"]), float(data["std"]), int(data["count"]), int(data["max_length"]))
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise UserError(f"{model_dir / STATS_FILE} is unreadable ({type(e).__name__}: {e}); "
                        "train the reward model again") from None
