"""A GRPO run's memory, planned before the model loads, and a run that cannot fit refused.

The plan adds up, from the model's shapes (rlvr.models.shapes) and the settings:

- runtime: the process as it stands when the plan is made (Python, torch, transformers, the data), measured.
- weights, gradients, AdamW's two moments: fp32 (4 bytes), gradients and moments for the trainable
  parameters only (LoRA's adapters); the frozen reference (β > 0, no LoRA) in the forward dtype.
- a sampler's copy: sampling ahead (`sampling.max_staleness`) decodes with a whole copy; a LoRA policy
  decodes with its adapted weights folded into new tensors, in the forward dtype
  (rlvr.models.adapters.folded_for_decoding).
- decoding's packed weights: on a CPU (in fp32, or in bf16 where it has bf16 units), rlvr's engine decodes with
  a copy of the linear layers' weights (the output layer's too) packed for oneDNN in the forward dtype, and the KV
  cache in fp32 (rlvr.prepacked). A LoRA policy's folded weights are set aside as each is packed, so that the packed
  copies of the folded layers take the folds' place: only the other layers' packed copies add.
- weight casts: under bf16 autocast the update keeps a bf16 copy of each linear layer's weight for its backward
  pass (autocast's cache for the trained weights, rlvr.models.devices.frozen_cast_once for the frozen ones).
- KV cache: every completion of the batch decoded together, prompt and completion, keys and values of
  every layer.
- activations: what a transformer layer keeps for its backward pass, per token of a micro-batch: about 12
  hidden-size vectors (the norms' inputs and outputs, attention's inputs and output, rotary q and k), 2
  key-value widths and 4 MLP-width ones (SwiGLU's gate, up, their product, the down projection's input);
  with gradient checkpointing, half of that (what was measured on SmolLM2: its peak fell by half the
  activations, not to one layer's worth). In the forward precision, except under LoRA in bf16: the adapted
  layers hand their sums on in fp32 (rlvr.models.adapters.add_unrounded_sums), and the layers keep fp32.
- logits: rlvr.logprobs computes the output layer in chunks of 512 tokens (logits, softmax, gradient), and
  keeps every chunk's softmax of a micro-batch for the backward (not under gradient checkpointing).

Sampling and the update come one after the other, yet they are added: on a CPU the allocator keeps what
decoding freed (glibc's heap holds blocks below its mmap threshold) when the update's activations arrive,
and the measured peaks follow the sum. Not decoding's blocks of 32 MB or more (a run's mmap threshold,
rlvr.run.process): glibc maps each apart and unmaps it when freed, so what the update needs takes their place
(the output layer's packed copy; a 1.5B model's MLP weights); nor, under LoRA, any of decoding's blocks: the folds'
end gives the freed heap back too (malloc_trim). The plan is the sum less the smaller of those
blocks and the update's own parts: Qwen2.5-Coder-1.5B's LoRA step peaked at 18.5 GB in fp32 while decoding
(before its folds were set aside as they were packed), the plan 18.3 GB, where the sum was 25.8; since, 13.4 GB
against a plan of 14.4 (bench/step_memory.py, docs/models.md).

The plan is an estimate: tests/train/test_memory.py holds it within 30% of the peak a run measures on the
tiny model and on SmolLM2 (docs/performance.md has the others).
"""

from __future__ import annotations

import resource
import sys
from dataclasses import dataclass, field
from pathlib import Path

import torch

from rlvr.config import TrainConfig
from rlvr.config.sections import shards
from rlvr.errors import UserError
from rlvr.logprobs import CHUNK_TOKENS
from rlvr.models.shapes import Shapes
from rlvr.prepacked import pays
from rlvr.run.process import MMAP_THRESHOLD_MAX

GB = 1e9
FP32 = 4


@dataclass(frozen=True)
class MemoryPlan:
    parts: dict[str, float]  # bytes, by part
    where: str  # "RAM" or a GPU's memory
    notes: dict[str, str] = field(default_factory=dict)  # a part's settings, in words
    reused: float = 0.0  # bytes of the update's parts that take the place of decoding's blocks given back

    @property
    def total(self) -> float:
        return sum(self.parts.values()) - self.reused

    def line(self, available: float | None) -> str:
        """The plan in one line."""
        of = f" of {available / GB:.1f} GB available" if available else ""
        parts = ", ".join(f"{name} {size / GB:.2f}" + (f" ({self.notes[name]})" if name in self.notes else "")
                          for name, size in self.parts.items() if size >= 0.005 * GB)
        back = f"; less {self.reused / GB:.2f} given back by decoding before the update" if self.reused else ""
        return f"rlvr: memory plan: {self.total / GB:.2f} GB of {self.where}{of}: {parts}{back}"


def activation_bytes(shapes: Shapes, tokens: int, act_bytes: int, checkpointing: bool) -> float:
    """What the layers keep for backward over `tokens` tokens (see the module docstring).

    >>> s = Shapes(0, hidden=10, intermediate=20, layers=3, kv_width=5, vocab=0, context=0, linears=())
    >>> activation_bytes(s, 1, 4, False), activation_bytes(s, 1, 4, True)
    (2520.0, 1260.0)
    """
    kept = tokens * act_bytes * shapes.layers * (12 * shapes.hidden + 2 * shapes.kv_width + 4 * shapes.intermediate)
    return kept / 2 if checkpointing else float(kept)


def plan_memory(config: TrainConfig, shapes: Shapes, prompt_tokens: int, runtime: float,
                device: torch.device, dtype: torch.dtype, ranks: int = 1) -> MemoryPlan:
    """The plan of `config` on a model of `shapes`, prompts of up to `prompt_tokens` tokens, a process of
    `runtime` bytes now (ignored on a GPU, whose memory holds none of it), `ranks` processes on the machine."""
    m, s, g, o = config.model, config.sampling, config.generation, config.optim
    act = torch.finfo(dtype).bits // 8
    lora = m.lora
    trainable = shapes.adapter_parameters(lora.rank, lora.target_modules) if lora else shapes.parameters
    sharded = ranks if shards(config.distributed.strategy, ranks) else 1  # (each rank holds its shard)
    gpu = device.type == "cuda"
    parts = {"runtime": 0.0 if gpu else runtime,
             "weights": shapes.parameters * FP32 / sharded,
             "reference": shapes.parameters * act / sharded if config.algorithm.beta > 0 and not lora else 0.0,
             "optimizer": 2 * trainable * FP32 / sharded}
    notes: dict[str, str] = {}
    decoding_blocks: list[int] = []  # (the sizes of the copies decoding makes and frees)
    folded: list[tuple[str, int, int]] = []  # (the linear layers LoRA's adapters are folded into for decoding)
    if s.max_staleness is not None:
        parts["sampler copy"], notes["sampler copy"] = shapes.parameters * FP32, "sampling ahead"
    elif lora:
        folded = shapes.targeted(lora.target_modules)
        adapted = [n_in * n_out * act for _, n_in, n_out in folded]  # (held in the forward dtype)
        parts["sampler copy"], notes["sampler copy"] = float(sum(adapted)), "LoRA folded for decoding"
        decoding_blocks += adapted
    new_tokens = g.max_new_tokens or max(shapes.context - prompt_tokens, 0)
    packed = g.backend == "local" and pays(device, dtype, new_tokens)
    linears = [n_in * n_out for _, n_in, n_out in shapes.linears]  # (the decoder's weight matrices)
    if packed:  # (a folded weight is set aside as it is packed: its packed copy takes its place)
        unfolded = [linear for linear in shapes.linears if linear not in folded]
        matrices = [n_in * n_out for _, n_in, n_out in unfolded] + [shapes.vocab * shapes.hidden]
        parts["packed weights"] = sum(matrices) * act
        notes["packed weights"] = "decoding on a CPU" + ("; the folded layers' in their folds' place" if folded else "")
        decoding_blocks += [n * act for n in matrices]
    if act < FP32:
        parts["weight casts"], notes["weight casts"] = sum(linears) * act, "kept for the backward under autocast"
    sequence = prompt_tokens + new_tokens
    cached = FP32 if packed else act  # (packed decoding keeps the KV cache in fp32: rlvr.prepacked)
    parts["KV cache"] = (s.batch_size * sequence * shapes.layers * 2 * shapes.kv_width * cached
                         if g.backend == "local" else 0.0)  # (vLLM plans its own cache)
    tokens = min(o.micro_batch_tokens, s.batch_size * sequence)
    chunk = min(CHUNK_TOKENS, tokens)  # (checkpointed: a chunk's three buffers; else two, and the kept softmax)
    logit_rows = 3 * chunk if m.gradient_checkpointing else 2 * chunk + tokens
    parts |= {"gradients": trainable * FP32 / sharded,
              "activations": activation_bytes(shapes, tokens, FP32 if lora else act, m.gradient_checkpointing),
              "logits": float(logit_rows * shapes.vocab * FP32)}
    notes["KV cache"] = f"{s.batch_size} × {sequence} tokens"
    notes["activations"] = f"{tokens} tokens a micro-batch" + (", checkpointed" if m.gradient_checkpointing else "")
    # decoding's blocks that glibc maps apart go back to the system when freed, before the update (not when the
    # sampler decodes beside it: sampling ahead); the update's parts take their place (see the module docstring)
    # (a LoRA policy's decoding ends giving all it freed back, its heap's blocks too: malloc_trim, rlvr.models.adapters)
    given_back = 0.0 if gpu or s.max_staleness is not None else (
        float(sum(decoding_blocks)) if folded else mapped_bytes(decoding_blocks))
    reused = min(given_back, parts["activations"] + parts["logits"] + parts.get("weight casts", 0.0))
    where = "RAM" if not gpu else f"{device} memory"
    if ranks > 1 and not gpu:  # every rank's process in the one machine's RAM
        return MemoryPlan({k: v * ranks for k, v in parts.items()}, f"RAM, {ranks} ranks", notes, reused * ranks)
    return MemoryPlan(parts, where, notes, reused)


def mapped_bytes(blocks: list[int]) -> float:
    """The bytes of `blocks` that glibc maps apart, each of them at least a run's mmap threshold (32 MiB).

    >>> mapped_bytes([MMAP_THRESHOLD_MAX, MMAP_THRESHOLD_MAX - 1, 10 * MMAP_THRESHOLD_MAX]) / MMAP_THRESHOLD_MAX
    11.0
    """
    return float(sum(b for b in blocks if b >= MMAP_THRESHOLD_MAX))


def resident_bytes() -> float:
    """This process's resident memory now (Linux; the peak so far elsewhere)."""
    try:
        return int(Path("/proc/self/statm").read_text().split()[1]) * resource.getpagesize()
    except OSError:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return float(peak if sys.platform == "darwin" else peak * 1024)


def available_bytes(device: torch.device, runtime: float) -> float | None:
    """Memory the run may use: on a GPU, its free memory; on a CPU, what the kernel says is available plus what
    this process holds already (`runtime`), within a cgroup's limit; None where this cannot be read."""
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return float(free)
    try:
        info = dict(line.split(":", 1) for line in Path("/proc/meminfo").read_text().splitlines())
        available = int(info["MemAvailable"].split()[0]) * 1024 + runtime
    except (OSError, KeyError, ValueError):
        return None
    try:  # a container's own limit (cgroup v2)
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        used = int(Path("/sys/fs/cgroup/memory.current").read_text())
        if limit != "max":
            available = min(available, int(limit) - used + runtime)
    except (OSError, ValueError):
        pass
    return float(available)


FIXES = {
    "activations": "lower optim.micro_batch_tokens (now {micro}) or set model.gradient_checkpointing: true",
    "logits": "lower optim.micro_batch_tokens (now {micro})",
    "KV cache": "lower sampling.batch_size (now {batch}) or generation.max_new_tokens (now {new})",
    "optimizer": "train LoRA adapters (model.lora: {{rank: 16}}) or a smaller model",
    "gradients": "train LoRA adapters (model.lora: {{rank: 16}}) or a smaller model",
    "weights": "train a smaller model",
    "packed weights": "train a smaller model",
    "weight casts": "train a smaller model, or in fp32 (model.dtype: float32)",
    "reference": "train LoRA adapters (model.lora: {{rank: 16}}: the reference is then the base model) or set "
                 "algorithm.beta: 0",
    "sampler copy": "sample in turn (sampling.max_staleness: null)",
    "runtime": "free some memory on this machine",
}


def refuse_unless_fits(plan: MemoryPlan, available: float | None, config: TrainConfig) -> None:
    """A UserError naming the largest part and the setting to change, when `plan` is above `available`."""
    if available is None or plan.total <= available:
        return
    largest = max((p for p in plan.parts if p != "runtime"), key=plan.parts.__getitem__)
    fix = FIXES[largest].format(micro=config.optim.micro_batch_tokens, batch=config.sampling.batch_size,
                                new=config.generation.max_new_tokens)
    raise UserError(f"this run needs about {plan.total / GB:.1f} GB of {plan.where} and {available / GB:.1f} GB is "
                    f"available; its largest part is {largest} ({plan.parts[largest] / GB:.1f} GB): {fix}; or set "
                    "preflight: off to start it anyway")


def prompt_tokens(prompts: list[object], shots: list[tuple[str, str]], system_prompt: str | None,
                  limit: int | None) -> int:
    """An upper estimate of the longest prompt's tokens before any tokenizer is loaded: its characters (and the
    example exchanges', and the system prompt's) over 3, plus 64 for a chat template's own turns.

    >>> prompt_tokens(["x" * 300, [{"role": "user", "content": "y" * 30}]], [], None, None)
    164
    >>> prompt_tokens(["x" * 3000], [("q", "a")], None, 512)
    512
    """
    longest = max((len(str(p)) for p in prompts), default=0)
    extra = sum(len(q) + len(a) for q, a in shots) + len(system_prompt or "")
    estimate = (longest + extra) // 3 + 64
    return min(estimate, limit) if limit else estimate


def plan_before_loading(config: TrainConfig, prompts: list[object], shots: list[tuple[str, str]],
                        ranks: int) -> str | None:
    """The run's memory plan in one line (said once every check has passed: rlvr.run.loop), the run refused here
    when it cannot fit (unless preflight is off); None when the model's shapes cannot be read before it loads."""
    from rlvr.models.devices import compute_dtype, resolve_device
    from rlvr.models.shapes import model_shapes

    m = config.model
    shapes = model_shapes(m.name, m.cache_dir)
    if shapes is None:
        return None
    device = resolve_device(m.device)
    limit = config.data.max_prompt_tokens or (shapes.context or None)
    runtime = resident_bytes()
    plan = plan_memory(config, shapes, prompt_tokens(prompts, shots, config.data.system_prompt, limit), runtime,
                       device, compute_dtype(m.dtype, device), ranks)
    available = available_bytes(device, runtime * ranks)
    if config.preflight != "off":
        refuse_unless_fits(plan, available, config)
    return plan.line(available)
