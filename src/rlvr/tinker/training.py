"""A Tinker training client's model on rlvr's handles: the base model rlvr loads by name, LoRA adapters (peft),
AdamW, and its state on disk.

    create_model ─▶ TrainedModel(base, rank) ─forward(data, loss_fn)─▶ log-probs, loss (gradients accumulate)
                                               ─optim_step(adam)─▶ one AdamW step over what accumulated
                                               ─save(folder) / load(folder)─▶ adapters (+ optimizer), exactly
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from rlvr.config import LoraConfig
from rlvr.models.adapters import add_adapters, folded_weights
from rlvr.models.loading import load_model
from rlvr.samplers.local import CopySampler
from rlvr.tinker.losses import check_inputs, token_losses
from rlvr.tinker.wire import Pass, WireError

MICRO_TOKENS = 2048  # padded tokens a forward pass holds (SmolLM2: logits of 2048 × 49152 floats, 0.4 GB)
ATTENTION = ["q_proj", "k_proj", "v_proj", "o_proj"]
MLP = ["gate_proj", "up_proj", "down_proj"]


def tokens_problem(tokens: list[int], vocabulary: int, context: int | None, room: int = 0) -> str | None:
    """Why `tokens` cannot go through the model: an id outside its vocabulary, or more than its context holds
    (leaving `room` tokens to sample); None when they can.

    >>> tokens_problem([5, 99], 50, 8), tokens_problem([1] * 8, 50, 8, room=1), tokens_problem([1, 2], 50, None)
    ('token 99 is outside the vocabulary (0..49)', '8 tokens leave no room for 1 more in the context of 8', None)
    """
    bad = next((t for t in tokens if not 0 <= t < vocabulary), None)
    if bad is not None:
        return f"token {bad} is outside the vocabulary (0..{vocabulary - 1})"
    if context is not None and len(tokens) + room > context:
        return f"{len(tokens)} tokens leave no room for {room} more in the context of {context}" if room else \
            f"{len(tokens)} tokens are more than the context of {context}"
    return None


def target_logprobs(model: torch.nn.Module, sequences: list[list[int]], targets: list[list[int]]) -> list[torch.Tensor]:
    """log π(targets[i][t] | sequences[i][: t + 1]) for each sequence, in one right-padded forward pass (fp32, or
    fp64 for a model in fp64)."""
    width = max((len(s) for s in sequences), default=0)
    ids = torch.zeros(len(sequences), max(width, 1), dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, s in enumerate(sequences):
        ids[i, :len(s)], mask[i, :len(s)] = torch.tensor(s, dtype=torch.long), 1
    logits = model(input_ids=ids, attention_mask=mask).logits
    logits = logits if logits.dtype == torch.float64 else logits.float()
    out = []
    for i, (s, y) in enumerate(zip(sequences, targets)):
        rows = torch.log_softmax(logits[i, :len(s)], dim=-1)
        out.append(rows.gather(1, torch.tensor(y, dtype=torch.long)[:, None])[:, 0])
    return out


def micro_batches(lengths: list[int], budget: int) -> list[list[int]]:
    """Consecutive runs of sequences whose padded size (count × longest) stays within `budget` tokens (one at least):
    a pass's logits are that many tokens × the vocabulary.

    >>> micro_batches([3, 3, 5, 1, 9], 10)
    [[0, 1], [2, 3], [4]]
    """
    runs: list[list[int]] = []
    for i, n in enumerate(lengths):
        last = runs[-1] if runs else None
        if last is not None and (len(last) + 1) * max(n, *(lengths[j] for j in last)) <= budget:
            last.append(i)
        else:
            runs.append([i])
    return runs


class TrainedModel:
    """One training client's model: `base` (a name rlvr's loader reads: tiny, smollm2, a folder, a Hub name) with
    LoRA adapters of `rank` on the attention and MLP layers it names, trained by AdamW."""

    def __init__(self, base: str, rank: int, *, seed: int = 0, train_attn: bool = True, train_mlp: bool = True,
                 cache_dir: str = "~/.cache/rlvr") -> None:
        targets = (ATTENTION if train_attn else []) + (MLP if train_mlp else [])
        if not targets:
            raise WireError("lora_config trains neither attention nor MLP: rlvr's adapters sit on those layers")
        if rank < 1:
            raise WireError(f"lora_config.rank={rank} must be at least 1")
        self.base, self.rank, self.seed = base, rank, seed
        self.lora = {"rank": rank, "seed": seed, "train_attn": train_attn, "train_mlp": train_mlp}
        model, self.tokenizer = load_model(base, cache_dir, seed)
        config: Any = model.config
        self.vocabulary = int(config.vocab_size)
        self.context: int | None = getattr(config, "max_position_embeddings", None)
        torch.manual_seed(seed)  # (the adapters' A starts random: the same seed, the same start)
        self.model = add_adapters(model, LoraConfig(rank=rank, target_modules=targets), base).train()
        self.optimizer: torch.optim.AdamW | None = None
        self._sampler: CopySampler | None = None  # the one copy its sampling clients share
        self._sampling: object | None = None  # the snapshot whose adapters it holds

    @property
    def trained(self) -> list[tuple[str, torch.nn.Parameter]]:
        return [(n, p) for n, p in self.model.named_parameters() if p.requires_grad]

    def adapters(self) -> dict[str, torch.Tensor]:
        """A copy of the adapters' weights, by name."""
        return {n: p.detach().clone() for n, p in self.trained}

    def set_adapters(self, weights: dict[str, torch.Tensor]) -> None:
        """The adapters' weights set to `weights` (as `adapters` gave them)."""
        own = dict(self.trained)
        with torch.no_grad():
            for name, tensor in weights.items():
                own[name].copy_(tensor)

    def forward(self, work: Pass) -> tuple[list[torch.Tensor], dict[str, float]]:
        """Each datum's target log-probs under `work.loss_fn`'s targets, and its metrics; the loss's gradients
        added to what earlier passes left (the next optim_step applies them all), unless forward-only."""
        for datum in work.data:
            check_inputs(work.loss_fn, datum)
            if not datum.tokens:
                raise WireError("a datum with no input tokens")
            problem = tokens_problem(datum.tokens, self.vocabulary, self.context)
            if problem:
                raise WireError(f"a datum's model_input: {problem}")
        targets = [d.inputs["target_tokens"].tolist() for d in work.data]
        vocabulary = self.vocabulary
        if any(not 0 <= t < vocabulary for ts in targets for t in ts):
            raise WireError(f"target_tokens outside the model's vocabulary (0..{vocabulary - 1})")
        logprobs: list[torch.Tensor] = []
        total = 0.0
        for rows in micro_batches([len(d.tokens) for d in work.data], MICRO_TOKENS):  # (the loss is a sum)
            data = [work.data[i] for i in rows]
            with torch.set_grad_enabled(not work.forward_only):
                part = target_logprobs(self.model, [d.tokens for d in data], [targets[i] for i in rows])
                loss = sum((token_losses(work.loss_fn, lp, d.inputs, work.config).sum() for lp, d in zip(part, data)),
                           torch.zeros((), dtype=part[0].dtype))
                if not work.forward_only:
                    loss.backward()  # type: ignore[no-untyped-call]
            logprobs += [lp.detach() for lp in part]
            total += float(loss.detach())
        return logprobs, {"loss:sum": total}

    def optim_step(self, adam: dict[str, Any]) -> dict[str, float]:
        """One AdamW step (`adam`: Tinker's AdamParams) over the accumulated gradients, which it then clears."""
        value = {"learning_rate": 1e-4, "beta1": 0.9, "beta2": 0.95, "eps": 1e-12, "weight_decay": 0.0,
                 "grad_clip_norm": 0.0} | {k: float(v) for k, v in adam.items() if isinstance(v, (int, float))}
        lr, betas, eps = value["learning_rate"], (value["beta1"], value["beta2"]), value["eps"]
        decay, clip = value["weight_decay"], value["grad_clip_norm"]
        params = [p for _, p in self.trained]
        if self.optimizer is None:
            self.optimizer = torch.optim.AdamW(params, lr=lr, betas=betas, eps=eps, weight_decay=decay)
        for group in self.optimizer.param_groups:
            group.update(lr=lr, betas=betas, eps=eps, weight_decay=decay)
        norm = torch.nn.utils.clip_grad_norm_(params, clip if clip > 0 else float("inf"))
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return {"grad_norm": float(norm), "learning_rate": lr}

    def snapshot(self) -> Callable[[], CopySampler]:
        """What samples with the model as it is now: rlvr's sampler on this client's one copy of the network (adapters
        merged into it), which takes these adapters back in when another snapshot sampled last. One copy a
        training client, however many sampling clients an RL loop makes (one a step)."""
        weights, key = self.adapters(), object()

        def sampler() -> CopySampler:
            if self._sampler is None:
                self._sampler = CopySampler(self.model, self.tokenizer, contextlib.nullcontext)
            if self._sampling is not key:
                now = self.adapters()
                self.set_adapters(weights)
                try:
                    with torch.no_grad():
                        self._sampler.load_weights(folded_weights(self.model), 0)
                finally:
                    self.set_adapters(now)
            self._sampling = key
            return self._sampler

        return sampler

    def save(self, folder: Path, optimizer: bool) -> None:
        """The adapters (and the optimizer's state) in `folder`, written whole or not at all."""
        state = {"base": self.base, "lora": self.lora, "weights": self.adapters(),
                 "optimizer": self.optimizer.state_dict() if optimizer and self.optimizer is not None else None}
        tmp, old = (folder.with_name(f".{folder.name}.{kind}-{os.getpid()}") for kind in ("tmp", "old"))
        for stale in (tmp, old):
            shutil.rmtree(stale, ignore_errors=True)
        tmp.mkdir(parents=True)
        torch.save(state, tmp / "state.pt")
        (tmp / "meta.json").write_text(json.dumps({"base": self.base, "lora": self.lora}))
        if folder.exists():  # (a name saved again: the earlier save stays whole until the new one is in place)
            os.replace(folder, old)
        os.replace(tmp, folder)
        shutil.rmtree(old, ignore_errors=True)

    def load(self, folder: Path, optimizer: bool) -> None:
        """The adapters (and, when `optimizer`, the optimizer's state) a `save` wrote."""
        state = torch.load(folder / "state.pt", weights_only=False)
        if set(state["weights"]) != {n for n, _ in self.trained}:
            raise WireError(f"{folder.name} holds adapters of another shape than this model's (rank {self.rank})")
        self.set_adapters(state["weights"])
        for _, p in self.trained:
            p.grad = None
        if optimizer:
            if state["optimizer"] is None:
                raise WireError(f"{folder.name} was saved without its optimizer: load it with load_state")
            self.optimizer = torch.optim.AdamW([p for _, p in self.trained])
            self.optimizer.load_state_dict(state["optimizer"])


def saved_model(folder: Path, cache_dir: str = "~/.cache/rlvr") -> TrainedModel:
    """A TrainedModel as a `save` in `folder` describes it (its base and adapters), its weights not yet loaded."""
    meta = json.loads((folder / "meta.json").read_text())
    lora = meta["lora"]
    return TrainedModel(meta["base"], lora["rank"], seed=lora["seed"], train_attn=lora["train_attn"],
                        train_mlp=lora["train_mlp"], cache_dir=cache_dir)
