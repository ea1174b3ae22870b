"""The seam between the trainer and what samples for it (engines that know only token ids: conversations and
agents are driven over them, by rlvr.envs.driven and rlvr.harness): a `Sampler` takes prompts and one seed per
completion wanted, and returns a Rollout (token ids, the log-prob of each sampled token and the support it
was drawn from); weights reach it only through `load_weights`, and `fingerprint` says which it holds.

    protocol.py  Prompt, SampleRequest, the Sampler protocol
    local.py     LocalSampler: rlvr's own engine (rlvr.rollout), the default
    vllm.py      VLLMSampler: the vLLM engine, colocated in this process (Colocated) or as a server
                 (vllm_server.py); engine.py what it asks of either; vllm_worker.py what runs in vLLM's worker
                 (weights in, their fingerprint out)
    build.py     build_sampler: the one generation.backend names; give_weights: push, then check
"""

from rlvr.samplers.local import LocalSampler
from rlvr.samplers.protocol import GroupDone, Job, Prompt, Sampled, Sampler, SampleRequest, weights_fingerprint

__all__ = ["GroupDone", "Job", "LocalSampler", "Prompt", "SampleRequest", "Sampled", "Sampler", "weights_fingerprint"]
